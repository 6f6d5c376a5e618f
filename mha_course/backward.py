"""The backward pass of multi-head attention, stage by stage (numpy only).

Shapes: ``B`` batch, ``T`` queries, ``S`` keys, ``D = d_model``, ``h`` heads,
``d_k = D // h``. Every function here takes the gradient of a loss with respect to a
stage's OUTPUT (``grad_*``) and returns the gradients with respect to that stage's inputs:
a vector-Jacobian product, the chain rule read backwards.

The forward pass is ``multi_head_attention`` itself (the package's one computation):

    Q = x W_q + b_q, K = c W_k + b_k, V = c W_v + b_v     (c = context, or x itself)
    Q_i, K_i, V_i = split_heads(Q), ...                     (B, h, T|S, d_k)
    scores = Q_i K_i^T / sqrt(d_k);  weights = softmax(scores)   (masked keys: -inf -> 0)
    concat = combine_heads(weights V_i);  out = concat W_o + b_o

and the backward pass visits the same stages in reverse. A query whose keys are all masked
has all-zero weights, so nothing flows back through it (its gradient is zero there).
In self-attention x feeds Q, K and V: its gradient is the SUM of the three paths.

Taught in 08_heads_that_learn.ipynb.
"""
from __future__ import annotations

import math

import numpy as np

from . import _validate
from .heads import combine_heads, split_heads
from .mha import MHAParams, init_params, linear, trace  # noqa: F401 (init_params: the doctests)
from .positions import apply_rope

__all__ = ["softmax_backward", "scale_backward", "split_heads_backward", "combine_heads_backward",
           "matmul_backward", "linear_backward", "attention_backward", "mha_vjp", "mha_backward"]


def _same_shape(a, b, names: str) -> tuple[np.ndarray, np.ndarray]:
    a, b = (_validate.finite_array(v, n) for v, n in zip((a, b), names.split(", ")))
    if a.shape != b.shape:
        raise ValueError(f"{names} must have the same shape, got {a.shape} and {b.shape}; "
                         "a gradient has the shape of the array it is the gradient of")
    return a, b


def softmax_backward(weights, grad_weights) -> np.ndarray:
    """weights (..., S), grad_weights (..., S) -> grad_scores (..., S), for weights = softmax(scores).

    The Jacobian of softmax is ``diag(p) - p p^T`` (it is NOT diagonal: raising one score
    lowers every other weight), so its vector product is ``p * (g - sum_j p_j g_j)``.
    Masked keys (p = 0) and fully masked rows (all p = 0) get a zero gradient.

    >>> p = np.array([0.5, 0.5, 0.0])
    >>> softmax_backward(p, np.array([1.0, 0.0, 5.0]))
    array([ 0.25, -0.25,  0.  ])
    """
    p, g = _same_shape(weights, grad_weights, "weights, grad_weights")
    return p * (g - (p * g).sum(axis=-1, keepdims=True))  # (..., S) - (..., 1)


def scale_backward(grad_scaled, d_k: int) -> np.ndarray:
    """grad_scaled (...) , d_k -> grad (...), for scaled = raw / sqrt(d_k): grad_scaled / sqrt(d_k).

    >>> scale_backward(np.array([2.0, 4.0]), d_k=4)
    array([1., 2.])
    """
    g = _validate.finite_array(grad_scaled, "grad_scaled")
    return g / math.sqrt(_validate.positive_int(d_k, "d_k"))


def split_heads_backward(grad_heads) -> np.ndarray:
    """grad_heads (B, h, T, d_k) -> grad (B, T, h * d_k), for heads = split_heads(x, h).

    split_heads only moves numbers, so its backward moves the gradients back: combine_heads.

    >>> split_heads_backward(np.zeros((2, 3, 5, 4))).shape
    (2, 5, 12)
    """
    return combine_heads(grad_heads)


def combine_heads_backward(grad_concat, h: int) -> np.ndarray:
    """grad_concat (B, T, d_model), h -> grad (B, h, T, d_k), for concat = combine_heads(heads).

    >>> combine_heads_backward(np.zeros((2, 5, 12)), h=3).shape
    (2, 3, 5, 4)
    """
    return split_heads(grad_concat, h)


