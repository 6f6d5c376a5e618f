"""The checkers' fixed phrases reach a Chinese course folder in Chinese (check/language.say, checks.po).

A verdict's frame ("✘ name: case 1 of 3 failed", "called ...", "Looks like: ... Fix: ...", "⋯ not
finished", "A closer look:", the summary line) is a fixed phrase: it goes through ``say`` so that
checks.po translates it. This finds, in every file of mha_course/check, each string or f-string that
builds such a frame outside ``say``: in a Chinese course it would print English. The ones written
before this test are listed in NOT_YET_SAID (file, the phrase's start); the list may only shrink: a
phrase moved into ``say`` must leave it, and a new one must not join it. The last tests run checkers
in a Chinese course: a shape exercise, the summary line and a closer look speak Chinese throughout.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

from mha_course.check import gqa, language, report, shapes
from mha_course.tools import i18n

CHECK = Path(language.__file__).resolve().parent
# a verdict's head (its symbol), or a fixed phrase of its frame; f-string fields read as {}
FRAME = re.compile(r"^\s*[✔✘⋯]|Looks like|not finished|\bFix:|case \{\} of|A closer look|\bcalled \{\}")
NOT_YET_SAID = {
    ("bridge.py", "⋯ {}: not finished: this exercise needs PyTo"),
    ("compare.py", "Fix: return {}"),
    ("compare.py", "{}. Fix: combine them into one array (np.sta"),
    ("compare.py", "{}{}: {}complex ({}) where real numbers are "),
    ("compare.py", "{}{}: the values are right but the dtype is "),
    ("compare.py", "{}{}: the values are right to {}'s precision"),
    ("compare.py", "{}{}: the value is right but it is a {} ({})"),
    ("compare.py", "{}{}: an array of dtype object (Python objec"),
    ("compare.py", "{}. Fix: {}(parts, axis={})"),
    ("efficient.py", "✘ {}: right on every case, but wrong at T = "),
    ("engine.py", "your function calls {}, which this exercise "),
    ("engine.py", "it returned a {}.{}, expected a {}. Fix: {}"),
    ("engine.py", "it returned the caller's own array (or a vie"),
    ("engine.py", "Fix: compute into a new array (z = {} - m) i"),
    ("heads.py", "✘ head_queries: your function multiplies X b"),
    ("heads.py", "✘ head_queries: the values are right, but yo"),
    ("heads.py", "  Fix: {} (d_model x d_k numbers per head, n"),
}


def _text(node) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def _skipped(tree) -> set:
    """ids of the nodes that are no phrase of a verdict: say()'s own templates, docstrings, an f-string's parts."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "say":
            out.update(id(a) for a in node.args[:1])
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body \
                and isinstance(node.body[0], ast.Expr):
            out.add(id(node.body[0].value))
        if isinstance(node, ast.JoinedStr):
            out.update(id(v) for v in node.values)
    return out


def frames_outside_say(folder: Path) -> set:
    """{(file, the first 44 characters)} of every verdict frame built in ``folder``'s files without ``say``."""
    found = set()
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = _skipped(tree)
        for node in ast.walk(tree):
            text = _text(node)
            if text and id(node) not in skipped and FRAME.search(text):
                found.add((path.name, text[:44]))
    return found


def test_every_verdict_frame_goes_through_say():
    found = frames_outside_say(CHECK)
    new = sorted(found - NOT_YET_SAID)
    assert not new, f"verdict phrases built without say() (English in a Chinese course): {new}"
    gone = sorted(NOT_YET_SAID - found)
    assert not gone, f"these now go through say() (or are gone): take them out of NOT_YET_SAID: {gone}"


def test_the_scan_finds_a_frame_outside_say_and_not_one_inside(tmp_path):
    (tmp_path / "demo.py").write_text(
        'def f(name, n, fix):\n'
        '    """✘ a docstring is no verdict."""\n'
        '    print(say("✘ {name}: case {i} of {n} failed", name=name, i=1, n=n))\n'
        '    print(f"✘ {name}: case 1 of {n} failed")\n'
        '    return "Looks like: " + fix\n', encoding="utf-8")
    assert frames_outside_say(tmp_path) == {("demo.py", "✘ {}: case 1 of {} failed"), ("demo.py", "Looks like: ")}


