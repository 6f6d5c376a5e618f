"""The fast path (mha_course.fast) against the textbook attention (mha_course.attention).

Hypothesis draws shapes, masks (with fully masked rows) and dtypes and holds
``fast_attention`` equal to ``scaled_dot_product_attention``; spies show that each
shortcut of the fast path is really taken where it should be, and not where it must not.
"""
import threading
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mha_course as mc
from _mha_checks import SAME_MATHS_TOL, assert_close, random_allowed
from mha_course import fast, runtime
from mha_course.attention import scaled_dot_product_attention

from .test_properties import DTYPES, PROFILE

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
            mp.setattr(fast, "_SMALL_BYTES", 0)
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
    """Above _SMALL_BYTES of scores the fast path loops over blocks of query rows (_BLOCK_BYTES each)."""
    monkeypatch.setattr(fast, "_SMALL_BYTES", 0)
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
            for v_scale in (1e-30, 1e-6, 1.0, 1e20):
                Qs, K = (rng.normal(scale=scale, size=(2, 5, 8)).astype(dtype) for _ in range(2))
                V = (v_scale * rng.normal(size=(2, 5, 3))).astype(dtype)
                if fast._exp_is_safe(Qs, K):
                    limit = np.log(np.finfo(dtype).max) / 2
                    assert np.abs(Qs.astype(np.float64) @ np.swapaxes(K, -1, -2)).max() <= limit
                if fast.exp_needs_no_shift(Qs, K, V):  # exp(s) [V | 1] summed over the keys stays finite
                    s = np.abs(Qs.astype(np.float64) @ np.swapaxes(K, -1, -2)).max()
                    big = 5 * np.exp(s) * max(1.0, np.abs(V).max())
                    assert big < np.finfo(dtype).max and 1 / big > np.finfo(dtype).tiny


def test_large_scores_times_large_values_do_not_overflow(monkeypatch):
    """Scaled scores about 43.6 and V about 1e20 in float32: exp(s) fits in float32, exp(s) * v
    does not, so the bound must refuse the shortcut (it used to give [inf, 1.0])."""
    safe = Spy(monkeypatch, "exp_needs_no_shift")
    Q = np.full((1, 4), 6.6, np.float32)  # scaled by 1 / sqrt(4): a score of 43.56 with the first key
    K = np.array([[3.3] * 4, [0.0] * 4], np.float32)
    V = np.array([[1e20, 1.0], [0.0, 1.0]], np.float32)
    out, weights = fast.fast_attention(Q, K, V)
    assert safe.results == [False]
    assert np.isfinite(out).all() and np.isfinite(weights).all()
    assert_same_attention((out, weights), scaled_dot_product_attention(Q, K, V), np.float32, scale=1e20)
    x = np.zeros((1, 2, 4), np.float32)
    x[0, 0] = 1  # the first token: q = 6.6, k = 3.3, v = 1e20 in every feature; the second all zero
    p = mc.MHAParams(*(np.eye(4, dtype=np.float32) * f for f in (6.6, 3.3, 1e20, 1.0)))
    out, weights = mc.multi_head_attention(x, p, 1)  # the same overflow inside the core: no NaN
    assert np.isfinite(out).all() and np.isfinite(weights).all()
    t = mc.trace(x, p, 1)
    assert_same_attention((out, weights), (t.output, t.weights), np.float32, scale=1e20)


def _blas_threads() -> int:
    from threadpoolctl import threadpool_info
    return max(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas")


def test_many_blocks_run_on_a_pool_with_blas_on_one_thread(monkeypatch):
    """More than one block: the jobs run on the pool's threads, each block's matmuls on one BLAS
    thread (no pool stacked on a threaded BLAS), the BLAS threads restored after; one block: serially."""
    from threadpoolctl import threadpool_limits
    inside = []
    real_block = fast._attend_block
    monkeypatch.setattr(runtime, "cpu_count", lambda: 2)
    monkeypatch.setattr(fast, "_attend_block", lambda *a: inside.append(
        (threading.current_thread().name, _blas_threads())) or real_block(*a))
    monkeypatch.setattr(fast, "_SMALL_BYTES", 0)
    monkeypatch.setattr(fast, "_BLOCK_BYTES", 4 * 16 * 4)  # 4 rows of 16 float32 scores
    x, params, h = _default_problem(seq_len=16, d_model=16, h=8)
    with threadpool_limits(limits=2, user_api="blas"):  # as a learner's kernel with no thread variable
        out, weights = mc.multi_head_attention(x, params, h)
        assert _blas_threads() == 2  # restored
    assert len(inside) == 8 * 4 and {n for _, n in inside} == {1}
    assert all(name.startswith("mha_course") for name, _ in inside)  # the pool's threads, not the caller's
    t = mc.trace(x, params, h)
    assert_same_attention((out, weights), (t.output, t.weights), np.float32)
    inside.clear()
    monkeypatch.setattr(fast, "_SMALL_BYTES", 16 << 20)
    with threadpool_limits(limits=2, user_api="blas"):
        mc.multi_head_attention(x, params, h)  # small: one block, in the calling thread, on BLAS's threads
    assert inside == [(threading.current_thread().name, 2)]


def test_multi_head_attention_takes_the_fast_path_and_trace_the_textbook(monkeypatch):
    """The kernel is passed in, never chosen by a side effect: multi_head_attention runs fast.attend after
    its four projections, trace runs the textbook attention.attend, each once per call, and the scores
    are computed once (the textbook's attention_scores, not again for the Trace); a caller's attend= runs
    in place of either. If another kernel is taken, or one runs twice, this fails."""
    from mha_course import attention, mha
    calls = []
    for module, name in ((fast, "attend"), (mha, "linear"), (attention, "attend"), (attention, "attention_scores")):
        real = getattr(module, name)
        label = f"{module.__name__.split('.')[-1]}.{name}"
        monkeypatch.setattr(module, name, lambda *a, _real=real, _label=label, **kw: calls.append(_label) or _real(*a, **kw))
    x, params, h = _default_problem(seq_len=40, d_model=32, h=4)
    out, weights = mc.multi_head_attention(x, params, h)
    assert sorted(calls) == ["fast.attend"] + ["mha.linear"] * 4
    calls.clear()
    t = mc.trace(x, params, h)
    assert sorted(calls) == ["attention.attend", "attention.attention_scores"] + ["mha.linear"] * 4
    assert_same_attention((out, weights), (t.output, t.weights), np.float32)
    calls.clear()
    mine = mc.multi_head_attention(x, params, h, attend=lambda Q, K, V, mask, bias=None, scores=None: (
        calls.append("mine") or np.zeros_like(Q), None))
    assert calls == ["mine"] + ["mha.linear"] * 4 or sorted(calls) == ["mha.linear"] * 4 + ["mine"]
    assert mine[1] is None and np.array_equal(mine[0], np.zeros_like(out))


def test_a_kernel_that_is_no_function_is_refused():
    x, params, h = _default_problem(seq_len=4, d_model=8, h=2)
    with pytest.raises(TypeError, match="attend must be a function"):
        mc.multi_head_attention(x, params, h, attend="fast")


def test_fast_attention_checks_its_arguments():
    with pytest.raises(ValueError, match="share their last dim d_k"):
        fast.fast_attention(np.ones((2, 3)), np.ones((2, 4)), np.ones((2, 4)))
    with pytest.raises(ValueError, match="must be boolean"):
        fast.fast_attention(np.ones((2, 3)), np.ones((2, 3)), np.ones((2, 3)), mask=np.ones((2, 2)))
