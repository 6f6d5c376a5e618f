"""Softmax, masks and scaled dot-product attention (floor 0, numpy only).

Shapes: ``T`` queries, ``S`` keys, ``d_k`` query/key size, ``d_v`` value size,
``...`` any batch axes (for example ``(B, h)``).

Mask convention of the whole course: a boolean array, **True = may attend**
(as in ``torch.nn.functional.scaled_dot_product_attention``; the opposite of
``torch.nn.MultiheadAttention``'s ``attn_mask``, where True = blocked).

Taught in 02_scaled_dot_product.ipynb.
"""
from __future__ import annotations

import math

import numpy as np

from . import _validate

__all__ = ["softmax", "scaled_dot_product_attention", "causal_mask", "padding_mask"]


def softmax(x, axis: int = -1) -> np.ndarray:
    """x (...) -> same shape; entries along ``axis`` are >= 0 and sum to 1.

    Numerically stable: the row maximum is subtracted before ``exp``, so logits of
    1e4 do not overflow. A row that is all ``-inf`` (every key masked) becomes all zeros
    instead of NaN. float32 stays float32; integers are promoted to float64.

    >>> softmax(np.array([1000.0, 1000.0, -np.inf]))
    array([0.5, 0.5, 0. ])
    """
    arr = _validate.float_array(x, "x")
    if arr.ndim == 0:
        raise ValueError("softmax needs at least a 1-D array, got a scalar; wrap it as [x]")
    if not -arr.ndim <= axis < arr.ndim:
        raise ValueError(f"axis={axis} is out of range for an array of shape {arr.shape}; "
                         f"use an axis in {-arr.ndim}..{arr.ndim - 1}")
    if arr.shape[axis] == 0:
        raise ValueError(f"softmax over an empty axis: x has shape {arr.shape} and axis={axis} has "
                         "length 0; give it at least one logit per row")
    return _softmax_inplace(arr.copy(), axis)


def _softmax_inplace(z: np.ndarray, axis: int = -1) -> np.ndarray:
    """Stable softmax computed in the buffer ``z`` itself (overwritten and returned)."""
    m = z.max(axis=axis, keepdims=True)
    m[~np.isfinite(m)] = 0  # all-masked rows: keep exp(-inf - 0) = 0, avoid inf - inf
    z -= m
    np.exp(z, out=z)
    total = z.sum(axis=axis, keepdims=True)
    total[total == 0] = 1  # all-masked rows stay all-zero
    z *= np.reciprocal(total, out=total)  # one division per row, then a cheap multiply
    return z


# Bytes of scores handled at a time: a block small enough to stay in cache between the matmul
# that writes it, the softmax passes over it and the matmul that reads it back.
_BLOCK_BYTES = 16 << 20


