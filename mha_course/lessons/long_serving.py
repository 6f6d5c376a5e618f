"""Serving many requests at once, notebook 13's caches for it (numpy): PagedAttention (Kwon et al.
2023, vLLM) keeps every sequence's keys and values in fixed-size blocks of one shared pool, with a
block table per sequence; ``serve`` decodes requests of different lengths with it or with contiguous
caches; ``split_kv_threaded`` is split-KV (flash-decoding) attention with its chunks on threads.

Shapes: ``h_kv`` key/value heads, ``d_k`` head size, ``T`` new tokens, ``V`` vocabulary.

    >>> pool = PagedKVCache(n_blocks=4, block_size=2, h_kv=1, d_k=1)
    >>> _ = pool.sequence(0).append(np.ones((1, 1, 3, 1)), np.ones((1, 1, 3, 1)))
    >>> pool.tables[0], len(pool.free)
    ([0, 1], 2)

Taught in 13_long_context.ipynb (re-exported by ``lessons.long_context``).
"""
from __future__ import annotations

import numbers
from typing import NamedTuple, Optional

import numpy as np

from .. import _validate
from ..efficient import check_attention_inputs, check_n_splits, merge_attention_partials, split_kv_partials
from ..gqa import KVCache, cached_causal_mask
from ..runtime import run_jobs
from . import _args
from . import gqa as decode

__all__ = ["PagedKVCache", "PagedSequence", "ServeResult", "serve", "split_kv_threaded"]


