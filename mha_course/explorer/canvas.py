"""The explorer's live matplotlib kit: figures updated in place, drawn fast.

``View`` is the base of every mode's drawing: it builds its Figure once and ``update(scene)``
changes its artists in place; with ``blit=True`` only the artists that change are redrawn
over a cached picture of the rest. ``Mode`` is the base of every mode (name, hint, View,
controls, caption). The heatmap, label and diagram helpers below are shared by the modes.
"""
from __future__ import annotations

import functools
import io
from typing import NamedTuple

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Rectangle
from PIL import Image as PILImage

from .. import _validate
from ..mha import Trace
from ..views import diagram
from ..views.attention import VALUES_CMAP, WEIGHTS_CMAP, head_color
from .logic import GAP_COLOR, MAX_HEADS_SHOWN, head_spans, head_strip, heads_side_by_side

__all__ = ["FIGSIZE", "DPI", "INK", "SOFT", "LEARNED_FILL", "FREE_FILL", "ACTIVE_EDGE", "Scene",
           "Mode", "View", "Matrix", "Heads", "DiagramDrawing"]

FIGSIZE = (11.5, 6.0)   # inches; at DPI this is 1150 x 600 pixels, readable on a 1280 x 800 screen
DPI = 100
INK = "#252525"
SOFT = "#636363"
LEARNED_FILL = "#fdd0a2"   # blocks with parameters
FREE_FILL = "#deebf7"      # blocks without parameters (reshape, attention, concat)
ACTIVE_EDGE = "#e6550d"    # the stage the State mode shows
FAST_TEXT = {"text.hinting": "none"}  # a quarter faster text drawing, looks the same at 100 dpi
COMPACT_TITLES = {"attention": "attention", "add_norm": "Add & Norm", "split": "split",
                  "concat": "con-\ncat"}


class Scene(NamedTuple):
    """Everything a mode draws from: the tokens, the one Trace, the seed behind it, the State
    stage and the measured sweep."""
    tokens: list
    trace: Trace
    seed: int = 0
    stage: int = 0
    sweep: dict | None = None

    @property
    def inputs(self) -> tuple:
        """What X and the parameters depend on (not h): tokens, d_model, seed."""
        return tuple(self.tokens), self.trace.d_model, self.seed


@functools.lru_cache(maxsize=None)
def _cmap(name: str):
    """The course colour map ``name`` with white for NaN (the gaps between heads)."""
    return plt.get_cmap(name).with_extremes(bad=GAP_COLOR)


class Labels:
    """A pool of Text objects used as tick labels along one side of an axis.

    Matplotlib's tick machinery measures every label twice per draw; plain texts in a
    blended transform (data along the axis, axes fraction across it) draw in half the time.
    """

    def __init__(self, ax, axis: str, size: int, fontsize: float = 7):
        self.axis = axis
        if axis == "y":
            transform, kw = ax.get_yaxis_transform(), dict(ha="right", va="center")
        else:
            transform, kw = ax.get_xaxis_transform(), dict(ha="center", va="top", rotation=90)
        # Figure-level texts, so a view can keep them in its static layer while the axis redraws.
        self.texts = [ax.figure.text(-0.01 if axis == "y" else 0, -0.02 if axis == "x" else 0,
                                     "", transform=transform, fontsize=fontsize, color=INK,
                                     visible=False, **kw) for _ in range(size)]

    def set(self, positions, labels) -> None:
        """Show ``labels`` at data coordinates ``positions``; hide the rest of the pool."""
        for i, text in enumerate(self.texts):
            text.set_visible(i < len(labels))
            if i < len(labels):
                if self.axis == "y":
                    text.set_y(positions[i])
                else:
                    text.set_x(positions[i])
                text.set_text(labels[i])


