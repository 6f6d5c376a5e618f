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
