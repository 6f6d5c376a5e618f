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


def test_a_loop_over_heads_that_stops_one_early_is_said_as_a_missing_block(capsys):
    def combine(x):
        return np.concatenate([x[:, i] for i in range(x.shape[1] - 1)], axis=-1)  # the last head left out
    assert not check.combine_heads(combine)
    assert "one d_k fewer than expected" in capsys.readouterr().out


def test_two_numbers_where_one_is_expected_says_which_makes_it(capsys):
    assert not check.qkv_param_count(lambda d_model, h, bias=False: (3 * d_model ** 2, 3 * d_model if bias else 0))
    assert "their sum is it: add them up" in capsys.readouterr().out
    assert not check.qkv_param_count(lambda d_model, h, bias=False: (3 * d_model ** 2 + 3 * d_model * bias, h))
    assert "item 0 of them is it" in capsys.readouterr().out


def test_the_scores_divided_by_another_size_inside_each_head_are_named(capsys):
    import mha_course as mc

    def causal_mha(x, params, h):
        p, T = params, x.shape[-2]
        lin = lambda a, W, b: a @ W + (0 if b is None else b)  # noqa: E731
        Q, K, V = (mc.split_heads(lin(x, W, b), h) for W, b in ((p.W_q, p.b_q), (p.W_k, p.b_k), (p.W_v, p.b_v)))
        s = np.where(np.tril(np.ones((T, T), bool)), Q @ np.swapaxes(K, -1, -2) / np.sqrt(x.shape[-1]), -np.inf)
        w = mc.softmax(s, axis=-1)
        return lin(mc.combine_heads(w @ V), p.W_o, p.b_o), w
    assert not check.causal_multi_head_attention(causal_mha)
    assert "the scores divided by √d_model where √d_k belongs" in capsys.readouterr().out


def test_a_finite_stand_in_for_infinity_is_said_as_such(capsys):
    import mha_course as mc

    def mask_as(mask, convention):
        out = mc.mask_as(mask, convention)
        return np.where(np.isinf(out), np.finfo(np.float64).min, out) if convention == "additive" else out
    assert not check.mask_as(mask_as)
    assert "a large finite number" in capsys.readouterr().out


def test_a_slice_from_an_index_on_where_the_index_belongs_is_said_so(capsys):
    def patched(corrupt, clean, head):
        out = corrupt.copy()
        out[:, head:] = clean[:, head:]  # every head from `head` on, not head `head` alone
        return out
    assert not check.patched_heads(patched)
    out = capsys.readouterr().out
    assert "a slice [head:]" in out and "the last only" not in out