class Matrix:
    """One heatmap on ``ax`` whose data, colour scale and labels change in place."""

    def __init__(self, ax, cmap=VALUES_CMAP, rows: bool = True, keys: int = 0):
        rows, keys = _validate.flag(rows, "rows"), _validate.count(keys, "keys")
        self.ax = ax
        self.image = ax.imshow(np.zeros((1, 1)), cmap=_cmap(cmap), aspect="auto",
                               interpolation="nearest")
        ax.set_xticks([])
        ax.set_yticks([])
        self.rows = Labels(ax, "y", 16) if rows else None
        self.keys = Labels(ax, "x", keys) if keys else None

    def show(self, values, weights: bool = False) -> None:
        """values (rows, cols); weights=True uses WEIGHTS_CMAP on 0..1, else a range centred on 0."""
        weights = _validate.flag(weights, "weights")
        v = np.ma.masked_invalid(np.asarray(values, dtype=float))
        self.image.set_data(v)
        cmap = _cmap(WEIGHTS_CMAP if weights else VALUES_CMAP)
        if self.image.get_cmap() is not cmap:  # switching maps is slow: only when it changes
            self.image.set_cmap(cmap)
        if weights:
            self.image.set_clim(0.0, 1.0)
        else:
            lim = float(np.abs(v).max()) if v.count() else 1.0
            self.image.set_clim(-(lim or 1.0), lim or 1.0)
        rows, cols = v.shape
        self.image.set_extent((-0.5, cols - 0.5, rows - 0.5, -0.5))
        self.ax.set_xlim(-0.5, cols - 0.5)
        self.ax.set_ylim(rows - 0.5, -0.5)

    def row_labels(self, tokens) -> None:
        """A token label on every row, or none when the rows are narrower than a label (a
        thinned column of tokens would read as another sentence)."""
        height_px = self.ax.get_position().height * self.ax.figure.bbox.height
        n = len(tokens)
        pos = list(range(n)) if n <= len(self.rows.texts) and height_px / n >= 7 else []
        self.rows.set(pos, [tokens[i] for i in pos])


class Heads:
    """Heads side by side on one axis: a heatmap, a colour strip above it, head titles above
    that and a panel title on top; ``rect`` (x, y, w, h) is the heatmap in figure fractions."""

    def __init__(self, fig, rect, with_strip: bool = True, rows: bool = True, keys: int = 0,
                 head_titles: bool = True):
        for value, name in ((with_strip, "with_strip"), (head_titles, "head_titles")):
            _validate.flag(value, name)
        x, y, w, h = rect
        self.matrix = Matrix(fig.add_axes(rect), rows=rows, keys=keys)
        top = y + h
        self.strip = None
        if with_strip:
            self.strip = fig.add_axes((x, top + 0.006, w, 0.016))
            self.strip_image = self.strip.imshow(np.ones((1, 1, 4)), aspect="auto",
                                                 interpolation="nearest")
            self.strip.set_axis_off()
            top += 0.022
        self.x, self.w, self.px = x, w, w * fig.get_figwidth() * fig.dpi
        self.titles = [fig.text(x, top + 0.004, "", ha="center", va="bottom", fontsize=7.5,
                                fontweight="bold", color=head_color(i))
                       for i in range(MAX_HEADS_SHOWN if head_titles else 0)]
        self.title = fig.text(x, top + 0.032, "", ha="left", va="bottom", fontsize=8.5,
                              fontweight="bold", color=INK)
        self.dividers = []

    def show(self, a, weights: bool = False, gap: int = 1, max_heads: int = MAX_HEADS_SHOWN) -> None:
        """a (h, T, n): draw up to ``max_heads`` heads, titled and striped in head colours, with
        a dark line in each gap between two heads (a white gap alone vanishes in a pale map)."""
        a = _validate.array(a, "a", 3, "(h, T, n)")
        k, n = min(a.shape[0], max_heads), a.shape[2]
        self.matrix.show(heads_side_by_side(a, max_heads, gap), weights)
        width = k * n + (k - 1) * gap
        spans = head_spans(k, n, gap)
        for line in self.dividers:
            line.remove()
        self.dividers = [self.matrix.ax.axvline(stop - 0.5 + gap / 2, color=INK, lw=1.0)
                         for _, stop in spans[:-1]] if gap else []
        if self.strip is not None:
            self.strip_image.set_data(head_strip(k, n, gap))
            self.strip_image.set_extent((-0.5, width - 0.5, 0.5, -0.5))
            self.strip.set_xlim(-0.5, width - 0.5)
        per_head_px = self.px * n / width
        for i, text in enumerate(self.titles):
            text.set_visible(i < k and per_head_px >= 14)
            if i < k:
                start, stop = spans[i]
                text.set_x(self.x + self.w * (start + stop) / 2 / width)
                text.set_text(f"head {i}" if per_head_px >= 45 else f"{i}")

    def per_head_artists(self) -> list:
        """Everything of this panel that changes with h (its row labels do not)."""
        keys = self.matrix.keys.texts if self.matrix.keys else []
        strip = [self.strip] if self.strip is not None else []
        return [self.matrix.ax, *strip, *self.titles, self.title, *keys]

    def key_labels(self, tokens, k: int) -> None:
        """Every key token under every head when the label pool has room for them all, else
        under head 0 only; none when a column is narrower than a label (a thinned row of tokens
        would read as another sentence)."""
        n, room = len(tokens), len(self.matrix.keys.texts)
        column_px = self.px / (k * n + k - 1)
        if column_px < 8 or n > room:
            self.matrix.keys.set([], [])
            return
        spans = head_spans(k, n) if k * n <= room else head_spans(1, n)
        self.matrix.keys.set([s + j for s, _ in spans for j in range(n)],
                             [tokens[j] for _ in spans for j in range(n)])


