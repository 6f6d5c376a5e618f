"""Checkers for notebook 07: ``sinusoidal_positions`` and ``apply_rope`` (interleaved layout).

The cases vary T, d_model / d_k, the batch axes, the positions (not always 0..T-1) and the base,
so no table of constants fits; the mistakes are the ones learners report: sine and cosine
swapped, the frequency exponent off by a factor of 2, positions that start at 1, the two RoPE
layouts swapped, a rotation the wrong way round.
"""
from __future__ import annotations

import numpy as np

from ..positions import apply_rope as _apply_rope
from ..positions import sinusoidal_positions as _sinusoidal_positions
from .engine import Case, Exercise, Mistake

__all__ = ["sinusoidal_positions", "apply_rope", "SINUSOIDAL_POSITIONS", "APPLY_ROPE", "rope_scores", "ROPE_SCORES"]


# ---------------------------------------------------------------------------------------
# sinusoidal positions
# ---------------------------------------------------------------------------------------

def _sinusoids(T, d_model, *, exponent="2i", start=0, swap=False, halves=False):
    """A configurable sinusoid table (T, d_model): the reference and its typical wrong twins."""
    pos = np.arange(start, start + T)[:, None]  # (T, 1)
    i = np.arange(d_model // 2)  # (d_model/2,): the pair index
    power = {"2i": 2 * i, "i": i}[exponent] / d_model
    angles = pos / 10000.0 ** power  # (T, d_model/2)
    first, second = (np.cos, np.sin) if swap else (np.sin, np.cos)
    if halves:
        return np.concatenate([first(angles), second(angles)], axis=-1)  # sin block, then cos block
    out = np.empty((T, d_model))
    out[:, 0::2], out[:, 1::2] = first(angles), second(angles)
    return out


def _sinusoid_cases():
    return [Case((T, d), f"T={T}, d_model={d}") for T, d in ((5, 4), (7, 10), (3, 16), (12, 6), (1, 2), (9, 8))]


_SINUSOID_MISTAKES = (
    Mistake("sine and cosine swapped (cos in the even columns 2i, sin in the odd ones)",
            "PE[:, 0::2] = sin(angles), PE[:, 1::2] = cos(angles)",
            lambda T, d_model: _sinusoids(T, d_model, swap=True)),
    Mistake("the frequency exponent is off by a factor of 2: 10000^(i/d_model) instead of 10000^(2i/d_model)",
            "with i the pair index 0..d_model/2-1, divide pos by 10000 ** (2 * i / d_model)",
            lambda T, d_model: _sinusoids(T, d_model, exponent="i")),
    Mistake("positions start at 1 instead of 0",
            "use pos = np.arange(T): the first token is position 0, whose row is [0, 1, 0, 1, ...]",
            lambda T, d_model: _sinusoids(T, d_model, start=1)),
    Mistake("all sines first, then all cosines (concatenated halves) instead of interleaved columns",
            "interleave: column 2i is the sine of frequency i, column 2i+1 its cosine",
            lambda T, d_model: _sinusoids(T, d_model, halves=True)),
)
SINUSOIDAL_POSITIONS = Exercise("sinusoidal_positions", _sinusoidal_positions, _sinusoid_cases,
                                _SINUSOID_MISTAKES)


def sinusoidal_positions(fn) -> bool:
    """Check a learner's ``sinusoidal_positions(T, d_model)``: -> PE (T, d_model), even d_model.

    >>> import mha_course as mc
    >>> sinusoidal_positions(mc.sinusoidal_positions)
    ✔ sinusoidal_positions: all 6 cases match
    True
    """
    return SINUSOIDAL_POSITIONS.check(fn)


# ---------------------------------------------------------------------------------------
# RoPE
# ---------------------------------------------------------------------------------------

def _rope_reference(x, positions, base=10000.0):
    return _apply_rope(x, positions, base, "interleaved")


def _rope_half_exponent(x, positions, base=10000.0):
    """base^(-i/d_k) instead of base^(-2i/d_k): the same as the right formula with d_k doubled."""
    return _apply_rope(x, positions, base ** 0.5, "interleaved")  # (base^0.5)^(-2i/d_k) = base^(-i/d_k)


def _rope_cases():
    rng = np.random.default_rng(20240707)
    return [Case((rng.normal(size=(5, 4)), np.arange(5)), "x (T=5, d_k=4), positions 0..4"),
            Case((rng.normal(size=(2, 3, 6, 8)), np.arange(6), 100.0), "x (B=2, h=3, T=6, d_k=8), base=100"),
            Case((rng.normal(size=(4, 6)), np.array([3, 9, 10, 20])), "positions 3, 9, 10, 20 (not 0..T-1)"),
            Case((rng.normal(size=(3, 7, 16)), np.arange(7) + 40, 500.0), "x (3, T=7, d_k=16), positions 40..46"),
            Case((rng.normal(size=(1, 2)), np.array([1])), "one token, d_k=2, position 1")]


_ROPE_MISTAKES = (
    Mistake("the halves layout (pairs i, i + d_k/2, GPT-NeoX / Llama) instead of interleaved (2i, 2i+1)",
            "rotate pairs (x[..., 0::2], x[..., 1::2]), as in the RoFormer paper",
            lambda x, positions, base=10000.0: _apply_rope(x, positions, base, "halves")),
    Mistake("the frequency exponent is off by a factor of 2: base^(-i/d_k) instead of base^(-2i/d_k)",
            "with i the pair index 0..d_k/2-1, theta_i = base ** (-2 * i / d_k)", _rope_half_exponent),
    Mistake("positions start at 1 instead of 0 (or 1 was added to the given positions)",
            "rotate by the positions you are given: angle = positions[t] * theta_i",
            lambda x, positions, base=10000.0: _rope_reference(x, np.asarray(positions) + 1, base)),
    Mistake("rotation the wrong way round (the sign of sin flipped)",
            "new a = a cos - b sin, new b = a sin + b cos",
            lambda x, positions, base=10000.0: _rope_reference(x, -np.asarray(positions), base)),
)
APPLY_ROPE = Exercise("apply_rope", _rope_reference, _rope_cases, _ROPE_MISTAKES)


def apply_rope(fn) -> bool:
    """Check a learner's ``apply_rope(x, positions, base=10000.0)``: x (..., T, d_k) -> rotated, interleaved pairs.

    >>> import mha_course as mc
    >>> apply_rope(mc.apply_rope)
    ✔ apply_rope: all 5 cases match
    True
    """
    return APPLY_ROPE.check(fn)


# ---------------------------------------------------------------------------------------
# RoPE scores: both queries and keys rotated, then scaled
# ---------------------------------------------------------------------------------------

def _rope_scores_with(rotate_q=True, rotate_k=True, scale=True, layout="interleaved"):
    """Q (..., T, d_k), K (..., S, d_k) -> scores (..., T, S) with the chosen parts of RoPE."""
    def scores(Q, K, base=10000.0):
        T, S, d_k = Q.shape[-2], K.shape[-2], Q.shape[-1]
        q = _apply_rope(Q, np.arange(T), base, layout) if rotate_q else Q
        k = _apply_rope(K, np.arange(S), base, layout) if rotate_k else K
        return q @ np.swapaxes(k, -1, -2) / (np.sqrt(d_k) if scale else 1.0)  # (..., T, d_k) x (..., d_k, S)
    return scores


def _rope_scores_cases():
    rng = np.random.default_rng(20240710)
    return [Case((rng.normal(size=(5, 4)), rng.normal(size=(5, 4))), "Q, K (T=S=5, d_k=4)"),
            Case((rng.normal(size=(2, 3, 4, 8)), rng.normal(size=(2, 3, 6, 8)), 100.0),
                 "Q (B=2, h=3, T=4, d_k=8), K (S=6), base=100"),
            Case((rng.normal(size=(7, 6)), rng.normal(size=(3, 6))), "T=7 queries, S=3 keys"),
            Case((rng.normal(size=(1, 2, 9, 16)), rng.normal(size=(1, 2, 9, 16)), 500.0), "d_k=16, base=500")]


_ROPE_SCORES_MISTAKES = (
    Mistake("only the queries are rotated: the score is no longer relative",
            "rotate both: apply_rope(Q, np.arange(T)) and apply_rope(K, np.arange(S))",
            _rope_scores_with(rotate_k=False)),
    Mistake("only the keys are rotated", "rotate the queries too: apply_rope(Q, np.arange(T))",
            _rope_scores_with(rotate_q=False)),
    Mistake("the scores are not divided by sqrt(d_k)", "divide Q Kᵀ by np.sqrt(d_k) as always",
            _rope_scores_with(scale=False)),
    Mistake("the halves layout instead of interleaved", "use layout='interleaved' (the default)",
            _rope_scores_with(layout="halves")),
)
ROPE_SCORES = Exercise("rope_scores", _rope_scores_with(), _rope_scores_cases, _ROPE_SCORES_MISTAKES)


def rope_scores(fn) -> bool:
    """Check a learner's ``rope_scores(Q, K, base=10000.0)``: Q (..., T, d_k), K (..., S, d_k) -> (..., T, S).

    >>> import mha_course as mc, numpy as np
    >>> rope_scores(lambda Q, K, base=10000.0: mc.apply_rope(Q, np.arange(Q.shape[-2]), base)
    ...             @ np.swapaxes(mc.apply_rope(K, np.arange(K.shape[-2]), base), -1, -2) / np.sqrt(Q.shape[-1]))
    ✔ rope_scores: all 4 cases match
    True
    """
    return ROPE_SCORES.check(fn)


