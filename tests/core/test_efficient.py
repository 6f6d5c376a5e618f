"""Tiled (online softmax), sliding-window and linear attention against the exact versions.

``tiled_attention`` and ``sliding_window_attention`` must equal the textbook
``scaled_dot_product_attention`` (float64 to 1e-10), with every kind of mask, and must never
make a T x S array (tracemalloc sees numpy's allocations); ``linear_attention`` must equal
its own quadratic form. The fast paths (in-place online update, skipped key blocks, thread
pool) are spied on, so a test fails if they are not taken.
"""
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mha_course as mc
from _mha_checks import assert_close, random_allowed, torch_sdpa
from mha_course import efficient, fast, runtime

TOL64 = 1e-10


def qkv(rng, batch, T, S, d_k=8, d_v=5, dtype=np.float64):
    return (rng.normal(size=(*batch, T, d_k)).astype(dtype), rng.normal(size=(*batch, S, d_k)).astype(dtype),
            rng.normal(size=(*batch, S, d_v)).astype(dtype))


def exact(Q, K, V, mask=None):
    return mc.scaled_dot_product_attention(Q, K, V, mask)[0]


def peak_bytes(fn) -> int:
    """Peak bytes allocated while fn() runs (numpy reports its buffers to tracemalloc)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# ----------------------------------------------------------------------------- tiled attention
@pytest.mark.parametrize("T,S,block", [(7, 13, 5), (33, 33, 8), (1, 1, 256), (20, 50, 7), (9, 64, 1), (40, 40, 40)])
@pytest.mark.parametrize("kind", ["none", "causal", "random", "fully masked rows"])
def test_tiled_equals_textbook(T, S, block, kind):
    rng = np.random.default_rng(T * 100 + S)
    Q, K, V = qkv(rng, (2, 3), T, S)
    mask = {"none": None, "causal": np.tril(np.ones((T, S), bool)),
            "random": random_allowed(rng, (2, 3, T, S)), "fully masked rows": rng.random((2, 3, T, S)) < 0.2}[kind]
    if kind == "fully masked rows":
        mask[0, 1, 0] = False  # at least one row with no allowed key at all
    out = mc.tiled_attention(Q, K, V, mask, block_size=block)
    assert_close(out, exact(Q, K, V, mask), np.float64, f"tiled {kind}", tol=TOL64)
    if kind == "fully masked rows":
        assert np.all(out[0, 1, 0] == 0)


def test_tiled_broadcasts_batch_and_keeps_float32():
    rng = np.random.default_rng(1)
    Q = rng.normal(size=(2, 4, 10, 8)).astype(np.float32)
    K, V = rng.normal(size=(4, 12, 8)).astype(np.float32), rng.normal(size=(1, 12, 3)).astype(np.float32)
    out = mc.tiled_attention(Q, K, V, block_size=5)
    assert out.dtype == np.float32 and out.shape == (2, 4, 10, 3)
    assert_close(out, exact(Q, K, V), np.float32, "tiled float32")


def test_tiled_large_logits_do_not_overflow():
    rng = np.random.default_rng(2)
    Q, K, V = qkv(rng, (), 12, 30)
    Q *= 200  # scores in the thousands: only the running max keeps exp finite
    assert_close(mc.tiled_attention(Q, K, V, block_size=4), exact(Q, K, V), np.float64, "large logits", tol=TOL64)


def test_tiled_matches_torch():
    rng = np.random.default_rng(3)
    Q, K, V = qkv(rng, (2, 2), 17, 17)
    allowed = random_allowed(rng, (2, 2, 17, 17))
    assert_close(mc.tiled_attention(Q, K, V, allowed, block_size=4), torch_sdpa(Q, K, V, allowed=allowed)[0],
                 np.float64, "tiled vs torch")


def test_tiled_never_makes_a_T_by_S_array():
    rng = np.random.default_rng(4)
    Q, K, V = qkv(rng, (), 1024, 1024, d_k=16, d_v=16)
    full = 1024 * 1024 * 8
    assert peak_bytes(lambda: mc.tiled_attention(Q, K, V, block_size=128)) < full / 4
    assert peak_bytes(lambda: exact(Q, K, V)) >= full  # the probe sees a T x S array when there is one


def test_tiled_uses_the_in_place_update_and_skips_blocked_tiles(monkeypatch):
    calls = []
    real = efficient._online_update_inplace
    monkeypatch.setattr(efficient, "_online_update_inplace", lambda *a: calls.append(1) or real(*a))
    rng = np.random.default_rng(5)
    Q, K, V = qkv(rng, (), 64, 64)
    Q *= 1000  # scores beyond float64 exp's range: the running max is needed
    mc.tiled_attention(Q, K, V, mc.causal_mask(64), block_size=16)  # one block of rows, 4 key blocks
    assert len(calls) == 4
    calls.clear()
    mc.tiled_attention(Q, K, V, np.zeros((64, 64), bool), block_size=16)
    assert calls == []  # every key block blocked: none computed


def test_tiled_skips_the_running_max_when_the_bound_allows(monkeypatch):
    """Unit-variance inputs: exp_needs_no_shift proves exp(s) [V | 1] in range, no max is kept."""
    calls, proofs = [], []
    real_update, real_bound = efficient._online_update_inplace, efficient.exp_needs_no_shift
    monkeypatch.setattr(efficient, "_online_update_inplace", lambda *a: calls.append(1) or real_update(*a))
    monkeypatch.setattr(efficient, "exp_needs_no_shift", lambda *a: proofs.append(real_bound(*a)) or proofs[-1])
    rng = np.random.default_rng(15)
    Q, K, V = qkv(rng, (2,), 40, 50, dtype=np.float32)
    out = mc.tiled_attention(Q, K, V, block_size=8)
    assert proofs == [True] and calls == []
    assert_close(out, exact(Q, K, V), np.float32, "tiled without the running max")


@pytest.mark.parametrize("scale", [1.0, 100.0])  # 100: the running-max path
def test_exp_bound_refuses_what_would_overflow(scale):
    """Scores about 43.6 and values about 1e20 in float32: exp(s) alone fits, exp(s) * v does not."""
    Q = np.full((1, 1, 4), 6.6 * scale, np.float32)  # scaled by 1 / sqrt(4): scores 43.56 * scale
    K = np.array([[[3.3] * 4, [0.0] * 4]], np.float32)
    V = np.array([[[1e20], [1.0]]], np.float32)
    assert not fast.exp_needs_no_shift(Q, K, V, 0.5)
    assert fast.exp_needs_no_shift(Q, K, V / np.float32(1e20), 0.5) == (scale == 1.0)
    out = mc.tiled_attention(Q, K, V)
    assert np.isfinite(out).all()
    assert_close(out, exact(Q, K, V), np.float32, "large values", tol=1e14)  # 1e20 to float32 rounding


def test_the_exp_bound_holds_whenever_it_says_so():
    rng = np.random.default_rng(16)
    for dtype in (np.float32, np.float64):
        for scale in (0.1, 1.0, 3.0, 10.0, 100.0):
            for v_scale in (1e-30, 1.0, 1e20):
                Q, K = (rng.normal(scale=scale, size=(2, 5, 8)).astype(dtype) for _ in range(2))
                V = (v_scale * rng.normal(size=(2, 5, 3))).astype(dtype)
                if fast.exp_needs_no_shift(Q, K, V):
                    s = np.abs(Q.astype(np.float64) @ np.swapaxes(K, -1, -2)).max()
                    big = 5 * np.exp(s) * max(1.0, np.abs(V).max())
                    assert big < np.finfo(dtype).max and 1 / big > np.finfo(dtype).tiny


@pytest.mark.parametrize("T,S,block", [(64, 64, 16), (50, 50, 7), (33, 20, 8), (20, 33, 8), (1, 1, 4)])
def test_tiled_causal_equals_the_masked_textbook_and_skips_tiles_above_the_diagonal(monkeypatch, T, S, block):
    entries = []
    real = efficient._online_update_inplace
    monkeypatch.setattr(efficient, "_online_update_inplace", lambda m, a, s, v: entries.append(s.size) or real(m, a, s, v))
    rng = np.random.default_rng(T * S)
    Q, K, V = qkv(rng, (2,), T, S)
    Q *= 1000  # scores beyond float64 exp's range: the running-max path, so every computed tile is counted
    causal = np.tril(np.ones((T, S), bool), k=S - T)  # bottom-right: query t sees keys 0..S - T + t
    if T <= S:
        assert np.array_equal(causal, mc.cached_causal_mask(T, S - T))  # the decode step's mask
    out = mc.tiled_attention(Q, K, V, block_size=block, causal=True)
    assert_close(out, exact(Q, K, V, causal), np.float64, "tiled causal", tol=TOL64 * 100)
    # each key block is computed only for the rows that see one of its keys: the diagonal tiles at most
    assert 0 < sum(entries) <= 2 * (causal.sum() + T * block)


def test_tiled_causal_with_a_mask_is_their_conjunction():
    rng = np.random.default_rng(17)
    Q, K, V = qkv(rng, (2,), 30, 30)
    mask = random_allowed(rng, (2, 30, 30))
    out = mc.tiled_attention(Q, K, V, mask, block_size=7, causal=True)
    assert_close(out, exact(Q, K, V, mask & mc.causal_mask(30)), np.float64, "mask & causal", tol=TOL64)
    with pytest.raises(ValueError, match="causal='yes' must be True or False"):
        mc.tiled_attention(Q, K, V, causal="yes")


def _blas_threads() -> int:
    from threadpoolctl import threadpool_info
    return max(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas")


def test_tiled_runs_big_inputs_on_a_pool_with_blas_on_one_thread(monkeypatch):
    """The query blocks run on the pool's threads, BLAS on one thread inside it, restored after."""
    import threading

    from threadpoolctl import threadpool_limits
    inside = []
    monkeypatch.setattr(runtime, "cpu_count", lambda: 2)
    real_rows = efficient._tiled_rows
    monkeypatch.setattr(efficient, "_tiled_rows", lambda *a: inside.append(
        (threading.current_thread().name, _blas_threads())) or real_rows(*a))
    rng = np.random.default_rng(6)
    Q, K, V = qkv(rng, (4,), 600, 600, d_k=4, d_v=2)
    with threadpool_limits(limits=2, user_api="blas"):  # as a learner's kernel with no thread variable
        out = mc.tiled_attention(Q, K, V, block_size=128)
        assert _blas_threads() == 2  # restored
    assert len(inside) == 4 and {n for _, n in inside} == {1}
    assert all(name.startswith("mha_course") for name, _ in inside)
    assert_close(out, exact(Q, K, V), np.float64, "tiled on threads", tol=TOL64)


