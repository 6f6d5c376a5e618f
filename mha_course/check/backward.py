"""Checkers for notebook 08: the backward pass, stage by stage, and one Adam step.

``softmax_backward``, ``scale_backward``, ``split_heads_backward``, ``matmul_backward``,
``shared_input_backward`` (K and V read the same input) and ``adam_step``. The cases vary every
size (and d_k, h, the step number); the mistakes are the ones learners make: the softmax
Jacobian applied as if it were diagonal, the missing transpose in a matmul gradient, the
gradients of a shared K and V not summed, Adam without bias correction.
"""
from __future__ import annotations

import math

import numpy as np

from ..attention import softmax as _softmax
from ..backward import matmul_backward as _matmul_backward
from ..backward import scale_backward as _scale_backward
from ..backward import softmax_backward as _softmax_backward
from ..backward import split_heads_backward as _split_heads_backward
from ..lessons.model import AdamState
from ..lessons.model import adam_step as _adam_step
from .engine import Case, Exercise, Mistake

__all__ = ["softmax_backward", "scale_backward", "split_heads_backward", "matmul_backward",
           "shared_input_backward", "adam_step", "SOFTMAX_BACKWARD", "SCALE_BACKWARD",
           "SPLIT_HEADS_BACKWARD", "MATMUL_BACKWARD", "SHARED_INPUT_BACKWARD", "ADAM_STEP"]


def _weights(rng, shape, masked=False):
    """Softmax rows of shape (..., S); with ``masked``, some zero weights and one all-zero row."""
    z = rng.normal(size=shape) * 2
    if masked:
        z[rng.random(shape) < 0.3] = -np.inf
        z[(0,) * (len(shape) - 1)] = -np.inf  # one fully masked row: all weights 0
    return _softmax(z)


# ---------------------------------------------------------------------------------------
# softmax
# ---------------------------------------------------------------------------------------

def _softmax_cases():
    rng = np.random.default_rng(20240801)
    shapes = [((4,), False), ((3, 5), False), ((2, 3, 6), True), ((2, 2, 4, 3), True)]
    return [Case((_weights(rng, s, m), rng.normal(size=s)), f"weights {s}" + (", masked" if m else ""))
            for s, m in shapes]


_SOFTMAX_MISTAKES = (
    Mistake("the softmax Jacobian applied as if it were diagonal (p (1 - p) g): raising one score "
            "also lowers every other weight", "grad_scores = p * (g - (p * g).sum(-1, keepdims=True))",
            lambda p, g: p * (1 - p) * g),
    Mistake("only the diag(p) part of the Jacobian diag(p) - p p^T (p * g)",
            "subtract the weighted mean: p * (g - (p * g).sum(-1, keepdims=True))", lambda p, g: p * g),
    Mistake("the subtracted sum is taken without weighting by p (g - sum(g))",
            "the sum is weighted by the weights: (p * g).sum(-1, keepdims=True)",
            lambda p, g: p * (g - g.sum(-1, keepdims=True))),
    Mistake("the weighted sum is not kept as a column (keepdims missing), so it broadcasts along the wrong axis",
            "(p * g).sum(axis=-1, keepdims=True) has shape (..., 1)",
            lambda p, g: p * (g - (p * g).sum(-1))),
)
SOFTMAX_BACKWARD = Exercise("softmax_backward", _softmax_backward, _softmax_cases, _SOFTMAX_MISTAKES)


def softmax_backward(fn) -> bool:
    """Check ``fn(weights, grad_weights)``: (..., S), (..., S) -> grad_scores (..., S).

    >>> import mha_course.backward as bw
    >>> softmax_backward(bw.softmax_backward)
    ✔ softmax_backward: all 4 cases match
    True
    """
    return SOFTMAX_BACKWARD.check(fn)


# ---------------------------------------------------------------------------------------
# the scale
# ---------------------------------------------------------------------------------------

def _scale_cases():
    rng = np.random.default_rng(20240802)
    return [Case((rng.normal(size=s), d_k), f"d_k={d_k}") for s, d_k in (((3, 4), 4), ((2, 5, 5), 16),
                                                                          ((4,), 9), ((2, 3, 2, 2), 64))]


_SCALE_MISTAKES = (
    Mistake("multiplied by sqrt(d_k) instead of divided", "the forward divides by sqrt(d_k), so the "
            "backward does too: grad_scaled / np.sqrt(d_k)", lambda g, d_k: g * math.sqrt(d_k)),
    Mistake("divided by d_k instead of sqrt(d_k)", "grad_scaled / np.sqrt(d_k)", lambda g, d_k: g / d_k),
    Mistake("the gradient passed through unscaled", "a constant factor in the forward pass is the same "
            "factor in the backward pass: grad_scaled / np.sqrt(d_k)", lambda g, d_k: g + 0.0),
)
SCALE_BACKWARD = Exercise("scale_backward", _scale_backward, _scale_cases, _SCALE_MISTAKES)


