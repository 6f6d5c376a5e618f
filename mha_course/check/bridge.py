"""Checkers for notebook 12: ``torch_state_dict``, ``torch_attn_mask`` and ``torch_attention``.

The learner writes PyTorch code; the references are the package's numpy functions. The learner's
function is wrapped so that it receives torch tensors and its tensors come back as numpy arrays
(torch is imported only when a torch checker runs). Every case has another d_model (or batch,
heads, T, S, d_k), and the attention cases include a fully masked row.
"""
from __future__ import annotations

import functools
import importlib

import numpy as np

from ..attention import scaled_dot_product_attention as _sdpa
from ..attention import softmax as _softmax
from ..lessons.bridge import torch_state_dict as _state_dict
from ..mha import init_params
from .engine import Case, Exercise, Mistake

__all__ = ["torch_state_dict", "torch_attn_mask", "torch_attention",
           "TORCH_STATE_DICT", "TORCH_ATTN_MASK", "TORCH_ATTENTION"]


def _stacked(order, transpose=True):
    """A wrong state dict: the input projections stacked in ``order`` (and maybe not transposed)."""
    def state(p):
        get = (lambda W: W.T) if transpose else (lambda W: W)
        Ws = {"q": p.W_q, "k": p.W_k, "v": p.W_v}
        bs = {"q": p.b_q, "k": p.b_k, "v": p.b_v}
        return {"in_proj_weight": np.concatenate([get(Ws[c]) for c in order]),
                "in_proj_bias": np.concatenate([bs[c] for c in order]),
                "out_proj.weight": get(p.W_o), "out_proj.bias": p.b_o}
    return state


def _state_cases():
    rng = np.random.default_rng(20241212)
    return [Case((init_params(d, rng=rng, bias=True),), f"d_model = {d}, with biases") for d in (3, 5, 4, 6)]


TORCH_STATE_DICT = Exercise("torch_state_dict", _state_dict, _state_cases, (
    Mistake("no transposes: nn.Linear stores weight as (out, in) and computes x @ weight.T",
            "stack W_q.T, W_k.T, W_v.T, and use W_o.T for out_proj.weight", _stacked("qkv", transpose=False)),
    Mistake("the input projections stacked as K, Q, V", "in_proj_weight stacks Q, then K, then V",
            _stacked("kqv")),
    Mistake("the input projections stacked as Q, V, K", "in_proj_weight stacks Q, then K, then V",
            _stacked("qvk")),
    Mistake("out_proj.weight is W_o, not W_o.T", "out_proj is an nn.Linear too: its weight is W_o.T",
            lambda p: {**_stacked("qkv")(p), "out_proj.weight": p.W_o}),
))


def torch_state_dict(fn) -> bool:
    """Check ``fn(params) -> dict`` of nn.MultiheadAttention's arrays: in_proj_weight (3D, D), ... .

    >>> from mha_course.lessons.bridge import torch_state_dict as mine
    >>> torch_state_dict(mine)
    ✔ torch_state_dict: all 4 cases match
    True
    """
    return TORCH_STATE_DICT.check(fn)


def _named_like(fn, wrapper):
    """``wrapper`` under ``fn``'s name (the feedback names the learner's function), or fn if not callable."""
    return functools.wraps(fn)(wrapper) if callable(fn) else fn


def _torch():
    try:
        return importlib.import_module("torch")
    except ImportError as exc:
        raise ImportError("this checker runs your PyTorch code: pip install torch==2.13.0") from exc


def _torch_missing() -> bool:
    try:
        importlib.import_module("torch")
    except ImportError:
        return True
    return False


def _without_torch(name: str) -> bool:
    """What a torch checker says without PyTorch: not finished (a missing package is no mistake)."""
    print(f"⋯ {name}: not finished: this exercise needs PyTorch: pip install torch==2.13.0 "
          "(the CPU build is enough), then run this cell again")
    return False


def _in_torch(fn):
    """fn over torch tensors, seen as a function over numpy arrays (None stays None)."""
    def numpy_fn(*args):
        torch = _torch()
        out = fn(*(None if a is None else torch.from_numpy(np.ascontiguousarray(a)) for a in args))
        return out.detach().cpu().numpy() if hasattr(out, "detach") else out
    return _named_like(fn, numpy_fn)


def _mask_cases():
    rng = np.random.default_rng(20241213)
    causal = [np.tril(np.ones((n, n), dtype=bool)) for n in (3, 6)]
    return [Case((m,), "a causal mask") for m in causal] + [
        Case((rng.random(s) < 0.6,), f"a random {s} mask") for s in ((4, 7), (2, 5))]


