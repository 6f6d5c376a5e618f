"""Probes (check/probes.py): inputs derived from an exercise's cases, tried once every case matches. Each
kind refuses a wrong function that only that kind of input shows, and says which input and what it means;
a right function passes every probe of every checker, and a probe never changes the count of cases."""
import numpy as np
import pytest

import mha_course as mc
from mha_course import check
from mha_course.check import engine, probe_inputs, probes


def _verdict(checker, fn, capsys):
    ok = checker(fn)
    return ok, capsys.readouterr().out


def test_a_result_made_with_an_integer_inputs_dtype_is_refused_on_integer_inputs(capsys):
    def softmax(x, axis=-1):
        out = np.empty_like(x)  # an int x truncates the probabilities
        out[...] = mc.softmax(x, axis)
        return out
    ok, out = _verdict(check.softmax, softmax, capsys)
    assert not ok and "but not integer x" in out and "np.empty_like" in out
    assert out.count("\n") <= 6  # a few lines


def test_a_float_result_for_integer_inputs_is_right_where_the_reference_keeps_integers(capsys):
    ok, out = _verdict(check.split_heads, lambda x, h: mc.split_heads(x.astype(float), h), capsys)
    assert ok, out


def test_strides_computed_for_c_order_are_refused_on_a_column_major_copy(capsys):
    def split_heads(x, h):
        B, T, D = x.shape
        k, s = D // h, x.itemsize
        return np.lib.stride_tricks.as_strided(x, (B, h, T, k), (T * D * s, k * s, D * s, s))
    ok, out = _verdict(check.split_heads, split_heads, capsys)
    assert not ok and "column-major" in out and "as_strided" in out


def test_a_branch_for_a_size_of_one_is_refused_where_the_cases_never_hold_it(capsys):
    def scaled_dot_product_attention(Q, K, V, mask=None):
        out, weights = mc.scaled_dot_product_attention(Q, K, V, mask)
        if Q.shape[-1] == 1:  # "one feature: one number per query" squeezes the output's axis
            return out[..., 0], weights
        return out, weights
    ok, out = _verdict(check.scaled_dot_product_attention, scaled_dot_product_attention, capsys)
    assert not ok and "but not d_k = 1" in out and "special case for d_k = 1" in out


def test_one_test_for_all_the_biases_is_refused_when_one_is_given_alone(capsys):
    def project_qkv(x, params):
        p = params
        if p.b_q is None:  # one flag for all three
            return x @ p.W_q, x @ p.W_k, x @ p.W_v
        return x @ p.W_q + p.b_q, x @ p.W_k + p.b_k, x @ p.W_v + p.b_v
    ok, out = _verdict(check.project_qkv, project_qkv, capsys)
    assert not ok and "b_q left out (None)" in out and "on its own" in out


def test_zeros_taken_for_missing_are_refused(capsys):
    def kv_append(K_cache, V_cache, K_new, V_new):
        if not K_new.any():  # "nothing new"
            return K_cache, V_cache
        return np.concatenate([K_cache, K_new], axis=2), np.concatenate([V_cache, V_new], axis=2)
    ok, out = _verdict(check.kv_append, kv_append, capsys)
    assert not ok and "K_new all zeros" in out


def test_no_max_subtraction_is_refused_on_large_scores(capsys):
    def scaled_dot_product_attention(Q, K, V, mask=None):
        scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
        e = np.exp(scores) if mask is None else np.where(mask, np.exp(scores), 0.0)  # the max never subtracted
        total = e.sum(axis=-1, keepdims=True)
        weights = e / np.where(total == 0, 1, total)
        return weights @ V, weights
    ok, out = _verdict(check.scaled_dot_product_attention, scaled_dot_product_attention, capsys)
    assert not ok and "Q × 1000" in out and "subtract each row's own max" in out


def test_a_narrow_integer_dtype_is_refused_on_shifted_integers(capsys):
    def document_mask(doc_ids, causal=False):
        return mc.document_mask(doc_ids.astype(np.int16), causal)
    ok, out = _verdict(check.document_mask, document_mask, capsys)
    assert not ok and f"doc_ids + {probe_inputs.SHIFT}" in out and "int16" in out


def test_a_table_of_fixed_length_is_refused_on_a_long_length(capsys):
    table = mc.sinusoidal_positions(5000, 64)
    ok, out = _verdict(check.sinusoidal_positions, lambda T, d_model: table[:T, :d_model] if d_model == 64 and T <= 5000
                       else mc.sinusoidal_positions(min(T, 5000), d_model), capsys)
    assert not ok and "T = " in out and "max_len" in out


def test_fixed_width_integers_are_refused_on_huge_sizes(capsys):
    ok, out = _verdict(check.score_bytes, lambda B, h, T, bytes_per_number=4: int(np.prod([B, h, T, T, bytes_per_number])),
                       capsys)
    assert not ok and "every size × (10**6 + 1)" in out and "overflow" in out