def test_small_inputs_run_serially(monkeypatch):
    import threading
    names = []
    real_rows = efficient._tiled_rows
    monkeypatch.setattr(efficient, "_tiled_rows", lambda *a: names.append(threading.current_thread().name)
                        or real_rows(*a))
    rng = np.random.default_rng(18)
    Q, K, V = qkv(rng, (2,), 30, 30)
    mc.tiled_attention(Q, K, V)
    mc.sliding_window_attention(Q, K, V, 4)
    assert set(names) == {threading.current_thread().name}


def test_tiled_rejects_a_bad_block_size():
    Q = np.ones((2, 2))
    with pytest.raises(ValueError, match="block_size=0 must be >= 1"):
        mc.tiled_attention(Q, Q, Q, block_size=0)


@settings(derandomize=True, database=None, deadline=None, max_examples=40)
@given(T=st.integers(1, 12), S=st.integers(1, 12), block=st.integers(1, 13), seed=st.integers(0, 2**16))
def test_tiled_property(T, S, block, seed):
    rng = np.random.default_rng(seed)
    Q, K, V = qkv(rng, (2,), T, S, d_k=3, d_v=2)
    mask = rng.random((2, T, S)) < 0.7
    assert_close(mc.tiled_attention(Q, K, V, mask, block), exact(Q, K, V, mask), np.float64, "tiled", tol=TOL64)


