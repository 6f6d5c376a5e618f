"""Checkers for notebook 08: the backward pass, stage by stage, and one Adam step.

``softmax_backward``, ``scale_backward``, ``split_heads_backward``, ``matmul_backward``,
``shared_input_backward`` (K and V read the same input) and ``adam_step``. The cases vary every
size (and d_k, h, the step number); the mistakes are the ones learners make: the softmax
Jacobian applied as if it were diagonal, the missing transpose in a matmul gradient, the
gradients of a shared K and V not summed, Adam without bias correction (whose early steps
are too large, not too small), eps inside the square root. A scale nobody catalogued is named
in symbols (sqrt(d_k), d_k, 2); a wrong head of the split backward is named by head.
"""
from __future__ import annotations

import math

import numpy as np

from ..attention import softmax as _softmax
from ..backward import matmul_backward as _matmul_backward
from ..backward import scale_backward as _scale_backward
from ..backward import softmax_backward as _softmax_backward
from ..backward import split_heads_backward as _split_heads_backward
from ..lessons.training import AdamState
from ..lessons.training import adam_step as _adam_step
from .engine import Case, Exercise, Mistake
from .masks import call_timed, check_with_closer_look

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
    shapes = [((4,), False), ((3, 5), False), ((5, 5), False), ((2, 3, 6), True), ((2, 2, 4, 3), True), ((6, 2), False)]
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
    Mistake("the weighted sum taken over the wrong axis (axis=-2, the queries): each row must subtract its own",
            "(p * g).sum(axis=-1, keepdims=True): the sum runs over the keys of one row",
            lambda p, g: p * (g - (p * g).sum(-2, keepdims=True)) if np.ndim(p) > 1 else p * (g - (p * g).sum())),
    Mistake("the weighted sum taken over every axis at once ((p * g).sum() without an axis)",
            "(p * g).sum(axis=-1, keepdims=True): one sum per row", lambda p, g: p * (g - (p * g).sum())),
    Mistake("the plain mean of g subtracted (g - g.mean(...)), not its p-weighted sum",
            "weight by p: p * (g - (p * g).sum(-1, keepdims=True))", lambda p, g: p * (g - g.mean(-1, keepdims=True))),
    Mistake("the softmax applied to p again: p is already the weights (the softmax's output), not scores",
            "use p as given: p * (g - (p * g).sum(-1, keepdims=True))",
            lambda p, g: _softmax_backward(_softmax(p), g)),
    Mistake("the weighted mean instead of the weighted sum", "(p * g).sum(axis=-1, keepdims=True), not .mean",
            lambda p, g: p * (g - (p * g).mean(-1, keepdims=True))),
    Mistake("the leading p is missing: g - (p * g).sum(...), the Jacobian's p_i factor dropped",
            "multiply by p: p * (g - (p * g).sum(-1, keepdims=True))",
            lambda p, g: g - (p * g).sum(-1, keepdims=True)),
    Mistake("the sign flipped: p * ((p * g).sum(...) - g), the Jacobian taken as p pᵀ - diag(p)",
            "J = diag(p) - p pᵀ, so grad = p * (g - (p * g).sum(-1, keepdims=True))",
            lambda p, g: p * ((p * g).sum(-1, keepdims=True) - g)),
    Mistake("the weighted sum over axis=1 (right only for 2-D weights): the keys are the LAST axis, whatever "
            "the batch axes", "(p * g).sum(axis=-1, keepdims=True)",
            lambda p, g: p * (g - (p * g).sum(axis=1, keepdims=True))),
    Mistake("the backward of log-softmax, g - p * sum(g), where the softmax's p * (g - sum(p * g)) belongs: "
            "log-softmax's Jacobian is I - 1 p^T, the softmax's diag(p) - p p^T",
            "p * (g - (p * g).sum(-1, keepdims=True))", lambda p, g: g - p * g.sum(-1, keepdims=True)),
)
SOFTMAX_BACKWARD = Exercise("softmax_backward", _softmax_backward, _softmax_cases, _SOFTMAX_MISTAKES)


