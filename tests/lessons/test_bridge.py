"""mha_course.bridge: our MHAParams under nn.MultiheadAttention's names.

The round trip is checked with Hypothesis (numpy only); the mapping itself against PyTorch:
an nn.MultiheadAttention loaded with torch_state_dict(params) computes our outputs and per-head
weights, and params_from_torch_state(module.state_dict()) gives back our numbers.
"""
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mha_course as mc
from _mha_checks import require_torch
from mha_course.lessons.bridge import params_from_torch_state, torch_state_dict


@settings(derandomize=True, max_examples=40, deadline=None)
@given(d_model=st.integers(1, 12), bias=st.booleans(), seed=st.integers(0, 2**16))
def test_round_trip_gives_back_the_same_params(d_model, bias, seed):
    p = mc.init_params(d_model, rng=np.random.default_rng(seed), bias=bias)
    back = params_from_torch_state(torch_state_dict(p))
    for name, a, b in zip(p._fields, p, back):
        assert (a is None and b is None) or np.array_equal(a, b), name


def test_state_dict_stacks_q_k_v_transposed_in_that_order():
    p = mc.init_params(5, rng=np.random.default_rng(3), bias=True)
    state = torch_state_dict(p)
    np.testing.assert_array_equal(state["in_proj_weight"], np.vstack([p.W_q.T, p.W_k.T, p.W_v.T]))
    np.testing.assert_array_equal(state["in_proj_bias"], np.concatenate([p.b_q, p.b_k, p.b_v]))
    np.testing.assert_array_equal(state["out_proj.weight"], p.W_o.T)


def test_state_dict_without_bias_has_no_bias_keys():
    state = torch_state_dict(mc.init_params(4, rng=np.random.default_rng(0)))
    assert sorted(state) == ["in_proj_weight", "out_proj.weight"]


@pytest.mark.parametrize("bad, message", [
    ("not params", "must be an MHAParams"),
    (mc.init_params(4, rng=np.random.default_rng(0), bias=True)._replace(b_k=None), "all four biases"),
])
def test_bad_params_are_named(bad, message):
    with pytest.raises(ValueError, match=message):
        torch_state_dict(bad)


def test_bad_state_is_named():
    with pytest.raises(ValueError, match="no \\['in_proj_weight'\\]"):
        params_from_torch_state({"out_proj.weight": np.eye(3)})
    with pytest.raises(ValueError, match=r"expected \(3·D, D\)"):
        params_from_torch_state({"in_proj_weight": np.zeros((4, 2)), "out_proj.weight": np.eye(2)})


def _torch_mha(torch, params, h, bias):
    D = params.d_model
    module = torch.nn.MultiheadAttention(D, h, bias=bias, batch_first=True, dtype=torch.float64)
    module.load_state_dict({k: torch.from_numpy(v) for k, v in torch_state_dict(params).items()})
    return module.eval()


@pytest.mark.parametrize("d_model, h, bias", [(8, 2, False), (12, 3, True), (6, 6, True), (5, 1, False)])
def test_loaded_module_computes_our_outputs_and_weights(d_model, h, bias):
    torch = require_torch()
    rng = np.random.default_rng([d_model, h, bias])
    params = mc.init_params(d_model, rng=rng, bias=bias)
    x = rng.normal(size=(2, 5, d_model))
    out, weights = mc.multi_head_attention(x, params, h, mask=mc.causal_mask(5))
    t = torch.from_numpy(x)
    blocked = torch.from_numpy(~mc.causal_mask(5))  # nn.MultiheadAttention: True = blocked
    with torch.no_grad():
        t_out, t_w = _torch_mha(torch, params, h, bias)(t, t, t, attn_mask=blocked,
                                                         need_weights=True, average_attn_weights=False)
    np.testing.assert_allclose(t_out.numpy(), out, atol=1e-12)
    np.testing.assert_allclose(t_w.numpy(), weights, atol=1e-12)


