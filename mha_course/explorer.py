"""The explorer: one widget, four views of one forward pass (floor 4).

    from mha_course.explorer import Explorer
    Explorer()                       # in a notebook; `voila notebooks/explorer_app.ipynb` for a screen

Shared controls: d_model, h (always a divisor of d_model), seq_len, the sentence and a seed.
Every change computes ONE Trace (tokens -> seeded embedding -> ``mha_course.trace``); the
four modes only read it:

- **Architecture**: the block diagram, every arrow labelled with its live shape and every
  block with its parameter count;
- **Data**: X, Q, K, V; per-head scores and weights; per-head outputs and their concatenation,
  coloured by head;
- **State**: the computation one stage at a time (Previous / Next / Play), with the stage lit
  on the diagram, its tensor, one sentence of the detective story and its formula;
- **Performance**: the cost ledger for the current sizes and a measured sweep over seq_len on
  log-log axes.

Each mode keeps one matplotlib Figure and updates its artists in place; only the visible mode
is redrawn, and the picture reaches the browser as PNG bytes in an ``ipywidgets.Image``.
``explorer.render(mode)`` draws any mode as a new static Figure (notebooks, docs, nbval).
The logic behind the modes is in pure functions (``sentence_tokens``, ``stage_info``,
``ledger_rows``, ``heads_side_by_side``, ``guide_lines``, ... and ``diagram.diagram_labels``).

Taught in 00_overview.ipynb.
"""
from __future__ import annotations

import functools
import io
import re
import textwrap
from typing import NamedTuple

import ipywidgets as W
import matplotlib.pyplot as plt
import numpy as np
from matplotlib import colors as mcolors
from matplotlib import ticker as mticker
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Rectangle
from PIL import Image as PILImage

from . import complexity, diagram
from .diagram import shape_text as _shape_text
from .block import layer_norm
from .mha import STAGES, Trace, trace
from .plots import (HEAD_COLORS, MASKED_COLOR, VALUES_CMAP, WEIGHTS_CMAP, head_color)
from .qkv import sentence_inputs
from .stages import STAGE_TABLE
from .widgets import SizeControls

__all__ = ["Explorer", "MODES", "DEFAULT_SENTENCE", "StageInfo", "sentence_tokens",
           "explorer_trace", "block_output", "shape_summary", "stage_info", "ledger_rows",
           "heads_side_by_side", "head_spans", "head_strip", "tick_positions",
           "sweep_seq_lens", "guide_lines", "format_seconds"]

MODES = ("Architecture", "Data", "State", "Performance")
DEFAULT_SENTENCE = "the cat sat on the mat because it was warm and soft under the old lamp"
MAX_HEADS_SHOWN = 8     # the Data and State modes draw at most this many heads
FIGSIZE = (11.5, 6.0)   # inches; at DPI this is 1150 x 600 pixels, readable on a 1280 x 800 screen
DPI = 100
INK = "#252525"
SOFT = "#636363"
LEARNED_FILL = "#fdd0a2"   # blocks with parameters
FREE_FILL = "#deebf7"      # blocks without parameters (reshape, attention, concat)
ACTIVE_EDGE = "#e6550d"    # the stage the State mode shows
MODE_HINTS = {
    "Architecture": "the block diagram; every arrow shows its live shape, every block its "
                    "parameter count.",
    "Data": "the tensors of this sentence; heads side by side, coloured by head.",
    "State": "one stage at a time: Previous / Play / Next.",
    "Performance": "the cost of one forward pass; press Measure sweep to time it over seq_len.",
}
FAST_TEXT = {"text.hinting": "none"}  # a quarter faster text drawing, looks the same at 100 dpi
COMPACT_TITLES = {"attention": "attention", "add_norm": "Add & Norm", "split": "split",
                  "concat": "con-\ncat"}
GAP_COLOR = "white"        # the columns between heads in side-by-side views


