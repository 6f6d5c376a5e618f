"""Splitting d_model into h heads and putting them back together (numpy only).

Shapes: ``B`` batch, ``T`` positions, ``h`` heads, ``d_k = d_model // h``.

Taught in 03_multi_head_split.ipynb.
"""
from __future__ import annotations

import numpy as np

from . import _validate
from ._validate import MAX_D_MODEL  # noqa: F401 (the bound valid_heads documents)

__all__ = ["split_heads", "combine_heads", "split", "combine", "valid_heads", "nearest_valid_h", "MAX_D_MODEL"]



def valid_heads(d_model: int) -> list[int]:
    """d_model -> every h that divides it, smallest first (the values an h slider may take).

    The divisors pair up as (d, d_model // d) with d <= sqrt(d_model): sqrt(d_model) trials. A d_model
    above ``MAX_D_MODEL`` (2**40, far past any model width) is refused rather than searched.

    >>> valid_heads(12)
    [1, 2, 3, 4, 6, 12]
    """
    return _validate.divisors(_validate.positive_int(d_model, "d_model"), "d_model")


def nearest_valid_h(d_model: int, h: int) -> int:
    """d_model, h -> the divisor of d_model closest to h (the larger one on a tie).

    What an h control jumps to when d_model changes, so h always divides d_model.

    >>> nearest_valid_h(12, 5), nearest_valid_h(16, 3), nearest_valid_h(10, 4)
    (6, 4, 5)
    """
    h = _validate.positive_int(h, "h")
    return min(valid_heads(d_model), key=lambda d: (abs(d - h), -d))


def split_heads(x, h: int) -> np.ndarray:
    """x (B, T, d_model) -> (B, h, T, d_k) with d_k = d_model // h.

    Head i gets features ``i*d_k:(i+1)*d_k`` of every position. The transpose matters:
    reshaping straight to (B, h, T, d_k) would mix positions into heads. The result is a view
    of ``x`` (no copy, as torch's ``view``/``transpose``): writing into it writes into ``x``;
    take ``.copy()`` to own it.

    >>> split_heads(np.zeros((2, 5, 12)), 3).shape
    (2, 3, 5, 4)
    """
    x = _validate.float_array(x, "x")
    _validate.ndim(x, "x", 3, "(B, T, d_model)")
    return split(x, _validate.heads(x.shape[2], h))


def split(x: np.ndarray, h: int) -> np.ndarray:
    """``split_heads`` on a (B, T, d_model) float array and a valid h (the pipeline's path: only the
    shape and h are checked, no pass over the values)."""
    if getattr(x, "ndim", None) != 3:
        raise ValueError(f"x must be a (B, T, d_model) array, got shape {np.shape(x)}; split_heads checks any input")
    B, T, d_model = x.shape
    h = _validate.heads(d_model, h)  # a ValueError listing the valid h, not numpy's reshape message
    return x.reshape(B, T, h, d_model // h).transpose(0, 2, 1, 3)  # (B, T, h, d_k) -> (B, h, T, d_k)


def combine_heads(x) -> np.ndarray:
    """x (B, h, T, d_k) -> (B, T, h * d_k): the inverse of ``split_heads``.

    Like ``reshape``, it returns a view of ``x`` when it can (always when ``x`` came from
    ``split_heads``) and a new array otherwise; take ``.copy()`` before writing into it.

    >>> x = np.arange(24.0).reshape(1, 2, 3, 4)
    >>> bool(np.array_equal(split_heads(combine_heads(x), 2), x))
    True
    """
    x = _validate.float_array(x, "x")
    _validate.ndim(x, "x", 4, "(B, h, T, d_k)")
    return combine(x)


def combine(x: np.ndarray) -> np.ndarray:
    """``combine_heads`` on a checked (B, h, T, d_k) float array (the pipeline's path)."""
    B, h, T, d_k = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, T, h * d_k)  # (B, T, h, d_k) -> (B, T, h*d_k)
