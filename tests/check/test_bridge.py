"""Checkers of notebook 12 (learner PyTorch code): right answers in a learner's own words pass, each
typical mistake is named as itself (a numpy result as a type mistake, a float mask as ADDITIVE, a call
of F.scaled_dot_product_attention caught by a spy), uncatalogued mistakes get a located message, and
without torch the torch checkers say "not finished: this exercise needs PyTorch"."""
import numpy as np
import pytest

from _mha_checks import require_torch
from mha_course.check import bridge as cb
from mha_course.lessons.bridge import torch_state_dict

from .verdicts import catalogue, named_as_itself


def run(capsys, checker, fn):
    ok = getattr(cb, checker)(fn)
    return ok, capsys.readouterr().out


def named(out, mistake):
    return f"Looks like: {mistake.name}. Fix: {mistake.fix}" in out


# ----------------------------------------------------------------------------- 12.1 state dict (numpy)
@pytest.mark.parametrize("fn", [
    torch_state_dict,
    lambda p: {"in_proj_weight": np.vstack([p.W_q, p.W_k, p.W_v]).reshape(3, *p.W_q.shape).transpose(0, 2, 1)
               .reshape(-1, p.W_q.shape[0]), "in_proj_bias": np.hstack([p.b_q, p.b_k, p.b_v]),
               "out_proj.weight": np.transpose(p.W_o), "out_proj.bias": p.b_o.copy()},
    lambda p: {"out_proj.bias": p.b_o, "out_proj.weight": p.W_o.T, "in_proj_bias": np.r_[p.b_q, p.b_k, p.b_v],
               "in_proj_weight": np.concatenate([p.W_q, p.W_k, p.W_v], axis=1).T},
    lambda p: dict(zip(["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"],
                       [np.stack([p.W_q.T, p.W_k.T, p.W_v.T]).reshape(-1, len(p.b_o)),
                        np.stack([p.b_q, p.b_k, p.b_v]).ravel(), p.W_o.swapaxes(0, 1), p.b_o])),
])
def test_state_dict_variants_pass(capsys, fn):
    ok, out = run(capsys, "torch_state_dict", fn)
    assert ok, out


def test_state_dict_stacked_along_the_wrong_axis_is_named(capsys):
    ok, out = run(capsys, "torch_state_dict", lambda p: {
        "in_proj_weight": np.hstack([p.W_q, p.W_k, p.W_v]), "in_proj_bias": np.hstack([p.b_q, p.b_k, p.b_v]),
        "out_proj.weight": p.W_o, "out_proj.bias": p.b_o})
    assert not ok and named(out, cb.TORCH_STATE_DICT.mistakes[4]), out


# ----------------------------------------------------------------------------- every catalogued mistake
EXERCISES, PAIRS = catalogue(cb.TORCH_STATE_DICT, cb.TORCH_ATTN_MASK, cb.TORCH_ATTENTION)


@pytest.mark.parametrize("name, i", PAIRS, ids=[f"{n}-{i}" for n, i in PAIRS])
def test_each_catalogued_mistake_is_named_as_itself(capsys, name, i):
    named_as_itself(capsys, EXERCISES[name], i)


# ----------------------------------------------------------------------------- 12.2 attn_mask (torch)
def test_attn_mask_variants_pass(capsys):
    torch = require_torch()
    for fn in (lambda keep: ~keep, lambda keep: torch.logical_not(keep), lambda keep: keep == 0,
               lambda keep: keep.logical_not().clone(), lambda keep: torch.where(keep, False, True)):
        ok, out = run(capsys, "torch_attn_mask", fn)
        assert ok, out


@pytest.mark.parametrize("fn, index", [
    (lambda keep: keep, 0),
    (lambda keep: (~keep).float(), 1),
    (lambda keep: keep.double(), 1),
    (lambda keep: __import__("torch").zeros(keep.shape, dtype=__import__("torch").float64)
     .masked_fill(~keep, float("-inf")), 2),
    (lambda keep: ~keep.numpy(), 3),
    (lambda keep: np.logical_not(keep.numpy()), 3),
    (lambda keep: (~keep).int(), 4),
    (lambda keep: (~keep).T, 5),
    (lambda keep: ~__import__("torch").tril(__import__("torch").ones(keep.shape, dtype=bool)), 6),
])
def test_attn_mask_learner_mistakes_are_named(capsys, fn, index):
    require_torch()
    ok, out = run(capsys, "torch_attn_mask", fn)
    assert not ok and named(out, cb.TORCH_ATTN_MASK.mistakes[index]), out