# ---------------------------------------------------------------------------------------------
# Pure logic: what each mode shows, computed from the controls and the Trace
# ---------------------------------------------------------------------------------------------

def sentence_tokens(sentence: str, seq_len: int) -> list[str]:
    """sentence, seq_len -> seq_len tokens: its words, cut to seq_len or padded ``tok<i>``.

    Words are runs of letters, digits and apostrophes, lower-cased. An empty sentence gives
    the course sentence.

    >>> sentence_tokens("The cat sat.", 5)
    ['the', 'cat', 'sat', 'tok3', 'tok4']
    """
    if not isinstance(seq_len, (int, np.integer)) or seq_len < 1:
        raise ValueError(f"seq_len={seq_len!r} must be a positive integer, e.g. seq_len=6")
    words = re.findall(r"[\w']+", str(sentence).lower()) or DEFAULT_SENTENCE.split()
    return words[:seq_len] + [f"tok{i}" for i in range(len(words), seq_len)]


def explorer_trace(tokens, d_model: int, h: int, seed: int) -> Trace:
    """tokens (T,), d_model, h, seed -> the Trace every mode reads (self-attention, no mask).

    The same numbers as ``qkv.sentence_trace``: one Generator seeded with ``seed`` draws the
    parameters, then a (vocabulary, d_model) embedding table; X (1, T, d_model) is its rows.
    X and the parameters do not depend on h, so they are kept between h changes.

    >>> explorer_trace(["the", "cat", "sat"], 8, 2, seed=0).shapes["weights"]
    (1, 2, 3, 3)
    """
    X, params = _inputs(tuple(str(t) for t in tokens), int(d_model), int(seed))
    return trace(X, params, h)


@functools.lru_cache(maxsize=4)
def _inputs(tokens: tuple, d_model: int, seed: int):
    """(tokens, d_model, seed) -> X (1, T, d_model) read-only, MHAParams: sentence_trace's draws."""
    X, params = sentence_inputs(list(tokens), d_model, seed)
    X.setflags(write=False)
    return X, params


def block_output(trace: Trace) -> np.ndarray:
    """Trace -> LayerNorm(X + output) (B, T, d_model): the post-norm block around attention.

    >>> t = explorer_trace(["a", "b"], 4, 2, seed=0)
    >>> block_output(t).shape
    (1, 2, 4)
    """
    return layer_norm(trace["X"] + trace["output"])  # (B, T, D) + (B, T, D) -> (B, T, D)


def shape_summary(trace: Trace) -> str:
    """Trace -> one line with the sizes and the shapes that change with them.

    >>> print(shape_summary(explorer_trace(["a", "b", "c"], 8, 2, seed=0)))
    d_model=8 · h=2 · d_k=4 · seq_len=3 | Q_heads (1, 2, 3, 4) · weights (1, 2, 3, 3) · concat (1, 3, 8)
    """
    s = trace.shapes
    return (f"d_model={trace.d_model} · h={trace.h} · d_k={trace.d_k} · seq_len={s['X'][1]} | "
            f"Q_heads {_shape_text(s['Q_heads'])} · weights {_shape_text(s['weights'])} · "
            f"concat {_shape_text(s['concat'])}")


class StageInfo(NamedTuple):
    """What the State mode says about one stage."""
    name: str
    story: str
    formula: str   # matplotlib mathtext
    shape: tuple


def stage_info(trace: Trace, i: int) -> StageInfo:
    """Trace, stage index i (0-based, computation order) -> StageInfo(name, story, formula, shape).

    >>> info = stage_info(explorer_trace(["a", "b"], 4, 2, seed=0), 4)
    >>> info.name, info.shape
    ('Q_heads', (1, 2, 2, 2))
    """
    names = trace.names
    if not isinstance(i, (int, np.integer)) or not 0 <= i < len(names):
        raise ValueError(f"stage index i={i!r} is out of range; use 0..{len(names) - 1} "
                         f"({names[0]} .. {names[-1]})")
    name = names[i]
    view = STAGE_TABLE[name]
    return StageInfo(name, view.story, view.formula, trace.shapes[name])


