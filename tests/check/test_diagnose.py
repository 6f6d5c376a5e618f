"""The diagnosis (check/diagnose.py): a catalogued mistake is named; when another mistake gives
the same numbers both are named, never one asserted."""
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
