"""The block diagram of multi-head attention: layout and live labels (numpy only).

The diagram reads left to right, the way the data flows::

    X ─> W_Q, W_K, W_V ─> split heads ─> attention per head ─> concat ─> W_O
    └──────────────── residual ──────────────────> Add & LayerNorm <──┘ ─> block output

This module holds only geometry (boxes and arrows in a 115 x 60 unit canvas, one unit is
about 10 pixels in the explorer) and the pure function ``diagram_labels(trace)`` that
turns a Trace into the text the diagram shows. Which box and arrows light up for a stage
is written in the stage table (``stages.STAGE_TABLE``; ``lit(stage)`` reads it). The
explorer (``mha_course.explorer``) draws it with matplotlib; a test can check the labels
without drawing anything.

Taught in 00_overview.ipynb (the explorer's Architecture and State modes).
"""
from __future__ import annotations

import numbers
from typing import NamedTuple

from .. import _validate
from .stages import STAGE_TABLE, check_trace

__all__ = ["Box", "Arrow", "BOXES", "ARROWS", "WIDTH", "HEIGHT", "lit", "diagram_labels",
           "box_params", "shape_text"]

WIDTH, HEIGHT = 115.0, 60.0  # canvas units (x right, y up)


class Box(NamedTuple):
    """A block of the diagram: centre (cx, cy), width w, height h, title (mathtext allowed)."""
    cx: float
    cy: float
    w: float
    h: float
    title: str
    learned: bool  # True for blocks that hold parameters (drawn in the weights colour)

    @property
    def left(self) -> float:
        return self.cx - self.w / 2

    @property
    def right(self) -> float:
        return self.cx + self.w / 2

    @property
    def top(self) -> float:
        return self.cy + self.h / 2

    @property
    def bottom(self) -> float:
        return self.cy - self.h / 2


class Arrow(NamedTuple):
    """A polyline ``points`` ending in an arrow head; its label sits at ``label_at`` (x, y, ha)."""
    points: tuple
    label_at: tuple
    name: str  # the short name shown above the shape, e.g. "Q heads"


ROWS = {"Q": 48.0, "K": 36.0, "V": 24.0}
MID = ROWS["K"]
RESIDUAL_Y = 11.0

BOXES = {
    "X": Box(4.5, MID, 7.0, 10.0, "X", False),
    "W_Q": Box(22.5, ROWS["Q"], 9.0, 7.5, "$W^Q$", True),
    "W_K": Box(22.5, ROWS["K"], 9.0, 7.5, "$W^K$", True),
    "W_V": Box(22.5, ROWS["V"], 9.0, 7.5, "$W^V$", True),
    "split": Box(41.0, MID, 8.0, 32.0, "split\nheads", False),
    "attention": Box(63.5, MID, 15.0, 32.0, "scaled\ndot-product\nattention", False),
    "concat": Box(85.0, MID, 7.0, 20.0, "concat", False),
    "W_O": Box(104.0, MID, 10.0, 8.0, "$W^O$", True),
    "add_norm": Box(104.0, RESIDUAL_Y, 17.0, 8.0, "Add & LayerNorm", True),
}


def _right_arrow(a: str, b: str, y: float, name: str) -> Arrow:
    """From box a's right edge to box b's left edge at height y; label centred above."""
    x0, x1 = BOXES[a].right, BOXES[b].left
    return Arrow(((x0, y), (x1, y)), ((x0 + x1) / 2, y + 0.8, "center"), name)


