"""The core functions of notebook 13, each against its definition.

- ALiBi (Press et al. 2022): the slopes against the paper's own rule, written out here for
  h = 8 (powers of two) and h = 6, 12 (the nearest lower power, then every other slope of the
  next); the bias against its formula, entry by entry; multi_head_attention(bias=) against the
  textbook attention with the bias added by hand, and its gradient against finite differences.
- RoPE scaling: rope_inv_freq for None, linear (position interpolation), NTK and YaRN against
  their formulas (YaRN's ramp written out from the paper's code); position interpolation's
  identity (position s·p under factor s turns like p unscaled); apply_rope(scaling=) rotates
  by the scaled angles; YaRN's attention factor.
- split_kv_attention == scaled_dot_product_attention (Hypothesis: any n_splits, dividing S or
  not, more splits than keys, masks that block whole chunks) and == torch SDPA.
- RollingKVCache: token-by-token (and chunked) decoding through grouped_query_attention equals
  full attention under the window-and-sinks mask, with RoPE at absolute positions (Hypothesis).
- quantize_kv / dequantize_kv: codes in range, the round trip within scale / 2, zeros kept.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mha_course as mc
from _mha_checks import require_torch
from mha_course.efficient import merge_attention_partials, split_kv_partials
from mha_course.lessons import model as train
from mha_course.lessons import training

PROFILE = settings(derandomize=True, database=None, deadline=None, max_examples=40,
                   suppress_health_check=[HealthCheck.too_slow])


# ----------------------------------------------------------------------------- ALiBi
def paper_slopes(n):
    """The rule of Press et al. (2022), their code: get_slopes(n)."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + paper_slopes(2 * closest)[0::2][:n - closest]


def test_alibi_slopes_h8_are_the_papers_geometric_sequence():
    assert np.allclose(mc.alibi_slopes(8), [1 / 2 ** k for k in range(1, 9)], rtol=0, atol=1e-15)


@pytest.mark.parametrize("h", [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32])
def test_alibi_slopes_follow_the_papers_rule(h):
    assert np.allclose(mc.alibi_slopes(h), paper_slopes(h), rtol=1e-14, atol=0)


def test_alibi_slopes_h6_and_h12_values():
    assert mc.alibi_slopes(6).tolist() == [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3]
    expected12 = [2 ** -k for k in range(1, 9)] + [2 ** -0.5, 2 ** -1.5, 2 ** -2.5, 2 ** -3.5]
    assert np.allclose(mc.alibi_slopes(12), expected12, rtol=1e-14, atol=0)


@pytest.mark.parametrize("h,T,S", [(1, 1, None), (4, 5, None), (6, 3, 7), (3, 1, 9)])
def test_alibi_bias_formula(h, T, S):
    bias = mc.alibi_bias(h, T, S)
    S_ = T if S is None else S
    m = mc.alibi_slopes(h)
    assert bias.shape == (h, T, S_)
    for i, t, s in np.ndindex(bias.shape):
        assert bias[i, t, s] == -m[i] * abs((S_ - T + t) - s)


def test_alibi_bias_rejects_fewer_keys_than_queries():
    with pytest.raises(ValueError, match="S=2 < T=3"):
        mc.alibi_bias(2, 3, 2)


def test_mha_bias_is_added_to_the_scores():
    rng = np.random.default_rng(0)
    p = mc.init_params(8, rng=rng)
    x = rng.normal(size=(2, 5, 8))
    bias = mc.alibi_bias(2, 5)
    out, w = mc.multi_head_attention(x, p, 2, mc.causal_mask(5), bias=bias)
    Qh, Kh, Vh = (mc.split_heads(x @ W, 2) for W in (p.W_q, p.W_k, p.W_v))
    scores = Qh @ np.swapaxes(Kh, -1, -2) / math.sqrt(4) + bias
    ref_w = mc.softmax(np.where(mc.causal_mask(5), scores, -np.inf))
    assert np.abs(w - ref_w).max() < 1e-12
    assert np.abs(out - mc.combine_heads(ref_w @ Vh) @ p.W_o).max() < 1e-12


