"""Assertion helpers shared by the foundation tests (parity with PyTorch, properties).

Every helper takes the function under test as an argument, so the very same helper
that passes on ``mha_course`` is shown to FAIL on deliberately wrong implementations
in ``test_wrong_implementations.py``. That is how we know these tests can fail.

Shapes: ``B`` batch, ``T`` queries, ``S`` keys, ``D = d_model``, ``h`` heads,
``d_k = D // h``. Our masks: boolean, True = may attend.
"""
from __future__ import annotations

import contextlib
import warnings

import numpy as np
import pytest

import mha_course as mc
from mha_course.tools.torch_rule import INSTALL_TORCH, REQUIRE_TORCH_VAR, torch_required

# Max abs error allowed against the PyTorch reference, per dtype.
PARITY_TOL = {np.dtype(np.float64): 1e-10, np.dtype(np.float32): 2e-5}
# Error allowed between two of our own computations that do the same maths in another order.
SAME_MATHS_TOL = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 2e-6}

# ----------------------------------------------------------------------------- torch
def require_torch():
    """Return the ``torch`` module; skip the test if it is missing, FAIL if CI requires it.

    The rule is ``mha_course.tools.torch_rule`` (notebooks/conftest.py asks it too), so the
    parity tests cannot skip silently in CI.
    """
    try:
        import torch
    except ImportError as exc:
        if torch_required():
            pytest.fail(f"{REQUIRE_TORCH_VAR}=1 but torch cannot be imported ({exc}); "
                        f"install it with: {INSTALL_TORCH}", pytrace=False)
        pytest.skip(f"PyTorch parity tests need torch ({exc}); {INSTALL_TORCH} (CPU) to run them")
    return torch


def _torch_tensor(torch, a):
    return torch.from_numpy(np.ascontiguousarray(a))


def torch_mha(x, params: mc.MHAParams, h: int, *, context=None, allowed=None,
              causal=False, lengths=None):
    """The reference: torch.nn.MultiheadAttention with our parameters copied in.

    x (B, T, D), context (B, S, D) or None -> out (B, T, D), weights (B, h, T, S) as numpy.
    ``allowed``: OUR convention (True = may attend), broadcastable to (B, h, T, S); it is
    inverted for torch, whose ``attn_mask`` says True = blocked. ``causal`` and ``lengths``
    make torch build its own causal ``attn_mask`` / ``key_padding_mask``, independently of
    our ``causal_mask`` / ``padding_mask``.
    """
    torch = require_torch()
    x = np.asarray(x)
    ctx = x if context is None else np.asarray(context)
    (B, T, D), S = x.shape, ctx.shape[1]
    dtype = getattr(torch, x.dtype.name)
    bias = params.b_q is not None
    m = torch.nn.MultiheadAttention(D, h, bias=bias, batch_first=True, kdim=D, vdim=D,
                                    dtype=dtype).eval()
    with torch.no_grad():
        m.in_proj_weight.copy_(_torch_tensor(torch, np.concatenate(
            [params.W_q.T, params.W_k.T, params.W_v.T])))  # (3D, D): torch computes x @ W.T
        m.out_proj.weight.copy_(_torch_tensor(torch, params.W_o.T))
        if bias:
            m.in_proj_bias.copy_(_torch_tensor(torch, np.concatenate([params.b_q, params.b_k, params.b_v])))
            m.out_proj.bias.copy_(_torch_tensor(torch, params.b_o))
        attn_mask = key_padding_mask = None
        if allowed is not None:
            blocked = ~np.broadcast_to(allowed, (B, h, T, S))
            attn_mask = _torch_tensor(torch, blocked.reshape(B * h, T, S))  # batch-major, as torch
        if causal:
            attn_mask = torch.triu(torch.ones(T, S, dtype=torch.bool), diagonal=1)  # True above diagonal
        if lengths is not None:
            key_padding_mask = torch.arange(S)[None, :] >= torch.as_tensor(lengths)[:, None]  # (B, S)
        xt, ct = _torch_tensor(torch, x), _torch_tensor(torch, ctx)
        out, weights = m(xt, ct, ct, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                         need_weights=True, average_attn_weights=False)
    return out.numpy(), weights.numpy()


