"""The comparison (check/compare.py): results as a learner returns them are named by their type."""
import numpy as np
import pytest

import mha_course as mc
from mha_course import check
from mha_course.check import compare


def said(capsys, checker, fn):
    ok = checker(fn)
    return ok, capsys.readouterr().out


def test_an_unstacked_list_of_heads_is_named_with_its_fix(capsys):
    ok, out = said(capsys, check.split_heads, lambda x, h: np.split(x, h, axis=-1))
    assert ok is False and "a list of" in out and "unstacked" in out and "transpose" not in out, out
    ok, out = said(capsys, check.split_heads, lambda x, h: list(mc.split_heads(x, h).swapaxes(0, 1)))
    assert ok is False and "Fix: np.stack(parts, axis=1)" in out, out


def test_a_list_of_the_right_rows_is_named_a_list(capsys):
    ok, out = said(capsys, check.softmax, lambda x, axis=-1: list(mc.softmax(x, axis)))
    assert ok is False and "the values are right but it is a list where a numpy array" in out, out


def test_a_torch_tensor_for_a_numpy_array_is_named(capsys):
    torch = pytest.importorskip("torch")
    ok, out = said(capsys, check.softmax, lambda x, axis=-1: torch.from_numpy(mc.softmax(x, axis)))
    assert ok is False and "it is a torch tensor where a numpy array is expected" in out, out
    assert ".detach().numpy()" in out, out


def test_a_complex_result_is_named_as_complex(capsys):
    ok, out = said(capsys, check.softmax, lambda x, axis=-1: mc.softmax(x, axis) + 0j)
    assert ok is False and "the values are right but complex (complex128)" in out and ".real" in out, out


def test_an_object_array_is_named_as_one(capsys):
    ok, out = said(capsys, check.causal_mask, lambda T: mc.causal_mask(T).astype(object))
    assert ok is False and "an array of dtype object" in out and "dtype=bool" in out, out