class DiagramDrawing:
    """The block diagram of ``diagram`` on an axis; ``update(labels, h)`` rewrites its text,
    ``highlight(stage)`` lights the boxes and arrows of one stage (State mode)."""

    def __init__(self, ax, compact: bool = False):
        self.ax, self.compact = ax, _validate.flag(compact, "compact")
        ax.set_xlim(0, diagram.WIDTH)
        ax.set_ylim(0, diagram.HEIGHT)
        ax.set_axis_off()
        self.boxes = {name: self._box(name, b) for name, b in diagram.BOXES.items()}
        self.arrows = {name: self._arrow(a) for name, a in diagram.ARROWS.items()}
        fs = 6.5 if compact else 8.5
        self.params, self.arrow_labels = {}, {}
        if not compact:
            self.params = {n: ax.text(b.cx, b.bottom + 0.8, "", ha="center", va="bottom",
                                      fontsize=7.5, color=SOFT) for n, b in diagram.BOXES.items()
                           if n not in ("X",)}
            self.arrow_labels = {n: ax.text(a.label_at[0], a.label_at[1], "", ha=a.label_at[2],
                                            va="bottom", fontsize=fs, color=INK)
                                 for n, a in diagram.ARROWS.items()}
        att = diagram.BOXES["attention"]
        self.cards = [ax.add_patch(Rectangle((0, 0), 1, 1, color=head_color(i), alpha=0.85,
                                             lw=0)) for i in range(MAX_HEADS_SHOWN)]
        self.heads_text = ax.text(att.cx, att.bottom + (1.0 if compact else 6.3), "",
                                  ha="center", va="bottom", fontsize=fs, color=INK)
        self.scores_text = ax.text(att.cx, att.bottom + 2.8, "", ha="center", va="bottom",
                                   fontsize=7, color=SOFT, visible=not compact)
        self.hidden_text = ax.text(att.cx, att.top - (8.6 if not compact else 7.2), "", ha="center",
                                   va="bottom", fontsize=7 if not compact else 6, color=INK)
        self.x_text = ax.text(diagram.BOXES["X"].cx, diagram.MID - 2.8, "", ha="center",
                              va="center", fontsize=7 if not compact else 6, color=INK)

    def _box(self, name: str, b):
        title = COMPACT_TITLES.get(name, b.title) if self.compact else b.title
        patch = FancyBboxPatch((b.left, b.bottom), b.w, b.h, boxstyle="round,pad=0,rounding_size=1.2",
                               fc=LEARNED_FILL if b.learned else FREE_FILL, ec="#4d4d4d", lw=1.0)
        self.ax.add_patch(patch)
        title_y = b.top - 1.0 if b.h > 12 else b.cy + (1.0 if not self.compact else 0)
        self.ax.text(b.cx, title_y, title, ha="center", va="top" if b.h > 12 else "center",
                     fontsize=(6.5 if self.compact else 9) + (1 if "$" in title else 0),
                     fontweight="bold", color=INK, linespacing=1.1)
        return patch

    def _arrow(self, a):
        (xs, ys) = zip(*a.points)
        line, = self.ax.plot(xs[:-1] + (xs[-1],), ys[:-1] + (ys[-1],), color=SOFT, lw=1.3,
                             solid_capstyle="butt")
        head = self.ax.annotate("", xy=a.points[-1], xytext=a.points[-2],
                                arrowprops=dict(arrowstyle="-|>", color=SOFT, lw=1.3,
                                                shrinkA=0, shrinkB=0, mutation_scale=11))
        return [line, head]

    def update(self, labels: dict, h: int) -> None:
        """Rewrite every live label (shapes, parameter counts, the head cards) from diagram_labels."""
        for name, text in self.arrow_labels.items():
            a = diagram.ARROWS[name]
            text.set_text(f"{a.name}\n{labels['arrows'][name]}" if a.name else labels["arrows"][name])
        for name, text in self.params.items():
            text.set_text(labels["params"][name])
        self.x_text.set_text(labels["X"] if not self.compact else "")
        self.heads_text.set_text(labels["heads"].replace(", ", "\n") if not self.compact
                                 else f"h = {h}")
        self.scores_text.set_text(labels["scores"])
        self._cards(h)

    def _cards(self, h: int) -> None:
        att, k = diagram.BOXES["attention"], min(h, MAX_HEADS_SHOWN)
        top = att.top - (9.5 if not self.compact else 8.0)
        bottom = att.bottom + (10.5 if not self.compact else 4.0)
        pitch = (top - bottom) / MAX_HEADS_SHOWN
        start = bottom + (MAX_HEADS_SHOWN - k) * pitch / 2
        for i, card in enumerate(self.cards):
            card.set_visible(i < k)
            card.set_bounds(att.left + 2.0, start + (k - 1 - i) * pitch, att.w - 4.0, pitch * 0.7)
        self.hidden_text.set_text(f"{MAX_HEADS_SHOWN} of {h} heads drawn" if h > k else "")

    def per_head_artists(self) -> list:
        """The artists whose look depends on h (the rest depends on d_model and seq_len only)."""
        per_head = [self.arrow_labels[n] for n in ("Q_heads", "K_heads", "V_heads", "head_outputs")
                    if n in self.arrow_labels]
        return [*per_head, self.heads_text, self.scores_text, self.hidden_text, *self.cards]

    def highlight(self, stage: str | None) -> None:
        """Light the box and arrows of ``stage`` (None: nothing lit)."""
        box, lit = diagram.lit(stage)
        for name, patch in self.boxes.items():
            patch.set_edgecolor(ACTIVE_EDGE if name == box else "#4d4d4d")
            patch.set_linewidth(3.0 if name == box else 1.0)
        for name, (line, head) in self.arrows.items():
            color, lw = (ACTIVE_EDGE, 2.6) if name in lit else (SOFT, 1.3)
            line.set_color(color)
            line.set_linewidth(lw)
            head.arrow_patch.set_color(color)


