"""A wrong shape is read back in the exercise's symbols: the lengths a learner built say what was built.

(2, 3, 20) where (B, T, d_model) belongs is (B, h, T·d_k): the heads were never moved back beside
their features. Each length is read as one symbol, else a product, a quotient or a sum of two, else
a symbol ± 1, twice or half one; where a case leaves a tie (T = h = 3), the same axis on another case
chooses, and a tie no case breaks is said with both.
"""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mha_course import check
from mha_course.check import shape_exercise, shapes
from mha_course.check.symbols import readings, spell_length, spell_shape

SIZES = dict(B=2, T=5, d_model=12, h=3, d_k=4)


def test_each_length_reads_as_the_simplest_symbols_that_give_it():
    assert spell_shape((2, 3, 20), SIZES) == "(B, h, T·d_k)"
    assert spell_shape((2, 5, 12), SIZES) == "(B, T, d_model)"  # d_model, not d_k·h: one symbol first
    assert spell_shape((2, 5, 36), SIZES) == "(B, T, d_model·h)"
    assert spell_shape((1, 7), SIZES) == "(1, 7)"  # 1 and a length no reading fits stay numbers
    assert spell_length(6, {"T": 9, "h": 3}) == "2·h" and spell_length(6, {"T": 5, "h": 4}) == "T + 1"
    assert spell_length(4, {"S": 3, "T": 1}) == "S + T"  # a size of 1 counts in a sum


def test_a_tie_is_broken_by_another_case_and_said_with_both_when_none_breaks_it():
    case1, case2 = dict(B=2, T=3, h=3, d_k=4), dict(B=3, T=6, h=2, d_k=4)
    assert spell_shape((2, 3, 3), case1) == "(B, [T or h], [T or h])"
    assert spell_shape((2, 3, 3), case1, [((3, 2, 6), case2)]) == "(B, h, T)"
    assert spell_shape((2, 3, 3), case1, [((1, 2, 6), case2)]) == "(B, h, T)"  # a length 1 says nothing


@given(st.dictionaries(st.sampled_from(["B", "T", "S", "h", "d_k"]), st.integers(1, 40), min_size=1),
       st.integers(1, 2000))
def test_every_reading_given_has_the_length_read(sizes, n):
    env = {k: float(v) for k, v in sizes.items()}
    for r in readings(n, sizes):
        value = eval(r.replace("·", "*").replace("²", "**2"), {}, env)
        assert value == n, (r, sizes, n)


def test_a_shape_exercise_says_an_unknown_stage_in_symbols(capsys):
    good = shapes.STAGE_SHAPES.reference(shape_exercise.Sizes(2, 5, 5, 12, 3))
    assert check.stage_shapes({**good, "concat": (2, 3, 20)}, 2, 5, 12, 3) is False
    out = capsys.readouterr().out
    assert "got (2, 3, 20) = (B, h, T·d_k)" in out and "expected (2, 5, 12) = (B, T, d_model)" in out, out

    def wrong_d_k(B, T, S, d_model, h):  # d_k = d_model * S: on the first case T = h = 3, the next ones choose
        z = shape_exercise.Sizes(B, T, S, d_model, h)
        return {k: v[:-1] + (d_model * S,) if k.endswith("_heads") or k == "head_outputs" else v
                for k, v in shapes.CROSS_ATTENTION_SHAPES.reference(z).items()}
    assert check.cross_attention_shapes(wrong_d_k) is False
    out = capsys.readouterr().out
    assert "= (B, h, T, S·d_model)" in out and "expected (2, 3, 3, 4) = (B, h, T, d_k)" in out, out


def test_an_array_of_the_wrong_shape_is_said_in_symbols(capsys):
    def no_heads(x, params, h):  # single-head attention over d_model: weights (B, T, T)
        q, k, v = x @ params.W_q, x @ params.W_k, x @ params.W_v
        s = q @ np.swapaxes(k, -1, -2) / np.sqrt(x.shape[-1])
        w = np.exp(s - s.max(-1, keepdims=True))
        w /= w.sum(-1, keepdims=True)
        return (w @ v) @ params.W_o, w
    assert check.causal_multi_head_attention(no_heads) is False
    out = capsys.readouterr().out
    assert "your shape" in out and "(B, h, T, T)" in out, out
