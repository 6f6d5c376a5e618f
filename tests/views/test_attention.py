"""views/attention.py: the heatmaps of 00-05 show what the Trace holds, on a fixed 0..1 scale."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import mha_course as mc  # noqa: E402
from mha_course.views import attention as plots  # noqa: E402


def test_attention_heatmap_draws_the_weights_on_a_fixed_scale_with_token_labels():
    w = mc.softmax(np.random.default_rng(0).normal(size=(3, 4)))
    ax = plots.attention_heatmap(w, ["a", "b", "c"], ["w", "x", "y", "z"])
    image = ax.images[0]
    assert np.allclose(np.asarray(image.get_array()), w) and image.get_clim() == (0.0, 1.0)
    assert image.get_cmap().name == plots.WEIGHTS_CMAP
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]
    plt.close("all")


def test_head_heatmaps_one_panel_per_head_from_the_trace():
    rng = np.random.default_rng(1)
    t = mc.trace(rng.normal(size=(1, 5, 8)), mc.init_params(8, rng=rng), 4)
    axes = plots.head_heatmaps(t)
    assert len(axes) == 4
    for i, ax in enumerate(axes):
        assert np.allclose(np.asarray(ax.images[0].get_array()), t.weights[0, i])
    plt.close("all")


def test_tokens_for_extends_the_course_sentence_and_refuses_a_wrong_count():
    assert plots.tokens_for(2) == ["the", "cat"]
    assert plots.tokens_for(18)[-1] == "tok17"
    with pytest.raises(ValueError, match="one token per position"):
        plots.tokens_for(3, ["a", "b"])


def test_the_split_bug_figure_shows_positions_mixed_into_heads():
    right = plots.head_split_sources(4, 8, 2)
    wrong = plots.head_split_sources(4, 8, 2, buggy=True)
    assert not np.array_equal(np.asarray(right[0]), np.asarray(wrong[0]))
    plt.close("all")


# --- hostile arguments: every argument is checked before anything is drawn
def _trace(B=1):
    rng = np.random.default_rng(2)
    return mc.trace(rng.normal(size=(B, 4, 8)), mc.init_params(8, rng=rng), 2)


def _no_new_figure(call):
    """call() must raise ValueError/TypeError without leaving a figure behind -> the exception."""
    before = plt.get_fignums()
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    assert plt.get_fignums() == before, "a figure was drawn before the arguments were checked"
    return info.value


def test_views_of_a_trace_refuse_anything_else_with_a_type_error():
    for view in (plots.head_heatmaps, plots.qkv_matrices_figure, plots.stage_flow):
        for bad in (None, "trace", 3, {"weights": np.zeros((1, 2, 4, 4))}):
            err = _no_new_figure(lambda: view(bad))
            assert isinstance(err, TypeError) and "trace must be a Trace" in str(err)  # was AttributeError


@pytest.mark.parametrize("batch", [-1, 2, 0.0, True, "0"])
def test_a_batch_index_out_of_range_is_refused_not_read_from_the_end(batch):
    for view in (plots.head_heatmaps, plots.qkv_matrices_figure):
        err = _no_new_figure(lambda: view(_trace(B=2), batch=batch))  # was IndexError, or -1 read as the last
        assert "batch=" in str(err) and "0..1" in str(err)


def test_token_labels_are_a_list_one_per_position_never_a_string():
    t = _trace()
    assert "tokens must be a list of labels" in str(_no_new_figure(lambda: plots.head_heatmaps(t, tokens="spam")))
    assert "got 3 tokens" in str(_no_new_figure(lambda: plots.qkv_matrices_figure(t, tokens=["a", "b", "c"])))
    assert "tokens must be a list" in str(_no_new_figure(lambda: plots.split_bug_figure(4, 8, 2, tokens="spam")))
    for n in (0, -1, 2.0, True, None):
        with pytest.raises(ValueError, match="n="):
            plots.tokens_for(n)


@pytest.mark.parametrize("call, name", [
    (lambda: plots.split_bug_figure(4, 8, 3), "h=3"),           # was: Number of columns must be ...
    (lambda: plots.split_bug_figure(None, 8, 2), "T=None"),     # was: unsupported operand type(s)
    (lambda: plots.params_figure(8.0, 2), "d_model=8.0"),
    (lambda: plots.sentence_heads_figure(16, 4, -1), "seq_len=-1"),  # was accepted: an empty sentence
    (lambda: plots.sentence_heads_figure(16, 4, 6, seed=True), "seed=True"),
    (lambda: plots.qkv_comparison_figure(16, 6, seed=-1), "seed=-1"),  # was numpy's "expected non-negative"
    (lambda: plots.head_split_sources(4, 8, 2, buggy="no"), "buggy='no'"),  # was read as True
    (lambda: plots.scaling_curves(None), "result must be a ScalingResult"),
    (lambda: plots.token_color(-1), "t=-1"),
])
def test_sizes_seeds_and_flags_are_refused_naming_the_argument(call, name):
    assert name in str(_no_new_figure(call))


def test_curves_need_one_number_per_point_in_every_array():
    three = np.array([4.0, 8.0, 16.0])
    assert "projection must be a numeric array, got NoneType" in str(
        _no_new_figure(lambda: plots.flop_curves(three, None, three)))  # was: x and y must have same first dimension
    assert "attention must be a 1-D array of shape (3,)" in str(
        _no_new_figure(lambda: plots.flop_curves(three, three, three[:2])))
    assert "seconds must be a 1-D array of shape (3,)" in str(
        _no_new_figure(lambda: plots.timing_loglog(three, three[:2])))
    assert "seq_lens must be a 1-D array" in str(_no_new_figure(lambda: plots.timing_loglog([], [])))
    assert "nbytes" in str(_no_new_figure(lambda: plots.score_memory_bars([1, 2], "spam")))
    assert "raw must be" in str(_no_new_figure(lambda: plots.weights_bars(None, three)))
    assert "values must be a numeric array" in str(_no_new_figure(lambda: plots.matrix_heatmap("spam")))
    assert "delta" in str(_no_new_figure(lambda: plots.head_change_heatmap(np.zeros((4, 0)), 2)))  # was numpy's
    grid = np.zeros((2, 4, 4), int)
    assert "features must be a non-empty (h, T, d_k) array" in str(
        _no_new_figure(lambda: plots.split_sources_heatmaps(grid, grid[..., :0])))  # was IndexError
    assert "positions holds 9" in str(_no_new_figure(lambda: plots.split_sources_heatmaps(grid + 9, grid)))


# --- flags are True/False; NaN, +inf and what a log axis cannot show are refused
@pytest.mark.parametrize("call, name", [
    (lambda w: plots.attention_heatmap(w, annotate="yes"), "annotate"),
    (lambda w: plots.attention_heatmap(w, colorbar=1), "colorbar"),
    (lambda w: plots.matrix_heatmap(w, colorbar="no"), "colorbar"),
])
def test_every_flag_is_true_or_false(call, name):
    with pytest.raises(ValueError, match=f"{name}=.* must be True or False"):
        call(np.full((2, 3), 1 / 3))
    plt.close("all")


@pytest.mark.parametrize("call, match", [
    (lambda: plots.matrix_heatmap(np.array([[1.0, np.inf]])), "values"),
    (lambda: plots.matrix_heatmap(np.array([[np.nan, 1.0]])), "values"),
    (lambda: plots.matrix_heatmap(np.ones((2, 2)), vlim=0.0), "vlim=0.0 is outside"),
    (lambda: plots.matrix_heatmap(np.ones((2, 2)), vlim=np.nan), "vlim=nan"),
    (lambda: plots.timing_loglog([4, 8], [0.0, 1e-3]), "seconds holds 0"),
    (lambda: plots.timing_loglog([0, 8], [1e-3, 2e-3]), "seq_lens holds 0"),
    (lambda: plots.flop_curves([4, 8], [1.0, -2.0], [1.0, 2.0]), "projection holds -2"),
    (lambda: plots.score_memory_bars([1, 2], [0.0, 8.0]), "nbytes holds 0"),
    (lambda: plots.head_change_heatmap(np.full((2, 4), np.nan), 2), "delta"),
])
def test_non_finite_values_and_log_axis_values_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()
    plt.close("all")


def test_a_masked_score_is_still_drawn_grey():
    ax = plots.matrix_heatmap(np.array([[-np.inf, 1.0], [0.5, -0.5]]))  # -inf: a masked score, not a fault
    assert np.ma.is_masked(ax.images[0].get_array()[0, 0])
    plt.close("all")


# --- every text of the 00-05 views is readable: no tiny, pale or italic label; cell labels fit their cell
def _figures_of_00_to_05():
    from mha_course.lessons import qkv
    from mha_course.views import cost
    t = qkv.sentence_trace(qkv.SENTENCE, 16, 4)
    yield "stage_flow", plots.stage_flow(t).figure
    for T, d_model, h in [(6, 8, 2), (8, 16, 2), (10, 32, 4), (6, 12, 6), (3, 4, 4)]:
        yield f"split_bug_figure{(T, d_model, h)}", plots.split_bug_figure(T, d_model, h)
    for d_model, h, T in [(16, 4, 6), (16, 8, 8), (8, 1, 8), (4, 1, 13), (12, 6, 3), (16, 4, 16), (16, 16, 13)]:
        yield f"sentence_heads_figure{(d_model, h, T)}", plots.sentence_heads_figure(d_model, h, T)
    yield "qkv_matrices_figure", plots.qkv_matrices_figure(t)
    yield "qkv_comparison_figure", plots.qkv_comparison_figure(16, 6)
    yield "params_figure", cost.params_figure(16, 4)
    yield "ledger_figure", cost.ledger_figure(512, 8, 1024)


def _luminance(color) -> float:
    r, g, b = matplotlib.colors.to_rgb(color)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_no_text_of_the_00_05_views_is_small_pale_or_italic_and_cell_labels_fit_their_cells():
    """00's stage flow had tiny grey italic operation labels; 03's split figure about 6-pt labels in its cells,
    which at d_model=32 also ran over their cells."""
    for name, fig in _figures_of_00_to_05():
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for text in fig.findobj(matplotlib.text.Text):
            if not (text.get_visible() and text.get_text().strip()):
                continue
            assert text.get_fontsize() >= plots.LABEL_FLOOR, (name, text.get_text(), text.get_fontsize())
            assert text.get_style() == "normal", (name, text.get_text())
            on_white = not (text.axes and text.axes.images and text in text.axes.texts)
            head_colour = matplotlib.colors.to_hex(text.get_color()) in {matplotlib.colors.to_hex(c)
                                                                         for c in plots.HEAD_COLORS}
            assert not on_white or head_colour or _luminance(text.get_color()) <= 0.6, (name, text.get_text())
        for ax in fig.axes:
            if ax.images and ax.texts:
                rows, cols = ax.images[0].get_array().shape[:2]
                box = ax.get_window_extent(renderer)
                for text in (t for t in ax.texts if t.get_text().strip()):
                    extent = text.get_window_extent(renderer)
                    assert extent.width <= box.width / cols and extent.height <= box.height / rows, (name, text.get_text())
            assert not _crowded_ticks(ax, renderer), (name, ax.get_title())
        for title in (t for t in fig.texts if t.get_text()):            # the suptitle among them
            extent = title.get_window_extent(renderer)
            assert extent.x0 >= 0 and extent.x1 <= fig.bbox.width, (name, title.get_text(), "is cut off")
        plt.close(fig)


def _crowded_ticks(ax, renderer) -> list:
    """Neighbouring tick labels of ax whose boxes overlap along the axis (45-degree key labels left out:
    their boxes overlap while the letters do not)."""
    crowded = []
    for along, labels in (("x", ax.get_xticklabels()), ("y", ax.get_yticklabels())):
        shown = [t for t in labels if t.get_visible() and t.get_text()]
        if along == "x" and any(t.get_rotation() % 90 for t in shown):
            continue
        boxes = [t.get_window_extent(renderer) for t in shown]
        for t, a, b in zip(shown, boxes, boxes[1:]):
            overlap = min(a.x1, b.x1) - max(a.x0, b.x0) if along == "x" else min(a.y1, b.y1) - max(a.y0, b.y0)
            if overlap > 0:
                crowded.append((along, t.get_text()))
    return crowded


def test_the_stage_flows_operation_labels_are_as_large_as_its_boxes():
    from mha_course.lessons import qkv
    ax = plots.stage_flow(qkv.sentence_trace(qkv.SENTENCE, 16, 4))
    boxes = [t for t in ax.texts if t.get_bbox_patch() is not None]
    ops = [t for t in ax.texts if t.get_bbox_patch() is None and t.get_text()]
    assert len(ops) >= 6 and min(t.get_fontsize() for t in ops) >= max(t.get_fontsize() for t in boxes)
    plt.close("all")


def test_split_labels_too_small_to_read_are_left_out_and_said():
    small = plots.split_bug_figure(10, 32, 4)
    assert not any(ax.texts for ax in small.axes)
    assert all("too small to label" in ax.get_xlabel() for ax in small.axes)
    big = plots.split_bug_figure(6, 8, 2)
    assert all(len(ax.texts) == 6 * 4 and "too small" not in ax.get_xlabel() for ax in big.axes)
    plt.close("all")
