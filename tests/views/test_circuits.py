"""views.circuits: every view draws and returns what it drew on; the live run's loss-plot callback."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from mha_course.lessons import checkpoints
from mha_course.lessons import circuits as ci  # noqa: E402
from mha_course.lessons import model as train  # noqa: E402
from mha_course.views import circuits as vc  # noqa: E402
from mha_course.views import model as pt  # noqa: E402

CONFIG, PARAMS, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
RUNS = ci.load_trajectories()


def test_token_text_and_head_labels():
    assert vc.token_text([0, 25]) == ["a", "z"] and vc.token_text(np.arange(3, dtype=np.int32)) == ["a", "b", "c"]
    assert vc.head_labels(2, 2) == ["L1 H0", "L1 H1", "L2 H0", "L2 H1"]


@pytest.mark.parametrize("tokens", [[-1, 2], [26], [999], [0.5], [True, False], "ab", [[0, 1]], None])
def test_token_ids_without_a_letter_are_refused(tokens):
    """-1 would read as 'z' from the end and 999 has no letter: refused, naming tokens (not labelled 't-1')."""
    with pytest.raises(ValueError, match="tokens"):
        vc.token_text(tokens)
    with pytest.raises(ValueError, match="tokens"):
        vc.rollout_figure(np.ones(2), np.ones(2), np.ones(2), tokens, 0)


@pytest.mark.parametrize("n_layers, h, name", [(0, 2, "n_layers"), (2, 0, "h"), (-1, 2, "n_layers"), (2.0, 2, "n_layers"),
                                               (True, 2, "n_layers"), (None, 2, "n_layers"), (2, "2", "h")])
def test_head_labels_refuse_sizes_that_are_no_positive_whole_number(n_layers, h, name):
    """head_labels(0, 2) returned [] and (-1, 2) too: a figure with no bars instead of an error."""
    with pytest.raises(ValueError, match=f"{name}="):
        vc.head_labels(n_layers, h)


@pytest.mark.parametrize("step", [377, -1, 123456789, 375.0, True, None, "375"])
def test_a_step_that_is_no_checkpoint_is_refused_not_snapped(step):
    """step_figure drew the nearest checkpoint of any number (123456789 showed step 800): now refused."""
    with pytest.raises(ValueError, match="step=.* is not a checkpoint"):
        vc.step_figure(RUNS, step)
    if step is not None:
        with pytest.raises(ValueError, match="step="):
            vc.phase_change_figure(RUNS, step)
    plt.close("all")


@pytest.mark.parametrize("runs", [None, {}, {"two_layer": RUNS["two_layer"]}, "runs", 3])
def test_trajectories_that_are_not_the_two_runs_are_refused(runs):
    for call in (lambda: vc.step_figure(runs, 375), lambda: vc.phase_change_figure(runs), lambda: vc.checked_runs(runs)):
        with pytest.raises(ValueError, match="trajectories must be"):
            call()


@pytest.mark.parametrize("position", [-1, 4, 9, 1.5, True])
def test_rollout_position_out_of_range_is_refused(position):
    """position=9 on 4 tokens drew 4 bars titled 'query 9'; -1 drew nothing."""
    with pytest.raises(ValueError, match="position="):
        vc.rollout_figure(np.ones(4) / 4, np.ones(4) / 4, np.ones(4), [1, 2, 3, 0], position)


@pytest.mark.parametrize("call, name", [
    (lambda: vc.rollout_figure(np.ones(3), np.ones(4), np.ones(4), [1, 2, 3, 0], 1), "rollout_row"),
    (lambda: vc.rollout_figure(None, np.ones(4), np.ones(4), [1, 2, 3, 0], 1), "rollout_row"),
    (lambda: vc.circuit_heatmap(None, [], []), "matrix"),
    (lambda: vc.circuit_heatmap(np.zeros((2, 0)), [], []), "matrix"),
    (lambda: vc.position_patching_figure(np.zeros((2, 2)), [0, 1]), "effects"),
    (lambda: vc.position_patching_figure(np.zeros((2, 2, 3)), [0, 1]), "tokens"),
    (lambda: vc.head_bars(None), "values"),
    (lambda: vc.head_bars(np.ones((2, 2)), labels=["a"]), "labels"),
    (lambda: vc.ablation_figure(None, ["a"]), "losses"),
    (lambda: vc.ablation_figure({"zero": np.ones(3)}, ["a", "b"]), "labels"),
    (lambda: vc.ranking_table({}), "measures"),
    (lambda: vc.ranking_table("spam"), "measures"),
    (lambda: vc.composition_figure(None, 0.2), "scores"),
    (lambda: vc.composition_figure({k: np.ones((2, 2)) for k in "QKV"}, float("nan")), "baseline"),
    (lambda: vc.composition_figure({k: np.ones((2, 2)) for k in "QKV"}, "0.2"), "baseline"),
    (lambda: vc.text_color("notacolor"), "rgba"),
    (lambda: vc.text_color((2.0, 0, 0)), "rgba"),
    (lambda: vc.pattern_figure(np.full((2, 4, 4), 0.25), [0, 1, 2, 3], head=-1, token=0), "head"),
    (lambda: vc.pattern_figure(np.full((2, 4, 4), 0.25), [0, 1, 2, 3], head=True, token=0), "head"),
    (lambda: vc.pattern_figure(np.full((2, 4, 4), 0.25), [0, 1, 2, 3], head=0, token=-1), "token"),
])
def test_bad_input_is_a_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()
    plt.close("all")


def test_the_views_draw():
    batch = train.make_batch(CONFIG, np.random.default_rng(0), 16)
    _, weights = train.forward(PARAMS, batch.tokens, CONFIG)
    ax = vc.scores_table(ci.head_scores(weights, batch.tokens))
    assert len(ax.texts) == 12  # 4 heads x 3 scores, each written
    axes = vc.phase_change_figure(RUNS, step=100)
    assert len(axes) == 2 and axes[0].get_yscale() == "log"
    assert isinstance(vc.step_figure(RUNS, 375), plt.Figure)
    assert isinstance(vc.step_figure(RUNS, np.int64(375)), plt.Figure)
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



# ----------------------------------------------------------------------------- figure properties, bad input
def _figures():
    batch = train.make_batch(CONFIG, np.random.default_rng(0), 16)
    _, weights = train.forward(PARAMS, batch.tokens, CONFIG)
    pair = ci.make_pair(CONFIG, np.random.default_rng(1401), 32)
    yield vc.step_figure(RUNS, 375)
    yield vc.circuits_figure(PARAMS, CONFIG, "pos")
    yield vc.circuits_figure(PARAMS, CONFIG, "ov")
    yield vc.pattern_figure(weights[1][0], batch.tokens[0], head=1, token=22, key=15)
    yield vc.position_patching_figure(ci.position_patching(PARAMS, CONFIG, pair), pair.clean[0]).figure
    yield vc.rollout_figure(np.ones(24), np.ones(24), np.ones(24), batch.tokens[0], 22)[0].figure


def test_no_tick_label_is_smaller_than_7_points():
    for fig in _figures():
        fig.canvas.draw()
        for ax in fig.axes:
            sizes = [t.get_fontsize() for t in ax.get_xticklabels() + ax.get_yticklabels() if t.get_text()]
            assert min(sizes, default=vc.TICK_SIZE) >= vc.TICK_SIZE, (ax.get_title(), min(sizes))
        plt.close(fig)


def _luminance(rgba):
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgba[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(a, b):
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _cell_colours(ax):
    img = ax.get_images()[0]
    return img, np.asarray(img.get_array())


def test_every_written_value_contrasts_with_its_cell():
    """WCAG's 3:1 for text on the darkest and lightest cells of the tables and the patching heatmap."""
    from matplotlib import colors as mcolors
    pair = ci.make_pair(CONFIG, np.random.default_rng(1401), 32)
    axes = [vc.ranking_table({"a": np.array([[0.1, 0.9], [0.5, 0.7]]), "b": np.array([[3.0, 1], [2, 0]])}),
            vc.position_patching_figure(ci.position_patching(PARAMS, CONFIG, pair), pair.clean[0]),
            vc.scores_table({"previous_token": np.array([[0.0, 1.0], [0.5, 0.9]])}),
            *vc.composition_figure(ci.composition_scores(PARAMS, CONFIG), 0.18)]
    checked = 0
    for ax in axes:
        img, values = _cell_colours(ax)
        for text in ax.texts:
            if not text.get_text():
                continue
            x, y = text.get_position()
            cell = img.cmap(img.norm(values[int(round(y)), int(round(x))]))
            assert _contrast(cell, mcolors.to_rgba(text.get_color())) >= 3.0, (text.get_text(), cell, text.get_color())
            checked += 1
        plt.close(ax.figure)
    assert checked > 20


