"""Mistakes derived from the exercise (check/derive.py): each family named only when it gives the
learner's numbers on every case, in the exercise's symbols; several are named together."""
import contextlib
import io
import math

import numpy as np
import pytest

import mha_course as mc
from mha_course.check import derive, engine
from mha_course.subquadratic import elu_feature_map


def _scores(Q, K):
    """Q (..., T, d_k), K (..., S, d_k) -> scores (..., T, S)."""
    return Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])


def _cases():
    rng = np.random.default_rng(7)
    return [engine.Case((rng.normal(size=(T, d)), rng.normal(size=(S, d)))) for T, S, d in
            ((3, 5, 4), (4, 6, 9), (2, 7, 16), (5, 3, 25))]


SCORES = engine.Exercise("scores", _scores, _cases, register=False)


def verdict(capsys, fn, exercise=SCORES):
    ok = exercise.check(fn)
    return ok, capsys.readouterr().out


@pytest.mark.parametrize("fn, words", [
    (lambda Q, K: Q @ np.swapaxes(K, -1, -2) / Q.shape[-1], "1/sqrt(d_k)"),
    (lambda Q, K: Q @ np.swapaxes(K, -1, -2), "sqrt(d_k)"),
    (lambda Q, K: -_scores(Q, K), "opposite sign"),
    (lambda Q, K: _scores(Q, K)[:, ::-1], "reverse order along its key (S) axis"),
    (lambda Q, K: _scores(Q, K).T, "axes swapped"),
    (lambda Q, K: _scores(Q, K[:, ::-1]), "K with its feature (d_k) axis reversed"),
])
def test_each_output_family_is_named_in_the_docstrings_symbols(capsys, fn, words):
    ok, out = verdict(capsys, fn)
    assert ok is False and "Found" in out and words in out, out
    assert "not one of the mistakes I know" not in out


def test_a_change_that_fits_only_some_cases_is_not_named(capsys):
    def half(Q, K):
        s = _scores(Q, K)
        return s / np.sqrt(Q.shape[-1]) if len(Q) == 3 else s * 1.37
    ok, out = verdict(capsys, half)
    assert ok is False and "Found" not in out and "not one of the mistakes I know" in out, out


def test_two_derivations_giving_the_same_numbers_are_both_named(capsys):
    symmetric = engine.Exercise("gram", lambda Q: Q @ Q.T * np.arange(len(Q))[:, None],
                                lambda: [engine.Case((np.arange(6.0).reshape(3, 2),)),
                                         engine.Case((np.eye(4)[:, :3] + 1,))], register=False)
    ok, out = verdict(capsys, lambda Q: -(Q @ Q.T * np.arange(len(Q))[:, None]), symmetric)
    assert ok is False and "opposite sign" in out, out


def test_sizes_come_from_the_docstring_and_whole_number_arguments():
    Q, K = np.zeros((3, 8)), np.zeros((5, 8))
    assert derive.case_sizes(SCORES, (Q, K)) == {"T": 3.0, "d_k": 8.0, "Q.shape[0]": 3.0, "Q.shape[-1]": 8.0,
                                                  "S": 5.0, "K.shape[0]": 5.0, "K.shape[-1]": 8.0}
    mha = engine.catalogue()["multi_head_attention"]
    x, params, h = mha.prepared()[0][0].args[:3]
    sizes = derive.case_sizes(mha, (x, params, h))
    assert sizes["d_k"] == sizes["d_model"] / h


def test_axis_names_come_from_the_declaration_then_the_docstring():
    assert derive.axis_names(SCORES, "result", 2) == ["query (T)", "key (S)"]
    sdpa = engine.catalogue()["scaled_dot_product_attention"]
    assert derive.axis_names(sdpa, "weights", 3) == ["axis 0", "query", "key"]


def test_a_mutant_of_the_reference_is_named_by_its_class(capsys):
    """ALiBi's slopes with 2^(-4k/n) for 2^(-8k/n): the constant, said with the reference's numbers."""
    pytest.importorskip("mha_course.check.mutants")
    from mha_course import check
    ok = check.alibi_slopes(lambda h: mc.alibi_slopes(h) ** 0.5)
    out = capsys.readouterr().out
    assert ok is False and "the number -4.0 where -8.0 belongs" in out, out
    assert "square root of the expected value" in out, out  # the same numbers: both are named


# ---------------------------------------------------------------------------------------
# the families derived from the reference's own code (mutant_sites' diagnosis-only sites):
# each shown with wrong implementations written for this test, on at least two exercises
# ---------------------------------------------------------------------------------------

def _first(x, i):
    """x (n, n, m), i -> (n, m): item i of axis 1, doubled."""
    return x[:, i] * 2.0


