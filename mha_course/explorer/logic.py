"""The explorer's pure logic: what each mode shows, from the controls and the Trace.

No widgets and no figures here: tokens from the sentence, the one Trace, the stage
information, the cost ledger's rows, the side-by-side layout of heads and the timing sweep's
lengths and guide lines. The modes draw what these functions return; the tests check them
against the package functions that produced the Trace.
"""
from __future__ import annotations

import functools
import re
from typing import NamedTuple

import numpy as np
from matplotlib import colors as mcolors

from .. import _validate
from ..block import layer_norm
from ..lessons import complexity
from ..lessons.qkv import sentence_inputs
from ..mha import Trace, trace
from ..views.attention import head_color
from ..views.diagram import shape_text
from ..views.stages import STAGE_TABLE
from ..views.style import log_values

__all__ = ["DEFAULT_SENTENCE", "MAX_HEADS_SHOWN", "MAX_SWEEP_LEN", "GAP_COLOR", "StageInfo", "sentence_tokens", "hidden_heads_note",
           "explorer_trace", "block_output", "shape_summary", "stage_info", "ledger_rows",
           "heads_side_by_side", "head_spans", "head_strip", "tick_positions", "sweep_seq_lens",
           "guide_lines", "format_seconds"]

DEFAULT_SENTENCE = "the cat sat on the mat because it was warm and soft under the old lamp"
MAX_HEADS_SHOWN = 8     # the Data and State modes draw at most this many heads
MAX_SWEEP_LEN = 16384   # the longest seq_len a timing sweep measures (its scores: 16384² numbers per head)
GAP_COLOR = "white"     # the columns between heads in side-by-side views


def sentence_tokens(sentence: str, seq_len: int) -> list[str]:
    """sentence, seq_len -> seq_len tokens: its words, cut to seq_len or padded ``tok<i>``.

    Words are runs of letters, digits and apostrophes, lower-cased. An empty sentence gives
    the course sentence.

    >>> sentence_tokens("The cat sat.", 5)
    ['the', 'cat', 'sat', 'tok3', 'tok4']
    """
    seq_len = _validate.positive_int(seq_len, "seq_len")
    if sentence is not None and not isinstance(sentence, str):
        raise ValueError(f"sentence={sentence!r:.40} must be a string of words (got {type(sentence).__name__}); "
                         "pass e.g. 'the cat sat', or None for the course sentence")
    words = re.findall(r"[\w']+", (sentence or "").lower()) or DEFAULT_SENTENCE.split()
    return words[:seq_len] + [f"tok{i}" for i in range(len(words), seq_len)]


def explorer_trace(tokens, d_model: int, h: int, seed: int) -> Trace:
    """tokens (T,), d_model, h, seed -> the Trace every mode reads (self-attention, no mask).

    The same numbers as ``qkv.sentence_trace``: one Generator seeded with ``seed`` draws the
    parameters, then a (vocabulary, d_model) embedding table; X (1, T, d_model) is its rows.
    X and the parameters do not depend on h, so they are kept between h changes.

    >>> explorer_trace(["the", "cat", "sat"], 8, 2, seed=0).shapes["weights"]
    (1, 2, 3, 3)
    """
    tokens = _validate.items(tokens, "tokens", "['the', 'cat']")
    if not tokens:
        raise ValueError("tokens is empty; give one token or more, e.g. sentence_tokens('the cat', 2)")
    d_model, seed = _validate.positive_int(d_model, "d_model"), _validate.count(seed, "seed")
    X, params = _inputs(tuple(str(t) for t in tokens), d_model, seed)
    return trace(X, params, _validate.heads(d_model, h))


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
    _check_trace(trace)
    return layer_norm(trace["X"] + trace["output"])  # (B, T, D) + (B, T, D) -> (B, T, D)


def shape_summary(trace: Trace) -> str:
    """Trace -> one line with the sizes and the shapes that change with them.

    >>> print(shape_summary(explorer_trace(["a", "b", "c"], 8, 2, seed=0)))
    d_model=8 · h=2 · d_k=4 · seq_len=3 | Q_heads (1, 2, 3, 4) · weights (1, 2, 3, 3) · concat (1, 3, 8)
    """
    s = _check_trace(trace).shapes
    return (f"d_model={trace.d_model} · h={trace.h} · d_k={trace.d_k} · seq_len={s['X'][1]} | "
            f"Q_heads {shape_text(s['Q_heads'])} · weights {shape_text(s['weights'])} · "
            f"concat {shape_text(s['concat'])}")


def _check_trace(trace) -> Trace:
    return _validate.instance(trace, Trace, "trace", "pass explorer_trace(tokens, d_model, h, seed)")


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
    names = _check_trace(trace).names
    name = names[_validate.index(i, len(names), "i", f"stages ({names[0]} .. {names[-1]})")]
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