@pytest.mark.parametrize("change", [{"positions": "alibi"}, {"positions": "sinusoidal"},
                                    {"positions": "rope", "rope_scaling": {"type": "linear", "factor": 2.0}},
                                    {"positions": "rope", "rope_scaling": {"type": "yarn", "factor": 4.0,
                                                                           "original_max_position": 6}}])
def test_model_gradients_with_new_positions_match_finite_differences(change):
    config = train.Config(task="induction", vocab=6, seq_len=6, d_model=4, h=2, n_layers=2, batch=3, **change)
    params = train.init_model(config, np.random.default_rng(1))
    batch = train.make_batch(config, np.random.default_rng(2))
    _, grads = training.loss_and_grads(params, batch, config)
    eps = 1e-6
    for name in ("W_q", "W_k"):
        p, g = getattr(params.layers[0], name), getattr(grads.layers[0], name)
        for i in np.ndindex(p.shape):
            old = p[i]
            p[i] = old + eps
            up = training.loss_and_grads(params, batch, config)[0].loss
            p[i] = old - eps
            down = training.loss_and_grads(params, batch, config)[0].loss
            p[i] = old
            assert abs((up - down) / (2 * eps) - g[i]) <= 1e-6
    # forward and loss_and_grads share one forward pass: the same loss
    assert abs(training.metrics(params, batch, config).loss - training.loss_and_grads(params, batch, config)[0].loss) < 1e-12


def test_alibi_model_has_no_position_table():
    config = train.Config(positions="alibi")
    assert train.init_model(config).pos is None


# ----------------------------------------------------------------------------- RoPE scaling
@pytest.mark.parametrize("d_k", [2, 4, 8, 64, 128])
def test_rope_inv_freq_plain_linear_ntk(d_k):
    j = np.arange(d_k // 2)
    base, s = 10000.0, 4.0
    assert np.allclose(mc.rope_inv_freq(d_k), base ** (-2 * j / d_k), rtol=1e-14, atol=0)
    assert np.allclose(mc.rope_inv_freq(d_k, scaling={"type": "linear", "factor": s}),
                       base ** (-2 * j / d_k) / s, rtol=1e-14, atol=0)
    ntk = mc.rope_inv_freq(d_k, scaling={"type": "ntk", "factor": s})
    if d_k > 2:
        assert np.allclose(ntk, (base * s ** (d_k / (d_k - 2))) ** (-2 * j / d_k), rtol=1e-12, atol=0)
        assert ntk[0] == 1.0 and np.isclose(ntk[-1], base ** (-(d_k - 2) / d_k) / s, rtol=1e-12)


def yarn_reference(d_k, base, s, L, beta_fast, beta_slow):
    """YaRN's frequencies as in the paper's code (find_correction_range, linear_ramp_mask)."""
    def correction_dim(rotations):
        return (d_k * math.log(L / (rotations * 2 * math.pi))) / (2 * math.log(base))
    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), d_k - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(d_k // 2) - low) / (high - low), 0, 1)
    extrapolation = 1 - ramp
    pos_freqs = base ** (np.arange(0, d_k, 2) / d_k)
    return (1 / (s * pos_freqs)) * (1 - extrapolation) + (1 / pos_freqs) * extrapolation


@pytest.mark.parametrize("d_k,base,s,L", [(128, 10000.0, 8.0, 4096), (64, 10000.0, 2.0, 2048),
                                          (128, 500000.0, 16.0, 8192), (32, 10000.0, 4.0, 512)])
def test_rope_inv_freq_yarn_matches_the_papers_code(d_k, base, s, L):
    scaling = {"type": "yarn", "factor": s, "original_max_position": L, "beta_fast": 32.0, "beta_slow": 1.0}
    ours = mc.rope_inv_freq(d_k, base, scaling)
    assert np.allclose(ours, yarn_reference(d_k, base, s, L, 32.0, 1.0), rtol=1e-12, atol=0)


def test_yarn_keeps_fast_pairs_and_interpolates_slow_ones():
    d_k, base, s, L = 128, 10000.0, 8.0, 4096
    plain = mc.rope_inv_freq(d_k, base)
    yarn = mc.rope_inv_freq(d_k, base, {"type": "yarn", "factor": s, "original_max_position": L})
    turns = L * plain / (2 * math.pi)  # how many times pair j turns over L positions
    assert np.array_equal(yarn[turns > 32 * 1.5], plain[turns > 32 * 1.5])  # fast pairs: kept
    assert np.allclose(yarn[turns < 1 / 1.5], plain[turns < 1 / 1.5] / s)   # slow pairs: interpolated
    ratio = plain / yarn
    assert np.all(np.diff(ratio) >= -1e-12) and 1 <= ratio.min() and ratio.max() <= s  # a monotone ramp


def test_rope_attention_factor():
    assert mc.rope_attention_factor(None) == 1.0
    assert mc.rope_attention_factor({"type": "linear", "factor": 4.0}) == 1.0
    assert mc.rope_attention_factor({"type": "ntk", "factor": 4.0}) == 1.0
    yarn = {"type": "yarn", "factor": 8.0, "original_max_position": 16}
    assert mc.rope_attention_factor(yarn) == pytest.approx(0.1 * math.log(8.0) + 1)


def test_position_interpolation_identity():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 6, 8))
    s = 4
    plain = mc.apply_rope(x, np.arange(6))
    interpolated = mc.apply_rope(x, s * np.arange(6), scaling={"type": "linear", "factor": s})
    assert np.abs(plain - interpolated).max() < 1e-12


