"""heads.py: splitting d_model into h heads and putting them back."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mha_course as mc


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.integers(1, 6), st.sampled_from([(12, 1), (12, 2), (12, 3), (12, 4), (12, 6), (8, 8)]),
       st.integers(0, 999))
def test_split_then_combine_is_the_identity_and_head_i_gets_its_features(B, T, sizes, seed):
    D, h = sizes
    x = np.random.default_rng(seed).normal(size=(B, T, D))
    heads = mc.split_heads(x, h)
    d_k = D // h
    assert heads.shape == (B, h, T, d_k)
    for i in range(h):
        assert np.array_equal(heads[:, i], x[..., i * d_k:(i + 1) * d_k])  # head i: features i*d_k.. of EVERY position
    assert np.array_equal(mc.combine_heads(heads), x)


def test_split_is_a_view_like_torchs():
    x = np.zeros((1, 2, 4))
    mc.split_heads(x, 2)[0, 1, 0, 0] = 7.0
    assert x[0, 0, 2] == 7.0


def test_a_reshape_without_the_transpose_is_not_a_split():
    x = np.arange(3 * 4.0).reshape(1, 3, 4)  # T = 3 positions, D = 4
    wrong = x.reshape(1, 2, 3, 2)  # (B, h, T, d_k) straight from the reshape: mixes positions into heads
    assert not np.array_equal(wrong, mc.split_heads(x, 2))


def test_valid_heads_are_the_divisors_and_the_nearest_is_found():
    assert mc.valid_heads(12) == [1, 2, 3, 4, 6, 12]
    assert mc.nearest_valid_h(10, 4) == 5
    with pytest.raises(ValueError, match="valid h: 1, 2, 5, 10"):
        mc.split_heads(np.zeros((1, 2, 10)), 4)


# ---- the divisor search is O(sqrt(d_model)), bounded by MAX_D_MODEL; split checks h at the entry

@given(st.integers(1, 5000))
@settings(max_examples=60, deadline=None)
def test_valid_heads_are_exactly_the_divisors(n):
    assert mc.valid_heads(n) == [d for d in range(1, n + 1) if n % d == 0]


def test_valid_heads_answers_a_large_prime_at_once_and_refuses_past_the_bound():
    from mha_course.heads import MAX_D_MODEL
    assert mc.valid_heads(1_099_511_627_689) == [1, 1_099_511_627_689]  # a prime below 2**40
    assert mc.valid_heads(2**40)[-2:] == [2**39, 2**40]
    for call in (lambda: mc.valid_heads(MAX_D_MODEL + 1), lambda: mc.nearest_valid_h(10**17, 9),
                 lambda: __import__("mha_course.gqa").gqa.valid_kv_heads(2**50)):
        with pytest.raises(ValueError, match=r"MAX_D_MODEL = 2\*\*40"):
            call()


def test_split_names_the_valid_h_instead_of_numpys_reshape_message():
    from mha_course.heads import split
    with pytest.raises(ValueError, match=r"d_model=18 is not divisible by h=4; valid h: 1, 2, 3, 6, 9, 18"):
        split(np.zeros((1, 2, 18)), 4)
    with pytest.raises(ValueError, match=r"\(B, T, d_model\)"):
        split(np.zeros((2, 18)), 3)
    assert split(np.zeros((1, 2, 18)), 3).shape == (1, 3, 2, 6)
