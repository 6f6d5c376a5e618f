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
from mha_course import efficient

TOL64 = 1e-10


def _qkv(rng, batch, T, S, d_k=8, d_v=5, dtype=np.float64):
    return (rng.normal(size=(*batch, T, d_k)).astype(dtype), rng.normal(size=(*batch, S, d_k)).astype(dtype),
            rng.normal(size=(*batch, S, d_v)).astype(dtype))


def _exact(Q, K, V, mask=None):
    return mc.scaled_dot_product_attention(Q, K, V, mask)[0]


def _peak_bytes(fn) -> int:
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
    Q, K, V = _qkv(rng, (2, 3), T, S)
    mask = {"none": None, "causal": np.tril(np.ones((T, S), bool)),
            "random": random_allowed(rng, (2, 3, T, S)), "fully masked rows": rng.random((2, 3, T, S)) < 0.2}[kind]
    if kind == "fully masked rows":
        mask[0, 1, 0] = False  # at least one row with no allowed key at all
    out = mc.tiled_attention(Q, K, V, mask, block_size=block)
    assert_close(out, _exact(Q, K, V, mask), np.float64, f"tiled {kind}", tol=TOL64)
    if kind == "fully masked rows":
        assert np.all(out[0, 1, 0] == 0)


def test_tiled_broadcasts_batch_and_keeps_float32():
    rng = np.random.default_rng(1)
    Q = rng.normal(size=(2, 4, 10, 8)).astype(np.float32)
    K, V = rng.normal(size=(4, 12, 8)).astype(np.float32), rng.normal(size=(1, 12, 3)).astype(np.float32)
    out = mc.tiled_attention(Q, K, V, block_size=5)
    assert out.dtype == np.float32 and out.shape == (2, 4, 10, 3)
    assert_close(out, _exact(Q, K, V), np.float32, "tiled float32")


def test_tiled_large_logits_do_not_overflow():
    rng = np.random.default_rng(2)
    Q, K, V = _qkv(rng, (), 12, 30)
    Q *= 200  # scores in the thousands: only the running max keeps exp finite
    assert_close(mc.tiled_attention(Q, K, V, block_size=4), _exact(Q, K, V), np.float64, "large logits", tol=TOL64)


def test_tiled_matches_torch():
    rng = np.random.default_rng(3)
    Q, K, V = _qkv(rng, (2, 2), 17, 17)
    allowed = random_allowed(rng, (2, 2, 17, 17))
    assert_close(mc.tiled_attention(Q, K, V, allowed, block_size=4), torch_sdpa(Q, K, V, allowed=allowed)[0],
                 np.float64, "tiled vs torch")


def test_tiled_never_makes_a_T_by_S_array():
    rng = np.random.default_rng(4)
    Q, K, V = _qkv(rng, (), 1024, 1024, d_k=16, d_v=16)
    full = 1024 * 1024 * 8
    assert _peak_bytes(lambda: mc.tiled_attention(Q, K, V, block_size=128)) < full / 4
    assert _peak_bytes(lambda: _exact(Q, K, V)) >= full  # the probe sees a T x S array when there is one


def test_tiled_uses_the_in_place_update_and_skips_blocked_tiles(monkeypatch):
    calls = []
    real = efficient._online_update_inplace
    monkeypatch.setattr(efficient, "_online_update_inplace", lambda *a: calls.append(1) or real(*a))
    rng = np.random.default_rng(5)
    Q, K, V = _qkv(rng, (), 64, 64)
    mc.tiled_attention(Q, K, V, mc.causal_mask(64), block_size=16)  # one block of rows, 4 key blocks
    assert len(calls) == 4
    calls.clear()
    mc.tiled_attention(Q, K, V, np.zeros((64, 64), bool), block_size=16)
    assert calls == []  # every key block blocked: none computed


def test_tiled_runs_big_inputs_on_a_thread_pool(monkeypatch):
    pools = []
    real = efficient.ThreadPoolExecutor
    monkeypatch.setattr(efficient, "ThreadPoolExecutor", lambda n: pools.append(n) or real(n))
    monkeypatch.setattr(efficient.os, "cpu_count", lambda: 2)
    rng = np.random.default_rng(6)
    Q, K, V = _qkv(rng, (4,), 600, 600, d_k=4, d_v=2)
    out = mc.tiled_attention(Q, K, V, block_size=128)
    assert pools == [2]
    assert_close(out, _exact(Q, K, V), np.float64, "tiled on threads", tol=TOL64)


def test_tiled_rejects_a_bad_block_size():
    Q = np.ones((2, 2))
    with pytest.raises(ValueError, match="block_size=0 must be >= 1"):
        mc.tiled_attention(Q, Q, Q, block_size=0)


