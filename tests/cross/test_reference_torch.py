"""Parity with PyTorch (torch==2.13.0, CPU): nn.MultiheadAttention and F.scaled_dot_product_attention.

Our parameters are copied into torch (in_proj_weight = concat(W_q.T, W_k.T, W_v.T),
out_proj.weight = W_o.T, biases likewise), and outputs AND per-head weights must agree to
1e-10 in float64 and 2e-5 in float32. Masks are built on each side independently where
torch can (its own causal mask and key_padding_mask); random masks are converted, since
nn.MultiheadAttention's attn_mask means True = blocked and ours True = may attend.

Without torch these tests skip with the reason; with MHA_COURSE_REQUIRE_TORCH=1 (CI) they fail.
"""
import math
import sys

import numpy as np
import pytest

import mha_course as mc
from _mha_checks import (
    REQUIRE_TORCH_VAR,
    assert_mha_matches_torch,
    assert_sdpa_matches_torch,
    random_allowed,
    require_torch,
    torch_required,
)

DTYPES = [np.float64, np.float32]

# (B, T, S, d_model, h, kind): self-attention has S == T; h = 1 and h = d_model both appear.
CASES = [
    (1, 1, 1, 1, 1, "self"),
    (2, 5, 5, 8, 1, "self"),
    (2, 5, 5, 8, 8, "self"),
    (3, 7, 7, 12, 3, "self"),
    (2, 6, 4, 12, 4, "cross"),
    (1, 3, 9, 16, 2, "cross"),
    (2, 4, 6, 6, 6, "cross"),
]
MASKS = ["none", "causal", "padding", "random"]


@pytest.fixture
def torch_module():
    return require_torch()


def _inputs(rng, B, T, S, D, kind, bias, dtype):
    params = mc.init_params(D, rng=rng, bias=bias, dtype=dtype)
    x = rng.normal(size=(B, T, D)).astype(dtype)
    context = rng.normal(size=(B, S, D)).astype(dtype) if kind == "cross" else None
    return x, params, context


def _mask_kwargs(rng, mask, B, T, S, h):
    if mask == "causal":
        return {"causal": True}
    if mask == "padding":
        return {"lengths": rng.integers(1, S + 1, size=B)}  # >= 1 key per row: torch gives NaN on 0
    if mask == "random":
        shape = [(T, S), (B, 1, T, S), (B, h, T, S)][rng.integers(3)]
        return {"allowed": random_allowed(rng, shape)}
    return {}


MHA_CASES = [(*case, mask) for case in CASES for mask in MASKS
             if not (mask == "causal" and case[-1] == "cross")]  # causal needs T == S


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("B,T,S,D,h,kind,mask", MHA_CASES,
                         ids=[f"B{c[0]}T{c[1]}S{c[2]}D{c[3]}h{c[4]}-{c[5]}-{c[6]}" for c in MHA_CASES])
def test_multi_head_attention_matches_torch(torch_module, B, T, S, D, h, kind, mask, bias, dtype):
    rng = np.random.default_rng([B, T, S, D, h, MASKS.index(mask), bias, DTYPES.index(dtype)])
    x, params, context = _inputs(rng, B, T, S, D, kind, bias, dtype)
    kwargs = _mask_kwargs(rng, mask, B, T, S, h)
    assert_mha_matches_torch(mc.multi_head_attention, x, params, h, context=context, **kwargs)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