def test_a_cached_result_returned_itself_is_refused_on_a_second_call(capsys):
    kept = {}

    def causal_mask(T, offset=0, window=None):
        key = (T, offset, window)
        if key not in kept:
            kept[key] = mc.causal_mask(T, offset, window).copy()
        return kept[key]
    ok, out = _verdict(check.causal_mask, causal_mask, capsys)
    assert not ok and "the same call again" in out and "cache" in out


@pytest.mark.parametrize("name", sorted(n for n, c in engine.catalogue().items() if isinstance(c, engine.Exercise)))
def test_every_reference_passes_its_own_probes_and_each_probe_is_a_valid_input(name, capsys):
    exercise = engine.catalogue()[name]
    ok, out = _verdict(exercise.check, exercise.reference, capsys)
    assert ok and "but not" not in out, out
    for p in probes.probes(exercise):
        assert p.what and p.hint and not (isinstance(p.want, np.ndarray) and p.want.size == 0)


def test_a_probe_never_changes_the_count_of_cases(capsys):
    ok, out = _verdict(check.softmax, mc.softmax, capsys)
    assert ok and f"all {len(check.catalogue()['softmax'].expected())} cases match" in out


def test_the_probes_are_kept_and_forgotten_with_the_cases():
    exercise = engine.catalogue()["softmax"]
    assert probes.probes(exercise) is probes.probes(exercise)
    kept = probes.probes(exercise)
    exercise.forget()
    assert probes.probes(exercise) is not kept


def test_a_mask_that_blocks_nothing_still_gives_an_array(capsys):
    def mask_as(mask, convention):
        if convention == "additive" and mask.all():
            return 0.0  # "nothing to add"
        return check.catalogue()["mask_as"].reference(mask, convention)
    ok, out = _verdict(check.mask_as, mask_as, capsys)
    assert not ok and "mask all True" in out and "every pattern" in out


def test_a_string_compared_with_is_is_refused_on_a_string_built_at_run_time(capsys):
    reference, additive = check.catalogue()["mask_as"].reference, "additive"

    def mask_as(mask, convention):
        if convention is additive:  # the mistake: identity where equality belongs
            return reference(mask, "additive")
        if convention in ("additive",):
            raise ValueError("unknown convention")
        return reference(mask, convention)
    ok, out = _verdict(check.mask_as, mask_as, capsys)
    assert not ok and "convention built at run time" in out and "==" in out


def test_a_shortcut_for_one_repeated_value_is_refused(capsys):
    reference = check.catalogue()["document_mask"].reference

    def document_mask(doc_ids, causal=False):
        if (doc_ids == doc_ids.flat[0]).all():  # "one document: every key allowed", the causal part left out
            return np.ones(doc_ids.shape + doc_ids.shape[-1:], dtype=bool)
        return reference(doc_ids, causal)
    ok, out = _verdict(check.document_mask, document_mask, capsys)
    assert not ok and "all one value" in out


def test_a_result_kept_in_flattened_leading_axes_is_refused_on_an_extra_leading_axis(capsys):
    reference = check.catalogue()["layer_norm"].reference

    def layer_norm(x, eps=1e-5, gamma=None, beta=None):
        out = reference(x.reshape(-1, x.shape[-2], x.shape[-1]), eps, gamma, beta)  # to (-1, T, D) ...
        return out.reshape(x.shape) if x.ndim <= 3 else out  # ... and back only for the cases' shapes
    ok, out = _verdict(check.layer_norm, layer_norm, capsys)
    assert not ok and "a leading axis of 2" in out and "reshape back" in out


def test_an_identity_test_between_tied_arguments_is_refused(capsys):
    reference = check.catalogue()["shared_input_backward"].reference

    def shared_input_backward(c, W_k, W_v, grad_K, grad_V):
        if W_k is W_v:  # "tied: one path"
            return grad_K @ W_k.T
        return reference(c, W_k, W_v, grad_K, grad_V)
    ok, out = _verdict(check.shared_input_backward, shared_input_backward, capsys)
    assert not ok and "W_v the same array as W_k" in out and "tied weights" in out


def test_a_branch_for_one_head_per_column_is_refused_where_h_equals_d_model(capsys):
    reference = check.catalogue()["head_queries"].reference

    def head_queries(X, W_q, h, i):
        if W_q.shape[1] == h:  # d_k = 1: the column taken as a vector drops the feature axis
            return X @ W_q[:, i]
        return reference(X, W_q, h, i)
    ok, out = _verdict(check.head_queries, head_queries, capsys)
    assert not ok and "h = X.shape[-1]" in out and "d_k = 1" in out


