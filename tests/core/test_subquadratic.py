"""Linear attention and the sparse patterns (mha_course/subquadratic.py). Linear attention: equal to its
quadratic form, O(T) memory, causal bottom-right as everywhere, finite for far-off inputs, and not softmax
attention. The patterns (sliding window, Longformer, BigBird) are tested in test_efficient.py with the
sliding-window kernel. Everything is importable from mha_course.efficient too (the names of notebook 10).
"""
import numpy as np
import pytest

import mha_course as mc
from _mha_checks import assert_close
from mha_course import efficient, runtime, subquadratic

from .test_efficient import TOL64, exact, peak_bytes, qkv


def test_the_names_stay_importable_from_efficient():
    for name in subquadratic.__all__:
        assert getattr(efficient, name) is getattr(subquadratic, name)


@pytest.mark.parametrize("T", [1, 5, 63, 64, 65, 200])
@pytest.mark.parametrize("causal", [False, True])
def test_linear_attention_equals_its_quadratic_form(T, causal):
    rng = np.random.default_rng(T)
    Q, K, V = qkv(rng, (2, 3), T, T)
    assert_close(mc.linear_attention(Q, K, V, causal), mc.linear_attention_quadratic(Q, K, V, causal),
                 np.float64, f"linear causal={causal}", tol=TOL64)


def test_linear_attention_cross_attention_and_float32():
    rng = np.random.default_rng(11)
    Q, K, V = qkv(rng, (3,), 7, 19, dtype=np.float32)
    out = mc.linear_attention(Q, K, V)
    assert out.dtype == np.float32
    assert_close(out, mc.linear_attention_quadratic(Q, K, V), np.float32, "linear float32")


def test_linear_attention_is_a_different_kernel_from_softmax():
    rng = np.random.default_rng(12)
    Q, K, V = qkv(rng, (), 30, 30)
    assert np.abs(mc.linear_attention(Q, K, V) - exact(Q, K, V)).max() > 1e-3
    x = np.linspace(-5, 5, 11)
    phi = mc.elu_feature_map(x)
    assert (phi > 0).all() and np.allclose(phi[x > 0], x[x > 0] + 1) and np.allclose(phi[x <= 0], np.exp(x[x <= 0]))


def test_causal_linear_attention_has_no_T_by_T_array_and_is_causal():
    rng = np.random.default_rng(13)
    Q, K, V = qkv(rng, (), 2048, 2048, d_k=8, d_v=8)
    assert peak_bytes(lambda: mc.linear_attention(Q, K, V, causal=True)) < 2048 * 2048 * 8 / 8
    V2 = V.copy()
    V2[1000:] += 1  # change the future of position 999
    a, b = mc.linear_attention(Q, K, V, True), mc.linear_attention(Q, K, V2, True)
    assert np.array_equal(a[:1000], b[:1000]) and not np.allclose(a[1000:], b[1000:])


@pytest.mark.parametrize("causal", [False, True])
def test_linear_attention_of_far_off_queries_is_finite_and_unchanged(causal):
    """Q - 800 in float32: phi(q) = exp(q) underflows to 0 and the ratio to 0 / 0 without the
    rescaling. For queries <= 0, phi(q - a) = exp(-a) phi(q): the output must not change."""
    rng = np.random.default_rng(20)
    Q = -np.abs(rng.normal(size=(2, 30, 8))).astype(np.float32) - 1
    K, V = rng.normal(size=(2, 30, 8)).astype(np.float32), rng.normal(size=(2, 30, 3)).astype(np.float32)
    for f in (mc.linear_attention, mc.linear_attention_quadratic):
        near, far = f(Q, K, V, causal), f(Q - np.float32(800), K, V, causal)
        assert np.isfinite(far).all()
        assert_close(far, near, np.float32, f"{f.__name__} of Q - 800", tol=1e-5)
        huge = f(Q, K * np.float32(1e30), V, causal)  # phi(K) = K + 1 near 1e30: no overflow after rescaling
        assert np.isfinite(huge).all()


