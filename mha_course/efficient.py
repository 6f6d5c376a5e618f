"""Lesson 10: attention that never forms the T x S matrix (numpy only; imports the core, never the reverse).

Taught in 10_efficient_attention.ipynb: ``tiled_attention`` (exact, an online softmax over key
blocks: FlashAttention's idea, with ``online_softmax_update`` as its single step and byte counts
of the IO argument), ``sliding_window_attention`` (a band of T x window scores) with the sparse
patterns of Longformer and BigBird as masks, and ``linear_attention`` (the elu + 1 kernel, O(T)), and
split-KV decoding (FlashDecoding, taught in 13). This module holds the exact ones, computed in pieces
(tiles, a band, chunks of keys); the sparse patterns and linear attention, which attend to fewer pairs or
through another kernel, are in ``subquadratic.py`` and importable from here too.
The fast sibling of the textbook attention that the core runs on is ``fast.fast_attention``.

Mask convention: boolean, **True = may attend**, broadcastable to (..., T, S).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from . import _validate
from .attention import check_attention_inputs
from .fast import exp_needs_no_shift, fast_attention
from .runtime import run_jobs
from .subquadratic import (
    bigbird_mask,
    dilated_window_mask,
    elu_feature_map,
    linear_attention,
    linear_attention_quadratic,
    longformer_mask,
    sliding_window_mask,
)

__all__ = [
    "fast_attention",  # the core's fast sibling (fast.py), still importable from here
    "SoftmaxState", "online_softmax_start", "online_softmax_update", "online_softmax_result",
    "tiled_attention", "tiled_attention_steps", "naive_attention_bytes", "tiled_attention_bytes",
    "sliding_window_mask", "sliding_window_attention", "longformer_mask", "dilated_window_mask",
    "bigbird_mask", "elu_feature_map", "linear_attention", "linear_attention_quadratic",
    "split_kv_partials", "check_n_splits", "merge_attention_partials", "split_kv_attention",
]

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
    batch = _batch_axes(batch)
    _validate.allocation(8 * math.prod(batch) * T * (d_v + 2), f"an online-softmax state {(*batch, T, d_v)}",
                         "start it for fewer queries T or a smaller d_v")
    return SoftmaxState(np.full((*batch, T, 1), -np.inf, dtype), np.zeros((*batch, T, 1), dtype),
                        np.zeros((*batch, T, d_v), dtype))


def _batch_axes(batch) -> tuple:
    """online_softmax_start's ``batch``: a tuple of whole numbers >= 1 (the leading axes), checked."""
    if not isinstance(batch, (tuple, list)):
        raise ValueError(f"batch={batch!r} must be a tuple of the leading axes' sizes, e.g. batch=(B, h) or "
                         f"batch=({batch!r},) for one axis; () for none")
    return tuple(_validate.positive_int(n, "batch") for n in batch)


def online_softmax_update(state: SoftmaxState, scores_block, V_block) -> SoftmaxState:
    """state, scores_block (..., T, c), V_block (..., c, d_v) -> the state after c more keys.

    The new max m' = max(m, max of the block); what was summed under the old max is
    rescaled by exp(m - m'), then the block's exp(score - m') are added. Masked scores are
    -inf; a row that has seen no allowed key yet keeps l = 0 and acc = 0. Pure: the inputs
    are not changed. NaN or +inf scores, non-finite values and shapes that do not fit the
    state raise ValueError.

    >>> s = online_softmax_update(online_softmax_start(1, 1), np.array([[0.0, 2.0]]), np.ones((2, 1)))
    >>> float(s.m[0, 0]), round(float(s.l[0, 0]), 4)
    (2.0, 1.1353)
    """
    state, scores_block, V_block = _check_online_update(state, scores_block, V_block)
    m_new = np.maximum(state.m, scores_block.max(axis=-1, keepdims=True))  # (..., T, 1)
    shift = np.where(np.isneginf(m_new), 0, m_new)  # rows with no allowed key yet: exp(-inf - 0) = 0
    p = np.exp(scores_block - shift)  # (..., T, c) exp(score - m'), at most 1
    alpha = np.exp(state.m - shift)  # (..., T, 1) rescales the old sums to the new max
    return SoftmaxState(m_new, alpha * state.l + p.sum(axis=-1, keepdims=True),
                        alpha * state.acc + p @ V_block)  # (..., T, c) x (..., c, d_v) -> (..., T, d_v)


