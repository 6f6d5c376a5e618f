"""Notebook 14's live views (ipywidgets only here): the attention pattern viewer (a head picker and a
token picker over the token text) and the training-step slider over the phase change.

Each wraps a pure draw function of ``views.circuits`` (``pattern_figure``, ``step_figure``) that
the notebook also calls once directly (the static view nbval compares). The controls have the
interface ``LiveView`` reads (``values``, ``on_change``, ``set``, ``box``, ``shown``).

    >>> import numpy as np
    >>> view = pattern_live_view([np.full((2, 3, 3), 1 / 3)], [0, 1, 0])
    >>> view.controls.values
    {'head': (0, 0), 'token': 2}

Taught in 14_circuits.ipynb.
"""
from __future__ import annotations

from typing import Callable

import ipywidgets as W

from .. import _validate
from ..views import circuits as vc
from .controls import Controls, LiveView, option_live_view

__all__ = ["PatternControls", "pattern_live_view", "step_live_view"]

_STYLE = {"description_width": "70px"}


class PatternControls(Controls):
    """A head picker (layer, head) and a token picker (a query position, labelled with its token).

    ``values`` -> ``{"head": (layer, head), "token": position}``; ``set(head=(1, 0), token=5)``
    changes them from code (one redraw); ``on_change(fn)`` calls ``fn(**values)`` after each change.
    """

    def __init__(self, n_layers: int, h: int, tokens, head=(0, 0), token=None):
        n_layers, h = _validate.positive_int(n_layers, "n_layers"), _validate.positive_int(h, "h")
        labels = vc.token_text(tokens)  # checked: ids 0..25, one sequence
        head = _head(head, n_layers, h)
        if not labels:
            raise ValueError("tokens is empty; give the sequence's tokens (T,), T >= 1")
        token = len(labels) - 1 if token is None else _validate.index(token, len(labels), "token")
        heads = [(f"L{layer + 1} H{j}", (layer, j)) for layer in range(n_layers) for j in range(h)]
        self.head = W.Dropdown(options=heads, value=head, description="head", style=_STYLE)
        positions = [(f"{t}: {s}", t) for t, s in enumerate(labels)]
        self.token = W.SelectionSlider(options=positions, value=token,
                                       description="token", continuous_update=False, style=_STYLE,
                                       layout=W.Layout(width="420px"))
        self.shown = ("head", "token")
        self._sizes = (n_layers, h)
        self._callbacks: list[Callable] = []
        self._busy = False
        self.head.observe(self._fire, "value")
        self.token.observe(self._fire, "value")
        self.box = W.HBox([self.head, self.token])

    @property
    def values(self) -> dict:
        return {"head": self.head.value, "token": self.token.value}

    def set(self, **values) -> None:
        """Change the head and/or the token from code, e.g. ``set(head=(1, 0), token=5)``; one redraw.
        Every name and value is checked before either picker moves (a refused call changes nothing)."""
        _validate.names(list(values), self.shown, "set()")
        checked = {}
        if "head" in values:
            checked["head"] = _head(values["head"], *self._sizes)
        if "token" in values:
            checked["token"] = _validate.index(values["token"], len(self.token.options), "token")
        self._busy = True
        try:
            for name, value in checked.items():
                getattr(self, name).value = value
        finally:
            self._busy = False
        self._fire()


def _head(head, n_layers: int, h: int) -> tuple:
    """head (layer, head) checked against n_layers and h -> a tuple of two ints."""
    if not isinstance(head, (tuple, list)) or len(head) != 2:
        raise ValueError(f"head={head!r} must be a pair (layer, head), e.g. head=(0, 1): layers and heads count from 0")
    return (_validate.index(head[0], n_layers, "head[0] (the layer)", "layers"),
            _validate.index(head[1], h, "head[1] (the head)", "heads per layer"))


def pattern_live_view(weights_by_layer, tokens, head=(0, 0), token=None) -> LiveView:
    """[weights (h, T, T)] * L of one sequence, tokens (T,) -> a LiveView of ``views.circuits.pattern_figure``:
    pick a head and a position; see its row (what it attends to) and its column (what attends to it)."""
    if not isinstance(weights_by_layer, (list, tuple)) or not weights_by_layer:
        raise ValueError(f"weights_by_layer must be a non-empty list of one sequence's weights (h, T, T) per layer, "
                         f"got {type(weights_by_layer).__name__}; pass [w[0] for w in run_with_cache(...)[1]]")
    weights = [_validate.array(w, f"weights_by_layer[{i}]", 3, "(h, T, T)") for i, w in enumerate(weights_by_layer)]
    shapes = {w.shape for w in weights}
    T = len(vc.token_text(tokens))
    if len(shapes) != 1 or weights[0].shape[1:] != (T, T):
        raise ValueError(f"weights_by_layer holds shapes {sorted(shapes)} and tokens has {T}: give each layer's "
                         f"weights (h, {T}, {T}) on the one sequence of tokens")
    controls = PatternControls(len(weights), weights[0].shape[0], tokens, head, token)

    def draw(head, token):
        layer, j = head
        return vc.pattern_figure(weights[layer], tokens, j, token, title=f"L{layer + 1} ")
    return LiveView(draw, controls)


def step_live_view(trajectories: dict, value=None) -> LiveView:
    """{name: Trajectory} -> a LiveView of ``views.circuits.step_figure`` with a slider over the checkpoints."""
    steps = [int(s) for s in vc.checked_runs(trajectories)["two_layer"].steps]
    return option_live_view(lambda step: vc.step_figure(trajectories, step), "step", steps,
                            value=steps[len(steps) // 2] if value is None else value)
