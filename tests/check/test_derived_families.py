"""The families of derived diagnoses added for mistakes nobody catalogued: a flag read the other way round or
ignored, a factor with a 2 in it, a factor that is 1 on some case, the mistakes of a step that is another
exercise (Part), and the square root said with the changed code. Each is tried on a real checker or a toy."""
import math

import numpy as np
import pytest

import mha_course as mc
from mha_course import check
from mha_course.check.engine import Case, Exercise


def _said(capsys, checker, fn):
    ok = checker(fn)
    return ok, capsys.readouterr().out


def _count(d_model, bias=False):
    """A toy count: d_model ** 2 weights, and d_model biases when bias."""
    return d_model * d_model + (d_model if bias else 0)


TOY = Exercise("toy_count", _count, lambda: [Case((n, b)) for n in (3, 5, 8) for b in (False, True)],
               register=False)


def test_a_flag_read_the_other_way_round_is_named(capsys):
    ok, out = _said(capsys, TOY.check, lambda d_model, bias=False: _count(d_model, not bias))
    assert not ok and "the flag bias read the other way round" in out, out


@pytest.mark.parametrize("value", [True, False])
def test_a_flag_ignored_is_named_with_the_value_it_is_stuck_at(capsys, value):
    ok, out = _said(capsys, TOY.check, lambda d_model, bias=False: _count(d_model, value))
    assert not ok and f"the flag bias ignored: the numbers of bias={value}" in out, out


def test_a_factor_with_a_2_in_it_is_named_by_the_sizes(capsys):
    ok, out = _said(capsys, check.scale_backward, lambda g, d_k: 0.5 * d_k ** -1.5 * g)
    assert not ok and "1/(2·d_k)" in out, out


def test_a_factor_that_is_1_where_two_sizes_are_equal_is_named(capsys):
    def per_group(layers, h, h_kv, d_k, bytes_per_number):  # divided by the group size h / h_kv
        return 2 * layers * h_kv * d_k * bytes_per_number * h_kv // h
    ok, out = _said(capsys, check.kv_bytes_per_token, per_group)
    assert not ok and "h_kv/h" in out, out


def test_a_mistake_of_the_attention_step_is_named_inside_mha_in_2_4s_words(capsys):
    def multiplied(x, params, h):  # the causal mask multiplied into the scores, not -inf
        def attend(Q, K, V, mask):
            s = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1]) * mask
            w = mc.softmax(s)
            return w @ V, w
        t = mc.trace(x, params, h)
        o, w = attend(t["Q_heads"], t["K_heads"], t["V_heads"], mc.causal_mask(x.shape[1]))
        out = mc.combine_heads(o) @ params.W_o
        return (out if params.b_o is None else out + params.b_o), w
    ok, out = _said(capsys, check.causal_multi_head_attention, multiplied)
    assert not ok and "in each head's attention (exercise 2.4's step): multiplying the scores by the mask" in out, out


def test_the_square_root_is_said_with_the_changed_code(capsys):
    ok, out = _said(capsys, check.interpolated_inv_freq,
                    lambda d_k, base, factor: base ** (-np.arange(0, d_k, 2) / d_k) / np.sqrt(factor))
    assert not ok and "a square root too many" in out and "sqrt(d_k)" not in out, out


def test_a_term_subtracted_where_it_is_added_is_named_by_the_input_whose_sign_flipped(capsys):
    """x @ W - b for x @ W + b: every bias of the parameters enters with the wrong sign."""
    from mha_course.check import qkv

    def minus_biases(x, params):
        out = []
        for W, b in ((params.W_q, params.b_q), (params.W_k, params.b_k), (params.W_v, params.b_v)):
            out.append(x @ W - (b if b is not None else 0.0))
        return tuple(out)
    assert qkv.PROJECT_QKV.check(minus_biases) is False
    out = capsys.readouterr().out
    assert "the sign of the biases of params (b_q, b_k, b_v" in out, out


