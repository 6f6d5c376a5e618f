"""Softmax, masks and scaled dot-product attention (numpy only).

Shapes: ``T`` queries, ``S`` keys, ``d_k`` query/key size, ``d_v`` value size,
``...`` any batch axes (for example ``(B, h)``).

Mask convention of the whole course: a boolean array, **True = may attend**
(as in ``torch.nn.functional.scaled_dot_product_attention``; the opposite of
``torch.nn.MultiheadAttention``'s ``attn_mask``, where True = blocked).

Taught in 02_scaled_dot_product.ipynb.
"""
from __future__ import annotations

import math

import numpy as np

from . import _validate
from .masks import causal_mask  # the one builder of causal masks (masks.py), here for the textbook

__all__ = ["softmax", "scaled_dot_product_attention", "attend", "attention_scores", "causal_mask", "padding_mask",
           "check_attention_inputs"]


def softmax(x, axis: int = -1) -> np.ndarray:
    """x (...) -> same shape; entries along ``axis`` are >= 0 and sum to 1.

    NaN logits are refused (a ValueError naming the first), as attention refuses NaN input.
    Numerically stable: the row maximum is subtracted before ``exp``, so logits of
    1e4 do not overflow. A row that is all ``-inf`` (every key masked) becomes all zeros
    instead of NaN. A row with +inf logits gets the limit: its +inf entries share the weight
    equally, the others get 0. float32 stays float32, float16 is computed in float32;
    integers are promoted to float64.

    >>> softmax(np.array([1000.0, 1000.0, -np.inf]))
    array([0.5, 0.5, 0. ])
    >>> softmax(np.array([np.inf, 1.0, 2.0]))
    array([1., 0., 0.])
    """
    x = _validate.logits(x, axis)
    m = x.max(axis=axis, keepdims=True)
    if np.isposinf(m).any():  # the limit: a row's +inf logits share its weight equally, the rest get 0
        x = np.where(np.isposinf(m), np.where(np.isposinf(x), 0.0, -np.inf), x)
        m = np.where(np.isposinf(m), 0.0, m)
    e = np.exp(x - np.where(np.isfinite(m), m, 0))  # shifted by the row max; all -inf rows: exp(-inf) = 0
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total == 0, 1, total)  # all-masked rows stay all-zero


def scaled_dot_product_attention(Q, K, V, mask=None, bias=None):
    """Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v) -> out (..., T, d_v), weights (..., T, S).

    weights = softmax(Q K^T / sqrt(d_k)) over the keys, out = weights V.
    ``mask`` is boolean, **True = may attend**, broadcastable to (..., T, S). A query
    whose keys are all masked gets all-zero weights and a zero output (no NaN). Q, K and V
    must be finite: a NaN even at a masked key would spread (0 * NaN), so it is refused.
    ``bias`` (broadcastable to (..., T, S)) is added to the scores before the mask: ALiBi's
    distance penalty (``positions.alibi_bias``). This is the textbook version; ``fast.fast_attention`` computes the same faster.

    >>> rng = np.random.default_rng(0)
    >>> out, w = scaled_dot_product_attention(rng.normal(size=(3, 4)), rng.normal(size=(5, 4)),
    ...                                       rng.normal(size=(5, 2)))
    >>> out.shape, w.shape, bool(np.allclose(w.sum(-1), 1))
    ((3, 2), (3, 5), True)
    """
    Q, K, V, mask = check_attention_inputs(Q, K, V, mask)
    bias = None if bias is None else _validate.score_bias(bias, (*Q.shape[:-1], K.shape[-2]), Q.dtype)
    return attend(Q, K, V, mask, bias)


def attend(Q, K, V, mask=None, bias=None, scores=None):
    """Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v) -> out (..., T, d_v), weights (..., T, S), unchecked:
    ``scaled_dot_product_attention`` on checked inputs; ``scores`` (..., T, S), if given, receives the scores."""
    s = attention_scores(Q, K, mask, bias)  # (..., T, S), -inf where masked
    if scores is not None:
        scores[...] = s
    weights = softmax(s, axis=-1)  # (..., T, S)
    return weights @ V, weights  # (..., T, S) x (..., S, d_v) -> (..., T, d_v)


def attention_scores(Q, K, mask=None, bias=None) -> np.ndarray:
    """Q (..., T, d_k), K (..., S, d_k) -> scores (..., T, S) = Q K^T / sqrt(d_k) (+ bias), -inf where masked.

    The logits that ``scaled_dot_product_attention`` feeds to the softmax (inputs as it checks them).

    >>> attention_scores(np.ones((1, 4)), np.ones((2, 4)), mask=np.array([True, False]))
    array([[  2., -inf]])
    """
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])  # (..., T, d_k) x (..., d_k, S) -> (..., T, S)
    scores = scores if bias is None else scores + bias  # an additive position bias, e.g. ALiBi's
    return scores if mask is None else np.where(mask, scores, -np.inf)  # True = may attend


def check_attention_inputs(Q, K, V, mask=None):
    """The argument checks of attention: Q, K, V as arrays of one float dtype, mask as bool or None.

    Q is broadcast over every batch axis of Q, K and V, so the weights have the full batch
    shape (..., T, S). Raises ValueError naming the shapes and the fix.
    """
    Q, K, V = (_validate.finite_array(a, n) for a, n in ((Q, "Q"), (K, "K"), (V, "V")))  # NaN would spread
    shapes = f"Q {Q.shape}, K {K.shape}, V {V.shape}"
    if min(Q.ndim, K.ndim, V.ndim) < 2:
        raise ValueError(f"Q, K and V need at least 2 dims (..., seq, features); got {shapes}")
    for a, n in ((Q, "Q"), (K, "K"), (V, "V")):
        _validate.nonempty(a, n, "(..., seq, features)")
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(f"Q and K must share their last dim d_k; got {shapes}; "
                         "project queries and keys to the same size")
    if K.shape[-2] != V.shape[-2]:
        raise ValueError(f"K and V must have the same number of keys S (axis -2); got {shapes}; "
                         "every key needs exactly one value")
    try:
        batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    except ValueError:
        raise ValueError(f"the batch axes of Q, K and V do not broadcast; got {shapes}") from None
    dtype = np.result_type(Q, K, V)
    if mask is not None:
        mask = _validate.bool_mask(mask, (*batch, Q.shape[-2], K.shape[-2]), "(..., T, S)")
    Q = np.broadcast_to(Q, (*batch, *Q.shape[-2:]))  # a view: copies nothing
    return Q.astype(dtype, copy=False), K.astype(dtype, copy=False), V.astype(dtype, copy=False), mask


def padding_mask(lengths, S: int) -> np.ndarray:
    """lengths (B,) ints in 0..S, S -> (B, 1, 1, S) bool, True for real (non-padding) keys.

    Broadcasts against scores of shape (B, h, T, S). True = may attend.

    >>> padding_mask([2, 3], 3)[:, 0, 0].astype(int)
    array([[1, 1, 0],
           [1, 1, 1]])
    """
    S = _validate.positive_int(S, "S")
    arr = _validate.lengths(lengths, S)  # (B,) whole numbers in 0..S
    return (np.arange(S) < arr[:, None].astype(int))[:, None, None, :]  # (B, 1, 1, S)
