"""Checkers for notebook 05: ``flops``, ``crossover_seq_len``, ``score_bytes``, ``max_seq_len``.

Every case has another T, d_model, B, h and bytes per number; counts must be ints (a float where
the signature says ``-> int`` is refused, 4.0 included).
"""
from __future__ import annotations

import math

import numpy as np

from ..lessons.complexity import attention_flops, projection_flops, score_memory_bytes
from ..lessons.complexity import crossover_seq_len as _crossover
from .engine import Case, Exercise, Mistake

__all__ = ["flops", "crossover_seq_len", "score_bytes", "max_seq_len", "FLOPS", "CROSSOVER_SEQ_LEN",
           "SCORE_BYTES", "MAX_SEQ_LEN", "unit_mistakes"]

_UNITS = (("KiB (divided by 2**10)", 2 ** 10), ("MiB (divided by 2**20)", 2 ** 20), ("GiB (divided by 2**30)", 2 ** 30),
          ("kB (divided by 1000)", 10 ** 3), ("MB (divided by 10**6)", 10 ** 6), ("GB (divided by 10**9)", 10 ** 9))


def unit_mistakes(reference, bits=True) -> tuple:
    """The mistakes of a size in bytes given in another unit: bits (x 8, when ``bits``), KiB, MiB,
    GiB, kB, MB, GB (a true division, as a learner writes it)."""
    fix = "return the number of bytes itself: no conversion to another unit"
    out = [Mistake(f"the size in {unit}, not in bytes", fix,
                   lambda *args, _n=n: reference(*args) / _n) for unit, n in _UNITS]
    if bits:
        out.insert(0, Mistake("bits, not bytes (x 8)", "bytes_per_number is already in bytes: no factor of 8",
                              lambda *args: reference(*args) * 8))
    return tuple(out)



def _flops_ref(T, d_model):
    return projection_flops(T, d_model), attention_flops(T, d_model)


def _flops_scaled(proj, att):
    return lambda T, d_model: tuple(int(f * n) for f, n in zip((proj, att), _flops_ref(T, d_model)))


_FIX_PROJ = "four projections: Q, K, V and the output"
FLOPS = Exercise("flops", _flops_ref, lambda: [Case(c) for c in ((10, 16), (333, 90), (1000, 512), (4096, 768))], (
    Mistake("a multiply-add counted as 1 FLOP", "a multiply-add is 2 FLOPs: (T, D) x (D, D) costs 2·T·D²",
            _flops_scaled(0.5, 0.5)),
    Mistake("the K and V projections are forgotten", _FIX_PROJ, _flops_scaled(0.5, 1)),
    Mistake("the output projection is forgotten", _FIX_PROJ, _flops_scaled(0.75, 1)),
    Mistake("only Q Kᵀ counted, not weights · V", "two matmuls of 2·T²·d_model each", _flops_scaled(1, 0.5),
            also="the attention halved for a causal mask (this exercise counts every score)"),
    Mistake("the tuple in the swapped order (attention, projections)", "return projections, attention",
            lambda T, d_model: _flops_ref(T, d_model)[::-1]),
    Mistake("the attention as 4·T²·d_model²: d_model squared too (Q Kᵀ is (T, d) x (d, T): 2·T·d·T FLOPs)",
            "attention 4·T²·d_model: each of the two matmuls costs 2·T·T·d_model",
            lambda T, d_model: (projection_flops(T, d_model), attention_flops(T, d_model) * d_model)),
    Mistake("the attention as 4·T·d_model²: T and d_model swapped (its matmuls are (T, d) x (d, T))",
            "attention 4·T²·d_model: each of the two matmuls costs 2·T·T·d_model",
            lambda T, d_model: (projection_flops(T, d_model), 4 * T * d_model ** 2)),
    Mistake("the attention as 4·T·d_model: T not squared (every query meets every key)",
            "attention 4·T²·d_model: each of the two matmuls costs 2·T·T·d_model",
            lambda T, d_model: (projection_flops(T, d_model), 4 * T * d_model)),
    Mistake("the projections as 8·T²·d_model: T and d_model swapped (each is (T, d) x (d, d))",
            "projections 8·T·d_model²: four matmuls of 2·T·d_model·d_model",
            lambda T, d_model: (8 * T * T * d_model, attention_flops(T, d_model))),
    Mistake("the projections as 8·T·d_model: d_model not squared (each weight matrix is d_model x d_model)",
            "projections 8·T·d_model²: four matmuls of 2·T·d_model·d_model",
            lambda T, d_model: (8 * T * d_model, attention_flops(T, d_model)))),
    outputs=("projections", "attention"), edges=('T',))


def flops(fn) -> bool:
    """Check ``fn(T, d_model) -> (projections, attention)``: the FLOPs of self-attention.

    >>> flops(lambda T, d_model: (8 * T * d_model ** 2, 4 * T * T * d_model))
    ✔ flops: all 5 cases match
    True

    One multiply-add counts as 2 FLOPs: projections 8·T·d_model², attention 4·T²·d_model.
    """
    return FLOPS.check(fn)


