"""The views of 06 and 07 draw what they are given: masks, leaks, patches, sinusoids, RoPE."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import mha_course as mc  # noqa: E402
from mha_course.lessons import qkv  # noqa: E402
from mha_course.positions import patchify, rope_score_grid  # noqa: E402
from mha_course.views import attention as plots  # noqa: E402
from mha_course.views import positions as pp  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _texts(ax):
    return [t.get_text().strip() for t in ax.texts]


def test_mask_heatmap_greys_blocked_cells_and_labels_fully_masked_rows():
    mask = mc.causal_mask(4) & mc.padding_mask([2], 4)[0, 0, :, ::-1]  # left padding: rows 0, 1 see nothing
    ax = pp.mask_heatmap(mask)
    drawn = ax.images[0].get_array()
    assert np.ma.getmaskarray(drawn).tolist() == (~mask).tolist()  # blocked = masked = grey
    assert _texts(ax).count("fully masked") == 2


def test_mask_gallery_draws_one_titled_panel_per_mask_and_checks_axes():
    masks = {"causal": mc.causal_mask(3), "prefix": mc.prefix_lm_mask(3, 2)}
    axes = pp.mask_gallery(masks)
    assert [ax.get_title() for ax in axes] == ["causal", "prefix"]
    with pytest.raises(ValueError, match="got 1 axes for 2 masks"):
        pp.mask_gallery(masks, axes=axes[:1])


def test_leak_heatmap_colours_leaks_red_and_says_how_many():
    report = mc.leak_probe(lambda x: mc.scaled_dot_product_attention(x, x, x), 4, rng=np.random.default_rng(0))
    ax = pp.leak_heatmap(report)
    codes = ax.images[0].get_array()
    assert (codes == 2).sum() == len(report.leaks) == 6
    assert ax.get_title() == "6 leak(s)"
    clean = mc.leak_probe(lambda x: mc.scaled_dot_product_attention(x, x, x, mc.causal_mask(4)), 4,
                          rng=np.random.default_rng(0))
    assert pp.leak_heatmap(clean).get_title() == "no leak"


def test_patch_grid_numbers_every_patch_in_patchify_order():
    image = np.zeros((16, 24, 3))
    ax = pp.patch_grid(image, 8)
    assert _texts(ax) == [str(n) for n in range(len(patchify(image, 8)))]


def test_patch_attention_puts_each_weight_on_its_own_patch_and_rejects_wrong_sizes():
    image = np.zeros((16, 16, 3))
    w = np.array([1.0, 0.0, 0.0, 0.0])  # all weight on patch 0, top left
    ax = pp.patch_attention(image, w, 8)
    overlay = ax.images[1].get_array()  # (2, 2, 4) RGBA
    assert overlay[0, 0, 3] > 0.8 and overlay[1, 1, 3] == 0
    with pytest.raises(ValueError, match=r"expected one weight per patch: \(4,\)"):
        pp.patch_attention(image, np.ones(5) / 5, 8)


def test_sinusoid_figure_and_rope_views_draw_the_package_numbers():
    fig = pp.sinusoid_figure(10, 8)
    np.testing.assert_allclose(fig.axes[0].images[0].get_array(), mc.sinusoidal_positions(10, 8))
    fig = pp.rope_figure(offset=3, base=100.0, d_k=4, max_offset=10)
    line = [ax for ax in fig.axes if ax.lines][-1].lines[0]
    np.testing.assert_allclose(line.get_ydata(), rope_score_grid(np.ones(4), np.ones(4), 11, 100.0)[:, 0])
    axes = pp.rope_layout_pairs(6)
    assert [ax.get_yticklabels()[0].get_text() for ax in axes] == ["interleaved", "halves"]
    assert _texts(axes[1]) == ["p0", "p1", "p2", "p0", "p1", "p2"]


def test_score_offset_heatmap_uses_the_values_colour_map():
    grid = rope_score_grid(np.ones(4), np.arange(4.0), 6)
    ax = pp.score_offset_heatmap(grid)
    assert ax.images[0].get_cmap().name == plots.VALUES_CMAP
    np.testing.assert_allclose(ax.images[0].get_array(), grid)


def test_rope_heads_figure_draws_the_rope_trace_and_explains_an_odd_d_k():
    fig = pp.rope_heads_figure(d_model=8, h=2, seq_len=5)
    tokens = plots.tokens_for(5)
    X, params = qkv.sentence_inputs(tokens, 8, 0)
    weights = mc.trace(X, params, 2, rope_base=10000.0)["weights"][0]  # (h, T, S)
    np.testing.assert_allclose(fig.axes[0].images[0].get_array(), weights[0])
    odd = pp.rope_heads_figure(d_model=6, h=2, seq_len=4)  # d_k = 3
    assert "d_k = 3 is odd" in odd.axes[0].texts[0].get_text() and "[1, 3]" in odd.axes[0].texts[0].get_text()


def test_the_sinusoid_heatmap_ticks_are_whole_numbers():
    from mha_course.views import positions as views_positions
    fig = views_positions.sinusoid_figure(seq_len=32, d_model=16)
    fig.canvas.draw()
    for ax in (fig.axes[0], fig.axes[2]):
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks
    plt.close(fig)


# ----------------------------------------------------------------------------- bad input, one test per kind
@pytest.mark.parametrize("mask", [np.ones((4, 4)), np.ones((4, 4), int), np.ones(4, bool), np.ones((4, 0), bool), None,
                                  "spam"])
def test_a_mask_that_is_no_bool_matrix_is_refused(mask):
    """An int or float mask was cast with astype(bool) and drawn: 0/1 read one way, which may be the wrong one."""
    with pytest.raises(ValueError, match="mask"):
        pp.mask_heatmap(mask)
    with pytest.raises(ValueError, match="masks"):
        pp.mask_gallery({"m": mask})


@pytest.mark.parametrize("tokens, name", [("spam", "q_tokens"), (list("abc"), "q_tokens"), (3, "q_tokens")])
def test_labels_must_be_one_per_row(tokens, name):
    """A string was split into letters ('spam' -> s, p, a, m) and drawn as four labels."""
    with pytest.raises(ValueError, match=name):
        pp.mask_heatmap(mc.causal_mask(4), q_tokens=tokens)
    with pytest.raises(ValueError, match="tokens"):
        pp.mask_gallery({"causal": mc.causal_mask(4)}, tokens)


@pytest.mark.parametrize("report", [None, "spam", 3, (np.ones((2, 2), bool),)])
def test_leak_heatmap_refuses_what_is_no_leak_report(report):
    with pytest.raises(ValueError, match="report"):
        pp.leak_heatmap(report)


@pytest.mark.parametrize("image, patch, name", [(None, 2, "image"), ("spam", 2, "image"), (np.zeros((4, 4)), 2, "image"),
                                                (np.zeros((4, 4, 3)), 0, "patch"), (np.zeros((4, 4, 3)), -1, "patch"),
                                                (np.zeros((4, 4, 3)), 1.5, "patch"), (np.zeros((4, 4, 3)), True, "patch"),
                                                (np.zeros((4, 4, 3)), 3, "patch=3")])
def test_patch_views_refuse_bad_images_and_patch_sizes(image, patch, name):
    """patch=0 was a ZeroDivisionError; patch=3 on a 4x4 image silently dropped the last row and column."""
    with pytest.raises(ValueError, match=name):
        pp.patch_grid(image, patch)
    with pytest.raises(ValueError, match=name):
        pp.patch_attention(image, np.full(4, 0.25), patch)


@pytest.mark.parametrize("call, name", [
    (lambda: pp.sinusoid_figure(-1, 8), "seq_len"), (lambda: pp.sinusoid_figure(4, None), "d_model"),
    (lambda: pp.rope_layout_pairs(7), "d_k"), (lambda: pp.rope_layout_pairs(True), "d_k"),
    (lambda: pp.score_offset_heatmap(None), "grid"), (lambda: pp.score_offset_heatmap([[1.0, 2.0]] * 2), None),
    (lambda: pp.rope_figure(-1, 100.0), "offset"), (lambda: pp.rope_figure(1, 100.0, max_offset=0), "max_offset"),
    (lambda: pp.rope_heads_figure(8, 0, 4), "h"), (lambda: pp.rope_heads_figure(8, 3, 4), "d_model=8 is not divisible by h=3"),
    (lambda: pp.rope_heads_figure(8, 2, -4), "seq_len"), (lambda: pp.rope_heads_figure(8, 2, 4, seed=-1), "seed"),
    (lambda: pp.rope_heads_figure(8, 2.0, 4), "h")])
def test_sizes_and_grids_are_checked_naming_the_argument(call, name):
    """h=0 was a ZeroDivisionError, seq_len=-1 drew an empty figure, a negative offset read the grid from its end."""
    if name is None:  # a nested list is a grid like any other
        call()
    else:
        with pytest.raises(ValueError, match=name):
            call()
    plt.close("all")


# --- issue 32, round 4: an offset past the plotted range is refused, not a wider plot
def test_rope_figure_refuses_an_offset_past_max_offset():
    with pytest.raises(ValueError, match=r"offset=100 is past the plotted range 0\.\.max_offset=64"):
        pp.rope_figure(100, 1e4, max_offset=64)
    fig = pp.rope_figure(64, 1e4, max_offset=64)  # the last offset plotted is fine
    assert fig.axes[-1].lines[0].get_xdata()[-1] == 64
    plt.close("all")


@pytest.mark.parametrize("weights, kwargs, match", [
    ([1.5, 0.0, 0.0, 0.0], {}, r"weights holds values in 0\.\.1\.5, outside 0\.\.1"),  # was clipped to 1
    ([np.nan, 0.0, 0.0, 1.0], {}, "weights"),
    ([1.0, 0.0, 0.0, 0.0], {"colorbar": "no"}, "colorbar='no' must be True or False"),
])
def test_patch_attention_refuses_weights_off_the_scale_and_non_flags(weights, kwargs, match):
    with pytest.raises(ValueError, match=match):
        pp.patch_attention(np.zeros((16, 16, 3)), np.array(weights), 8, **kwargs)
    plt.close("all")


def test_score_offset_heatmap_names_its_own_argument():
    with pytest.raises(ValueError, match=r"grid has 1 non-finite value"):
        pp.score_offset_heatmap(np.array([[np.nan, 1.0], [0.0, 1.0]]))
    plt.close("all")
