"""tools/i18n.py: the course in other languages from one source, through gettext catalogues (Babel).

- cutting prose into messages gives the English back exactly, for every markdown cell of the course;
- a message whose English changed is marked fuzzy by ``update`` and is not used until reviewed;
- a translation keeps code, math, link targets and tags, or the English is used instead;
- a translated notebook's code cells, ids, tags and outputs are the English ones;
- ``mha-course student --lang zh_CN`` writes translated copies and marks the course folder's language.
"""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import nbformat
import pytest

from mha_course.tools import i18n, student

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _markdown(path: Path) -> list[str]:
    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"]


@pytest.mark.parametrize("path", NOTEBOOKS + [ROOT / "docs" / "glossary.md"], ids=lambda p: p.stem)
def test_cutting_into_messages_gives_the_english_back(path):
    sources = [path.read_text(encoding="utf-8")] if path.suffix == ".md" else _markdown(path)
    for source in sources:
        assert i18n.translate_markdown(source, {}) == source
        for text in i18n.messages(source):
            assert text.strip() and i18n.protected_parts(text) == i18n.protected_parts(text)


def test_tables_give_a_message_per_row_and_lists_one_per_item():
    source = "Intro `x`.\n\n| alpha | beta |\n|---|---|\n| one | two |\n\n- first item\n  goes on\n- second item\n\n```\ncode here\n```"
    assert i18n.messages(source) == ["Intro `x`.", "| alpha | beta |", "| one | two |", "- first item\n  goes on",
                                     "- second item"]


def _catalogue(pairs):
    return i18n.template([(text, "cell") for text in pairs], "test")


def test_a_changed_english_message_becomes_fuzzy_and_is_not_used(tmp_path):
    path = tmp_path / "t.po"
    cat = _catalogue(["The scores are divided by $\\sqrt{d_k}$.", "Unchanged sentence here."])
    cat["The scores are divided by $\\sqrt{d_k}$."].string = "分数除以 $\\sqrt{d_k}$。"
    cat["Unchanged sentence here."].string = "未改变的句子。"
    i18n.write_catalogue(path, cat)
    new = _catalogue(["The scores are divided by $\\sqrt{d_k}$ first.", "Unchanged sentence here."])
    merged = i18n.merged(i18n.read_catalogue(path), new)
    i18n.write_catalogue(path, merged)
    back = i18n.read_catalogue(path)
    changed = back["The scores are divided by $\\sqrt{d_k}$ first."]
    assert changed.fuzzy and changed.string == "分数除以 $\\sqrt{d_k}$。"
    assert i18n.translations(back) == {"Unchanged sentence here.": "未改变的句子。"}
    s = i18n.status("t", back)
    assert (s.messages, s.translated, s.fuzzy, s.untranslated) == (2, 1, 1, 0)


def test_a_translation_that_breaks_code_math_or_a_link_stays_english():
    english = "Call `split_heads(x, h)` on $(B, T, D)$; see [03](03_multi_head_split.ipynb)."
    good = "对 $(B, T, D)$ 调用 `split_heads(x, h)`；见 [03](03_multi_head_split.ipynb)。"
    for broken in ("调用 `split_heads(x)`，见 [03](03_multi_head_split.ipynb)，$(B, T, D)$。",
                   "对 $(B,T,D)$ 调用 `split_heads(x, h)`；见 [03](03_multi_head_split.ipynb)。",
                   "对 $(B, T, D)$ 调用 `split_heads(x, h)`；见 [03](03.ipynb)。"):
        assert i18n.translate_markdown(english, {english: broken}) == english
    assert i18n.translate_markdown(english, {english: good}) == good


def _tag(text: str) -> str:
    """A fake translation: [中] after the message's table, list or heading prefix (kept, as a translator must)."""
    prefix = re.match(r"^(\s*(?:\||[-*+]\s+|\d+[.)]\s+|#+\s+)?)", text).group(1)
    return prefix + "[中] " + text[len(prefix):]


def _fake_catalogue(base: Path, stem: str, nb) -> dict:
    """A catalogue that 'translates' every message of ``nb`` by tagging it (``_tag``)."""
    pairs = i18n.notebook_messages(nb)
    cat = i18n.template(pairs, stem)
    table = {}
    for m in cat:
        if m.id:
            m.string = table[m.id] = _tag(m.id)
    i18n.write_catalogue(i18n.catalogue_path(stem, "zh_CN", base), cat)
    return table