CROSSOVER_SEQ_LEN = Exercise("crossover_seq_len", _crossover,
                             lambda: [Case((d,)) for d in (24, 5, 1, 100, 12289)], (
    Mistake("off by one: the last T where attention is still cheaper", "the first T with "
            "attention FLOPs >= projection FLOPs", lambda d_model: 2 * d_model - 1),
    Mistake("off by one: the loop goes on while attention <= projections, one step past the crossover",
            "loop while attention < projections (stop at the first T where they are equal)",
            lambda d_model: 2 * d_model + 1),
    Mistake("d_model returned: attention FLOPs 4·T²·d reach the projections' 8·T·d² at T = 2·d_model",
            "solve 4·T²·d_model >= 8·T·d_model² for T", lambda d_model: d_model),
    Mistake("the output projection is forgotten (3 projections, not 4)", "count Q, K, V "
            "and the output projection", lambda d_model: -(-3 * d_model // 2)),
    Mistake("only Q Kᵀ counted in the attention, not weights · V", "two matmuls of "
            "2·T²·d_model each", lambda d_model: 4 * d_model),
    Mistake("the FLOP count at the crossover returned (4·T²·d_model at T = 2·d_model), not T itself",
            "return the sequence length T = 2·d_model", lambda d_model: 16 * d_model ** 3),
    Mistake("the search starts at T = 0, where both costs are 0 (attention >= projections already holds)",
            "start at T = 1: the first T >= 1 where 4·T²·d_model >= 8·T·d_model²", lambda d_model: 0),
    Mistake("the projections' T forgotten (8·d_model²): 4·T²·d_model >= 8·d_model² gives ceil(sqrt(2·d_model))",
            "the projections cost 8·T·d_model²: 4·T²·d_model >= 8·T·d_model² gives T = 2·d_model",
            lambda d_model: math.ceil(math.sqrt(2 * d_model))),
    Mistake("a search that doubles T (1, 2, 4, 8, ...): it returns the first power of two past the crossover, not "
            "the crossover", "step T by 1 (or solve the inequality: T = 2·d_model)",
            lambda d_model: 1 << max(0, (2 * d_model - 1).bit_length())),
    Mistake("attention and projections swapped in the inequality (8·T²·d_model >= 4·T·d_model²): the crossover "
            "comes out 4 times too early", "attention 4·T²·d_model >= projections 8·T·d_model²",
            lambda d_model: -(-d_model // 2))))


def crossover_seq_len(fn) -> bool:
    """Check ``fn(d_model) -> int``: the smallest T whose attention FLOPs reach the projections'.

    >>> crossover_seq_len(lambda d_model: 2 * d_model)
    ✔ crossover_seq_len: all 5 cases match
    True
    """
    return CROSSOVER_SEQ_LEN.check(fn)


def _score_bytes_ref(B, h, T, bytes_per_number=4) -> int:
    return score_memory_bytes(B, h, T, dtype=np.dtype(f"f{bytes_per_number}"))


_FIX_BYTES = "B * h * T * T * bytes_per_number"
SCORE_BYTES = Exercise("score_bytes", _score_bytes_ref,
                       lambda: [Case(c) for c in ((1, 1, 1024), (8, 12, 2048, 2), (2, 32, 4096, 8), (3, 5, 7, 4))], (
    Mistake("h is forgotten: every head has its own T x T scores", _FIX_BYTES, lambda B, h, T, b=4: B * T * T * b),
    Mistake("B is forgotten: every sequence has its own scores", _FIX_BYTES, lambda B, h, T, b=4: h * T * T * b),
    Mistake("T instead of T²: one score per query AND key", _FIX_BYTES, lambda B, h, T, b=4: B * h * T * b),
    Mistake("numbers counted, not bytes", "multiply by bytes_per_number", lambda B, h, T, b=4: B * h * T * T),
    Mistake("the bytes hard-coded to 4: bytes_per_number is ignored", "multiply by bytes_per_number, not by 4",
            lambda B, h, T, b=4: B * h * T * T * 4),
    Mistake("the weights counted too: the scores and the softmax weights are two (B, h, T, T) arrays, and the "
            "exercise asks for the scores", _FIX_BYTES, lambda B, h, T, b=4: 2 * B * h * T * T * b),
    Mistake("only the causal lower triangle counted, T·(T+1)/2 scores: the (B, h, T, T) array is stored whole, "
            "masked or not", _FIX_BYTES, lambda B, h, T, b=4: B * h * T * (T + 1) // 2 * b)) + unit_mistakes(
    _score_bytes_ref))


def score_bytes(fn) -> bool:
    """Check ``fn(B, h, T, bytes_per_number=4) -> int``: the bytes of the (B, h, T, T) scores.

    >>> score_bytes(lambda B, h, T, bytes_per_number=4: B * h * T * T * bytes_per_number)
    ✔ score_bytes: all 4 cases match
    True
    """
    return SCORE_BYTES.check(fn)


def _max_seq_len_ref(budget_bytes, B, h, bytes_per_number=4) -> int:
    return math.isqrt(budget_bytes // (B * h * bytes_per_number))  # largest T with B·h·T²·b <= budget


def _max_seq_len_exact_fit_lost(budget_bytes, B, h, bytes_per_number=4) -> int:
    n = budget_bytes // (B * h * bytes_per_number)
    T = math.isqrt(n)
    return T - 1 if T * T * B * h * bytes_per_number == budget_bytes else T


MAX_SEQ_LEN = Exercise("max_seq_len", _max_seq_len_ref, lambda: [Case(c) for c in (
    (16 * 2**30, 1, 32), (16 * 2**30, 8, 12), (2**56 - 4, 1, 1), (10**6 + 7, 2, 3, 2), (192 * 1500**2, 4, 6, 8))], (
    Mistake("h is forgotten: every head has its own T x T scores", "budget // (B * h * bytes_per_number)",
            lambda n, B, h, b=4: math.isqrt(n // (B * b))),
    Mistake("the square root is forgotten: the scores grow with T², not T",
            "math.isqrt(budget // (B * h * bytes_per_number))", lambda n, B, h, b=4: n // (B * h * b)),
    Mistake("numbers counted, not bytes", "divide the budget by bytes_per_number too",
            lambda n, B, h, b=4: math.isqrt(n // (B * h))),
    Mistake("rounded up: the scores of that T no longer fit", "round down: math.isqrt(budget // (B * h * bytes_per_number))",
            lambda n, B, h, b=4: math.ceil(math.sqrt(n / (B * h * b)))),
    Mistake("rounded to the nearest: the scores of that T may no longer fit", "round down: math.isqrt(budget // (B * h * bytes_per_number))",
            lambda n, B, h, b=4: round(math.sqrt(n / (B * h * b)))),
    Mistake("off by one: the first T whose scores no longer fit (the largest T that fits, + 1)",
            "the largest T with B·h·T²·bytes_per_number <= budget: math.isqrt(budget // (B * h * bytes_per_number))",
            lambda n, B, h, b=4: _max_seq_len_ref(n, B, h, b) + 1),
    Mistake("off by one: the largest T that fits, - 1 (a < where <= belongs)",
            "the largest T with B·h·T²·bytes_per_number <= budget: math.isqrt(budget // (B * h * bytes_per_number))",
            lambda n, B, h, b=4: _max_seq_len_ref(n, B, h, b) - 1),
    Mistake("one too small at an exact fit: where B·h·T²·bytes_per_number equals the budget exactly, that T "
            "still fits (the test is <=); a strict <, a budget made one byte smaller, or a float root shaved "
            "below the exact one all lose it", "math.isqrt(budget // (B * h * bytes_per_number)): exact "
            "integers, and T with B·h·T²·b == budget counts", _max_seq_len_exact_fit_lost),
    Mistake("the square root taken before dividing: isqrt(budget) // (B·h·bytes_per_number); B·h·bytes is not "
            "squared, only T is", "math.isqrt(budget // (B * h * bytes_per_number))",
            lambda n, B, h, b=4: math.isqrt(n) // (B * h * b)),
    Mistake("the square root taken before dividing: isqrt(budget) // (B·h·bytes_per_number); B·h·bytes is not "
            "squared, only T is", "math.isqrt(budget // (B * h * bytes_per_number))",
            lambda n, B, h, b=4: int(math.sqrt(n) // (B * h * b))),  # the same, with a float root
    Mistake("B is forgotten: every sequence has its own scores", "budget // (B * h * bytes_per_number)",
            lambda n, B, h, b=4: math.isqrt(n // (h * b))),
    Mistake("the bytes hard-coded to 4: bytes_per_number is ignored", "divide by bytes_per_number, not by 4",
            lambda n, B, h, b=4: math.isqrt(n // (B * h * 4))),
    Mistake("not rounded: the real square root, where the largest whole T is asked", "math.isqrt(...), or "
            "int(math.sqrt(...)) with a check that T² still fits", lambda n, B, h, b=4: math.sqrt(n / (B * h * b))),
    Mistake("a float square root, int(math.sqrt(...)): a float holds 53 bits, so for a huge budget the root "
            "rounds up past the largest T that fits", "math.isqrt(budget // (B * h * bytes_per_number)): "
            "the exact integer square root", lambda n, B, h, b=4: int(math.sqrt(n / (B * h * b))))))


def max_seq_len(fn) -> bool:
    """Check ``fn(budget_bytes, B, h, bytes_per_number=4) -> int``: the largest T whose
    (B, h, T, T) scores fit in the budget.

    >>> max_seq_len(_max_seq_len_ref)
    ✔ max_seq_len: all 5 cases match
    True
    """
    return MAX_SEQ_LEN.check(fn)
