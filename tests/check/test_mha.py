"""The checkers of notebooks 03-04 (check.mha): the package's own functions pass, each catalogued
mistake is named as itself, and a stub is "not finished"."""
import pytest

import mha_course as mc
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