class PagedKVCache:
    """A pool of ``n_blocks`` blocks of ``block_size`` tokens' keys and values, shared by sequences.

    Each sequence owns a **block table** (the ids of its blocks, in order); a block is taken from
    the free list only when the previous one is full, so a sequence wastes at most block_size - 1
    slots (Kwon et al. 2023, vLLM). ``sequence(i)`` returns the object that
    ``grouped_query_attention(..., cache=...)`` fills for sequence i. ``release(i)`` gives its blocks back.

    >>> pool = PagedKVCache(n_blocks=8, block_size=4, h_kv=1, d_k=2)
    >>> s = pool.sequence(0)
    >>> _ = s.append(np.ones((1, 1, 6, 2)), np.ones((1, 1, 6, 2)))
    >>> pool.tables[0], pool.used_slots, pool.filled_slots
    ([0, 1], 8, 6)
    """

    def __init__(self, n_blocks: int, block_size: int, h_kv: int, d_k: int, dtype=np.float64):
        n_blocks, self.block_size, self.h_kv, self.d_k = (
            _validate.positive_int(v, n) for v, n in
            ((n_blocks, "n_blocks"), (block_size, "block_size"), (h_kv, "h_kv"), (d_k, "d_k")))
        try:
            dtype = np.dtype(dtype)
        except TypeError:
            dtype = None
        if dtype is None or dtype.kind != "f":
            raise ValueError(f"dtype={dtype} is not a float type; use np.float32 or np.float64")
        self.keys = np.zeros((n_blocks, self.h_kv, self.block_size, self.d_k), dtype)  # the pool
        self.values = np.zeros_like(self.keys)
        self.free = list(range(n_blocks))
        self.tables: dict = {}   # sequence id -> [block ids]
        self.lengths: dict = {}  # sequence id -> tokens held

    def sequence(self, seq) -> "PagedSequence":
        """The cache of sequence ``seq`` (created empty on first use): ``seq`` is a whole number or a string."""
        _sequence_id(seq)
        self.tables.setdefault(seq, [])
        self.lengths.setdefault(seq, 0)
        return PagedSequence(self, seq)

    def held(self, seq) -> tuple:
        """(block table, length) of sequence ``seq``; a ValueError if the pool does not hold it."""
        _sequence_id(seq)
        if seq not in self.tables:
            known = ", ".join(repr(k) for k in self.tables) or "none"
            raise ValueError(f"seq={seq!r}: the pool holds no sequence {seq!r} (it holds: {known}); it was released or "
                             f"never made: call pool.sequence({seq!r}) for a new, empty one")
        return self.tables[seq], self.lengths[seq]

    def _checked(self, a, name: str) -> np.ndarray:
        """K or V: real, finite, (1, h_kv, T >= 1, d_k), values that fit the pool's dtype."""
        a = _validate.finite_array(a, name)
        want = f"(1, h_kv={self.h_kv}, T >= 1, d_k={self.d_k})"
        if a.ndim != 4 or a.shape[0] != 1 or a.shape[1] != self.h_kv or a.shape[3] != self.d_k or a.shape[2] < 1:
            fix = ("a PagedKVCache sequence holds one row: append each row to its own pool.sequence(i)"
                   if a.ndim == 4 and a.shape[0] > 1 else "make the pool with the sizes of your keys")
            raise ValueError(f"{name} has shape {a.shape}; a sequence of this pool takes {want}: {fix}")
        return _validate.cast(a, self.keys.dtype, name, "make the PagedKVCache with dtype=np.float32 (or np.float64)")

    def append(self, seq, K, V) -> tuple:
        """K, V (1, h_kv, T, d_k) of sequence ``seq`` -> all its keys and values (1, h_kv, length, d_k).

        Everything is checked before anything changes: a refused append leaves the pool as it was.
        """
        table, n = self.held(seq)
        K, V = self._checked(K, "K"), self._checked(V, "V")
        if K.shape != V.shape:
            raise ValueError(f"K has shape {K.shape} but V has shape {V.shape}; give one value per key")
        T = K.shape[2]
        need = -(-(n + T) // self.block_size) - len(table)  # new blocks for the T tokens
        if need > len(self.free):
            raise ValueError(f"sequence {seq!r} needs {need} more blocks of {self.block_size} for {T} tokens, but "
                             f"only {len(self.free)} of the pool's {self.keys.shape[0]} are free (the rest are all in use); make a bigger "
                             "PagedKVCache or release finished sequences")
        table.extend(self.free.pop(0) for _ in range(need))  # a new block only when the last one is full
        for i in range(T):
            pos = n + i
            block, slot = table[pos // self.block_size], pos % self.block_size
            self.keys[block, :, slot], self.values[block, :, slot] = K[0, :, i], V[0, :, i]
        self.lengths[seq] = n + T
        return self.gather(seq)

    def gather(self, seq) -> tuple:
        """Sequence ``seq``'s keys and values in order, read through its block table: (1, h_kv, length, d_k)."""
        table, n = self.held(seq)
        K = self.keys[table].transpose(1, 0, 2, 3).reshape(self.h_kv, -1, self.d_k)[:, :n]  # (h_kv, n, d_k)
        V = self.values[table].transpose(1, 0, 2, 3).reshape(self.h_kv, -1, self.d_k)[:, :n]
        return K[None], V[None]

    def release(self, seq) -> None:
        """Give sequence ``seq``'s blocks back to the free list."""
        table, _ = self.held(seq)
        self.free.extend(table)
        del self.tables[seq], self.lengths[seq]

    @property
    def used_slots(self) -> int:
        """Token slots in blocks that belong to some sequence."""
        return sum(len(t) for t in self.tables.values()) * self.block_size

    @property
    def filled_slots(self) -> int:
        """Token slots that hold a token."""
        return sum(self.lengths.values())


def _sequence_id(seq) -> None:
    """A sequence id is a whole number or a string; True would alias 1 (True == 1) and 1.0 too, so neither is one."""
    if isinstance(seq, (bool, np.bool_)) or not isinstance(seq, (numbers.Integral, str)):
        raise TypeError(f"seq={seq!r:.40} must be a whole number or a string naming the sequence (e.g. the "
                        "request's number); bools and floats are refused (True == 1 and 1.0 == 1 would share one)")


class PagedSequence:
    """One sequence of a PagedKVCache, with KVCache's interface for grouped_query_attention: ``length``,
    ``keys`` and ``values`` (1, h_kv, length, d_k) read through its block table, ``next_mask``,
    ``append`` and ``reset`` (its blocks back to the pool, the sequence empty)."""

    def __init__(self, pool: PagedKVCache, seq):
        if not isinstance(pool, PagedKVCache):
            raise TypeError(f"pool must be a PagedKVCache, got {type(pool).__name__}; use pool.sequence(i)")
        pool.held(seq)
        self.pool, self.seq = pool, seq
        self.shape = (1, pool.h_kv, pool.d_k)

    @property
    def length(self) -> int:
        return self.pool.held(self.seq)[1]

    def next_mask(self, T: int) -> np.ndarray:
        """T new queries -> (T, length + T) bool, causal (as KVCache.next_mask)."""
        return cached_causal_mask(T, self.length)

    @property
    def keys(self) -> np.ndarray:
        return self.pool.gather(self.seq)[0]

    @property
    def values(self) -> np.ndarray:
        return self.pool.gather(self.seq)[1]

    def append(self, K, V) -> tuple:
        """K, V (1, h_kv, T, d_k) -> all the sequence's keys and values (1, h_kv, length, d_k)."""
        return self.pool.append(self.seq, K, V)

    def reset(self) -> None:
        """Give the sequence's blocks back to the pool and start it again, empty (as KVCache.reset)."""
        self.pool.release(self.seq)
        self.pool.sequence(self.seq)


class ServeResult(NamedTuple):
    """What ``serve`` gives back: the tokens and last logits of each request, and the slots."""
    tokens: list          # per request: prompt + new tokens (1-D ints)
    logits: list          # per request: (n_new, V) the logits each new token was picked from
    reserved_slots: int   # token slots the caches set aside (per layer)
    filled_slots: int     # token slots that hold a token (per layer)


def serve(params, config, prompts, n_new: int, *, max_len: int, block_size: Optional[int] = None) -> ServeResult:
    """Greedy decoding of several prompts of different lengths, each with its own cache per layer.

    ``block_size`` None: contiguous KVCache(1, ..., max_len) per request (what a server that
    reserves max_len per request holds); otherwise one PagedKVCache per layer shared by all
    requests. Both run decode.forward_cached, so the tokens and logits are the same.
    """
    config = _args.model(params, config)
    n_new = _validate.positive_int(n_new, "n_new")
    max_len = _validate.positive_int(max_len, "max_len")
    if block_size is not None:
        block_size = _validate.positive_int(block_size, "block_size")
    if isinstance(prompts, (str, bytes)) or not hasattr(prompts, "__len__") or len(prompts) == 0:
        raise ValueError(f"prompts must be a non-empty list of prompts (1-D token ids), got {type(prompts).__name__}"
                         f"{'' if not hasattr(prompts, '__len__') else ' of length ' + str(len(prompts))}; "
                         "give at least one, e.g. [np.array([1, 2, 3])]")
    prompts = [_validate.token_ids(p, config.vocab, f"prompts[{i}]") for i, p in enumerate(prompts)]
    for i, p in enumerate(prompts):
        if p.ndim != 1 or p.size == 0:
            raise ValueError(f"prompts[{i}] has shape {p.shape}; each prompt is 1-D with at least one token")
        if p.size + n_new > max_len:
            raise ValueError(f"prompts[{i}] has {p.size} tokens and n_new={n_new}: {p.size + n_new} > "
                             f"max_len={max_len}; give max_len >= {p.size + n_new}")
    h_kv, d_k = config.h_kv or config.h, config.d_model // config.h
    if block_size is None:
        caches = [[KVCache(1, h_kv, d_k, max_len) for _ in params.layers] for _ in prompts]
        reserved = len(prompts) * max_len
    else:
        n_blocks = sum(-(-(len(p) + n_new) // block_size) for p in prompts)
        pools = [PagedKVCache(n_blocks, block_size, h_kv, d_k) for _ in params.layers]
        caches = [[pool.sequence(i) for pool in pools] for i in range(len(prompts))]
    runs = [_greedy(params, config, prompt, n_new, cache) for prompt, cache in zip(prompts, caches)]
    tokens, logits = [r[0] for r in runs], [r[1] for r in runs]
    filled = sum(len(p) + n_new - 1 for p in prompts)  # the last new token is never fed back
    if block_size is not None:
        reserved = pools[0].used_slots
    return ServeResult(tokens, logits, reserved, filled)


def _greedy(params, config, prompt, n_new: int, caches) -> tuple:
    """One request: ``gqa.greedy_steps`` on its paged caches -> (tokens (P + n_new,), logits (n_new, V))."""
    prompt = np.asarray(prompt)
    steps = list(decode.greedy_steps(params, config, prompt[None], n_new, caches=caches))  # [((1,), (1, V))]
    return np.concatenate([prompt, [int(t[0]) for t, _ in steps]]), np.stack([logits[0] for _, logits in steps])


# ----------------------------------------------------------------------------- split-KV, timed
def split_kv_threaded(Q, K, V, n_splits: int, workers: int, mask=None) -> np.ndarray:
    """``split_kv_attention`` (the same inputs, the same numbers) with its chunks computed in parallel
    (``workers`` > 1: the package's one pool of a thread per core, BLAS on one thread inside it,
    ``fast.run_jobs``), then merged; for timing. n_splits > S is refused, as by split_kv_attention."""
    Q, K, V, mask = check_attention_inputs(Q, K, V, mask)
    workers = _validate.positive_int(workers, "workers")
    S = K.shape[-2]
    n_splits = check_n_splits(n_splits, S)
    if mask is not None:
        mask = np.broadcast_to(mask, mask.shape[:-1] + (S,))  # (..., T|1, S): sliced per chunk
    chunks = np.array_split(np.arange(S), n_splits)
    parts = [None] * len(chunks)

    def part(i):
        c = chunks[i]
        parts[i] = split_kv_partials(Q, K[..., c, :], V[..., c, :], 1, None if mask is None else mask[..., c])

    run_jobs(part, list(range(len(chunks))), parallel=workers > 1)
    return merge_attention_partials([o[0] for o, _ in parts], [lse[0] for _, lse in parts])


