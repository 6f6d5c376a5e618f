"""Shape exercises: ``stage_shapes`` (notebook 00) and ``cross_attention_shapes``.

The learner predicts a dict {stage name: shape}; each wrong stage is compared with the shapes
that the catalogued :class:`ShapeMistake` s predict.
"""
from __future__ import annotations

import numpy as np

from ..mha import init_params
from ..mha import trace as _trace
from .shape_exercise import ShapeExercise, ShapeMistake, Sizes

__all__ = ["stage_shapes", "cross_attention_shapes", "STAGE_SHAPES", "CROSS_ATTENTION_SHAPES"]

_HEADS = ("Q_heads", "K_heads", "V_heads", "head_outputs")
_SCORES = ("scores", "weights")


def _trace_shapes(sizes: Sizes, cross: bool) -> dict:
    """The stage shapes of a real trace of these sizes (cross-attention: context of length S)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(sizes.B, sizes.T, sizes.d_model))
    ctx = rng.normal(size=(sizes.B, sizes.S, sizes.d_model)) if cross else None
    shapes = _trace(x, init_params(sizes.d_model, rng=rng), sizes.h, context=ctx).shapes
    return {k: v for k, v in shapes.items() if not (cross and k == "X")}


def _common_mistakes(stages):
    return (
        ShapeMistake("d_model where d_k belongs: a head holds d_k = d_model // h features",
                     "Q_heads, K_heads, V_heads and head_outputs end with d_k = d_model // h", _HEADS,
                     lambda stage, s, z: s[:-1] + (z.d_model,)),
        ShapeMistake("the head axis after the positions (the reshape without the transpose)",
                     "split_heads gives (B, h, T, d_k): heads come before positions", _HEADS,
                     lambda stage, s, z: (s[0], s[2], s[1], s[3])),
        ShapeMistake("the batch axis forgotten", "every stage starts with B", stages, lambda stage, s, z: s[1:]),
        ShapeMistake("the head axis forgotten: each head has its own rows of scores and outputs",
                     "Q_heads, K_heads, V_heads, head_outputs are (B, h, ·, d_k); scores and weights (B, h, T, S)",
                     _HEADS + _SCORES, lambda stage, s, z: s[:1] + s[2:]),
        ShapeMistake("h where d_k belongs (d_model // d_k = h heads; each holds d_k = d_model // h features)",
                     "Q_heads, K_heads, V_heads and head_outputs end with d_k = d_model // h", _HEADS,
                     lambda stage, s, z: s[:-1] + (z.h,)),
        ShapeMistake("d_k where d_model belongs: concatenating h heads of d_k features gives h·d_k = d_model",
                     "X, Q, K, V, concat and output end with d_model", ("X", "Q", "K", "V", "concat", "output"),
                     lambda stage, s, z: s[:-1] + (z.d_k,)),
        ShapeMistake("h·d_model where d_model belongs: the heads are slices of d_model, not h copies of it",
                     "concat and output are (B, T, d_model): h heads of d_k = d_model // h features",
                     ("concat", "output"), lambda stage, s, z: s[:-1] + (z.h * z.d_model,)),
        ShapeMistake("the split into heads forgotten: still (B, T, d_model)",
                     "split_heads gives (B, h, T, d_k)", ("Q_heads", "K_heads", "V_heads"),
                     lambda stage, s, z: (s[0], s[2], z.d_model)),
        ShapeMistake("head_outputs given the shape of the weights (B, h, T, S): weights @ V_heads is (B, h, T, d_k)",
                     "head_outputs = weights (B, h, T, S) @ V_heads (B, h, S, d_k) -> (B, h, T, d_k)",
                     ("head_outputs",), lambda stage, s, z: s[:-1] + (z.S,)),
        ShapeMistake("d_k and h swapped in the heads: (B, d_k, ·, h) instead of (B, h, ·, d_k)",
                     "split_heads gives (B, h, T, d_k): h heads, each of d_k = d_model // h features", _HEADS,
                     lambda stage, s, z: (s[0], z.d_k, s[2], z.h)),
        ShapeMistake("the heads not combined: concat still (B, h, T, d_k)",
                     "combine_heads gives (B, T, h·d_k) = (B, T, d_model)", ("concat", "output"),
                     lambda stage, s, z: (s[0], z.h, s[1], z.d_k)),
    )


def _keys_of_length_T(stage, s, z):
    """K, V and their heads with T rows instead of S; scores and weights with T columns."""
    return s[:-1] + (z.T,) if stage in _SCORES else (*s[:-2], z.T, s[-1])


STAGE_SHAPES = ShapeExercise(
    "stage_shapes", lambda z: _trace_shapes(z, cross=False), lambda: [Sizes(2, 5, 5, 12, 3)],
    _common_mistakes(("X", "Q", "K", "V", *_HEADS, *_SCORES, "concat", "output")) + (
        ShapeMistake("scores of shape (T, d_k)", "one score per query and key: (B, h, T, S)", _SCORES,
                     lambda stage, s, z: s[:-1] + (z.d_k,)),))


def stage_shapes(my_shapes, B, T, D, H) -> bool:
    """Check a dict {stage name: predicted shape} against a real trace of sizes B, T, D, H.

    >>> stage_shapes({"X": (1, 2, 4)}, 1, 2, 4, 2)
    ✘ stage_shapes
      for B=1, T=2, d_model=4, h=2
      give one shape for each stage
        missing: Q, K, V, Q_heads, K_heads, V_heads, scores, weights, head_outputs, concat, output
    False

    Stages are those of ``mc.trace`` (X, Q, ..., output); prints each wrong stage.
    """
    return STAGE_SHAPES.check_value(my_shapes, Sizes(B, T, T, D, H), f"for B={B}, T={T}, d_model={D}, h={H}")


_CROSS_STAGES = ("Q", "K", "V", *_HEADS, *_SCORES, "concat", "output")
CROSS_ATTENTION_SHAPES = ShapeExercise(
    "cross_attention_shapes", lambda z: _trace_shapes(z, cross=True),
    lambda: [Sizes(2, 3, 5, 12, 3), Sizes(3, 6, 4, 8, 1), Sizes(4, 2, 7, 20, 5)],  # h = 1 keeps its head axis
    _common_mistakes(_CROSS_STAGES) + (
        ShapeMistake("T and S swapped on the scores and weights", "scores (B, h, T, S): one row per query "
                     "(T, from x), one column per key (S, from the context)", _SCORES,
                     lambda stage, s, z: (*s[:-2], s[-1], s[-2])),
        ShapeMistake("the outputs given length S: there is one output per query, T of them (the keys' S is "
                     "summed over by weights @ V)", "head_outputs (B, h, T, d_k), concat and output (B, T, d_model)",
                     ("head_outputs", "concat", "output"), lambda stage, s, z: (*s[:-2], z.S, s[-1])),
        ShapeMistake("the queries given length S: they come from x, of length T",
                     "Q (B, T, d_model), Q_heads (B, h, T, d_k), scores (B, h, T, S)", ("Q", "Q_heads"),
                     lambda stage, s, z: (*s[:-2], z.S, s[-1]), together=True),
        ShapeMistake("the keys and values given length T: they come from the context, of length S",
                     "K, V (B, S, d_model), K_heads, V_heads (B, h, S, d_k), scores (B, h, T, S)",
                     ("K", "V", "K_heads", "V_heads", *_SCORES), _keys_of_length_T, together=True)))


def cross_attention_shapes(fn) -> bool:
    """Check ``fn(B, T, S, d_model, h) -> dict`` of the stage shapes of cross-attention.

    >>> def shapes(B, T, S, d_model, h):
    ...     d_k = d_model // h
    ...     return {"Q": (B, T, d_model), "K": (B, S, d_model), "V": (B, S, d_model),
    ...             "Q_heads": (B, h, T, d_k), "K_heads": (B, h, S, d_k), "V_heads": (B, h, S, d_k),
    ...             "scores": (B, h, T, S), "weights": (B, h, T, S), "head_outputs": (B, h, T, d_k),
    ...             "concat": (B, T, d_model), "output": (B, T, d_model)}
    >>> cross_attention_shapes(shapes)
    ✔ cross_attention_shapes: all 11 shapes right in all 3 cases
    True

    Queries come from x (B, T, d_model), keys and values from a context (B, S, d_model); stages
    Q, K, V, Q_heads, K_heads, V_heads, scores, weights, head_outputs, concat, output.
    Cases: three sizes with T != S.
    """
    return CROSS_ATTENTION_SHAPES.check(fn)