def test_two_whole_numbers_swapped_and_a_product_for_a_quotient_are_named(capsys):
    assert check.bug_source_position(lambda i, t, T, h: (t * T + i) // h) is False
    assert "i and t swapped" in capsys.readouterr().out
    assert check.bug_source_position(lambda i, t, T, h: (i * T + t) * h) is False
    assert "* where // belongs" in capsys.readouterr().out


def test_a_mistake_that_shows_only_on_some_cases_says_which(capsys):
    from mha_course.check import attention

    def transposed_when_square(Q, K, V, mask=None):  # K @ Qᵀ whenever T == S
        if Q.shape[-2] == K.shape[-2]:
            Q, K = K, Q
        return mc.scaled_dot_product_attention(Q, K, V, mask)
    assert attention.SDPA.check(transposed_when_square) is False
    out = capsys.readouterr().out
    assert "wrong on every case where T = S and right on the others" in out, out


def test_a_distribution_right_up_to_a_factor_per_line_names_the_normaliser(capsys):
    """exp(x - max) divided by its max (so not at all): each line is right once normalised."""
    def by_max(x, axis=-1):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / np.max(e, axis=axis, keepdims=True)
    assert check.softmax(by_max) is False
    assert "divided by its largest value instead of its sum" in capsys.readouterr().out

    def plus_one(x, axis=-1):  # e / (1 + sum e): a factor of its own on each line
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / (1.0 + e.sum(axis=axis, keepdims=True))
    assert check.softmax(plus_one) is False
    out = capsys.readouterr().out
    assert "right up to a factor of its own" in out, out


def test_a_square_root_rounded_down_is_named(capsys):
    assert check.scale_backward(lambda g, d_k: g / int(np.sqrt(d_k))) is False
    assert "the square root rounded down" in capsys.readouterr().out


def test_weights_over_fewer_keys_renormalised_name_the_extra_mask(capsys):
    """A causal mask where the exercise has none; each query's own key masked too."""
    def causal(x):
        T = x.shape[-2]
        return mc.scaled_dot_product_attention(x, x, x, np.tril(np.ones((T, T), bool)))[1]
    assert check.no_projection_weights(causal) is False
    assert "takes away the keys after each query (a causal mask)" in capsys.readouterr().out

    def not_itself(x):
        T = x.shape[-2]
        return mc.scaled_dot_product_attention(x, x, x, ~np.eye(T, dtype=bool))[1]
    assert check.no_projection_weights(not_itself) is False
    assert "takes away each query's own key (the diagonal)" in capsys.readouterr().out


def test_a_base_read_as_e_is_named(capsys):
    assert check.interpolated_inv_freq(lambda d_k, base, factor: np.exp(-np.arange(0, d_k, 2) / d_k) / factor) is False
    assert "e (np.exp or np.log) used where base belongs" in capsys.readouterr().out


def test_a_sum_whose_terms_are_each_rounded_down_is_named_with_the_code(capsys):
    ok, out = _said(capsys, check.bug_source_position, lambda i, t, T, h: i * T // h + t // h)
    assert not ok and "each term rounded down on its own" in out and "(i * T + t) // h" in out, out


def test_a_number_argument_written_into_the_code_is_named_with_its_value(capsys):
    def window_of_two(T, window):
        t, s = np.arange(T)[:, None], np.arange(T)[None, :]
        return (s <= t) & (t - s < 2)
    ok, out = _said(capsys, check.sliding_window_mask, window_of_two)
    assert not ok and "window ignored: these are the expected numbers for window = 2" in out, out


def test_a_size_ignored_is_not_said_twice_beside_its_factor(capsys):
    ok, out = _said(capsys, check.scale_backward, lambda g, d_k: g)
    assert not ok and "d_k ignored" not in out, out


def test_an_argument_a_case_leaves_to_its_default_is_named_when_written_into_the_code(capsys):
    ok, out = _said(capsys, check.max_seq_len, lambda budget, B, h, bytes_per_number=4: math.isqrt(budget // (B * h * 8)))
    assert not ok and "bytes_per_number ignored: these are the expected numbers for bytes_per_number = 8" in out, out


def test_the_biases_never_added_are_named(capsys):
    def no_biases(x, params, h):
        unbiased = params._replace(b_q=None, b_k=None, b_v=None, b_o=None)
        return mc.multi_head_attention(x, unbiased, h, mc.causal_mask(x.shape[1]))
    ok, out = _said(capsys, check.causal_multi_head_attention, no_biases)
    assert not ok and "the biases of params (b_q, b_k, b_v, b_o) never added" in out, out


@pytest.mark.parametrize("rounded, said", [(lambda a: np.rint(a).astype(int), "rounding to the nearest"),
                                           (lambda a: np.ceil(a).astype(int), "rounding up")])
def test_a_group_index_rounded_another_way_is_named(capsys, rounded, said):
    ok, out = _said(capsys, check.kv_head_index, lambda h, h_kv: rounded(np.arange(h) / (h // h_kv)))
    assert not ok and f"{said} where rounding down (//) belongs" in out, out


def test_parts_stacked_where_they_belong_joined_are_named(capsys):
    def stacked(params):
        return {"in_proj_weight": np.stack([params.W_q.T, params.W_k.T, params.W_v.T]),
                "in_proj_bias": np.concatenate([params.b_q, params.b_k, params.b_v]),
                "out_proj.weight": params.W_o.T, "out_proj.bias": params.b_o}
    ok, out = _said(capsys, check.torch_state_dict, stacked)
    assert not ok and "np.stack where np.concatenate belongs" in out, out
    from mha_course.check.compare import where_and_how
    w = np.arange(18.0).reshape(6, 3)
    said = where_and_how(w.reshape(2, 3, 3), w, ["row", "column"])
    assert "the row axis split in two, (2, 3, 3): parts stacked on a new axis (np.stack)" in said[0], said


def test_a_scale_of_1_over_d_also_names_the_scale_applied_twice(capsys):
    def prescaled(x):  # x / sqrt(d) handed to a function that divides by sqrt(d) again
        return mc.scaled_dot_product_attention(x / np.sqrt(x.shape[-1]), x, x, mc.causal_mask(x.shape[-2]))[0]
    ok, out = _said(capsys, check.causal_self_attention, prescaled)
    assert not ok and "divided by d instead of sqrt(d)" in out and "applied twice" in out, out


def test_a_real_answer_made_a_whole_number_is_named(capsys):
    ok, out = _said(capsys, check.score_std, lambda d_k: (float(int(math.sqrt(d_k))), 1.0))
    assert not ok and "unscaled is the expected value rounded down (int(), // or math.isqrt)" in out, out


def test_an_estimate_by_sampling_is_said_to_be_close_but_not_exact(capsys):
    def sampled(d_k):
        rng = np.random.default_rng(0)
        q, k = rng.normal(size=(400, d_k)), rng.normal(size=(400, d_k))
        dots = (q * k).sum(-1)
        return float(dots.std()), float((dots / np.sqrt(d_k)).std())
    ok, out = _said(capsys, check.score_std, sampled)
    assert not ok and "an estimate (random sampling) or an approximation" in out, out


def test_inputs_scaled_before_use_are_named_with_the_exercises_size(capsys):
    def prescaled(Q, K, V):
        d = Q.shape[-1]
        q, k = mc.elu_feature_map(Q / np.sqrt(d)), mc.elu_feature_map(K / np.sqrt(d))
        return (q @ (np.swapaxes(k, -1, -2) @ V)) / (q @ k.sum(-2)[..., None])
    ok, out = _said(capsys, check.linear_attention, prescaled)
    assert not ok and "Q and K multiplied by 1/√d_k before use" in out, out


def test_a_count_one_too_many_on_some_cases_is_called_an_off_by_one_not_an_estimate(capsys):
    def sometimes_one_more(budget, B, h, bytes_per_number=4):
        T = math.isqrt(budget // (B * h * bytes_per_number))
        return T + 1 if B > 1 else T
    ok, out = _said(capsys, check.max_seq_len, sometimes_one_more)
    assert not ok and "one more than expected: an off-by-one" in out and "estimate" not in out, out


def test_the_first_items_mask_used_for_the_whole_batch_is_named(capsys):
    def first_mask(x, context, W_q, W_k, W_v, keep):
        keep = np.broadcast_to(keep[:1], keep.shape)
        return mc.scaled_dot_product_attention(x @ W_q, context @ W_k, context @ W_v, keep[:, None, :])
    ok, out = _said(capsys, check.cross_attention, first_mask)
    assert not ok and "keep[0] used for every item of the batch" in out, out


def test_an_input_ignored_as_if_all_ones_is_named(capsys):
    ok, out = _said(capsys, check.scale_backward, lambda g, d_k: np.ones_like(g) / np.sqrt(d_k))
    assert not ok and "grad_scaled ignored: these are the expected numbers for grad_scaled of all ones" in out, out


def test_a_default_written_in_is_named_even_where_later_arguments_are_left_out(capsys):
    def eps_written_in(p, g, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-8):
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        return p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + 1e-6), m, v
    ok, out = _said(capsys, check.adam_step, eps_written_in)
    assert not ok and "eps ignored: these are the expected numbers for eps = 1e-06" in out, out


def test_a_count_that_wrapped_round_a_32_bit_integer_is_named(capsys):
    def int32_counts(d_model, h):
        per_head, total = np.int32(4) * np.int32(d_model) * np.int32(d_model // h), np.int32(4) * np.int32(d_model) ** 2
        return int(per_head), int(total)
    ok, out = _said(capsys, check.head_params, int32_counts)
    assert not ok and "wrapped round a 32-bit integer" in out, out
