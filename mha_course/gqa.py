"""Grouped-query attention, the KV cache and multi-head latent attention (numpy only).

Shapes: ``B`` batch, ``T`` new queries, ``S`` keys (with a cache: every cached position),
``D = d_model``, ``h`` query heads, ``h_kv`` key/value heads, ``g = h // h_kv`` query heads
per key/value head, ``d_k = d_model // h``, ``d_c`` the latent size of MLA.

- **GQA** (Ainslie et al., 2023): query head i reads key/value head ``i // g``.
  ``h_kv = h`` is multi-head attention, ``h_kv = 1`` multi-query attention (Shazeer, 2019).
- **KV cache**: while generating, the keys and values of earlier tokens never change, so
  they are kept instead of recomputed. ``KVCache`` is the one object of the package that
  changes: ``grouped_query_attention(..., cache=cache)`` writes the new keys and values
  into it **in place** and advances ``cache.length``. Everything else here is pure.
- **MLA** (DeepSeek-V2, 2024): cache one latent ``c = x W_dkv`` of d_c numbers per token;
  keys and values are ``c W_uk`` and ``c W_uv``. It is multi-head attention with
  ``W_k = W_dkv W_uk`` (``mla_to_mha``), and W_uk, W_uv can be folded into the query and
  the output, so attention runs on the latents directly.

Mask convention: boolean, **True = may attend**, broadcastable to (B, h, T, S).

Taught in 09_kv_cache_and_gqa.ipynb.
"""
from __future__ import annotations

import math
from collections import namedtuple
from typing import NamedTuple, Optional

import numpy as np

from . import _validate
from .fast import attend
from .heads import combine_heads, split_heads
from .masks import causal_mask
from .mha import MHAParams, init_params, linear, rope_heads
from .positions import apply_rope, check_rope

__all__ = ["GQAParams", "init_gqa_params", "gqa_from_mha", "valid_kv_heads", "kv_heads", "KVCache",
           "cached_causal_mask", "grouped_query_attention", "MLAParams", "init_mla_params",
           "mla_to_mha", "LatentCache", "mla_attention", "kv_cache_bytes_per_token",
           "mla_cache_bytes_per_token", "CacheCost", "kv_cache_table", "RollingKVCache", "quantize_kv",
           "dequantize_kv"]


# ----------------------------------------------------------------------------- parameters
class GQAParams(namedtuple("GQAParams", MHAParams._fields, defaults=(None,) * 4)):
    """W_q, W_o (d_model, d_model); W_k, W_v (d_model, h_kv·d_k); biases to match, or None.

    The fields of MHAParams, used the same way (``x @ W + b``); ``GQAParams(*mha_params)``
    is the h_kv = h case.
    """
    __slots__ = ()

    @property
    def d_model(self) -> int:
        """The model width D."""
        return np.shape(self.W_q)[0]


def valid_kv_heads(h: int) -> list[int]:
    """h -> every h_kv that divides it (the values an h_kv slider may take).

    >>> valid_kv_heads(8)
    [1, 2, 4, 8]
    """
    return _validate.divisors(_validate.positive_int(h, "h"))


def kv_heads(h: int, h_kv) -> int:
    """h, h_kv -> h_kv as an int, checked: a positive whole number dividing h (else ValueError).

    >>> kv_heads(8, 2)
    2
    """
    h, h_kv = _validate.positive_int(h, "h"), _validate.positive_int(h_kv, "h_kv")
    if h % h_kv:
        valid = ", ".join(str(d) for d in valid_kv_heads(h))
        raise ValueError(f"h={h} is not divisible by h_kv={h_kv}; valid h_kv: {valid}")
    return h_kv


