"""What a student copy writes where, and what is there now: the plan of ``mha-course student``.

``plan_copies(notebooks, outdir)`` -> [(OUTDIR/notebooks/<name>, the copy's text)] and {target: source}
for the files the notebooks' markdown links (the glossary, figures; never another notebook, which
would carry its solutions). ``existing_kind(target, text)`` says what is at a target: "new",
"same", "learner" (anything Jupyter can open) or "broken" (an interrupted write). The course
folder's record, OUTDIR/.mha-course/copies.json (``read_manifest``, ``record_copies``), holds the
sha256 of each copy as written: ``--update`` reads it to tell untouched copies from edited ones.
Bad sources, OUTDIRs and targets raise ``StudentInputError`` (one line naming the path and the fix).

>>> sha256(b"")[:12]
'e3b0c44298fc'
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from ..check.language import LANGUAGE_FILE
from ..check.progress import MARKER
from . import files
from .execute import NotebookRunError, read_notebook
from .student_stubs import StudentCopyError, student_notebook

__all__ = ["StudentInputError", "MANIFEST", "outdir_path", "plan_copies", "linked_file", "existing_kind", "error_line",
           "sha256", "read_manifest", "record_copies", "folder_language", "mark_language"]

MANIFEST = "copies.json"      # in OUTDIR/.mha-course/: {relative path: sha256 of the copy as written}
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|src=[\"']([^\"']+)[\"']")


class StudentInputError(StudentCopyError):
    """A source, OUTDIR or target is unusable: one line naming the path and what to do (exit code 2)."""


def _linked_files(nb, nb_dir: Path) -> list:
    """Relative files that the markdown cells link or show (e.g. ../docs/glossary.md), no notebooks."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for match in _LINK.finditer(cell.source):
            target = (match[1] or match[2]).split("#")[0]
            web = re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("/")
            # other notebooks are never copied as they are: they would carry their solutions
            if target and not web and not target.endswith(".ipynb") and (nb_dir / target).is_file():
                found.append(target)
    return sorted(set(found))


def _student_text(path: Path, lang=None) -> tuple:
    """(the student copy of the notebook at ``path`` as text, the source notebook); bad source: one line.

    With ``lang`` (e.g. "zh_CN") the copy's markdown comes from the catalogue of that language
    (``tools.i18n``); its code cells are the English ones, unchanged."""
    import nbformat

    from . import i18n

    try:
        nb = read_notebook(path, "source notebook")
        copy = student_notebook(nb)
        if lang is not None:
            copy = i18n.translated(copy, path.stem, lang)
        return nbformat.writes(copy) + "\n", nb
    except NotebookRunError as err:
        raise StudentInputError(str(err)) from None
    except StudentCopyError as err:
        raise StudentInputError(f"{path}: {err}; fix the solution markers in that cell") from None


def outdir_path(outdir, example: str = "~/mha-student") -> Path:
    """OUTDIR as a Path (``~`` expanded); an empty or unusable one: StudentInputError naming an ``example``."""
    try:
        return files.check_path_arg(outdir, "OUTDIR", example)
    except files.PathError as err:
        raise StudentInputError(str(err)) from None


def plan_copies(notebooks, outdir: Path, lang=None):
    """[(target, content: str)] for the notebooks, and {target: source Path} for the files they link.

    OUTDIR and every folder above it must be folders, each notebook is named once, and no target is
    one of the sources (the answer keys): else StudentInputError, before anything is written.
    """
    _check_outdir(outdir)
    plan, assets, seen = [], {}, {}
    for path in map(Path, notebooks):
        target = outdir / "notebooks" / path.name
        if target in seen:
            what = "twice" if _same_file(seen[target], path) else f"and {seen[target]} both"
            raise StudentInputError(f"{path} is named {what} for {target}; name each notebook once, "
                                    "and never two with the same file name")
        seen[target] = path
        text, nb = _student_text(path, lang)
        plan.append((target, text))
        for rel in _linked_files(nb, path.parent):
            asset = Path(os.path.normpath(outdir / "notebooks" / rel))
            if outdir.resolve() in asset.resolve().parents:
                assets[asset] = (path.parent / rel).resolve()
    _refuse_sources_as_targets(plan, notebooks)
    return plan, assets


