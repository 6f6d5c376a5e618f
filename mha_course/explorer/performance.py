"""The Performance mode: the cost ledger and a measured sweep over seq_len.

Its controls: a Measure sweep button and a progress bar; ``measure`` times the forward pass
(``complexity.time_sweep``) and keeps the result as ``explorer.sweep``.
"""
from __future__ import annotations

import ipywidgets as W
import numpy as np
from matplotlib import ticker as mticker
from matplotlib.figure import Figure

from .. import _validate
from ..lessons import complexity
from ..mha import Trace
from ..views.attention import head_color
from .canvas import ACTIVE_EDGE, INK, LEARNED_FILL, SOFT, Mode, Scene, View
from .logic import format_seconds, guide_lines, ledger_rows, sweep_seq_lens

__all__ = ["PerformanceView", "PerformanceMode", "measure"]


class PerformanceView(View):
    """The cost ledger for the current sizes, and the measured time against seq_len."""

    def __init__(self, fig: Figure, blit: bool = False):
        super().__init__(fig, blit)
        self.sizes = self._heading("What one forward pass costs", 0.02, "left", 12, 0.915, 9)
        self.columns = [self._dyn(fig.text(x, 0.84, "", ha=ha, va="top", fontsize=9.5,
                                           color=INK, family=fam, linespacing=2.0))
                        for x, ha, fam in ((0.02, "left", None), (0.29, "right", None),
                                           (0.31, "left", None))]
        self.bars_ax = self._dyn(fig.add_axes((0.11, 0.10, 0.31, 0.26)))
        self.bar_values = [self.bars_ax.text(0, y, "", va="center", ha="left", fontsize=8,
                                             color=INK) for y in (1, 0)]
        self.bars = self.bars_ax.barh([1, 0], [1, 1], color=[LEARNED_FILL, head_color(0)],
                                      height=0.6)
        self.bars_ax.set_yticks([1, 0], ["projections", "attention"], fontsize=8.5)
        self.bars_ax.tick_params(labelsize=7.5)
        self.bars_ax.set_xlabel("FLOP, one per add or multiply (linear scale)", fontsize=8)
        self.bars_ax.spines[["top", "right"]].set_visible(False)
        self._sweep_axes(fig.add_axes((0.53, 0.12, 0.44, 0.76)))

    def _sweep_axes(self, ax) -> None:
        self.ax = ax
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(mticker.FuncFormatter(lambda x, _: f"{x:.0f}"))
        ax.yaxis.set_major_formatter(mticker.FuncFormatter(lambda x, _: format_seconds(x)))
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_minor_locator(mticker.NullLocator())
        ax.set_xlabel("seq_len T (log scale)", fontsize=9)
        ax.set_ylabel("time per forward pass (log scale)", fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(True, which="major", color="#ececec", lw=0.8)
        self.measured, = ax.plot([], [], "o-", color=head_color(0), lw=2, ms=5)
        self.linear, = ax.plot([], [], "--", color=SOFT, lw=1.2)
        self.quadratic, = ax.plot([], [], ":", color=ACTIVE_EDGE, lw=1.6)
        self.now = self._dyn(ax.axvline(1, color=INK, lw=1.2, alpha=0.6))
        self.cross = ax.axvline(1, color=LEARNED_FILL, lw=4, alpha=0.8, zorder=0)
        self.note = ax.text(0.5, 0.55, "", transform=ax.transAxes, ha="center", va="center",
                            fontsize=10, color=SOFT)
        self.sweep_title = ax.set_title("", fontsize=9.5, loc="left")
        ax.legend(handles=[self.measured, self.linear, self.quadratic, self.now, self.cross],
                  labels=["measured", "O(T) guide", "O(T²) guide", "current seq_len",
                          "T = 2·d_model (FLOPs cross)"], fontsize=7.5, loc="lower right")

    def update(self, scene: Scene) -> None:
        t = scene.trace
        T = t.shapes["X"][1]
        rows = ledger_rows(t.d_model, t.h, T)
        for i, text in enumerate(self.columns):
            text.set_text("\n".join(row[i] for row in rows))
        self.sizes.set_text(f"d_model = {t.d_model}, h = {t.h}, d_k = {t.d_k}, seq_len = {T}, "
                            "batch = 1")
        L = complexity.ledger(t.d_model, t.h, T)
        for bar, text, value in zip(self.bars, self.bar_values,
                                    (L.projection_flops, L.attention_flops)):
            bar.set_width(value)
            text.set_x(value)
            text.set_text(f" {complexity.format_count(value)}FLOP")
        self.bars_ax.set_xlim(0, 1.3 * max(L.projection_flops, L.attention_flops))
        self.now.set_xdata([T, T])
        self._sweep(scene.sweep, t)

    def background_key(self, scene: Scene):
        """The sweep plot depends on d_model (its FLOP crossover) and on the sweep, whose title
        names h; the ledger, the bars and the seq_len marker are redrawn on every change."""
        sweep, t = scene.sweep, scene.trace
        return t.d_model, None if not sweep else (id(sweep), t.h)

    def _sweep(self, sweep, t: Trace) -> None:
        self.cross.set_xdata([2 * t.d_model] * 2)
        if not sweep:
            for line in (self.measured, self.linear, self.quadratic):
                line.set_data([], [])
            self.note.set_text("press 'Measure sweep' to time\nthe forward pass over seq_len")
            self.ax.set_xlim(4, 2048)
            self.ax.set_ylim(1e-5, 1)
            self.sweep_title.set_text("")
            return
        lens, secs = np.asarray(sweep["seq_lens"]), np.asarray(sweep["seconds"])
        guides = guide_lines(lens, secs)
        self.measured.set_data(lens, secs)
        self.linear.set_data(lens, guides["O(T)"])
        self.quadratic.set_data(lens, guides["O(T²)"])
        self.note.set_text("")
        self.ax.set_xlim(min(lens.min(), 4) / 1.3, max(lens.max(), 2 * t.d_model) * 1.3)
        lo = min(secs.min(), guides["O(T²)"].min())
        self.ax.set_ylim(lo / 2, secs.max() * 3)
        stale = (sweep["d_model"], sweep["h"]) != (t.d_model, t.h)
        self.sweep_title.set_text(
            f"measured at d_model = {sweep['d_model']}, h = {sweep['h']}: slope "
            f"{complexity.loglog_slope(lens[-3:], secs[-3:]):.2f} over the last 3 points"
            + ("  (sizes changed: measure again)" if stale else ""))




def measure(explorer, max_len: int = 1024, repeats: int = 3) -> dict:
    """Time the forward pass over ``sweep_seq_lens`` at the explorer's d_model and h.

    Updates the progress bar after each length; the result feeds the Performance mode.
    """
    v = explorer.controls.values
    lens = sweep_seq_lens(v["seq_len"], max_len)  # max_len checked before the progress bar moves
    repeats = _validate.positive_int(repeats, "repeats")
    explorer.progress.max, explorer.progress.value = len(lens), 0
    seconds = complexity.time_sweep(
        lens, v["d_model"], v["h"], rng=np.random.default_rng(int(explorer.seed.value)),
        repeats=repeats, progress=lambda done, total: setattr(explorer.progress, "value", done))
    explorer.sweep = {"seq_lens": lens, "seconds": seconds.tolist(), "d_model": v["d_model"],
                      "h": v["h"]}
    explorer.touch(PerformanceMode.name)
    return explorer.sweep


class PerformanceMode(Mode):
    name = "Performance"
    hint = "the cost of one forward pass; press Measure sweep to time it over seq_len."
    View = PerformanceView

    def controls(self, explorer):
        """The Measure sweep button and the progress bar (``explorer.measure_button``,
        ``explorer.progress``); the row is ``explorer.performance_box``."""
        explorer.measure_button = W.Button(description="Measure sweep", icon="clock-o",
                                           button_style="info", layout=W.Layout(width="150px"))
        explorer.progress = W.IntProgress(value=0, min=0, max=1, description="sweep",
                                          style={"description_width": "45px"})
        explorer.measure_button.on_click(lambda _: measure(explorer))
        explorer.performance_box = W.HBox([explorer.measure_button, explorer.progress])
        return explorer.performance_box