TORCH_ATTN_MASK = Exercise("torch_attn_mask", lambda keep: ~keep, _mask_cases, (
    Mistake("the keep-mask passed unchanged: nn.MultiheadAttention reads True as blocked, so every query "
            "would attend exactly where it must not (the future leaks)", "return ~keep", lambda keep: keep.copy()),
    Mistake("an additive float mask (0 / -inf): PyTorch accepts it, but this exercise asks for the bool one",
            "return ~keep (bool, True = blocked)", lambda keep: np.where(keep, 0.0, -np.inf)),
    Mistake("the mask transposed", "keep rows as queries and columns as keys: return ~keep", lambda keep: ~keep.T),
))


def torch_attn_mask(fn) -> bool:
    """Check ``fn(keep) -> attn_mask``: a torch bool (T, S) keep-mask -> nn.MultiheadAttention's (T, S).

    The right answer is ``lambda keep: ~keep`` (tests/test_check_bridge.py runs it with torch).
    """
    return _without_torch("torch_attn_mask") if _torch_missing() else TORCH_ATTN_MASK.check(_in_torch(fn))


def _attention_with(scale, fill=-np.inf, axis=-1, flip=False, zero_empty=True):
    """Attention computed the way a learner might; the reference with the defaults and scale=√d_k."""
    def attend(Q, K, V, mask=None):
        scores = Q @ np.swapaxes(K, -1, -2) / scale(Q, K)              # (..., T, S)
        if mask is not None:
            scores = np.where(~mask if flip else mask, scores, fill)
        weights = _softmax(scores, axis=axis) if zero_empty else _naive_softmax(scores, axis)
        return weights @ V                                             # (..., T, d_v)
    return attend


def _naive_softmax(z, axis):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)                         # 0/0 = NaN on an all -inf row


def _sqrt_dk(Q, K):
    return np.sqrt(Q.shape[-1])


def _attention_cases():
    rng = np.random.default_rng(20241214)
    sizes = ((1, 1, 3, 3, 2, 2), (2, 2, 4, 5, 4, 3), (1, 3, 2, 6, 8, 5), (3, 1, 5, 4, 3, 4))
    cases = []
    for B, h, T, S, d_k, d_v in sizes:
        Q, K, V = (rng.normal(size=(B, h, n, d)) for n, d in ((T, d_k), (S, d_k), (S, d_v)))
        mask = rng.random((T, S)) < 0.7
        mask[0] = False                                                # query 0 may attend nothing
        cases += [Case((Q, K, V, None), f"no mask, d_k = {d_k}"),
                  Case((Q, K, V, mask), f"a ({T}, {S}) mask whose row 0 is fully masked")]
    return cases


TORCH_ATTENTION = Exercise("torch_attention", lambda Q, K, V, mask=None: _sdpa(Q, K, V, mask)[0],
                           _attention_cases, (
    Mistake("no 1/√d_k scaling", "divide the scores by q.shape[-1] ** 0.5",
            _attention_with(lambda Q, K: 1.0)),
    Mistake("scaled by d_k instead of √d_k", "divide by q.shape[-1] ** 0.5",
            _attention_with(lambda Q, K: Q.shape[-1])),
    Mistake("softmax over the queries (dim=-2) instead of the keys", "torch.softmax(scores, dim=-1)",
            _attention_with(_sqrt_dk, axis=-2)),
    Mistake("the mask polarity flipped: masked_fill(mask, -inf) blocks the allowed keys",
            "our mask means True = may attend: scores.masked_fill(~mask, float('-inf'))",
            _attention_with(_sqrt_dk, flip=True)),
    Mistake("blocked scores set to 0 instead of -inf: a score of 0 still gets weight",
            "masked_fill(~mask, float('-inf'))", _attention_with(_sqrt_dk, fill=0.0)),
    Mistake("a fully masked row gives NaN (softmax of only -inf)",
            "torch.nan_to_num(torch.softmax(scores, dim=-1)) turns that row into zeros",
            _attention_with(_sqrt_dk, zero_empty=False)),
))


def torch_attention(fn) -> bool:
    """Check ``fn(q, k, v, mask=None) -> out`` on torch tensors: q (..., T, d_k), k (..., S, d_k), v (..., S, d_v).

    A right answer (tests/test_check_bridge.py runs it with torch)::

        def mine(q, k, v, mask=None):
            s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
            s = s if mask is None else s.masked_fill(~mask, float("-inf"))
            return torch.nan_to_num(torch.softmax(s, dim=-1)) @ v
    """
    return _without_torch("torch_attention") if _torch_missing() else TORCH_ATTENTION.check(_in_torch(fn))
