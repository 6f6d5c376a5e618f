"""The findings of the last attack round that are not caches (tests/cross/test_cache_states.py has those), each held.

One convention (causal attention with T != S is bottom-right aligned everywhere, against PyTorch where
it has the feature), one set of inputs for the two split-KV functions, grouped_query_attention with
multi_head_attention's rope_scaling and bias, and the argument checks the third attack found missing.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import mha_course as mc
from _mha_checks import require_torch
from mha_course import efficient
from mha_course.lessons import long_context as lc

TOL = 1e-12


def _qkv(rng, T, S, d_k=4, batch=(2,)):
    return (rng.normal(size=(*batch, T, d_k)), rng.normal(size=(*batch, S, d_k)), rng.normal(size=(*batch, S, d_k)))


# ----------------------------------------------------------------------------- one causal convention
@pytest.mark.filterwarnings("ignore:Lower right causal bias")  # torch: NaN where a query sees no key
@pytest.mark.parametrize("T,S", [(1, 7), (3, 7), (7, 7), (9, 5)])
def test_causal_is_bottom_right_everywhere_and_torch_is_causal_is_top_left(T, S):
    """tiled_attention(causal=True), linear_attention(causal=True) and the KV cache's mask agree:
    query t sees keys 0..S - T + t; torch's causal_lower_right is that; its is_causal=True is not."""
    torch = require_torch()
    from torch.nn.attention.bias import causal_lower_right

    rng = np.random.default_rng(T * 10 + S)
    Q, K, V = _qkv(rng, T, S)
    allowed = np.tril(np.ones((T, S), bool), k=S - T)
    if T <= S:
        assert np.array_equal(allowed, mc.cached_causal_mask(T, S - T))
    tiled = mc.tiled_attention(Q, K, V, block_size=2, causal=True)
    np.testing.assert_allclose(tiled, mc.scaled_dot_product_attention(Q, K, V, allowed)[0], atol=TOL)
    tq, tk, tv = (torch.from_numpy(a) for a in (Q, K, V))
    lower_right = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=causal_lower_right(T, S))
    seen = allowed.any(-1)  # torch gives NaN where a query sees no key (T > S); the package gives zeros
    np.testing.assert_allclose(tiled[:, seen], lower_right.numpy()[:, seen], atol=1e-10)
    assert np.all(tiled[:, ~seen] == 0)
    if T != S:
        top_left = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True).numpy()
        assert not np.allclose(tiled[:, seen], top_left[:, seen])  # the docstring's warning holds
    np.testing.assert_allclose(mc.linear_attention(Q, K, V, causal=True),
                               mc.linear_attention_quadratic(Q, K, V, causal=True), atol=TOL)


def test_a_decode_step_through_tiled_attention_is_the_kv_caches_step():
    """The finding: tiled_attention(q_last, K_all, V_all, causal=True) attended key 0 only."""
    rng = np.random.default_rng(0)
    Q, K, V = _qkv(rng, 6, 6)
    full = mc.scaled_dot_product_attention(Q, K, V, mc.causal_mask(6))[0]
    step = mc.tiled_attention(Q[:, -1:], K, V, causal=True)  # the last query, every key
    np.testing.assert_allclose(step, full[:, -1:], atol=TOL)


# ----------------------------------------------------------------------------- split-KV: the same inputs
@pytest.mark.parametrize("n_splits", [1, 3, 7, 50])
def test_split_kv_threaded_takes_what_split_kv_attention_takes(n_splits):
    if n_splits > 7:  # more splits than keys: both refuse, with one message (no silent cap)
        Q, K, V = _qkv(np.random.default_rng(0), 2, 7)
        for fn in (efficient.split_kv_attention, lambda *a: lc.split_kv_threaded(*a, workers=2)):
            with pytest.raises(ValueError, match="more than the S=7 keys"):
                fn(Q, K, V, n_splits)
        return
    rng = np.random.default_rng(n_splits)
    Q, K, V = _qkv(rng, 2, 7)
    mask = rng.random((2, 7)) < 0.7
    mask[:, 0] = True
    for args in ((Q, K, V), (Q.tolist(), K.tolist(), V.tolist())):  # lists too (AttributeError before)
        for m in (None, mask, mask[:1]):
            if n_splits > 7:  # both refuse it, with the same words ("K has an empty axis" before)
                for fn in (efficient.split_kv_attention, lambda *a, **k: lc.split_kv_threaded(*a, workers=2, **k)):
                    with pytest.raises(ValueError, match="n_splits=50 is more than the S=7 keys"):
                        fn(*args, n_splits, mask=m)
                continue
            want = efficient.split_kv_attention(*args, n_splits, mask=m)
            got = lc.split_kv_threaded(*args, n_splits, workers=2, mask=m)
            np.testing.assert_allclose(got, want, atol=TOL)
    for bad in (dict(n_splits=0), dict(workers=0), dict(n_splits=2.5)):
        kwargs = {"n_splits": 2, "workers": 1, **bad}
        with pytest.raises(ValueError, match=next(iter(bad))):
            lc.split_kv_threaded(Q, K, V, **kwargs)


