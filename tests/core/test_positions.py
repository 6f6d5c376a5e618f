"""Sinusoidal positions and RoPE: the formula, the complex-number view, invariants, PyTorch parity.

Shapes: ``T`` positions, ``d_k`` head size (even), ``...`` batch axes.
"""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mha_course as mc
from _mha_checks import require_torch
from mha_course.positions import ROPE_LAYOUTS, apply_rope, dynamic_rope_scaling, rope_angles, rope_score_grid

from .test_properties import PROFILE

LAYOUTS = st.sampled_from(ROPE_LAYOUTS)
EVEN_D_K = st.sampled_from([2, 4, 6, 8, 16])
BASES = st.sampled_from([10000.0, 500000.0, 100.0, 10.0])


def complex_rope(x, positions, base, layout):
    """The complex-number formulation: pair i is z_i = a + i b, multiplied by exp(i m theta_i)."""
    d_k = x.shape[-1]
    if layout == "interleaved":
        z = x[..., 0::2] + 1j * x[..., 1::2]
    else:
        z = x[..., : d_k // 2] + 1j * x[..., d_k // 2:]
    theta = base ** (-2.0 * np.arange(d_k // 2) / d_k)  # (d_k/2,)
    z = z * np.exp(1j * np.asarray(positions)[:, None] * theta)  # (..., T, d_k/2)
    out = np.empty(x.shape)
    if layout == "interleaved":
        out[..., 0::2], out[..., 1::2] = z.real, z.imag
    else:
        out[..., : d_k // 2], out[..., d_k // 2:] = z.real, z.imag
    return out


def halves_to_interleaved(d_k):
    """The permutation p with x_halves[..., p] laid out as interleaved pairs: [0, d/2, 1, d/2+1, ...]."""
    return np.stack([np.arange(d_k // 2), np.arange(d_k // 2) + d_k // 2], axis=-1).ravel()


# ----------------------------------------------------------------------------- sinusoids
def test_sinusoidal_positions_follow_the_paper_formula_entry_by_entry():
    T, d_model = 7, 10
    pe = mc.sinusoidal_positions(T, d_model)
    for pos in range(T):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert pe[pos, 2 * i] == pytest.approx(np.sin(angle), abs=1e-15)
            assert pe[pos, 2 * i + 1] == pytest.approx(np.cos(angle), abs=1e-15)


def test_odd_d_model_is_the_even_encoding_cut_to_size_with_its_own_frequencies():
    pe = mc.sinusoidal_positions(5, 7)
    assert pe.shape == (5, 7)
    angles = np.arange(5)[:, None] / 10000 ** (2 * np.arange(4) / 7)  # (T, 4): i = 0..3, over d_model=7
    np.testing.assert_allclose(pe[:, 0::2], np.sin(angles), atol=1e-15)  # columns 0, 2, 4, 6 (6: lone sine)
    np.testing.assert_allclose(pe[:, 1::2], np.cos(angles[:, :3]), atol=1e-15)


@PROFILE
@given(st.integers(1, 12).map(lambda n: 2 * n), st.integers(0, 40), st.integers(0, 40), st.integers(0, 20))
def test_dot_product_of_two_encodings_depends_only_on_their_offset(d_model, p, q, shift):
    pe = mc.sinusoidal_positions(max(p, q) + shift + 1, d_model)
    assert pe[p] @ pe[q] == pytest.approx(pe[p + shift] @ pe[q + shift], abs=1e-9)


def test_sinusoidal_positions_rejects_bad_sizes():
    with pytest.raises(ValueError, match="d_model=0"):
        mc.sinusoidal_positions(4, 0)
    with pytest.raises(ValueError, match="T=2.5"):
        mc.sinusoidal_positions(2.5, 4)


# ----------------------------------------------------------------------------- RoPE
@PROFILE
@given(LAYOUTS, EVEN_D_K, BASES, st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_both_layouts_equal_the_complex_formulation(layout, d_k, base, T, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2, 3, T, d_k))
    positions = rng.integers(-50, 5000, size=T)
    np.testing.assert_allclose(mc.apply_rope(x, positions, base, layout),
                               complex_rope(x, positions, base, layout), atol=1e-9)


@PROFILE
@given(LAYOUTS, EVEN_D_K, st.sampled_from([np.float32, np.float64]), st.integers(0, 2**32 - 1))
def test_rope_keeps_norms_and_dtype(layout, d_k, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(3, 5, d_k)).astype(dtype)
    out = mc.apply_rope(x, rng.integers(0, 1000, size=5), layout=layout)
    assert out.dtype == dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), np.linalg.norm(x, axis=-1), rtol=tol)


@PROFILE
@given(LAYOUTS, EVEN_D_K, BASES, st.integers(0, 200), st.integers(0, 200), st.integers(-100, 100),
       st.integers(0, 2**32 - 1))
def test_score_of_rotated_query_and_key_depends_only_on_their_offset(layout, d_k, base, m, n, shift, seed):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, 1, d_k))

    def score(mq, nk):
        return (mc.apply_rope(q, [mq], base, layout) @ mc.apply_rope(k, [nk], base, layout).T).item()

    assert score(m, n) == pytest.approx(score(m + shift, n + shift), abs=1e-9)


def test_position_zero_is_the_identity_and_the_first_pair_turns_one_radian_per_step():
    x = np.random.default_rng(0).normal(size=(4, 8))
    out = mc.apply_rope(x, np.zeros(4, dtype=int))
    np.testing.assert_array_equal(out, x)
    np.testing.assert_allclose(rope_angles(np.arange(4), 8)[:, 0], np.arange(4.0))


@PROFILE
@given(EVEN_D_K, st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_halves_is_interleaved_after_a_fixed_permutation_of_features(d_k, T, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2, T, d_k))
    positions = rng.integers(0, 100, size=T)
    p = halves_to_interleaved(d_k)
    inverse = np.argsort(p)
    via_interleaved = mc.apply_rope(x[..., p], positions, layout="interleaved")[..., inverse]
    np.testing.assert_allclose(mc.apply_rope(x, positions, layout="halves"), via_interleaved, atol=1e-12)


def test_the_two_layouts_differ_so_swapping_them_is_a_real_bug():
    x = np.random.default_rng(1).normal(size=(5, 8))
    a = mc.apply_rope(x, np.arange(5), layout="interleaved")
    b = mc.apply_rope(x, np.arange(5), layout="halves")
    assert np.abs(a - b).max() > 0.1


def test_rope_bad_input_names_the_value_and_the_fix():
    x = np.zeros((3, 5))
    with pytest.raises(ValueError, match="d_k=5 is odd"):
        mc.apply_rope(x, np.arange(3))
    with pytest.raises(ValueError, match=r"layout='neox'.*'interleaved', 'halves'"):
        mc.apply_rope(np.zeros((3, 4)), np.arange(3), layout="neox")
    with pytest.raises(ValueError, match="positions has 4 entries but x has T=3"):
        mc.apply_rope(np.zeros((3, 4)), np.arange(4))
    with pytest.raises(ValueError, match="whole numbers"):
        mc.apply_rope(np.zeros((3, 4)), [0.5, 1, 2])
    with pytest.raises(ValueError, match="base=-1"):
        mc.apply_rope(np.zeros((3, 4)), np.arange(3), base=-1)


# ----------------------------------------------------------------------------- PyTorch
def _torch_rotate_half_rope(torch, x, positions, base):
    """The GPT-NeoX / Llama implementation: cat(freqs, freqs), x cos + rotate_half(x) sin."""
    d_k = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, d_k, 2, dtype=torch.float64) / d_k))
    freqs = torch.outer(positions.to(torch.float64), inv_freq)  # (T, d_k/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, d_k)
    x1, x2 = x[..., : d_k // 2], x[..., d_k // 2:]
    rotate_half = torch.cat((-x2, x1), dim=-1)
    return x * emb.cos() + rotate_half * emb.sin()


def _torch_complex_rope(torch, x, positions, base):
    """The RoFormer / original Llama implementation: view_as_complex on interleaved pairs."""
    d_k = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, d_k, 2, dtype=torch.float64) / d_k))
    freqs_cis = torch.polar(torch.ones(len(positions), d_k // 2, dtype=torch.float64),
                            torch.outer(positions.to(torch.float64), inv_freq))
    z = torch.view_as_complex(x.reshape(*x.shape[:-1], d_k // 2, 2).contiguous())
    return torch.view_as_real(z * freqs_cis).flatten(-2)


@pytest.mark.parametrize("layout, reference", [("halves", _torch_rotate_half_rope),
                                               ("interleaved", _torch_complex_rope)])
@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_rope_matches_pytorch_reference_implementations(layout, reference, base):
    torch = require_torch()
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 4, 9, 16))  # (B, h, T, d_k)
    positions = np.arange(9) + 100
    expected = reference(torch, torch.from_numpy(x), torch.from_numpy(positions), base).numpy()
    np.testing.assert_allclose(mc.apply_rope(x, positions, base, layout), expected, atol=1e-10)


# ----------------------------------------------------------------------------- score grid, patches
@PROFILE
@given(LAYOUTS, EVEN_D_K, st.integers(1, 12), st.integers(0, 2**32 - 1))
def test_rope_score_grid_is_constant_along_every_diagonal(layout, d_k, T, seed):
    rng = np.random.default_rng(seed)
    grid = mc.positions.rope_score_grid(rng.normal(size=d_k), rng.normal(size=d_k), T, layout=layout)
    for offset in range(-T + 1, T):
        diagonal = np.diag(grid, offset)
        np.testing.assert_allclose(diagonal, diagonal[0], atol=1e-9)


def test_patchify_cuts_row_by_row_and_keeps_each_patch_whole():
    image = np.arange(4 * 6 * 2, dtype=float).reshape(4, 6, 2)  # (H, W, C)
    tokens = mc.positions.patchify(image, 2)
    assert tokens.shape == (6, 8)
    np.testing.assert_array_equal(tokens[4], image[2:4, 2:4].ravel())  # patch row 1, column 1
    with pytest.raises(ValueError, match="divisible by patch=4"):
        mc.positions.patchify(image, 4)


def test_the_layout_fix_permutes_the_output_features_of_w_q_columns_here_rows_in_pytorch():
    """Notebook 07, cell 36 and Q3: with Q = X W_Q the fix permutes the columns of W_Q (its output
    features); a PyTorch nn.Linear weight is (out, in), so there it is the rows."""
    rng = np.random.default_rng(36)
    x, W_q, W_k = rng.normal(size=(7, 12)), rng.normal(size=(12, 8)), rng.normal(size=(12, 8))
    p = np.stack([np.arange(4), np.arange(4) + 4], axis=-1).ravel()   # [0, 4, 1, 5, 2, 6, 3, 7]
    to_halves = np.argsort(p)
    pos = np.arange(7)
    made_for_interleaved = apply_rope(x @ W_q, pos, layout="interleaved") @ apply_rope(x @ W_k, pos).T
    converted = apply_rope(x @ W_q[:, to_halves], pos, layout="halves") @ \
        apply_rope(x @ W_k[:, to_halves], pos, layout="halves").T
    assert np.allclose(converted, made_for_interleaved)
    W_q_torch = W_q.T                                                  # nn.Linear.weight: (out, in)
    assert np.allclose(x @ W_q_torch[to_halves].T, x @ W_q[:, to_halves])


def test_a_layout_mismatch_scrambles_the_offset_profile_it_does_not_shift_it():
    """Notebook 07 Q3: in either layout the score depends on m - n only, but the profile over offsets
    of weights made for one layout, run in the other, is no shift of the right profile."""
    k = np.array([2.0, 1.0, 1.5, 1.0, 1.0, 0.5, 0.5, 0.5])
    q = apply_rope(k[None], [-3], layout="interleaved")[0]

    def profile(layout):
        grid = rope_score_grid(q, k, 16, layout=layout)                 # (m, n)
        assert all(np.ptp(np.diag(grid, -o)) < 1e-9 for o in range(8))  # relative in both layouts
        return np.array([grid[15, 15 - o] for o in range(12)])          # score at offset o = m - n
    right, wrong = profile("interleaved"), profile("halves")
    assert right.argmax() == 3
    for shift in range(-4, 5):
        lo, hi = max(0, -shift), min(12, 12 - shift)
        assert not np.allclose(wrong[lo:hi], right[lo + shift:hi + shift], atol=1e-3), shift


def test_the_docstrings_name_whose_llama_uses_which_layout():
    """The halves layout is Hugging Face's Llama (rotate_half); Meta's own code is interleaved."""
    doc = mc.apply_rope.__doc__
    assert "Hugging Face's Llama" in doc and "Meta's Llama code" in doc


# ----------------------------------------------------------------------------- YaRN both ways (13)
def hf_compute_yarn_inv_freq(dim, base, factor, max_position_embeddings, beta_fast=32, beta_slow=1):
    """Hugging Face transformers' ``_compute_yarn_parameters`` (src/transformers/modeling_rope_utils.py),
    transcribed line by line with torch as theirs (float32 ramp, ``min(high, dim - 1)``)."""
    torch = pytest.importorskip("torch")

    def find_correction_dim(num_rotations, dim, base, max_position_embeddings):
        return (dim * math.log(max_position_embeddings / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

    def find_correction_range(low_rot, high_rot, dim, base, max_position_embeddings):
        low = math.floor(find_correction_dim(low_rot, dim, base, max_position_embeddings))
        high = math.ceil(find_correction_dim(high_rot, dim, base, max_position_embeddings))
        return max(low, 0), min(high, dim - 1)

    def linear_ramp_factor(min, max, dim):
        if min == max:
            max += 0.001
        linear_func = (torch.arange(dim, dtype=torch.float32) - min) / (max - min)
        return torch.clamp(linear_func, 0, 1)

    pos_freqs = base ** (torch.arange(0, dim, 2).double() / dim)
    inv_freq_extrapolation = 1.0 / pos_freqs
    inv_freq_interpolation = 1.0 / (factor * pos_freqs)
    low, high = find_correction_range(beta_fast, beta_slow, dim, base, max_position_embeddings)
    inv_freq_extrapolation_factor = 1 - linear_ramp_factor(low, high, dim // 2).double()
    inv_freq = (inv_freq_interpolation * (1 - inv_freq_extrapolation_factor)
                + inv_freq_extrapolation * inv_freq_extrapolation_factor)
    return inv_freq.numpy()


@pytest.mark.parametrize("d_k,base,s,L", [(8, 10000.0, 4.0, 16), (16, 10000.0, 4.0, 35000), (128, 10000.0, 8.0, 4096),
                                          (64, 500000.0, 16.0, 8192), (8, 10000.0, 2.0, 64), (32, 10000.0, 4.0, 3)])
def test_yarn_reference_ramp_equals_hugging_faces_compute_yarn_parameters(d_k, base, s, L):
    ours = mc.rope_inv_freq(d_k, base, {"type": "yarn", "factor": s, "original_max_position": L})
    assert np.allclose(ours, hf_compute_yarn_inv_freq(d_k, base, s, L), rtol=1e-6, atol=0)  # their ramp: float32


def test_yarn_high_is_clamped_to_dim_minus_one_not_to_the_last_pair():
    # d_k = 16, L = 35000: ceil(dim(beta_slow)) = 9 > d_k/2 - 1 = 7; clamping to 7 would steepen the ramp
    d_k, L = 16, 35000
    ramp_high = math.ceil(d_k * math.log(L / (2 * math.pi)) / (2 * math.log(10000.0)))
    assert d_k // 2 - 1 < ramp_high <= d_k - 1
    yarn = mc.rope_inv_freq(d_k, scaling={"type": "yarn", "factor": 4.0, "original_max_position": L})
    plain = mc.rope_inv_freq(d_k)
    low = max(math.floor(d_k * math.log(L / (32 * 2 * math.pi)) / (2 * math.log(10000.0))), 0)
    ramp = np.clip((np.arange(d_k // 2) - low) / (ramp_high - low), 0, 1)
    assert np.allclose(yarn, plain * (1 - ramp) + plain / 4.0 * ramp, rtol=1e-12)
    assert yarn[-1] > plain[-1] / 4.0  # the last pair is not yet fully interpolated


@given(d_k=st.sampled_from([4, 8, 16, 64, 128]), s=st.floats(1.0, 64.0), L=st.integers(2, 100_000),
       fast=st.floats(2.0, 64.0), slow=st.floats(0.1, 1.9))
@PROFILE
def test_yarn_paper_ramp_is_gamma_of_the_turns(d_k, s, L, fast, slow):
    """Peng et al. 2023 §3.2: h(theta) = (1 - gamma(r)) theta / s + gamma(r) theta, r = L / lambda."""
    scaling = {"type": "yarn", "factor": s, "original_max_position": L, "beta_fast": fast, "beta_slow": slow,
               "ramp": "paper"}
    theta = mc.rope_inv_freq(d_k)
    r = L / (2 * math.pi / theta)  # turns over L: L over the wavelength
    gamma = np.where(r < slow, 0.0, np.where(r > fast, 1.0, (r - slow) / (fast - slow)))
    assert np.allclose(mc.rope_inv_freq(d_k, scaling=scaling), (1 - gamma) * theta / s + gamma * theta, rtol=1e-12)


def test_on_the_toy_the_two_ramps_differ_in_pair_zero_only():
    """L = 16, d_k = 8: dim(beta_fast) = -1.1 (no pair turns 32 times). The code keeps pair 0 (floor, then
    clamped to 0), the paper interpolates it by 1 - gamma = 95% (r = 2.55 turns)."""
    yarn = {"type": "yarn", "factor": 4.0, "original_max_position": 16}
    dim_fast = 8 * math.log(16 / (32 * 2 * math.pi)) / (2 * math.log(10000.0))
    assert -1.2 < dim_fast < -1.0
    reference, paper = mc.rope_inv_freq(8, scaling=yarn), mc.rope_inv_freq(8, scaling={**yarn, "ramp": "paper"})
    gamma = (16 / (2 * math.pi) - 1) / 31
    assert reference[0] == 1.0 and paper[0] == pytest.approx((1 - gamma) / 4 + gamma)
    assert round(gamma, 2) == 0.05
    assert np.allclose(reference[1:], paper[1:])  # pairs 1-3 turn less than once: both interpolate them fully


def test_dynamic_scaling_sets_the_factor_from_the_length():
    ntk = {"type": "ntk", "original_max_position": 16}
    yarn = {"type": "yarn", "factor": 4.0, "original_max_position": 16, "ramp": "paper"}
    assert dynamic_rope_scaling(ntk, 16) is None and dynamic_rope_scaling(yarn, 8) is None
    assert dynamic_rope_scaling(ntk, 64) == {"type": "ntk", "factor": 4.0}
    assert dynamic_rope_scaling(yarn, 32) == {**yarn, "factor": 2.0}
    with pytest.raises(ValueError, match="linear"):
        dynamic_rope_scaling({"type": "linear", "factor": 2.0, "original_max_position": 16}, 32)
    with pytest.raises(ValueError, match="original_max_position"):
        dynamic_rope_scaling({"type": "ntk"}, 32)


@pytest.mark.parametrize("bad,match", [
    ({"type": "yarn", "factor": 2.0, "original_max_position": math.inf}, "finite"),
    ({"type": "yarn", "factor": 2.0, "original_max_position": 16, "beta_fast": math.inf}, "finite"),
    ({"type": "yarn", "factor": 2.0, "original_max_position": 16, "beta_fst": 16.0}, "unknown key.*beta_fst"),
    ({"type": "linear", "factor": 2.0, "original_max_position": 16}, "unknown key"),
    ({"type": "yarn", "factor": 2.0, "original_max_position": 16, "ramp": "papers"}, "ramp"),
    ({"type": "ntk", "factor": math.nan}, "factor"),
])
def test_scaling_dicts_are_checked_whole(bad, match):
    with pytest.raises(ValueError, match=match):
        mc.rope_inv_freq(8, scaling=bad)


@pytest.mark.parametrize("base", [1.0, 0.5, 0.0, -3.0, math.inf])
def test_a_base_of_one_or_less_is_refused(base):
    with pytest.raises(ValueError, match="base"):
        mc.rope_inv_freq(8, base)


def test_ntk_with_a_huge_factor_stays_finite():
    inv = mc.rope_inv_freq(8, scaling={"type": "ntk", "factor": 1e300})
    assert inv.shape == (4,) and np.all(np.isfinite(inv)) and inv[0] == 1.0 and np.all(np.diff(inv) <= 0)


@pytest.mark.parametrize("positions", [np.array([2.0 ** 63, 0.0]), np.array([2 ** 64 - 1, 0], dtype=np.uint64),
                                       [True, 1], np.array([-(2 ** 60), 0])])
def test_positions_out_of_exact_range_or_bools_are_refused(positions):
    with pytest.raises(ValueError, match="positions"):
        apply_rope(np.ones((2, 4)), positions)


def test_apply_rope_gives_float16_back_for_float16():
    x = np.random.default_rng(0).normal(size=(3, 8)).astype(np.float16)
    out = apply_rope(x, np.arange(3))
    assert out.dtype == np.float16
    assert np.allclose(out, apply_rope(x.astype(np.float32), np.arange(3)), atol=2e-3)


# ---- the third round of attacks: the attack generator's and the blind attacker's findings
def test_check_rope_names_rope_base_and_rope_scaling_and_takes_no_rope():
    assert mc.positions.check_rope(4) is None  # rope_base=None: no RoPE, nothing to check
    for bad in (float("nan"), float("inf"), "spam", 1.0, True):
        with pytest.raises(ValueError, match="rope_base="):
            mc.positions.check_rope(4, bad)
    with pytest.raises(ValueError, match="rope_scaling has unknown key"):
        mc.positions.check_rope(4, 10000.0, {"type": "linear", "factor": 2.0, "beta_fst": 3.0})
    with pytest.raises(ValueError, match="d_k="):
        mc.positions.check_rope(-1)


def test_a_bad_rope_base_of_a_backward_pass_is_named_as_rope_base():
    p = mc.init_params(8, rng=np.random.default_rng(0))
    x = np.ones((1, 3, 8))
    with pytest.raises(ValueError, match="rope_base=nan"):
        mc.mha_backward(x, p, 2, np.ones_like(x), rope_base=float("nan"))


def test_a_subnormal_scaling_factor_is_refused_not_turned_into_inf():
    with pytest.raises(ValueError, match="subnormal"):
        mc.rope_inv_freq(8, scaling={"type": "linear", "factor": 1e-320})
    assert np.isfinite(mc.rope_inv_freq(8, scaling={"type": "linear", "factor": 1e-300})).all()


def test_dynamic_scaling_refuses_a_length_past_float64_positions():
    ntk = {"type": "ntk", "original_max_position": 16}
    for huge in (2 ** 53, 10 ** 400):
        with pytest.raises(ValueError, match="seq_len="):
            dynamic_rope_scaling(ntk, huge)
    assert dynamic_rope_scaling(ntk, 2 ** 52)["factor"] == 2 ** 52 / 16


@pytest.mark.parametrize("fast,slow", [(1e308, 1.0), (32.0, 1e-308), (1e308, 1e-308)])
def test_yarn_betas_far_apart_give_finite_frequencies_in_either_ramp(fast, slow):
    for ramp in ("reference", "paper"):
        r = mc.rope_inv_freq(8, scaling={"type": "yarn", "factor": 4.0, "original_max_position": 16,
                                         "beta_fast": fast, "beta_slow": slow, "ramp": ramp})
        assert np.isfinite(r).all() and (r > 0).all()


def test_yarn_ramps_at_the_extreme_lengths_differ_only_as_documented():
    """L = 1: no pair turns once; the paper interpolates every pair, the reference code keeps pair 0 (its
    clamp). L = 1e12: every pair turns more than beta_fast times; the paper keeps every pair, the code's
    clamps interpolate them all (Hugging Face's _compute_yarn_parameters does the same)."""
    plain = mc.rope_inv_freq(8)
    ratio = {}
    for L in (1, 1e12):
        for ramp in ("reference", "paper"):
            r = mc.rope_inv_freq(8, scaling={"type": "yarn", "factor": 4.0, "original_max_position": L, "ramp": ramp})
            ratio[L, ramp] = r / plain
    np.testing.assert_allclose(ratio[1, "paper"], 0.25)
    np.testing.assert_allclose(ratio[1, "reference"], [1.0, 0.25, 0.25, 0.25])
    np.testing.assert_allclose(ratio[1e12, "paper"], 1.0)
    np.testing.assert_allclose(ratio[1e12, "reference"], 0.25)
    assert np.allclose(ratio[1e12, "reference"], hf_compute_yarn_inv_freq(8, 10000.0, 4.0, 1e12) / plain)


def test_apply_rope_refuses_nan_and_inf_features():
    for bad in (np.nan, np.inf):
        x = np.ones((2, 4))
        x[1, 2] = bad
        with pytest.raises(ValueError, match=r"x has 1 non-finite value \(the first: x\[1, 2\]"):
            apply_rope(x, [0, 1])


def test_rotate_is_apply_rope_with_the_angles_given_and_checks_their_shapes():
    x = np.random.default_rng(0).normal(size=(2, 3, 4))
    np.testing.assert_allclose(mc.positions.rotate(x, rope_angles(np.arange(3), 4)), apply_rope(x, np.arange(3)))
    np.testing.assert_allclose(mc.positions.rotate(x.tolist(), rope_angles(np.arange(3), 4)), apply_rope(x, np.arange(3)))
    with pytest.raises(ValueError, match=r"angles has shape \(3, 1\)"):
        mc.positions.rotate(x, np.zeros((3, 1)))
    with pytest.raises(ValueError, match="x must be a numeric array"):
        mc.positions.rotate("spam", np.zeros((3, 2)))
    with pytest.raises(ValueError, match="d_k even"):
        mc.positions.rotate(np.ones((3, 5)), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="layout="):
        mc.positions.rotate(x, rope_angles(np.arange(3), 4), "half")


def test_rope_attention_factor_of_no_scaling_is_one_by_default():
    assert mc.rope_attention_factor() == 1.0 == mc.rope_attention_factor(None)
    with pytest.raises(ValueError, match="scaling="):
        mc.rope_attention_factor("yarn")


# ---- sizes checked before allocating; NaN angles refused

@pytest.mark.parametrize("build, what", [
    (lambda: mc.sinusoidal_positions(10**8, 32), r"sinusoidal table \(T, d_model\) = \(100000000, 32\)"),
    (lambda: mc.positions.rope_inv_freq(4 * 10**10), r"RoPE frequencies of d_k=40000000000"),
    (lambda: mc.positions.alibi_slopes(3 * 10**9), r"ALiBi slopes for h=3000000000"),
    (lambda: mc.positions.alibi_bias(2, 60_000), r"ALiBi bias \(h, T, S\) = \(2, 60000, 60000\)"),
    (lambda: rope_score_grid(np.ones(4), np.ones(4), 10**6), r"RoPE score grid of T=1000000"),
    (lambda: rope_angles(np.arange(3), 10**10), r"RoPE"),
])
def test_huge_position_tables_are_refused_naming_the_size(build, what):
    with pytest.raises(ValueError, match=what + r".* would take"):
        build()


def test_rotate_refuses_nan_and_inf_angles():
    x = np.ones((3, 4))
    for bad in (np.nan, -np.inf):
        angles = np.zeros((3, 2))
        angles[1, 1] = bad
        with pytest.raises(ValueError, match="angles"):
            mc.positions.rotate(x, angles)