COLUMN = engine.Exercise("column", _first, lambda: [engine.Case((np.arange(32.0).reshape(4, 4, 2) ** 1.5, 1)),
                                                     engine.Case((np.arange(75.0).reshape(5, 5, 3) - 3, 3))],
                         register=False)


def _patched_first_axis(corrupt, clean, head):
    out = np.copy(corrupt)
    out[head, ...] = clean[head, ...]
    return out


def _patched_first_item(corrupt, clean, head):
    out = np.array(corrupt)
    out[0][head] = clean[0][head]
    return out


@pytest.mark.parametrize("checker, fn, words", [
    ("patched_heads", _patched_first_axis, "out[head] = clean[head] where out[:, head] = clean[:, head] belongs"),
    ("patched_heads", _patched_first_item, "out[0, head] = clean[0, head] where out[:, head] = clean[:, head] belongs (only the first item of the first axis)"),
    (COLUMN, lambda x, i: 2 * x[i], "return x[i] * 2.0 where return x[:, i] * 2.0 belongs (the index on another axis)"),
])
def test_an_index_on_another_axis_is_named_with_the_references_line(capsys, checker, fn, words):
    from mha_course import check
    ok = checker.check(fn) if isinstance(checker, engine.Exercise) else getattr(check, checker)(fn)
    out = capsys.readouterr().out
    assert ok is False and f"Found: {words}" in out and "not one of the mistakes" not in out, out


def _alibi_extra_first(h):
    n = 2 ** int(np.log2(h))
    own = [2.0 ** (-8.0 * k / n) for k in range(1, n + 1)]
    extra = [2.0 ** (-8.0 * k / (2 * n)) for k in range(1, 2 * n + 1, 2)][:h - n]
    return np.array(extra + own)


def _state_dict_kqv(params):
    from mha_course.lessons.bridge import torch_state_dict
    state = torch_state_dict(params)
    if "in_proj_bias" in state:
        b = np.hstack([params.b_k, params.b_q, params.b_v])
        state["in_proj_bias"] = b
    return state


@pytest.mark.parametrize("checker, fn, words", [
    ("alibi_slopes", _alibi_extra_first, "[geometric(2 * n)[0::2][:h - n], geometric(n)] where"),
    ("torch_state_dict", _state_dict_kqv, "[params.b_k, params.b_q, params.b_v] where [params.b_q, params.b_k"),
])
def test_parts_joined_in_another_order_are_named(capsys, checker, fn, words):
    from mha_course import check
    ok = getattr(check, checker)(fn)
    out = capsys.readouterr().out
    assert ok is False and words in out and "not one of the mistakes" not in out, out


