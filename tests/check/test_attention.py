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
