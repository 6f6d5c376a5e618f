"""RoPE inside multi-head attention: ``rope_base`` rotates each head's queries and keys.

Without ``rope_base`` nothing changes; with it, the result is the rotation done by hand with
``positions.apply_rope`` on the split heads, then the textbook attention, concat and W_O.
"""
import numpy as np
import pytest

import mha_course as mc
from _mha_checks import SAME_MATHS_TOL, assert_close
from mha_course.positions import apply_rope


def _by_hand(x, p, h, mask=None, context=None, rope_base=None):
    """The forward pass written out: project, split, (rotate), textbook SDPA, combine, W_O."""
    ctx = x if context is None else context
    Q, K, V = (mc.split_heads(a @ W, h) for a, W in ((x, p.W_q), (ctx, p.W_k), (ctx, p.W_v)))
    if rope_base is not None:
        Q = apply_rope(Q, np.arange(Q.shape[-2]), base=rope_base)  # queries at 0..T-1
        K = apply_rope(K, np.arange(K.shape[-2]), base=rope_base)  # keys at 0..S-1
    heads, weights = mc.scaled_dot_product_attention(Q, K, V, mask)
    return mc.combine_heads(heads) @ p.W_o, weights, Q, K


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("rope_base", [None, 10000.0, 50.0])
def test_multi_head_attention_with_rope_is_rotation_then_attention(dtype, cross, rope_base):
    rng = np.random.default_rng([int(cross), int(rope_base or 0)])
    x = rng.normal(size=(2, 5, 8)).astype(dtype)
    context = rng.normal(size=(2, 7, 8)).astype(dtype) if cross else None
    p = mc.init_params(8, rng=rng, dtype=dtype)
    mask = mc.causal_mask(5) if not cross else None
    out, weights = mc.multi_head_attention(x, p, 2, mask=mask, context=context, rope_base=rope_base)
    want_out, want_w, Q, K = _by_hand(x, p, 2, mask, context, rope_base)
    tol = SAME_MATHS_TOL[np.dtype(dtype)] * 10
    assert out.dtype == weights.dtype == dtype
    assert_close(out, want_out, dtype, "output", tol=tol)
    assert_close(weights, want_w, dtype, "weights", tol=tol)
    t = mc.trace(x, p, 2, mask=mask, context=context, rope_base=rope_base)
    assert_close(t.output, out, dtype, "trace output", tol=tol)  # trace runs the textbook attention
    if rope_base is not None:  # the rotated heads are recorded, right after the split
        assert t.names[7:9] == ["Q_rope", "K_rope"]
        assert_close(t["Q_rope"], Q, dtype, "Q_rope", tol=tol)
        assert_close(t["K_rope"], K, dtype, "K_rope", tol=tol)


def test_rope_base_none_changes_nothing():
    rng = np.random.default_rng(1)
    x, p = rng.normal(size=(2, 4, 8)), mc.init_params(8, rng=rng, bias=True)
    plain, none = mc.trace(x, p, 4), mc.trace(x, p, 4, rope_base=None)
    assert plain.names == none.names and "Q_rope" not in plain
    for name in plain.names:
        assert np.array_equal(plain[name], none[name]), name


def test_rope_makes_scores_depend_on_relative_position_only():
    """Shift every position by the same amount: with RoPE the scores do not change."""
    rng = np.random.default_rng(2)
    x, p = rng.normal(size=(1, 4, 8)), mc.init_params(8, rng=rng)
    t = mc.trace(x, p, 2, rope_base=100.0)
    shifted = [apply_rope(t[name], np.arange(3, 7), base=100.0) for name in ("Q_heads", "K_heads")]
    scores = shifted[0] @ np.swapaxes(shifted[1], -1, -2) / np.sqrt(4)
    np.testing.assert_allclose(t["scores"], scores, atol=1e-12)


def test_rope_needs_an_even_d_k():
    x, p = np.ones((1, 3, 12)), mc.init_params(12, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"d_model=12 with h=4 gives d_k=3; h with an even d_k: 1, 2, 3, 6"):
        mc.multi_head_attention(x, p, 4, rope_base=10000.0)
    with pytest.raises(ValueError, match="base"):
        mc.trace(x, p, 2, rope_base=-1.0)
