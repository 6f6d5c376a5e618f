"""check.block (notebook 04): layer norm in a learner's words, and its classic slips."""
import numpy as np
import pytest

from mha_course import check


def ln_plain(x, eps=1e-5):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + eps)


def ln_std(x, eps=1e-5):
    return (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(x.var(axis=-1, keepdims=True) + eps)


@pytest.mark.parametrize("fn", [ln_plain, ln_std])
def test_layer_norm_in_other_words_passes(capsys, fn):
    assert check.layer_norm(fn) is True


@pytest.mark.parametrize("fn, words", [
    (lambda x, eps=1e-5: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, ddof=1, keepdims=True) + eps), "ddof=1"),
    (lambda x, eps=1e-5: (x - x.mean(-1, keepdims=True)) / (x.std(-1, keepdims=True) + eps), "outside the square root"),
])
def test_the_slips_are_named(capsys, fn, words):
    assert check.layer_norm(fn) is False
    assert words in capsys.readouterr().out


@pytest.mark.parametrize("fn, said", [
    (lambda x, eps=1e-5: x * (np.mean(np.square(x), -1, keepdims=True) + eps) ** -0.5, "RMSNorm"),
    (lambda x, eps=1e-5: (x - x.mean(-1, keepdims=True)) / (x.var(-1, keepdims=True) + eps), "without the square root"),
    (lambda x, eps=1e-5: x / (x.std(-1, keepdims=True) ** 2 + eps) ** 0.5, "the mean is not subtracted"),
])
def test_other_normalisations_are_named_without_d_k(capsys, fn, said):
    assert check.layer_norm(fn) is False
    out = capsys.readouterr().out
    assert said in out and "d_k" not in out, out
