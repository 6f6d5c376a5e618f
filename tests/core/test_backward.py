"""The backward pass (mha_course.backward): against torch autograd, finite differences, invariants.

- Parity: torch autograd on the same forward written in torch (float64, <= 1e-9), with masks that
  include a fully masked row (the torch reference gives such a row zero weights, as we do, and
  builds it with torch.where so no NaN reaches its gradient), cross-attention (T != S),
  h = 1 .. d_model and biases on and off.
- Finite differences: central differences of the scalar loss sum(grad_out * out), every entry.
- Hypothesis invariants (derandomized): linearity in grad_out, self = cross with context=x summed,
  softmax gradients summing to zero over the keys, masked keys getting no gradient.
- Wrong implementations that these checks must catch: a diagonal softmax Jacobian, a missing
  transpose in a matmul gradient, the shared K and V gradients of self-attention not summed.
"""
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mha_course as mc
from _mha_checks import random_allowed, require_torch
from mha_course import backward as bw

PROFILE = settings(derandomize=True, database=None, deadline=None, max_examples=20,
                   suppress_health_check=[HealthCheck.too_slow])
TORCH_TOL = 1e-9

# (B, T, S, d_model, kind): every h dividing d_model is tried for each.
SIZES = [(1, 1, 1, 1, "self"), (2, 5, 5, 6, "self"), (2, 4, 7, 8, "cross"), (1, 6, 3, 4, "cross")]
CASES = [(*s, h) for s in SIZES for h in mc.valid_heads(s[3])]


def _problem(rng, B, T, S, D, kind, bias, mask_kind, h):
    params = mc.init_params(D, rng=rng, bias=bias)
    x = rng.normal(size=(B, T, D))
    context = rng.normal(size=(B, S, D)) if kind == "cross" else None
    S = T if context is None else S
    mask = None
    if mask_kind == "causal":
        mask = np.tril(np.ones((T, S), dtype=bool))
    elif mask_kind == "random":
        mask = random_allowed(rng, (B, h, T, S), keep_one=False)
        mask[0, 0, 0, :] = False  # a query with no allowed key at all
    return x, params, context, mask, rng.normal(size=(B, T, D))


