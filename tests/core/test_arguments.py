"""The scalar and container kinds of ``_arguments`` (re-exported by ``_validate``): each takes exactly
what it says, refuses the rest with a message naming the argument, and never reads a bool as a number.
"""
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mha_course as mc
from mha_course import _arguments, _validate


def test_validate_re_exports_every_kind_as_the_same_function():
    assert _arguments.__all__ and all(getattr(_validate, n) is getattr(_arguments, n) for n in _arguments.__all__)


def test_positive_ints_takes_a_size_or_an_array_of_sizes_and_refuses_the_rest():
    assert _arguments.positive_ints(np.int64(4), "T") == 4 and type(_arguments.positive_ints(4, "T")) is int
    assert _arguments.positive_ints([128, 256], "T").tolist() == [128, 256]
    for bad in (None, 0, 2.0, True, [], [1, 0], [1.0, 2.0], [True, True], "8", np.array(3.5)):
        with pytest.raises(ValueError, match="T="):
            _arguments.positive_ints(bad, "T")


def test_count_takes_whole_numbers_from_zero_and_refuses_the_rest():
    assert _arguments.count(0, "seed") == 0 and _arguments.count(np.int64(3), "seed") == 3
    for bad in (-1, 0.5, True, "0", None):
        with pytest.raises(ValueError, match="seed="):
            _arguments.count(bad, "seed")


def test_index_refuses_minus_one_past_the_end_and_non_integers_naming_the_range():
    assert _arguments.index(np.int64(1), 2, "head", "heads") == 1
    with pytest.raises(ValueError, match=r"head=-1 is out of range: there are 2 heads; pass head in 0\.\.1 \(-1 is not"):
        _arguments.index(-1, 2, "head", "heads")
    with pytest.raises(ValueError, match=r"head=2 is out of range: there are 2 heads; pass head in 0\.\.1$"):
        _arguments.index(2, 2, "head", "heads")
    for bad in (0.0, True, "0", None):
        with pytest.raises(ValueError, match=r"head=.* must be a whole number in 0\.\.1"):
            _arguments.index(bad, 2, "head", "heads")


def test_choice_lists_the_valid_choices_and_does_not_take_true_for_one():
    assert _arguments.choice("h", ("d_model", "h"), "show") == "h"
    assert _arguments.choice(np.int64(2), [1, 2, 4], "d_k") == 2 and _arguments.choice(2, [1.0, 2.0], "f") == 2
    with pytest.raises(ValueError, match="show='hh' is not one of the valid choices: 'd_model', 'h'"):
        _arguments.choice("hh", ("d_model", "h"), "show")
    for bad in (True, "1", np.array([1, 2]), {"a": 1}, None):
        with pytest.raises(ValueError, match="d_k=.* is not one of the valid choices: 1, 2, 4"):
            _arguments.choice(bad, [1, 2, 4], "d_k")


def test_names_takes_a_list_of_valid_names_never_a_bare_string():
    assert _arguments.names(["h"], ("d_model", "h"), "show") == ("h",)
    with pytest.raises(ValueError, match="show='h' must be a list or tuple of names from 'd_model', 'h'"):
        _arguments.names("h", ("d_model", "h"), "show")
    with pytest.raises(ValueError, match="show='hh' is not one of the valid choices"):
        _arguments.names(("d_model", "hh"), ("d_model", "h"), "show")


def test_flag_generator_named_tuple_and_items_of_refuse_what_they_do_not_hold():
    assert _arguments.flag(np.True_, "causal") is True
    for bad in (1, 2, "yes", None):
        with pytest.raises(ValueError, match="causal="):
            _arguments.flag(bad, "causal")
    rng = np.random.default_rng(0)
    assert _arguments.generator(rng) is rng
    with pytest.raises(ValueError, match="rng must be a numpy Generator, got int"):
        _arguments.generator(0)
    p = mc.init_params(4, rng=rng)
    assert _arguments.named_tuple(p, "params") is p
    with pytest.raises(ValueError, match="params must be a parameter tuple"):
        _arguments.named_tuple((1, 2), "params")
    assert _arguments.items_of([1, 2], int, "n", "fix") == (1, 2)
    for bad in ("ab", [1, "a"], 3):
        with pytest.raises(ValueError, match="n must be a sequence of int"):
            _arguments.items_of(bad, int, "n", "fix")


def test_allocation_refuses_more_than_the_machine_holds(monkeypatch):
    total = _arguments.physical_memory()
    assert total is None or total > 2 ** 20
    assert _arguments.allocation(1024, "a cache", "fix") == 1024
    monkeypatch.setattr(_arguments, "physical_memory", lambda: 2 ** 30)
    with pytest.raises(ValueError, match=r"a cache would take 2 GiB, more than this machine's 1 GiB of memory; fix"):
        _arguments.allocation(2 ** 31, "a cache", "fix")
    assert _arguments.binary_size(10 ** 18) == "888 PiB" and _arguments.binary_size(5) == "5 B"


@given(st.integers(-10**6, 10**6), st.integers(1, 50))
def test_index_accepts_exactly_0_to_n_minus_1(value, n):
    if 0 <= value < n:
        assert _arguments.index(value, n, "layer", "layers") == value
    else:
        with pytest.raises(ValueError, match=rf"layer={value} is out of range: there are {n} layers"):
            _arguments.index(value, n, "layer", "layers")


@pytest.mark.parametrize("bad", [True, np.bool_(False), 0.0, None, "0"])
def test_index_and_count_refuse_what_is_no_whole_number(bad):
    with pytest.raises(ValueError, match="head=.* must be a whole number"):
        _arguments.index(bad, 4, "head", "heads")
    with pytest.raises(ValueError, match="start=.* must be a whole number >= 0"):
        _arguments.count(bad, "start")
    assert _arguments.count(np.int64(3), "start") == 3 and type(_arguments.count(np.int64(3), "start")) is int