def softmax_backward(fn) -> bool:
    """Check ``fn(weights, grad_weights)``: (..., S), (..., S) -> grad_scores (..., S).

    >>> import mha_course.backward as bw
    >>> softmax_backward(bw.softmax_backward)
    ✔ softmax_backward: all 6 cases match
    True
    """
    return check_with_closer_look(SOFTMAX_BACKWARD, fn, _softmax_closer_look)


# ---------------------------------------------------------------------------------------
# the scale
# ---------------------------------------------------------------------------------------

def _scale_cases():
    rng = np.random.default_rng(20240802)
    return [Case((rng.normal(size=s), d_k), f"d_k={d_k}") for s, d_k in (((3, 4), 4), ((2, 5, 5), 16),
                                                                          ((4,), 9), ((2, 3, 2, 2), 64),
                                                                          ((3, 1), 2), ((2, 7), 25))]


_SCALE_MISTAKES = (
    Mistake("multiplied by sqrt(d_k) instead of divided", "the forward divides by sqrt(d_k), so the "
            "backward does too: grad_scaled / np.sqrt(d_k)", lambda g, d_k: g * math.sqrt(d_k)),
    Mistake("divided by d_k instead of sqrt(d_k)", "grad_scaled / np.sqrt(d_k)", lambda g, d_k: g / d_k),
    Mistake("the derivative taken with respect to d_k (d/dd_k of d_k^(-1/2) = -½·d_k^(-3/2)), not with respect to the "
            "raw scores", "d(raw / sqrt(d_k)) / d(raw) = 1 / sqrt(d_k): grad_raw = grad_scores / np.sqrt(d_k)",
            lambda g, d_k: g * (-0.5 * d_k ** -1.5)),
    Mistake("the gradient passed through unscaled", "a constant factor in the forward pass is the same "
            "factor in the backward pass: grad_scaled / np.sqrt(d_k)", lambda g, d_k: g + 0.0),
    Mistake("d_k ** -1/2 is (d_k ** -1) / 2 = 1 / (2 d_k): the power binds before the division",
            "d_k ** -0.5, or 1 / np.sqrt(d_k)", lambda g, d_k: g * d_k ** -1 / 2),
    Mistake("divided by 2 sqrt(d_k): the derivative of sqrt taken, but d_k is a constant, not the variable",
            "scores = raw / sqrt(d_k) is linear in raw: grad_raw = grad_scores / np.sqrt(d_k)",
            lambda g, d_k: g / (2 * math.sqrt(d_k))),
    Mistake("the sign flipped: -grad / sqrt(d_k)", "dividing by a positive constant keeps the sign: "
            "grad_scores / np.sqrt(d_k)", lambda g, d_k: -g / math.sqrt(d_k)),
)
SCALE_BACKWARD = Exercise("scale_backward", _scale_backward, _scale_cases, _SCALE_MISTAKES, edges=('d_k',))


def scale_backward(fn) -> bool:
    """Check ``fn(grad_scaled, d_k)``: grad (...) -> grad (...), for scaled = raw / sqrt(d_k).

    >>> import mha_course.backward as bw
    >>> scale_backward(bw.scale_backward)
    ✔ scale_backward: all 7 cases match
    True
    """
    return check_with_closer_look(SCALE_BACKWARD, fn, _scale_closer_look)


# ---------------------------------------------------------------------------------------
# split_heads
# ---------------------------------------------------------------------------------------