def _blocks(batch: tuple, T: int, S: int, itemsize: int) -> list:
    """(batch index, query rows) pairs covering the (*batch, T, S) scores.

    Small problems are one block (every batch item at once); large ones go one batch item
    at a time, in slices of query rows of about _BLOCK_BYTES of scores each.
    """
    if math.prod(batch) * T * S * itemsize <= _BLOCK_BYTES:
        return [((), slice(0, T))]
    rows = max(1, _BLOCK_BYTES // (S * itemsize))
    return [(b, slice(t, t + rows)) for b in np.ndindex(*batch) for t in range(0, T, rows)]


def _attend(Q, K, V, mask, record=None):
    """Shared core of attention: returns out (..., T, d_v) and weights (..., T, S).

    The maths is ``weights = softmax(Q K^T / sqrt(d_k))`` (masked entries -inf), ``out =
    weights V``. Three things make it fast without changing the result:

    - long sequences go block by block (see ``_blocks``), so each block of scores is still
      in cache for the softmax and the second matmul; the weights are written once, in place;
    - the row sums of the softmax come out of the second matmul, from a column of ones
      appended to V: ``exp(scores) [V | 1] = [unnormalised out | row sums]``;
    - the row max is subtracted only when exp could overflow (see ``_exp_is_safe``).

    ``record``, when given, is called as ``record(name, array)`` for ``scores`` (before the
    softmax) and ``weights``.
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
    scores = None if record is None else np.empty_like(weights)
    for b, rows in _blocks(batch, T, S, Q.dtype.itemsize):
        _attend_block(Qs[b][..., rows, :], Kt[b], V1[b], weights[b][..., rows, :], out[b][..., rows, :],
                      None if blocked is None else blocked[b][..., rows, :],
                      None if scores is None else scores[b][..., rows, :], shift)
    if record is not None:
        record("scores", scores)
        record("weights", weights)
    return out, weights


def _exp_is_safe(Qs: np.ndarray, K: np.ndarray) -> bool:
    """True when no scaled score can leave [-L, L], L = half of exp's range (44 in float32).

    By Cauchy-Schwarz |q . k| <= |q| |k|. Within that range exp neither overflows nor
    underflows, so subtracting the row max (the usual guard) would not change the softmax.
    """
    limit = math.log(np.finfo(Qs.dtype).max) / 2
    squared_norms = [np.einsum("...i,...i->...", a, a).max() for a in (Qs, K)]  # max |q|^2, |k|^2
    return bool(math.sqrt(squared_norms[0] * squared_norms[1]) <= limit)  # False for inf or NaN too


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
        m = w.max(axis=-1, keepdims=True)
        m[~np.isfinite(m)] = 0  # all-masked rows: keep exp(-inf - 0) = 0, avoid inf - inf
        w -= m
    np.exp(w, out=w)  # unnormalised weights
    acc = np.matmul(w, v1)  # (..., r, S) x (..., S, d_v + 1) -> (..., r, d_v + 1)
    total = acc[..., -1:]  # (..., r, 1): the row sums
    total[total == 0] = 1  # all-masked rows stay all-zero
    np.reciprocal(total, out=total)
    w *= total
    np.multiply(acc[..., :-1], total, out=out)


def _check_qkv(Q, K, V):
    Q, K, V = (_validate.float_array(a, n) for a, n in ((Q, "Q"), (K, "K"), (V, "V")))
    shapes = f"Q {Q.shape}, K {K.shape}, V {V.shape}"
    if min(Q.ndim, K.ndim, V.ndim) < 2:
        raise ValueError(f"Q, K and V need at least 2 dims (..., seq, features); got {shapes}")
    for a, n in ((Q, "Q"), (K, "K"), (V, "V")):
        _validate.nonempty(a, n, "(..., seq, features)")
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(f"Q and K must share their last dim d_k; got {shapes}; "
                         "project queries and keys to the same size")
    if K.shape[-2] != V.shape[-2]:
        raise ValueError(f"K and V must have the same number of keys S (axis -2); got {shapes}; "
                         "every key needs exactly one value")
    try:
        batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    except ValueError:
        raise ValueError(f"the batch axes of Q, K and V do not broadcast; got {shapes}") from None
    dtype = np.result_type(Q, K, V)
    return Q.astype(dtype, copy=False), K.astype(dtype, copy=False), V.astype(dtype, copy=False), batch


def scaled_dot_product_attention(Q, K, V, mask=None):
    """Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v) -> out (..., T, d_v), weights (..., T, S).

    weights = softmax(Q K^T / sqrt(d_k)) over the keys, out = weights V.
    ``mask`` is boolean, **True = may attend**, broadcastable to (..., T, S). A query
    whose keys are all masked gets all-zero weights and a zero output (no NaN).

    >>> rng = np.random.default_rng(0)
    >>> out, w = scaled_dot_product_attention(rng.normal(size=(3, 4)), rng.normal(size=(5, 4)),
    ...                                       rng.normal(size=(5, 2)))
    >>> out.shape, w.shape, bool(np.allclose(w.sum(-1), 1))
    ((3, 2), (3, 5), True)
    """
    Q, K, V, batch = _check_qkv(Q, K, V)
    if mask is not None:
        target = (*batch, Q.shape[-2], K.shape[-2])
        mask = _validate.bool_mask(mask, target, "(..., T, S)")
    return _attend(Q, K, V, mask)


def causal_mask(T: int) -> np.ndarray:
    """T -> (T, T) bool, True on and below the diagonal (query t may attend keys 0..t).

    >>> causal_mask(3).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    """
    T = _validate.positive_int(T, "T")
    return np.tril(np.ones((T, T), dtype=bool))


def padding_mask(lengths, S: int) -> np.ndarray:
    """lengths (B,) ints in 0..S, S -> (B, 1, 1, S) bool, True for real (non-padding) keys.

    Broadcasts against scores of shape (B, h, T, S). True = may attend.

    >>> padding_mask([2, 3], 3)[:, 0, 0].astype(int)
    array([[1, 1, 0],
           [1, 1, 1]])
    """
    S = _validate.positive_int(S, "S")
    arr = np.asarray(lengths)
    if arr.ndim != 1 or arr.size == 0 or not (np.issubdtype(arr.dtype, np.integer)
                                              or (arr.dtype.kind == "f" and np.all(arr == np.round(arr)))):
        raise ValueError(f"lengths must be a non-empty 1-D list of whole numbers, one per sequence; "
                         f"got {np.asarray(lengths).tolist()!r}")
    bad = arr[(arr < 0) | (arr > S)]
    if bad.size:
        raise ValueError(f"lengths {arr.tolist()} must lie in 0..S=0..{S}; {bad.tolist()} do not. "
                         "A length counts the real tokens of a sequence padded to S")
    return (np.arange(S) < arr[:, None].astype(int))[:, None, None, :]  # (B, 1, 1, S)
