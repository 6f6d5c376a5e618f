"""The course in other languages from one source: gettext catalogues of the English notebooks.

The English notebooks stay the source. Their prose is cut into messages, one per paragraph, and
kept in one catalogue per notebook, ``locales/<lang>/LC_MESSAGES/<notebook stem>.po`` (the
glossary in ``glossary.po``), read and written with Babel's catalogue API (the library behind
``pybabel``). A translated notebook is the English one with each message replaced by its
translation: code cells, cell ids, tags and outputs are the English ones, unchanged.

- **Messages.** A markdown cell is cut at blank lines into blocks. A table gives one message per
  row (its ``|---|`` rule is kept as it is), a list one per item, any other block one message.
  Blocks with nothing to translate (a code fence, display math alone, bare HTML tags) are kept as
  they are and never extracted. The same English text is one message wherever it occurs, so it
  is translated once and alike everywhere.
- **Staying in step.** ``update`` re-extracts and merges each catalogue with Babel's
  ``Catalog.update`` (what ``msgmerge`` does): a message whose English changed is matched to its
  old translation and marked *fuzzy*, and a fuzzy translation is not used until a person has
  reviewed it and removed the flag. So a changed English paragraph shows in English, never as a
  stale translation. ``make i18n`` runs it.
- **Kept intact.** Inline code, math, link targets and HTML tags of a message must come back
  unchanged in its translation (``protected_parts``); ``translated`` falls back to the
  English for a translation that breaks one, and the tests list every such message.

    python -m mha_course.tools.i18n update            # re-extract, merge, mark changed messages fuzzy
    python -m mha_course.tools.i18n status            # messages, translated, fuzzy, per catalogue
    python -m mha_course.tools.i18n export 01_qkv     # what is left to translate, as JSON
    python -m mha_course.tools.i18n import 01_qkv zh.json   # {English: 中文} into the catalogue
    python -m mha_course.tools.i18n book build/book-src-zh_CN   # the Chinese book's sources (make site BOOK_LANG=zh_CN)
"""
from __future__ import annotations

import argparse
import html
import re
import sys
from pathlib import Path
from typing import NamedTuple

LANGS = ("zh_CN",)                       # the languages the course has catalogues for
DOMAIN_GLOSSARY = "glossary"
DOMAIN_CHECKS = "checks"              # the checkers' fixed phrases (mha_course.check.language.say)
DOMAIN_BOOK = "book"                  # the web book's landing page, book/index.md (its prose and toctree captions)
_TOC_LINE = re.compile(r"^(:caption: )(.+)$|^(?!:)(.+?)( <[^>]+>)$")


# ----------------------------------------------------------------------------- cutting prose into messages
class Block(NamedTuple):
    """One piece of a markdown cell: ``text`` and whether it is a message (``translate``)."""
    text: str
    translate: bool


_FENCE = re.compile(r"^\s*(```|~~~)")
_ITEM = re.compile(r"^(\s{0,3})([-*+]|\d+[.)])\s+")
_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_WORDS = re.compile(r"[A-Za-z\u4e00-\u9fff]{2,}")
# What must come back unchanged: inline code, display and inline math, link targets, HTML tags.
_PROTECTED = re.compile(r"`[^`\n]+`|\$\$.+?\$\$|\$[^$]+\$|\]\([^)\s]*\)|</?[A-Za-z][^<>\n]*>", re.S)


def _has_words(text: str) -> bool:
    """True when ``text`` has words outside its code, math, links and tags."""
    return bool(_WORDS.search(_PROTECTED.sub(" ", text)))


def _paragraphs(source: str) -> list[str]:
    """A markdown source cut at blank lines, code fences kept whole (with their blank lines)."""
    out, current, fenced = [], [], False
    for line in source.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        if not fenced and not line.strip() and current:
            out.append("\n".join(current))
            current = []
            continue
        if line.strip() or fenced or current:
            current.append(line)
    if current:
        out.append("\n".join(current))
    return out


