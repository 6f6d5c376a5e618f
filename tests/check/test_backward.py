"""The checkers of notebook 08 (the backward pass stage by stage, one Adam step): right answers in a
learner's words accepted, every catalogued mistake named as itself, the issue's slips written by
hand named, uncatalogued ones given a closer look (a scale in symbols, the head that is wrong)."""
import math

import numpy as np
import pytest

import mha_course as mc
from mha_course.check import backward as cb

from .verdicts import closer, named, run

EXERCISES = [(cb.softmax_backward, cb.SOFTMAX_BACKWARD), (cb.scale_backward, cb.SCALE_BACKWARD),
             (cb.split_heads_backward, cb.SPLIT_HEADS_BACKWARD), (cb.matmul_backward, cb.MATMUL_BACKWARD),
             (cb.shared_input_backward, cb.SHARED_INPUT_BACKWARD), (cb.adam_step, cb.ADAM_STEP)]
CATALOGUED = [(c, e, i) for c, e in EXERCISES for i in range(len(e.mistakes))]


@pytest.mark.parametrize("checker, exercise, i", CATALOGUED, ids=[f"{e.name}-{i}" for _, e, i in CATALOGUED])
def test_every_catalogued_mistake_is_named_as_itself(capsys, checker, exercise, i):
    named(capsys, checker, exercise.mistakes[i].fn, exercise.mistakes[i].name)


# ---------------------------------------------------------------- 8.1 softmax backward
def sm_jacobian(p, g):
    J = np.einsum("...i,ij->...ij", p, np.eye(p.shape[-1])) - p[..., :, None] * p[..., None, :]
    return np.einsum("...ij,...i->...j", J, g)


def sm_dot(p, g):
    return p * g - p * np.sum(p * g, axis=-1)[..., None]


def sm_loops(p, g):
    out = np.zeros_like(p)
    for idx in np.ndindex(p.shape[:-1]):
        pr, gr = p[idx], g[idx]
        out[idx] = (np.diag(pr) - np.outer(pr, pr)) @ gr
    return out


def sm_vjp(p, g):
    return (g - np.einsum("...s,...s->...", p, g)[..., None]) * p


@pytest.mark.parametrize("fn", [sm_jacobian, sm_dot, sm_loops, sm_vjp, cb._softmax_backward])
def test_softmax_backward_accepts_right_answers(capsys, fn):
    ok, out = run(capsys, cb.softmax_backward, fn)
    assert ok, out


@pytest.mark.parametrize("fn, name", [
    (lambda p, g: g - (p * g).sum(-1, keepdims=True), "the leading p is missing"),
    (lambda p, g: p * (g - np.sum(p * g, axis=-2, keepdims=True)) if p.ndim > 1 else p * (g - np.sum(p * g)),
     "the weighted sum taken over the wrong axis"),
    (lambda p, g: p * (1 - p) * g, "the softmax Jacobian applied as if it were diagonal"),
])
def test_softmax_backward_names_learner_mistakes(capsys, fn, name):
    named(capsys, cb.softmax_backward, fn, name)


@pytest.mark.parametrize("fn, says", [
    (lambda p, g: p * (g - (p * g).sum(-1, keepdims=True)) * 2, "the sum of your gradient is"),
    (lambda p, g: p * (g - (p * p * g).sum(-1, keepdims=True)), "= p ⊙ (g - p·g)"),
])
def test_softmax_backward_unknown_mistakes_get_a_closer_look(capsys, fn, says):
    closer(capsys, cb.softmax_backward, fn, says)


# ---------------------------------------------------------------- 8.2 scale backward
@pytest.mark.parametrize("fn", [lambda g, d_k: g / math.sqrt(d_k), lambda g, d_k: g * d_k ** -0.5,
                                lambda g, d_k: np.divide(g, np.sqrt(d_k)), lambda g, d_k: g / d_k * np.sqrt(d_k),
                                cb._scale_backward])
def test_scale_backward_accepts_right_answers(capsys, fn):
    ok, out = run(capsys, cb.scale_backward, fn)
    assert ok, out