def ledger_rows(d_model: int, h: int, seq_len: int) -> list[tuple[str, str, str]]:
    """Sizes -> rows (quantity, value, how it scales) of the cost ledger for one sequence.

    >>> ledger_rows(16, 4, 6)[0]
    ('projections', '12.29 kFLOP', '8·T·d_model²')
    """
    L = complexity.ledger(d_model, h, seq_len)
    return [
        ("projections", f"{complexity.format_count(L.projection_flops)}FLOP", "8·T·d_model²"),
        ("attention", f"{complexity.format_count(L.attention_flops)}FLOP", "4·T²·d_model"),
        ("total", f"{complexity.format_count(L.total_flops)}FLOP",
         f"attention share {L.attention_flops / L.total_flops:.1%}"),
        ("score matrix", complexity.format_bytes(L.score_bytes), "h·T²·4 bytes"),
        ("parameters", f"{L.params:,}", "4·d_model², any h"),
        ("crossover", f"T = {complexity.crossover_seq_len(d_model)}",
         "attention = projections"),
    ]


def head_spans(k: int, n: int, gap: int = 1) -> list[tuple[int, int]]:
    """k heads of n columns each, ``gap`` empty columns between -> [(start, stop)] per head.

    >>> head_spans(3, 2)
    [(0, 2), (3, 5), (6, 8)]
    """
    return [(i * (n + gap), i * (n + gap) + n) for i in range(k)]


def heads_side_by_side(a, max_heads: int = MAX_HEADS_SHOWN, gap: int = 1) -> np.ndarray:
    """a (h, T, n) -> (T, k·n + (k-1)·gap), k = min(h, max_heads): heads left to right,
    NaN in the gap columns (drawn white).

    >>> heads_side_by_side(np.ones((2, 3, 2))).shape
    (3, 5)
    """
    a = np.asarray(a, dtype=float)
    if a.ndim != 3:
        raise ValueError(f"heads_side_by_side needs (h, T, n), got shape {a.shape}")
    k, (_, T, n) = min(a.shape[0], max_heads), a.shape
    out = np.full((T, k * n + (k - 1) * gap), np.nan)
    for i, (start, stop) in enumerate(head_spans(k, n, gap)):
        out[:, start:stop] = a[i]  # (T, n) block of head i
    return out


def head_strip(k: int, n: int, gap: int = 1) -> np.ndarray:
    """k heads of n columns -> (1, width, 4) RGBA row: each head's columns in its colour.

    The colour bar drawn above side-by-side heads and above the concatenation (gap=0), so
    the learner sees which columns came from which head.

    >>> strip = head_strip(2, 3, gap=0)
    >>> strip.shape, bool(np.allclose(strip[0, 0], mcolors.to_rgba(head_color(0))))
    ((1, 6, 4), True)
    """
    width = k * n + (k - 1) * gap
    strip = np.tile(np.array(mcolors.to_rgba(GAP_COLOR)), (1, width, 1))
    for i, (start, stop) in enumerate(head_spans(k, n, gap)):
        strip[0, start:stop] = mcolors.to_rgba(head_color(i))
    return strip


