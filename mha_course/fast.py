"""The fast sibling of ``attention.scaled_dot_product_attention``: the same numbers, sooner.

``scaled_dot_product_attention`` is the formula as a learner writes it. ``fast_attention`` computes
the same weights and output (tested equal to rounding, and tested to be the path the core takes):

- long sequences go block by block of query rows (see ``_blocks``), so each block of scores
  stays in cache between the matmul that writes it, the softmax and the matmul that reads it;
- the softmax works in place, and its row sums come from the second matmul, over ``[V | 1]``;
- the row max is subtracted only when exp could overflow (see ``_exp_is_safe``).

``multi_head_attention``, ``grouped_query_attention`` and ``mla_attention`` run on ``attend``
(``fast_attention`` without its argument checks: they check their inputs once, at the top).
"""
from __future__ import annotations

import math

import numpy as np

from .attention import check_attention_inputs

__all__ = ["fast_attention", "attend"]


# Bytes of scores handled at a time: a block small enough to stay in cache between the matmul
# that writes it, the softmax passes over it and the matmul that reads it back.
_BLOCK_BYTES = 16 << 20


def fast_attention(Q, K, V, mask=None):
    """Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v) -> out (..., T, d_v), weights (..., T, S).

    The same result as ``scaled_dot_product_attention`` (to rounding), computed in blocks,
    in place, with the row sums from the second matmul and the row-max pass skipped when a
    Cauchy-Schwarz bound proves that exp cannot overflow.

    >>> from mha_course.attention import scaled_dot_product_attention
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 2))
    >>> out, w = fast_attention(Q, K, V)
    >>> bool(np.allclose(out, scaled_dot_product_attention(Q, K, V)[0]))
    True
    """
    Q, K, V, mask = check_attention_inputs(Q, K, V, mask)
    return attend(Q, K, V, mask)


def _blocks(batch: tuple, T: int, S: int, itemsize: int) -> list:
    """(batch index, query rows) pairs covering the (*batch, T, S) scores.

    Small problems are one block (every batch item at once); large ones go one batch item
    at a time, in slices of query rows of about _BLOCK_BYTES of scores each.
    """
    if math.prod(batch) * T * S * itemsize <= _BLOCK_BYTES:
        return [((), slice(0, T))]
    rows = max(1, _BLOCK_BYTES // (S * itemsize))
    return [(b, slice(t, t + rows)) for b in np.ndindex(*batch) for t in range(0, T, rows)]


def attend(Q, K, V, mask=None, scores=None):
    """Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v) -> out (..., T, d_v), weights (..., T, S), unchecked.

    ``fast_attention`` without its argument checks, for callers that checked once already
    (``multi_head_attention``, ``grouped_query_attention``, ``mla_attention``).

    Q, K, V are float arrays of one dtype with broadcastable batch axes; ``mask`` a boolean
    array broadcastable to (..., T, S) or None. ``scores``, when given, is a (..., T, S)
    array that receives the masked scores Q K^T / sqrt(d_k) (-inf where blocked).
    """
    batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    (T, d_k), (S, d_v) = Q.shape[-2:], V.shape[-2:]
    # scaled once, as a contiguous copy (BLAS is slow on the strided per-head views of split_heads);
    # the scale is a scalar of Q's dtype: no float64 upcast
    Qs = np.multiply(Q, Q.dtype.type(1.0 / math.sqrt(d_k)), order="C")
    shift = not _exp_is_safe(Qs, K)
    Qs = np.broadcast_to(Qs, (*batch, T, d_k))  # broadcast views: they copy nothing
    Kt = np.broadcast_to(np.swapaxes(K, -1, -2), (*batch, d_k, S))  # (..., d_k, S)
    V1 = np.concatenate([np.broadcast_to(V, (*batch, S, d_v)), np.ones((*batch, S, 1), V.dtype)],
                        axis=-1)  # (..., S, d_v + 1): [V | 1]
    blocked = None if mask is None else np.broadcast_to(~np.atleast_2d(mask), (*batch, T, S))
    weights = np.empty((*batch, T, S), dtype=Q.dtype)
    out = np.empty((*batch, T, d_v), dtype=Q.dtype)
    for b, rows in _blocks(batch, T, S, Q.dtype.itemsize):
        _attend_block(Qs[b][..., rows, :], Kt[b], V1[b], weights[b][..., rows, :], out[b][..., rows, :],
                      None if blocked is None else blocked[b][..., rows, :],
                      None if scores is None else scores[b][..., rows, :], shift)
    return out, weights


def _exp_is_safe(Qs: np.ndarray, K: np.ndarray) -> bool:
    """True when no scaled score can leave [-L, L], L = half of exp's range (44 in float32).

    By Cauchy-Schwarz |q . k| <= |q| |k|. Within that range exp neither overflows nor
    underflows, so subtracting the row max (the usual guard) would not change the softmax.
    """
    limit = math.log(np.finfo(Qs.dtype).max) / 2
    squared_norms = [np.einsum("...i,...i->...", a, a).max() for a in (Qs, K)]  # max |q|^2, |k|^2
    return bool(math.sqrt(squared_norms[0] * squared_norms[1]) <= limit)  # False for inf or NaN too


def _subtract_row_max(w: np.ndarray) -> None:
    """w (..., r, S) -= its row maxima, in place; all-masked rows (max -inf) are left as they are."""
    m = w.max(axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0  # all-masked rows: keep exp(-inf - 0) = 0, avoid inf - inf
    w -= m


def _attend_block(q, kt, v1, w, out, blocked, scores, shift: bool) -> None:
    """One block, written into the views ``w`` (weights), ``out`` and ``scores`` (if given).

    q (..., r, d_k) already scaled, kt (..., d_k, S), v1 (..., S, d_v + 1) = [V | 1];
    blocked (..., r, S) is True where attending is forbidden; ``shift``: subtract row maxima.
    """
    np.matmul(q, kt, out=w)  # (..., r, d_k) x (..., d_k, S) -> (..., r, S)
    if blocked is not None:
        np.copyto(w, -np.inf, where=blocked)
    if scores is not None:
        scores[...] = w  # the scores, kept before the softmax overwrites them
    if shift:
        _subtract_row_max(w)
    np.exp(w, out=w)  # unnormalised weights
    acc = np.matmul(w, v1)  # (..., r, S) x (..., S, d_v + 1) -> (..., r, d_v + 1)
    total = acc[..., -1:]  # (..., r, 1): the row sums
    total[total == 0] = 1  # all-masked rows stay all-zero
    np.reciprocal(total, out=total)
    w *= total
    np.multiply(acc[..., :-1], total, out=out)
