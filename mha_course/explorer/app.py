"""The explorer's widget: shared controls, one Trace, the modes of ``MODE_LIST``.

Every change computes ONE Trace (tokens -> seeded embedding -> ``mha_course.trace``); the
modes only read it. The toggle buttons, the views, the rows of mode-only controls and the
captions are all built from ``MODE_LIST``: adding a mode is a module with a ``Mode``
subclass and one entry in that list.
"""
from __future__ import annotations

import ipywidgets as W
import matplotlib.pyplot as plt
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .. import _validate
from ..widgets.controls import SizeControls
from . import performance, state
from .architecture import ArchitectureMode
from .canvas import DPI, FIGSIZE, Mode, Scene, View
from .data import DataMode
from .logic import DEFAULT_SENTENCE, explorer_trace, sentence_tokens, shape_summary
from .performance import PerformanceMode
from .state import StateMode

__all__ = ["Explorer", "MODE_LIST", "MODES", "find_mode"]

MODE_LIST = (ArchitectureMode(), DataMode(), StateMode(), PerformanceMode())
MODES = tuple(m.name for m in MODE_LIST)
MAX_SEED = 999_999  # the seed box's largest value


def find_mode(mode: str) -> Mode:
    """A mode's name, in any case -> its Mode from MODE_LIST.

    >>> find_mode("state").name
    'State'
    """
    for m in MODE_LIST:
        if str(mode).lower() == m.name.lower():
            return m
    raise ValueError(f"mode={mode!r:.40} is not one of {', '.join(MODES)}; pass one of them (any case)")


class Explorer:
    """Shared controls, the modes of MODE_LIST, one Trace. Display it as the last expression of a cell.

    >>> ex = Explorer(d_model=8, h=2, seq_len=3)
    >>> ex.controls.set(h=4); ex.trace.shapes["Q_heads"]
    (1, 4, 3, 2)
    """

    def __init__(self, d_model: int = 16, h: int = 4, seq_len: int = 6,
                 sentence: str = DEFAULT_SENTENCE, seed: int = 0, mode: str = "Architecture",
                 d_model_options=(4, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64),
                 seq_len_range=(1, 16)):
        # the seed box holds 0..MAX_SEED (a BoundedIntText would clamp any other seed silently)
        seed = _validate.count(seed, "seed")
        if seed > MAX_SEED:
            raise ValueError(f"seed={seed} is past the seed box's {MAX_SEED:,}; pass a seed in 0..{MAX_SEED}")
        sentence = "" if sentence is None else sentence  # None: the course sentence, as an empty one
        if not isinstance(sentence, str):
            raise ValueError(f"sentence={sentence!r:.40} must be a string of words (got {type(sentence).__name__}); "
                             "pass e.g. sentence='the cat sat', or leave it out for the course sentence")
        self.controls = SizeControls(d_model, h, seq_len, d_model_options=d_model_options,
                                     seq_len_range=seq_len_range)
        self.sentence = W.Text(value=sentence, description="sentence", continuous_update=False,
                               style={"description_width": "70px"}, layout=W.Layout(width="660px"))
        self.seed = W.BoundedIntText(value=seed, min=0, max=MAX_SEED, description="seed",
                                     style={"description_width": "40px"},
                                     layout=W.Layout(width="150px"))
        self.mode = W.ToggleButtons(options=list(MODES), value=find_mode(mode).name,
                                    style={"button_width": "120px"})
        self.caption = W.HTML()
        self.image = W.Image(format="png", layout=W.Layout(max_width="100%", height="auto"))
        self._views, self._png, self._stale = {}, {}, set(MODES)
        self.sweep, self.tokens, self.trace = None, None, None
        self.mode_boxes = {m.name: box for m in MODE_LIST if (box := m.controls(self)) is not None}
        self._wire()
        self.widget = W.VBox([self.controls.box, W.HBox([self.sentence, self.seed]), self.mode,
                              *self.mode_boxes.values(), self.caption, self.image])
        self.widget.add_class("mha-explorer")
        self.controls.h.add_class("mha-explorer-h")
        self.refresh()

    def _wire(self) -> None:
        self.controls.on_change(lambda **_: self.refresh())
        self.sentence.observe(lambda _: self.refresh(), "value")
        self.seed.observe(lambda _: self.refresh(), "value")
        self.mode.observe(lambda _: self.redraw(), "value")

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
    def _view(self, mode: str) -> View:
        if mode not in self._views:
            fig = Figure(figsize=FIGSIZE, dpi=DPI)
            FigureCanvasAgg(fig)
            self._views[mode] = find_mode(mode).View(fig, blit=True)
        return self._views[mode]

    def redraw(self) -> bytes:
        """Bring the visible mode up to date (only if something changed) and show it."""
        mode = self.mode.value
        if mode in self._stale or mode not in self._png:
            self._png[mode] = self._view(mode).png(self.scene())
            self._stale.discard(mode)
        self.image.value = self._png[mode]
        for name, box in self.mode_boxes.items():
            box.layout.display = None if name == mode else "none"
        self.caption.value = self._caption(find_mode(mode))
        return self._png[mode]

    def touch(self, mode: str) -> None:
        """Something only ``mode`` (one of MODES, in any case) shows changed: mark it stale, and redraw it if
        it is visible. An unknown mode is refused, listing the modes (it would mark nothing)."""
        mode = find_mode(mode).name
        self._stale.add(mode)
        if self.mode.value == mode:
            self.redraw()

    def _caption(self, mode: Mode) -> str:
        text = shape_summary(self.trace) + mode.caption(self)
        return (f"<b class='mha-explorer-mode'>{mode.name}</b>: {mode.hint}<br>"
                f"<code class='mha-explorer-shapes'>{text}</code>")

    def render(self, mode: str) -> Figure:
        """mode -> a new pyplot Figure of that mode for the current controls (static use)."""
        view = find_mode(mode).View
        fig = plt.figure(figsize=FIGSIZE)
        view(fig).update(self.scene())
        return fig

    # -- the actions of the State and Performance modes, as methods -----------------------------
    def step(self, delta: int) -> int:
        """Move the State mode ``delta`` stages, a whole number (see ``state.step``); return the index."""
        return state.step(self, delta)

    def measure(self, max_len: int = 1024, repeats: int = 3) -> dict:
        """Time the forward pass over seq_len 8, 16, ..., max_len (>= 8) and the current seq_len (see
        ``performance.measure``); return the sweep."""
        return performance.measure(self, max_len, repeats)

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)
