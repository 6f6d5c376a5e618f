"""The one stage table: what every view says and draws for each stage (plain data).

``mha.STAGES`` names the stages of the forward pass, in the order it records them, with
their symbolic shapes. ``STAGE_TABLE`` holds, for each of those names, everything the views
need: the formula and the sentence of the detective story (the explorer's State mode), the
diagram box and arrows that light up (``diagram``), and the column, row, operation and
inputs of its box in ``plots.stage_flow``. A test holds the keys equal to ``mha.STAGES``.

Optional stages appear in a Trace only for some arguments (``Q_rope`` and ``K_rope`` only
with ``rope_base``); views lay out the stages a Trace has (``present_stages``) and join
each to its nearest present inputs (``flow_inputs``).

Adding a stage: its line in ``mha.STAGES``, its ``record(...)`` in ``mha._forward``, its
row here.

>>> STAGE_TABLE["weights"].box, STAGE_TABLE["weights"].inputs
('attention', ('scores',))
"""
from __future__ import annotations

from typing import NamedTuple

from .. import _validate
from ..mha import Trace

__all__ = ["StageView", "STAGE_TABLE", "stage_names", "check_trace", "present_stages", "flow_inputs"]


class StageView(NamedTuple):
    """What the views show for one stage (see the module docstring)."""
    formula: str          # matplotlib mathtext
    story: str            # one sentence of the detective story
    box: str              # the diagram box that lights up (a key of diagram.BOXES)
    arrows: tuple         # the diagram arrows that light up (keys of diagram.ARROWS)
    column: float         # where plots.stage_flow puts it: column order ...
    row: float            # ... and row (0 at the top)
    op: str               # the operation that produced it, written over its flow box
    inputs: tuple         # the stages it is computed from
    optional: bool = False  # True: only some calls record it (e.g. rope_base given)


_HEAD_SLICE = r"[:,\ i\,d_k : (i+1)\,d_k]"

STAGE_TABLE = {
    "X": StageView(
        r"$X \in \mathbb{R}^{T \times d_{model}}$",
        "The case comes in: each of the T tokens is a row of d_model numbers, its embedding. "
        "This is the raw evidence.",
        "X", ("X_Q", "X_K", "X_V", "residual"), 0, 1, "", ()),
    "Q": StageView(
        r"$Q = X\,W^Q,\quad W^Q \in \mathbb{R}^{d_{model} \times d_{model}}$",
        "Each token writes down the question its detective will carry: a query, made from X "
        "by one learned matrix.",
        "W_Q", ("Q",), 1, 0, "X W_Q", ("X",)),
    "K": StageView(
        r"$K = X\,W^K$",
        "Each token also writes the label on its case file: a key, which questions are "
        "matched against.",
        "W_K", ("K",), 1, 1, "X W_K", ("X",)),
    "V": StageView(
        r"$V = X\,W^V$",
        "And the file's contents, what a detective takes away after reading it: a value.",
        "W_V", ("V",), 1, 2, "X W_V", ("X",)),
    "Q_heads": StageView(
        rf"$Q_i = Q{_HEAD_SLICE},\quad d_k = d_{{model}}/h$",
        "The squad splits up: h detectives, each carrying a d_k-wide slice of every "
        "question (one follows people, one the timeline, one places ...).",
        "split", ("Q_heads",), 2, 0, "split", ("Q",)),
    "K_heads": StageView(
        rf"$K_i = K{_HEAD_SLICE}$",
        "Each detective reads only their own slice of every file label. The slices come "
        "from the one big W_K: splitting adds no parameters.",
        "split", ("K_heads",), 2, 1, "split", ("K",)),
    "V_heads": StageView(
        rf"$V_i = V{_HEAD_SLICE}$",
        "... and only their own slice of every file's contents.",
        "split", ("V_heads",), 2, 2, "split", ("V",)),
    "Q_rope": StageView(
        r"$\tilde{Q}_i[t] = R_{t}\,Q_i[t]$  (pairs turned by $t\,\theta_j$)",
        "Each question gets a time stamp: the query at position t is turned by angles that "
        "grow with t (RoPE), pair of numbers by pair. Its length does not change.",
        "split", ("Q_heads",), 2.5, 0, "RoPE", ("Q_heads",), True),
    "K_rope": StageView(
        r"$\tilde{K}_i[s] = R_{s}\,K_i[s]$",
        "Each label gets the stamp of its own position, so a score depends only on how far "
        "apart the two tokens are.",
        "split", ("K_heads",), 2.5, 1, "RoPE", ("K_heads",), True),
    "scores": StageView(
        r"$S_i = \frac{Q_i\,K_i^{\top}}{\sqrt{d_k}}$",
        "Each detective compares their question with every label (a dot product), "
        "divided by √d_k so the scores stay where softmax can still tell them apart.",
        "attention", (), 3, 0.5, "Q Kᵀ/√d_k", ("Q_rope", "K_rope")),
    "weights": StageView(
        r"$A_i = \mathrm{softmax}(S_i)$  (each row sums to 1)",
        "Softmax turns each row of scores into a reading plan: how closely to read each "
        "file. Each row sums to 1. It is a plan, not a measure of importance.",
        "attention", (), 4, 0.5, "softmax", ("scores",)),
    "head_outputs": StageView(
        r"$\mathrm{head}_i = A_i\,V_i$",
        "Each detective writes a report: the files' contents, mixed by their reading plan.",
        "attention", ("head_outputs",), 5, 1.25, "weights V", ("weights", "V_heads")),
    "concat": StageView(
        r"$\mathrm{Concat}(\mathrm{head}_1, \ldots, \mathrm{head}_h)$",
        "The h reports are pinned side by side, d_k columns each: one d_model-wide row "
        "per token again.",
        "concat", ("concat",), 6, 1.25, "concat", ("head_outputs",)),
    "output": StageView(
        r"$\mathrm{Concat}(\mathrm{head}_1, \ldots, \mathrm{head}_h)\,W^O$",
        "The chief (W_O) reads all reports together and writes the answer: every output "
        "feature can mix every head.",
        "W_O", ("output",), 7, 1.25, "concat W_O", ("concat",)),
}