def test_every_template_said_is_in_the_catalogue_and_translated():
    """The other half: each say() template is a message of checks.po with a reviewed translation."""
    table = i18n.translations(i18n.read_catalogue(i18n.catalogue_path(i18n.DOMAIN_CHECKS)))
    said = [t for t, _ in i18n.checker_phrases(CHECK)]
    assert said and not [t for t in said if t not in table]


# ----------------------------------------------------------------------------- what a learner reads, in Chinese
_CJK = re.compile(r"[\u4e00-\u9fff]")
_ENGLISH_FRAME = re.compile(r"Looks like|not finished|Fix:|case \d+ of|A closer look|called |shapes right|stages? wrong"
                            r"|expected|got |unknown convention|The same mistake")


@pytest.fixture
def chinese(monkeypatch):
    monkeypatch.setenv(language.ENV, "zh_CN")
    report.forget_results()
    yield
    report.forget_results()


def _wrong_shapes(mistake):
    ex = shapes.STAGE_SHAPES
    return lambda *sizes: ex.predicted(mistake, shapes.Sizes(*sizes))


def test_a_shape_exercise_and_the_summary_line_speak_chinese(chinese, capsys):
    ex = shapes.STAGE_SHAPES
    assert ex.check(lambda *sizes: ex.reference(shapes.Sizes(*sizes)))
    assert not ex.check(_wrong_shapes(ex.mistakes[0]))
    assert not ex.check(lambda *sizes: {k: tuple(float(n) for n in v) for k, v in ex.reference(shapes.Sizes(*sizes)).items()})
    assert not ex.check(lambda *sizes: {"X": (1,)})
    assert not report.report_value("softmax", ...)
    report.summary()
    lines = capsys.readouterr().out.splitlines()
    assert "✘ stage_shapes" in lines and len(lines) > 10  # one case: its head is the symbol and the name alone
    assert not [ln for ln in lines if _ENGLISH_FRAME.search(ln) or (ln != "✘ stage_shapes" and not _CJK.search(ln))]
    assert lines[-1] == "2 道练习中已完成 0 道：stage_shapes ✘，softmax ⋯ 未完成"


def test_a_stage_line_in_chinese_keeps_the_mistake_and_numbers(chinese, capsys):
    ex = shapes.STAGE_SHAPES
    mistake = ex.mistakes[0]
    ex.check(_wrong_shapes(mistake))
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("    ")]
    assert mistake.name in lines[0] and mistake.fix in lines[0] and "看起来是" in lines[0]
    assert all(_CJK.search(ln) and "The same mistake" not in ln for ln in lines)


@pytest.mark.parametrize("lang", [None, "zh_CN"])
def test_a_catalogued_mistake_gets_no_closer_look_in_either_language(lang, monkeypatch, capsys):
    """masks.check_with_closer_look: a named mistake is enough, whatever language the verdict is in."""
    if lang:
        monkeypatch.setenv(language.ENV, lang)
    else:
        monkeypatch.delenv(language.ENV, raising=False)
        monkeypatch.setattr(language, "course_language", lambda cwd=None: None)
    no_offset = lambda T, offset: np.tril(np.ones((T, offset + T), dtype=bool))  # noqa: E731
    assert not gqa.offset_causal_mask(no_offset)
    out = capsys.readouterr().out
    named, closer = {None: ("Looks like: ", "A closer look:"), "zh_CN": ("看起来是：", "仔细看一看：")}[lang]
    assert named in out and closer not in out and "A closer look" not in out
    assert not gqa.offset_causal_mask(lambda T, offset: np.eye(T, offset + T, dtype=bool))   # no known mistake
    out = capsys.readouterr().out
    assert named not in out and f"\n  {closer}\n" in out
