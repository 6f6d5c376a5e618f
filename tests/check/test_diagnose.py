"""The diagnosis (check/diagnose.py): a catalogued mistake is named; when another mistake gives
the same numbers both are named, never one asserted."""
import numpy as np

from mha_course import check


def test_halving_for_a_causal_mask_is_named_beside_counting_only_qk(capsys):
    ok = check.flops(lambda T, d_model: (8 * T * d_model ** 2, 2 * T * T * d_model))
    out = capsys.readouterr().out
    assert ok is False and "only Q Kᵀ counted" in out and "causal" in out, out


def test_a_transposed_result_that_equals_a_catalogued_mistake_names_both(capsys):
    import numpy as np

    import mha_course as mc
    ok = check.no_projection_weights(lambda x: np.swapaxes(mc.softmax(x @ np.swapaxes(x, -1, -2)
                                                                      / np.sqrt(x.shape[-1])), -1, -2))
    out = capsys.readouterr().out
    assert ok is False and "softmax over axis -2" in out and "Or: " in out and "swapped" in out, out


def test_cases_described_as_large_are_said_with_an_overflow_hint(capsys):
    import mha_course as mc
    from mha_course import check

    def attention(Q, K, V, mask=None):
        out, w = mc.scaled_dot_product_attention(Q, K, V, mask)
        return (np.nan_to_num(out * np.inf), w) if np.abs(Q).max() > 10 else (out, w)  # wrong on large inputs only
    check.causal_self_attention(lambda x: attention(x, x, x, np.tril(np.ones((x.shape[-2],) * 2, bool)))[0])
    out = capsys.readouterr().out
    assert "wrong on every case described with “large”" in out and "does exp overflow" in out, out


def test_a_size_of_one_in_a_note_is_not_the_start_of_a_larger_number():
    from mha_course.check import diagnose
    assert diagnose._has("x (t=1, d=6)", "= 1") and diagnose._has("h_kv = 1", "= 1")
    assert not diagnose._has("d_k=128, base=500000", "= 1") and not diagnose._has("d = 1.5", "= 1")
