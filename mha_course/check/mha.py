"""Checkers for notebooks 00 and 04: ``multi_head_attention``, ``causal_multi_head_attention``, ``param_count``.

Every case has another B, T, S, d_model and h: a hard-coded ``d_k = 12 // h`` cannot fit.
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np

from ..attention import causal_mask as _causal_mask
from ..attention import padding_mask as _padding_mask
from ..attention import scaled_dot_product_attention as _sdpa
from ..heads import combine_heads as _combine_heads
from ..heads import split_heads as _split_heads
from ..mha import init_params
from ..mha import multi_head_attention as _mha
from ..mha import trace as _trace
from .attention import sdpa_inverted, sdpa_mask_after, sdpa_mask_ignored, sdpa_scaled
from .engine import Case, Exercise, Mistake, Part
from .heads import FIX_COMBINE, FIX_SPLIT, combine_no_transpose, split_no_transpose
from .vocabulary import TWICE_D_K

__all__ = ["multi_head_attention", "causal_multi_head_attention", "param_count", "MULTI_HEAD_ATTENTION",
           "CAUSAL_MULTI_HEAD_ATTENTION", "PARAM_COUNT", "check_count", "count_mistakes", "no_bias"]

_MHA_AXES = {"out": ("batch", "query", "feature"), "weights": ("batch", "head", "query", "key")}


def _out_proj(concat, p):
    out = np.matmul(concat, p.W_o)  # (B, T, D) x (D, D) -> (B, T, D)
    return out if p.b_o is None else out + p.b_o


def _mha_attend(attend, x, params, h, mask=None, context=None, split=None, combine=_combine_heads):
    """MHA whose per-head attention is ``attend(Qh, Kh, Vh, mask)`` (e.g. a wrong sdpa); ``split``
    and ``combine`` replace the head split and merge."""
    t = _trace(x, params, h, None, context)
    Qh, Kh, Vh = ((t[f"{n}_heads"] for n in "QKV") if split is None else
                  (split(np.array(t[n]), h) for n in "QKV"))  # each (B, h, T|S, d_k)
    o, w = attend(Qh, Kh, Vh, mask)  # (B, h, T, d_k), (B, h, T, S)
    return _out_proj(combine(o), params), w


def _mha_written(x, params, h, mask=None, context=None, *, q="x", k="c", v="c", bias_in="", o_bias="after",
                 mask_T=None):
    """MHA as a learner writes it, with one slip: Q, K, V projected from ``q``, ``k``, ``v`` ("x", or
    "c" = the context when given), the biases added to the matrices (``bias_in="W"``: x @ (W + b)),
    b_o added ``"before"`` W_o, ``"after"`` or ``"never"``; ``mask_T`` a mask built from another length."""
    c = x if context is None else context
    src = {"x": x, "c": c}

    def project(a, W, b):
        if b is None:
            return a @ W  # (B, N, D) x (D, D) -> (B, N, D)
        return a @ (W + b) if bias_in == "W" else a @ W + b
    Q = project(src[q], params.W_q, params.b_q)
    K = project(src[k], params.W_k, params.b_k)
    V = project(src[v], params.W_v, params.b_v)
    if mask_T is not None:
        mask = _causal_mask(mask_T(x))
    o, w = _sdpa(*(_split_heads(a, h) for a in (Q, K, V)), mask)  # (B, h, T, d_k), (B, h, T, S)
    concat = _combine_heads(o)  # (B, T, D)
    b_o = params.b_o
    if b_o is None or o_bias == "never":
        return concat @ params.W_o, w
    return ((concat + b_o) @ params.W_o if o_bias == "before" else concat @ params.W_o + b_o), w


def _mha_from_trace(make_out, x, params, h, mask=None, context=None):
    """(make_out(trace, params), weights): variants that differ after the attention."""
    t = _trace(x, params, h, mask, context)
    return make_out(t, params), np.array(t["weights"])


def _mha_params(change, x, params, h, mask=None, context=None):
    return _mha(x, change(params), h, mask, context)


def _mha_weights_averaged(x, params, h, mask=None, context=None):
    out, w = _mha(x, params, h, mask, context)
    return out, w.mean(axis=1)  # (B, T, S)


def no_bias(p):
    """The same MHAParams without biases."""
    return p._replace(b_q=None, b_k=None, b_v=None, b_o=None)


def _transposed(p, fields):
    return p._replace(**{f: getattr(p, f).T for f in fields})


def _averaged_heads(t, p):
    return _out_proj(np.array(t["concat"]) / t.h, no_bias(p)) + (0 if p.b_o is None else p.b_o)


def _scale_by(scale_of):
    """A wrong sdpa for the heads: scores * scale_of(d_k, d_model)."""
    return lambda Qh, Kh, Vh, mask, D: sdpa_scaled(lambda Q, K: scale_of(Q.shape[-1], D), Qh, Kh, Vh, mask)


def _mha_scaled(scale_of, x, params, h, mask=None, context=None):
    return _mha_attend(partial(_scale_by(scale_of), D=x.shape[-1]), x, params, h, mask, context)


_FIX_MHA_SCALE = "divide the scores by np.sqrt(d_k) with d_k = d_model // h, the size of one head"
_FIX_CONTEXT = "Q = x @ W_q; K = c @ W_k and V = c @ W_v with c = x if context is None else context"


def _context_or_x(x, params, h, mask=None, context=None):
    """``c = context or x``: fine when context is None, a ValueError for an array of several elements."""
    if context is not None and np.size(context) > 1:
        raise ValueError("The truth value of an array with more than one element is ambiguous.")
    return _mha(x, params, h, mask, context)
_FIX_HEADS_CONCAT = "concatenate the heads with combine_heads, then project with W_o"
_MHA_MISTAKES = (
    Mistake("the output projection is forgotten", "multiply the concatenated heads by W_o (and add b_o)",
            partial(_mha_from_trace, lambda t, p: np.array(t["concat"]))),
    Mistake("heads averaged instead of concatenated", _FIX_HEADS_CONCAT, partial(_mha_from_trace, _averaged_heads)),
    Mistake("heads averaged instead of concatenated (and no output projection)", _FIX_HEADS_CONCAT,
            partial(_mha_from_trace, lambda t, p: np.array(t["head_outputs"]).mean(axis=1))),
    Mistake("scaling by √d_model instead of √d_k", _FIX_MHA_SCALE, partial(_mha_scaled, lambda d_k, D: 1 / math.sqrt(D))),
    Mistake("no scaling of the scores", _FIX_MHA_SCALE, partial(_mha_scaled, lambda d_k, D: 1.0)),
    Mistake("scaling by √h (the number of heads) instead of √d_k", _FIX_MHA_SCALE,
            partial(_mha_scaled, lambda d_k, D: 1 / math.sqrt(D // d_k))),
    Mistake("scaling by d_k instead of √d_k", _FIX_MHA_SCALE, partial(_mha_scaled, lambda d_k, D: 1 / d_k),
            also=TWICE_D_K),
    Mistake("split_heads as a reshape without the transpose", FIX_SPLIT,
            partial(_mha_attend, _sdpa, split=split_no_transpose)),
    Mistake("combine_heads without the transpose back", FIX_COMBINE,
            partial(_mha_attend, _sdpa, combine=combine_no_transpose)),
    Mistake("split and combine both as a reshape without a transpose (the heads see mixed positions)",
            f"{FIX_SPLIT}; and back: {FIX_COMBINE}",
            partial(_mha_attend, _sdpa, split=split_no_transpose, combine=combine_no_transpose)),
    Mistake("mask polarity inverted (True = may attend)", "keep the scores where mask is True",
            partial(_mha_attend, sdpa_inverted)),
    Mistake("the mask is never passed on to the attention", "pass mask to scaled_dot_product_attention",
            partial(_mha_attend, sdpa_mask_ignored)),
    Mistake("masking after the softmax without renormalising",
            "mask the scores before the softmax: np.where(mask, scores, -np.inf)", partial(_mha_attend, sdpa_mask_after)),
    Mistake("the biases are ignored", "add b_q, b_k, b_v after the projections and b_o at the end "
            "(when they are not None)", partial(_mha_params, no_bias)),
    Mistake("the output bias b_o is forgotten", "add b_o after multiplying by W_o (when it is not None)",
            partial(_mha_params, lambda p: p._replace(b_o=None))),
    Mistake("the weight matrices are transposed (x @ W.T, PyTorch's nn.Linear convention)",
            "this course uses x @ W: Q = x @ params.W_q",
            partial(_mha_params, lambda p: _transposed(p, ("W_q", "W_k", "W_v", "W_o")))),
    Mistake("W_o is transposed (concat @ W_o.T)", "out = concat @ params.W_o",
            partial(_mha_params, lambda p: _transposed(p, ("W_o",)))),
    Mistake("the context is ignored: keys and values must come from context when it is given",
            "K = context @ W_k, V = context @ W_v (use x only when context is None)",
            lambda x, params, h, mask=None, context=None: _mha(x, params, h, mask)),
    Mistake("the output bias b_o added before multiplying by W_o: (concat + b_o) @ W_o",
            "out = concat @ W_o + b_o: the bias comes after the product", partial(_mha_written, o_bias="before")),
    Mistake("each bias added to its weight matrix before the product: x @ (W + b) instead of x @ W + b",
            "project first, then add the bias: x @ W_q + b_q (the bias is added once per token, not to every row "
            "of W)", partial(_mha_written, bias_in="W")),
    Mistake("the keys projected from x instead of the context (K = x @ W_k): the keys and values must come "
            "from the same tokens", _FIX_CONTEXT, partial(_mha_written, k="x")),
    Mistake("the values projected from x instead of the context (V = x @ W_v)", _FIX_CONTEXT,
            partial(_mha_written, v="x")),
    Mistake("the queries taken from the context and the keys from x: the roles of x and context swapped",
            _FIX_CONTEXT, partial(_mha_written, q="c", k="x", v="c")),
    Mistake("the queries taken from the context (Q = context @ W_q): queries come from x, the tokens being "
            "updated", _FIX_CONTEXT, partial(_mha_written, q="c")),
    Mistake("`context or x` on an array: its truth value is ambiguous (ValueError) once a context is given",
            "c = x if context is None else context", _context_or_x),
    Mistake("the outputs in the wrong order", "return out, weights (in this order)",
            lambda x, params, h, mask=None, context=None: _mha(x, params, h, mask, context)[::-1]),
    Mistake("per-head weights averaged over the heads (PyTorch's average_attn_weights=True)",
            "return the per-head weights, shape (B, h, T, S)", _mha_weights_averaged),
)


def _mha_cases():
    rng = np.random.default_rng(20240505)

    def x(B, T, D):
        return rng.normal(size=(B, T, D))
    return [Case((x(2, 5, 12), init_params(12, rng=rng), 3), "self-attention"),
            Case((x(3, 4, 8), init_params(8, rng=rng, bias=True), 4, _causal_mask(4)), "biases and a causal mask"),
            Case((x(2, 3, 10), init_params(10, rng=rng), 2, None, x(2, 6, 10)), "cross-attention: K, V from context"),
            Case((x(4, 6, 18), init_params(18, rng=rng, bias=True), 6, _padding_mask(np.array([6, 3, 5, 1]), 6),
                  x(4, 6, 18)), "cross-attention with a padding mask, a context as long as x"),
            Case((60 * x(1, 7, 20), init_params(20, rng=rng, bias=True), 5), "biases, one sequence of large entries "
                 "(scores in the thousands: exp overflows unless each row's max is subtracted first)")]


_IN_HEADS = "in each head's attention (exercise 2.4's step)"
MULTI_HEAD_ATTENTION = Exercise("multi_head_attention", _mha, _mha_cases, _MHA_MISTAKES,
                                outputs=("out", "weights"), axes=_MHA_AXES,
                                parts=(Part("scaled_dot_product_attention", lambda k: partial(_mha_attend, k), _IN_HEADS),), edges=('B', 'S'))


def multi_head_attention(fn) -> bool:
    """Check ``fn(x, params, h, mask=None, context=None) -> (out, weights)``.

    >>> import mha_course as mc
    >>> multi_head_attention(mc.multi_head_attention)
    ✔ multi_head_attention: all 6 cases match
    True

    Shapes: x (B, T, d_model), context (B, S, d_model) -> out (B, T, d_model),
    weights (B, h, T, S). Every case has another B, T, S, d_model and h; with and without
    biases; a causal mask; cross-attention with and without a padding mask. Trailing None
    arguments are not passed, so ``fn(x, params, h)`` works for the first case.
    """
    return MULTI_HEAD_ATTENTION.check(fn)


def _causal_ref(x, params, h):
    """x (B, T, d_model) -> out (B, T, d_model), weights (B, h, T, T)."""
    return _mha(x, params, h, _causal_mask(x.shape[1]))


def _causal_with(attend, mask_of):
    """Causal MHA whose heads attend with ``attend`` and the mask ``mask_of(T)``."""
    return lambda x, params, h: _mha_attend(attend, x, params, h, mask_of(x.shape[1]))


def _causal_cases():
    rng = np.random.default_rng(20240510)
    return [Case((rng.normal(size=(2, 5, 12)), init_params(12, rng=rng), 3)),
            Case((rng.normal(size=(3, 4, 8)), init_params(8, rng=rng, bias=True), 4), "with biases"),
            Case((60 * rng.normal(size=(1, 7, 10)), init_params(10, rng=rng, bias=True), 2), "with biases and large "
                 "entries (scores in the thousands: exp overflows unless each row's max is subtracted first)")]


_FIX_CAUSAL = "mask = np.tril(np.ones((T, T), dtype=bool)); np.where(mask, scores, -np.inf) before the softmax"


def _mask_of_size(n, T):
    """A causal mask built for n positions, cut or padded with True to (T, T)."""
    mask = np.ones((T, T), dtype=bool)
    k = min(n, T)
    mask[:k, :k] = _causal_mask(k)
    return mask
CAUSAL_MULTI_HEAD_ATTENTION = Exercise("causal_multi_head_attention", _causal_ref, _causal_cases, (
    Mistake("the causal mask is not applied: every query sees the future", _FIX_CAUSAL,
            lambda x, params, h: _mha(x, params, h)),
    Mistake("the mask is transposed (np.triu): each query sees the future and not the past", _FIX_CAUSAL,
            _causal_with(_sdpa, lambda T: _causal_mask(T).T)),
    Mistake("the mask polarity is inverted (True must mean 'may attend')", _FIX_CAUSAL,
            _causal_with(_sdpa, lambda T: ~_causal_mask(T))),
    Mistake("the mask is applied after the softmax (rows no longer sum to 1)", _FIX_CAUSAL,
            _causal_with(sdpa_mask_after, _causal_mask)),
    Mistake("the mask applied only to the returned weights (zeroed after the softmax): the output is computed "
            "unmasked, so every query still sees the future", _FIX_CAUSAL,
            lambda x, params, h: (_mha(x, params, h)[0], _mha(x, params, h)[1] * _causal_mask(x.shape[1]))),
    Mistake("the mask applied only to the returned weights (masked and renormalised): the output is computed "
            "unmasked, so every query still sees the future", _FIX_CAUSAL,
            lambda x, params, h: (_mha(x, params, h)[0], _mha(x, params, h, _causal_mask(x.shape[1]))[1])),
    Mistake("the causal mask built for x.shape[0] = B positions (the batch size) instead of T = x.shape[1]",
            "T = x.shape[1]: x is (B, T, d_model)",
            lambda x, params, h: _mha(x, params, h, _mask_of_size(x.shape[0], x.shape[1]))),
    Mistake("the causal mask built from x.shape[0] = B (the batch size) instead of T = x.shape[1]: a (B, B) mask",
            "T = x.shape[1]: x is (B, T, d_model)", partial(_mha_written, mask_T=lambda x: x.shape[0])),
    Mistake("the causal mask built from x.shape[-1] = d_model instead of T = x.shape[1]",
            "T = x.shape[1]: x is (B, T, d_model)", partial(_mha_written, mask_T=lambda x: x.shape[-1])),
    Mistake("the output bias b_o is forgotten", "add b_o after multiplying by W_o (when it is not None)",
            partial(_mha_written, mask_T=lambda x: x.shape[1], o_bias="never")),
    Mistake("the output bias b_o added before multiplying by W_o: (concat + b_o) @ W_o",
            "out = concat @ W_o + b_o: the bias comes after the product",
            partial(_mha_written, mask_T=lambda x: x.shape[1], o_bias="before")),
    Mistake("the output projection W_o is forgotten", "out = concat @ params.W_o (+ b_o)",
            lambda x, params, h: _mha_from_trace(lambda t, p: np.array(t["concat"]), x, params, h,
                                                 _causal_mask(x.shape[1]))),
), outputs=("out", "weights"), axes=_MHA_AXES,
    parts=(Part("scaled_dot_product_attention", lambda k: _causal_with(k, _causal_mask), _IN_HEADS),), edges=('B', 'T'))


def causal_multi_head_attention(fn) -> bool:
    """Check ``fn(x, params, h) -> (out, weights)``: causal self-attention, the mask built inside.

    >>> import mha_course as mc
    >>> causal_multi_head_attention(lambda x, p, h: mc.multi_head_attention(x, p, h, mc.causal_mask(x.shape[1])))
    ✔ causal_multi_head_attention: all 4 cases match
    True

    Shapes: x (B, T, d_model) -> out (B, T, d_model), weights (B, h, T, T), where query t
    attends keys 0..t. Cases: three sizes of B, T, d_model and h, with and without biases.
    """
    return CAUSAL_MULTI_HEAD_ATTENTION.check(fn)


def _block_params(d_model, bias, fields):
    """Number of scalars in the named fields of real MHAParams (fields like 'W_q', 'b_q')."""
    p = init_params(d_model, rng=np.random.default_rng(0), bias=bias)
    return int(sum(np.size(getattr(p, f)) for f in fields if getattr(p, f) is not None))


_COUNT_CASES = [(12, 3, False), (12, 4, True), (8, 8, True), (64, 16, False), (30, 5, True), (20, 2, False)]
_FIX_HEADS = "h does not change the count: the heads are slices of one d_model x d_model matrix"


def _count(k, per_bias=lambda d, h: d, per_matrix=lambda d, h: d * d, biases=None, always=False):
    """k matrices of per_matrix(d_model, h) scalars, and ``biases`` (default k) biases of
    per_bias(d_model, h) when bias (or ``always``: the flag ignored)."""
    n_b = k if biases is None else biases
    return lambda d_model, h, bias=False: k * per_matrix(d_model, h) + (
        n_b * per_bias(d_model, h) if bias or always else 0)


_FIX_BIAS = "each of the projections has its own bias vector of d_model numbers"


def count_mistakes(n, other):
    """The mistakes of a count of ``n`` d_model x d_model matrices and their biases: every wrong way
    of counting the matrices combined with every wrong way of counting the biases (each part named
    in the message). ``other`` = (name, fix, number of matrices) of the wrong-matrix-count mistake."""
    matrices = (  # (name, fix, number of matrices, scalars of one (d_model, h))
        ("", "", n, lambda d, h: d * d),
        (other[0], other[1], other[2], lambda d, h: d * d),
        ("each head counted with full-size d_model x d_model matrices (×h)", _FIX_HEADS, n, lambda d, h: h * d * d),
        (f"{n}·d_model·d_k: one head's columns, the ×h is forgotten; or {n}·h·d_k², each head's block counted "
         "as d_k x d_k (a head reads all d_model features), which gives the same numbers",
         "the heads together fill all d_model columns: each matrix is d_model x d_model", n, lambda d, h: d * (d // h)))
    if other[2] != n - 1:
        matrices += ((f"{n - 1} matrices, not {n}: one forgotten (V needs its own W_v too: V is not x itself)",
                      f"count all {n}: W_q, W_k and W_v, each d_model x d_model", n - 1, lambda d, h: d * d),)
    biases = (  # (name, fix, number of biases or None for as many as matrices, scalars of one (d_model, h))
        ("", "", None, lambda d, h: d),
        ("the biases are forgotten", "add d_model per bias vector when bias=True", 0, lambda d, h: 0),
        ("a bias counted as d_model² (a bias is a vector of d_model numbers)", "each bias adds d_model scalars",
         None, lambda d, h: d * d),
        ("one bias shared by the projections (d_model once)", _FIX_BIAS, 1, lambda d, h: d),
        ("biases of width d_k (one head's), not d_model", "a bias has d_model numbers: one per output column of "
         "its matrix (all heads)", None, lambda d, h: d // h),
        ("the biases counted per head too (×h)", "a bias has d_model numbers in all: its heads are slices of it",
         None, lambda d, h: h * d),
        ("one bias of h numbers per matrix (one per head), not d_model", "a bias has d_model numbers: one per "
         "output column of its matrix", None, lambda d, h: h),
        ("each bias counted as one number, not d_model", "a bias has d_model numbers: one per output column of its "
         "matrix", None, lambda d, h: 1),
        (f"one bias vector forgotten ({n - 1}·d_model, not {n}·d_model)", f"each of the {n} matrices has its own "
         "bias of d_model numbers", n - 1, lambda d, h: d),
        ("the bias flag ignored: the biases counted when bias=False too", "add the biases only when bias is True: "
         f"+ ({n} * d_model if bias else 0)", "always", lambda d, h: d))
    out = []
    for m_name, m_fix, k, per_matrix in matrices:
        for b_name, b_fix, n_b, per_bias in biases:
            if not (m_name or b_name) or (n_b == n - 1 and k != n):  # a matrix left out takes its bias along
                continue
            name = "; and ".join(x for x in (m_name, b_name) if x)
            fix = "; ".join(x for x in (m_fix, b_fix) if x)
            always = n_b == "always"
            n_b = k if n_b is None or always else n_b
            out.append(Mistake(name, fix, _count(k, per_bias, per_matrix, n_b, always)))
    return tuple(out)


def check_count(name, fields, other, extra=()):
    """An Exercise for a parameter count ``fn(d_model, h, bias=False)`` over the given MHAParams
    fields; ``other`` = (name, fix, number of matrices) of the wrong-matrix-count mistake; ``extra``:
    (name, fix, scalars added as a function of d_model) of a count that takes in another layer's."""
    n = sum(f.startswith("W") for f in fields)
    def reference(d_model, h, bias=False):
        return _block_params(d_model, bias, fields)
    more = tuple(Mistake(m, fix, lambda d_model, h, bias=False, _add=add: reference(d_model, h, bias) + _add(d_model))
                 for m, fix, add in extra)
    return Exercise(name, reference, lambda: [Case(c) for c in _COUNT_CASES], count_mistakes(n, other) + more)


PARAM_COUNT = check_count("param_count", ("W_q", "W_k", "W_v", "W_o", "b_q", "b_k", "b_v", "b_o"),
                          ("W_o is not counted (3·d_model²)", "count W_o too: 4 matrices", 3), extra=(
    ("a LayerNorm's gain and bias (2·d_model) counted too: they belong to the block around the attention, not to it",
     "count only W_q, W_k, W_v, W_o and their biases", lambda d: 2 * d),))


def param_count(fn) -> bool:
    """Check ``fn(d_model, h, bias=False) -> int``: the scalars of W_q, W_k, W_v, W_o (and biases).

    >>> param_count(lambda d_model, h, bias=False: 4 * d_model * d_model + (4 * d_model if bias else 0))
    ✔ param_count: all 6 cases match
    True

    Cases: several d_model and h, with and without biases; the count never depends on h.
    Exercises 0.3 and 4.4 use this checker.
    """
    return PARAM_COUNT.check(fn)

