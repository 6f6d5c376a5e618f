"""The views of notebook 08 (mha_course.plots_training): they draw what they are given, and say
what is wrong with a bad request."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from mha_course.lessons import model as train  # noqa: E402
from mha_course.views import model as pt  # noqa: E402

CONFIG = train.Config(task="induction", vocab=6, seq_len=6, d_model=4, h=2, n_layers=2, batch=3, steps=4)


def test_smoothing_is_a_running_mean():
    assert np.allclose(pt.smooth([1.0, 3.0, 5.0, 7.0], 2), [1.0, 2.0, 4.0, 6.0])


def test_heatmaps_show_the_weights_and_grey_out_the_future():
    params, history = train.train(CONFIG, snapshot_every=2)
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
