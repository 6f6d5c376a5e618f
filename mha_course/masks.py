"""Masks in depth: other libraries' conventions, the mask gallery and the leak probe (numpy only).

Our convention (the whole course, and ``torch.nn.functional.scaled_dot_product_attention``):
a boolean mask, **True = may attend**. Two others are common:

- ``torch.nn.MultiheadAttention``'s ``attn_mask`` and ``key_padding_mask``: boolean,
  **True = blocked** (the opposite polarity!);
- additive float masks: 0 where attending is allowed, -inf where it is not, added to the
  scores before the softmax.

``mask_as`` converts ours to each. A mask with the wrong polarity raises no error: the
model just sees what it should not (the future, the padding). ``leak_probe`` finds that
out from the outside, for any attention function.

``causal_mask`` is the package's one builder of causal masks: with an ``offset`` (queries after
cached tokens: ``gqa.cached_causal_mask``) and a ``window`` (``efficient.sliding_window_mask``);
``attention.causal_mask`` and ``prefix_lm_mask`` are it too.

Shapes: ``T`` queries, ``S`` keys, ``B`` batch, ``d`` features.

Taught in 06_masks_and_cross_attention.ipynb.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

from . import _validate

__all__ = ["causal_mask", "MASK_CONVENTIONS", "mask_as", "prefix_lm_mask", "document_mask", "gallery", "fully_masked_rows",
           "LeakReport", "leak_probe"]

def causal_mask(T: int, offset: int = 0, window=None) -> np.ndarray:
    """T [, offset, window] -> (T, offset + T) bool: query t, at position offset + t, may attend key s when
    offset + t - window < s <= offset + t (``window=None``: every earlier key).

    ``offset`` counts the keys before the queries (a KV cache); ``window`` keeps each query's last
    ``window`` keys, itself included. ``causal_mask(T)`` is the square mask, True on and below the diagonal.

    >>> causal_mask(3).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    >>> causal_mask(2, offset=2, window=2).astype(int)
    array([[0, 1, 1, 0],
           [0, 0, 1, 1]])
    """
    T = _validate.positive_int(T, "T")
    if isinstance(offset, (bool, np.bool_)) or not isinstance(offset, (int, np.integer)) or offset < 0:
        raise ValueError(f"offset={offset!r} must be a whole number >= 0 (the tokens already cached)")
    _validate.allocation(2 * T * (int(offset) + T), f"a causal mask of shape (T, offset + T) = ({T}, {offset + T})",
                         "ask for fewer queries T (or a smaller offset): attention over that many tokens needs "
                         "a kernel that never forms the mask")
    q = offset + np.arange(T)[:, None]  # (T, 1): the queries' positions
    s = np.arange(offset + T)[None, :]  # (1, S): the keys' positions
    allowed = s <= q  # (T, S)
    if window is not None:
        allowed &= s > q - _validate.positive_int(window, "window")
    return allowed


MASK_CONVENTIONS = {
    "keep": "bool, True = may attend (ours, F.scaled_dot_product_attention)",
    "block": "bool, True = blocked (nn.MultiheadAttention attn_mask / key_padding_mask)",
    "additive": "float, 0 = may attend, -inf = blocked (added to the scores)",
}


def _keep_mask(mask, name: str = "mask") -> np.ndarray:
    """``mask`` checked to be boolean (our keep-mask, True = may attend), as an array."""
    arr = np.asarray(mask)
    return _validate.bool_mask(arr, arr.shape, f"(the {name}'s own shape)")


def mask_as(mask, convention: str) -> np.ndarray:
    """mask (...) bool, True = may attend -> the same mask (...) in ``convention``.

    ``"keep"``: a bool copy (True = may attend); ``"block"``: bool, True = blocked, for
    ``nn.MultiheadAttention``; ``"additive"``: float64, 0 / -inf, to add to the scores.

    >>> m = causal_mask(3)
    >>> mask_as(m, "block").astype(int)
    array([[0, 1, 1],
           [0, 0, 1],
           [0, 0, 0]])
    >>> mask_as(m, "additive")
    array([[  0., -inf, -inf],
           [  0.,   0., -inf],
           [  0.,   0.,   0.]])
    """
    if convention not in MASK_CONVENTIONS:
        valid = "; ".join(f"{k!r}: {v}" for k, v in MASK_CONVENTIONS.items())
        raise ValueError(f"convention={convention!r} is not a mask convention; valid conventions: {valid}")
    keep = _keep_mask(mask)
    if convention == "keep":
        return keep.copy()
    if convention == "block":
        return ~keep
    return np.where(keep, 0.0, -np.inf)


def prefix_lm_mask(T: int, prefix: int) -> np.ndarray:
    """T, prefix -> (T, T) bool: every query may attend the first ``prefix`` keys, and the rest causally.

    The prefix (a prompt, an instruction, an image's tokens) is read bidirectionally; the
    continuation is generated left to right. ``prefix=0`` is the causal mask, ``prefix=T``
    lets every token see every token.

    >>> prefix_lm_mask(4, 2).astype(int)
    array([[1, 1, 0, 0],
           [1, 1, 0, 0],
           [1, 1, 1, 0],
           [1, 1, 1, 1]])
    """
    T = _validate.positive_int(T, "T")
    if isinstance(prefix, (bool, np.bool_)) or not isinstance(prefix, (int, np.integer)) \
            or not 0 <= prefix <= T:
        raise ValueError(f"prefix={prefix!r} must be a whole number in 0..T=0..{T}: "
                         "how many leading tokens everyone may see")
    return causal_mask(T) | (np.arange(T) < prefix)  # (T, T) | (T,) over the keys


def document_mask(doc_ids, causal: bool = False) -> np.ndarray:
    """doc_ids (T,) or (B, T) ints -> (T, T) or (B, 1, T, T) bool: True where query and key share a document.

    For packed sequences: several documents concatenated into one row of T tokens, each
    token labelled with its document's id. The mask is block-diagonal, so no document
    attends another; ``causal=True`` also blocks the future inside each document.

    >>> document_mask([0, 0, 1, 1, 1]).astype(int)
    array([[1, 1, 0, 0, 0],
           [1, 1, 0, 0, 0],
           [0, 0, 1, 1, 1],
           [0, 0, 1, 1, 1],
           [0, 0, 1, 1, 1]])
    """
    ids = np.asarray(doc_ids)
    if ids.ndim not in (1, 2) or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"doc_ids must be a non-empty (T,) or (B, T) array of integer document ids, "
                         f"got {ids.tolist()!r} (dtype {ids.dtype}); e.g. [0, 0, 0, 1, 1] for two documents")
    if ids.min() < 0:  # -1 often marks padding elsewhere: here it would be one more document, seen by its peers
        raise ValueError(f"doc_ids holds {ids.min()}: document ids are whole numbers >= 0 (a -1 for padding would "
                         "make the padding one more document); give padding tokens an id of their own and block "
                         "them with padding_mask")
    _validate.allocation(2 * ids.size * ids.shape[-1], f"a document mask for doc_ids of shape {ids.shape}",
                         "pack fewer tokens into one row of doc_ids")
    same = ids[..., :, None] == ids[..., None, :]  # (..., T, 1) == (..., 1, T) -> (..., T, T)
    if _validate.flag(causal, "causal"):
        same &= causal_mask(ids.shape[-1])
    return same if ids.ndim == 1 else same[:, None]  # (B, T, T) -> (B, 1, T, T)


def gallery(T: int) -> dict:
    """T -> {name: mask (T, T) bool}: the five masks of the gallery in 06, for one sequence of T tokens.

    Causal; key padding (the last T // 3 tokens are padding); left padding with causal (the
    first T // 3 tokens are padding, so their rows see nothing); prefix-LM (prefix T // 2);
    three packed documents, causal inside each.

    >>> {name: int(m.sum()) for name, m in gallery(4).items()}
    {'causal': 10, 'key padding': 12, 'left padding & causal': 6, 'prefix-LM': 11, 'documents': 5}
    """
    T = _validate.positive_int(T, "T")
    pad = T // 3
    left_padded = np.arange(T) >= pad  # (T,) over the keys: the first `pad` keys are padding
    return {"causal": causal_mask(T),
            "key padding": np.broadcast_to(np.arange(T) < T - pad, (T, T)).copy(),
            "left padding & causal": causal_mask(T) & left_padded,
            "prefix-LM": prefix_lm_mask(T, T // 2),
            "documents": document_mask(np.arange(T) * 3 // T, causal=True)}


def fully_masked_rows(mask) -> np.ndarray:
    """mask (..., T, S) bool -> (..., T) bool: True for queries that may attend no key at all.

    Legal in our attention (such a query gets all-zero weights and a zero output); in
    PyTorch it can give NaN. Such rows belong to tokens whose output nobody reads (padding).

    >>> fully_masked_rows(np.array([[True, False], [False, False]])).tolist()
    [False, True]
    """
    keep = _keep_mask(mask)
    if keep.ndim < 2:
        raise ValueError(f"mask must be at least 2-D (..., T, S), got shape {keep.shape}")
    return ~keep.any(axis=-1)


class LeakReport(NamedTuple):
    """What ``leak_probe`` found: ``moved`` (T, T) bool, ``allowed`` (T, T) bool, ``leaks`` [(t, s), ...].

    ``moved[t, s]``: output t changed when input token s was replaced. ``allowed[t, s]``:
    output t may depend on token s (the mask, plus t's own token: its query). ``leaks``: the
    pairs (t, s) that moved but were not allowed. ``ok`` is True when there are none.
    """
    moved: np.ndarray
    allowed: np.ndarray
    leaks: list

    @property
    def ok(self) -> bool:
        return not self.leaks

    def describe(self, most: int = 5) -> str:
        """One line per leak (at most ``most``), or a line saying there is none."""
        if self.ok:
            return f"no leak: every output depends only on tokens it may attend ({self.moved.sum()} pairs moved)"
        lines = [f"{len(self.leaks)} leak(s): outputs depend on tokens they must not see"]
        lines += [f"  output {t} moved when token {s} changed" for t, s in self.leaks[:most]]
        return "\n".join(lines + ([f"  ... and {len(self.leaks) - most} more"] if len(self.leaks) > most else []))


def leak_probe(attn_fn: Callable, T: int, *, rng: np.random.Generator, d: int = 8, mask=None,
               batch=None, tol: float = 1e-6, call: Callable | None = None) -> LeakReport:
    """attn_fn(x (T, d) or (B, T, d)) -> out (..., T, any), T -> LeakReport with moved (T, T).

    Runs ``attn_fn`` on random tokens, then again with token s replaced by a new random one,
    for every s, and records which outputs moved (more than ``tol`` times the output's scale).
    ``mask`` (T, T) bool, True = may attend, default causal: the dependencies that are allowed.
    A function that returns a tuple (out, weights) is fine: the first item is the output.
    ``batch=None`` calls it on x (T, d); ``batch=B`` on x (B, T, d), token s replaced in every row.
    ``call(attn_fn, x)`` runs each call (default ``attn_fn(x)``); a checker passes one that
    limits the time of a learner's function.

    >>> rng = np.random.default_rng(0)
    >>> from mha_course.attention import scaled_dot_product_attention as sdpa
    >>> leak_probe(lambda x: sdpa(x, x, x, causal_mask(len(x))), 4, rng=rng).ok
    True
    >>> leak_probe(lambda x: sdpa(x, x, x), 4, rng=rng).leaks  # no mask: the future leaks
    [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    """
    T, d = _validate.positive_int(T, "T"), _validate.positive_int(d, "d")
    rng = _validate.generator(rng, "rng")
    if isinstance(tol, (bool, np.bool_)) or not isinstance(tol, (int, float, np.number)) or not 0 <= tol < np.inf:
        raise ValueError(f"tol={tol!r} must be a finite number >= 0: how far (relative to the output's scale) an "
                         "output may move and still count as unmoved, e.g. tol=1e-6")
    _validate.allocation(8 * T * (T + d * (1 if batch is None else _validate.positive_int(batch, "batch"))),
                         f"leak_probe's tokens and (T, T) table for T={T}, d={d}", "probe fewer tokens T")
    allowed = _allowed(mask, T)
    shape = (T, d) if batch is None else (_validate.positive_int(batch, "batch"), T, d)
    x = rng.normal(size=shape)
    run = attn_fn if call is None else (lambda x_: call(attn_fn, x_))
    base = _run(run, x, T)
    scale = tol * (1.0 + float(np.nanmax(np.abs(base), initial=0.0)))
    moved = np.zeros((T, T), dtype=bool)
    for s in range(T):
        x2 = x.copy()
        x2[..., s, :] = rng.normal(size=x2[..., s, :].shape)  # a different token at position s
        changed = ~np.isclose(_run(run, x2, T), base, rtol=0.0, atol=scale, equal_nan=True)  # (..., T, d_out)
        moved[:, s] = np.moveaxis(changed, -2, 0).reshape(T, -1).any(axis=1)
    leaks = [(int(t), int(s)) for t, s in zip(*np.nonzero(moved & ~allowed))]
    return LeakReport(moved, allowed, leaks)


def _allowed(mask, T: int) -> np.ndarray:
    """The (T, T) dependencies leak_probe accepts: the keep-mask (default causal) or the diagonal."""
    if mask is None:
        return causal_mask(T)
    keep = _keep_mask(mask)
    try:
        fits = keep.ndim >= 2 and math.prod(keep.shape[:-2]) == 1 and \
            np.broadcast_shapes(keep.shape[-2:], (T, T)) == (T, T)
    except ValueError:  # shapes that do not broadcast
        fits = False
    if not fits:
        raise ValueError(f"mask of shape {keep.shape} does not describe one (T, T) = ({T}, {T}) pattern; "
                         "give a (T, T) mask, or one sequence's padding_mask([length], T)")
    return np.broadcast_to(keep.reshape(keep.shape[-2:]), (T, T)) | np.eye(T, dtype=bool)


def _run(attn_fn: Callable, x: np.ndarray, T: int) -> np.ndarray:
    """attn_fn(x) as a float array (..., T, d_out), first item if it returns a tuple."""
    out = attn_fn(x.copy())
    out = np.asarray(out[0] if isinstance(out, tuple) else out, dtype=np.float64)
    if out.ndim < 2 or out.shape[-2] != T:
        raise ValueError(f"attn_fn returned shape {out.shape}; leak_probe needs (..., T={T}, d_out): "
                         "one output row per token, positions on axis -2")
    if not np.isfinite(out).all():  # a NaN output cannot say whether it moved
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(out))[0])
        raise ValueError(f"attn_fn returned NaN or inf (first at index {where}) on finite random tokens; "
                         "leak_probe compares finite outputs: fix attn_fn so that it returns finite values")
    return out
