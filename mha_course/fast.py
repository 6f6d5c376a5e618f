"""The fast sibling of ``attention.scaled_dot_product_attention``: the same numbers, sooner.

``scaled_dot_product_attention`` is the formula as a learner writes it. ``fast_attention`` computes
the same weights and output (tested equal to rounding, and tested to be the path the core takes):

- short sequences are one block, on BLAS's own threads; long ones go block by block of query
  rows (see ``_blocks``), so each block of scores stays in cache between the matmul that writes
  it, the softmax and the matmul that reads it, and the blocks run on a pool of one thread per
  core with BLAS on one thread (``run_jobs``), so numpy's one-threaded ``exp`` runs on every core
  too and no two thread pools compete (the pool is ``mha_course.runtime``'s);
- the softmax works in place, and its row sums come from the second matmul, over ``[V | 1]``;
- the row max is subtracted only when a bound proves that exp(s) [V | 1] could leave the
  float range (see ``exp_needs_no_shift``);
- freed arrays are reused rather than asked of the system again: the first call of ``attend`` sets
  ``runtime.keep_freed_memory`` (not the import; $MHA_COURSE_KEEP_FREED_MEMORY=0 keeps glibc's defaults).

``multi_head_attention``, ``grouped_query_attention`` and ``mla_attention`` run on ``attend``
(``fast_attention`` without its argument checks: they check their inputs once, at the top).
"""
from __future__ import annotations

import math

import numpy as np

from .attention import check_attention_inputs
from .runtime import blas_on_one_thread, cpu_count, keep_freed_memory, run_jobs

# run_jobs, cpu_count, blas_on_one_thread and keep_freed_memory live in mha_course.runtime (the
# process's threads and allocator); they stay importable from here for the code written before.
__all__ = ["fast_attention", "attend", "exp_needs_no_shift", "run_jobs", "cpu_count", "blas_on_one_thread",
           "keep_freed_memory"]