def _split_lines(paragraph: str) -> list[Block]:
    """A table into its rows, a list into its items, anything else whole."""
    lines = paragraph.split("\n")
    if _FENCE.match(lines[0]):
        return [Block(paragraph, False)]
    if all(line.lstrip().startswith("|") for line in lines):
        return [Block(line, not _RULE.match(line) and _has_words(line)) for line in lines]
    if _ITEM.match(lines[0]) and not lines[0].startswith("    "):
        items, current = [], []
        for line in lines:
            if _ITEM.match(line) and len(_ITEM.match(line).group(1)) == 0 and current:
                items.append("\n".join(current))
                current = []
            current.append(line)
        items.append("\n".join(current))
        return [Block(item, _has_words(item)) for item in items]
    return [Block(paragraph, _has_words(paragraph))]


def blocks(source: str) -> list[list[Block]]:
    """A markdown source -> its paragraphs, each a list of Blocks (rows or items, or the paragraph).

    >>> [[b.text for b in p] for p in blocks("Hello.\\n\\n| a | b |\\n|---|---|\\n| x | y |")]
    [['Hello.'], ['| a | b |', '|---|---|', '| x | y |']]
    """
    if not isinstance(source, str):
        raise TypeError(f"source must be a str (a markdown cell's text), got {type(source).__name__}")
    return [_split_lines(p) for p in _paragraphs(source)]


def messages(source: str) -> list[str]:
    """A markdown source -> the texts to translate, in order (see ``blocks``)."""
    return [b.text for p in blocks(source) for b in p if b.translate]


def assemble(paragraphs: list[list[Block]]) -> str:
    """The inverse of ``blocks``: rows and items joined by newlines, paragraphs by blank lines."""
    return "\n\n".join("\n".join(b.text for b in p) for p in paragraphs)


def heading_anchor(english: str) -> str:
    """For a heading, an HTML anchor with the English heading's id, so that links into it still land."""
    if not re.match(r"^#{1,6}\s", english) or "\n" in english:
        return ""
    anchor = html.escape(english.lstrip("#").strip().replace(" ", "-"), quote=True)  # 4.-&quot;A-legend&quot;
    return f' <a id="{anchor}"></a>'


def protected_parts(text: str) -> list[str]:
    """The code spans, math, link targets and HTML tags of ``text``, sorted (a translation keeps them all).

    >>> protected_parts("Use `split_heads` on $(B, T, D)$, see [03](03_multi_head_split.ipynb).")
    ['$(B, T, D)$', '](03_multi_head_split.ipynb)', '`split_heads`']
    """
    return sorted(_PROTECTED.findall(text))


# ----------------------------------------------------------------------------- catalogues
def root() -> Path:
    """The course's folder: the clone (beside the package), or the copy a wheel ships (mha_course/course)."""
    package = Path(__file__).resolve().parent.parent
    for folder in (package.parent, package / "course"):
        if (folder / "locales").is_dir() or (folder / "notebooks").is_dir():
            return folder
    return package.parent


def catalogue_path(stem: str, lang: str = "zh_CN", base=None) -> Path:
    """-> locales/<lang>/LC_MESSAGES/<stem>.po under ``base`` (default: ``root()``)."""
    check_lang(lang)
    if not isinstance(stem, str) or not re.fullmatch(r"[A-Za-z0-9_\-]+", stem):
        raise ValueError(f"stem={stem!r} is not a catalogue name: give a notebook's stem (e.g. '01_qkv'), "
                         f"'{DOMAIN_GLOSSARY}', '{DOMAIN_CHECKS}' or '{DOMAIN_BOOK}', without a folder or '.po'")
    return Path(root() if base is None else base) / "locales" / lang / "LC_MESSAGES" / f"{stem}.po"


def check_lang(lang) -> str:
    """``lang`` if the course has catalogues for it, else a ValueError naming the choices."""
    if lang not in LANGS:
        raise ValueError(f"lang={lang!r} has no catalogues; choose one of {LANGS}")
    return lang