def _unbroadcast(grad: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum ``grad`` over the axes that broadcasting added or stretched, down to ``shape``."""
    grad = grad.sum(axis=tuple(range(grad.ndim - len(shape)))) if grad.ndim > len(shape) else grad
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.sum(axis=stretched, keepdims=True) if stretched else grad


def matmul_backward(a, b, grad_out) -> tuple[np.ndarray, np.ndarray]:
    """a (..., N, K), b (..., K, M), grad_out (..., N, M) -> grad_a (a's shape), grad_b (b's shape).

    For out = a @ b: grad_a = grad_out @ b^T and grad_b = a^T @ grad_out (the transposes are
    what makes the shapes fit). Axes that broadcasting added are summed away.

    >>> a, b = np.ones((2, 3)), np.ones((3, 4))
    >>> ga, gb = matmul_backward(a, b, np.ones((2, 4)))
    >>> ga.shape, gb.shape, float(gb[0, 0])
    ((2, 3), (3, 4), 2.0)
    """
    a, b, g = (_validate.finite_array(v, n) for v, n in ((a, "a"), (b, "b"), (grad_out, "grad_out")))
    try:
        out_shape = np.matmul(np.empty(a.shape[-2:]), np.empty(b.shape[-2:])).shape
        want = (*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), *out_shape)
    except (ValueError, IndexError):
        raise ValueError(f"a {a.shape} and b {b.shape} cannot be matrix-multiplied; "
                         "need a (..., N, K) and b (..., K, M)") from None
    if g.shape != want:
        raise ValueError(f"grad_out has shape {g.shape} but a @ b has shape {want}; "
                         "give the gradient of the product")
    grad_a = np.matmul(g, np.swapaxes(b, -1, -2))  # (..., N, M) x (..., M, K) -> (..., N, K)
    grad_b = np.matmul(np.swapaxes(a, -1, -2), g)  # (..., K, N) x (..., N, M) -> (..., K, M)
    return _unbroadcast(grad_a, a.shape), _unbroadcast(grad_b, b.shape)


def linear_backward(x, W, grad_y, bias: bool = False):
    """x (..., D_in), W (D_in, D_out), grad_y (..., D_out) -> grad_x, grad_W, grad_b (or None).

    For y = x W (+ b): grad_x = grad_y W^T, grad_W = sum over rows of x^T grad_y,
    grad_b = sum over rows of grad_y. The rows (every batch item and position) share W.

    >>> gx, gW, gb = linear_backward(np.ones((2, 5, 3)), np.ones((3, 4)), np.ones((2, 5, 4)), bias=True)
    >>> gx.shape, gW.shape, gb.shape, float(gW[0, 0]), float(gb[0])
    ((2, 5, 3), (3, 4), (4,), 10.0, 10.0)
    """
    x, W, g = (_validate.finite_array(v, n) for v, n in ((x, "x"), (W, "W"), (grad_y, "grad_y")))
    if W.ndim != 2 or x.shape[-1] != W.shape[0] or g.shape != (*x.shape[:-1], W.shape[1]):
        raise ValueError(f"x {x.shape}, W {W.shape}, grad_y {g.shape} do not fit y = x W: "
                         "need x (..., D_in), W (D_in, D_out), grad_y (..., D_out)")
    return _linear_backward(x, W, g, _validate.flag(bias, "bias"))


def _linear_backward(x, W, g, bias: bool):
    # every batch item and position is one row: two 2-D matmuls (one BLAS call each)
    rows_x, rows_g = x.reshape(-1, W.shape[0]), g.reshape(-1, W.shape[1])  # (N, D_in), (N, D_out)
    grad_W = rows_x.T @ rows_g  # (D_in, N) x (N, D_out) -> (D_in, D_out)
    grad_b = rows_g.sum(axis=0) if bias else None
    grad_x = (rows_g @ W.T).reshape(*x.shape)  # (N, D_out) x (D_out, D_in) -> (N, D_in) -> (..., D_in)
    return grad_x, grad_W, grad_b


def attention_backward(Q, K, V, weights, grad_out):
    """Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v), weights (..., T, S), grad_out (..., T, d_v)
    -> grad_Q, grad_K, grad_V, for out, weights = scaled_dot_product_attention(Q, K, V, mask).

    ``weights`` are the forward pass's (zeros where masked), so the mask needs no second look.

    >>> import mha_course as mc
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    >>> out, w = mc.scaled_dot_product_attention(Q, K, V)
    >>> [g.shape for g in attention_backward(Q, K, V, w, np.ones_like(out))]
    [(3, 4), (5, 4), (5, 2)]
    """
    Q, K, V, w, g = (_validate.finite_array(a, n) for a, n in
                     ((Q, "Q"), (K, "K"), (V, "V"), (weights, "weights"), (grad_out, "grad_out")))
    grad_w, grad_V = matmul_backward(w, V, g)  # out = weights @ V
    grad_scores = scale_backward(softmax_backward(w, grad_w), Q.shape[-1])
    grad_Q, grad_Kt = matmul_backward(Q, np.swapaxes(K, -1, -2), grad_scores)  # raw = Q @ K^T
    return grad_Q, np.swapaxes(grad_Kt, -1, -2), grad_V


def mha_vjp(x, params: MHAParams, h: int, mask=None, context=None, *, keep=None, rope_base=None,
            rope_scaling=None, bias=None):
    """x (B, T, D) [, context (B, S, D)] -> out (B, T, D), weights (B, h, T, S), pullback.

    Runs ``multi_head_attention`` once, keeping its stages, and returns ``pullback(grad_out)
    -> (grad_x, grad_params, grad_context)``, which runs the backward pass without a second
    forward pass (what a training step wants). ``keep`` (broadcastable to (B, h, T, S)), when
    given, multiplies the weights before they meet V: dropout passes 0 or 1/(1-p) there.
    The weights returned are softmax's, before ``keep``. ``rope_base``: as in
    ``multi_head_attention`` (RoPE on the query and key heads); its backward is the inverse
    rotation, RoPE at the negated positions. ``rope_scaling``, ``bias``: as in
    ``multi_head_attention`` (a constant bias needs no gradient of its own).

    >>> p = init_params(8, rng=np.random.default_rng(0))
    >>> out, w, pullback = mha_vjp(np.ones((2, 5, 8)), p, h=4)
    >>> grad_x, grad_p, grad_c = pullback(np.ones_like(out))
    >>> grad_x.shape, grad_p.W_o.shape, grad_p.b_o, grad_c
    ((2, 5, 8), (8, 8), None, None)
    """
    t = trace(x, params, h, mask, context, rope_base, rope_scaling=rope_scaling, bias=bias)  # every stage kept
    stages, out, weights, h = {s.name: s.array for s in t}, t.output, t.weights, t.h
    p = MHAParams(*(None if a is None else np.asarray(a, dtype=out.dtype) for a in params))
    ctx = None if context is None else np.asarray(context, dtype=out.dtype)
    if keep is not None:
        keep = _check_keep(keep, weights.shape, out.dtype)
        stages["concat"] = combine_heads((weights * keep) @ stages["V_heads"])  # (B, T, D)
        out = linear(stages["concat"], p.W_o, p.b_o)

    def pullback(grad_out):
        g = _validate.finite_array(grad_out, "grad_out")
        if g.shape != out.shape:
            raise ValueError(f"grad_out has shape {g.shape} but the output has shape {out.shape}; "
                             "give d loss / d out, one number per output entry")
        return _pullback(stages, p, h, g.astype(out.dtype, copy=False), ctx, keep, rope_base, rope_scaling)
    return out, weights, pullback


def _check_keep(keep, shape: tuple, dtype) -> np.ndarray:
    keep = _validate.finite_array(keep, "keep")
    try:
        if np.broadcast_shapes(keep.shape, shape) == shape:
            return keep.astype(dtype, copy=False)
    except ValueError:
        pass
    raise ValueError(f"keep has shape {keep.shape}, which does not broadcast to the weights' shape "
                     f"{shape} (B, h, T, S); give one factor per weight, e.g. rng.random(shape) > p")


def _heads_backward(st: dict, g_heads: np.ndarray, keep, rope_base=None, rope_scaling=None):
    """grad of the head outputs (B, h, T, d_k) -> grads of Q_heads, K_heads, V_heads (before RoPE)."""
    w, V = st["weights"], st["V_heads"]
    g_w = g_heads @ np.swapaxes(V, -1, -2)  # (B, h, T, d_k) x (B, h, d_k, S) -> (B, h, T, S)
    used = w if keep is None else w * keep  # what multiplied V in the forward pass
    g_Vh = np.swapaxes(used, -1, -2) @ g_heads  # (B, h, S, T) x (B, h, T, d_k) -> (B, h, S, d_k)
    if keep is not None:
        g_w *= keep
    g_raw = softmax_backward(w, g_w) / math.sqrt(V.shape[-1])  # (B, h, T, S), the 1/sqrt(d_k) scale
    Qh, Kh = (st["Q_rope"], st["K_rope"]) if rope_base is not None else (st["Q_heads"], st["K_heads"])
    g_Qh = g_raw @ Kh  # (B, h, T, S) x (B, h, S, d_k) -> (B, h, T, d_k)
    g_Kh = np.swapaxes(g_raw, -1, -2) @ Qh  # (B, h, S, T) x (B, h, T, d_k) -> (B, h, S, d_k)
    if rope_base is not None:  # a rotation's backward is the rotation back: RoPE at -positions
        g_Qh, g_Kh = (apply_rope(g, -np.arange(g.shape[-2]), base=rope_base, scaling=rope_scaling)
                      for g in (g_Qh, g_Kh))
    return g_Qh, g_Kh, g_Vh


def _pullback(st: dict, p: MHAParams, h: int, g_out: np.ndarray, context, keep=None, rope_base=None,
              rope_scaling=None):
    """The backward pass over the recorded stages ``st`` (see the module docstring)."""
    x, c = st["X"], st["X"] if context is None else context
    g_concat, gW_o, gb_o = _linear_backward(st["concat"], p.W_o, g_out, p.b_o is not None)
    g_Qh, g_Kh, g_Vh = _heads_backward(st, split_heads(g_concat, h), keep, rope_base, rope_scaling)  # split
    grads = [_linear_backward(inp, W, combine_heads(gh), b is not None)  # split_heads backward: combine
             for inp, W, b, gh in ((x, p.W_q, p.b_q, g_Qh), (c, p.W_k, p.b_k, g_Kh), (c, p.W_v, p.b_v, g_Vh))]
    (g_x, gW_q, gb_q), (g_ck, gW_k, gb_k), (g_cv, gW_v, gb_v) = grads
    g_ctx = g_ck + g_cv  # K and V both read the context: their gradients add
    grad_params = MHAParams(gW_q, gW_k, gW_v, gW_o, gb_q, gb_k, gb_v, gb_o)
    if context is None:
        return g_x + g_ctx, grad_params, None  # self-attention: x fed Q, K and V
    return g_x, grad_params, g_ctx


def mha_backward(x, params: MHAParams, h: int, grad_out, mask=None, context=None, *, rope_base=None):
    """x (B, T, D), grad_out (B, T, D) [, context (B, S, D)] -> grad_x, grad_params, grad_context.

    The gradients of ``sum(grad_out * multi_head_attention(x, params, h, mask, context)[0])``
    with respect to x (B, T, D), to the parameters (an MHAParams of gradients; None where
    ``params`` has no bias) and to the context (B, S, D) (None in self-attention, where K and
    V come from x and their gradients are added into grad_x). ``rope_base``: as in
    ``multi_head_attention``.

    >>> p = init_params(8, rng=np.random.default_rng(0), bias=True)
    >>> gx, gp, gc = mha_backward(np.ones((2, 5, 8)), p, 4, np.ones((2, 5, 8)))
    >>> gx.shape, gp.b_q.shape, gc
    ((2, 5, 8), (8,), None)
    """
    return mha_vjp(x, params, h, mask, context, rope_base=rope_base)[2](grad_out)
