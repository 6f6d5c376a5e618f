"""check.shapes (notebooks 00 and 06): the shape of every stage, self- and cross-attention."""
from mha_course import check


def cross(B, T, S, d_model, h):
    d_k = d_model // h
    return {"Q": (B, T, d_model), "K": (B, S, d_model), "V": (B, S, d_model),
            "Q_heads": (B, h, T, d_k), "K_heads": (B, h, S, d_k), "V_heads": (B, h, S, d_k),
            "scores": (B, h, T, S), "weights": (B, h, T, S), "head_outputs": (B, h, T, d_k),
            "concat": (B, T, d_model), "output": (B, T, d_model)}


def test_cross_attention_shapes_names_lists_for_tuples(capsys):
    assert check.cross_attention_shapes(cross) is True
    assert check.cross_attention_shapes(lambda *a: {k: list(v) for k, v in cross(*a).items()}) is False
    assert "the numbers are right but written as a list; a shape is a tuple" in capsys.readouterr().out


def test_keys_of_length_t_are_named(capsys):
    def wrong(B, T, S, d_model, h):
        s = cross(B, T, T, d_model, h)
        return {**s, "scores": (B, h, T, S), "weights": (B, h, T, S)}
    assert check.cross_attention_shapes(wrong) is False
    assert "context" in capsys.readouterr().out


def test_a_float_d_k_is_refused(capsys):
    def true_division(B, T, S, d_model, h):
        s = cross(B, T, S, d_model, h)
        return {k: tuple(d_model / h if (n == len(v) - 1 and k.endswith("heads")) else x for n, x in enumerate(v))
                for k, v in s.items()}
    assert check.cross_attention_shapes(true_division) is False


def _stage_self(B, T, S, d_model, h, **over):
    return {**cross(B, T, S, d_model, h), **over}


def test_stage_confusions_are_named_by_the_symbol_used(capsys):
    """New learners: d_k written as h, the outputs of length S, concat of width d_k, heads never combined."""
    cases = [
        (lambda B, T, S, D, h: _stage_self(B, T, S, D, h, Q_heads=(B, h, T, h), K_heads=(B, h, S, h),
                                           V_heads=(B, h, S, h), head_outputs=(B, h, T, h)), "h where d_k belongs"),
        (lambda B, T, S, D, h: _stage_self(B, T, S, D, h, head_outputs=(B, h, S, D // h), concat=(B, S, D),
                                           output=(B, S, D)), "the outputs given length S"),
        (lambda B, T, S, D, h: _stage_self(B, T, S, D, h, concat=(B, T, D // h)), "d_k where d_model belongs"),
        (lambda B, T, S, D, h: _stage_self(B, T, S, D, h, concat=(B, h, T, D // h), output=(B, h, T, D // h)),
         "the heads not combined"),
        (lambda B, T, S, D, h: _stage_self(B, T, S, D, h, head_outputs=(B, h, T, S)),
         "head_outputs given the shape of the weights"),
        (lambda B, T, S, D, h: _stage_self(B, T, S, D, h, scores=(B, T, S), weights=(B, T, S)),
         "the head axis forgotten"),
    ]
    for fn, said in cases:
        assert check.cross_attention_shapes(fn) is False
        out = capsys.readouterr().out
        assert f"Looks like: {said}" in out, out


def test_d_k_and_h_swapped_in_the_heads_is_named(capsys):
    def shapes(B, T, S, d_model, h):
        d_k = d_model // h
        return {"Q": (B, T, d_model), "K": (B, S, d_model), "V": (B, S, d_model), "Q_heads": (B, d_k, T, h),
                "K_heads": (B, d_k, S, h), "V_heads": (B, d_k, S, h), "scores": (B, h, T, S),
                "weights": (B, h, T, S), "head_outputs": (B, d_k, T, h), "concat": (B, T, d_model),
                "output": (B, T, d_model)}
    assert check.cross_attention_shapes(shapes) is False
    assert "Looks like: d_k and h swapped in the heads" in capsys.readouterr().out
