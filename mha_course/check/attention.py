"""Checkers for notebook 02: ``softmax``, ``scaled_dot_product_attention``, ``causal_mask``, ``padding_mask``.

Each case set varies every size (T, S, d_k, d_v, the batch axes), has logits that break a naive
softmax (rows of equal large logits, +-1000) and, where the exercise says so, rows that are
entirely -inf (2.1) or a query whose keys are all masked (2.4).
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np

from ..attention import causal_mask as _causal_mask
from ..attention import padding_mask as _padding_mask
from ..attention import scaled_dot_product_attention as _sdpa
from ..attention import softmax as _softmax
from .engine import Case, Exercise, Mistake
from .vocabulary import RENORMALISED_AFTER, TWICE_D_K

__all__ = ["softmax", "scaled_dot_product_attention", "causal_mask", "padding_mask",
           "SOFTMAX", "SDPA", "CAUSAL_MASK", "PADDING_MASK", "sdpa_scaled", "sdpa_inverted",
           "sdpa_mask_after", "sdpa_mask_ignored", "scores"]


def _softmax_textbook(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))  # an all -inf row: -inf - (-inf) = nan
    return e / e.sum(axis=axis, keepdims=True)


def _softmax_cases():
    rng = np.random.default_rng(20240501)
    equal = rng.normal(size=(3, 5)) * 2
    equal[1] = 1000.0  # a row of equal large logits
    masked = rng.normal(size=(2, 4, 6)) * 3 + 800 * (rng.random((2, 4, 1)) < 0.5)
    masked[0, 1, 2] = masked[1, 2, 0] = masked[1, 3, 5] = -np.inf  # masked entries, no whole row
    big = rng.normal(size=(4, 7)) + np.array([[1000.0], [0.0], [-1000.0], [-1000.0]])
    big[3] = -1000.0  # a row of equal large negative logits
    dead = rng.normal(size=(3, 6)) + 900
    dead[1] = -np.inf  # a row that is entirely -inf (every key masked)
    return [Case((equal,), "row 1 is 1000 everywhere"), Case((masked,), "some entries are -inf"),
            Case((big,), "rows near +1000, 0 and -1000"),
            Case((rng.normal(size=(5, 3)) * 2 + [[0], [950], [0], [0], [-900]], 0), "softmax over axis 0"),
            Case((rng.normal(size=(2, 5, 3)) + 700, 1), "softmax over axis 1, logits near 700"),
            Case((dead,), "row 1 is entirely -inf: it must give zeros")]


_FIX_AXIS = "use the given axis in both x.max(axis=axis, keepdims=True) and e.sum(axis=axis, keepdims=True)"


def _softmax_variant(shift, total, dead):
    """A learner's softmax: the maximum subtracted over ``shift`` ("axis", "all": the whole array,
    "none"), the sum over ``total`` ("axis", "all", "last"), and a row that is entirely -inf handled as
    ``dead`` ("zeros" as the reference, "nan": left to give nan, "uniform": -inf clamped to -1e30 first)."""
    def softmax_(x, axis=-1):
        x = np.asarray(x, dtype=float)
        if dead == "uniform":
            x = np.maximum(x, -1e30)  # an all -inf row becomes equal finite logits: uniform weights
        m = {"axis": lambda: x.max(axis=axis, keepdims=True), "all": lambda: np.max(x), "none": lambda: 0.0}[shift]()
        if dead == "zeros":
            m = np.where(np.isfinite(m), m, 0.0)
        e = np.exp(x - m)
        sums = {"axis": lambda: e.sum(axis=axis, keepdims=True), "all": lambda: e.sum(),
                "last": lambda: e.sum(axis=-1, keepdims=True)}[total]()
        return e / np.where(sums == 0, 1.0, sums) if dead == "zeros" else e / sums
    return softmax_


_SHIFTS = (("axis", "", ""),
           ("all", "subtracting the maximum of the whole array instead of each row's maximum",
            "z = x - x.max(axis=axis, keepdims=True)"),
           ("none", "softmax without subtracting the maximum (exp overflows to inf, giving nan)",
            "subtract each row's maximum first: z = x - x.max(axis=axis, keepdims=True)"))
_TOTALS = (("axis", "", ""),
           ("all", "dividing by the sum of the whole array instead of each row's sum",
            "e / e.sum(axis=axis, keepdims=True)"),
           ("last", "the maximum over the given axis but the sum over the last axis (two different axes)", _FIX_AXIS))
_DEAD_FIX = ("where the row maximum m is -inf use 0 instead (np.where(np.isfinite(m), m, 0)), and divide "
             "by 1 where the sum is 0, so such a row gives zeros")
_DEADS = (("zeros", "", ""),
          ("nan", "a row that is entirely -inf gives nan: its maximum is -inf, and -inf - (-inf) = nan", _DEAD_FIX),
          ("uniform", "a row that is entirely -inf gives uniform weights instead of zeros (-inf replaced by a "
           "large negative number, so every key of that row looks equal)", "keep -inf; " + _DEAD_FIX))


def _softmax_mistakes():
    """Every wrong maximum, wrong sum and wrong all -inf row, alone and combined (each part named).
    A row of -inf turns uniform only when its own maximum is subtracted; without it, 0/0 gives nan
    (and the sum of the whole array is never 0)."""
    out = []
    for shift, s_name, s_fix in _SHIFTS:
        for total, t_name, t_fix in _TOTALS:
            for dead, d_name, d_fix in _DEADS:
                if shift != "axis" and (dead == "uniform" or (dead == "nan" and total == "all")):
                    continue  # the same numbers as another: no row maximum to make the row equal, no 0 sum
                if shift != "axis" and dead == "nan":
                    d_name = "a row that is entirely -inf gives nan (0 / 0) instead of zeros"
                names = [n for n in (s_name, t_name, d_name) if n]
                if names:
                    out.append(Mistake("; and ".join(names), "; ".join(dict.fromkeys(f for f in (s_fix, t_fix, d_fix)
                                                                                     if f)),
                                       _softmax_variant(shift, total, dead)))
    return tuple(out)


_SOFTMAX_MISTAKES = _softmax_mistakes() + (
    Mistake("the axis argument is ignored (softmax always over the last axis)", _FIX_AXIS,
            lambda x, axis=-1: _softmax(x, axis=-1)),
    Mistake("softmax always over axis 0", _FIX_AXIS, lambda x, axis=-1: _softmax(x, axis=0)),
)
SOFTMAX = Exercise("softmax", _softmax, _softmax_cases, _SOFTMAX_MISTAKES)


def softmax(fn) -> bool:
    """Check a learner's ``softmax(x, axis=-1)``: x (...) -> same shape, sums to 1 along axis.

    >>> softmax(SOFTMAX.reference)  # the package's softmax
    ✔ softmax: all 6 cases match
    True

    Cases: 2-D and 3-D arrays of several sizes, rows of equal large logits, logits near +-1000,
    some -inf entries, axis 0 and 1, and a row that is entirely -inf (it must give zeros).
    """
    return SOFTMAX.check(fn)


def scores(Q, K, scale):
    """Q (..., T, d_k), K (..., S, d_k) -> Q Kᵀ * scale (..., T, S), for the wrong variants."""
    return np.matmul(Q, np.swapaxes(K, -1, -2)) * scale  # (..., T, d_k) x (..., d_k, S) -> (..., T, S)


def sdpa_scaled(scale_of, Q, K, V, mask=None):
    """Attention with scores * scale_of(Q, K) instead of / sqrt(d_k)."""
    s = scores(Q, K, scale_of(Q, K))
    w = _softmax(s if mask is None else np.where(mask, s, -np.inf))
    return np.matmul(w, V), w


def sdpa_inverted(Q, K, V, mask=None):
    """Attention whose mask keeps the keys where it is False."""
    return _sdpa(Q, K, V, None if mask is None else ~np.asarray(mask))


def sdpa_mask_after(Q, K, V, mask=None):
    """Attention masked after the softmax, without renormalising."""
    w = _softmax(scores(Q, K, 1 / math.sqrt(Q.shape[-1])))
    w = w if mask is None else np.where(mask, w, 0.0)  # rows no longer sum to 1
    return np.matmul(w, V), w


def sdpa_mask_ignored(Q, K, V, mask=None):
    """Attention that never applies its mask."""
    return _sdpa(Q, K, V)


def _sdpa_fill(fill, Q, K, V, mask=None):
    s = scores(Q, K, 1 / math.sqrt(Q.shape[-1]))
    w = _softmax(s if mask is None else np.where(mask, s, fill))
    return np.matmul(w, V), w


def _sdpa_mask_multiplied(Q, K, V, mask=None):
    s = scores(Q, K, 1 / math.sqrt(Q.shape[-1]))
    w = _softmax(s if mask is None else s * mask)  # masked scores become 0, not -inf
    return np.matmul(w, V), w


def _sdpa_textbook_softmax(Q, K, V, mask=None):
    s = scores(Q, K, 1 / math.sqrt(Q.shape[-1]))
    w = _softmax_textbook(s if mask is None else np.where(mask, s, -np.inf))
    return np.matmul(w, V), w


def _sdpa_query_axis(Q, K, V, mask=None):
    s = scores(Q, K, 1 / math.sqrt(Q.shape[-1]))
    w = _softmax(s if mask is None else np.where(mask, s, -np.inf), axis=-2)
    return np.matmul(w, V), w


def _sdpa_dot_T(Q, K, V, mask=None):
    """``Q @ K.T``: right for 2-D K; on a batched K, .T reverses every axis (a matmul error or wrong keys)."""
    s = np.matmul(Q, np.asarray(K).T) / math.sqrt(Q.shape[-1])
    w = _softmax(s if mask is None else np.where(mask, s, -np.inf))
    return np.matmul(w, V), w


def _sdpa_scaled_after(Q, K, V, mask=None):
    """The softmax of the unscaled scores, then the weights divided by sqrt(d_k)."""
    s = scores(Q, K, 1.0)
    w = _softmax(s if mask is None else np.where(mask, s, -np.inf)) / math.sqrt(Q.shape[-1])
    return np.matmul(w, V), w


def _sdpa_bool_index(Q, K, V, mask=None):
    """``s[~mask] = -inf``: boolean indexing needs a mask of the scores' own shape (no broadcasting)."""
    s = scores(Q, K, 1 / math.sqrt(Q.shape[-1]))
    if mask is not None:
        s[~np.asarray(mask)] = -np.inf  # IndexError for a (T, S) mask over batch axes
    w = _softmax(s)
    return np.matmul(w, V), w


