"""The State mode: the computation one stage at a time.

The stage is lit on the diagram, with its tensor, its formula and one sentence of the
detective story, all read from the Trace and the stage table (``stages.STAGE_TABLE``).
Its controls: Previous / Play / Next and a stage slider.
"""
from __future__ import annotations

import textwrap

import ipywidgets as W
import numpy as np
from matplotlib.figure import Figure

from .. import _validate
from ..mha import STAGES
from ..views import diagram
from ..views.diagram import shape_text
from ..views.stages import STAGE_TABLE
from .canvas import INK, SOFT, DiagramDrawing, Heads, Mode, Scene, View
from .logic import MAX_HEADS_SHOWN, hidden_heads_note, stage_info

__all__ = ["StateView", "StateMode", "step"]


class StateView(View):
    """One stage at a time: lit on the diagram, its story and formula, its tensor."""

    def __init__(self, fig: Figure, blit: bool = False):
        super().__init__(fig, False)  # the lit boxes sit under static titles: draw everything
        self.drawing = DiagramDrawing(fig.add_axes((0.005, 0.40, 0.48, 0.52)), compact=True)
        self.header = fig.text(0.02, 0.975, "", ha="left", va="top", fontsize=12,
                               fontweight="bold", color=INK)
        self.story = fig.text(0.02, 0.36, "", ha="left", va="top", fontsize=10, color=INK,
                              linespacing=1.4)
        self.formula = fig.text(0.02, 0.14, "", ha="left", va="center", fontsize=16, color=INK)
        self.tensor = Heads(fig, (0.57, 0.10, 0.37, 0.76), keys=32)
        self.cbar = fig.colorbar(self.tensor.matrix.image, cax=fig.add_axes((0.948, 0.10, 0.007, 0.76)))
        self.cbar.ax.tick_params(labelsize=7)
        self.tensor_title = fig.text(0.57, 0.93, "", ha="left", va="bottom", fontsize=9.5,
                                     fontweight="bold", color=INK)
        self.tensor_xlabel = fig.text(0.97, 0.005, "", ha="right", va="bottom", fontsize=8,
                                      color=SOFT)

    def update(self, scene: Scene) -> None:
        t = scene.trace
        info = stage_info(t, scene.stage)
        self.drawing.update(diagram.diagram_labels(t), t.h)
        self.drawing.highlight(info.name)
        self.header.set_text(f"Stage {scene.stage + 1} of {len(t)}: {info.name}  "
                             f"{STAGES[info.name]} = {shape_text(info.shape)}")
        self.story.set_text(textwrap.fill(info.story, 62))
        self.formula.set_text(info.formula)
        note = hidden_heads_note(t.h)
        more = f", {note}" if len(info.shape) == 4 and note else ""
        self.tensor_title.set_text(f"{info.name} {shape_text(info.shape)}  (batch 0{more})")
        self._tensor(t[info.name][0], info.name, scene.tokens, t.h)

    def _tensor(self, a, name: str, tokens, h: int) -> None:
        if name == "concat":  # its columns by head, as in the Data mode (the same numbers)
            T, D = a.shape
            a = a.reshape(T, h, D // h).transpose(1, 0, 2)  # (T, d_model) -> (h, T, d_k)
        per_head = a.ndim == 3  # (h, T, n) after dropping the batch axis
        self.tensor.strip.set_visible(per_head)
        if per_head:
            self.tensor.show(a, weights=(name == "weights"), gap=0 if name == "concat" else 1,
                             max_heads=h if name == "concat" else MAX_HEADS_SHOWN)
        else:
            self.tensor.matrix.show(a)
            for text in self.tensor.titles:
                text.set_visible(False)
        self.tensor.matrix.row_labels(tokens)
        keys = name in ("scores", "weights")
        if keys:
            k = min(a.shape[0], MAX_HEADS_SHOWN)
            self.tensor.key_labels(tokens, k)
        else:
            self.tensor.matrix.keys.set([], [])
        self.tensor_xlabel.set_text(
            "columns: keys" if keys else "columns: features, d_k per head" if per_head
            else "columns: features (d_model)")




def step(explorer, delta: int) -> int:
    """Move the State mode ``delta`` stages, a whole number (a move past the first or the last stage stops
    there, as the Previous and Next buttons do); return the index. 1.5 or True is refused, not truncated."""
    if not _validate.is_whole(delta):
        raise ValueError(f"delta={delta!r} must be a whole number of stages (got {type(delta).__name__}); "
                         "pass e.g. delta=1 (next) or delta=-1 (previous)")
    explorer.stage.value = int(np.clip(explorer.stage.value + int(delta), 0, len(explorer.trace) - 1))
    return explorer.stage.value


class StateMode(Mode):
    name = "State"
    hint = "one stage at a time: Previous / Play / Next."
    View = StateView

    def controls(self, explorer):
        """Previous, Play, Next and the stage slider, as ``explorer.previous``, ``.play``,
        ``.next``, ``.stage`` and ``.stage_label``; the row is ``explorer.state_box``."""
        n = len([name for name, view in STAGE_TABLE.items() if not view.optional])
        explorer.stage = W.IntSlider(value=0, min=0, max=n - 1, description="stage", readout=False,
                                     style={"description_width": "45px"},
                                     layout=W.Layout(width="280px"))
        explorer.stage_label = W.Label(layout=W.Layout(width="180px"))
        explorer.play = W.Play(value=0, min=0, max=n - 1, interval=1600, description="play")
        W.link((explorer.play, "value"), (explorer.stage, "value"))
        explorer.previous = W.Button(description="Previous", icon="step-backward",
                                     layout=W.Layout(width="110px"))
        explorer.next = W.Button(description="Next", icon="step-forward", layout=W.Layout(width="110px"))
        explorer.stage.observe(lambda _: explorer.touch(self.name), "value")
        explorer.previous.on_click(lambda _: step(explorer, -1))
        explorer.next.on_click(lambda _: step(explorer, +1))
        explorer.state_box = W.HBox([explorer.previous, explorer.play, explorer.next, explorer.stage,
                                     explorer.stage_label])
        return explorer.state_box

    def caption(self, explorer) -> str:
        info = stage_info(explorer.trace, explorer.stage.value)
        explorer.stage_label.value = where = f"{explorer.stage.value + 1}/{len(explorer.trace)}: {info.name}"
        return f" | stage {where} {shape_text(info.shape)}"