@pytest.mark.parametrize("scaling", [None, {"type": "ntk", "factor": 3.0},
                                     {"type": "yarn", "factor": 4.0, "original_max_position": 32}])
def test_apply_rope_scaling_rotates_by_scaled_angles(scaling):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(5, 16))
    pos = np.arange(5) * 7
    angles = pos[:, None] * mc.rope_inv_freq(16, scaling=scaling)
    c, s = np.cos(angles), np.sin(angles)
    ref = np.empty_like(x)
    ref[:, 0::2] = x[:, 0::2] * c - x[:, 1::2] * s
    ref[:, 1::2] = x[:, 0::2] * s + x[:, 1::2] * c
    assert np.abs(mc.apply_rope(x, pos, scaling=scaling) - ref).max() < 1e-12


@pytest.mark.parametrize("bad,match", [({"type": "cubic", "factor": 2}, "type in"),
                                       ({"type": "linear", "factor": 0}, "positive"),
                                       ({"type": "yarn", "factor": 2}, "original_max_position"),
                                       ("linear", "dict")])
def test_rope_scaling_bad_input(bad, match):
    with pytest.raises(ValueError, match=match):
        mc.rope_inv_freq(8, scaling=bad)


# ----------------------------------------------------------------------------- split-KV
@st.composite
def split_problems(draw):
    batch = draw(st.sampled_from([(), (2,), (1, 3)]))
    T, S = draw(st.integers(1, 4)), draw(st.integers(1, 17))
    d_k, d_v = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    n_splits = draw(st.integers(1, S))
    seed = draw(st.integers(0, 2 ** 16))
    kind = draw(st.sampled_from(["none", "random", "block_chunk", "causal_tail", "all_blocked_row"]))
    return batch, T, S, d_k, d_v, n_splits, seed, kind


def _split_case(batch, T, S, d_k, d_v, n_splits, seed, kind):
    rng = np.random.default_rng(seed)
    Q = rng.normal(size=(*batch, T, d_k)) * 2
    K = rng.normal(size=(*batch, S, d_k)) * 2
    V = rng.normal(size=(*batch, S, d_v))
    mask = None
    if kind == "random":
        mask = rng.random((T, S)) < 0.6
    elif kind == "block_chunk":  # every key of one whole chunk blocked
        mask = np.ones((T, S), bool)
        chunks = np.array_split(np.arange(S), n_splits)
        mask[:, chunks[rng.integers(len(chunks))]] = False
    elif kind == "causal_tail":  # decoding: the last T of S positions, causal
        mask = mc.cached_causal_mask(T, S - T) if S >= T else None
    elif kind == "all_blocked_row":
        mask = np.ones((T, S), bool)
        mask[0] = False
    return Q, K, V, mask