# ----------------------------------------------------------------------------- the online softmax step
def test_online_updates_reach_the_softmax_and_are_pure():
    rng = np.random.default_rng(7)
    s, V = rng.normal(size=(3, 10)) * 5, rng.normal(size=(10, 4))
    state = mc.online_softmax_start(3, 4)
    for c in range(0, 10, 3):
        block, before = s[:, c:c + 3].copy(), state
        state = mc.online_softmax_update(state, block, V[c:c + 3])
        assert np.array_equal(block, s[:, c:c + 3]) and before.l is not state.l  # inputs untouched
    assert_close(mc.online_softmax_result(state), mc.softmax(s) @ V, np.float64, "online result", tol=TOL64)
    assert_close(state.m, s.max(-1, keepdims=True), np.float64, "running max", tol=0)


def test_in_place_update_equals_the_public_one():
    rng = np.random.default_rng(8)
    s, V = rng.normal(size=(4, 6)), rng.normal(size=(6, 3))
    state = mc.online_softmax_update(mc.online_softmax_start(4, 3), s[:, :2], V[:2])
    new = mc.online_softmax_update(state, s[:, 2:], V[2:])
    m, acc1 = state.m.copy(), np.concatenate([state.acc, state.l], axis=-1)
    efficient._online_update_inplace(m, acc1, s[:, 2:].copy(), np.concatenate([V[2:], np.ones((4, 1))], -1))
    assert_close(np.concatenate([new.acc, new.l], -1), acc1, np.float64, "in place", tol=1e-12)
    assert_close(new.m, m, np.float64, "max", tol=0)


