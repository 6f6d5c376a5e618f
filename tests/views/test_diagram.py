"""views/diagram.py: the block diagram's labels are read from a Trace, never computed on their own."""
import numpy as np

import mha_course as mc
from mha_course.views import diagram


def test_labels_follow_the_trace_for_every_h():
    for h in mc.valid_heads(16):
        t = mc.trace(np.ones((1, 6, 16)), mc.init_params(16, rng=np.random.default_rng(0)), h=h)
        labels = diagram.diagram_labels(t)
        assert str(h) in labels["arrows"]["Q_heads"] and str(16 // h) in labels["arrows"]["Q_heads"]


def test_parameter_counts_add_up_to_four_d_model_squared_plus_the_norm():
    boxes = diagram.box_params(16)
    assert boxes["W_Q"] == 16 * 16
    assert sum(v for k, v in boxes.items() if k.startswith("W_")) == 4 * 16 * 16


def test_lit_and_shape_text():
    assert diagram.lit(None) == (None, ()) and diagram.lit("Q_heads") == ("split", ("Q_heads",))
    assert diagram.shape_text((3,)) != diagram.shape_text((1, 4, 6, 4))
