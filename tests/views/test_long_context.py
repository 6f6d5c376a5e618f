"""views/long_context.py: every view of notebook 13 draws what it is given."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from mha_course.lessons import long_context as lc  # noqa: E402
from mha_course.views import long_context as lv  # noqa: E402


# ----------------------------------------------------------------------------- evaluations
def test_views_draw(long_context_models):
    table = lc.extrapolation_table({k: long_context_models[k] for k in ("rope", "none")}, lengths=(16, 32), n=16)
    axes = lv.extrapolation_figure(table, (16, 32), 16)
    assert len(axes[0].lines) == 3 and axes[0].get_legend() is not None
    assert len(lv.rope_turns_figure(8, 4.0, 16).lines) == 8
    config, params = long_context_models["rope"]
    stream = lc.stream_batch(config, 2, np.random.default_rng(0), 4)
    for fig in (lv.length_view(long_context_models["rope"], 24, n=16), lv.scaling_view(config, params, 2.0, n=16),
                lv.window_view(config, params, stream, 8, 1)):
        assert isinstance(fig, plt.Figure)
    assert len(lv.paged_memory_bars([3, 9], 16, 4).patches) == 6
    ax = lv.sink_weight_bars({"rope": np.full((2, 4), 0.1)}, 0.15)
    assert len(ax.patches) == 8
    plt.close("all")


def test_each_evaluation_length_has_its_own_panel_and_axis(long_context_models):
    """Three lengths tiled on one axis read as one sequence: one panel per length, each spanning 0 .. T."""
    table = lc.extrapolation_table({"rope": long_context_models["rope"]}, n=16)
    axes = lv.extrapolation_figure(table, lc.LENGTHS, lc.TRAIN_LEN)
    assert len(axes) == 1 + len(lc.LENGTHS)
    for ax, T in zip(axes[1:], lc.LENGTHS):
        lo, hi = ax.get_xlim()
        assert lo < 0 < T - 1 < hi <= T and len(ax.lines) >= 1
        xs = ax.lines[0].get_xdata()
        assert xs.min() >= T // 2 - 1 and xs.max() <= T - 1  # the second copy of that sequence only
    assert len({ax.get_ylim() for ax in axes[1:]}) == 1  # one loss scale for the three


def test_turns_figure_draws_beta_over_the_training_length():
    """beta_fast and beta_slow are turns over L: the unscaled curve over L is drawn, and the thresholds label L."""
    ax = lv.rope_turns_figure(8, 4.0, 16)
    unscaled = next(line for line in ax.lines if line.get_label().startswith("unscaled, over L"))
    assert np.allclose(unscaled.get_ydata(), 16 * np.array([1, 0.1, 0.01, 0.001]) / (2 * np.pi))
    assert all("over L" in t.get_text() for t in ax.texts)
    labels = [line.get_label() for line in ax.lines]
    assert "YaRN (paper ramp), over s·L" in labels and "YaRN (reference ramp), over s·L" in labels


def test_stream_curves_stay_visible_on_top_of_each_other():
    curves = {k: np.zeros(32) for k in ("a", "b", "c", "d")}  # four identical curves: only styles tell them apart
    ax = lv.stream_loss_curves(curves, 16)
    lines = [line for line in ax.lines if line.get_label() in curves]
    assert len({line.get_linestyle() for line in lines}) == 4
    widths = [line.get_linewidth() for line in lines]
    assert widths == sorted(widths, reverse=True) and [line.get_zorder() for line in lines] == sorted(
        line.get_zorder() for line in lines)  # later curves thinner and on top


def test_window_mask_labels_every_fourth_key():
    from mha_course.gqa import RollingKVCache
    ax = lv.window_mask(RollingKVCache(1, 1, 2, 8, 2).next_mask(24), 8, 2)
    shown = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert shown == [str(i) for i in range(0, 24, 4)]


def test_length_view_says_why_its_left_part_is_empty(long_context_models):
    fig = lv.length_view(long_context_models["alibi"], 48, n=16)
    ax = fig.axes[0]
    assert any("not scored" in t.get_text() for t in ax.texts) and len(ax.patches) >= 1


@pytest.mark.parametrize("args", [([5, 9], 16, 0), ([5, 9], 0, 4), ([5, 30], 16, 4), ([], 16, 4), ([1.5], 16, 4)])
def test_paged_memory_bars_refuses_bad_sizes(args):
    with pytest.raises(ValueError):
        lv.paged_memory_bars(*args)


# ----------------------------------------------------------------------------- bad input, one test per kind
def _table():
    from mha_course.lessons.model import Metrics
    return {"rope": [(Metrics(1.0, 0.5), np.r_[np.full(8, np.nan), np.ones(8)]),
                     (Metrics(2.0, 0.2), np.r_[np.full(16, np.nan), np.ones(16)])]}


@pytest.mark.parametrize("length_index", [5, -1, 2, 1.0, True])
def test_a_length_index_out_of_range_is_refused(length_index):
    """length_index=5 was an IndexError, -1 drew the last length as if it were asked for."""
    with pytest.raises(ValueError, match="length_index="):
        lv.position_loss_curves(_table(), [16, 32], 16, length_index=length_index)


@pytest.mark.parametrize("table, lengths, name", [
    ({"rope": [0.5, 0.6]}, [8, 16, 32], "table"), ({}, [16, 32], "table"), (None, [16, 32], "table"),
    (_table(), [16, 32, 64], "table"), (_table(), [32, 16], "lengths"), (_table(), [], "lengths"),
    (_table(), [16.0, 32.0], "lengths"), (_table(), "16", "lengths")])
def test_a_table_that_does_not_fit_its_lengths_is_refused(table, lengths, name):
    for view in (lv.accuracy_vs_length, lv.extrapolation_figure, lv.position_loss_curves):
        with pytest.raises(ValueError, match=name):
            view(table, lengths, 16)
    plt.close("all")


@pytest.mark.parametrize("train_len", [0, -16, 16.0, True, None])
def test_train_len_must_be_a_positive_whole_number(train_len):
    with pytest.raises(ValueError, match="train_len="):
        lv.accuracy_vs_length(_table(), [16, 32], train_len)
    with pytest.raises(ValueError, match="train_len="):
        lv.rope_turns_figure(8, 4.0, train_len)


@pytest.mark.parametrize("kwargs, name", [
    ({"d_k": 7}, "d_k"), ({"d_k": None}, "d_k"), ({"factor": float("nan")}, "factor"), ({"factor": 0.0}, "factor"),
    ({"factor": "4"}, "factor"), ({"base": float("inf")}, "base"), ({"beta_fast": None}, "beta_fast")])
def test_rope_turns_figure_refuses_bad_numbers(kwargs, name):
    with pytest.raises(ValueError, match=name):
        lv.rope_turns_figure(**{"d_k": 8, "factor": 4.0, "train_len": 16, **kwargs})


@pytest.mark.parametrize("mask, window, sinks, name", [
    (np.ones((4, 4)), 2, 0, "mask"), (np.ones((4, 3), bool), 2, 0, "mask"), (None, 2, 0, "mask"),
    (np.ones((4, 4), bool), 0, 0, "window"), (np.ones((4, 4), bool), None, 0, "window"),
    (np.ones((4, 4), bool), 2, -1, "sinks"), (np.ones((4, 4), bool), 2, 1.5, "sinks")])
def test_window_mask_refuses_what_is_no_rolling_mask(mask, window, sinks, name):
    """A float mask of ones was drawn as 16 keys attended, and window/sinks were never looked at."""
    with pytest.raises(ValueError, match=name):
        lv.window_mask(mask, window, sinks)


@pytest.mark.parametrize("weights, uniform, name", [
    ({}, 0.1, "weights"), (None, 0.1, "weights"), ({"rope": np.ones(3)}, 0.1, "weights"),
    ({"rope": np.ones((2, 2))}, float("nan"), "uniform"), ({"rope": np.ones((2, 2))}, 2.0, "uniform"),
    ({"rope": np.ones((2, 2))}, "0.1", "uniform")])
def test_sink_weight_bars_refuse_bad_input(weights, uniform, name):
    """sink_weight_bars({}, 0.1) was an IndexError; a NaN share was drawn as no line."""
    with pytest.raises(ValueError, match=name):
        lv.sink_weight_bars(weights, uniform)


@pytest.mark.parametrize("curves, episode_len, name", [
    ({}, 4, "curves"), ({"a": np.ones(8), "b": np.ones(6)}, 4, "curves"), ({"a": np.ones(8)}, 0, "episode_len"),
    ({"a": np.ones(8)}, -1, "episode_len"), ({"a": np.ones(8)}, True, "episode_len")])
def test_stream_loss_curves_refuse_bad_input(curves, episode_len, name):
    with pytest.raises(ValueError, match=name):
        lv.stream_loss_curves(curves, episode_len)


def test_the_model_views_refuse_what_is_no_model_and_scalings_refuse_alibi(long_context_models):
    config, params = long_context_models["rope"]
    alibi = long_context_models["alibi"]
    stream = lc.stream_batch(config, 2, np.random.default_rng(0), 2)
    for call, name in ((lambda: lv.scaling_view(None, params, 2.0), "config"),
                       (lambda: lv.scaling_view(config, "params", 2.0), "params"),
                       (lambda: lv.scaling_view(*alibi, 2.0), "positions='alibi'"),
                       (lambda: lv.rope_model(*alibi), "positions='alibi'"),
                       (lambda: lv.scaling_view(config, params, 0.5), "factor"),
                       (lambda: lv.scaling_view(config, params, 2.0, n=0), "n="),
                       (lambda: lv.checked_model(config, alibi[1]._replace(layers=alibi[1].layers[:1])), "params"),
                       (lambda: lv.length_view(None, 24), "model"),
                       (lambda: lv.length_view((config, params), 4), "eval_len=4"),
                       (lambda: lv.length_view((config, params), 24.5), "eval_len"),
                       (lambda: lv.length_view((config, params), 24, n=-1), "n="),
                       (lambda: lv.window_view(config, params, None, 8, 1), "batch"),
                       (lambda: lv.window_view(config, params, stream, 0, 0), "window"),
                       (lambda: lv.window_view(config, params, stream, 8, -1), "sinks")):
        with pytest.raises(ValueError, match=name):
            call()
    plt.close("all")


# --- issue 32, round 4: sinks are keys of the mask: at most T
def test_window_mask_refuses_more_sinks_than_keys():
    with pytest.raises(ValueError, match=r"sinks=9 is more than the mask's T=4 keys; pass sinks in 0\.\.4"):
        lv.window_mask(np.ones((4, 4), bool), 2, 9)
    ax = lv.window_mask(np.tril(np.ones((4, 4), bool)), 2, 4)
    assert ax.get_title() == "window 2, sinks 4: 10 keys attended"
    plt.close("all")


def test_sink_weight_bars_refuse_a_non_finite_weight():
    with pytest.raises(ValueError, match=r"weights\['rope'\] has 1 non-finite value"):
        lv.sink_weight_bars({"rope": np.array([[np.nan, 0.5]])}, 0.5)
    plt.close("all")
