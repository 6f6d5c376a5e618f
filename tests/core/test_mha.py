"""mha.py: multi-head attention as the formula says, its Trace, and the fast sibling it runs on."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mha_course as mc
from mha_course import fast
from mha_course.mha import linear, rope_heads


def by_hand(x, p, h, mask=None, context=None):
    """concat_i(softmax(Q_i K_i^T / sqrt(d_k)) V_i) W_o, one head at a time, with loops."""
    ctx = x if context is None else context
    D = x.shape[-1]
    d_k = D // h
    Q, K, V = x @ p.W_q, ctx @ p.W_k, ctx @ p.W_v
    heads = []
    for i in range(h):
        cols = slice(i * d_k, (i + 1) * d_k)
        s = Q[..., cols] @ np.swapaxes(K[..., cols], -1, -2) / math.sqrt(d_k)
        if mask is not None:
            s = np.where(mask, s, -np.inf)
        heads.append(mc.softmax(s) @ V[..., cols])
    return np.concatenate(heads, axis=-1) @ p.W_o


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([(8, 1), (8, 2), (8, 4), (12, 3), (6, 6)]), st.integers(1, 5), st.integers(1, 5),
       st.booleans(), st.integers(0, 999))
def test_multi_head_attention_is_the_formula(sizes, T, S, cross, seed):
    D, h = sizes
    rng = np.random.default_rng(seed)
    p = mc.init_params(D, rng=rng)
    x = rng.normal(size=(2, T, D))
    context = rng.normal(size=(2, S, D)) if cross else None
    mask = None if cross else mc.causal_mask(T)
    out, w = mc.multi_head_attention(x, p, h, mask=mask, context=context)
    assert np.allclose(out, by_hand(x, p, h, mask, context), atol=1e-12)
    assert w.shape == (2, h, T, S if cross else T)


def test_the_trace_records_every_stage_of_the_same_computation():
    rng = np.random.default_rng(0)
    p, x = mc.init_params(8, rng=rng, bias=True), rng.normal(size=(1, 4, 8))
    t = mc.trace(x, p, 2, mask=mc.causal_mask(4))
    assert t.names == ["X", "Q", "K", "V", "Q_heads", "K_heads", "V_heads", "scores", "weights",
                       "head_outputs", "concat", "output"]
    assert np.allclose(t["Q"], x @ p.W_q + p.b_q) and np.isneginf(t["scores"][0, 0, 0, 1])
    assert np.allclose(t.output, mc.multi_head_attention(x, p, 2, mask=mc.causal_mask(4))[0], atol=1e-14)


def test_multi_head_attention_takes_the_fast_path(monkeypatch):
    """The core runs on fast.attend (a spy on its block function sees every call); trace does not."""
    calls = []
    real = fast._attend_block
    monkeypatch.setattr(fast, "_attend_block", lambda *a: calls.append(1) or real(*a))
    rng = np.random.default_rng(1)
    p, x = mc.init_params(8, rng=rng), rng.normal(size=(2, 3, 8))
    mc.multi_head_attention(x, p, 4)
    assert calls, "multi_head_attention did not run the fast sibling"
    calls.clear()
    mc.trace(x, p, 4)
    assert not calls, "trace should run the textbook attention"


def test_linear_and_rope_heads():
    x, W, b = np.ones((2, 3)), np.arange(6.0).reshape(3, 2), np.array([1.0, -1.0])
    assert np.array_equal(linear(x, W), x @ W) and np.array_equal(linear(x, W, b), x @ W + b)
    heads = np.random.default_rng(0).normal(size=(1, 2, 5, 4))
    assert rope_heads(heads, None) is heads
    assert np.allclose(rope_heads(heads, 100.0, start=3), mc.apply_rope(heads, np.arange(3, 8), base=100.0))


def test_the_parameters_do_not_depend_on_h():
    p = mc.init_params(12, rng=np.random.default_rng(0), bias=True)
    assert mc.count_params(p) == 4 * 12 * 12 + 4 * 12
    for h in mc.valid_heads(12):
        assert mc.multi_head_attention(np.ones((1, 2, 12)), p, h)[1].shape == (1, h, 2, 2)
    with pytest.raises(ValueError, match="valid h: 1, 2, 3, 4, 6, 12"):
        mc.multi_head_attention(np.ones((1, 2, 12)), p, 5)


# ---- the third round of attacks: the attack generator's findings
def test_a_trace_is_made_of_stages_and_a_head_count():
    t = mc.trace(np.ones((1, 3, 8)), mc.init_params(8, rng=np.random.default_rng(0)), 2)
    assert mc.Trace(t.stages, np.int64(2), None).h == 2
    for bad in (True, 0, 2.5, "2", None):
        with pytest.raises(ValueError, match="h="):
            mc.Trace(t.stages, bad, None)
    for bad in (None, 3, "spam", [1, 2]):
        with pytest.raises(ValueError, match="stages must"):
            mc.Trace(bad, 2, None)


def test_count_params_counts_any_parameter_tuple_and_refuses_the_rest():
    assert mc.count_params(mc.init_gqa_params(8, 2, 1, rng=np.random.default_rng(0))) == 2 * 64 + 2 * 32
    for bad in (None, 3, "spam", (np.ones(3),)):
        with pytest.raises(ValueError, match="params must be a parameter tuple"):
            mc.count_params(bad)


# ---- sizes, flags and bools checked at the entry; overflow refused; the caller's kernel checked

def test_init_params_refuses_a_huge_d_model_and_a_bias_that_is_not_a_bool():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"four \(d_model, d_model\) = \(40000, 40000\) projections would take"):
        mc.init_params(40_000, rng=rng)
    for bias in ("no", 1, None):
        with pytest.raises(ValueError, match="bias=.* must be True or False"):
            mc.init_params(4, rng=rng, bias=bias)


def test_bool_inputs_are_refused_as_tokens():
    p = mc.init_params(8, rng=np.random.default_rng(1))
    x = np.random.default_rng(2).normal(size=(1, 3, 8))
    with pytest.raises(ValueError, match="x is a bool array"):
        mc.multi_head_attention(x > 0, p, 2)
    with pytest.raises(ValueError, match="context is a bool array"):
        mc.trace(x, p, 2, context=np.ones((1, 4, 8), bool))


@pytest.mark.parametrize("dtype, scale", [(np.float64, 1e157), (np.float32, 1e21)])
def test_an_x_whose_scores_would_overflow_is_refused_and_a_large_finite_one_computed(dtype, scale):
    p = mc.init_params(16, rng=np.random.default_rng(3), dtype=dtype)
    x = np.random.default_rng(4).normal(size=(2, 4, 16)).astype(dtype)
    for run in (mc.multi_head_attention, mc.trace):
        with pytest.raises(ValueError, match=r"x \(max \|x\| = .*\) .* too large for float.*scale x down"):
            run(x * dtype(scale), p, 4)
    out, _ = mc.multi_head_attention(x * dtype(scale ** 0.5), p, 4)  # large, but every score fits
    assert np.isfinite(out).all()


def test_a_trace_names_its_stages_with_an_error_that_is_a_value_and_a_key_error():
    t = mc.trace(np.ones((1, 2, 4)), mc.init_params(4, rng=np.random.default_rng(5)), 2)
    for key in ("weigths", 3, -2, None):
        with pytest.raises(ValueError, match=r"no stage .*weights") as caught:
            t[key]
        assert isinstance(caught.value, KeyError) and isinstance(caught.value, mc.mha.StageError)
    assert 0 not in t and "weights" in t


def test_a_callers_kernel_is_checked_for_its_signature_and_what_it_returns():
    p = mc.init_params(8, rng=np.random.default_rng(6))
    x = np.random.default_rng(7).normal(size=(2, 3, 8))
    with pytest.raises(TypeError, match=r"attend\(Q, K, V\) cannot be called as attend\(Q, K, V, mask, bias=None, scores=None\)"):
        mc.multi_head_attention(x, p, 2, attend=lambda Q, K, V: (Q, None))
    bad = {"NaN out": lambda Q, K, V, mask, bias=None, scores=None: (np.full(Q.shape, np.nan), None),
           "weights of the wrong shape": lambda Q, K, V, mask, bias=None, scores=None: (Q, np.ones((2, 3))),
           "no pair": lambda Q, K, V, mask, bias=None, scores=None: Q}
    for name, kernel in bad.items():
        with pytest.raises(ValueError, match="attend returned"):
            mc.multi_head_attention(x, p, 2, attend=kernel)
    out, w = mc.multi_head_attention(x, p, 2, attend=lambda Q, K, V, mask, **kw: fast.attend(Q, K, V, mask, **kw))
    assert np.allclose(out, mc.multi_head_attention(x, p, 2)[0]) and w.shape == (2, 2, 3, 3)