def test_forgetting_the_rescale_is_wrong_on_these_inputs():
    """The step-through inputs below make the max grow from block to block, so skipping the
    rescale by exp(m - m') changes the answer: the parity tests above can catch it."""
    s = np.array([[0.0, 1.0, 5.0, 9.0]])
    V = np.arange(4.0)[:, None]
    state = mc.online_softmax_update(mc.online_softmax_update(mc.online_softmax_start(1, 1), s[:, :2], V[:2]),
                                     s[:, 2:], V[2:])
    p1, p2 = np.exp(s[:, :2] - 1), np.exp(s[:, 2:] - 9)
    no_rescale = (p1 @ V[:2] + p2 @ V[2:]) / (p1.sum() + p2.sum())
    assert abs(float(mc.online_softmax_result(state)[0, 0] - no_rescale[0, 0])) > 0.1


def test_steps_converge_to_the_exact_output():
    rng = np.random.default_rng(9)
    Q, K, V = qkv(rng, (), 3, 10)
    steps = mc.tiled_attention_steps(Q, K, V, block_size=4)
    assert len(steps) == 3
    assert_close(mc.online_softmax_result(steps[-1]), exact(Q, K, V), np.float64, "last step", tol=TOL64)
    assert_close(mc.online_softmax_result(steps[0]), exact(Q[:, :], K[:4], V[:4]), np.float64, "first step",
                 tol=TOL64)


def test_io_byte_counts():
    T, S, d = 4096, 4096, 64
    assert mc.naive_attention_bytes(T, S, d, d, itemsize=4) == 4 * (4 * T * S + 2 * T * d + 2 * S * d)
    assert mc.tiled_attention_bytes(T, S, d, d, block_rows=T, itemsize=4) == 4 * 2 * (T * d + S * d)
    assert mc.tiled_attention_bytes(T, S, d, d, block_rows=1024) == 4 * (2 * T * d + 4 * 2 * S * d)
    ratios = [mc.naive_attention_bytes(n, n, d, d) / mc.tiled_attention_bytes(n, n, d, d, 1024)
              for n in (1024, 4096, 16384)]
    assert ratios[0] < ratios[1] < ratios[2]  # the saving grows with the sequence
    with pytest.raises(ValueError, match="block_rows"):
        mc.tiled_attention_bytes(4, 4, 2, 2, block_rows=0)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_online_update_refuses_nan_and_plus_inf_scores(bad):
    state = mc.online_softmax_start(2, 1)
    scores = np.array([[0.0, 1.0], [bad, 2.0]])
    with pytest.raises(ValueError, match=r"scores_block has 1 NaN or \+inf scores \(the first: scores_block\[1, 0\]"):
        mc.online_softmax_update(state, scores, np.ones((2, 1)))
    masked = mc.online_softmax_update(state, np.array([[-np.inf, 1.0], [-np.inf, -np.inf]]), np.ones((2, 1)))
    assert np.array_equal(mc.online_softmax_result(masked), [[1.0], [0.0]])  # -inf is a masked key


