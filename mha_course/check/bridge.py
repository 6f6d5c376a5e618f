"""Checkers for notebook 12: ``torch_state_dict``, ``torch_attn_mask`` and ``torch_attention``.

The learner writes PyTorch code; the references are the package's numpy functions. The learner's
function is wrapped so that it receives torch tensors and its tensors come back as numpy arrays
(torch is imported only when a torch checker runs; without torch the two torch checkers report
"not finished: this exercise needs PyTorch" and never raise). Every case has another d_model (or
batch, heads, T, S, d_k, d_v), and the attention cases include a fully masked row.

What the exercises state is checked as well, by the wrapper:

- ``torch_attn_mask`` must return a torch tensor: the right values in a numpy array are named as
  that mistake (``nn.MultiheadAttention`` raises ``TypeError`` on a numpy array); a FLOAT mask is explained for what it is: ``nn.MultiheadAttention`` ADDS
  a float mask to the scores, so ``(~keep).float()`` adds 1 to the blocked scores and blocks nothing.
- ``torch_attention`` must not call ``F.scaled_dot_product_attention``: a spy stands in for it
  (in ``torch.nn.functional`` and in the learner's own globals) while the learner's code runs.
"""
from __future__ import annotations

import functools
import importlib

import numpy as np

from ..attention import scaled_dot_product_attention as _sdpa
from ..attention import softmax as _softmax
from ..lessons.bridge import torch_state_dict as _state_dict
from ..mha import init_params
from .engine import Case, Exercise, Mistake, report
from .vocabulary import TWICE_D_K

__all__ = ["torch_state_dict", "torch_attn_mask", "torch_attention",
           "TORCH_STATE_DICT", "TORCH_ATTN_MASK", "TORCH_ATTENTION",
           "NotATorchTensor", "FloatMaskIsAdded", "AdditiveFloatMask", "IntegerMask", "ForbiddenCall"]

INSTALL_TORCH = "pip install torch==2.13.0"


class NotATorchTensor(Exception):
    """The learner's torch function returned a numpy array (or a list) where a tensor is needed."""


class FloatMaskIsAdded(Exception):
    """A float attn_mask of 0s and 1s: nn.MultiheadAttention adds it to the scores (it blocks nothing)."""


class AdditiveFloatMask(Exception):
    """A float attn_mask of 0 and -inf: right for nn.MultiheadAttention, but the exercise asks for bool."""


class IntegerMask(Exception):
    """An integer attn_mask: nn.MultiheadAttention takes only bool or float masks."""


class ForbiddenCall(Exception):
    """The learner's code called the function the exercise asks them to write themselves."""


# ---------------------------------------------------------------------------------------
# 12.1 the state dict
# ---------------------------------------------------------------------------------------

def _stacked(order="qkv", transpose=True, axis=0, bias_order=None, out_transpose=None):
    """A wrong state dict: the input projections stacked in ``order`` along ``axis`` (maybe not transposed),
    the biases in ``bias_order`` (default: the weights' order), out_proj.weight transposed as the others
    unless ``out_transpose`` says otherwise."""
    def state(p):
        get = (lambda W: W.T) if transpose else (lambda W: W)
        Ws = {"q": p.W_q, "k": p.W_k, "v": p.W_v}
        bs = {"q": p.b_q, "k": p.b_k, "v": p.b_v}
        out_t = transpose if out_transpose is None else out_transpose
        return {"in_proj_weight": np.concatenate([get(Ws[c]) for c in order], axis=axis),
                "in_proj_bias": np.concatenate([bs[c] for c in (bias_order or order)]),
                "out_proj.weight": p.W_o.T if out_t else p.W_o, "out_proj.bias": p.b_o}
    return state


def _state_cases():
    rng = np.random.default_rng(20241212)
    return [Case((init_params(d, rng=rng, bias=True),), f"d_model = {d}, with biases") for d in (3, 5, 4, 6)]


def _without(key):
    return lambda p: {k: v for k, v in _stacked()(p).items() if k != key}


