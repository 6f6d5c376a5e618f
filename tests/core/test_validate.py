"""What the validation promises beyond "raises": the fix a message offers is the
right one when applied; masked keys cannot reach the output; float16 and +inf logits are
defined; views and copies are what the docstrings say.
"""
import re

import numpy as np
import pytest

import mha_course as mc
from mha_course import _validate
from mha_course.lessons import scaling

rng = np.random.default_rng(0)
B, T, D, H = 2, 3, 8, 2
X = rng.normal(size=(B, T, D))
P = mc.init_params(D, rng=rng, bias=True)
G = mc.init_gqa_params(D, H, 1, rng=rng)
CAUSAL = mc.causal_mask(T)


def message_of(fn, *args, **kwargs) -> str:
    with pytest.raises(ValueError) as err:
        fn(*args, **kwargs)
    return str(err.value)


def apply_offered_fix(message: str, mask):
    """Evaluate the ``mask == ...`` that the message tells the learner to use."""
    fixes = re.findall(r"convert it with (mask == \d)", message)
    assert fixes, message
    return eval(fixes[0], {"mask": mask})


# ---------------------------------------------------------------- the fix in the message is right
@pytest.mark.parametrize("blocked", [-np.inf, -1e9, np.finfo(np.float32).min], ids=["-inf", "-1e9", "float32-min"])
@pytest.mark.parametrize("fn,args", [(mc.multi_head_attention, (X, P, H)), (mc.trace, (X, P, H)),
                                     (mc.grouped_query_attention, (X, G, H, 1))],
                         ids=["mha", "trace", "gqa"])
def test_the_fix_offered_for_an_additive_mask_gives_the_intended_attention(fn, args, blocked):
    additive = np.where(CAUSAL, 0.0, blocked)  # 0 = may attend, blocked = large negative
    fixed = apply_offered_fix(message_of(fn, *args, mask=additive), additive)
    assert np.array_equal(fixed, CAUSAL)
    got, want = fn(*args, mask=fixed), fn(*args, mask=CAUSAL)
    got, want = (r.output if isinstance(r, mc.Trace) else r[0] for r in (got, want))
    assert np.array_equal(got, want)
    assert not np.array_equal(additive.astype(bool), CAUSAL)  # what the old message said: exactly wrong


def test_the_fix_offered_for_a_one_means_attend_mask_is_right():
    hf = CAUSAL.astype(np.int64)  # Hugging Face style: 1 = may attend
    fixed = apply_offered_fix(message_of(mc.scaled_dot_product_attention, X, X, X, mask=hf), hf)
    assert np.array_equal(fixed, CAUSAL)


def test_a_per_batch_3d_mask_is_refused_and_the_offered_fix_applies_per_batch():
    per_batch = np.stack([CAUSAL, np.ones((T, T), bool)])  # (B, T, S) with B == h: numpy would go per head
    msg = message_of(mc.multi_head_attention, X, P, H, mask=per_batch)
    assert "(B, 1, T, S)" in msg and "mask[:, None]" in msg
    out, _ = mc.multi_head_attention(X, P, H, mask=per_batch[:, None])
    for b in range(B):  # each sequence with its own mask
        alone, _ = mc.multi_head_attention(X[b:b + 1], P, H, mask=per_batch[b])
        assert np.allclose(out[b], alone[0])


# ---------------------------------------------------------------- NaN cannot spread from masked keys
def test_a_nan_at_a_padding_position_is_refused_with_its_place():
    x = X.copy()
    x[0, 2, 5] = np.nan  # sequence 0 has length 2: position 2 is padding, masked out
    msg = message_of(mc.multi_head_attention, x, P, H, mask=mc.padding_mask([2, 3], T))
    assert "x[0, 2, 5] = nan" in msg and "nan_to_num" in msg


