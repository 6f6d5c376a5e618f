"""The checkers of notebooks 02-03 (check.attention): the package's own functions pass, each catalogued
mistake is named as itself, and an uncatalogued one is refused with a located message."""
import numpy as np
import pytest

import mha_course as mc
from mha_course.check import attention as ca

from .verdicts import catalogue, named_as_itself

EXERCISES, PAIRS = catalogue(ca.SOFTMAX, ca.SDPA, ca.CAUSAL_MASK, ca.PADDING_MASK)


@pytest.mark.parametrize("checker, fn", [
    (ca.softmax, mc.softmax), (ca.scaled_dot_product_attention, mc.scaled_dot_product_attention),
    (ca.causal_mask, mc.causal_mask)])
def test_the_package_passes(capsys, checker, fn):
    assert checker(fn), capsys.readouterr().out


@pytest.mark.parametrize("name, i", PAIRS, ids=[f"{n}-{i}" for n, i in PAIRS])
def test_each_catalogued_mistake_is_named_as_itself(capsys, name, i):
    named_as_itself(capsys, EXERCISES[name], i)


def test_an_uncatalogued_softmax_mistake_is_located(capsys):
    ok = ca.softmax(lambda x, axis=-1: 1.5 * mc.softmax(x, axis=axis))
    out = capsys.readouterr().out
    assert not ok and "Looks like" not in out and "1.5 times" in out, out


def test_a_causal_mask_of_ints_is_refused(capsys):
    assert not ca.causal_mask(lambda T: np.tril(np.ones((T, T), dtype=int)))
    assert "bool" in capsys.readouterr().out


def _soft(x, axis=-1, over_max=None, over_sum=None, floor=None):
    """A new learner's softmax: its max over ``over_max``, its sum over ``over_sum``, -inf clamped to ``floor``."""
    x = np.asarray(x, dtype=float)
    if floor is not None:
        x = np.clip(x, floor, None)
    m = np.max(x, axis=axis if over_max == "axis" else over_max, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m)
    s = np.sum(e, axis=axis if over_sum == "axis" else over_sum, keepdims=True)
    return e / np.where(s == 0, 1, s)


@pytest.mark.parametrize("fn, said", [
    (lambda x, axis=-1: _soft(x, axis, None, "axis"), "the maximum of the whole array"),
    (lambda x, axis=-1: _soft(x, axis, "axis", -1), "the sum over the last axis"),
    (lambda x, axis=-1: _soft(x, axis, "axis", "axis", -1e9), "gives uniform weights"),
])
def test_softmax_parts_are_named(capsys, fn, said):
    assert ca.softmax(fn) is False
    out = capsys.readouterr().out
    assert "Looks like: " in out and said in out, out


def test_the_scale_by_the_width_of_v_and_the_shifted_diagonal_are_named(capsys):
    def sdpa_dv(Q, K, V, mask=None):
        return mc.scaled_dot_product_attention(Q * (Q.shape[-1] / V.shape[-1]) ** 0.5, K, V, mask)
    assert ca.scaled_dot_product_attention(sdpa_dv) is False
    assert "√d_v" in capsys.readouterr().out
    assert ca.causal_mask(lambda T: np.arange(T)[None, :] <= np.arange(T)[:, None] + 1) is False
    assert "k=1" in capsys.readouterr().out
    assert ca.padding_mask(lambda lengths, S: (np.arange(max(lengths))[None] < np.asarray(lengths)[:, None])
                           [:, None, None]) is False
    assert "max(lengths)" in capsys.readouterr().out


# ---- bare errors and whole-batch masks, named (issue 31, fourth edition)
def _attend(Q, Kt, V, mask):
    s = Q @ Kt / np.sqrt(Q.shape[-1])
    s = s if mask is None else np.where(mask, s, -np.inf)
    w = mc.softmax(s)
    return w @ V, w


def test_k_dot_t_on_a_batch_is_named(capsys):
    assert ca.scaled_dot_product_attention(lambda Q, K, V, mask=None: _attend(Q, K.T, V, mask)) is False
    assert "Looks like: K.T on a batched array" in capsys.readouterr().out


def test_boolean_index_masking_is_named(capsys):
    def learner(Q, K, V, mask=None):
        s = np.matmul(Q, np.swapaxes(K, -1, -2)) / np.sqrt(Q.shape[-1])
        if mask is not None:
            s[np.logical_not(mask)] = -np.inf  # an IndexError for a (T, S) mask over batch axes
        w = mc.softmax(s)
        return w @ V, w
    assert ca.scaled_dot_product_attention(learner) is False
    assert "Looks like: the mask applied by boolean indexing" in capsys.readouterr().out


def test_the_scale_after_the_softmax_is_named(capsys):
    def learner(Q, K, V, mask=None):
        s = np.matmul(Q, np.swapaxes(K, -1, -2))
        w = mc.softmax(s if mask is None else np.where(mask, s, -np.inf)) * Q.shape[-1] ** -0.5
        return w @ V, w
    assert ca.scaled_dot_product_attention(learner) is False
    assert "Looks like: the 1/√d_k applied after the softmax" in capsys.readouterr().out


@pytest.mark.parametrize("length_of, said", [(lambda lengths: lengths.max(), "from the longest length"),
                                            (lambda lengths: lengths[0], "from the first sequence's length")])
def test_one_padding_mask_for_the_batch_is_named(capsys, length_of, said):
    def learner(lengths, S):
        row = np.arange(S) < length_of(np.asarray(lengths))
        return np.broadcast_to(row, (len(lengths), 1, 1, S)).copy()
    assert ca.padding_mask(learner) is False
    assert f"Looks like: one mask for the whole batch, {said}" in capsys.readouterr().out
