"""The checkers of notebook 13 (Exercises 13.1-13.3): right answers written in a learner's own words
pass, each catalogued mistake written as a learner writes it is named as itself (with its fix), a stub
is "not finished", and a mistake the catalogue does not know is still refused."""
import math

import numpy as np
import pytest

import mha_course as mc
from mha_course.check import long_context as cl


def run(capsys, checker, fn):
    ok = getattr(cl, checker)(fn)
    return ok, capsys.readouterr().out


def named(out, mistake):
    return f"Looks like: {mistake.name}. Fix: {mistake.fix}" in out


def mistake(exercise, start):
    return next(m for m in exercise.mistakes if m.name.startswith(start))


# ----------------------------------------------------------------------------- 13.1 ALiBi slopes
def learner_slopes(rule="paper", first=1, extra=slice(0, None, 2), order="paper"):
    def my_alibi_slopes(h):
        def geo(n):
            start = 2 ** (-8 / n)
            return [start ** k for k in range(first, first + n)]
        if rule == "geometric" or math.log2(h).is_integer():
            return np.array(geo(h))
        n = 2 ** math.floor(math.log2(h))
        if rule == "next_power":
            return np.array(geo(2 * n)[:h])
        slopes = geo(n) + geo(2 * n)[extra][:h - n]
        return np.array(sorted(slopes, reverse=True) if order == "sorted" else slopes)
    return my_alibi_slopes


def test_a_table_of_slopes_up_to_16_heads_is_refused(capsys):
    """13.1's accepted wrong answer: a lookup table fits every h <= 16, never h = 20 or 33."""
    table = {h: mc.alibi_slopes(h) for h in range(1, 17)}
    ok, out = run(capsys, "alibi_slopes", lambda h: table.get(h, np.ones(h)))
    assert not ok and "h=20" in out, out


def test_alibi_right_answers_pass(capsys):
    ok, out = run(capsys, "alibi_slopes", learner_slopes())
    assert ok and "all 14 cases match" in out

    def recursive(h):  # the paper's own code, as a learner might copy it
        def p2(n):
            start = 2 ** (-2 ** -(math.log2(n) - 3))
            return [start * start ** i for i in range(n)]
        if math.log2(h).is_integer():
            return p2(h)
        c = 2 ** math.floor(math.log2(h))
        return p2(c) + recursive(2 * c)[0::2][:h - c]
    assert run(capsys, "alibi_slopes", lambda h: np.array(recursive(h)))[0]


@pytest.mark.parametrize("kwargs,start", [
    (dict(rule="geometric"), "the geometric rule"),
    (dict(first=0), "the slopes start at 2^0"),
    (dict(extra=slice(1, None, 2)), "the extra heads take"),
    (dict(rule="next_power"), "for h not a power of two"),
    (dict(order="sorted"), "the right slopes in another order"),
])
def test_alibi_mistakes_are_named(capsys, kwargs, start):
    ok, out = run(capsys, "alibi_slopes", learner_slopes(**kwargs))
    assert not ok and named(out, mistake(cl.ALIBI_SLOPES, start)), out