def test_the_pattern_figure_shows_the_query_row_and_the_key_column():
    batch = train.make_batch(CONFIG, np.random.default_rng(0), 4)
    w = train.forward(PARAMS, batch.tokens, CONFIG)[1][1][0]  # (h, T, T)
    fig = vc.pattern_figure(w, batch.tokens[0], head=1, token=22, key=15)
    middle, right = fig.axes[1], fig.axes[2]
    np.testing.assert_allclose([p.get_height() for p in middle.patches], w[1, 22])
    np.testing.assert_allclose([p.get_height() for p in right.patches], w[1, :, 15])
    assert "22" in middle.get_title() and "15" in right.get_title()
    plt.close(fig)


def test_bad_arguments_are_value_errors():
    w = np.full((2, 4, 4), 0.25)
    for call in (lambda: vc.circuits_figure(PARAMS, CONFIG, "xy"),
                 lambda: vc.pattern_figure(w, [0, 1, 2, 3], head=9, token=0),
                 lambda: vc.pattern_figure(w, [0, 1, 2, 3], head=0, token=4),
                 lambda: vc.pattern_figure(w, [0, 1, 2, 3], head=0, token=1, key=-1),
                 lambda: vc.pattern_figure(w, [0, 1, 2], head=0, token=1),
                 lambda: vc.scores_table({}),
                 lambda: vc.scores_table({"a": np.zeros((2, 2)), "b": np.zeros(3)})):
        try:
            call()
        except ValueError:
            continue
        raise AssertionError("no ValueError")
    plt.close("all")