@pytest.mark.parametrize("value, kwargs, ok", [
    (0.5, dict(low=0, high=1), True), (0.0, dict(low=0, low_open=True), False), (1.0, dict(high=1, high_open=True), False),
    (1.0, dict(high=1), True), (np.float32(2.0), {}, True), (float("nan"), {}, False), (float("-inf"), {}, False),
    (True, {}, False), ("1", {}, False), (None, {}, False),
])
def test_number_is_a_finite_real_within_its_bounds(value, kwargs, ok):
    if ok:
        assert _arguments.number(value, "lr", **kwargs) == float(value)
    else:
        with pytest.raises(ValueError, match="lr="):
            _arguments.number(value, "lr", **kwargs)


def test_flag_generator_and_path_refuse_by_name_with_the_fix():
    assert _arguments.flag(np.bool_(True), "causal") is True
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match="causal=.* must be True or False"):
            _arguments.flag(bad, "causal")
    rng = np.random.default_rng(0)
    assert _arguments.generator(rng) is rng and _arguments.generator(None, optional=True) is None
    for bad in (None, 0, np.random.RandomState(0)):
        with pytest.raises(ValueError, match=re.escape("pass rng=np.random.default_rng(0)")):
            _arguments.generator(bad)
    assert str(_arguments.path("a/b.npz")) == "a/b.npz"
    for bad in (None, 3, b"a.npz", ""):
        with pytest.raises(ValueError, match="path=.* must be a file path"):
            _arguments.path(bad)


def test_allocation_and_a_path_for_writing_refuse_before_anything_happens(tmp_path):
    assert _arguments.allocation(_arguments.MAX_BYTES, "x", "fix") == _arguments.MAX_BYTES
    with pytest.raises(ValueError, match=r"x would take 4 GiB, more than the 4 GiB .*; fix"):
        _arguments.allocation(_arguments.MAX_BYTES + 1, "x", "fix")
    assert _arguments.path(tmp_path / "a.npz", for_writing=True) == tmp_path / "a.npz"
    with pytest.raises(ValueError, match="is a folder"):
        _arguments.path(tmp_path, for_writing=True)
    with pytest.raises(ValueError, match="does not exist; create it first"):
        _arguments.path(tmp_path / "no" / "a.npz", for_writing=True)
    assert _arguments.path(tmp_path, for_writing=False) == tmp_path  # reading a folder is the reader's to refuse


def test_count_index_instance_items_and_real_refuse_what_they_do_not_take():
    v = _arguments
    assert v.count(0, "seed") == 0 and v.index(1, 2, "layer") == 1 and v.number(8, "s") == 8.0
    assert v.items(np.array(["a", "b"]), "tokens", "['a']") == ["a", "b"] and v.instance(3, int, "n", "") == 3
    for bad, fn in [(-1, lambda x: v.count(x, "seed")), (True, lambda x: v.count(x, "seed")),
                    (-1, lambda x: v.index(x, 2, "layer")), (2, lambda x: v.index(x, 2, "layer")),
                    (0.5, lambda x: v.index(x, 2, "layer")), (True, lambda x: v.index(x, 2, "layer")),
                    ("x", lambda x: v.instance(x, int, "layer", "pass 1")), ("ab", lambda x: v.items(x, "layer", "[1]")),
                    (float("inf"), lambda x: v.number(x, "layer")), ("1", lambda x: v.number(x, "layer")),
                    (False, lambda x: v.number(x, "layer"))]:
        with pytest.raises((ValueError, TypeError), match="seed|layer"):
            fn(bad)


def test_count_index_choice_number_mapping_names():
    assert _arguments.count(np.int64(0), "sinks") == 0 and _arguments.index(np.int64(1), 2, "layer") == 1
    for bad in (-1, 1.0, True, None, "1"):
        with pytest.raises(ValueError, match="sinks="):
            _arguments.count(bad, "sinks")
    for bad in (-1, 2, 102, 0.5, True, None):
        with pytest.raises(ValueError, match="layer="):
            _arguments.index(bad, 2, "layer", "layers")
    assert _arguments.choice(4, (1.0, 4.0), "factor") == 4.0 and _arguments.choice(np.int64(16), (8, 16), "L") == 16
    for bad in ("RoPE", "rop", 3, True, 16.0, None, np.array([16])):
        with pytest.raises(ValueError, match=r"L=.* is not one of the valid choices: 8, 16"):
            _arguments.choice(bad, (8, 16), "L")
    with pytest.raises(ValueError, match="'rope', 'alibi'"):
        _arguments.choice("RoPE", ("rope", "alibi"), "scheme")
    assert _arguments.number(np.float32(0.5), "uniform") == 0.5
    for bad in (np.nan, np.inf, 10**400, "0.5", None, True):
        with pytest.raises(ValueError, match="uniform="):
            _arguments.number(bad, "uniform")
    with pytest.raises(ValueError, match=r"factor=0.0 is outside \(0, inf\]"):
        _arguments.number(0, "factor", 0, low_open=True)
    for bad in ({}, None, [("a", 1)]):
        with pytest.raises(ValueError, match="curves must be a non-empty dict"):
            _arguments.mapping(bad, "curves", "{label: (T,)}")
    assert _arguments.names(["h"], ("h", "h_kv")) == ("h",)
    for bad in ("h", ("h", "hkv"), [3], None):
        with pytest.raises(ValueError, match="show="):
            _arguments.names(bad, ("h", "h_kv"))
