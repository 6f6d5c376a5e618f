"""The sqrt(d_k) experiment (mha_course.scaling), the split views and the d_k slider behave.

Helpers taught in 02_scaled_dot_product.ipynb and 03_multi_head_split.ipynb.
"""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import mha_course as mc  # noqa: E402
from mha_course.lessons import scaling
from mha_course.views import attention as plots  # noqa: E402
from mha_course.widgets import OptionControls, option_live_view  # noqa: E402


@pytest.fixture(scope="module")
def result():
    return scaling.scaling_experiment(np.random.default_rng(0))


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# --- scaling.py ------------------------------------------------------------------------
@pytest.mark.parametrize("d_k", [1, 16, 256])
def test_raw_scores_have_variance_d_k(d_k):
    s = scaling.sample_scores(np.random.default_rng(1), d_k, n_queries=2000, n_keys=8)
    assert s.shape == (2000, 8)
    assert abs(s.mean()) < 0.1 * np.sqrt(d_k)
    assert 0.9 * d_k < s.var() < 1.1 * d_k


def test_same_seed_same_experiment():
    a = scaling.scaling_experiment(np.random.default_rng(3), d_k_values=[2, 32], n_queries=50)
    b = scaling.scaling_experiment(np.random.default_rng(3), d_k_values=[2, 32], n_queries=50)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_entropy_extremes_and_definition():
    S = 7
    assert np.isclose(scaling.entropy(np.full(S, 1 / S)), np.log(S))
    assert scaling.entropy(np.eye(S)[2]) == 0.0
    p = mc.softmax(np.random.default_rng(2).normal(size=(4, S)))
    np.testing.assert_allclose(scaling.entropy(p), -(p * np.log(p)).sum(-1))


def test_softmax_jacobian_matches_finite_differences():
    s = np.random.default_rng(4).normal(size=5)
    J = scaling.softmax_jacobian(mc.softmax(s))
    eps = 1e-6
    numeric = np.stack([(mc.softmax(s + eps * e) - mc.softmax(s - eps * e)) / (2 * eps)
                        for e in np.eye(5)], axis=1)  # column j = d p / d s_j
    np.testing.assert_allclose(J, numeric, atol=1e-8)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.lists(st.floats(-30, 30), min_size=1, max_size=12))