def hidden_heads_note(h: int) -> str:
    """h heads -> the note every mode shows when it draws only MAX_HEADS_SHOWN of them, else "".

    >>> hidden_heads_note(12)
    'heads 0-7 of 12 drawn, 4 not shown'
    >>> hidden_heads_note(4)
    ''
    """
    h = _validate.positive_int(h, "h")
    if h <= MAX_HEADS_SHOWN:
        return ""
    return f"heads 0-{MAX_HEADS_SHOWN - 1} of {h} drawn, {h - MAX_HEADS_SHOWN} not shown"


def head_spans(k: int, n: int, gap: int = 1) -> list[tuple[int, int]]:
    """k heads of n columns each, ``gap`` empty columns between -> [(start, stop)] per head.

    >>> head_spans(3, 2)
    [(0, 2), (3, 5), (6, 8)]

    k >= 0, n >= 1 and gap >= 0 are whole numbers: a negative gap would overlap the heads.
    """
    k, n, gap = _validate.count(k, "k"), _validate.positive_int(n, "n"), _validate.count(gap, "gap")
    return [(i * (n + gap), i * (n + gap) + n) for i in range(k)]


def heads_side_by_side(a, max_heads: int = MAX_HEADS_SHOWN, gap: int = 1) -> np.ndarray:
    """a (h, T, n) -> (T, k·n + (k-1)·gap), k = min(h, max_heads): heads left to right,
    NaN in the gap columns (drawn white).

    >>> heads_side_by_side(np.ones((2, 3, 2))).shape
    (3, 5)
    """
    a = _validate.array(a, "a", 3, "(h, T, n)")
    max_heads, gap = _validate.positive_int(max_heads, "max_heads"), _validate.count(gap, "gap")
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
    spans = head_spans(k, n, gap)  # k, n, gap checked
    width = max(k * n + (k - 1) * gap, 0)
    strip = np.tile(np.array(mcolors.to_rgba(GAP_COLOR)), (1, width, 1))
    for i, (start, stop) in enumerate(spans):
        strip[0, start:stop] = mcolors.to_rgba(head_color(i))
    return strip


def tick_positions(n: int, max_ticks: int = 16) -> list[int]:
    """n positions -> at most ``max_ticks`` evenly spaced indices to label (all if n is small).

    >>> tick_positions(6), tick_positions(128)[:4]
    ([0, 1, 2, 3, 4, 5], [0, 8, 16, 24])
    """
    n, max_ticks = _validate.count(n, "n"), _validate.positive_int(max_ticks, "max_ticks")
    step = max(1, -(-n // max_ticks))
    return list(range(0, n, step))


def sweep_seq_lens(seq_len: int, max_len: int = 1024) -> list[int]:
    """seq_len -> the sequence lengths a timing sweep measures: 8, 16, ..., max_len and seq_len.

    >>> sweep_seq_lens(6, 64)
    [6, 8, 16, 32, 64]

    ``max_len`` in 8 .. MAX_SWEEP_LEN (8: the first length of the sweep); a seq_len past it is measured too.
    """
    seq_len, max_len = _validate.positive_int(seq_len, "seq_len"), _validate.positive_int(max_len, "max_len")
    if not 8 <= max_len <= MAX_SWEEP_LEN:
        raise ValueError(f"max_len={max_len} is outside 8..{MAX_SWEEP_LEN}: 8 is the sweep's first length, and "
                         f"{MAX_SWEEP_LEN} the longest it times (the scores grow as T²); pass e.g. the default 1024")
    powers = [2 ** p for p in range(3, max_len.bit_length())]  # 8, 16, ... up to max_len
    return sorted(set(powers) | {int(seq_len)})


def guide_lines(seq_lens, seconds) -> dict:
    """Measured (T, time) points -> {"O(T)": ys, "O(T²)": ys}: lines through the point of the
    largest T with slopes 1 and 2 on log-log axes.

    >>> g = guide_lines([1, 2, 4], [1.0, 2.0, 16.0])
    >>> g["O(T²)"].tolist(), g["O(T)"].tolist()
    ([1.0, 4.0, 16.0], [4.0, 8.0, 16.0])
    """
    T = log_values(seq_lens, "seq_lens")  # drawn on log-log axes: finite and > 0
    t = log_values(seconds, "seconds", T.size)
    last = int(np.argmax(T))
    return {"O(T)": t[last] * T / T[last], "O(T²)": t[last] * (T / T[last]) ** 2}


def format_seconds(x: float) -> str:
    """A tick value in seconds -> a short label: 1e-05 -> '10 µs', 0.002 -> '2 ms', 1.0 -> '1 s'.

    >>> [format_seconds(v) for v in (1e-5, 2e-3, 0.1, 1.0)]
    ['10 µs', '2 ms', '100 ms', '1 s']
    """
    x = _validate.number(x, "x")  # NaN or inf is no time
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if x >= factor * 0.999:
            return f"{x / factor:.3g} {unit}"
    return f"{x * 1e9:.3g} ns"

