"""The explorer: the pure logic behind its four modes, and the widget's update path.

Every mode must read the one Trace of the current controls; these tests check the labels,
stories, ledger rows and side-by-side layouts against that Trace (and against the package
functions that produced it), and that the widget recomputes once and redraws only what is
visible. Nothing here is timed (benchmarks/bench_explorer.py measures the redraw).
"""
from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from matplotlib import colors as mcolors  # noqa: E402
from matplotlib import mathtext  # noqa: E402
from PIL import Image  # noqa: E402

import mha_course as mc  # noqa: E402
from mha_course.lessons import complexity  # noqa: E402
from mha_course.views import attention as plots  # noqa: E402
from mha_course.views import diagram  # noqa: E402
from mha_course import explorer as ex  # noqa: E402
from mha_course.block import layer_norm  # noqa: E402
from mha_course.lessons.qkv import sentence_trace  # noqa: E402
from mha_course.views.attention import head_color  # noqa: E402

SIZES = st.sampled_from([4, 6, 8, 12, 16]).flatmap(
    lambda d: st.tuples(st.just(d), st.sampled_from(mc.valid_heads(d)), st.integers(1, 9)))


def _trace(d_model=16, h=4, seq_len=6, seed=0):
    return ex.explorer_trace(ex.sentence_tokens(ex.DEFAULT_SENTENCE, seq_len), d_model, h, seed)


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)


@pytest.fixture
def explorer():
    e = ex.Explorer()
    yield e
    plt.close("all")


# --- tokens and the one Trace -------------------------------------------------------------

def test_sentence_tokens_cut_pad_and_normalise():
    assert ex.sentence_tokens("The cat, sat!", 2) == ["the", "cat"]
    assert ex.sentence_tokens("It's warm", 4) == ["it's", "warm", "tok2", "tok3"]
    assert ex.sentence_tokens("  ?! ", 3) == ex.DEFAULT_SENTENCE.split()[:3]


@pytest.mark.parametrize("bad", [0, -1, 2.5, "3"])
def test_sentence_tokens_rejects_bad_seq_len(bad):
    with pytest.raises(ValueError, match="seq_len"):
        ex.sentence_tokens("the cat", bad)


@settings(max_examples=15, deadline=None, derandomize=True)
@given(SIZES, st.integers(0, 5))
def test_explorer_trace_is_the_course_sentence_trace(sizes, seed):
    d_model, h, seq_len = sizes
    tokens = ex.sentence_tokens(ex.DEFAULT_SENTENCE, seq_len)
    mine, course = ex.explorer_trace(tokens, d_model, h, seed), sentence_trace(tokens, d_model, h, seed)
    assert mine.names == course.names
    for name in mine.names:
        np.testing.assert_array_equal(mine[name], course[name], err_msg=name)