# Bytes of scores handled at a time: a block small enough to stay in cache between the matmul
# that writes it, the softmax passes over it and the matmul that reads it back.
_BLOCK_BYTES = 2 << 20
# Up to this many bytes of scores, attention is one block, run in the calling thread with BLAS on
# its own threads: the pool's threads sleep between calls, and waking them costs more than they
# save on so little work (interleaved in one process, 2 cores: one threaded block 7-8 ms against
# the pool's 10-11 ms at T = 512, h = 8; from T = 1024 the pool wins, 31-34 against 38-39 ms).
_SMALL_BYTES = 8 << 20  # T = 512 at h = 8 in float32


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

    Small problems (at most _SMALL_BYTES of scores) are one block, every batch item at once, run
    where they are called; others go one batch item at a time (so that every core gets some), in
    slices of query rows of at most _BLOCK_BYTES of scores each, on the pool.
    """
    if math.prod(batch) * T * S * itemsize <= _SMALL_BYTES:
        return [((), slice(0, T))]
    rows = max(1, _BLOCK_BYTES // (S * itemsize))
    return [(b, slice(t, t + rows)) for b in np.ndindex(*batch) for t in range(0, T, rows)]


def attend(Q, K, V, mask=None, scores=None, bias=None):
    """Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v) -> out (..., T, d_v), weights (..., T, S), unchecked.

    ``fast_attention`` without its argument checks, for callers that checked once already
    (``multi_head_attention``, ``grouped_query_attention``, ``mla_attention``).

    Q, K, V are float arrays of one dtype with broadcastable batch axes; ``mask`` a boolean
    array broadcastable to (..., T, S) or None. ``scores``, when given, is a (..., T, S)
    array that receives the masked scores Q K^T / sqrt(d_k) (-inf where blocked). ``bias``
    (broadcastable to (..., T, S), e.g. ALiBi's distance penalty) is added to the scores before the mask.
    """
    keep_freed_memory()  # the fast path asks for the allocator it was measured with (runtime; off: =0)
    batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    (T, d_k), (S, d_v) = Q.shape[-2:], V.shape[-2:]
    # scaled once, as a contiguous copy (BLAS is slow on the strided per-head views of split_heads);
    # the scale is a scalar of Q's dtype: no float64 upcast
    Qs = np.multiply(Q, Q.dtype.type(1.0 / math.sqrt(d_k)), order="C")
    shift = bias is not None or not exp_needs_no_shift(Qs, K, V)
    Qs = _broadcast(Qs, (*batch, T, d_k))  # broadcast views: they copy nothing
    Kt = _broadcast(np.swapaxes(K, -1, -2), (*batch, d_k, S))  # (..., d_k, S)
    V1 = np.concatenate([_broadcast(V, (*batch, S, d_v)), np.ones((*batch, S, 1), V.dtype)],
                        axis=-1)  # (..., S, d_v + 1): [V | 1]
    blocked = None if mask is None else _broadcast(~np.atleast_2d(mask), (*batch, T, S))
    bias = None if bias is None else _broadcast(np.asarray(bias, Q.dtype), (*batch, T, S))
    weights = np.empty((*batch, T, S), dtype=Q.dtype)
    out = np.empty((*batch, T, d_v), dtype=Q.dtype)
    blocks = _blocks(batch, T, S, Q.dtype.itemsize)
    if len(blocks) == 1:  # one block, here: BLAS keeps its threads
        _attend_block(Qs, Kt, V1, weights, out, blocked, scores, shift, bias)
        return out, weights

    def run(block):
        b, rows = block
        _attend_block(Qs[b][..., rows, :], Kt[b], V1[b], weights[b][..., rows, :], out[b][..., rows, :],
                      None if blocked is None else blocked[b][..., rows, :],
                      None if scores is None else scores[b][..., rows, :], shift,
                      None if bias is None else bias[b][..., rows, :])

    run_jobs(run, blocks)
    return out, weights


def _broadcast(a: np.ndarray, shape: tuple) -> np.ndarray:
    """``a`` itself when it has ``shape`` already, else its broadcast view (which copies nothing)."""
    return a if a.shape == shape else np.broadcast_to(a, shape)


def exp_needs_no_shift(Qs, K, V, scale: float = 1.0) -> bool:
    """Qs (..., T, d_k), K (..., S, d_k), V (..., S, d_v) -> True when the row max need not be subtracted.

    The scores are ``scale`` Qs K^T (``scale=1``: Qs already scaled by 1 / sqrt(d_k)).

    ``_exp_is_safe``: every scaled score lies in [-L, L], L = half of exp's range (44 in float32).
    Then exp(s) needs no shift if what the softmax computes from it stays a normal float too:
    the sums of exp(s) v and of exp(s) over S keys, at most S e^L max|v|, stay below the largest
    float (and their reciprocal above the smallest), and e^-L times each value column's scale
    stays a full-precision normal number. Subtracting the row max would change only the rounding.

    >>> x = np.ones((3, 4), np.float32)
    >>> exp_needs_no_shift(x, x, x), exp_needs_no_shift(x, x, np.float32(1e20) * x)
    (True, False)
    """
    return _exp_is_safe(Qs, K, scale) and _values_fit(V)


def _values_fit(V) -> bool:
    """True when S e^L max|v| and e^-L min over the columns of max|v| stay normal floats (L as in _exp_is_safe)."""
    fi = np.finfo(V.dtype)
    limit = math.log(fi.max) / 2
    columns = np.maximum(V.max(axis=-2), -V.min(axis=-2))  # (..., d_v): max |v| of each column, no |V| copy
    used = columns[columns > 0]
    v_max, v_min = max(1.0, float(columns.max())), min(1.0, float(used.min())) if used.size else 1.0
    high = math.log(V.shape[-2]) + math.log(v_max) + limit <= min(math.log(fi.max), -math.log(fi.tiny)) - 1
    low = math.log(v_min) - limit >= math.log(fi.tiny) - math.log(fi.eps) + 1
    return bool(high and low)


def _exp_is_safe(Qs: np.ndarray, K: np.ndarray, scale: float = 1.0) -> bool:
    """True when no scaled score can leave [-L, L], L = half of exp's range (44 in float32).

    By Cauchy-Schwarz |q . k| <= |q| |k|. Within that range exp neither overflows nor
    underflows (what it is multiplied with is ``_values_fit``'s question).
    """
    limit = math.log(np.finfo(Qs.dtype).max) / 2
    with np.errstate(over="ignore"):  # a norm past the largest float is inf: not safe, and no warning
        squared_norms = [float(np.einsum("...i,...i->...", a, a).max()) for a in (Qs, K)]  # max |q|^2, |k|^2
    return bool(scale * math.sqrt(squared_norms[0]) * math.sqrt(squared_norms[1]) <= limit)  # False for inf or NaN


def _subtract_row_max(w: np.ndarray) -> None:
    """w (..., r, S) -= its row maxima, in place; all-masked rows (max -inf) are left as they are."""
    m = w.max(axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0  # all-masked rows: keep exp(-inf - 0) = 0, avoid inf - inf
    w -= m


def _attend_block(q, kt, v1, w, out, blocked, scores, shift: bool, bias=None) -> None:
    """One block, written into the views ``w`` (weights), ``out`` and ``scores`` (if given).

    q (..., r, d_k) already scaled, kt (..., d_k, S), v1 (..., S, d_v + 1) = [V | 1];
    blocked (..., r, S) is True where attending is forbidden; ``shift``: subtract row maxima.
    """
    np.matmul(q, kt, out=w)  # (..., r, d_k) x (..., d_k, S) -> (..., r, S)
    if bias is not None:
        w += bias
    if blocked is not None:
        np.copyto(w, -np.inf, where=blocked)
    if scores is not None:
        scores[...] = w  # the scores, kept before the softmax overwrites them
    if shift:
        _subtract_row_max(w)
    np.exp(w, out=w)  # unnormalised weights
    acc = np.matmul(w, v1)  # (..., r, S) x (..., S, d_v + 1) -> (..., r, d_v + 1)
    total = acc[..., -1:]  # (..., r, 1): the row sums
    if blocked is not None or bias is not None:  # (without either, every row sum is at least e^-L > 0)
        total[total == 0] = 1  # all-masked rows stay all-zero
    np.reciprocal(total, out=total)
    w *= total
    np.multiply(acc[..., :-1], total, out=out)