def _split_backward_cases():
    rng = np.random.default_rng(20240803)
    return [Case((rng.normal(size=s),), f"(B, h, T, d_k) = {s}") for s in ((2, 3, 5, 4), (1, 2, 3, 6),
                                                                             (3, 4, 2, 2), (2, 6, 4, 3),
                                                                             (1, 5, 5, 5), (2, 2, 7, 1))]


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
            "feature, not in its own slice", "g.transpose(0, 2, 1, 3).reshape(B, T, h * d_k)", _dk_major,
            also="the right transpose, then a reshape in column-major order (order='F'): numpy's reshape reads the "
                 "last axis fastest (order='C')"),
    Mistake("summed over the heads (B, T, d_k): each head's gradient belongs to its own d_k features, "
            "side by side, not added up", "g.transpose(0, 2, 1, 3).reshape(B, T, h * d_k): concatenate, don't add",
            lambda g: g.sum(axis=1)),
    Mistake("averaged over the heads (B, T, d_k)", "g.transpose(0, 2, 1, 3).reshape(B, T, h * d_k): concatenate",
            lambda g: g.mean(axis=1)),
    Mistake("the head axis moved back but not merged: (B, T, h, d_k)", "reshape to (B, T, h * d_k) after the transpose",
            lambda g: g.transpose(0, 2, 1, 3)),
    Mistake("the heads concatenated in reverse order (head h-1 first)",
            "head i's gradient goes to features i·d_k .. (i+1)·d_k - 1", lambda g: _split_heads_backward(g[:, ::-1])),
    Mistake("averaged over the heads and the mean repeated h times (np.tile): every head's slot gets the same "
            "mean, not its own gradient", "g.transpose(0, 2, 1, 3).reshape(B, T, h * d_k): head i's gradient "
            "in features i·d_k .. (i+1)·d_k - 1", lambda g: np.tile(g.mean(axis=1), (1, 1, g.shape[1]))),
    Mistake("summed over the heads and the sum repeated h times (np.tile)", "g.transpose(0, 2, 1, 3).reshape(B, T, "
            "h * d_k): head i's gradient in its own features", lambda g: np.tile(g.sum(axis=1), (1, 1, g.shape[1]))),
)
SPLIT_HEADS_BACKWARD = Exercise("split_heads_backward", _split_heads_backward, _split_backward_cases,
                                _SPLIT_BACKWARD_MISTAKES, edges=('B', 'h', 'T'))


def split_heads_backward(fn) -> bool:
    """Check ``fn(grad_heads)``: (B, h, T, d_k) -> (B, T, h * d_k), for heads = split_heads(x, h).

    >>> import mha_course.backward as bw
    >>> split_heads_backward(bw.split_heads_backward)
    ✔ split_heads_backward: all 8 cases match
    True
    """
    return check_with_closer_look(SPLIT_HEADS_BACKWARD, fn, _split_closer_look)


# ---------------------------------------------------------------------------------------
# matmul
# ---------------------------------------------------------------------------------------

def _matmul_cases():
    rng = np.random.default_rng(20240804)
    sizes = ((3, 4, 5), (3, 3, 5), (4, 2, 2), (1, 6, 1), (5, 3, 5), (4, 4, 4))  # (N, K, M): K == N, K == M, N == M, N = M = 1
    return [Case((rng.normal(size=(n, k)), rng.normal(size=(k, m)), rng.normal(size=(n, m))),
                 f"a ({n}, {k}) @ b ({k}, {m})") for n, k, m in sizes]


_FIX_MATMUL = "grad_a = grad_out @ b.T and grad_b = a.T @ grad_out (the shapes tell where the transposes go)"
_MATMUL_MISTAKES = (
    Mistake("a missing transpose in grad_b (a @ grad_out instead of a.T @ grad_out)", _FIX_MATMUL,
            lambda a, b, g: (g @ b.T, a @ g)),
    Mistake("a missing transpose in grad_a (grad_out @ b instead of grad_out @ b.T)", _FIX_MATMUL,
            lambda a, b, g: (g @ b, a.T @ g)),
    Mistake("grad_b as the outer product of sums, np.outer(a.sum(0), grad_out.sum(0)): the sum of the per-row "
            "outer products is a.T @ grad_out, and a product of sums adds the cross terms", _FIX_MATMUL,
            lambda a, b, g: (g @ b.T, np.outer(a.sum(0), g.sum(0)))),
    Mistake("both transposes missing (grad_out @ b and a @ grad_out): the shapes only fit when the matrices are "
            "square", _FIX_MATMUL, lambda a, b, g: (g @ b, a @ g)),
    Mistake("the factors in the wrong order: grad_b = grad_out.T @ a, which is grad_b transposed",
            _FIX_MATMUL, lambda a, b, g: (g @ b.T, g.T @ a)),
    Mistake("the two gradients returned in the wrong order (grad_b, grad_a)", "return grad_a, grad_b",
            lambda a, b, g: (a.T @ g, g @ b.T)),
    Mistake("grad_a = b @ grad_out.T, which is grad_a transposed (K, N)", _FIX_MATMUL,
            lambda a, b, g: (b @ g.T, a.T @ g)),
    Mistake("both gradients transposed: (b @ grad_out.T, grad_out.T @ a)", _FIX_MATMUL,
            lambda a, b, g: (b @ g.T, g.T @ a)),
    Mistake("both gradients negated: the minus sign belongs to the update step, not to the gradient",
            "grad_a = grad_out @ b.T, grad_b = a.T @ grad_out (no minus)", lambda a, b, g: (-(g @ b.T), -(a.T @ g))),
)
def _matmul_ref(a, b, g):
    """a (N, K), b (K, M), g (N, M) -> grad_a (N, K), grad_b (K, M): the backward of a @ b."""
    return _matmul_backward(a, b, g)


