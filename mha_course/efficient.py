"""Faster ways to compute the same attention (floor 1, numpy only).

``fast_attention`` is ``attention.scaled_dot_product_attention`` tuned for speed, with the
same result (tests/test_efficient.py holds the two equal). ``multi_head_attention`` and
``trace`` run on it. Three things make it fast without changing the maths:

- long sequences go block by block (see ``_blocks``), so each block of scores is still
  in cache for the softmax and the second matmul; the weights are written once, in place;
- the row sums of the softmax come out of the second matmul, from a column of ones
  appended to V: ``exp(scores) [V | 1] = [unnormalised out | row sums]``;
- the row max is subtracted only when exp could overflow (see ``_exp_is_safe``).

Then the ways that never form the T x S matrix (taught in 10_efficient_attention.ipynb):
``tiled_attention`` (exact, an online softmax over key blocks: FlashAttention's idea, with
``online_softmax_update`` as its single step and byte counts of the IO argument),
``sliding_window_attention`` (a band of T x window scores) with the sparse patterns of
Longformer and BigBird as masks, and ``linear_attention`` (the elu + 1 kernel, O(T)).

Mask convention: boolean, **True = may attend**, broadcastable to (..., T, S).
"""
from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from . import _validate
from .attention import check_attention_inputs, softmax

__all__ = [
    "fast_attention",
    "SoftmaxState", "online_softmax_start", "online_softmax_update", "online_softmax_result",
    "tiled_attention", "tiled_attention_steps", "naive_attention_bytes", "tiled_attention_bytes",
    "sliding_window_mask", "sliding_window_attention", "longformer_mask", "dilated_window_mask",
    "bigbird_mask", "elu_feature_map", "linear_attention", "linear_attention_quadratic",
    "split_kv_partials", "merge_attention_partials", "split_kv_attention",
]

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


def attend(Q, K, V, mask=None, scores=None, bias=None):
    """Unchecked fast_attention: out (..., T, d_v), weights (..., T, S) of one dtype, Q's.

    Q, K, V are float arrays of one dtype with broadcastable batch axes; ``mask`` a boolean
    array broadcastable to (..., T, S) or None. ``scores``, when given, is a (..., T, S)
    array that receives the masked scores Q K^T / sqrt(d_k) (-inf where blocked).
    ``bias`` (broadcastable to (..., T, S), e.g. ALiBi's) is added to the scores before the mask.
    """
    batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    (T, d_k), (S, d_v) = Q.shape[-2:], V.shape[-2:]
    # scaled once, as a contiguous copy (BLAS is slow on the strided per-head views of split_heads);
    # the scale is a scalar of Q's dtype: no float64 upcast
    Qs = np.multiply(Q, Q.dtype.type(1.0 / math.sqrt(d_k)), order="C")
    shift = bias is not None or not _exp_is_safe(Qs, K)
    Qs = np.broadcast_to(Qs, (*batch, T, d_k))  # broadcast views: they copy nothing
    Kt = np.broadcast_to(np.swapaxes(K, -1, -2), (*batch, d_k, S))  # (..., d_k, S)
    V1 = np.concatenate([np.broadcast_to(V, (*batch, S, d_v)), np.ones((*batch, S, 1), V.dtype)],
                        axis=-1)  # (..., S, d_v + 1): [V | 1]
    blocked = None if mask is None else np.broadcast_to(~np.atleast_2d(mask), (*batch, T, S))
    bias = None if bias is None else np.broadcast_to(np.asarray(bias, Q.dtype), (*batch, T, S))
    weights = np.empty((*batch, T, S), dtype=Q.dtype)
    out = np.empty((*batch, T, d_v), dtype=Q.dtype)
    for b, rows in _blocks(batch, T, S, Q.dtype.itemsize):
        _attend_block(Qs[b][..., rows, :], Kt[b], V1[b], weights[b][..., rows, :], out[b][..., rows, :],
                      None if blocked is None else blocked[b][..., rows, :],
                      None if scores is None else scores[b][..., rows, :], shift,
                      None if bias is None else bias[b][..., rows, :])
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
    total[total == 0] = 1  # all-masked rows stay all-zero
    np.reciprocal(total, out=total)
    w *= total
    np.multiply(acc[..., :-1], total, out=out)