@pytest.mark.parametrize("scores,values,match", [
    (np.zeros((3, 2)), np.ones((2, 1)), "the state has T=2 rows"),  # 3 query rows for a 2-row state
    (np.zeros((2, 2)), np.ones((3, 1)), "for the same c keys"),  # 2 scores but 3 values
    (np.zeros((2, 2)), np.ones((2, 4)), "d_v=1"),  # values wider than the accumulator
    (np.zeros(2), np.ones((2, 1)), r"must be \(\.\.\., T, c\)"),
    (np.zeros((3, 2, 2)), np.ones((4, 2, 1)), "do not broadcast"),
    (np.zeros((2, 2)), np.array([[np.nan], [1.0]]), "V_block has 1 non-finite value"),
])
def test_online_update_refuses_shapes_that_do_not_fit(scores, values, match):
    with pytest.raises(ValueError, match=match):
        mc.online_softmax_update(mc.online_softmax_start(2, 1), scores, values)
    with pytest.raises(ValueError, match="state must be a SoftmaxState"):
        mc.online_softmax_update((0, 0, 0), np.zeros((2, 2)), np.ones((2, 1)))


# ----------------------------------------------------------------------------- sliding windows and patterns
def test_sliding_window_mask_definition():
    T, w = 9, 3
    m = mc.sliding_window_mask(T, w)
    t, s = np.indices((T, T))
    assert np.array_equal(m, (t - w < s) & (s <= t))
    assert np.array_equal(mc.sliding_window_mask(T, 1), np.eye(T, dtype=bool))
    assert np.array_equal(mc.sliding_window_mask(T, T + 3), mc.causal_mask(T))
    assert (m.sum(-1) == np.minimum(np.arange(T) + 1, w)).all()


@pytest.mark.parametrize("T,window", [(1, 1), (10, 1), (10, 3), (17, 16), (12, 12), (8, 20)])
def test_sliding_window_attention_equals_masked_full(T, window):
    rng = np.random.default_rng(T + window)
    Q, K, V = qkv(rng, (2, 2), T, T)
    expected = exact(Q, K, V, mc.sliding_window_mask(T, window))
    assert_close(mc.sliding_window_attention(Q, K, V, window), expected, np.float64, "window", tol=TOL64)


@settings(derandomize=True, database=None, deadline=None, max_examples=60)
@given(T=st.integers(1, 40), window=st.integers(1, 45), batch=st.sampled_from([(), (2,), (2, 3)]),
       dtype=st.sampled_from([np.float64, np.float32]), scale=st.sampled_from([0.1, 1.0, 1000.0]),
       seed=st.integers(0, 2**16))
def test_sliding_window_property(T, window, batch, dtype, scale, seed):
    """Equal to the masked full computation for any length, window, batch, dtype and score size
    (1000: beyond exp's range, so the running max is used)."""
    rng = np.random.default_rng(seed)
    Q, K, V = qkv(rng, batch, T, T, d_k=3, d_v=2, dtype=dtype)
    Q *= dtype(scale)
    expected = exact(Q, K, V, mc.sliding_window_mask(T, window))
    out = mc.sliding_window_attention(Q, K, V, window)
    assert out.dtype == dtype and out.shape == expected.shape
    assert_close(out, expected, dtype, "window", tol=(TOL64 if dtype == np.float64 else 2e-5) * max(1.0, scale))


def test_sliding_window_tiles_span_many_blocks(monkeypatch):
    """Windows wider than a tile and queries spread over several jobs still give the masked result."""
    monkeypatch.setattr(efficient, "_TILE_ENTRIES", 256)  # tiny jobs: rows = max(block, 256 // (4 block))
    rng = np.random.default_rng(19)
    Q, K, V = qkv(rng, (2,), 300, 300)
    for window in (1, 37, 64, 299, 500):
        expected = exact(Q, K, V, mc.sliding_window_mask(300, window))
        assert_close(mc.sliding_window_attention(Q, K, V, window), expected, np.float64, f"w={window}", tol=TOL64)