TORCH_STATE_DICT = Exercise("torch_state_dict", _state_dict, _state_cases, (
    Mistake("no transposes: nn.Linear stores weight as (out, in) and computes x @ weight.T",
            "stack W_q.T, W_k.T, W_v.T, and use W_o.T for out_proj.weight", _stacked(transpose=False)),
    Mistake("the input projections stacked as K, Q, V", "in_proj_weight stacks Q, then K, then V",
            _stacked("kqv")),
    Mistake("the input projections stacked as Q, V, K", "in_proj_weight stacks Q, then K, then V",
            _stacked("qvk")),
    Mistake("out_proj.weight is W_o, not W_o.T", "out_proj is an nn.Linear too: its weight is W_o.T",
            lambda p: {**_stacked()(p), "out_proj.weight": p.W_o}),
    Mistake("the input projections put side by side, [W_q | W_k | W_v] of shape (D, 3D): that is "
            "in_proj_weight.T", "stack the transposes along the rows: np.concatenate([W_q.T, W_k.T, W_v.T]) "
            "(axis=0), shape (3D, D)", _stacked(transpose=False, axis=1)),
    Mistake("the transposes put side by side (axis=1): shape (D, 3D), not (3D, D)",
            "np.concatenate([W_q.T, W_k.T, W_v.T], axis=0): one block of D rows per projection",
            _stacked(axis=1)),
    Mistake("out_proj.bias is missing: nn.MultiheadAttention(bias=True) has it",
            "add \"out_proj.bias\": params.b_o", _without("out_proj.bias")),
    Mistake("in_proj_bias is missing: nn.MultiheadAttention(bias=True) has it",
            "add \"in_proj_bias\": np.concatenate([b_q, b_k, b_v])", _without("in_proj_bias")),
    *(Mistake(f"in_proj_bias stacked as {', '.join(o.upper())}, not in the weights' order Q, K, V",
              "np.concatenate([b_q, b_k, b_v]): the same order as in_proj_weight", _stacked(bias_order=o))
      for o in ("kvq", "vqk")),  # a rotation; a swap of two is derived from the reference (.derive)
    Mistake("in_proj_weight not transposed (W_q, W_k, W_v stacked as they are; out_proj.weight is transposed): "
            "nn.Linear stores weight as (out, in)", "stack W_q.T, W_k.T, W_v.T",
            _stacked(transpose=False, out_transpose=True)),
))


def torch_state_dict(fn) -> bool:
    """Check ``fn(params) -> dict`` of nn.MultiheadAttention's arrays: in_proj_weight (3D, D), ... .

    >>> from mha_course.lessons.bridge import torch_state_dict as mine
    >>> torch_state_dict(mine)
    ✔ torch_state_dict: all 4 cases match
    True
    """
    return TORCH_STATE_DICT.check(fn)


# ---------------------------------------------------------------------------------------
# running the learner's torch code
# ---------------------------------------------------------------------------------------

def _named_like(fn, wrapper):
    """``wrapper`` under ``fn``'s name (the feedback names the learner's function), or fn if not callable."""
    return functools.wraps(fn)(wrapper) if callable(fn) else fn


def _torch():
    """torch, or None when it is not installed."""
    try:
        return importlib.import_module("torch")
    except ImportError:
        return None


def _needs_torch(name) -> bool:
    """Report "not finished: needs PyTorch" (and return True) when torch is missing."""
    if _torch() is not None:
        return False
    report(name, "unfinished", [f"⋯ {name}: not finished: this exercise needs PyTorch: {INSTALL_TORCH} "
                                "(the CPU build is enough), then run this cell again"])
    return True


def _in_torch(fn, spy=None):
    """fn over torch tensors, seen as a function over numpy arrays (None stays None).

    Its tensors come back as numpy arrays; anything else comes back as it is.
    """
    def numpy_fn(*args):
        torch = _torch()
        tensors = [None if a is None else torch.from_numpy(np.ascontiguousarray(a)) for a in args]
        with _spying(fn, torch, spy):
            out = fn(*tensors)
        return out.detach().cpu().numpy() if isinstance(out, torch.Tensor) else out
    return _named_like(fn, numpy_fn)


class _spying:
    """While the learner's code runs, F.<spy> (and any global of the learner bound to it) raises ForbiddenCall."""

    def __init__(self, fn, torch, spy):
        self.fn, self.spy, self.patched = fn, spy, []
        self.F = torch.nn.functional if spy else None

    def __enter__(self):
        if not self.spy:
            return self
        original = getattr(self.F, self.spy)

        def forbidden(*args, **kwargs):
            raise ForbiddenCall(f"it calls F.{self.spy}, which this exercise asks you to write yourself")
        self.patched.append((self.F, self.spy, original))
        learner_globals = getattr(self.fn, "__globals__", {})
        self.patched += [(learner_globals, k, v) for k, v in list(learner_globals.items()) if v is original]
        for where, key, _ in self.patched:
            if isinstance(where, dict):
                where[key] = forbidden
            else:
                setattr(where, key, forbidden)
        return self

    def __exit__(self, *exc):
        for where, key, original in reversed(self.patched):
            if isinstance(where, dict):
                where[key] = original
            else:
                setattr(where, key, original)
        return False


