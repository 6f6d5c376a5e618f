"""The Architecture mode (explorer/architecture.py): the diagram's labels are the Trace's shapes."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import mha_course as mc  # noqa: E402
from mha_course.views import diagram  # noqa: E402

from .helpers import SIZES, texts  # noqa: E402
from .helpers import explorer_trace as _trace  # noqa: E402


@settings(max_examples=20, deadline=None, derandomize=True)
@given(SIZES)
def test_every_arrow_label_is_the_shape_of_its_stage(sizes):
    d_model, h, seq_len = sizes
    t = _trace(d_model, h, seq_len)
    labels = diagram.diagram_labels(t)
    assert set(labels["arrows"]) == set(diagram.ARROWS)
    carried = {"X_Q": "X", "X_K": "X", "X_V": "X", "residual": "X", "block_output": "output"}
    for arrow, text in labels["arrows"].items():
        stage = carried.get(arrow, arrow)
        assert text == str(t.shapes[stage]).replace(",)", ")"), arrow
    assert labels["arrows"]["Q_heads"] == f"(1, {h}, {seq_len}, {d_model // h})"
    assert labels["total"] == 4 * d_model ** 2 + 2 * d_model


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.sampled_from([4, 8, 12, 16, 24]))
def test_parameter_counts_do_not_depend_on_h(d_model):
    counts = {h: diagram.diagram_labels(_trace(d_model, h, 3))["params"] for h in mc.valid_heads(d_model)}
    assert len({tuple(sorted(c.items())) for c in counts.values()}) == 1
    params = mc.init_params(d_model, rng=np.random.default_rng(0))
    learned = diagram.box_params(d_model)
    assert learned["W_Q"] + learned["W_K"] + learned["W_V"] + learned["W_O"] == mc.count_params(params)
    assert all(learned[b] == 0 for b in ("X", "split", "attention", "concat"))


def test_boxes_do_not_overlap_and_fit_the_canvas():
    boxes = list(diagram.BOXES.items())
    for name, b in boxes:
        assert 0 <= b.left and b.right <= diagram.WIDTH and 0 <= b.bottom and b.top <= diagram.HEIGHT, name
    for i, (n1, a) in enumerate(boxes):
        for n2, b in boxes[i + 1:]:
            apart = a.right <= b.left or b.right <= a.left or a.top <= b.bottom or b.top <= a.bottom
            assert apart, f"boxes {n1} and {n2} overlap"


def test_architecture_draws_its_colour_legend(explorer):
    """The legend sat after a return (pyflakes: undefined name 'fig') and was never drawn."""
    from mha_course.explorer.architecture import LEGEND
    assert LEGEND.startswith("orange: learned parameters")
    assert LEGEND in texts(explorer.render("Architecture"))
    view = explorer._views["Architecture"]
    assert view.legend.get_text() == LEGEND and view.legend.get_visible()
