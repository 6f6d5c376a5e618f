"""A distribution right but for its normaliser, or over fewer keys: recognised from the expected output.

Each form is held on arrays built here: the learner's lines renormalised give the expected ones, and
the expected ones over fewer keys, renormalised, give the learner's.
"""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mha_course.check.distributions import normalised_axis, normaliser_forms, restricted_forms


def _weights(rng, shape):
    s = rng.normal(size=shape)
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_the_normalised_axis_is_found_and_a_non_distribution_has_none():
    w = _weights(np.random.default_rng(0), (2, 3, 4))
    assert normalised_axis(w) == -1 and normalised_axis(np.swapaxes(w, -1, -2)) == -2
    assert normalised_axis(-w) is None and normalised_axis(2 * w) is None


@given(st.integers(0, 2**32 - 1), st.integers(2, 6), st.integers(2, 6))
def test_by_the_maximum_and_by_another_number_are_told_apart_and_one_factor_is_a_scale(seed, T, S):
    rng = np.random.default_rng(seed)
    w = _weights(rng, (2, T, S))
    assert normaliser_forms([(w / w.max(-1, keepdims=True), w)], {}) == [("max-normaliser", {"axis": "last axis"})]
    other = w * rng.uniform(0.5, 2.0, size=(2, T, 1))
    assert [k for k, _ in normaliser_forms([(other, w)], {})] == ["wrong-normaliser"]
    assert normaliser_forms([(1.5 * w, w)], {}) == []  # one factor for every line: a scale
    assert normaliser_forms([(w, w)], {}) == []


@given(st.integers(0, 2**32 - 1), st.integers(2, 6))
def test_fewer_keys_renormalised_name_the_mask_that_took_them(seed, T):
    w = _weights(np.random.default_rng(seed), (2, T, T))
    causal = np.where(np.tril(np.ones((T, T), bool)), w, 0.0)
    causal /= causal.sum(-1, keepdims=True)
    which = "the keys after each query (a causal mask)"
    assert restricted_forms([(causal, w)]) == [("restricted-keys", {"which": which})]
    assert restricted_forms([(w, w)]) == []  # nothing taken away