# ---------------------------------------------------------------------------------------
# 12.2 the attn_mask
# ---------------------------------------------------------------------------------------

def _mask_cases():
    rng = np.random.default_rng(20241213)
    causal = [np.tril(np.ones((n, n), dtype=bool)) for n in (3, 6)]
    blocked_row = rng.random((5, 5)) < 0.6
    blocked_row[2] = False  # query 2 may attend nothing: its row of the result is all True (blocked), as it is
    return [Case((m,), "a causal mask") for m in causal] + [
        Case((rng.random(s) < 0.6,), f"a random {s} mask") for s in ((4, 7), (2, 5))] + [
        Case((blocked_row,), "a random (5, 5) mask, row 2 fully blocked")]


def _raises(exc_type, message):
    def fn(*args):
        raise exc_type(message)
    return fn


def _mask_in_torch(fn):
    """The learner's attn_mask as numpy, judged as nn.MultiheadAttention would take it: right values
    in a numpy array are a type mistake (the module needs a tensor), a float mask is ADDED to the scores."""
    def numpy_fn(keep):
        torch = _torch()
        out = fn(torch.from_numpy(np.ascontiguousarray(keep)))
        if not isinstance(out, torch.Tensor):
            if isinstance(out, (np.ndarray, list)) and np.shape(out) == keep.shape and np.array_equal(out, ~keep):
                raise NotATorchTensor(f"{getattr(fn, '__name__', 'your function')} returned a "
                                      f"{type(out).__module__}.{type(out).__name__}, not a torch tensor")
            return out
        out = out.detach().cpu().numpy()
        if out.dtype.kind in "iu" and out.shape == keep.shape and np.array_equal(out, ~keep):
            raise IntegerMask(f"it returned an integer tensor ({out.dtype})")
        if out.dtype.kind == "f" and out.shape == keep.shape:
            if np.array_equal(out, np.where(keep, 0.0, -np.inf)):
                raise AdditiveFloatMask("it returned a float mask of 0 and -inf")
            if np.isin(out, (0.0, 1.0)).all():
                raise FloatMaskIsAdded("it returned a float mask of 0s and 1s, which nn.MultiheadAttention "
                                       "adds to the scores")
        return out
    return _named_like(fn, numpy_fn)


def _attn_mask_ref(keep):
    """keep (..., T, S) bool, True = may attend -> attn_mask (..., T, S) bool, True = blocked (PyTorch's reading)."""
    return ~keep


TORCH_ATTN_MASK = Exercise("torch_attn_mask", _attn_mask_ref, _mask_cases, (
    Mistake("the keep-mask passed unchanged: nn.MultiheadAttention reads True as blocked, so every query "
            "would attend exactly where it must not (the future leaks)", "return ~keep", lambda keep: keep.copy()),
    Mistake("a float mask of 0s and 1s ((~keep).float() or keep.float()): nn.MultiheadAttention ADDS a float "
            "attn_mask to the scores, so it only shifts some scores by 1 and blocks nothing",
            "return the bool tensor itself: ~keep (True = blocked); tensors have no .astype",
            _raises(FloatMaskIsAdded, "a float mask of 0s and 1s")),
    Mistake("an additive float mask (0 where allowed, -inf where blocked): nn.MultiheadAttention adds it to the "
            "scores and blocks the right keys, but this exercise asks for the bool mask",
            "return ~keep (bool, True = blocked)", _raises(AdditiveFloatMask, "a float mask of 0 and -inf")),
    Mistake("the right values in a numpy array, not a torch tensor (keep.numpy()): nn.MultiheadAttention "
            "raises TypeError on it", "stay in torch: return ~keep (or torch.logical_not(keep))",
            _raises(NotATorchTensor, "a numpy array")),
    Mistake("an integer tensor (.int(), .long()): nn.MultiheadAttention takes only a bool or a float attn_mask",
            "return the bool tensor ~keep itself", _raises(IntegerMask, "an integer mask")),
    Mistake("the mask transposed", "keep rows as queries and columns as keys: return ~keep", lambda keep: ~keep.T),
    Mistake("a causal mask built from the shape, whatever keep says: keep may be any mask (padding, random)",
            "negate the mask you are given: return ~keep",
            lambda keep: ~np.tril(np.ones(keep.shape, dtype=bool))),
))


