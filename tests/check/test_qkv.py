"""check.qkv (notebook 01): the three projections, their parameter count, attention without them."""
import numpy as np
import pytest

from mha_course import check


def project(x, p):
    Q, K, V = (x @ W for W in (p.W_q, p.W_k, p.W_v))
    Q = Q if p.b_q is None else Q + p.b_q  # each bias on its own: params may give some and not others
    K = K if p.b_k is None else K + p.b_k
    V = V if p.b_v is None else V + p.b_v
    return Q, K, V


def project_einsum(x, p):
    out = [np.einsum("btd,de->bte", x, W) for W in (p.W_q, p.W_k, p.W_v)]
    return tuple(o if b is None else o + b for o, b in zip(out, (p.b_q, p.b_k, p.b_v)))


@pytest.mark.parametrize("fn", [project, project_einsum])
def test_projections_in_other_words_pass(capsys, fn):
    assert check.project_qkv(fn) is True


def test_transposed_weights_and_forgotten_biases_are_named(capsys):
    assert check.project_qkv(lambda x, p: project(x, p._replace(W_q=p.W_q.T, W_k=p.W_k.T, W_v=p.W_v.T))) is False
    assert "transposed" in capsys.readouterr().out
    assert check.project_qkv(lambda x, p: tuple(x @ W for W in (p.W_q, p.W_k, p.W_v))) is False
    assert "biases" in capsys.readouterr().out


def test_the_parameter_count_is_an_int(capsys):
    assert check.qkv_param_count(lambda d_model, h, bias=False: 3 * d_model ** 2 + 3 * d_model * bias) is True
    assert check.qkv_param_count(lambda d_model, h, bias=False: float(3 * d_model * (d_model + int(bias)))) is False
    assert "expected a whole number (int)" in capsys.readouterr().out


def test_a_count_that_grows_with_h_is_wrong(capsys):
    assert check.qkv_param_count(lambda d_model, h, bias=False: 3 * h * d_model * d_model) is False


def test_attention_without_projections(capsys):
    import mha_course as mc
    assert check.no_projection_weights(lambda x: mc.softmax(x @ np.swapaxes(x, -1, -2) / np.sqrt(x.shape[-1]))) is True
    assert check.no_projection_weights(lambda x: mc.softmax(x @ np.swapaxes(x, -1, -2))) is False
    assert "√d" in capsys.readouterr().out


def test_copy_pasted_projections_are_named_part_by_part(capsys):
    def bias_q_only_transposed(x, p):
        Q = x @ p.W_q.T + (0 if p.b_q is None else p.b_q)
        return Q, x @ p.W_k.T, x @ p.W_v.T
    assert check.project_qkv(bias_q_only_transposed) is False
    out = capsys.readouterr().out
    assert "the bias added to Q only" in out and "transposed" in out, out

    def v_from_k(x, p):
        b = (lambda v: 0 if v is None else v)
        return x @ p.W_q + b(p.b_q), x @ p.W_k + b(p.b_k), x @ p.W_k + b(p.b_k)
    assert check.project_qkv(v_from_k) is False
    out = capsys.readouterr().out
    assert "W_k used for V too" in out and "b_k added to V too" in out, out
    assert check.qkv_param_count(lambda d, h, bias=False: 3 * h * d * d + (3 * d if bias else 0)) is False
    assert "(×h)" in capsys.readouterr().out

    def by_sqrt_T(x):
        s = x @ x.swapaxes(-1, -2) / np.sqrt(x.shape[1])  # (B, T, T), scaled by sqrt(T)
        e = np.exp(s - s.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    assert check.no_projection_weights(by_sqrt_T) is False
    assert "√T" in capsys.readouterr().out


# ---- biases misplaced or tested as booleans
def test_a_bias_added_to_the_matrix_is_named(capsys):
    def learner(x, p):
        return tuple(np.einsum("btd,de->bte", x, W if b is None else W + b[None, :])
                     for W, b in ((p.W_q, p.b_q), (p.W_k, p.b_k), (p.W_v, p.b_v)))
    assert check.project_qkv(learner) is False
    assert "Looks like: each bias added to its weight matrix before the product" in capsys.readouterr().out


def test_a_bias_tested_as_a_boolean_is_named(capsys):
    def learner(x, p):
        out = []
        for W, b in ((p.W_q, p.b_q), (p.W_k, p.b_k), (p.W_v, p.b_v)):
            out.append(x @ W + b if b else x @ W)  # ValueError for an array bias
        return tuple(out)
    assert check.project_qkv(learner) is False
    assert "Looks like: the bias tested with `if b:`" in capsys.readouterr().out