def test_float_indices_and_a_float_for_an_int_are_refused(capsys):
    ok, out = said(capsys, check.kv_head_index, lambda h, h_kv: np.arange(h) // (h // h_kv) * 1.0)
    assert ok is False and "indices are whole numbers (int)" in out, out
    ok, out = said(capsys, check.crossover_seq_len, lambda d_model: 2.0 * d_model)
    assert ok is False and "expected a whole number (int)" in out, out


def test_close_is_the_checkers_tolerance():
    assert compare.close(np.ones(3), np.ones(3) + 1e-7) and not compare.close(np.ones(3), np.ones(3) + 1e-3)
    assert compare.close(np.array([np.nan]), np.array([np.nan])) and not compare.close(np.ones(2), np.ones(3))


def test_a_float_array_never_matches_an_int_or_bool_one_with_the_same_values():
    mask = np.array([[True, False], [True, True]])
    assert compare.same(mask.astype(int), mask.astype(np.int64)) and compare.same(mask, mask.copy())
    assert not compare.same(mask.astype(int), mask.astype(float))  # 1 / 0 ints are not "floats 1.0 / 0.0"
    assert not compare.same(mask.astype(float), mask)
    assert compare.same(3.0, 3.0) and compare.same([1.0, 2.0], np.array([1.0, 2.0]))


def test_states_int_reads_the_annotation_or_the_docstring_line():
    def annotated(n) -> int:
        return n

    def documented(n):
        """n -> int: the count."""
        return n
    assert compare.states_int(annotated) and compare.states_int(documented)
    assert not compare.states_int(lambda n: n) and not compare.states_int(len)


def test_the_right_array_returned_with_others_is_named(capsys):
    ok, out = said(capsys, check.softmax, lambda x, axis=-1: (mc.softmax(x, axis), x))
    assert ok is False and "it returned a tuple of 2 values where one array of shape" in out, out
    assert "value 1 of the 2 is the right one. Fix: return only that one" in out, out


def test_two_axes_merged_and_an_axis_reduced_are_named(capsys):
    ok, out = said(capsys, check.split_heads, lambda x, h: mc.split_heads(x, h).reshape(-1, x.shape[-2], x.shape[-1] // h))
    assert ok is False and "merged into one axis of length" in out and "keep them as two axes" in out, out
    ok, out = said(capsys, check.softmax, lambda x, axis=-1: mc.softmax(x, axis).sum(axis=0))
    assert ok is False and "the expected one summed over" in out and "should stay, not be reduced" in out, out


def test_the_two_values_of_a_mask_swapped_everywhere_are_named(capsys):
    ok, out = said(capsys, check.sliding_window_mask, lambda T, window: ~mc.sliding_window_mask(T, window))
    assert ok is False and ("every False is True and every True is False" in out or "polarity" in out), out
    said_ = " ".join(compare.where_and_how(np.array([1, 0, 0, 1]), np.array([0, 1, 1, 0]), ["entry"]))
    assert "every 0 is 1 and every 1 is 0: the two values swapped everywhere" in said_, said_


def test_real_values_made_whole_numbers_are_said_with_the_rounding():
    w = np.array([1.5, 2.7, 3.2])
    assert "rounded down" in compare.rounded_form(np.floor(w), w)
    assert "rounded up" in compare.rounded_form(np.ceil(w), w)
    assert compare.rounded_form(w, w) == "" and compare.rounded_form(np.floor(w), np.floor(w)) == ""


def test_values_rounded_to_a_few_decimals_are_said_so():
    w = np.array([1.23456, 2.71828])
    assert "rounded to 2 decimals" in compare.rounded_form(np.round(w, 2), w)
    assert compare.rounded_form(w + 1e-3, w) == ""


def test_a_result_flat_along_an_axis_where_the_expected_one_changes_is_said():
    w = np.array([[1.0, 0.1, 0.01], [2.0, 0.2, 0.02]])
    g = np.array([[0.3, 0.3, 0.3], [0.7, 0.7, 0.7]])
    lines = compare.where_and_how(g, w, ["row", "column"])
    assert any("do not change along the column axis (axis 1)" in ln for ln in lines), lines
    assert not any("do not change" in ln for ln in compare.where_and_how(w * 1.5 + 0.1, w, ["row", "column"]))


def test_a_result_at_half_precision_and_a_sum_kept_as_an_axis_are_said():
    rng = np.random.default_rng(0)
    w = rng.normal(size=(3, 4))
    lines = compare.where_and_how(w.astype(np.float16).astype(np.float64), w, ["row", "column"])
    assert any("float16 precision" in ln for ln in lines), lines
    assert not any("float16" in ln for ln in compare.where_and_how(w * 1.001, w, ["row", "column"]))
    lines = compare.where_and_how(w.sum(axis=0, keepdims=True), w, ["row", "column"])
    assert any("summed over the row axis" in ln for ln in lines), lines


def test_the_values_that_differ_one_factor_off_are_said():
    w = np.array([0.25, 0.025, 0.0025, 0.00025])
    lines = compare.where_and_how(np.array([1.0, 0.025, 0.0025, 0.00025]), w, ["entry"])
    assert any("where they differ, yours are 4 times the expected values" in ln for ln in lines), lines


def test_zeros_where_the_expected_values_are_small_but_not_zero_are_said_as_an_overflow():
    w = np.array([0.3712, 0.0371, 3.7e-4, 3.7e-6])  # and no rounding of w gives it
    lines = compare.where_and_how(np.array([0.3712, 0.0371, 0.0, 0.0]), w, ["entry"])
    assert any("yours are 0 and the expected values are not" in ln for ln in lines), lines


def test_axes_reordered_through_a_length_one_axis_also_name_a_join_on_another_axis():
    w = np.arange(6.0).reshape(1, 3, 2)  # (B, S, d) with B = 1: joined on axis 0, not 2 (kv_append's cache)
    lines = compare.where_and_how(np.transpose(w, (2, 1, 0)), w, ["axis 0", "row", "column"])
    assert any("joined along another axis" in ln for ln in lines), lines


def test_has_nan_reads_arrays_tuples_and_scalars():
    from mha_course.check.compare import has_nan
    assert has_nan((np.ones(2), np.array([np.nan])))
    assert has_nan(float("nan")) and not has_nan(np.arange(3)) and not has_nan("text") and not has_nan((1.0, 2))


@pytest.mark.parametrize("where, words", [(0, "the first only"), (-1, "the last only")])
def test_differences_at_one_end_of_an_axis_alone_point_at_a_range(where, words):
    from mha_course.check.compare import where_and_how
    want = np.tril(np.ones((5, 5)))
    got = want.copy()
    got[where] = 0
    assert any(words in line for line in where_and_how(got, want, ["query", "key"]))


def test_differences_on_an_unnamed_axis_are_said_by_index():
    from mha_course.check.compare import where_and_how
    want = np.zeros((2, 4, 3))
    got = want.copy()
    got[:, 3] = 1.0
    assert any("index 3 of 4 along axis 1" in line for line in where_and_how(got, want, ["axis 0", "axis 1", "feature"]))