def torch_grads(x, params, h, grad_out, mask, context):
    """Reference: the forward in torch, our semantics (a fully masked row -> zero weights)."""
    torch = require_torch()
    leaf = lambda a: None if a is None else torch.tensor(a, requires_grad=True)  # noqa: E731
    X, C, P = leaf(x), leaf(context), [leaf(a) for a in params]
    ctx = X if C is None else C
    B, T, D = x.shape
    proj = [inp @ P[i] + (0 if P[4 + i] is None else P[4 + i]) for i, inp in enumerate((X, ctx, ctx))]
    Qh, Kh, Vh = (a.reshape(B, -1, h, D // h).transpose(1, 2) for a in proj)  # (B, h, N, d_k)
    scores = Qh @ Kh.transpose(-1, -2) / (D // h) ** 0.5
    allowed = torch.ones(scores.shape, dtype=torch.bool) if mask is None else \
        torch.tensor(np.broadcast_to(mask, scores.shape).copy())
    any_key = allowed.any(-1, keepdim=True)
    safe = torch.where(any_key, scores.masked_fill(~allowed, -float("inf")), torch.zeros_like(scores))
    weights = torch.softmax(safe, -1) * any_key
    out = (weights @ Vh).transpose(1, 2).reshape(B, T, D) @ P[3] + (0 if P[7] is None else P[7])
    (out * torch.tensor(grad_out)).sum().backward()
    grad = lambda t: None if t is None else t.grad.numpy()  # noqa: E731
    return grad(X), mc.MHAParams(*(grad(p) for p in P)), grad(C)


def assert_grads_close(ours, ref, tol):
    (gx, gp, gc), (rx, rp, rc) = ours, ref
    assert np.abs(gx - rx).max() <= tol, f"grad_x off by {np.abs(gx - rx).max():.3g}"
    for name, a, b in zip(mc.MHAParams._fields, gp, rp):
        assert (a is None) == (b is None), f"grad_params.{name}: {a is None=} but {b is None=}"
        if a is not None:
            assert np.abs(a - b).max() <= tol, f"grad_params.{name} off by {np.abs(a - b).max():.3g}"
    assert (gc is None) == (rc is None)
    if gc is not None:
        assert np.abs(gc - rc).max() <= tol, f"grad_context off by {np.abs(gc - rc).max():.3g}"


# ----------------------------------------------------------------------------- torch parity
@pytest.mark.parametrize("mask_kind", ["none", "causal", "random"])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("B,T,S,D,kind,h", CASES)
def test_matches_torch_autograd(B, T, S, D, kind, h, bias, mask_kind):
    if mask_kind == "causal" and kind == "cross" and T > S:
        mask_kind = "random"  # a causal (T, S) mask with T > S is fine too, but keep rows meaningful
    x, params, context, mask, g = _problem(np.random.default_rng(D * 100 + h), B, T, S, D, kind,
                                           bias, mask_kind, h)
    ours = mc.mha_backward(x, params, h, g, mask=mask, context=context)
    assert_grads_close(ours, torch_grads(x, params, h, g, mask, context), TORCH_TOL)


def test_fully_masked_row_gets_zero_gradient():
    x, params, context, mask, g = _problem(np.random.default_rng(1), 1, 3, 3, 4, "self", True, "random", 2)
    mask = np.ones((1, 2, 3, 3), dtype=bool)
    mask[:, :, 1] = False  # query 1 sees nothing in either head
    grad_x, grad_p, _ = mc.mha_backward(x, params, 2, g, mask=mask)
    _, w, pullback = bw.mha_vjp(x, params, 2, mask=mask)
    assert np.all(w[:, :, 1] == 0)
    g_only_row1 = np.zeros_like(g)
    g_only_row1[:, 1] = g[:, 1]
    gx1, gp1, _ = pullback(g_only_row1)
    # row 1's output is just b_o: its gradient reaches b_o and W_o (through a zero concat) only
    assert np.allclose(gp1.b_o, g[0, 1]) and np.all(gp1.W_q == 0) and np.all(gp1.W_k == 0)
    assert np.all(gx1 == 0) and np.all(np.isfinite(grad_x))


# ----------------------------------------------------------------------------- finite differences
def fd_grad(f, a, eps=1e-6):
    """Central differences of the scalar function f at every entry of a (changed in place, restored)."""
    grad = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        old = a[i]
        a[i] = old + eps
        up = f()
        a[i] = old - eps
        grad[i] = (up - f()) / (2 * eps)
        a[i] = old
    return grad


def assert_backward_matches_fd(backward, h=2, kind="self", tol=1e-6):
    """backward(x, params, h, grad_out, mask, context) -> (grad_x, grad_params, grad_context)."""
    B, T, S, D = 2, 4, 3 if kind == "cross" else 4, 4
    x, params, context, mask, g = _problem(np.random.default_rng(7), B, T, S, D, kind, True, "random", h)
    loss = lambda: float((g * mc.multi_head_attention(x, params, h, mask, context)[0]).sum())  # noqa: E731
    grad_x, grad_p, grad_c = backward(x, params, h, g, mask, context)
    pairs = [(x, grad_x)] + list(zip(params, grad_p)) + ([] if context is None else [(context, grad_c)])
    for a, ga in pairs:
        assert np.abs(fd_grad(loss, a) - ga).max() <= tol


@pytest.mark.parametrize("kind", ["self", "cross"])
@pytest.mark.parametrize("h", [1, 2, 4])
def test_matches_finite_differences(h, kind):
    assert_backward_matches_fd(mc.mha_backward, h=h, kind=kind)


def test_stage_functions_match_finite_differences():
    rng = np.random.default_rng(3)
    s, g = rng.normal(size=(2, 5)), rng.normal(size=(2, 5))
    loss = lambda: float((g * mc.softmax(s)).sum())  # noqa: E731
    assert np.allclose(bw.softmax_backward(mc.softmax(s), g), fd_grad(loss, s), atol=1e-8)
    a, b, go = rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 5)), rng.normal(size=(2, 3, 5))
    ga, gb = bw.matmul_backward(a, b, go)
    assert np.allclose(ga, fd_grad(lambda: float((go * (a @ b)).sum()), a), atol=1e-8)
    assert np.allclose(gb, fd_grad(lambda: float((go * (a @ b)).sum()), b), atol=1e-8)
    Q, K, V, go = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2)), rng.normal(size=(3, 2))
    f = lambda: float((go * mc.scaled_dot_product_attention(Q, K, V)[0]).sum())  # noqa: E731
    grads = bw.attention_backward(Q, K, V, mc.scaled_dot_product_attention(Q, K, V)[1], go)
    for arr, ga in zip((Q, K, V), grads):
        assert np.allclose(ga, fd_grad(f, arr), atol=1e-8)


