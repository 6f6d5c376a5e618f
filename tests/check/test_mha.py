"""The checkers of notebooks 03-04 (check.mha): the package's own functions pass, each catalogued
mistake is named as itself, and a stub is "not finished"."""
import numpy as np
import pytest

import mha_course as mc
from mha_course import check
from mha_course.check import mha as cm

from .verdicts import catalogue, named_as_itself

EXERCISES, PAIRS = catalogue(cm.MULTI_HEAD_ATTENTION, cm.CAUSAL_MULTI_HEAD_ATTENTION, cm.PARAM_COUNT)


def test_the_package_passes(capsys):
    assert cm.multi_head_attention(mc.multi_head_attention), capsys.readouterr().out


@pytest.mark.parametrize("name, i", PAIRS, ids=[f"{n}-{i}" for n, i in PAIRS])
def test_each_catalogued_mistake_is_named_as_itself(capsys, name, i):
    named_as_itself(capsys, EXERCISES[name], i)


def test_a_stub_is_not_finished(capsys):
    def stub(x, params, h, mask=None):
        raise NotImplementedError
    assert cm.multi_head_attention(stub) is False
    assert "not finished yet" in capsys.readouterr().out


@pytest.mark.parametrize("fn, said", [
    (lambda d_model, h, bias=False: 4 * h * d_model ** 2 + (4 * d_model if bias else 0), "(×h)"),
    (lambda d_model, h, bias=False: 4 * d_model ** 2 + (d_model if bias else 0), "one bias shared"),
    (lambda d_model, h, bias=False: 4 * d_model ** 2 + (4 * d_model // h if bias else 0), "biases of width d_k"),
    (lambda d_model, h, bias=False: 3 * d_model ** 2 + (d_model if bias else 0),
     "W_o is not counted (3·d_model²); and one bias shared"),
])
def test_parameter_counts_name_the_matrix_part_and_the_bias_part(capsys, fn, said):
    assert check.param_count(fn) is False
    out = capsys.readouterr().out
    assert "Looks like: " in out and said in out, out


def test_a_mask_only_on_the_returned_weights_is_named(capsys):
    import mha_course as mc

    def learner(x, params, h):
        out, w = mc.multi_head_attention(x, params, h)  # unmasked
        return out, np.where(mc.causal_mask(x.shape[1]), w, 0.0)
    assert check.causal_multi_head_attention(learner) is False
    assert "Looks like: the mask applied only to the returned weights" in capsys.readouterr().out


# ---- the classes of issue 31's fourth edition: learner code written anew, each named by the checker
def _heads(a, h):
    B, N, D = a.shape
    return a.reshape(B, N, h, D // h).transpose(0, 2, 1, 3)  # (B, h, N, d_k)


def _learner_mha(x, p, h, mask=None, context=None, *, q_src="x", k_src="c", v_src="c", o_bias="after",
                 in_matrix=False):
    """A hand-written MHA (its own split and softmax), with one slip at a time."""
    c = x if context is None else context
    src = {"x": x, "c": c}

    def lin(a, W, b):
        if b is None:
            return a @ W
        return a @ (W + b) if in_matrix else a @ W + b
    Q, K, V = (_heads(lin(src[s], W, b), h) for s, W, b in
               ((q_src, p.W_q, p.b_q), (k_src, p.W_k, p.b_k), (v_src, p.W_v, p.b_v)))
    s = Q @ K.swapaxes(-1, -2) / np.sqrt(Q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    w = w / w.sum(-1, keepdims=True)
    o = w @ V  # (B, h, T, d_k)
    concat = o.transpose(0, 2, 1, 3).reshape(o.shape[0], o.shape[2], -1)  # (B, T, D)
    if p.b_o is None:
        return concat @ p.W_o, w
    out = {"after": lambda: concat @ p.W_o + p.b_o, "before": lambda: (concat + p.b_o) @ p.W_o,
           "never": lambda: concat @ p.W_o}[o_bias]()
    return out, w


@pytest.mark.parametrize("how, said", [
    (dict(k_src="x"), "the keys projected from x instead of the context"),
    (dict(v_src="x"), "the values projected from x instead of the context"),
    (dict(q_src="c", k_src="x"), "the queries taken from the context and the keys from x"),
    (dict(q_src="c"), "the queries taken from the context (Q = context @ W_q)"),
    (dict(o_bias="before"), "the output bias b_o added before multiplying by W_o"),
    (dict(in_matrix=True), "each bias added to its weight matrix before the product"),
])
def test_wrong_inputs_and_misplaced_biases_are_named(capsys, how, said):
    def learner(x, params, h, mask=None, context=None):
        return _learner_mha(x, params, h, mask, context, **how)
    with np.errstate(all="ignore"):
        assert check.multi_head_attention(learner) is False
    out = capsys.readouterr().out
    assert f"Looks like: {said}" in out, out


def test_context_or_x_is_named(capsys):
    def learner(x, params, h, mask=None, context=None):
        c = context or x  # ValueError for an array context
        return mc.multi_head_attention(x, params, h, mask, None if c is x else c)
    assert check.multi_head_attention(learner) is False
    assert "Looks like: `context or x` on an array" in capsys.readouterr().out


@pytest.mark.parametrize("length, o_bias, said", [
    (lambda x: len(x), "after", "the causal mask built from x.shape[0] = B"),
    (lambda x: x.shape[2], "after", "the causal mask built from x.shape[-1] = d_model"),
    (lambda x: x.shape[1], "never", "the output bias b_o is forgotten"),
    (lambda x: x.shape[1], "before", "the output bias b_o added before multiplying by W_o"),
])
def test_causal_masks_of_the_wrong_length_and_output_biases_are_named(capsys, length, o_bias, said):
    def learner(x, params, h):
        return _learner_mha(x, params, h, np.tril(np.ones((length(x),) * 2, dtype=bool)), o_bias=o_bias)
    with np.errstate(all="ignore"):
        assert check.causal_multi_head_attention(learner) is False
    out = capsys.readouterr().out
    assert f"Looks like: {said}" in out, out


@pytest.mark.parametrize("fn, said", [
    (lambda d_model, h, bias=False: 4 * d_model * d_model + 4 * d_model, "the bias flag ignored"),
    (lambda d_model, h, bias=False: 4 * d_model ** 2 + 4 * h * bias, "one bias of h numbers per matrix"),
    (lambda d_model, h, bias=False: 4 * d_model ** 2 + 3 * d_model * bias, "one bias vector forgotten"),
    (lambda d_model, h, bias=False: 4 * h * (d_model // h) ** 2 + 4 * d_model * bias,
     "each head's block counted as d_k x d_k"),
])
def test_counts_name_a_forgotten_component_and_both_readings_of_the_same_numbers(capsys, fn, said):
    assert check.param_count(fn) is False
    out = capsys.readouterr().out
    assert "Looks like: " in out and said in out, out


def test_a_forgotten_value_matrix_is_named(capsys):
    assert check.qkv_param_count(lambda d_model, h, bias=False: sum(d_model * d_model + d_model * bias
                                                                    for _ in "qk")) is False
    assert "Looks like: 2 matrices, not 3: one forgotten (V needs its own W_v" in capsys.readouterr().out
