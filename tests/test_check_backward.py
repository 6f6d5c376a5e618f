"""The checkers of 08 (softmax/scale/split/matmul backward, a shared input, one Adam step): the
notebook's solutions pass, each typical mistake is rejected AND named, a stub is "not finished".

The solutions and the wrong answers are typed here the way a learner writes them.
"""
import numpy as np
import pytest

from mha_course.check import backward as cb


def run(capsys, checker, fn):
    ok = getattr(cb, checker)(fn)
    return ok, capsys.readouterr().out


# ----------------------------------------------------------------------------- solutions
def my_softmax_backward(p, g):
    return p * (g - np.sum(p * g, axis=-1, keepdims=True))


def my_scale_backward(g, d_k):
    return g / np.sqrt(d_k)


def my_split_heads_backward(g):
    B, h, T, d_k = g.shape
    return g.transpose(0, 2, 1, 3).reshape(B, T, h * d_k)


def my_matmul_backward(a, b, g):
    return g @ b.T, a.T @ g


def my_shared_input_backward(c, W_k, W_v, grad_K, grad_V):
    return grad_K @ W_k.T + grad_V @ W_v.T


def my_adam_step(p, g, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-8, correct=True):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g ** 2
    m_hat = m / (1 - b1 ** t) if correct else m
    v_hat = v / (1 - b2 ** t) if correct else v
    return p - lr * m_hat / (np.sqrt(v_hat) + eps), m, v


SOLUTIONS = {"softmax_backward": my_softmax_backward, "scale_backward": my_scale_backward,
             "split_heads_backward": my_split_heads_backward, "matmul_backward": my_matmul_backward,
             "shared_input_backward": my_shared_input_backward, "adam_step": my_adam_step}


@pytest.mark.parametrize("checker", sorted(SOLUTIONS))
def test_solution_passes_and_stub_is_unfinished(capsys, checker):
    ok, out = run(capsys, checker, SOLUTIONS[checker])
    assert ok and "✔" in out

    def stub(*args):
        raise NotImplementedError
    ok, out = run(capsys, checker, stub)
    assert not ok and "not finished" in out


# ----------------------------------------------------------------------------- typical mistakes
def diagonal_jacobian(p, g):
    jac_diag = p * (1 - p)  # d p_i / d s_i only
    return jac_diag * g


def shared_kv_not_summed(c, W_k, W_v, grad_K, grad_V):
    grad_c = grad_K @ W_k.T
    return grad_c


@pytest.mark.parametrize("checker, fn, named", [
    ("softmax_backward", diagonal_jacobian, "as if it were diagonal"),
    ("softmax_backward", lambda p, g: p * g, "only the diag(p) part"),
    ("scale_backward", lambda g, d_k: g * np.sqrt(d_k), "multiplied by sqrt(d_k)"),
    ("scale_backward", lambda g, d_k: g / d_k, "divided by d_k"),
    ("split_heads_backward", lambda g: g.reshape(g.shape[0], g.shape[2], -1), "without moving the head axis"),
    ("matmul_backward", lambda a, b, g: (g @ b.T, a @ g), "missing transpose in grad_b"),
    ("matmul_backward", lambda a, b, g: (g @ b, a.T @ g), "missing transpose in grad_a"),
    ("shared_input_backward", shared_kv_not_summed, "not summed"),
    ("shared_input_backward", lambda c, W_k, W_v, gK, gV: gK @ W_k + gV @ W_v, "missing transpose of W_k"),
    ("adam_step", lambda *a: my_adam_step(*a, correct=False), "without bias correction"),
])
def test_typical_mistake_is_named(capsys, checker, fn, named):
    ok, out = run(capsys, checker, fn)
    assert not ok and named in out, out
