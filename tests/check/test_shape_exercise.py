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


def test_the_right_numbers_in_lists_are_one_line_for_every_stage(capsys):
    toy = _toy()
    assert toy.check(lambda B, T, S, d_model, h: {"x": [B, T, d_model], "heads": [B, h, T, d_model // h]}) is False
    out = capsys.readouterr().out
    assert "2 of 2 stages wrong" in out and "x, heads: the numbers are right but written as a list" in out, out
    assert len(out.strip().splitlines()) <= 4, out


def test_a_mistake_is_not_named_where_most_of_its_stages_are_right(capsys):
    from mha_course import check
    def reference(B, T, S, d_model, h):
        return engine.catalogue()["cross_attention_shapes"].reference(Sizes(B, T, S, d_model, h))

    def weights_t_by_t(B, T, S, d_model, h):  # only the weights as in self-attention: not "K and V of length T"
        return {**reference(B, T, S, d_model, h), "weights": (B, h, T, T)}
    assert check.cross_attention_shapes(weights_t_by_t) is False
    out = capsys.readouterr().out
    assert "weights: expected" in out and "= (B, h, T, S)" in out and "keys and values given length T" not in out, out

    def kv_of_length_t(B, T, S, d_model, h):  # the whole mistake: still named
        d_k = d_model // h
        return {**reference(B, T, S, d_model, h), "K": (B, T, d_model), "V": (B, T, d_model),
                "K_heads": (B, h, T, d_k), "V_heads": (B, h, T, d_k), "scores": (B, h, T, T), "weights": (B, h, T, T)}
    assert check.cross_attention_shapes(kv_of_length_t) is False
    assert "keys and values given length T" in capsys.readouterr().out


def test_a_stage_one_symbol_off_says_which_symbol_where(capsys):
    from mha_course import check

    def values_of_length_t(B, T, S, d_model, h):
        d = engine.catalogue()["cross_attention_shapes"].reference(Sizes(B, T, S, d_model, h))
        return {**d, "V": (B, T, d_model), "V_heads": (B, h, T, d_model // h)}
    assert check.cross_attention_shapes(values_of_length_t) is False
    out = capsys.readouterr().out
    assert "got (2, 3, 12) = (B, T, d_model). T where S belongs." in out, out



def test_a_stage_with_the_right_axes_in_another_order_says_which_two_are_swapped():
    from mha_course.check import shape_exercise
    said = shape_exercise._reordered("(B, h, d_k, S)", "(B, h, S, d_k)")
    assert said == " The right axes in another order: S and d_k swapped.", said
    assert shape_exercise._reordered("(B, h, S, d_k)", "(B, h, S, d_k)") == ""
    assert shape_exercise._reordered("(h, S, B, d_k)", "(B, h, S, d_k)") == " The right axes in another order."
