"""views.circuits: every view draws and returns what it drew on; the live run's loss-plot callback."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from mha_course.lessons import checkpoints
from mha_course.lessons import circuits as ci  # noqa: E402
from mha_course.lessons import model as train  # noqa: E402
from mha_course.views import circuits as vc  # noqa: E402
from mha_course.views import model as pt  # noqa: E402

CONFIG, PARAMS, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
RUNS = ci.load_trajectories()


def test_token_text_and_head_labels():
    assert vc.token_text([0, 25, 26]) == ["a", "z", "t26"]
    assert vc.head_labels(2, 2) == ["L1 H0", "L1 H1", "L2 H0", "L2 H1"]


def test_the_views_draw():
    batch = train.make_batch(CONFIG, np.random.default_rng(0), 16)
    _, weights = train.forward(PARAMS, batch.tokens, CONFIG)
    ax = vc.scores_table(ci.head_scores(weights, batch.tokens))
    assert len(ax.texts) == 12  # 4 heads x 3 scores, each written
    axes = vc.phase_change_figure(RUNS, step=100)
    assert len(axes) == 2 and axes[0].get_yscale() == "log"
    assert isinstance(vc.step_figure(RUNS, 377), plt.Figure)  # snaps to the nearest checkpoint (375)
    for kind in ("ov", "qk", "pos"):
        assert len(vc.circuits_figure(PARAMS, CONFIG, kind).axes) >= 4
    axes = vc.composition_figure(ci.composition_scores(PARAMS, CONFIG), 0.18)
    assert [a.get_title()[0] for a in axes] == ["Q", "K", "V"]
    pair = ci.make_pair(CONFIG, np.random.default_rng(0), 4)
    assert vc.position_patching_figure(np.zeros((2, 2, 24)), pair.clean[0]) is not None
    assert len(vc.head_bars(np.arange(4.0).reshape(2, 2)).patches) == 4
    ax = vc.ablation_figure({"zero": np.ones(2), "mean": np.ones(2)}, ["a", "b"])
    assert len(ax.patches) == 4
    ax = vc.ranking_table({"x": np.array([[1.0, 4], [3, 2]])})
    assert [t.get_text().split()[0] for t in ax.texts] == ["4", "1", "2", "3"]
    fig = vc.pattern_figure(weights[1][0], batch.tokens[0], head=1, token=20)
    assert len(fig.axes) == 3
    assert len(vc.rollout_figure(np.ones(24), np.ones(24), np.ones(24), batch.tokens[0], 10)) == 3


def test_a_live_run_with_the_loss_plot_callback():
    live = pt.LiveLossPlot(every=5)
    run = ci.train_trajectory(ci.PHASE_CHANGE_CONFIGS["one_layer"]._replace(steps=10), every=5, callback=live)
    assert len(live.losses) == 10 and run.steps.tolist() == [0, 5, 10]
    assert run.k_composition.shape == (3, 0, 0) and ci.formation_step(run) is None