def test_state_of_a_torch_module_reads_back_as_our_params():
    torch = require_torch()
    torch.manual_seed(0)
    module = torch.nn.MultiheadAttention(8, 4, bias=True, batch_first=True, dtype=torch.float64)
    params = params_from_torch_state(module.state_dict())
    x = np.random.default_rng(1).normal(size=(1, 4, 8))
    t = torch.from_numpy(x)
    with torch.no_grad():
        t_out, _ = module(t, t, t, need_weights=False)
    np.testing.assert_allclose(mc.multi_head_attention(x, params, 4)[0], t_out.numpy(), atol=1e-12)


@pytest.mark.parametrize("train, need_weights, expected", [
    (True, True, "nan"), (True, False, "bias only"), (False, True, "nan"), (False, False, "nan")])
def test_fully_masked_row_in_torch_2_13_is_what_notebook_12_says(train, need_weights, expected):
    """Notebook 12 §4: NaN with need_weights=True and on the eval fast path; SDPA's zero otherwise."""
    torch = require_torch()
    torch.manual_seed(0)
    module = torch.nn.MultiheadAttention(4, 2, batch_first=True, dtype=torch.float64).train(train)
    x = torch.from_numpy(np.random.default_rng(0).normal(size=(1, 3, 4)))
    blocked = torch.from_numpy(~mc.causal_mask(3))
    blocked[0] = True                                   # query 0 may attend nothing
    with torch.no_grad():
        out, _ = module(x, x, x, attn_mask=blocked, need_weights=need_weights)
    if expected == "nan":
        assert torch.isnan(out[0, 0]).all()
    else:
        assert torch.equal(out[0, 0], module.out_proj.bias)
    assert not torch.isnan(out[0, 1:]).any()


def test_ours_gives_zero_attention_on_a_fully_masked_row():
    params = mc.init_params(4, rng=np.random.default_rng(2), bias=True)
    x = np.random.default_rng(3).normal(size=(1, 3, 4))
    keep = mc.causal_mask(3)
    keep[0] = False
    out, weights = mc.multi_head_attention(x, params, 2, mask=keep)
    assert np.all(weights[0, :, 0] == 0) and np.array_equal(out[0, 0], params.b_o)


