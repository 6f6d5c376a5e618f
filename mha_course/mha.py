"""Multi-head attention: its parameters, the forward pass and its Trace (numpy only).

Shapes: ``B`` batch, ``T`` queries, ``S`` keys (``S = T`` for self-attention),
``D = d_model``, ``h`` heads, ``d_k = d_model // h``.

Mask convention: boolean, **True = may attend**, broadcastable to (B, h, T, S).

Taught in 00_overview.ipynb, 01_qkv.ipynb and 04_concat_output.ipynb.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import numpy as np

from . import _validate, attention, fast
from ._validate import KERNEL_SIGNATURE, StageError
from .heads import combine, split
from .positions import check_rope, rope_angles, rotate

__all__ = ["MHAParams", "init_params", "count_params", "multi_head_attention", "trace",
           "Trace", "Stage", "StageError", "STAGES", "linear", "rope_heads", "KERNEL_SIGNATURE"]


class MHAParams(NamedTuple):
    """W_q, W_k, W_v, W_o (d_model, d_model), used as ``x @ W + b``; biases (d_model,) or None.

    The parameters do not depend on h: the same MHAParams works with any h dividing d_model.
    """
    W_q: np.ndarray
    W_k: np.ndarray
    W_v: np.ndarray
    W_o: np.ndarray
    b_q: Optional[np.ndarray] = None
    b_k: Optional[np.ndarray] = None
    b_v: Optional[np.ndarray] = None
    b_o: Optional[np.ndarray] = None

    @property
    def d_model(self) -> int:
        """The model width D that these parameters were made for."""
        return self.W_q.shape[0]


def init_params(d_model: int, *, rng: np.random.Generator, bias: bool = False,
                dtype=np.float64) -> MHAParams:
    """d_model -> MHAParams with four (d_model, d_model) matrices (+ four (d_model,) biases).

    Entries ~ N(0, 1/d_model), so ``x @ W`` keeps unit-variance activations O(1);
    biases ~ N(0, 0.1^2). Randomness only from ``rng``.

    >>> p = init_params(8, rng=np.random.default_rng(0), bias=True)
    >>> p.W_q.shape, p.b_o.shape, count_params(p)
    ((8, 8), (8,), 288)
    """
    d_model, rng = _validate.positive_int(d_model, "d_model"), _validate.generator(rng)
    dtype, bias = _validate.float_dtype(dtype), _validate.flag(bias, "bias")
    _validate.allocation(4 * d_model * d_model * dtype.itemsize + 8 * d_model * d_model,
                         f"four (d_model, d_model) = ({d_model}, {d_model}) projections", "choose a smaller d_model")
    mats = [rng.normal(0.0, 1.0 / math.sqrt(d_model), size=(d_model, d_model)).astype(dtype)
            for _ in range(4)]
    biases = [rng.normal(0.0, 0.1, size=d_model).astype(dtype) if bias else None for _ in range(4)]
    return MHAParams(*mats, *biases)


def count_params(params: MHAParams) -> int:
    """MHAParams (or any parameter tuple of the package) -> number of scalars: 4 d_model^2 (+ 4 d_model with biases)."""
    return int(sum(np.size(p) for p in _validate.named_tuple(params, "params") if p is not None))


# Stage names in the order the forward pass produces them, with their symbolic shapes
# (what the views show for each: mha_course.views.stages.STAGE_TABLE).
STAGES = {
    "X": "(B, T, d_model)",
    "Q": "(B, T, d_model)",
    "K": "(B, S, d_model)",
    "V": "(B, S, d_model)",
    "Q_heads": "(B, h, T, d_k)",
    "K_heads": "(B, h, S, d_k)",
    "V_heads": "(B, h, S, d_k)",
    "Q_rope": "(B, h, T, d_k)",  # only with rope_base
    "K_rope": "(B, h, S, d_k)",  # only with rope_base
    "scores": "(B, h, T, S)",
    "weights": "(B, h, T, S)",
    "head_outputs": "(B, h, T, d_k)",
    "concat": "(B, T, d_model)",
    "output": "(B, T, d_model)",
}


class Stage(NamedTuple):
    """One recorded intermediate: its name, its (read-only) array, shape and symbolic shape."""
    name: str
    array: np.ndarray
    shape: tuple
    symbol: str


class Trace:
    """Every intermediate of one forward pass, by stage name, in order (see ``STAGES``).

    ``trace["weights"]`` is an array; ``trace.stages`` the Stage tuples; ``trace.shapes``
    name -> shape. Arrays are read-only: views read a Trace, they never change it.
    ``scores`` holds -inf where the mask forbids attending. ``trace.mask`` is a read-only
    copy of the mask given (or None): changing your mask later does not change the Trace.
    """

    def __init__(self, stages, h: int, mask):
        self.stages: tuple = _validate.items_of(stages, Stage, "stages", "a Trace is made by trace(x, params, h)")
        self.h = _validate.positive_int(h, "h")
        self.mask = None if mask is None else np.array(mask)  # a read-only copy, like the stages
        if self.mask is not None:
            self.mask.setflags(write=False)
        self._by_name = {s.name: s for s in self.stages}

    def __getitem__(self, name: str) -> np.ndarray:
        if not isinstance(name, str) or name not in self._by_name:
            raise StageError(f"no stage {name!r}; a Trace is read by stage name: {', '.join(self.names)} "
                             "(trace.stages[i] for the i-th)")
        return self._by_name[name].array

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and name in self._by_name

    def __iter__(self):
        return iter(self.stages)

    def __len__(self) -> int:
        return len(self.stages)

    @property
    def names(self) -> list[str]:
        """Stage names in computation order."""
        return [s.name for s in self.stages]

    @property
    def shapes(self) -> dict:
        """Stage name -> concrete shape tuple."""
        return {s.name: s.shape for s in self.stages}

    @property
    def output(self) -> np.ndarray:
        """The block's output (B, T, d_model)."""
        return self["output"]

    @property
    def weights(self) -> np.ndarray:
        """Per-head attention weights (B, h, T, S)."""
        return self["weights"]

    @property
    def d_model(self) -> int:
        return self["X"].shape[-1]

    @property
    def d_k(self) -> int:
        return self.d_model // self.h

    def table(self) -> str:
        """A text table: stage, symbolic shape, concrete shape."""
        rows = [f"{'stage':<13}{'shape':<17}{'values'}"]
        rows += [f"{s.name:<13}{s.symbol:<17}{s.shape}" for s in self.stages]
        return "\n".join(rows)

    def __repr__(self) -> str:
        return f"Trace(h={self.h}, d_model={self.d_model}, stages={len(self)})\n{self.table()}"