def _check_online_update(state, scores_block, V_block):
    """online_softmax_update's checks: a SoftmaxState, scores finite or -inf, shapes that fit."""
    if not isinstance(state, SoftmaxState):
        raise ValueError(f"state must be a SoftmaxState, got {type(state).__name__}; start one with "
                         "online_softmax_start(T, d_v)")
    s = _validate.float_array(scores_block, "scores_block")
    V_block = _validate.finite_array(V_block, "V_block")
    if s.ndim < 2 or V_block.ndim < 2:
        raise ValueError(f"scores_block must be (..., T, c) and V_block (..., c, d_v); got shapes {s.shape} "
                         f"and {V_block.shape}")
    bad = np.isnan(s) | np.isposinf(s)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"scores_block has {int(bad.sum())} NaN or +inf scores (the first: scores_block"
                         f"{list(first)} = {s[first]}); scores must be finite, or -inf where a key is masked")
    (T, d_v), c = state.acc.shape[-2:], s.shape[-1]
    if s.shape[-2] != T or V_block.shape[-2] != c or V_block.shape[-1] != d_v:
        raise ValueError(f"shapes do not fit: the state has T={T} rows and d_v={d_v}, scores_block is "
                         f"{s.shape} (..., T, c) and V_block {V_block.shape} (..., c, d_v); give scores of "
                         f"(..., {T}, c) and values of (..., c, {d_v}) for the same c keys")
    try:
        np.broadcast_shapes(state.acc.shape[:-2], s.shape[:-2], V_block.shape[:-2])
    except ValueError:
        raise ValueError(f"the batch axes of the state {state.acc.shape[:-2]}, scores_block {s.shape[:-2]} "
                         f"and V_block {V_block.shape[:-2]} do not broadcast") from None
    return state, s, V_block


def online_softmax_result(state: SoftmaxState) -> np.ndarray:
    """SoftmaxState -> out (..., T, d_v) = acc / l; rows that saw no allowed key give zeros.

    >>> s = online_softmax_update(online_softmax_start(1, 1), np.array([[0.0, 0.0]]), np.ones((2, 1)))
    >>> online_softmax_result(s)
    array([[1.]])
    """
    if not isinstance(state, SoftmaxState):
        raise ValueError(f"state must be a SoftmaxState, got {type(state).__name__}; start one with "
                         "online_softmax_start(T, d_v) and update it with online_softmax_update")
    return state.acc / np.where(state.l == 0, 1, state.l)


