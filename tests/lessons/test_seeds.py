"""lessons/seeds.py: the mean and spread over seeds, and when two rows differ beyond it."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mha_course.lessons import seeds as ls


def test_summary_and_separated():
    s = ls.summary([0.70, 0.79, 0.75])
    assert (s.mean, s.low, s.high) == pytest.approx((0.7466666, 0.70, 0.79))
    assert str(s) == "0.747 (0.700-0.790)"
    assert ls.separated([0.9, 0.95, 0.92], [0.5, 0.6, 0.55]) and ls.separated([0.1], [0.2])
    assert not ls.separated([0.70, 0.79], [0.69, 0.75])  # the RoPE/ALiBi "tie" at 2x
    with pytest.raises(ValueError, match="empty"):
        ls.summary([])


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=6), st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=6))
def test_separated_is_symmetric_and_means_disjoint_ranges(a, b):
    assert ls.separated(a, b) == ls.separated(b, a)
    assert ls.separated(a, b) == (min(a) > max(b) or min(b) > max(a))
    s = ls.summary(a)
    assert s.low <= s.mean + 1e-6 * (1 + abs(s.mean)) and s.mean <= s.high + 1e-6 * (1 + abs(s.mean))


def test_format_values_one_row_per_name():
    text = ls.format_values(np.array([[1.0, 2.0], [3.0, 2.0]]), ["a", "b"], "steps")
    assert text.splitlines()[0] == "steps, mean (min-max)" and "2.000 (1.000-3.000)" in text
    assert "2 (1-3)" in ls.format_values(np.array([[1], [3]]), ["a"], "steps")


@pytest.mark.parametrize("call, word", [
    (lambda: ls.separated([0.1, np.nan], [0.2, 0.3]), "a has 1 non-finite"),
    (lambda: ls.separated([0.1, 0.2], None), "b must be"),
    (lambda: ls.format_values(np.ones((2, 3)), ["a", "b"], "x"), r"values has shape \(2, 3\) for 2 names"),
])
def test_bad_arguments_are_named_at_the_entry(call, word):
    with pytest.raises((ValueError, TypeError), match=word):
        call()