def _sdpa_cases():
    rng = np.random.default_rng(20240502)

    def qkv(batch, T, S, d_k, d_v, scale=1.5):
        return tuple(rng.normal(size=(*batch, n, d)) * scale for n, d in ((T, d_k), (S, d_k), (S, d_v)))
    some = rng.random((5, 2)) < 0.5
    some[:, 0] = True  # a (T, S) mask, every query keeps a key
    dead = rng.random((3, 6, 8)) < 0.7
    dead[1, 4] = False  # query 4 of sequence 1 may attend no key
    return [Case(qkv((), 3, 5, 4, 6)), Case(qkv((2,), 4, 6, 7, 3), "a batch of 2"),
            Case((*qkv((2, 3), 5, 2, 9, 5), some), "batch axes (2, 3) and a (T, S) mask, True = may attend"),
            Case(qkv((2,), 7, 3, 5, 2, scale=12.0), "scores in the hundreds: exp overflows without the max"),
            Case((*qkv((3,), 6, 8, 6, 4), dead), "query 4 of sequence 1 may attend no key"),
            Case((*qkv((2,), 4, 4, 3, 5), np.tril(np.ones((4, 4), bool))), "self-attention sizes, T = S, and a causal mask")]


_FIX_SCALE = "divide the scores by np.sqrt(d_k), where d_k = Q.shape[-1]"
_SDPA_MISTAKES = (
    Mistake("no scaling of the scores", _FIX_SCALE, partial(sdpa_scaled, lambda Q, K: 1.0)),
    Mistake("scaling by d_k instead of √d_k", _FIX_SCALE, partial(sdpa_scaled, lambda Q, K: 1 / Q.shape[-1]),
            also=TWICE_D_K),
    Mistake("multiplying by √d_k instead of dividing", _FIX_SCALE,
            partial(sdpa_scaled, lambda Q, K: math.sqrt(Q.shape[-1]))),
    Mistake("scaling by √S (the number of keys) instead of √d_k", _FIX_SCALE,
            partial(sdpa_scaled, lambda Q, K: 1 / math.sqrt(K.shape[-2]))),
    Mistake("scaling by √T (the number of queries, Q.shape[-2]) instead of √d_k", _FIX_SCALE,
            partial(sdpa_scaled, lambda Q, K: 1 / math.sqrt(Q.shape[-2]))),
    Mistake("scaling by √d_v (the width of V, V.shape[-1]) instead of √d_k (the width of Q and K)", _FIX_SCALE,
            lambda Q, K, V, mask=None: sdpa_scaled(lambda q, k: 1 / math.sqrt(V.shape[-1]), Q, K, V, mask)),
    Mistake("d_k read from the first axis (Q.shape[0])", "d_k = Q.shape[-1], the size of the last axis",
            partial(sdpa_scaled, lambda Q, K: 1 / math.sqrt(Q.shape[0]))),
    Mistake("mask polarity inverted (the course's masks are True = may attend)",
            "keep the scores where mask is True: np.where(mask, scores, -np.inf)", sdpa_inverted),
    Mistake("the mask is never applied", "np.where(mask, scores, -np.inf) before the softmax, when mask "
            "is not None", sdpa_mask_ignored),
    Mistake("masking after the softmax without renormalising (rows no longer sum to 1)",
            "mask the scores before the softmax: np.where(mask, scores, -np.inf)", sdpa_mask_after),
    Mistake("multiplying the scores by the mask (masked scores become 0, not -inf, and still get weight)",
            "np.where(mask, scores, -np.inf) before the softmax", _sdpa_mask_multiplied),
    Mistake("masking with a large negative number such as -1e9: a query whose keys are all masked "
            "gets uniform weights instead of zeros",
            "fill with -np.inf and use your softmax of exercise 2.1, which turns an all -inf row into zeros",
            partial(_sdpa_fill, -1e9)),
    Mistake("a query whose keys are all masked gets nan (exp(-inf - (-inf)) = nan)",
            "use your softmax of exercise 2.1, which returns zeros for a row that is entirely -inf",
            _sdpa_textbook_softmax, also=RENORMALISED_AFTER),
    Mistake("the outputs in the wrong order", "return out, weights (in this order)",
            lambda Q, K, V, mask=None: _sdpa(Q, K, V, mask)[::-1]),
    Mistake("softmax over the queries (axis -2) instead of the keys",
            "normalise each query's scores over the keys: softmax(scores, axis=-1)", _sdpa_query_axis),
    Mistake("the 1/√d_k applied after the softmax (weights / √d_k): the scores must be scaled before it, and "
            "the rows no longer sum to 1", "scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k), then the softmax",
            _sdpa_scaled_after),
    Mistake("K.T on a batched array: .T reverses every axis, not only the last two",
            "np.swapaxes(K, -1, -2) (or K.swapaxes(-1, -2)) transposes the last two axes only", _sdpa_dot_T),
    Mistake("the mask applied by boolean indexing, scores[~mask] = -inf: an index needs the scores' own shape, "
            "so a (T, S) mask over batch axes raises an IndexError",
            "np.where(mask, scores, -np.inf) broadcasts the mask over the batch axes", _sdpa_bool_index),
)
SDPA = Exercise("scaled_dot_product_attention", _sdpa, _sdpa_cases, _SDPA_MISTAKES, outputs=("out", "weights"),
                axes={"out": ("query", "feature"), "weights": ("query", "key")}, edges=("T", "S"))


