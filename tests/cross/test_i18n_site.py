"""The Chinese web book (`make site BOOK_LANG=zh_CN`): staged from the catalogues, built with -W, read as HTML
and in headless Chromium.

- ``python -m mha_course.tools.i18n book`` then Sphinx with the English book's conf builds with 0 warnings;
- every page of the English book has its Chinese page, marked ``lang="zh-CN"``, its prose in Chinese;
- every page carries the language switch, and it points at the same page of the English book;
- every in-book link and its #anchor resolve (headings are Chinese, so the links are re-pointed);
- in Chromium, served on 127.0.0.1: no uncaught page error, no console error, no failed request,
  no request leaving 127.0.0.1, the math typeset, no raw ``\\(`` left.

Needs what tests/cross/test_site.py needs (the `site` extra, the npm packages of `make site`); it skips with
the reason without them, unless MHA_COURSE_REQUIRE_SITE=1 (CI's site step).
"""
from __future__ import annotations

import functools
import html.parser
import http.server
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from jupyterlab_harness import CHROMIUM, launch_chromium
from mha_course.tools import i18n

ROOT = Path(__file__).resolve().parents[2]
NPM_DIR = Path(os.environ.get("MHA_COURSE_BOOK_NPM", ROOT / "build" / "book-npm"))
REQUIRE_SITE = os.environ.get("MHA_COURSE_REQUIRE_SITE") == "1"
REQUIRE_BROWSER = REQUIRE_SITE or os.environ.get("MHA_COURSE_REQUIRE_BROWSER") == "1"
# the English book's pages (book/conf.py's include_patterns), each of which the Chinese book must have
ENGLISH_PAGES = {"book/index.html", "README.html", "docs/glossary.html", "docs/instructor.html"} | {
    f"notebooks/{p.stem}.html" for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))}
_CJK = re.compile(r"[\u4e00-\u9fff]")

pytestmark = pytest.mark.site


def _skip_or_fail(reason: str, required: bool, flag: str):
    if required:
        pytest.fail(f"{flag}=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def zh_site(tmp_path_factory) -> Path:
    """The Chinese book built from this checkout's catalogues, warnings as errors; the folder of its HTML."""
    for module in ("sphinx", "myst_nb", "sphinx_book_theme"):
        try:
            __import__(module)
        except ImportError:
            _skip_or_fail(f"{module} is not installed (pip install -e '.[site]')", REQUIRE_SITE, "MHA_COURSE_REQUIRE_SITE")
    if not (NPM_DIR / "node_modules" / "mathjax").is_dir():
        _skip_or_fail(f"the book's npm packages are not in {NPM_DIR} (make site installs them)", REQUIRE_SITE,
                      "MHA_COURSE_REQUIRE_SITE")
    out = tmp_path_factory.mktemp("zh_site")
    src = i18n.stage_book(out / "src", "zh_CN")
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q", "-c", str(ROOT / "book"),
           "-d", str(out / "doctrees"), str(src), str(out / "site" / "zh_CN")]
    env = dict(os.environ, MHA_COURSE_BOOK_NPM=str(NPM_DIR), MHA_COURSE_BOOK_BOTH="1", MHA_COURSE_BOOK_LANG="zh_CN")
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    warnings = [line for line in run.stderr.splitlines() if "WARNING" in line or "ERROR" in line]
    assert run.returncode == 0 and not warnings, f"the Chinese book did not build cleanly:\n{run.stderr[-4000:]}"
    return out / "site" / "zh_CN"


class _Page(html.parser.HTMLParser):
    """A page's ids, links (href, hreflang), <html lang> and text outside scripts and styles."""

    def __init__(self):
        super().__init__()
        self.ids, self.links, self.lang, self.text, self._skip = set(), [], None, [], 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "html":
            self.lang = attrs.get("lang")
        if tag == "a" and attrs.get("href"):
            self.links.append((attrs["href"], attrs.get("hreflang")))
        self._skip += tag in ("script", "style")

    def handle_endtag(self, tag):
        self._skip -= tag in ("script", "style") and self._skip > 0

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


@functools.lru_cache(maxsize=None)
def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def _pages(site: Path) -> list[str]:
    """The book's pages, relative (the root's redirect to book/index.html left out)."""
    return sorted(str(p.relative_to(site)) for p in site.rglob("*.html")
                  if "_static" not in p.parts and p != site / "index.html")


def test_every_english_page_has_a_chinese_page_in_chinese(zh_site):
    pages = set(_pages(zh_site))
    assert ENGLISH_PAGES <= pages, sorted(ENGLISH_PAGES - pages)
    for name in sorted(ENGLISH_PAGES - {"README.html", "docs/instructor.html"}):  # those two are not translated
        page = _parse(zh_site / name)
        assert page.lang == "zh-CN", (name, page.lang)
        text = "".join(page.text)
        assert len(_CJK.findall(text)) > 0.2 * len(re.findall(r"[A-Za-z]", text)), f"{name} reads mostly English"