def test_linear_attention_says_what_cannot_be_represented():
    Q = np.array([[0.0, -200.0]], np.float32)  # phi(q) = (1, e^-200): 0 in float32
    K = np.array([[-200.0, 0.0]] * 3, np.float32)  # phi(k) = (e^-200, 1): phi(q) . phi(k) = 0 for every key
    V = np.ones((3, 2), np.float32)
    for f in (mc.linear_attention, mc.linear_attention_quadratic):
        with pytest.raises(ValueError, match="cannot be computed in float32 .* compute in float64"):
            f(Q, K, V)
        assert np.allclose(f(Q.astype(np.float64), K, V), 1.0)  # the same inputs in float64: exact
    with pytest.raises(ValueError, match="phi\\(K\\)\\^T V overflows"):
        mc.linear_attention(np.ones((1, 2), np.float32), np.ones((4, 2), np.float32), np.full((4, 1), 3e38, np.float32))


@pytest.mark.parametrize("causal", [False, True])
def test_linear_attention_runs_heads_on_the_pool(monkeypatch, causal):
    import threading
    names = []
    real = subquadratic._linear_one
    monkeypatch.setattr(runtime, "cpu_count", lambda: 2)
    monkeypatch.setattr(subquadratic, "_linear_one", lambda *a: names.append(threading.current_thread().name) or real(*a))
    rng = np.random.default_rng(21)
    Q, K, V = qkv(rng, (2, 3), 700, 700, d_k=64, d_v=4)  # more than one tile of work: the pool
    out = mc.linear_attention(Q, K, V, causal)
    assert len(names) == 6 and all(n.startswith("mha_course") for n in names)
    assert_close(out, mc.linear_attention_quadratic(Q, K, V, causal), np.float64, "linear on the pool", tol=TOL64)


@pytest.mark.parametrize("T,S", [(2, 3), (1, 70), (5, 3), (130, 129)])
def test_causal_linear_attention_with_T_not_S_is_bottom_right_as_everywhere(T, S):
    """Query t sees keys 0..S - T + t (cached_causal_mask, tiled_attention(causal=True)); a query that sees
    no key (T > S) gives zeros, as in scaled_dot_product_attention."""
    rng = np.random.default_rng(T * S)
    Q, K, V = qkv(rng, (2,), T, S)
    allowed = np.tril(np.ones((T, S), bool), k=S - T)
    out = mc.linear_attention(Q, K, V, causal=True)
    assert_close(out, mc.linear_attention_quadratic(Q, K, V, causal=True), np.float64, "chunked", tol=TOL64)
    fq, fk = mc.elu_feature_map(Q), mc.elu_feature_map(K)
    A = np.where(allowed, fq @ np.swapaxes(fk, -1, -2), 0)  # the definition, unscaled
    seen = allowed.any(-1)
    want = np.where(seen[:, None], A @ V / np.where(seen[:, None], A.sum(-1, keepdims=True), 1), 0)
    assert_close(out, want, np.float64, "definition", tol=TOL64 * 100)
    if T <= S:
        assert_close(mc.tiled_attention(Q, K, V, causal=True, block_size=4),
                     mc.scaled_dot_product_attention(Q, K, V, mc.cached_causal_mask(T, S - T))[0],
                     np.float64, "tiled decode", tol=TOL64 * 100)


def test_elu_feature_map_refuses_inf_and_underflows_to_zero_never_below():
    with pytest.raises(ValueError, match="x has 1 non-finite"):
        mc.elu_feature_map(np.array([np.inf]))
    phi = mc.elu_feature_map(np.array([-1e308, -800.0, 1e308]))
    assert phi.tolist() == [0.0, 0.0, 1e308] and np.isfinite(phi).all()


@pytest.mark.parametrize("build", [
    lambda: mc.sliding_window_mask(120_000, 4),
    lambda: subquadratic.longformer_mask(70_000, 2, [0]),
    lambda: subquadratic.dilated_window_mask(50_000, 2, 3),
    lambda: subquadratic.bigbird_mask(40_000, 2, 1, 1, rng=np.random.default_rng(0)),
])
def test_huge_sparse_masks_are_refused_naming_the_size(build):
    with pytest.raises(ValueError, match=r"\(\d+, \d+\).* would take .*ask for fewer"):
        build()