def scaled_dot_product_attention(fn) -> bool:
    """Check ``fn(Q, K, V, mask=None) -> (out, weights)`` against the package's.

    >>> import mha_course as mc
    >>> scaled_dot_product_attention(mc.scaled_dot_product_attention)
    ✔ scaled_dot_product_attention: all 8 cases match
    True

    Shapes: Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v) -> out (..., T, d_v),
    weights (..., T, S). Every case has other T, S, d_k, d_v and batch axes; a (T, S) mask,
    scores in the hundreds, and a (B, T, S) mask with a query whose keys are all masked.
    """
    return SDPA.check(fn)


def _tril(T, k=0):
    return np.tril(np.ones((T, T), dtype=bool), k=k)


_FIX_CAUSAL = "np.tril(np.ones((T, T), dtype=bool)): True on and below the diagonal"
_CAUSAL_MISTAKES = (
    Mistake("the upper triangle: each query looks at the future, not the past", _FIX_CAUSAL,
            lambda T: _tril(T).T),
    Mistake("the diagonal is missing: a token may not attend to itself (the first row is empty)",
            _FIX_CAUSAL, partial(_tril, k=-1)),
    Mistake("mask polarity inverted (True must mean 'may attend')", _FIX_CAUSAL, lambda T: ~_tril(T)),
    Mistake("nothing is masked", _FIX_CAUSAL, lambda T: np.ones((T, T), dtype=bool)),
    Mistake("the diagonal shifted by one (np.tril(..., k=1)): each query also sees the next token", _FIX_CAUSAL,
            partial(_tril, k=1)),
)
CAUSAL_MASK = Exercise("causal_mask", _causal_mask, lambda: [Case((6,)), Case((1,)), Case((1030,), "T = 1030, longer than a buffer built once for 256 or 1024 positions"), Case((2,))],
                       _CAUSAL_MISTAKES, axes={"result": ("query", "key")})


