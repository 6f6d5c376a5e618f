"""The attention block: residual connection and layer normalisation around multi-head attention.

Floor 2 (it builds on mha), numpy only. Shapes: ``B`` batch, ``T`` positions, ``D = d_model``, ``h`` heads.

- post-norm (the 2017 paper):  out = LayerNorm(x + MultiHead(x))
- pre-norm  (GPT-2 and later): out = x + MultiHead(LayerNorm(x))

The layer norm here has no learned scale and shift unless ``gamma`` / ``beta`` are given.

Taught in 04_concat_output.ipynb.
"""
from __future__ import annotations

import numbers

import numpy as np

from . import _validate
from .mha import MHAParams, Trace, trace

__all__ = ["layer_norm", "attention_block", "NORMS"]

NORMS = ("post", "pre")


def layer_norm(x, eps: float = 1e-5, gamma=None, beta=None) -> np.ndarray:
    """x (..., D) -> (..., D): each row over the last axis to mean 0 and variance 1.

    ``(x - mean) / sqrt(var + eps) * gamma + beta`` with the biased variance (as PyTorch);
    ``gamma`` and ``beta`` are (D,) or None (meaning 1 and 0). float32 stays float32.

    >>> y = layer_norm(np.array([[1.0, 2.0, 3.0, 4.0]]))
    >>> np.round(y, 4)
    array([[-1.3416, -0.4472,  0.4472,  1.3416]])
    >>> print(f"{y.mean():.4f} {y.var():.4f}")
    0.0000 1.0000
    """
    x = _validate.float_array(x, "x")
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"layer_norm needs x of shape (..., D) with D >= 1, got shape {x.shape}; "
                         "normalise an array whose last axis holds the features")
    eps = _check_eps(eps)
    D = x.shape[-1]
    gamma, beta = (_affine(v, name, D, x.dtype) for v, name in ((gamma, "gamma"), (beta, "beta")))
    mean = x.mean(axis=-1, keepdims=True)                # (..., 1)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # (..., 1), biased like torch
    y = (x - mean) / np.sqrt(var + x.dtype.type(eps))    # (..., D)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y


def _check_eps(eps) -> float:
    """eps as a float, or raise unless it is a positive finite real number."""
    if isinstance(eps, (bool, np.bool_)) or not isinstance(eps, numbers.Real) \
            or not 0 < eps < np.inf:
        raise ValueError(f"eps={eps!r} must be a positive finite number (it keeps the "
                         "division finite); use the default eps=1e-5")
    return float(eps)


def _affine(v, name: str, D: int, dtype) -> np.ndarray | None:
    """gamma or beta: None, or a real (D,) vector cast to ``dtype``."""
    if v is None:
        return None
    arr = _validate.float_array(v, name)
    if arr.shape != (D,):
        raise ValueError(f"{name} has shape {arr.shape} but x has D={D} features; "
                         f"give {name} shape ({D},) or leave it None")
    return arr.astype(dtype, copy=False)


def attention_block(x, params: MHAParams, h: int, mask=None, *,
                    norm: str = "post") -> tuple[np.ndarray, Trace]:
    """x (B, T, d_model) -> out (B, T, d_model), Trace of the attention sub-layer.

    ``norm="post"``: out = layer_norm(x + MHA(x)); ``norm="pre"``: out = x + MHA(layer_norm(x)).
    The Trace records the sub-layer (its stage ``X`` is what attention saw, ``output`` what
    it added), so ``trace["weights"]`` (B, h, T, T) are the block's attention weights.
    ``mask`` is boolean, True = may attend, broadcastable to (B, h, T, T).

    >>> from mha_course.mha import init_params
    >>> p = init_params(8, rng=np.random.default_rng(0))
    >>> x = np.random.default_rng(1).normal(size=(2, 5, 8))
    >>> out, t = attention_block(x, p, h=2)
    >>> out.shape, t.shapes["weights"]
    ((2, 5, 8), (2, 2, 5, 5))
    >>> bool(np.allclose(out, layer_norm(x + t["output"])))
    True
    """
    if norm not in NORMS:
        raise ValueError(f"norm={norm!r} is not one of {NORMS}; use 'post' (LayerNorm(x + MHA(x)), "
                         "the 2017 paper) or 'pre' (x + MHA(LayerNorm(x)), GPT-2)")
    x = _validate.float_array(x, "x")
    _validate.ndim(x, "x", 3, "(B, T, d_model)")
    _validate.nonempty(x, "x", "(B, T, d_model)")
    if norm == "post":
        t = trace(x, params, h, mask)
        return layer_norm(x + t["output"]), t  # (B, T, D) + (B, T, D) -> (B, T, D)
    t = trace(layer_norm(x), params, h, mask)
    return x + t["output"], t  # (B, T, D) + (B, T, D) -> (B, T, D)