MATMUL_BACKWARD = Exercise("matmul_backward", _matmul_ref, _matmul_cases,
                           _MATMUL_MISTAKES, outputs=("grad_a", "grad_b"))


def matmul_backward(fn) -> bool:
    """Check ``fn(a, b, grad_out)``: a (N, K), b (K, M), grad_out (N, M) -> grad_a (N, K), grad_b (K, M).

    >>> import mha_course.backward as bw
    >>> matmul_backward(bw.matmul_backward)
    ✔ matmul_backward: all 6 cases match
    True
    """
    return check_with_closer_look(MATMUL_BACKWARD, fn, _matmul_closer_look)


# ---------------------------------------------------------------------------------------
# a shared input: K and V both read the context
# ---------------------------------------------------------------------------------------

def _shared_reference(c, W_k, W_v, grad_K, grad_V):
    """c (B, S, D), W_k (D, d_k), W_v (D, d_k), grad_K (B, S, d_k), grad_V (B, S, d_k) -> grad_c (B, S, D)."""
    return grad_K @ W_k.T + grad_V @ W_v.T  # (B, S, D): both paths add up


def _shared_cases():
    rng = np.random.default_rng(20240805)
    out = []
    for B, S, D, d, d_v in ((2, 3, 4, 4, 4), (1, 5, 6, 6, 6), (3, 2, 8, 1, 8), (2, 1, 2, 2, 2), (2, 3, 6, 4, 3)):
        out.append(Case((rng.normal(size=(B, S, D)), rng.normal(size=(D, d)), rng.normal(size=(D, d_v)),
                         rng.normal(size=(B, S, d)), rng.normal(size=(B, S, d_v))),
                        f"B={B}, S={S}, D={D}, d_k={d}" + (f", d_v={d_v}" if d_v != d else "")))  # S = 1; d_v != d_k
    return out


