"""widgets.circuits: the live views redraw the same pure function the notebook draws statically, once per change."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import re  # noqa: E402

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



WS = [np.full((2, 4, 4), 0.25)] * 2


@pytest.mark.parametrize("kwargs, name", [
    ({"token": 4}, "token"), ({"token": -1}, "token"), ({"token": True}, "token"), ({"token": 1.0}, "token"),
    ({"head": (0, 5)}, "head"), ({"head": (2, 0)}, "head"), ({"head": (-1, 0)}, "head"), ({"head": 1}, "head"),
    ({"head": "L1 H0"}, "head"), ({"tokens": [0, 1, 0]}, "tokens"), ({"tokens": [0, 1, 0, 26]}, "tokens"),
    ({"weights_by_layer": []}, "weights_by_layer"), ({"weights_by_layer": [np.full((1, 2, 4, 4), 0.25)]},
                                                      "weights_by_layer"),
    ({"weights_by_layer": None}, "weights_by_layer")])
def test_pattern_live_view_refuses_before_building_widgets(kwargs, name):
    """A token or head off the pickers was a traitlets TraitError (or, for True, position 1): now a ValueError."""
    args = {"weights_by_layer": WS, "tokens": [0, 1, 0, 1], **kwargs}
    with pytest.raises(ValueError, match=name) as info:
        wc.pattern_live_view(**args)
    assert type(info.value) is ValueError  # not TraitError (a subclass of Exception only)


@pytest.mark.parametrize("n_layers, h", [(0, 2), (2, -1), (True, 2), (2, 2.0)])
def test_pattern_controls_refuse_bad_sizes(n_layers, h):
    with pytest.raises(ValueError, match="n_layers" if n_layers != 2 else "h="):
        wc.PatternControls(n_layers, h, [0, 1])


@pytest.mark.parametrize("runs", [{}, None, {"two_layer": None, "one_layer": None}])
def test_step_live_view_refuses_what_is_not_the_two_runs(runs):
    with pytest.raises(ValueError, match="trajectories"):
        wc.step_live_view(runs)


# --- issue 32, round 4: PatternControls.set checks every name and value before either picker moves
@pytest.mark.parametrize("values, match", [
    ({"head": (0, 0), "token": 9}, r"token=9 is out of range"),
    ({"token": 1, "head": (0, 5)}, r"head\[1\] \(the head\)=5 is out of range"),
    ({"head": (0, 1), "tok": 1}, re.escape("set()='tok' is not one of the valid choices: 'head', 'token'")),
])
def test_a_refused_pattern_set_changes_nothing(values, match):
    c = wc.PatternControls(2, 2, list(range(5)), head=(1, 1), token=3)
    calls = []
    c.on_change(lambda **v: calls.append(v))
    with pytest.raises(ValueError, match=match):
        c.set(**values)
    assert c.values == {"head": (1, 1), "token": 3} and calls == []
    c.set(head=(0, 1), token=2)
    assert c.values == {"head": (0, 1), "token": 2} and len(calls) == 1