# ---- Tiled attention with an online softmax (FlashAttention's idea, in numpy). Taught in 10. ----

# Scores handled at a time by tiled_attention: 2**18 entries (1 MiB in float32), a tile that stays
# in cache between the matmul that writes it, the softmax passes and the matmul that reads it.
_TILE_ENTRIES = 1 << 18


class SoftmaxState(NamedTuple):
    """The running state of an online softmax, per query row, over the keys seen so far.

    m (..., T, 1) the running max of the scores; l (..., T, 1) the running sum of
    exp(score - m); acc (..., T, d_v) the running sum of exp(score - m) * value. The partial
    output is acc / l (see ``online_softmax_result``).
    """

    m: np.ndarray
    l: np.ndarray  # noqa: E741 (the letter of the FlashAttention paper)
    acc: np.ndarray


def online_softmax_start(T: int, d_v: int, batch: tuple = (), dtype=np.float64) -> SoftmaxState:
    """T, d_v -> SoftmaxState: m (..., T, 1) = -inf, l = 0, acc (..., T, d_v) = 0, no key seen yet.

    >>> online_softmax_start(2, 3).m.ravel()
    array([-inf, -inf])
    """
    T, d_v = _validate.positive_int(T, "T"), _validate.positive_int(d_v, "d_v")
    return SoftmaxState(np.full((*batch, T, 1), -np.inf, dtype), np.zeros((*batch, T, 1), dtype),
                        np.zeros((*batch, T, d_v), dtype))


def online_softmax_update(state: SoftmaxState, scores_block, V_block) -> SoftmaxState:
    """state, scores_block (..., T, c), V_block (..., c, d_v) -> the state after c more keys.

    The new max m' = max(m, max of the block); what was summed under the old max is
    rescaled by exp(m - m'), then the block's exp(score - m') are added. Masked scores are
    -inf; a row that has seen no allowed key yet keeps l = 0 and acc = 0. Pure: the inputs
    are not changed.

    >>> s = online_softmax_update(online_softmax_start(1, 1), np.array([[0.0, 2.0]]), np.ones((2, 1)))
    >>> float(s.m[0, 0]), round(float(s.l[0, 0]), 4)
    (2.0, 1.1353)
    """
    m_new = np.maximum(state.m, scores_block.max(axis=-1, keepdims=True))  # (..., T, 1)
    shift = np.where(np.isneginf(m_new), 0, m_new)  # rows with no allowed key yet: exp(-inf - 0) = 0
    p = np.exp(scores_block - shift)  # (..., T, c) exp(score - m'), at most 1
    alpha = np.exp(state.m - shift)  # (..., T, 1) rescales the old sums to the new max
    return SoftmaxState(m_new, alpha * state.l + p.sum(axis=-1, keepdims=True),
                        alpha * state.acc + p @ V_block)  # (..., T, c) x (..., c, d_v) -> (..., T, d_v)


def online_softmax_result(state: SoftmaxState) -> np.ndarray:
    """SoftmaxState -> out (..., T, d_v) = acc / l; rows that saw no allowed key give zeros.

    >>> s = online_softmax_update(online_softmax_start(1, 1), np.array([[0.0, 0.0]]), np.ones((2, 1)))
    >>> online_softmax_result(s)
    array([[1.]])
    """
    return state.acc / np.where(state.l == 0, 1, state.l)


