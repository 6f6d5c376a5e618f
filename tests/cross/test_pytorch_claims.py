"""Every claim the course's prose makes about PyTorch, run against PyTorch (torch==2.13.0).

Each test names the notebook and the cell (or README section) whose sentence it checks. When a
test fails, the prose is wrong for this torch version: fix the sentence, not the test.
Without torch these tests skip with the reason; MHA_COURSE_REQUIRE_TORCH=1 (CI) makes that a failure.
"""
import numpy as np
import pytest

import mha_course as mc
from _mha_checks import require_torch
from mha_course import block

T, D, H = 5, 8, 2


@pytest.fixture
def torch():
    return require_torch()


@pytest.fixture
def qkv():
    rng = np.random.default_rng(0)
    return tuple(rng.normal(size=(1, H, T, 4)) for _ in range(3))


def _module(torch, params, h):
    """nn.MultiheadAttention holding our parameters (x @ W is nn.Linear's x @ weight.T)."""
    m = torch.nn.MultiheadAttention(params.d_model, h, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.from_numpy(np.concatenate([params.W_q.T, params.W_k.T, params.W_v.T])))
        m.in_proj_bias.zero_()
        m.out_proj.weight.copy_(torch.from_numpy(params.W_o.T.copy()))
        m.out_proj.bias.zero_()
    return m


def _x_params(seed=1):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(2, T, D)), mc.init_params(D, rng=rng)


def _t(torch, a):
    return torch.from_numpy(np.ascontiguousarray(a))


# ---- 02 §5, the table "Our convention and PyTorch's two conventions" -------------------------
def test_02_sdpa_bool_mask_true_means_may_attend(torch, qkv):
    M = np.random.default_rng(2).random((T, T)) < 0.6
    M[:, 0] = True
    got = torch.nn.functional.scaled_dot_product_attention(*(_t(torch, a) for a in qkv), attn_mask=_t(torch, M))
    np.testing.assert_allclose(got.numpy(), mc.scaled_dot_product_attention(*qkv, mask=M)[0], atol=1e-12)


def test_02_sdpa_float_mask_is_added_to_the_scores(torch, qkv):
    M = np.tril(np.ones((T, T), dtype=bool))
    bias = torch.where(_t(torch, M), 0.0, float("-inf")).double()
    got = torch.nn.functional.scaled_dot_product_attention(*(_t(torch, a) for a in qkv), attn_mask=bias)
    np.testing.assert_allclose(got.numpy(), mc.scaled_dot_product_attention(*qkv, mask=M)[0], atol=1e-12)


def test_02_sdpa_is_causal_builds_our_causal_mask(torch, qkv):
    got = torch.nn.functional.scaled_dot_product_attention(*(_t(torch, a) for a in qkv), is_causal=True)
    np.testing.assert_allclose(got.numpy(), mc.scaled_dot_product_attention(*qkv, mask=mc.causal_mask(T))[0],
                               atol=1e-12)


def test_02_multihead_attn_mask_true_means_not_allowed(torch):
    x, params = _x_params()
    M = mc.causal_mask(T)
    out, w = _module(torch, params, H)(*[_t(torch, x)] * 3, attn_mask=_t(torch, ~M), average_attn_weights=False)
    ours, ours_w = mc.multi_head_attention(x, params, H, mask=M)
    np.testing.assert_allclose(out.detach().numpy(), ours, atol=1e-10)
    np.testing.assert_allclose(w.detach().numpy(), ours_w, atol=1e-10)


def test_02_key_padding_mask_true_means_padding(torch):
    x, params = _x_params()
    pad = mc.padding_mask([5, 3], S=T)                     # ours: True = real key
    out, _ = _module(torch, params, H)(*[_t(torch, x)] * 3, key_padding_mask=_t(torch, ~pad[:, 0, 0]))
    np.testing.assert_allclose(out.detach().numpy(), mc.multi_head_attention(x, params, H, mask=pad)[0],
                               atol=1e-10)


def test_02_a_mask_for_the_other_api_is_silently_inverted(torch):
    """'Passing a mask built for one API to the other does not raise an error; it silently inverts it.'"""
    x, params = _x_params()
    M = np.ones((T, T), dtype=bool)
    M[:, 1] = False                                         # ours: nobody may read key 1
    out, w = _module(torch, params, H)(*[_t(torch, x)] * 3, attn_mask=_t(torch, M), average_attn_weights=False)
    assert np.all(w.detach().numpy()[..., [0, 2, 3, 4]] == 0)   # torch: only key 1 is read
    np.testing.assert_allclose(out.detach().numpy(), mc.multi_head_attention(x, params, H, mask=~M)[0], atol=1e-10)


