"""Layer norm and the residual attention block: parity with PyTorch, invariants, clear errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import mha_course as mc
from mha_course.block import attention_block, layer_norm

FINITE = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, width=64)


def _rng(seed=0):
    return np.random.default_rng(seed)


# ---- layer_norm ---------------------------------------------------------------------------

@settings(max_examples=80, deadline=None, derandomize=True)
@given(arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(2, 16)), elements=FINITE))
def test_rows_have_mean_zero_and_unit_variance(x):
    spread = x.std(axis=-1)
    assume(np.all(spread > 1e-1))  # eps only matters for (nearly) constant rows
    y = layer_norm(x)
    np.testing.assert_allclose(y.mean(axis=-1), 0.0, atol=1e-9)
    # var(y) = var / (var + eps): within eps / var of 1
    np.testing.assert_allclose(y.var(axis=-1), 1.0, rtol=1e-5 / spread.min() ** 2 + 1e-9)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(arrays(np.float64, st.tuples(st.integers(1, 3), st.integers(2, 8)), elements=FINITE),
       st.floats(-50, 50), st.floats(0.1, 10))
def test_invariant_to_shift_and_positive_scale_of_each_row(x, shift, scale):
    assume(np.all(x.std(axis=-1) > 1e-1))
    np.testing.assert_allclose(layer_norm(x * scale + shift, eps=1e-12),
                               layer_norm(x, eps=1e-12), atol=1e-6)


def test_matches_the_definition_with_gamma_and_beta():
    x = _rng(1).normal(size=(2, 3, 6))
    gamma, beta = _rng(2).normal(size=6), _rng(3).normal(size=6)
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)  # biased (ddof=0), as PyTorch
    expected = (x - mean) / np.sqrt(var + 1e-5) * gamma + beta
    np.testing.assert_allclose(layer_norm(x, gamma=gamma, beta=beta), expected, rtol=1e-12)


def test_a_wrong_implementation_is_caught():
    """The unbiased variance (ddof=1) is a classic slip; our tests would see it."""
    x = _rng(4).normal(size=(3, 5))
    wrong = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, ddof=1, keepdims=True) + 1e-5)
    assert not np.allclose(layer_norm(x), wrong, atol=1e-3)
    assert not np.allclose(wrong.var(-1), 1.0, atol=1e-3)


def test_constant_row_gives_zeros_not_nan():
    y = layer_norm(np.full((2, 4), 3.0))
    assert np.array_equal(y, np.zeros((2, 4)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_keeps_dtype(dtype):
    x = _rng(5).normal(size=(2, 4)).astype(dtype)
    assert layer_norm(x, gamma=np.ones(4), beta=np.zeros(4)).dtype == dtype


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-10), (np.float32, 1e-5)])
def test_parity_with_torch_layer_norm(dtype, tol):
    torch = pytest.importorskip("torch")
    x = _rng(6).normal(2.0, 3.0, size=(2, 5, 12)).astype(dtype)
    gamma, beta = _rng(7).normal(size=12).astype(dtype), _rng(8).normal(size=12).astype(dtype)
    for eps in (1e-5, 1e-2):
        ours = layer_norm(x, eps=eps, gamma=gamma, beta=beta)
        ref = torch.nn.functional.layer_norm(torch.from_numpy(x), (12,), torch.from_numpy(gamma),
                                             torch.from_numpy(beta), eps=eps).numpy()
        np.testing.assert_allclose(ours, ref, atol=tol, rtol=tol)


@pytest.mark.parametrize("kwargs, match", [
    ({"x": np.float64(3.0)}, r"shape \(\.\.\., D\)"),
    ({"x": np.zeros((2, 0))}, r"D >= 1"),
    ({"x": np.ones((2, 4)), "eps": 0.0}, r"eps=0.0 must be a positive"),
    ({"x": np.ones((2, 4)), "eps": -1e-5}, r"eps=-1e-05"),
    ({"x": np.ones((2, 4)), "eps": float("inf")}, r"positive finite"),
    ({"x": np.ones((2, 4)), "eps": True}, r"eps=True"),
    ({"x": np.ones((2, 4)), "gamma": np.ones(3)}, r"gamma has shape \(3,\) but x has D=4"),
    ({"x": np.ones((2, 4)), "beta": np.ones((1, 4))}, r"beta has shape \(1, 4\)"),
    ({"x": np.array([["a", "b"]])}, r"x must be a numeric array"),
])
def test_bad_input_raises_a_clear_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        layer_norm(**kwargs)


# ---- attention_block --------------------------------------------------------------------

def _setup(B=2, T=5, D=8, seed=0, bias=False):
    params = mc.init_params(D, rng=_rng(seed), bias=bias)
    x = _rng(seed + 100).normal(size=(B, T, D))
    return x, params


@pytest.mark.parametrize("h", [1, 2, 4, 8])
def test_post_norm_is_layer_norm_of_residual_sum(h):
    x, p = _setup()
    out, t = attention_block(x, p, h, norm="post")
    mha_out, weights = mc.multi_head_attention(x, p, h)
    np.testing.assert_allclose(out, layer_norm(x + mha_out), rtol=1e-12)
    np.testing.assert_allclose(t["weights"], weights)
    np.testing.assert_allclose(out.mean(-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(out.var(-1), 1.0, atol=1e-3)


@pytest.mark.parametrize("h", [1, 2, 4])
def test_pre_norm_adds_attention_of_normalised_input(h):
    x, p = _setup(bias=True)
    out, t = attention_block(x, p, h, norm="pre")
    mha_out, _ = mc.multi_head_attention(layer_norm(x), p, h)
    np.testing.assert_allclose(out, x + mha_out, rtol=1e-12)
    np.testing.assert_allclose(t["X"], layer_norm(x))
    assert t.h == h and t.shapes["weights"] == (2, h, 5, 5)


def test_residual_passes_the_input_through_when_attention_adds_nothing():
    x, p = _setup()
    silent = p._replace(W_o=np.zeros_like(p.W_o))  # the chief files an empty report
    pre, _ = attention_block(x, silent, 2, norm="pre")
    post, _ = attention_block(x, silent, 2, norm="post")
    np.testing.assert_allclose(pre, x)
    np.testing.assert_allclose(post, layer_norm(x))


def test_mask_reaches_the_attention():
    x, p = _setup(T=4)
    _, t = attention_block(x, p, 2, mc.causal_mask(4))
    upper = np.triu(np.ones((4, 4), dtype=bool), k=1)
    assert np.all(t["weights"][..., upper] == 0.0)


def test_float32_in_float32_out():
    x, p = _setup()
    out, t = attention_block(x.astype(np.float32), p, 2)
    assert out.dtype == np.float32 and t["weights"].dtype == np.float32


def test_does_not_modify_its_input():
    x, p = _setup()
    before = x.copy()
    attention_block(x, p, 4, norm="pre")
    attention_block(x, p, 4, norm="post")
    assert np.array_equal(x, before)


@pytest.mark.parametrize("args, kwargs, match", [
    ((np.ones((5, 8)), 2), {}, r"x must be 3-D \(B, T, d_model\).*x\[None\]"),
    ((np.ones((1, 5, 8)), 3), {}, r"d_model=8 is not divisible by h=3; valid h: 1, 2, 4, 8"),
    ((np.ones((1, 5, 8)), 2), {"norm": "middle"}, r"norm='middle' is not one of \('post', 'pre'\)"),
    ((np.ones((1, 5, 6)), 2), {}, r"x has last dim 6 but params were made for d_model=8"),
    ((np.ones((1, 0, 8)), 2), {}, r"empty axis"),
])
def test_block_bad_input_raises_a_clear_value_error(args, kwargs, match):
    _, p = _setup()
    x, h = args
    with pytest.raises(ValueError, match=match):
        attention_block(x, p, h, **kwargs)
