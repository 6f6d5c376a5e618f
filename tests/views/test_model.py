"""The views of notebook 08 (mha_course.plots_training): they draw what they are given, and say
what is wrong with a bad request."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from mha_course.lessons import model as train  # noqa: E402
from mha_course.lessons import training
from mha_course.views import model as pt  # noqa: E402

CONFIG = train.Config(task="induction", vocab=6, seq_len=6, d_model=4, h=2, n_layers=2, batch=3, steps=4)


def test_smoothing_is_a_running_mean():
    assert np.allclose(pt.smooth([1.0, 3.0, 5.0, 7.0], 2), [1.0, 2.0, 4.0, 6.0])


def test_heatmaps_show_the_weights_and_grey_out_the_future():
    params, history = training.train(CONFIG, snapshot_every=2)
    tokens = train.make_batch(CONFIG, np.random.default_rng(0), 1).tokens
    _, w = train.forward(params, tokens, CONFIG)
    axes = pt.model_heatmaps([a[0] for a in w], tokens[0])
    shown = axes[1][0].images[0].get_array()
    assert shown.mask[0, 1] and not shown.mask[1, 0]  # key 1 is in query 0's future
    assert np.isclose(shown[3, 2], w[1][0, 0, 3, 2])
    fig = pt.snapshot_figure(history, tokens[0], 2)
    assert "step 2" in fig._suptitle.get_text()
    with pytest.raises(ValueError, match=r"no snapshot at step 3; snapshots were kept at steps \[0, 2\]"):
        pt.snapshot_figure(history, tokens[0], 3)
    plt.close("all")


def test_h_sweep_figure_marks_the_chosen_h():
    results = {"h_sweep_hs": np.array([1, 2, 4]), "h_sweep_losses": np.ones((2, 3, 30)),
               "h_sweep_final": np.array([[1.0, 0.5, 0.7], [1.2, 0.4, 0.9]])}
    fig = pt.h_sweep_figure(results, h=2)
    marker = fig.axes[1].lines[-1]
    assert marker.get_xdata()[0] == 2 and np.isclose(marker.get_ydata()[0], 0.45)
    plt.close(fig)


def test_live_loss_plot_keeps_every_loss():
    live = pt.LiveLossPlot(every=100)
    for step in range(3):
        assert live(step, train.Metrics(1.0 / (step + 1), 0.0)) is False
    assert live.losses == [1.0, 0.5, 1 / 3]
    plt.close("all")


def test_before_after_labels_are_readable_and_the_copy_start_is_marked():
    tokens = np.arange(24) % 16
    w = [np.tile(np.eye(24), (2, 1, 1))] * 2
    fig = pt.before_after_figure(w, w, tokens, copy_start=16)
    ax = fig.axes[0]
    assert min(t.get_fontsize() for t in ax.get_yticklabels()) >= 7
    marked = [ln for ln in ax.lines if ln.get_color() == pt.COPY_COLOR]
    assert sorted(ln.get_ydata()[0] for ln in marked if ln.get_linestyle() == "-") == [15.5]
    assert any("second copy starts at position 16" in t.get_text() for t in fig.texts)
    plt.close(fig)


def test_every_h_sweep_curve_has_its_own_colour_or_dash():
    hs = np.array([1, 2, 4, 8, 16, 32])
    results = {"h_sweep_hs": hs, "h_sweep_losses": np.ones((2, 6, 50)) + np.arange(6)[None, :, None],
               "h_sweep_final": np.ones((2, 6))}
    fig = pt.h_sweep_figure(results, h=2)
    lines = fig.axes[0].lines
    looks = {(ln.get_color(), ln.get_linestyle()) for ln in lines}
    assert len(lines) == 6 and len(looks) == 6
    widths = {ln.get_label(): ln.get_linewidth() for ln in lines}
    assert widths["h=2"] > max(v for k, v in widths.items() if k != "h=2")
    plt.close(fig)


def test_the_live_run_of_notebook_08_trains_with_a_progress_bar_and_a_live_loss_plot(capsys):
    """Notebook 08 offers the induction run live (TRAIN_LIVE = True): train with the live plot and tqdm."""
    live = pt.LiveLossPlot(every=2, title="live")
    params, history = training.train(CONFIG, callback=live, progress=True, snapshot_every=2)
    assert len(history.losses) == CONFIG.steps and [int(s) for s in history.snapshot_steps] == [0, 2]
    plt.close("all")


# --- hostile arguments: token ids, layer weights, windows, steps and h are checked before anything is drawn
W2 = [np.full((2, 4, 4), 0.25)] * 2  # 2 layers of 2 heads, T = 4
RESULTS = {"h_sweep_hs": np.array([1, 2, 4]), "h_sweep_losses": np.ones((2, 3, 30)),
           "h_sweep_final": np.ones((2, 3))}


def _refused(call, match):
    before = plt.get_fignums()
    with pytest.raises((ValueError, TypeError), match=match):
        call()
    assert plt.get_fignums() == before, "a figure was drawn before the arguments were checked"


@pytest.mark.parametrize("tokens, match", [
    ([0, 1, -1, 2], "holds the id -1"),              # was drawn as the label '-1'
    ([0, 1, 6, 2], r"outside 0\.\.5 \(vocab=6\)"),   # past the model's vocabulary (given)
    ([0.5, 1, 2, 3], "whole-number token ids"),
    ([True, False, True, True], "whole-number token ids"),
    ([0, 1, 2], r"tokens has shape \(3,\) but the weights are for T=4"),
    ("spam", "tokens must be the"),                  # was: invalid literal for int()
    (None, "tokens must be the"),
])
def test_token_ids_are_whole_numbers_in_the_vocabulary_one_per_position(tokens, match):
    _refused(lambda: pt.model_heatmaps(W2, tokens, vocab=6), match)
    _refused(lambda: pt.before_after_figure(W2, W2, tokens, vocab=6), match)
    assert pt.token_labels([0, 1, 5, 2], 4, vocab=6) == ["0", "1", "5", "2"]
    assert pt.token_labels([0, 1, 99, 2], 4) == ["0", "1", "99", "2"]  # without vocab any id >= 0 is a label


@pytest.mark.parametrize("weights, match", [
    (None, "weights must be a non-empty list"), ("spam", "weights must be a non-empty list"), ([], "non-empty"),
    ([np.zeros((2, 4, 3))], r"one \(h, T, T\) array per layer"), ([np.zeros((2, 4, 4)), np.zeros((1, 4, 4))], "of one shape"),
])
def test_layer_weights_are_one_h_t_t_array_per_layer(weights, match):
    _refused(lambda: pt.model_heatmaps(weights, [0, 1, 2, 3]), match)
    _refused(lambda: pt.before_after_figure(W2, W2[:1], [0, 1, 2, 3]), "after has 1 layers")


def test_windows_steps_h_and_curves_are_refused_naming_them():
    for window in (0, -1, 2.5, True, "2"):
        with pytest.raises(ValueError, match="window="):
            pt.smooth([1.0, 2.0], window)  # 0 gave NaN, -1 an IndexError
    _refused(lambda: pt.loss_curves(None), "curves must be a dict")  # was AttributeError
    _refused(lambda: pt.loss_curves({"a": "spam"}), "curves\\['a'\\]")
    _refused(lambda: pt.h_sweep_figure(RESULTS, h=3), "h=3 is not one of the valid choices: 1, 2, 4")
    _refused(lambda: pt.h_sweep_figure(RESULTS, h=True), "h=True is not one of")  # was drawn as h=1
    _refused(lambda: pt.h_sweep_figure({"h_sweep_hs": [1]}, h=1), "results must hold h_sweep_hs, h_sweep_losses")
    _refused(lambda: pt.snapshot_figure(None, [0, 1], 0), "history must be a History")
    _refused(lambda: pt.ablation_figure(["a"], [0.1, 0.2], [0.5, 0.9]), "labels must hold one label per head")
    _refused(lambda: pt.ablation_figure(["a", "b"], [0.1, 0.2], None), "sharpness")
    _refused(lambda: pt.model_heatmaps(W2, [0, 1, 2, 3], copy_start=4), "copy_start=4 is out of range")
    for every in (0, 2.5, True, "5"):
        with pytest.raises(ValueError, match="every="):
            pt.LiveLossPlot(every=every)


# --- issue 32, round 4: NaN is refused, not spread over the running mean; losses on a log axis > 0
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_smooth_refuses_non_finite_values(bad):
    with pytest.raises(ValueError, match="values"):
        pt.smooth(np.array([1.0, bad, 2.0]), 2)


def test_loss_curves_refuse_a_loss_the_log_axis_cannot_draw():
    with pytest.raises(ValueError, match=r"curves\['a'\] holds 0"):
        pt.loss_curves({"a": [1.0, 0.0, 0.5]})
    with pytest.raises(ValueError, match="loss_increase"):
        pt.ablation_figure(["a", "b"], [np.nan, 0.1], [0.5, 0.6])
    plt.close("all")


def test_model_heatmaps_refuse_non_finite_weights():
    with pytest.raises(ValueError, match=r"weights\[0\] has 9 non-finite value"):
        pt.model_heatmaps([np.full((1, 3, 3), np.nan)], [0, 1, 2])
    plt.close("all")
