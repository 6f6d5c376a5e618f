"""Checkers for notebook 11: ``head_params``, ``score_std``, ``work_growth``.

Each exercise turns one misconception into a number; the typical wrong beliefs are the mistakes.
Every case has another d_model, h, d_k or T, so no constant fits.
"""
from __future__ import annotations

import math

from ..lessons.complexity import attention_flops, projection_flops
from .engine import Case, Exercise, Mistake

__all__ = ["head_params", "score_std", "work_growth", "HEAD_PARAMS", "SCORE_STD", "WORK_GROWTH"]


def _head_params_ref(d_model, h):
    d_k = d_model // h
    per_head = 4 * d_model * d_k  # d_k columns of W_q, W_k, W_v and d_k rows of W_o
    return per_head, h * per_head


HEAD_PARAMS = Exercise("head_params", _head_params_ref,
                       lambda: [Case(c) for c in ((16, 4), (512, 8), (96, 3), (30, 1), (768, 12))], (
    Mistake("each head owns full (d_model, d_model) matrices", "a head uses d_k columns of W_q, W_k, W_v "
            "and d_k rows of W_o: 4·d_model·d_k", lambda D, h: (4 * D * D, 4 * h * D * D)),
    Mistake("a head's slice taken as d_k x d_k: its input is still all d_model features",
            "per head 4·d_model·d_k", lambda D, h: (4 * (D // h) ** 2, 4 * h * (D // h) ** 2)),
    Mistake("W_o is forgotten (3 matrices, not 4)", "count the d_k rows of W_o each head writes to",
            lambda D, h: (3 * D * (D // h), 3 * D * D)),
    Mistake("the total is one head's share: multiply by h", "total = h · per_head = 4·d_model²",
            lambda D, h: (4 * D * (D // h), 4 * D * (D // h)))),
    outputs=("per_head", "total"))


def head_params(fn) -> bool:
    """Check ``fn(d_model, h) -> (per_head, total)``: the weights one head uses, and all heads together.

    >>> head_params(lambda d_model, h: (4 * d_model * (d_model // h), 4 * d_model * d_model))
    ✔ head_params: all 5 cases match
    True
    """
    return HEAD_PARAMS.check(fn)


SCORE_STD = Exercise("score_std", lambda d_k: (math.sqrt(d_k), 1.0),
                     lambda: [Case((d,)) for d in (1, 4, 64, 300, 7)], (
    Mistake("the variance d_k, not the standard deviation", "the std is sqrt(variance) = sqrt(d_k)",
            lambda d: (float(d), 1.0)),
    Mistake("a dot product of unit-variance numbers taken to have std 1", "q·k sums d_k products of "
            "variance 1: variance d_k", lambda d: (1.0, 1 / math.sqrt(d))),
    Mistake("divided by d_k instead of sqrt(d_k)", "scaling by 1/sqrt(d_k) leaves std 1",
            lambda d: (math.sqrt(d), 1 / math.sqrt(d)))),
    outputs=("unscaled", "scaled"))


def score_std(fn) -> bool:
    """Check ``fn(d_k) -> (unscaled, scaled)``: the std of q·k and of q·k / sqrt(d_k) for q, k with
    independent unit-variance components.

    >>> score_std(lambda d_k: (d_k ** 0.5, 1.0))
    ✔ score_std: all 5 cases match
    True
    """
    return SCORE_STD.check(fn)


def _work(T, D):
    return attention_flops(T, D) + projection_flops(T, D)


WORK_GROWTH = Exercise("work_growth", lambda T, d_model: _work(2 * T, d_model) / _work(T, d_model),
                       lambda: [Case(c) for c in ((64, 512), (1024, 512), (8192, 768), (100, 64), (3, 40))], (
    Mistake("only the T² part counted: 4x", "add the projections' 8·T·d_model², which only double",
            lambda T, D: 4.0),
    Mistake("only the projections counted: 2x", "add the attention's 4·T²·d_model, which quadruples",
            lambda T, D: 2.0),
    Mistake("exponential growth assumed", "the work is a polynomial in T: 4·T²·D + 8·T·D²",
            lambda T, D: 2.0 ** T),
    Mistake("the ratio upside down (T over 2T)", "work(2T) / work(T)",
            lambda T, D: _work(T, D) / _work(2 * T, D))))


def work_growth(fn) -> bool:
    """Check ``fn(T, d_model) -> float``: how many times more FLOPs self-attention (projections +
    attention) does at 2·T than at T.

    >>> work_growth(lambda T, d: (16 * T * T * d + 16 * T * d * d) / (4 * T * T * d + 8 * T * d * d))
    ✔ work_growth: all 5 cases match
    True
    """
    return WORK_GROWTH.check(fn)