_FIX_SHARED = "K = c W_k and V = c W_v both read c, so grad_c = grad_K @ W_k.T + grad_V @ W_v.T"
_SHARED_MISTAKES = (
    Mistake("the gradients and the weights each added first, (grad_K + grad_V) @ (W_k + W_v).T: that adds the cross "
            "terms grad_K @ W_v.T and grad_V @ W_k.T, which no path has", _FIX_SHARED,
            lambda c, W_k, W_v, gK, gV: (gK + gV) @ (W_k + W_v).T),
    Mistake("only the K path: the gradients of the shared K and V are not summed", _FIX_SHARED,
            lambda c, W_k, W_v, gK, gV: gK @ W_k.T),
    Mistake("only the V path: the gradients of the shared K and V are not summed", _FIX_SHARED,
            lambda c, W_k, W_v, gK, gV: gV @ W_v.T),
    Mistake("the two paths averaged instead of summed", _FIX_SHARED,
            lambda c, W_k, W_v, gK, gV: (gK @ W_k.T + gV @ W_v.T) / 2),
    Mistake("a missing transpose of W_k and W_v (grad_K @ W_k)", _FIX_SHARED,
            lambda c, W_k, W_v, gK, gV: gK @ W_k + gV @ W_v),
    Mistake("a missing transpose of W_v only (grad_V @ W_v)", _FIX_SHARED,
            lambda c, W_k, W_v, gK, gV: gK @ W_k.T + gV @ W_v),
    Mistake("W_k and W_v swapped: grad_K @ W_v.T + grad_V @ W_k.T", "each gradient goes back through its own "
            "matrix: grad_K with W_k, grad_V with W_v", lambda c, W_k, W_v, gK, gV: gK @ W_v.T + gV @ W_k.T),
    Mistake("the two paths subtracted instead of added", _FIX_SHARED,
            lambda c, W_k, W_v, gK, gV: gK @ W_k.T - gV @ W_v.T),
    Mistake("multiplied by c as well (c * (grad_K @ W_k.T + grad_V @ W_v.T)): c is what the gradient is for; "
            "the gradient with respect to W would be c.T @ grad", _FIX_SHARED,
            lambda c, W_k, W_v, gK, gV: c * (gK @ W_k.T + gV @ W_v.T)),
)
SHARED_INPUT_BACKWARD = Exercise("shared_input_backward", _shared_reference, _shared_cases, _SHARED_MISTAKES, edges=('B', 'S'))


def shared_input_backward(fn) -> bool:
    """Check ``fn(c, W_k, W_v, grad_K, grad_V)``: -> grad_c (B, S, D), for K = c W_k, V = c W_v (W (D, d_k)).

    >>> shared_input_backward(lambda c, W_k, W_v, gK, gV: gK @ W_k.T + gV @ W_v.T)
    ✔ shared_input_backward: all 5 cases match
    True
    """
    return check_with_closer_look(SHARED_INPUT_BACKWARD, fn, _shared_closer_look)


# ---------------------------------------------------------------------------------------
# Adam
# ---------------------------------------------------------------------------------------

def _adam_reference(p, g, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-8):
    """One Adam step on arrays: t is the number of this step (1 for the first) -> (p, m, v)."""
    new, state = _adam_step(p, g, AdamState(m, v, t - 1), lr, b1, b2, eps)
    return new, state.m, state.v


def _adam_cases():
    rng = np.random.default_rng(20240806)
    out = []
    betas = {2: (0.8, 0.99, 1e-3), 3: (0.5, 0.9, 1e-4)}  # cases 3 and 4 pass their own b1, b2, eps
    for i, (shape, t, lr, g_scale) in enumerate((((3,), 1, 0.1, 1.0), ((2, 4), 2, 0.01, 1.0), ((5,), 10, 0.001, 1.0),
                                                ((3, 3), 100, 0.05, 1.0), ((4,), 1, 0.2, 1e-6),
                                                ((2, 3), 3, 0.02, 1e-5))):
        m, v = rng.normal(size=shape) * 0.1 * (t > 1) * g_scale, rng.random(shape) * 0.01 * (t > 1) * g_scale ** 2
        note = f"step t={t}, lr={lr}" + (f", tiny gradients (|g| ~ {g_scale:g}, so v is tiny)" if g_scale < 1 else "")
        own = betas.get(i, ())
        note += ", b1={}, b2={}, eps={:g}".format(*own) if own else ""
        out.append(Case((rng.normal(size=shape), g_scale * rng.normal(size=shape), m, v, t, lr) + own, note))
    return out


