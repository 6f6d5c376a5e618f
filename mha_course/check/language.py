"""The checkers' fixed phrases in the learner's language: gettext, from the course's catalogues.

A verdict is built from fixed phrases ("not finished yet", "all {n} cases match", the summary
line) around the exercise's own symbols and values. ``say(template, **values)`` looks the
template up in ``locales/<lang>/LC_MESSAGES/checks.po`` (the same Babel catalogues as the
notebooks' prose, ``mha_course.tools.i18n``) and fills it in; symbols, code and numbers stay as
they are. The language is the course folder's (``mha-course student --lang zh_CN`` writes
``.mha-course/lang``), or ``MHA_COURSE_LANG``; without either, or for a phrase nobody has
translated, the English template is used. It never raises on a missing or broken catalogue.

    >>> say("all {n} cases match", n=4)
    'all 4 cases match'
"""
from __future__ import annotations

import os
from pathlib import Path

from . import progress

__all__ = ["ENV", "LANGUAGE_FILE", "course_language", "say", "catalogue_file"]

ENV = "MHA_COURSE_LANG"
LANGUAGE_FILE = "lang"            # in <course folder>/.mha-course/
KNOWN = ("zh_CN",)
_TABLES: dict = {}                # lang -> {template: translation}, read once per process


def course_language(cwd=None) -> str | None:
    """The language this kernel's course folder was copied in ("zh_CN"), MHA_COURSE_LANG, or None (English)."""
    lang = os.environ.get(ENV)
    if not lang:
        try:
            folder = progress.course_folder(cwd)
            lang = (folder / progress.MARKER / LANGUAGE_FILE).read_text(encoding="utf-8").strip() if folder else None
        except (OSError, UnicodeDecodeError, ValueError):
            lang = None
    return lang if lang in KNOWN else None


def catalogue_file(lang: str) -> Path:
    """locales/<lang>/LC_MESSAGES/checks.po of this course (a clone's, or the copy a wheel ships)."""
    package = Path(__file__).resolve().parent.parent
    for base in (package.parent, package / "course"):
        path = base / "locales" / lang / "LC_MESSAGES" / "checks.po"
        if path.exists():
            return path
    return package.parent / "locales" / lang / "LC_MESSAGES" / "checks.po"


def _table(lang: str) -> dict:
    if lang not in _TABLES:
        table = {}
        try:
            from babel.messages.pofile import read_po
            with catalogue_file(lang).open("rb") as f:
                table = {m.id: m.string for m in read_po(f) if m.id and m.string and not m.fuzzy}
        except Exception:  # noqa: BLE001 - a verdict must never fail for want of a translation
            table = {}
        _TABLES[lang] = table
    return _TABLES[lang]


def say(template: str, lang: str | None = None, **values) -> str:
    """A fixed phrase of a verdict, in the course folder's language, with ``values`` filled in.

    ``template`` is the English, with ``{name}`` fields; a translation must keep the same fields.
    """
    lang = course_language() if lang is None else (lang if lang in KNOWN else None)
    text = _table(lang).get(template, template) if lang else template
    try:
        return text.format(**values)
    except (KeyError, IndexError, ValueError):
        return template.format(**values)