def test_a_sign_assumed_is_refused_on_negated_values(capsys):
    def largest_magnitude(x):
        """x (n,) -> float: the largest |x_i|."""
        return float(np.abs(x).max())
    toy = engine.Exercise("toy_magnitude", largest_magnitude, lambda: [engine.Case((np.array([3.0, -1.0, 2.0]),))],
                          register=False)
    ok, out = _verdict(toy.check, lambda x: float(x.max()), capsys)
    assert not ok and "x negated" in out and "np.abs" in out


def test_an_integer_buffer_changed_in_place_is_refused_not_excused(capsys):
    def project_qkv(x, params):
        out = []
        for W, b in ((params.W_q, params.b_q), (params.W_k, params.b_k), (params.W_v, params.b_v)):
            y = np.zeros_like(x)  # an integer x: x @ W + b cannot be written back into it
            y[...] = x @ W
            if b is not None:
                y += b
            out.append(y)
        return tuple(out)
    ok, out = _verdict(check.project_qkv, project_qkv, capsys)
    assert not ok and "integer x" in out


def test_a_flag_tested_with_is_true_is_refused_on_numpys_bool(capsys):
    reference = check.catalogue()["param_count"].reference
    ok, out = _verdict(check.param_count, lambda d_model, h, bias=False: reference(d_model, h, bias is True), capsys)
    assert not ok and "bias as np.True_" in out and "if bias:" in out


def test_a_window_of_fixed_length_is_refused_on_a_longer_sequence(capsys):
    def causal_self_attention(x):
        T, d = x.shape[-2:]
        scores = x @ np.swapaxes(x, -1, -2) / np.sqrt(d)
        scores = np.where(mc.causal_mask(T, window=16), scores, -np.inf)  # a local-attention window of 16
        return mc.softmax(scores) @ x
    ok, out = _verdict(check.causal_self_attention, causal_self_attention, capsys)
    assert not ok and "T = 64 (the entries repeated)" in out and "fixed length" in out


@pytest.mark.parametrize("fill", ["finite", "after"])
def test_a_finite_mask_or_a_mask_after_the_softmax_is_refused_on_large_scores(capsys, fill):
    def causal_self_attention(x):
        T, d = x.shape[-2:]
        s = x @ np.swapaxes(x, -1, -2) / np.sqrt(d)
        if fill == "finite":  # -1e4 for -inf: the future leaks once scores pass 1e4
            return mc.softmax(s + np.triu(np.full((T, T), -1e4), 1)) @ x
        w = mc.softmax(s) * np.tri(T, dtype=bool)  # masked after the softmax: 0 / 0 once a future score dominates
        return (w / w.sum(-1, keepdims=True)) @ x
    ok, out = _verdict(check.causal_self_attention, causal_self_attention, capsys)
    assert not ok and "x × 1000" in out and "-inf" in out


def test_a_case_that_fails_only_at_a_size_of_one_says_the_size_one_sentence(capsys):
    def split_heads(x, h):
        return x if h == 1 else mc.split_heads(x, h)  # "one head: nothing to split"
    ok, out = _verdict(check.split_heads, split_heads, capsys)
    assert not ok and "special case for h = 1" in out


def test_a_result_rounded_to_fixed_decimals_is_refused_on_small_values(capsys):
    reference = check.catalogue()["scale_backward"].reference
    ok, out = _verdict(check.scale_backward, lambda grad_scaled, d_k: np.round(reference(grad_scaled, d_k), 8), capsys)
    assert not ok and "× 1e-6" in out and "rounding" in out


def test_a_width_read_from_the_input_is_refused_on_a_matrix_that_is_not_square(capsys):
    def ref(X, W):
        """X (T, d_in), W (d_in, d_out) -> Y (T, d_out)."""
        return X @ W
    square = engine.Exercise("toy_square", ref, lambda: [engine.Case((np.ones((3, 4)), np.eye(4)))], register=False)
    wrong = (lambda X, W: X @ W[:, :X.shape[-1]] if X.shape[-1] > 1 else X @ W)  # the input's width for W's own
    ok, out = _verdict(square.check, wrong, capsys)
    assert not ok and "W not square (4 × 8)" in out and "W.shape[1]" in out
    assert check.head_queries(lambda X, W_q, h, i: X @ W_q[:, i * (len(W_q) // h):(i + 1) * (len(W_q) // h)])
    assert "✔" in capsys.readouterr().out  # W_q (d_model, d_model): square by its shape line, so never probed


def test_a_table_of_fixed_length_is_refused_on_a_longer_mask(capsys):
    table = mc.causal_mask(1100)  # longer than every case (1030), shorter than float16's 2048

    def causal_mask(T, offset=0, window=None):
        return table[:T, :T].copy() if offset == 0 and window is None else mc.causal_mask(T, offset, window)
    ok, out = _verdict(check.causal_mask, causal_mask, capsys)
    assert not ok and "T = 2100" in out