def notebook_messages(nb) -> list[tuple[str, str]]:
    """A notebook (nbformat node or dict) -> [(message, cell id)] of its markdown cells, in order."""
    out = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        out += [(m, cell.get("id", str(i))) for m in messages(source)]
    return out


def template(pairs, domain: str, lang: str = "zh_CN"):
    """[(message, where)] -> a Babel Catalog with every message once, untranslated."""
    from babel.messages.catalog import Catalog
    cat = Catalog(locale=lang, domain=domain, project="mha-course", charset="utf-8")
    for text, where in pairs:
        if text in cat:
            cat[text].locations.append((where, 0))
        else:
            cat.add(text, locations=[(where, 0)])
    return cat


def read_catalogue(path, missing_ok: bool = False):
    """The Babel Catalog at ``path`` (a .po file).

    A missing file is a ValueError naming it, unless ``missing_ok`` (then an empty catalogue: a
    notebook not yet extracted, or shown in English). A file that is not a valid catalogue is a
    ValueError naming the file and Babel's reason, with the fix.
    """
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import PoFileError, read_po
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a folder, not a catalogue: give the path of a .po file")
    if not path.exists():
        if missing_ok:
            return Catalog(charset="utf-8")
        raise ValueError(f"{path}: no such catalogue; run `python -m mha_course.tools.i18n update` to extract "
                         f"it from the notebooks, or check the stem (e.g. '01_qkv')")
    try:
        with path.open("rb") as f:
            return read_po(f, abort_invalid=True)
    except (PoFileError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not a valid gettext catalogue ({err}); restore it from git "
                         f"(git checkout -- {path}) or fix the line named") from None


def write_catalogue(path, catalog) -> Path:
    """Write ``catalog`` to ``path`` as a .po file, atomically (the package's one writer: a temporary
    file, then a rename), with the mode of the file it replaces. A folder at ``path`` is refused."""
    import io

    from babel.messages.pofile import write_po

    from . import files
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a folder: give the path of the .po file to write")
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    write_po(buf, catalog, width=0, omit_header=False, include_lineno=False, ignore_obsolete=True)
    return files.atomic_write(path, buf.getvalue())


def merged(old, new_template):
    """old Catalog, new template -> the old translations carried over; changed English marked fuzzy."""
    old.update(new_template, update_header_comment=False, update_creation_date=False)
    return old


def translations(catalog) -> dict:
    """Catalog -> {English: translation} of the messages that are translated and not fuzzy."""
    return {m.id: m.string for m in catalog if m.id and m.string and not m.fuzzy}


# ----------------------------------------------------------------------------- translating a notebook
_CJK = "\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"
_CJK_WRAP = re.compile(rf"(?<=[{_CJK}])\n[ \t]*(?=[{_CJK}])")


def join_cjk_lines(text: str) -> str:
    r"""A line break between two Chinese characters joined: markdown reads it as a space, which Chinese has none of.

    >>> join_cjk_lines("这个老习惯，\n   在页码")
    '这个老习惯，在页码'
    >>> join_cjk_lines("a\nb")
    'a\nb'
    """
    return _CJK_WRAP.sub("", text)


def translate_markdown(source: str, table: dict) -> str:
    """A markdown source, {English: translation} -> the source with each translated message replaced.

    A message without a translation, or whose translation drops or changes a protected part (code,
    math, a link target, a tag), stays English.
    """
    paragraphs = blocks(source)
    for p in paragraphs:
        for i, b in enumerate(p):
            new = table.get(b.text) if b.translate else None
            if new and protected_parts(new) == protected_parts(b.text):
                p[i] = Block(join_cjk_lines(new) + heading_anchor(b.text), True)
    tail = source[len(source.rstrip()):]
    return assemble(paragraphs) + tail


