"""Results over seeds: the mean and spread of one number, and whether two rows differ beyond it (numpy).

A table of one training run reads the seed's luck as a result. The course's experiment tables
(notebooks 08 and 13) are run for several seeds, and print ``summary`` (mean, min, max); a
difference is read as a result only when ``separated`` (every seed of one row beyond every seed
of the other), and called "within the noise" otherwise.

Shapes: ``S`` seeds, ``M`` rows (models, settings).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _validate

__all__ = ["Summary", "summary", "separated", "format_values"]


class Summary(NamedTuple):
    """One table entry over seeds: mean, min and max."""
    mean: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.mean:.3f} ({self.low:.3f}-{self.high:.3f})"


def summary(values) -> Summary:
    """values (S,) over seeds -> Summary(mean, min, max).

    >>> str(summary([0.7, 0.8, 0.75]))
    '0.750 (0.700-0.800)'
    """
    return _summary(values, "values")


def _summary(values, name: str) -> Summary:
    """``summary`` of the values named ``name``: finite numbers, at least one (a NaN has no mean or range)."""
    v = _validate.finite_array(values, name).ravel()
    if v.size == 0:
        raise ValueError(f"{name} is empty; give one number per seed")
    with np.errstate(over="ignore"):
        mean = float(v.mean(dtype=np.float64))
    if not np.isfinite(mean):  # a sum past float64, e.g. 1e308 twice: the mean of halves fits
        mean = float((v / 2).mean(dtype=np.float64)) * 2
    return Summary(mean, float(v.min()), float(v.max()))


def separated(a, b) -> bool:
    """values of two rows over seeds (S,) each -> True when their ranges do not overlap: every seed
    of one lies above every seed of the other. Otherwise the difference is within the noise.

    >>> separated([0.9, 0.95], [0.5, 0.6]), separated([0.70, 0.79], [0.69, 0.75])
    (True, False)
    """
    a, b = _summary(a, "a"), _summary(b, "b")
    return a.low > b.high or b.low > a.high


def format_values(values: np.ndarray, names, header: str) -> str:
    """(S, M) one number per seed and model -> text: each model's mean (min-max) over seeds, under
    ``header``; whole numbers (counts, steps) without decimals.

    >>> print(format_values(np.array([[0.5, 1.0], [0.7, 1.0]]), ["a", "b"], "accuracy"))
    accuracy, mean (min-max)
    a                                                  0.600 (0.500-0.700)
    b                                                  1.000 (1.000-1.000)
    >>> print(format_values(np.array([[90], [110]]), ["steps"], "steps"))
    steps, mean (min-max)
    steps                                                        100 (90-110)
    """
    values = _validate.finite_array(values, "values") if np.asarray(values).dtype.kind not in "iu" else \
        np.asarray(values)
    names = _validate.items(list(names) if isinstance(names, dict) else names, "names", "['a', 'b']")  # a dict: its keys
    if values.ndim != 2 or 0 in values.shape or values.shape[1] != len(names):
        raise ValueError(f"values has shape {values.shape} for {len(names)} names; give (S, M) = (seeds, "
                         f"{len(names)}): one column per name, at least one seed")
    if not isinstance(header, str):
        raise TypeError(f"header must be a string, got {type(header).__name__}; pass e.g. header='accuracy'")
    whole = np.issubdtype(values.dtype, np.integer)

    def cell(i):
        s = _summary(values[:, i], f"values[:, {i}]")
        return f"{s.mean:.0f} ({s.low:.0f}-{s.high:.0f})" if whole else str(s)
    return "\n".join([f"{header}, mean (min-max)"] + [f"{name:<44}{cell(i):>25}" for i, name in enumerate(names)])
