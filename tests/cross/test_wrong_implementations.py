"""The tests can fail: each classic attention bug is caught by the checks the other files use.

``make_impl()`` builds a plain textbook multi-head attention (softmax, masks, split/combine,
scaled dot-product, the block). ``make_impl(defect=...)`` builds the same code with ONE
classic mistake. Every check in ``CHECKS`` is one of the assertion helpers from
``_mha_checks`` (the ones the parity and property tests run on ``mha_course``) applied to a
small fixed problem. The tests show:

- every check passes on the textbook implementation and on ``mha_course`` itself, and
- every defect makes the checks listed for it raise ``AssertionError``.
"""
import math
from types import SimpleNamespace

import numpy as np
import pytest

import mha_course as mc
from _mha_checks import (
    assert_causal,
    assert_dtype,
    assert_h1_is_sdpa,
    assert_h_independent,
    assert_mha_matches_torch,
    assert_permutation_equivariant,
    assert_rows_sum_to_one,
    assert_sdpa_matches_torch,
    assert_softmax_correct,
    assert_split_combine,
    assert_zero_rows_quietly,
    random_allowed,
)

# ----------------------------------------------------------------------------- implementations
DEFECTS = {  # name -> what the mistake is
    "no_scaling": "scores = Q K^T, never divided by sqrt(d_k)",
    "scale_by_d_k": "scores divided by d_k instead of sqrt(d_k)",
    "scale_by_d_model": "scores divided by sqrt(d_model) instead of sqrt(d_k)",
    "float64_scale": "scores / np.sqrt(d_k): a float64 scalar silently upcasts float32",
    "softmax_over_queries": "softmax over axis -2 (the queries) instead of the keys",
    "softmax_without_max": "exp(x) / sum(exp(x)) without subtracting the row max first",
    "no_empty_row_guard": "a fully masked row computes 0/0 = NaN",
    "mask_after_softmax": "masked entries zeroed after the softmax, rows not renormalised",
    "mask_inverted": "mask read as True = blocked (nn.MultiheadAttention's attn_mask convention)",
    "causal_upper": "causal mask as the upper triangle: queries look at the future",
    "causal_no_diagonal": "causal mask without its diagonal: a token cannot see itself",
    "always_causal": "a causal mask applied even when none was asked for",
    "padding_off_by_one": "padding mask keeps position `length` too (<= instead of <)",
    "split_without_transpose": "split_heads reshapes straight to (B, h, T, d_k)",
    "combine_without_transpose": "combine_heads reshapes (B, h, T, d_k) straight to (B, T, D)",
    "weights_averaged": "weights averaged over the heads (B, T, S) instead of per head",
    "heads_ignored": "h ignored: one head of width d_model, weights repeated h times",
    "no_output_projection": "the output projection W_o is forgotten",
    "values_from_W_k": "V projected with W_k instead of W_v",
    "bias_ignored": "the biases b_q, b_k, b_v, b_o are dropped",
    "context_ignored": "cross-attention takes keys and values from x instead of context",
}