def scale_backward(fn) -> bool:
    """Check ``fn(grad_scaled, d_k)``: grad (...) -> grad (...), for scaled = raw / sqrt(d_k).

    >>> import mha_course.backward as bw
    >>> scale_backward(bw.scale_backward)
    ✔ scale_backward: all 4 cases match
    True
    """
    return SCALE_BACKWARD.check(fn)


# ---------------------------------------------------------------------------------------
# split_heads
# ---------------------------------------------------------------------------------------

def _split_backward_cases():
    rng = np.random.default_rng(20240803)
    return [Case((rng.normal(size=s),), f"(B, h, T, d_k) = {s}") for s in ((2, 3, 5, 4), (1, 2, 3, 6),
                                                                             (3, 4, 2, 2), (2, 6, 4, 3))]


def _no_transpose(g):
    B, h, T, d_k = g.shape
    return g.reshape(B, T, h * d_k)  # mixes heads into positions


def _dk_major(g):
    B, h, T, d_k = g.shape
    return g.transpose(0, 2, 3, 1).reshape(B, T, h * d_k)  # feature-major: head i at every h-th column


_SPLIT_BACKWARD_MISTAKES = (
    Mistake("reshaped straight to (B, T, d_model) without moving the head axis back (heads mixed "
            "into positions)", "g.transpose(0, 2, 1, 3).reshape(B, T, h * d_k): the inverse of split_heads",
            _no_transpose),
    Mistake("transposed to (B, T, d_k, h) before the reshape: head i's gradient lands in every h-th "
            "feature, not in its own slice", "g.transpose(0, 2, 1, 3).reshape(B, T, h * d_k)", _dk_major),
)
SPLIT_HEADS_BACKWARD = Exercise("split_heads_backward", _split_heads_backward, _split_backward_cases,
                                _SPLIT_BACKWARD_MISTAKES)


def split_heads_backward(fn) -> bool:
    """Check ``fn(grad_heads)``: (B, h, T, d_k) -> (B, T, h * d_k), for heads = split_heads(x, h).

    >>> import mha_course.backward as bw
    >>> split_heads_backward(bw.split_heads_backward)
    ✔ split_heads_backward: all 4 cases match
    True
    """
    return SPLIT_HEADS_BACKWARD.check(fn)


# ---------------------------------------------------------------------------------------
# matmul
# ---------------------------------------------------------------------------------------

def _matmul_cases():
    rng = np.random.default_rng(20240804)
    sizes = ((3, 4, 5), (3, 3, 5), (4, 2, 2), (2, 6, 3))  # (N, K, M): K == N in one, K == M in another
    return [Case((rng.normal(size=(n, k)), rng.normal(size=(k, m)), rng.normal(size=(n, m))),
                 f"a ({n}, {k}) @ b ({k}, {m})") for n, k, m in sizes]


_FIX_MATMUL = "grad_a = grad_out @ b.T and grad_b = a.T @ grad_out (the shapes tell where the transposes go)"
_MATMUL_MISTAKES = (
    Mistake("a missing transpose in grad_b (a @ grad_out instead of a.T @ grad_out)", _FIX_MATMUL,
            lambda a, b, g: (g @ b.T, a @ g)),
    Mistake("a missing transpose in grad_a (grad_out @ b instead of grad_out @ b.T)", _FIX_MATMUL,
            lambda a, b, g: (g @ b, a.T @ g)),
    Mistake("the factors in the wrong order: grad_b = grad_out.T @ a, which is grad_b transposed",
            _FIX_MATMUL, lambda a, b, g: (g @ b.T, g.T @ a)),
    Mistake("the two gradients returned in the wrong order (grad_b, grad_a)", "return grad_a, grad_b",
            lambda a, b, g: (a.T @ g, g @ b.T)),
)
MATMUL_BACKWARD = Exercise("matmul_backward", lambda a, b, g: _matmul_backward(a, b, g), _matmul_cases,
                           _MATMUL_MISTAKES, outputs=("grad_a", "grad_b"))


def matmul_backward(fn) -> bool:
    """Check ``fn(a, b, grad_out)``: a (N, K), b (K, M), grad_out (N, M) -> grad_a (N, K), grad_b (K, M).

    >>> import mha_course.backward as bw
    >>> matmul_backward(bw.matmul_backward)
    ✔ matmul_backward: all 4 cases match
    True
    """
    return MATMUL_BACKWARD.check(fn)


# ---------------------------------------------------------------------------------------
# a shared input: K and V both read the context
# ---------------------------------------------------------------------------------------

def _shared_reference(c, W_k, W_v, grad_K, grad_V):
    return grad_K @ W_k.T + grad_V @ W_v.T  # (B, S, D): both paths add up