def torch_attn_mask(fn) -> bool:
    """Check ``fn(keep) -> attn_mask``: a torch bool (T, S) keep-mask -> nn.MultiheadAttention's (T, S).

    The right answer is ``lambda keep: ~keep`` (tests/check/test_bridge.py runs it with torch).
    Without torch it reports "not finished: this exercise needs PyTorch".
    """
    if callable(fn) and _needs_torch("torch_attn_mask"):
        return False
    return TORCH_ATTN_MASK.check(_mask_in_torch(fn))


# ---------------------------------------------------------------------------------------
# 12.3 attention in torch
# ---------------------------------------------------------------------------------------

def _attention_with(scale, fill=-np.inf, axis=-1, flip=False, zero_empty=True, after=False, nan_zero=False,
                    scale_after=False):
    """Attention computed the way a learner might; the reference with the defaults and scale=√d_k
    (``scale_after``: the weights divided by it after the softmax, the scores left unscaled)."""
    def attend(Q, K, V, mask=None):
        if scale_after:
            return attend_unscaled(Q, K, V, mask) / scale(Q, K, V)
        scores = Q @ np.swapaxes(K, -1, -2) / scale(Q, K, V)           # (..., T, S)
        if after and mask is not None:                                 # the mask multiplied after the softmax
            return (_softmax(scores, axis=axis) * mask) @ V
        if mask is not None:
            scores = np.where(~mask if flip else mask, scores, fill)
        weights = _softmax(scores, axis=axis) if zero_empty else _naive_softmax(scores, axis)
        return (np.nan_to_num(weights) if nan_zero else weights) @ V   # (..., T, d_v)

    def attend_unscaled(Q, K, V, mask=None):
        scores = Q @ np.swapaxes(K, -1, -2)                             # (..., T, S)
        weights = _softmax(scores if mask is None else np.where(mask, scores, -np.inf), axis=axis)
        return weights @ V
    return attend


def _naive_softmax(z, axis):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)                         # 0/0 = NaN on an all -inf row


def _sqrt_dk(Q, K, V):
    return np.sqrt(Q.shape[-1])


def _attention_cases():
    rng = np.random.default_rng(20241214)
    sizes = ((1, 1, 3, 3, 2, 2), (2, 2, 4, 5, 4, 3), (1, 3, 2, 6, 8, 5), (3, 1, 5, 4, 3, 4))
    cases = []
    for B, h, T, S, d_k, d_v in sizes:
        Q, K, V = (rng.normal(size=(B, h, n, d)) for n, d in ((T, d_k), (S, d_k), (S, d_v)))
        if B == 3:  # large scores (Q and K × 30, scores near 1000): exp overflows unless each row's max goes first
            Q, K = 30 * Q, 30 * K
        mask = rng.random((T, S)) < 0.7
        mask[0] = False                                                # query 0 may attend nothing
        mask[-1, 0] = True                                             # the last query may attend a key
        cases += [Case((Q, K, V, None), f"no mask, d_k = {d_k}, d_v = {d_v}" + (", large scores" if B == 3 else "")),
                  Case((Q, K, V, mask), f"a ({T}, {S}) mask whose row 0 is fully masked"
                       + (", large scores" if B == 3 else ""))]
    return cases


def _torch_attention_ref(Q, K, V, mask=None):
    """Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v) -> out (..., T, d_v)."""
    return _sdpa(Q, K, V, mask)[0]