def init_gqa_params(d_model: int, h: int, h_kv: int, *, rng: np.random.Generator,
                    bias: bool = False, dtype=np.float64) -> GQAParams:
    """d_model, h, h_kv -> GQAParams: W_q, W_o (D, D), W_k, W_v (D, h_kv·d_k) (+ biases).

    The first h_kv·d_k columns of ``init_params``'s W_k and W_v, so with h_kv = h the
    parameters are exactly those of ``init_params`` for the same rng.

    >>> p = init_gqa_params(8, 4, 2, rng=np.random.default_rng(0))
    >>> p.W_q.shape, p.W_k.shape
    ((8, 8), (8, 4))
    """
    d_model = _validate.positive_int(d_model, "d_model")
    h = _validate.heads(d_model, h)
    width = kv_heads(h, h_kv) * (d_model // h)
    p = init_params(d_model, rng=rng, bias=bias, dtype=dtype)
    narrow = {name: getattr(p, name)[..., :width] for name in ("W_k", "W_v", "b_k", "b_v")
              if getattr(p, name) is not None}
    return GQAParams(*p)._replace(**narrow)


def gqa_from_mha(params: MHAParams, h: int, h_kv: int) -> GQAParams:
    """MHAParams, h, h_kv -> GQAParams whose key/value heads are the mean of each group of g.

    The conversion of Ainslie et al. (2023): mean-pool the K and V projections of the g heads
    that will share one key/value head (W_k (D, h·d_k) -> (D, h_kv·d_k)). h_kv = h changes nothing.

    >>> p = init_params(8, rng=np.random.default_rng(0))
    >>> gqa_from_mha(p, 4, 1).W_k.shape
    (8, 2)
    """
    if not isinstance(params, MHAParams):
        raise ValueError(f"params must be an MHAParams, got {type(params).__name__}; make one with "
                         "init_params(d_model, rng=np.random.default_rng(0))")
    D = np.shape(params.W_q)[0]
    h = _validate.heads(D, h)
    h_kv = kv_heads(h, h_kv)

    def pool(a):  # (..., h·d_k) -> (..., h_kv·d_k)
        a = np.asarray(a)
        grouped = a.reshape(*a.shape[:-1], h_kv, h // h_kv, D // h)  # (..., h_kv, g, d_k)
        return grouped.mean(axis=-2).reshape(*a.shape[:-1], -1)  # (..., h_kv·d_k)

    return GQAParams(*params)._replace(**{n: pool(getattr(params, n)) for n in ("W_k", "W_v", "b_k", "b_v")
                                          if getattr(params, n) is not None})


# ----------------------------------------------------------------------------- the cache
FIT_FIX = "make the cache with dtype=np.float32 (or np.float64), which holds it"


class _Cache:
    """Preallocated per-token buffers (batch, heads, max_len, width) and a fill ``length``."""

    def __init__(self, shapes: tuple, max_len: int, dtype):
        max_len = _validate.positive_int(max_len, "max_len")
        dtype = np.dtype(dtype)
        if dtype.kind != "f":
            raise ValueError(f"dtype={dtype} is not a float type; use np.float32 or np.float64")
        nbytes = sum(B * n * max_len * w for B, n, w in shapes) * dtype.itemsize
        _validate.fits_in_memory(nbytes, f"{type(self).__name__} with max_len={max_len}",
                                 "give a max_len of the tokens you will generate (prompt + new ones)")
        self.max_len = max_len
        self.length = 0
        self._buffers = tuple(np.zeros((B, n, max_len, w), dtype) for B, n, w in shapes)

    @property
    def nbytes(self) -> int:
        """Bytes held by the preallocated buffers (all max_len positions, filled or not)."""
        return sum(b.nbytes for b in self._buffers)

    @property
    def dtype(self) -> np.dtype:
        return self._buffers[0].dtype

    @property
    def shape(self) -> tuple:
        """The shape of one preallocated buffer: (batch, heads, max_len, width)."""
        return self._buffers[0].shape

    def _append(self, arrays) -> tuple:
        """Write (batch, heads, T, width) arrays at length .. length + T; return the filled views."""
        names = ("K", "V") if len(arrays) == 2 else ("latents",)
        arrays = [_validate.finite_array(a, n) for a, n in zip(arrays, names)]  # real, numeric, finite
        for arr, n in zip(arrays, names):
            _validate.ndim(arr, n, 4, "(batch, heads, new tokens, width)")
        T = arrays[0].shape[2]
        for buf, arr in zip(self._buffers, arrays):
            want = (*buf.shape[:2], T, buf.shape[3])
            if arr.shape != want:
                raise ValueError(f"cannot append shape {arr.shape} to a cache of shape {buf.shape}; "
                                 f"expected {want} (batch, heads, new tokens, width)")
        if self.length + T > self.max_len:
            raise ValueError(f"the cache holds {self.length} of max_len={self.max_len} tokens and "
                             f"cannot take {T} more; make it with max_len >= {self.length + T}")
        arrays = [_validate.cast(a, self.dtype, n, FIT_FIX) for a, n in zip(arrays, names)]  # before any write
        for buf, arr in zip(self._buffers, arrays):
            buf[:, :, self.length:self.length + T] = arr
        self.length += T
        return self._filled()

    def _filled(self) -> tuple:
        views = tuple(b[:, :, :self.length] for b in self._buffers)
        for v in views:
            v.flags.writeable = False
        return views

    def reset(self) -> None:
        """Forget every cached token (length 0); the buffers are kept for the next sequence."""
        self.length = 0

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(length={self.length}, max_len={self.max_len}, "
                f"shapes={[b.shape for b in self._buffers]}, nbytes={self.nbytes})")


class KVCache(_Cache):
    """Keys and values of every token seen so far: two (batch, h_kv, max_len, d_k) buffers.

    ``length`` counts the tokens cached, ``nbytes`` the bytes held (2·batch·h_kv·max_len·d_k
    ·itemsize). Passed as ``grouped_query_attention(..., cache=cache)`` it is **updated in
    place**: the call appends its keys and values and advances ``length``. ``keys`` and
    ``values`` are read-only views of the filled part. ``reset()`` starts a new sequence.

    >>> cache = KVCache(batch=1, h_kv=2, d_k=4, max_len=16)
    >>> cache.length, cache.nbytes, cache.keys.shape
    (0, 2048, (1, 2, 0, 4))
    """

    def __init__(self, batch: int, h_kv: int, d_k: int, max_len: int, dtype=np.float64):
        dims = [_validate.positive_int(v, n) for v, n in ((batch, "batch"), (h_kv, "h_kv"), (d_k, "d_k"))]
        super().__init__((tuple(dims),) * 2, max_len, dtype)

    def append(self, K, V) -> tuple[np.ndarray, np.ndarray]:
        """K, V (batch, h_kv, T, d_k) -> every cached K, V (batch, h_kv, length, d_k), read-only.

        >>> cache = KVCache(1, 1, 2, max_len=4)
        >>> K_all, V_all = cache.append(np.ones((1, 1, 3, 2)), np.zeros((1, 1, 3, 2)))
        >>> cache.length, K_all.shape
        (3, (1, 1, 3, 2))
        """
        return self._append((np.asarray(K), np.asarray(V)))

    @property
    def keys(self) -> np.ndarray:
        return self._filled()[0]

    @property
    def values(self) -> np.ndarray:
        return self._filled()[1]

    def next_mask(self, T: int) -> np.ndarray:
        """T new queries -> (T, length + T) bool: what they may attend once appended (causal)."""
        return cached_causal_mask(T, self.length)


ROLLING_POSITIONS = ("absolute", "cache")  # where RollingKVCache's sinks sit (StreamingLLM: "cache")


def cached_causal_mask(T: int, offset: int) -> np.ndarray:
    """T new queries after ``offset`` cached tokens -> (T, offset + T) bool, True = may attend.

    Query t sits at absolute position offset + t and may attend keys 0 .. offset + t.
    ``offset = 0`` is ``causal_mask(T)``; a decode step (T = 1) may attend everything. This is the
    package's one causal convention when T != S (bottom-right aligned, S = offset + T; also
    ``tiled_attention(causal=True)`` and ``linear_attention(causal=True)``); PyTorch's
    ``is_causal=True`` aligns top-left (query t sees keys 0..t) instead.

    >>> cached_causal_mask(2, 3).astype(int)
    array([[1, 1, 1, 1, 0],
           [1, 1, 1, 1, 1]])
    """
    return causal_mask(T, offset)  # (T, offset + T): the one builder (masks.py)


class RollingKVCache:
    """The first ``sinks`` and the last ``window`` tokens' keys and values: (batch, h_kv, n, d_k) each.

    KVCache's interface for contexts longer than memory allows: ``length`` counts every token
    seen, ``nbytes`` the bytes of what it holds (at most 2·batch·h_kv·(sinks + window)·d_k·itemsize,
    however long the sequence), ``positions`` the absolute positions held, ``keys``/``values``
    read-only arrays. ``grouped_query_attention(..., cache=rolling)`` **updates it in place**:
    the new keys are rotated at their absolute positions (with ``rope_base``) and appended, the
    queries attend under ``next_mask`` (key s within the window t - window < s <= t, or s < sinks),
    then everything older than the window, except the sinks, is dropped. ``sinks = 0`` is
    Mistral's rolling buffer (Jiang et al. 2023).

    Where a kept sink sits is ``positions``:

    - ``"absolute"`` (default): every key keeps its absolute position, so a sink drifts ever farther
      from the query (distance t - s), to distances a model trained on short sequences never saw;
    - ``"cache"``: StreamingLLM's (Xiao et al. 2023 §3.2): positions are assigned inside the cache,
      the sinks first, then the window, so the query sees sink s at distance sinks + window - 1 - s
      at most, never farther. The window keys keep their distances (t - s either way); the sinks'
      keys are turned on by the gap, which needs the ``rope_base`` the attention rotates with. Once
      the window has slid, this cache takes one token per call (each query has its own gap).

    >>> cache = RollingKVCache(batch=1, h_kv=1, d_k=2, window=3, sinks=1)
    >>> _ = cache.append(np.ones((1, 1, 6, 2)), np.ones((1, 1, 6, 2)))
    >>> cache.length, cache.positions.tolist(), cache.nbytes
    (6, [0, 3, 4, 5], 128)
    >>> cache = RollingKVCache(1, 1, 2, window=3, sinks=1, positions="cache", rope_base=10000.0)
    >>> for t in range(6):
    ...     _ = cache.append(np.ones((1, 1, 1, 2)), np.ones((1, 1, 1, 2)))
    >>> cache.cache_positions(5).tolist()  # sink 0 at 0, window 3, 4, 5 at 1, 2, 3: the query is at 3
    [0, 1, 2, 3]
    """

    def __init__(self, batch: int, h_kv: int, d_k: int, window: int, sinks: int = 0, dtype=np.float64,
                 positions: str = "absolute", rope_base=None):
        dims = tuple(_validate.positive_int(v, n) for v, n in ((batch, "batch"), (h_kv, "h_kv"), (d_k, "d_k")))
        self.window = _validate.positive_int(window, "window")
        if isinstance(sinks, bool) or not isinstance(sinks, (int, np.integer)) or sinks < 0:
            raise ValueError(f"sinks={sinks!r} must be a whole number >= 0 (0: no attention sinks kept)")
        if positions not in ROLLING_POSITIONS:
            raise ValueError(f"positions={positions!r}; choose 'absolute' (every key at its absolute position) or "
                             "'cache' (StreamingLLM: positions assigned inside the cache)")
        if positions == "cache" and rope_base is None:
            raise ValueError("positions='cache' moves the sinks' RoPE rotation: give the rope_base the attention "
                             "rotates with, for example rope_base=10000.0")
        if rope_base is not None:  # checked in either mode, though only positions='cache' uses it
            check_rope(dims[2], rope_base)  # a ValueError naming a bad rope_base or an odd d_k
        self.position_mode, self.rope_base = positions, rope_base
        dtype = np.dtype(dtype)
        if dtype.kind != "f":
            raise ValueError(f"dtype={dtype} is not a float type; use np.float32 or np.float64")
        self.sinks, self.shape, self.length = int(sinks), dims, 0
        B, h_kv, d_k = dims
        self._keys = self._values = np.zeros((B, h_kv, 0, d_k), dtype)  # (B, h_kv, n, d_k)
        self._positions = np.zeros(0, dtype=np.int64)  # (n,): absolute positions held

    @property
    def nbytes(self) -> int:
        """Bytes of the keys and values held now (sinks + window at most)."""
        return self._keys.nbytes + self._values.nbytes

    @property
    def dtype(self) -> np.dtype:
        return self._keys.dtype

    @property
    def positions(self) -> np.ndarray:
        """(n,) the absolute positions of the tokens held, in order."""
        return self._positions.copy()

    @property
    def keys(self) -> np.ndarray:
        return _read_only(self._keys)

    @property
    def values(self) -> np.ndarray:
        return _read_only(self._values)

    def cache_positions(self, t: int) -> np.ndarray:
        """(n,) the positions of the held keys as a query at absolute position t sees them: absolute, or
        with ``positions="cache"`` numbered inside the cache: the sinks 0 .. sinks - 1, then the window,
        everything after the sinks moved down by the gap max(0, t - (sinks + window - 1)), the query
        to t - gap. The distances query - key are what RoPE sees. ``t``: a whole number, at least the last
        position held (a query sees only keys at or before it).
        """
        last = int(self._positions[-1]) if self._positions.size else 0
        if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)) or t < last:
            raise ValueError(f"t={t!r} must be a whole number >= {last} (the last position held): the position "
                             "of a query that may see every key held")
        return self._positions - np.where(self._positions < self.sinks, 0, self._gap(t))

    def _gap(self, t: int) -> int:
        """How far the sinks move up for a query at t (0 with absolute positions)."""
        return max(0, int(t) - (self.sinks + self.window - 1)) if self.position_mode == "cache" else 0

    def next_mask(self, T: int) -> np.ndarray:
        """T new queries -> (T, n + T) bool over the n held and T new keys: causal, and s within
        the window (t - window < s) or a sink (s < sinks), with t, s absolute positions.

        >>> RollingKVCache(1, 1, 2, window=2, sinks=1).next_mask(4).astype(int)
        array([[1, 0, 0, 0],
               [1, 1, 0, 0],
               [1, 1, 1, 0],
               [1, 0, 1, 1]])
        """
        T = _validate.positive_int(T, "T")
        t = self.length + np.arange(T)[:, None]  # (T, 1): the queries' positions
        s = np.concatenate([self._positions, self.length + np.arange(T)])[None, :]  # (1, n + T)
        return (s <= t) & ((s > t - self.window) | (s < self.sinks))  # (T, n + T)

    def append(self, K, V) -> tuple[np.ndarray, np.ndarray]:
        """K, V (batch, h_kv, T, d_k) -> the held and new K, V (batch, h_kv, n + T, d_k), read-only;
        then keeps only the sinks and the last ``window`` tokens.

        >>> cache = RollingKVCache(1, 1, 2, window=2)
        >>> K_all, _ = cache.append(np.ones((1, 1, 3, 2)), np.ones((1, 1, 3, 2)))
        >>> K_all.shape, cache.keys.shape, cache.length
        ((1, 1, 3, 2), (1, 1, 2, 2), 3)
        """
        K, V = _validate.finite_array(K, "K"), _validate.finite_array(V, "V")  # real, numeric, finite
        want = (*self.shape[:2], K.shape[2] if K.ndim == 4 else 0, self.shape[2])
        if K.ndim != 4 or K.shape != want or V.shape != want or want[2] == 0:
            raise ValueError(f"cannot append K {K.shape}, V {V.shape} to a rolling cache of (batch, h_kv, d_k) = "
                             f"{self.shape}; expected two arrays (batch, h_kv, T >= 1, d_k) of one shape")
        K, V = _validate.cast(K, self.dtype, "K", FIT_FIX), _validate.cast(V, self.dtype, "V", FIT_FIX)
        T = K.shape[2]
        gap = self._gap(self.length + T - 1)  # the last query's; with "cache", every query's must agree
        if T > 1 and self._gap(self.length) != gap:
            raise ValueError(f"positions='cache': the {T} new queries at {self.length}..{self.length + T - 1} see the "
                             f"sinks at different distances once the window ({self.window}) is full; append one "
                             "token per call")
        K_all = np.concatenate([self._keys, K.astype(self.dtype)], axis=2)  # (B, h_kv, n + T, d_k)
        V_all = np.concatenate([self._values, V.astype(self.dtype)], axis=2)
        pos = np.concatenate([self._positions, self.length + np.arange(T)])  # (n + T,)
        self.length += T
        keep = (pos < self.sinks) | (pos >= self.length - self.window)  # the sinks and the last window
        self._keys, self._values, self._positions = K_all[:, :, keep], V_all[:, :, keep], pos[keep]
        if gap and self.sinks:  # StreamingLLM: the sinks' keys (rotated at s) turned on to s + gap, as the query
            sink = pos < self.sinks
            K_all = K_all.copy()
            K_all[:, :, sink] = apply_rope(K_all[:, :, sink], np.full(int(sink.sum()), gap), base=self.rope_base)
        return _read_only(K_all), _read_only(V_all)

    def reset(self) -> None:
        """Forget every token (length 0); the window, sinks, dtype and position mode stay."""
        self.__init__(*self.shape, self.window, self.sinks, self.dtype, self.position_mode, self.rope_base)

    def __repr__(self) -> str:
        return (f"RollingKVCache(length={self.length}, window={self.window}, sinks={self.sinks}, "
                f"held={self._positions.size}, nbytes={self.nbytes})")