def test_sliding_window_memory_grows_as_T_times_window():
    """Besides its output, the call allocates a few tiles per core: far below one (T, window) band,
    and it does not grow with T (float32, 8 heads as in the benchmark, at a quarter of its length)."""
    rng = np.random.default_rng(10)
    h, w, d = 8, 256, 64
    peaks = {}
    for T in (1024, 4096):
        Q, K, V = (rng.standard_normal((1, h, T, d), dtype=np.float32) for _ in range(3))
        out_bytes = Q.nbytes
        peaks[T] = peak_bytes(lambda: mc.sliding_window_attention(Q, K, V, w)) - out_bytes
        band = h * T * w * 4  # one (h, T, window) float32 array: what the strided version made several of
        assert peaks[T] < min(band / 2, 8 << 20)
    assert peaks[4096] < 2 * peaks[1024] + (1 << 20)  # the working set does not grow with T


def test_sliding_window_needs_self_attention():
    with pytest.raises(ValueError, match="T=2 queries and S=3 keys"):
        mc.sliding_window_attention(np.ones((2, 4)), np.ones((3, 4)), np.ones((3, 4)), 2)
    with pytest.raises(ValueError, match="window=0"):
        mc.sliding_window_mask(4, 0)


def test_longformer_dilated_and_bigbird_patterns():
    lf = mc.longformer_mask(10, 2, [0, 5])
    assert lf[[0, 5]].all() and lf[:, [0, 5]].all()
    assert np.array_equal(lf[1:5, 1:5], np.abs(np.subtract.outer(range(4), range(4))) < 2)
    assert np.array_equal(mc.dilated_window_mask(9, 3, 1), mc.sliding_window_mask(9, 3))
    dil = mc.dilated_window_mask(12, 3, 3)
    assert np.flatnonzero(dil[11]).tolist() == [5, 8, 11]
    bb = mc.bigbird_mask(32, 2, 2, 3, rng=np.random.default_rng(0))
    base = mc.longformer_mask(32, 2, [0, 1])
    assert (bb >= base).all() and (bb.sum(-1) <= base.sum(-1) + 3).all() and (bb.sum() > base.sum())
    assert np.array_equal(bb, mc.bigbird_mask(32, 2, 2, 3, rng=np.random.default_rng(0)))  # seeded
    with pytest.raises(ValueError, match=r"global_tokens holds positions \[10\]"):
        mc.longformer_mask(10, 2, [10])
    with pytest.raises(ValueError, match="n_random=40"):
        mc.bigbird_mask(8, 2, 1, 40, rng=np.random.default_rng(0))


@pytest.mark.parametrize("tokens", [[1.7], [True], [0, True], np.array([np.nan]), ["1"], [[0.5]]])
def test_longformer_refuses_token_positions_that_are_not_whole_numbers(tokens):
    with pytest.raises(ValueError, match="global_tokens must be whole-number token positions"):
        mc.longformer_mask(5, 1, tokens)


def test_longformer_accepts_whole_numbers_of_any_integer_or_float_type():
    expected = mc.longformer_mask(5, 1, [1])
    for tokens in ([1.0], np.array([1], np.int8), [np.int64(1)], (1,), []):
        got = mc.longformer_mask(5, 1, tokens)
        assert np.array_equal(got, expected if len(tokens) else mc.sliding_window_mask(5, 1) | False)


def test_bigbird_accepts_numpy_whole_numbers_and_refuses_the_rest():
    rng = lambda: np.random.default_rng(0)  # noqa: E731
    assert np.array_equal(mc.bigbird_mask(8, 2, np.int64(1), np.int32(2), rng=rng()), mc.bigbird_mask(8, 2, 1, 2, rng=rng()))
    for bad in (1.0, True, "1", -1):
        with pytest.raises(ValueError, match="must be whole numbers in 0..T=8"):
            mc.bigbird_mask(8, 2, bad, 2, rng=rng())