# ---- 02 §5 "A query with nothing to read" and interview question 3 ----------------------------
def _blocked_row_0(torch):
    """nn.MultiheadAttention's attn_mask (True = blocked) with query 0 blocked from every key."""
    m = _t(torch, ~mc.causal_mask(T))
    m[0] = True
    return m


def test_02_torch_softmax_of_a_fully_masked_row_is_nan(torch):
    assert torch.isnan(torch.softmax(torch.full((6,), float("-inf")), dim=-1)).all()


def test_02_sdpa_gives_zeros_for_a_fully_masked_row(torch, qkv):
    M = mc.causal_mask(T).copy()
    M[0] = False
    got = torch.nn.functional.scaled_dot_product_attention(*(_t(torch, a) for a in qkv), attn_mask=_t(torch, M))
    assert torch.all(got[..., 0, :] == 0) and not torch.isnan(got).any()


@pytest.mark.parametrize("train, grad", [(False, False), (False, True), (True, True)])
def test_02_multihead_with_need_weights_gives_nan(torch, train, grad):
    x, params = _x_params()
    m = _module(torch, params, H).train(train)
    with torch.set_grad_enabled(grad):
        out, w = m(*[_t(torch, x)] * 3, attn_mask=_blocked_row_0(torch), need_weights=True)
    assert torch.isnan(out[:, 0]).all() and torch.isnan(w[:, 0]).all()
    assert not torch.isnan(out[:, 1:]).any()


@pytest.mark.parametrize("train, grad", [(False, True), (True, False), (True, True)])
def test_02_multihead_without_weights_gives_zeros(torch, train, grad):
    """need_weights=False: the row's attention is zeros (the output is then out_proj's bias, here 0)."""
    x, params = _x_params()
    m = _module(torch, params, H).train(train)
    with torch.set_grad_enabled(grad):
        out, w = m(*[_t(torch, x)] * 3, attn_mask=_blocked_row_0(torch), need_weights=False)
    assert w is None and torch.all(out[:, 0] == 0)


def test_02_multihead_fast_path_gives_nan_again(torch):
    """Eval mode, no gradients, one tensor as query, key and value: the inference fast path."""
    x, params = _x_params()
    m = _module(torch, params, H).eval()
    xt = _t(torch, x)
    with torch.no_grad():
        out, _ = m(xt, xt, xt, attn_mask=_blocked_row_0(torch), need_weights=False)
        out_copies, _ = m(xt, xt.clone(), xt.clone(), attn_mask=_blocked_row_0(torch), need_weights=False)
    assert torch.isnan(out[:, 0]).all()
    assert torch.all(out_copies[:, 0] == 0)                  # three tensors: no fast path, zeros


def test_02_interview_3_causal_mask_passed_to_multihead(torch):
    """Every query then reads only keys after it; the last query has none and comes out as NaN."""
    x, params = _x_params()
    out, w = _module(torch, params, H)(*[_t(torch, x)] * 3, attn_mask=_t(torch, mc.causal_mask(T)),
                                       average_attn_weights=False)
    w = w.detach().numpy()
    assert np.isnan(w[:, :, -1]).all() and np.isnan(out.detach().numpy()[:, -1]).all()
    later = np.triu(np.ones((T - 1, T), dtype=bool), k=1)   # key s > query t
    assert np.all(w[:, :, :-1][..., ~later] == 0)


def test_readme_our_zeros_where_multihead_gives_nan(torch):
    """README: a query with no key allowed gets zeros here; nn.MultiheadAttention (returning weights) NaN."""
    x, params = _x_params()
    M = mc.causal_mask(T).copy()
    M[0] = False
    ours, ours_w = mc.multi_head_attention(x, params, H, mask=M)
    assert np.all(ours[:, 0] == 0) and np.all(ours_w[:, :, 0] == 0)
    out, _ = _module(torch, params, H)(*[_t(torch, x)] * 3, attn_mask=_t(torch, ~M))
    assert torch.isnan(out[:, 0]).all()


# ---- 04 Exercise 4.4: "Use the biased variance (divide by d_model, as PyTorch does)" -----------
def test_04_torch_layer_norm_uses_the_biased_variance(torch):
    z = np.random.default_rng(3).normal(size=(2, 3, 12))
    theirs = torch.nn.functional.layer_norm(_t(torch, z), (12,), eps=1e-5).numpy()
    np.testing.assert_allclose(theirs, block.layer_norm(z), atol=1e-10)
    unbiased = (z - z.mean(-1, keepdims=True)) / np.sqrt(z.var(-1, ddof=1, keepdims=True) + 1e-5)
    assert not np.allclose(theirs, unbiased, atol=1e-3)
