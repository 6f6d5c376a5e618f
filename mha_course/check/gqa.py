"""Checkers for notebook 09: ``kv_append``, ``offset_causal_mask``, ``kv_bytes_per_token``, ``kv_head_index``.

Every case has another batch, h_kv, cached length, number of new tokens and d_k (the cache may
be empty, and T may be 1 or a whole prompt), so neither a constant nor a square mask fits.
Right answers in natural types are right: a list (K_all, V_all), a byte count of 4.0.
"""
from __future__ import annotations

import numpy as np

from ..gqa import cached_causal_mask, kv_cache_bytes_per_token
from .engine import Case, Exercise, Mistake
from .masks import call_timed, check_with_closer_look, natural_types

__all__ = ["kv_append", "offset_causal_mask", "kv_bytes_per_token", "kv_head_index", "KV_APPEND",
           "OFFSET_CAUSAL_MASK", "KV_BYTES_PER_TOKEN", "KV_HEAD_INDEX"]


# ---------------------------------------------------------------------------------------
# the cache append
# ---------------------------------------------------------------------------------------

def _append_ref(K_cache, V_cache, K_new, V_new):
    """K_cache (B, h_kv, S, d_k), K_new (B, h_kv, T, d_k) -> K_all (B, h_kv, S + T, d_k), V_all (B, h_kv, S + T, d_k)."""
    return np.concatenate([K_cache, K_new], axis=2), np.concatenate([V_cache, V_new], axis=2)


def _append_cases():
    rng = np.random.default_rng(20240909)
    sizes = ((1, 2, 0, 5, 4), (2, 1, 3, 1, 2), (3, 4, 6, 2, 8), (1, 8, 1, 1, 3), (2, 2, 5, 3, 6), (3, 2, 4, 4, 5))
    return [Case(tuple(rng.normal(size=(B, h_kv, n, d_k)).astype(np.float32 if i == 4 else np.float64)
                       for n in (S, S, T, T)),
                 f"batch {B}, h_kv {h_kv}, {S} cached + {T} new tokens, d_k {d_k}" + (", float32" if i == 4 else ""))
            for i, (B, h_kv, S, T, d_k) in enumerate(sizes)]  # case 5 is float32: a cache keeps its dtype


def _rolling_buffer(K_cache, V_cache, K_new, V_new):
    """The append cut back to the cache's old length S (a fixed-size buffer); an empty cache keeps the new tokens."""
    S = K_cache.shape[2] or K_new.shape[2]
    K_all, V_all = _append_ref(K_cache, V_cache, K_new, V_new)
    return K_all[:, :, -S:], V_all[:, :, -S:]


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
            lambda Kc, Vc, K, V: (np.concatenate([Kc, K], 2), np.concatenate([Vc, K], 2))),
    Mistake("appended along the batch axis (0), not the token axis (2)", _FIX_AXIS,
            lambda Kc, Vc, K, V: (np.concatenate([Kc, K], 0), np.concatenate([Vc, V], 0))),
    Mistake("the old cache returned: the new tokens are never added", "return the cached tokens followed by "
            "the new ones: np.concatenate([K_cache, K_new], axis=2)", lambda Kc, Vc, K, V: (Kc, Vc)),
    Mistake("the oldest tokens dropped to keep the cache's length (a rolling buffer): the cache grows to S + T",
            "keep every cached token: np.concatenate([K_cache, K_new], axis=2)",
            _rolling_buffer),
    Mistake("only the newest token kept: a decode step may bring several new tokens, and every one is appended",
            _FIX_AXIS, lambda Kc, Vc, K, V: (np.concatenate([Kc, K[:, :, -1:]], 2), np.concatenate([Vc, V[:, :, -1:]], 2))),
    Mistake("np.append without an axis: it flattens everything into one long vector", _FIX_AXIS,
            lambda Kc, Vc, K, V: (np.append(Kc, K), np.append(Vc, V)))),
    outputs=("K_all", "V_all"), axes={"K_all": ("token", "feature"), "V_all": ("token", "feature")})


def kv_append(fn) -> bool:
    """Check ``fn(K_cache, V_cache, K_new, V_new) -> (K_all, V_all)``, all (B, h_kv, ·, d_k).

    >>> kv_append(lambda Kc, Vc, K, V: (np.concatenate([Kc, K], 2), np.concatenate([Vc, V], 2)))
    ✔ kv_append: all 6 cases match
    True
    """
    return check_with_closer_look(KV_APPEND, fn, _append_closer_look)


# ---------------------------------------------------------------------------------------
# the mask of T new queries after `offset` cached tokens
# ---------------------------------------------------------------------------------------

def _mask_cases():
    return [Case(c, f"T={c[0]} new queries after offset={c[1]} cached tokens")
            for c in ((3, 0), (1, 5), (4, 2), (2, 7), (5, 1), (3, 3))]


_FIX_MASK = "query t sits at position offset + t: allow key s where s <= offset + t (shape (T, offset + T))"


