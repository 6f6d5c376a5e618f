"""mha_course.check, the core checkers: right code passes, each typical mistake is caught AND named.

The wrong implementations below are written the way a learner would write them (they do
not reuse the checkers' private variants), so the diagnosis is tested against independent code.
The rules that hold for every registered checker (its reference passes, each catalogued
mistake is named as itself and no other, unknown mistakes are localised) are in test_check_rules.py.
"""
import numpy as np
import pytest

import mha_course as mc
from mha_course import check

CHECKERS = ["softmax", "scaled_dot_product_attention", "split_heads", "combine_heads",
            "causal_mask", "padding_mask", "multi_head_attention"]


def run(capsys, checker, fn):
    """(result, printed text) of check.<checker>(fn)."""
    ok = getattr(check, checker)(fn)
    return ok, capsys.readouterr().out


# ---------------------------------------------------------------- the learner's code
def stable_softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - np.where(m == -np.inf, 0, m))  # a row that is all -inf stays exp(-inf) = 0
    s = e.sum(axis=axis, keepdims=True)
    return e / np.where(s == 0, 1, s)


def textbook_softmax(x, axis=-1):
    z = x - x.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def naive_softmax(x, axis=-1):
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def softmax_axis0(x, axis=-1):
    return stable_softmax(x, axis=0)


def softmax_last_axis_only(x, axis=-1):
    return stable_softmax(x)


def softmax_global_max(x, axis=-1):
    e = np.exp(x - x.max())
    return e / e.sum(axis=axis, keepdims=True)


def make_sdpa(scale="sqrt", mask_mode="before", fill=-np.inf):
    """A learner's attention with one knob turned; the defaults give a correct one."""
    def sdpa(Q, K, V, mask=None):
        d_k = Q.shape[-1]
        s = Q @ np.swapaxes(K, -1, -2)
        s = {"sqrt": s / np.sqrt(d_k), "none": s, "d_k": s / d_k, "T": s / np.sqrt(Q.shape[-2]),
             "S": s / np.sqrt(K.shape[-2])}[scale]
        if mask is not None and mask_mode == "before":
            s = np.where(mask, s, fill)
        elif mask is not None and mask_mode == "inverted":
            s = np.where(mask, -np.inf, s)
        w = mc.softmax(s) if fill == -np.inf else stable_softmax(s)
        if mask is not None and mask_mode == "after":
            w = w * mask
        return w @ V, w
    return sdpa


def own_softmax_sdpa(Q, K, V, mask=None):
    s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = textbook_softmax(s)  # nan when every key of a query is masked
    return w @ V, w