def test_block_output_is_post_norm_residual():
    t = _trace()
    y = ex.block_output(t)
    np.testing.assert_allclose(y.mean(axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(y.var(axis=-1), 1.0, rtol=1e-3)
    np.testing.assert_allclose(y, layer_norm(t["X"] + t["output"]))


# --- Architecture: the diagram's labels ---------------------------------------------------

@settings(max_examples=20, deadline=None, derandomize=True)
@given(SIZES)
def test_every_arrow_label_is_the_shape_of_its_stage(sizes):
    d_model, h, seq_len = sizes
    t = _trace(d_model, h, seq_len)
    labels = diagram.diagram_labels(t)
    assert set(labels["arrows"]) == set(diagram.ARROWS)
    carried = {"X_Q": "X", "X_K": "X", "X_V": "X", "residual": "X", "block_output": "output"}
    for arrow, text in labels["arrows"].items():
        stage = carried.get(arrow, arrow)
        assert text == str(t.shapes[stage]).replace(",)", ")"), arrow
    assert labels["arrows"]["Q_heads"] == f"(1, {h}, {seq_len}, {d_model // h})"
    assert labels["total"] == 4 * d_model ** 2 + 2 * d_model


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.sampled_from([4, 8, 12, 16, 24]))
def test_parameter_counts_do_not_depend_on_h(d_model):
    counts = {h: diagram.diagram_labels(_trace(d_model, h, 3))["params"] for h in mc.valid_heads(d_model)}
    assert len({tuple(sorted(c.items())) for c in counts.values()}) == 1
    params = mc.init_params(d_model, rng=np.random.default_rng(0))
    learned = diagram.box_params(d_model)
    assert learned["W_Q"] + learned["W_K"] + learned["W_V"] + learned["W_O"] == mc.count_params(params)
    assert all(learned[b] == 0 for b in ("X", "split", "attention", "concat"))


def test_boxes_do_not_overlap_and_fit_the_canvas():
    boxes = list(diagram.BOXES.items())
    for name, b in boxes:
        assert 0 <= b.left and b.right <= diagram.WIDTH and 0 <= b.bottom and b.top <= diagram.HEIGHT, name
    for i, (n1, a) in enumerate(boxes):
        for n2, b in boxes[i + 1:]:
            apart = a.right <= b.left or b.right <= a.left or a.top <= b.bottom or b.top <= a.bottom
            assert apart, f"boxes {n1} and {n2} overlap"


# --- State: one stage at a time -----------------------------------------------------------

def test_stage_info_follows_the_trace_in_order():
    t = _trace(12, 3, 5)
    infos = [ex.stage_info(t, i) for i in range(len(t))]
    assert [i.name for i in infos] == t.names
    assert [i.shape for i in infos] == [t.shapes[n] for n in t.names]
    assert len({i.story for i in infos}) == len(infos), "every stage needs its own sentence"
    for info in infos:
        mathtext.math_to_image(info.formula, io.BytesIO(), format="png")  # valid mathtext
        assert info.story.endswith(".") and len(info.story) < 200


@pytest.mark.parametrize("bad", [-1, "len", 1.0])
def test_stage_info_rejects_bad_index(bad):
    t = _trace()
    with pytest.raises(ValueError, match="stage index"):
        ex.stage_info(t, len(t) if bad == "len" else bad)


# --- Data: heads side by side, coloured by head -------------------------------------------

@settings(max_examples=20, deadline=None, derandomize=True)
@given(SIZES)
def test_heads_without_gaps_are_the_concat_stage(sizes):
    d_model, h, seq_len = sizes
    t = _trace(d_model, h, seq_len)
    side = ex.heads_side_by_side(t["head_outputs"][0], max_heads=h, gap=0)
    np.testing.assert_array_equal(side, t["concat"][0])


def test_heads_side_by_side_puts_each_head_in_its_span():
    a = np.random.default_rng(0).normal(size=(5, 3, 2))
    side = ex.heads_side_by_side(a, max_heads=4)
    spans = ex.head_spans(4, 2)
    assert side.shape == (3, 4 * 2 + 3)
    for i, (start, stop) in enumerate(spans):
        np.testing.assert_array_equal(side[:, start:stop], a[i])
    gaps = [c for c in range(side.shape[1]) if not any(s <= c < e for s, e in spans)]
    assert np.isnan(side[:, gaps]).all() and not np.isnan(np.delete(side, gaps, axis=1)).any()


def test_head_strip_colours_each_head_columns():
    strip = ex.head_strip(3, 4, gap=1)
    for i, (start, stop) in enumerate(ex.head_spans(3, 4, 1)):
        assert np.allclose(strip[0, start:stop], mcolors.to_rgba(head_color(i)))
    assert np.allclose(strip[0, 4], mcolors.to_rgba("white"))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.integers(1, 300), st.integers(1, 20))
def test_tick_positions_are_even_and_bounded(n, max_ticks):
    pos = ex.tick_positions(n, max_ticks)
    assert pos[0] == 0 and len(pos) <= max_ticks and pos[-1] < n
    assert len(set(np.diff(pos))) <= 1
    if n <= max_ticks:
        assert pos == list(range(n))


# --- Performance: ledger and sweep --------------------------------------------------------

def test_ledger_rows_read_the_complexity_ledger():
    rows = dict((q, v) for q, v, _ in ex.ledger_rows(64, 8, 16))
    L = complexity.ledger(64, 8, 16)
    assert rows["projections"] == f"{complexity.format_count(L.projection_flops)}FLOP"
    assert rows["attention"] == f"{complexity.format_count(L.attention_flops)}FLOP"
    assert rows["score matrix"] == complexity.format_bytes(8 * 16 * 16 * 4)
    assert rows["parameters"] == f"{4 * 64 * 64:,}"


def test_only_the_score_matrix_row_depends_on_h():
    by_h = {h: ex.ledger_rows(16, h, 10) for h in mc.valid_heads(16)}
    changed = {row[0] for h in by_h for row, base in zip(by_h[h], by_h[1]) if row != base}
    assert changed == {"score matrix"}


def test_sweep_lengths_include_the_current_seq_len():
    lens = ex.sweep_seq_lens(12, 256)
    assert lens == sorted(set(lens)) and 12 in lens and lens[-1] == 256 and 64 in lens