def _adam_variant(p, g, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-8, *, correct_m=True, correct_v=True, sgd=False,
                  no_sqrt=False, betas_swapped=False, t_shift=0, eps_inside=False, abs_v=False,
                  m_weights_swapped=False, v_weights_swapped=False, ascend=False, return_hats=False, no_eps=False,
                  defaults=False, stale_moments=False, decay=0.0):
    """One Adam step with the chosen slips (see the catalogue); the defaults are the right step."""
    b1, b2, eps = (0.9, 0.999, 1e-8) if defaults else (b1, b2, eps)
    b1, b2 = (b2, b1) if betas_swapped else (b1, b2)
    eps = 0.0 if no_eps else eps
    old_m, old_v = m, v
    m = (1 - b1) * m + b1 * g if m_weights_swapped else b1 * m + (1 - b1) * g
    g2 = np.abs(g) if abs_v else g * g
    v = (1 - b2) * v + b2 * g2 if v_weights_swapped else b2 * v + (1 - b2) * g2
    tc = t + t_shift
    m_used, v_used = (old_m, old_v) if stale_moments else (m, v)  # the step taken before m and v are updated
    m_hat = m_used / (1 - b1 ** tc) if correct_m else m_used
    v_hat = v_used / (1 - b2 ** tc) if correct_v else v_used
    denom = np.sqrt(v_hat + eps) if eps_inside else (v_hat if no_sqrt else np.sqrt(v_hat)) + eps
    step = g if sgd else m_hat / denom
    step = step + decay * p  # a weight decay (in one step, AdamW's decoupled decay gives the same numbers)
    new_p = p + lr * step if ascend else p - lr * step
    return (new_p, m_hat, v_hat) if return_hats else (new_p, m, v)


def _adam_mistake(name, fix, **how):
    return Mistake(name, fix, lambda *a: _adam_variant(*a, **how))


_FIX_ADAM = "m_hat = m / (1 - b1 ** t), v_hat = v / (1 - b2 ** t); p - lr * m_hat / (np.sqrt(v_hat) + eps)"
_ADAM_MISTAKES = (
    _adam_mistake("Adam without bias correction: the early steps are far too LARGE (about 3.2·lr at step 1: "
                  "m = 0.1 g but v = 0.001 g², so m / sqrt(v) = 0.1 / sqrt(0.001) = 3.2)",
                  _FIX_ADAM, correct_m=False, correct_v=False),
    _adam_mistake("only m is bias-corrected: v is still biased towards 0, so the early steps are too large",
                  _FIX_ADAM, correct_v=False),
    _adam_mistake("only v is bias-corrected: m is still biased towards 0, so the early steps are too small",
                  _FIX_ADAM, correct_m=False),
    _adam_mistake("t off by one in the bias correction (t - 1: at the first step 1 - b ** 0 = 0, a division by zero)",
                  "t is the number of this step, 1 for the first: use b1 ** t and b2 ** t", t_shift=-1),
    _adam_mistake("t off by one in the bias correction (t + 1)",
                  "t is the number of this step, 1 for the first: use b1 ** t and b2 ** t", t_shift=1),
    _adam_mistake("eps inside the square root: np.sqrt(v_hat + eps) instead of np.sqrt(v_hat) + eps "
                  "(it matters when v is tiny)", _FIX_ADAM, eps_inside=True),
    _adam_mistake("v_hat used without its square root", _FIX_ADAM, no_sqrt=True),
    _adam_mistake("eps forgotten: m_hat / np.sqrt(v_hat) divides by almost 0 where the gradients are tiny",
                  _FIX_ADAM + " (eps = 1e-8)", no_eps=True),
    _adam_mistake("|g| instead of g² in v: v is the running mean of the squared gradient",
                  "v = b2 * v + (1 - b2) * g ** 2", abs_v=True),
    _adam_mistake("m's two weights swapped: 0.1·m + 0.9·g instead of 0.9·m + 0.1·g",
                  "m = b1 * m + (1 - b1) * g: b1 = 0.9 keeps the old mean", m_weights_swapped=True),
    _adam_mistake("plain gradient descent (p - lr * g): the moments are computed but not used", _FIX_ADAM, sgd=True),
    _adam_mistake("b1 and b2 swapped (m decays with 0.999, v with 0.9)", "m uses b1 = 0.9, v uses b2 = 0.999",
                  betas_swapped=True),
    _adam_mistake("β and 1 - β swapped in both running means: (1 - b1)·m + b1·g and (1 - b2)·v + b2·g²",
                  "m = b1 * m + (1 - b1) * g and v = b2 * v + (1 - b2) * g ** 2: b keeps the old mean",
                  m_weights_swapped=True, v_weights_swapped=True),
    _adam_mistake("v's two weights swapped: (1 - b2)·v + b2·g² instead of b2·v + (1 - b2)·g²",
                  "v = b2 * v + (1 - b2) * g ** 2: b2 = 0.999 keeps the old mean", v_weights_swapped=True),
    _adam_mistake("the arguments b1, b2 and eps ignored: 0.9, 0.999 and 1e-8 written in", "use the arguments "
                  "b1, b2, eps (their defaults are 0.9, 0.999, 1e-8; a caller may pass others)", defaults=True),
    _adam_mistake("the step taken with the old m and v, before this step's gradient updates them (at step 1, m = v "
                  "= 0, so p does not move)", "update m and v with g first, then bias-correct them and step",
                  stale_moments=True),
    _adam_mistake("a weight decay of 0.01 added (AdamW's p -= lr · 0.01 · p, or 0.01 · p in the step: one step, the "
                  "same numbers): plain Adam has none", "leave the decay out: p - lr * m_hat / (np.sqrt(v_hat) + eps)",
                  decay=0.01),
    _adam_mistake("the step goes uphill: p + lr * ... instead of p - lr * ...", "subtract the step: p - lr * ...",
                  ascend=True),
    _adam_mistake("the bias-corrected m_hat and v_hat returned as the new state: the next step would correct "
                  "them again", "keep m and v uncorrected in the state; m_hat and v_hat are only for this step",
                  return_hats=True),
)
ADAM_STEP = Exercise("adam_step", _adam_reference, _adam_cases, _ADAM_MISTAKES, outputs=("p", "m", "v"))


