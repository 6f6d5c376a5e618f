"""The web book (`make site`): built here with -W, then read as HTML and in headless Chromium.

- both books of `make site BOOK_LANG=zh_CN` are built (the English one in build/site/, the Chinese one in
  its zh_CN/), and everything below holds for the pages of both;
- every notebooks/NN_*.ipynb is a page (globbed: a new lesson must appear without an edit),
  and so are the landing page for learners (book/index.md), the README, the glossary and the instructor guide;
- every in-book link resolves to a page, and its #anchor to an id on that page;
- no page asks for anything outside the book (no http(s) script, stylesheet or image);
- in Chromium, served on 127.0.0.1, on every page: no uncaught page error and no console error,
  no request that leaves 127.0.0.1 or fails; no raw ``\\(`` in the page (navigation included) nor in
  its title; axe-core finds no serious or critical accessibility violation; every figure has alt
  text from its cell; every page with saved sliders shows slider handles (widgets drawn from their
  saved state, no "Error displaying widget") and one "run this notebook" line per saved widget.
- that check itself (:class:`PageCheck`) is tried on a small page with each of those faults, and on a
  clean one: it names every fault of the first and nothing of the second.

The book needs the `site` extra (sphinx, myst-nb, sphinx-book-theme) and the npm packages that
`make site` installs into build/book-npm/. Without them the tests skip with the reason, unless
MHA_COURSE_REQUIRE_SITE=1 (CI's site step); without chromium/playwright the browser test skips
unless MHA_COURSE_REQUIRE_BROWSER=1 or MHA_COURSE_REQUIRE_SITE=1.

    make site && python -m pytest tests/cross/test_site.py -p no:xdist -q
"""
from __future__ import annotations

import base64
import contextlib
import functools
import html.parser
import http.server
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from jupyterlab_harness import CHROMIUM, launch_chromium

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
NPM_DIR = Path(os.environ.get("MHA_COURSE_BOOK_NPM", ROOT / "build" / "book-npm"))
REQUIRE_SITE = os.environ.get("MHA_COURSE_REQUIRE_SITE") == "1"
REQUIRE_BROWSER = REQUIRE_SITE or os.environ.get("MHA_COURSE_REQUIRE_BROWSER") == "1"
SLIDER_MODELS = {"IntSliderModel", "FloatSliderModel", "SelectionSliderModel", "IntRangeSliderModel",
                 "FloatRangeSliderModel", "FloatLogSliderModel"}

pytestmark = pytest.mark.site


def _skip_or_fail(reason: str, required: bool, flag: str):
    if required:
        pytest.fail(f"{flag}=1 but {reason}")
    pytest.skip(reason)


def _site_missing() -> str | None:
    for module, extra in (("sphinx", "site"), ("myst_nb", "site"), ("sphinx_book_theme", "site")):
        try:
            __import__(module)
        except ImportError:
            return f"{module} is not installed (pip install -e '.[{extra}]', or make site)"
    if not (NPM_DIR / "node_modules" / "mathjax").is_dir():
        return f"the book's npm packages are not in {NPM_DIR} (make site installs them)"
    return None


def _sphinx(source: Path, out: Path, doctrees: Path, **env) -> None:
    """One Sphinx build of the book with warnings as errors (the command of `make site`)."""
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q", "-c", str(ROOT / "book"),
           "-d", str(doctrees), str(source), str(out)]
    run = subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, MHA_COURSE_BOOK_NPM=str(NPM_DIR), **env),
                         capture_output=True, text=True, timeout=900)
    warnings = [line for line in run.stderr.splitlines() if "WARNING" in line or "ERROR" in line]
    assert run.returncode == 0 and not warnings, f"the book did not build cleanly:\n{run.stderr[-4000:]}"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """Both books as `make site BOOK_LANG=zh_CN` builds them, warnings as errors: the English one (with the
    language switch) and, in its zh_CN/, the Chinese one from `python -m mha_course.tools.i18n book`.
    Returns the folder of the HTML; every test below reads the pages of both."""
    reason = _site_missing()
    if reason:
        _skip_or_fail(reason, REQUIRE_SITE, "MHA_COURSE_REQUIRE_SITE")
    from mha_course.tools.i18n import stage_book
    out = tmp_path_factory.mktemp("site")
    _sphinx(ROOT, out / "html", out / "doctrees", MHA_COURSE_BOOK_BOTH="1")
    source = stage_book(out / "src-zh_CN", "zh_CN")
    _sphinx(source, out / "html" / "zh_CN", out / "doctrees-zh_CN", MHA_COURSE_BOOK_BOTH="1",
            MHA_COURSE_BOOK_LANG="zh_CN")
    return out / "html"