def test_what_a_mask_blocks_cannot_reach_the_output():
    """With finite inputs, any values at blocked keys leave every allowed query's output unchanged."""
    Q, K, V = rng.normal(size=(2, 4, 5)), rng.normal(size=(2, 6, 5)), rng.normal(size=(2, 6, 3))
    keep = np.arange(6) < 4  # keys 4 and 5 blocked
    K2, V2 = K.copy(), V.copy()
    K2[:, 4:], V2[:, 4:] = 1e30, -1e30  # huge, but finite
    for fn in (mc.scaled_dot_product_attention, mc.fast_attention):
        a, b = fn(Q, K, V, keep)[0], fn(Q, K2, V2, keep)[0]
        assert np.allclose(a, b), fn.__name__


# ---------------------------------------------------------------- dtypes and +inf logits
def test_float16_is_computed_in_float32_as_documented():
    w = mc.softmax(np.zeros(70000, np.float16))
    assert w.dtype == np.float32 and abs(float(w.sum()) - 1) < 1e-3 and np.all(w > 0)
    x16 = X.astype(np.float16)
    out, weights = mc.multi_head_attention(x16, P, H)
    assert out.dtype == np.float32 and np.allclose(weights.sum(-1), 1, atol=1e-5)
    assert mc.split_heads(x16, H).dtype == np.float32
    assert _validate.float_array(np.zeros(2, np.longdouble), "x").dtype == np.float64  # "anything else"


@pytest.mark.parametrize("logits,want", [([np.inf, 1.0, 2.0], [1, 0, 0]), ([np.inf, -np.inf, np.inf], [0.5, 0, 0.5]),
                                         ([-np.inf, -np.inf], [0, 0]), ([3e38, 3e38, 0.0], [0.5, 0.5, 0])])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_softmax_of_infinite_logits_is_the_limit(logits, want, dtype):
    x = np.array(logits, dtype)
    got = mc.softmax(x)
    assert not np.isnan(got).any() and np.allclose(got, want)
    grid = np.stack([x, x])  # along another axis too
    assert np.allclose(mc.softmax(grid.T, axis=0).T, [want, want])


def test_softmax_plus_inf_limit_matches_large_finite_logits():
    assert np.allclose(mc.softmax(np.array([np.inf, 1.0, 2.0])), mc.softmax(np.array([1e6, 1.0, 2.0])))


def test_entropy_and_softmax_name_a_bad_axis_alike():
    for fn in (mc.softmax, scaling.entropy):
        assert "axis=None must be a whole number" in message_of(fn, np.full((2, 4), 0.25), axis=None)