def adam_step(fn) -> bool:
    """Check ``fn(p, g, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-8)`` -> (p, m, v): one Adam step, t >= 1.

    >>> adam_step(_adam_reference)
    ✔ adam_step: all 6 cases match
    True
    """
    return check_with_closer_look(ADAM_STEP, fn, _adam_closer_look)


# ---------------------------------------------------------------------------------------
# closer looks for mistakes nobody catalogued, in each exercise's terms
# ---------------------------------------------------------------------------------------

def _factor_in_symbols(f, d_k) -> str:
    """A number f as a simple expression in d_k ('' if none fits)."""
    r = math.sqrt(d_k)
    names = {"1": 1.0, "-1": -1.0, "sqrt(d_k)": r, "d_k": d_k, "1/sqrt(d_k)": 1 / r, "1/d_k": 1 / d_k,
             "2": 2.0, "1/2": 0.5, "2/sqrt(d_k)": 2 / r, "1/(2 sqrt(d_k))": 1 / (2 * r), "1/(2 d_k)": 1 / (2 * d_k),
             "d_k^(3/2)": d_k * r, "1/d_k^(3/2)": 1 / (d_k * r), "d_k²": d_k ** 2, "-1/sqrt(d_k)": -1 / r,
             "-sqrt(d_k)": -r}
    return next((k for k, v in names.items() if math.isclose(f, v, rel_tol=1e-6)), "")


def _scale_closer_look(fn) -> list:
    lines = []
    for d_k in (9, 16):
        g = np.array([[1.0, -2.0, 0.5]])
        got = np.asarray(call_timed(fn, g.copy(), d_k), dtype=float)
        if got.shape != g.shape:
            return [f"grad_scores of shape {g.shape} came back with shape {got.shape}: the scale changes no shape"]
        f = float(np.vdot(got, g) / np.vdot(g, g))
        if not np.allclose(got, f * g):
            return ["your result is not a constant times grad_scores: the scale is one number for every entry"]
        sym = _factor_in_symbols(f, d_k)
        lines.append(f"d_k = {d_k}: yours is grad_scores × {f:.6g}" + (f" = grad_scores × {sym}" if sym else "")
                     + f"; expected grad_scores × 1/sqrt(d_k) = × {1 / math.sqrt(d_k):.6g}")
    return lines


