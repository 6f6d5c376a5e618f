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
