"""The checkers of notebook 11 (11.1 work_growth, 11.2 head_params, 11.3 score_std): right answers in a
learner's own words pass (natural types included), each catalogued wrong belief is named as itself,
uncatalogued mistakes are refused with a message that locates them."""
import math

import numpy as np
import pytest

from mha_course.check import misconceptions as cm

from .verdicts import catalogue, named_as_itself


def run(capsys, checker, fn):
    ok = getattr(cm, checker)(fn)
    return ok, capsys.readouterr().out


def named(out, mistake):
    return f"Looks like: {mistake.name}. Fix: {mistake.fix}" in out


RIGHT = {
    "work_growth": [
        lambda T, d: (4 * (2 * T) ** 2 * d + 8 * 2 * T * d ** 2) / (4 * T ** 2 * d + 8 * T * d ** 2),
        lambda T, d: 2 * (2 * T + 2 * d) / (T + 2 * d),
        lambda T, d: float(np.float64(16 * T * T + 16 * T * d) / np.float64(4 * T * T + 8 * T * d)),
        lambda T, d: (lambda w: w(2 * T) / w(T))(lambda n: 2 * n * d * (2 * n + 4 * d)),
    ],
    "head_params": [
        lambda d_model, h: (4 * d_model * d_model // h, 4 * d_model ** 2),
        lambda d_model, h: (lambda d_k: (4 * d_k * d_model, 4 * d_k * d_model * h))(d_model // h),
        lambda d_model, h: (int(np.int64(4 * d_model * (d_model // h))), int(np.int64(4 * d_model ** 2))),
        lambda d_model, h: tuple(np.array([4 * d_model * (d_model // h), 4 * d_model * d_model])),
        lambda d_model, h: [np.int64(4 * d_model * (d_model // h)), 4 * d_model ** 2],  # a list, numpy ints
    ],
    "score_std": [
        lambda d_k: (math.sqrt(d_k), 1.0),
        lambda d_k: (d_k ** 0.5, d_k ** 0.5 / d_k ** 0.5),
        lambda d_k: (float(np.sqrt(d_k)), float(np.sqrt(d_k) / np.sqrt(d_k))),
        lambda d_k: (np.sqrt(np.float64(d_k)), np.float64(1)),
    ],
}
VARIANTS = [(n, i) for n, fns in RIGHT.items() for i in range(len(fns))]


@pytest.mark.parametrize("name, i", VARIANTS, ids=[f"{n}-{i}" for n, i in VARIANTS])
def test_right_answers_in_other_words_pass(capsys, name, i):
    ok, out = run(capsys, name, RIGHT[name][i])
    assert ok, out


def test_the_seed_articles_always_4x_is_named(capsys):
    ok, out = run(capsys, "work_growth", lambda T, d_model: 4)
    assert not ok and named(out, cm.WORK_GROWTH.mistakes[0]), out


def test_integer_division_is_named(capsys):
    ok, out = run(capsys, "work_growth", lambda T, d: (16 * T * T * d + 16 * T * d * d) // (4 * T * T * d + 8 * T * d * d))
    assert not ok and named(out, cm.WORK_GROWTH.mistakes[4]), out


def test_variance_for_std_is_named(capsys):
    ok, out = run(capsys, "score_std", lambda d_k: (d_k, 1))
    assert not ok and named(out, cm.SCORE_STD.mistakes[0]), out


EXERCISES, PAIRS = catalogue(cm.WORK_GROWTH, cm.HEAD_PARAMS, cm.SCORE_STD)


@pytest.mark.parametrize("name, i", PAIRS, ids=[f"{n}-{i}" for n, i in PAIRS])
def test_each_catalogued_mistake_is_named_as_itself(capsys, name, i):
    named_as_itself(capsys, EXERCISES[name], i, check=getattr(cm, name))


UNKNOWN = [
    ("work_growth", lambda T, d: 3.0),
    ("work_growth", lambda T, d: (16 * T * T * d + 16 * T * d * d) / (4 * T * T * d)),
    ("head_params", lambda d_model, h: (2 * d_model * (d_model // h), 2 * d_model * d_model)),
    ("head_params", lambda d_model, h: (4 * d_model * (d_model // h), 4 * d_model * d_model * h)),
    ("score_std", lambda d_k: (math.sqrt(d_k) / 2, 0.5)),
    ("score_std", lambda d_k: (math.log(d_k + 1), 1.0)),
]


@pytest.mark.parametrize("name, fn", UNKNOWN, ids=[f"{n}-{i}" for i, (n, _) in enumerate(UNKNOWN)])
def test_an_uncatalogued_mistake_is_refused_with_a_located_message(capsys, name, fn):
    ok, out = run(capsys, name, fn)
    assert not ok and "Looks like" not in out, out
    assert "expected" in out, out


def test_a_float_count_is_refused_by_name(capsys):
    """Weights are counted in whole numbers: 4·d_model²/h by true division is a float (the blind learner's 11.2)."""
    ok, out = run(capsys, "head_params", lambda d_model, h: (4 * d_model * d_model / h, 4 * d_model * d_model))
    assert not ok and "expected a whole number (int)" in out, out


# ---- two causes with the same numbers are both named
@pytest.mark.parametrize("checker, fn, first, second", [
    (cm.work_growth, lambda T, d: (4 * 2 * T * T * d + 16 * T * d * d) / (4 * T * T * d + 8 * T * d * d),
     "only the projections counted", "an attention term that grows only linearly in T"),
    (cm.score_std, lambda d_k: (d_k * 1.0, d_k / math.sqrt(d_k)), "variances for standard deviations",
     "the std of the sum taken as the sum of the d_k stds"),
])
def test_same_numbers_name_both_causes(capsys, checker, fn, first, second):
    assert checker(fn) is False
    out = capsys.readouterr().out
    assert f"Looks like: {first}" in out and f"Or: {second}" in out, out


def test_the_rnn_projection_count_is_named(capsys):
    assert cm.work_growth(lambda T, d: (16 * T * T * d + 8 * T * d * d) / (4 * T * T * d + 4 * T * d * d)) is False
    assert "Looks like: the projections counted as 4·T·d_model²" in capsys.readouterr().out


def test_a_float_division_of_a_huge_count_is_refused_and_named(capsys):
    assert cm.head_params(lambda d_model, h: (int(4 * d_model * (d_model / h)), int(4 * d_model ** 2))) is False
    assert "Looks like: a true division turned back into an int" in capsys.readouterr().out
