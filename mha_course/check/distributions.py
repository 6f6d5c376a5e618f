"""Distributions a learner returns that are right but for their normaliser or the keys they cover.

Attention weights (and a softmax) are distributions over their last axis. Two slips leave each line
a distribution of the right shape: divided by another number than its sum (:func:`normaliser_forms`:
exp(x - max) divided by its maximum, or by 1 + the sum), and taken over fewer keys than the exercise
allows (:func:`restricted_forms`: a causal mask where none belongs, each query's own key masked).
Both are recognised from the expected output alone: renormalising the learner's lines, or the
expected ones over fewer keys, gives the other. ``pairs`` is [(the learner's array, the expected
one)] over the cases; each function returns [(vocabulary class, its slots)].
"""
from __future__ import annotations

from .compare import close
from .sandbox import np, protect

__all__ = ["normalised_axis", "normaliser_forms", "restricted_forms"]


def normalised_axis(w):
    """The axis along which ``w`` is a distribution (non-negative, each line summing to 1, or 0 for a
    line that sees nothing), counted from the end; None if none is."""
    if w.dtype.kind != "f" or w.ndim == 0 or not np.all(np.isfinite(w)) or np.any(w < 0):
        return None
    for ax in range(-1, -w.ndim - 1, -1):
        sums = w.sum(axis=ax)
        if np.all(np.isclose(sums, 1.0) | np.isclose(sums, 0.0)) and np.any(np.isclose(sums, 1.0)):
            return ax
    return None


def normaliser_forms(pairs, labels) -> list:
    """Distributions right up to a factor per line (normalised, the learner's lines are the expected
    ones): the exponentials are right and the normaliser is not. Divided by the line's maximum (or
    not at all: exp(x - max) has maximum 1) is said as such."""
    axes = [normalised_axis(w) for _, w in pairs]
    if not pairs or None in axes or all(close(g, w) for g, w in pairs):
        return []
    by_max = True
    for (g, w), ax in zip(pairs, axes):
        seen = np.broadcast_to(w.sum(axis=ax, keepdims=True) > 0, w.shape)  # a line that sees nothing is left out
        if g.dtype.kind != "f" or not np.all(np.isfinite(g[seen])) or np.any(g[seen] < 0):
            return []
        g = np.where(seen, g, 0.0)
        total = g.sum(axis=ax, keepdims=True)
        if not close(np.divide(g, total, out=np.zeros_like(g), where=total > 0), w):
            return []
        top = w.max(axis=ax, keepdims=True)
        by_max = by_max and close(g, np.divide(w, top, out=np.zeros_like(w), where=top > 0))
    ratios = np.concatenate([(g.sum(axis=ax) / np.where(w.sum(axis=ax) > 0, w.sum(axis=ax), np.nan)).ravel()
                             for (g, w), ax in zip(pairs, axes)])
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size and np.allclose(ratios, ratios[0]):
        return []  # one factor for every line: a scale (1.5 times), said by the factor's own form
    label = labels.get(axes[0], "last axis") if len(set(axes)) == 1 else "normalised axis"
    return [("max-normaliser" if by_max else "wrong-normaliser", {"axis": label})]


_RESTRICTIONS = (  # (what the learner's mask took away, which keys each query keeps)
    ("the keys after each query (a causal mask)", lambda T, S: np.tri(T, S, S - T, dtype=bool)),
    ("the keys before each query (a causal mask the wrong way round, np.triu)",
     lambda T, S: ~np.tri(T, S, S - T - 1, dtype=bool)),
    ("each query's own key (the diagonal)", lambda T, S: ~np.eye(T, S, S - T, dtype=bool)),
    ("each query's own key and the keys after it (a causal mask with k=-1)",
     lambda T, S: np.tri(T, S, S - T - 1, dtype=bool)),
)


def restricted_forms(pairs) -> list:
    """Attention weights that are the expected ones restricted to fewer keys and renormalised: a
    mask the exercise does not have, or one stricter than its own (each query's own key masked too)."""
    if not pairs or any(normalised_axis(w) != -1 or w.ndim < 2 or g.shape != w.shape for g, w in pairs):
        return []
    for said, keep in _RESTRICTIONS:
        fits, changed = True, False
        for g, w in pairs:
            kept = np.where(keep(*w.shape[-2:]), w, 0.0)
            total = kept.sum(-1, keepdims=True)
            want = np.divide(kept, total, out=np.zeros_like(kept), where=total > 0)
            fits = fits and close(g, want)
            changed = changed or not close(want, w)
        if fits and changed:
            return [("restricted-keys", {"which": said})]
    return []


protect(globals())
