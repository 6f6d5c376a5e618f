"""Checkers for notebook 09: ``kv_append``, ``offset_causal_mask``, ``kv_bytes_per_token``.

Every case has another batch, h_kv, cached length, number of new tokens and d_k (the cache may
be empty, and T may be 1 or a whole prompt), so neither a constant nor a square mask fits.
"""
from __future__ import annotations

import numpy as np

from ..gqa import cached_causal_mask, kv_cache_bytes_per_token
from .engine import Case, Exercise, Mistake

__all__ = ["kv_append", "offset_causal_mask", "kv_bytes_per_token", "KV_APPEND", "OFFSET_CAUSAL_MASK",
           "KV_BYTES_PER_TOKEN"]


# ---------------------------------------------------------------------------------------
# the cache append
# ---------------------------------------------------------------------------------------

def _append_ref(K_cache, V_cache, K_new, V_new):
    return np.concatenate([K_cache, K_new], axis=2), np.concatenate([V_cache, V_new], axis=2)


def _append_cases():
    rng = np.random.default_rng(20240909)
    sizes = ((1, 2, 0, 5, 4), (2, 1, 3, 1, 2), (3, 4, 6, 2, 8), (1, 8, 1, 1, 3), (2, 2, 5, 3, 6))
    return [Case(tuple(rng.normal(size=(B, h_kv, n, d_k)) for n in (S, S, T, T)),
                 f"batch {B}, h_kv {h_kv}, {S} cached + {T} new tokens, d_k {d_k}")
            for B, h_kv, S, T, d_k in sizes]


_FIX_AXIS = "np.concatenate([K_cache, K_new], axis=2): tokens are axis 2 of (B, h_kv, S, d_k)"
KV_APPEND = Exercise("kv_append", _append_ref, _append_cases, (
    Mistake("the new tokens put before the cached ones", "the cache comes first, then the new tokens",
            lambda Kc, Vc, K, V: (np.concatenate([K, Kc], 2), np.concatenate([V, Vc], 2))),
    Mistake("appended along the head axis (1), not the token axis (2)", _FIX_AXIS,
            lambda Kc, Vc, K, V: (np.concatenate([Kc, K], 1), np.concatenate([Vc, V], 1))),
    Mistake("appended along the feature axis (-1)", _FIX_AXIS,
            lambda Kc, Vc, K, V: (np.concatenate([Kc, K], -1), np.concatenate([Vc, V], -1))),
    Mistake("the cache is forgotten: only the new keys and values come back",
            "return the cached tokens followed by the new ones", lambda Kc, Vc, K, V: (K, V)),
    Mistake("keys and values swapped in the result", "return (K_all, V_all) in that order",
            lambda Kc, Vc, K, V: _append_ref(Kc, Vc, K, V)[::-1]),
    Mistake("the new keys appended to the values too", "V_all = concatenate([V_cache, V_new])",
            lambda Kc, Vc, K, V: (np.concatenate([Kc, K], 2), np.concatenate([Vc, K], 2)))),
    outputs=("K_all", "V_all"), axes={"K_all": ("token", "feature"), "V_all": ("token", "feature")})


def kv_append(fn) -> bool:
    """Check ``fn(K_cache, V_cache, K_new, V_new) -> (K_all, V_all)``, all (B, h_kv, ·, d_k).

    >>> kv_append(lambda Kc, Vc, K, V: (np.concatenate([Kc, K], 2), np.concatenate([Vc, V], 2)))
    ✔ kv_append: all 5 cases match
    True
    """
    return KV_APPEND.check(fn)


# ---------------------------------------------------------------------------------------
# the mask of T new queries after `offset` cached tokens
# ---------------------------------------------------------------------------------------

def _mask_cases():
    return [Case(c, f"T={c[0]} new queries after offset={c[1]} cached tokens")
            for c in ((3, 0), (1, 5), (4, 2), (2, 7), (5, 1))]


_FIX_MASK = "query t sits at position offset + t: allow key s where s <= offset + t (shape (T, offset + T))"
OFFSET_CAUSAL_MASK = Exercise("offset_causal_mask", cached_causal_mask, _mask_cases, (
    Mistake("the mask is not offset by the cache length: the new queries act as if they were at "
            "positions 0 .. T-1 and miss the recent cached keys", _FIX_MASK,
            lambda T, offset: np.tril(np.ones((T, offset + T), dtype=bool))),
    Mistake("the diagonal is missing: a token cannot see itself", _FIX_MASK,
            lambda T, offset: np.tril(np.ones((T, offset + T), dtype=bool), k=offset - 1)),
    Mistake("a square (T, T) causal mask: the cached keys have no column", "one column per key: "
            "offset cached + T new, shape (T, offset + T)", lambda T, offset: np.tril(np.ones((T, T), dtype=bool))),
    Mistake("everything allowed: right for one decode step (T = 1), but a prompt of T > 1 tokens sees "
            "its own future", _FIX_MASK, lambda T, offset: np.ones((T, offset + T), dtype=bool)),
    Mistake("True and False swapped (True = blocked)", "the course's masks say True = may attend",
            lambda T, offset: ~cached_causal_mask(T, offset))),
    axes={"offset_causal_mask": ("query", "key")})


def offset_causal_mask(fn) -> bool:
    """Check ``fn(T, offset) -> (T, offset + T) bool``: the causal mask of T queries after a cache.

    >>> offset_causal_mask(lambda T, offset: np.tril(np.ones((T, offset + T), dtype=bool), k=offset))
    ✔ offset_causal_mask: all 5 cases match
    True
    """
    return OFFSET_CAUSAL_MASK.check(fn)


# ---------------------------------------------------------------------------------------
# bytes per token
# ---------------------------------------------------------------------------------------

def _bytes_ref(layers, h, h_kv, d_k, bytes_per_number):
    return kv_cache_bytes_per_token(layers, h_kv, d_k, bytes_per_number)


_FIX_BYTES = "2 · layers · h_kv · d_k · bytes_per_number"
KV_BYTES_PER_TOKEN = Exercise("kv_bytes_per_token", _bytes_ref, lambda: [Case(c) for c in (
    (32, 32, 8, 128, 2), (2, 2, 2, 16, 8), (80, 64, 8, 128, 2), (12, 12, 1, 64, 4), (3, 6, 3, 5, 1))], (
    Mistake("only the keys are counted: the values are cached too", _FIX_BYTES,
            lambda L, h, kv, d, b: L * kv * d * b),
    Mistake("h (query heads) instead of h_kv, or d_model = h · d_k per layer: only the h_kv key/value "
            "heads are cached", _FIX_BYTES,
            lambda L, h, kv, d, b: 2 * L * h * d * b),
    Mistake("layers forgotten: every layer keeps its own cache", _FIX_BYTES, lambda L, h, kv, d, b: 2 * kv * d * b),
    Mistake("numbers counted, not bytes", "multiply by bytes_per_number", lambda L, h, kv, d, b: 2 * L * kv * d),
    Mistake("bits, not bytes", "bytes_per_number is already in bytes: no factor of 8",
            lambda L, h, kv, d, b: 16 * L * kv * d * b)))


def kv_bytes_per_token(fn) -> bool:
    """Check ``fn(layers, h, h_kv, d_k, bytes_per_number) -> int``: the bytes the KV cache grows per token.

    >>> kv_bytes_per_token(lambda layers, h, h_kv, d_k, b: 2 * layers * h_kv * d_k * b)
    ✔ kv_bytes_per_token: all 5 cases match
    True
    """
    return KV_BYTES_PER_TOKEN.check(fn)
