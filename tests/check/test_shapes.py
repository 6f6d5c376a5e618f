"""check.shapes (notebooks 00 and 06): the shape of every stage, self- and cross-attention."""
from mha_course import check


def cross(B, T, S, d_model, h):
    d_k = d_model // h
    return {"Q": (B, T, d_model), "K": (B, S, d_model), "V": (B, S, d_model),
            "Q_heads": (B, h, T, d_k), "K_heads": (B, h, S, d_k), "V_heads": (B, h, S, d_k),
            "scores": (B, h, T, S), "weights": (B, h, T, S), "head_outputs": (B, h, T, d_k),
            "concat": (B, T, d_model), "output": (B, T, d_model)}


def test_cross_attention_shapes_accepts_lists_for_tuples(capsys):
    assert check.cross_attention_shapes(cross) is True
    assert check.cross_attention_shapes(lambda *a: {k: list(v) for k, v in cross(*a).items()}) is True


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
