"""docs/glossary.md: no term twice, and every pointer in its last column names a real object.

A pointer is a backticked item of the "In `mha_course`" column. It is one of
- a dotted name relative to the package (``causal_mask``, ``lessons.circuits.patch_heads``,
  ``widgets.quiz.QuizWidget``), optionally called with keyword arguments
  (``init_params(..., bias=True)``, ``rope_inv_freq(..., {"type": "linear"})``): the name must
  resolve, and each keyword must be a parameter of what it names;
- ``stage X``: X is a stage of a ``Trace``;
- ``mha-course CMD [ARG]``: a command of the CLI (and ARG one of its choices, if it has any);
- a path (``tests/...py``): the file exists.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import re
from pathlib import Path

import numpy as np
import pytest

import mha_course

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "docs" / "glossary.md"
HOMES = ("", "lessons.", "views.", "widgets.", "explorer.", "check.", "tools.")  # where a dotted name may live


def _rows() -> list[list[str]]:
    """The main table's rows (cells stripped), header and rule left out."""
    rows, table = [], 0
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        if line.startswith("| Term |"):
            table += 1
            continue
        if table == 1 and line.startswith("|") and not line.startswith("|---"):
            rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))])  # "\|" is no border
        elif table == 1 and not line.startswith("|"):
            break
    return rows


def _pointers():
    for row in _rows():
        last = row[-1]
        for m in re.finditer(r"`([^`]+)`", last):
            yield row[0], ("stage " if last[:m.start()].endswith("stage ") else "") + m.group(1)


def _resolve(dotted: str):
    """'lessons.circuits.patch_heads' -> the object, trying each package folder; AttributeError if none."""
    for home in HOMES:
        parts = (home + dotted).split(".")
        for cut in range(len(parts), 0, -1):  # the longest importable module, then attributes
            try:
                obj = importlib.import_module(".".join(["mha_course", *parts[:cut]]))
            except ImportError:
                continue
            try:
                for name in parts[cut:]:
                    obj = getattr(obj, name)
                return obj
            except AttributeError:
                break
        if hasattr(mha_course, parts[0]) and home == "":
            obj = mha_course
            try:
                for name in parts:
                    obj = getattr(obj, name)
                return obj
            except AttributeError:
                pass
    raise AttributeError(f"{dotted!r} is no object of mha_course (tried {', '.join(h or 'the top' for h in HOMES)})")


def _cli_choices() -> dict:
    from mha_course.tools import cli
    parser = cli.build_parser() if hasattr(cli, "build_parser") else None
    if parser is None:
        return {}
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = {}
    for name, p in sub.choices.items():
        pos = [a for a in p._actions if not a.option_strings and a.dest != "help"]
        out[name] = pos[0].choices if pos and pos[0].choices else None
    return out


def _check(item: str) -> None:
    if item.startswith("stage "):
        from mha_course.mha import init_params, trace
        tr = trace(np.ones((1, 2, 4)), init_params(4, rng=np.random.default_rng(0)), 2)
        tr[item[len("stage "):]]  # a KeyError names a stage that does not exist
        return
    if item.startswith("mha-course "):
        words = item.split()
        commands = _cli_choices()
        assert words[1] in commands, f"{item}: no command {words[1]!r}; commands: {sorted(commands)}"
        if len(words) > 2 and words[2].isidentifier() and words[2].islower() and commands[words[1]]:
            assert words[2] in commands[words[1]], f"{item}: {words[2]!r} is not one of {commands[words[1]]}"
        return
    if "/" in item:
        assert (ROOT / item).exists(), f"{item}: no such file"
        return
    m = re.fullmatch(r"([A-Za-z_][\w.]*)(\((.*)\))?(=)?", item)
    assert m, f"{item!r} is not a name, a call, a stage, a command or a path"
    name, args, keyword = m.group(1), m.group(3), m.group(4)
    assert not keyword, f"{item!r}: a bare keyword; name the function it belongs to, e.g. `f(..., {name}=)`"
    obj = _resolve(name)
    for kw in re.findall(r"(\w+)=", args or ""):
        params = inspect.signature(obj).parameters
        assert kw in params or any(p.kind is p.VAR_KEYWORD for p in params.values()), \
            f"{item}: {name} has no parameter {kw!r}"


def test_the_table_parses():
    rows = _rows()
    assert len(rows) > 100 and all(len(r) == len(rows[0]) for r in rows), [r[0] for r in rows if len(r) != 6]


def test_no_term_twice():
    terms = [r[0].lower() for r in _rows()]
    bare = [re.sub(r"\s*\(.*?\)", "", t).strip() for t in terms]  # "position interpolation (PI)" is "position interpolation"
    twice = sorted({t for t in bare if bare.count(t) > 1})
    assert not twice, f"terms with two rows: {twice}"


def test_no_term_is_a_subset_of_another_row():
    """'mean / resample ablation' beside 'zero / mean / resample ablation': one row per idea."""
    terms = {r[0].lower() for r in _rows()}
    for t in terms:
        for u in terms - {t}:
            if " / " in t and " / " in u:
                assert not set(t.split(" / ")) < set(u.split(" / ")), f"{t!r} is part of {u!r}"


@pytest.mark.parametrize("term,item", sorted(set(_pointers())))
def test_every_pointer_names_a_real_object(term, item):
    _check(item)


def test_the_resolver_can_fail():
    for stale in ("plots.tokens_for", "decode.generate", "quiz_widget.QuizWidget", "stage nope", "init_params(..., nope=1)",
                  "context=", "mha-course nope"):
        with pytest.raises((AssertionError, AttributeError, KeyError, ValueError)):
            _check(stale)
