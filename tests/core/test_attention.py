"""attention.py, the textbook formula: softmax, the scores, scaled dot-product attention and the masks."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mha_course as mc
from mha_course.attention import attention_scores, check_attention_inputs


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5), st.integers(1, 7), st.floats(-50, 50), st.integers(0, 10_000))
def test_softmax_rows_are_distributions_invariant_to_a_shift(rows, cols, shift, seed):
    x = np.random.default_rng(seed).normal(scale=5, size=(rows, cols))
    p = mc.softmax(x)
    assert np.all(p >= 0) and np.allclose(p.sum(-1), 1)
    assert np.allclose(mc.softmax(x + shift), p)
    assert np.array_equal(p.argmax(-1), x.argmax(-1))


def test_softmax_of_huge_logits_and_of_masked_rows():
    assert np.allclose(mc.softmax(np.array([1e4, 1e4 - np.log(3)])), [0.75, 0.25])
    assert np.array_equal(mc.softmax(np.full(3, -np.inf)), np.zeros(3))
    assert mc.softmax(np.ones(3, np.float32)).dtype == np.float32


def test_the_scores_are_q_dot_k_over_sqrt_dk_and_minus_inf_where_masked():
    rng = np.random.default_rng(0)
    Q, K = rng.normal(size=(3, 4)), rng.normal(size=(5, 4))
    mask = rng.random((3, 5)) < 0.6
    s = attention_scores(Q, K, mask)
    for t in range(3):
        for j in range(5):
            want = Q[t] @ K[j] / math.sqrt(4) if mask[t, j] else -np.inf
            assert s[t, j] == pytest.approx(want)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6), st.integers(1, 6), st.integers(1, 5), st.integers(0, 999))
def test_attention_is_a_weighted_average_of_the_values(T, S, d_k, d_v, seed):
    rng = np.random.default_rng(seed)
    Q, K, V = rng.normal(size=(T, d_k)), rng.normal(size=(S, d_k)), rng.normal(size=(S, d_v))
    out, w = mc.scaled_dot_product_attention(Q, K, V)
    assert np.allclose(w, mc.softmax(Q @ K.T / math.sqrt(d_k)))
    assert np.allclose(out, w @ V)
    assert np.all(out <= V.max(0) + 1e-12) and np.all(out >= V.min(0) - 1e-12)  # a convex combination


def test_a_query_that_may_attend_nothing_gets_zeros_not_nan():
    rng = np.random.default_rng(1)
    Q, K, V = rng.normal(size=(2, 3)), rng.normal(size=(4, 3)), rng.normal(size=(4, 2))
    mask = np.array([[True, False, True, False], [False] * 4])
    out, w = mc.scaled_dot_product_attention(Q, K, V, mask)
    assert np.array_equal(w[1], np.zeros(4)) and np.array_equal(out[1], np.zeros(2))
    assert w[0, 1] == 0 and w[0, 3] == 0 and w[0].sum() == pytest.approx(1)


def test_masks_say_true_where_a_query_may_attend():
    assert np.array_equal(mc.causal_mask(3), np.tril(np.ones((3, 3), bool)))
    m = mc.padding_mask([1, 3], 3)
    assert m.shape == (2, 1, 1, 3) and m[0, 0, 0].tolist() == [True, False, False]


def test_inputs_are_checked_once_and_broadcast():
    Q, K, V, mask = check_attention_inputs(np.ones((2, 3, 4)), np.ones((5, 4)), np.ones((5, 2)))
    assert Q.shape == (2, 3, 4) and mask is None
    with pytest.raises(ValueError, match="share their last dim d_k"):
        check_attention_inputs(np.ones((3, 4)), np.ones((5, 3)), np.ones((5, 2)))
    with pytest.raises(ValueError, match="non-finite"):
        mc.scaled_dot_product_attention(np.ones((1, 2)), np.array([[np.nan, 0.0]]), np.ones((1, 1)))


# ---- one NaN policy; bools are no lengths; sizes checked first

def test_softmax_refuses_nan_naming_where_but_keeps_the_infinite_limits():
    with pytest.raises(ValueError, match=r"x holds NaN \(first at index \(1, 0\)\)"):
        mc.softmax(np.array([[0.0, 1.0], [np.nan, 2.0]]))
    assert mc.softmax(np.array([np.inf, 0.0, -np.inf])).tolist() == [1.0, 0.0, 0.0]


def test_padding_mask_refuses_a_bool_length_and_a_huge_s():
    for lengths in ([3, np.True_], [False], np.array([True, True])):
        with pytest.raises(ValueError, match="True is not a length"):
            mc.padding_mask(lengths, 4)
    with pytest.raises(ValueError, match=r"padding mask of 2 sequences of S=10000000000 keys would take"):
        mc.padding_mask([1, 2], 10**10)
    assert mc.padding_mask([0, 4], 4).sum() == 4