@settings(derandomize=True, database=None, deadline=None, max_examples=40)
@given(T=st.integers(1, 12), S=st.integers(1, 12), block=st.integers(1, 13), seed=st.integers(0, 2**16))
def test_tiled_property(T, S, block, seed):
    rng = np.random.default_rng(seed)
    Q, K, V = _qkv(rng, (2,), T, S, d_k=3, d_v=2)
    mask = rng.random((2, T, S)) < 0.7
    assert_close(mc.tiled_attention(Q, K, V, mask, block), _exact(Q, K, V, mask), np.float64, "tiled", tol=TOL64)


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
    Q, K, V = _qkv(rng, (), 3, 10)
    steps = mc.tiled_attention_steps(Q, K, V, block_size=4)
    assert len(steps) == 3
    assert_close(mc.online_softmax_result(steps[-1]), _exact(Q, K, V), np.float64, "last step", tol=TOL64)
    assert_close(mc.online_softmax_result(steps[0]), _exact(Q[:, :], K[:4], V[:4]), np.float64, "first step",
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
    Q, K, V = _qkv(rng, (2, 2), T, T)
    expected = _exact(Q, K, V, mc.sliding_window_mask(T, window))
    assert_close(mc.sliding_window_attention(Q, K, V, window), expected, np.float64, "window", tol=TOL64)


def test_sliding_window_memory_grows_as_T_times_window():
    rng = np.random.default_rng(10)
    Q, K, V = _qkv(rng, (), 2048, 2048, d_k=8, d_v=8)
    peak = _peak_bytes(lambda: mc.sliding_window_attention(Q, K, V, 16))
    assert peak < 2048 * 2048 * 8 / 8  # far below one T x T array
    assert peak < 20 * 2048 * 16 * 8  # a few (T, window) arrays and padded copies of K and V


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
    with pytest.raises(ValueError, match=r"token positions \[10\]"):
        mc.longformer_mask(10, 2, [10])
    with pytest.raises(ValueError, match="n_random=40"):
        mc.bigbird_mask(8, 2, 1, 40, rng=np.random.default_rng(0))


# ----------------------------------------------------------------------------- linear attention
@pytest.mark.parametrize("T", [1, 5, 63, 64, 65, 200])
@pytest.mark.parametrize("causal", [False, True])
def test_linear_attention_equals_its_quadratic_form(T, causal):
    rng = np.random.default_rng(T)
    Q, K, V = _qkv(rng, (2, 3), T, T)
    assert_close(mc.linear_attention(Q, K, V, causal), mc.linear_attention_quadratic(Q, K, V, causal),
                 np.float64, f"linear causal={causal}", tol=TOL64)


def test_linear_attention_cross_attention_and_float32():
    rng = np.random.default_rng(11)
    Q, K, V = _qkv(rng, (3,), 7, 19, dtype=np.float32)
    out = mc.linear_attention(Q, K, V)
    assert out.dtype == np.float32
    assert_close(out, mc.linear_attention_quadratic(Q, K, V), np.float32, "linear float32")


def test_linear_attention_is_a_different_kernel_from_softmax():
    rng = np.random.default_rng(12)
    Q, K, V = _qkv(rng, (), 30, 30)
    assert np.abs(mc.linear_attention(Q, K, V) - _exact(Q, K, V)).max() > 1e-3
    x = np.linspace(-5, 5, 11)
    phi = mc.elu_feature_map(x)
    assert (phi > 0).all() and np.allclose(phi[x > 0], x[x > 0] + 1) and np.allclose(phi[x <= 0], np.exp(x[x <= 0]))


def test_causal_linear_attention_has_no_T_by_T_array_and_is_causal():
    rng = np.random.default_rng(13)
    Q, K, V = _qkv(rng, (), 2048, 2048, d_k=8, d_v=8)
    assert _peak_bytes(lambda: mc.linear_attention(Q, K, V, causal=True)) < 2048 * 2048 * 8 / 8
    V2 = V.copy()
    V2[1000:] += 1  # change the future of position 999
    a, b = mc.linear_attention(Q, K, V, True), mc.linear_attention(Q, K, V2, True)
    assert np.array_equal(a[:1000], b[:1000]) and not np.allclose(a[1000:], b[1000:])


def test_causal_linear_attention_needs_self_attention():
    with pytest.raises(ValueError, match="T=2 queries and S=3 keys"):
        mc.linear_attention(np.ones((2, 4)), np.ones((3, 4)), np.ones((3, 4)), causal=True)


# ----------------------------------------------------------------------------- the benchmark script
def test_benchmark_runs_points_in_fresh_processes_and_prints_its_table(capsys):
    """benchmarks/bench_efficient.py on a tiny sweep: the table, the command and the targets line."""
    import runpy
    from pathlib import Path
    bench = runpy.run_path(str(Path(__file__).resolve().parents[1] / "benchmarks" / "bench_efficient.py"))
    rng = np.random.default_rng(14)
    Q, K, V = (rng.standard_normal((1, 2, 64, 8), dtype=np.float32) for _ in range(3))
    assert_close(bench["in_place_naive"](Q, K, V), _exact(Q, K, V), np.float32, "in-place naive")
    bench["main"](["--seq-lens", "128", "--methods", "in-place", "tiled", "--repeats", "1"])
    out = capsys.readouterr().out
    assert out.startswith("$ python benchmarks/bench_efficient.py --seq-lens 128")
    assert "| 128 | " in out and "GiB" in out and "targets at seq_len 128: tiled peak" in out
