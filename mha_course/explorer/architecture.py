"""The Architecture mode: the block diagram with live shapes and parameter counts."""
from __future__ import annotations

from matplotlib.figure import Figure

from ..views import diagram
from .canvas import SOFT, DiagramDrawing, Mode, Scene, View

__all__ = ["ArchitectureView", "ArchitectureMode", "LEGEND"]

LEGEND = ("orange: learned parameters · blue: no parameters · "
          "shapes are (B, T, d_model) and (B, h, T, d_k)")


class ArchitectureView(View):
    """The block diagram with live shapes on every arrow and parameter counts on every block."""

    def __init__(self, fig: Figure, blit: bool = False):
        super().__init__(fig, blit)
        self.subtitle = self._heading("The multi-head attention block", 0.5, "center", 13, 0.93, 10)
        self.drawing = DiagramDrawing(fig.add_axes((0.005, 0.0, 0.99, 0.89)))
        for artist in self.drawing.per_head_artists():
            self._dyn(artist)
        self.legend = fig.text(0.005, 0.005, LEGEND, ha="left", va="bottom", fontsize=7, color=SOFT)

    def background_key(self, scene: Scene):
        """Everything but the per-head labels depends on d_model and seq_len only."""
        return scene.trace.shapes["X"]

    def update(self, scene: Scene) -> None:
        labels = diagram.diagram_labels(scene.trace)
        self.drawing.update(labels, scene.trace.h)
        self.subtitle.set_text(f"{labels['title']}  ·  parameters: 4·d_model² = "
                               f"{4 * scene.trace.d_model ** 2:,} in the W's + "
                               f"{2 * scene.trace.d_model:,} in LayerNorm = {labels['total']:,}, "
                               "whatever h is")




class ArchitectureMode(Mode):
    name = "Architecture"
    hint = "the block diagram; every arrow shows its live shape, every block its parameter count."
    View = ArchitectureView
