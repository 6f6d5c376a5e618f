"""The checkers of notebook 10: right code passes; each typical mistake, written as a learner
would write it (not the checker's own variants), is caught and named."""
import numpy as np
import pytest

import mha_course as mc
from mha_course import check


def run(capsys, checker, fn):
    ok = getattr(check, checker)(fn)
    return ok, capsys.readouterr().out


# ----------------------------------------------------------------------------- online softmax update
def learner_update(rescale_l=True, rescale_acc=True, guard=True):
    def my_update(state, scores_block, V_block):
        m, l, acc = state
        m_new = np.maximum(m, scores_block.max(axis=-1, keepdims=True))
        safe = np.where(m_new == -np.inf, 0.0, m_new) if guard else m_new
        p = np.exp(scores_block - safe)
        alpha = np.exp(m - safe)
        l_new = (alpha * l if rescale_l else l) + p.sum(axis=-1, keepdims=True)
        acc_new = (alpha * acc if rescale_acc else acc) + p @ V_block
        return m_new, l_new, acc_new
    return my_update


def test_update_right_answer_passes(capsys):
    ok, out = run(capsys, "online_softmax_update", learner_update())
    assert ok and "all 6 cases match" in out


@pytest.mark.parametrize("kwargs,named", [
    (dict(rescale_l=False, rescale_acc=False), "nothing is rescaled"),
    (dict(rescale_acc=False), "the sum l is rescaled but the accumulator acc is not"),
    (dict(rescale_l=False), "the accumulator acc is rescaled but the sum l is not"),
    (dict(guard=False), "exp(-inf - (-inf)) is NaN"),
])
def test_update_mistakes_are_named(capsys, kwargs, named):
    ok, out = run(capsys, "online_softmax_update", learner_update(**kwargs))
    assert not ok and named in out


def test_update_stub_is_not_finished(capsys):
    def my_update(state, scores_block, V_block):
        raise NotImplementedError
    ok, out = run(capsys, "online_softmax_update", my_update)
    assert not ok and "not finished" in out


# ----------------------------------------------------------------------------- sliding-window mask
def test_window_right_answer_passes(capsys):
    def my_mask(T, window):
        t, s = np.indices((T, T))
        return (s <= t) & (s > t - window)
    assert run(capsys, "sliding_window_mask", my_mask)[0]


@pytest.mark.parametrize("keep,named", [
    (lambda t, s, w: (s <= t) & (s >= t - w), "window + 1 keys"),
    (lambda t, s, w: (s <= t) & (s > t - w + 1), "window - 1 keys"),
    (lambda t, s, w: np.abs(t - s) < w, "into the future too"),
    (lambda t, s, w: (s > t) | (s <= t - w), "polarity is flipped"),
])
def test_window_mistakes_are_named(capsys, keep, named):
    def my_mask(T, window):
        t, s = np.indices((T, T))
        return keep(t, s, window)
    ok, out = run(capsys, "sliding_window_mask", my_mask)
    assert not ok and named in out


# ----------------------------------------------------------------------------- linear attention
def phi(x):
    return np.where(x > 0, x + 1, np.exp(np.minimum(x, 0)))


def test_linear_right_answer_passes(capsys):
    def my_linear(Q, K, V):
        kv = np.swapaxes(phi(K), -1, -2) @ V
        return (phi(Q) @ kv) / (phi(Q) @ phi(K).sum(axis=-2)[..., None])
    ok, out = run(capsys, "linear_attention", my_linear)
    assert ok and "all 4 cases match" in out


def test_linear_quadratic_form_is_right_but_reported(capsys):
    def my_linear(Q, K, V):
        A = phi(Q) @ np.swapaxes(phi(K), -1, -2)  # (T, S): the quadratic way
        return (A @ V) / A.sum(axis=-1, keepdims=True)
    ok, out = run(capsys, "linear_attention", my_linear)
    assert not ok and "numbers are right" in out and "phi(Q) @ (phi(K)^T @ V)" in out
    assert check.engine._RESULTS["linear_attention"] == "wrong"


@pytest.mark.parametrize("fn,named", [
    (lambda Q, K, V: phi(Q) @ (np.swapaxes(phi(K), -1, -2) @ V), "the normaliser is missing"),
    (lambda Q, K, V: (Q @ (np.swapaxes(K, -1, -2) @ V)) / (Q @ K.sum(axis=-2)[..., None]), "no feature map"),
    (lambda Q, K, V: phi(Q) @ (np.swapaxes(phi(K), -1, -2) @ V) / K.shape[-2], "number of keys S"),
])
def test_linear_mistakes_are_named(capsys, fn, named):
    ok, out = run(capsys, "linear_attention", fn)
    assert not ok and named in out


def test_linear_softmax_attention_is_not_linear_attention(capsys):
    ok, out = run(capsys, "linear_attention", lambda Q, K, V: mc.scaled_dot_product_attention(Q, K, V)[0])
    assert not ok and "case 1 of 4 failed" in out


def test_linear_stub_is_not_finished(capsys):
    def my_linear(Q, K, V):
        raise NotImplementedError
    ok, out = run(capsys, "linear_attention", my_linear)
    assert not ok and "not finished" in out
