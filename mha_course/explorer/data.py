"""The Data mode: the tensors themselves, heads side by side in their colours."""
from __future__ import annotations

from matplotlib.figure import Figure

from ..mha import Trace
from ..views.diagram import shape_text
from .canvas import INK, SOFT, Heads, Matrix, Mode, Scene, View
from .logic import MAX_HEADS_SHOWN, hidden_heads_note

__all__ = ["DataView", "DataMode"]


class DataView(View):
    """The tensors themselves: X, Q, K, V; per-head scores and weights; outputs and concat."""

    def __init__(self, fig: Figure, blit: bool = False):
        super().__init__(fig, blit)
        self.top = {name: Matrix(fig.add_axes((0.06 + 0.235 * i, 0.70, 0.215, 0.20)),
                                  rows=(i == 0)) for i, name in enumerate(("X", "Q", "K", "V"))}
        # Both per-head panels carry head titles, dividers between heads and the key tokens.
        self.scores = Heads(fig, (0.06, 0.385, 0.43, 0.2), with_strip=False, keys=64)
        self.weights = Heads(fig, (0.555, 0.385, 0.405, 0.2), with_strip=False, rows=False,
                              keys=64)
        self._colour_bars(fig)
        self.outputs = Heads(fig, (0.06, 0.04, 0.43, 0.16))
        self.concat = Heads(fig, (0.555, 0.04, 0.405, 0.16), rows=False, head_titles=False)
        fig.text(0.985, 0.975, "rows: tokens · columns: features · red > 0 > blue", ha="right",
                 va="bottom", fontsize=7.5, color=SOFT)
        self.titles = {k: fig.text(0.06 + 0.235 * i, 0.905, "", ha="left", va="bottom",
                                   fontsize=8.5, fontweight="bold", color=INK)
                       for i, k in enumerate(self.top)}
        self.titles.update(scores=self.scores.title, weights=self.weights.title,
                           outputs=self.outputs.title, concat=self.concat.title)
        for panel in (self.scores, self.weights, self.outputs, self.concat):
            for artist in panel.per_head_artists():
                self._dyn(artist)
        self._dyn(self.scores_cbar.ax)

    def _colour_bars(self, fig: Figure) -> None:
        """The weights' fixed 0..1 bar, and the scores' own (centred on 0, it changes with h)."""
        self.cbar = fig.colorbar(self.weights.matrix.image,
                                 cax=fig.add_axes((0.968, 0.385, 0.008, 0.2)))
        self.cbar.ax.tick_params(labelsize=7)
        self.cbar.set_ticks([0, 0.5, 1])
        self.scores_cbar = fig.colorbar(self.scores.matrix.image,
                                        cax=fig.add_axes((0.497, 0.385, 0.008, 0.2)))
        self.scores_cbar.ax.tick_params(labelsize=7)

    def background_key(self, scene: Scene):
        """X, Q, K, V and the token labels depend on the tokens, d_model and seed, not on h."""
        return scene.inputs

    def update(self, scene: Scene) -> None:
        t, tokens = scene.trace, scene.tokens
        for name, m in self.top.items():
            m.show(t[name][0])
            self.titles[name].set_text(f"{name} {shape_text(t.shapes[name])}")
        self.top["X"].row_labels(tokens)
        self._heads(t, tokens)

    def _heads(self, t: Trace, tokens) -> None:
        h, d_k, shown = t.h, t.d_k, min(t.h, MAX_HEADS_SHOWN)
        note = hidden_heads_note(h)
        more = f"  ({note})" if note else ""
        self.scores.show(t["scores"][0])
        self.weights.show(t["weights"][0], weights=True)
        self.scores.matrix.row_labels(tokens)
        self.outputs.matrix.row_labels(tokens)
        for panel in (self.scores, self.weights):
            panel.key_labels(tokens, shown)
        self.outputs.show(t["head_outputs"][0])
        self.concat.show(t["head_outputs"][0], gap=0, max_heads=h)  # all d_model columns
        self.titles["scores"].set_text(f"scores QKᵀ/√d_k {shape_text(t.shapes['scores'])}{more}")
        self.titles["weights"].set_text(f"weights = softmax(scores) {shape_text(t.shapes['weights'])}{more}")
        self.titles["outputs"].set_text(f"head outputs {shape_text(t.shapes['head_outputs'])}, "
                                        f"d_k = {d_k} columns each{more}")
        self.titles["concat"].set_text(f"concat {shape_text(t.shapes['concat'])}: the same columns, "
                                       "side by side")




class DataMode(Mode):
    name = "Data"
    hint = "the tensors of this sentence; heads side by side, coloured by head."
    View = DataView