def present_stages(names) -> dict:
    """Stage names of one Trace -> {name: StageView} in table order, only those present.

    >>> list(present_stages(["X", "Q", "output"]))
    ['X', 'Q', 'output']
    """
    names = set(stage_names(names))
    return {name: view for name, view in STAGE_TABLE.items() if name in names}


def flow_inputs(name: str, names) -> tuple:
    """The stages ``name`` is computed from, among ``names``; an absent optional input is
    replaced by its own inputs (without RoPE, scores come from Q_heads and K_heads).

    >>> flow_inputs("scores", ["Q_heads", "K_heads", "scores"])
    ('Q_heads', 'K_heads')
    >>> flow_inputs("scores", ["Q_heads", "K_heads", "Q_rope", "K_rope", "scores"])
    ('Q_rope', 'K_rope')
    """
    _validate.choice(name, STAGE_TABLE, "name")
    names, found = set(stage_names(names)), []
    for source in STAGE_TABLE[name].inputs:
        for s in (source,) if source in names else flow_inputs(source, names):
            if s not in found:
                found.append(s)
    return tuple(found)


def stage_names(names) -> tuple:
    """Stage names (a Trace's ``names``: any list, tuple, set or dict of them) -> a tuple, each checked
    against the stage table (a misspelled stage would silently vanish from a view).

    >>> stage_names({"X": 0, "Q": 1})
    ('X', 'Q')
    """
    if isinstance(names, (str, bytes)) or not isinstance(names, (list, tuple, set, frozenset, dict)):
        raise ValueError(f"names={names!r} must be a list of stage names (a Trace's names), got "
                         f"{type(names).__name__}; pass e.g. trace.names")
    return tuple(_validate.choice(n, STAGE_TABLE, "names") for n in names)


def check_trace(trace) -> Trace:
    """``trace`` if it is a Trace (what every view of one forward pass reads), else a TypeError saying how to make one."""
    return _validate.instance(trace, Trace, "trace", "make one with mha_course.trace(x, params, h)")
