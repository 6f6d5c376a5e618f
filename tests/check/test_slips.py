"""The diagnosis-only slips: another numpy function, brackets moved, two numbers swapped; each named by a checker."""
import ast

import numpy as np

from mha_course import check
from mha_course.check import slips
from mha_course.check.engine import Case, Exercise


def _texts(changes):
    return [ast.unparse(node) for node, _ in changes]


def test_another_numpy_function_is_offered_for_each_listed_one():
    call = ast.parse("np.logaddexp(a, b)", mode="eval").body
    assert _texts(slips.other_function(call)) == ["np.maximum(a, b)", "np.add(a, b)"]
    assert slips.other_function(ast.parse("np.zeros(3)", mode="eval").body) == []


def test_brackets_move_only_across_operators_that_bind_differently():
    assert _texts(slips.regrouped(ast.parse("a * b + c", mode="eval").body)) == ["a * (b + c)"]
    assert _texts(slips.regrouped(ast.parse("a + b * c", mode="eval").body)) == ["(a + b) * c"]
    assert slips.regrouped(ast.parse("a + b - c", mode="eval").body) == []


def test_two_numbers_swap_but_not_an_index():
    changes = slips.numbers_swapped(ast.parse("2 * x[0] ** 3", mode="eval").body)
    assert _texts(changes) == ["3 * x[0] ** 2"] and dict(changes[0][1]) == {"a": 2, "b": 3}