@pytest.mark.parametrize("fn, name", [
    (lambda g, d_k: g * d_k ** -1 / 2, "d_k ** -1/2 is (d_k ** -1) / 2"),
    (lambda g, d_k: 0.5 * g / np.sqrt(d_k), "divided by 2 sqrt(d_k)"),
    (lambda g, d_k: g * np.sqrt(d_k), "multiplied by sqrt(d_k) instead of divided"),
])
def test_scale_backward_names_learner_mistakes(capsys, fn, name):
    named(capsys, cb.scale_backward, fn, name)


@pytest.mark.parametrize("fn, says", [
    (lambda g, d_k: g / d_k ** 1.5, "= grad_scores × 1/d_k^(3/2)"),
    (lambda g, d_k: g * 2 / np.sqrt(d_k), "= grad_scores × 2/sqrt(d_k)"),
])
def test_scale_backward_unknown_mistakes_name_the_factor_in_symbols(capsys, fn, says):
    closer(capsys, cb.scale_backward, fn, says)


# ---------------------------------------------------------------- 8.3 split backward
def split_swapaxes(g):
    B, h, T, d_k = g.shape
    return np.swapaxes(g, 1, 2).reshape(B, T, -1)


def split_concat(g):
    return np.concatenate([g[:, i] for i in range(g.shape[1])], axis=-1)


def split_einops_like(g):
    return np.moveaxis(g, 1, 2).reshape(*g.shape[:1], g.shape[2], -1)


@pytest.mark.parametrize("fn", [split_swapaxes, split_concat, split_einops_like, mc.combine_heads])
def test_split_backward_accepts_right_answers(capsys, fn):
    ok, out = run(capsys, cb.split_heads_backward, fn)
    assert ok, out


@pytest.mark.parametrize("fn, name", [
    (lambda g: g.sum(1), "summed over the heads"),
    (lambda g: np.swapaxes(g, 1, 2), "the head axis moved back but not merged"),
    (lambda g: g.reshape(g.shape[0], g.shape[2], -1), "reshaped straight to (B, T, d_model)"),
])
def test_split_backward_names_learner_mistakes(capsys, fn, name):
    named(capsys, cb.split_heads_backward, fn, name)


def _head_one_zeroed(g):
    out = split_concat(g).copy()
    d_k = g.shape[-1]
    out[..., d_k:2 * d_k] = 0
    return out


@pytest.mark.parametrize("fn, says", [
    (_head_one_zeroed, "head 1 (features 2..3): got"),
    (lambda g: split_concat(g[:, [1, 0] + list(range(2, g.shape[1]))]), "head 0 (features 0..1): got"),
])
def test_split_backward_unknown_mistakes_name_the_head(capsys, fn, says):
    closer(capsys, cb.split_heads_backward, fn, says)


# ---------------------------------------------------------------- 8.4 matmul backward
@pytest.mark.parametrize("fn", [lambda a, b, g: (g @ b.T, a.T @ g),
                                lambda a, b, g: (np.einsum("nm,km->nk", g, b), np.einsum("nk,nm->km", a, g)),
                                lambda a, b, g: (np.dot(g, b.T), np.dot(a.T, g)),
                                lambda a, b, g: ((b @ g.T).T, (g.T @ a).T), mc.backward.matmul_backward])
def test_matmul_backward_accepts_right_answers(capsys, fn):
    ok, out = run(capsys, cb.matmul_backward, fn)
    assert ok, out


@pytest.mark.parametrize("fn, name", [
    (lambda a, b, g: (b @ g.T, a.T @ g), "grad_a = b @ grad_out.T"),
    (lambda a, b, g: [a.T @ g, g @ b.T], "the two gradients returned in the wrong order"),
    (lambda a, b, g: (g @ b.T, g.T @ a), "the factors in the wrong order"),
])
def test_matmul_backward_names_learner_mistakes(capsys, fn, name):
    named(capsys, cb.matmul_backward, fn, name)


