"""The views of 10 draw the package's numbers: the step-through, the byte counts, the curves."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import mha_course as mc  # noqa: E402
from mha_course.views import efficient as pe  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _qkv(T=4, S=10, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(T, d)), rng.normal(size=(S, d)), rng.normal(size=(S, 2))


def test_step_figure_draws_the_package_states():
    Q, K, V = _qkv()
    fig = pe.tiling_step_figure(Q, K, V, block_size=4, step=2)
    scores, bars, errors, m_ax, l_ax, io = fig.axes
    steps = mc.tiled_attention_steps(Q, K, V, 4)
    assert np.allclose(m_ax.lines[0].get_ydata(), [s.m[0, 0] for s in steps])
    assert np.allclose(l_ax.lines[3].get_ydata(), [s.l[3, 0] for s in steps])
    partial = mc.online_softmax_result(steps[1])[0]
    assert np.allclose([p.get_height() for p in bars.patches], partial)
    assert errors.lines[0].get_ydata()[-1] < 1e-12 < errors.lines[0].get_ydata()[0]  # converges at the last step
    naive, tiled = pe.step_bytes(4, 10, 3, 2, 4, 2)
    assert [p.get_width() for p in io.patches] == [naive, tiled]
    assert "key block 2 of 3" in scores.get_title()


def test_step_figure_rejects_a_step_past_the_last_block():
    with pytest.raises(ValueError, match=r"step=4 must be a whole number in 1..3"):
        pe.tiling_step_figure(*_qkv(), block_size=4, step=4)


def test_step_bytes_counts_the_keys_seen_so_far():
    assert pe.step_bytes(4, 10, 3, 2, 4, 1) == (mc.naive_attention_bytes(4, 4, 3, 2, 8),
                                                mc.tiled_attention_bytes(4, 4, 3, 2, 4, 8))
    assert pe.step_bytes(4, 10, 3, 2, 4, 3) == pe.step_bytes(4, 10, 3, 2, 10, 1)  # the last block is partial


def test_score_tiles_fades_the_tiles_not_reached():
    s = np.arange(12.0).reshape(2, 6)
    ax = pe.score_tiles(s, 2, 2)
    shown = ax.images[1].get_array()
    assert np.ma.getmaskarray(shown)[:, 4:].all() and not np.ma.getmaskarray(shown)[:, :4].any()
    assert [p.get_linewidth() for p in ax.patches] == [0.6, 2.5, 0.6]


def test_io_curves_and_measured_curves():
    ax = pe.io_bytes_curves([256, 1024, 4096], 64, 512, mark=1024)
    assert list(ax.lines[0].get_ydata()) == [mc.naive_attention_bytes(t, t, 64, 64) for t in (256, 1024, 4096)]
    assert list(ax.lines[1].get_ydata()) == [mc.tiled_attention_bytes(t, t, 64, 64, 512) for t in (256, 1024, 4096)]
    assert "T = 1024" in ax.get_title()
    ax = pe.measured_curves([1, 2, 4], {"a": [1.0, 2.0, 4.0], "b": [3.0, 3.0, 3.0]}, "T")
    assert [line.get_label() for line in ax.lines] == ["a", "b"] and ax.get_yscale() == "log"


# ----------------------------------------------------------------------------- bad input, one test per kind
@pytest.mark.parametrize("step", [0, -1, 3, 102, 1.5, True, None])
def test_a_step_off_the_key_blocks_is_refused_not_clamped(step):
    """step_bytes(step=9) counted the bytes of step 2 (every key), and score_tiles drew step -1 as done."""
    with pytest.raises(ValueError, match="step="):
        pe.step_bytes(4, 4, 2, 2, 2, step)
    with pytest.raises(ValueError, match="step="):
        pe.score_tiles(np.ones((4, 4)), 2, step)


@pytest.mark.parametrize("query", [-1, 4, 1.0, True])
def test_tiling_step_figure_refuses_a_query_out_of_range(query):
    """query=4 was an IndexError, query=-1 drew the last query's bars titled 'query -1'."""
    rng = np.random.default_rng(0)
    Q, K, V = (rng.normal(size=(4, 2)) for _ in range(3))
    with pytest.raises(ValueError, match="query="):
        pe.tiling_step_figure(Q, K, V, 2, 1, query=query)
    plt.close("all")


@pytest.mark.parametrize("call, name", [
    (lambda: pe.step_bytes(4, 4, 2, 2, True, 1), "block_size"), (lambda: pe.step_bytes(4, 4, 2, 2, 2, 1, itemsize=-8), "itemsize"),
    (lambda: pe.step_bytes(4, 4.5, 2, 2, 2, 1), "S"), (lambda: pe.score_tiles(None, 2, 1), "scores"),
    (lambda: pe.score_tiles(np.ones((4, 0)), 2, 1), "scores"), (lambda: pe.score_tiles(np.ones((4, 4)), -2, 1), "block_size"),
    (lambda: pe.io_bytes_curves(None, 4, 2), "seq_lens"), (lambda: pe.io_bytes_curves([4, 8.5], 4, 2), "seq_lens"),
    (lambda: pe.io_bytes_curves([4, 8], 4, 2, itemsize="4"), "itemsize"), (lambda: pe.io_bytes_curves([4], 4, 2, mark=0), "mark"),
    (lambda: pe.measured_curves(None, {"a": [1.0]}, "T"), "xs"), (lambda: pe.measured_curves([1.0], None, "T"), "series"),
    (lambda: pe.measured_curves([1.0, 2.0], {"a": [1.0]}, "T"), "series")])
def test_bad_input_is_a_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()
    plt.close("all")


# --- issue 32, round 4: a log axis shows only values > 0; log_x is a flag
@pytest.mark.parametrize("xs, series, log_x, match", [
    ([0, 1], {"a": [1.0, 2.0]}, True, "xs holds 0, drawn on a log axis"),
    ([1, 2], {"a": [1.0, -1.0]}, True, r"series\['a'\] holds -1"),
    ([1, 2], {"a": [1.0, np.nan]}, False, r"series\['a'\]"),
    ([np.nan, 1], {"a": [1.0, 2.0]}, False, "xs"),
    ([1, 2], {"a": [1.0, 2.0]}, "yes", "log_x='yes' must be True or False"),
])
def test_measured_curves_refuse_what_their_axes_cannot_draw(xs, series, log_x, match):
    with pytest.raises(ValueError, match=match):
        pe.measured_curves(xs, series, "T", log_x=log_x)
    ax = pe.measured_curves([0, 1], {"a": [1.0, 2.0]}, "T", log_x=False)  # x = 0 is fine on a linear axis
    assert ax.get_xscale() == "linear"
    plt.close("all")
