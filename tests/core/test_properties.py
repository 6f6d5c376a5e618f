"""Invariants of attention, checked with Hypothesis on many small shapes, plus the Trace contract.

Deterministic: the "mha-course" settings profile is derandomized (no example database),
so CI sees the same examples on every run. Each test draws sizes, then seeds a numpy
Generator for the values, so examples stay small and fast.
"""
import warnings
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import mha_course as mc
from _mha_checks import (
    SAME_MATHS_TOL,
    assert_causal,
    assert_close,
    assert_dtype,
    assert_h1_is_sdpa,
    assert_h_independent,
    assert_permutation_equivariant,
    assert_rows_sum_to_one,
    assert_softmax_correct,
    assert_split_combine,
    assert_zero_rows_quietly,
    random_allowed,
)

settings.register_profile(
    "mha-course", derandomize=True, database=None, deadline=None, max_examples=40,
    print_blob=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PROFILE = settings.get_profile("mha-course")  # applied per test: other test files keep theirs

DTYPES = st.sampled_from([np.float64, np.float32])
D_MODELS = st.sampled_from([1, 2, 3, 4, 6, 8, 12])


@st.composite
def problems(draw, min_T=1, cross=None, bias=None):
    """(x, params, h, context, rng): small random multi-head attention inputs."""
    D = draw(D_MODELS)
    h = draw(st.sampled_from(mc.valid_heads(D)))
    B, T = draw(st.integers(1, 3)), draw(st.integers(min_T, 6))
    dtype = draw(DTYPES)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    params = mc.init_params(D, rng=rng, bias=draw(st.booleans()) if bias is None else bias, dtype=dtype)
    x = rng.normal(size=(B, T, D)).astype(dtype)
    is_cross = draw(st.booleans()) if cross is None else cross
    context = rng.normal(size=(B, draw(st.integers(1, 6)), D)).astype(dtype) if is_cross else None
    return x, params, h, context, rng


def _random_mask(rng, x, h, context, keep_one):
    B, T, _ = x.shape
    S = T if context is None else context.shape[1]
    shape = [(T, S), (B, 1, T, S), (B, h, T, S), (B, 1, 1, S)][rng.integers(4)]
    return random_allowed(rng, shape, keep_one=keep_one)


# ----------------------------------------------------------------------------- invariants
@PROFILE
@given(problems(), st.booleans())
def test_weight_rows_sum_to_one_where_any_key_is_allowed(problem, keep_one):
    x, params, h, context, rng = problem
    mask = _random_mask(rng, x, h, context, keep_one)
    _, weights = mc.multi_head_attention(x, params, h, mask=mask, context=context)
    assert_rows_sum_to_one(weights, mask)


@PROFILE
@given(problems(cross=False), st.data())
def test_unmasked_self_attention_is_permutation_equivariant(problem, data):
    x, params, h, _, _ = problem
    perm = np.array(data.draw(st.permutations(range(x.shape[1]))))
    assert_permutation_equivariant(mc.multi_head_attention, x, params, h, perm)


@PROFILE
@given(problems(min_T=2, cross=False), st.data())
def test_causal_mask_hides_the_future(problem, data):
    x, params, h, _, rng = problem
    t = data.draw(st.integers(0, x.shape[1] - 2))
    changed = x.copy()
    changed[:, t + 1:] = rng.normal(size=changed[:, t + 1:].shape) * 3  # new tokens after t
    assert_causal(mc.multi_head_attention, x, changed, params, h, t)


@PROFILE
@given(problems(), st.booleans())
def test_one_head_is_scaled_dot_product_attention_on_the_projections(problem, masked):
    x, params, _, context, rng = problem
    mask = _random_mask(rng, x, 1, context, keep_one=False) if masked else None
    assert_h1_is_sdpa(mc.multi_head_attention, mc.scaled_dot_product_attention, x, params, mask, context)


@PROFILE
@given(st.data())
def test_combine_heads_undoes_split_heads(data):
    D = data.draw(D_MODELS)
    h = data.draw(st.sampled_from(mc.valid_heads(D)))
    shape = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 5)), D)
    x = data.draw(hnp.arrays(data.draw(DTYPES), shape, elements=st.floats(-1e3, 1e3, width=32)))
    assert_split_combine(mc.split_heads, mc.combine_heads, x, h)