def _cache_blocked(T, offset):
    """A causal (T, T) block for the new keys after offset columns of False."""
    mask = np.zeros((T, offset + T), dtype=bool)
    mask[:, offset:] = np.tril(np.ones((T, T), dtype=bool))
    return mask
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
            lambda T, offset: ~cached_causal_mask(T, offset)),
    Mistake("off by one the other way (k = offset + 1): each new query also sees the next new token", _FIX_MASK,
            lambda T, offset: np.tril(np.ones((T, offset + T), dtype=bool), k=offset + 1)),
    Mistake("np.triu instead of np.tril: each new query sees itself and the future, not the cache", _FIX_MASK,
            lambda T, offset: np.triu(np.ones((T, offset + T), dtype=bool), k=offset)),
    Mistake("the cached keys blocked: causal only among the T new tokens (the cache columns all False)",
            "the new queries read every cached key: the first offset columns are all True", _cache_blocked),
    Mistake("the new keys have no column: shape (T, offset), only the cached keys",
            "one column per key, cached AND new: shape (T, offset + T)",
            lambda T, offset: np.ones((T, offset), dtype=bool)),
    Mistake("the whole (offset + T) square causal mask: one row for every position, not only the T new queries",
            "keep only the last T rows: the new queries", lambda T, offset: np.tril(np.ones((offset + T,) * 2, bool))),
    Mistake("floats 1.0 / 0.0 instead of booleans: np.tril(np.ones(...)) is float unless dtype=bool",
            "np.tril(np.ones((T, offset + T), dtype=bool), k=offset)",
            lambda T, offset: cached_causal_mask(T, offset).astype(float))),
    axes={"offset_causal_mask": ("query", "key")})


def offset_causal_mask(fn) -> bool:
    """Check ``fn(T, offset) -> (T, offset + T) bool``: the causal mask of T queries after a cache.

    >>> offset_causal_mask(lambda T, offset: np.tril(np.ones((T, offset + T), dtype=bool), k=offset))
    ✔ offset_causal_mask: all 6 cases match
    True
    """
    return check_with_closer_look(OFFSET_CAUSAL_MASK, fn, _mask_closer_look)


# ---------------------------------------------------------------------------------------
# bytes per token
# ---------------------------------------------------------------------------------------

def _bytes_ref(layers, h, h_kv, d_k, bytes_per_number):
    return kv_cache_bytes_per_token(layers, h_kv, d_k, bytes_per_number)