class View:
    """A mode: its Figure (built once) and ``update(scene)`` to change its artists in place.

    With ``blit=True`` (the live explorer) the artists registered with ``_dyn`` are drawn on
    top of a cached picture of everything else, which is redrawn only when
    ``background_key(scene)`` changes. Static renders (``blit=False``) draw everything.
    """

    def __init__(self, fig: Figure, blit: bool = False):
        self.fig, self.blit = fig, _validate.flag(blit, "blit")
        self.dynamic: list = []
        self._background, self._key = None, None

    def _dyn(self, artist):
        self.dynamic.append(artist)
        artist.set_animated(self.blit)
        return artist

    def _heading(self, title: str, x: float, ha: str, size: float, sub_y: float, sub_size: float):
        """Draw a bold title at the top of the figure; return its (dynamic) subtitle text."""
        self.fig.text(x, 0.975, title, ha=ha, va="top", fontsize=size, fontweight="bold", color=INK)
        return self._dyn(self.fig.text(x, sub_y, "", ha=ha, va="top", fontsize=sub_size, color=SOFT))

    def background_key(self, scene: Scene):
        """What the cached static layer depends on (None: it never changes)."""
        return None

    def update(self, scene: Scene) -> None:
        raise NotImplementedError

    def png(self, scene: Scene) -> bytes:
        """Update for ``scene``, draw (re-using the static layer when blitting) and encode PNG."""
        self.update(scene)
        with plt.rc_context(FAST_TEXT):
            return self._draw(scene)

    def _draw(self, scene: Scene) -> bytes:
        canvas = self.fig.canvas
        key = self.background_key(scene)
        if not self.blit or self._background is None or key != self._key:
            canvas.draw()
            self._background, self._key = canvas.copy_from_bbox(self.fig.bbox), key
        else:
            canvas.restore_region(self._background)
        for artist in self.dynamic if self.blit else ():
            if artist.get_visible():
                self.fig.draw_artist(artist)
        return _encode(canvas)


def _encode(canvas) -> bytes:
    """The Agg canvas's current pixels -> PNG bytes (fast compression: runs on every change)."""
    rgba = np.asarray(canvas.buffer_rgba())
    buf = io.BytesIO()
    PILImage.fromarray(rgba[..., :3]).save(buf, format="png", compress_level=1)
    return buf.getvalue()




class Mode:
    """One mode of the explorer: everything about it lives in its own module.

    ``name`` (its toggle button), ``hint`` (its caption line), ``View`` (the class that draws
    it, whose ``update(scene)`` reads the Trace), ``controls(explorer)`` (the widgets shown
    only in this mode, or None) and ``caption(explorer)`` (what it adds to the shapes line).
    The explorer builds its buttons, views, control rows and captions from ``app.MODE_LIST``.
    """
    name: str = ""
    hint: str = ""
    View: type = View

    def controls(self, explorer):
        """explorer -> a widget box shown only in this mode, wired to ``explorer`` (None: none)."""
        return None

    def caption(self, explorer) -> str:
        """explorer -> text added to the caption's shapes line while this mode is visible."""
        return ""