def translated(nb, stem: str, lang: str = "zh_CN", base=None):
    """A notebook (nbformat node), its stem -> a deep copy in ``lang``: each markdown cell translated from
    ``locales/<lang>/LC_MESSAGES/<stem>.po``; code cells, ids, tags and outputs unchanged; the language
    noted in ``metadata["mha_course"]["lang"]``."""
    import copy
    check_lang(lang)
    table = translations(read_catalogue(catalogue_path(stem, lang, base), missing_ok=True))
    out = copy.deepcopy(nb)
    for cell in out["cells"]:
        if cell["cell_type"] == "markdown":
            source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            cell["source"] = translate_markdown(source, table)
    out.setdefault("metadata", {}).setdefault("mha_course", {})["lang"] = lang
    return out


# ----------------------------------------------------------------------------- keeping the catalogues in step
class Status(NamedTuple):
    """One catalogue: messages extracted, translated (not fuzzy), fuzzy, untranslated, broken (a
    translation that drops or changes a protected part)."""
    stem: str
    messages: int
    translated: int
    fuzzy: int
    untranslated: int
    broken: int


def sources(base=None) -> dict:
    """-> {stem: [(message, where)]} of every notebook (notebooks/NN_*.ipynb) and the glossary."""
    import nbformat
    base = Path(root() if base is None else base)
    out = {}
    for path in sorted((base / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        out[path.stem] = notebook_messages(nbformat.read(path, as_version=4))
    glossary = base / "docs" / "glossary.md"
    if glossary.exists():
        out[DOMAIN_GLOSSARY] = [(m, "glossary.md") for m in messages(glossary.read_text(encoding="utf-8"))]
    landing = base / "book" / "index.md"
    if landing.exists():
        out[DOMAIN_BOOK] = [(m, "book/index.md") for m in book_messages(landing.read_text(encoding="utf-8"))]
    phrases = checker_phrases(base / "mha_course" / "check")
    if phrases:
        out[DOMAIN_CHECKS] = phrases
    return out


def _toctree_titles(source: str, table: dict | None = None):
    """The captions and entry titles of the ``{toctree}`` fences of a MyST page; with ``table``, the page
    with each translated (``:caption: The course``, ``The repository <../README>``)."""
    lines, found, inside = source.split("\n"), [], False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            inside = line.startswith("```{toctree}")
            continue
        m = _TOC_LINE.match(line) if inside else None
        if m:
            head, text, tail = (m.group(1), m.group(2), "") if m.group(1) else ("", m.group(3), m.group(4))
            found.append(text)
            if table and table.get(text):
                lines[i] = head + table[text] + tail
    return "\n".join(lines) if table is not None else found


def book_messages(source: str) -> list[str]:
    """The landing page's messages: its prose (see ``messages``), then its toctree captions and titles."""
    return messages(source) + [t for t in _toctree_titles(source) if t not in messages(source)]


def translate_page(source: str, table: dict) -> str:
    """The landing page translated: its prose (``translate_markdown``) and its toctree captions and titles."""
    return _toctree_titles(translate_markdown(source, table), table)


def checker_phrases(folder) -> list[tuple[str, str]]:
    """[(template, file)] of every ``say("...")`` in the checkers (``mha_course.check.language.say``)."""
    import ast
    out = []
    for path in sorted(Path(folder).glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError):
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "say"
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                out.append((node.args[0].value, f"check/{path.name}"))
    return out


def update(lang: str = "zh_CN", base=None, log=print) -> list[Status]:
    """Re-extract every source, merge each catalogue (changed English becomes fuzzy), write them; statuses."""
    check_lang(lang)
    out = []
    for stem, pairs in sources(base).items():
        path = catalogue_path(stem, lang, base)
        cat = merged(read_catalogue(path, missing_ok=True), template(pairs, stem, lang))
        write_catalogue(path, cat)
        out.append(status(stem, cat))
        log(_status_line(out[-1]))
    return out


def status(stem: str, catalog) -> Status:
    """The Status of one catalogue."""
    ids = [m for m in catalog if m.id]
    done = [m for m in ids if m.string and not m.fuzzy]
    broken = [m for m in done if protected_parts(m.string) != protected_parts(m.id)]
    fuzzy = [m for m in ids if m.fuzzy]
    return Status(stem, len(ids), len(done) - len(broken), len(fuzzy),
                  len(ids) - len(done) - len(fuzzy), len(broken))


def _status_line(s: Status) -> str:
    share = s.translated / s.messages if s.messages else 1.0
    return (f"{s.stem:<40} {s.messages:>4} messages, {s.translated:>4} translated ({share:.0%}), "
            f"{s.fuzzy} fuzzy, {s.untranslated} untranslated, {s.broken} broken")


def untranslated(stem: str, lang: str = "zh_CN", base=None) -> list[str]:
    """The English of every message of ``stem``'s catalogue that is untranslated, fuzzy or broken."""
    cat = read_catalogue(catalogue_path(stem, lang, base))
    done = translations(cat)
    return [m.id for m in cat if m.id and (m.id not in done or protected_parts(done[m.id]) != protected_parts(m.id))]


def add_translations(stem: str, table: dict, lang: str = "zh_CN", base=None) -> tuple[int, list[str]]:
    """{English: translation} -> into ``stem``'s catalogue (the fuzzy flag of each cleared: reviewed).

    Returns (how many were set, the English of those refused because the translation drops or
    changes a protected part, or because the English is not a message of the catalogue).
    """
    if not isinstance(table, dict):
        raise TypeError(f"table must be a dict {{English: translation}}, got {type(table).__name__}")
    path = catalogue_path(stem, lang, base)
    cat = read_catalogue(path)
    done, refused = 0, []
    for english, text in table.items():
        message = cat.get(english) if isinstance(english, str) else None
        if message is None or not isinstance(text, str) or protected_parts(text) != protected_parts(english):
            refused.append(english)
            continue
        message.string = text
        message.flags.discard("fuzzy")
        done += 1
    write_catalogue(path, cat)
    return done, refused


def stage_book(out, lang: str = "zh_CN", base=None) -> Path:
    """Write the web book's sources in ``lang`` into ``out``: the notebooks, the glossary and the landing page
    translated from their catalogues, the other pages (README, the instructor guide) copied; return ``out``.

    ``make site BOOK_LANG=zh_CN`` builds the Chinese book from this folder with the English book's conf.
    """
    import shutil

    import nbformat
    check_lang(lang)
    base, out = Path(root() if base is None else base), Path(out)
    if out.exists():
        shutil.rmtree(out)
    for rel in ("README.md", "docs/instructor.md"):
        if (base / rel).exists():
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(base / rel, out / rel)
    notebooks = sorted((base / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    headings = {path.name: _heading_map(path.stem, lang, base) for path in notebooks}
    for rel, domain, translate in (("book/index.md", DOMAIN_BOOK, translate_page),
                                   ("docs/glossary.md", DOMAIN_GLOSSARY, translate_markdown)):
        if (base / rel).exists():
            table = translations(read_catalogue(catalogue_path(domain, lang, base), missing_ok=True))
            text = translate((base / rel).read_text(encoding="utf-8"), table)
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_text(book_markdown(text, Path(rel).name, headings), encoding="utf-8")
    (out / "notebooks").mkdir(parents=True, exist_ok=True)
    for path in notebooks:
        nb = translated(nbformat.read(path, as_version=4), path.stem, lang, base)
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = book_markdown(cell.source, path.name, headings)
        nbformat.write(nb, out / "notebooks" / path.name)
    return out


def book_markdown(source: str, here: str, headings: dict) -> str:
    r"""A translated page's markdown as the web book wants it: without the JupyterLab anchors that
    ``translate_markdown`` puts after a heading (the book makes its own ids, and an anchor inside a heading
    would be an ``<a>`` without href in the page's table of contents), its links to a heading re-pointed
    at the translated heading (``headings``: {notebook file: ``_heading_map``}); ``here`` is the page's file.

    >>> book_markdown('## 1. 分数 <a id="1.-Scores"></a>\n\n见 [1](#1.-Scores)', "01_x.ipynb", {"01_x.ipynb": {"1scores": "1.-分数"}})
    '## 1. 分数\n\n见 [1](01_x.ipynb#1.-分数)'
    """
    return _relink(re.sub(r' <a id="[^"]*"></a>$', "", source, flags=re.M), here, headings)


def _loose(text: str) -> str:
    import unicodedata
    from urllib.parse import unquote
    text = unicodedata.normalize("NFKC", unquote(text.lstrip("#")))
    return "".join(ch for ch in text.lower() if ch.isalnum())


def _heading_map(stem: str, lang: str, base) -> dict:
    """{loose key of an English heading: the translated heading's anchor} for one notebook."""
    table = translations(read_catalogue(catalogue_path(stem, lang, base), missing_ok=True))
    out = {}
    for english, text in table.items():
        if re.match(r"^#{1,6}\s", english) and "\n" not in english:
            out[_loose(english)] = text.lstrip("#").strip().replace(" ", "-").replace('"', "%22")
    return out


def _relink(source: str, here: str, headings: dict) -> str:
    """Links to a heading by its English anchor pointed at the translated heading (the web book's pages)."""
    def fix(m):
        target, anchor = m.group(1), m.group(2)
        page = Path(target).name if target else here
        new = headings.get(page, {}).get(_loose(anchor))
        return f"]({target or here}#{new})" if new else m.group(0)  # a same-page link named by its file, too
    return re.sub(r"\]\(([^)#\s]*)#([^)\s]+)\)", fix, source)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mha_course.tools.i18n",
                                     description="The course's gettext catalogues (locales/<lang>/LC_MESSAGES).")
    parser.add_argument("command", choices=("update", "status", "export", "import", "book"),
                        help="export STEM: the untranslated messages as JSON; import STEM FILE: a JSON "
                             "{English: translation} into the catalogue")
    parser.add_argument("stem", nargs="?", help="a catalogue (a notebook's stem, or glossary)")
    parser.add_argument("file", nargs="?", help="the JSON file to import")
    parser.add_argument("--lang", default="zh_CN", choices=LANGS)
    args = parser.parse_args(argv)
    if args.command == "book":
        if not args.stem:
            parser.error("book needs the folder to write, e.g. build/book-src-zh_CN")
        print(f"the {args.lang} book's sources: {stage_book(args.stem, args.lang)}")
        return 0
    if args.command in ("export", "import") and not args.stem:
        parser.error(f"{args.command} needs a catalogue name, e.g. 01_qkv")
    if args.command == "export":
        import json
        print(json.dumps(untranslated(args.stem, args.lang), ensure_ascii=False, indent=1))
        return 0
    if args.command == "import":
        import json
        if not args.file:
            parser.error("import needs the JSON file: python -m mha_course.tools.i18n import 01_qkv zh.json")
        n, refused = add_translations(args.stem, json.loads(Path(args.file).read_text(encoding="utf-8")), args.lang)
        print(f"{args.stem}: {n} translations set, {len(refused)} refused (code, math, links or tags changed, "
              "or not a message of the catalogue)")
        for english in refused:
            print(f"  refused: {english[:100]!r}")
        return 0 if not refused else 1
    if args.command == "update":
        statuses = update(args.lang)
    else:
        statuses = [status(stem, read_catalogue(catalogue_path(stem, args.lang), missing_ok=True)) for stem in sources()]
        for s in statuses:
            print(_status_line(s))
    total = sum(s.messages for s in statuses)
    done = sum(s.translated for s in statuses)
    print(f"{len(statuses)} catalogues, {total} messages, {done} translated ({done / max(total, 1):.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
