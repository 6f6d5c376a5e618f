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