def tiled_attention(Q, K, V, mask=None, block_size: int = 256) -> np.ndarray:
    """Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v) -> out (..., T, d_v); no weights.

    The exact output of ``scaled_dot_product_attention``, computed tile by tile: blocks of
    query rows against blocks of ``block_size`` keys, with an online softmax carrying each
    row's running max, sum and accumulator from one key block to the next (the update of
    ``online_softmax_update``, done in place). No T x S array is ever made: memory grows as
    T, not T^2. ``mask`` as in ``scaled_dot_product_attention``; key blocks it blocks
    entirely are skipped. Query blocks run on a thread pool, one per core (the tiles are too
    small for a threaded BLAS: set OPENBLAS_NUM_THREADS=1 for the best speed on big inputs).

    Why no weights: a tile's weights are final only once the last key block has been seen
    (every step rescales them), so returning them would mean storing or recomputing all
    T x S of them, the very traffic tiling avoids. FlashAttention keeps only each row's max
    and sum, and recomputes the weights tile by tile in the backward pass.

    >>> from mha_course.attention import scaled_dot_product_attention
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 7, 4)), rng.normal(size=(2, 7, 3))
    >>> out = tiled_attention(Q, K, V, block_size=3)
    >>> bool(np.allclose(out, scaled_dot_product_attention(Q, K, V)[0]))
    True
    """
    Q, K, V, mask = check_attention_inputs(Q, K, V, mask)
    block_size = _validate.positive_int(block_size, "block_size")
    batch, (T, d_k), (S, d_v) = Q.shape[:-2], Q.shape[-2:], V.shape[-2:]
    Qs = np.multiply(Q, Q.dtype.type(1 / math.sqrt(d_k)), order="C")  # scaled once, contiguous for BLAS
    K = np.broadcast_to(K, (*batch, S, d_k))  # a view
    V1 = np.concatenate([np.broadcast_to(V, (*batch, S, d_v)), np.ones((*batch, S, 1), V.dtype)],
                        axis=-1)  # (..., S, d_v + 1): [V | 1], the row sums come out of the matmul
    allowed = None if mask is None else np.broadcast_to(mask, (*batch, T, S))
    out = np.empty((*batch, T, d_v), dtype=Q.dtype)
    rows = max(1, _TILE_ENTRIES // min(block_size, S))

    def run(job):
        b, r = job
        out[b][r] = _tiled_rows(Qs[b][r], K[b], V1[b], block_size, None if allowed is None else allowed[b][r])

    _run_jobs(run, [(b, slice(t, t + rows)) for b in np.ndindex(*batch) for t in range(0, T, rows)],
              parallel=math.prod(batch) * T * S > 4 * _TILE_ENTRIES)
    return out


def _run_jobs(run, jobs: list, parallel: bool) -> None:
    """Call ``run(job)`` for every job: on a pool of one thread per core when ``parallel``."""
    workers = min(os.cpu_count() or 1, len(jobs))
    if not parallel or workers == 1:
        for job in jobs:
            run(job)
        return
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(run, jobs))  # list(): re-raises a worker's exception here


def _tiled_rows(q, K, V1, block_size: int, allowed) -> np.ndarray:
    """q (r, d_k) already scaled, K (S, d_k), V1 (S, d_v + 1) = [V | 1], allowed (r, S) or None -> out (r, d_v)."""
    m = np.full((len(q), 1), -np.inf, dtype=q.dtype)  # running max
    acc1 = np.zeros((len(q), V1.shape[-1]), dtype=q.dtype)  # [acc | l]: accumulator and running sum
    buffer = np.empty((len(q), min(block_size, len(K))), dtype=q.dtype)  # one tile of scores, reused
    for c in range(0, len(K), block_size):
        keys = slice(c, c + block_size)
        tile = None if allowed is None else allowed[:, keys]
        if tile is not None and not tile.any():
            continue  # a key block these queries may not see at all (above a causal diagonal)
        s = np.matmul(q, K[keys].T, out=buffer[:, :len(K[keys])])  # (r, d_k) x (d_k, c) -> (r, c)
        if tile is not None:
            np.copyto(s, -np.inf, where=~tile)
        _online_update_inplace(m, acc1, s, V1[keys])
    total = acc1[:, -1:]  # (r, 1): l
    total[total == 0] = 1  # rows that saw no allowed key stay zero
    return acc1[:, :-1] / total


