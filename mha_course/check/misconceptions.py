"""Checkers for notebook 11: ``work_growth`` (11.1), ``head_params`` (11.2), ``score_std`` (11.3).

Each exercise turns one misconception into a number; the typical wrong beliefs (the seed articles'
own among them: "doubling the length quadruples the computation", "each head owns its matrices")
and the slips of a half-remembered formula are the mistakes. Every case has another d_model, h,
d_k or T, so no constant fits.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..lessons.complexity import attention_flops, projection_flops
from .engine import Case, Exercise, Mistake

__all__ = ["head_params", "score_std", "work_growth", "HEAD_PARAMS", "SCORE_STD", "WORK_GROWTH", "in_natural_types"]


def in_natural_types(fn, types):
    """fn whose numbers come back as ``types`` (a type, or a tuple of types for a tuple result).

    A count is a count whether it is written 4 or np.int64(4), but 4.0 (true division) stays a
    float, which a checker of whole numbers refuses by name; a ratio is a ratio whether it is 4
    or 4.0; a list of two numbers is the pair.

    >>> in_natural_types(lambda: [np.int64(4), 4.0, 2], (int, int, float))()
    (4, 4.0, 2.0)
    """
    if not callable(fn):
        return fn

    @functools.wraps(fn)
    def natural(*args):
        out = fn(*args)
        many = isinstance(types, tuple)
        if many and isinstance(out, list):
            out = tuple(out)
        if many and not (isinstance(out, tuple) and len(out) == len(types)):
            return out
        return tuple(map(_as_type, out, types)) if many else _as_type(out, types)
    return natural


def _as_type(value, kind):
    """A real number as ``kind`` (float, or int when it is whole); anything else unchanged."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return value
    if kind is float:
        return float(value)
    return int(value) if kind is int and isinstance(value, (int, np.integer)) else value  # 4.0 stays a float


def _head_params_ref(d_model, h):
    d_k = d_model // h
    per_head = 4 * d_model * d_k  # d_k columns of W_q, W_k, W_v and d_k rows of W_o
    return per_head, h * per_head