def linear(x: np.ndarray, W: np.ndarray, b=None) -> np.ndarray:
    """x (..., D_in) @ W (D_in, D_out) (+ b (D_out,)) -> (..., D_out): the projections of attention."""
    y = x @ W
    return y if b is None else y + b


def rope_heads(heads: np.ndarray, base, start: int = 0, scaling=None) -> np.ndarray:
    """heads (B, h, N, d_k) rotated by RoPE at positions start .. start + N - 1; unchanged if base is None.

    ``scaling``: RoPE's frequency scaling (``positions.rope_inv_freq``: linear, NTK or YaRN), or None.
    """
    if base is None:
        return heads
    angles = rope_angles(np.arange(start, start + heads.shape[-2]), heads.shape[-1], base, scaling)  # (N, d_k/2)
    return rotate(heads, angles)  # the heads were checked once, at the entry


def _forward(x, p: MHAParams, h: int, *, attend, mask=None, context, rope_base=None, rope_scaling=None,
             bias=None, stages=None):
    """The one multi-head attention computation, on checked inputs, with the kernel ``attend`` passed in
    (``trace``: the textbook ``attention.attend``; ``multi_head_attention``: ``fast.attend`` or the caller's);
    ``stages`` (a dict or None) receives every intermediate by name."""
    Q = linear(x, p.W_q, p.b_q)                      # (B, T, D) x (D, D) -> (B, T, D)
    K = linear(context, p.W_k, p.b_k)                # (B, S, D) x (D, D) -> (B, S, D)
    V = linear(context, p.W_v, p.b_v)                # (B, S, D) x (D, D) -> (B, S, D)
    Q_heads, K_heads, V_heads = split(Q, h), split(K, h), split(V, h)  # (B, h, T|S, d_k)
    Q_rope = rope_heads(Q_heads, rope_base, 0, rope_scaling)  # (B, h, T, d_k) at positions 0.., or as is
    K_rope = rope_heads(K_heads, rope_base, 0, rope_scaling)  # (B, h, S, d_k)
    scores = None if stages is None else np.empty((*Q_rope.shape[:-1], K_rope.shape[-2]), x.dtype)  # (B, h, T, S)
    head_outputs, weights = attend(Q_rope, K_rope, V_heads, mask, bias=bias, scores=scores)  # (B, h, T, d_k)
    concat = combine(head_outputs)                   # (B, h, T, d_k) -> (B, T, D)
    output = linear(concat, p.W_o, p.b_o)            # (B, T, D) x (D, D) -> (B, T, D)
    if stages is not None:
        stages.update(X=x, Q=Q, K=K, V=V, Q_heads=Q_heads, K_heads=K_heads, V_heads=V_heads)
        if rope_base is not None:
            stages.update(Q_rope=Q_rope, K_rope=K_rope)
        stages.update(scores=scores, weights=weights, head_outputs=head_outputs, concat=concat, output=output)
    return output, weights