def _online_update_inplace(m, acc1, s, v1) -> None:
    """``online_softmax_update`` in place: m (r, 1), acc1 (r, d_v + 1) = [acc | l], s (r, c) overwritten."""
    m_new = np.maximum(m, s.max(axis=-1, keepdims=True))  # (r, 1)
    shift = np.where(np.isneginf(m_new), 0, m_new)  # rows with no allowed key yet: exp(-inf - 0) = 0
    s -= shift
    np.exp(s, out=s)  # exp(score - m'), in place
    m -= shift
    acc1 *= np.exp(m, out=m)  # rescale [acc | l] by exp(m - m')
    acc1 += s @ v1  # (r, c) x (c, d_v + 1) -> (r, d_v + 1): [exp(s) V | row sums]
    m[...] = m_new


def tiled_attention_steps(Q, K, V, block_size: int) -> list:
    """Q (T, d_k), K (S, d_k), V (S, d_v) -> [SoftmaxState after key block 1, 2, ...], one per block.

    The step-through of ``tiled_attention`` for one head: ``online_softmax_result(steps[i])``
    is the partial output after i + 1 key blocks; the last equals the exact output.

    >>> rng = np.random.default_rng(0)
    >>> steps = tiled_attention_steps(rng.normal(size=(2, 4)), rng.normal(size=(5, 4)),
    ...                               rng.normal(size=(5, 3)), block_size=2)
    >>> len(steps), steps[-1].acc.shape
    (3, (2, 3))
    """
    Q, K, V, _ = check_attention_inputs(Q, K, V)
    block_size = _validate.positive_int(block_size, "block_size")
    s = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])  # (T, S): fine for the small sizes of a step-through
    states = [online_softmax_start(Q.shape[-2], V.shape[-1], Q.shape[:-2], Q.dtype)]
    for c in range(0, K.shape[-2], block_size):
        states.append(online_softmax_update(states[-1], s[..., c:c + block_size], V[..., c:c + block_size, :]))
    return states[1:]


def naive_attention_bytes(T: int, S: int, d_k: int, d_v: int, itemsize: int = 4) -> int:
    """T, S, d_k, d_v -> bytes the textbook attention moves between main memory and the cores.

    Q and K read, the T x S scores written, read back by the softmax, the T x S weights
    written, read back with V by the second matmul, out written: 4 T S + (T + S) d_k +
    S d_v + T d_v numbers (Algorithm 0 of the FlashAttention paper).

    >>> naive_attention_bytes(1024, 1024, 64, 64) / 2**20
    17.0
    """
    T, S, d_k, d_v = (_validate.positive_int(v, n) for v, n in ((T, "T"), (S, "S"), (d_k, "d_k"), (d_v, "d_v")))
    return itemsize * (4 * T * S + (T + S) * d_k + S * d_v + T * d_v)


