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
    assert _validate.array([[1, 2]], "m", 2, "(N, M)").dtype == np.float64
    for bad in ([1.0, 2.0], np.zeros((2, 0)), "spam", None):
        with pytest.raises(ValueError, match="m "):
            _validate.array(bad, "m", 2, "(N, M)")


def test_token_ids_without_a_vocabulary_take_any_id_from_zero_and_nothing_else():
    """The one check of token ids: with vocab None (a view's labels, a batch without its config) any
    id >= 0 passes; -1, floats and bools are refused as with a vocabulary."""
    assert _validate.token_ids([[0, 10**12]], None).tolist() == [[0, 10**12]]
    for bad, message in (([0, -1], "holds the id -1, below 0 (token ids are >= 0)"), ([0.5], "whole-number token ids >= 0"),
                         ([True], "whole-number token ids >= 0")):
        with pytest.raises(ValueError, match=re.escape(message)):
            _validate.token_ids(bad, None)
    with pytest.raises(ValueError, match=re.escape("holds the id 4, outside 0..3 (vocab=4)")):
        _validate.token_ids([4], 4)