def tick_positions(n: int, max_ticks: int = 16) -> list[int]:
    """n positions -> at most ``max_ticks`` evenly spaced indices to label (all if n is small).

    >>> tick_positions(6), tick_positions(128)[:4]
    ([0, 1, 2, 3, 4, 5], [0, 8, 16, 24])
    """
    step = max(1, -(-n // max_ticks))
    return list(range(0, n, step))


def sweep_seq_lens(seq_len: int, max_len: int = 1024) -> list[int]:
    """seq_len -> the sequence lengths a timing sweep measures: 8, 16, ..., max_len and seq_len.

    >>> sweep_seq_lens(6, 64)
    [6, 8, 16, 32, 64]
    """
    powers = [2 ** p for p in range(3, int(np.log2(max_len)) + 1)]
    return sorted(set(powers) | {int(seq_len)})


def guide_lines(seq_lens, seconds) -> dict:
    """Measured (T, time) points -> {"O(T)": ys, "O(T²)": ys}: lines through the point of the
    largest T with slopes 1 and 2 on log-log axes.

    >>> g = guide_lines([1, 2, 4], [1.0, 2.0, 16.0])
    >>> g["O(T²)"].tolist(), g["O(T)"].tolist()
    ([1.0, 4.0, 16.0], [4.0, 8.0, 16.0])
    """
    T = np.asarray(seq_lens, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if T.shape != t.shape or T.ndim != 1 or T.size == 0:
        raise ValueError(f"seq_lens and seconds must be 1-D of one length, got {T.shape} and {t.shape}")
    last = int(np.argmax(T))
    return {"O(T)": t[last] * T / T[last], "O(T²)": t[last] * (T / T[last]) ** 2}


# ---------------------------------------------------------------------------------------------
# Drawing: one class per mode, built once on its Figure, updated in place
# ---------------------------------------------------------------------------------------------

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


class _Labels:
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


class _Matrix:
    """One heatmap on ``ax`` whose data, colour scale and labels change in place."""

    def __init__(self, ax, cmap=VALUES_CMAP, rows: bool = True, keys: int = 0):
        self.ax = ax
        self.image = ax.imshow(np.zeros((1, 1)), cmap=_cmap(cmap), aspect="auto",
                               interpolation="nearest")
        ax.set_xticks([])
        ax.set_yticks([])
        self.rows = _Labels(ax, "y", 16) if rows else None
        self.keys = _Labels(ax, "x", keys) if keys else None

    def show(self, values, weights: bool = False) -> None:
        """values (rows, cols); weights=True uses WEIGHTS_CMAP on 0..1, else a range centred on 0."""
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
        """Token labels down the rows, thinned so that they stay >= 10 px apart."""
        height_px = self.ax.get_position().height * self.ax.figure.bbox.height
        pos = tick_positions(len(tokens), max(1, min(16, int(height_px / 10))))
        self.rows.set(pos, [tokens[i] for i in pos])


class _Heads:
    """Heads side by side on one axis: a heatmap, a colour strip above it, head titles above
    that and a panel title on top; ``rect`` (x, y, w, h) is the heatmap in figure fractions."""

    def __init__(self, fig, rect, with_strip: bool = True, rows: bool = True, keys: int = 0,
                 head_titles: bool = True):
        x, y, w, h = rect
        self.matrix = _Matrix(fig.add_axes(rect), rows=rows, keys=keys)
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

    def show(self, a, weights: bool = False, gap: int = 1, max_heads: int = MAX_HEADS_SHOWN) -> None:
        """a (h, T, n): draw up to ``max_heads`` heads, titled and striped in head colours."""
        k, n = min(a.shape[0], max_heads), a.shape[2]
        self.matrix.show(heads_side_by_side(a, max_heads, gap), weights)
        width = k * n + (k - 1) * gap
        if self.strip is not None:
            self.strip_image.set_data(head_strip(k, n, gap))
            self.strip_image.set_extent((-0.5, width - 0.5, 0.5, -0.5))
            self.strip.set_xlim(-0.5, width - 0.5)
        per_head_px = self.px * n / width
        for i, text in enumerate(self.titles):
            text.set_visible(i < k and per_head_px >= 14)
            if i < k:
                start, stop = head_spans(k, n, gap)[i]
                text.set_x(self.x + self.w * (start + stop) / 2 / width)
                text.set_text(f"head {i}" if per_head_px >= 45 else f"{i}")

    def per_head_artists(self) -> list:
        """Everything of this panel that changes with h (its row labels do not)."""
        keys = self.matrix.keys.texts if self.matrix.keys else []
        strip = [self.strip] if self.strip is not None else []
        return [self.matrix.ax, *strip, *self.titles, self.title, *keys]

    def key_labels(self, tokens, k: int) -> None:
        """Key tokens under every head if they fit in the label pool, else under head 0 only;
        thinned so that they stay >= 10 px apart."""
        n, room = len(tokens), len(self.matrix.keys.texts)
        column_px = self.px / (k * n + k - 1)
        keys = tick_positions(n, max(1, int(n * column_px / 10)))
        spans = head_spans(k, n) if k * len(keys) <= room else head_spans(1, n)
        self.matrix.keys.set([s + j for s, _ in spans for j in keys],
                             [tokens[j] for _ in spans for j in keys])


class DiagramDrawing:
    """The block diagram of ``diagram`` on an axis; ``update(labels, h)`` rewrites its text,
    ``highlight(stage)`` lights the boxes and arrows of one stage (State mode)."""

    def __init__(self, ax, compact: bool = False):
        self.ax, self.compact = ax, compact
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

    def per_head_artists(self) -> list:
        """The artists whose look depends on h (the rest depends on d_model and seq_len only)."""
        per_head = [self.arrow_labels[n] for n in ("Q_heads", "K_heads", "V_heads", "head_outputs")
                    if n in self.arrow_labels]
        return [*per_head, self.heads_text, self.scores_text, *self.cards]

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


class _View:
    """A mode: its Figure (built once) and ``update(scene)`` to change its artists in place.

    With ``blit=True`` (the live explorer) the artists registered with ``_dyn`` are drawn on
    top of a cached picture of everything else, which is redrawn only when
    ``background_key(scene)`` changes. Static renders (``blit=False``) draw everything.
    """

    def __init__(self, fig: Figure, blit: bool = False):
        self.fig, self.blit = fig, blit
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


class ArchitectureView(_View):
    """The block diagram with live shapes on every arrow and parameter counts on every block."""

    def __init__(self, fig: Figure, blit: bool = False):
        super().__init__(fig, blit)
        self.subtitle = self._heading("The multi-head attention block", 0.5, "center", 13, 0.93, 10)
        self.drawing = DiagramDrawing(fig.add_axes((0.005, 0.0, 0.99, 0.89)))
        for artist in self.drawing.per_head_artists():
            self._dyn(artist)

    def background_key(self, scene: Scene):
        """Everything but the per-head labels depends on d_model and seq_len only."""
        return scene.trace.shapes["X"]
        fig.text(0.005, 0.005, "orange: learned parameters · blue: no parameters · "
                 "shapes are (B, T, d_model) and (B, h, T, d_k)", ha="left", va="bottom",
                 fontsize=7, color=SOFT)

    def update(self, scene: Scene) -> None:
        labels = diagram.diagram_labels(scene.trace)
        self.drawing.update(labels, scene.trace.h)
        self.subtitle.set_text(f"{labels['title']}  ·  parameters: 4·d_model² = "
                               f"{4 * scene.trace.d_model ** 2:,} in the W's + "
                               f"{2 * scene.trace.d_model:,} in LayerNorm = {labels['total']:,}, "
                               "whatever h is")


class DataView(_View):
    """The tensors themselves: X, Q, K, V; per-head scores and weights; outputs and concat."""

    def __init__(self, fig: Figure, blit: bool = False):
        super().__init__(fig, blit)
        self.top = {name: _Matrix(fig.add_axes((0.06 + 0.235 * i, 0.70, 0.215, 0.20)),
                                  rows=(i == 0)) for i, name in enumerate(("X", "Q", "K", "V"))}
        # Head titles once per row (the heads line up left to right in both panels).
        self.scores = _Heads(fig, (0.06, 0.385, 0.43, 0.2), with_strip=False, keys=16,
                             head_titles=False)
        self.weights = _Heads(fig, (0.555, 0.385, 0.405, 0.2), with_strip=False, rows=False,
                              keys=16)
        self.cbar = fig.colorbar(self.weights.matrix.image,
                                 cax=fig.add_axes((0.968, 0.385, 0.008, 0.2)))
        self.cbar.ax.tick_params(labelsize=7)
        self.cbar.set_ticks([0, 0.5, 1])
        self.outputs = _Heads(fig, (0.06, 0.04, 0.43, 0.16))
        self.concat = _Heads(fig, (0.555, 0.04, 0.405, 0.16), rows=False, head_titles=False)
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

    def background_key(self, scene: Scene):
        """X, Q, K, V and the token labels depend on the tokens, d_model and seed, not on h."""
        return scene.inputs

    def update(self, scene: Scene) -> None:
        t, tokens = scene.trace, scene.tokens
        for name, m in self.top.items():
            m.show(t[name][0])
            self.titles[name].set_text(f"{name} {_shape_text(t.shapes[name])}")
        self.top["X"].row_labels(tokens)
        self._heads(t, tokens)

    def _heads(self, t: Trace, tokens) -> None:
        h, T, d_k, shown = t.h, len(tokens), t.d_k, min(t.h, MAX_HEADS_SHOWN)
        more = f"  (first {shown} of {h} heads)" if h > shown else ""
        self.scores.show(t["scores"][0])
        self.weights.show(t["weights"][0], weights=True)
        self.scores.matrix.row_labels(tokens)
        self.outputs.matrix.row_labels(tokens)
        for panel in (self.scores, self.weights):
            panel.key_labels(tokens, shown)
        self.outputs.show(t["head_outputs"][0])
        self.concat.show(t["head_outputs"][0], gap=0, max_heads=h)  # all d_model columns
        self.titles["scores"].set_text(f"scores QKᵀ/√d_k {_shape_text(t.shapes['scores'])}{more}")
        self.titles["weights"].set_text(f"weights = softmax(scores) {_shape_text(t.shapes['weights'])}")
        self.titles["outputs"].set_text(f"head outputs {_shape_text(t.shapes['head_outputs'])}, "
                                        f"d_k = {d_k} columns each{more}")
        self.titles["concat"].set_text(f"concat {_shape_text(t.shapes['concat'])}: the same columns, "
                                       "side by side")


class StateView(_View):
    """One stage at a time: lit on the diagram, its story and formula, its tensor."""

    def __init__(self, fig: Figure, blit: bool = False):
        super().__init__(fig, False)  # the lit boxes sit under static titles: draw everything
        self.drawing = DiagramDrawing(fig.add_axes((0.005, 0.40, 0.48, 0.52)), compact=True)
        self.header = fig.text(0.02, 0.975, "", ha="left", va="top", fontsize=12,
                               fontweight="bold", color=INK)
        self.story = fig.text(0.02, 0.36, "", ha="left", va="top", fontsize=10, color=INK,
                              linespacing=1.4)
        self.formula = fig.text(0.02, 0.14, "", ha="left", va="center", fontsize=16, color=INK)
        self.tensor = _Heads(fig, (0.57, 0.10, 0.40, 0.76), keys=32)
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
                             f"{STAGES[info.name]} = {_shape_text(info.shape)}")
        self.story.set_text(textwrap.fill(info.story, 62))
        self.formula.set_text(info.formula)
        shown = min(t.h, MAX_HEADS_SHOWN)
        more = (f", first {shown} of {t.h} heads" if len(info.shape) == 4 and t.h > shown else "")
        self.tensor_title.set_text(f"{info.name} {_shape_text(info.shape)}  (batch 0{more})")
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


def format_seconds(x: float) -> str:
    """A tick value in seconds -> a short label: 1e-05 -> '10 µs', 0.002 -> '2 ms', 1.0 -> '1 s'.

    >>> [format_seconds(v) for v in (1e-5, 2e-3, 0.1, 1.0)]
    ['10 µs', '2 ms', '100 ms', '1 s']
    """
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if x >= factor * 0.999:
            return f"{x / factor:.3g} {unit}"
    return f"{x * 1e9:.3g} ns"


class PerformanceView(_View):
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


VIEWS = {"Architecture": ArchitectureView, "Data": DataView, "State": StateView,
         "Performance": PerformanceView}


def _mode(mode: str) -> str:
    for m in MODES:
        if str(mode).lower() == m.lower():
            return m
    raise ValueError(f"mode={mode!r} is not one of {', '.join(MODES)}")


def _encode(canvas) -> bytes:
    """The Agg canvas's current pixels -> PNG bytes (fast compression: runs on every change)."""
    rgba = np.asarray(canvas.buffer_rgba())
    buf = io.BytesIO()
    PILImage.fromarray(rgba[..., :3]).save(buf, format="png", compress_level=1)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------
# The widget
# ---------------------------------------------------------------------------------------------

class Explorer:
    """Shared controls, four modes, one Trace. Display it as the last expression of a cell.

    >>> ex = Explorer(d_model=8, h=2, seq_len=3)
    >>> ex.controls.set(h=4); ex.trace.shapes["Q_heads"]
    (1, 4, 3, 2)
    """

    def __init__(self, d_model: int = 16, h: int = 4, seq_len: int = 6,
                 sentence: str = DEFAULT_SENTENCE, seed: int = 0, mode: str = "Architecture",
                 d_model_options=(4, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64),
                 seq_len_range=(1, 16)):
        self.controls = SizeControls(d_model, h, seq_len, d_model_options=d_model_options,
                                     seq_len_range=seq_len_range)
        self.sentence = W.Text(value=sentence, description="sentence", continuous_update=False,
                               style={"description_width": "70px"}, layout=W.Layout(width="660px"))
        self.seed = W.BoundedIntText(value=seed, min=0, max=999_999, description="seed",
                                     style={"description_width": "40px"},
                                     layout=W.Layout(width="150px"))
        self.mode = W.ToggleButtons(options=list(MODES), value=_mode(mode),
                                    style={"button_width": "120px"})
        self._state_controls()
        self._performance_controls()
        self.caption = W.HTML()
        self.image = W.Image(format="png", layout=W.Layout(max_width="100%", height="auto"))
        self._figures, self._views, self._png, self._stale = {}, {}, {}, set(MODES)
        self.sweep = None
        self.tokens, self.trace = None, None
        self._wire()
        self.widget = W.VBox([self.controls.box, W.HBox([self.sentence, self.seed]), self.mode,
                              self.state_box, self.performance_box, self.caption, self.image])
        self.widget.add_class("mha-explorer")
        self.controls.h.add_class("mha-explorer-h")
        self.refresh()

    def _state_controls(self) -> None:
        n = len([name for name, view in STAGE_TABLE.items() if not view.optional])
        self.stage = W.IntSlider(value=0, min=0, max=n - 1, description="stage", readout=False,
                                 style={"description_width": "45px"}, layout=W.Layout(width="280px"))
        self.stage_label = W.Label(layout=W.Layout(width="180px"))
        self.play = W.Play(value=0, min=0, max=n - 1, interval=1600, description="play")
        W.link((self.play, "value"), (self.stage, "value"))
        self.previous = W.Button(description="Previous", icon="step-backward",
                                 layout=W.Layout(width="110px"))
        self.next = W.Button(description="Next", icon="step-forward", layout=W.Layout(width="110px"))
        self.state_box = W.HBox([self.previous, self.play, self.next, self.stage, self.stage_label])

    def _performance_controls(self) -> None:
        self.measure_button = W.Button(description="Measure sweep", icon="clock-o",
                                       button_style="info", layout=W.Layout(width="150px"))
        self.progress = W.IntProgress(value=0, min=0, max=1, description="sweep",
                                      style={"description_width": "45px"})
        self.performance_box = W.HBox([self.measure_button, self.progress])

    def _wire(self) -> None:
        self.controls.on_change(lambda **_: self.refresh())
        self.sentence.observe(lambda _: self.refresh(), "value")
        self.seed.observe(lambda _: self.refresh(), "value")
        self.mode.observe(lambda _: self.redraw(), "value")
        self.stage.observe(self._on_stage, "value")
        self.previous.on_click(lambda _: self.step(-1))
        self.next.on_click(lambda _: self.step(+1))
        self.measure_button.on_click(lambda _: self.measure())

    # -- the one computation ------------------------------------------------------------------
    def refresh(self) -> None:
        """Recompute the one Trace from the controls, then redraw the visible mode only."""
        v = self.controls.values
        self.tokens = sentence_tokens(self.sentence.value, v["seq_len"])
        self.trace = explorer_trace(self.tokens, v["d_model"], v["h"], int(self.seed.value))
        self._stale = set(MODES)
        self.redraw()

    def scene(self) -> Scene:
        """What the modes draw from right now."""
        return Scene(self.tokens, self.trace, int(self.seed.value), self.stage.value, self.sweep)

    # -- drawing ------------------------------------------------------------------------------
    def _view(self, mode: str) -> _View:
        if mode not in self._views:
            fig = Figure(figsize=FIGSIZE, dpi=DPI)
            FigureCanvasAgg(fig)
            self._figures[mode], self._views[mode] = fig, VIEWS[mode](fig, blit=True)
        return self._views[mode]

    def redraw(self) -> bytes:
        """Bring the visible mode up to date (only if something changed) and show it."""
        mode = self.mode.value
        if mode in self._stale or mode not in self._png:
            self._png[mode] = self._view(mode).png(self.scene())
            self._stale.discard(mode)
        self.image.value = self._png[mode]
        self.state_box.layout.display = None if mode == "State" else "none"
        self.performance_box.layout.display = None if mode == "Performance" else "none"
        self.caption.value = self._caption(mode)
        return self._png[mode]

    def _caption(self, mode: str) -> str:
        text = shape_summary(self.trace)
        if mode == "State":
            info = stage_info(self.trace, self.stage.value)
            where = f"{self.stage.value + 1}/{len(self.trace)}: {info.name}"
            self.stage_label.value = where
            text += f" | stage {where} {_shape_text(info.shape)}"
        return (f"<b class='mha-explorer-mode'>{mode}</b>: {MODE_HINTS[mode]}<br>"
                f"<code class='mha-explorer-shapes'>{text}</code>")

    def render(self, mode: str) -> Figure:
        """mode -> a new pyplot Figure of that mode for the current controls (static use)."""
        mode = _mode(mode)
        fig = plt.figure(figsize=FIGSIZE)
        VIEWS[mode](fig).update(self.scene())
        return fig

    # -- State and Performance actions --------------------------------------------------------
    def _on_stage(self, change) -> None:
        self._stale.add("State")
        if self.mode.value == "State":
            self.redraw()

    def step(self, delta: int) -> int:
        """Move the State mode ``delta`` stages (clamped to the first and last); return the index."""
        self.stage.value = int(np.clip(self.stage.value + delta, 0, len(self.trace) - 1))
        return self.stage.value

    def measure(self, max_len: int = 1024, repeats: int = 3) -> dict:
        """Time the forward pass over ``sweep_seq_lens`` at the current d_model and h.

        Updates the progress bar after each length; the result feeds the Performance mode.
        """
        v = self.controls.values
        lens = sweep_seq_lens(v["seq_len"], max_len)
        self.progress.max, self.progress.value = len(lens), 0
        seconds = complexity.time_sweep(
            lens, v["d_model"], v["h"], rng=np.random.default_rng(int(self.seed.value)),
            repeats=repeats, progress=lambda done, total: setattr(self.progress, "value", done))
        self.sweep = {"seq_lens": lens, "seconds": seconds.tolist(), "d_model": v["d_model"],
                      "h": v["h"]}
        self._stale.add("Performance")
        self.redraw()
        return self.sweep

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)
