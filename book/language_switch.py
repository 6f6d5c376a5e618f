"""Sphinx extension: a language switch on every page of the web book (English <-> 中文).

The English book is built into build/site/, the Chinese one (``make site BOOK_LANG=zh_CN``) into
build/site/zh_CN/ from translated copies of the same pages (``python -m mha_course.tools.i18n book``).
Every page carries one link, in the theme's announcement bar, to the same page in the other
language: from ``notebooks/01_qkv.html`` to ``zh_CN/notebooks/01_qkv.html`` and back.
``course_language`` ("en" or "zh_CN") says which book this build is (MHA_COURSE_BOOK_LANG).
"""
from __future__ import annotations

import os

OTHER = {"en": ("zh_CN", "中文"), "zh_CN": ("en", "English")}


def switch_href(pagename: str, lang: str) -> str:
    """The relative link from ``pagename`` (this book, ``lang``) to the same page in the other book.

    >>> switch_href("notebooks/01_qkv", "en")
    '../zh_CN/notebooks/01_qkv.html'
    >>> switch_href("notebooks/01_qkv", "zh_CN")
    '../../notebooks/01_qkv.html'
    """
    if lang not in OTHER:
        raise ValueError(f"course_language={lang!r}; use one of {sorted(OTHER)}")
    up = "../" * pagename.count("/")
    return f"{up}zh_CN/{pagename}.html" if lang == "en" else f"{up}../{pagename}.html"


def add_switch(app, pagename, templatename, context, doctree) -> None:
    if os.environ.get("MHA_COURSE_BOOK_BOTH") != "1":  # only when both books are built (make site BOOK_LANG=zh_CN)
        return
    lang = app.config.course_language
    other, label = OTHER[lang]
    note = "本课程也有中文版" if lang == "en" else "This course in English"
    tag = other.replace("_", "-")  # BCP 47 (zh-CN), what a page's lang attribute must hold (axe-core: valid-lang)
    context["theme_announcement"] = (f'<a href="{switch_href(pagename, lang)}" hreflang="{tag}" '
                                     f'lang="{tag}">{label}</a> · {note}')


def setup(app):
    app.add_config_value("course_language", os.environ.get("MHA_COURSE_BOOK_LANG", "en"), "html")
    app.connect("html-page-context", add_switch)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