# ----------------------------------------------------------------------------- 13.2 PI frequencies
def learner_pi(op="divide", exponent=2, start=0, ntk=False):
    def my_inv_freq(d_k, base, factor):
        b = base * factor ** (d_k / (d_k - 2)) if ntk else base
        freqs = np.array([b ** (-exponent * j / d_k) for j in range(start, start + d_k // 2)])
        return {"divide": freqs / factor, "multiply": freqs * factor, "none": freqs}[op if not ntk else "none"]
    return my_inv_freq


def test_pi_right_answer_passes(capsys):
    ok, out = run(capsys, "interpolated_inv_freq", learner_pi())
    assert ok and "all 5 cases match" in out
    # the same written from angles: theta_j at position p / s
    assert run(capsys, "interpolated_inv_freq",
               lambda d, base, s: 1.0 / (s * base ** (np.arange(0, d, 2) / d)))[0]


@pytest.mark.parametrize("kwargs,start", [
    (dict(op="multiply"), "multiplied by the factor"),
    (dict(ntk=True), "the base was changed"),
    (dict(exponent=1), "the exponent is off"),
    (dict(start=1), "the pair index starts at 1"),
    (dict(op="none"), "the factor was not applied"),
])
def test_pi_mistakes_are_named(capsys, kwargs, start):
    ok, out = run(capsys, "interpolated_inv_freq", learner_pi(**kwargs))
    assert not ok and named(out, mistake(cl.INTERPOLATED_INV_FREQ, start)), out


# ----------------------------------------------------------------------------- 13.3 the lse merge
def learner_merge(shift=True, normalise=True, guard=True, weights="exp"):
    def my_merge(outs, lses):
        lse = np.concatenate(lses, axis=-1)          # (T, n)
        out = np.stack(outs, axis=-1)                # (T, d_v, n)
        if weights == "mean":
            return out.mean(-1)
        if weights == "lse":
            w = lse
        else:
            m = lse.max(-1, keepdims=True) if shift else np.zeros_like(lse[:, :1])
            if guard:
                m = np.where(np.isinf(m), 0.0, m)
            w = np.exp(lse - m)
        total = w.sum(-1, keepdims=True)
        if guard:
            total = np.where(total == 0, 1.0, total)
        merged = (out * w[:, None, :]).sum(-1)
        return merged / total if normalise else merged
    return my_merge


def test_merge_right_answer_passes(capsys):
    ok, out = run(capsys, "lse_merge", learner_merge())
    assert ok and "all 5 cases match" in out


@pytest.mark.parametrize("kwargs,start", [
    (dict(weights="mean"), "the partial outputs are averaged"),
    (dict(shift=False, guard=True), "exp(lse_c) without subtracting"),
    (dict(normalise=False), "the weights are not normalised"),
    (dict(weights="lse"), "the lse values are used as weights"),
    (dict(guard=False), "no guard for rows"),
])
def test_merge_mistakes_are_named(capsys, kwargs, start):
    ok, out = run(capsys, "lse_merge", learner_merge(**kwargs))
    assert not ok and named(out, mistake(cl.LSE_MERGE, start)), out


# ----------------------------------------------------------------------------- stubs and unknown mistakes
@pytest.mark.parametrize("checker,args", [("alibi_slopes", 1), ("interpolated_inv_freq", 3), ("lse_merge", 2)])
def test_stub_is_not_finished(capsys, checker, args):
    def stub(*a):
        raise NotImplementedError("Exercise 13")
    ok, out = run(capsys, checker, stub)
    assert not ok and "not finished" in out


def test_unknown_mistake_is_refused(capsys):
    ok, out = run(capsys, "alibi_slopes", lambda h: np.full(h, 0.5))
    assert not ok and "Looks like" not in out


# ---- learner code written anew, each class named
from mha_course import check as _check  # noqa: E402

from .verdicts import says as _says  # noqa: E402


def _powers(h):
    n = 1 << (h.bit_length() - 1)  # the largest power of two <= h
    return n


@pytest.mark.parametrize("fn, said", [
    (lambda h: np.concatenate([2.0 ** (-8 * np.arange(1, _powers(h) + 1) / _powers(h)),
                               2.0 ** (-4 * np.arange(1, h - _powers(h) + 1) / _powers(h))]),
     "the extra heads take the FIRST h - n slopes of 2n"),
    (lambda h: np.concatenate([np.exp(-8 * np.arange(1, _powers(h) + 1) / _powers(h)),
                               np.exp(-4 * np.arange(1, 2 * _powers(h) + 1, 2) / _powers(h))[:h - _powers(h)]]),
     "e^(-8k/n) instead of 2^(-8k/n)"),
])
def test_alibi_slips_are_named(capsys, fn, said):
    _says(capsys, _check.alibi_slopes, fn, said)


def test_alibi_power_rounded_to_the_nearest_is_named(capsys):
    def learner(h):
        n = 2 ** round(np.log2(h))
        geo = lambda m: 0.5 ** (8 * np.arange(1, m + 1) / m)  # noqa: E731
        return geo(n)[:h] if n >= h else np.concatenate([geo(n), geo(2 * n)[::2][:h - n]])
    _says(capsys, _check.alibi_slopes, learner, "the power of two n rounded to the nearest")


def test_the_base_divided_by_the_factor_is_named(capsys):
    _says(capsys, _check.interpolated_inv_freq,
          lambda d_k, base, factor: 1.0 / (base / factor) ** (np.arange(0, d_k, 2) / d_k), "the base divided by the factor")


@pytest.mark.parametrize("how, said", [("two", "only the first two chunks merged"),
                                      ("queries", "the chunk weights normalised over the queries"),
                                      ("linear", "the lse values are used as weights directly instead of exp(lse) "
                                                 "(an lse of -inf taken as 0)")])
def test_merge_slips_are_named(capsys, how, said):
    def learner(outs, lses):
        L, O = np.stack(lses), np.stack(outs)  # (n, T, 1), (n, T, d_v)
        if how == "two":
            L, O = L[:2], O[:2]
        if how == "linear":
            w = np.nan_to_num(L, neginf=0.0)
            tot = w.sum(0)
            return (w * O).sum(0) / np.where(tot == 0, 1.0, tot)
        axis = 1 if how == "queries" else 0
        m = np.max(np.where(np.isfinite(L), L, -1e300), axis=axis, keepdims=True)
        w = np.exp(np.where(np.isfinite(L), L, -1e300) - m)
        w = w / np.maximum(w.sum(axis=axis, keepdims=True), 1e-300)
        return (w * O).sum(0)
    _says(capsys, _check.lse_merge, learner, said)