def make_impl(defect=None):
    """The textbook functions, with the one ``defect`` (a key of DEFECTS) built in."""
    assert defect is None or defect in DEFECTS, defect

    def softmax(x, axis=-1):
        x = np.asarray(x)
        m = x.max(axis=axis, keepdims=True)
        z = x if defect == "softmax_without_max" else x - np.where(np.isfinite(m), m, 0)
        e = np.exp(z)
        total = e.sum(axis=axis, keepdims=True)
        return e / (total if defect == "no_empty_row_guard" else np.where(total == 0, 1, total))

    def causal_mask(T):
        upper = np.triu(np.ones((T, T), dtype=bool))
        return {"causal_upper": upper, "causal_no_diagonal": np.tril(upper.T, -1)}.get(
            defect, np.tril(np.ones((T, T), dtype=bool)))

    def padding_mask(lengths, S):
        pos, lengths = np.arange(S), np.asarray(lengths)[:, None]
        keep = pos <= lengths if defect == "padding_off_by_one" else pos < lengths
        return keep[:, None, None, :]  # (B, 1, 1, S)

    def scale(d_k, d_model, dtype):
        s = {"no_scaling": 1.0, "scale_by_d_k": 1 / d_k, "scale_by_d_model": 1 / math.sqrt(d_model),
             "float64_scale": 1 / np.sqrt(np.float64(d_k))}.get(defect, 1 / math.sqrt(d_k))
        return s if defect == "float64_scale" else dtype.type(s)

    def sdpa(Q, K, V, mask=None, d_model=None):
        d_k = Q.shape[-1]
        scores = Q @ np.swapaxes(K, -1, -2) * scale(d_k, d_model or d_k, Q.dtype)  # (..., T, S)
        if defect == "always_causal" and mask is None:
            mask = np.tril(np.ones(scores.shape[-2:], dtype=bool))
        if mask is not None and defect == "mask_inverted":
            mask = ~mask
        if mask is not None and defect != "mask_after_softmax":
            scores = np.where(mask, scores, -np.inf)
        axis = -2 if defect == "softmax_over_queries" else -1
        weights = softmax(scores, axis=axis)
        if mask is not None and defect == "mask_after_softmax":
            weights = np.where(mask, weights, 0)
        return weights @ V, weights

    def split_heads(x, h):
        B, T, D = x.shape
        if defect == "split_without_transpose":
            return x.reshape(B, h, T, D // h)
        return x.reshape(B, T, h, D // h).transpose(0, 2, 1, 3)  # (B, h, T, d_k)

    def combine_heads(x):
        B, h, T, d_k = x.shape
        if defect == "combine_without_transpose":
            return x.reshape(B, T, h * d_k)
        return x.transpose(0, 2, 1, 3).reshape(B, T, h * d_k)  # (B, T, D)

    def project(a, W, b):
        return a @ W if b is None or defect == "bias_ignored" else a @ W + b

    def multi_head_attention(x, params, h, mask=None, context=None):
        x = np.asarray(x)
        ctx = x if context is None or defect == "context_ignored" else context
        p = mc.MHAParams(*(None if a is None else np.asarray(a, x.dtype) for a in params))
        W_v = p.W_k if defect == "values_from_W_k" else p.W_v
        n_heads = 1 if defect == "heads_ignored" else h
        Q, K, V = (split_heads(project(a, W, b), n_heads) for a, W, b in
                   ((x, p.W_q, p.b_q), (ctx, p.W_k, p.b_k), (ctx, W_v, p.b_v)))
        heads, weights = sdpa(Q, K, V, mask, d_model=x.shape[-1])  # (B, h, T, d_k), (B, h, T, S)
        concat = combine_heads(heads)
        out = concat if defect == "no_output_projection" else project(concat, p.W_o, p.b_o)
        if defect == "weights_averaged":
            weights = weights.mean(axis=1)
        if defect == "heads_ignored":
            weights = np.repeat(weights, h, axis=1)
        return out, weights

    return SimpleNamespace(softmax=softmax, causal_mask=causal_mask, padding_mask=padding_mask,
                           sdpa=sdpa, split_heads=split_heads, combine_heads=combine_heads,
                           mha=multi_head_attention)


PACKAGE = SimpleNamespace(softmax=mc.softmax, causal_mask=mc.causal_mask, padding_mask=mc.padding_mask,
                          sdpa=mc.scaled_dot_product_attention, split_heads=mc.split_heads,
                          combine_heads=mc.combine_heads, mha=mc.multi_head_attention)


# ----------------------------------------------------------------------------- checks
def _problem(dtype=np.float64, B=2, T=5, S=None, D=12, bias=True, seed=0):
    rng = np.random.default_rng(seed)
    params = mc.init_params(D, rng=rng, bias=bias, dtype=dtype)
    x = rng.normal(size=(B, T, D)).astype(dtype)
    context = None if S is None else rng.normal(size=(B, S, D)).astype(dtype)
    return x, params, context, rng


def check_torch_mha(impl):
    x, params, _, rng = _problem()
    kw = dict(causal_fn=impl.causal_mask, padding_fn=impl.padding_mask)
    assert_mha_matches_torch(impl.mha, x, params, 3, **kw)
    assert_mha_matches_torch(impl.mha, x, params, 3, causal=True, **kw)
    assert_mha_matches_torch(impl.mha, x, params, 3, lengths=np.array([5, 2]), **kw)
    assert_mha_matches_torch(impl.mha, x, params, 3, allowed=random_allowed(rng, (2, 1, 5, 5)), **kw)
    xc, pc, context, _ = _problem(T=5, S=3, seed=1)
    assert_mha_matches_torch(impl.mha, xc, pc, 4, context=context, **kw)
    assert_mha_matches_torch(impl.mha, xc, pc, 4, context=context, lengths=np.array([3, 1]), **kw)
    x32, p32, _, _ = _problem(np.float32, bias=False, seed=2)
    assert_mha_matches_torch(impl.mha, x32, p32, 6, **kw)


def check_torch_sdpa(impl):
    rng = np.random.default_rng(3)
    Q, K, V = (rng.normal(size=(2, 3, n, d)) for n, d in ((5, 4), (5, 4), (5, 6)))
    assert_sdpa_matches_torch(impl.sdpa, Q, K, V)
    assert_sdpa_matches_torch(impl.sdpa, Q, K, V, causal=True, causal_fn=impl.causal_mask)
    assert_sdpa_matches_torch(impl.sdpa, Q, K, V, allowed=random_allowed(rng, (5, 5)))


def check_rows_sum_to_one(impl):
    x, params, _, rng = _problem()
    mask = random_allowed(rng, (2, 3, 5, 5), keep_one=False)
    mask[0, 0, 2] = False  # one query row with no key at all
    _, weights = impl.mha(x, params, 3, mask=mask)
    assert_rows_sum_to_one(weights, mask)


def check_softmax(impl):
    logits = np.array([[1e4, -1e4, 0.0, 1e4 - 1], [-1e4, -1e4, -1e4 + 2, -1e4]])
    for dtype in (np.float64, np.float32):
        for axis in (-1, 0):
            assert_softmax_correct(impl.softmax, logits.astype(dtype), axis)


def check_permutation(impl):
    x, params, _, _ = _problem()
    assert_permutation_equivariant(impl.mha, x, params, 3, np.array([3, 0, 4, 1, 2]))


def check_causal(impl):
    x, params, _, rng = _problem(T=6)
    changed = x.copy()
    changed[:, 3:] = rng.normal(size=changed[:, 3:].shape)
    assert_causal(impl.mha, x, changed, params, 3, 2, causal_fn=impl.causal_mask)


def check_h1_is_sdpa(impl):
    x, params, context, rng = _problem(S=4)
    assert_h1_is_sdpa(impl.mha, impl.sdpa, x, params, None, context)
    assert_h1_is_sdpa(impl.mha, impl.sdpa, x, params, random_allowed(rng, (2, 1, 5, 4)), context)


def check_split_combine(impl):
    x, _, _, _ = _problem(T=5, D=12)
    assert_split_combine(impl.split_heads, impl.combine_heads, x, 3)


def check_dtype(impl):
    x, params, _, _ = _problem(np.float32)
    heads = impl.split_heads(x, 3)
    assert_dtype([impl.softmax(x), heads, impl.combine_heads(heads)], np.float32, "softmax/split/combine")
    assert_dtype(impl.sdpa(heads, heads, heads), np.float32, "sdpa")
    assert_dtype(impl.mha(x, params, 3), np.float32, "multi_head_attention")


def check_h_independent(impl):
    x, params, _, _ = _problem()
    assert_h_independent(impl.mha, x, params)


def check_zero_rows(impl):
    x, params, _, _ = _problem(B=1, T=4)
    mask = np.ones((1, 1, 4, 4), bool)
    mask[..., 1, :] = False  # query 1 may attend nothing
    assert_zero_rows_quietly(impl.mha, x, params, 3, mask)


CHECKS = {f.__name__.removeprefix("check_"): f for f in (
    check_torch_mha, check_torch_sdpa, check_rows_sum_to_one, check_softmax, check_permutation,
    check_causal, check_h1_is_sdpa, check_split_combine, check_dtype, check_h_independent,
    check_zero_rows)}

# defect -> the checks that must catch it (every defect is caught by at least one)
CAUGHT_BY = {
    "no_scaling": ["torch_mha", "torch_sdpa"],
    "scale_by_d_k": ["torch_mha", "torch_sdpa"],
    "scale_by_d_model": ["torch_mha"],
    "float64_scale": ["dtype", "torch_mha"],
    "softmax_over_queries": ["torch_mha", "torch_sdpa", "rows_sum_to_one"],
    "softmax_without_max": ["softmax"],
    "no_empty_row_guard": ["zero_rows", "rows_sum_to_one"],
    "mask_after_softmax": ["torch_mha", "torch_sdpa", "rows_sum_to_one"],
    "mask_inverted": ["torch_mha", "causal"],
    "causal_upper": ["torch_mha", "torch_sdpa", "causal"],
    "causal_no_diagonal": ["torch_mha", "torch_sdpa"],
    "always_causal": ["torch_mha", "torch_sdpa", "permutation"],
    "padding_off_by_one": ["torch_mha"],
    "split_without_transpose": ["torch_mha", "split_combine"],
    "combine_without_transpose": ["torch_mha", "split_combine"],
    "weights_averaged": ["torch_mha", "h_independent"],
    "heads_ignored": ["torch_mha", "h_independent"],
    "no_output_projection": ["torch_mha", "h1_is_sdpa"],
    "values_from_W_k": ["torch_mha", "h1_is_sdpa"],
    "bias_ignored": ["torch_mha"],
    "context_ignored": ["torch_mha", "h1_is_sdpa"],
}
TORCH_CHECKS = {"torch_mha", "torch_sdpa"}


def _run(check, impl):
    if check in TORCH_CHECKS:
        from _mha_checks import require_torch
        require_torch()  # skip without torch; fail in CI (MHA_COURSE_REQUIRE_TORCH=1)
    CHECKS[check](impl)


def test_every_defect_is_described_and_caught_by_some_check():
    assert set(CAUGHT_BY) == set(DEFECTS)
    assert all(CAUGHT_BY.values())
    assert set().union(*CAUGHT_BY.values()) <= set(CHECKS)


@pytest.mark.parametrize("impl_name", ["textbook", "mha_course"])
@pytest.mark.parametrize("check", list(CHECKS))
def test_check_passes_on_a_correct_implementation(check, impl_name):
    """Control: the checks do not fail on everything."""
    _run(check, make_impl() if impl_name == "textbook" else PACKAGE)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the NaN-making defects warn, as they should
@pytest.mark.parametrize("defect,check", [(d, c) for d, cs in CAUGHT_BY.items() for c in cs])
def test_check_catches_the_defect(defect, check):
    with pytest.raises(AssertionError):
        _run(check, make_impl(defect))