def torch_sdpa(Q, K, V, *, allowed=None, causal=False):
    """The reference: torch.nn.functional.scaled_dot_product_attention -> out, weights (numpy).

    Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v). torch returns no weights, so they are
    read off the same kernel by attending over the identity: weights = sdpa(Q, K, I_S).
    ``allowed`` is boolean, True = may attend (torch's convention for this function too).
    """
    torch = require_torch()
    F = torch.nn.functional
    Q, K, V = (_torch_tensor(torch, np.asarray(a)) for a in (Q, K, V))
    S = K.shape[-2]
    eye = torch.eye(S, dtype=V.dtype).expand(*K.shape[:-2], S, S)
    mask = None if allowed is None else _torch_tensor(torch, np.asarray(allowed))
    with torch.no_grad():
        out = F.scaled_dot_product_attention(Q, K, V, attn_mask=mask, is_causal=causal)
        weights = F.scaled_dot_product_attention(Q, K, eye, attn_mask=mask, is_causal=causal)
    return out.numpy(), weights.numpy()


# ----------------------------------------------------------------------------- closeness
def assert_close(actual, expected, dtype, what: str, tol=None) -> None:
    """Same shape and max |actual - expected| <= tol (default: the parity tolerance of dtype)."""
    dtype = np.dtype(dtype)
    tol = PARITY_TOL[dtype] if tol is None else tol
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (
        f"{what}: shape {actual.shape}, expected {expected.shape}")
    assert np.isfinite(actual).all(), f"{what}: contains NaN or inf"
    err = float(np.max(np.abs(actual.astype(np.float64) - expected), initial=0.0))
    assert err <= tol, f"{what}: max abs error {err:.3g} > {tol:g} ({dtype})"


def assert_dtype(arrays, dtype, what: str) -> None:
    """Every array in ``arrays`` has exactly ``dtype`` (no silent upcast)."""
    dtype = np.dtype(dtype)
    for i, a in enumerate(arrays):
        assert np.asarray(a).dtype == dtype, f"{what}[{i}]: dtype {np.asarray(a).dtype}, expected {dtype}"


def our_mask(T, S, *, allowed=None, causal=False, lengths=None,
             causal_fn=mc.causal_mask, padding_fn=mc.padding_mask):
    """Build the mask in OUR convention with the functions under test (or None)."""
    if causal:
        assert T == S, "a causal mask needs T == S"
        return causal_fn(T)
    if lengths is not None:
        return padding_fn(lengths, S)
    return allowed


def assert_mha_matches_torch(mha_fn, x, params, h, *, context=None, allowed=None, causal=False,
                             lengths=None, causal_fn=mc.causal_mask, padding_fn=mc.padding_mask):
    """mha_fn(x, params, h, mask, context) equals torch.nn.MultiheadAttention on outputs and weights."""
    x = np.asarray(x)
    S = (x if context is None else np.asarray(context)).shape[1]
    mask = our_mask(x.shape[1], S, allowed=allowed, causal=causal, lengths=lengths,
                    causal_fn=causal_fn, padding_fn=padding_fn)
    out, weights = mha_fn(x, params, h, mask=mask, context=context)
    ref_out, ref_w = torch_mha(x, params, h, context=context, allowed=allowed, causal=causal,
                               lengths=lengths)
    assert_dtype([out, weights], x.dtype, "multi_head_attention")
    assert_close(weights, ref_w, x.dtype, "weights (B, h, T, S)")
    assert_close(out, ref_out, x.dtype, "output (B, T, D)")


def assert_sdpa_matches_torch(sdpa_fn, Q, K, V, *, allowed=None, causal=False,
                              causal_fn=mc.causal_mask):
    """sdpa_fn(Q, K, V, mask) equals torch's scaled_dot_product_attention on out and weights."""
    mask = our_mask(Q.shape[-2], K.shape[-2], allowed=allowed, causal=causal, causal_fn=causal_fn)
    out, weights = sdpa_fn(Q, K, V, mask)
    ref_out, ref_w = torch_sdpa(Q, K, V, allowed=allowed, causal=causal)
    assert_dtype([out, weights], Q.dtype, "scaled_dot_product_attention")
    assert_close(weights, ref_w, Q.dtype, "weights (..., T, S)")
    assert_close(out, ref_out, Q.dtype, "out (..., T, d_v)")


