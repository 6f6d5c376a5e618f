"""The checkers of notebook 07 (sinusoidal_positions, apply_rope, rope_scores): right answers in a
learner's own words are accepted, every catalogued mistake is named as itself, learner-written
versions of the slips the issue lists are named, and uncatalogued ones get a closer look
(which column, which pair of features, whether the scores are relative)."""
import numpy as np
import pytest

import mha_course as mc
from mha_course.check import positions as cp

from .verdicts import named, run


# ---------------------------------------------------------------- 7.1 sinusoids
def pe_loops(T, d_model):
    pe = np.zeros((T, d_model))
    for pos in range(T):
        for i in range(0, d_model, 2):
            pe[pos, i] = np.sin(pos / 10000 ** (i / d_model))
            pe[pos, i + 1] = np.cos(pos / 10000 ** (i / d_model))
    return pe


def pe_exp_log(T, d_model):
    div = np.exp(np.arange(0, d_model, 2) * (-np.log(10000.0) / d_model))     # the Annotated Transformer's way
    pe = np.zeros((T, d_model))
    pe[:, 0::2] = np.sin(np.arange(T)[:, None] * div)
    pe[:, 1::2] = np.cos(np.arange(T)[:, None] * div)
    return pe


def pe_stack(T, d_model):
    ang = np.outer(np.arange(T), 1.0 / np.power(10000.0, 2 * np.arange(d_model // 2) / d_model))
    return np.stack([np.sin(ang), np.cos(ang)], axis=-1).reshape(T, d_model)


def pe_phase(T, d_model):
    j = np.arange(d_model)
    ang = np.arange(T)[:, None] / 10000.0 ** ((j - j % 2) / d_model)
    return np.sin(ang + (j % 2) * np.pi / 2)                                   # cos x = sin(x + pi/2)


@pytest.mark.parametrize("fn", [pe_loops, pe_exp_log, pe_stack, pe_phase, mc.sinusoidal_positions])
def test_sinusoids_accept_right_answers(capsys, fn):
    ok, out = run(capsys, cp.sinusoidal_positions, fn)
    assert ok, out


def pe_own_index(T, d_model):
    pe = np.zeros((T, d_model))
    for j in range(d_model):
        f = np.sin if j % 2 == 0 else np.cos
        pe[:, j] = f(np.arange(T) / 10000 ** (j / d_model))
    return pe


def pe_positive(T, d_model):
    ang = np.arange(T)[:, None] * 10000.0 ** (np.arange(0, d_model, 2) / d_model)
    pe = np.empty((T, d_model))
    pe[:, ::2], pe[:, 1::2] = np.sin(ang), np.cos(ang)
    return pe


@pytest.mark.parametrize("fn, name", [
    (pe_own_index, "the cos column 2i+1 given the frequency of its own index"),
    (pe_positive, "pos multiplied by 10000^(2i/d_model) instead of divided"),
    (lambda T, d: pe_loops(T, d)[:, ::-1].copy()[:, ::-1] if False else pe_stack(T + 1, d)[1:], "positions start at 1"),
    (lambda T, d: np.concatenate([pe_stack(T, d)[:, 0::2], pe_stack(T, d)[:, 1::2]], axis=1), "all sines first"),
])
def test_sinusoids_name_learner_mistakes(capsys, fn, name):
    named(capsys, cp.sinusoidal_positions, fn, name)


@pytest.mark.parametrize("i", range(len(cp.SINUSOIDAL_POSITIONS.mistakes)))
def test_sinusoids_name_every_catalogued_mistake(capsys, i):
    m = cp.SINUSOIDAL_POSITIONS.mistakes[i]
    with np.errstate(all="ignore"):
        named(capsys, cp.sinusoidal_positions, m.fn, m.name)


@pytest.mark.parametrize("fn, says", [
    (lambda T, d: np.where(np.arange(d) == 2, pe_stack(T, d)[:, [3] * d], pe_stack(T, d)),
     "column 2 (pair 1, the sin): yours is cos"),
    (lambda T, d: pe_stack(T, d) * 0.5, "column 0 (pair 0, the sin): not a sin of any"),
])
def test_sinusoids_unknown_mistakes_name_the_column(capsys, fn, says):
    ok, out = run(capsys, cp.sinusoidal_positions, fn)
    assert ok is False and "Looks like" not in out and says in out, out


# ---------------------------------------------------------------- 7.2 RoPE
def rope_complex(x, positions, base=10000.0):
    d_k = x.shape[-1]
    z = x[..., 0::2] + 1j * x[..., 1::2]
    z = z * np.exp(1j * np.outer(positions, base ** (-np.arange(0, d_k, 2) / d_k)))
    return np.stack([z.real, z.imag], -1).reshape(x.shape)


def rope_matrix(x, positions, base=10000.0):
    d_k = x.shape[-1]
    out = np.array(x, dtype=float)
    for t, m in enumerate(positions):
        for i in range(d_k // 2):
            a = m * base ** (-2 * i / d_k)
            R = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
            out[..., t, 2 * i:2 * i + 2] = x[..., t, 2 * i:2 * i + 2] @ R.T
    return out


def rope_rotate_half(x, positions, base=10000.0):
    """The HF formula x cos + rotate(x) sin, written for interleaved pairs."""
    d_k = x.shape[-1]
    inv = 1.0 / base ** (np.arange(0, d_k, 2) / d_k)
    ang = np.repeat(np.asarray(positions)[:, None] * inv, 2, axis=-1)        # (T, d_k): each angle twice
    rot = np.empty_like(x)
    rot[..., 0::2], rot[..., 1::2] = -x[..., 1::2], x[..., 0::2]
    return x * np.cos(ang) + rot * np.sin(ang)


def rope_package(x, positions, base=10000.0):
    return mc.apply_rope(x, positions, base=base, layout="interleaved")


@pytest.mark.parametrize("fn", [rope_complex, rope_matrix, rope_rotate_half, rope_package])
def test_rope_accepts_right_answers(capsys, fn):
    ok, out = run(capsys, cp.apply_rope, fn)
    assert ok, out


def rope_per_feature(x, positions, base=10000.0):
    d_k = x.shape[-1]
    ang = np.asarray(positions)[:, None] * base ** (-np.arange(d_k) / d_k)   # one frequency per feature
    rot = np.empty_like(x)
    rot[..., 0::2], rot[..., 1::2] = -x[..., 1::2], x[..., 0::2]
    return x * np.cos(ang) + rot * np.sin(ang)


def rope_sign_b(x, positions, base=10000.0):
    d_k = x.shape[-1]
    ang = np.asarray(positions)[:, None] * base ** (-np.arange(0, d_k, 2) / d_k)
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = a * np.cos(ang) - b * np.sin(ang), -a * np.sin(ang) + b * np.cos(ang)
    return out


def rope_ignores_positions(x, positions, base=10000.0):
    return rope_complex(x, np.arange(x.shape[-2]), base)


@pytest.mark.parametrize("fn, name", [
    (rope_per_feature, "one frequency per feature"),
    (rope_sign_b, "a sign slip in new b"),
    (rope_ignores_positions, "the positions argument is ignored"),
    (lambda x, positions, base=10000.0: mc.apply_rope(x, positions, base, "halves"), "the halves layout"),
])
def test_rope_names_learner_mistakes(capsys, fn, name):
    named(capsys, cp.apply_rope, fn, name)


@pytest.mark.parametrize("i", range(len(cp.APPLY_ROPE.mistakes)))
def test_rope_names_every_catalogued_mistake(capsys, i):
    m = cp.APPLY_ROPE.mistakes[i]
    named(capsys, cp.apply_rope, m.fn, m.name)


def rope_pair_two_fast(x, positions, base=10000.0):
    out = rope_complex(x, positions, base)
    if x.shape[-1] >= 6:  # pair 2 turned by the angle of pair 0
        fast = rope_complex(x[..., 4:6], positions, base)
        out[..., 4:6] = fast
    return out


@pytest.mark.parametrize("fn, says", [
    (rope_pair_two_fast, "pair 2 (features 4, 5): norm kept, turned by +1 rad at position 1 (expected theta_2"),
    (lambda x, positions, base=10000.0: rope_complex(x, positions, base) * 1.1, "its norm changed"),
])
def test_rope_unknown_mistakes_name_the_pair(capsys, fn, says):
    ok, out = run(capsys, cp.apply_rope, fn)
    assert ok is False and "Looks like" not in out and says in out, out


# ---------------------------------------------------------------- 7.3 RoPE scores
def scores_einsum(Q, K, base=10000.0):
    q = mc.apply_rope(Q, np.arange(Q.shape[-2]), base)
    k = mc.apply_rope(K, np.arange(K.shape[-2]), base)
    return np.einsum("...td,...sd->...ts", q, k) / np.sqrt(Q.shape[-1])


def scores_from_one(Q, K, base=10000.0):
    """Both start at position 1: only offsets matter."""
    q = mc.apply_rope(Q, np.arange(1, Q.shape[-2] + 1), base)
    k = mc.apply_rope(K, np.arange(1, K.shape[-2] + 1), base)
    return q @ np.swapaxes(k, -1, -2) / Q.shape[-1] ** 0.5


def scores_relative_key(Q, K, base=10000.0):
    """Rotate the keys by n and the queries by m: the same as rotating the keys by n - m per pair."""
    T, S = Q.shape[-2], K.shape[-2]
    return mc.apply_rope(Q, np.arange(T), base) @ np.swapaxes(mc.apply_rope(K, np.arange(S), base), -1, -2) \
        * Q.shape[-1] ** -0.5


def scores_far_away(Q, K, base=10000.0):
    """Both shifted to positions 100.. (a cache far into the text): the same scores."""
    q, k = mc.apply_rope(Q, 100 + np.arange(Q.shape[-2]), base), mc.apply_rope(K, 100 + np.arange(K.shape[-2]), base)
    return (q[..., :, None, :] * k[..., None, :, :]).sum(-1) / np.sqrt(Q.shape[-1])


@pytest.mark.parametrize("fn", [scores_einsum, scores_from_one, scores_relative_key, scores_far_away])
def test_rope_scores_accept_right_answers(capsys, fn):
    ok, out = run(capsys, cp.rope_scores, fn)
    assert ok, out


@pytest.mark.parametrize("fn, name", [
    (lambda Q, K, base=10000.0: np.swapaxes(scores_einsum(Q, K, base), -1, -2), "the scores transposed"),
    (lambda Q, K, base=10000.0: mc.apply_rope(Q, np.arange(1, Q.shape[-2] + 1), base)
     @ np.swapaxes(mc.apply_rope(K, np.arange(K.shape[-2]), base), -1, -2) / np.sqrt(Q.shape[-1]),
     "the queries are off by one position"),
    (lambda Q, K, base=10000.0: mc.softmax(scores_einsum(Q, K, base)), "a softmax applied"),
    (lambda Q, K, base=10000.0: scores_einsum(Q, K, base) / np.sqrt(Q.shape[-1]), "the scores are divided by d_k"),
])
def test_rope_scores_name_learner_mistakes(capsys, fn, name):
    named(capsys, cp.rope_scores, fn, name)


@pytest.mark.parametrize("i", range(len(cp.ROPE_SCORES.mistakes)))
def test_rope_scores_name_every_catalogued_mistake(capsys, i):
    m = cp.ROPE_SCORES.mistakes[i]
    named(capsys, cp.rope_scores, m.fn, m.name)


@pytest.mark.parametrize("fn, says", [
    (lambda Q, K, base=10000.0: scores_einsum(Q, K, base) + 0.1, "they depend on m - n only"),
    (lambda Q, K, base=10000.0: mc.apply_rope(Q, np.arange(Q.shape[-2]) * 2, base)
     @ np.swapaxes(mc.apply_rope(K, np.arange(K.shape[-2]), base), -1, -2) / np.sqrt(Q.shape[-1]),
     "they are not relative"),
])
def test_rope_scores_unknown_mistakes_say_whether_they_are_relative(capsys, fn, says):
    ok, out = run(capsys, cp.rope_scores, fn)
    assert ok is False and "Looks like" not in out and says in out, out


# ---- learner code written anew, each class named
from mha_course import check as _check  # noqa: E402

from .verdicts import says as _says  # noqa: E402


def _rotate(x, positions, base):
    x = np.asarray(x, float)
    d = x.shape[-1]
    ang = np.asarray(positions, float)[:, None] * base ** (-np.arange(0, d, 2) / d)
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = a * np.cos(ang) - b * np.sin(ang), a * np.sin(ang) + b * np.cos(ang)
    return out


def test_apply_rope_base_ignored_and_the_in_place_slip_are_named(capsys):
    _says(capsys, _check.apply_rope, lambda x, positions, base=10000.0: _rotate(x, positions, 1e4),
          "the base argument ignored")

    def in_place(x, positions, base=10000.0):
        out = np.array(x, float)
        d = out.shape[-1]
        ang = np.asarray(positions)[:, None] * base ** (-np.arange(0, d, 2) / d)
        out[..., 0::2] = out[..., 0::2] * np.cos(ang) - out[..., 1::2] * np.sin(ang)
        out[..., 1::2] = out[..., 0::2] * np.sin(ang) + out[..., 1::2] * np.cos(ang)  # reads the new a
        return out
    _says(capsys, _check.apply_rope, in_place, "new b computed from the already rotated a")


@pytest.mark.parametrize("q_pos, k_pos, base_used, said", [
    (lambda T, S: np.arange(T), lambda T, S: np.arange(S), lambda b: 10000.0, "the base not passed on"),
    (lambda T, S: np.arange(T), lambda T, S: T - S + np.arange(S), lambda b: b, "the keys placed at the end"),
    (lambda T, S: np.arange(T - 1, -1, -1), lambda T, S: np.arange(S), lambda b: b, "the queries rotated at reversed"),
])
def test_rope_scores_positions_and_base_are_named(capsys, q_pos, k_pos, base_used, said):
    def learner(Q, K, base=10000.0):
        T, S = Q.shape[-2], K.shape[-2]
        q, k = _rotate(Q, q_pos(T, S), base_used(base)), _rotate(K, k_pos(T, S), base_used(base))
        return q @ np.swapaxes(k, -1, -2) / np.sqrt(Q.shape[-1])
    _says(capsys, _check.rope_scores, learner, said)
