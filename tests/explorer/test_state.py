"""The State mode (explorer/state.py): one stage of the one Trace at a time."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402

from mha_course import explorer as ex  # noqa: E402

from .helpers import shown as shown_of  # noqa: E402


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


def test_state_mode_shows_each_stage_of_the_one_trace(explorer):
    explorer.mode.value = "State"
    view, t = explorer._views["State"], explorer.trace
    for i, name in enumerate(t.names):
        explorer.stage.value = i
        shown, stage = shown_of(view.tensor.matrix), t[name][0]
        if stage.ndim == 3:  # per-head stages: heads side by side
            np.testing.assert_array_equal(shown, ex.heads_side_by_side(stage), err_msg=name)
        else:  # X, Q, K, V, concat, output: the (T, d_model) matrix itself
            np.testing.assert_array_equal(shown, stage, err_msg=name)
