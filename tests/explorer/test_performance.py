"""The Performance mode (explorer/performance.py): the measured sweep fills its bar and its plot."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")





def test_measure_fills_the_progress_bar_and_the_plot(explorer):
    explorer.mode.value = "Performance"
    before = explorer.image.value
    sweep = explorer.measure(max_len=32, repeats=1)
    assert sweep["seq_lens"] == [6, 8, 16, 32] and len(sweep["seconds"]) == 4
    assert all(s > 0 for s in sweep["seconds"])
    assert explorer.progress.value == explorer.progress.max == 4
    assert explorer.image.value != before