# ---------------------------------------------------------------- views and copies, as documented
def test_split_heads_is_a_view_and_combine_heads_a_view_of_it():
    x = rng.normal(size=(B, T, D))
    heads = mc.split_heads(x, H)
    assert np.shares_memory(heads, x)  # documented: writing into it writes into x
    assert np.shares_memory(mc.combine_heads(heads), x)  # the round trip is a view too
    own = rng.normal(size=(B, H, T, D // H))
    assert not np.shares_memory(mc.combine_heads(own), own)  # a contiguous (B, h, T, d_k) needs a copy


def test_trace_mask_is_a_read_only_copy():
    mask = CAUSAL.copy()
    t = mc.trace(X, P, H, mask=mask)
    mask[:] = False  # the caller reuses their array
    assert np.array_equal(t.mask, CAUSAL) and not np.shares_memory(t.mask, mask)
    with pytest.raises(ValueError):
        t.mask[0, 0] = False
    assert mc.trace(X, P, H).mask is None


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_finite_finds_every_nan_and_inf_and_passes_huge_finite_values(dtype, layout):
    """The quick test (one dot product) and the full search agree: huge finite values, whose square
    sum overflows, pass; one NaN or inf anywhere, in either layout, is refused and located."""
    big = np.full((6, 8), np.finfo(dtype).max / 2, dtype)  # finite, but its squares overflow
    arr = big if layout == "contiguous" else big[:, ::2]
    assert _validate.finite(arr, "x") is arr
    rng = np.random.default_rng(3)
    for bad in (np.nan, np.inf, -np.inf):
        for _ in range(5):
            a = rng.normal(size=(6, 8)).astype(dtype)
            a = a if layout == "contiguous" else a[:, ::2]
            where = tuple(int(rng.integers(n)) for n in a.shape)
            a[where] = bad
            with pytest.raises(ValueError, match=re.escape(f"the first: x{list(where)}")):
                _validate.finite(a, "x")


def test_positive_ints_takes_a_size_or_an_array_of_sizes_and_refuses_the_rest():
    assert _validate.positive_ints(np.int64(4), "T") == 4 and type(_validate.positive_ints(4, "T")) is int
    assert _validate.positive_ints([128, 256], "T").tolist() == [128, 256]
    for bad in (None, 0, 2.0, True, [], [1, 0], [1.0, 2.0], [True, True], "8", np.array(3.5)):
        with pytest.raises(ValueError, match="T="):
            _validate.positive_ints(bad, "T")


# --- added by views-a: the validators of the views' and widgets' arguments
def test_count_takes_whole_numbers_from_zero_and_refuses_the_rest():
    assert _validate.count(0, "seed") == 0 and _validate.count(np.int64(3), "seed") == 3
    for bad in (-1, 0.5, True, "0", None):
        with pytest.raises(ValueError, match="seed="):
            _validate.count(bad, "seed")


def test_index_refuses_minus_one_past_the_end_and_non_integers_naming_the_range():
    assert _validate.index(np.int64(1), 2, "head", "heads") == 1
    with pytest.raises(ValueError, match=r"head=-1 is out of range: there are 2 heads; pass head in 0\.\.1 \(-1 is not"):
        _validate.index(-1, 2, "head", "heads")
    with pytest.raises(ValueError, match=r"head=2 is out of range: there are 2 heads; pass head in 0\.\.1$"):
        _validate.index(2, 2, "head", "heads")
    for bad in (0.0, True, "0", None):
        with pytest.raises(ValueError, match=r"head=.* must be a whole number in 0\.\.1"):
            _validate.index(bad, 2, "head", "heads")


def test_choice_lists_the_valid_choices_and_does_not_take_true_for_one():
    assert _validate.choice("h", ("d_model", "h"), "show") == "h"
    assert _validate.choice(np.int64(2), [1, 2, 4], "d_k") == 2 and _validate.choice(2, [1.0, 2.0], "f") == 2
    with pytest.raises(ValueError, match="show='hh' is not one of the valid choices: 'd_model', 'h'"):
        _validate.choice("hh", ("d_model", "h"), "show")
    for bad in (True, "1", np.array([1, 2]), {"a": 1}, None):
        with pytest.raises(ValueError, match="d_k=.* is not one of the valid choices: 1, 2, 4"):
            _validate.choice(bad, [1, 2, 4], "d_k")


def test_names_takes_a_list_of_valid_names_never_a_bare_string():
    assert _validate.names(["h"], ("d_model", "h"), "show") == ("h",)
    with pytest.raises(ValueError, match="show='h' must be a list or tuple of names from 'd_model', 'h'"):
        _validate.names("h", ("d_model", "h"), "show")
    with pytest.raises(ValueError, match="show='hh' is not one of the valid choices"):
        _validate.names(("d_model", "hh"), ("d_model", "h"), "show")


def test_kv_heads_names_both_values_and_the_valid_h_kv():
    assert _validate.kv_heads(8, np.int64(2)) == 2
    with pytest.raises(ValueError, match="h=8 is not divisible by h_kv=3; valid h_kv: 1, 2, 4, 8"):
        _validate.kv_heads(8, 3)
    with pytest.raises(ValueError, match="h_kv=0 must be >= 1"):
        _validate.kv_heads(8, 0)


def test_flag_instance_and_vector_refuse_what_would_be_misread():
    assert _validate.flag(np.bool_(True), "buggy") is True
    for bad in ("no", 2, None):
        with pytest.raises(ValueError, match="buggy=.* must be True or False"):
            _validate.flag(bad, "buggy")
    with pytest.raises(TypeError, match=r"trace must be a dict, got str \('x'\); make one"):
        _validate.instance("x", dict, "trace", "make one")
    assert _validate.vector([1, 2], "xs", 2).dtype == np.float64
    for bad in ([], [[1.0]], [1.0, 2.0, 3.0], "spam", None):
        with pytest.raises(ValueError, match="xs"):
            _validate.vector(bad, "xs", 2)


# --- added by core
def test_flag_generator_named_tuple_and_items_of_refuse_what_they_do_not_hold():
    assert _validate.flag(np.True_, "causal") is True
    for bad in (1, 2, "yes", None):
        with pytest.raises(ValueError, match="causal="):
            _validate.flag(bad, "causal")
    rng = np.random.default_rng(0)
    assert _validate.generator(rng) is rng
    with pytest.raises(ValueError, match="rng must be a numpy Generator, got int"):
        _validate.generator(0)
    p = mc.init_params(4, rng=rng)
    assert _validate.named_tuple(p, "params") is p
    with pytest.raises(ValueError, match="params must be a parameter tuple"):
        _validate.named_tuple((1, 2), "params")
    assert _validate.items_of([1, 2], int, "n", "fix") == (1, 2)
    for bad in ("ab", [1, "a"], 3):
        with pytest.raises(ValueError, match="n must be a sequence of int"):
            _validate.items_of(bad, int, "n", "fix")


def test_allocation_refuses_more_than_the_machine_holds(monkeypatch):
    total = _validate.physical_memory()
    assert total is None or total > 2 ** 20
    assert _validate.allocation(1024, "a cache", "fix") == 1024
    monkeypatch.setattr(_validate, "physical_memory", lambda: 2 ** 30)
    with pytest.raises(ValueError, match=r"a cache would take 2 GiB, more than this machine's 1 GiB of memory; fix"):
        _validate.allocation(2 ** 31, "a cache", "fix")
    assert _validate.binary_size(10 ** 18) == "888 PiB" and _validate.binary_size(5) == "5 B"


# --- added by lessons-a: count, index, number, flag, generator, path
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@given(st.integers(-10**6, 10**6), st.integers(1, 50))
def test_index_accepts_exactly_0_to_n_minus_1(value, n):
    if 0 <= value < n:
        assert _validate.index(value, n, "layer", "layers") == value
    else:
        with pytest.raises(ValueError, match=rf"layer={value} is out of range: there are {n} layers"):
            _validate.index(value, n, "layer", "layers")


@pytest.mark.parametrize("bad", [True, np.bool_(False), 0.0, None, "0"])
def test_index_and_count_refuse_what_is_no_whole_number(bad):
    with pytest.raises(ValueError, match="head=.* must be a whole number"):
        _validate.index(bad, 4, "head", "heads")
    with pytest.raises(ValueError, match="start=.* must be a whole number >= 0"):
        _validate.count(bad, "start")
    assert _validate.count(np.int64(3), "start") == 3 and type(_validate.count(np.int64(3), "start")) is int


@pytest.mark.parametrize("value, kwargs, ok", [
    (0.5, dict(low=0, high=1), True), (0.0, dict(low=0, low_open=True), False), (1.0, dict(high=1, high_open=True), False),
    (1.0, dict(high=1), True), (np.float32(2.0), {}, True), (float("nan"), {}, False), (float("-inf"), {}, False),
    (True, {}, False), ("1", {}, False), (None, {}, False),
])
def test_number_is_a_finite_real_within_its_bounds(value, kwargs, ok):
    if ok:
        assert _validate.number(value, "lr", **kwargs) == float(value)
    else:
        with pytest.raises(ValueError, match="lr="):
            _validate.number(value, "lr", **kwargs)


def test_flag_generator_and_path_refuse_by_name_with_the_fix():
    assert _validate.flag(np.bool_(True), "causal") is True
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match="causal=.* must be True or False"):
            _validate.flag(bad, "causal")
    rng = np.random.default_rng(0)
    assert _validate.generator(rng) is rng and _validate.generator(None, optional=True) is None
    for bad in (None, 0, np.random.RandomState(0)):
        with pytest.raises(ValueError, match=re.escape("pass rng=np.random.default_rng(0)")):
            _validate.generator(bad)
    assert str(_validate.path("a/b.npz")) == "a/b.npz"
    for bad in (None, 3, b"a.npz", ""):
        with pytest.raises(ValueError, match="path=.* must be a file path"):
            _validate.path(bad)


def test_allocation_and_a_path_for_writing_refuse_before_anything_happens(tmp_path):
    assert _validate.allocation(_validate.MAX_BYTES, "x", "fix") == _validate.MAX_BYTES
    with pytest.raises(ValueError, match=r"x would take 4 GiB, more than the 4 GiB .*; fix"):
        _validate.allocation(_validate.MAX_BYTES + 1, "x", "fix")
    assert _validate.path(tmp_path / "a.npz", for_writing=True) == tmp_path / "a.npz"
    with pytest.raises(ValueError, match="is a folder"):
        _validate.path(tmp_path, for_writing=True)
    with pytest.raises(ValueError, match="does not exist; create it first"):
        _validate.path(tmp_path / "no" / "a.npz", for_writing=True)
    assert _validate.path(tmp_path, for_writing=False) == tmp_path  # reading a folder is the reader's to refuse


# --- added by lessons-b
def test_count_index_instance_items_and_real_refuse_what_they_do_not_take():
    from mha_course import _validate as v
    assert v.count(0, "seed") == 0 and v.index(1, 2, "layer") == 1 and v.number(8, "s") == 8.0
    assert v.items(np.array(["a", "b"]), "tokens", "['a']") == ["a", "b"] and v.instance(3, int, "n", "") == 3
    for bad, fn in [(-1, lambda x: v.count(x, "seed")), (True, lambda x: v.count(x, "seed")),
                    (-1, lambda x: v.index(x, 2, "layer")), (2, lambda x: v.index(x, 2, "layer")),
                    (0.5, lambda x: v.index(x, 2, "layer")), (True, lambda x: v.index(x, 2, "layer")),
                    ("x", lambda x: v.instance(x, int, "layer", "pass 1")), ("ab", lambda x: v.items(x, "layer", "[1]")),
                    (float("inf"), lambda x: v.number(x, "layer")), ("1", lambda x: v.number(x, "layer")),
                    (False, lambda x: v.number(x, "layer"))]:
        with pytest.raises((ValueError, TypeError), match="seed|layer"):
            fn(bad)


# --- added by views-b: the checks of the views' and widgets' arguments
def test_count_index_choice_number_mapping_names_array():
    assert _validate.count(np.int64(0), "sinks") == 0 and _validate.index(np.int64(1), 2, "layer") == 1
    for bad in (-1, 1.0, True, None, "1"):
        with pytest.raises(ValueError, match="sinks="):
            _validate.count(bad, "sinks")
    for bad in (-1, 2, 102, 0.5, True, None):
        with pytest.raises(ValueError, match="layer="):
            _validate.index(bad, 2, "layer", "layers")
    assert _validate.choice(4, (1.0, 4.0), "factor") == 4.0 and _validate.choice(np.int64(16), (8, 16), "L") == 16
    for bad in ("RoPE", "rop", 3, True, 16.0, None, np.array([16])):
        with pytest.raises(ValueError, match=r"L=.* is not one of the valid choices: 8, 16"):
            _validate.choice(bad, (8, 16), "L")
    with pytest.raises(ValueError, match="'rope', 'alibi'"):
        _validate.choice("RoPE", ("rope", "alibi"), "scheme")
    assert _validate.number(np.float32(0.5), "uniform") == 0.5
    for bad in (np.nan, np.inf, 10**400, "0.5", None, True):
        with pytest.raises(ValueError, match="uniform="):
            _validate.number(bad, "uniform")
    with pytest.raises(ValueError, match=r"factor=0.0 is outside \(0, inf\]"):
        _validate.number(0, "factor", 0, low_open=True)
    for bad in ({}, None, [("a", 1)]):
        with pytest.raises(ValueError, match="curves must be a non-empty dict"):
            _validate.mapping(bad, "curves", "{label: (T,)}")
    assert _validate.names(["h"], ("h", "h_kv")) == ("h",)
    for bad in ("h", ("h", "hkv"), [3], None):
        with pytest.raises(ValueError, match="show="):
            _validate.names(bad, ("h", "h_kv"))
    assert _validate.array([[1, 2]], "m", 2, "(N, M)").dtype == np.float64
    for bad in ([1.0, 2.0], np.zeros((2, 0)), "spam", None):
        with pytest.raises(ValueError, match="m "):
            _validate.array(bad, "m", 2, "(N, M)")