def test_trace_matches_torch(torch_module, dtype):
    """trace() is the same computation: its output and weights match torch too."""
    rng = np.random.default_rng(7)
    x, params, context = _inputs(rng, 2, 5, 3, 12, "cross", True, dtype)

    def via_trace(x, params, h, mask=None, context=None):
        t = mc.trace(x, params, h, mask=mask, context=context)
        return t.output, t.weights

    assert_mha_matches_torch(via_trace, x, params, 4, context=context, lengths=np.array([3, 1]))


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("block_bytes", [1, 200])
def test_attention_in_small_row_blocks_matches_torch(torch_module, monkeypatch, block_bytes, mask, dtype):
    """Long sequences are processed in blocks of query rows: force many tiny blocks."""
    monkeypatch.setattr(mc.fast, "_BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng([block_bytes, MASKS.index(mask), DTYPES.index(dtype)])
    B, T, D, h = 2, 7, 12, 3
    x, params, _ = _inputs(rng, B, T, T, D, "self", True, dtype)
    assert_mha_matches_torch(mc.multi_head_attention, x, params, h, **_mask_kwargs(rng, mask, B, T, T, h))


@pytest.mark.parametrize("dtype,scale", [(np.float64, 60.0), (np.float32, 8.0)], ids=["f64", "f32"])
@pytest.mark.parametrize("mask", ["none", "padding"])
def test_large_logits_match_torch(torch_module, mask, dtype, scale):
    """Scores beyond exp's safe range take the subtract-the-row-max path: still torch's result."""
    rng = np.random.default_rng([int(scale), MASKS.index(mask)])
    B, T, D, h = 2, 6, 8, 2
    x, params, _ = _inputs(rng, B, T, T, D, "self", True, dtype)
    x = (x * scale).astype(dtype)
    t = mc.trace(x, params, h)
    Qs = (t["Q_heads"] / math.sqrt(D // h)).astype(dtype)
    assert not mc.fast._exp_is_safe(Qs, t["K_heads"])  # really the row-max path
    assert_mha_matches_torch(mc.multi_head_attention, x, params, h, **_mask_kwargs(rng, mask, B, T, T, h))


# (batch axes, T, S, d_k, d_v) for scaled_dot_product_attention
SDPA_CASES = [((), 4, 4, 3, 5), ((2,), 1, 6, 8, 8), ((2, 3), 5, 7, 4, 2), ((1, 2), 6, 6, 16, 3)]


SDPA_MASKS = ["none", "causal", "random", "random-with-empty-rows"]
SDPA_PARAMS = [(*case, mask) for case in SDPA_CASES for mask in SDPA_MASKS
               if not (mask == "causal" and case[1] != case[2])]  # causal needs T == S


@pytest.mark.parametrize("dtype", DTYPES, ids=["f64", "f32"])
@pytest.mark.parametrize("batch,T,S,d_k,d_v,mask", SDPA_PARAMS,
                         ids=[f"{c[0]}T{c[1]}S{c[2]}dk{c[3]}dv{c[4]}-{c[5]}" for c in SDPA_PARAMS])
def test_scaled_dot_product_attention_matches_torch(torch_module, batch, T, S, d_k, d_v, mask, dtype):
    rng = np.random.default_rng([len(batch), T, S, d_k, d_v, SDPA_MASKS.index(mask), DTYPES.index(dtype)])
    Q, K, V = (rng.normal(size=(*batch, n, d)).astype(dtype) for n, d in ((T, d_k), (S, d_k), (S, d_v)))
    kwargs = {}
    if mask == "causal":
        kwargs = {"causal": True}
    elif mask.startswith("random"):
        # torch's SDPA (unlike nn.MultiheadAttention) also gives zeros on a fully masked row
        allowed = random_allowed(rng, (*batch, T, S), keep_one=True)
        if mask == "random-with-empty-rows":
            allowed[..., 0, :] = False
        kwargs = {"allowed": allowed}
    assert_sdpa_matches_torch(mc.scaled_dot_product_attention, Q, K, V, **kwargs)


def test_require_torch_fails_when_ci_requires_it_and_skips_otherwise(monkeypatch):
    """The skip-or-fail switch itself: CI (MHA_COURSE_REQUIRE_TORCH=1) can never skip silently."""
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    monkeypatch.setenv(REQUIRE_TORCH_VAR, "1")
    with pytest.raises(pytest.fail.Exception, match=r"MHA_COURSE_REQUIRE_TORCH=1 .*torch==2\.13\.0"):
        require_torch()
    for off in ("", "0"):
        monkeypatch.setenv(REQUIRE_TORCH_VAR, off)
        with pytest.raises(pytest.skip.Exception, match=r"need torch .*torch==2\.13\.0"):
            require_torch()


def test_the_required_torch_is_the_pinned_one(torch_module):
    if not torch_required():
        pytest.skip(f"{REQUIRE_TORCH_VAR} is not set: any installed torch may serve as reference")
    assert torch_module.__version__.split("+")[0] == "2.13.0", torch_module.__version__
