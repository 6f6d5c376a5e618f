"""The explorer's drawing layer (explorer/canvas.py): what render draws is the live scene."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from mha_course import explorer as ex  # noqa: E402

from .helpers import texts  # noqa: E402


def test_render_draws_the_live_shapes(explorer):
    explorer.controls.set(h=2)
    fig = explorer.render("architecture")
    drawn = texts(fig)
    assert "Q heads\n(1, 2, 6, 8)" in drawn and "h = 2 heads\nd_k = 8" in drawn
    assert plt.fignum_exists(fig.number), "render returns a pyplot figure for plt.show()"
    for mode in ex.MODES:
        assert len(explorer.render(mode).axes) >= 1
    with pytest.raises(ValueError, match=", ".join(ex.MODES)):
        explorer.render("timeline")


# --- issue 32, round 4: the kit's flags are True/False ("no" would read as True)
@pytest.mark.parametrize("make, name", [
    (lambda fig: ex.View(fig, blit="no"), "blit"),
    (lambda fig: ex.canvas.Matrix(fig.add_subplot(), rows=1), "rows"),
    (lambda fig: ex.canvas.Heads(fig, (0.1, 0.1, 0.5, 0.5), with_strip="yes"), "with_strip"),
    (lambda fig: ex.canvas.DiagramDrawing(fig.add_subplot(), compact="no"), "compact"),
    (lambda fig: ex.canvas.Matrix(fig.add_subplot()).show([[1.0]], weights="yes"), "weights"),
])
def test_every_flag_of_the_kit_is_true_or_false(make, name):
    fig = plt.figure()
    with pytest.raises(ValueError, match=f"{name}=.* must be True or False"):
        make(fig)
    plt.close(fig)