def test_the_brackets_of_a_learners_formula_are_named(capsys):
    assert check.bug_source_position(lambda i, t, T, h: i * (T + t) // h) is False
    out = capsys.readouterr().out
    assert "i * (T + t) where i * T + t belongs (the brackets in another place" in out, out


def _log_add(a, b):
    """a, b (n,) -> log(e^a + e^b) (n,)."""
    return np.logaddexp(a, b)


TOY = Exercise("toy_log_add", _log_add, lambda: [Case((np.linspace(-1, 2, 4) * k, np.full(4, 0.3) * k)) for k in (1.0, 2.5, -1.5)],
               register=False)


def test_a_max_where_the_log_add_belongs_is_named(capsys):
    assert TOY.check(lambda a, b: np.maximum(a, b)) is False
    out = capsys.readouterr().out
    assert "np.maximum where np.logaddexp belongs" in out, out


def test_an_index_becomes_an_open_slice_but_a_number_does_not():
    assert _texts(slips.open_slices(ast.parse("x[:, head]", mode="eval").body)) == ["x[:, head:]"]
    assert slips.open_slices(ast.parse("x[:, 0]", mode="eval").body) == []


def test_the_result_plus_an_input_is_named_as_a_residual(capsys):
    assert check.shared_input_backward(lambda c, W_k, W_v, gK, gV: gK @ W_k.T + gV @ W_v.T + c) is False
    assert "c added to the result" in capsys.readouterr().out


def test_the_axes_of_a_transpose_are_not_numbers_to_swap():
    assert slips.numbers_swapped(ast.parse("x.transpose(0, 2, 1, 3) * 2", mode="eval").body) == []
    assert _texts(slips.numbers_swapped(ast.parse("x.sum(axis=-1) * 2 + 3", mode="eval").body)) == [
        "x.sum(axis=-1) * 3 + 2"]


def test_a_floor_division_is_offered_rounded_otherwise_and_per_term():
    changes = slips.floor_division_slips(ast.parse("(i * T + t) // h", mode="eval").body)
    assert [c for c, _, _ in changes] == ["rounding", "rounding", "floored-terms"]
    assert ast.unparse(changes[-1][1]) == "i * T // h + t // h"
    assert slips.floor_division_slips(ast.parse("a / b", mode="eval").body) == []


def test_a_size_is_offered_one_more_and_one_less_inside_a_formula_but_an_array_is_not():
    tree = ast.parse("def f(x, d_model: int):\n    B, T, D = x.shape\n    n = len(x)\n    return x / d_model", ).body[0]
    names = slips.size_names(tree)
    assert names == {"d_model", "B", "T", "D", "n"}
    assert _texts(slips.size_shifts(ast.parse("two_i / d_model", mode="eval").body, names)) == [
        "two_i / (d_model - 1)", "two_i / (d_model + 1)"]
    assert _texts(slips.size_shifts(ast.parse("x * two_i", mode="eval").body, names)) == []  # no size in it
    assert _texts(slips.size_shifts(ast.parse("x / x.shape[-1]", mode="eval").body, set())) == [
        "x / (x.shape[-1] - 1)", "x / (x.shape[-1] + 1)"]
    assert slips.size_shifts(ast.parse("T + d_model", mode="eval").body, names) == []  # only /, //, **, %, *


def test_a_size_off_by_one_in_the_sinusoidal_exponent_is_named(capsys):
    def table(T, d_model):
        two_i = np.arange(d_model) // 2 * 2
        angles = np.arange(T)[:, None] / 10000.0 ** (two_i / (d_model - 1))
        return np.where(np.arange(d_model) % 2 == 0, np.sin(angles), np.cos(angles))
    assert check.sinusoidal_positions(table) is False
    assert "d_model - 1 where d_model belongs" in capsys.readouterr().out


def test_a_matrix_transpose_is_offered_as_its_pseudo_inverse_and_a_permutation_is_not():
    for code in ("b.T", "np.swapaxes(b, -1, -2)", "b.swapaxes(-2, -1)", "np.transpose(b)"):
        [(new, params)] = slips.pseudo_inverse(ast.parse(code, mode="eval").body)
        assert ast.unparse(new) == "__import__('numpy').linalg.pinv(b)" and dict(params)["from"] == code
    for code in ("x.transpose(0, 2, 1, 3)", "np.swapaxes(b, 0, 1)", "b.sum()"):
        assert slips.pseudo_inverse(ast.parse(code, mode="eval").body) == []


def test_an_integer_division_rounded_toward_zero_in_an_exponent_is_named(capsys):
    def freqs(d_k, base, factor):
        j = np.arange(d_k // 2)
        return base ** (-(2 * j // d_k)) / factor  # the minus outside: 2j // d_k is 0 for every pair
    assert check.interpolated_inv_freq(freqs) is False
    assert "floor division where true division belongs" in capsys.readouterr().out


def test_a_function_and_a_reduction_are_offered_the_other_way_round():
    assert _texts(slips.inside_out(ast.parse("np.abs(lam).sum()", mode="eval").body)) == ["np.abs(lam.sum())"]
    assert _texts(slips.inside_out(ast.parse("np.exp(np.sum(x, -1))", mode="eval").body)) == ["np.sum(np.exp(x), -1)"]
    assert slips.inside_out(ast.parse("x.sum()", mode="eval").body) == []
    assert slips.inside_out(ast.parse("np.abs(x)", mode="eval").body) == []


def test_a_division_rounded_toward_zero_is_offered_in_an_exponent_only(capsys):
    def score(W):  # the sign of sum(λ): |sum(λ)| in the denominator
        lam = np.linalg.eigvals(W)
        return float(lam.sum().real / np.abs(lam.sum()))
    assert check.copying_score(score) is False
    out = capsys.readouterr().out
    assert "np.abs(lam.sum()) where np.abs(lam).sum() belongs" in out and "floor division" not in out, out


def test_a_shape_unpacked_in_another_order_and_a_negative_stop_are_offered():
    [(new, params)] = slips.unpacked_otherwise(ast.parse("B, T = x.shape").body[0])
    assert ast.unparse(new) == "T, B = x.shape" and dict(params) == {"from": "(B, T)", "to": "(T, B)"}
    assert slips.unpacked_otherwise(ast.parse("B, T = sizes").body[0]) == []
    [(new, _)] = slips.negative_stop(ast.parse("x[:n - k]", mode="eval").body.slice)
    assert ast.unparse(new) == ":-k"
    assert slips.negative_stop(ast.parse("x[:n - 1]", mode="eval").body.slice) == []  # -1 is the same stop


def test_a_shape_unpacked_as_t_b_is_named(capsys):
    def split(x, h):
        T, B, D = x.shape
        return x.reshape(B, T, h, D // h).transpose(0, 2, 1, 3)
    assert check.split_heads(split) is False
    assert "the shape unpacked as (T, B, d_model) where it is (B, T, d_model)" in capsys.readouterr().out


def test_a_division_by_a_product_and_a_call_closed_too_early_are_regrouped():
    assert "a / b * c" in _texts(slips.regrouped(ast.parse("a / (b * c)", mode="eval").body))
    assert "a - b + c" in _texts(slips.regrouped(ast.parse("a - (b + c)", mode="eval").body))
    assert _texts(slips.split_call(ast.parse("np.sqrt(var + eps)", mode="eval").body)) == ["np.sqrt(var) + eps"]
    assert slips.split_call(ast.parse("np.sqrt(var)", mode="eval").body) == []


def test_a_frobenius_norm_has_the_spectral_and_nuclear_norms_as_slips():
    import ast
    call = ast.parse("np.linalg.norm(a @ b)", mode="eval").body
    said = [ast.unparse(new) for new, _ in slips.other_function(call)]
    assert "np.linalg.norm(a @ b, ord=2)" in said and "np.linalg.norm(a @ b, ord='nuc')" in said
    assert slips.other_function(ast.parse("np.linalg.norm(x, ord=1)", mode="eval").body) == []
