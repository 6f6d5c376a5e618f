"""Checkers for notebook 14: ``prefix_matching_score``, ``composition_score``, ``patched_heads``,
``copying_score``.

Every case has other sizes (B, h, T, D) and other numbers, so no constant fits. In the
prefix-matching cases the sequences have different numbers of repeated queries (so the mean over
all of them differs from the mean of per-sequence means) and tokens that occur three times or
more (so counting only the first, or only the last, earlier occurrence differs from counting all).
"""
from __future__ import annotations

import numpy as np

from ..lessons.circuits import composition_score as _composition
from ..lessons.circuits import copying_score as _copying
from ..lessons.circuits import duplicate_token_score as _duplicate
from ..lessons.circuits import prefix_matching_score as _prefix
from .engine import Case, Exercise, Fresh, Mistake

__all__ = ["prefix_matching_score", "composition_score", "patched_heads", "copying_score",
           "PREFIX_MATCHING_SCORE", "COMPOSITION_SCORE", "PATCHED_HEADS", "COPYING_SCORE"]


# ----------------------------------------------------------------------------- 14.1 prefix matching
def _causal_weights(rng, B, h, T) -> np.ndarray:
    """Random causal attention weights (B, h, T, T): each row sums to 1 over keys s <= t."""
    scores = rng.normal(0, 2, size=(B, h, T, T))
    scores[..., np.triu(np.ones((T, T), dtype=bool), k=1)] = -np.inf
    w = np.exp(scores - scores.max(-1, keepdims=True))
    return w / w.sum(-1, keepdims=True)