def test_every_page_switches_to_the_same_page_in_english(zh_site):
    missing = []
    for name in _pages(zh_site):
        switch = [href for href, lang in _parse(zh_site / name).links if lang == "en"]
        english = os.path.normpath(os.path.join(os.path.dirname(name), switch[0])) if switch else None
        if len(switch) != 1 or english != os.path.join("..", name):
            missing.append((name, switch))
    assert not missing, missing[:10]


def test_every_link_and_anchor_of_the_chinese_book_resolves(zh_site):
    broken = []
    for name in _pages(zh_site):
        for href, lang in _parse(zh_site / name).links:
            url = urlsplit(href)
            if url.scheme or href.startswith("mailto:") or lang == "en":
                continue
            target = (zh_site / name).parent / unquote(url.path) if url.path else zh_site / name
            target = target.resolve() / "index.html" if target.is_dir() else target.resolve()
            if not target.exists():
                broken.append(f"{name} -> {href}: no such file")
            elif url.fragment and target.suffix == ".html" and unquote(url.fragment) not in _parse(target).ids:
                broken.append(f"{name} -> {href}: no id {url.fragment!r}")
    assert not broken, "\n".join(broken[:40])


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.mark.browser
def test_the_chinese_pages_in_chromium(zh_site):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _skip_or_fail("playwright is not installed (pip install -e '.[browser]')", REQUIRE_BROWSER,
                      "MHA_COURSE_REQUIRE_BROWSER")
    if not Path(CHROMIUM).exists():
        _skip_or_fail(f"chromium is not installed at {CHROMIUM}", REQUIRE_BROWSER, "MHA_COURSE_REQUIRE_BROWSER")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(zh_site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    served = f"http://127.0.0.1:{server.server_address[1]}/"
    errors, failed, outside, seen = [], [], [], {}
    try:
        with sync_playwright() as p:
            chromium = launch_chromium(p)
            try:
                page = chromium.new_page(viewport={"width": 1280, "height": 800})
                page.on("request", lambda r: r.url.startswith((served, "data:", "blob:" + served)) or outside.append(r.url))
                page.on("response", lambda r: r.status >= 400 and failed.append(f"{r.status} {r.url}"))
                page.on("pageerror", lambda err: errors.append(f"{page.url}: uncaught {err}"))
                page.on("console", lambda m: m.type == "error" and errors.append(f"{page.url}: console {m.text}"))
                for name in _pages(zh_site):
                    page.goto(served + name, wait_until="load")
                    page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                                           timeout=30_000)
                    page.evaluate("() => MathJax.startup.promise")
                    whole = page.locator("body").inner_text()
                    seen[name] = (page.locator("mjx-container").count(), len(re.findall(r"\\\(|\\\[", whole)))
            finally:
                chromium.close()
    finally:
        server.shutdown()
        server.server_close()
    assert not errors, "\n".join(errors[:20])
    assert not failed and not outside, (failed[:10], outside[:10])
    assert all(raw == 0 for _, raw in seen.values()), seen
    assert all(seen[f"notebooks/{Path(n).stem}.html"][0] > 0 for n in ENGLISH_PAGES if n.startswith("notebooks/")), seen


def _language_switch():
    """book/language_switch.py, loaded from its file (the book's folder is no package)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("language_switch", ROOT / "book" / "language_switch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_switch_of_every_english_page_leads_to_its_chinese_page_and_back(monkeypatch):
    switch = _language_switch()

    class App:
        class config:
            course_language = "en"

    for name in sorted(ENGLISH_PAGES):
        page = name.removesuffix(".html")
        there = os.path.normpath(os.path.join(os.path.dirname(name), switch.switch_href(page, "en")))
        assert there == os.path.join("zh_CN", name)
        back = os.path.normpath(os.path.join(os.path.dirname(there), switch.switch_href(page, "zh_CN")))
        assert back == name
        context = {}
        monkeypatch.setenv("MHA_COURSE_BOOK_BOTH", "1")
        switch.add_switch(App, page, "page.html", context, None)
        assert f'href="{switch.switch_href(page, "en")}" hreflang="zh-CN"' in context["theme_announcement"]
        monkeypatch.delenv("MHA_COURSE_BOOK_BOTH")
        context = {}
        switch.add_switch(App, page, "page.html", context, None)  # the English book alone: no switch to nowhere
        assert context == {}
    with pytest.raises(ValueError, match="course_language='fr'"):
        switch.switch_href("book/index", "fr")