def test_a_float_mask_is_explained_as_additive_not_as_a_dtype(capsys):
    require_torch()
    ok, out = run(capsys, "torch_attn_mask", lambda keep: (~keep).float())
    assert not ok and "ADDS" in out and "astype(bool)" not in out, out


# ----------------------------------------------------------------------------- 12.3 attention (torch)
def attention_variants(torch):
    F = torch.nn.functional

    def a(q, k, v, mask=None):
        s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        s = s if mask is None else s.masked_fill(~mask, float("-inf"))
        return torch.nan_to_num(torch.softmax(s, dim=-1)) @ v

    def b(q, k, v, mask=None):                 # einsum, where, and an explicit zero for empty rows
        s = torch.einsum("...td,...sd->...ts", q, k) / torch.sqrt(torch.tensor(float(q.size(-1))))
        if mask is not None:
            s = torch.where(mask, s, torch.tensor(float("-inf"), dtype=s.dtype))
        w = F.softmax(s, dim=-1)
        return torch.where(torch.isnan(w), torch.zeros_like(w), w) @ v

    def c(q, k, v, mask=None):                 # exp by hand with the row max
        s = q @ k.mT * q.shape[-1] ** -0.5
        if mask is not None:
            s = s.masked_fill(mask.logical_not(), -torch.inf)
        top = s.amax(-1, keepdim=True).nan_to_num(neginf=0.0)
        e = torch.exp(s - top)
        total = e.sum(-1, keepdim=True)
        return (e / total.clamp_min(1e-300)) @ v

    def d(q, k, v, mask=None):                 # math.sqrt, scale q first
        import math
        s = torch.matmul(q / math.sqrt(q.shape[-1]), k.transpose(-1, -2))
        if mask is not None:
            s[..., ~mask] = float("-inf")
        return torch.softmax(s, -1).nan_to_num(0.0) @ v
    return [a, b, c, d]


def test_attention_variants_pass(capsys):
    torch = require_torch()
    for fn in attention_variants(torch):
        ok, out = run(capsys, "torch_attention", fn)
        assert ok, out


def _learner(torch, fill=float("-inf"), after=False, call_sdpa=False):
    F = torch.nn.functional

    def mine(q, k, v, mask=None):
        if call_sdpa:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        if after:
            w = torch.softmax(s, dim=-1)
            return (w if mask is None else w * mask) @ v
        s = s if mask is None else s.masked_fill(~mask, fill)
        return torch.nan_to_num(torch.softmax(s, dim=-1)) @ v
    return mine


def mistake(exercise, words):
    """The catalogued mistake of ``exercise`` whose name contains ``words``."""
    found = [m for m in exercise.mistakes if words in m.name]
    assert len(found) == 1, words
    return found[0]


@pytest.mark.parametrize("kwargs, words", [({"fill": -1e9}, "-1e9"), ({"fill": float("inf")}, "+inf"),
                                           ({"after": True}, "AFTER the softmax"),
                                           ({"call_sdpa": True}, "F.scaled_dot_product_attention called")])
def test_attention_learner_mistakes_are_named(capsys, kwargs, words):
    torch = require_torch()
    ok, out = run(capsys, "torch_attention", _learner(torch, **kwargs))
    assert not ok and named(out, mistake(cb.TORCH_ATTENTION, words)), out


def test_the_spy_sees_a_from_import_and_is_removed_afterwards(capsys):
    torch = require_torch()
    from torch.nn.functional import scaled_dot_product_attention as sdpa
    namespace = {"sdpa": sdpa}
    exec("def mine(q, k, v, mask=None):\n    return sdpa(q, k, v, attn_mask=mask)\n", namespace)
    ok, out = run(capsys, "torch_attention", namespace["mine"])
    assert not ok and named(out, mistake(cb.TORCH_ATTENTION, "F.scaled_dot_product_attention called")), out
    assert namespace["sdpa"] is sdpa and torch.nn.functional.scaled_dot_product_attention is sdpa


UNKNOWN_ATTENTION = [
    lambda torch: (lambda q, k, v, mask=None: 2 * _learner(torch)(q, k, v, mask)),
    lambda torch: (lambda q, k, v, mask=None: _learner(torch)(q, k, v, mask) + 0.25),
]