def _shared_cases():
    rng = np.random.default_rng(20240805)
    out = []
    for B, S, D in ((2, 3, 4), (1, 5, 6), (3, 2, 8), (2, 4, 2)):
        out.append(Case((rng.normal(size=(B, S, D)), rng.normal(size=(D, D)), rng.normal(size=(D, D)),
                         rng.normal(size=(B, S, D)), rng.normal(size=(B, S, D))), f"B={B}, S={S}, D={D}"))
    return out


_FIX_SHARED = "K = c W_k and V = c W_v both read c, so grad_c = grad_K @ W_k.T + grad_V @ W_v.T"
_SHARED_MISTAKES = (
    Mistake("only the K path: the gradients of the shared K and V are not summed", _FIX_SHARED,
            lambda c, W_k, W_v, gK, gV: gK @ W_k.T),
    Mistake("only the V path: the gradients of the shared K and V are not summed", _FIX_SHARED,
            lambda c, W_k, W_v, gK, gV: gV @ W_v.T),
    Mistake("the two paths averaged instead of summed", _FIX_SHARED,
            lambda c, W_k, W_v, gK, gV: (gK @ W_k.T + gV @ W_v.T) / 2),
    Mistake("a missing transpose of W_k and W_v (grad_K @ W_k)", _FIX_SHARED,
            lambda c, W_k, W_v, gK, gV: gK @ W_k + gV @ W_v),
)
SHARED_INPUT_BACKWARD = Exercise("shared_input_backward", _shared_reference, _shared_cases, _SHARED_MISTAKES)


def shared_input_backward(fn) -> bool:
    """Check ``fn(c, W_k, W_v, grad_K, grad_V)``: -> grad_c (B, S, D), for K = c W_k, V = c W_v.

    >>> shared_input_backward(lambda c, W_k, W_v, gK, gV: gK @ W_k.T + gV @ W_v.T)
    ✔ shared_input_backward: all 4 cases match
    True
    """
    return SHARED_INPUT_BACKWARD.check(fn)


# ---------------------------------------------------------------------------------------
# Adam
# ---------------------------------------------------------------------------------------

def _adam_reference(p, g, m, v, t, lr):
    """One Adam step on arrays: t is the number of this step (1 for the first) -> (p, m, v)."""
    new, state = _adam_step(p, g, AdamState(m, v, t - 1), lr)
    return new, state.m, state.v


def _adam_cases():
    rng = np.random.default_rng(20240806)
    out = []
    for shape, t, lr in (((3,), 1, 0.1), ((2, 4), 2, 0.01), ((5,), 10, 0.001), ((3, 3), 100, 0.05)):
        m, v = rng.normal(size=shape) * 0.1 * (t > 1), rng.random(shape) * 0.01 * (t > 1)
        out.append(Case((rng.normal(size=shape), rng.normal(size=shape), m, v, t, lr), f"step t={t}, lr={lr}"))
    return out


def _adam_variant(p, g, m, v, t, lr, correct=True, sgd=False, no_sqrt=False, b1=0.9, b2=0.999):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    m_hat, v_hat = (m / (1 - b1 ** t), v / (1 - b2 ** t)) if correct else (m, v)
    step = g if sgd else m_hat / ((v_hat if no_sqrt else np.sqrt(v_hat)) + 1e-8)
    return p - lr * step, m, v


_FIX_ADAM = "m_hat = m / (1 - b1 ** t), v_hat = v / (1 - b2 ** t); p - lr * m_hat / (np.sqrt(v_hat) + eps)"
_ADAM_MISTAKES = (
    Mistake("Adam without bias correction: early steps are far too small (m and v start at 0)",
            _FIX_ADAM, lambda *a: _adam_variant(*a, correct=False)),
    Mistake("v_hat used without its square root", _FIX_ADAM, lambda *a: _adam_variant(*a, no_sqrt=True)),
    Mistake("plain gradient descent (p - lr * g): the moments are computed but not used", _FIX_ADAM,
            lambda *a: _adam_variant(*a, sgd=True)),
    Mistake("b1 and b2 swapped (m decays with 0.999, v with 0.9)", "m uses b1 = 0.9, v uses b2 = 0.999",
            lambda *a: _adam_variant(*a, b1=0.999, b2=0.9)),
)
ADAM_STEP = Exercise("adam_step", _adam_reference, _adam_cases, _ADAM_MISTAKES, outputs=("p", "m", "v"))


def adam_step(fn) -> bool:
    """Check ``fn(p, g, m, v, t, lr)`` -> (p, m, v): one Adam step (b1=0.9, b2=0.999, eps=1e-8), t >= 1.

    >>> adam_step(_adam_reference)
    ✔ adam_step: all 4 cases match
    True
    """
    return ADAM_STEP.check(fn)