@PROFILE
@given(split_problems())
def test_split_kv_equals_scaled_dot_product_attention(problem):
    Q, K, V, mask = _split_case(*problem)
    ref, _ = mc.scaled_dot_product_attention(Q, K, V, mask)
    out = mc.split_kv_attention(Q, K, V, problem[5], mask)
    assert out.shape == ref.shape
    assert np.abs(out - ref).max() < 1e-12


def test_split_kv_chunk_fully_masked_contributes_nothing():
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(1, 4)), rng.normal(size=(9, 4)), rng.normal(size=(9, 3))
    mask = np.ones((1, 9), bool)
    mask[:, 3:6] = False  # the middle chunk of 3
    outs, lses = split_kv_partials(Q, K, V, 3, mask)
    assert np.isneginf(lses[1]).all() and not outs[1].any()
    assert np.abs(merge_attention_partials(outs, lses) - mc.scaled_dot_product_attention(Q, K, V, mask)[0]).max() < 1e-12


def test_split_kv_lse_is_the_log_of_the_chunk_denominator():
    rng = np.random.default_rng(2)
    Q, K, V = rng.normal(size=(2, 4)), rng.normal(size=(7, 4)), rng.normal(size=(7, 2))
    outs, lses = split_kv_partials(Q, K, V, 2)
    scores = Q @ K.T / 2
    for idx, lse in zip(np.array_split(np.arange(7), 2), lses):
        assert np.allclose(lse[:, 0], np.log(np.exp(scores[:, idx]).sum(-1)))


@pytest.mark.parametrize("n_splits", [1, 3, 8, 61])
def test_split_kv_matches_torch_sdpa(n_splits):
    torch = require_torch()
    rng = np.random.default_rng(n_splits)
    Q, K, V = rng.normal(size=(2, 4, 1, 16)), rng.normal(size=(2, 4, 61, 16)), rng.normal(size=(2, 4, 61, 16))
    ref = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (Q, K, V))).numpy()
    assert np.abs(mc.split_kv_attention(Q, K, V, n_splits) - ref).max() < 1e-12


def test_split_kv_float32_stays_float32():
    rng = np.random.default_rng(0)
    Q, K, V = (rng.normal(size=s).astype(np.float32) for s in ((1, 4), (5, 4), (5, 2)))
    assert mc.split_kv_attention(Q, K, V, 2).dtype == np.float32


def test_split_kv_bad_n_splits():
    with pytest.raises(ValueError, match="n_splits"):
        mc.split_kv_attention(np.ones((1, 2)), np.ones((3, 2)), np.ones((3, 2)), 0)


@pytest.mark.parametrize("n_splits", [8, 10 ** 6])
def test_more_splits_than_keys_is_refused_at_once(n_splits):
    """10**6 splits of 7 keys once ran a million empty chunks (26 s); now one clear error, before any work."""
    for fn in (split_kv_partials, mc.split_kv_attention):
        with pytest.raises(ValueError, match=r"n_splits=\d+ is more than the S=7 keys.*n_splits <= 7"):
            fn(np.ones((1, 2)), np.ones((7, 2)), np.ones((7, 2)), n_splits)


@pytest.mark.parametrize("n_splits", [4, 16, 64])
def test_split_kv_partials_never_holds_the_whole_score_matrix(n_splits):
    """Flash-Decoding computes each split's scores inside the split: the peak traced memory stays near
    T · S / n_splits scores (one array of that size, worked in place) plus the outputs, far below T · S."""
    import tracemalloc
    rng = np.random.default_rng(0)
    T, S, d = 256, 4096, 4
    Q, K, V = rng.normal(size=(T, d)), rng.normal(size=(S, d)), rng.normal(size=(S, d))
    mask = np.ones((T, S), bool)
    full_scores = T * S * 8  # bytes of one float64 T x S matrix
    for m in (None, mask):
        tracemalloc.start()
        outs, lses = split_kv_partials(Q, K, V, n_splits, m)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        chunk, results = full_scores / n_splits, sum(o.nbytes + l.nbytes for o, l in zip(outs, lses))
        assert peak < 2 * chunk + 2 * results + 2 ** 16, (n_splits, peak, chunk)
        assert peak < full_scores / 2