def split_correct(x, h):
    B, T, D = x.shape
    return x.reshape(B, T, h, D // h).transpose(0, 2, 1, 3)


def split_no_transpose(x, h):
    B, T, D = x.shape
    return x.reshape(B, h, T, D // h)


def split_wrong_order(x, h):
    B, T, D = x.shape
    return x.reshape(B, T, h, D // h).transpose(0, 2, 3, 1)


def combine_correct(x):
    B, h, T, d_k = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, T, h * d_k)


def combine_no_transpose(x):
    B, h, T, d_k = x.shape
    return x.reshape(B, T, h * d_k)


def combine_mean(x):
    return x.mean(axis=1)


def split_true_division(x, h):
    B, T, D = x.shape
    return x.reshape(B, T, h, D / h).transpose(0, 2, 1, 3)


def combine_over_batch(x):
    return np.concatenate([x[:, i] for i in range(x.shape[1])], axis=0)


def make_mha(project=True, average=False, scale="d_k", split=split_correct, combine=combine_correct,
             invert_mask=False):
    """A learner's multi-head attention with one knob turned; the defaults give a correct one."""
    def mha(x, params, h, mask=None, context=None):
        ctx = x if context is None else context
        lin = [(x, params.W_q, params.b_q), (ctx, params.W_k, params.b_k), (ctx, params.W_v, params.b_v)]
        Q, K, V = (a @ W + (0 if b is None else b) for a, W, b in lin)
        Qh, Kh, Vh = split(Q, h), split(K, h), split(V, h)
        d = {"d_k": Qh.shape[-1], "d_model": x.shape[-1]}[scale]
        s = Qh @ np.swapaxes(Kh, -1, -2) / np.sqrt(d)
        if mask is not None:
            s = np.where(~mask if invert_mask else mask, s, -np.inf)
        w = mc.softmax(s)
        heads = w @ Vh
        if average is True:  # each head projected by its rows of W_o, then averaged instead of summed
            d_k = heads.shape[-1]
            parts = [heads[:, i] @ params.W_o[i * d_k:(i + 1) * d_k] for i in range(h)]
            return np.mean(parts, axis=0) + (0 if params.b_o is None else params.b_o), w
        if average == "no projection":
            return heads.mean(axis=1), w
        concat = combine(heads)
        if not project:
            return concat, w
        return concat @ params.W_o + (0 if params.b_o is None else params.b_o), w
    return mha


# ---------------------------------------------------------------- right code passes
@pytest.mark.parametrize("name", CHECKERS)
def test_package_function_passes(capsys, name):
    ok, out = run(capsys, name, getattr(mc, name))
    assert ok is True
    assert out.startswith(f"✔ {name}: all ") and "✘" not in out


@pytest.mark.parametrize("name, fn", [
    ("softmax", stable_softmax),
    ("scaled_dot_product_attention", make_sdpa()),
    ("split_heads", split_correct),
    ("combine_heads", combine_correct),
    ("causal_mask", lambda T: np.tril(np.ones((T, T), dtype=bool))),
    ("padding_mask", lambda lengths, S: (np.arange(S) < np.asarray(lengths)[:, None])[:, None, None, :]),
    ("multi_head_attention", make_mha()),
])
def test_learner_style_correct_code_passes(capsys, name, fn):
    ok, out = run(capsys, name, fn)
    assert ok is True, out


# ---------------------------------------------------------------- each mistake is named
MISTAKES = [
    ("softmax", naive_softmax, "without subtracting the maximum"),
    ("softmax", softmax_axis0, "always over axis 0"),
    ("softmax", textbook_softmax, "entirely -inf gives nan"),
    ("softmax", softmax_last_axis_only, "axis argument is ignored"),
    ("softmax", softmax_global_max, "maximum of the whole array"),
    ("scaled_dot_product_attention", make_sdpa(scale="none"), "no scaling"),
    ("scaled_dot_product_attention", make_sdpa(scale="d_k"), "scaling by d_k instead of √d_k"),
    ("scaled_dot_product_attention", make_sdpa(scale="T"), "scaling by √T"),
    ("scaled_dot_product_attention", make_sdpa(scale="S"), "scaling by √S"),
    ("scaled_dot_product_attention", make_sdpa(mask_mode="inverted"), "mask polarity inverted"),
    ("scaled_dot_product_attention", make_sdpa(mask_mode="after"), "after the softmax without renormalising"),
    ("scaled_dot_product_attention", make_sdpa(fill=-1e9), "large negative number"),
    ("scaled_dot_product_attention", own_softmax_sdpa, "gets nan"),
    ("scaled_dot_product_attention", lambda Q, K, V, mask=None: make_sdpa()(Q, K, V, mask)[::-1],
     "the outputs in the wrong order"),
    ("split_heads", split_no_transpose, "without a transpose"),
    ("split_heads", split_wrong_order, "wrong transpose order (0, 2, 3, 1)"),
    ("combine_heads", combine_no_transpose, "without the transpose back"),
    ("combine_heads", combine_mean, "averaged instead of concatenated"),
    ("causal_mask", lambda T: np.triu(np.ones((T, T), dtype=bool)), "looks at the future"),
    ("causal_mask", lambda T: np.tril(np.ones((T, T), dtype=bool), k=-1), "diagonal is missing"),
    ("padding_mask", lambda lengths, S: (np.arange(S) >= np.asarray(lengths)[:, None])[:, None, None, :],
     "polarity inverted"),
    ("padding_mask", lambda lengths, S: np.arange(S) < np.asarray(lengths)[:, None], "broadcast axes"),
    ("multi_head_attention", make_mha(project=False), "output projection is forgotten"),
    ("multi_head_attention", make_mha(average=True), "averaged instead of concatenated"),
    ("multi_head_attention", make_mha(average="no projection"), "averaged instead of concatenated (and no"),
    ("multi_head_attention", make_mha(scale="d_model"), "√d_model instead of √d_k"),
    ("multi_head_attention", make_mha(split=split_no_transpose), "reshape without the transpose"),
    ("multi_head_attention", make_mha(combine=combine_no_transpose), "without the transpose back"),
    ("multi_head_attention", make_mha(invert_mask=True), "mask polarity inverted"),
    ("multi_head_attention", lambda x, p, h, mask=None, context=None: make_mha()(
        x, p._replace(b_q=None, b_k=None, b_v=None, b_o=None), h, mask, context), "the biases are ignored"),
    ("multi_head_attention", lambda x, p, h, mask=None, context=None: make_mha()(x, p, h, mask, None),
     "the context is ignored"),
    ("multi_head_attention", lambda *args: (make_mha()(*args)[0], make_mha()(*args)[1].mean(axis=1)),
     "per-head weights averaged over the heads"),
    # mistakes that were "not one of the mistakes I know"
    ("scaled_dot_product_attention", make_sdpa(scale="S"), "scaling by √S"),
    ("split_heads", split_true_division, "true division"),
    ("combine_heads", combine_over_batch, "concatenated over the batch axis"),
    ("multi_head_attention", lambda x, p, h, mask=None, context=None: make_mha()(x, p, h, None, context),
     "the mask is never passed on"),
    ("multi_head_attention", lambda x, p, h, mask=None, context=None: make_mha()(
        x, p._replace(b_o=None), h, mask, context), "the output bias b_o is forgotten"),
    ("multi_head_attention", lambda x, p, h, mask=None, context=None: make_mha()(
        x, p._replace(W_o=p.W_o.T), h, mask, context), "W_o is transposed"),
    ("multi_head_attention", make_mha(split=split_no_transpose, combine=combine_no_transpose),
     "split and combine both as a reshape without a transpose"),
]


@pytest.mark.parametrize("name, fn, diagnosis", MISTAKES, ids=[m[2] for m in MISTAKES])
def test_mistake_is_rejected_and_named(capsys, name, fn, diagnosis):
    ok, out = run(capsys, name, fn)
    assert ok is False
    assert out.startswith(f"✘ {name}: case ")
    assert f"Looks like: {diagnosis}" in out or (diagnosis in out.split("Looks like:")[1]), out
    assert "Fix:" in out and "called " in out and len(out.splitlines()) <= 6, out


def test_mismatch_shows_expected_and_received_values(capsys):
    ok, out = run(capsys, "scaled_dot_product_attention", make_sdpa(scale="d_k"))
    expected = [ln for ln in out.splitlines() if " expected [" in ln]
    received = [ln for ln in out.splitlines() if ln.strip().startswith("got ")]
    assert len(expected) == 1 and len(received) == 1
    assert expected[0].index("expected [") + 9 == received[0].index("got      [") + 9  # slices line up


def test_shape_mismatch_reports_both_shapes(capsys):
    ok, out = run(capsys, "combine_heads", combine_mean)
    assert "expected shape (2, 5, 12), got (2, 5, 4)" in out


# ---------------------------------------------------------------- never raises
def test_exception_in_learner_code_is_reported_with_its_line(capsys):
    def my_softmax(x, axis=-1):
        e = np.exp(x - x.max(axis=axis))  # keepdims forgotten
        return e / e.sum(axis=axis, keepdims=True)

    ok, out = run(capsys, "softmax", my_softmax)
    assert ok is False
    assert "it raised ValueError: operands could not be broadcast" in out
    assert "of my_softmax: e = np.exp(x - x.max(axis=axis))  # keepdims forgotten" in out
    assert "keepdims=True" in out.splitlines()[-1]


def test_exception_inside_the_package_points_at_the_learners_line(capsys):
    def my_split(x, h):
        return mc.split_heads(x, 5 * h)  # the package raises: 12 is not divisible by 15

    ok, out = run(capsys, "split_heads", my_split)
    assert ok is False and "it raised ValueError: d_model=12 is not divisible by h=15" in out
    assert "of my_split: return mc.split_heads(x, 5 * h)" in out


def test_any_exception_type_returns_false(capsys):
    def broken(T):
        return {}[T]

    ok, out = run(capsys, "causal_mask", broken)
    assert ok is False and "it raised KeyError: 6" in out


def test_stub_is_reported_as_not_written_yet(capsys):
    def my_causal(T):
        raise NotImplementedError("Exercise 2.3: a causal mask")

    ok, out = run(capsys, "causal_mask", my_causal)
    assert ok is False
    assert out == ("⋯ causal_mask: not finished yet — write the body of my_causal (replace its "
                   "`raise NotImplementedError` line), then run both cells again\n")


@pytest.mark.parametrize("fn, message", [
    (lambda Q, K, V, mask=None: mc.scaled_dot_product_attention(Q, K, V, mask)[0],
     "it returned one array of shape (3, 6), expected a tuple (out, weights)"),
    (lambda Q, K, V, mask=None: None, "it returned None"),
    (lambda Q, K, V, mask=None: (1, 2, 3), "it returned a tuple of 3 values"),
    (lambda Q, K, V, mask=None: "out", "it returned a str"),
    (lambda Q, K, V, mask=None: ({}, {}), "out: expected an array of numbers, got a value of type dict"),
])
def test_wrong_return_type(capsys, fn, message):
    ok, out = run(capsys, "scaled_dot_product_attention", fn)
    assert ok is False and message in out, out


def test_wrong_arguments_get_a_signature_hint(capsys):
    ok, out = run(capsys, "softmax", lambda x: stable_softmax(x))
    assert ok is False and "takes 1 positional argument but 2 were given" in out
    assert "same arguments as mc.softmax(x, axis=-1)" in out


def test_float_mask_is_rejected_with_dtype_message(capsys):
    ok, out = run(capsys, "causal_mask", lambda T: np.tril(np.ones((T, T))))
    assert ok is False and "dtype is float64; masks are boolean" in out


def test_changing_the_input_in_place_is_caught(capsys):
    def my_softmax(x, axis=-1):
        x -= x.max(axis=axis, keepdims=True)
        np.exp(x, out=x)
        x /= x.sum(axis=axis, keepdims=True)
        return x

    ok, out = run(capsys, "softmax", my_softmax)
    assert ok is False and "changed its argument x in place" in out


def test_not_a_function(capsys):
    ok, out = run(capsys, "softmax", np.zeros(3))
    assert ok is False and "expected a function, got a value of type ndarray" in out


def test_feedback_is_deterministic(capsys):
    outs = [run(capsys, "multi_head_attention", make_mha(scale="d_model"))[1] for _ in range(2)]
    assert outs[0] == outs[1]
    assert "0x" not in outs[0]


def test_learner_overflow_warnings_are_silenced(capsys, recwarn):
    ok, out = run(capsys, "softmax", naive_softmax)
    assert ok is False and not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


# ---------------------------------------------------------------- the generic helper
def test_matches_generic_helper(capsys):
    p = mc.init_params(6, rng=np.random.default_rng(0), bias=True)
    count = check.Mistake("biases not counted", "add 4 * d_model", lambda p: 4 * p.d_model ** 2)
    assert check.matches(lambda p: sum(a.size for a in p if a is not None), mc.count_params, [(p,)],
                         "count_params", [count])
    assert capsys.readouterr().out == "✔ count_params: the case matches\n"
    assert not check.matches(lambda p: 4 * p.W_q.shape[0] ** 2, mc.count_params, [(p,)],
                             "count_params", [count])
    out = capsys.readouterr().out
    assert "result: expected 168, got 144" in out and "Looks like: biases not counted" in out


def test_unknown_mistake_says_so(capsys):
    ok, out = run(capsys, "softmax", lambda x, axis=-1: stable_softmax(x, axis) * 0.37)
    assert ok is False and "not one of the mistakes I know" in out


def test_a_factor_built_from_nothing_the_exercise_has_is_still_named_when_simple(capsys):
    ok, out = run(capsys, "softmax", lambda x, axis=-1: stable_softmax(x, axis) * 0.5)
    assert ok is False and "Found: every value of result is 1/2 times the expected one" in out, out


# ---------------------------------------------------------------- fakes that fit fixed sizes
def sdpa_halved(Q, K, V, mask=None):
    s = Q @ np.swapaxes(K, -1, -2) / 2.0  # right only when d_k = 4
    w = mc.softmax(s if mask is None else np.where(mask, s, -np.inf))
    return w @ V, w


def mha_d_k_12(x, params, h, mask=None, context=None):
    d_k = 12 // h  # right only when d_model = 12

    def split(a):
        return a.reshape(a.shape[0], a.shape[1], h, d_k).transpose(0, 2, 1, 3)
    return make_mha(split=lambda a, h: split(a))(x, params, h, mask, context)


def softmax_stable_in_2d(x, axis=-1):
    if x.ndim == 2 and axis == -1:
        return stable_softmax(x, axis)
    return naive_softmax(x, axis)  # what the old cases never tried with large logits


CAUSAL_TABLE = {T: np.tril(np.ones((T, T), dtype=bool)) for T in (1, 4, 7)}  # the old cases
CROSSOVER_TABLE = {1: 2, 8: 16, 64: 128, 768: 1536}  # the old cases


@pytest.mark.parametrize("name, fn", [
    ("scaled_dot_product_attention", sdpa_halved),
    ("multi_head_attention", mha_d_k_12),
    ("softmax", softmax_stable_in_2d),
    ("causal_mask", lambda T: CAUSAL_TABLE[T]),
    ("split_heads", lambda x, h: split_correct(x, h) if x.shape[-1] == 12 else x.reshape(
        x.shape[0], x.shape[1], h, 12 // h).transpose(0, 2, 1, 3)),
], ids=["scores / 2.0", "d_k = 12 // h", "softmax stable only in 2-D", "table of T values", "split d_k = 12 // h"])
def test_a_fake_fitted_to_fixed_sizes_fails(capsys, name, fn):
    ok, out = run(capsys, name, fn)
    assert ok is False and out.startswith(f"✘ {name}: case "), out


def test_checks_crossover_table_fails(capsys):
    ok, out = run(capsys, "crossover_seq_len", lambda d_model: CROSSOVER_TABLE[d_model])
    assert ok is False and "it raised KeyError" in out


def test_cases_vary_every_size():
    """Across the cases of sdpa and MHA, every size takes at least three values."""
    sdpa = [c.args for c in check.catalogue()["scaled_dot_product_attention"].cases()]
    sizes = {"T": {q.shape[-2] for q, *_ in sdpa}, "S": {k.shape[-2] for _, k, *_ in sdpa},
             "d_k": {q.shape[-1] for q, *_ in sdpa}, "d_v": {a[2].shape[-1] for a in sdpa},
             "batch": {q.shape[:-2] for q, *_ in sdpa}}
    mha = [c.args for c in check.catalogue()["multi_head_attention"].cases()]
    sizes.update({"B": {a[0].shape[0] for a in mha}, "T_mha": {a[0].shape[1] for a in mha},
                  "d_model": {a[0].shape[2] for a in mha}, "h": {a[2] for a in mha},
                  "d_k_mha": {a[0].shape[2] // a[2] for a in mha}})
    assert all(len(v) >= 3 for v in sizes.values()), sizes


def test_rows_that_break_naive_code_are_in_the_cases():
    xs = [c.args[0] for c in check.catalogue()["softmax"].cases()]
    equal_large = any((np.ptp(row) == 0 and abs(row[0]) >= 1000) for x in xs for row in x.reshape(-1, x.shape[-1]))
    all_masked = any(np.isneginf(row).all() for x in xs for row in x.reshape(-1, x.shape[-1]))
    assert equal_large and all_masked
    sdpa_masks = [c.args[3] for c in check.catalogue()["scaled_dot_product_attention"].cases() if len(c.args) > 3]
    assert any((~np.asarray(m)).all(axis=-1).any() for m in sdpa_masks)


def test_softmax_and_attention_agree_on_a_fully_masked_row(capsys):
    """2.1 tests rows that are entirely -inf, as its prose promises, so the textbook softmax fails
    there first; 2.4's feedback for the same slip points back to the learner's own softmax."""
    ok, out = run(capsys, "softmax", textbook_softmax)
    assert not ok and "entirely -inf" in out
    ok, out = run(capsys, "scaled_dot_product_attention", own_softmax_sdpa)
    assert not ok and "your softmax of exercise 2.1" in out and "mc.softmax" not in out