ARROWS = {
    **{f"X_{k}": Arrow(((BOXES["X"].right, MID), (BOXES["X"].right + 1.5, MID),
                        (BOXES["X"].right + 1.5, ROWS[k]), (BOXES[f"W_{k}"].left, ROWS[k])),
                       ((BOXES["X"].right + 1.5 + BOXES[f"W_{k}"].left) / 2, ROWS[k] + 0.8, "center"),
                       "") for k in ("Q", "K", "V")},
    **{k: _right_arrow(f"W_{k}", "split", ROWS[k], k) for k in ("Q", "K", "V")},
    **{f"{k}_heads": _right_arrow("split", "attention", ROWS[k], f"{k} heads") for k in ("Q", "K", "V")},
    "head_outputs": _right_arrow("attention", "concat", MID, "head outputs"),
    "concat": _right_arrow("concat", "W_O", MID, "concat"),
    "output": Arrow(((BOXES["W_O"].cx, BOXES["W_O"].bottom), (BOXES["W_O"].cx, BOXES["add_norm"].top)),
                    (BOXES["W_O"].cx - 1.2, 23.0, "right"), "attention output"),
    "residual": Arrow(((BOXES["X"].cx, BOXES["X"].bottom), (BOXES["X"].cx, RESIDUAL_Y),
                       (BOXES["add_norm"].left, RESIDUAL_Y)),
                      (47.0, RESIDUAL_Y + 0.8, "center"), "residual: X"),
    "block_output": Arrow(((BOXES["add_norm"].cx, BOXES["add_norm"].bottom), (BOXES["add_norm"].cx, 0.5)),
                          (BOXES["add_norm"].cx - 1.2, 2.2, "right"), "block output"),
}


def lit(stage=None) -> tuple:
    """stage name (or None: no stage) -> (box, arrows) that light up when the State mode shows it.

    >>> lit("Q_heads"), lit(None)
    (('split', ('Q_heads',)), (None, ()))
    """
    if stage is None:
        return None, ()
    view = STAGE_TABLE[_validate.choice(stage, STAGE_TABLE, "stage")]
    return view.box, view.arrows

# The arrows that carry a Trace stage (the rest carry X or the block output).
_ARROW_STAGE = {"X_Q": "X", "X_K": "X", "X_V": "X", "residual": "X", "block_output": "output"}


def box_params(d_model: int) -> dict:
    """d_model -> {box: number of parameters}: 4 d_model² in the W's, 2 d_model in LayerNorm.

    h appears nowhere: splitting into heads slices W_Q, W_K, W_V; it adds no parameters.

    >>> box_params(16)["W_Q"], box_params(16)["add_norm"], sum(box_params(16).values())
    (256, 32, 1056)
    """
    d_model = _validate.positive_int(d_model, "d_model")
    learned = {"W_Q": d_model * d_model, "W_K": d_model * d_model, "W_V": d_model * d_model,
               "W_O": d_model * d_model, "add_norm": 2 * d_model}
    return {name: learned.get(name, 0) for name in BOXES}


def shape_text(shape) -> str:
    """shape tuple -> its text without the 1-tuple comma: (3,) -> '(3)', (1, 2) -> '(1, 2)'.

    >>> shape_text((3,)), shape_text((1, 4, 6, 4))
    ('(3)', '(1, 4, 6, 4)')
    """
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(n, numbers.Integral) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise ValueError(f"shape={shape!r} must be a tuple of whole numbers >= 0, e.g. an array's .shape")
    return "(" + ", ".join(str(n) for n in shape) + ")"


def diagram_labels(trace) -> dict:
    """Trace -> {"arrows": {arrow: shape text}, "params": {box: text}, "heads": text, "title": text}.

    Every arrow's shape is read from the Trace (the residual carries X, the block output has
    the shape of the attention output); every box gets its parameter count.

    >>> import numpy as np, mha_course as mc
    >>> t = mc.trace(np.ones((1, 6, 16)), mc.init_params(16, rng=np.random.default_rng(0)), h=4)
    >>> labels = diagram_labels(t)
    >>> labels["arrows"]["Q_heads"], labels["params"]["W_Q"]
    ('(1, 4, 6, 4)', '256 params')
    """
    shapes = check_trace(trace).shapes
    arrows = {name: shape_text(shapes[_ARROW_STAGE.get(name, name)]) for name in ARROWS}
    counts = box_params(trace.d_model)
    params = {name: f"{n:,} params" for name, n in counts.items()}
    params["add_norm"] = f"{counts['add_norm']:,} params (γ, β)"
    return {
        "arrows": arrows,
        "params": params,
        "X": shape_text(shapes["X"]),
        "heads": f"h = {trace.h} heads, d_k = {trace.d_k}",
        "scores": f"scores, weights\n{shape_text(shapes['weights'])}",
        "total": sum(counts.values()),
        "title": (f"d_model = {trace.d_model}, h = {trace.h}, d_k = {trace.d_k}, "
                  f"seq_len = {shapes['X'][1]}"),
    }