# ----------------------------------------------------------------------------- rolling cache
def window_sink_mask(T, window, sinks):
    t, s = np.arange(T)[:, None], np.arange(T)[None, :]
    return (s <= t) & ((s > t - window) | (s < sinks))


@st.composite
def rolling_problems(draw):
    h_kv = draw(st.sampled_from([1, 2]))
    g = draw(st.sampled_from([1, 2]))
    d_k = draw(st.sampled_from([2, 4]))
    T = draw(st.integers(1, 14))
    window = draw(st.integers(1, 8))
    sinks = draw(st.integers(0, 3))
    rope = draw(st.booleans())
    chunks = draw(st.lists(st.integers(1, 4), min_size=1, max_size=T))
    return h_kv, g, d_k, T, window, sinks, rope, chunks, draw(st.integers(0, 2 ** 16))


@PROFILE
@given(rolling_problems())
def test_rolling_cache_decoding_equals_masked_full_attention(problem):
    h_kv, g, d_k, T, window, sinks, rope, chunks, seed = problem
    h, rng = h_kv * g, np.random.default_rng(seed)
    D = h * d_k
    params = mc.init_gqa_params(D, h, h_kv, rng=rng)
    x = rng.normal(size=(2, T, D))
    base = 100.0 if rope else None
    full, _ = mc.grouped_query_attention(x, params, h, h_kv, mask=window_sink_mask(T, window, sinks), rope_base=base)
    cache, outs, t = mc.RollingKVCache(2, h_kv, d_k, window, sinks), [], 0
    for n in chunks + [1] * T:  # chunked prefill, then token by token
        if t >= T:
            break
        n = min(n, T - t)
        out, _ = mc.grouped_query_attention(x[:, t:t + n], params, h, h_kv, cache=cache, rope_base=base)
        outs.append(out)
        t += n
        held = min(t, sinks) + max(0, min(window, t - sinks))
        assert cache.length == t and cache.keys.shape[2] == held
        assert cache.nbytes == 2 * 2 * h_kv * held * d_k * 8
    assert np.abs(np.concatenate(outs, axis=1) - full).max() < 1e-10


def test_rolling_cache_holds_sinks_and_last_window():
    cache = mc.RollingKVCache(1, 1, 2, window=4, sinks=2)
    for t in range(20):
        cache.append(np.full((1, 1, 1, 2), float(t)), np.zeros((1, 1, 1, 2)))
    assert cache.length == 20
    assert cache.positions.tolist() == [0, 1, 16, 17, 18, 19]
    assert cache.keys[0, 0, :, 0].tolist() == [0, 1, 16, 17, 18, 19]
    assert cache.nbytes == 2 * 6 * 2 * 8
    cache.reset()
    assert cache.length == 0 and cache.nbytes == 0


def test_rolling_cache_rotates_keys_at_absolute_positions():
    rng = np.random.default_rng(0)
    p = mc.init_gqa_params(4, 1, 1, rng=rng)
    x = rng.normal(size=(1, 10, 4))
    cache = mc.RollingKVCache(1, 1, 4, window=3)
    for t in range(10):
        mc.grouped_query_attention(x[:, t:t + 1], p, 1, 1, cache=cache, rope_base=10.0)
    K = mc.split_heads(x @ p.W_k, 1)  # (1, 1, 10, 4)
    expected = mc.apply_rope(K[:, :, 7:], np.arange(7, 10), base=10.0)
    assert np.abs(cache.keys - expected).max() < 1e-12


