"""Argument checks shared by the public functions (floor 0, numpy only).

Every check raises ``ValueError`` whose message names the offending values
and says how to fix them. The public functions call these at their boundary;
nothing inside the computation re-checks.
"""
from __future__ import annotations

import numbers

import numpy as np


def divisors(n: int) -> list[int]:
    """All positive divisors of ``n`` in increasing order.

    >>> divisors(12)
    [1, 2, 3, 4, 6, 12]
    """
    return [d for d in range(1, n + 1) if n % d == 0]


def positive_int(value, name: str) -> int:
    """Return ``value`` as an int, or raise if it is not an integer >= 1."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(
            f"{name}={value!r} must be a positive integer (got {type(value).__name__}); "
            f"pass a whole number such as {name}=4"
        )
    if value < 1:
        raise ValueError(f"{name}={value} must be >= 1; pass a positive whole number")
    return int(value)


def heads(d_model: int, h) -> int:
    """Check that ``h`` is a positive integer dividing ``d_model``; return it as int."""
    h = positive_int(h, "h")
    if d_model % h:
        valid = ", ".join(str(d) for d in divisors(d_model))
        raise ValueError(f"d_model={d_model} is not divisible by h={h}; valid h: {valid}")
    return h


def float_array(x, name: str) -> np.ndarray:
    """``x`` as a floating-point array; float32/float64 kept, anything else -> float64."""
    try:
        arr = np.asarray(x)
    except ValueError:
        raise ValueError(f"{name} is not a rectangular array (ragged nested lists?); "
                         "give every row the same length") from None
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise ValueError(f"{name} must be a numeric array, got {type(x).__name__} with dtype {arr.dtype}; "
                         "pass a numpy array of floats")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(f"{name} must be real, got dtype {arr.dtype}")
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    return arr


def ndim(arr: np.ndarray, name: str, n: int, layout: str) -> None:
    """Raise unless ``arr`` has exactly ``n`` dimensions (``layout`` names them)."""
    if arr.ndim != n:
        raise ValueError(
            f"{name} must be {n}-D {layout}, got shape {arr.shape}; "
            + (f"add a batch axis with {name}[None]" if arr.ndim == n - 1 else f"reshape it to {layout}")
        )


def nonempty(arr: np.ndarray, name: str, axes: str) -> None:
    """Raise if any axis of ``arr`` has length 0."""
    if 0 in arr.shape:
        raise ValueError(
            f"{name} has an empty axis, shape {arr.shape} {axes}; "
            "attention needs at least one query, one key and one feature"
        )


def bool_mask(mask, target: tuple[int, ...], target_names: str) -> np.ndarray:
    """Check that ``mask`` is boolean and broadcasts to ``target``; return it as an array.

    Convention of the whole course: True = may attend.
    """
    arr = np.asarray(mask)
    if arr.dtype != np.bool_:
        raise ValueError(
            f"mask must be boolean (True = may attend), got dtype {arr.dtype} with shape {arr.shape}; "
            "convert it with mask.astype(bool), or build it with causal_mask / padding_mask"
        )
    try:
        np.broadcast_shapes(arr.shape, target)
        if np.broadcast_shapes(arr.shape, target) != tuple(target):
            raise ValueError
    except ValueError:
        raise ValueError(
            f"mask of shape {arr.shape} does not broadcast to the scores' shape {tuple(target)} "
            f"{target_names}; give it shape (T, S), (B, 1, T, S) or (B, 1, 1, S)"
        ) from None
    return arr