# ----------------------------------------------------------------------------- the benchmark script
def test_benchmark_runs_points_in_fresh_processes_and_prints_its_table(capsys, tmp_path):
    """benchmarks/bench_efficient.py on a tiny sweep: the table, the command, the targets and its json."""
    import json
    import runpy
    from pathlib import Path
    bench = runpy.run_path(str(Path(__file__).resolve().parents[2] / "benchmarks" / "bench_efficient.py"))
    rng = np.random.default_rng(14)
    Q, K, V = (rng.standard_normal((1, 2, 64, 8), dtype=np.float32) for _ in range(3))
    assert_close(bench["in_place_naive"](Q, K, V), exact(Q, K, V), np.float32, "in-place naive")
    out_file = tmp_path / "bench.json"
    bench["main"](["--seq-lens", "128", "--methods", "in-place", "tiled", "sliding", "--repeats", "1",
                   "--rounds", "1", "--out", str(out_file)])
    out = capsys.readouterr().out
    assert out.startswith("$ python benchmarks/bench_efficient.py --seq-lens 128")
    assert "| 128 | " in out and "GiB" in out and "targets at seq_len 128: tiled peak" in out
    data = json.loads(out_file.read_text())
    assert data["setting"] == "no thread variable set"
    assert [(r["seq_len"], r["method"]) for r in data["rows"]] == [(128, "in-place"), (128, "tiled"), (128, "sliding")]
    assert all(r["seconds"] > 0 and 0 < r["peak_gib"] < 4 for r in data["rows"])


# ---- the third round of attacks: the attack generator's and the blind attacker's findings
def test_the_online_softmax_start_and_result_refuse_what_is_not_theirs():
    assert mc.online_softmax_start(2, 3, batch=(4, 5)).acc.shape == (4, 5, 2, 3)
    for bad in (3, "spam", (2, 0), (2.5,), (True,)):
        with pytest.raises(ValueError, match="batch="):
            mc.online_softmax_start(2, 3, batch=bad)
    for bad in (None, "spam", 3, (np.zeros((1, 1)),) * 3):
        with pytest.raises(ValueError, match="state must be a SoftmaxState"):
            mc.online_softmax_result(bad)


@pytest.mark.parametrize("fn", [mc.naive_attention_bytes, lambda *a, **k: mc.tiled_attention_bytes(*a, 2, **k)])
def test_byte_counts_refuse_an_itemsize_that_is_no_size(fn):
    assert fn(4, 4, 4, 4, itemsize=2) * 2 == fn(4, 4, 4, 4, itemsize=4)
    for bad in (0, -1, 4.5, True, "4"):
        with pytest.raises(ValueError, match="itemsize="):
            fn(4, 4, 4, 4, itemsize=bad)


def test_masks_refuse_a_missing_window_and_a_missing_rng():
    with pytest.raises(ValueError, match="window=None"):
        mc.sliding_window_mask(4, None)
    for bad in (None, 0, "spam"):
        with pytest.raises(ValueError, match="rng must be a numpy Generator"):
            mc.bigbird_mask(8, 2, 1, 2, rng=bad)
    with pytest.raises(ValueError, match="global_tokens must be whole-number"):
        mc.longformer_mask(5, 1, None)


def test_split_kv_attention_is_the_merge_of_its_partials():
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 7, 4)), rng.normal(size=(2, 7, 3))
    outs, lses = efficient.split_kv_partials(Q, K, V, 3)
    np.testing.assert_allclose(efficient.merge_attention_partials(outs, lses), mc.split_kv_attention(Q, K, V, 3))
    np.testing.assert_allclose(mc.split_kv_attention(Q, K, V, 3), mc.scaled_dot_product_attention(Q, K, V)[0],
                               atol=1e-12)


def test_check_n_splits_names_a_bad_number_of_keys():
    assert efficient.check_n_splits(3, np.int64(7)) == 3
    for bad in (None, 7.5, "7", 0):
        with pytest.raises(ValueError, match="S="):
            efficient.check_n_splits(3, bad)


def test_merge_refuses_boolean_partials():
    with pytest.raises(ValueError, match=r"lses\[0\] is boolean"):
        efficient.merge_attention_partials([np.array([[1.0]])], [np.array([[True]])])
    with pytest.raises(ValueError, match=r"outs\[0\] is boolean"):
        efficient.merge_attention_partials([np.array([[True]])], [np.array([[0.0]])])


def test_online_softmax_start_refuses_a_state_past_the_course_limit():
    with pytest.raises(ValueError, match=r"online-softmax state \(4, 1000000, 300\) would take"):
        efficient.online_softmax_start(10**6, 300, batch=(4,))
