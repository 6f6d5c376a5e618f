"""Checkers for notebook 01: ``project_qkv``, ``qkv_param_count``, ``no_projection_weights``.

Every case has another B, T and d_model.
"""
from __future__ import annotations

import math

import numpy as np

from ..attention import scaled_dot_product_attention as _sdpa
from ..attention import softmax as _softmax
from ..mha import init_params
from ..mha import trace as _trace
from .attention import scores, sdpa_scaled
from .engine import Case, Exercise, Mistake
from .mha import check_count
from .vocabulary import TWICE_D

__all__ = ["project_qkv", "qkv_param_count", "no_projection_weights", "PROJECT_QKV", "QKV_PARAM_COUNT",
           "NO_PROJECTION_WEIGHTS"]


def _qkv_of(x, params):
    """x (B, T, d_model) -> Q (B, T, d_model), K (B, T, d_model), V (B, T, d_model)."""
    t = _trace(x, params, 1)
    return tuple(np.array(t[n]) for n in "QKV")  # each (B, T, d_model)


def _project_cases():
    rng = np.random.default_rng(20240506)
    return [Case((rng.normal(size=(2, 5, 12)), init_params(12, rng=rng))),
            Case((rng.normal(size=(3, 4, 8)), init_params(8, rng=rng, bias=True)), "with biases"),
            Case((rng.normal(size=(1, 6, 10)), init_params(10, rng=rng, bias=True)), "with biases")]


def _projected(weights, biases, transposed=False):
    """A learner's (Q, K, V): output j is x @ W_<weights[j]> (transposed) + b_<biases[j]> (no bias for '')."""
    def project(x, p):
        out = []
        for w, b in zip(weights, biases):
            W = getattr(p, f"W_{w}")
            y = x @ (W.T if transposed else W)  # (B, T, D) x (D, D) -> (B, T, D)
            bias = getattr(p, f"b_{b}") if b else None
            out.append(y if bias is None else y + bias)
        return tuple(out)
    return project


_FIX_OWN = "each projection uses its own matrix and bias: K = x @ W_k + b_k, V = x @ W_v + b_v"
_WEIGHTS = (("qkv", "", ""), ("qqq", "W_q used for all three projections (copy-paste)", _FIX_OWN),
            ("qkk", "W_k used for V too (copy-paste)", _FIX_OWN))
_BIASES = (("qkv", "", ""), (("", "", ""), "the biases are forgotten", "add b_q, b_k, b_v when they are not None"),
           (("q", "", ""), "the bias added to Q only (K and V without b_k, b_v)", "add b_k to K and b_v to V too"),
           ("qqq", "b_q added to all three projections (copy-paste)", _FIX_OWN),
           ("qkk", "b_k added to V too (copy-paste)", _FIX_OWN))
_TRANSPOSED = ((False, "", ""), (True, "the weight matrices are transposed (x @ W.T, PyTorch's nn.Linear convention)",
                                 "this course uses x @ W: Q = x @ params.W_q"))


def _project_mistakes():
    """Every combination of a wrong matrix, a wrong bias and a transpose (each part named)."""
    out = []
    for t, t_name, t_fix in _TRANSPOSED:
        for w, w_name, w_fix in _WEIGHTS:
            for b, b_name, b_fix in _BIASES:
                names = [n for n in (w_name, b_name, t_name) if n]
                if names:
                    fixes = list(dict.fromkeys(f for f in (w_fix, b_fix, t_fix) if f))
                    out.append(Mistake("; and ".join(names), "; ".join(fixes), _projected(w, b, t)))
    return tuple(out)


def _bias_in_matrix(x, p):
    """x @ (W + b): the bias added to every row of the matrix before the product."""
    return tuple(x @ (W if b is None else W + b) for W, b in ((p.W_q, p.b_q), (p.W_k, p.b_k), (p.W_v, p.b_v)))


def _bias_before_product(x, p):
    """(x + b) @ W: the bias added to the input before the product (it then passes through W)."""
    return tuple((x if b is None else x + b) @ W for W, b in ((p.W_q, p.b_q), (p.W_k, p.b_k), (p.W_v, p.b_v)))


def _bias_tested_as_bool(x, p):
    """``x @ W + b if b else x @ W``: fine without biases, a ValueError for a bias array."""
    if p.b_q is not None and np.size(p.b_q) > 1:
        raise ValueError("The truth value of an array with more than one element is ambiguous.")
    return _qkv_of(x, p)


