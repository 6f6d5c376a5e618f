"""check.qkv (notebook 01): the three projections, their parameter count, attention without them."""
import numpy as np
import pytest

from mha_course import check


def project(x, p):
    Q, K, V = (x @ W for W in (p.W_q, p.W_k, p.W_v))
    if p.b_q is not None:
        Q, K, V = Q + p.b_q, K + p.b_k, V + p.b_v
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


@pytest.mark.parametrize("fn", [lambda d_model, h, bias=False: 3 * d_model ** 2 + 3 * d_model * bias,
                                lambda d_model, h, bias=False: float(3 * d_model * (d_model + int(bias)))])
def test_the_parameter_count_in_natural_types(capsys, fn):
    assert check.qkv_param_count(fn) is True


def test_a_count_that_grows_with_h_is_wrong(capsys):
    assert check.qkv_param_count(lambda d_model, h, bias=False: 3 * h * d_model * d_model) is False


def test_attention_without_projections(capsys):
    import mha_course as mc
    assert check.no_projection_weights(lambda x: mc.softmax(x @ np.swapaxes(x, -1, -2) / np.sqrt(x.shape[-1]))) is True
    assert check.no_projection_weights(lambda x: mc.softmax(x @ np.swapaxes(x, -1, -2))) is False
    assert "√d" in capsys.readouterr().out