def tiled_attention_bytes(T: int, S: int, d_k: int, d_v: int, block_rows: int, itemsize: int = 4) -> int:
    """T, S, d_k, d_v, block_rows -> bytes ``tiled_attention`` moves to and from main memory.

    Each block of ``block_rows`` queries is read once and its output written once; K and V
    are read once per query block; the tiles of scores stay in cache and never travel:
    (T d_k + T d_v) + ceil(T / block_rows) S (d_k + d_v) numbers, no T x S term.

    >>> tiled_attention_bytes(1024, 1024, 64, 64, block_rows=1024) / 2**20
    1.0
    """
    T, S, d_k, d_v = (_validate.positive_int(v, n) for v, n in ((T, "T"), (S, "S"), (d_k, "d_k"), (d_v, "d_v")))
    n_blocks = -(-T // _validate.positive_int(block_rows, "block_rows"))
    return itemsize * (T * (d_k + d_v) + n_blocks * S * (d_k + d_v))


# ---- Sliding windows and sparse patterns (Longformer, BigBird). Taught in 10. ----

def _offsets(T: int) -> np.ndarray:
    """T -> (T, T) ints t - s (query t, key s): how far back key s lies from query t."""
    T = _validate.positive_int(T, "T")
    return np.arange(T)[:, None] - np.arange(T)[None, :]


def sliding_window_mask(T: int, window: int) -> np.ndarray:
    """T, window -> (T, T) bool: query t may attend keys s with t - window < s <= t.

    Each query sees itself and the window - 1 keys before it; window >= T is the causal mask.

    >>> sliding_window_mask(4, 2).astype(int)
    array([[1, 0, 0, 0],
           [1, 1, 0, 0],
           [0, 1, 1, 0],
           [0, 0, 1, 1]])
    """
    d = _offsets(T)
    return (d >= 0) & (d < _validate.positive_int(window, "window"))


def sliding_window_attention(Q, K, V, window: int) -> np.ndarray:
    """Q (..., T, d_k), K (..., T, d_k), V (..., T, d_v) -> out (..., T, d_v); query t sees its last ``window`` keys.

    Equal to ``scaled_dot_product_attention(Q, K, V, sliding_window_mask(T, window))``, but the
    scores are a band (..., T, window): key t - window + 1 + j in column j, so memory and work
    grow as T * window, not T^2. K and V are read through strided windows (views, no copies).

    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(6, 4)), rng.normal(size=(6, 4)), rng.normal(size=(6, 2))
    >>> from mha_course.attention import scaled_dot_product_attention
    >>> full = scaled_dot_product_attention(Q, K, V, sliding_window_mask(6, 3))[0]
    >>> bool(np.allclose(sliding_window_attention(Q, K, V, 3), full))
    True
    """
    Q, K, V, _ = check_attention_inputs(Q, K, V)
    T, w = _self_attention_len(Q, K, "sliding_window_attention"), _validate.positive_int(window, "window")
    pad = [(0, 0)] * (K.ndim - 2) + [(w - 1, 0), (0, 0)]  # w - 1 rows before the first key
    Kw = sliding_window_view(np.pad(K, pad), w, axis=-2)  # (..., T, d_k, w): the window of each query
    Vw = sliding_window_view(np.pad(V, pad), w, axis=-2)  # (..., T, d_v, w)
    # (..., T, 1, d_k) x (..., T, d_k, w) -> (..., T, 1, w) -> (..., T, w): one row of w scores per query
    scores = (Q[..., :, None, :] @ Kw)[..., 0, :] / math.sqrt(Q.shape[-1])
    before_start = np.arange(T)[:, None] - (w - 1) + np.arange(w)[None, :] < 0  # (T, w): padding keys
    weights = softmax(np.where(before_start, -np.inf, scores), axis=-1)  # (..., T, w)
    return (Vw @ weights[..., :, :, None])[..., 0]  # (..., T, d_v, w) x (..., T, w, 1) -> (..., T, d_v)


def _self_attention_len(Q, K, name: str) -> int:
    """T of a self-attention (queries and keys are the same T positions), or a ValueError."""
    if Q.shape[-2] != K.shape[-2]:
        raise ValueError(f"{name} needs as many keys as queries (self-attention, position t sees the "
                         f"keys before it); got T={Q.shape[-2]} queries and S={K.shape[-2]} keys")
    return Q.shape[-2]


def longformer_mask(T: int, window: int, global_tokens) -> np.ndarray:
    """T, window, global_tokens (indices) -> (T, T) bool: a symmetric window |t - s| < window,
    plus global tokens that attend every position and that every position attends (Longformer).

    >>> longformer_mask(5, 1, [0]).astype(int)
    array([[1, 1, 1, 1, 1],
           [1, 1, 0, 0, 0],
           [1, 0, 1, 0, 0],
           [1, 0, 0, 1, 0],
           [1, 0, 0, 0, 1]])
    """
    mask = np.abs(_offsets(T)) < _validate.positive_int(window, "window")
    g = _token_indices(global_tokens, T)
    mask[g, :] = True  # global tokens see everything
    mask[:, g] = True  # and everything sees them
    return mask


def _token_indices(tokens, T: int) -> np.ndarray:
    """tokens -> 1-D int array of positions in 0..T-1, or a ValueError naming the bad ones."""
    idx = np.asarray(tokens, dtype=int).reshape(-1)
    bad = idx[(idx < 0) | (idx >= T)]
    if bad.size:
        raise ValueError(f"token positions {bad.tolist()} lie outside 0..T-1 = 0..{T - 1}; "
                         "give positions of the sequence")
    return idx


def dilated_window_mask(T: int, window: int, dilation: int) -> np.ndarray:
    """T, window, dilation -> (T, T) bool: query t sees keys t, t - dilation, ..., t - (window - 1) dilation.

    The same number of keys as a sliding window, spread over (window - 1) * dilation + 1 positions
    (Longformer's dilated windows; dilation=1 is ``sliding_window_mask``).

    >>> dilated_window_mask(5, 2, 2).astype(int)
    array([[1, 0, 0, 0, 0],
           [0, 1, 0, 0, 0],
           [1, 0, 1, 0, 0],
           [0, 1, 0, 1, 0],
           [0, 0, 1, 0, 1]])
    """
    d, dilation = _offsets(T), _validate.positive_int(dilation, "dilation")
    return (d >= 0) & (d % dilation == 0) & (d // dilation < _validate.positive_int(window, "window"))


def bigbird_mask(T: int, window: int, n_global: int, n_random: int, *, rng: np.random.Generator) -> np.ndarray:
    """T, window, n_global, n_random -> (T, T) bool: BigBird's sparse pattern.

    A symmetric window |t - s| < window, the first ``n_global`` tokens global (see
    ``longformer_mask``), and ``n_random`` keys drawn at random for every query.

    >>> m = bigbird_mask(8, 2, 1, 2, rng=np.random.default_rng(0))
    >>> m.shape, bool(m[:, 0].all()), bool(m[0].all())
    ((8, 8), True, True)
    """
    T = _validate.positive_int(T, "T")
    if not (isinstance(n_global, int) and isinstance(n_random, int) and 0 <= n_global <= T and 0 <= n_random <= T):
        raise ValueError(f"n_global={n_global!r} and n_random={n_random!r} must be whole numbers in 0..T={T}")
    mask = longformer_mask(T, window, np.arange(n_global))
    picks = np.argsort(rng.random((T, T)), axis=-1)[:, :n_random]  # (T, n_random) distinct keys per query
    mask[np.arange(T)[:, None], picks] = True
    return mask


# ---- Linear attention (Katharopoulos et al., 2020). Taught in 10. ----

# Queries per chunk in causal linear_attention: exact causal sums inside a chunk, prefix sums between.
_CHUNK = 64


def elu_feature_map(x) -> np.ndarray:
    """x (...) -> phi(x) = elu(x) + 1, same shape: x + 1 for x > 0, exp(x) otherwise; always > 0.

    >>> elu_feature_map(np.array([-1.0, 0.0, 2.0])).round(4)
    array([0.3679, 1.    , 3.    ])
    """
    x = _validate.float_array(x, "x")
    return np.where(x > 0, x + 1, np.exp(np.minimum(x, 0)))


def linear_attention(Q, K, V, causal: bool = False) -> np.ndarray:
    """Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v) -> out (..., T, d_v), in O(T) time and memory.

    Attention with the kernel phi(q) . phi(k) (phi = ``elu_feature_map``) in place of
    exp(q . k / sqrt(d_k)): out_t = phi(q_t) (phi(K)^T V) / (phi(q_t) phi(K)^T 1). Multiplying
    phi(K)^T V first, a (d_k, d_v) matrix, reassociates the quadratic (phi(Q) phi(K)^T) V and
    never forms the T x S matrix. ``causal``: query t sums keys s <= t only, through prefix
    sums of phi(k_s) v_s^T carried from chunk to chunk (needs T == S). Equal to
    ``linear_attention_quadratic``; not equal to softmax attention (a different kernel).

    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(5, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    >>> bool(np.allclose(linear_attention(Q, K, V, causal=True), linear_attention_quadratic(Q, K, V, causal=True)))
    True
    """
    Q, K, V, _ = check_attention_inputs(Q, K, V)
    fQ, fK = elu_feature_map(Q), elu_feature_map(K)  # (..., T, d_k), (..., S, d_k)
    if causal:
        _self_attention_len(Q, K, "linear_attention(causal=True)")
        return _causal_linear(fQ, fK, V)
    kv = np.swapaxes(fK, -1, -2) @ V  # (..., d_k, S) x (..., S, d_v) -> (..., d_k, d_v)
    z = fK.sum(axis=-2)[..., :, None]  # (..., d_k, 1): the normaliser's sum of phi(k)
    return (fQ @ kv) / (fQ @ z)  # (..., T, d_v) / (..., T, 1)


def _causal_linear(fQ, fK, V) -> np.ndarray:
    """phi(Q), phi(K) (..., T, d_k), V (..., T, d_v) -> causal linear attention, chunk by chunk."""
    batch, (T, d_k), d_v = fQ.shape[:-2], fK.shape[-2:], V.shape[-1]
    kv = np.zeros((*np.broadcast_shapes(fK.shape[:-2], V.shape[:-2]), d_k, d_v))  # prefix sum of phi(k) v^T
    z = np.zeros((*fK.shape[:-2], d_k, 1))  # prefix sum of phi(k)
    out = np.empty((*batch, T, d_v), dtype=np.result_type(fQ, V))
    within = np.tril(np.ones((_CHUNK, _CHUNK), dtype=bool))
    for c in range(0, T, _CHUNK):
        q, k, v = fQ[..., c:c + _CHUNK, :], fK[..., c:c + _CHUNK, :], V[..., c:c + _CHUNK, :]
        n = q.shape[-2]
        a = np.where(within[:n, :n], q @ np.swapaxes(k, -1, -2), 0)  # (..., n, n) causal inside the chunk
        num = q @ kv + a @ v  # earlier chunks through the prefix sums, this chunk exactly
        out[..., c:c + n, :] = num / (q @ z + a.sum(axis=-1, keepdims=True))
        kv = kv + np.swapaxes(k, -1, -2) @ v  # (..., d_k, n) x (..., n, d_v)
        z = z + k.sum(axis=-2)[..., :, None]
    return out


def linear_attention_quadratic(Q, K, V, causal: bool = False) -> np.ndarray:
    """Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v) -> out (..., T, d_v): linear attention the slow way.

    A = phi(Q) phi(K)^T, a (..., T, S) matrix (lower-triangular if ``causal``), then
    out = A V / A 1: the same numbers as ``linear_attention`` in O(T S) time and memory,
    the form it is tested against.

    >>> linear_attention_quadratic(np.zeros((1, 2)), np.zeros((3, 2)), np.arange(3.0)[:, None])
    array([[1.]])
    """
    Q, K, V, _ = check_attention_inputs(Q, K, V)
    A = elu_feature_map(Q) @ np.swapaxes(elu_feature_map(K), -1, -2)  # (..., T, S), all > 0
    if causal:
        A = np.where(np.tril(np.ones((_self_attention_len(Q, K, "causal linear attention"),) * 2, bool)), A, 0)
    return (A @ V) / A.sum(axis=-1, keepdims=True)  # (..., T, S) x (..., S, d_v) -> (..., T, d_v)


# ---- Split-KV decoding (FlashDecoding, Dao et al. 2023). Taught in 13_long_context.ipynb. ----
def split_kv_partials(Q, K, V, n_splits: int, mask=None) -> tuple[list, list]:
    """Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v) -> n_splits partial outputs (..., T, d_v)
    and their log-sum-exps (..., T, 1), one per chunk of the keys.

    Chunk c holds keys ``np.array_split(range(S), n_splits)[c]`` (sizes differ by at most one;
    chunks may be empty when n_splits > S). Its output is the softmax-weighted mean of its
    values alone, and lse = log sum exp(scores of the chunk); a chunk the mask blocks entirely
    (or an empty one) gives lse = -inf and a zero output. Each chunk is independent: on a GPU,
    one block of threads each.

    >>> rng = np.random.default_rng(0)
    >>> outs, lses = split_kv_partials(rng.normal(size=(1, 4)), rng.normal(size=(5, 4)), np.eye(5), 2)
    >>> [o.shape for o in outs], [l.shape for l in lses]
    ([(1, 5), (1, 5)], [(1, 1), (1, 1)])
    """
    Q, K, V, mask = check_attention_inputs(Q, K, V, mask)
    n_splits = _validate.positive_int(n_splits, "n_splits")
    S = K.shape[-2]
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])  # (..., T, d_k) x (..., d_k, S) -> (..., T, S)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)  # True = may attend
    outs, lses = [], []
    for idx in np.array_split(np.arange(S), n_splits):  # n_splits chunks of the S keys
        s, v = scores[..., idx], V[..., idx, :]  # (..., T, c), (..., c, d_v)
        m = s.max(axis=-1, keepdims=True, initial=-np.inf)  # (..., T, 1); -inf: nothing allowed
        shift = np.where(np.isfinite(m), m, 0.0)
        p = np.exp(s - shift)  # (..., T, c)
        total = p.sum(axis=-1, keepdims=True)  # (..., T, 1)
        outs.append((p @ v) / np.where(total > 0, total, 1.0))  # (..., T, c) x (..., c, d_v) -> (..., T, d_v)
        with np.errstate(divide="ignore"):
            lses.append(np.where(total > 0, shift + np.log(total), -np.inf))  # (..., T, 1)
    return outs, lses


