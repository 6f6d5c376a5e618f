"""The explorer: one widget, four views of one forward pass.

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

Where things live: ``logic`` (pure functions: tokens, the Trace, stage information, the
ledger, side-by-side heads, the sweep), ``canvas`` (the live matplotlib kit: ``View``,
``Mode``, heatmaps, the diagram drawing), one module per mode (``architecture``, ``data``,
``state``, ``performance``: name, hint, View with its ``update``, controls) and ``app``
(the ``Explorer`` widget, built from ``MODE_LIST``).

Each mode keeps one matplotlib Figure and updates its artists in place; only the visible mode
is redrawn, and the picture reaches the browser as PNG bytes in an ``ipywidgets.Image``.
``explorer.render(mode)`` draws any mode as a new static Figure (notebooks, docs, nbval).

Taught in 00_overview.ipynb.
"""
from .app import MODE_LIST, MODES, Explorer, find_mode
from .canvas import DPI, FIGSIZE, Mode, Scene, View
from .logic import (
                    DEFAULT_SENTENCE,
                    MAX_HEADS_SHOWN,
                    StageInfo,
                    block_output,
                    explorer_trace,
                    format_seconds,
                    guide_lines,
                    head_spans,
                    head_strip,
                    heads_side_by_side,
                    hidden_heads_note,
                    ledger_rows,
                    sentence_tokens,
                    shape_summary,
                    stage_info,
                    sweep_seq_lens,
                    tick_positions,
)

__all__ = ["Explorer", "MODE_LIST", "MODES", "find_mode", "Mode", "View", "Scene", "FIGSIZE", "DPI",
           "DEFAULT_SENTENCE", "MAX_HEADS_SHOWN", "StageInfo", "sentence_tokens", "explorer_trace",
           "block_output", "shape_summary", "stage_info", "ledger_rows", "heads_side_by_side",
           "head_spans", "head_strip", "hidden_heads_note", "tick_positions", "sweep_seq_lens", "guide_lines",
           "format_seconds"]