@pytest.mark.parametrize("kwargs,match", [({"window": 0}, "window"), ({"window": 2, "sinks": -1}, "sinks"),
                                          ({"window": 2, "dtype": np.int32}, "float")])
def test_rolling_cache_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mc.RollingKVCache(1, 1, 2, **kwargs)


def test_rolling_cache_shape_checked_by_attention():
    p = mc.init_gqa_params(4, 2, 1, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="rolling cache"):
        mc.grouped_query_attention(np.ones((1, 1, 4)), p, 2, 1, cache=mc.RollingKVCache(1, 2, 2, 4))


# ----------------------------------------------------------------------------- quantisation
@pytest.mark.parametrize("bits", [2, 4, 8, 12, 16])
def test_quantize_round_trip_within_half_a_step(bits):
    rng = np.random.default_rng(bits)
    x = rng.normal(size=(2, 3, 7, 16)) * rng.uniform(0.01, 10, size=(2, 3, 7, 1))
    q, scale = mc.quantize_kv(x, bits)
    levels = 2 ** (bits - 1) - 1
    assert q.dtype == (np.int8 if bits <= 8 else np.int16) and q.shape == x.shape and scale.shape == (2, 3, 7, 1)
    assert np.abs(q).max() == levels and np.abs(q).max() <= levels  # the largest entry uses the top code
    assert np.allclose(scale[..., 0], np.abs(x).max(-1) / levels)
    err = np.abs(mc.dequantize_kv(q, scale) - x)
    assert np.all(err <= scale / 2 * (1 + 1e-12))


def test_quantize_8_bit_relative_error():
    x = np.random.default_rng(0).normal(size=(1000, 64))
    err = np.abs(mc.dequantize_kv(*mc.quantize_kv(x, 8)) - x).max(-1) / np.abs(x).max(-1)
    assert err.max() <= 1 / 254 + 1e-12


def test_quantize_zero_rows_and_bad_bits():
    q, scale = mc.quantize_kv(np.zeros((2, 4)))
    assert not q.any() and not scale.any() and not mc.dequantize_kv(q, scale).any()
    with pytest.raises(ValueError, match="bits"):
        mc.quantize_kv(np.ones((1, 4)), bits=32)
    with pytest.raises(ValueError, match="integer"):
        mc.dequantize_kv(np.ones((1, 4)), np.ones((1, 1)))


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")  # torch deprecates its quantized tensors
def test_quantize_8_bit_matches_torch_per_channel_quantisation():
    torch = require_torch()
    x = (np.random.default_rng(3).normal(size=(50, 16))
         * np.random.default_rng(4).uniform(0.1, 5, size=(50, 1))).astype(np.float32)  # torch quantises float32
    q, scale = mc.quantize_kv(x, 8)  # one scale per row (token)
    tq = torch.quantize_per_channel(torch.from_numpy(x), torch.from_numpy(scale[:, 0]),
                                    torch.zeros(50, dtype=torch.long), 0, torch.qint8)
    assert np.array_equal(tq.int_repr().numpy(), q)
    assert np.allclose(tq.dequantize().numpy(), mc.dequantize_kv(q, scale), rtol=0, atol=1e-6)


def test_rolling_cache_decoding_matches_torch_sdpa_with_the_window_mask():
    torch = require_torch()
    rng = np.random.default_rng(7)
    T, window, sinks, d_k = 12, 4, 1, 8
    params = mc.init_gqa_params(d_k, 1, 1, rng=rng)
    x = rng.normal(size=(1, T, d_k))
    cache = mc.RollingKVCache(1, 1, d_k, window, sinks)
    ours = np.concatenate([mc.grouped_query_attention(x[:, t:t + 1], params, 1, 1, cache=cache)[0]
                           for t in range(T)], axis=1)
    q, k, v = (torch.from_numpy(x @ W)[:, None] for W in (params.W_q, params.W_k, params.W_v))
    allowed = torch.from_numpy(window_sink_mask(T, window, sinks))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed)[:, 0].numpy() @ params.W_o
    assert np.abs(ours - ref).max() < 1e-12