def test_guide_lines_have_slopes_one_and_two_through_the_last_point():
    T, t = [8, 16, 64, 256], [1e-4, 3e-4, 2e-3, 4e-2]
    g = ex.guide_lines(T, t)
    assert complexity.loglog_slope(T, g["O(T)"]) == pytest.approx(1.0)
    assert complexity.loglog_slope(T, g["O(T²)"]) == pytest.approx(2.0)
    assert g["O(T)"][-1] == g["O(T²)"][-1] == t[-1]
    with pytest.raises(ValueError):
        ex.guide_lines([1, 2], [1.0])


@pytest.mark.parametrize("x, label", [(1e-6, "1 µs"), (2.5e-4, "250 µs"), (0.01, "10 ms"),
                                      (3.0, "3 s"), (5e-9, "5 ns")])
def test_format_seconds(x, label):
    assert ex.format_seconds(x) == label


# --- the widget: one Trace per change, only the visible mode redrawn -----------------------

def test_one_trace_per_change_and_none_per_mode_switch(explorer, monkeypatch):
    calls = []
    real = ex.logic.trace
    monkeypatch.setattr(ex.logic, "trace", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    explorer.controls.set(h=2)
    assert calls == [2]
    for mode in ex.MODES:
        explorer.mode.value = mode
    explorer.step(+1)
    assert calls == [2], "switching modes or stages must not recompute attention"


def test_only_the_visible_mode_is_redrawn(explorer, monkeypatch):
    for mode in ex.MODES:  # build every view once
        explorer.mode.value = mode
    explorer.mode.value = "Data"
    drawn = []
    for mode, view in explorer._views.items():
        monkeypatch.setattr(view, "update", lambda scene, m=mode, f=view.update: drawn.append(m) or f(scene))
    explorer.controls.set(h=8)
    assert drawn == ["Data"]
    explorer.mode.value = "Architecture"  # stale: redrawn once when it becomes visible
    explorer.mode.value = "Data"          # up to date: not redrawn
    assert drawn == ["Data", "Architecture"]


def test_h_slider_changes_the_shapes_and_the_picture(explorer):
    before_png, before_caption = explorer.image.value, explorer.caption.value
    explorer.controls.h.value = 2  # as the browser's slider does
    assert "Q_heads (1, 2, 6, 8)" in explorer.caption.value
    assert explorer.caption.value != before_caption and explorer.image.value != before_png
    assert explorer.trace.h == 2 and explorer.controls.values["h"] == 2


def test_d_model_change_keeps_h_a_divisor(explorer):
    explorer.controls.set(d_model=10)
    assert explorer.trace.d_model == 10 and 10 % explorer.trace.h == 0


def test_sentence_and_seed_feed_the_trace(explorer):
    X0 = explorer.trace["X"].copy()
    explorer.sentence.value = "a dog barked at the moon tonight"
    assert explorer.tokens == ["a", "dog", "barked", "at", "the", "moon"]
    X1 = explorer.trace["X"].copy()
    explorer.seed.value = 7
    assert not np.array_equal(X0, X1) and not np.array_equal(X1, explorer.trace["X"])


def test_state_controls_step_and_play(explorer):
    explorer.mode.value = "State"
    assert explorer.state_box.layout.display is None
    assert explorer.performance_box.layout.display == "none"
    names, last = explorer.trace.names, len(explorer.trace) - 1
    explorer.next.click()
    explorer.next.click()
    assert explorer.stage.value == 2 and f"stage 3/{last + 1}: K (1, 6, 16)" in explorer.caption.value
    explorer.play.value = names.index("weights")  # Play drives the stage slider
    assert explorer.stage.value == names.index("weights") and "weights" in explorer.caption.value
    assert explorer.stage.max == explorer.play.max == last
    assert explorer.step(+len(names)) == last and explorer.step(-2 * len(names)) == 0
    explorer.previous.click()
    assert explorer.stage.value == 0


def test_measure_fills_the_progress_bar_and_the_plot(explorer):
    explorer.mode.value = "Performance"
    before = explorer.image.value
    sweep = explorer.measure(max_len=32, repeats=1)
    assert sweep["seq_lens"] == [6, 8, 16, 32] and len(sweep["seconds"]) == 4
    assert all(s > 0 for s in sweep["seconds"])
    assert explorer.progress.value == explorer.progress.max == 4
    assert explorer.image.value != before


@pytest.mark.parametrize("changes", [[dict(h=2), dict(seq_len=9), dict(h=8)],
                                     [dict(d_model=12), dict(h=3), dict(seq_len=1)]])
def test_reused_figures_draw_what_a_fresh_figure_draws(explorer, changes):
    """The live path (artists updated in place, static layer cached) must show exactly what
    a figure built from scratch for the same Trace shows."""
    for change in changes:
        explorer.controls.set(**change)
        for mode in ex.MODES:
            explorer.mode.value = mode
            live = _pixels(explorer.image.value)
            fig = matplotlib.figure.Figure(figsize=ex.FIGSIZE, dpi=ex.DPI)
            matplotlib.backends.backend_agg.FigureCanvasAgg(fig)
            fresh = _pixels(ex.find_mode(mode).View(fig, blit=False).png(explorer.scene()))
            differ = (np.abs(live - fresh).max(axis=-1) > 40).mean()
            assert differ < 1e-4, f"{mode} after {change}: {differ:.2%} of pixels differ"


def test_the_widget_is_built_from_the_list_of_modes(explorer):
    """Buttons, views, mode-only control rows and caption hints all come from MODE_LIST."""
    assert explorer.mode.options == ex.MODES == tuple(m.name for m in ex.MODE_LIST)
    for mode in ex.MODE_LIST:
        assert isinstance(mode, ex.Mode) and issubclass(mode.View, ex.View) and mode.hint
        explorer.mode.value = mode.name
        assert mode.hint in explorer.caption.value
        assert isinstance(explorer._views[mode.name], mode.View)
        for name, box in explorer.mode_boxes.items():  # a mode's controls show in that mode only
            assert box.layout.display == (None if name == mode.name else "none"), (mode.name, name)
        assert box in explorer.widget.children
    assert set(explorer.mode_boxes) == {"State", "Performance"}


def _texts(fig) -> set:
    return {t.get_text() for ax in fig.axes for t in ax.texts} | {t.get_text() for t in fig.texts}


def test_architecture_draws_its_colour_legend(explorer):
    """The legend sat after a return (pyflakes: undefined name 'fig') and was never drawn."""
    from mha_course.explorer.architecture import LEGEND
    assert LEGEND.startswith("orange: learned parameters")
    assert LEGEND in _texts(explorer.render("Architecture"))
    view = explorer._views["Architecture"]
    assert view.legend.get_text() == LEGEND and view.legend.get_visible()


def test_render_draws_the_live_shapes(explorer):
    explorer.controls.set(h=2)
    fig = explorer.render("architecture")
    texts = _texts(fig)
    assert "Q heads\n(1, 2, 6, 8)" in texts and "h = 2 heads\nd_k = 8" in texts
    assert plt.fignum_exists(fig.number), "render returns a pyplot figure for plt.show()"
    for mode in ex.MODES:
        assert len(explorer.render(mode).axes) >= 1
    with pytest.raises(ValueError, match=", ".join(ex.MODES)):
        explorer.render("timeline")


def _shown(matrix) -> np.ndarray:
    """The numbers a heatmap of the explorer shows (gaps between heads as NaN)."""
    return np.ma.filled(matrix.image.get_array().astype(float), np.nan)


def test_state_mode_shows_each_stage_of_the_one_trace(explorer):
    explorer.mode.value = "State"
    view, t = explorer._views["State"], explorer.trace
    for i, name in enumerate(t.names):
        explorer.stage.value = i
        shown, stage = _shown(view.tensor.matrix), t[name][0]
        if stage.ndim == 3:  # per-head stages: heads side by side
            np.testing.assert_array_equal(shown, ex.heads_side_by_side(stage), err_msg=name)
        else:  # X, Q, K, V, concat, output: the (T, d_model) matrix itself
            np.testing.assert_array_equal(shown, stage, err_msg=name)


def test_data_mode_shows_the_one_trace(explorer):
    explorer.controls.set(h=2, seq_len=5)
    explorer.mode.value = "Data"
    view, t = explorer._views["Data"], explorer.trace
    for name, matrix in view.top.items():
        np.testing.assert_array_equal(_shown(matrix), t[name][0], err_msg=name)
    np.testing.assert_array_equal(_shown(view.weights.matrix), ex.heads_side_by_side(t["weights"][0]))
    np.testing.assert_array_equal(_shown(view.scores.matrix), ex.heads_side_by_side(t["scores"][0]))
    np.testing.assert_array_equal(_shown(view.concat.matrix), t["concat"][0])
    assert view.weights.matrix.image.get_clim() == (0.0, 1.0)
    assert view.weights.matrix.image.get_cmap().name.startswith(plots.WEIGHTS_CMAP)
