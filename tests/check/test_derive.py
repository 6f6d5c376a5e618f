"""Mistakes derived from the exercise (check/derive.py): each family named only when it gives the
learner's numbers on every case, in the exercise's symbols; several are named together."""
import numpy as np
import pytest

import mha_course as mc
from mha_course.check import derive, engine


def _scores(Q, K):
    """Q (..., T, d_k), K (..., S, d_k) -> scores (..., T, S)."""
    return Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])


def _cases():
    rng = np.random.default_rng(7)
    return [engine.Case((rng.normal(size=(T, d)), rng.normal(size=(S, d)))) for T, S, d in
            ((3, 5, 4), (4, 6, 9), (2, 7, 16), (5, 3, 25))]


SCORES = engine.Exercise("scores", _scores, _cases, register=False)


def verdict(capsys, fn, exercise=SCORES):
    ok = exercise.check(fn)
    return ok, capsys.readouterr().out


@pytest.mark.parametrize("fn, words", [
    (lambda Q, K: Q @ np.swapaxes(K, -1, -2) / Q.shape[-1], "1/sqrt(d_k)"),
    (lambda Q, K: Q @ np.swapaxes(K, -1, -2), "sqrt(d_k)"),
    (lambda Q, K: -_scores(Q, K), "opposite sign"),
    (lambda Q, K: _scores(Q, K)[:, ::-1], "reverse order along its key (S) axis"),
    (lambda Q, K: _scores(Q, K).T, "axes swapped"),
    (lambda Q, K: _scores(Q, K[:, ::-1]), "K with its feature (d_k) axis reversed"),
])
def test_each_output_family_is_named_in_the_docstrings_symbols(capsys, fn, words):
    ok, out = verdict(capsys, fn)
    assert ok is False and "Found" in out and words in out, out
    assert "not one of the mistakes I know" not in out


def test_a_change_that_fits_only_some_cases_is_not_named(capsys):
    def half(Q, K):
        s = _scores(Q, K)
        return s / np.sqrt(Q.shape[-1]) if len(Q) == 3 else s * 1.37
    ok, out = verdict(capsys, half)
    assert ok is False and "Found" not in out and "not one of the mistakes I know" in out, out


def test_two_derivations_giving_the_same_numbers_are_both_named(capsys):
    symmetric = engine.Exercise("gram", lambda Q: Q @ Q.T * np.arange(len(Q))[:, None],
                                lambda: [engine.Case((np.arange(6.0).reshape(3, 2),)),
                                         engine.Case((np.eye(4)[:, :3] + 1,))], register=False)
    ok, out = verdict(capsys, lambda Q: -(Q @ Q.T * np.arange(len(Q))[:, None]), symmetric)
    assert ok is False and "opposite sign" in out, out


def test_sizes_come_from_the_docstring_and_whole_number_arguments():
    Q, K = np.zeros((3, 8)), np.zeros((5, 8))
    assert derive.case_sizes(SCORES, (Q, K)) == {"T": 3.0, "d_k": 8.0, "Q.shape[0]": 3.0, "Q.shape[-1]": 8.0,
                                                  "S": 5.0, "K.shape[0]": 5.0, "K.shape[-1]": 8.0}
    mha = engine.catalogue()["multi_head_attention"]
    x, params, h = mha.prepared()[0][0].args[:3]
    sizes = derive.case_sizes(mha, (x, params, h))
    assert sizes["d_k"] == sizes["d_model"] / h


def test_axis_names_come_from_the_declaration_then_the_docstring():
    assert derive.axis_names(SCORES, "result", 2) == ["query (T)", "key (S)"]
    sdpa = engine.catalogue()["scaled_dot_product_attention"]
    assert derive.axis_names(sdpa, "weights", 3) == ["axis 0", "query", "key"]


def test_a_mutant_of_the_reference_is_named_by_its_class(capsys):
    """ALiBi's slopes with 2^(-4k/n) for 2^(-8k/n): the constant, said with the reference's numbers."""
    pytest.importorskip("mha_course.check.mutants")
    from mha_course import check
    ok = check.alibi_slopes(lambda h: mc.alibi_slopes(h) ** 0.5)
    out = capsys.readouterr().out
    assert ok is False and "the number -4.0 where -8.0 belongs" in out, out
    assert "square root of the expected value" in out, out  # the same numbers: both are named
