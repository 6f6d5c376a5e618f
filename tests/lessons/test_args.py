"""lessons._args: one check per kind of argument of the experiments on trained models; each names the
argument and the fix, and refuses -1, bools, floats and NaN instead of reading them some other way.
"""
import math

import numpy as np
import pytest

from mha_course.lessons import _args
from mha_course.lessons import model as train

CONFIG = train.Config(vocab=8, seq_len=8, d_model=8, h=2, n_layers=2)


@pytest.mark.parametrize("bad", [-1, 2, True, 0.0, "0", None])
def test_a_layer_is_a_whole_number_in_range(bad):
    with pytest.raises(ValueError, match="layer"):
        _args.layer(CONFIG, bad)


def test_a_layer_in_range_comes_back_as_an_int():
    assert _args.layer(CONFIG, np.int64(1)) == 1 and type(_args.layer(CONFIG, np.int64(1))) is int


@pytest.mark.parametrize("bad", [[(0, -1)], [(-1, 0)], [(2, 0)], [(0, 2)], [(0.0, 1)], [(True, 0)], [0], "ab", 3, None])
def test_a_head_set_holds_heads_of_the_model(bad):
    with pytest.raises(ValueError, match="heads"):
        _args.head_set(CONFIG, bad)


def test_a_head_set_comes_back_as_a_set_of_int_pairs():
    assert _args.head_set(CONFIG, [(np.int64(1), 0), [0, 1], (1, 0)]) == {(1, 0), (0, 1)}


@pytest.mark.parametrize("bad", [math.nan, math.inf, -0.1, 1.5, True, "0.5", None])
def test_a_number_is_finite_and_in_its_range(bad):
    with pytest.raises(ValueError, match="threshold"):
        _args.number(bad, "threshold", 0.0, 1.0)
