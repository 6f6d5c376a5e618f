"""Checkers of notebook 12 (learner PyTorch code): right answers pass, typical mistakes are named."""
import numpy as np
import pytest

from _mha_checks import require_torch
from mha_course import check
from mha_course.lessons.bridge import torch_state_dict


def _feedback(capsys, checker, fn):
    ok = checker(fn)
    return ok, capsys.readouterr().out


def test_state_dict_right_answer_passes(capsys):
    ok, out = _feedback(capsys, check.torch_state_dict, torch_state_dict)
    assert ok and "✔ torch_state_dict" in out


@pytest.mark.parametrize("mine, named", [
    (lambda p: {"in_proj_weight": np.concatenate([p.W_q, p.W_k, p.W_v]),
                "in_proj_bias": np.concatenate([p.b_q, p.b_k, p.b_v]),
                "out_proj.weight": p.W_o, "out_proj.bias": p.b_o}, "no transposes"),
    (lambda p: {"in_proj_weight": np.concatenate([p.W_k.T, p.W_q.T, p.W_v.T]),
                "in_proj_bias": np.concatenate([p.b_k, p.b_q, p.b_v]),
                "out_proj.weight": p.W_o.T, "out_proj.bias": p.b_o}, "stacked as K, Q, V"),
    (lambda p: {"in_proj_weight": np.concatenate([p.W_q.T, p.W_k.T, p.W_v.T]),
                "in_proj_bias": np.concatenate([p.b_q, p.b_k, p.b_v]),
                "out_proj.weight": p.W_o, "out_proj.bias": p.b_o}, "out_proj.weight is W_o, not W_o.T"),
    (lambda p: {"in_proj_weight": np.concatenate([p.W_q.T, p.W_k.T, p.W_v.T])}, "expected the keys"),
])
def test_state_dict_mistakes_are_named(capsys, mine, named):
    ok, out = _feedback(capsys, check.torch_state_dict, mine)
    assert not ok and named in out


def _attention(torch, scale=True, fill="-inf", dim=-1, flip=False, nan_to_num=True):
    def mine(q, k, v, mask=None):
        s = q @ k.transpose(-2, -1) / (q.shape[-1] ** 0.5 if scale else 1.0)
        if mask is not None:
            s = s.masked_fill(mask if flip else ~mask, float(fill))
        w = torch.softmax(s, dim=dim)
        return (torch.nan_to_num(w) if nan_to_num else w) @ v
    return mine


@pytest.mark.parametrize("kwargs, named", [
    ({}, None),
    ({"scale": False}, "no 1/√d_k scaling"),
    ({"dim": -2}, "softmax over the queries"),
    ({"flip": True}, "mask polarity flipped"),
    ({"fill": 0.0}, "set to 0 instead of -inf"),
    ({"nan_to_num": False}, "fully masked row gives NaN"),
])
def test_torch_attention_checker(capsys, kwargs, named):
    torch = require_torch()
    ok, out = _feedback(capsys, check.torch_attention, _attention(torch, **kwargs))
    assert ok == (named is None)
    assert (named or "✔ torch_attention") in out


@pytest.mark.parametrize("mine, named", [
    (lambda keep: ~keep, None),
    (lambda keep: keep, "the keep-mask passed unchanged"),
    (lambda keep: ~keep.T, "transposed"),
])
def test_torch_attn_mask_checker(capsys, mine, named):
    require_torch()
    ok, out = _feedback(capsys, check.torch_attn_mask, mine)
    assert ok == (named is None)
    assert (named or "✔ torch_attn_mask") in out


def test_unfinished_torch_exercise_is_reported_not_raised(capsys):
    require_torch()

    def stub(q, k, v, mask=None):
        raise NotImplementedError("Exercise 12.3")
    ok, out = _feedback(capsys, check.torch_attention, stub)
    assert not ok and "not finished yet" in out
