"""The cost ledger: FLOP formulas agree with a count from the shapes, h changes memory not FLOPs.

Timing is only checked for shape and sign (no timed assertions).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mha_course as mc
from mha_course.lessons import complexity as cx


def _matmul_flops(a_shape, b_shape) -> int:
    """2·m·k·n per matrix product, times the batch axes of ``a``."""
    *batch, m, k = a_shape
    k2, n = b_shape[-2:]
    assert k == k2
    return 2 * int(np.prod(batch, dtype=np.int64)) * m * k * n


def _flops_from_trace(t):
    """Count every matrix product of a forward pass from the shapes its Trace recorded."""
    B, T, D = t.shapes["X"]
    S = t.shapes["K"][1]
    dk = t.d_k
    proj = (_matmul_flops((B, T, D), (D, D)) + 2 * _matmul_flops((B, S, D), (D, D))
            + _matmul_flops(t.shapes["concat"], (D, D)))
    att = (_matmul_flops(t.shapes["Q_heads"], (dk, S))          # Q_i K_i^T
           + _matmul_flops(t.shapes["weights"], (S, dk)))       # weights_i V_i
    return proj, att


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.integers(1, 3), st.integers(1, 9), st.sampled_from([4, 6, 8, 12]), st.data())
def test_formulas_match_a_count_from_the_trace(B, T, D, data):
    h = data.draw(st.sampled_from(mc.valid_heads(D)))
    t = mc.trace(np.zeros((B, T, D)), mc.init_params(D, rng=np.random.default_rng(0)), h)
    proj, att = _flops_from_trace(t)
    led = cx.ledger(D, h, T, batch=B)
    assert (led.projection_flops, led.attention_flops) == (proj, att)
    assert proj == B * 8 * T * D * D and att == B * 4 * T * T * D


def test_cross_attention_formulas_count_T_and_S_separately():
    D, T, S = 8, 3, 7
    ctx = np.zeros((1, S, D))
    t = mc.trace(np.zeros((1, T, D)), mc.init_params(D, rng=np.random.default_rng(0)), 2,
                 context=ctx)
    assert _flops_from_trace(t) == (cx.projection_flops(T, D, S), cx.attention_flops(T, D, S))


@pytest.mark.parametrize("D", [8, 12, 64, 512])
def test_flops_and_params_do_not_depend_on_h_but_score_memory_does(D):
    ledgers = [cx.ledger(D, h, 128) for h in mc.valid_heads(D)]
    assert len({(l.projection_flops, l.attention_flops, l.params) for l in ledgers}) == 1
    mem = [l.score_bytes for l in ledgers]
    assert mem == [l.h * mem[0] for l in ledgers]  # B·h·T²·bytes: linear in h


@pytest.mark.parametrize("D", [1, 4, 64, 768])
def test_crossover_is_where_the_two_parts_are_equal(D):
    T = cx.crossover_seq_len(D)
    assert cx.attention_flops(T, D) == cx.projection_flops(T, D)
    assert cx.attention_flops(T - 1, D) < cx.projection_flops(T - 1, D)
    assert cx.attention_flops(T + 1, D) > cx.projection_flops(T + 1, D)


def test_score_memory_examples():
    assert cx.score_memory_bytes(1, 1, 1024) == 4 * 1024 ** 2
    assert cx.score_memory_bytes(2, 12, 1024, dtype=np.float64) == 2 * 12 * 8 * 1024 ** 2
    assert cx.score_memory_bytes(1, 2, 3, 5, dtype=np.float16) == 2 * 3 * 5 * 2


def test_param_count_agrees_with_real_parameters():
    for D in (4, 12, 64):
        for bias in (False, True):
            assert cx.param_count(D, bias) == mc.count_params(
                mc.init_params(D, rng=np.random.default_rng(0), bias=bias))


def test_ledger_table_names_every_line():
    table = cx.ledger(512, 8, 1024).table()
    assert "d_model=512, h=8, d_k=64, seq_len=1024" in table
    assert "projections      2.15 GFLOP" in table and "attention        2.15 GFLOP" in table
    assert "score matrix     32.00 MiB" in table and "parameters       1,048,576" in table


@pytest.mark.parametrize("args, match", [
    ((10, 4, 16), r"d_model=10 is not divisible by h=4; valid h: 1, 2, 5, 10"),
    ((8, 2, 0), r"seq_len=0 must be >= 1"),
    ((8, 2, 4.5), r"seq_len=4.5 must be a positive integer"),
])
def test_ledger_rejects_bad_sizes(args, match):
    with pytest.raises(ValueError, match=match):
        cx.ledger(*args)


@pytest.mark.parametrize("n, text", [(999, "999 "), (12_345_678, "12.35 M"), (3e12, "3.00 T")])
def test_format_count(n, text):
    assert cx.format_count(n) == text


@pytest.mark.parametrize("n, text", [(512, "512 B"), (2048, "2.00 KiB"), (3 * 2**30, "3.00 GiB")])
def test_format_bytes(n, text):
    assert cx.format_bytes(n) == text


# ---- loglog_slope -------------------------------------------------------------------------

@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.floats(-3, 3), st.floats(0.01, 100),
       st.lists(st.floats(0.1, 1e4), min_size=2, max_size=8, unique=True))
def test_slope_recovers_the_power_of_a_power_law(p, c, xs):
    xs = np.array(xs)
    if np.ptp(np.log(xs)) < 1e-3:
        return  # nearly equal x: the slope is ill-conditioned, not a property failure
    assert cx.loglog_slope(xs, c * xs ** p) == pytest.approx(p, abs=1e-6)


def test_slope_of_linear_plus_quadratic_lies_between_one_and_two():
    T = 2.0 ** np.arange(4, 12)
    cost = 8 * T * 64 ** 2 + 4 * T ** 2 * 64  # projections + attention, d_model = 64
    assert 1.0 < cx.loglog_slope(T, cost) < 2.0
    assert cx.loglog_slope(T[-3:], cost[-3:]) > cx.loglog_slope(T[:3], cost[:3])


@pytest.mark.parametrize("xs, ys, match", [
    ([1, 2, 3], [1, 2], r"same length"),
    ([1], [1], r"length >= 2"),
    ([1, 2], [0, 1], r"positive and finite"),
    ([1, -2], [1, 1], r"positive and finite"),
    ([2, 2], [1, 3], r"all equal"),
])
def test_slope_rejects_bad_input(xs, ys, match):
    with pytest.raises(ValueError, match=match):
        cx.loglog_slope(xs, ys)


# ---- time_sweep ---------------------------------------------------------------------------

def test_time_sweep_returns_one_positive_median_per_size_and_reports_progress():
    seen = []
    times = cx.time_sweep([2, 4, 8], 8, 2, rng=np.random.default_rng(0), repeats=2,
                          progress=lambda done, total: seen.append((done, total)))
    assert times.shape == (3,) and np.all(times > 0) and np.all(np.isfinite(times))
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_time_sweep_leaves_the_global_random_state_alone():
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    cx.time_sweep([3, 5], 4, 2, rng=np.random.default_rng(5), repeats=1)
    assert np.array_equal(np.random.get_state()[1], before), "use only the rng passed in"


@pytest.mark.parametrize("kwargs, match", [
    ({"seq_lens": [4, 0]}, r"seq_len=0 must be >= 1"),
    ({"h": 3}, r"d_model=8 is not divisible by h=3"),
    ({"repeats": 0}, r"repeats=0 must be >= 1"),
    ({"batch": 0}, r"batch=0 must be >= 1"),
    ({"rng": 0}, r"rng must be a numpy Generator"),
])
def test_time_sweep_rejects_bad_input(kwargs, match):
    args = {"seq_lens": [4], "d_model": 8, "h": 2, "rng": np.random.default_rng(0), "repeats": 1}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        cx.time_sweep(args.pop("seq_lens"), args.pop("d_model"), args.pop("h"), **args)


# ----------------------------------------------------------------------------- the rest of the layer (05)


@settings(derandomize=True, max_examples=60, deadline=None)
@given(d_model=st.integers(1, 4096), expansion=st.integers(1, 8))
def test_the_layer_crossover_is_where_attention_first_costs_as_much_as_the_rest(d_model, expansion):
    T = cx.layer_crossover_seq_len(d_model, expansion)
    rest = lambda T_: cx.projection_flops(T_, d_model) + cx.ffn_flops(T_, d_model, expansion)  # noqa: E731
    assert cx.attention_flops(T, d_model) == rest(T)
    if T > 1:
        assert cx.attention_flops(T - 1, d_model) < rest(T - 1)
    assert T == 3 * cx.crossover_seq_len(d_model) if expansion == 4 else True


def test_the_ffn_counts_two_products_of_the_expanded_width():
    assert cx.ffn_flops(10, 4) == 2 * (2 * 10 * 4 * 16)  # (T, D)(D, 4D) and (T, 4D)(4D, D)


@settings(derandomize=True, max_examples=60, deadline=None)
@given(T=st.integers(1, 5000), d_model=st.integers(1, 512))
def test_a_causal_kernel_computes_the_allowed_scores_only(T, d_model):
    allowed = int(mc.causal_mask(min(T, 64)).sum()) if T <= 64 else T * (T + 1) // 2
    assert cx.causal_attention_flops(T, d_model) == 4 * d_model * allowed
    share = cx.causal_attention_flops(T, d_model) / cx.attention_flops(T, d_model)
    assert 0.5 < share <= 1.0 and (T < 100 or share < 0.51)


@settings(derandomize=True, max_examples=60, deadline=None)
@given(T=st.integers(1, 10**6), d_model=st.integers(1, 8192), nbytes=st.sampled_from([1, 2, 4, 8]))
def test_decoding_does_two_flops_per_number_read(T, d_model, nbytes):
    assert cx.decode_intensity(T, d_model, nbytes) == pytest.approx(2 / nbytes)


@pytest.mark.parametrize("call", [lambda: cx.ffn_flops(0, 4), lambda: cx.layer_crossover_seq_len(8, 0),
                                  lambda: cx.causal_attention_flops(4.5, 2), lambda: cx.decode_intensity(4, 4, True)])
def test_bad_sizes_are_refused(call):
    with pytest.raises(ValueError, match="must be"):
        call()


# ----------------------------------------------------------------------------- 05's timing figure, from its file
def test_notebook_05s_timing_claims_hold_in_the_shipped_results():
    """The figure of 05 is drawn from benchmarks/results/bench_complexity.json; what its prose says holds there:
    the fastest calls grow with a log-log slope near 2 where attention dominates, and a fresh process per point."""
    import json
    from pathlib import Path
    bench = json.loads((Path(__file__).resolve().parents[2] / "benchmarks" / "results"
                        / "bench_complexity.json").read_text())
    assert (bench["d_model"], bench["h"]) == (32, 4)
    rows = bench["settings"]["blas1"]
    T = np.array([r["seq_len"] for r in rows])
    floor = np.array([r["min_s"] for r in rows])
    fit = T >= 4 * cx.crossover_seq_len(32)
    assert fit.sum() >= 3 and not any(r["errors"] for r in rows)
    assert 1.7 <= cx.loglog_slope(T[fit], floor[fit]) <= 2.5
    assert np.all(np.diff(floor[fit]) > 0)                      # doubling T never made it faster
    assert set(bench["settings"]) == {"blas1", "default"} and bench["command"].startswith("python benchmarks/")


@pytest.mark.parametrize("fn", [cx.format_count, cx.format_bytes])
@pytest.mark.parametrize("bad", [-1, 4.5, True, float("nan"), "1024", None])
def test_formatting_a_count_refuses_what_is_no_count(fn, bad):
    """A negative count printed as '-1 ', and 4.5 bytes as '4 B' (silently rounded)."""
    with pytest.raises(ValueError, match=r"\bn="):
        fn(bad)


@pytest.mark.parametrize("n", [0, 1023, 2**30, float(2**40), np.int64(5)])
def test_formatting_takes_whole_counts_in_any_number_type(n):
    assert cx.format_bytes(n) == cx.format_bytes(int(n)) and cx.format_count(n) == cx.format_count(int(n))


def test_counts_of_arrays_of_sizes_never_wrap_round_int64():
    """attention_flops([2**40], 2**30) was [0]: numpy's int64 wrapped; scalars stay exact Python ints."""
    with pytest.raises(ValueError, match="passes int64's 2\\*\\*63"):
        cx.attention_flops(np.array([2**40]), 2**30)
    assert cx.attention_flops(2**40, 2**30) == 4 * 2**110
    with pytest.raises(ValueError, match="do not broadcast together"):
        cx.projection_flops([4, 8, 16], 4, S=[4, 8])
    assert cx.format_count(10**30) == "1000000000000000000.00 T"


@pytest.mark.parametrize("dtype", ["nope", object, "U4"])
def test_a_dtype_that_is_no_number_type_is_refused_by_name(dtype):
    """dtype=object was 8 bytes a number, silently; 'nope' numpy's 'data type not understood'."""
    for call in (lambda: cx.score_memory_bytes(1, 1, 4, dtype=dtype), lambda: cx.ledger(8, 2, 4, dtype=dtype)):
        with pytest.raises(ValueError, match="dtype="):
            call()


def test_time_sweep_checks_its_progress_and_rng_before_timing():
    for kwargs, named in (({"progress": 3}, "progress=3 must be a function"), ({"rng": 3}, "rng must be")):
        with pytest.raises(ValueError, match=named):
            cx.time_sweep([4], 8, 2, **{"rng": np.random.default_rng(0), **kwargs})


def test_time_sweep_refuses_lengths_whose_weights_do_not_fit_before_timing():
    with pytest.raises(ValueError, match=r"forward pass over T=100000 tokens"):
        cx.time_sweep([8, 100_000], 8, 2, rng=np.random.default_rng(5), repeats=1)
