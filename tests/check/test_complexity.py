"""The checkers of notebook 05 (flops, crossover_seq_len, score_bytes, max_seq_len): right answers in a
learner's words are accepted, every catalogued mistake is named as itself, a stub is not finished."""
import math

import pytest

from mha_course.check import complexity as cc

EXERCISES = [(cc.flops, cc.FLOPS), (cc.crossover_seq_len, cc.CROSSOVER_SEQ_LEN), (cc.score_bytes, cc.SCORE_BYTES),
             (cc.max_seq_len, cc.MAX_SEQ_LEN)]
CATALOGUED = [(c, e, i) for c, e in EXERCISES for i in range(len(e.mistakes))]


@pytest.mark.parametrize("checker, exercise, i", CATALOGUED, ids=[f"{e.name}-{i}" for _, e, i in CATALOGUED])
def test_every_catalogued_mistake_is_named_as_itself(capsys, checker, exercise, i):
    ok = checker(exercise.mistakes[i].fn)
    out = capsys.readouterr().out
    assert ok is False and f"Looks like: {exercise.mistakes[i].name}" in out, out


def crossover_loop(d_model):
    T = 1
    while 4 * T * T * d_model < 8 * T * d_model ** 2:
        T += 1
    return T


@pytest.mark.parametrize("checker, fn", [
    (cc.flops, lambda T, d_model: (4 * 2 * T * d_model * d_model, 2 * 2 * T * T * d_model)),
    (cc.flops, lambda T, d_model: (8 * T * d_model ** 2, 4 * T ** 2 * d_model)),
    (cc.crossover_seq_len, crossover_loop),
    (cc.crossover_seq_len, lambda d_model: 2 * d_model),
    (cc.score_bytes, lambda B, h, T, bytes_per_number=4: B * h * T ** 2 * bytes_per_number),
    (cc.max_seq_len, lambda budget, B, h, b=4: math.isqrt(budget // (B * h * b))),
    (cc.max_seq_len, lambda budget, B, h, b=4: max(T for T in (int(math.sqrt(budget / (B * h * b))) + d
                                                            for d in (-1, 0, 1)) if B * h * b * T * T <= budget)),
])
def test_right_answers_are_accepted(capsys, checker, fn):
    ok = checker(fn)
    assert ok, capsys.readouterr().out


@pytest.mark.parametrize("checker", [c for c, _ in EXERCISES])
def test_a_stub_is_not_finished(capsys, checker):
    def stub(*args):
        raise NotImplementedError
    assert checker(stub) is False and "not finished" in capsys.readouterr().out


@pytest.mark.parametrize("checker, fn, said", [
    (cc.score_bytes, lambda B, h, T, b=4: B * h * T * T * b / 1024 ** 2, "MiB"),
    (cc.score_bytes, lambda B, h, T, b=4: 8 * b * B * h * T ** 2, "bits"),
    (cc.flops, lambda T, d: (8 * T * T * d, 4 * T * T * d), "T and d_model swapped"),
    (cc.max_seq_len, lambda n, B, h, b=4: math.isqrt(n // (B * h * b)) + 1, "off by one"),
    (cc.max_seq_len, lambda n, B, h, b=4: math.isqrt(n) // (B * h * b), "before dividing"),
    (cc.max_seq_len, lambda n, B, h, b=4: int(math.sqrt(n // (B * h * b))), "a float holds 53 bits"),
    (cc.max_seq_len, lambda n, B, h, b=4: math.isqrt(n // (4 * B * h)), "bytes_per_number is ignored"),
])
def test_units_terms_and_rounding_are_named(capsys, checker, fn, said):
    assert checker(fn) is False
    out = capsys.readouterr().out
    assert "Looks like: " in out and said in out, out


# ---- learner code written anew, each class named


from .verdicts import says as _says  # noqa: E402


@pytest.mark.parametrize("checker, fn, said", [
    (cc.crossover_seq_len, lambda d: 4 * (2 * d) ** 2 * d, "the FLOP count at the crossover returned"),
    (cc.crossover_seq_len, lambda d: next(T for T in range(0, 10 ** 6) if 4 * T * T * d >= 8 * T * d * d),
     "the search starts at T = 0"),
    (cc.crossover_seq_len, lambda d: next(T for T in range(1, 10 ** 6) if 4 * T * T * d >= 8 * d * d),
     "the projections' T forgotten"),
    (cc.score_bytes, lambda B, h, T, bytes_per_number=4: bytes_per_number * B * h * sum(range(1, T + 1)),
     "only the causal lower triangle counted"),
])
def test_counts_with_a_slip_are_named(capsys, checker, fn, said):
    _says(capsys, checker, fn, said)


def test_whole_numbers_are_compared_exactly(capsys):
    exact = cc.MAX_SEQ_LEN.expected()[2][1]
    assert exact == 2 ** 27 - 1  # the budget whose float square root rounds up to 2**27
    assert cc.max_seq_len(lambda n, B, h, b=4: math.isqrt(n // (B * h * b)) + (n == 2 ** 56 - 4)) is False
    capsys.readouterr()