@pytest.mark.parametrize("make", UNKNOWN_ATTENTION)
def test_an_uncatalogued_attention_mistake_is_located(capsys, make):
    torch = require_torch()
    ok, out = run(capsys, "torch_attention", make(torch))
    assert not ok and "Looks like" not in out and "expected" in out, out


@pytest.mark.parametrize("fn", [lambda keep: ~keep[:, :1].expand(keep.shape).clone(),
                                lambda keep: __import__("torch").ones_like(keep)])
def test_an_uncatalogued_mask_mistake_is_located(capsys, fn):
    require_torch()
    ok, out = run(capsys, "torch_attn_mask", fn)
    assert not ok and "Looks like" not in out and "expected" in out, out


UNKNOWN_STATE = [
    lambda p: {**torch_state_dict(p), "in_proj_bias": np.zeros(3 * len(p.b_o))},
    lambda p: {**torch_state_dict(p), "out_proj.weight": 2 * p.W_o.T},
]


@pytest.mark.parametrize("fn", UNKNOWN_STATE)
def test_an_uncatalogued_state_dict_mistake_is_located(capsys, fn):
    ok, out = run(capsys, "torch_state_dict", fn)
    assert not ok and "Looks like" not in out and "expected" in out, out


# ----------------------------------------------------------------------------- without torch, stubs
def test_without_torch_the_torch_checkers_are_not_finished(capsys, monkeypatch):
    monkeypatch.setattr(cb, "_torch", lambda: None)
    for name in ("torch_attn_mask", "torch_attention"):
        ok, out = run(capsys, name, lambda *a: None)
        assert ok is False and out.startswith(f"⋯ {name}: not finished: this exercise needs PyTorch: "
                                              "pip install torch==2.13.0"), out


def test_unfinished_torch_exercise_is_reported_not_raised(capsys):
    require_torch()

    def stub(q, k, v, mask=None):
        raise NotImplementedError("Exercise 12.3")
    ok, out = run(capsys, "torch_attention", stub)
    assert not ok and "not finished yet" in out


# ---- learner code written anew, each class named
from mha_course import check as _check  # noqa: E402

from .verdicts import says as _says  # noqa: E402


def test_a_lone_untransposed_in_proj_and_a_rotated_bias_order_are_named(capsys):
    require_torch()

    def bias_order(p):
        return {**torch_state_dict(p), "in_proj_bias": np.concatenate([p.b_k, p.b_v, p.b_q])}
    _says(capsys, _check.torch_state_dict, bias_order, "in_proj_bias stacked as K, V, Q")
    def untransposed(p):
        return {**torch_state_dict(p), "in_proj_weight": np.vstack([p.W_q, p.W_k, p.W_v])}
    _says(capsys, _check.torch_state_dict, untransposed, "in_proj_weight not transposed")


def test_the_scale_after_the_softmax_is_named_in_torch(capsys):
    torch = require_torch()

    def learner(q, k, v, mask=None):
        s = torch.matmul(q, k.transpose(-2, -1))
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        return torch.nan_to_num(torch.softmax(s, dim=-1)) @ v / q.shape[-1] ** 0.5
    _says(capsys, _check.torch_attention, learner, "the 1/√d_k applied after the softmax")


def test_torch_attention_names_a_result_cast_to_float32(capsys):
    """float64 tensors in, a float32 result out (.float() on the way): right to float32's precision, refused."""
    torch = require_torch()

    def halved_precision(q, k, v, mask=None):
        s = (q.float() @ k.float().transpose(-2, -1)) / q.shape[-1] ** 0.5
        s = s if mask is None else s.masked_fill(~mask, float("-inf"))
        return torch.nan_to_num(torch.softmax(s, dim=-1)) @ v.float()
    assert _check.torch_attention(halved_precision) is False
    assert "the dtype is float32 where the inputs are float64" in capsys.readouterr().out


def test_torch_attention_names_the_weights_returned_for_the_output(capsys):
    torch = require_torch()

    def weights_only(q, k, v, mask=None):
        s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        s = s if mask is None else s.masked_fill(~mask, float("-inf"))
        return torch.nan_to_num(torch.softmax(s, dim=-1))
    assert _check.torch_attention(weights_only) is False
    assert "Looks like: the attention weights returned, not the output" in capsys.readouterr().out
