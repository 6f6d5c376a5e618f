"""The KV caches: what a decoder keeps of earlier tokens instead of recomputing it (numpy only).

Shapes: ``batch`` rows, ``h_kv`` key/value heads, ``d_k`` head size, ``max_len`` the positions a cache
can hold, ``T`` new tokens per call, ``d_latent`` the latent size of MLA.

- ``KVCache``: two preallocated (batch, h_kv, max_len, d_k) buffers, filled left to right; ``LatentCache``,
  MLA's one (batch, 1, max_len, d_latent) buffer of latents. ``cached_causal_mask`` is what T new queries
  may attend once appended (the package's causal convention when T != S, bottom-right aligned).
- ``RollingKVCache``: the attention sinks and the last ``window`` tokens only (Mistral's rolling buffer,
  StreamingLLM's sinks), so memory stays bounded however long the sequence.
- ``quantize_kv`` / ``dequantize_kv``: a cache stored in 8 (or fewer) bits, one scale per token and head.

They are the objects of the package that change: ``gqa.grouped_query_attention(..., cache=cache)``
(and ``gqa.mla_attention``) writes into them **in place**. Every operation checks everything first,
then changes the state. Their names stay importable from ``mha_course.gqa``.

Taught in 09_kv_cache_and_gqa.ipynb and 13_long_context.ipynb.
"""
from __future__ import annotations

import numpy as np

from . import _validate
from .masks import causal_mask
from .positions import apply_rope, check_rope

__all__ = ["KVCache", "LatentCache", "RollingKVCache", "cached_causal_mask", "ROLLING_POSITIONS", "FIT_FIX",
           "quantize_kv", "dequantize_kv"]

# ----------------------------------------------------------------------------- the caches
FIT_FIX = "make the cache with dtype=np.float32 (or np.float64), which holds it"


class _Cache:
    """Preallocated per-token buffers (batch, heads, max_len, width) and a fill ``length``."""

    def __init__(self, shapes: tuple, max_len: int, dtype):
        max_len = _validate.positive_int(max_len, "max_len")
        dtype = np.dtype(dtype)
        if dtype.kind != "f":
            raise ValueError(f"dtype={dtype} is not a float type; use np.float32 or np.float64")
        nbytes = sum(B * n * max_len * w for B, n, w in shapes) * dtype.itemsize
        _validate.allocation(nbytes, f"{type(self).__name__} with max_len={max_len}",
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
        """Forget every cached token (length 0), in new buffers of the same shape: the arrays an earlier
        ``append`` returned keep the tokens they showed (appends only ever write past them, and the next
        sequence writes into buffers of its own)."""
        self._buffers = tuple(np.zeros_like(b) for b in self._buffers)
        self.length = 0

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(length={self.length}, max_len={self.max_len}, "
                f"shapes={[b.shape for b in self._buffers]}, nbytes={self.nbytes})")


class KVCache(_Cache):
    """Keys and values of every token seen so far: two (batch, h_kv, max_len, d_k) buffers.

    ``length`` counts the tokens cached, ``nbytes`` the bytes held (2·batch·h_kv·max_len·d_k
    ·itemsize). Passed as ``grouped_query_attention(..., cache=cache)`` it is **updated in
    place**: the call appends its keys and values and advances ``length``. ``keys``, ``values`` and
    what ``append`` returns are read-only views of the filled part; they never change afterwards (later
    appends write past them, ``reset()`` starts the next sequence in new buffers).

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
        """T new queries -> (T, length + T) bool: what they may attend once appended (causal).

        Refused (a ValueError) when T more tokens would not fit in max_len, as ``append`` refuses them."""
        T = _validate.positive_int(T, "T")
        if self.length + T > self.max_len:
            raise ValueError(f"the cache holds {self.length} of max_len={self.max_len} tokens and "
                             f"cannot take {T} more; make it with max_len >= {self.length + T}")  # as append says
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