@PROFILE
@given(st.data())
def test_softmax_is_finite_and_correct_for_huge_logits(data):
    dtype = data.draw(DTYPES)
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=5))
    logits = st.one_of(st.sampled_from([1e4, -1e4, 0.0]), st.floats(-1e4, 1e4, width=32))
    x = data.draw(hnp.arrays(dtype, shape, elements=logits))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    assert_softmax_correct(mc.softmax, x, axis)


@PROFILE
@given(problems(), st.booleans())
def test_dtype_is_kept_by_every_public_function(problem, params_float64):
    x, params, h, context, rng = problem
    dtype = x.dtype
    if params_float64:  # float32 x with float64 params still computes and returns float32
        params = mc.MHAParams(*(None if p is None else p.astype(np.float64) for p in params))
    assert_dtype(mc.init_params(4, rng=rng, bias=True, dtype=dtype), dtype, "init_params")
    assert_dtype([mc.softmax(x)], dtype, "softmax")
    heads = mc.split_heads(x, h)
    assert_dtype([heads, mc.combine_heads(heads)], dtype, "split_heads/combine_heads")
    assert_dtype(mc.scaled_dot_product_attention(heads, heads, heads), dtype, "sdpa")
    assert_dtype(mc.multi_head_attention(x, params, h, context=context), dtype, "multi_head_attention")
    t = mc.trace(x, params, h, context=context)
    assert_dtype([stage.array for stage in t], dtype, "trace")


@PROFILE
@given(problems(min_T=2, cross=False))
def test_parameters_do_not_depend_on_h(problem):
    x, params, _, _, _ = problem
    assert_h_independent(mc.multi_head_attention, x, params)


@PROFILE
@given(problems(), st.booleans(), st.integers(1, 400))
def test_row_blocks_compute_the_same_attention(problem, masked, block_bytes):
    """The blocked loop inside attention gives the one-block result, for every block size."""
    x, params, h, context, rng = problem
    mask = _random_mask(rng, x, h, context, keep_one=False) if masked else None
    whole = mc.trace(x, params, h, mask=mask, context=context)
    with mock.patch.object(mc.fast, "_BLOCK_BYTES", block_bytes):
        blocks = mc.trace(x, params, h, mask=mask, context=context)
    tol = SAME_MATHS_TOL[x.dtype]
    for name in ("scores", "weights", "head_outputs", "output"):
        a, b = whole[name], blocks[name]
        assert np.array_equal(np.isneginf(a), np.isneginf(b)), name
        assert_close(np.where(np.isneginf(b), 0, b), np.where(np.isneginf(a), 0, a), x.dtype, name, tol=tol)


@PROFILE
@given(problems(), st.booleans(), st.sampled_from([0.1, 1.0, 4.0]))
def test_skipping_the_row_max_changes_nothing(problem, masked, scale):
    """Where |scores| stay small, attention skips subtracting the row max: same result as with it."""
    x, params, h, context, rng = problem
    x = (x * scale).astype(x.dtype)
    mask = _random_mask(rng, x, h, context, keep_one=False) if masked else None
    fast = mc.trace(x, params, h, mask=mask, context=context)
    with mock.patch.object(mc.fast, "_exp_is_safe", lambda Qs, K: False):
        guarded = mc.trace(x, params, h, mask=mask, context=context)
    tol = SAME_MATHS_TOL[x.dtype] * 10
    for name in ("weights", "head_outputs", "output"):
        assert_close(fast[name], guarded[name], x.dtype, name, tol=tol * max(1.0, np.abs(guarded[name]).max()))


