"""The one stage table (mha_course.stages) and the views that read it.

Its keys are mha.STAGES, in order; every box, arrow and input it names exists; and the
optional stages (Q_rope, K_rope) are exactly those a Trace has only with rope_base, which
the diagram, the flow plot and the explorer's State mode all take in their stride.
"""
import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib import mathtext  # noqa: E402

import mha_course as mc  # noqa: E402
from mha_course import explorer as ex  # noqa: E402
from mha_course.views import attention as plots
from mha_course.views import diagram  # noqa: E402
from mha_course.views.stages import STAGE_TABLE, flow_inputs, present_stages  # noqa: E402


def _traces():
    """The same sentence without and with RoPE."""
    rng = np.random.default_rng(0)
    x, params = rng.normal(size=(1, 5, 8)), mc.init_params(8, rng=rng)
    return mc.trace(x, params, 2), mc.trace(x, params, 2, rope_base=100.0)


def test_the_table_has_exactly_the_stages_of_mha_in_order():
    assert list(STAGE_TABLE) == list(mc.STAGES)


def test_every_box_arrow_and_input_the_table_names_exists():
    order = list(STAGE_TABLE)
    for name, view in STAGE_TABLE.items():
        assert view.box in diagram.BOXES, name
        assert set(view.arrows) <= set(diagram.ARROWS), name
        assert all(order.index(s) < order.index(name) for s in view.inputs), f"{name}: inputs come first"
        mathtext.math_to_image(view.formula, io.BytesIO(), format="png")  # valid mathtext
        assert view.story.endswith(".") and len(view.story) < 200, name
    assert len({v.story for v in STAGE_TABLE.values()}) == len(STAGE_TABLE), "one sentence each"


def test_optional_stages_are_the_ones_only_rope_records():
    plain, rope = _traces()
    assert rope.names == list(mc.STAGES)
    assert plain.names == [n for n, v in STAGE_TABLE.items() if not v.optional]
    assert list(present_stages(plain.names)) == plain.names


def test_flow_inputs_skip_absent_optional_stages():
    plain, rope = _traces()
    optional = {n for n, v in STAGE_TABLE.items() if v.optional}
    assert not optional & {s for n in plain.names for s in flow_inputs(n, plain.names)}
    assert {"Q_rope", "K_rope"} <= {s for n in rope.names for s in flow_inputs(n, rope.names)}
    for t in (plain, rope):  # every stage but X is reached from stages of the same Trace
        assert all(set(flow_inputs(n, t.names)) <= set(t.names) for n in t.names)
        assert all(flow_inputs(n, t.names) for n in t.names[1:])


@pytest.mark.parametrize("with_rope", [False, True])
def test_stage_flow_draws_one_box_and_its_arrows_per_stage(with_rope):
    t = _traces()[with_rope]
    ax = plots.stage_flow(t)
    boxes = [text for text in ax.texts if text.get_bbox_patch() is not None]
    assert [b.get_text().split("\n")[0] for b in boxes] == t.names
    arrows = sum(len(flow_inputs(n, t.names)) for n in t.names)
    assert len([a for a in ax.texts if a not in boxes and a.get_text() == ""]) == arrows
    plt.close("all")


def test_the_state_mode_steps_through_every_stage_of_a_rope_trace():
    _, rope = _traces()
    infos = [ex.stage_info(rope, i) for i in range(len(rope))]
    assert [i.name for i in infos] == rope.names
    assert diagram.lit("Q_rope") == (STAGE_TABLE["Q_rope"].box, STAGE_TABLE["Q_rope"].arrows)


# --- hostile arguments: a misspelled stage is refused, listing the stages
def test_a_misspelled_stage_name_is_a_value_error_listing_the_stages():
    from mha_course.views import stages
    for bad in ("score", "SCORES", 3, None):
        with pytest.raises(ValueError, match="name=.* is not one of the valid choices: 'X', 'Q'"):
            stages.flow_inputs(bad, stages.STAGE_TABLE)  # was KeyError
    with pytest.raises(ValueError, match="names='weight' is not one of the valid choices"):
        stages.present_stages(["X", "weight"])  # was dropped silently
    for bad in ("X", None, 3):
        with pytest.raises(ValueError, match="names=.* must be a list of stage names"):
            stages.present_stages(bad)
    with pytest.raises(TypeError, match="trace must be a Trace"):
        stages.check_trace("trace")
