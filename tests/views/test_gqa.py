"""The views of notebook 09 (views/gqa.py): one line per query head to its K/V head, the cache
bars are the table, the decode plot's running medians."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import mha_course as mc  # noqa: E402
from mha_course.views import gqa as vg  # noqa: E402


def test_grouping_figure_connects_query_head_i_to_kv_head_i_over_g():
    ax = vg.grouping_figure(6, 2)
    xs = [line.get_xdata() for line in ax.lines]
    assert len(xs) == 6 and [x[0] for x in xs] == list(range(6))
    assert [x[1] for x in xs] == [1.0, 1.0, 1.0, 4.0, 4.0, 4.0]  # kv head 0 under 0-2, kv head 1 under 3-5
    assert "GQA" in ax.get_title()
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="h=6 is not divisible by h_kv=4; valid h_kv: 1, 2, 3, 6"):
        vg.grouping_figure(6, 4)


def test_cache_cost_figure_bars_are_the_table():
    ax = vg.cache_cost_figure(32, 4096, 32, 8, 4096)
    widths = [p.get_width() for p in ax.patches]
    want = [r.total_bytes[0] / 2**30 for r in mc.kv_cache_table(32, 4096, 32, 8, [4096])]
    assert np.allclose(widths, want) and np.allclose(want, [2.0, 0.5, 0.0625, 0.140625])
    plt.close(ax.figure)


def test_decode_times_figure_draws_running_medians():
    ms = np.linspace(1, 2, 40)
    ax = vg.decode_times_figure(np.arange(40), ms * 1e-3, 2 * ms * 1e-3, window=5)
    medians = ax.lines[1].get_ydata()
    assert len(medians) == 36 and np.allclose(medians, 2 * ms[2:38])
    plt.close(ax.figure)


@pytest.mark.parametrize("h, h_kv, match", [(None, 1, "h=None"), (-1, 1, "h=-1"), (True, 1, "h=True"), ("8", 1, "h='8'"),
                                            (8, 3, "h=8 is not divisible by h_kv=3"), (8, 0, "h_kv=0")])
def test_grouping_figure_refuses_bad_sizes(h, h_kv, match):
    with pytest.raises(ValueError, match=match):
        vg.grouping_figure(h, h_kv)


def test_grouping_figure_takes_numpy_ints():
    ax = vg.grouping_figure(np.int64(8), np.int64(2))
    assert "8 query heads" not in ax.get_title() and "4 query heads per K/V head" in ax.get_title()
    plt.close("all")


@pytest.mark.parametrize("args, name", [((None, [1e-3], [1e-3]), "positions"), (([1, 2], [1e-3], [1e-3, 2e-3]), "with_cache"),
                                        (([1], [1e-3], "x"), "without_cache")])
def test_decode_times_figure_refuses_mismatched_series(args, name):
    with pytest.raises(ValueError, match=name):
        vg.decode_times_figure(*args)
    with pytest.raises(ValueError, match="window"):
        vg.decode_times_figure([1, 2], [1e-3] * 2, [1e-3] * 2, window=0)


# --- issue 32, round 4: timings on the log axis are finite and > 0
@pytest.mark.parametrize("bad", [np.nan, np.inf, 0.0, -1e-3])
def test_decode_times_refuse_a_timing_the_log_axis_cannot_draw(bad):
    with pytest.raises(ValueError, match="with_cache"):
        vg.decode_times_figure([1, 2, 3], [1e-3, bad, 1e-3], [1e-3] * 3)
    with pytest.raises(ValueError, match="positions"):
        vg.decode_times_figure([1, np.nan, 3], [1e-3] * 3, [1e-3] * 3)
    plt.close("all")