# ----------------------------------------------------------------------------- merge_attention_partials
def test_merge_attention_partials_refuses_what_it_cannot_merge():
    one, lse = np.ones((1, 1)), np.zeros((1, 1))
    cases = [(([one], [lse, lse]), "outs has 1 partial outputs and lses 2"),
             (([one], [np.full((1, 1), np.inf)]), "NaN or \\+inf"),
             (([one], [np.full((1, 1), np.nan)]), "NaN or \\+inf"),
             (([], []), "at least one"),
             (([np.ones((3, 2))], [np.zeros(3)]), r"lses\[0\] has shape \(3,\).*\(3, 1\)"),
             ((np.ones((2, 1, 1)), [lse, lse]), "outs must be a list")]
    for (outs, lses), pattern in cases:
        with pytest.raises((ValueError, TypeError), match=pattern):
            efficient.merge_attention_partials(outs, lses)
    # -inf (a chunk with no allowed key) is still fine, and a row of -inf everywhere gives zeros
    out = efficient.merge_attention_partials([one * 3, one], [np.full((1, 1), -np.inf), lse])
    assert out.tolist() == [[1.0]]


# ----------------------------------------------------------------------------- GQA = MHA's options
def test_grouped_query_attention_takes_rope_scaling_and_bias_as_multi_head_attention_does():
    rng = np.random.default_rng(3)
    D, h, T = 8, 2, 5
    p = mc.init_params(D, rng=rng)
    x = rng.normal(size=(2, T, D))
    scaling = {"type": "linear", "factor": 2.0}
    bias = mc.alibi_bias(h, T)
    want, w_want = mc.multi_head_attention(x, p, h, rope_base=100.0, rope_scaling=scaling, bias=bias,
                                           mask=mc.causal_mask(T))
    got, w_got = mc.grouped_query_attention(x, mc.GQAParams(*p), h, h, rope_base=100.0, rope_scaling=scaling,
                                            bias=bias, mask=mc.causal_mask(T))
    np.testing.assert_allclose(got, want, atol=TOL)
    np.testing.assert_allclose(w_got, w_want, atol=TOL)
    # grouped (h_kv = 1), bias per head: the mean-pooled GQA model against its own MHA expansion
    g = mc.gqa_from_mha(p, h, 1)
    expanded = mc.MHAParams(g.W_q, *(np.tile(W, (1, h)) for W in (g.W_k, g.W_v)), g.W_o)
    np.testing.assert_allclose(mc.grouped_query_attention(x, g, h, 1, bias=bias, rope_base=100.0)[0],
                               mc.multi_head_attention(x, expanded, h, bias=bias, rope_base=100.0)[0], atol=TOL)
    # with a cache: the prefill and a decode step with ALiBi's bias over the cached keys
    cache = mc.KVCache(2, 1, D // h, T)
    mc.grouped_query_attention(x[:, :-1], g, h, 1, cache=cache, bias=mc.alibi_bias(h, T - 1))
    step, _ = mc.grouped_query_attention(x[:, -1:], g, h, 1, cache=cache, bias=mc.alibi_bias(h, 1, T))
    full, _ = mc.multi_head_attention(x, expanded, h, mask=mc.causal_mask(T), bias=bias)
    np.testing.assert_allclose(step, full[:, -1:], atol=TOL)


@pytest.mark.parametrize("call", ["multi_head_attention", "trace", "grouped_query_attention"])
def test_a_rope_scaling_without_rope_base_is_refused_not_ignored(call):
    rng = np.random.default_rng(0)
    p = mc.init_params(8, rng=rng)
    x = rng.normal(size=(1, 3, 8))
    fn = getattr(mc, call)
    args = (x, mc.GQAParams(*p), 2, 2) if call == "grouped_query_attention" else (x, p, 2)
    for scaling in ({"type": "linear", "factor": 2.0}, "garbage"):
        with pytest.raises(ValueError, match="rope_scaling=.* needs rope_base"):
            fn(*args, rope_scaling=scaling)
    with pytest.raises(ValueError, match="scaling"):
        fn(*args, rope_base=10000.0, rope_scaling="garbage")  # and a bad one with rope_base, as before


def test_params_that_do_not_fit_the_inputs_dtype_are_refused_not_inf():
    rng = np.random.default_rng(0)
    p = mc.init_params(4, rng=rng)
    big = mc.MHAParams(p.W_q * 1e300, p.W_k, p.W_v, p.W_o)
    with pytest.raises(ValueError, match=r"params.W_q holds .* more than float32 can hold"):
        mc.multi_head_attention(np.ones((1, 2, 4), np.float32), big, 2)
    with pytest.raises(ValueError, match="context holds .* more than float32"):
        mc.multi_head_attention(np.ones((1, 2, 4), np.float32), p, 2, context=np.full((1, 3, 4), 1e300))


# ----------------------------------------------------------------------------- argument checks
def test_quantize_and_dequantize_refuse_what_they_cannot_read():
    with pytest.raises(ValueError, match="d_k"):
        mc.quantize_kv(np.zeros((2, 0)))  # numpy's zero-size reduction error before
    with pytest.raises(ValueError, match="x"):
        mc.quantize_kv(np.float64(3.0))  # a 0-d scalar was accepted
    q, scale = mc.quantize_kv(np.arange(6.0).reshape(2, 3))
    with pytest.raises(ValueError, match=r"scale has shape \(3,\)"):
        mc.dequantize_kv(q, scale[:, 0].repeat(3)[:3])  # a (d_k,) scale broadcast along the wrong axis before
    with pytest.raises(ValueError, match="scale has shape"):
        mc.dequantize_kv(q, np.ones((5, 1)))  # numpy's broadcast error before
    np.testing.assert_allclose(mc.dequantize_kv(q, scale), np.arange(6.0).reshape(2, 3), atol=0.02)
    for bits in (-8, 0, 17, 2.5, True):
        with pytest.raises(ValueError, match="bits"):
            lc.quantized_kv_bytes_per_token(32, 8, 128, bits)  # -4.0 for bits=-8 before


def test_serve_and_the_losses_refuse_bad_tokens_and_sizes(long_context_models):
    config, params = long_context_models["rope"]
    prompt = np.array([1, 2, 3])
    for kwargs, pattern in [(dict(block_size=0), "block_size"), (dict(prompts=[]), "prompts"),
                            (dict(prompts=[np.array([1, config.vocab])]), "prompts\\[0\\] holds the id"),
                            (dict(prompts=[np.array([1.0, 2.0])]), "whole-number token ids"),
                            (dict(prompts=[np.array([-1, 2])]), "holds the id -1"),
                            (dict(max_len=3), "max_len")]:
        args = {"prompts": [prompt], "n_new": 2, "max_len": 8, **kwargs}
        with pytest.raises(ValueError, match=pattern):
            lc.serve(params, config, args.pop("prompts"), args.pop("n_new"), **args)
    logits = np.zeros((1, 2, 4))
    for targets, pattern in [(np.array([[0, 4]]), "holds the id 4"), (np.array([[0, -1]]), "holds the id -1"),
                             (np.array([[0.0, 1.0]]), "whole-number"), (np.array([0, 1]), "targets has shape")]:
        with pytest.raises(ValueError, match=pattern):
            lc.token_losses(logits, targets)
    batch = lc.stream_batch(config, 2, np.random.default_rng(0), n=2)
    for chunk in (0, -3, 2.5):
        with pytest.raises(ValueError, match="chunk"):
            lc.stream_position_losses(params, config, batch, window=8, chunk=chunk)
    with pytest.raises(ValueError, match="give window= too"):
        lc.stream_position_losses(params, config, batch, chunk=4)  # a chunk without a window was ignored
    with pytest.raises(ValueError, match="T >= 2"):
        lc.uniform_share(1)  # NaN before
    assert math.isclose(lc.uniform_share(3), (1 / 2 + 1 / 3) / 2)
