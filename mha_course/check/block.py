"""Checker for notebook 04: ``layer_norm``.

Cases vary the batch shape and D, with rows where eps matters and a constant row.
"""
from __future__ import annotations

import numpy as np

from ..block import layer_norm as _layer_norm
from .engine import Case, Exercise, Mistake

__all__ = ["layer_norm", "LAYER_NORM"]


def _norm_by(scale_of, axis=-1):
    """(x - mean) / scale_of(x - mean, eps), the mean over ``axis``: one knob of layer norm turned."""
    def norm(x, eps=1e-5):
        z = x - x.mean(axis=axis, keepdims=True)
        return z / scale_of(z, eps)
    return norm


def _var(z, axis=-1, ddof=0):
    return (z ** 2).sum(axis=axis, keepdims=True) / (z.size / np.size(z.sum(axis=axis)) - ddof)


def _layer_norm_cases():
    rng = np.random.default_rng(20240507)
    return [Case((rng.normal(3.0, 5.0, size=(2, 4, 8)),), "mean 3, std 5"),
            Case((np.array([[1.0, 2.0, 3.0, 10.0]]) + 1e8,), "one outlier, every entry + 1e8: E[x²] - E[x]² cancels"),
            Case((rng.normal(size=(3, 6)) * 1e-3,), "rows of variance ~1e-6: eps matters"),
            Case((np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]]),), "a constant row"),
            Case((rng.normal(-1.0, 2.0, size=(5, 10)), 1e-2), "eps = 0.01")]


_FIX_AXIS = "mean and variance over the last axis, with keepdims=True: x.mean(axis=-1, keepdims=True)"
LAYER_NORM = Exercise("layer_norm", _layer_norm, _layer_norm_cases, (
    Mistake("the unbiased variance (ddof=1); layer norm divides by D, not D - 1",
            "x.var(axis=-1, keepdims=True), or ((x - mean) ** 2).mean(axis=-1, keepdims=True)",
            _norm_by(lambda z, eps: np.sqrt(_var(z, ddof=1) + eps))),
    Mistake("eps is forgotten (a constant row gives 0 / 0 = nan)", "divide by np.sqrt(var + eps)",
            _norm_by(lambda z, eps: np.sqrt(_var(z)))),
    Mistake("eps added outside the square root: np.sqrt(var) + eps", "eps goes inside: np.sqrt(var + eps)",
            _norm_by(lambda z, eps: np.sqrt(_var(z)) + eps)),
    Mistake("the standard deviation used as the variance: np.sqrt(std + eps)",
            "var = ((x - mean) ** 2).mean(axis=-1, keepdims=True), then np.sqrt(var + eps)",
            _norm_by(lambda z, eps: np.sqrt(np.sqrt(_var(z)) + eps))),
    Mistake("the variance used as the standard deviation: divided by var + eps, without the square root",
            "divide by np.sqrt(var + eps): the standard deviation, not the variance",
            _norm_by(lambda z, eps: _var(z) + eps)),
    Mistake("the mean is not subtracted: x / np.sqrt(var + eps) (the variance right, the row not centred)",
            "subtract the row's mean first: (x - mean) / np.sqrt(var + eps)",
            lambda x, eps=1e-5: x / np.sqrt(x.var(axis=-1, keepdims=True) + eps)),
    Mistake("the one-pass variance E[x²] - E[x]²: where a row's mean is large next to its spread, the two terms "
            "cancel and the variance loses its digits (or goes negative)", "the two-pass variance: "
            "((x - mean) ** 2).mean(axis=-1, keepdims=True), or x.var(axis=-1, keepdims=True)",
            lambda x, eps=1e-5: (x - x.mean(-1, keepdims=True)) / np.sqrt(
                (x * x).mean(-1, keepdims=True) - x.mean(-1, keepdims=True) ** 2 + eps)),
    Mistake("RMSNorm instead of layer norm: x / np.sqrt(mean(x²) + eps), with no centring",
            "layer norm subtracts the mean and divides by the standard deviation: (x - mean) / np.sqrt(var + eps)",
            lambda x, eps=1e-5: x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)),
    Mistake("centred, then divided by the root mean square of x (not of x - mean)",
            "the variance is the mean of (x - mean)²: np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps)",
            lambda x, eps=1e-5: (x - x.mean(axis=-1, keepdims=True)) / np.sqrt((x * x).mean(axis=-1, keepdims=True)
                                                                                + eps)),
    Mistake("normalised over the wrong axis (axis 0)", _FIX_AXIS,
            _norm_by(lambda z, eps: np.sqrt(_var(z, axis=0) + eps), axis=0)),
    Mistake("normalised over the whole array (no axis)", _FIX_AXIS,
            _norm_by(lambda z, eps: np.sqrt((z ** 2).mean() + eps), axis=None))),
    axes={"result": ("row", "feature")})


def layer_norm(fn) -> bool:
    """Check ``fn(x, eps=1e-5)``: x (..., D) -> (..., D), each row to mean 0 and variance 1.

    >>> from mha_course.block import layer_norm as ln
    >>> layer_norm(ln)
    ✔ layer_norm: all 5 cases match
    True

    Cases: (2, 4, 8) with mean 3 and std 5; a row with an outlier; rows of tiny variance
    (where eps matters); a constant row; eps = 0.01 on (5, 10).
    """
    return LAYER_NORM.check(fn)