def test_text_color():
    assert vc.text_color((0, 0, 0)) == "white" and vc.text_color((1, 1, 1)) == "black"


# --- issue 32, round 4: a misspelled or missing key is refused, naming the known ones
def test_scores_table_refuses_a_misspelled_score_name():
    with pytest.raises(ValueError, match=r"unknown keys \['previos_token'\]; its keys are 'previous_token'"):
        vc.scores_table({"previos_token": np.full((2, 2), 0.5)})
    plt.close("all")


def test_composition_figure_needs_all_three_kinds():
    with pytest.raises(ValueError, match=r"lacks the keys \['K', 'V'\]"):
        vc.composition_figure({"Q": np.full((2, 2), 0.2)}, 0.1)
    with pytest.raises(ValueError, match=r"unknown keys \['k'\]"):
        vc.composition_figure({"Q": np.ones((2, 2)), "k": np.ones((2, 2)), "V": np.ones((2, 2))}, 0.1)
    assert len(vc.composition_figure({k: np.full((2, 2), 0.2) for k in "VQK"}, 0.1)) == 3
    plt.close("all")


def test_circuit_heatmap_colorbar_is_a_flag():
    with pytest.raises(ValueError, match="colorbar=0 must be True or False"):
        vc.circuit_heatmap(np.ones((2, 2)), "ab", "ab", colorbar=0)
    with pytest.raises(ValueError, match="kind=.*'ov', 'qk', 'pos'"):
        vc.circuits_figure(PARAMS, CONFIG, kind=["ov"])  # unhashable: was a raw TypeError
    plt.close("all")


@pytest.mark.parametrize("call, name", [
    (lambda: vc.head_bars(np.array([[np.nan, 1.0], [1.0, 1.0]])), "values"),
    (lambda: vc.ablation_figure({"zero": np.array([np.nan, 1.0])}, ["a", "b"]), r"losses\['zero'\]"),
    (lambda: vc.ranking_table({"a": np.array([[np.inf, 1.0]])}), r"measures\['a'\]"),
    (lambda: vc.circuit_heatmap(np.array([[np.inf, 1.0]]), "a", "ab"), "matrix"),
    (lambda: vc.rollout_figure([np.nan, 1], [1, 1], [1, 1], [0, 1], 1), "rollout_row"),
    (lambda: vc.pattern_figure(np.full((1, 3, 3), np.nan), [0, 1, 2], 0, 0), "weights"),
])
def test_non_finite_values_are_refused_not_drawn(call, name):
    with pytest.raises(ValueError, match=f"{name} has .* non-finite value"):
        call()
    vc.circuit_heatmap(np.array([[np.nan, 1.0]]), "a", "ab")  # NaN: an entry the causal mask hides, drawn grey
    plt.close("all")