@pytest.mark.parametrize("fn, says", [
    (lambda a, b, g: (g @ b.T, (a.T @ g).sum(0)), "your gradients have shapes (2, 3) and (4,)"),
    (lambda a, b, g: (np.sqrt(np.abs(g)).sum(-1, keepdims=True) * np.ones(a.shape), a.T @ g), "- grad_a"),
])
def test_matmul_backward_unknown_mistakes_are_localised(capsys, fn, says):
    ok, out = run(capsys, cb.matmul_backward, fn)
    assert ok is False and "Looks like" not in out and says in out, out


# ---------------------------------------------------------------- 8.5 shared input
@pytest.mark.parametrize("fn", [lambda c, W_k, W_v, gK, gV: gK @ W_k.T + gV @ W_v.T,
                                lambda c, W_k, W_v, gK, gV: np.einsum("bsd,Dd->bsD", gK, W_k)
                                + np.einsum("bsd,Dd->bsD", gV, W_v),
                                lambda c, W_k, W_v, gK, gV: np.concatenate([gK, gV], -1) @ np.concatenate([W_k, W_v],
                                                                                                       -1).T,
                                lambda c, W_k, W_v, gK, gV: sum(g @ W.T for g, W in ((gK, W_k), (gV, W_v)))])
def test_shared_input_accepts_right_answers(capsys, fn):
    ok, out = run(capsys, cb.shared_input_backward, fn)
    assert ok, out


@pytest.mark.parametrize("fn, name", [
    (lambda c, W_k, W_v, gK, gV: gK @ W_v.T + gV @ W_k.T, "W_k and W_v swapped"),
    (lambda c, W_k, W_v, gK, gV: gK @ W_k.T, "only the K path"),
    (lambda c, W_k, W_v, gK, gV: 0.5 * (gK @ W_k.T + gV @ W_v.T), "the two paths averaged"),
])
def test_shared_input_names_learner_mistakes(capsys, fn, name):
    named(capsys, cb.shared_input_backward, fn, name)


@pytest.mark.parametrize("fn, says", [
    (lambda c, W_k, W_v, gK, gV: gK @ W_k.T + 2 * gV @ W_v.T, "the V path alone (grad_K = 0): wrong"),
    (lambda c, W_k, W_v, gK, gV: gK @ W_k.T + gV @ W_v.T + c, "the K path alone (grad_V = 0): wrong"),
])
def test_shared_input_unknown_mistakes_say_which_path(capsys, fn, says):
    closer(capsys, cb.shared_input_backward, fn, says)


# ---------------------------------------------------------------- 8.6 Adam
def adam_plain(p, g, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-8):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g ** 2
    return p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps), m, v


def adam_folded(p, g, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-8):
    """The step size folded into lr_t (as in the paper's end of section 2); eps scaled to match exactly."""
    m2, v2 = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
    lr_t = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    return p - lr_t * m2 / (np.sqrt(v2) + eps * math.sqrt(1 - b2 ** t)), m2, v2


def adam_as_updates(p, g, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-8):
    new_m = m + (1 - b1) * (g - m)                       # the same running mean, written as an update
    new_v = v + (1 - b2) * (np.square(g) - v)
    step = (new_m / (1 - b1 ** t)) / (np.sqrt(new_v / (1 - b2 ** t)) + eps)
    return p - lr * step, new_m, new_v


def adam_inplace_copies(p, g, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-8):
    p, m, v = p.copy(), m.copy(), v.copy()
    m *= b1
    m += (1 - b1) * g
    v *= b2
    v += (1 - b2) * g * g
    p -= lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return p, m, v


@pytest.mark.parametrize("fn", [adam_plain, adam_folded, adam_as_updates, adam_inplace_copies])
def test_adam_accepts_right_answers(capsys, fn):
    ok, out = run(capsys, cb.adam_step, fn)
    assert ok, out


def adam_no_correction(p, g, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-8):
    m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g ** 2
    return p - lr * m / (np.sqrt(v) + eps), m, v


def adam_eps_inside(p, g, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-8):
    m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g ** 2
    return p - lr * (m / (1 - b1 ** t)) / np.sqrt(v / (1 - b2 ** t) + eps), m, v


