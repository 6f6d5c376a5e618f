"""Why several heads (03 §5): one head can only blend two positions, two heads can gather both."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mha_course as mc
from mha_course.lessons import why_heads as wh

SIZES = [(16, 6, 8, 1, 5), (16, 6, 8, 5, 0), (20, 10, 6, 3, 7), (24, 4, 12, 2, 0)]


def _data(d_model, T, content, a, b, n=600, seed=0):
    x = wh.gather_inputs(n, T, content, d_model, rng=np.random.default_rng(seed))
    return x, wh.gather_target(x, a, b, content)


@pytest.mark.parametrize("d_model, T, content, a, b", SIZES)
def test_two_heads_gather_both_positions(d_model, T, content, a, b):
    x, y = _data(d_model, T, content, a, b)
    out, w = mc.multi_head_attention(x, wh.two_head_params(d_model, T, a, b, content=content), h=2)
    assert wh.relative_error(out, y) < 1e-3
    assert np.all(w[:, 0, :, a] > 0.99) and np.all(w[:, 1, :, b] > 0.99)


@pytest.mark.parametrize("d_model, T, content, a, b", SIZES)
def test_the_best_single_head_explains_only_half(d_model, T, content, a, b):
    x, y = _data(d_model, T, content, a, b)
    errors = wh.head_errors(x, y, a, b, content=content)
    assert 0.45 < errors[1] < 0.6, errors
    assert errors[2] < 1e-3, errors


def test_no_split_of_one_softmax_beats_one_half():
    x, y = _data(16, 6, 8, 1, 5, n=2000)
    rng = np.random.default_rng(1)
    splits = [np.eye(6)[1], np.eye(6)[5], np.full(6, 1 / 6)] + list(rng.dirichlet(np.ones(6), size=20))
    assert min(wh.blend_error(x, y, p) for p in splits) > 0.47


def test_one_head_suffices_for_one_position():
    """The single head fails because of the blend, not because it is too narrow."""
    x, _ = _data(16, 6, 8, 1, 5)
    y = np.broadcast_to(x[:, 1:2, :8], x[..., :8].shape)  # every query wants all of u_1
    y = np.concatenate([y, np.zeros_like(x[..., 8:])], axis=-1)
    assert wh.blend_error(x, y, np.eye(6)[1]) < 1e-12


def test_the_single_head_splits_its_weight_between_a_and_b():
    x, y = _data(16, 6, 8, 1, 5, n=50)
    _, w = mc.multi_head_attention(x, wh.one_head_params(x, y, 1, 5), h=1)
    np.testing.assert_allclose(w[:, 0, :, [1, 5]], 0.5, atol=1e-3)


def test_sharper_scores_help_two_heads_and_not_one():
    x, y = _data(16, 6, 8, 1, 5)
    errs = [wh.head_errors(x, y, 1, 5, sharpness=s) for s in (1.0, 2.0, 4.0, 8.0)]
    two = [e[2] for e in errs]
    assert all(later < earlier for earlier, later in zip(two, two[1:]))
    assert all(e[1] > 0.45 for e in errs)


def test_w_o_is_what_joins_the_two_heads():
    x, y = _data(16, 6, 8, 1, 5)
    p = wh.two_head_params(16, 6, 1, 5)
    unjoined, _ = mc.multi_head_attention(x, p._replace(W_o=np.eye(16)), h=2)
    assert wh.relative_error(unjoined, y) > 0.9   # the facts sit in the heads' columns, not the target's
    out, _ = mc.multi_head_attention(x, p, h=2)
    assert wh.relative_error(out, y) < 1e-3


def test_fit_output_projection_is_least_squares():
    rng = np.random.default_rng(2)
    A, W = rng.normal(size=(5, 7, 4)), rng.normal(size=(4, 4))
    np.testing.assert_allclose(wh.fit_output_projection(A, A @ W), W, atol=1e-10)


@pytest.mark.parametrize("call, fix", [
    (lambda: wh.two_head_params(12, 6, 1, 5), "d_model >= 16"),
    (lambda: wh.two_head_params(16, 6, 1, 1), "two different positions"),
    (lambda: wh.two_head_params(16, 6, 1, 6), "0..5"),
    (lambda: wh.gather_inputs(2, 6, 7, 16, rng=np.random.default_rng(0)), "content=8"),
    (lambda: wh.blend_error(*_data(16, 6, 8, 1, 5, n=3), [1.0, 0, 0]), "6 non-negative weights"),
])
def test_bad_sizes_name_the_fix(call, fix):
    with pytest.raises(ValueError, match=fix):
        call()


# ----------------------------------------------------------------------------- per-head maps (03, 04)


@settings(derandomize=True, max_examples=40, deadline=None)
@given(d_model=st.sampled_from([4, 6, 8, 12]), data=st.data(), seed=st.integers(0, 2**16))
def test_each_heads_score_map_has_rank_at_most_d_k_and_gives_the_scores(d_model, data, seed):
    h = data.draw(st.sampled_from(mc.valid_heads(d_model)))
    rng = np.random.default_rng(seed)
    p, x = mc.init_params(d_model, rng=rng), rng.normal(size=(2, 5, d_model))
    M = wh.head_qk_maps(p, h)
    d_k = d_model // h
    assert M.shape == (h, d_model, d_model)
    assert all(np.linalg.matrix_rank(m) <= d_k for m in M)
    t = mc.trace(x, p, h)
    np.testing.assert_allclose(np.einsum("btd,hde,bse->bhts", x, M, x) / np.sqrt(d_k), t["scores"], atol=1e-10)


@settings(derandomize=True, max_examples=40, deadline=None)
@given(d_model=st.sampled_from([4, 6, 8, 12]), data=st.data(), seed=st.integers(0, 2**16), bias=st.booleans())
def test_the_output_is_the_sum_of_the_heads_writes(d_model, data, seed, bias):
    """Concat(heads) W_O = sum_i head_i W_O^(i) = sum_i weights_i X OV_i (Elhage et al. 2021)."""
    h = data.draw(st.sampled_from(mc.valid_heads(d_model)))
    rng = np.random.default_rng(seed)
    p, x = mc.init_params(d_model, rng=rng, bias=bias), rng.normal(size=(2, 5, d_model))
    out, w = mc.multi_head_attention(x, p, h)
    writes = wh.head_writes(x, p, h, w)
    b_o = 0 if p.b_o is None else p.b_o
    np.testing.assert_allclose(writes.sum(axis=1) + b_o, out, atol=1e-10)
    OV = wh.head_ov_maps(p, h)
    assert all(np.linalg.matrix_rank(m) <= d_model // h for m in OV)
    if not bias:
        np.testing.assert_allclose(np.einsum("bhts,bsd,hde->bte", w, x, OV), out, atol=1e-10)


def test_a_wrong_split_of_W_O_would_not_give_the_output():
    """The row strips of W_O, not its column slices, pair with head i (the test can fail)."""
    rng = np.random.default_rng(0)
    p, x = mc.init_params(8, rng=rng), rng.normal(size=(1, 4, 8))
    out, w = mc.multi_head_attention(x, p, 2)
    wrong = p._replace(W_o=p.W_o.T)
    assert not np.allclose(wh.head_writes(x, wrong, 2, w).sum(axis=1), out)


@pytest.mark.parametrize("call, message", [
    (lambda p, x, w: wh.head_ov_maps(p, 3), "h=3"),
    (lambda p, x, w: wh.head_qk_maps("params", 2), "MHAParams"),
    (lambda p, x, w: wh.head_writes(x[..., :4], p, 2, w), "d_model"),
    (lambda p, x, w: wh.head_writes(x, p, 2, w[:, :1]), "weights must have shape"),
    (lambda p, x, w: wh.head_writes(x[0], p, 2, w), "x"),
])
def test_bad_arguments_are_named(call, message):
    rng = np.random.default_rng(0)
    p, x = mc.init_params(8, rng=rng), rng.normal(size=(1, 4, 8))
    _, w = mc.multi_head_attention(x, p, 2)
    with pytest.raises(ValueError, match=message):
        call(p, x, w)


@pytest.mark.parametrize("call, word", [
    (lambda x, y: wh.gather_target(x, True, 2, content=4), "a=True"),
    (lambda x, y: wh.gather_target(x, 0, -1, content=4), "b=-1"),
    (lambda x, y: wh.fit_output_projection(None, y), "concat"),
    (lambda x, y: wh.fit_output_projection(x * 1e-310, y), "does not fit in float64"),
    (lambda x, y: wh.relative_error(y, np.zeros_like(y)), "y is all zeros"),
    (lambda x, y: wh.two_head_params(16, 4, 0, 2, content=4, sharpness=np.nan), "sharpness"),
    (lambda x, y: wh.gather_output_projection(16, content=8.5), "content"),
])
def test_bad_arguments_are_named_at_the_entry(call, word):
    x = wh.gather_inputs(3, T=4, content=4, d_model=16, rng=np.random.default_rng(0))
    y = wh.gather_target(x, 0, 2, content=4)
    with pytest.raises((ValueError, TypeError), match=word):
        call(x, y)


def test_gather_inputs_refuses_sizes_past_the_course_limit():
    with pytest.raises(ValueError, match=r"inputs \(n, T, d_model\) = \(90000000, 6, 16\)"):
        wh.gather_inputs(90_000_000, rng=np.random.default_rng(3))


def test_the_weight_builders_refuse_a_d_model_past_the_course_limit():
    for build in (lambda: wh.two_head_params(40_000, 6, 1, 5), lambda: wh.gather_output_projection(50_000)):
        with pytest.raises(ValueError, match=r"four \(d_model, d_model\) = .* matrices would take"):
            build()