def _checked(x, params, h, mask, context, rope_base, rope_scaling, bias) -> dict:
    """The one check of a call: the keyword arguments of ``_forward`` (but the kernel), validated."""
    _validate.no_bool_array(x, "x"), _validate.no_bool_array(context, "context")
    x, context, params, h, _, mask = _validate.attention_call(x, params, h, None, mask, context, MHAParams,
                                                               rope_base)
    check_rope(x.shape[2] // h, rope_base, rope_scaling)
    bias = None if bias is None else _validate.score_bias(bias, (x.shape[0], h, x.shape[1], context.shape[1]), x.dtype)
    _validate.magnitudes(x, context, params, h, bias)
    return dict(x=x, p=params, h=h, mask=mask, context=context, rope_base=rope_base, rope_scaling=rope_scaling,
                bias=bias)


def multi_head_attention(x, params: MHAParams, h: int, mask=None, context=None, rope_base=None, *,
                         rope_scaling=None, bias=None, attend=None):
    """x (B, T, d_model) [, context (B, S, d_model)] -> out (B, T, d_model), weights (B, h, T, S).

    out = concat_i(softmax(Q_i K_i^T / sqrt(d_k)) V_i) W_o (+ b_o), with Q = x W_q (+ b_q) and
    K, V projected from ``context`` (cross-attention) or from ``x`` (self-attention).
    ``mask``: boolean, **True = may attend**, broadcastable to (B, h, T, S).
    ``rope_base``: None (no positions), or the base of RoPE: each head's queries and keys are
    rotated at positions 0..T-1 and 0..S-1 (``positions.apply_rope``; d_k must be even).
    ``rope_scaling``: RoPE's frequency scaling (``positions.rope_inv_freq``). ``bias``: added to
    the scores before the mask, broadcastable to (B, h, T, S) (ALiBi: ``positions.alibi_bias``).
    Weights are per head, never averaged. float32 in, float32 out. ``attend``: the kernel, fn(Q, K, V,
    mask, bias=None, scores=None) -> (heads out (B, h, T, d_k), weights or None); default ``fast.attend``.

    >>> p = init_params(8, rng=np.random.default_rng(0))
    >>> out, w = multi_head_attention(np.ones((2, 5, 8)), p, h=4)
    >>> out.shape, w.shape
    ((2, 5, 8), (2, 4, 5, 5))
    """
    call = _checked(x, params, h, mask, context, rope_base, rope_scaling, bias)
    return _forward(**call, attend=fast.attend if attend is None else _validate.kernel(attend))




def trace(x, params: MHAParams, h: int, mask=None, context=None, rope_base=None, *, rope_scaling=None,
          bias=None) -> Trace:
    """x (B, T, d_model) [, context (B, S, d_model)] -> Trace of every stage in ``STAGES``.

    Same arguments and the same code path as ``multi_head_attention``, with the textbook
    attention; ``mask`` is boolean, **True = may attend**, broadcastable to (B, h, T, S).
    ``Q_rope`` and ``K_rope`` (the rotated heads) are recorded only when ``rope_base`` is given.

    >>> t = trace(np.ones((1, 3, 8)), init_params(8, rng=np.random.default_rng(0)), h=2)
    >>> t.shapes["Q_heads"], t.names[-1]
    ((1, 2, 3, 4), 'output')
    """
    call, kept = _checked(x, params, h, mask, context, rope_base, rope_scaling, bias), {}
    _forward(**call, attend=attention.attend, stages=kept)  # the textbook kernel, every stage kept
    stages = []
    for name in STAGES:
        if name in kept:
            frozen = np.array(kept[name])  # a private copy, so later in-place steps cannot change it
            frozen.setflags(write=False)
            stages.append(Stage(name, frozen, frozen.shape, STAGES[name]))
    return Trace(stages, call["h"], call["mask"])