def linked_file(source: Path, lang=None) -> bytes:
    """The bytes a copy gets for the linked file ``source``: with ``lang``, a file that has its own
    catalogue (the glossary) translated from it as the notebooks are (``i18n.translate_markdown``)."""
    from . import i18n

    data = source.read_bytes()
    if lang is None or source.name != "glossary.md":  # the one linked file with a catalogue of its own
        return data
    table = i18n.translations(i18n.read_catalogue(i18n.catalogue_path(i18n.DOMAIN_GLOSSARY, lang), missing_ok=True))
    return i18n.translate_markdown(data.decode("utf-8"), table).encode("utf-8")


def _same_file(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _refuse_sources_as_targets(plan, notebooks) -> None:
    sources = {os.path.realpath(p) for p in notebooks}
    for target, _ in plan:
        if os.path.realpath(target) in sources:
            raise StudentInputError(f"{target} is one of the source notebooks (the answer keys); "
                                    "choose an OUTDIR outside the course, e.g. ~/mha-student")


def _check_outdir(outdir: Path) -> None:
    """OUTDIR, and every folder above it that exists, must be a folder."""
    for folder in (outdir, outdir / "notebooks", *outdir.parents):
        if folder.exists() and not folder.is_dir():
            raise StudentInputError(f"{folder} is a file, not a folder; choose another OUTDIR")


def existing_kind(target: Path, text: str):
    """What is at ``target``: 'new' (nothing), 'same' (this very copy), 'learner', or 'broken' (no notebook).

    Learner work is anything Jupyter can open (nbformat 3 or 4, as nbformat reads it); an
    empty, truncated or other file is 'broken' (an interrupted write): backed up and replaced.
    """
    import nbformat

    if target.is_dir():
        raise StudentInputError(f"{target} is a folder where the notebook copy goes; move it away "
                                "or choose another OUTDIR")
    if not target.exists():
        return "new"
    data = target.read_bytes()
    if data == text.encode("utf-8"):
        return "same"
    try:
        decoded = data.decode("utf-8")
    except UnicodeDecodeError:
        raise StudentInputError(f"{target} is not UTF-8 text, so not a notebook JupyterLab can open; "
                                "move it away (or rename it) and run again") from None
    try:
        nb = nbformat.reads(decoded, as_version=4)
    except Exception:  # NotJSONError, a JSON without "nbformat", an unknown version, ...
        return "broken"
    return "learner" if isinstance(nb.get("cells"), list) else "broken"


def error_line(err: OSError, path, after: str) -> str:
    """The one line an OSError while writing the copies becomes: what failed at ``path``, the fix, then ``after``
    (what state the files are in)."""
    return f"{files.os_error_line(err, path, 'choose a folder you can write to, e.g. ~/mha-student')}. {after}"


def sha256(data: bytes) -> str:
    """The hex sha256 of ``data``: how copies.json tells a copy as written from one the learner edited."""
    import hashlib

    return hashlib.sha256(data).hexdigest()


def read_manifest(outdir) -> dict:
    """{path relative to OUTDIR: sha256 of the copy this command wrote there}; {} if none (or unreadable)."""
    import json

    try:
        data = json.loads((Path(outdir) / MARKER / MANIFEST).read_text(encoding="utf-8"))
        return {k: v for k, v in data.get("files", {}).items() if isinstance(k, str) and isinstance(v, str)}
    except (OSError, ValueError, AttributeError):
        return {}


def record_copies(outdir: Path, hashes: dict) -> None:
    """Make OUTDIR/.mha-course/ (the course folder's mark: checkers record progress there) and note the copies."""
    import json

    folder = outdir / MARKER
    folder.mkdir(exist_ok=True)
    known = read_manifest(outdir)
    known.update({str(Path(t).relative_to(outdir)): h for t, h in hashes.items()})
    files.atomic_write(folder / MANIFEST, json.dumps({"files": dict(sorted(known.items()))}, indent=1).encode())


def folder_language(outdir) -> str | None:
    """The language a course folder was copied in (OUTDIR/.mha-course/lang, e.g. "zh_CN"); None: English."""
    from . import i18n

    try:
        lang = (Path(outdir) / MARKER / LANGUAGE_FILE).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return lang if lang in i18n.LANGS else None


def mark_language(outdir: Path, lang) -> None:
    """Record the course folder's language for its checkers and a later ``--update`` (nothing for English)."""
    from . import i18n

    if lang is None:
        return
    i18n.check_lang(lang)
    files.atomic_write(Path(outdir) / MARKER / LANGUAGE_FILE, f"{lang}\n".encode())