# ----------------------------------------------------------------------------- properties
@contextlib.contextmanager
def no_warnings(what: str):
    """Turn any warning raised inside the block (overflow, 0/0, ...) into an AssertionError."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            yield
        except Warning as w:
            raise AssertionError(f"{what} warned: {type(w).__name__}: {w}") from None


def assert_rows_sum_to_one(weights, allowed, what="weights") -> None:
    """weights (..., T, S): >= 0, exactly 0 where masked, rows with any allowed key sum to 1,
    rows with none are all zero. ``allowed`` broadcasts to weights (None = all allowed)."""
    w = np.asarray(weights)
    allowed = np.ones(w.shape, bool) if allowed is None else np.broadcast_to(allowed, w.shape)
    tol = SAME_MATHS_TOL[w.dtype] * 10
    assert np.isfinite(w).all() and (w >= 0).all(), f"{what}: negative or non-finite entries"
    assert (w[~allowed] == 0).all(), f"{what}: non-zero weight on a masked key"
    any_key = allowed.any(axis=-1)
    sums = w.sum(axis=-1)
    assert np.allclose(sums[any_key], 1.0, rtol=0, atol=tol), (
        f"{what}: rows sum to {sums[any_key].min():.6g}..{sums[any_key].max():.6g}, not 1")
    assert (sums[~any_key] == 0).all(), f"{what}: a fully masked row is not all zero"


def assert_softmax_correct(softmax_fn, x, axis=-1) -> None:
    """softmax_fn(x, axis) is finite, keeps x's dtype and equals exp(x - logsumexp(x))."""
    x = np.asarray(x)
    with no_warnings("softmax"):  # an overflow warning is a failure too
        y = softmax_fn(x, axis=axis)
    assert y.dtype == x.dtype, f"softmax: dtype {y.dtype}, expected {x.dtype}"
    assert np.isfinite(y).all(), "softmax: NaN or inf (forgot to subtract the max?)"
    x64 = x.astype(np.float64)
    ref = np.exp(x64 - np.logaddexp.reduce(x64, axis=axis, keepdims=True))  # another route
    tol = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 1e-6}[x.dtype]
    assert_close(y, ref, x.dtype, "softmax", tol=tol)


def assert_permutation_equivariant(mha_fn, x, params, h, perm) -> None:
    """Unmasked self-attention: permuting the tokens permutes outputs and both weight axes."""
    out, w = mha_fn(x, params, h)
    out_p, w_p = mha_fn(x[:, perm], params, h)
    tol = SAME_MATHS_TOL[np.asarray(x).dtype] * 100
    assert_close(out_p, out[:, perm], x.dtype, "output of permuted x", tol=tol)
    assert_close(w_p, w[:, :, perm][:, :, :, perm], x.dtype, "weights of permuted x", tol=tol)


def assert_causal(mha_fn, x, x_changed, params, h, t, causal_fn=mc.causal_mask) -> None:
    """x and x_changed agree up to position t; with a causal mask, outputs and weights at
    positions <= t must not change."""
    assert np.array_equal(x[:, :t + 1], x_changed[:, :t + 1])
    mask = causal_fn(x.shape[1])
    out, w = mha_fn(x, params, h, mask=mask)
    out2, w2 = mha_fn(x_changed, params, h, mask=mask)
    tol = SAME_MATHS_TOL[np.asarray(x).dtype] * 100
    assert_close(out2[:, :t + 1], out[:, :t + 1], x.dtype, f"outputs at positions <= {t}", tol=tol)
    assert_close(w2[:, :, :t + 1], w[:, :, :t + 1], x.dtype, f"weights of queries <= {t}", tol=tol)


