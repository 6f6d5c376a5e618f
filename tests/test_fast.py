"""The fast path (mha_course.efficient) against the textbook attention (mha_course.attention).

Hypothesis draws shapes, masks (with fully masked rows) and dtypes and holds
``fast_attention`` equal to ``scaled_dot_product_attention``; spies show that each
shortcut of the fast path is really taken where it should be, and not where it must not.
"""
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mha_course as mc
from _mha_checks import SAME_MATHS_TOL, assert_close, random_allowed
from mha_course import fast
from mha_course.attention import scaled_dot_product_attention
from test_properties import DTYPES, PROFILE

BATCHES = st.sampled_from([(), (1,), (2,), (2, 3), (1, 2)])


@st.composite
def attention_inputs(draw):
    """(Q, K, V, mask): small random attention inputs, mask None or with fully masked rows."""
    batch, T, S = draw(BATCHES), draw(st.integers(1, 7)), draw(st.integers(1, 7))
    d_k, d_v, dtype = draw(st.integers(1, 9)), draw(st.integers(1, 5)), draw(DTYPES)
    scale = draw(st.sampled_from([0.1, 1.0, 10.0, 100.0]))  # 100: beyond exp's safe range
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    Q, K = (rng.normal(scale=scale, size=(*batch, n, d_k)).astype(dtype) for n in (T, S))
    V = rng.normal(size=(*batch, S, d_v)).astype(dtype)
    shapes = [None, (T, S), (*batch, T, S)] + ([(*batch[:-1], 1, T, S)] if batch else [])
    mask_shape = draw(st.sampled_from(shapes))
    mask = None if mask_shape is None else random_allowed(rng, mask_shape, keep_one=draw(st.booleans()))
    return Q, K, V, mask


def assert_same_attention(fast, textbook, dtype, scale=1.0):
    """(out, weights) of the fast path equal the textbook's, with its shapes and dtype."""
    for a, b, name in zip(fast, textbook, ("out", "weights")):
        assert a.shape == b.shape and a.dtype == b.dtype == dtype, name
        assert_close(a, b, dtype, name, tol=SAME_MATHS_TOL[np.dtype(dtype)] * 10 * scale)


@PROFILE
@given(attention_inputs(), st.sampled_from([None, 1, 64]))
def test_fast_attention_equals_the_textbook(inputs, block_bytes):
    Q, K, V, mask = inputs
    with pytest.MonkeyPatch.context() as mp:
        if block_bytes is not None:  # force many small blocks of query rows
            mp.setattr(fast, "_BLOCK_BYTES", block_bytes)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # fully masked rows: zeros, no NaN warnings
            got = fast.fast_attention(Q, K, V, mask)
            textbook = scaled_dot_product_attention(Q, K, V, mask)
    assert_same_attention(got, textbook, Q.dtype, scale=max(1.0, float(np.abs(V).max())))
    if mask is not None:  # a query that may attend nothing: zero weights, zero output
        empty = ~np.broadcast_to(mask, got[1].shape).any(-1)
        assert (got[1][empty] == 0).all() and (got[0][empty] == 0).all()


class Spy:
    """Wraps a function of ``fast`` and records what each call returned."""

    def __init__(self, monkeypatch, name):
        self.fn, self.results = getattr(fast, name), []
        monkeypatch.setattr(fast, name, self)

    def __call__(self, *args):
        self.results.append(self.fn(*args))
        return self.results[-1]


def _default_problem(scale=1.0, seq_len=128, d_model=512, h=8):
    """The benchmark's sizes: float32, init_params, standard normal inputs (times ``scale``)."""
    rng = np.random.default_rng(seq_len)
    params = mc.init_params(d_model, rng=rng, dtype=np.float32)
    x = (scale * rng.standard_normal((1, seq_len, d_model))).astype(np.float32)
    return x, params, h


@pytest.mark.parametrize("sizes", [dict(), dict(seq_len=512), dict(seq_len=6, d_model=8, h=2)])
def test_exp_shortcut_is_taken_at_the_default_sizes(monkeypatch, sizes):
    """Unit-variance inputs: the bound proves exp safe, so the row-max pass is skipped."""
    safe, shift = Spy(monkeypatch, "_exp_is_safe"), Spy(monkeypatch, "_subtract_row_max")
    x, params, h = _default_problem(**sizes)
    out, weights = mc.multi_head_attention(x, params, h)
    assert safe.results == [True], "the Cauchy-Schwarz bound did not prove exp safe"
    assert shift.results == [], "the row max was subtracted although the shortcut applies"
    t = mc.trace(x, params, h)
    textbook = scaled_dot_product_attention(t["Q_heads"], t["K_heads"], t["V_heads"])
    assert_same_attention((t["head_outputs"], weights), textbook, np.float32)


def test_exp_shortcut_is_not_taken_for_large_logits(monkeypatch):
    """Scores far beyond exp's range: the fast path must subtract the row max (else inf / NaN)."""
    safe, shift = Spy(monkeypatch, "_exp_is_safe"), Spy(monkeypatch, "_subtract_row_max")
    x, params, h = _default_problem(scale=30.0, seq_len=16)
    out, weights = mc.multi_head_attention(x, params, h)  # the core runs on the fast sibling
    assert safe.results == [False] and len(shift.results) == 1
    assert np.isfinite(weights).all() and np.isfinite(out).all()
    t = mc.trace(x, params, h)  # the textbook path
    assert_same_attention((out, weights), (t.output, t.weights), np.float32, scale=10.0)


def test_long_sequences_go_block_by_block(monkeypatch):
    """Above _BLOCK_BYTES of scores the fast path loops over blocks of query rows."""
    monkeypatch.setattr(fast, "_BLOCK_BYTES", 4 * 16 * 4)  # 4 rows of 16 float32 scores
    blocks = Spy(monkeypatch, "_attend_block")
    x, params, h = _default_problem(seq_len=16, d_model=16, h=8)
    out, weights = mc.multi_head_attention(x, params, h)  # the core runs on the fast sibling
    assert len(blocks.results) == 8 * 4  # one batch item (head) at a time, 4 slices of rows each
    t = mc.trace(x, params, h)  # the textbook path
    assert_same_attention((out, weights), (t.output, t.weights), np.float32)


def test_the_bound_holds_whenever_the_shortcut_is_taken():
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        for scale in (0.1, 1.0, 3.0, 10.0, 100.0):
            Qs, K = (rng.normal(scale=scale, size=(2, 5, 8)).astype(dtype) for _ in range(2))
            if fast._exp_is_safe(Qs, K):
                limit = np.log(np.finfo(dtype).max) / 2
                assert np.abs(Qs.astype(np.float64) @ np.swapaxes(K, -1, -2)).max() <= limit


def test_fast_attention_checks_its_arguments():
    with pytest.raises(ValueError, match="share their last dim d_k"):
        fast.fast_attention(np.ones((2, 3)), np.ones((2, 4)), np.ones((2, 4)))
    with pytest.raises(ValueError, match="must be boolean"):
        fast.fast_attention(np.ones((2, 3)), np.ones((2, 3)), np.ones((2, 3)), mask=np.ones((2, 2)))