def test_jacobian_norm_is_frobenius_norm_and_rows_sum_to_zero(logits):
    p = mc.softmax(np.array(logits))
    J = scaling.softmax_jacobian(p)
    np.testing.assert_allclose(J.sum(-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(J, J.T)
    assert np.isclose(scaling.jacobian_norm(p), np.linalg.norm(J))


def test_jacobian_vanishes_for_a_one_hot_row():
    assert scaling.jacobian_norm(np.array([0.0, 1.0, 0.0])) == 0.0


def test_experiment_shows_the_three_effects(result):
    assert result.d_k.tolist() == list(scaling.POWERS_OF_TWO)
    slope = np.polyfit(np.log(result.d_k), np.log(result.var_raw), 1)[0]
    assert 0.9 < slope < 1.1, f"Var(q.k) should grow like d_k, slope {slope:.3f}"
    assert np.all((result.var_scaled > 0.8) & (result.var_scaled < 1.25))
    assert np.all(np.diff(result.entropy_raw) < 0), "unscaled entropy should fall with d_k"
    assert np.ptp(result.entropy_scaled) < 0.2, "scaled entropy should stay level"
    assert result.grad_raw[-1] < 0.5 * result.grad_scaled[-1]
    assert result.example_raw.shape == (10, 16) and np.allclose(result.example_raw.sum(-1), 1)
    assert result.example_raw[-1].max() > 0.9 > result.example_scaled[-1].max()


def test_example_row_is_the_median_entropy_query_in_both_columns():
    r = scaling.scaling_experiment(np.random.default_rng(7), d_k_values=[16], n_queries=51)
    raw = scaling.sample_scores(np.random.default_rng(7), 16, n_queries=51, n_keys=16)
    w_raw, w_scaled = mc.softmax(raw), mc.softmax(raw / 4.0)
    typical = np.argsort(scaling.entropy(w_raw))[25]
    np.testing.assert_allclose(r.example_raw[0], w_raw[typical])
    np.testing.assert_allclose(r.example_scaled[0], w_scaled[typical])


def test_experiment_table_and_rows(result):
    lines = result.table().splitlines()
    assert len(lines) == 1 + len(result.d_k) and lines[-1].split()[0] == "512"
    assert result.row(64) == 6
    with pytest.raises(ValueError, match="d_k=3 was not part"):
        result.row(3)


@pytest.mark.parametrize("call", [
    lambda: scaling.scaling_experiment(np.random.default_rng(0), d_k_values=[]),
    lambda: scaling.scaling_experiment(0),
    lambda: scaling.sample_scores(np.random.default_rng(0), d_k=0),
])
def test_bad_arguments_raise_value_error(call):
    with pytest.raises(ValueError):
        call()


# --- plots: the sqrt(d_k) views ----------------------------------------------------------
def test_scaling_curves_draw_both_series_and_the_marker(result):
    axes = plots.scaling_curves(result, d_k=64)
    assert len(axes) == 3
    for ax in axes:
        raw, scaled = ax.lines[0], ax.lines[1]
        assert raw.get_color() == plots.RAW_COLOR and scaled.get_color() == plots.SCALED_COLOR
        assert any(np.all(np.asarray(line.get_xdata()) == 64) for line in ax.lines[2:])
    np.testing.assert_array_equal(axes[1].lines[0].get_ydata(), result.entropy_raw)


def test_scaling_figure_shows_the_example_row(result):
    fig = plots.scaling_figure(result, 512)
    bars = fig.axes[3].patches
    heights = np.array([b.get_height() for b in bars])
    np.testing.assert_allclose(heights, np.concatenate([result.example_raw[-1],
                                                        result.example_scaled[-1]]))
    with pytest.raises(ValueError, match="pick one of"):
        plots.scaling_figure(result, 100)


def test_weights_bars_rejects_mismatched_rows():
    with pytest.raises(ValueError, match=r"scaled must be a 1-D array of shape \(3,\)"):
        plots.weights_bars(np.ones(3) / 3, np.ones(4) / 4)


# --- plots: where each head's entries come from -------------------------------------------
@pytest.mark.parametrize("T, d_model, h", [(6, 8, 2), (5, 12, 3), (3, 6, 6), (4, 4, 1)])
def test_split_sources_locate_every_entry(T, d_model, h):
    x = np.random.default_rng(5).normal(size=(1, T, d_model))
    for buggy, heads in ((False, mc.split_heads(x, h)[0]),
                         (True, x.reshape(1, h, T, d_model // h)[0])):
        pos, feat = plots.head_split_sources(T, d_model, h, buggy=buggy)
        assert pos.shape == feat.shape == (h, T, d_model // h)
        np.testing.assert_array_equal(x[0, pos, feat], heads)


def test_correct_split_keeps_rows_whole_and_the_bug_mixes_them():
    pos, feat = plots.head_split_sources(6, 8, 2)
    assert np.all(pos == np.arange(6)[None, :, None])
    assert feat[1].min() == 4 and feat[1].max() == 7
    bug, _ = plots.head_split_sources(6, 8, 2, buggy=True)
    assert not np.all(bug == np.arange(6)[None, :, None])
    assert set(bug[0].ravel()) == {0, 1, 2}, "head 0 of the bug holds only the first half of positions"


def test_with_one_head_the_bug_is_harmless():
    np.testing.assert_array_equal(plots.head_split_sources(5, 6, 1)[0],
                                  plots.head_split_sources(5, 6, 1, buggy=True)[0])


def test_split_sources_reject_h_not_dividing_d_model():
    with pytest.raises(ValueError, match="valid h: 1, 2, 3, 6"):
        plots.head_split_sources(4, 6, 4)


def test_split_bug_figure_colours_cells_by_position():
    fig = plots.split_bug_figure(6, 8, 2)
    assert len(fig.axes) == 4
    for ax, buggy in zip(fig.axes, (False, False, True, True)):
        head = int(ax.get_title().split()[-1])
        pos, _ = plots.head_split_sources(6, 8, 2, buggy=buggy)
        np.testing.assert_array_equal(ax.images[0].get_array(), pos[head])
    assert plots.token_color(0) != plots.token_color(1)


# --- widgets: the one-option slider ----------------------------------------------------------
def test_option_controls_set_and_callbacks():
    c = OptionControls("d_k", scaling.POWERS_OF_TWO, value=64)
    seen = []
    c.on_change(lambda **v: seen.append(v))
    c.set(d_k=8)
    c.slider.value = 512  # as a user dragging the slider
    assert c.values == {"d_k": 512} and seen == [{"d_k": 8}, {"d_k": 512}]
    assert c.slider.continuous_update is False
    with pytest.raises(ValueError, match="is not one of the valid choices"):
        c.set(d_k=3)
    with pytest.raises(ValueError, match="only d_k"):
        c.set(h=2)


def test_option_live_view_redraws_with_the_slider_value():
    drawn = []

    def draw(d_k):
        drawn.append(d_k)
        return plt.figure()

    view = option_live_view(draw, "d_k", [1, 2, 4], value=2)
    view.controls.set(d_k=4)
    assert drawn == [4]
    assert view.redraw() is not None and drawn == [4, 4]


@pytest.mark.parametrize("bad", [None, "spam", 0.5])
def test_softmax_jacobian_refuses_what_is_no_row_of_weights(bad):
    """None was an IndexError (a 0-d array indexed), a string numpy's 'could not convert'."""
    for fn in (scaling.softmax_jacobian, scaling.jacobian_norm):
        with pytest.raises(ValueError, match=r"\bp\b"):
            fn(bad)


@pytest.mark.parametrize("bad", [np.array([5.0, -3.0]), np.array([1e200, 1e200]), np.array([np.nan, 1.0])])
def test_jacobian_and_entropy_take_softmax_weights_only(bad):
    """Scores passed as weights gave a Jacobian of -20s and a negative entropy; 1e200 an inf norm."""
    for fn in (scaling.softmax_jacobian, scaling.jacobian_norm):
        with pytest.raises(ValueError, match=r"\bp\b"):
            fn(bad)
    with pytest.raises(ValueError, match="weights"):
        scaling.entropy(bad)


def test_the_experiment_takes_distinct_sizes_and_row_takes_a_size():
    rng = np.random.default_rng(0)
    for bad in ([4, 4], 4, "abc", []):
        with pytest.raises(ValueError, match="d_k"):
            scaling.scaling_experiment(rng, d_k_values=bad, n_queries=4)
    result = scaling.scaling_experiment(rng, d_k_values=[1, 2], n_queries=4)
    assert result.row(np.int64(2)) == 1
    with pytest.raises(ValueError, match="d_k=True must be a positive integer"):
        result.row(True)  # was read as d_k = 1


def test_entropy_and_the_jacobian_refuse_rows_that_do_not_sum_to_one():
    with pytest.raises(ValueError, match=r"rows summing to \[0\.4\]"):
        scaling.entropy(np.array([[0.5, 0.5], [0.2, 0.2]]))
    with pytest.raises(ValueError, match="sums to 1"):
        scaling.softmax_jacobian(np.array([0.9, 0.9, 0.1]))
    ok = scaling.entropy(np.array([[0.5, 0.5], [0.0, 0.0]], dtype=np.float32))  # an all-masked row is fine
    assert ok.tolist() == pytest.approx([np.log(2), 0.0])


def test_sample_scores_refuses_sizes_past_the_course_limit_before_drawing():
    with pytest.raises(ValueError, match=r"sampled keys .* would take .*ask for fewer"):
        scaling.sample_scores(np.random.default_rng(1), d_k=4096, n_queries=10**5, n_keys=64)
