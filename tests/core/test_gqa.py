"""Grouped-query attention, the KV cache and MLA (mha_course.gqa).

- parity with torch's F.scaled_dot_product_attention(..., enable_gqa=True), RoPE done on the
  torch side independently (complex numbers), and with multi_head_attention when h_kv = h;
- the cache: prefill + token-by-token decoding == full causal attention, for MHA, GQA and MQA,
  with and without RoPE; the two learner bugs (mask not offset by the cache length, RoPE at
  position 0 for every new token) built as wrong versions that this very check catches;
- MLA equals the multi-head attention it expands into, with and without its latent cache;
- Hypothesis invariants, the fast path (keys never repeated g times), bad input.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mha_course as mc
from _mha_checks import assert_close, assert_dtype, random_allowed, require_torch
from mha_course import gqa, kvcache

PROFILE = settings(derandomize=True, database=None, deadline=None, max_examples=30,
                   suppress_health_check=[HealthCheck.too_slow])
DTYPES = [np.float64, np.float32]
TOL = {np.dtype(np.float64): 1e-10, np.dtype(np.float32): 2e-5}
E = re.escape

# (B, T, d_model, h, h_kv): MHA (h_kv = h), GQA and MQA (h_kv = 1), h = 1 and h = d_model
GQA_CASES = [(1, 1, 2, 1, 1), (2, 5, 8, 4, 4), (2, 5, 8, 4, 2), (2, 5, 8, 4, 1), (3, 7, 12, 6, 3),
             (1, 6, 16, 8, 2), (2, 4, 6, 6, 1)]


def _problem(rng, B, T, D, h, h_kv, bias=False, dtype=np.float64):
    params = gqa.init_gqa_params(D, h, h_kv, rng=rng, bias=bias, dtype=dtype)
    return rng.normal(size=(B, T, D)).astype(dtype), params


# ----------------------------------------------------------------------------- torch parity
def _torch_rope(torch, a, base):
    """a (..., T, d_k) rotated by RoPE (interleaved pairs) as complex multiplication."""
    T, d_k = a.shape[-2:]
    freqs = base ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)         # (d_k/2,)
    angles = torch.arange(T, dtype=torch.float64)[:, None] * freqs[None, :]        # (T, d_k/2)
    z = torch.view_as_complex(a.to(torch.float64).reshape(*a.shape[:-1], d_k // 2, 2).contiguous())
    return torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles)).reshape(a.shape).to(a.dtype)


def _torch_gqa(torch, x, p, h, h_kv, allowed, rope_base):
    """out (B, T, D) via F.scaled_dot_product_attention(enable_gqa=True), weights (B, h, T, S)."""
    F = torch.nn.functional
    t = lambda a: None if a is None else torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
    X = t(x)
    B, T, D = x.shape

    def heads(W, b, n):  # (B, T, D) -> (B, n, T, d_k)
        y = X @ t(W) + (0 if b is None else t(b))
        return y.reshape(B, T, n, D // h).transpose(1, 2)

    q, k, v = heads(p.W_q, p.b_q, h), heads(p.W_k, p.b_k, h_kv), heads(p.W_v, p.b_v, h_kv)
    if rope_base is not None:
        q, k = _torch_rope(torch, q, rope_base), _torch_rope(torch, k, rope_base)
    m = None if allowed is None else t(allowed)
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)   # (B, h, T, d_k)
    scores = q @ k.repeat_interleave(h // h_kv, dim=1).transpose(-1, -2) / (D // h) ** 0.5
    weights = torch.softmax(scores if m is None else scores.masked_fill(~m, float("-inf")), dim=-1)
    out = o.transpose(1, 2).reshape(B, T, D) @ t(p.W_o) + (0 if p.b_o is None else t(p.b_o))
    return out.numpy(), weights.numpy()


TORCH_CASES = [(*c, rope) for c in GQA_CASES for rope in (None, 100.0)
               if rope is None or (c[2] // c[3]) % 2 == 0]  # RoPE needs an even d_k


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("mask", ["none", "causal", "random"])
@pytest.mark.parametrize("B,T,D,h,h_kv,rope", TORCH_CASES,
                         ids=[f"B{B}T{T}D{D}h{h}kv{k}-{'rope' if r else 'norope'}" for B, T, D, h, k, r in TORCH_CASES])
def test_gqa_matches_torch_enable_gqa(B, T, D, h, h_kv, rope, mask, dtype):
    torch = require_torch()
    rng = np.random.default_rng([B, T, D, h, h_kv, rope is None, len(mask), DTYPES.index(dtype)])
    x, p = _problem(rng, B, T, D, h, h_kv, bias=bool(rng.integers(2)), dtype=dtype)
    allowed = {"none": None, "causal": mc.causal_mask(T),
               "random": random_allowed(rng, [(T, T), (B, 1, T, T), (B, h, T, T)][rng.integers(3)])}[mask]
    out, w = gqa.grouped_query_attention(x, p, h, h_kv, mask=allowed, rope_base=rope)
    ref_out, ref_w = _torch_gqa(torch, x, p, h, h_kv, allowed, rope)
    assert_dtype([out, w], dtype, "grouped_query_attention")
    assert_close(w, ref_w, dtype, "weights (B, h, T, S)")
    assert_close(out, ref_out, dtype, "out (B, T, d_model)")


# ----------------------------------------------------------------------------- h_kv = h is MHA
@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_h_kv_equal_h_is_multi_head_attention(cross, dtype):
    rng = np.random.default_rng(3)
    mha_params = mc.init_params(12, rng=rng, bias=True, dtype=dtype)
    x = rng.normal(size=(2, 5, 12)).astype(dtype)
    context = rng.normal(size=(2, 3, 12)).astype(dtype) if cross else None
    mask = random_allowed(rng, (2, 4, 5, 3 if cross else 5))
    out, w = gqa.grouped_query_attention(x, gqa.GQAParams(*mha_params), 4, 4, mask=mask, context=context)
    ref_out, ref_w = mc.multi_head_attention(x, mha_params, 4, mask=mask, context=context)
    assert_close(w, ref_w, dtype, "weights", tol=TOL[np.dtype(dtype)] / 10)
    assert_close(out, ref_out, dtype, "out", tol=TOL[np.dtype(dtype)] / 10)


def test_h_kv_equal_h_with_rope_is_multi_head_attention_with_rope():
    """Both modules rotate Q and K per head at positions 0..T-1: the same numbers."""
    rng = np.random.default_rng(6)
    p = mc.init_params(16, rng=rng, bias=True)
    x = rng.normal(size=(2, 5, 16))
    ours, _ = gqa.grouped_query_attention(x, gqa.GQAParams(*p), 4, 4, rope_base=100.0)
    theirs, _ = mc.multi_head_attention(x, p, 4, rope_base=100.0)
    assert np.abs(ours - theirs).max() <= 1e-12


def test_init_with_h_kv_equal_h_is_init_params():
    a = gqa.init_gqa_params(8, 4, 4, rng=np.random.default_rng(5), bias=True)
    b = mc.init_params(8, rng=np.random.default_rng(5), bias=True)
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    narrow = gqa.init_gqa_params(8, 4, 1, rng=np.random.default_rng(5), bias=True)
    assert narrow.W_k.shape == (8, 2) and narrow.b_v.shape == (2,) and narrow.W_o.shape == (8, 8)


def test_gqa_from_mha_mean_pools_each_group():
    p = mc.init_params(8, rng=np.random.default_rng(1), bias=True)
    same = gqa.gqa_from_mha(p, 4, 4)
    assert all(np.array_equal(u, v) for u, v in zip(same, p))
    pooled = gqa.gqa_from_mha(p, 4, 2)   # groups: heads (0, 1) and (2, 3), d_k = 2
    assert np.allclose(pooled.W_k[:, 0:2], (p.W_k[:, 0:2] + p.W_k[:, 2:4]) / 2)
    assert np.allclose(pooled.b_v[2:4], (p.b_v[4:6] + p.b_v[6:8]) / 2)
    assert np.array_equal(pooled.W_q, p.W_q)


def _repeat_kv(p: gqa.GQAParams, h: int, h_kv: int) -> mc.MHAParams:
    """The MHA parameters whose head i has key/value head i // g: columns repeated g times."""
    D = p.d_model

    def rep(a):
        if a is None:
            return None
        return np.repeat(a.reshape(*a.shape[:-1], h_kv, D // h), h // h_kv, axis=-2).reshape(*a.shape[:-1], D)

    return mc.MHAParams(p.W_q, rep(p.W_k), rep(p.W_v), p.W_o, p.b_q, rep(p.b_k), rep(p.b_v), p.b_o)


@st.composite
def gqa_problems(draw):
    D = draw(st.sampled_from([2, 4, 6, 8, 12, 16]))
    h = draw(st.sampled_from(mc.valid_heads(D)))
    h_kv = draw(st.sampled_from(gqa.valid_kv_heads(h)))
    B, T = draw(st.integers(1, 3)), draw(st.integers(1, 7))
    dtype = draw(st.sampled_from(DTYPES))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x, p = _problem(rng, B, T, D, h, h_kv, bias=draw(st.booleans()), dtype=dtype)
    return x, p, h, h_kv, rng


@PROFILE
@given(gqa_problems())
def test_gqa_is_mha_with_each_key_value_head_repeated_g_times(problem):
    x, p, h, h_kv, rng = problem
    mask = random_allowed(rng, (1, 1, x.shape[1], x.shape[1]), keep_one=False)  # 4-D: never ambiguous
    out, w = gqa.grouped_query_attention(x, p, h, h_kv, mask=mask)
    ref_out, ref_w = mc.multi_head_attention(x, _repeat_kv(p, h, h_kv), h, mask=mask)
    assert_close(w, ref_w, x.dtype, "weights")
    assert_close(out, ref_out, x.dtype, "out")
    allowed_any = np.broadcast_to(mask.any(-1), w.shape[:-1])
    assert np.allclose(w.sum(-1)[allowed_any], 1, atol=1e-5) and not w.sum(-1)[~allowed_any].any()


@PROFILE
@given(gqa_problems(), st.booleans(), st.data())
def test_any_split_into_chunks_gives_full_causal_attention(problem, rope, data):
    x, p, h, h_kv, rng = problem
    B, T, D = x.shape
    base = 50.0 if rope and (D // h) % 2 == 0 else None
    cuts = sorted(data.draw(st.sets(st.integers(1, T - 1), max_size=3)) if T > 1 else set())
    cache = gqa.KVCache(B, h_kv, D // h, max_len=T + data.draw(st.integers(0, 3)), dtype=x.dtype)
    chunks = [gqa.grouped_query_attention(c, p, h, h_kv, cache=cache, rope_base=base)[0]
              for c in np.split(x, cuts, axis=1)]
    full, _ = gqa.grouped_query_attention(x, p, h, h_kv, mask=mc.causal_mask(T)[None, None], rope_base=base)
    assert cache.length == T
    assert_close(np.concatenate(chunks, axis=1), full, x.dtype, "chunked == full causal")


@PROFILE
@given(gqa_problems())
def test_heads_of_one_group_with_equal_queries_have_equal_weights(problem):
    x, p, h, h_kv, _ = problem
    g, d_k = h // h_kv, p.d_model // h
    if g == 1:
        return
    W_q = p.W_q.copy()
    W_q[:, d_k:2 * d_k] = W_q[:, :d_k]  # heads 0 and 1 share key/value head 0
    b_q = None if p.b_q is None else np.concatenate([p.b_q[:d_k], p.b_q[:d_k], p.b_q[2 * d_k:]])
    _, w = gqa.grouped_query_attention(x, p._replace(W_q=W_q, b_q=b_q), h, h_kv)
    assert np.array_equal(w[:, 0], w[:, 1])


# ----------------------------------------------------------------------------- the cache
def decode_error(attend, x, p, h, h_kv, rope_base, prefill):
    """Max |prefill + token-by-token decoding - full causal attention| for ``attend``."""
    B, T, D = x.shape
    cache = gqa.KVCache(B, h_kv, D // h, max_len=T, dtype=x.dtype)
    outs = [attend(x[:, :prefill], p, h, h_kv, cache=cache, rope_base=rope_base)[0]]
    outs += [attend(x[:, t:t + 1], p, h, h_kv, cache=cache, rope_base=rope_base)[0]
             for t in range(prefill, T)]
    full, _ = gqa.grouped_query_attention(x, p, h, h_kv, mask=mc.causal_mask(T), rope_base=rope_base)
    return float(np.abs(np.concatenate(outs, axis=1) - full).max())


KINDS = {"MHA": 8, "GQA": 2, "MQA": 1}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("rope", [None, 10000.0], ids=["norope", "rope"])
@pytest.mark.parametrize("prefill", [1, 4])
@pytest.mark.parametrize("kind", KINDS)
def test_prefill_then_decode_equals_full_causal_attention(kind, prefill, rope, dtype):
    rng = np.random.default_rng([prefill, rope is None, DTYPES.index(dtype), KINDS[kind]])
    x, p = _problem(rng, 2, 9, 32, 8, KINDS[kind], bias=True, dtype=dtype)
    assert decode_error(gqa.grouped_query_attention, x, p, 8, KINDS[kind], rope, prefill) <= TOL[np.dtype(dtype)]


def test_decode_weights_are_rows_of_the_full_weights():
    rng = np.random.default_rng(11)
    x, p = _problem(rng, 1, 6, 8, 4, 2)
    cache = gqa.KVCache(1, 2, 2, max_len=6)
    _, w_pre = gqa.grouped_query_attention(x[:, :4], p, 4, 2, cache=cache, rope_base=100.0)
    _, w_step = gqa.grouped_query_attention(x[:, 4:5], p, 4, 2, cache=cache, rope_base=100.0)
    _, w_full = gqa.grouped_query_attention(x, p, 4, 2, mask=mc.causal_mask(6), rope_base=100.0)
    assert w_pre.shape == (1, 4, 4, 4) and w_step.shape == (1, 4, 1, 5)
    assert np.allclose(w_pre, w_full[:, :, :4, :4]) and np.allclose(w_step[:, :, 0], w_full[:, :, 4, :5])


# The two bugs learners hit, each built into a copy of the package's own call.
def _mask_not_offset(T, offset):
    """BUG: the causal mask of T queries built as if they started at position 0."""
    return np.tril(np.ones((T, offset + T), dtype=bool))


def _rope_at_zero(heads, base, start=0, scaling=None):
    """BUG: every call rotates its tokens from position 0, whatever is already cached."""
    return heads if base is None else mc.apply_rope(heads, np.arange(heads.shape[-2]), base=base, scaling=scaling)


@pytest.mark.parametrize("bug, target, wrong, rope", [
    ("mask not offset by the cache length", "cached_causal_mask", _mask_not_offset, None),
    ("RoPE at position 0 for every new token", "rope_heads", _rope_at_zero, 10000.0)])
@pytest.mark.parametrize("kind", KINDS)
def test_the_decode_check_catches_the_learner_bugs(monkeypatch, bug, target, wrong, rope, kind):
    rng = np.random.default_rng(KINDS[kind])
    x, p = _problem(rng, 2, 9, 32, 8, KINDS[kind])
    assert decode_error(gqa.grouped_query_attention, x, p, 8, KINDS[kind], rope, 4) <= 1e-10
    monkeypatch.setattr(kvcache if target == "cached_causal_mask" else gqa, target, wrong)  # where it is called
    assert decode_error(gqa.grouped_query_attention, x, p, 8, KINDS[kind], rope, 4) > 1e-3, bug


def test_rope_at_zero_is_invisible_without_a_cache(monkeypatch):
    """Why the RoPE bug survives a quick test: a single full call starts at 0 anyway."""
    rng = np.random.default_rng(2)
    x, p = _problem(rng, 1, 5, 8, 2, 1)
    before = gqa.grouped_query_attention(x, p, 2, 1, rope_base=100.0)[0]
    monkeypatch.setattr(gqa, "rope_heads", _rope_at_zero)
    assert np.array_equal(gqa.grouped_query_attention(x, p, 2, 1, rope_base=100.0)[0], before)


def test_cache_is_updated_in_place_and_keeps_rotated_keys():
    rng = np.random.default_rng(4)
    x, p = _problem(rng, 1, 3, 8, 2, 1)
    cache = gqa.KVCache(1, 1, 4, max_len=5)
    gqa.grouped_query_attention(x, p, 2, 1, cache=cache, rope_base=100.0)
    K = mc.split_heads(x @ p.W_k, 1)
    assert cache.length == 3 and cache.keys.shape == (1, 1, 3, 4)
    assert np.allclose(cache.keys, mc.apply_rope(K, np.arange(3), base=100.0))
    assert np.allclose(cache.values, mc.split_heads(x @ p.W_v, 1))
    assert not cache.keys.flags.writeable
    cache.reset()
    assert cache.length == 0 and cache.nbytes == 2 * 5 * 4 * 8


def test_float32_cache_holds_float32():
    cache = gqa.KVCache(1, 2, 4, max_len=8, dtype=np.float32)
    assert cache.nbytes == 2 * 2 * 8 * 4 * 4
    x, p = _problem(np.random.default_rng(0), 1, 3, 8, 2, 2, dtype=np.float32)
    out, w = gqa.grouped_query_attention(x, p, 2, 2, cache=cache)
    assert_dtype([out, w, cache.keys], np.float32, "float32 cache")


def test_cached_causal_mask():
    assert np.array_equal(gqa.cached_causal_mask(4, 0), mc.causal_mask(4))
    assert gqa.cached_causal_mask(1, 7).all() and gqa.cached_causal_mask(1, 7).shape == (1, 8)
    m = gqa.cached_causal_mask(3, 2)
    assert np.array_equal(m, mc.causal_mask(5)[2:])


# ----------------------------------------------------------------------------- the fast path
def test_keys_are_broadcast_not_repeated(monkeypatch):
    """The fast path: the h_kv keys reach the attention core once, never copied g times."""
    import mha_course.fast as fast
    seen = []
    real = gqa.attend

    def spy(Q, K, V, mask=None, scores=None, bias=None):
        seen.append((Q.shape, K.shape, V.shape))
        return real(Q, K, V, mask, scores, bias)

    monkeypatch.setattr(gqa, "attend", spy)
    x, p = _problem(np.random.default_rng(0), 2, 5, 8, 4, 2)
    out, _ = gqa.grouped_query_attention(x, p, 4, 2)
    assert seen == [((2, 2, 2, 5, 2), (2, 2, 1, 5, 2), (2, 2, 1, 5, 2))]
    Qh = mc.split_heads(x @ p.W_q, 4)
    Kh, Vh = (np.repeat(mc.split_heads(x @ W, 2), 2, axis=1) for W in (p.W_k, p.W_v))
    ref = mc.combine_heads(mc.scaled_dot_product_attention(Qh, Kh, Vh)[0]) @ p.W_o
    assert gqa.attend is spy and fast.attend is real
    assert np.allclose(out, ref, atol=1e-12)


# ----------------------------------------------------------------------------- MLA
@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("D,h,d_c", [(8, 2, 3), (12, 4, 12), (16, 8, 4), (6, 1, 1)])
def test_mla_equals_the_multi_head_attention_it_expands_into(D, h, d_c, dtype):
    rng = np.random.default_rng([D, h, d_c])
    p = gqa.init_mla_params(D, h, d_c, rng=rng, dtype=dtype)
    x = rng.normal(size=(2, 7, D)).astype(dtype)
    mask = random_allowed(rng, (2, h, 7, 7), keep_one=False)
    out, w = gqa.mla_attention(x, p, h, mask=mask)
    ref_out, ref_w = mc.multi_head_attention(x, gqa.mla_to_mha(p), h, mask=mask)
    assert_dtype([out, w], dtype, "mla_attention")
    assert_close(w, ref_w, dtype, "weights")
    assert_close(out, ref_out, dtype, "out")
    assert np.linalg.matrix_rank(gqa.mla_to_mha(p).W_k, tol=1e-4) <= d_c  # a low-rank key projection


def test_mla_latent_cache_decodes_like_full_causal_attention():
    rng = np.random.default_rng(8)
    p = gqa.init_mla_params(16, 4, 5, rng=rng)
    x = rng.normal(size=(2, 8, 16))
    cache = gqa.LatentCache(2, 5, max_len=8)
    outs = [gqa.mla_attention(x[:, :3], p, 4, cache=cache)[0]]
    outs += [gqa.mla_attention(x[:, t:t + 1], p, 4, cache=cache)[0] for t in range(3, 8)]
    full, _ = mc.multi_head_attention(x, gqa.mla_to_mha(p), 4, mask=mc.causal_mask(8))
    assert np.abs(np.concatenate(outs, 1) - full).max() <= 1e-10
    assert cache.latents.shape == (2, 8, 5) and cache.nbytes == 2 * 8 * 5 * 8
    assert np.allclose(cache.latents, x @ p.W_dkv)


# ----------------------------------------------------------------------------- costs
def test_bytes_per_token_formulas():
    assert gqa.kv_cache_bytes_per_token(32, 32, 128) == 2 * 32 * 32 * 128 * 2 == 524288
    assert gqa.kv_cache_bytes_per_token(32, 8, 128) * 4096 == 512 * 2**20        # 512 MiB at 4k
    assert gqa.kv_cache_bytes_per_token(32, 1, 128, bytes_per_number=4) == 32768
    assert gqa.mla_cache_bytes_per_token(32, 512, 64) == 32 * 576 * 2
    assert gqa.mla_cache_bytes_per_token(1, 4, bytes_per_number=8) == 32


def test_kv_cache_table_for_a_7b_class_model():
    rows = gqa.kv_cache_table(32, 4096, 32, 8, [4096, 131072])
    assert [r.name for r in rows] == ["MHA", "GQA", "MQA", "MLA"]
    assert [r.total_bytes[1] / 2**30 for r in rows] == [64.0, 16.0, 2.0, 4.5]
    assert rows[1].total_bytes[0] == 512 * 2**20 and rows[0].bytes_per_token == 4 * rows[1].bytes_per_token
    mla = gqa.kv_cache_table(2, 64, 4, 2, [10], bytes_per_number=4, d_latent=8, d_rope=0)[3]
    assert mla.bytes_per_token == 2 * 8 * 4 and mla.cached == "a latent of 8 + a RoPE key of 0"
    with pytest.raises(ValueError, match=E("h=32 is not divisible by h_kv=3")):
        gqa.kv_cache_table(32, 4096, 32, 3, [4096])


def test_cache_nbytes_is_the_formula_times_the_tokens():
    """One layer: KVCache.nbytes == kv_cache_bytes_per_token(1, h_kv, d_k, 8) · batch · max_len."""
    for h_kv, d_k, B, L in [(1, 4, 1, 10), (4, 8, 3, 7)]:
        assert gqa.KVCache(B, h_kv, d_k, L).nbytes == gqa.kv_cache_bytes_per_token(1, h_kv, d_k, 8) * B * L
        assert gqa.LatentCache(B, d_k, L).nbytes == gqa.mla_cache_bytes_per_token(1, d_k, 0, 8) * B * L


# ----------------------------------------------------------------------------- bad input
_r = np.random.default_rng(0)
X8 = np.zeros((2, 3, 8))
P42 = gqa.init_gqa_params(8, 4, 2, rng=_r)
MLA = gqa.init_mla_params(8, 2, 3, rng=_r)
BAD = [
    (gqa.init_gqa_params, dict(d_model=8, h=4, h_kv=3, rng=_r), "^" + E("h=4 is not divisible by h_kv=3; valid h_kv: 1, 2, 4") + "$"),
    (gqa.init_gqa_params, dict(d_model=8, h=3, h_kv=1, rng=_r), E("d_model=8 is not divisible by h=3; valid h: 1, 2, 4, 8")),
    (gqa.init_gqa_params, dict(d_model=8, h=4, h_kv=0, rng=_r), E("h_kv=0 must be >= 1")),
    (gqa.init_gqa_params, dict(d_model=8, h=4, h_kv=2, rng=0), E("rng must be a numpy Generator")),
    (gqa.grouped_query_attention, dict(x=X8, params=P42, h=4, h_kv=8), E("h=4 is not divisible by h_kv=8; valid h_kv: 1, 2, 4")),
    (gqa.grouped_query_attention, dict(x=X8, params=P42, h=4, h_kv=1),
     E("params.W_k has shape (8, 4), expected (8, 2) for d_model=8, h=4, h_kv=1")),
    (gqa.grouped_query_attention, dict(x=np.zeros((2, 3, 4)), params=P42, h=4, h_kv=2),
     E("x has last dim 4 but params.W_q has shape (8, 8)")),
    (gqa.grouped_query_attention, dict(x=X8, params=mc.init_params(8, rng=_r), h=4, h_kv=4),
     E("params must be a GQAParams, got MHAParams")),
    (gqa.grouped_query_attention, dict(x=X8[0], params=P42, h=4, h_kv=2), E("add a batch axis with x[None]")),
    (gqa.grouped_query_attention, dict(x=X8, params=P42, h=4, h_kv=2, mask=np.ones((3, 3))), E("mask must be boolean")),
    (gqa.grouped_query_attention, dict(x=X8, params=P42, h=4, h_kv=2, mask=np.ones((3, 4), bool)),
     E("mask of shape (3, 4) does not broadcast to the scores' shape (2, 4, 3, 3)")),
    (gqa.grouped_query_attention, dict(x=X8, params=P42, h=4, h_kv=2, cache=gqa.KVCache(2, 2, 2, 2)),
     "^" + E("the cache holds 0 of max_len=2 tokens and cannot take 3 more; make it with max_len >= 3") + "$"),
    (gqa.grouped_query_attention, dict(x=X8, params=P42, h=4, h_kv=2, cache=gqa.KVCache(2, 1, 2, 9)),
     E("the cache has shape (2, 1, 9, 2) but this call needs (batch=2, h_kv=2, max_len, d_k=2)")),
    (gqa.grouped_query_attention, dict(x=X8, params=P42, h=4, h_kv=2, cache={}), E("cache must be a KVCache, a RollingKVCache or a PagedKVCache's sequence(i), got dict")),
    (gqa.grouped_query_attention, dict(x=X8, params=P42, h=4, h_kv=2, context=X8, cache=gqa.KVCache(2, 2, 2, 9)),
     E("with context= (cross-attention) the keys do not grow")),
    (gqa.grouped_query_attention, dict(x=np.zeros((2, 3, 6)), params=gqa.init_gqa_params(6, 2, 1, rng=_r),
                                       h=2, h_kv=1, rope_base=100.0), E("rope_base needs an even d_k")),
    (gqa.KVCache, dict(batch=1, h_kv=2, d_k=4, max_len=0), E("max_len=0 must be >= 1")),
    (gqa.KVCache, dict(batch=1, h_kv=2, d_k=4, max_len=4, dtype=np.int64), E("dtype=int64 is not a float type")),
    (gqa.cached_causal_mask, dict(T=2, offset=-1), E("offset=-1 must be a whole number >= 0")),
    (gqa.valid_kv_heads, dict(h=0), E("h=0 must be >= 1")),
    (gqa.gqa_from_mha, dict(params=mc.init_params(8, rng=_r), h=4, h_kv=3), E("h=4 is not divisible by h_kv=3")),
    (gqa.mla_attention, dict(x=X8, params=P42, h=2), E("params must be MLAParams for d_model=8")),
    (gqa.mla_attention, dict(x=X8, params=MLA, h=3), E("d_model=8 is not divisible by h=3")),
    (gqa.mla_attention, dict(x=X8, params=MLA, h=2, cache=gqa.KVCache(2, 1, 3, 9)), E("cache must be a LatentCache")),
    (gqa.mla_attention, dict(x=X8, params=MLA, h=2, cache=gqa.LatentCache(2, 3, 2)),
     E("the cache holds 0 of max_len=2 tokens and cannot take 3 more")),
    (gqa.init_mla_params, dict(d_model=8, h=2, d_latent=0, rng=_r), E("d_latent=0 must be >= 1")),
    (gqa.kv_cache_bytes_per_token, dict(layers=32, h_kv=0, d_k=128), E("h_kv=0 must be >= 1")),
    (gqa.kv_cache_bytes_per_token, dict(layers=32, h_kv=8, d_k=128, bytes_per_number=1.5),
     E("bytes_per_number=1.5 must be a positive integer")),
    (gqa.mla_cache_bytes_per_token, dict(layers=32, d_latent=512, d_rope=-1), E("d_rope=-1 must be a whole number >= 0")),
]


@pytest.mark.parametrize("fn, kwargs, pattern", BAD, ids=[f"{i}-{c[0].__name__}" for i, c in enumerate(BAD)])
def test_bad_input_names_the_values_and_the_fix(fn, kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        fn(**kwargs)


def test_a_refused_append_leaves_the_cache_unchanged():
    x, p = _problem(np.random.default_rng(0), 1, 3, 8, 4, 2)
    cache = gqa.KVCache(1, 2, 2, max_len=4)
    gqa.grouped_query_attention(x, p, 4, 2, cache=cache)
    before = cache.keys.copy()
    with pytest.raises(ValueError, match=E("holds 3 of max_len=4 tokens and cannot take 3 more")):
        gqa.grouped_query_attention(x, p, 4, 2, cache=cache)
    with pytest.raises(ValueError, match="does not broadcast"):
        gqa.grouped_query_attention(x[:, :1], p, 4, 2, cache=cache, mask=np.ones((1, 3), bool))
    assert cache.length == 3 and np.array_equal(cache.keys, before)


# ----------------------------------------------------------------------------- StreamingLLM's positions
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(window=st.integers(1, 6), sinks=st.integers(0, 3), T=st.integers(1, 16), seed=st.integers(0, 2 ** 16))
def test_rolling_cache_positions_inside_the_cache_are_streaming_llms(window, sinks, T, seed):
    """Xiao et al. 2023 §3.2: at every step the query attends the cached tokens (the sinks, then the window)
    numbered 0 .. n-1 inside the cache, itself last. That is plain causal RoPE attention over the
    subsequence of the tokens the cache holds: the query's output is that subsequence's last row."""
    rng = np.random.default_rng(seed)
    p = mc.init_gqa_params(8, 4, 2, rng=rng)
    x = rng.normal(size=(1, T, 8))
    cache = mc.RollingKVCache(1, 2, 2, window, sinks, positions="cache", rope_base=100.0)
    for t in range(T):
        out, _ = mc.grouped_query_attention(x[:, t:t + 1], p, 4, 2, cache=cache, rope_base=100.0)
        held = sorted({s for s in range(t + 1) if s < sinks or s > t - window})  # what the query sees
        sub = x[:, held]  # (1, n, D), numbered 0 .. n-1 in the cache
        ref, _ = mc.grouped_query_attention(sub, p, 4, 2, mask=mc.causal_mask(len(held)), rope_base=100.0)
        assert np.abs(out[0, 0] - ref[0, -1]).max() < 1e-10, (t, held)


def test_rolling_cache_absolute_positions_put_a_sink_at_its_true_distance():
    """With absolute positions (the default) the sink keeps its rotation: its score is that of distance t - 0."""
    rng = np.random.default_rng(3)
    p = mc.init_gqa_params(8, 4, 2, rng=rng)
    x = rng.normal(size=(1, 12, 8))
    for positions, same in (("absolute", True), ("cache", False)):
        cache = mc.RollingKVCache(1, 2, 2, 3, 1, positions=positions, rope_base=100.0)
        steps = [mc.grouped_query_attention(x[:, t:t + 1], p, 4, 2, cache=cache, rope_base=100.0)[0] for t in range(12)]
        t_, s_ = np.indices((12, 12))
        allowed = (s_ <= t_) & ((s_ > t_ - 3) | (s_ < 1))
        full, _ = mc.grouped_query_attention(x, p, 4, 2, mask=allowed, rope_base=100.0)
        assert np.allclose(np.concatenate(steps, 1), full, atol=1e-12) == same


@pytest.mark.parametrize("kwargs,match", [({"positions": "relative"}, "positions"), ({"positions": "cache"}, "rope_base"),
                                          ({"positions": "cache", "rope_base": 1.0}, "base")])
def test_rolling_cache_positions_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mc.RollingKVCache(1, 1, 2, 4, 1, **kwargs)


def test_rolling_cache_positions_cache_refuses_a_chunk_once_the_window_slid():
    cache = mc.RollingKVCache(1, 1, 2, window=2, sinks=1, positions="cache", rope_base=100.0)
    cache.append(np.ones((1, 1, 3, 2)), np.ones((1, 1, 3, 2)))  # positions 0-2: the gap is still 0
    with pytest.raises(ValueError, match="one token per call"):
        cache.append(np.ones((1, 1, 2, 2)), np.ones((1, 1, 2, 2)))
    assert cache.cache_positions(2).tolist() == [0, 1, 2]


def test_a_rolling_cache_keeps_its_position_mode_through_reset_and_matches_the_call_s_rope_base():
    """reset() keeps positions='cache' and its rope_base; a call that rotates with another base is refused."""
    cache = mc.RollingKVCache(1, 1, 2, window=3, sinks=1, positions="cache", rope_base=1e4)
    cache.reset()
    assert (cache.position_mode, cache.rope_base) == ("cache", 1e4)
    p = mc.init_gqa_params(4, 2, 1, rng=np.random.default_rng(0))
    x = np.random.default_rng(1).normal(size=(1, 1, 4))
    for wrong in (None, 500.0):
        with pytest.raises(ValueError, match="rope_base"):
            mc.grouped_query_attention(x, p, 2, 1, cache=cache, rope_base=wrong)
    assert cache.length == 0
    with pytest.raises(ValueError):
        mc.RollingKVCache(1, 1, 2, window=2, rope_base="abc")


# ---- the third round of attacks: the attack generator's and the blind attacker's findings
def test_conversions_refuse_what_is_not_their_parameters():
    mha, mla = mc.init_params(8, rng=np.random.default_rng(0)), mc.init_mla_params(8, 2, 4, rng=np.random.default_rng(0))
    for bad in (None, "spam", mla):
        with pytest.raises(ValueError, match="params must be an MHAParams"):
            mc.gqa_from_mha(bad, 2, 1)
    for bad in (None, "spam", mha):
        with pytest.raises(ValueError, match="params must be MLAParams"):
            mc.mla_to_mha(bad)
    assert mc.gqa_from_mha(mha, 4, 4).W_k.shape == (8, 8)  # h_kv = h changes nothing
    np.testing.assert_array_equal(mc.gqa_from_mha(mha, 4, 4).W_k, mha.W_k)


def test_kv_heads_and_gqa_name_a_missing_head_count():
    for bad in (None, 2.0, "2", True):
        with pytest.raises(ValueError, match="h="):
            gqa.kv_heads(bad, 1)
    p = mc.init_gqa_params(8, 2, 1, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="h_kv=None"):  # not a multi-head call's "W_k has shape (8, 4)"
        mc.grouped_query_attention(np.ones((1, 3, 8)), p, 2, None)


def test_kv_cache_table_takes_a_length_or_lengths_and_refuses_none():
    rows = mc.kv_cache_table(2, 8, 4, 2, [4, 8])
    assert [r.total_bytes for r in mc.kv_cache_table(2, 8, 4, 2, 4)] == [r.total_bytes[:1] for r in rows]
    for bad in ([], "s", [4, 0], [4.5], None):
        with pytest.raises(ValueError, match="seq_lens="):
            mc.kv_cache_table(2, 8, 4, 2, bad)


# ---- sizes and a mismatched RoPE base refused before anything changes

def test_init_gqa_and_mla_params_refuse_sizes_past_the_course_limit():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="projections would take"):
        gqa.init_gqa_params(50_000, 2, 1, rng=rng)
    with pytest.raises(ValueError, match=r"MLA's latent projections \(d_model, d_latent\) = \(8, 10000000000\)"):
        gqa.init_mla_params(8, 2, 10**10, rng=rng)


def test_a_rolling_cache_made_with_another_rope_base_is_refused_and_keeps_its_tokens():
    rng = np.random.default_rng(1)
    p = gqa.init_gqa_params(8, 2, 1, rng=rng)
    cache = kvcache.RollingKVCache(1, 1, 4, window=3, rope_base=500.0)  # positions="absolute"
    gqa.grouped_query_attention(rng.normal(size=(1, 2, 8)), p, 2, 1, cache=cache, rope_base=500.0)
    before = cache.keys.copy()
    for base in (10_000.0, None):
        with pytest.raises(ValueError, match=r"made with rope_base=500\.0 but this call rotates with rope_base="):
            gqa.grouped_query_attention(rng.normal(size=(1, 1, 8)), p, 2, 1, cache=cache, rope_base=base)
    assert cache.length == 2 and np.array_equal(cache.keys, before)