def adam_constants(p, g, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-8):
    """b1, b2 and eps taken as given constants: right only when the caller passes the defaults."""
    return adam_plain(p, g, m, v, t, lr)


def adam_betas_flipped(p, g, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-8):
    m = b1 * g + (1 - b1) * m                            # beta weighs the new gradient
    v = b2 * g * g + (1 - b2) * v
    return p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps), m, v


@pytest.mark.parametrize("fn, name", [
    (adam_no_correction, "Adam without bias correction: the early steps are far too LARGE"),
    (adam_eps_inside, "eps inside the square root"),
    (lambda p, g, m, v, t, lr, *rest: adam_plain(p, g, m, v, t + 1, lr, *rest),
     "t off by one in the bias correction (t + 1)"),
    (lambda p, g, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-8: adam_plain(p, g, m, v, t, lr, b2, b1, eps),
     "b1 and b2 swapped"),
    (adam_constants, "the arguments b1, b2 and eps ignored"),
    (adam_betas_flipped, "β and 1 - β swapped in both running means"),
])
def test_adam_names_learner_mistakes(capsys, fn, name):
    named(capsys, cb.adam_step, fn, name)


def test_adam_cases_vary_b1_b2_and_eps():
    passed = [c.args[6:] for c in cb.ADAM_STEP.cases() if len(c.args) > 6]
    assert passed and all(b != (0.9, 0.999, 1e-8) for b in passed)


def test_adam_without_bias_correction_is_called_too_large_not_too_small():
    names = [m.name for m in cb.ADAM_STEP.mistakes if m.name.startswith("Adam without bias correction")]
    assert len(names) == 1 and "too LARGE" in names[0] and "small" not in names[0]
    p, m, v = adam_no_correction(np.zeros(1), np.ones(1), np.zeros(1), np.zeros(1), 1, 0.1)
    assert -p[0] / 0.1 == pytest.approx(0.1 / math.sqrt(0.001), rel=1e-6)  # 3.16 lr: too large


@pytest.mark.parametrize("fn, says", [
    (lambda p, g, m, v, t, lr: adam_plain(p, g, m, v, t, lr * 2), "yours moves p by [2.0"),
    (lambda p, g, m, v, t, lr: (adam_plain(p, g, m, v, t, lr)[0], 0.9 * m + 0.1 * g, v), "expected 0.001·g²"),
])
def test_adam_unknown_mistakes_show_the_first_step(capsys, fn, says):
    closer(capsys, cb.adam_step, fn, says)


# ---- learner code written anew, each class named
from mha_course import check as _check  # noqa: E402

from .verdicts import says as _says  # noqa: E402


def test_softmax_backward_over_axis_1_is_named(capsys):
    _says(capsys, _check.softmax_backward, lambda p, g: p * g - p * np.sum(p * g, axis=1, keepdims=True),
          "the weighted sum over axis=1")


@pytest.mark.parametrize("reduce, said", [(np.mean, "averaged over the heads and the mean repeated h times"),
                                          (np.sum, "summed over the heads and the sum repeated h times")])
def test_split_heads_backward_tiled_reductions_are_named(capsys, reduce, said):
    def learner(g):
        one = reduce(g, axis=1)  # (B, T, d_k)
        return np.concatenate([one] * g.shape[1], axis=-1)
    _says(capsys, _check.split_heads_backward, learner, said)


def test_shared_input_backward_times_c_is_named(capsys):
    _says(capsys, _check.shared_input_backward,
          lambda c, W_k, W_v, gK, gV: (np.einsum("bsd,ed->bse", gK, W_k) + np.einsum("bsd,ed->bse", gV, W_v)) * c,
          "multiplied by c as well")


def test_adam_returning_a_list_is_named_a_list(capsys):
    def adam_in_a_list(p, g, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-8):
        return list(adam_as_updates(p, g, m, v, t, lr, b1, b2, eps))
    assert _check.adam_step(adam_in_a_list) is False
    out = capsys.readouterr().out
    assert "it returned a list of 3 values, expected a tuple (p, m, v). Fix: return p, m, v" in out, out