def _pe_base(base):
    def pe(T, d_model):
        angles = np.arange(T)[:, None] / base ** (2 * (np.arange(d_model) // 2) / d_model)
        return np.where(np.arange(d_model) % 2 == 0, np.sin(angles), np.cos(angles))
    return pe


@pytest.mark.parametrize("checker, fn, words", [
    ("sinusoidal_positions", _pe_base(1e5), "the number 100000.0 where 10000.0 belongs"),
    ("sinusoidal_positions", _pe_base(1e3), "the number 1000.0 where 10000.0 belongs"),
    ("score_bytes", lambda B, h, T, bytes_per_number=4: 10 * B * h * T * T * bytes_per_number,
     "10 (a zero too many?) times the expected one"),
    ("kv_bytes_per_token", lambda layers, h, h_kv, d_k, b: 20 * layers * h_kv * d_k * b,
     "10 (a zero too many?) times the expected one"),
])
def test_a_zero_too_many_or_too_few_is_named(capsys, checker, fn, words):
    from mha_course import check
    ok = getattr(check, checker)(fn)
    out = capsys.readouterr().out
    assert ok is False and words in out and "not one of the mistakes" not in out, out


def _attend(Q, K, V):
    """Q (T, d_k), K (S, d_k), V (S, d_v) -> out (T, d_v)."""
    s = Q @ K.T / np.sqrt(Q.shape[-1])
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ V


def _attend_cases():
    rng = np.random.default_rng(3)
    return [engine.Case((rng.normal(size=(T, d)), rng.normal(size=(S, d)), rng.normal(size=(S, e))))
            for T, S, d, e in ((3, 5, 4, 9), (4, 2, 16, 3), (2, 6, 9, 5))]


ATTEND = engine.Exercise("attend", _attend, _attend_cases, register=False)


def _group(h, h_kv):
    """h, h_kv -> (h,): the key/value head of each query head."""
    return np.arange(h) // (h // h_kv)


GROUP = engine.Exercise("group", _group, lambda: [engine.Case(c) for c in ((8, 2), (12, 3), (6, 6), (16, 4))],
                        register=False)


def _softmax_default(x):
    """x (n, m) -> (n, m): a softmax over each row."""
    return mc.softmax(x * 2.0)


SOFT = engine.Exercise("soft", _softmax_default, lambda: [engine.Case((np.arange(12.0).reshape(3, 4) / 7,)),
                                                          engine.Case((np.cos(np.arange(10.0)).reshape(2, 5),))],
                       register=False)


@pytest.mark.parametrize("exercise, fn, words", [
    (ATTEND, lambda Q, K, V: mc.softmax(Q @ K.T / np.sqrt(V.shape[1])) @ V,
     "V.shape where Q.shape belongs (V read in place of Q)"),
    (GROUP, lambda h, h_kv: np.array([i // h_kv for i in range(h)]), "h_kv where h // h_kv belongs"),
    (SOFT, lambda x: np.exp(2 * x) / np.exp(2 * x).sum(axis=0), "the softmax over axis 0 where axis -1 belongs"),
])
def test_the_references_own_slips_are_named_in_its_code(capsys, exercise, fn, words):
    ok, out = verdict(capsys, fn, exercise)
    assert ok is False and words in out and "not one of the mistakes" not in out, out


@pytest.mark.parametrize("checker, fn, words", [
    ("qkv_param_count", lambda d_model, h, bias=False: 3 * (d_model / h) * d_model * h,
     "Looks like: the biases are forgotten."),
    ("param_count", lambda d_model, h, bias=False: 4.0 * d_model * d_model * h + (4 * d_model if bias else 0),
     "Looks like: each head counted with full-size d_model x d_model matrices (×h)."),
    ("max_seq_len", lambda budget_bytes, B, h, bytes_per_number=4: float(math.isqrt(budget_bytes // (h * bytes_per_number))),
     "B is forgotten: every sequence has its own scores; and the count is a float where the signature states an int"),
    ("max_seq_len", lambda budget_bytes, B, h, bytes_per_number=4: math.isqrt(budget_bytes // (B * h)) * 1.0,
     "and the count is a float where the signature states an int"),
])
def test_a_whole_float_with_a_catalogued_mistake_is_named(capsys, checker, fn, words):
    """A whole float for an int: named beside the mistake where the signature says -> int (5.4),
    and not held against a count whose signature does not (0.3 and 1.2 accept 432.0 for 432)."""
    from mha_course import check
    ok = getattr(check, checker)(fn)
    out = capsys.readouterr().out
    assert ok is False and words in out, out
    assert (checker == "max_seq_len") == ("is a float where the signature states an int" in out), out


def _alibi_base(numerator):
    def slopes(h):
        def geometric(n):
            return 2.0 ** (numerator * np.arange(1, n + 1) / n)
        n = 2 ** int(math.floor(math.log2(h)))
        return geometric(h) if n == h else np.concatenate([geometric(n), geometric(2 * n)[0::2][:h - n]])
    return slopes


@pytest.mark.parametrize("checker, fn, words", [
    ("kv_head_index", lambda h, h_kv: np.arange(1, h + 1) // (h // h_kv),
     "np.arange(1, h + 1) where np.arange(h) belongs (the range shifted by one)"),
    (GROUP, lambda h, h_kv: (np.arange(h) - 1) // (h // h_kv), "shifted by one"),  # said of the output here
    ("alibi_slopes", _alibi_base(-1.0), "the number -1.0 where -8.0 belongs"),
    ("work_growth", lambda T, d: (4 * (2 * T) ** 2 * d + 16 * T * d * d) / (4 * T * T * d + 8 * T * d * d) - 1,
     "result is one less than expected on every case"),
])
def test_a_range_a_constant_or_a_ratio_off_by_one_is_named(capsys, checker, fn, words):
    from mha_course import check
    ok = checker.check(fn) if isinstance(checker, engine.Exercise) else getattr(check, checker)(fn)
    out = capsys.readouterr().out
    assert ok is False and words in out and "not one of the mistakes" not in out, out


def _featured(x, y):
    """x (n, d), y (d, m) -> (n, m): the feature map of x, times y."""
    return elu_feature_map(x) @ y


FEATURED = engine.Exercise("featured", _featured, lambda: [engine.Case((np.linspace(-2, 2, 12).reshape(3, 4),
                                                                         np.arange(8.0).reshape(4, 2))),
                                                            engine.Case((np.cos(np.arange(10.0)).reshape(5, 2),
                                                                         np.ones((2, 3))))], register=False)


def test_a_package_step_left_out_is_named_by_its_function(capsys):
    ok, out = verdict(capsys, lambda x, y: x @ y, FEATURED)
    assert ok is False and "the elu_feature_map left out" in out, out


def test_a_finite_mask_where_minus_inf_belongs_is_named_in_both_forms():
    """An additive -1e9 mask, and np.where(mask, s, -1e9): a query that may attend no key is not given zeros."""
    from mha_course import check as _check

    def weights_of(s):
        e = np.exp(s - s.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    def additive(Q, K, V, mask=None):
        s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
        s = s if mask is None else s + np.where(mask, 0.0, -1e9)
        w = weights_of(s)
        return w @ V, w

    def filled(Q, K, V, mask=None):
        s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
        s = s if mask is None else np.where(mask, s, -1e9)
        w = weights_of(s)
        return w @ V, w
    for fn in (additive, filled):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert not _check.scaled_dot_product_attention(fn)
        said = buf.getvalue()  # the additive form by the derived class; the filled one by 2.4's own catalogue
        assert "not one of the mistakes" not in said and "1e9" in said and "-inf" in said, said


def test_mutant_text_shows_the_argument_not_its_check():
    assert derive._short("g / math.sqrt(_validate.positive_int(d_k, 'd_k'))") == "g / math.sqrt(d_k)"


def test_two_outputs_each_wrong_by_its_own_slip_are_named_together(capsys):
    import mha_course.check as check
    assert check.matmul_backward(lambda a, b, g: (g @ np.linalg.pinv(b), np.linalg.pinv(a) @ g)) is False
    out = capsys.readouterr().out
    assert "pinv where np.swapaxes(b, -1, -2) belongs; and" in out and "np.swapaxes(a, -1, -2) belongs" in out, out
    # one output right, the other wrong by a slip no mutant makes: nothing is claimed for it
    assert check.matmul_backward(lambda a, b, g: (g @ np.linalg.pinv(b), np.sin(a.T @ g))) is False
    assert "Found" not in capsys.readouterr().out


def test_a_reshape_where_a_transpose_belongs_is_named_from_the_layout(capsys):
    def heads(x):
        """x (B, T, h, d) -> (B, h, T, d)"""
        return np.ascontiguousarray(np.swapaxes(x, 1, 2))
    rng = np.random.default_rng(0)
    toy = engine.Exercise("toy_heads", heads, lambda: [engine.Case((rng.normal(size=s),)) for s in
                                                      ((2, 3, 4, 5), (1, 5, 2, 3), (3, 2, 6, 2))], register=False)
    assert toy.check(lambda x: x.reshape(x.shape[0], x.shape[2], x.shape[1], x.shape[3])) is False
    assert "read in the axis order" in capsys.readouterr().out


def test_one_change_made_at_every_place_it_fits_is_derived(capsys):
    import mha_course.check as check

    def norm(x, eps=1e-5):
        m = x.mean(axis=(-2, -1), keepdims=True)
        v = ((x - m) ** 2).mean(axis=(-2, -1), keepdims=True)  # the same wrong axes in both reductions
        return (x - m) / np.sqrt(v + eps)
    assert check.layer_norm(norm) is False
    assert "axis (-2, -1) where axis -1 belongs (at each of the 2 places it appears)" in capsys.readouterr().out


def test_a_failing_edge_case_is_said_with_its_note_and_an_ordinary_one_is_not(capsys):
    import mha_course.check as check

    def attention(Q, K, V, mask=None):
        out, w = mc.scaled_dot_product_attention(Q, K, V, mask)
        return (out * 1.001, w) if mask is not None and not mask.any(-1).all() else (out, w)  # only a row with no key
    assert check.scaled_dot_product_attention(attention) is False
    out = capsys.readouterr().out
    assert "right on every case but “" in out or "wrong on every case described with “" in out, out


def _own_softmax_max_over_queries(Q, K, V, mask=None):
    """A hand-written softmax whose max runs over the queries (axis -2) with no guard for -inf."""
    s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    e = np.exp(s - s.max(axis=-2, keepdims=True))
    w = e / e.sum(-1, keepdims=True)
    return w @ V, w


def test_a_slip_inside_a_helper_with_an_unguarded_nan_is_named_with_both(capsys):
    from mha_course import check
    assert not check.scaled_dot_product_attention(_own_softmax_max_over_queries)
    out = capsys.readouterr().out
    assert "max over axis -2 where the axis passed in" in out and "NaN" in out and "unguarded" in out


def test_nan_free_forgives_only_the_learners_nan_positions():
    from mha_course.check.compare import Outcome, nan_free
    a, b = np.array([1.0, 2.0]), np.array([1.0, np.nan])
    assert nan_free(Outcome(a, None, ()), Outcome(b, None, ()))
    assert not nan_free(Outcome(np.array([3.0, 2.0]), None, ()), Outcome(b, None, ()))