def assert_h1_is_sdpa(mha_fn, sdpa_fn, x, params, mask=None, context=None) -> None:
    """With h = 1, multi-head attention is one scaled dot-product attention on the projections."""
    ctx = x if context is None else context

    def project(a, W, b):
        return a @ W + (0 if b is None else b)

    Q, K, V = project(x, params.W_q, params.b_q), project(ctx, params.W_k, params.b_k), \
        project(ctx, params.W_v, params.b_v)
    sdpa_mask = mask
    if mask is not None and np.ndim(mask) == 4:
        sdpa_mask = np.asarray(mask)[:, 0]  # (B, 1, T, S) -> (B, T, S): the one head's mask
    head, w_ref = sdpa_fn(Q, K, V, sdpa_mask)  # (B, T, D), (B, T, S)
    out, w = mha_fn(x, params, 1, mask=mask, context=context)
    tol = SAME_MATHS_TOL[np.asarray(x).dtype] * 100
    assert_close(w[:, 0], w_ref, x.dtype, "h=1 weights vs sdpa", tol=tol)
    assert_close(out, project(head, params.W_o, params.b_o), x.dtype, "h=1 output vs sdpa", tol=tol)


def assert_split_combine(split_fn, combine_fn, x, h) -> None:
    """split_fn gives head i the features i*d_k:(i+1)*d_k of every position, and
    combine_fn(split_fn(x, h)) == x exactly."""
    B, T, D = x.shape
    d_k = D // h
    heads = split_fn(x, h)
    assert heads.shape == (B, h, T, d_k), f"split_heads: shape {heads.shape}, expected {(B, h, T, d_k)}"
    for i in range(h):
        assert np.array_equal(heads[:, i], x[:, :, i * d_k:(i + 1) * d_k]), (
            f"split_heads: head {i} is not features {i * d_k}:{(i + 1) * d_k} of every position")
    back = combine_fn(heads)
    assert back.shape == x.shape and np.array_equal(back, x), "combine_heads(split_heads(x, h)) != x"


def assert_h_independent(mha_fn, x, params) -> None:
    """The same params run with every valid h; h = 1 and h = d_model give different outputs."""
    (B, T, D), n = x.shape, mc.count_params(params)
    outs = {}
    for h in mc.valid_heads(D):
        out, w = mha_fn(x, params, h)
        assert out.shape == (B, T, D) and w.shape == (B, h, T, T), f"h={h}: shapes {out.shape}, {w.shape}"
        outs[h] = out
    assert mc.count_params(params) == n
    if D > 1 and T > 1:
        assert not np.allclose(outs[1], outs[D], rtol=0, atol=1e-6), (
            "h=1 and h=d_model give the same output: are the heads really separate?")


def assert_zero_rows_quietly(mha_fn, x, params, h, mask) -> None:
    """Query rows with no allowed key: zero weights and zero head output, no NaN, no warning."""
    with no_warnings("attention with fully masked rows"):
        t = mha_fn(x, params, h, mask=mask)
    weights, heads = (t["weights"], t["head_outputs"]) if isinstance(t, mc.Trace) else (t[1], None)
    B, _, T, S = weights.shape
    dead = ~np.broadcast_to(mask, weights.shape).any(axis=-1)  # (B, h, T)
    assert dead.any(), "the test mask should block every key of some query"
    assert np.isfinite(weights).all(), "weights contain NaN or inf"
    assert (weights[dead] == 0).all(), "a fully masked query row has non-zero weights"
    if heads is not None:
        assert (heads[dead] == 0).all(), "a fully masked query row has a non-zero head output"
    assert_rows_sum_to_one(weights, np.broadcast_to(mask, weights.shape))


def random_allowed(rng, shape, p_block=0.4, keep_one=True):
    """A random boolean mask (True = may attend) of ``shape`` (..., T, S); with keep_one,
    every query row keeps at least one key (torch's nn.MultiheadAttention gives NaN otherwise)."""
    allowed = rng.random(shape) > p_block
    if keep_one:
        rows = allowed.reshape(-1, shape[-1])
        rows[np.arange(rows.shape[0]), rng.integers(0, shape[-1], rows.shape[0])] = True
    return allowed
