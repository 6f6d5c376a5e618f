"""views/long_context.py: every view of notebook 13 draws what it is given."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from mha_course.lessons import long_context as lc  # noqa: E402
from mha_course.views import long_context as lv  # noqa: E402


# ----------------------------------------------------------------------------- evaluations
def test_views_draw(long_context_models):
    table = lc.extrapolation_table({k: long_context_models[k] for k in ("rope", "none")}, lengths=(16, 32), n=16)
    axes = lv.extrapolation_figure(table, (16, 32), 16)
    assert len(axes[0].lines) == 3 and axes[1].get_legend() is not None
    assert len(lv.rope_turns_figure(8, 4.0, 16).lines) == 6
    config, params = long_context_models["rope"]
    stream = lc.stream_batch(config, 2, np.random.default_rng(0), 4)
    for fig in (lv.length_view(long_context_models["rope"], 24, n=16), lv.scaling_view(config, params, 2.0, n=16),
                lv.window_view(config, params, stream, 8, 1)):
        assert isinstance(fig, plt.Figure)
    assert len(lv.paged_memory_bars([3, 9], 16, 4).patches) == 6
    ax = lv.sink_weight_bars({"rope": np.full((2, 4), 0.1)}, 0.15)
    assert len(ax.patches) == 8
    plt.close("all")