PROJECT_QKV = Exercise("project_qkv", _qkv_of, _project_cases, _project_mistakes() + (
    Mistake("the outputs in the order (Q, V, K)", "return Q, K, V (in this order)",
            lambda x, p: tuple(_qkv_of(x, p)[i] for i in (0, 2, 1))),
    Mistake("each bias added to its weight matrix before the product: x @ (W + b) instead of x @ W + b",
            "project first, then add the bias: x @ W_q + b_q (the bias is added once per token, not to every row "
            "of W)", _bias_in_matrix),
    Mistake("each bias added to x before the product: (x + b) @ W instead of x @ W + b (the bias then passes "
            "through W)", "project first, then add the bias: x @ W_q + b_q", _bias_before_product),
    Mistake("the bias tested with `if b:`: an array's truth value is ambiguous (ValueError)",
            "test for a missing bias with `b is not None`: x @ W + b if b is not None else x @ W",
            _bias_tested_as_bool)),
    outputs=("Q", "K", "V"), axes={n: ("batch", "position", "feature") for n in "QKV"}, edges=('B', 'T'))


def project_qkv(fn) -> bool:
    """Check ``fn(x, params) -> (Q, K, V)``: x (B, T, d_model) -> each (B, T, d_model).

    >>> import mha_course as mc
    >>> project_qkv(lambda x, p: tuple(mc.trace(x, p, h=1)[n] for n in "QKV"))
    ✔ project_qkv: all 4 cases match
    True

    Cases: three sizes of B, T and d_model, without and with biases.
    """
    return PROJECT_QKV.check(fn)


QKV_PARAM_COUNT = check_count("qkv_param_count", ("W_q", "W_k", "W_v", "b_q", "b_k", "b_v"),
                              ("W_o counted too (4·d_model²)", "only W_q, W_k, W_v: 3 matrices", 4))


def qkv_param_count(fn) -> bool:
    """Check ``fn(d_model, h, bias=False) -> int``: the scalars of W_q, W_k, W_v (and their biases).

    >>> qkv_param_count(lambda d_model, h, bias=False: 3 * d_model * d_model + (3 * d_model if bias else 0))
    ✔ qkv_param_count: all 6 cases match
    True
    """
    return QKV_PARAM_COUNT.check(fn)


def _no_projection_cases():
    rng = np.random.default_rng(20240509)
    cases = [Case((rng.normal(size=s),)) for s in ((2, 8, 64), (1, 5, 16), (3, 4, 6), (2, 6, 9))]
    near = np.full(6, 45 / np.sqrt(6)) + 0.03 * cases[2].args[0]  # tokens sharing one large component: scores near
    cases[2] = Case((near,), "tokens sharing a large component: scores near 830 (exp overflows unless each row's "
                    "max is subtracted first), differing by about 1")  # 830, yet weights far from one-hot
    return cases


_FIX_SQRT = "divide x @ xᵀ by np.sqrt(d_model)"
def _no_projection_ref(x):
    """x (..., T, d) -> weights (..., T, T): softmax(x xᵀ / √d), the tokens themselves as queries and keys."""
    return _sdpa(x, x, x)[1]


NO_PROJECTION_WEIGHTS = Exercise("no_projection_weights", _no_projection_ref, _no_projection_cases, (
    Mistake("the scores are not divided by √d", _FIX_SQRT, lambda x: sdpa_scaled(lambda Q, K: 1.0, x, x, x)[1]),
    Mistake("the scores are divided by d instead of √d", _FIX_SQRT,
            lambda x: sdpa_scaled(lambda Q, K: 1 / Q.shape[-1], x, x, x)[1],
            also=TWICE_D),
    Mistake("the scores are divided by √T (the number of positions, x.shape[-2]) instead of √d", _FIX_SQRT,
            lambda x: sdpa_scaled(lambda Q, K: 1 / math.sqrt(Q.shape[-2]), x, x, x)[1]),
    Mistake("the scores are returned, not the weights (no softmax)", "apply mc.softmax over the last axis",
            lambda x: scores(x, x, 1 / math.sqrt(x.shape[-1]))),
    Mistake("the output is returned instead of the weights", "out, weights = ...; return weights",
            lambda x: _sdpa(x, x, x)[0]),
    Mistake("softmax over axis -2 (the queries) instead of the keys", "softmax(scores, axis=-1)",
            lambda x: _softmax(scores(x, x, 1 / math.sqrt(x.shape[-1])), axis=-2))),
    axes={"result": ("batch", "query", "key")})


def no_projection_weights(fn) -> bool:
    """Check ``fn(x)``: x (B, T, d_model) -> weights (B, T, T) of attention with Q = K = V = x.

    >>> import mha_course as mc
    >>> no_projection_weights(lambda x: mc.scaled_dot_product_attention(x, x, x)[1])
    ✔ no_projection_weights: all 4 cases match
    True
    """
    return NO_PROJECTION_WEIGHTS.check(fn)
