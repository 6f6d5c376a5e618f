"""The checker of 04's Exercise 4.1 (gather_output_projection): the solution passes, each typical
mistake is rejected and named as itself, a stub is "not finished", an unknown mistake is localised.

The wrong answers are typed here the way a learner writes them.
"""
import numpy as np
import pytest

from mha_course import check
from mha_course.lessons import why_heads


def solution(d_model, content):
    d_k, half = d_model // 2, content // 2
    W = np.zeros((d_model, d_model))
    for f in range(half):
        W[f, f] = 1.0              # head 0's report: first half of u_a
    for f in range(half, content):
        W[d_k + f, f] = 1.0        # head 1's report: second half of u_b
    return W


def no_offset(d_model, content):
    return np.diag([1.0] * content + [0.0] * (d_model - content))


def swapped(d_model, content):
    d_k, half = d_model // 2, content // 2
    W = np.zeros((d_model, d_model))
    for f in range(half):
        W[f, f + half] = 1.0
        W[d_k + half + f, f] = 1.0
    return W


def first_half_of_b(d_model, content):
    d_k, half = d_model // 2, content // 2
    W = np.zeros((d_model, d_model))
    for f in range(half):
        W[f, f] = 1.0
        W[d_k + f, half + f] = 1.0
    return W


def run(capsys, fn):
    ok = check.gather_output_projection(fn)
    return ok, capsys.readouterr().out


def test_the_solution_passes_and_makes_two_heads_gather(capsys):
    ok, out = run(capsys, solution)
    assert ok and "all 4 cases match" in out
    x = why_heads.gather_inputs(100, rng=np.random.default_rng(0))
    p = why_heads.two_head_params(16, 6, 1, 5)._replace(W_o=solution(16, 8))
    out, _ = __import__("mha_course").multi_head_attention(x, p, h=2)
    assert why_heads.relative_error(out, why_heads.gather_target(x, 1, 5)) < 1e-3


@pytest.mark.parametrize("fn, named", [
    (no_offset, "head 1's report starts at concat column d_k"),
    (lambda d_model, content: np.eye(d_model), "W_o = I"),
    (swapped, "the two halves swapped"),
    (first_half_of_b, "first half of u_b"),
    (lambda d_model, content: solution(d_model, content).T, "W_o transposed"),
])
def test_each_typical_mistake_is_named_as_itself_only(capsys, fn, named):
    ok, out = run(capsys, fn)
    assert not ok and named in out
    others = [m.name for m in check.why_heads._MISTAKES if named not in m.name]
    assert not any(name in out for name in others), out


def test_a_stub_is_not_finished(capsys):
    def stub(d_model, content):
        raise NotImplementedError("Exercise 4.1")
    ok, out = run(capsys, stub)
    assert not ok and "not finished" in out


def test_an_unknown_mistake_is_localised(capsys):
    ok, out = run(capsys, lambda d_model, content: 1.37 * solution(d_model, content))
    assert not ok and "not one of the mistakes I know" in out and "concat column" in out


def test_both_strips_and_head_1_kept_in_place_are_named(capsys):
    def both(d_model, content):
        W = np.zeros((d_model, d_model))
        for f in range(content):
            W[f, f] = W[d_model // 2 + f, f] = 0.5
        return W
    assert check.gather_output_projection(both) is False
    assert "weighted 0.5" in capsys.readouterr().out

    def in_place(d_model, content):
        W = np.zeros((d_model, d_model))
        idx = [f if f < content // 2 else d_model // 2 + f for f in range(content)]
        W[idx, idx] = 1
        return W
    assert check.gather_output_projection(in_place) is False
    assert "kept in head 1's place" in capsys.readouterr().out


def test_head_one_written_on_top_of_head_zero_is_named(capsys):
    from mha_course import check

    def learner(d_model, content):
        W, half = np.zeros((d_model, d_model)), content // 2
        W[np.arange(half), np.arange(half)] = 1
        W[d_model // 2 + np.arange(half, content), np.arange(content - half)] = 1  # on top of head 0's features
        return W
    assert check.gather_output_projection(learner) is False
    assert "Looks like: head 1's half written to output features 0.." in capsys.readouterr().out
