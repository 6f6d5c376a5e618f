"""The Chinese course as a learner gets it, from the real catalogues (tools/i18n.py, locales/zh_CN).

- every notebook's Chinese copy keeps each cell's type, id, tags and metadata, each code cell's source
  and outputs, and in each markdown cell every code span, code fence, math, link target and HTML tag of
  the English, in order; and no paragraph of it falls back to the English;
- ``update`` (``make i18n``) keeps a catalogue in step from end to end: a changed English paragraph is
  fuzzy and shows in English, a removed one leaves the catalogue, a reviewed one is used again;
- ``mha-course start DIR --lang zh_CN`` writes Chinese copies with the English code and marks the folder.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import nbformat
import pytest

from mha_course.tools import cli, i18n, start, student

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
_ANCHOR = re.compile(r' <a id="[^"]*"></a>$', re.M)  # what translate_markdown adds after a translated heading
_CJK = re.compile(r"[\u4e00-\u9fff]")


def _kept(source: str) -> list[str]:
    """What a translation must keep of a markdown cell: its protected parts and its untranslated blocks, in order."""
    source = _ANCHOR.sub("", source)
    fixed = [b.text for p in i18n.blocks(source) for b in p if not b.translate]
    return fixed + [part for text in i18n.messages(source) for part in i18n.protected_parts(text)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_chinese_notebook_keeps_every_cell_but_its_prose(path):
    english = nbformat.read(path, as_version=4)
    chinese = i18n.translated(english, path.stem, "zh_CN")
    assert [c.cell_type for c in chinese.cells] == [c.cell_type for c in english.cells]
    for en, zh in zip(english.cells, chinese.cells):
        assert (zh.get("id"), zh.metadata) == (en.get("id"), en.metadata), en.get("id")
        if en.cell_type == "code":
            assert (zh.source, zh.get("outputs")) == (en.source, en.get("outputs")), en.get("id")
        elif en.cell_type == "markdown":
            assert sorted(_kept(zh.source)) == sorted(_kept(en.source)), en.get("id")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_paragraph_of_a_chinese_notebook_is_left_in_english(path):
    """A message whose translation was refused (a broken code span, a changed link) would show in English."""
    english = nbformat.read(path, as_version=4)
    chinese = i18n.translated(english, path.stem, "zh_CN")
    left = []
    for en, zh in zip(english.cells, chinese.cells):
        if en.cell_type != "markdown":
            continue
        shown = i18n.messages(_ANCHOR.sub("", zh.source))
        left += [m for m in i18n.messages(en.source) if m in shown and _CJK.search(m) is None]
    assert not left, f"{len(left)} paragraphs of {path.name} show in English, e.g. {left[:3]}"


def _course(base: Path, paragraphs: list[str]) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("\n\n".join(paragraphs)), nbformat.v4.new_code_cell("x = 1")]
    path = base / "notebooks" / "01_demo.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def test_update_keeps_a_catalogue_in_step_with_a_changed_notebook(tmp_path):
    path = _course(tmp_path, ["## 1. Scores", "Divide by `sqrt(d_k)`.", "A paragraph that goes."])
    (s,) = i18n.update(base=tmp_path, log=lambda line: None)
    assert (s.stem, s.messages, s.untranslated) == ("01_demo", 3, 3)
    done, refused = i18n.add_translations("01_demo", {"## 1. Scores": "## 1. 分数", "Divide by `sqrt(d_k)`.":
                                                      "除以 `sqrt(d_k)`。", "A paragraph that goes.": "一段会删去的话。"},
                                          base=tmp_path)
    assert (done, refused) == (3, [])
    _course(tmp_path, ["## 1. Scores", "Divide the scores by `sqrt(d_k)`."])  # one changed, one removed
    (s,) = i18n.update(base=tmp_path, log=lambda line: None)
    assert (s.messages, s.translated, s.fuzzy, s.untranslated) == (2, 1, 1, 0)
    assert i18n.untranslated("01_demo", base=tmp_path) == ["Divide the scores by `sqrt(d_k)`."]
    shown = i18n.translated(nbformat.read(path, as_version=4), "01_demo", base=tmp_path).cells[0].source
    assert shown.startswith("## 1. 分数") and shown.endswith("\n\nDivide the scores by `sqrt(d_k)`.")
    assert "一段会删去的话" not in i18n.catalogue_path("01_demo", base=tmp_path).read_text(encoding="utf-8")
    i18n.add_translations("01_demo", {"Divide the scores by `sqrt(d_k)`.": "把分数除以 `sqrt(d_k)`。"}, base=tmp_path)
    shown = i18n.translated(nbformat.read(path, as_version=4), "01_demo", base=tmp_path).cells[0].source
    assert shown.endswith("\n\n把分数除以 `sqrt(d_k)`。")


def test_start_with_lang_writes_chinese_copies_with_the_english_code(monkeypatch, tmp_path, capsys):
    src = ROOT / "notebooks" / "01_qkv.ipynb"
    calls = []
    monkeypatch.setattr(start, "course_notebooks", lambda: [src])
    monkeypatch.setattr(subprocess, "call", lambda cmd, cwd: calls.append(cwd) or 0)
    assert cli.main(["start", str(tmp_path / "c"), "--lang", "zh_CN"]) == 0
    assert calls == [tmp_path / "c"]
    copy = nbformat.read(tmp_path / "c" / "notebooks" / src.name, as_version=4)
    english = student.student_notebook(nbformat.read(src, as_version=4))
    assert [c.source for c in copy.cells if c.cell_type == "code"] == \
           [c.source for c in english.cells if c.cell_type == "code"]
    prose = [c.source for c in copy.cells if c.cell_type == "markdown"]
    assert prose and all(_CJK.search(text) for text in prose)
    assert (tmp_path / "c" / ".mha-course" / "lang").read_text().strip() == "zh_CN"


def _prose(path: Path) -> list[str]:
    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"]


def test_an_update_without_lang_keeps_a_chinese_folder_chinese(tmp_path):
    src = ROOT / "notebooks" / "01_qkv.ipynb"
    student.write_student_copies([src], tmp_path / "c", log=lambda line: None, lang="zh_CN")
    copy = tmp_path / "c" / "notebooks" / src.name
    glossary = tmp_path / "c" / "docs" / "glossary.md"
    chinese_glossary = glossary.read_bytes()
    glossary.unlink()  # a linked file the copy lacks: --update adds it
    assert cli.main(["student", str(tmp_path / "c"), "--update", "--notebooks", str(src)]) == 0
    assert all(_CJK.search(text) for text in _prose(copy))
    assert glossary.read_bytes() == chinese_glossary != (ROOT / "docs" / "glossary.md").read_bytes()
    assert (tmp_path / "c" / ".mha-course" / "lang").read_text().strip() == "zh_CN"


def test_an_update_keeps_an_english_folder_english_and_with_lang_makes_it_chinese(tmp_path):
    src = ROOT / "notebooks" / "01_qkv.ipynb"
    student.write_student_copies([src], tmp_path / "c", log=lambda line: None)
    copy = tmp_path / "c" / "notebooks" / src.name
    english = _prose(copy)
    student.update_student_copies([src], tmp_path / "c", log=lambda line: None)
    assert _prose(copy) == english and not (tmp_path / "c" / ".mha-course" / "lang").exists()
    assert (tmp_path / "c" / "docs" / "glossary.md").read_bytes() == (ROOT / "docs" / "glossary.md").read_bytes()
    done = student.update_student_copies([src], tmp_path / "c", log=lambda line: None, lang="zh_CN")
    assert done["updated"] == [copy] and all(_CJK.search(text) for text in _prose(copy))
    assert (tmp_path / "c" / ".mha-course" / "lang").read_text().strip() == "zh_CN"


def test_a_chinese_copy_links_the_chinese_glossary(tmp_path):
    src = ROOT / "notebooks" / "01_qkv.ipynb"
    student.write_student_copies([src], tmp_path / "c", log=lambda line: None, lang="zh_CN")
    glossary = (tmp_path / "c" / "docs" / "glossary.md").read_text(encoding="utf-8")
    table = i18n.translations(i18n.read_catalogue(i18n.catalogue_path(i18n.DOMAIN_GLOSSARY)))
    assert glossary == i18n.translate_markdown((ROOT / "docs" / "glossary.md").read_text(encoding="utf-8"), table)
