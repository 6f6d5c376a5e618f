"""The checkers of notebooks 03-04 (check.mha): the package's own functions pass, each catalogued
mistake is named as itself, and a stub is "not finished"."""
import pytest

import mha_course as mc
from mha_course.check import mha as cm

EXERCISES = {e.name: e for e in (cm.MULTI_HEAD_ATTENTION, cm.CAUSAL_MULTI_HEAD_ATTENTION, cm.PARAM_COUNT)}
PAIRS = [(n, i) for n, e in EXERCISES.items() for i in range(len(e.mistakes))]


def test_the_package_passes(capsys):
    assert cm.multi_head_attention(mc.multi_head_attention), capsys.readouterr().out


@pytest.mark.parametrize("name, i", PAIRS, ids=[f"{n}-{i}" for n, i in PAIRS])
def test_each_catalogued_mistake_is_named_as_itself(capsys, name, i):
    exercise = EXERCISES[name]
    mistake = exercise.mistakes[i]
    assert [m.name for m in exercise.recognise(mistake.fn)] == [mistake.name]
    assert exercise.check(mistake.fn) is False
    assert f"Looks like: {mistake.name}. Fix: {mistake.fix}" in capsys.readouterr().out


def test_a_stub_is_not_finished(capsys):
    def stub(x, params, h, mask=None):
        raise NotImplementedError
    assert cm.multi_head_attention(stub) is False
    assert "not finished yet" in capsys.readouterr().out
