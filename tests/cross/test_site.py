"""The web book (`make site`): built here with -W, then read as HTML and in headless Chromium.

- every notebooks/NN_*.ipynb is a page (globbed: a new lesson must appear without an edit),
  and so are the README (the landing page), the glossary and the instructor guide;
- every in-book link resolves to a page, and its #anchor to an id on that page;
- no page asks for anything outside the book (no http(s) script, stylesheet or image);
- in Chromium, served on 127.0.0.1: every notebook page with saved sliders shows slider
  handles (widgets drawn from their saved state, no "Error displaying widget"), the formulas
  are typeset by MathJax (no raw ``\\(`` left), and no request leaves 127.0.0.1.

The book needs the `site` extra (sphinx, myst-nb, sphinx-book-theme) and the npm packages that
`make site` installs into build/book-npm/. Without them the tests skip with the reason, unless
MHA_COURSE_REQUIRE_SITE=1 (CI's site step); without chromium/playwright the browser test skips
unless MHA_COURSE_REQUIRE_BROWSER=1 or MHA_COURSE_REQUIRE_SITE=1.

    make site && python -m pytest tests/cross/test_site.py -p no:nbval -q
"""
from __future__ import annotations

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


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The book built from this checkout with warnings as errors; the folder of its HTML."""
    reason = _site_missing()
    if reason:
        _skip_or_fail(reason, REQUIRE_SITE, "MHA_COURSE_REQUIRE_SITE")
    out = tmp_path_factory.mktemp("site")
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q", "-c", str(ROOT / "book"),
           "-d", str(out / "doctrees"), str(ROOT), str(out / "html")]
    env = dict(os.environ, MHA_COURSE_BOOK_NPM=str(NPM_DIR))
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    warnings = [line for line in run.stderr.splitlines() if "WARNING" in line or "ERROR" in line]
    assert run.returncode == 0 and not warnings, f"the book did not build cleanly:\n{run.stderr[-4000:]}"
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
    for nb in NOTEBOOKS:
        page = site / "notebooks" / (nb.stem + ".html")
        assert page.exists(), f"{nb.name} is not in the book"
        assert f'href="notebooks/{nb.stem}.html"' in (site / "README.html").read_text(encoding="utf-8"), (
            f"{nb.name} is missing from the landing page's navigation")
    for doc in ("README.html", "docs/glossary.html", "docs/instructor.html", "index.html"):
        assert (site / doc).exists(), doc


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


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def served(site):
    """The book on 127.0.0.1 (a free port), stopped when the module's tests end."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.browser
def test_pages_in_chromium_offline(served):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _skip_or_fail("playwright is not installed (pip install -e '.[browser]')", REQUIRE_BROWSER,
                      "MHA_COURSE_REQUIRE_BROWSER")
    if not Path(CHROMIUM).exists():
        _skip_or_fail(f"chromium is not installed at {CHROMIUM} (apt-get install chromium)", REQUIRE_BROWSER,
                      "MHA_COURSE_REQUIRE_BROWSER")
    outside, failed = [], []
    pages = ["index.html", "docs/glossary.html"] + [f"notebooks/{nb.stem}.html" for nb in NOTEBOOKS]
    sliders = {f"notebooks/{nb.stem}.html": _slider_models(nb) for nb in NOTEBOOKS}
    seen = {}
    with sync_playwright() as p:
        chromium = launch_chromium(p)
        try:
            page = chromium.new_page(viewport={"width": 1280, "height": 800})
            page.on("request", lambda r: r.url.startswith((served, "data:", "blob:" + served))
                    or outside.append(r.url))
            page.on("response", lambda r: r.status >= 400 and not r.url.endswith("favicon.ico")
                    and failed.append(f"{r.status} {r.url}"))
            for name in pages:
                page.goto(served + name, wait_until="load")
                if sliders.get(name):
                    page.locator(".noUi-handle").first.wait_for(timeout=30_000)
                page.wait_for_function(
                    "() => !window.MathJax || !MathJax.startup || MathJax.startup.promise", timeout=30_000)
                page.evaluate("() => window.MathJax && MathJax.startup ? MathJax.startup.promise : null")
                body = page.locator("article").inner_text()
                seen[name] = dict(
                    handles=page.locator(".noUi-handle").count(),
                    math=page.locator("mjx-container").count(),
                    raw_math=len(re.findall(r"\\\(|\\\[", body)),
                    widget_errors=page.locator("text=Error displaying widget").count(),
                )
        finally:
            chromium.close()
    print("\n".join(f"{name}: {got}" for name, got in seen.items()))
    assert not outside, f"requests left 127.0.0.1: {outside[:10]}"
    assert not failed, f"requests failed: {failed[:10]}"
    for name, got in seen.items():
        assert got["widget_errors"] == 0, (name, got)
        assert got["raw_math"] == 0, (name, got)
        if sliders.get(name):
            assert got["handles"] >= 1, (name, got)
        if name.startswith("notebooks/"):
            assert got["math"] > 0, (name, got)
    assert seen["notebooks/01_qkv.html"]["handles"] >= 3, seen["notebooks/01_qkv.html"]
