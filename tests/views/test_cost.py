"""views/cost.py: the views of 04 and 05 (W_O's columns per head, the parameter blocks, FLOPs, memory, the ledger)."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from mha_course.lessons import complexity  # noqa: E402
from mha_course.views import attention, cost  # noqa: E402


def test_the_attention_views_module_still_offers_the_cost_views():
    """Notebooks 04 and 05 call them as ``plots.<name>`` with ``plots = views.attention``."""
    for name in cost.__all__:
        assert getattr(attention, name) is getattr(cost, name)


@pytest.mark.parametrize("d_model, h", [(8, 2), (12, 3), (16, 16)])
def test_params_figure_counts_four_d_model_squared_whatever_h(d_model, h):
    fig = cost.params_figure(d_model, h)
    assert f"{complexity.param_count(d_model):,} parameters" in fig._suptitle.get_text()
    assert len(fig.axes) == 4
    plt.close(fig)


def test_param_blocks_colour_each_column_block_by_its_head():
    axes = cost.param_blocks(8, 4)
    grid = axes[0].images[0].get_array()  # (D, D) head index of each column of W_Q
    assert grid.shape == (8, 8) and [int(v) for v in grid[0, ::2]] == [0, 1, 2, 3]
    plt.close("all")


def test_current_h_must_be_one_of_the_bars():
    with pytest.raises(ValueError, match=r"current_h=3 is not one of the valid choices: 1, 2, 4"):
        cost.score_memory_bars([1, 2, 4], [64.0, 128.0, 256.0], current_h=3)
    ax = cost.score_memory_bars([1, 2, 4], [64.0, 128.0, 256.0], current_h=2)
    assert [p.get_facecolor()[:3] for p in ax.patches][1] != ax.patches[0].get_facecolor()[:3]
    plt.close("all")


def test_head_change_heatmap_marks_the_head_boundaries_of_w_o():
    ax = cost.head_change_heatmap(np.abs(np.random.default_rng(0).normal(size=(3, 8))), 4)
    assert [line.get_xdata()[0] for line in ax.lines] == [1.5, 3.5, 5.5]
    plt.close("all")
