"""Grouped-query attention, the KV cache and multi-head latent attention (numpy only).

Shapes: ``B`` batch, ``T`` new queries, ``S`` keys (with a cache: every cached position),
``D = d_model``, ``h`` query heads, ``h_kv`` key/value heads, ``g = h // h_kv`` query heads
per key/value head, ``d_k = d_model // h``, ``d_c`` the latent size of MLA.

- **GQA** (Ainslie et al., 2023): query head i reads key/value head ``i // g``.
  ``h_kv = h`` is multi-head attention, ``h_kv = 1`` multi-query attention (Shazeer, 2019).
- **KV cache**: while generating, the keys and values of earlier tokens never change, so
  they are kept instead of recomputed. The caches live in ``kvcache.py`` (``KVCache``,
  ``RollingKVCache``, ``LatentCache``, importable from here too): ``grouped_query_attention(...,
  cache=cache)`` writes the new keys and values into one **in place** and advances
  ``cache.length``. Everything in this module is pure.
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
from .heads import MAX_D_MODEL, combine_heads, split_heads, valid_heads
from .kvcache import (
    FIT_FIX,
    ROLLING_POSITIONS,
    KVCache,
    LatentCache,
    RollingKVCache,
    cached_causal_mask,
    dequantize_kv,
    quantize_kv,
)
from .mha import MHAParams, init_params, linear, rope_heads
from .positions import check_rope

__all__ = ["GQAParams", "init_gqa_params", "gqa_from_mha", "valid_kv_heads", "kv_heads", "KVCache",
           "cached_causal_mask", "grouped_query_attention", "MLAParams", "init_mla_params",
           "mla_to_mha", "LatentCache", "mla_attention", "kv_cache_bytes_per_token",
           "mla_cache_bytes_per_token", "CacheCost", "kv_cache_table", "RollingKVCache", "quantize_kv",
           "dequantize_kv", "FIT_FIX", "ROLLING_POSITIONS"]


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
    h = _validate.positive_int(h, "h")
    if h > MAX_D_MODEL:
        raise ValueError(f"h={h} is more than MAX_D_MODEL = 2**40 heads; give the h of the attention")
    return valid_heads(h)  # the divisors of h, found as the h of a d_model


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
        rolling_base = getattr(cache, "rope_base", None)  # a RollingKVCache's (a KVCache has none)
        if (getattr(cache, "position_mode", "absolute") == "cache" or rolling_base is not None) \
                and rolling_base != rope_base:
            raise ValueError(f"the RollingKVCache was made with rope_base={rolling_base!r} "
                             f"but this call rotates with rope_base={rope_base!r}: pass the same rope_base to both "
                             "(or make the cache without one, with positions='absolute')")
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
    _validate.allocation(3 * 8 * d_model * d_c, f"MLA's latent projections (d_model, d_latent) = ({d_model}, {d_c})",
                         "choose a smaller d_latent (it is meant to be much smaller than d_model)")
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