def causal_mask(fn) -> bool:
    """Check ``fn(T)``: T -> (T, T) bool, True on and below the diagonal.

    >>> causal_mask(lambda T: np.tril(np.ones((T, T), dtype=bool)))
    ✔ causal_mask: all 4 cases match
    True

    Cases: T = 6, 1, 9, 2.
    """
    return CAUSAL_MASK.check(fn)


def _padding_shape(shape, lengths, S):
    return (np.arange(S) < np.asarray(lengths)[:, None]).reshape(shape(len(lengths), S))


_FIX_PADDING = "(np.arange(S) < lengths[:, None])[:, None, None, :]  # (B, 1, 1, S)"
_PADDING_MISTAKES = (
    Mistake("mask polarity inverted: True marks the padding, but True must mean 'may attend'",
            _FIX_PADDING, lambda lengths, S: ~_padding_mask(lengths, S)),
    Mistake("off by one: position == length is padding, so compare with < not <=", _FIX_PADDING,
            lambda lengths, S: (np.arange(S) <= np.asarray(lengths)[:, None])[:, None, None, :]),
    Mistake("shape (B, S) without the two broadcast axes for heads and queries", _FIX_PADDING,
            partial(_padding_shape, lambda B, S: (B, S))),
    Mistake("shape (B, 1, S): one broadcast axis is missing (scores are (B, h, T, S))", _FIX_PADDING,
            partial(_padding_shape, lambda B, S: (B, 1, S))),
    Mistake("the key axis of length max(lengths) instead of S (the padded length the scores have)",
            "np.arange(S), not np.arange(lengths.max()): the mask has one column per key of the scores",
            lambda lengths, S: _padding_mask(lengths, int(np.max(lengths)))),
    Mistake("one mask for the whole batch, from the longest length: every sequence's own length is ignored",
            "compare with each sequence's length: np.arange(S) < lengths[:, None]",
            lambda lengths, S: _padding_mask(np.full(len(lengths), np.max(lengths)), S)),
    Mistake("one mask for the whole batch, from the first sequence's length", "compare with each sequence's "
            "length: np.arange(S) < lengths[:, None]", lambda lengths, S: _padding_mask(np.full(len(lengths),
                                                                                              lengths[0]), S)),
)
PADDING_MASK = Exercise(
    "padding_mask", _padding_mask,
    lambda: [Case((np.array([3, 5, 1]), 5)), Case((np.array([2, 0]), 4), "the second sequence has no real token"),
             Case((np.array([6, 1, 7, 4]), 7))],
    _PADDING_MISTAKES, axes={"result": ("batch", "head", "query", "key")})


def padding_mask(fn) -> bool:
    """Check ``fn(lengths, S)``: lengths (B,) ints in 0..S -> (B, 1, 1, S) bool, True = real key.

    >>> import mha_course as mc
    >>> padding_mask(mc.padding_mask)
    ✔ padding_mask: all 3 cases match
    True

    Cases: B = 3, 2, 4 and S = 5, 4, 7, one sequence with no real token.
    """
    return PADDING_MASK.check(fn)