TORCH_ATTENTION = Exercise("torch_attention", _torch_attention_ref,
                           _attention_cases, axes={"result": ("query", "feature")}, strict_types=True,
                           sizes=lambda Q, K, V, mask=None: {"T": Q.shape[-2], "S": K.shape[-2], "d_k": Q.shape[-1],
                                                             "d_v": V.shape[-1]}, mistakes=(
    Mistake("the attention weights returned, not the output weights @ v", "return torch.softmax(scores, dim=-1) @ v",
            lambda Q, K, V, mask=None: _sdpa(Q, K, V, mask)[1]),
    Mistake("no 1/√d_k scaling", "divide the scores by q.shape[-1] ** 0.5",
            _attention_with(lambda Q, K, V: 1.0)),
    Mistake("scaled by d_k instead of √d_k", "divide by q.shape[-1] ** 0.5",
            _attention_with(lambda Q, K, V: Q.shape[-1]),
            also=TWICE_D_K),
    Mistake("scaled by √d_v (v.shape[-1]) instead of √d_k", "the scores are q·k: divide by q.shape[-1] ** 0.5",
            _attention_with(lambda Q, K, V: np.sqrt(V.shape[-1]))),
    Mistake("scaled by √S (k.shape[-2], the number of keys) instead of √d_k",
            "d_k is the LAST axis: q.shape[-1] ** 0.5", _attention_with(lambda Q, K, V: np.sqrt(K.shape[-2]))),
    Mistake("scaled by √T (q.shape[-2], the number of queries) instead of √d_k",
            "d_k is the LAST axis: q.shape[-1] ** 0.5", _attention_with(lambda Q, K, V: np.sqrt(Q.shape[-2]))),
    Mistake("softmax over the queries (dim=-2) instead of the keys", "torch.softmax(scores, dim=-1)",
            _attention_with(_sqrt_dk, axis=-2)),
    Mistake("softmax over dim=1 (the heads of a (B, h, T, S) tensor), a habit from 2-D (T, S) scores",
            "the keys are the LAST axis: torch.softmax(scores, dim=-1)", _attention_with(_sqrt_dk, axis=1)),
    Mistake("the mask polarity flipped: masked_fill(mask, -inf) blocks the allowed keys",
            "our mask means True = may attend: scores.masked_fill(~mask, float('-inf'))",
            _attention_with(_sqrt_dk, flip=True)),
    Mistake("blocked scores set to 0 instead of -inf (masked_fill(~mask, 0), or scores * mask): a score of 0 "
            "still gets weight", "masked_fill(~mask, float('-inf'))", _attention_with(_sqrt_dk, fill=0.0)),
    Mistake("blocked scores filled with -1e9, not -inf: right wherever a key is allowed, but a fully masked "
            "row becomes a softmax of equal scores, uniform weights instead of zeros",
            "fill with float('-inf') and zero the NaN row: torch.nan_to_num(torch.softmax(scores, dim=-1))",
            _attention_with(_sqrt_dk, fill=-1e9)),
    Mistake("blocked scores filled with +inf, not -inf: exp(inf - inf) is NaN, so every row with a blocked key "
            "is lost", "masked_fill(~mask, float('-inf')): minus infinity, whose exp is 0",
            _attention_with(_sqrt_dk, fill=np.inf, zero_empty=False, nan_zero=True)),
    Mistake("a fully masked row gives NaN (softmax of only -inf)",
            "torch.nan_to_num(torch.softmax(scores, dim=-1)) turns that row into zeros",
            _attention_with(_sqrt_dk, zero_empty=False)),
    Mistake("the mask multiplied into the weights AFTER the softmax: the blocked keys took their share of the "
            "softmax first, so the rows no longer sum to 1",
            "mask the scores BEFORE the softmax: scores.masked_fill(~mask, float('-inf'))",
            _attention_with(_sqrt_dk, after=True)),
    Mistake("the 1/√d_k applied after the softmax (weights / √d_k): the scores must be scaled before it, and "
            "the rows no longer sum to 1", "scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, then the softmax",
            _attention_with(_sqrt_dk, scale_after=True)),
    Mistake("F.scaled_dot_product_attention called: this exercise asks you to write what it does",
            "compute it yourself: q @ k.transpose(-2, -1) / d_k ** 0.5, masked_fill, torch.softmax, @ v",
            _raises(ForbiddenCall, "it calls F.scaled_dot_product_attention")),
), edges=('T', 'S'))


def torch_attention(fn) -> bool:
    """Check ``fn(q, k, v, mask=None) -> out`` on torch tensors: q (..., T, d_k), k (..., S, d_k), v (..., S, d_v).

    A right answer (tests/check/test_bridge.py runs it with torch)::

        def mine(q, k, v, mask=None):
            s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
            s = s if mask is None else s.masked_fill(~mask, float("-inf"))
            return torch.nan_to_num(torch.softmax(s, dim=-1)) @ v

    Without torch it reports "not finished: this exercise needs PyTorch".
    """
    if callable(fn) and _needs_torch("torch_attention"):
        return False
    return TORCH_ATTENTION.check(_in_torch(fn, spy="scaled_dot_product_attention"))