@settings(derandomize=True, max_examples=40, deadline=None)
@given(h=st.integers(1, 6), T=st.integers(1, 6), S=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_averaging_heads_never_sharpens(h, T, S, seed):
    """max of a mean <= mean of the maxima: the default averaged weights are at most as peaked."""
    from mha_course.lessons.bridge import mean_peak_weight
    w = mc.softmax(np.random.default_rng(seed).normal(scale=3.0, size=(h, T, S)))
    assert mean_peak_weight(w.mean(axis=0)) <= np.mean([mean_peak_weight(wi) for wi in w]) + 1e-12
    assert 1 / S - 1e-12 <= mean_peak_weight(w) <= 1 + 1e-12


# ---------------------------------------------------------------- every key converted or refused
def _state(d_model=4):
    return torch_state_dict(mc.init_params(d_model, rng=np.random.default_rng(0), bias=True))


@pytest.mark.parametrize("state, key, fix", [
    ({k: v for k, v in _state().items() if k != "out_proj.bias"}, "'out_proj.bias'", "pass both biases"),
    ({k: v for k, v in _state().items() if k != "in_proj_bias"}, "'in_proj_bias'", "pass both biases"),
    ({**_state(), "out_proj.weight": np.zeros((5, 4))}, "'out_proj.weight'", "expected (4, 4)"),
    ({**_state(), "in_proj_bias": np.zeros(13)}, "'in_proj_bias'", "expected (12,)"),
    ({**_state(), "out_proj.bias": np.zeros(5)}, "'out_proj.bias'", "expected (4,)"),
    ({**_state(), "in_proj_weight": np.float64(1.0)}, "'in_proj_weight'", "expected (3·D, D)"),
    ({**_state(), "out_proj.weight": np.float64(1.0)}, "'out_proj.weight'", "expected (4, 4)"),
    ({**_state(), "bias_k": np.zeros((1, 1, 4)), "bias_v": np.zeros((1, 1, 4))}, "'bias_k'", "without add_bias_kv"),
    ({**_state(), "extra": np.zeros(4)}, "'extra'", "without other entries"),
])
def test_a_state_it_cannot_convert_is_one_value_error_naming_the_key_and_the_fix(state, key, fix):
    with pytest.raises(ValueError) as info:
        params_from_torch_state(state)
    assert key in str(info.value) and fix in str(info.value), str(info.value)


@pytest.mark.parametrize("kwargs, message", [
    ({"add_bias_kv": True}, "'bias_k'"),
    ({"add_zero_attn": True}, "add_zero_attn=True"),
    ({"kdim": 4, "vdim": 4}, "kdim=4, vdim=4"),
])
def test_torch_options_mhaparams_cannot_express_are_refused(kwargs, message):
    torch = require_torch()
    module = torch.nn.MultiheadAttention(8, 2, **kwargs)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        params_from_torch_state(module)
    if "add_zero_attn" not in kwargs:  # its state dict carries the option too
        with pytest.raises(ValueError):
            params_from_torch_state(module.state_dict())


def test_a_module_is_read_like_its_state_dict():
    torch = require_torch()
    module = torch.nn.MultiheadAttention(6, 3)
    ours, again = params_from_torch_state(module), params_from_torch_state(module.state_dict())
    assert all(np.array_equal(a, b) for a, b in zip(ours, again))


def test_every_fast_path_condition_is_a_reason_in_torchs_own_code():
    """The one statement of the fast-path rules names only reasons MultiheadAttention.forward records."""
    torch = require_torch()
    import inspect

    from mha_course.lessons.bridge import FAST_PATH_CONDITIONS, fast_path_rules
    source = inspect.getsource(torch.nn.MultiheadAttention.forward)
    missing = [reason for _, reason in FAST_PATH_CONDITIONS if reason not in source]
    assert not missing, f"torch {torch.__version__} records no such reasons: {missing}"
    assert "need_weights" not in " ".join(reason for _, reason in FAST_PATH_CONDITIONS)
    assert len(fast_path_rules().splitlines()) == len(FAST_PATH_CONDITIONS) + 2


@pytest.mark.parametrize("heads, expect_fast", [(2, True), (1, False), (3, False)])
def test_the_even_heads_condition_decides_the_fast_path(heads, expect_fast):
    """An odd number of heads (one condition of FAST_PATH_CONDITIONS) turns the fast path off."""
    torch = require_torch()
    m = torch.nn.MultiheadAttention(6, heads, batch_first=True).eval()
    x = torch.randn(1, 3, 6)
    calls = []
    original = torch._native_multi_head_attention

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    torch._native_multi_head_attention = spy
    try:
        with torch.no_grad():
            m(x, x, x, need_weights=True)
    finally:
        torch._native_multi_head_attention = original
    assert bool(calls) is expect_fast


@pytest.mark.parametrize("bad", ["spam", None, [[1.0, "a"]]])
def test_mean_peak_weight_refuses_what_is_no_array_of_weights_by_name(bad):
    """A string was numpy's 'could not convert string to float'."""
    from mha_course.lessons.bridge import mean_peak_weight
    with pytest.raises(ValueError, match="weights"):
        mean_peak_weight(bad)


def test_what_crosses_to_torch_is_finite_and_of_the_right_shapes():
    """NaN weights crossed silently both ways; a W_q of the wrong shape was numpy's concatenate message."""
    from mha_course.lessons.bridge import mean_peak_weight
    p = mc.init_params(4, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="params.W_q has 16 non-finite"):
        torch_state_dict(p._replace(W_q=np.full((4, 4), np.nan)))
    with pytest.raises(ValueError, match=re.escape("params.W_q has shape (3, 4)")):
        torch_state_dict(p._replace(W_q=np.zeros((3, 4))))
    with pytest.raises(ValueError, match=re.escape("params.W_k has shape (4, 3)")):
        torch_state_dict(p._replace(W_k=np.zeros((4, 3))))
    state = torch_state_dict(p)
    with pytest.raises(ValueError, match=re.escape("state['in_proj_weight'] holds NaN or inf")):
        params_from_torch_state({**state, "in_proj_weight": np.full((12, 4), np.nan)})
    for bad in (np.array([[5.0, -3.0]]), np.zeros((0, 3))):
        with pytest.raises(ValueError, match="weights"):
            mean_peak_weight(bad)
