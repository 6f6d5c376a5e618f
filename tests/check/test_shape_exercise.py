"""check/shape_exercise.py: a predicted dict of stage shapes, each wrong stage named with its mistake."""
import pytest

from mha_course.check import engine
from mha_course.check.shape_exercise import ShapeExercise, ShapeMistake, Sizes


def _toy():
    def reference(s):
        return {"x": (s.B, s.T, s.d_model), "heads": (s.B, s.h, s.T, s.d_k)}
    swapped = ShapeMistake("h and T swapped", "heads come before tokens", ("heads",),
                           lambda stage, shape, s: (shape[0], shape[2], shape[1], shape[3]))
    return ShapeExercise("toy_shapes_for_test", reference, lambda: [Sizes(2, 3, 3, 8, 4), Sizes(1, 5, 5, 6, 2)],
                         (swapped,), register=False)


def test_a_shape_exercise_accepts_the_true_shapes_and_a_toy_stays_out_of_the_catalogue(capsys):
    toy = _toy()
    assert "toy_shapes_for_test" not in engine.catalogue() and engine.catalogue()["stage_shapes"].register
    assert toy.check(lambda B, T, S, d_model, h: toy.reference(Sizes(B, T, S, d_model, h))) is True
    assert "all 2 shapes right in all 2 cases" in capsys.readouterr().out


def test_a_wrong_stage_is_named_with_its_mistake_and_a_float_size_as_true_division(capsys):
    toy = _toy()
    assert toy.check(lambda B, T, S, d_model, h: {"x": (B, T, d_model), "heads": (B, T, h, d_model // h)}) is False
    out = capsys.readouterr().out
    assert "heads: expected (2, 4, 3, 2), got (2, 3, 4, 2)" in out and "Looks like: h and T swapped" in out
    assert toy.check(lambda B, T, S, d_model, h: {"x": (B, T, d_model), "heads": (B, h, T, d_model / h)}) is False
    assert "true division" in capsys.readouterr().out


@pytest.mark.parametrize("bad, said", [([], "expected a dict"), ({"x": (1,)}, "missing")])
def test_a_result_that_is_no_dict_of_every_stage_says_so(bad, said, capsys):
    assert _toy().check(lambda *sizes: bad) is False
    assert said in capsys.readouterr().out
