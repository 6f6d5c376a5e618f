"""The caches under Hypothesis state machines: a refused call leaves the cache exactly as it was.

Each machine runs a cache next to a plain reference (lists of the arrays appended) through valid
appends, appends past the capacity, hostile appends (NaN, inf, the wrong batch, h_kv, d_k or rank,
values that do not fit the cache's dtype, strings) and resets or releases; after every step the
cache holds what the reference says, and every refusal is a ValueError or TypeError.

- KVCache and LatentCache: every token appended, up to max_len.
- RollingKVCache: the first ``sinks`` tokens and the last ``window``.
- PagedKVCache: several sequences sharing a pool of blocks; a block belongs to one sequence or to
  the free list, never both; ``release`` gives the blocks back; a released sequence is refused.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule

import mha_course as mc
from mha_course.lessons.long_context import PagedKVCache, PagedSequence

settings.register_profile("mha-course-states", derandomize=True, database=None, deadline=None, max_examples=25,
                          stateful_step_count=20, suppress_health_check=list(HealthCheck))
STATES = settings.get_profile("mha-course-states")
DTYPES = st.sampled_from([np.float16, np.float32, np.float64])
HOSTILE = st.sampled_from(["nan", "inf", "batch", "heads", "width", "rank", "too big", "string", "empty"])


def _values(seed: int, shape, scale=1.0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape) * scale


def _hostile(kind: str, good: np.ndarray):
    """A bad array in place of ``good`` (batch, heads, T, width)."""
    bad = good.copy()
    if kind == "nan":
        bad.flat[0] = np.nan
    elif kind == "inf":
        bad.flat[-1] = -np.inf
    elif kind == "batch":
        bad = np.concatenate([good, good], axis=0)
    elif kind == "heads":
        bad = np.concatenate([good, good], axis=1)
    elif kind == "width":
        bad = good[..., :-1] if good.shape[-1] > 1 else np.concatenate([good, good], axis=-1)
    elif kind == "rank":
        bad = good[0]
    elif kind == "too big":
        bad = np.full_like(good, 1e39)  # past float16 and float32
    elif kind == "string":
        return "spam"
    elif kind == "empty":
        bad = good[:, :, :0]
    return bad


def _refused(call) -> None:
    with pytest.raises((ValueError, TypeError)):
        call()


def _fits(dtype, kind) -> bool:
    """Does the "too big" attack fit this dtype (float64 holds 1e39: then it is a valid append)."""
    return kind == "too big" and np.dtype(dtype) == np.float64


class FlatCacheMachine(RuleBasedStateMachine):
    """KVCache (two buffers) or LatentCache (one), against lists of the appended arrays."""

    @initialize(kind=st.sampled_from(["kv", "latent"]), batch=st.integers(1, 2), heads=st.integers(1, 2),
                width=st.integers(1, 3), max_len=st.integers(1, 6), dtype=DTYPES)
    def make(self, kind, batch, heads, width, max_len, dtype):
        self.kind, self.dtype, self.max_len = kind, np.dtype(dtype), max_len
        if kind == "kv":
            self.cache, self.shape = mc.KVCache(batch, heads, width, max_len, dtype), (batch, heads, width)
        else:
            self.cache, self.shape = mc.LatentCache(batch, width, max_len, dtype), (batch, 1, width)
        self.ref, self.seed = [], 0

    def _arrays(self, T, scale=1.0):
        self.seed += 1
        B, n, w = self.shape
        return [_values(self.seed + i, (B, n, T, w), scale) for i in range(2 if self.kind == "kv" else 1)]

    def _append(self, arrays):
        if self.kind == "kv":
            return self.cache.append(*arrays)
        return self.cache.append(arrays[0][:, 0] if isinstance(arrays[0], np.ndarray) and arrays[0].ndim == 4
                                 else arrays[0])

    @rule(T=st.integers(1, 4))
    def append(self, T):
        arrays = self._arrays(T)
        if sum(a[0].shape[2] for a in self.ref) + T > self.max_len:
            _refused(lambda: self._append(arrays))  # past max_len
            return
        got = self._append(arrays)
        self.ref.append(arrays)
        got = got if self.kind == "kv" else (got[:, None],)
        for g, want in zip(got, self._held()):
            np.testing.assert_array_equal(g, want)

    @rule(kind=HOSTILE, which=st.integers(0, 1))
    def append_hostile(self, kind, which):
        arrays = self._arrays(1)
        if _fits(self.dtype, kind) or (kind in ("rank", "heads") and self.kind == "latent"):
            return  # a valid append (float64 holds 1e39); a latent has no heads axis (C is 3-D)
        arrays[min(which, len(arrays) - 1)] = _hostile(kind, arrays[min(which, len(arrays) - 1)])
        if kind == "empty" and self.kind == "latent":
            try:  # no tokens at all: refused, or a no-op (the invariant checks nothing changed)
                self._append(arrays)
            except (ValueError, TypeError):
                pass
            return
        _refused(lambda: self._append(arrays))

    @rule()
    def reset(self):
        self.cache.reset()
        self.ref = []

    def _held(self):
        n = 2 if self.kind == "kv" else 1
        if not self.ref:
            B, h, w = self.shape
            return [np.zeros((B, h, 0, w), self.dtype)] * n
        return [np.concatenate([a[i] for a in self.ref], axis=2).astype(self.dtype) for i in range(n)]

    @invariant()
    def holds_what_was_appended(self):
        assert self.cache.length == sum(a[0].shape[2] for a in self.ref)
        held = [self.cache.keys, self.cache.values] if self.kind == "kv" else [self.cache.latents[:, None]]
        for got, want in zip(held, self._held()):
            assert got.dtype == self.dtype and np.isfinite(got).all()
            np.testing.assert_array_equal(got, want)


class RollingCacheMachine(RuleBasedStateMachine):
    """RollingKVCache against the list of every token: it holds the sinks and the last window."""

    @initialize(batch=st.integers(1, 2), h_kv=st.integers(1, 2), d_k=st.integers(1, 3), window=st.integers(1, 4),
                sinks=st.integers(0, 2), dtype=DTYPES)
    def make(self, batch, h_kv, d_k, window, sinks, dtype):
        self.cache = mc.RollingKVCache(batch, h_kv, d_k, window, sinks, dtype)
        self.shape, self.window, self.sinks, self.dtype = (batch, h_kv, d_k), window, sinks, np.dtype(dtype)
        self.K, self.V, self.seed = [], [], 0

    def _kv(self, T):
        self.seed += 2
        B, h, d = self.shape
        return _values(self.seed, (B, h, T, d)), _values(self.seed + 1, (B, h, T, d))

    def _kept(self):
        pos = np.arange(len(self.K))
        return pos[(pos < self.sinks) | (pos >= len(self.K) - self.window)]

    def _stack(self, tokens, idx):
        B, h, d = self.shape
        if len(idx) == 0:
            return np.zeros((B, h, 0, d), self.dtype)
        return np.stack([tokens[i] for i in idx], axis=2).astype(self.dtype)  # (B, h, n, d)

    @rule(T=st.integers(1, 5))
    def append(self, T):
        K, V = self._kv(T)
        held = self._kept()
        got_K, got_V = self.cache.append(K, V)
        self.K += [K[:, :, t] for t in range(T)]
        self.V += [V[:, :, t] for t in range(T)]
        idx = list(held) + list(range(len(self.K) - T, len(self.K)))  # what it held, then the new ones
        np.testing.assert_array_equal(got_K, self._stack(self.K, idx))
        np.testing.assert_array_equal(got_V, self._stack(self.V, idx))

    @rule(kind=HOSTILE, which=st.integers(0, 1))
    def append_hostile(self, kind, which):
        K, V = self._kv(2)
        if _fits(self.dtype, kind):
            return
        if which:
            V = _hostile(kind, V)
        else:
            K = _hostile(kind, K)
        _refused(lambda: self.cache.append(K, V))

    @rule()
    def reset(self):
        self.cache.reset()
        self.K, self.V = [], []

    @invariant()
    def holds_the_sinks_and_the_window(self):
        assert self.cache.length == len(self.K)
        np.testing.assert_array_equal(self.cache.positions, self._kept())
        np.testing.assert_array_equal(self.cache.keys, self._stack(self.K, self._kept()))
        np.testing.assert_array_equal(self.cache.values, self._stack(self.V, self._kept()))


class PagedPoolMachine(RuleBasedStateMachine):
    """PagedKVCache: sequences take blocks as they grow, give them back on release, refuse what is wrong."""
    sequences = Bundle("sequences")

    @initialize(n_blocks=st.integers(1, 6), block_size=st.integers(1, 3), h_kv=st.integers(1, 2),
                d_k=st.integers(1, 2), dtype=DTYPES)
    def make(self, n_blocks, block_size, h_kv, d_k, dtype):
        self.pool = PagedKVCache(n_blocks, block_size, h_kv, d_k, dtype)
        self.n_blocks, self.block_size, self.dims, self.dtype = n_blocks, block_size, (h_kv, d_k), np.dtype(dtype)
        self.ref: dict = {}  # seq -> [(K, V) per token]
        self.next_id, self.seed, self.released = 0, 0, set()

    def _kv(self, T):
        self.seed += 2
        h, d = self.dims
        return _values(self.seed, (1, h, T, d)), _values(self.seed + 1, (1, h, T, d))

    def _blocks(self, n):
        return -(-n // self.block_size)

    @rule(target=sequences)
    def new_sequence(self):
        seq = self.next_id
        self.next_id += 1
        self.ref[seq] = []
        return self.pool.sequence(seq)

    @rule(s=sequences, T=st.integers(1, 5))
    def append(self, s, T):
        K, V = self._kv(T)
        if s.seq not in self.ref:
            _refused(lambda: s.append(K, V))  # released: refused, not a KeyError
            return
        n = len(self.ref[s.seq])
        need = self._blocks(n + T) - self._blocks(n)
        free = self.n_blocks - sum(self._blocks(len(v)) for v in self.ref.values())
        if need > free:
            _refused(lambda: s.append(K, V))  # the pool is full: nothing taken
            return
        got_K, got_V = s.append(K, V)
        self.ref[s.seq] += [(K[:, :, t], V[:, :, t]) for t in range(T)]
        np.testing.assert_array_equal(got_K, self._held(s.seq, 0))
        np.testing.assert_array_equal(got_V, self._held(s.seq, 1))

    @rule(s=sequences, kind=HOSTILE, which=st.integers(0, 1))
    def append_hostile(self, s, kind, which):
        K, V = self._kv(2)
        if _fits(self.dtype, kind) and s.seq in self.ref:
            return
        if which:
            V = _hostile(kind, V)
        else:
            K = _hostile(kind, K)
        _refused(lambda: s.append(K, V))

    @rule(s=sequences)
    def release(self, s):
        if s.seq not in self.ref:
            _refused(lambda: self.pool.release(s.seq))  # twice: refused, not a KeyError
            return
        self.pool.release(s.seq)
        del self.ref[s.seq]

    @rule(seq=st.integers(100, 102))
    def release_unknown(self, seq):
        _refused(lambda: self.pool.release(seq))

    @rule()
    def a_sequence_of_a_released_id_is_refused(self):
        gone = [seq for seq in range(self.next_id) if seq not in self.ref]
        if gone:
            _refused(lambda: PagedSequence(self.pool, gone[0]))

    def _held(self, seq, i):
        h, d = self.dims
        tokens = self.ref[seq]
        if not tokens:
            return np.zeros((1, h, 0, d), self.dtype)
        return np.stack([t[i] for t in tokens], axis=2).astype(self.dtype)

    @invariant()
    def blocks_are_owned_once_and_hold_the_tokens(self):
        tables = self.pool.tables
        assert set(tables) == set(self.ref)
        owned = [b for t in tables.values() for b in t]
        assert len(owned) == len(set(owned)) and not set(owned) & set(self.pool.free)
        assert sorted(owned + self.pool.free) == list(range(self.n_blocks))
        for seq, tokens in self.ref.items():
            assert len(tables[seq]) == self._blocks(len(tokens)) and self.pool.lengths[seq] == len(tokens)
            K, V = self.pool.gather(seq)
            np.testing.assert_array_equal(K, self._held(seq, 0))
            np.testing.assert_array_equal(V, self._held(seq, 1))
        assert self.pool.used_slots == sum(self._blocks(len(t)) for t in self.ref.values()) * self.block_size


TestFlatCache = FlatCacheMachine.TestCase
TestRollingCache = RollingCacheMachine.TestCase
TestPagedPool = PagedPoolMachine.TestCase
for _case in (TestFlatCache, TestRollingCache, TestPagedPool):
    _case.settings = STATES


def test_the_findings_of_qa3_one_by_one():
    """The reproducers of qa3-findings.md (PagedKVCache, float16 caches, GQA's messages), each held."""
    pool = PagedKVCache(2, 2, 1, 1)
    s = pool.sequence(0)
    _refused(lambda: s.append(np.ones((1, 1, 5, 1)), np.ones((1, 1, 5, 1))))
    assert pool.tables == {0: []} and pool.free == [0, 1]  # the refused append took no block
    s.append(np.ones((1, 1, 1, 1)), np.ones((1, 1, 1, 1)))  # and the sequence still takes a token
    assert pool.used_slots == 2 and pool.filled_slots == 1
    with pytest.raises(ValueError, match="one row"):
        pool.sequence(1).append(np.ones((2, 1, 1, 1)), np.ones((2, 1, 1, 1)))  # batch 2: no row dropped
    with pytest.raises(ValueError, match=r"h_kv=1"):
        pool.sequence(2).append(np.ones((1, 2, 1, 1)), np.ones((1, 2, 1, 1)))  # no broadcast into the pool
    with pytest.raises(ValueError, match="non-finite"):
        s.append(np.full((1, 1, 1, 1), np.nan), np.ones((1, 1, 1, 1)))
    with pytest.raises(ValueError, match="not a float type"):
        PagedKVCache(2, 2, 1, 1, dtype=int)  # 0.7 would be stored as 0
    with pytest.raises(ValueError, match="more than float16 can hold.*dtype=np.float32"):
        PagedKVCache(2, 2, 1, 1, dtype=np.float16).sequence(0).append(np.full((1, 1, 1, 1), 1e5), np.ones((1, 1, 1, 1)))
    with pytest.raises(ValueError, match="holds no sequence 7"):
        pool.release(7)
    pool.release(0)
    with pytest.raises(ValueError, match="holds no sequence 0"):
        _ = s.length  # use after release
    for cache in (mc.KVCache(1, 1, 2, 4, np.float16), mc.RollingKVCache(1, 1, 2, 4, dtype=np.float16)):
        with pytest.raises(ValueError, match="more than float16 can hold"):
            cache.append(np.full((1, 1, 1, 2), 1e5), np.ones((1, 1, 1, 2)))
        assert cache.length == 0
    rng = np.random.default_rng(0)
    p = mc.init_gqa_params(8, 2, 1, rng=rng)
    x = rng.normal(size=(2, 3, 8))
    with pytest.raises(ValueError, match=r"PagedSequence.*one row \(batch 1\)"):
        mc.grouped_query_attention(x, p, 2, 1, cache=PagedKVCache(8, 2, 1, 4).sequence(0))
    with pytest.raises(ValueError, match="with context= .cross-attention."):
        mc.grouped_query_attention(x, p, 2, 1, context=x, cache=mc.RollingKVCache(2, 1, 4, window=4))
    with pytest.raises(ValueError, match="it has no shape"):
        mc.grouped_query_attention(x, p, 2, 1, cache=type("Duck", (), {"length": 0, "next_mask": 0, "append": 0})())
    # float16 keys of 1e5 through GQA: refused, not a NaN output
    with pytest.raises(ValueError, match="more than float16 can hold"):
        mc.grouped_query_attention(x * 1e5, p, 2, 1, cache=mc.KVCache(2, 1, 4, 8, np.float16))
