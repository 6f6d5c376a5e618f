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
