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


# --- hostile arguments: a stage, a size, a shape and a trace are checked
def test_lit_refuses_a_misspelled_stage_and_the_rest_is_checked_too():
    import pytest
    for bad in ("Q_head", "scores ", 3):
        with pytest.raises(ValueError, match="stage=.* is not one of the valid choices: 'X', 'Q'"):
            diagram.lit(bad)  # was (None, ()): nothing lit, silently
    for bad in (0, -1, 16.0, True, None):
        with pytest.raises(ValueError, match="d_model="):
            diagram.box_params(bad)
    for bad in ("(1, 2)", None, (1, -2), (1.5,)):
        with pytest.raises(ValueError, match="shape=.* must be a tuple of whole numbers"):
            diagram.shape_text(bad)
    with pytest.raises(TypeError, match="trace must be a Trace, got NoneType"):
        diagram.diagram_labels(None)  # was AttributeError