def _read_only(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


# ----------------------------------------------------------------------------- attention
CACHE_TYPES = "a KVCache, a RollingKVCache or a PagedKVCache's sequence(i)"


def check_cache_type(cache, context) -> None:
    """Refuse what is not a cache and a cache with ``context=`` (ValueError), before anything runs."""
    missing = [a for a in ("shape", "length", "next_mask", "append") if not hasattr(cache, a)]
    if missing:
        raise ValueError(f"cache must be {CACHE_TYPES}, got {type(cache).__name__} (it has no "
                        f"{', '.join(missing)}); make one with KVCache(batch, h_kv, d_k, max_len)")
    if context is not None:
        raise ValueError(f"cache= ({type(cache).__name__}) holds the keys of the tokens being generated "
                         "(self-attention); with context= (cross-attention) the keys do not grow: compute them "
                         "once and pass no cache")


def _check_cache(cache, B: int, h_kv: int, d_k: int) -> None:
    """The cache's (batch, h_kv, d_k) against this call's, with a fix for each kind of cache."""
    name = type(cache).__name__
    if isinstance(cache, KVCache):
        want = (B, h_kv, cache.max_len, d_k)
        if cache.shape != want:
            raise ValueError(f"the cache has shape {cache.shape} but this call needs (batch={B}, "
                             f"h_kv={h_kv}, max_len, d_k={d_k}); make a {name}({B}, {h_kv}, {d_k}, max_len)")
        return
    shape = tuple(cache.shape)
    if shape != (B, h_kv, d_k):
        fixes = {"RollingKVCache": f"make the rolling cache as RollingKVCache({B}, {h_kv}, {d_k}, window)",
                 "PagedSequence": "a PagedKVCache sequence holds one row (batch 1): decode each row with its own "
                                  f"pool.sequence(i), from a PagedKVCache(n_blocks, block_size, h_kv={h_kv}, d_k={d_k})"}
        raise ValueError(f"cache ({name}) holds (batch, h_kv, d_k) = {shape} but this call needs "
                         f"({B}, {h_kv}, {d_k}); {fixes.get(name, 'make the cache for these sizes')}")


def _grouped_attend(Qh, Kh, Vh, mask, bias=None) -> tuple[np.ndarray, np.ndarray]:
    """Qh (B, h, T, d_k), Kh, Vh (B, h_kv, S, d_k) -> out (B, h, T, d_k), weights (B, h, T, S).

    Query head i reads key/value head i // g. The g query heads of a group are stacked on a new
    axis, so the h_kv keys broadcast against them: nothing is copied h // h_kv times.
    """
    B, h, T, d_k = Qh.shape
    h_kv, S = Kh.shape[1], Kh.shape[2]
    Qg = Qh.reshape(B, h_kv, h // h_kv, T, d_k)             # (B, h_kv, g, T, d_k)
    Kg, Vg = Kh[:, :, None], Vh[:, :, None]                 # (B, h_kv, 1, S, d_k)
    def grouped(a):  # (..., h|1, T|1, S|1) -> (B|1, h_kv|1, g|1, T|1, S|1): query head i in group i // g
        m = a.reshape((1,) * (4 - a.ndim) + a.shape)
        return m[:, :, None] if m.shape[1] == 1 else m.reshape(m.shape[0], h_kv, h // h_kv, *m.shape[2:])

    mask = None if mask is None else grouped(mask)
    bias = None if bias is None else grouped(bias)
    out, weights = attend(Qg, Kg, Vg, mask, bias=bias)      # (B, h_kv, g, T, d_k), (..., T, S)
    return out.reshape(B, h, T, d_k), weights.reshape(B, h, T, S)


def grouped_query_attention(x, params: GQAParams, h: int, h_kv: int, mask=None, context=None,
                            cache: Optional[KVCache] = None, rope_base=None, *, rope_scaling=None, bias=None):
    """x (B, T, d_model) [, context (B, S, d_model)] -> out (B, T, d_model), weights (B, h, T, S).

    Multi-head attention in which the h query heads share h_kv key/value heads (query head i
    reads key/value head i // (h // h_kv)). ``rope_base``: rotate queries and keys by RoPE at
    their absolute positions (``positions.apply_rope``). ``mask``: boolean, True = may attend,
    broadcastable to (B, h, T, S).

    ``cache``: a KVCache, **updated in place**. This call rotates its new keys at positions
    cache.length .. cache.length + T - 1, appends them and their values, and attends causally
    over every cached token (S = the new cache.length; ``mask``, if given, is combined with
    that causal mask). The same call does the prefill (T prompt tokens) and each decode step (T = 1).
    A ``RollingKVCache`` works the same way over the tokens it holds (S = the sinks and window it
    held before the call + T), under its window-and-sinks mask (``RollingKVCache.next_mask``).
    ``rope_scaling`` and ``bias`` as in ``multi_head_attention`` (``bias`` broadcastable to the
    (B, h, T, S) scores, S counting the cached keys).

    >>> rng = np.random.default_rng(0)
    >>> p = init_gqa_params(8, h=4, h_kv=2, rng=rng)
    >>> out, w = grouped_query_attention(rng.normal(size=(1, 5, 8)), p, h=4, h_kv=2)
    >>> out.shape, w.shape
    ((1, 5, 8), (1, 4, 5, 5))
    """
    if not isinstance(params, GQAParams):  # a GQAParams(*mha_params) is the h_kv = h case
        raise ValueError(f"params must be a GQAParams, got {type(params).__name__}; make one with "
                         "init_gqa_params(d_model, h, h_kv, rng=np.random.default_rng(0))")
    h_kv = _validate.positive_int(h_kv, "h_kv")  # None would make attention_call check multi-head parameters
    B, T = np.shape(x)[:2] if np.ndim(x) == 3 else (None, None)
    if cache is not None:
        check_cache_type(cache, context)
        if getattr(cache, "position_mode", "absolute") == "cache" and cache.rope_base != rope_base:
            raise ValueError(f"the RollingKVCache numbers positions inside the cache with rope_base={cache.rope_base!r} "
                             f"but this call rotates with rope_base={rope_base!r}: pass the same rope_base to both")
    start = 0 if cache is None else cache.length
    allowed = None if cache is None or T is None else cache.next_mask(T)  # (T, S): causal, or window and sinks
    x, ctx, p, h, h_kv, mask = _validate.attention_call(
        x, params, h, h_kv, mask, context, GQAParams, rope_base, S=None if allowed is None else allowed.shape[1])
    check_rope(x.shape[2] // h, rope_base, rope_scaling)
    if cache is not None:
        _check_cache(cache, B, h_kv, x.shape[2] // h)
        mask = allowed if mask is None else mask & allowed
    S = ctx.shape[1] if allowed is None else allowed.shape[1]
    bias = None if bias is None else _validate.score_bias(bias, (x.shape[0], h, x.shape[1], S), x.dtype)
    Qh = rope_heads(split_heads(linear(x, p.W_q, p.b_q), h), rope_base, start, rope_scaling)       # (B, h, T, d_k)
    Kh = rope_heads(split_heads(linear(ctx, p.W_k, p.b_k), h_kv), rope_base, start, rope_scaling)  # (B, h_kv, T|S, d_k)
    Vh = split_heads(linear(ctx, p.W_v, p.b_v), h_kv)                                   # (B, h_kv, T|S, d_k)
    if cache is not None:
        Kh, Vh = (a.astype(x.dtype, copy=False) for a in cache.append(Kh, Vh))  # (B, h_kv, S, d_k)
    heads_out, weights = _grouped_attend(Qh, Kh, Vh, mask, bias)  # (B, h, T, d_k), (B, h, T, S)
    return linear(combine_heads(heads_out), p.W_o, p.b_o), weights  # (B, T, D)


# ----------------------------------------------------------------------------- MLA
class MLAParams(NamedTuple):
    """W_q, W_o (d_model, d_model); W_dkv (d_model, d_c) down to the latent; W_uk, W_uv (d_c, d_model) up.

    Keys are ``(x W_dkv) W_uk``, values ``(x W_dkv) W_uv``; only the latent x W_dkv is cached.
    """
    W_q: np.ndarray
    W_dkv: np.ndarray
    W_uk: np.ndarray
    W_uv: np.ndarray
    W_o: np.ndarray


def init_mla_params(d_model: int, h: int, d_latent: int, *, rng: np.random.Generator,
                    dtype=np.float64) -> MLAParams:
    """d_model, h, d_latent -> MLAParams; entries ~ N(0, 1/fan_in), randomness only from ``rng``.

    >>> p = init_mla_params(8, 2, 3, rng=np.random.default_rng(0))
    >>> p.W_dkv.shape, p.W_uk.shape
    ((8, 3), (3, 8))
    """
    d_model = _validate.positive_int(d_model, "d_model")
    _validate.heads(d_model, h)
    d_c = _validate.positive_int(d_latent, "d_latent")
    square = init_params(d_model, rng=rng, dtype=dtype)  # checks rng and dtype too
    W_dkv = rng.normal(0.0, 1.0 / math.sqrt(d_model), size=(d_model, d_c)).astype(dtype)
    W_uk, W_uv = rng.normal(0.0, 1.0 / math.sqrt(d_c), size=(2, d_c, d_model)).astype(dtype)
    return MLAParams(square.W_q, W_dkv, W_uk, W_uv, square.W_o)


def mla_to_mha(params: MLAParams) -> MHAParams:
    """MLAParams -> the MHAParams it expands into: W_k = W_dkv W_uk, W_v = W_dkv W_uv (D, D).

    Their multi_head_attention equals mla_attention (tests/core/test_gqa.py), at h·d_k / d_c times
    the cached numbers per token.

    >>> p = init_mla_params(8, 2, 3, rng=np.random.default_rng(0))
    >>> int(np.linalg.matrix_rank(mla_to_mha(p).W_k))  # rank d_c: a low-rank key projection
    3
    """
    if not isinstance(params, MLAParams):
        raise ValueError(f"params must be MLAParams, got {type(params).__name__}; make them with "
                         "init_mla_params(d_model, h, d_latent, rng=np.random.default_rng(0))")
    return MHAParams(params.W_q, params.W_dkv @ params.W_uk, params.W_dkv @ params.W_uv, params.W_o)


class LatentCache(_Cache):
    """The MLA cache: one (batch, 1, max_len, d_latent) buffer of latents, updated in place.

    >>> cache = LatentCache(batch=1, d_latent=4, max_len=16)
    >>> cache.nbytes  # 1 · 16 · 4 · 8 bytes: one latent per token instead of h keys and h values
    512
    """

    def __init__(self, batch: int, d_latent: int, max_len: int, dtype=np.float64):
        dims = (_validate.positive_int(batch, "batch"), 1, _validate.positive_int(d_latent, "d_latent"))
        super().__init__((dims,), max_len, dtype)

    def append(self, C) -> np.ndarray:
        """C (batch, T, d_latent) -> every cached latent (batch, length, d_latent), read-only."""
        C = np.asarray(C)
        C = _validate.finite_array(C, "latents")
        _validate.ndim(C, "latents", 3, "(batch, new tokens, d_latent)")
        return self._append((C[:, None],))[0][:, 0]

    @property
    def latents(self) -> np.ndarray:
        return self._filled()[0][:, 0]


def mla_attention(x, params: MLAParams, h: int, mask=None, cache: Optional[LatentCache] = None):
    """x (B, T, d_model) -> out (B, T, d_model), weights (B, h, T, S), attending over latents.

    The absorbed form: q_i · k_j = (q_i W_uk,iᵀ) · c_j, so each query is mapped into the latent
    space and scored against the cached latents c (B, S, d_c); the weighted latents go up through
    W_uv per head. ``cache`` (a LatentCache, updated in place) works as in
    ``grouped_query_attention``: causal over every cached token. No RoPE here: DeepSeek-V2 adds a
    small extra key of d_rope numbers per token for it, because a rotation between q and W_uk
    would stop W_uk from being folded into the query.

    >>> p = init_mla_params(8, 2, 3, rng=np.random.default_rng(0))
    >>> out, w = mla_attention(np.ones((1, 4, 8)), p, h=2)
    >>> out.shape, w.shape
    ((1, 4, 8), (1, 2, 4, 4))
    """
    x, params, mask, start = _check_mla(x, params, h, mask, cache)  # checked whole before the cache changes
    d_c, d_k = params.W_dkv.shape[1], x.shape[2] // h
    C = linear(x, params.W_dkv)                               # (B, T, d_c): the latents
    C = C if cache is None else cache.append(C).astype(x.dtype, copy=False)  # (B, S, d_c)
    W_uk = params.W_uk.reshape(d_c, h, d_k).transpose(1, 2, 0)  # (h, d_k, d_c)
    W_uv = params.W_uv.reshape(d_c, h, d_k).transpose(1, 0, 2)  # (h, d_c, d_k)
    Qh = split_heads(linear(x, params.W_q), h)                # (B, h, T, d_k)
    Q_lat = Qh @ W_uk * x.dtype.type(math.sqrt(d_c / d_k))   # (B, h, T, d_c); attend scales by 1/sqrt(d_c)
    out_lat, weights = attend(Q_lat, C[:, None], C[:, None], mask)  # (B, h, T, d_c), (B, h, T, S)
    heads_out = out_lat @ W_uv                                # (B, h, T, d_c) x (h, d_c, d_k) -> (B, h, T, d_k)
    return linear(combine_heads(heads_out), params.W_o), weights


def _check_mla(x, params, h, mask, cache):
    """Checked x, the mask (combined with the cached causal mask) and the first new position."""
    x = _validate.finite_array(x, "x")  # a NaN, even at a padding position, would spread
    _validate.ndim(x, "x", 3, "(B, T, d_model)")
    _validate.nonempty(x, "x", "(B, T, d_model)")
    (B, T, D) = x.shape
    h = _validate.heads(D, h)
    if not isinstance(params, MLAParams) or np.shape(params.W_q) != (D, D):
        raise ValueError(f"params must be MLAParams for d_model={D}; make them with "
                         f"init_mla_params({D}, {h}, d_latent, rng=np.random.default_rng(0))")
    d_c = np.shape(params.W_dkv)[-1] if np.ndim(params.W_dkv) == 2 else None
    wants = {"W_q": (D, D), "W_dkv": (D, d_c), "W_uk": (d_c, D), "W_uv": (d_c, D), "W_o": (D, D)}
    arrays = {}
    for name, want in wants.items():
        a = _validate.finite_array(getattr(params, name), f"params.{name}")  # NaN parameters are refused
        if d_c is None or a.shape != want:
            raise ValueError(f"params.{name} has shape {a.shape}, expected {want if d_c else '(d_model, d_latent)'} "
                             f"for d_model={D}, d_latent={d_c}; make params with init_mla_params({D}, {h}, "
                             "d_latent, rng=np.random.default_rng(0))")
        arrays[name] = a.astype(x.dtype, copy=False)
    params = params._replace(**arrays)
    if cache is not None and not isinstance(cache, LatentCache):
        raise ValueError(f"cache must be a LatentCache, got {type(cache).__name__}; "
                         "make one with LatentCache(batch, d_latent, max_len)")
    if cache is not None and cache.shape[::3] != (B, d_c):
        raise ValueError(f"the cache holds latents of shape (batch, d_latent) = {cache.shape[::3]}, but this "
                         f"call makes ({B}, {d_c}); make a LatentCache({B}, {d_c}, max_len)")
    start = 0 if cache is None else cache.length
    if mask is not None:
        mask = _validate.bool_mask(mask, (B, h, T, start + T), "(B, h, T, S)")
    if cache is not None:
        mask = cached_causal_mask(T, start) if mask is None else mask & cached_causal_mask(T, start)
    return x, params, mask, start


# ----------------------------------------------------------------------------- what the cache costs
def kv_cache_bytes_per_token(layers: int, h_kv: int, d_k: int, bytes_per_number: int = 2) -> int:
    """Bytes the KV cache grows by per token: 2 (K and V) · layers · h_kv · d_k · bytes_per_number.

    >>> kv_cache_bytes_per_token(layers=32, h_kv=8, d_k=128)  # a 7B-class GQA model in fp16
    131072
    """
    dims = [_validate.positive_int(v, n) for v, n in
            ((layers, "layers"), (h_kv, "h_kv"), (d_k, "d_k"), (bytes_per_number, "bytes_per_number"))]
    return 2 * math.prod(dims)


def mla_cache_bytes_per_token(layers: int, d_latent: int, d_rope: int = 0,
                              bytes_per_number: int = 2) -> int:
    """Bytes per token of an MLA cache: layers · (d_latent + d_rope) · bytes_per_number.

    One latent per token and layer, shared by every head, plus DeepSeek-V2's small RoPE key.

    >>> mla_cache_bytes_per_token(layers=32, d_latent=512, d_rope=64)
    36864
    """
    layers, d_c, b = (_validate.positive_int(v, n) for v, n in
                      ((layers, "layers"), (d_latent, "d_latent"), (bytes_per_number, "bytes_per_number")))
    if isinstance(d_rope, bool) or not isinstance(d_rope, (int, np.integer)) or d_rope < 0:
        raise ValueError(f"d_rope={d_rope!r} must be a whole number >= 0 (0: no RoPE key)")
    return layers * (d_c + int(d_rope)) * b


class CacheCost(NamedTuple):
    """One row of ``kv_cache_table``: a variant, what it caches per token and layer, and the bytes."""
    name: str
    cached: str
    bytes_per_token: int
    total_bytes: tuple


def kv_cache_table(layers: int, d_model: int, h: int, h_kv: int, seq_lens, bytes_per_number: int = 2,
                   d_latent: Optional[int] = None, d_rope: Optional[int] = None) -> list[CacheCost]:
    """Sizes -> CacheCost rows for MHA (h_kv = h), GQA (h_kv), MQA (h_kv = 1) and MLA, batch 1.

    MLA's latent defaults to DeepSeek-V2's ratios: d_latent = 4·d_k, d_rope = d_k / 2.

    >>> rows = kv_cache_table(32, 4096, 32, 8, [4096])
    >>> [(r.name, r.bytes_per_token, r.total_bytes[0] // 2**20) for r in rows]  # bytes, MiB at 4k
    [('MHA', 524288, 2048), ('GQA', 131072, 512), ('MQA', 16384, 64), ('MLA', 36864, 144)]
    """
    d_k = d_model // _validate.heads(_validate.positive_int(d_model, "d_model"), h)
    h_kv = kv_heads(h, h_kv)
    d_c = 4 * d_k if d_latent is None else d_latent
    d_r = d_k // 2 if d_rope is None else d_rope
    per_token = [("MHA", f"{h} K + {h} V heads of {d_k}", kv_cache_bytes_per_token(layers, h, d_k, bytes_per_number)),
                 ("GQA", f"{h_kv} K + {h_kv} V heads of {d_k}",
                  kv_cache_bytes_per_token(layers, h_kv, d_k, bytes_per_number)),
                 ("MQA", f"1 K + 1 V head of {d_k}", kv_cache_bytes_per_token(layers, 1, d_k, bytes_per_number)),
                 ("MLA", f"a latent of {d_c} + a RoPE key of {d_r}",
                  mla_cache_bytes_per_token(layers, d_c, d_r, bytes_per_number))]
    lens = _validate.positive_ints(seq_lens, "seq_lens")
    lens = [int(n) for n in np.atleast_1d(lens)]
    return [CacheCost(name, what, b, tuple(b * n for n in lens)) for name, what, b in per_token]


# ----------------------------------------------------------------------------- KV quantisation
def quantize_kv(x, bits: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """x (..., d_k) -> q (..., d_k) int8, scale (..., 1): symmetric, one scale per token and head.

    scale = max |x| over d_k / (2^(bits-1) - 1) and q = round(x / scale) (half to even), so q lies
    in -(2^(bits-1) - 1) .. 2^(bits-1) - 1 and ``dequantize_kv(q, scale)`` is within scale / 2 of x
    in every entry. ``bits`` from 2 to 16: q is int8 up to 8 bits (a 4-bit cache packs two codes
    per byte), int16 above. A row of zeros gets scale 0 and comes back as zeros.

    >>> q, scale = quantize_kv(np.array([[0.5, -1.0, 0.25]]), bits=8)
    >>> q.tolist(), scale.round(5).tolist()
    ([[64, -127, 32]], [[0.00787]])
    """
    x = _validate.finite_array(x, "x")
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"x has shape {x.shape}; give keys or values (..., d_k) with d_k >= 1: one scale is "
                         "taken over the last axis of each row")
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not 2 <= bits <= 16:
        raise ValueError(f"bits={bits!r} must be a whole number from 2 to 16 (8 and 4 are the usual ones)")
    levels = 2 ** (int(bits) - 1) - 1  # 127 for 8 bits, 7 for 4
    scale = np.abs(x).max(axis=-1, keepdims=True) / levels  # (..., 1)
    q = np.rint(x / np.where(scale > 0, scale, 1.0))  # (..., d_k) whole numbers in -levels .. levels
    return np.clip(q, -levels, levels).astype(np.int8 if bits <= 8 else np.int16), scale


def dequantize_kv(q, scale) -> np.ndarray:
    """q (..., d_k) ints, scale (..., 1) -> x (..., d_k) = q · scale, scale's dtype.

    >>> dequantize_kv(*quantize_kv(np.array([[0.5, -1.0, 0.25]]))).round(3)
    array([[ 0.504, -1.   ,  0.252]])
    """
    scale = _validate.finite_array(scale, "scale")
    q = np.asarray(q)
    if q.dtype == np.bool_ or not np.issubdtype(q.dtype, np.integer):
        raise ValueError(f"q has dtype {q.dtype}; give the integer codes that quantize_kv returned")
    if q.ndim == 0 or scale.shape != q.shape[:-1] + (1,):
        raise ValueError(f"scale has shape {scale.shape} but q {q.shape}; give the scale quantize_kv returned with "
                         f"q: {q.shape[:-1] + (1,) if q.ndim else '(..., 1)'}, one per row (keepdims=True)")
    return q.astype(scale.dtype) * scale  # (..., d_k) x (..., 1)