def _split_closer_look(fn) -> list:
    B, h, T, d_k = 1, 3, 2, 2
    g = np.arange(B * h * T * d_k, dtype=float).reshape(B, h, T, d_k)
    got, want = np.asarray(call_timed(fn, g.copy()), dtype=float), _split_heads_backward(g)
    if got.shape != want.shape:
        return [f"(B, h, T, d_k) = {g.shape} came back as {got.shape}, expected (B, T, h · d_k) = {want.shape}"]
    lines = [f"a numbered gradient (B, h, T, d_k) = {g.shape}: head i should fill features i·d_k .. i·d_k + d_k - 1"]
    for i in range(h):
        sl = slice(i * d_k, (i + 1) * d_k)
        ok = np.allclose(got[..., sl], want[..., sl])
        lines.append(f"head {i} (features {i * d_k}..{(i + 1) * d_k - 1}): " + ("right" if ok else
                     f"got {got[0, :, sl].tolist()}, expected {want[0, :, sl].tolist()}"))
    return lines


def _softmax_closer_look(fn) -> list:
    p, g = np.array([0.5, 0.3, 0.2]), np.array([1.0, 0.0, 0.0])
    got = np.asarray(call_timed(fn, p.copy(), g.copy()), dtype=float)
    want = _softmax_backward(p, g)
    if got.shape != want.shape:
        return [f"one row p = {p.tolist()} came back with shape {got.shape}"]
    return [f"one row p = {p.tolist()}, g = {g.tolist()}: yours {np.round(got, 4).tolist()}, expected "
            f"{np.round(want, 4).tolist()} = p ⊙ (g - p·g)",
            f"the sum of your gradient is {got.sum():+.4f}; it must be 0 (moving every score together changes "
            "nothing)"]


def _matmul_closer_look(fn) -> list:
    a, b, g = np.ones((2, 3)), np.ones((3, 4)), np.ones((2, 4))
    got = call_timed(fn, a.copy(), b.copy(), g.copy())
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return []
    shapes = [np.shape(x) for x in got]
    return [f"a (2, 3) @ b (3, 4): your gradients have shapes {shapes[0]} and {shapes[1]}, expected (2, 3) and "
            "(3, 4): each gradient has the shape of what it is the gradient of"] if shapes != [(2, 3), (3, 4)] else []


def _shared_closer_look(fn) -> list:
    rng = np.random.default_rng(1)
    c, W_k, W_v = rng.normal(size=(1, 2, 3)), rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    gK, gV = rng.normal(size=(1, 2, 3)), np.zeros((1, 2, 3))
    only_k = np.asarray(call_timed(fn, c, W_k, W_v, gK, gV), dtype=float)
    only_v = np.asarray(call_timed(fn, c, W_k, W_v, np.zeros_like(gK), gK), dtype=float)
    return [f"the K path alone (grad_V = 0): {'right' if np.allclose(only_k, gK @ W_k.T) else 'wrong'}; "
            f"the V path alone (grad_K = 0): {'right' if np.allclose(only_v, gK @ W_v.T) else 'wrong'}"
            " (each path is grad @ Wᵀ, and the two add)"]


def _adam_closer_look(fn) -> list:
    p, g = np.zeros(2), np.array([1.0, -0.01])
    got = call_timed(fn, p.copy(), g.copy(), np.zeros(2), np.zeros(2), 1, 0.1)
    if not isinstance(got, (tuple, list)) or len(got) != 3:
        return []
    step = -np.asarray(got[0], dtype=float) / 0.1
    return [f"the first step (t = 1, lr = 0.1) from p = 0 with g = [1, -0.01]: yours moves p by {np.round(step, 4).tolist()} "
            "× lr; Adam's first step is sign(g) × lr = [1, -1] × lr, whatever the size of g",
            f"your new m = {np.round(np.asarray(got[1], dtype=float), 8).tolist()} (expected 0.1·g = [0.1, -0.001]), "
            f"v = {np.round(np.asarray(got[2], dtype=float), 8).tolist()} (expected 0.001·g² = [0.001, 1e-07])"]