def test_a_translated_notebook_keeps_every_code_cell_id_tag_and_output(tmp_path):
    path = ROOT / "notebooks" / "02_scaled_dot_product.ipynb"
    nb = nbformat.read(path, as_version=4)
    table = _fake_catalogue(tmp_path, path.stem, nb)
    zh = i18n.translated(nb, path.stem, "zh_CN", base=tmp_path)
    assert len(zh.cells) == len(nb.cells) and zh.metadata["mha_course"]["lang"] == "zh_CN"
    for a, b in zip(nb.cells, zh.cells):
        assert (a.cell_type, a.get("id"), a.metadata) == (b.cell_type, b.get("id"), b.metadata)
        if a.cell_type == "code":
            assert (a.source, a.get("outputs")) == (b.source, b.get("outputs"))
        else:
            assert i18n.messages(b.source) == [table[m] + i18n.heading_anchor(m) for m in i18n.messages(a.source)]


def test_student_copies_in_chinese_have_english_code_and_mark_the_language(tmp_path, monkeypatch):
    src = ROOT / "notebooks" / "01_qkv.ipynb"
    base = tmp_path / "course"
    (base / "notebooks").mkdir(parents=True)
    _fake_catalogue(base, src.stem, nbformat.read(src, as_version=4))
    monkeypatch.setattr(i18n, "root", lambda: base)
    out = tmp_path / "learner"
    student.write_student_copies([src], out, log=lambda *a: None, lang="zh_CN")
    english = student.student_notebook(nbformat.read(src, as_version=4))
    copy = nbformat.read(out / "notebooks" / src.name, as_version=4)
    assert [c.source for c in copy.cells if c.cell_type == "code"] == \
           [c.source for c in english.cells if c.cell_type == "code"]
    translated = [m for c in copy.cells if c.cell_type == "markdown" for m in i18n.messages(c.source)]
    assert translated
    assert sum("[中] " in m for m in translated) >= 0.9 * len(translated)
    assert (out / ".mha-course" / "lang").read_text().strip() == "zh_CN"


@pytest.mark.parametrize("bad", ["fr_FR", "zh", "", None])
def test_an_unknown_language_is_refused_with_the_choices(bad):
    with pytest.raises(ValueError, match="zh_CN"):
        i18n.catalogue_path("01_qkv", bad)