def tiled_attention(Q, K, V, mask=None, block_size: int = 256, *, causal: bool = False) -> np.ndarray:
    """Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v) -> out (..., T, d_v); no weights.

    The exact output of ``scaled_dot_product_attention``, computed tile by tile: blocks of
    query rows against blocks of ``block_size`` keys, with an online softmax carrying each
    row's running max, sum and accumulator from one key block to the next (the update of
    ``online_softmax_update``, done in place). No T x S array is ever made: memory grows as
    T, not T^2. ``mask`` as in ``scaled_dot_product_attention``; key blocks it blocks
    entirely are skipped. ``causal=True``: query t sees keys 0 .. S - T + t, aligned bottom-right
    as everywhere in the package (``cached_causal_mask(T, S - T)``, the decode step; with T = S,
    ``causal_mask``), without making the mask; the tiles above that diagonal are never computed.
    PyTorch's ``is_causal=True`` aligns top-left instead (query t sees keys 0..t), which differs
    when T != S; ``torch.nn.attention.bias.causal_lower_right`` is this one. Query blocks run on a thread
    pool, one thread per core, with BLAS on one thread inside it (``fast.run_jobs``).

    Why no weights: a tile's weights are final only once the last key block has been seen
    (every step rescales them), so returning them would mean storing or recomputing all
    T x S of them, the very traffic tiling avoids. FlashAttention keeps only each row's max
    and sum, and recomputes the weights tile by tile in the backward pass.

    >>> from mha_course.attention import scaled_dot_product_attention, causal_mask
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 3))
    >>> out = tiled_attention(Q, K, V, block_size=3, causal=True)
    >>> bool(np.allclose(out, scaled_dot_product_attention(Q, K, V, causal_mask(5))[0]))
    True
    """
    Q, K, V, mask = check_attention_inputs(Q, K, V, mask)
    block_size = _validate.positive_int(block_size, "block_size")
    causal = _validate.flag(causal, "causal")
    batch, (T, d_k), (S, d_v) = Q.shape[:-2], Q.shape[-2:], V.shape[-2:]
    Qs = np.multiply(Q, Q.dtype.type(1 / math.sqrt(d_k)), order="C")  # scaled once, contiguous for BLAS
    shift = not exp_needs_no_shift(Qs, K, V)  # True: keep a running max
    K = np.broadcast_to(K, (*batch, S, d_k))  # a view
    V1 = np.concatenate([np.broadcast_to(V, (*batch, S, d_v)), np.ones((*batch, S, 1), V.dtype)],
                        axis=-1)  # (..., S, d_v + 1): [V | 1], the row sums come out of the matmul
    allowed = None if mask is None else np.broadcast_to(mask, (*batch, T, S))
    out = np.empty((*batch, T, d_v), dtype=Q.dtype)
    rows = max(1, _TILE_ENTRIES // min(block_size, S))

    def run(job):
        b, r = job
        band = (r.start + S - T, T + S) if causal else None  # query t sees keys s <= S - T + t: bottom-right
        out[b][r] = _tiled_rows(Qs[b][r], K[b], V1[b], block_size, None if allowed is None else allowed[b][r],
                                band, shift)

    run_jobs(run, [(b, slice(t, t + rows)) for b in np.ndindex(*batch) for t in range(0, T, rows)],
             parallel=math.prod(batch) * T * S > _TILE_ENTRIES)  # more than one tile of work: use every core
    return out


def _tiled_rows(q, K, V1, block_size: int, allowed, band, shift: bool) -> np.ndarray:
    """q (r, d_k) already scaled, K (S, d_k), V1 (S, d_v + 1) = [V | 1] -> out (r, d_v).

    ``allowed`` (r, S) bool or None. ``band`` (offset, width) or None: row i may see the keys j
    with 0 <= i + offset - j < width (causal: width larger than any distance; a sliding window:
    width = window); key blocks outside the band are skipped, and each key block is computed
    only for the rows that see some key in it. ``shift``: keep a running max (False when
    ``exp_needs_no_shift`` proved exp(s) safe: then the tile is just exp(s) [V | 1]).
    """
    r, S = len(q), len(K)
    offset, width = band if band is not None else (0, None)
    first, stop = (0, S) if band is None else (max(0, offset - width + 1), min(S, r + offset))
    acc1 = np.zeros((r, V1.shape[-1]), dtype=q.dtype)  # [acc | l]: accumulator and running sum
    m = np.full((r, 1), -np.inf, dtype=q.dtype) if shift else None  # running max
    buffer = np.empty((r, min(block_size, S)), dtype=q.dtype)  # one tile of scores, reused
    for c in range(first, stop, block_size):
        n = min(block_size, stop - c)
        lo, hi = (0, r) if band is None else (max(0, c - offset), min(r, c + n - 1 + width - offset))
        tile = None if allowed is None else allowed[lo:hi, c:c + n]
        if tile is not None and not tile.any():
            continue  # a key block these queries may not see at all
        if band is not None and (lo + offset < c + n - 1 or hi - 1 + offset - width + 1 > c):  # the band's edge
            d = np.arange(lo + offset, hi + offset)[:, None] - np.arange(c, c + n)[None, :]  # (rows, n): t - s
            in_band = (d >= 0) & (d < width)
            tile = in_band if tile is None else tile & in_band
        s = np.matmul(q[lo:hi], K[c:c + n].T, out=buffer[:hi - lo, :n])  # (rows, d_k) x (d_k, n) -> (rows, n)
        if tile is not None:
            np.copyto(s, -np.inf, where=~tile)
        if shift:
            _online_update_inplace(m[lo:hi], acc1[lo:hi], s, V1[c:c + n])
        else:
            np.exp(s, out=s)  # |s| is bounded: exp(s) [V | 1] stays in range, no running max needed
            acc1[lo:hi] += s @ V1[c:c + n]  # (rows, n) x (n, d_v + 1) -> (rows, d_v + 1)
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
    T, S, d_k, d_v, itemsize = (_validate.positive_int(v, n) for v, n in
                                 ((T, "T"), (S, "S"), (d_k, "d_k"), (d_v, "d_v"), (itemsize, "itemsize")))
    return itemsize * (4 * T * S + (T + S) * d_k + S * d_v + T * d_v)


def tiled_attention_bytes(T: int, S: int, d_k: int, d_v: int, block_rows: int, itemsize: int = 4) -> int:
    """T, S, d_k, d_v, block_rows -> bytes ``tiled_attention`` moves to and from main memory.

    Each block of ``block_rows`` queries is read once and its output written once; the tiles of
    scores stay in fast memory and never travel; but K and V are read once per query block:
    (T d_k + T d_v) + ceil(T / block_rows) S (d_k + d_v) numbers. For S = T the second term is
    still quadratic in T, divided by the block height: FlashAttention makes Theta(N^2 d^2 / M)
    accesses to main memory against Theta(N d + N^2) for the standard algorithm, for a fast memory
    of M numbers (Dao et al. 2022, FlashAttention, Theorem 2), and its query blocks are at most d
    rows (B_r = min(ceil(M / 4d), d)), so on a GPU the saving is a few times, not a new order.

    >>> tiled_attention_bytes(1024, 1024, 64, 64, block_rows=1024) / 2**20
    1.0
    """
    T, S, d_k, d_v, itemsize = (_validate.positive_int(v, n) for v, n in
                                 ((T, "T"), (S, "S"), (d_k, "d_k"), (d_v, "d_v"), (itemsize, "itemsize")))
    n_blocks = -(-T // _validate.positive_int(block_rows, "block_rows"))
    return itemsize * (T * (d_k + d_v) + n_blocks * S * (d_k + d_v))


# ---- Sliding-window attention on the tiles (the patterns are in subquadratic.py). Taught in 10. ----
def sliding_window_attention(Q, K, V, window: int) -> np.ndarray:
    """Q (..., T, d_k), K (..., T, d_k), V (..., T, d_v) -> out (..., T, d_v); query t sees its last ``window`` keys.

    Equal to ``scaled_dot_product_attention(Q, K, V, sliding_window_mask(T, window))``, but
    only the band is computed: blocks of query rows against the keys their windows reach, on
    the tiles of ``tiled_attention`` (tiles outside the band are never computed), so memory
    grows as T * window (a few tiles per core besides the inputs and the output), not T^2.

    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(6, 4)), rng.normal(size=(6, 4)), rng.normal(size=(6, 2))
    >>> from mha_course.attention import scaled_dot_product_attention
    >>> full = scaled_dot_product_attention(Q, K, V, sliding_window_mask(6, 3))[0]
    >>> bool(np.allclose(sliding_window_attention(Q, K, V, 3), full))
    True
    """
    Q, K, V, _ = check_attention_inputs(Q, K, V)
    T, w = _self_attention_len(Q, K, "sliding_window_attention"), _validate.positive_int(window, "window")
    batch, d_k, d_v = Q.shape[:-2], Q.shape[-1], V.shape[-1]
    scale = 1 / math.sqrt(d_k)
    shift = not exp_needs_no_shift(Q, K, V, scale)  # True: keep a running max
    K, V = np.broadcast_to(K, (*batch, T, d_k)), np.broadcast_to(V, (*batch, T, d_v))  # views
    block = min(256, max(64, w // 2))  # keys per tile: the band wastes about block / window of the work
    rows = max(block, _TILE_ENTRIES // (4 * block))  # queries per job
    out = np.empty((*batch, T, d_v), dtype=Q.dtype)

    def run(job):
        b, t0 = job
        t1, k0 = min(T, t0 + rows), max(0, t0 - w + 1)  # queries t0..t1-1 reach keys k0..t1-1
        q = np.multiply(Q[b][t0:t1], Q.dtype.type(scale), order="C")  # (r, d_k), scaled per job: no copy of Q
        v1 = np.concatenate([V[b][k0:t1], np.ones((t1 - k0, 1), V.dtype)], axis=-1)  # (keys, d_v + 1): [V | 1]
        out[b][t0:t1] = _tiled_rows(q, K[b][k0:t1], v1, block, None, (t0 - k0, w), shift)

    run_jobs(run, [(b, t) for b in np.ndindex(*batch) for t in range(0, T, rows)],
             parallel=math.prod(batch) * T * min(w, T) > _TILE_ENTRIES)  # more than one tile of work
    return out


def _self_attention_len(Q, K, name: str) -> int:
    """T of a self-attention (queries and keys are the same T positions), or a ValueError."""
    if Q.shape[-2] != K.shape[-2]:
        raise ValueError(f"{name} needs as many keys as queries (self-attention, position t sees the "
                         f"keys before it); got T={Q.shape[-2]} queries and S={K.shape[-2]} keys")
    return Q.shape[-2]


# ---- Split-KV decoding (FlashDecoding, Dao et al. 2023). Taught in 13_long_context.ipynb. ----
def check_n_splits(n_splits, S: int) -> int:
    """n_splits, S keys -> n_splits as an int in 1 .. S; a ValueError otherwise (a chunk needs a key:
    no silent cap, and no work that grows with n_splits beyond S).

    >>> check_n_splits(3, 7)
    3
    """
    n_splits, S = _validate.positive_int(n_splits, "n_splits"), _validate.positive_int(S, "S")
    if n_splits > S:
        raise ValueError(f"n_splits={n_splits} is more than the S={S} keys: every chunk needs at least one key; "
                         f"give 1 <= n_splits <= {S}")
    return n_splits


def split_kv_partials(Q, K, V, n_splits: int, mask=None) -> tuple[list, list]:
    """Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v) -> n_splits partial outputs (..., T, d_v)
    and their log-sum-exps (..., T, 1), one per chunk of the keys.

    Chunk c holds keys ``np.array_split(range(S), n_splits)[c]`` (contiguous, sizes differ by at
    most one; ``1 <= n_splits <= S``, so no chunk is empty). As in Flash-Decoding, each chunk's
    scores are computed inside the chunk, from its own keys: at most (..., T, S / n_splits) scores
    live at once (never the whole T x S matrix), plus the n_splits outputs. Its output is the
    softmax-weighted mean of its values alone, and lse = log sum exp(scores of the chunk); a chunk
    the mask blocks entirely gives lse = -inf and a zero output. Each chunk is independent: on a
    GPU, one block of threads each.

    >>> rng = np.random.default_rng(0)
    >>> outs, lses = split_kv_partials(rng.normal(size=(1, 4)), rng.normal(size=(5, 4)), np.eye(5), 2)
    >>> [o.shape for o in outs], [l.shape for l in lses]
    ([(1, 5), (1, 5)], [(1, 1), (1, 1)])
    """
    Q, K, V, mask = check_attention_inputs(Q, K, V, mask)
    S = K.shape[-2]
    n_splits = check_n_splits(n_splits, S)
    if mask is not None:
        mask = np.broadcast_to(mask, (*Q.shape[:-1], S))  # (..., T, S), a view: its chunks are slices
    bounds = np.cumsum([0] + [len(c) for c in np.array_split(np.arange(S), n_splits)])  # (n_splits + 1,)
    outs, lses = [], []
    for lo, hi in zip(bounds[:-1], bounds[1:]):  # chunk c: keys lo .. hi - 1
        k, v = K[..., lo:hi, :], V[..., lo:hi, :]  # (..., c, d_k), (..., c, d_v): views
        s = Q @ np.swapaxes(k, -1, -2)  # (..., T, d_k) x (..., d_k, c) -> (..., T, c), the chunk's scores
        s /= math.sqrt(Q.shape[-1])  # in place, as every step below: one (..., T, c) array per chunk
        if mask is not None:
            s[~mask[..., lo:hi]] = -np.inf  # True = may attend
        m = s.max(axis=-1, keepdims=True)  # (..., T, 1); -inf: nothing allowed
        shift = np.where(np.isfinite(m), m, 0.0)
        s -= shift
        p = np.exp(s, out=s)  # (..., T, c)
        total = p.sum(axis=-1, keepdims=True)  # (..., T, 1)
        outs.append((p @ v) / np.where(total > 0, total, 1.0))  # (..., T, c) x (..., c, d_v) -> (..., T, d_v)
        with np.errstate(divide="ignore"):
            lses.append(np.where(total > 0, shift + np.log(total), -np.inf))  # (..., T, 1)
        del s, p  # freed before the next chunk's scores are made
    return outs, lses


def _partials(outs, lses) -> tuple[list, list]:
    """The checks of merge_attention_partials: as many lses as outputs (at least one), every output
    (..., T, d_v) finite and of one shape, every lse (..., T, 1) finite or -inf (a chunk with no key)."""
    for value, name in ((outs, "outs"), (lses, "lses")):
        if isinstance(value, np.ndarray) or not isinstance(value, (list, tuple)):
            raise TypeError(f"{name} must be a list (one entry per chunk), got {type(value).__name__}; "
                            "pass the two lists split_kv_partials returns")
    if not outs or len(outs) != len(lses):
        raise ValueError(f"outs has {len(outs)} partial outputs and lses {len(lses)} log-sum-exps; give one lse per "
                         "output, at least one of each (as split_kv_partials returns them)")
    for value, name in ((outs, "outs"), (lses, "lses")):
        kinds = [np.asarray(v).dtype.kind for v in value]
        if "b" in kinds:
            raise ValueError(f"{name}[{kinds.index('b')}] is boolean; {name} hold numbers (partial outputs and their "
                             "log-sum-exps, as split_kv_partials returns them), not masks")
    outs = [_validate.finite_array(o, f"outs[{i}]") for i, o in enumerate(outs)]
    lses = [_validate.float_array(l, f"lses[{i}]") for i, l in enumerate(lses)]
    for i, (o, l) in enumerate(zip(outs, lses)):
        if o.ndim < 2 or o.shape != outs[0].shape:
            raise ValueError(f"outs[{i}] has shape {o.shape}; every partial output is (..., T, d_v) of one shape "
                             f"({outs[0].shape})")
        if l.shape != o.shape[:-1] + (1,):
            raise ValueError(f"lses[{i}] has shape {l.shape} but outs[{i}] {o.shape}; an lse is (..., T, 1): "
                             f"{o.shape[:-1] + (1,)}, one per query row (keepdims=True)")
        if np.isnan(l).any() or (l == np.inf).any():
            raise ValueError(f"lses[{i}] holds NaN or +inf; a log-sum-exp is finite, or -inf for a chunk whose keys "
                             "are all masked")
    return outs, lses


def merge_attention_partials(outs, lses) -> np.ndarray:
    """n partial outputs (..., T, d_v) and their lses (..., T, 1) -> out (..., T, d_v), exactly.

    lse = log sum_c exp(lse_c) and out = sum_c exp(lse_c - lse) · out_c: each chunk's output
    weighted by its share of the softmax's denominator. Chunks with lse_c = -inf weigh 0; a
    row whose chunks are all -inf (every key masked) gives zeros, as in scaled_dot_product_attention.

    >>> merge_attention_partials([np.array([[1.0]]), np.array([[3.0]])], [np.zeros((1, 1))] * 2)
    array([[2.]])
    """
    outs, lses = _partials(outs, lses)
    lse_all = np.stack(lses)  # (n, ..., T, 1)
    m = lse_all.max(axis=0)  # (..., T, 1)
    shift = np.where(np.isfinite(m), m, 0.0)
    w = np.exp(lse_all - shift)  # (n, ..., T, 1): exp(lse_c - max)
    total = w.sum(axis=0)  # (..., T, 1)
    merged = sum(w_c * o for w_c, o in zip(w, outs))  # (..., T, d_v)
    return (merged / np.where(total > 0, total, 1.0)).astype(np.result_type(*outs), copy=False)


def split_kv_attention(Q, K, V, n_splits: int, mask=None) -> np.ndarray:
    """Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v), n_splits -> out (..., T, d_v).

    FlashDecoding's split-KV attention (Dao et al. 2023): the keys are cut into n_splits chunks
    (``split_kv_partials``: a partial output and its log-sum-exp per chunk, computed in
    parallel), then merged exactly (``merge_attention_partials``). The result equals
    ``scaled_dot_product_attention``'s output for any 1 <= n_splits <= S, whether or not it divides S
    (more splits than keys is a ValueError: a chunk needs a key).
    It helps when B · h is small and S long: one query per head leaves the other cores idle
    unless the keys are split too.

    >>> from mha_course.attention import scaled_dot_product_attention
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(2, 1, 4)), rng.normal(size=(2, 7, 4)), rng.normal(size=(2, 7, 3))
    >>> bool(np.allclose(split_kv_attention(Q, K, V, 3), scaled_dot_product_attention(Q, K, V)[0]))
    True
    """
    return merge_attention_partials(*split_kv_partials(Q, K, V, n_splits, mask))
