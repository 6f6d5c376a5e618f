"""Checker for notebook 04's W_O exercise: ``gather_output_projection`` (the two facts of 03 §5).

The two heads of ``why_heads.two_head_params`` report u_a (head 0, concat columns 0..d_k-1)
and u_b (head 1, columns d_k..d_model-1). The learner writes the W_O that puts the first half
of u_a's content and the second half of u_b's side by side. Every case has another d_model
and content, so a hard-coded matrix cannot fit.
"""
from __future__ import annotations

import numpy as np

from ..lessons.why_heads import gather_output_projection as _reference
from .engine import Case, Exercise, Mistake

__all__ = ["gather_output_projection", "GATHER_OUTPUT_PROJECTION"]


def _W(d_model, rows, cols):
    W = np.zeros((d_model, d_model))
    W[np.asarray(rows), np.asarray(cols)] = 1.0
    return W


def _strip_not_offset(d_model, content):
    return _W(d_model, np.arange(content), np.arange(content))  # second half read from head 0


def _swapped(d_model, content):
    half, d_k = content // 2, d_model // 2
    return _W(d_model, np.r_[np.arange(half), d_k + np.arange(half, content)],
              np.r_[np.arange(half, content), np.arange(half)])


def _first_half_of_b(d_model, content):
    half, d_k = content // 2, d_model // 2
    return _W(d_model, np.r_[np.arange(half), d_k + np.arange(half)], np.arange(content))


def _second_half_on_top(d_model, content):
    half, d_k = content // 2, d_model // 2
    return _W(d_model, np.r_[np.arange(half), d_k + np.arange(half, content)],
              np.r_[np.arange(half), np.arange(content - half)])


_FIX = ("row strip i of W_o belongs to head i: W_o[f, f] = 1 for f < content // 2 (head 0), "
        "W_o[d_k + f, f] = 1 for content // 2 <= f < content (head 1), with d_k = d_model // 2")
_MISTAKES = (
    Mistake("head 1's features read from head 0's rows: head 1's report starts at concat column d_k", _FIX,
            _strip_not_offset),
    Mistake("W_o = I: each report stays in its own columns, the two facts are never put side by side", _FIX,
            lambda d_model, content: np.eye(d_model)),
    Mistake("the two halves swapped: u_a's first half must land in output features 0..content//2 - 1", _FIX,
            _swapped),
    Mistake("head 1 contributes the first half of u_b; the answer needs its second half", _FIX,
            _first_half_of_b),
    Mistake("both heads weighted 0.5 on every content feature (an average of the two reports): each output "
            "feature must come from one head only", _FIX,
            lambda d_model, content: 0.5 * _W(d_model, np.r_[np.arange(content), d_model // 2 + np.arange(content)],
                                              np.r_[np.arange(content), np.arange(content)])),
    Mistake("both heads added on every content feature (weights 1 on both strips): each output feature must come "
            "from one head only", _FIX,
            lambda d_model, content: _W(d_model, np.r_[np.arange(content), d_model // 2 + np.arange(content)],
                                        np.r_[np.arange(content), np.arange(content)])),
    Mistake("head 1's half kept in head 1's place (output features d_k + f, not f): the facts must land side by "
            "side in output features 0..content-1", _FIX,
            lambda d_model, content: _W(d_model, np.r_[np.arange(content // 2), d_model // 2 + np.arange(
                content // 2, content)], np.r_[np.arange(content // 2), d_model // 2 + np.arange(content // 2,
                                                                                                content)])),
    Mistake("W_o transposed: rows are concat columns (the heads), columns are output features", _FIX,
            lambda d_model, content: _reference(d_model, content).T),
    Mistake("head 1's half written to output features 0.. (column f - content//2) instead of content//2..content-1: "
            "it lands on top of head 0's half", _FIX, _second_half_on_top),
)

GATHER_OUTPUT_PROJECTION = Exercise(
    "gather_output_projection", _reference,
    lambda: [Case((16, 8)), Case((12, 4)), Case((20, 6)), Case((10, 2))],
    _MISTAKES, axes={"result": ("concat column", "output feature")})


def gather_output_projection(fn) -> bool:
    """Check ``fn(d_model, content) -> W_o (d_model, d_model)``, the merge of the two heads.

    >>> from mha_course.lessons import why_heads
    >>> gather_output_projection(why_heads.gather_output_projection)
    ✔ gather_output_projection: all 4 cases match
    True
    """
    return GATHER_OUTPUT_PROJECTION.check(fn)
