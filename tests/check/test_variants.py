"""The reference on arguments a slip changes: each family finds the learner's slip, and nothing else."""
import numpy as np

import mha_course as mc
from mha_course.check.variants import MOST, variants


def _same(v, fn, a) -> bool:
    try:
        return np.array_equal(np.asarray(v.fn(*a)), np.asarray(fn(*a)))
    except (IndexError, ValueError):  # a variant may raise where the reference does not
        return False


def _fits(ref, fn, args, names):
    return [(v.key, v.slots) for v in variants(ref, args, names, {}) if all(_same(v, fn, a) for a in args)]


def test_a_whole_number_off_by_one_modulo_another_is_found():
    ref = lambda x, h, i: x[i]  # noqa: E731
    args = [(np.arange(5.0) * 3, 5, i) for i in range(5)]
    found = _fits(ref, lambda x, h, i: x[(i + 1) % h], args, ["x", "h", "i"])
    assert ("argument-changed", {"arg": "i", "change": "+ 1 (modulo h)"}) in found


def test_one_input_used_for_another_and_a_field_used_for_another():
    ref = lambda x, c: x @ c.T  # noqa: E731
    rng = np.random.default_rng(0)
    args = [(rng.normal(size=(3, 4)), rng.normal(size=(5, 4))) for _ in range(3)]
    assert ("replaced-input", {"arg": "x", "used": "c"}) in _fits(ref, lambda x, c: c @ c.T, args, ["x", "c"])
    p = mc.init_params(8, rng=rng)
    found = _fits(lambda x, p: x @ p.W_v, lambda x, p: x @ p.W_k, [(rng.normal(size=(2, 8)), p)], ["x", "p"])
    assert ("replaced-input", {"arg": "p.W_v", "used": "p.W_k"}) in found


def test_a_right_answer_fits_no_variant_and_the_list_is_bounded():
    ref = lambda W, x: x @ W  # noqa: E731
    rng = np.random.default_rng(1)
    args = [(rng.normal(size=(4, 4)), rng.normal(size=(2, 4))) for _ in range(3)]
    assert _fits(ref, ref, args, ["W", "x"]) == []
    assert ("transposed-input", {"arg": "W"}) in _fits(ref, lambda W, x: x @ W.T, args, ["W", "x"])
    assert len(variants(ref, args, ["W", "x"], {})) <= MOST


def test_a_size_read_from_an_array_where_the_argument_gives_it_is_named(capsys):
    import mha_course.check as check
    assert check.scale_backward(lambda grad_scaled, d_k: grad_scaled / np.sqrt(grad_scaled.shape[-1])) is False
    assert "d_k ignored: grad_scaled.shape[-1] used in its place" in capsys.readouterr().out


def test_an_input_scaled_by_another_arrays_width_is_named(capsys):
    import mha_course as mc
    import mha_course.check as check
    def update(state, scores_block, V_block):
        return mc.online_softmax_update(state, scores_block / np.sqrt(V_block.shape[-1]), V_block)
    assert check.online_softmax_update(update) is False
    assert "scores_block multiplied by 1/√d_v before use" in capsys.readouterr().out


def test_batch_items_merged_into_one_sequence_are_named(capsys):
    import mha_course.check as check

    def merged(Q, K, V):
        q, k, v = (x.reshape(-1, x.shape[-1]) for x in (Q, K, V))
        return mc.linear_attention(q, k, v).reshape(*Q.shape[:-1], -1)
    assert check.linear_attention(merged) is False
    assert "the batch items merged into one sequence" in capsys.readouterr().out


def test_a_matrix_reshaped_where_it_belongs_transposed_is_named(capsys):
    import mha_course.check as check
    assert check.matmul_backward(lambda a, b, g: (g @ b.reshape(b.shape[1], b.shape[0]), a.T @ g)) is False
    assert "b reshaped where it belongs transposed" in capsys.readouterr().out


def test_a_loop_that_stops_one_early_is_said_as_its_last_entry_left_out(capsys):
    from mha_course import check

    def backward(A, B, grad_Y):
        grad_B = np.zeros_like(B)
        for i in range(A.shape[0] - 1):  # one row short
            grad_B += np.outer(A[i], grad_Y[i])
        return grad_Y @ B.T, grad_B
    assert not check.matmul_backward(backward)
    assert "last entry of a along axis -2 left out" in capsys.readouterr().out


def test_an_output_projection_left_out_with_its_bias_still_added_is_named(capsys):
    import mha_course as mc
    from mha_course import check

    def mha(x, params, h, mask=None, context=None):
        p, c = params, (x if context is None else context)
        lin = lambda a, W, b: a @ W + (0 if b is None else b)  # noqa: E731
        Q, K, V = (mc.split_heads(lin(t, W, b), h) for t, W, b in ((x, p.W_q, p.b_q), (c, p.W_k, p.b_k), (c, p.W_v, p.b_v)))
        out, w = mc.scaled_dot_product_attention(Q, K, V, mask)
        return lin(mc.combine_heads(out), np.eye(x.shape[-1]), p.b_o), w
    assert not check.multi_head_attention(mha)
    assert "left out, its bias params.b_o still added" in capsys.readouterr().out