def test_split_and_combine_backward_are_each_others_inverse():
    g = np.random.default_rng(0).normal(size=(2, 3, 5, 4))
    assert np.array_equal(bw.split_heads_backward(g), mc.combine_heads(g))
    assert np.array_equal(bw.combine_heads_backward(bw.split_heads_backward(g), 3), g)
    x = np.random.default_rng(1).normal(size=(2, 5, 12))
    # <split(x), g> == <x, split_backward(g)>: the adjoint identity that defines a backward
    assert np.isclose((mc.split_heads(x, 3) * g).sum(), (x * bw.split_heads_backward(g)).sum())


# ----------------------------------------------------------------------------- invariants
@st.composite
def problems(draw):
    D = draw(st.sampled_from([1, 2, 4, 6, 8]))
    h = draw(st.sampled_from(mc.valid_heads(D)))
    B, T, S = draw(st.integers(1, 3)), draw(st.integers(1, 5)), draw(st.integers(1, 5))
    kind = draw(st.sampled_from(["self", "cross"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return (*_problem(rng, B, T, S, D, kind, draw(st.booleans()), "random", h), h, rng)


@PROFILE
@given(problems())
def test_backward_is_linear_in_grad_out(problem):
    x, params, context, mask, g, h, rng = problem
    g2 = rng.normal(size=g.shape)
    pull = bw.mha_vjp(x, params, h, mask, context)[2]
    one, two, both = pull(g), pull(g2), pull(g + 2 * g2)
    assert np.allclose(both[0], one[0] + 2 * two[0], atol=1e-10)
    for a, b, c in zip(one[1], two[1], both[1]):
        assert a is None or np.allclose(c, a + 2 * b, atol=1e-10)


@PROFILE
@given(problems())
def test_self_attention_sums_the_three_paths(problem):
    x, params, _, _, g, h, _ = problem
    gx_self, gp_self, _ = mc.mha_backward(x, params, h, g)
    gx_q, gp_cross, gx_kv = mc.mha_backward(x, params, h, g, context=x.copy())
    assert np.allclose(gx_self, gx_q + gx_kv, atol=1e-10)
    assert all(a is None or np.allclose(a, b, atol=1e-10) for a, b in zip(gp_self, gp_cross))


@PROFILE
@given(problems())
def test_bias_gradients_and_masked_keys(problem):
    x, params, context, mask, g, h, rng = problem
    _, grad_p, _ = mc.mha_backward(x, params, h, g, mask, context)
    if params.b_o is not None:
        assert np.allclose(grad_p.b_o, g.sum(axis=(0, 1)))  # out = ... + b_o
    _, w = mc.multi_head_attention(x, params, h, mask, context)
    gw = rng.normal(size=w.shape)
    gs = bw.softmax_backward(w, gw)
    assert np.allclose(gs.sum(-1), 0, atol=1e-12)  # softmax ignores a shift of all its scores
    assert np.all(gs[w == 0] == 0)  # a masked key (weight exactly 0) gets no gradient


# ----------------------------------------------------------------------------- bad input
def test_bad_grad_out_shape_names_both_shapes():
    p = mc.init_params(4, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"grad_out has shape \(1, 2, 3\).*\(1, 2, 4\)"):
        mc.mha_backward(np.ones((1, 2, 4)), p, 2, np.ones((1, 2, 3)))
    with pytest.raises(ValueError, match="same shape"):
        bw.softmax_backward(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="cannot be matrix-multiplied"):
        bw.matmul_backward(np.ones((2, 3)), np.ones((4, 5)), np.ones((2, 5)))


# ----------------------------------------------------------------------------- wrong implementations
def test_diagonal_softmax_jacobian_is_caught():
    with mock.patch.object(bw, "softmax_backward", lambda p, g: p * g):  # only diag(p) of diag(p) - p p^T
        with pytest.raises(AssertionError):
            assert_backward_matches_fd(mc.mha_backward)


def assert_attention_backward_matches_fd(attention_backward, T=4, S=4):
    rng = np.random.default_rng(5)
    Q, K, V, go = rng.normal(size=(T, 3)), rng.normal(size=(S, 3)), rng.normal(size=(S, S)), rng.normal(size=(T, S))
    f = lambda: float((go * mc.scaled_dot_product_attention(Q, K, V)[0]).sum())  # noqa: E731
    grads = attention_backward(Q, K, V, mc.scaled_dot_product_attention(Q, K, V)[1], go)
    for arr, ga in zip((Q, K, V), grads):
        assert np.abs(ga - fd_grad(f, arr)).max() <= 1e-6


def test_attention_backward_passes_the_check_its_wrong_twin_fails():
    assert_attention_backward_matches_fd(bw.attention_backward)

    def no_transpose(Q, K, V, w, g):  # grad_V = w @ g instead of w^T @ g: shapes fit when T == S
        gQ, gK, _ = bw.attention_backward(Q, K, V, w, g)
        return gQ, gK, w @ g
    with pytest.raises(AssertionError):
        assert_attention_backward_matches_fd(no_transpose)


def test_shared_kv_gradient_not_summed_is_caught():
    def unsummed(x, params, h, g, mask, context):
        grad_x, grad_p, _ = mc.mha_backward(x, params, h, g, mask, context=x.copy())
        return grad_x, grad_p, None  # forgets that K and V were computed from x too
    with pytest.raises(AssertionError):
        assert_backward_matches_fd(unsummed)


# ----------------------------------------------------------------------------- RoPE and dropout
@pytest.mark.parametrize("kind", ["self", "cross"])
def test_rope_backward_matches_finite_differences(kind):
    def with_rope(x, params, h, g, mask, context):
        return mc.mha_backward(x, params, h, g, mask, context, rope_base=100.0)

    def loss_fn(x, params, h, g, mask, context):
        return float((g * mc.multi_head_attention(x, params, h, mask, context, rope_base=100.0)[0]).sum())
    B, T, S, D, h = 2, 4, 3 if kind == "cross" else 4, 8, 2
    x, params, context, mask, g = _problem(np.random.default_rng(11), B, T, S, D, kind, True, "random", h)
    grads = with_rope(x, params, h, g, mask, context)
    loss = lambda: loss_fn(x, params, h, g, mask, context)  # noqa: E731
    for a, ga in [(x, grads[0]), (params.W_q, grads[1].W_q), (params.W_k, grads[1].W_k)] + (
            [] if context is None else [(context, grads[2])]):
        assert np.abs(fd_grad(loss, a) - ga).max() <= 1e-6
    plain = mc.mha_backward(x, params, h, g, mask, context)
    assert np.abs(plain[1].W_q - grads[1].W_q).max() > 1e-3  # the rotation does change the gradient


def test_dropout_keep_matches_finite_differences_and_rescales():
    x, params, _, mask, g = _problem(np.random.default_rng(12), 2, 4, 4, 4, "self", False, "causal", 2)
    keep = (np.random.default_rng(13).random((2, 2, 4, 4)) >= 0.3) / 0.7  # 0 or 1/(1-p)
    out, w, pull = bw.mha_vjp(x, params, 2, mask, keep=keep)
    heads = (w * keep) @ mc.split_heads(x @ params.W_v, 2)
    assert np.allclose(out, mc.combine_heads(heads) @ params.W_o)
    grad_x, grad_p, _ = pull(g)
    loss = lambda: float((g * bw.mha_vjp(x, params, 2, mask, keep=keep)[0]).sum())  # noqa: E731
    assert np.abs(fd_grad(loss, x) - grad_x).max() <= 1e-6
    assert np.abs(fd_grad(loss, params.W_k) - grad_p.W_k).max() <= 1e-6
    with pytest.raises(ValueError, match="does not broadcast"):
        bw.mha_vjp(x, params, 2, mask, keep=np.ones(3))


def test_gradients_holding_nan_or_inf_are_refused_naming_them():
    rng = np.random.default_rng(7)
    p = mc.init_params(8, rng=rng)
    x = rng.normal(size=(1, 3, 8))
    g = np.ones((1, 3, 8))
    g[0, 1, 2] = np.nan
    with pytest.raises(ValueError, match="grad_out"):
        mc.mha_backward(x, p, 2, g)
    _, _, pullback = bw.mha_vjp(x, p, 2)
    with pytest.raises(ValueError, match="grad_out"):
        pullback(np.full((1, 3, 8), -np.inf))
    with pytest.raises(ValueError, match="grad_weights"):
        bw.softmax_backward(np.full((2, 2), 0.5), np.array([[0.0, np.nan], [1.0, 1.0]]))
    with pytest.raises(ValueError, match="bias='yes' must be True or False"):
        bw.linear_backward(np.ones((2, 3)), np.ones((3, 4)), np.ones((2, 4)), bias="yes")