def test_the_cli_status_counts_every_catalogue(capsys):
    assert i18n.main(["status"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    n = len(i18n.sources())                # every notebook, the glossary, the book's landing page, the checkers' phrases
    assert n == len(NOTEBOOKS) + 3
    assert len(lines) == n + 1 and lines[-1].startswith(f"{n} catalogues")


def test_every_catalogue_is_in_step_with_the_english():
    """``make i18n`` was run: every message of the English is in its catalogue (nothing silently missing), and no
    message is in it that the English no longer has (the counts are the English's)."""
    stale = {}
    for stem, pairs in i18n.sources().items():
        cat = i18n.read_catalogue(i18n.catalogue_path(stem))
        missing = [text for text, _ in pairs if text not in cat]
        gone = [m.id for m in cat if m.id and m.id not in {text for text, _ in pairs}]  # counted, but shown nowhere
        if missing or gone:
            stale[stem] = (missing + gone)[:2]
    assert not stale, f"catalogues out of step with the English (run make i18n): {json.dumps(stale, ensure_ascii=False)[:600]}"


def test_a_translated_heading_keeps_the_english_anchor_so_links_still_land():
    english = "## 3. What goes wrong without projections: Q = K = V = X"
    zh = i18n.translate_markdown(english, {english: "## 3. 没有投影会怎样：Q = K = V = X"})
    assert zh == '## 3. 没有投影会怎样：Q = K = V = X <a id="3.-What-goes-wrong-without-projections:-Q-=-K-=-V-=-X"></a>'
    assert i18n.heading_anchor("Not a heading") == ""
    quoted = i18n.heading_anchor('## 4. "Attention is fast"')
    assert quoted == ' <a id="4.-&quot;Attention-is-fast&quot;"></a>', quoted  # an attribute a browser reads back


# ----------------------------------------------------------------------------- the Chinese edition itself
def _status(stem):
    return i18n.status(stem, i18n.read_catalogue(i18n.catalogue_path(stem)))


ALL = sorted(i18n.sources())


@pytest.mark.parametrize("stem", ALL)
def test_every_message_has_a_reviewed_translation_that_keeps_code_math_and_links(stem):
    """Every markdown paragraph of every notebook, every glossary row and every checker phrase: translated,
    not fuzzy (a changed English paragraph is fuzzy until reviewed), its code, math, links and tags intact."""
    s = _status(stem)
    assert (s.fuzzy, s.untranslated, s.broken) == (0, 0, 0), s
    assert s.translated == s.messages > 0


def _glossary_terms():
    rows = [line for line in (i18n.root() / "docs" / "glossary.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| ") and not line.startswith("| Term")]
    out = []
    for line in rows:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0] and cells[1] and not set(cells[0]) <= set("-:"):
            forms = [f.strip() for f in re.split(r"[/／,，]|（|）|\(|\)", cells[1]) if f.strip()]
            out.append((cells[0].replace("`", "").strip(), forms))
    return out


# Not prose: code, a shape tuple of names such as (batch, $h_{kv}$, max_len, $d_k$), math, a link target.
_PROSE_ONLY = re.compile(r"`[^`]*`|\([\w${}\\]*(?:,\s*[\w${}\\]*)+\)|\$\$.*?\$\$|\$[^$]*\$|\]\([^)]*\)", re.S)
# A glossary term that a notebook uses in another sense: "patch" is a ViT image patch in the glossary,
# activation patching (修补) in 14.
OTHER_SENSE = {("14_circuits", "patch")}


def _term_pattern(term: str):
    """The English term as prose uses it: its plural too, and without a one-word note in brackets
    ("rotary position embedding (RoPE)" is found as "Rotary position embeddings"); None for a term of
    several alternatives ("zero / mean / resample ablation") or shorter than 4 letters."""
    name = re.sub(r"\s*\(\S+\)$", "", term).strip()
    if len(name) < 4 or "/" in name:
        return None
    stem = re.escape(name[:-1]) + "(?:y|ies)" if name.endswith("y") else re.escape(name) + "(?:s|es)?"
    return re.compile(rf"(?<![\w`-]){stem}(?![\w`])", re.I)


def _kept_english(english: str, chinese: str) -> str:
    """``english`` without the quoted or italic spans that its Chinese keeps as they are (a paper's title)."""
    spans = re.findall(r'"[^"\n]+"|\*[^*\n]+\*', english)
    return functools.reduce(lambda text, span: text.replace(span, " ") if span in chinese else text, spans, english)


def test_each_glossary_term_is_translated_as_the_glossary_says():
    """Where an English paragraph uses a glossary term, its Chinese uses that term's Chinese form (one of the
    forms the glossary's 中文 column gives): one term per concept, throughout the course."""
    # longest first, and a term found is cut out: "embedding" inside "rotary position embedding" is that term's
    terms = sorted(((en, forms, p) for en, forms in _glossary_terms() for p in [_term_pattern(en)] if p),
                   key=lambda t: -len(t[0]))
    wrong = []
    for stem in ALL:
        if stem in (i18n.DOMAIN_GLOSSARY, i18n.DOMAIN_CHECKS):
            continue
        for english, chinese in i18n.translations(i18n.read_catalogue(i18n.catalogue_path(stem))).items():
            prose = _PROSE_ONLY.sub(" ", _kept_english(english, chinese))  # not prose: code, math, links, titles
            for en, forms, pattern in terms:
                if (stem, en) in OTHER_SENSE or not pattern.search(prose):
                    continue
                if not any(f in chinese for f in forms):
                    wrong.append((stem, en, forms, chinese[:60]))
                prose = pattern.sub(" | ", prose)
    assert not wrong, f"{len(wrong)} uses of a glossary term in another Chinese form, e.g. {wrong[:5]}"


def test_a_glossary_term_is_found_in_its_plural_and_without_its_abbreviation():
    pattern = _term_pattern("rotary position embedding (RoPE)")
    assert pattern.search("**Rotary position embeddings** turn") and not pattern.search("RoPE alone")
    assert _term_pattern("query").search("three queries") and not _term_pattern("query").search("queryless")
    assert _term_pattern("zero / mean / resample ablation") is None and _term_pattern("key") is None
    assert _kept_english('see "Positional Encodings Still Learn"', '见 "Positional Encodings Still Learn"') == "see  "


@pytest.mark.parametrize("stem", ["../../../tmp/evil", "01_qkv.po", "a/b", "", 3])
def test_a_catalogue_name_never_reaches_outside_locales(stem):
    with pytest.raises(ValueError, match="catalogue name"):
        i18n.catalogue_path(stem)
    with pytest.raises(ValueError, match="catalogue name"):
        i18n.untranslated(stem)


def test_a_wrapped_chinese_line_is_joined_without_a_space():
    assert i18n.join_cjk_lines("这个老习惯，\n   在页码") == "这个老习惯，在页码"
    assert i18n.join_cjk_lines("频率，\n并在 $x$\n`code`") == "频率，并在 $x$\n`code`"  # only between Chinese
    table = {"One line,\nanother.": "一行，\n另一行。"}
    assert i18n.translate_markdown("One line,\nanother.", table) == "一行，另一行。"


def test_a_missing_or_broken_catalogue_is_one_line_naming_it(tmp_path):
    missing = tmp_path / "locales" / "zh_CN" / "LC_MESSAGES" / "01_qkv.po"
    with pytest.raises(ValueError, match="no such catalogue"):
        i18n.read_catalogue(missing)
    assert len(i18n.read_catalogue(missing, missing_ok=True)) == 0
    with pytest.raises(ValueError, match="no such catalogue"):
        i18n.untranslated("01_qkv", base=tmp_path)  # a translator's typo'd stem is not "all done"
    broken = tmp_path / "broken.po"
    broken.write_text('msgid "unterminated\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"broken\.po is not a valid gettext catalogue.*git checkout"):
        i18n.read_catalogue(broken)
    with pytest.raises(ValueError, match="is a folder"):
        i18n.read_catalogue(tmp_path)


def test_a_catalogue_is_written_whole_and_never_onto_a_folder(tmp_path):
    folder = tmp_path / "podir"
    folder.mkdir()
    with pytest.raises(ValueError, match="is a folder"):
        i18n.write_catalogue(folder, i18n.template([("Hello.", "c1")], "d"))
    assert folder.is_dir() and not list(tmp_path.glob(".*tmp"))
    path = i18n.write_catalogue(tmp_path / "x.po", i18n.template([("Hello.", "c1")], "d"))
    assert [m.id for m in i18n.read_catalogue(path) if m.id] == ["Hello."]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["podir", "x.po"]


def test_the_chinese_book_has_a_chinese_landing_page_and_sidebar(tmp_path):
    out = i18n.stage_book(tmp_path / "zh")
    page = (out / "book" / "index.md").read_text(encoding="utf-8")
    english = (i18n.root() / "book" / "index.md").read_text(encoding="utf-8")
    assert "多头注意力" in page.splitlines()[0]
    captions = re.findall(r"^:caption: (.+)$", page, re.M)
    assert len(captions) == len(re.findall(r"^:caption: ", english, re.M)) >= 2
    assert not any(re.search(r"[A-Za-z]{3}", c) for c in captions), captions
    # every toctree target is kept, so the Chinese sidebar lists the same pages
    targets = lambda text: re.findall(r"^(?:\.\./\S+|.* <(\.\./[^>]+)>)$", text, re.M)  # noqa: E731
    assert targets(page) == targets(english)


def test_no_page_of_the_chinese_book_keeps_a_jupyterlab_anchor_in_a_heading(tmp_path):
    """An <a id> inside a heading becomes an <a> without href in the book's page contents (the theme's
    script then fails on that page): the book's sources drop them, on every translated page."""
    import nbformat
    out = i18n.stage_book(tmp_path / "zh")
    pages = {rel: (out / rel).read_text(encoding="utf-8") for rel in ("book/index.md", "docs/glossary.md")}
    for path in sorted((out / "notebooks").glob("*.ipynb")):
        pages[path.name] = "\n\n".join(c.source for c in nbformat.read(path, as_version=4).cells
                                       if c.cell_type == "markdown")
    kept = {rel: line for rel, text in pages.items() for line in text.splitlines()
            if re.match(r"^#{1,6}\s", line) and "<a id=" in line}
    assert not kept, kept
    assert len(pages) == len(NOTEBOOKS) + 2 and "侦探社" in pages["docs/glossary.md"]
