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