def merge_attention_partials(outs, lses) -> np.ndarray:
    """n partial outputs (..., T, d_v) and their lses (..., T, 1) -> out (..., T, d_v), exactly.

    lse = log sum_c exp(lse_c) and out = sum_c exp(lse_c - lse) · out_c: each chunk's output
    weighted by its share of the softmax's denominator. Chunks with lse_c = -inf weigh 0; a
    row whose chunks are all -inf (every key masked) gives zeros, as in scaled_dot_product_attention.

    >>> merge_attention_partials([np.array([[1.0]]), np.array([[3.0]])], [np.zeros((1, 1))] * 2)
    array([[2.]])
    """
    lse_all = np.stack([np.asarray(l, dtype=float) for l in lses])  # (n, ..., T, 1)
    m = lse_all.max(axis=0)  # (..., T, 1)
    shift = np.where(np.isfinite(m), m, 0.0)
    w = np.exp(lse_all - shift)  # (n, ..., T, 1): exp(lse_c - max)
    total = w.sum(axis=0)  # (..., T, 1)
    merged = sum(w_c * np.asarray(o) for w_c, o in zip(w, outs))  # (..., T, d_v)
    return (merged / np.where(total > 0, total, 1.0)).astype(np.result_type(*outs), copy=False)


def split_kv_attention(Q, K, V, n_splits: int, mask=None) -> np.ndarray:
    """Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v), n_splits -> out (..., T, d_v).

    FlashDecoding's split-KV attention (Dao et al. 2023): the keys are cut into n_splits chunks
    (``split_kv_partials``: a partial output and its log-sum-exp per chunk, computed in
    parallel), then merged exactly (``merge_attention_partials``). The result equals
    ``scaled_dot_product_attention``'s output for any n_splits, whether or not it divides S.
    It helps when B · h is small and S long: one query per head leaves the other cores idle
    unless the keys are split too.

    >>> from mha_course.attention import scaled_dot_product_attention
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(2, 1, 4)), rng.normal(size=(2, 7, 4)), rng.normal(size=(2, 7, 3))
    >>> bool(np.allclose(split_kv_attention(Q, K, V, 3), scaled_dot_product_attention(Q, K, V)[0]))
    True
    """
    return merge_attention_partials(*split_kv_partials(Q, K, V, n_splits, mask))