HEAD_PARAMS = Exercise("head_params", _head_params_ref,
                       lambda: [Case(c) for c in ((16, 4), (512, 8), (3 * (2**28 + 1), 3), (30, 1), (768, 12))], (
    Mistake("each head owns full (d_model, d_model) matrices", "a head uses d_k columns of W_q, W_k, W_v "
            "and d_k rows of W_o: 4·d_model·d_k", lambda D, h: (4 * D * D, 4 * h * D * D)),
    Mistake("a head's slice taken as d_k x d_k: its input is still all d_model features",
            "per head 4·d_model·d_k", lambda D, h: (4 * (D // h) ** 2, 4 * h * (D // h) ** 2)),
    Mistake("the whole W_o counted for each head (d_model²), as if every head used all of it: head i writes only "
            "its d_k rows of W_o", "per head 4·d_model·d_k: d_k rows of W_o", lambda D, h: (3 * D * (D // h) + D * D, 4 * D * D)),
    Mistake("W_o is forgotten (3 matrices, not 4)", "count the d_k rows of W_o each head writes to",
            lambda D, h: (3 * D * (D // h), 3 * D * D)),
    Mistake("the total is one head's share: multiply by h", "total = h · per_head = 4·d_model²",
            lambda D, h: (4 * D * (D // h), 4 * D * (D // h))),
    Mistake("d_k confused with h: a head's slice is d_model x h", "d_k = d_model // h: per head 4·d_model·d_k",
            lambda D, h: (4 * D * h, 4 * h * D * h)),
    Mistake("only one matrix counted (W_q): d_model·d_k per head", "a head uses a slice of all four: "
            "W_q, W_k, W_v (d_k columns each) and W_o (d_k rows)", lambda D, h: (D * (D // h), D * D)),
    Mistake("a true division turned back into an int (int(4 * d_model * d_model / h)): a float holds 53 bits, "
            "so a count this large comes back rounded", "d_k = d_model // h: whole-number arithmetic stays exact, "
            "per head 4 * d_model * (d_model // h)", lambda D, h: (int(4 * D * D / h), 4 * D * D)),
    Mistake("the biases counted too: this exercise counts the weights of the four matrices only",
            "leave out b_q, b_k, b_v, b_o: per head 4·d_model·d_k",
            lambda D, h: (4 * D * (D // h) + 4 * (D // h), 4 * D * D + 4 * D))),
    outputs=("per_head", "total"), strict_types=True)


def head_params(fn) -> bool:
    """Check ``fn(d_model, h) -> (per_head, total)``: the weights one head uses, and all heads together.

    >>> head_params(lambda d_model, h: (4 * d_model * (d_model // h), 4 * d_model * d_model))
    ✔ head_params: all 5 cases match
    True
    """
    return HEAD_PARAMS.check(in_natural_types(fn, (int, int)))


SCORE_STD = Exercise("score_std", lambda d_k: (math.sqrt(d_k), 1.0),
                     lambda: [Case((d,)) for d in (1, 4, 64, 300, 7)], (
    Mistake("the variance d_k, not the standard deviation", "the std is sqrt(variance) = sqrt(d_k)",
            lambda d: (float(d), 1.0)),
    Mistake("a dot product of unit-variance numbers taken to have std 1", "q·k sums d_k products of "
            "variance 1: variance d_k", lambda d: (1.0, 1 / math.sqrt(d))),
    Mistake("divided by d_k instead of sqrt(d_k)", "scaling by 1/sqrt(d_k) leaves std 1",
            lambda d: (math.sqrt(d), 1 / math.sqrt(d))),
    Mistake("variances for standard deviations on both sides: d_k, then d_k / sqrt(d_k)",
            "std = sqrt(variance): sqrt(d_k) unscaled, and dividing by sqrt(d_k) gives 1",
            lambda d: (float(d), math.sqrt(d)),
            also="the std of the sum taken as the sum of the d_k stds (d_k, then d_k / sqrt(d_k)): "
                 "independent variances add, not standard deviations"),
    Mistake("the scaling left out of the second number: q·k / sqrt(d_k) still taken to have std sqrt(d_k)",
            "dividing by sqrt(d_k) divides the std by sqrt(d_k): sqrt(d_k) / sqrt(d_k) = 1",
            lambda d: (math.sqrt(d), math.sqrt(d))),
    Mistake("the std of ONE product q_i k_i (1), not of their sum over d_k components",
            "q·k adds d_k independent products of variance 1: variance d_k, std sqrt(d_k)",
            lambda d: (1.0, 1.0))),
    outputs=("unscaled", "scaled"))


def score_std(fn) -> bool:
    """Check ``fn(d_k) -> (unscaled, scaled)``: the std of q·k and of q·k / sqrt(d_k) for q, k with
    independent unit-variance components.

    >>> score_std(lambda d_k: (d_k ** 0.5, 1.0))
    ✔ score_std: all 5 cases match
    True
    """
    return SCORE_STD.check(in_natural_types(fn, (float, float)))


def _work(T, D):
    return attention_flops(T, D) + projection_flops(T, D)


WORK_GROWTH = Exercise("work_growth", lambda T, d_model: _work(2 * T, d_model) / _work(T, d_model),
                       lambda: [Case(c) for c in ((64, 512), (1024, 512), (8192, 768), (100, 64), (3, 40))], (
    Mistake("always 4x (\"doubling the length quadruples the computation\"): only the T² part counted",
            "add the projections' 8·T·d_model², which only double: the ratio is between 2 and 4",
            lambda T, D: 4.0),
    Mistake("only the projections counted: 2x", "add the attention's 4·T²·d_model, which quadruples",
            lambda T, D: 2.0, also="an attention term that grows only linearly in T (4·T·d_model² in place of 4·T²·d_model, or its "
                 "T² not squared at 2T: 4·2T·T·d_model), so it only doubles too"),
    Mistake("exponential growth assumed", "the work is a polynomial in T: 4·T²·D + 8·T·D²",
            lambda T, D: 2.0 ** T),
    Mistake("the ratio upside down (T over 2T)", "work(2T) / work(T)",
            lambda T, D: _work(T, D) / _work(2 * T, D)),
    Mistake("integer division: work(2T) // work(T) drops the fraction", "use / for the ratio",
            lambda T, D: float(_work(2 * T, D) // _work(T, D))),
    Mistake("the difference work(2T) - work(T), not how many times more", "the ratio work(2T) / work(T)",
            lambda T, D: float(_work(2 * T, D) - _work(T, D))),
    Mistake("the projections counted as 8·T·d_model (d_model, not d_model²)",
            "each projection is a (T, d_model) x (d_model, d_model) product: 2·T·d_model² FLOPs, four of them",
            lambda T, D: (4 * (2 * T) ** 2 * D + 8 * 2 * T * D) / (4 * T * T * D + 8 * T * D),
            also="the attention counted as 4·T²·d_model² (d_model² where d_model belongs) next to the projections' "
                 "8·T·d_model²"),
    Mistake("only the attention part doubled in T: the projections' 8·T·d_model² kept at T",
            "both parts at 2T: work(2T) = 4·(2T)²·d_model + 8·(2T)·d_model²",
            lambda T, D: (4 * (2 * T) ** 2 * D + 8 * T * D * D) / _work(T, D)),
    Mistake("the projections counted as 4·T·d_model², half of 8·T·d_model² (two of the four "
            "projections, or the RNN's 4·T·d_model²)",
            "four projections (Q, K, V, output), each 2·T·d_model² FLOPs: 8·T·d_model²",
            lambda T, D: (4 * (2 * T) ** 2 * D + 4 * 2 * T * D * D) / (4 * T * T * D + 4 * T * D * D)),
    Mistake("the attention counted as 2·T²·d_model (Q Kᵀ only, not weights · V)",
            "Q Kᵀ and weights · V are 2·T²·d_model each: 4·T²·d_model",
            lambda T, D: (2 * (2 * T) ** 2 * D + 16 * T * D * D) / (2 * T * T * D + 8 * T * D * D))), edges=('T',))


def work_growth(fn) -> bool:
    """Check ``fn(T, d_model) -> float``: how many times more FLOPs self-attention (projections +
    attention) does at 2·T than at T.

    >>> work_growth(lambda T, d: (16 * T * T * d + 16 * T * d * d) / (4 * T * T * d + 8 * T * d * d))
    ✔ work_growth: all 6 cases match
    True
    """
    return WORK_GROWTH.check(in_natural_types(fn, float))