@PROFILE
@given(DTYPES, st.sampled_from([0.1, 1.0, 3.0, 10.0, 100.0]), st.integers(0, 2**32 - 1))
def test_exp_shortcut_is_only_taken_when_every_score_is_in_range(dtype, scale, seed):
    rng = np.random.default_rng(seed)
    Qs, K = (rng.normal(scale=scale, size=(2, 5, 8)).astype(dtype) for _ in range(2))
    if mc.fast._exp_is_safe(Qs, K):
        limit = np.log(np.finfo(dtype).max) / 2
        assert np.abs(Qs.astype(np.float64) @ np.swapaxes(K, -1, -2)).max() <= limit


# ----------------------------------------------------------------------------- Trace
def _symbolic(shape_str, sizes):
    """'(B, h, T, d_k)' -> (2, 4, 5, 3) with the given sizes."""
    return tuple(sizes[s.strip()] for s in shape_str.strip("()").split(","))


@PROFILE
@given(problems(), st.booleans())
def test_trace_records_every_stage_in_order_with_its_shape(problem, masked):
    x, params, h, context, rng = problem
    mask = _random_mask(rng, x, h, context, keep_one=False) if masked else None
    t = mc.trace(x, params, h, mask=mask, context=context)
    B, T, D = x.shape
    sizes = {"B": B, "T": T, "S": T if context is None else context.shape[1], "h": h,
             "d_k": D // h, "d_model": D}
    assert t.names == [n for n in mc.STAGES if n not in ("Q_rope", "K_rope")]  # those: rope_base only
    assert t.h == h and t.d_k == D // h
    for stage in t.stages:
        assert stage.shape == stage.array.shape == _symbolic(mc.STAGES[stage.name], sizes), stage.name
    if mask is not None:  # scores hold -inf exactly where the mask forbids attending
        blocked = ~np.broadcast_to(mask, t["scores"].shape)
        assert np.array_equal(np.isneginf(t["scores"]), blocked)


@PROFILE
@given(problems(), st.booleans())
def test_trace_and_multi_head_attention_agree(problem, masked):
    """trace runs the textbook attention, multi_head_attention its fast sibling: the same numbers."""
    x, params, h, context, rng = problem
    mask = _random_mask(rng, x, h, context, keep_one=False) if masked else None
    out, weights = mc.multi_head_attention(x, params, h, mask=mask, context=context)
    t = mc.trace(x, params, h, mask=mask, context=context)
    tol = SAME_MATHS_TOL[np.dtype(out.dtype)]
    assert np.allclose(t.output, out, rtol=0, atol=tol * max(1.0, float(np.abs(out).max())))
    assert np.allclose(t.weights, weights, rtol=0, atol=tol)


def test_trace_arrays_are_read_only():
    rng = np.random.default_rng(0)
    t = mc.trace(rng.normal(size=(2, 3, 8)), mc.init_params(8, rng=rng, bias=True), h=2)
    for stage in t.stages:
        assert not stage.array.flags.writeable, stage.name
        with pytest.raises(ValueError, match="read-only"):
            stage.array[...] = 0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fully_masked_query_rows_give_zeros_without_warnings(dtype):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 4, 6)).astype(dtype)
    params = mc.init_params(6, rng=rng, bias=True, dtype=dtype)
    mask = np.ones((2, 1, 4, 4), bool)
    mask[0, :, 1] = False   # batch 0: query 1 may attend nothing
    mask[1, :, :, :] = mc.padding_mask([0, 0], 4)[1]  # batch 1: every key is padding
    for fn in (mc.trace, mc.multi_head_attention):
        assert_zero_rows_quietly(fn, x, params, 3, mask)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, w = mc.scaled_dot_product_attention(x, x, x, mask[:, 0])
        probs = mc.softmax(np.full((2, 3), -np.inf, dtype=dtype))
    assert (out[0, 1] == 0).all() and (w[0, 1] == 0).all() and (out[1] == 0).all()
    assert probs.dtype == dtype and (probs == 0).all()
