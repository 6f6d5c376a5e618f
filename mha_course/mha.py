"""Multi-head attention: parameters, the forward pass and its Trace (floor 2, numpy only).

Shapes: ``B`` batch, ``T`` queries, ``S`` keys (``S = T`` for self-attention),
``D = d_model``, ``h`` heads, ``d_k = d_model // h``.

Mask convention: boolean, **True = may attend**, broadcastable to (B, h, T, S).

Taught in 00_overview.ipynb, 01_qkv.ipynb and 04_concat_output.ipynb.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import numpy as np

from . import _validate
from .efficient import attend
from .heads import _combine, _split
from .positions import apply_rope

__all__ = ["MHAParams", "init_params", "count_params", "multi_head_attention", "trace",
           "Trace", "Stage", "STAGES"]


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
    d_model = _validate.positive_int(d_model, "d_model")
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy Generator, got {type(rng).__name__}; "
                         "pass rng=np.random.default_rng(0)")
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        dtype = repr(dtype)
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"dtype={dtype} is not supported; use np.float32 or np.float64")
    mats = [rng.normal(0.0, 1.0 / math.sqrt(d_model), size=(d_model, d_model)).astype(dtype)
            for _ in range(4)]
    biases = [rng.normal(0.0, 0.1, size=d_model).astype(dtype) if bias else None for _ in range(4)]
    return MHAParams(*mats, *biases)


def count_params(params: MHAParams) -> int:
    """MHAParams -> number of scalars: 4 d_model^2 (+ 4 d_model with biases), whatever h is."""
    return int(sum(np.size(p) for p in params if p is not None))


# Stage names in the order the forward pass produces them, with their symbolic shapes
# (what the views show for each: mha_course.stages.STAGE_TABLE).
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
        self.stages: tuple = tuple(stages)
        self.h = h
        self.mask = None if mask is None else np.array(mask)  # a read-only copy, like the stages
        if self.mask is not None:
            self.mask.setflags(write=False)
        self._by_name = {s.name: s for s in self.stages}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._by_name:
            raise KeyError(f"no stage {name!r}; stages are {', '.join(self.names)}")
        return self._by_name[name].array

    def __contains__(self, name) -> bool:
        return name in self._by_name

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


def _project(x: np.ndarray, W: np.ndarray, b) -> np.ndarray:
    """x (B, N, D) @ W (D, D) (+ b (D,)) -> (B, N, D)."""
    y = np.matmul(x, W)
    if b is not None:
        y += b
    return y


def _check_params(params, dtype) -> MHAParams:
    if not isinstance(params, MHAParams):
        raise ValueError(f"params must be an MHAParams, got {type(params).__name__}; "
                         "make one with init_params(d_model, rng=np.random.default_rng(0))")
    params = MHAParams(*(None if p is None else _validate.finite_array(p, f"params.{name}")
                         for name, p in zip(MHAParams._fields, params)))  # real, numeric, finite
    D = np.shape(params.W_q)[0] if np.ndim(params.W_q) == 2 else None
    if D is None or np.shape(params.W_q) != (D, D):
        raise ValueError(f"params.W_q has shape {np.shape(params.W_q)}, expected a square "
                         "(d_model, d_model) matrix; make params with init_params(d_model, rng=...)")
    for name, p, want in zip(MHAParams._fields, params, [(D, D)] * 4 + [(D,)] * 4):
        if p is not None and np.shape(p) != want:
            raise ValueError(f"params.{name} has shape {np.shape(p)}, expected {want}; "
                             "all four matrices must be (d_model, d_model), biases (d_model,)")
    return MHAParams(*(None if p is None else p.astype(dtype, copy=False) for p in params))


def _check_inputs(x, params, h, mask, context):
    x = _validate.finite_array(x, "x")  # a NaN, even at a padding position, would spread
    _validate.ndim(x, "x", 3, "(B, T, d_model)")
    _validate.nonempty(x, "x", "(B, T, d_model)")
    params = _check_params(params, x.dtype)
    B, T, D = x.shape
    if D != params.d_model:
        raise ValueError(f"x has last dim {D} but params were made for d_model={params.d_model}; "
                         f"use init_params({D}, rng=...) or give x shape (B, T, {params.d_model})")
    h = _validate.heads(D, h)
    ctx = x if context is None else _validate.finite_array(context, "context").astype(x.dtype, copy=False)
    if context is not None:
        _validate.ndim(ctx, "context", 3, "(B, S, d_model)")
        _validate.nonempty(ctx, "context", "(B, S, d_model)")
        if ctx.shape[0] != B or ctx.shape[2] != D:
            raise ValueError(f"context has shape {ctx.shape} but x has shape {x.shape}; "
                             f"context must be (B={B}, S, d_model={D}): same batch and width as x")
    if mask is not None:
        mask = _validate.bool_mask(mask, (B, h, T, ctx.shape[1]), "(B, h, T, S)")
    return x, params, h, mask, ctx


def _forward(x, params, h, mask, context, record=None, rope_base=None, rope_scaling=None, bias=None):
    """The one code path behind multi_head_attention and trace (``record=None``: keep nothing)."""
    x, p, h, mask, ctx = _check_inputs(x, params, h, mask, context)
    if bias is not None:  # an additive score bias (ALiBi), broadcastable to (B, h, T, S)
        bias = _validate.finite_array(bias, "bias").astype(x.dtype, copy=False)
    record = record or _ignore
    record("X", x)
    Q = _project(x, p.W_q, p.b_q)    # (B, T, D) x (D, D) -> (B, T, D)
    K = _project(ctx, p.W_k, p.b_k)  # (B, S, D) x (D, D) -> (B, S, D)
    V = _project(ctx, p.W_v, p.b_v)  # (B, S, D) x (D, D) -> (B, S, D)
    for name, arr in (("Q", Q), ("K", K), ("V", V)):
        record(name, arr)
    Qh, Kh, Vh = _heads(Q, K, V, h, rope_base, record, rope_scaling)  # (B, h, T|S, d_k)
    scores = None if record is _ignore else np.empty((*Qh.shape[:-1], Kh.shape[-2]), x.dtype)  # (B, h, T, S)
    heads_out, weights = attend(Qh, Kh, Vh, mask, scores, bias)  # (B, h, T, d_k), (B, h, T, S)
    for name, arr in (("scores", scores), ("weights", weights), ("head_outputs", heads_out)):
        record(name, arr)
    concat = _combine(heads_out)  # (B, h, T, d_k) -> (B, T, D)
    record("concat", concat)
    out = _project(concat, p.W_o, p.b_o)  # (B, T, D) x (D, D) -> (B, T, D)
    record("output", out)
    return out, weights, h, mask


def _heads(Q, K, V, h: int, rope_base, record, rope_scaling=None):
    """Q (B, T, D), K, V (B, S, D) -> their heads (B, h, T|S, d_k); with ``rope_base``, the
    query and key heads rotated by RoPE at positions 0..T-1 and 0..S-1."""
    Qh, Kh, Vh = _split(Q, h), _split(K, h), _split(V, h)  # (B, T, D) -> (B, h, T, d_k), etc.
    for name, arr in (("Q_heads", Qh), ("K_heads", Kh), ("V_heads", Vh)):
        record(name, arr)
    if rope_base is not None:
        _check_rope_heads(Q.shape[-1], h)
        Qh = apply_rope(Qh, np.arange(Qh.shape[-2]), base=rope_base, scaling=rope_scaling)  # (B, h, T, d_k)
        Kh = apply_rope(Kh, np.arange(Kh.shape[-2]), base=rope_base, scaling=rope_scaling)  # (B, h, S, d_k)
        record("Q_rope", Qh)
        record("K_rope", Kh)
    return Qh, Kh, Vh


def _check_rope_heads(D: int, h: int) -> None:
    """RoPE turns features in pairs: raise unless d_k = D // h is even, naming the h that work."""
    if (D // h) % 2:
        good = ", ".join(str(g) for g in _validate.divisors(D) if (D // g) % 2 == 0) or "none"
        raise ValueError(f"rope_base needs an even d_k, but d_model={D} with h={h} gives d_k={D // h}; "
                         f"h with an even d_k: {good} (or use rope_base=None)")


def _ignore(name, array):
    return None


def multi_head_attention(x, params: MHAParams, h: int, mask=None, context=None, rope_base=None, *,
                         rope_scaling=None, bias=None):
    """x (B, T, d_model) [, context (B, S, d_model)] -> out (B, T, d_model), weights (B, h, T, S).

    out = concat_i(softmax(Q_i K_i^T / sqrt(d_k)) V_i) W_o (+ b_o), with Q = x W_q (+ b_q) and
    K, V projected from ``context`` (cross-attention) or from ``x`` (self-attention).
    ``mask``: boolean, **True = may attend**, broadcastable to (B, h, T, S).
    ``rope_base``: None (no positions), or the base of RoPE: each head's queries and keys are
    rotated at positions 0..T-1 and 0..S-1 (``positions.apply_rope``; d_k must be even).
    ``rope_scaling``: RoPE's frequency scaling (``positions.rope_inv_freq``). ``bias``: added to
    the scores before the mask, broadcastable to (B, h, T, S) (ALiBi: ``positions.alibi_bias``).
    Weights are per head, never averaged. float32 in, float32 out.

    >>> p = init_params(8, rng=np.random.default_rng(0))
    >>> out, w = multi_head_attention(np.ones((2, 5, 8)), p, h=4)
    >>> out.shape, w.shape
    ((2, 5, 8), (2, 4, 5, 5))
    """
    out, weights, _, _ = _forward(x, params, h, mask, context, rope_base=rope_base, rope_scaling=rope_scaling,
                                  bias=bias)
    return out, weights


def trace(x, params: MHAParams, h: int, mask=None, context=None, rope_base=None) -> Trace:
    """x (B, T, d_model) [, context (B, S, d_model)] -> Trace of every stage in ``STAGES``.

    Same arguments and the same code path as ``multi_head_attention``; ``mask`` is boolean,
    **True = may attend**, broadcastable to (B, h, T, S). ``Q_rope`` and ``K_rope`` (the
    rotated heads) are recorded only when ``rope_base`` is given.

    >>> t = trace(np.ones((1, 3, 8)), init_params(8, rng=np.random.default_rng(0)), h=2)
    >>> t.shapes["Q_heads"], t.names[-1]
    ((1, 2, 3, 4), 'output')
    """
    stages = []

    def record(name, array):
        frozen = np.array(array)  # a private copy, so later in-place steps cannot change it
        frozen.setflags(write=False)
        stages.append(Stage(name, frozen, frozen.shape, STAGES[name]))

    _, _, h, mask = _forward(x, params, h, mask, context, record, rope_base)
    return Trace(stages, h, mask)