def _slider_models(nb_path: Path) -> int:
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    state = nb["metadata"].get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    return sum(1 for model in state.values() if model.get("model_name") in SLIDER_MODELS)


class _Page(html.parser.HTMLParser):
    """Collects the ids of a page, its links, and the URLs it loads."""

    def __init__(self):
        super().__init__()
        self.ids, self.links, self.loads = set(), [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        for key in ("src", "data"):
            if attrs.get(key):
                self.loads.append(attrs[key])
        if tag == "link" and attrs.get("href"):
            self.loads.append(attrs["href"])


@functools.lru_cache(maxsize=None)
def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def _pages(site: Path) -> list:
    return sorted(p for p in site.rglob("*.html") if "_static" not in p.parts)


def test_every_notebook_is_a_page(site):
    assert len(NOTEBOOKS) >= 13, [p.name for p in NOTEBOOKS]
    landing = (site / "book" / "index.html").read_text(encoding="utf-8")
    for nb in NOTEBOOKS:
        page = site / "notebooks" / (nb.stem + ".html")
        assert page.exists(), f"{nb.name} is not in the book"
        assert f'href="../notebooks/{nb.stem}.html"' in landing, f"{nb.name} is missing from the landing page"
        assert (site / "notebooks" / nb.name).read_bytes() == nb.read_bytes(), f"{nb.name}: no download beside its page"
        assert (site / "zh_CN" / "notebooks" / (nb.stem + ".html")).exists(), f"{nb.name} is not in the Chinese book"
        assert (site / "zh_CN" / "notebooks" / nb.name).exists(), f"{nb.name}: no Chinese download beside its page"
    for doc in ("README.html", "docs/glossary.html", "docs/instructor.html", "index.html", "book/index.html"):
        assert (site / doc).exists(), doc
    assert "book/index.html" in (site / "index.html").read_text(encoding="utf-8"), "index.html opens the landing page"


def _widget_cells(nb_path: Path) -> int:
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    return sum(1 for c in nb["cells"] if c["cell_type"] == "code" and any(
        "application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in c.get("outputs", [])))


@pytest.mark.parametrize("book", ["", "zh_CN/"])
def test_every_saved_widget_says_it_moves_in_jupyterlab_with_a_link_to_run_it(site, book):
    found = 0
    for nb in NOTEBOOKS:
        text = (site / book / "notebooks" / (nb.stem + ".html")).read_text(encoding="utf-8")
        lines = re.findall(r'<p class="mha-static-widget">(.*?)</p>', text)
        assert len(lines) == _widget_cells(nb), (nb.name, len(lines), _widget_cells(nb))
        for line in lines:
            assert "only in JupyterLab" in line and f'href="{nb.name}" download' in line, line
        found += len(lines)
    assert found >= 14, found


def test_a_hub_url_makes_the_link_open_the_notebook_on_the_hub(monkeypatch):
    course_book = _course_book()
    monkeypatch.setenv(course_book.HUB_VAR, "https://hub.example.org/")
    href, text = course_book.run_link("notebooks/01_qkv")
    assert href == "https://hub.example.org/hub/user-redirect/lab/tree/notebooks/01_qkv.ipynb"
    assert text.startswith("run this notebook")
    monkeypatch.delenv(course_book.HUB_VAR)
    assert course_book.run_link("notebooks/01_qkv") == ("01_qkv.ipynb", "run this notebook (download the .ipynb)")


def test_a_notebook_that_is_not_json_is_named_in_one_line(tmp_path):
    course_book = _course_book()
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "00_fine.ipynb").write_text("{}")
    (tmp_path / "notebooks" / "01_cut.ipynb").write_text('{"cells": [')
    with pytest.raises(Exception) as err:
        course_book.check_notebooks(tmp_path)
    message = str(err.value)
    assert type(err.value).__name__ == "ConfigError" and "\n" not in message
    assert message.startswith("notebooks/01_cut.ipynb is not a notebook: it is not JSON (line 1")
    assert "git checkout -- notebooks/01_cut.ipynb" in message


def test_every_figure_gets_alt_text_from_its_cell(site):
    missing = []
    for nb, book in [(nb, book) for nb in NOTEBOOKS for book in ("", "zh_CN/")]:
        text = (site / book / "notebooks" / (nb.stem + ".html")).read_text(encoding="utf-8")
        for tag in re.findall(r"<img [^>]*>", text):
            alt = re.search(r'alt="([^"]*)"', tag)
            if not alt or not alt.group(1).strip() or alt.group(1).endswith((".png", ".svg", ".jpg")):
                missing.append(f"{book}{nb.name}: {tag[:120]}")
    assert not missing, "\n".join(missing[:20])
    text = (site / "notebooks" / "01_qkv.html").read_text(encoding="utf-8")
    assert 'alt="One token, four vectors: &quot;sat&quot; as an embedding and in its three roles' in text


def _course_book():
    pytest.importorskip("sphinx", reason="sphinx is not installed (pip install -e '.[site]')")
    sys.path.insert(0, str(ROOT / "book"))
    try:
        import course_book
    finally:
        sys.path.remove(str(ROOT / "book"))
    return course_book


def test_every_link_and_anchor_resolves(site):
    broken = []
    for page in _pages(site):
        for href in _parse(page).links:
            url = urlsplit(href)
            if url.scheme or href.startswith("mailto:"):
                continue
            target = (page.parent / unquote(url.path)).resolve() if url.path else page
            if target.is_dir():
                target = target / "index.html"
            where = f"{page.relative_to(site)} -> {href}"
            if not target.exists():
                broken.append(f"{where}: no such file")
            elif url.fragment and target.suffix == ".html" and unquote(url.fragment) not in _parse(target).ids:
                broken.append(f"{where}: no id {url.fragment!r} on {target.relative_to(site)}")
    assert not broken, "\n".join(broken[:40])


def test_jupyterlab_style_heading_links_point_at_their_sections(site):
    """Notebook 11 links sections of other notebooks the JupyterLab way (`#1.-The-chain-rule,...`)."""
    text = (site / "notebooks" / "11_misconceptions_and_interview.html").read_text(encoding="utf-8")
    anchors = re.findall(r'href="(\d\d_[a-z_]+\.html#[^"]+)"', text)
    assert len(anchors) >= 10, anchors
    assert not [a for a in anchors if "." in a.split("#", 1)[1]], "a JupyterLab-style anchor was left as it is"


def test_pages_load_nothing_from_outside(site):
    outside = [f"{page.relative_to(site)}: {url}" for page in _pages(site) for url in _parse(page).loads
               if urlsplit(url).scheme in ("http", "https") or url.startswith("//")]
    assert not outside, "\n".join(outside[:20])
    for vendored in ("mathjax/es5/tex-chtml.js", "requirejs/require.js", "html-manager/dist/embed-amd.js"):
        assert (site / "_static" / "vendor" / vendored).exists(), vendored


def test_loose_key_matches_jupyterlab_ids_to_headings():
    pytest.importorskip("sphinx", reason="sphinx is not installed (pip install -e '.[site]')")
    sys.path.insert(0, str(ROOT / "book"))
    try:
        from course_book import loose_key, slug_for
    finally:
        sys.path.remove(str(ROOT / "book"))
    assert loose_key("1.-The-chain-rule,-read-backwards") == loose_key("1. The chain rule, read backwards")
    assert loose_key("3.-Why-divide-by-$\\sqrt{d_k}$?") == loose_key("3. Why divide by \\sqrt{d_k}?")
    assert loose_key("#4.-%22Attention-is-fast%22") == loose_key('4. "Attention is fast"')
    slugs = {"a": (1, "x", "1. Same"), "b": (2, "y", "1 · Same")}
    assert slug_for("1.-Same", slugs) is None, "two headings match: the link must stay broken (and fail the build)"
    assert slug_for("a", slugs) == "a"


def test_a_heading_anchor_becomes_an_id_of_its_section_and_leaves_the_title():
    """`## 标题 <a id="English-id"></a>` (how the Chinese pages keep the English ids): the section gets the id,
    the title (the page's table of contents) only its text; a title without such an anchor is left alone."""
    course_book = _course_book()
    from docutils import nodes
    from docutils.frontend import get_default_settings
    from docutils.parsers.rst import Parser
    from docutils.utils import new_document
    doc = new_document("page", get_default_settings(Parser))
    kept = nodes.section(ids=["plain"])
    kept += nodes.title("", "", nodes.Text("Plain "), nodes.literal("", "code"))
    moved = nodes.section(ids=["zh-slug"])
    moved += nodes.title("", "", nodes.Text("在这里阅读 "),
                         nodes.raw("", '<a id="4.-&quot;A-legend&quot;"></a>', format="html"))
    split = nodes.section(ids=["zh-two"])  # what MyST makes of it: the opening and the closing tag apart
    split += nodes.title("", "", nodes.Text("术语表 "), nodes.raw("", '<a id="The-glossary">', format="html"),
                         nodes.raw("", "</a>", format="html"))
    doc += [kept, moved, split]
    course_book.TitleAnchors(doc).apply()
    assert moved["ids"] == ["zh-slug", '4.-"A-legend"'] and moved[0].astext() == "在这里阅读"
    assert split["ids"] == ["zh-two", "The-glossary"] and split[0].astext() == "术语表"
    assert not list(moved[0].findall(nodes.raw)) and not list(split[0].findall(nodes.raw))
    assert kept["ids"] == ["plain"] and kept[0].astext() == "Plain code"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def _serve(folder: Path):
    """``folder`` on 127.0.0.1 (a free port) while the block runs; yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(scope="module")
def served(site):
    """The book on 127.0.0.1, stopped when the module's tests end."""
    with _serve(site) as base:
        yield base


def _every_page(site: Path) -> list:
    """Every page of both books but their index.html, which only sends a browser on to book/index.html."""
    return [str(p.relative_to(site)) for p in _pages(site) if p.name != "index.html" or not (p.parent / "book").is_dir()]


def _browser_tools():
    """(Axe, sync_playwright), or a skip (a failure when the browser is required) naming what is missing."""
    try:
        from axe_playwright_python.sync_playwright import Axe
        from playwright.sync_api import sync_playwright
    except ImportError:
        _skip_or_fail("playwright or axe-playwright-python is not installed (pip install -e '.[browser]')",
                      REQUIRE_BROWSER, "MHA_COURSE_REQUIRE_BROWSER")
    if not Path(CHROMIUM).exists():
        _skip_or_fail(f"chromium is not installed at {CHROMIUM} (apt-get install chromium)", REQUIRE_BROWSER,
                      "MHA_COURSE_REQUIRE_BROWSER")
    return Axe, sync_playwright


class PageCheck:
    """What the book test looks for on every page, collected as a learner's Chromium loads each one.

    ``errors``: uncaught page errors and console errors; ``outside``: requests that leave ``base``;
    ``failed``: responses >= 400; ``seen[name]``: per page, its slider handles, typeset math, raw TeX in
    the page and in its title, "Error displaying widget", images without alt text and axe-core's serious
    or critical violations. :meth:`problems` turns them into the test's failures.
    """

    def __init__(self, page, axe, base: str, sliders=None, mathjax: bool = True):
        self.page, self.axe, self.base, self.sliders, self.mathjax = page, axe, base, sliders or {}, mathjax
        self.outside, self.failed, self.errors, self.seen = [], [], [], {}
        page.on("request", lambda r: r.url.startswith((base, "data:", "blob:" + base)) or self.outside.append(r.url))
        page.on("response", lambda r: r.status >= 400 and self.failed.append(f"{r.status} {r.url}"))
        page.on("pageerror", lambda err: self.errors.append(f"{page.url}: uncaught {err}"))
        page.on("console", lambda msg: msg.type == "error" and self.errors.append(f"{page.url}: console {msg.text}"))

    def visit(self, name: str) -> dict:
        page = self.page
        page.goto(self.base + name, wait_until="load")
        if self.sliders.get(name):
            page.locator(".noUi-handle").first.wait_for(timeout=30_000)
        if self.mathjax:
            page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                                   timeout=30_000)
            page.evaluate("() => MathJax.startup.promise")
        page.wait_for_timeout(300)  # the widget labels typeset after the page's math
        whole = page.locator("body").inner_text()
        # axe-core re-fetches stylesheets itself (and gets @import paths wrong): no preload
        violations = self.axe.run(page, options={"resultTypes": ["violations"], "preload": False})
        self.seen[name] = got = dict(
            handles=page.locator(".noUi-handle").count(),
            math=page.locator("mjx-container").count(),
            raw_math=len(re.findall(r"\\\(|\\\[", whole)),
            raw_title=len(re.findall(r"\\\(|\\\[|\\[a-z]+\{|\$", page.title())),
            widget_errors=page.locator("text=Error displaying widget").count(),
            no_alt=page.locator("img:not([alt]), img[alt='']").count(),
            serious=[(v["id"], v["impact"], len(v["nodes"])) for v in violations.response["violations"]
                     if v["impact"] in ("serious", "critical")],
        )
        return got

    def problems(self) -> list:
        """Every failure, one line each: what the book test asserts is empty."""
        found = list(self.errors[:20])
        found += [f"request left 127.0.0.1: {url}" for url in self.outside[:10]]
        found += [f"request failed: {line}" for line in self.failed[:10]]
        for name, got in self.seen.items():
            for key in ("widget_errors", "raw_math", "raw_title", "no_alt"):
                if got[key]:
                    found.append(f"{name}: {key} = {got[key]}")
            if got["serious"]:
                found.append(f"{name}: axe-core, serious or critical: {got['serious']}")
            if self.sliders.get(name) and not got["handles"]:
                found.append(f"{name}: saved sliders but no slider handle drawn")
            if self.mathjax and name.removeprefix("zh_CN/").startswith("notebooks/") and not got["math"]:
                found.append(f"{name}: no typeset math")
        return found


@pytest.mark.browser
def test_pages_in_chromium_offline(site, served):
    Axe, sync_playwright = _browser_tools()
    pages = _every_page(site)
    assert {"book/index.html", "README.html", "docs/glossary.html", "search.html"} <= set(pages), pages
    assert {"zh_CN/book/index.html", "zh_CN/docs/glossary.html"} <= set(pages), "the Chinese book is checked too"
    sliders = {f"{book}notebooks/{nb.stem}.html": _slider_models(nb) for nb in NOTEBOOKS for book in ("", "zh_CN/")}
    with sync_playwright() as p:
        chromium = launch_chromium(p)
        try:
            check = PageCheck(chromium.new_page(viewport={"width": 1280, "height": 800}), Axe(), served, sliders)
            for name in pages:
                check.visit(name)
        finally:
            chromium.close()
    print("\n".join(f"{name}: {got}" for name, got in check.seen.items()))
    problems = check.problems()
    assert not problems, "\n".join(problems)
    assert check.seen["notebooks/01_qkv.html"]["handles"] >= 3, check.seen["notebooks/01_qkv.html"]
    assert check.seen["docs/glossary.html"]["math"] > 0, "the navigation's math is typeset on pages without formulas too"


BROKEN_PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>Climbing the \\(T^2\\) wall</title></head>
<body><main><h1>A page with every fault the book test looks for</h1>
<p>raw TeX: \\(W_O\\)</p>
<img src="figure.png">
<button></button>
<p style="color:#ddd;background:#fff">text a reader cannot read</p>
<div>Error displaying widget: model not found</div>
<script>console.error("a console error"); null.Queue;</script>
</main></body></html>
"""
CLEAN_PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>A clean page</title></head>
<body><main><h1>A clean page</h1><p>Nothing wrong here.</p><img src="figure.png" alt="a blue square"></main></body></html>
"""


@pytest.mark.browser
def test_the_page_check_fails_on_each_fault_and_passes_a_clean_page(tmp_path):
    """The book test's own check, on two small pages: one with a page error, a console error, raw TeX in the
    page and its title, a figure without alt text, "Error displaying widget" and axe-core's serious
    violations (a button without a name, text without contrast); and one with none of them."""
    Axe, sync_playwright = _browser_tools()
    (tmp_path / "broken.html").write_text(BROKEN_PAGE, encoding="utf-8")
    (tmp_path / "clean.html").write_text(CLEAN_PAGE, encoding="utf-8")
    (tmp_path / "figure.png").write_bytes(base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="))
    with _serve(tmp_path) as base, sync_playwright() as p:
        chromium = launch_chromium(p)
        try:
            check = PageCheck(chromium.new_page(), Axe(), base, mathjax=False)
            check.visit("clean.html")
            assert check.problems() == [], check.problems()
            check.visit("broken.html")
        finally:
            chromium.close()
    problems = "\n".join(check.problems())
    assert "uncaught Cannot read properties of null (reading 'Queue')" in problems and "console a console error" in problems, problems
    for fault in ("raw_math = 1", "raw_title = 1", "no_alt = 1", "widget_errors = 1"):
        assert f"broken.html: {fault}" in problems, (fault, problems)
    serious = {rule for rule, _, _ in check.seen["broken.html"]["serious"]}
    assert {"button-name", "color-contrast"} <= serious, check.seen["broken.html"]