def _repeating_tokens(rng, B, T, vocab) -> np.ndarray:
    """(B, T) tokens from a small vocabulary: row b draws from the first vocab - b tokens, so the rows
    repeat a different number of times and some token occurs three times or more."""
    rows = [rng.integers(0, max(2, vocab - b), size=T) for b in range(B)]
    rows[0][[0, T // 2, T - 1]] = rows[0][0]  # one token three times in the first row
    return np.stack(rows)


def _bidirectional_weights(rng, B, h, T) -> np.ndarray:
    """Random attention weights (B, h, T, T) over every key (no causal mask): a key after the query
    has weight too, so counting the query itself as an earlier occurrence (s <= t) shows."""
    w = np.exp(rng.normal(0, 2, size=(B, h, T, T)))
    return w / w.sum(-1, keepdims=True)


def _prefix_cases():
    rng = np.random.default_rng(1414)
    sizes = ((2, 2, 8, 4), (3, 1, 10, 6), (1, 3, 7, 3), (4, 2, 9, 5), (2, 5, 12, 7))  # B, h, T, vocab
    cases = [Case((_causal_weights(rng, B, h, T), _repeating_tokens(rng, B, T, V)),
                  f"B={B}, h={h}, T={T}: tokens from {V} values, some three times or more") for B, h, T, V in sizes]
    B, h, T, V = sizes[-1]
    cases[-1] = Case((_bidirectional_weights(rng, B, h, T), cases[-1].args[1]),
                     f"B={B}, h={h}, T={T}: weights over every key (no causal mask), tokens from {V} values")
    return cases


def _earlier(tokens, k=-1):
    """(B, T, S): key s holds the query t's token and s < t (s <= t for k=0)."""
    T = tokens.shape[1]
    return (tokens[:, :, None] == tokens[:, None, :]) & np.tril(np.ones((T, T), dtype=bool), k=k)


def _with_itself(weights, tokens):
    """The query counted as its own earlier occurrence (s <= t): every query is 'repeated'."""
    e = _earlier(tokens, k=0)  # (B, T, S)
    target = np.zeros_like(e)
    target[..., 1:] = e[..., :-1]
    on = (weights * target[:, None]).sum(-1)  # (B, h, T)
    return on.transpose(1, 0, 2)[:, e.any(-1)].mean(-1)


def _shifted(weights, tokens, shift: int, all_queries: bool = False):
    """The attention on keys s + shift of the earlier occurrences s (shift -1, 0, 1), mean over queries."""
    e = _earlier(tokens)  # (B, T, S)
    target = np.zeros_like(e)
    if shift >= 0:
        target[..., shift:] = e[..., : e.shape[-1] - shift]
    else:
        target[..., :shift] = e[..., -shift:]
    on = (weights * target[:, None]).sum(-1)  # (B, h, T)
    if all_queries:
        return on.mean(axis=(0, 2))
    return on.transpose(1, 0, 2)[:, e.any(-1)].mean(-1)


def _one_occurrence(weights, tokens, last: bool):
    """Only the first (or the last) earlier occurrence of each query's token counts."""
    e = _earlier(tokens)  # (B, T, S)
    pick = np.where(e.any(-1), (e.shape[-1] - 1 - np.argmax(e[..., ::-1], -1)) if last else np.argmax(e, -1), -1)
    one = np.zeros_like(e)
    b, t = np.nonzero(pick >= 0)
    one[b, t, pick[b, t]] = True
    target = np.zeros_like(e)
    target[..., 1:] = one[..., :-1]
    on = (weights * target[:, None]).sum(-1)  # (B, h, T)
    return on.transpose(1, 0, 2)[:, e.any(-1)].mean(-1)


def _mean_of_sequence_means(weights, tokens):
    """The mean over each sequence's repeated queries, then the mean over the sequences."""
    return np.mean([_prefix(weights[b:b + 1], tokens[b:b + 1]) for b in range(len(tokens))
                    if _earlier(tokens[b:b + 1]).any()], axis=0)


def _all_later(weights, tokens):
    """Everything after the first earlier occurrence, up to the query."""
    e = _earlier(tokens)
    after = np.cumsum(e, axis=-1) > 0  # (B, T, S): s' >= an earlier occurrence
    after[..., 1:], after[..., 0] = after[..., :-1].copy(), False  # s' > that occurrence
    on = (weights * after[:, None]).sum(-1)
    return on.transpose(1, 0, 2)[:, e.any(-1)].mean(-1)


_PREFIX_FIX = ("for each earlier occurrence s of the query's token, take the key s + 1 (what came next): "
               "target[..., 1:] = earlier[..., :-1]")
PREFIX_MATCHING_SCORE = Exercise("prefix_matching_score", _prefix, _prefix_cases, (
    Mistake("off by one: the attention on the earlier occurrences themselves (the duplicate-token score)",
            _PREFIX_FIX, _duplicate),
    Mistake("off by one the other way: the keys s - 1 before the earlier occurrences", _PREFIX_FIX,
            lambda w, t: _shifted(w, t, -1)),
    Mistake("averaged over every query, also those whose token never occurred before",
            "average only over the queries with at least one earlier occurrence: "
            "on_target[:, has_repeat].mean()", lambda w, t: _shifted(w, t, 1, all_queries=True)),
    Mistake("summed over every key after the earlier occurrence, not just the one right after it",
            _PREFIX_FIX, _all_later),
    Mistake("only the FIRST earlier occurrence of the token counts", "count every earlier occurrence s "
            "(a token can occur three times): target = earlier shifted by one, for all s", lambda w, t:
            _one_occurrence(w, t, last=False)),
    Mistake("only the LAST earlier occurrence of the token counts", "count every earlier occurrence s "
            "(a token can occur three times): target = earlier shifted by one, for all s", lambda w, t:
            _one_occurrence(w, t, last=True)),
    Mistake("the mean of per-sequence means: a sequence with few repeated queries weighs as much as one with "
            "many", "one mean over every repeated query of the batch: on_target[:, has].mean(-1) with has of "
            "shape (B, T)", _mean_of_sequence_means),
    Mistake("the query counted as its own earlier occurrence (s <= t instead of s < t)",
            "earlier occurrences are the keys s < t with tokens[b, s] == tokens[b, t]: np.tril(..., k=-1)",
            _with_itself),
    Mistake("the weights read as (key, query): weights[b, i, s, t] used for query t and key s (transposed)",
            "weights[b, i, t, s] is query t's weight on key s: the last axis is the key", lambda w, t:
            _shifted(np.swapaxes(w, -1, -2), t, 1)),
    Mistake("the first sequence's tokens used for every sequence of the batch",
            "compare each sequence's own tokens: tokens[b, :, None] == tokens[b, None, :] for every b",
            lambda w, t: _shifted(w, np.broadcast_to(t[:1], t.shape).copy(), 1)),
), axes={"result": ("head",)}, edges=('B',))


def prefix_matching_score(fn) -> bool:
    """Check ``fn(weights (B, h, T, T), tokens (B, T)) -> (h,)``, the prefix-matching (induction) score.

    >>> from mha_course.lessons import circuits
    >>> prefix_matching_score(circuits.prefix_matching_score)
    ✔ prefix_matching_score: all 5 cases match
    True
    """
    return PREFIX_MATCHING_SCORE.check(fn)


# ----------------------------------------------------------------------------- 14.2 composition
def _low_rank(rng, D, r):
    return rng.normal(size=(D, r)) @ rng.normal(size=(r, D)) / D


def _composition_cases():
    rng = np.random.default_rng(2021)
    return [Case((_low_rank(rng, D, r), _low_rank(rng, D, r) * s), f"D={D}, rank {r}")
            for D, r, s in ((8, 4, 1.0), (12, 3, 5.0), (6, 6, 1e-9), (16, 8, 2.0))]  # 1e-9: tiny maps still compose


_NORMS_FIX = "divide by both sizes: np.linalg.norm(W_A @ W_B) / (np.linalg.norm(W_A) * np.linalg.norm(W_B))"
COMPOSITION_SCORE = Exercise("composition_score", _composition, _composition_cases, (
    Mistake("the composition score without the norms: ||W_A W_B||_F grows with the matrices' sizes", _NORMS_FIX,
            lambda a, b: float(np.linalg.norm(a @ b))),
    Mistake("the product in the wrong order: W_B W_A", "W_A writes into the stream and W_B reads it: "
            "||W_A @ W_B||", lambda a, b: _composition(b, a)),
    Mistake("the squared norms (||W_A W_B||^2 / (||W_A||^2 ||W_B||^2))", "take the norms themselves, not "
            "their squares", lambda a, b: _composition(a, b) ** 2),
    Mistake("spectral norms (the largest singular value) instead of Frobenius norms",
            "np.linalg.norm(M) of a matrix is the Frobenius norm; do not pass ord=2",
            lambda a, b: float(np.linalg.norm(a @ b, 2) / (np.linalg.norm(a, 2) * np.linalg.norm(b, 2)))),
    Mistake("spectral norms (ord=2) in the denominator and the Frobenius norm above: one kind of norm throughout",
            "np.linalg.norm(M) of a matrix is the Frobenius norm; do not pass ord=2",
            lambda a, b: float(np.linalg.norm(a @ b) / (np.linalg.norm(a, 2) * np.linalg.norm(b, 2)))),
    Mistake("the sum of the entries' sizes (np.abs(M).sum(), an entrywise L1 norm) instead of the Frobenius norm",
            "the Frobenius norm: np.linalg.norm(M) = np.sqrt((M ** 2).sum())",
            lambda a, b: float(np.abs(a @ b).sum() / (np.abs(a).sum() * np.abs(b).sum()))),
    Mistake("divided by one norm only (||W_A||_F)", _NORMS_FIX,
            lambda a, b: float(np.linalg.norm(a @ b) / np.linalg.norm(a))),
    Mistake("the sum of the norms in the denominator (||W_A|| + ||W_B||) instead of their product", _NORMS_FIX,
            lambda a, b: float(np.linalg.norm(a @ b) / (np.linalg.norm(a) + np.linalg.norm(b)))),
    Mistake("nuclear norms (the sum of the singular values) instead of Frobenius norms",
            "np.linalg.norm(M) of a matrix is the Frobenius norm; do not pass ord='nuc'",
            lambda a, b: float(np.linalg.norm(a @ b, "nuc") / (np.linalg.norm(a, "nuc") * np.linalg.norm(b, "nuc")))),
    Mistake("the elementwise product W_A * W_B instead of the matrix product W_A @ W_B", "compose the maps: "
            "W_A @ W_B (what W_A writes, W_B reads)",
            lambda a, b: float(np.linalg.norm(a * b) / (np.linalg.norm(a) * np.linalg.norm(b)))),
), edges=('n', 'm', 'k'))


def composition_score(fn) -> bool:
    """Check ``fn(W_A (n, m), W_B (m, k)) -> float``: ||W_A W_B||_F / (||W_A||_F ||W_B||_F).

    >>> composition_score(lambda a, b: float(np.linalg.norm(a @ b) / np.linalg.norm(a) / np.linalg.norm(b)))
    ✔ composition_score: all 7 cases match
    True
    """
    return COMPOSITION_SCORE.check(fn)


# ----------------------------------------------------------------------------- 14.3 patching
def _patched_ref(corrupt, clean, head):
    out = np.array(corrupt, dtype=float)  # a copy: the corrupted run is kept as it was
    out[:, head] = clean[:, head]
    return out


def _patch_cases():
    rng = np.random.default_rng(2022)
    return [Case((rng.normal(size=(B, h, T, D)), rng.normal(size=(B, h, T, D)), head), f"B={B}, h={h}, head {head}")
            for B, h, T, D, head in ((2, 2, 3, 4, 1), (1, 4, 5, 3, 2), (3, 1, 4, 2, 0), (2, 4, 6, 5, 3))]  # h = 1 too


def _wrong_axis(corrupt, clean, head):
    out = np.array(corrupt, dtype=float)
    out[:, :, head] = clean[:, :, head]
    return out


_PATCH_FIX = "start from the corrupted run and copy the clean head in: out = corrupt.copy(); out[:, head] = clean[:, head]"
PATCHED_HEADS = Exercise("patched_heads", _patched_ref, _patch_cases, (
    Mistake("patching the wrong direction: the clean run with the corrupted head (that asks what breaks it, "
            "not what restores it)", _PATCH_FIX, lambda corrupt, clean, head: _patched_ref(clean, corrupt, head)),
    Mistake("the head taken on the positions axis (out[:, :, head])", "heads are axis 1 of (B, h, T, D): "
            "out[:, head] = clean[:, head]", _wrong_axis),
    Mistake("every head patched: the clean run returned", _PATCH_FIX,
            lambda corrupt, clean, head: np.array(clean, dtype=float)),
    Mistake("the clean head added to the corrupted one instead of replacing it", _PATCH_FIX,
            lambda corrupt, clean, head: _patched_ref(corrupt, corrupt + clean, head)),
    Mistake("only the patched head's outputs returned (B, T, D): the result is every head's, (B, h, T, D), with "
            "that one taken from the clean run", _PATCH_FIX, lambda corrupt, clean, head: np.array(clean)[:, head]),
    Mistake("the clean head written into every head (out[:] = clean[:, head]): only head `head` is replaced",
            _PATCH_FIX, lambda corrupt, clean, head: np.broadcast_to(np.asarray(clean)[:, head:head + 1],
                                                                     np.shape(corrupt)).astype(float)),
    Mistake("head + 1 patched (the heads counted from 1): heads are numbered 0 .. h-1", _PATCH_FIX,
            lambda corrupt, clean, head: _patched_ref(corrupt, clean, (head + 1) % np.shape(corrupt)[1])),
), axes={"result": ("position", "feature")}, rules=(
    Fresh("return a new array (corrupt.copy() with the head replaced), never clean or corrupt itself: with h = 1 the "
          "values equal clean's, but a caller who changes the result would change clean"),))


def patched_heads(fn) -> bool:
    """Check ``fn(corrupt (B, h, T, D), clean (B, h, T, D), head) -> (B, h, T, D)``: the corrupted run's head
    outputs with head ``head`` taken from the clean run.

    >>> def patched(corrupt, clean, head):
    ...     out = corrupt.copy(); out[:, head] = clean[:, head]; return out
    >>> patched_heads(patched)
    ✔ patched_heads: all 4 cases match
    True
    """
    return PATCHED_HEADS.check(fn)


# ----------------------------------------------------------------------------- 14.4 copying
def _copying_cases():
    rng = np.random.default_rng(2020)
    cases = []
    for n, shift in ((4, 1.0), (6, -0.5), (5, 0.2), (7, 0.0)):
        Q, _ = np.linalg.qr(rng.normal(size=(n, n)))  # (n, n) orthogonal: complex eigenvalues
        M = rng.normal(size=(n, n)) + shift * n * np.eye(n)
        cases.append(Case((M if n % 2 else Q @ np.diag(rng.normal(size=n)) @ Q.T + M,), f"{n} x {n}"))
    return cases


COPYING_SCORE = Exercise("copying_score", _copying, _copying_cases, (
    Mistake("the real parts in the denominator: sum(λ) / sum(|Re λ|)", "divide by the sizes of the "
            "(complex) eigenvalues: np.abs(lam).sum()",
            lambda W: float(np.linalg.eigvals(W).sum().real / np.abs(np.linalg.eigvals(W).real).sum())),
    Mistake("a numerator without signs: always 1 (sum(|λ|) / sum(|λ|), or singular values in both sums), so "
            "every head looks like a copier", "the numerator keeps the signs: sum(λ) (its real part), over "
            "sum(|λ|) of the eigenvalues np.linalg.eigvals(W)", lambda W: 1.0),
    Mistake("singular values in the denominator: sum(λ) / sum(σ) (the nuclear norm), not the eigenvalues' "
            "sizes sum(|λ|)", "divide by the sizes of the eigenvalues: np.abs(np.linalg.eigvals(W)).sum()",
            lambda W: float(np.linalg.eigvals(W).sum().real / np.linalg.svd(W, compute_uv=False).sum())),
    Mistake("np.linalg.eigvalsh, which assumes a symmetric W (it reads only the lower triangle)",
            "W is not symmetric: np.linalg.eigvals(W)",
            lambda W: float(np.linalg.eigvalsh(W).sum() / np.abs(np.linalg.eigvalsh(W)).sum())),
    Mistake("the trace over the Frobenius norm", "sum(λ) / sum(|λ|) over the eigenvalues λ",
            lambda W: float(np.trace(W) / np.linalg.norm(W))),
    Mistake("the size of the sum |sum(λ)| in the numerator: the sign is lost, and a head that writes the opposite "
            "token (sum(λ) < 0) looks like a copier", "keep the sign: np.linalg.eigvals(W).sum().real / np.abs(lam).sum()",
            lambda W: float(abs(np.linalg.eigvals(W).sum()) / np.abs(np.linalg.eigvals(W)).sum())),
    Mistake("the Euclidean length of the eigenvalues, sqrt(sum |λ|²), in the denominator instead of the sum of "
            "their sizes sum(|λ|)", "divide by np.abs(lam).sum()",
            lambda W: float(np.linalg.eigvals(W).sum().real / np.sqrt((np.abs(np.linalg.eigvals(W)) ** 2).sum()))),
    Mistake("the diagonal entries used as the eigenvalues: trace(W) / sum(|W_ii|)", "the eigenvalues of a "
            "matrix are not its diagonal: lam = np.linalg.eigvals(W)", lambda W: float(np.trace(W) / np.abs(np.diag(W)).sum())),
), edges=('n',))


def copying_score(fn) -> bool:
    """Check ``fn(W (n, n)) -> float``: sum(λ) / sum(|λ|) over W's eigenvalues.

    >>> copying_score(lambda W: float(np.linalg.eigvals(W).sum().real / np.abs(np.linalg.eigvals(W)).sum()))
    ✔ copying_score: all 5 cases match
    True
    """
    return COPYING_SCORE.check(fn)
