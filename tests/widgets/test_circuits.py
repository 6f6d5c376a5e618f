"""widgets.circuits: the live views redraw the same pure function the notebook draws statically, once per change."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from mha_course.lessons import circuits as ci  # noqa: E402
from mha_course.widgets import circuits as wc  # noqa: E402

RUNS = ci.load_trajectories()


def test_pattern_live_view_redraws_once_per_change():
    weights = [np.full((2, 4, 4), 0.25)] * 2
    view = wc.pattern_live_view(weights, [0, 1, 0, 1])
    calls = []
    view.controls.on_change(lambda **values: calls.append(values))
    view.controls.set(head=(1, 0), token=2)
    assert calls == [{"head": (1, 0), "token": 2}]
    assert isinstance(view.redraw(), plt.Figure)
    with pytest.raises(ValueError):
        view.controls.set(head=(2, 0))
    with pytest.raises(ValueError):
        view.controls.set(token=9)


def test_step_live_view_runs_over_the_checkpoints():
    view = wc.step_live_view(RUNS, value=375)
    assert list(view.controls.slider.options) == [int(s) for s in RUNS["two_layer"].steps]
    view.controls.set(step=380)
    assert view.controls.values == {"step": 380}