_FIX_BYTES = "2 · layers · h_kv · d_k · bytes_per_number"
KV_BYTES_PER_TOKEN = Exercise("kv_bytes_per_token", _bytes_ref, lambda: [Case(c) for c in (
    (32, 32, 8, 128, 2), (2, 2, 2, 16, 8), (80, 64, 8, 128, 2), (12, 12, 1, 64, 4), (3, 6, 3, 5, 1),
    (5, 12, 4, 24, 4))], (
    Mistake("only the keys are counted: the values are cached too", _FIX_BYTES,
            lambda L, h, kv, d, b: L * kv * d * b),
    Mistake("h (query heads) instead of h_kv, or d_model = h · d_k per layer: only the h_kv key/value "
            "heads are cached", _FIX_BYTES,
            lambda L, h, kv, d, b: 2 * L * h * d * b),
    Mistake("layers forgotten: every layer keeps its own cache", _FIX_BYTES, lambda L, h, kv, d, b: 2 * kv * d * b),
    Mistake("numbers counted, not bytes", "multiply by bytes_per_number", lambda L, h, kv, d, b: 2 * L * kv * d),
    Mistake("bits, not bytes", "bytes_per_number is already in bytes: no factor of 8",
            lambda L, h, kv, d, b: 16 * L * kv * d * b),
    Mistake("divided by 8, as if bytes_per_number were in bits", "bytes_per_number is already in bytes",
            natural_types(lambda L, h, kv, d, b: 2 * L * kv * d * b / 8)),
    Mistake("the group size g = h / h_kv instead of h_kv: there are h_kv cached heads, each read by g queries",
            _FIX_BYTES, lambda L, h, kv, d, b: 2 * L * (h // kv) * d * b),
    Mistake("h_kv · d_model: every key/value head counted as d_model = h · d_k wide, not d_k",
            _FIX_BYTES, lambda L, h, kv, d, b: 2 * L * kv * h * d * b)), edges=('d_k',))


def kv_bytes_per_token(fn) -> bool:
    """Check ``fn(layers, h, h_kv, d_k, bytes_per_number) -> int``: the bytes the KV cache grows per token.

    >>> kv_bytes_per_token(lambda layers, h, h_kv, d_k, b: 2 * layers * h_kv * d_k * b)
    ✔ kv_bytes_per_token: all 7 cases match
    True
    """
    return check_with_closer_look(KV_BYTES_PER_TOKEN, fn, _bytes_closer_look)


# ---------------------------------------------------------------------------------------
# which key/value head each query head reads
# ---------------------------------------------------------------------------------------

def _head_index_ref(h, h_kv):
    return np.arange(h) // (h // h_kv)  # (h,): g = h / h_kv query heads per key/value head


_FIX_GROUP = "g = h // h_kv query heads share one key/value head: query head i reads head i // g"
KV_HEAD_INDEX = Exercise("kv_head_index", _head_index_ref, lambda: [Case(c, f"h={c[0]}, h_kv={c[1]}") for c in (
    (8, 2), (6, 3), (4, 4), (12, 4), (5, 1), (9, 3), (16, 8), (2, 1))], (
    Mistake("i % h_kv: the query heads dealt out round-robin (np.tile) instead of in consecutive groups "
            "(np.repeat)", _FIX_GROUP + " (np.repeat(np.arange(h_kv), g), not np.tile)",
            lambda h, kv: np.arange(h) % kv),
    Mistake("i // h_kv: divided by the number of key/value heads, not by the group size g = h / h_kv", _FIX_GROUP,
            lambda h, kv: np.arange(h) // kv),
    Mistake("i % g: the position inside the group, not the group", _FIX_GROUP,
            lambda h, kv: np.arange(h) % (h // kv)),
    Mistake("g computed as h_kv // h, which is 0 (a division by zero)", "g = h // h_kv (h_kv divides h)",
            lambda h, kv: np.arange(h) // (kv // h)),
    Mistake("i / g with true division: 0.25, 0.5, ... are not head numbers", _FIX_GROUP + " (// rounds down)",
            lambda h, kv: np.arange(h) / (h // kv)),
    Mistake("counted from 1: the key/value heads are numbered 0 .. h_kv - 1", _FIX_GROUP,
            lambda h, kv: np.arange(h) // (h // kv) + 1),
    Mistake("the group of each key/value head (length h_kv) instead of the head of each query (length h)",
            "return one entry per QUERY head: np.arange(h) // g", lambda h, kv: np.arange(kv) * (h // kv)),
    Mistake("each key/value head repeated h_kv times (np.repeat(np.arange(h_kv), h_kv)) instead of g = h // h_kv "
            "times", _FIX_GROUP + ": np.repeat(np.arange(h_kv), g)", lambda h, kv: np.repeat(np.arange(kv), kv)),
    Mistake("each key/value head repeated h_kv times, cut to h entries: np.repeat(np.arange(h_kv), h_kv)[:h]; "
            "the repeat count is g = h // h_kv", _FIX_GROUP + ": np.repeat(np.arange(h_kv), g)",
            lambda h, kv: np.repeat(np.arange(kv), kv)[:h]),
    ), axes={"result": ("query head",)})


def _group_closer_look(fn) -> list:
    got = np.asarray(call_timed(fn, 8, 2))
    return [f"h = 8, h_kv = 2 (g = 4): yours {got.tolist()}, expected {_head_index_ref(8, 2).tolist()} "
            "(heads 0-3 share key/value head 0, heads 4-7 share head 1)"]


def kv_head_index(fn) -> bool:
    """Check ``fn(h, h_kv) -> (h,) ints``: the key/value head that each query head reads in GQA.

    >>> kv_head_index(lambda h, h_kv: np.repeat(np.arange(h_kv), h // h_kv))
    ✔ kv_head_index: all 8 cases match
    True
    """
    return check_with_closer_look(KV_HEAD_INDEX, fn, _group_closer_look)


# ---------------------------------------------------------------------------------------
# closer looks for mistakes nobody catalogued
# ---------------------------------------------------------------------------------------

def _append_closer_look(fn) -> list:
    Kc, Vc = np.zeros((1, 2, 3, 4)), np.ones((1, 2, 3, 4))
    K, V = np.full((1, 2, 1, 4), 2.0), np.full((1, 2, 1, 4), 3.0)
    got = call_timed(fn, Kc, Vc, K, V)
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return []
    return [f"a cache of 3 tokens (K = 0, V = 1) and 1 new token (K = 2, V = 3), (B, h_kv, S, d_k) = (1, 2, 3, 4): "
            f"your K_all has shape {np.shape(got[0])}, V_all {np.shape(got[1])}; expected (1, 2, 4, 4) each",
            "K_all along the tokens should read 0, 0, 0, 2 and V_all 1, 1, 1, 3"]


def _mask_closer_look(fn) -> list:
    got = np.asarray(call_timed(fn, 2, 3))
    want = cached_causal_mask(2, 3)
    return [f"T = 2 new queries after offset = 3 cached tokens: yours {got.astype(int).tolist()}, expected "
            f"{want.astype(int).tolist()} (query t sits at position 3 + t and reads keys 0 .. 3 + t)"]


def _bytes_closer_look(fn) -> list:
    got = call_timed(fn, 1, 1, 1, 1, 1)
    return [f"one layer, one head of one number of one byte: yours {got!r}, expected 2 (one key and one value)"]
