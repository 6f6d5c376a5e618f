"""Sphinx extension of the course's web book: offline assets, the table of contents, links.

- **Offline assets.** MathJax 3, require.js and the ipywidgets HTML manager, installed from npm
  by `make site` into ``course_book_npm_dir/node_modules``, are staged into
  ``course_book_npm_dir/static/vendor/`` (the book's ``_static/vendor/``). A missing package
  stops the build with the command that installs it.
- **Table of contents.** The landing page (book/index.md, for learners) globs
  ``notebooks/[0-9][0-9]_*``, so a new lesson joins the book by existing, then the glossary, the
  instructor guide and the README.
- **JupyterLab-style heading links.** JupyterLab gives a heading the id of its text with spaces
  turned into ``-`` (``#1.-The-chain-rule,-read-backwards``); MyST gives it a GitHub-style slug
  (``#1-the-chain-rule-read-backwards``). A link whose anchor is not a slug of its target page
  is matched to that page's heading by :func:`loose_key` (letters and digits only, lower case,
  URL-decoded) and pointed at its slug. The notebooks are left as they are; a link that matches
  no heading (or two) is left alone, and MyST's warning fails the build.
- **Readable without JupyterLab.** Every figure gets alt text drawn from its cell (the caption
  comment that opens it, see :func:`cell_caption`); every saved widget gets one line saying that
  it moves in JupyterLab, with a "run this notebook" link (the hub's ``/hub/user-redirect/lab/tree/``
  when ``MHA_COURSE_HUB_URL`` is set, ``make site HUB_URL=...``; else a download of the .ipynb,
  copied next to its page). MathJax loads on every page (math in the navigation of every page is
  typeset), page titles (the browser's tab) carry plain text (:func:`plain_title`), and
  ``static/course_book.js`` gives the widget renderer the one MathJax 2 call it makes.
- **Anchors out of titles.** A heading's raw ``<a id="..."></a>`` (the Chinese pages keep their English
  ids so) becomes an id of its section, not a link without href in the page's contents (:class:`TitleAnchors`).
- **A broken notebook is one line.** A notebook that is not JSON stops the build before Sphinx
  reads it, naming the file and the fix (:func:`check_notebooks`), not in Sphinx's crash report.
"""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import unicodedata
from pathlib import Path
from urllib.parse import unquote

from docutils import nodes
from docutils.transforms import Transform
from sphinx import addnodes
from sphinx.errors import ConfigError
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)

# (npm package, path inside it, path under _static/vendor/): what the pages load.
VENDORED = (
    ("mathjax", "es5", "mathjax/es5"),
    ("requirejs", "require.js", "requirejs/require.js"),
    ("@jupyter-widgets/html-manager", "dist", "html-manager/dist"),
)
NPM_HINT = "`make site` installs them (npm install --prefix build/book-npm, versions in book/package.json)"

def loose_key(text: str) -> str:
    """A heading's text or a link's anchor -> its letters and digits, lower case.

    >>> loose_key("1.-The-chain-rule,-read-backwards") == loose_key("1. The chain rule, read backwards")
    True
    >>> loose_key('#4.-%22Attention-is-fast%22')
    '4attentionisfast'
    """
    text = unicodedata.normalize("NFKC", unquote(text.lstrip("#")))
    return "".join(ch for ch in text.lower() if ch.isalnum())


def slug_for(anchor: str, slugs: dict) -> str | None:
    """The MyST slug of the one heading whose text matches ``anchor`` loosely, else None.

    ``slugs`` is MyST's record of a page's headings: slug -> (line, id, heading text).

    >>> slug_for("2.-The-leak-probe", {"2-the-leak-probe": (3, "the-leak-probe", "2. The leak probe")})
    '2-the-leak-probe'
    """
    if anchor in slugs:
        return anchor
    key = loose_key(anchor)
    found = [slug for slug, (_, _, title) in slugs.items() if loose_key(title) == key]
    return found[0] if len(found) == 1 else None


class SameDocAnchors(Transform):
    """``[text](#1.-A-heading)`` inside one page -> ``#1-a-heading`` (before MyST resolves it)."""

    default_priority = 878  # just before myst_parser's ResolveAnchorIds (879)

    def apply(self, **kwargs) -> None:
        slugs = getattr(self.document, "myst_slugs", {})
        for ref in self.document.findall(nodes.reference):
            if not ref.get("id_link"):
                continue
            slug = slug_for(ref["refuri"][1:], slugs)
            if slug is not None:
                ref["refuri"] = "#" + slug


HEADING_ANCHOR = re.compile(r'<a id="([^"]+)">(</a>)?')  # MyST gives `<a id="x">` and `</a>` as two raw nodes


class TitleAnchors(Transform):
    """``## 标题 <a id="English-heading"></a>`` -> the section also gets that id; its title keeps only its text.

    The Chinese pages keep their English headings' ids this way (``tools.i18n.heading_anchor``), so that
    links into them land. Left in the title, the anchor lands in the page's table of contents as an ``<a>``
    without ``href``, and the theme's script that follows the contents while scrolling stops on it (an
    uncaught TypeError). The section's id does the anchor's job: the theme writes it as an id on the page.
    """

    default_priority = 700

    def apply(self, **kwargs) -> None:
        for title in list(self.document.findall(nodes.title)):
            raws = [n for n in title.findall(nodes.raw) if n.get("format") == "html"]
            opened = [(n, HEADING_ANCHOR.fullmatch(n.astext().strip())) for n in raws]
            anchors = [(n, m) for n, m in opened if m]
            if not anchors:
                continue
            section = title.parent
            for raw, match in anchors:
                anchor = html.unescape(match.group(1))
                if isinstance(section, nodes.section) and anchor not in section["ids"]:
                    section["ids"].append(anchor)
                raw.parent.remove(raw)
            closing = [n for n in raws if n.astext().strip() == "</a>"]
            for raw in closing[:sum(not m.group(2) for _, m in anchors)]:
                raw.parent.remove(raw)
            last = title.children[-1] if title.children else None
            if isinstance(last, nodes.Text) and last.rstrip() != last:
                title.replace(last, nodes.Text(last.rstrip()))


class OtherDocAnchors(SphinxPostTransform):
    """``[text](08_heads_that_learn.ipynb#1.-The-chain-rule,-read-backwards)`` -> that page's slug."""

    default_priority = 8  # before myst_parser's MystReferenceResolver (9)

    def run(self, **kwargs) -> None:
        for ref in self.document.findall(addnodes.pending_xref):
            if ref.get("reftype") != "myst" or ref.get("refdomain") != "doc" or not ref.get("reftargetid"):
                continue
            slugs = self.env.metadata.get(ref["reftarget"], {}).get("myst_slugs", {})
            slug = slug_for(ref["reftargetid"], slugs)
            if slug is not None:
                ref["reftargetid"] = slug


def stage_vendor(app, config) -> None:
    """Copy what the pages load from the npm folder into its static/vendor/ (``_static/vendor``)."""
    npm = Path(config.course_book_npm_dir)
    vendor = npm / "static" / "vendor"
    for package, inside, target in VENDORED:
        src = npm / "node_modules" / package / inside
        if not src.exists():
            raise ConfigError(
                f"{src} is missing: the book serves {package} from its own files; {NPM_HINT}, "
                "or point MHA_COURSE_BOOK_NPM at a folder whose node_modules/ has them.")
        dst = vendor / target
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True)
        else:
            shutil.copy2(src, dst)


def finish_build(app, exception) -> None:
    """index.html sends a browser to the landing page (book/index.html); the widget fonts go next to the pages.

    The widget controls' bundle asks for its Font Awesome files at ``@jupyter-widgets/<hash>.woff2``
    relative to the page (the AMD module's name, not the script's place), so every folder with
    pages gets a copy of those few files (about 1 MiB).
    """
    if exception is None and app.builder.format == "html":
        outdir = Path(app.outdir)
        fonts = [f for f in (Path(app.config.course_book_npm_dir) / "static" / "vendor" / "html-manager" / "dist").iterdir()
                 if f.suffix in (".woff", ".woff2", ".ttf", ".eot", ".svg")]
        for folder in {page.parent for page in outdir.rglob("*.html") if "_static" not in page.parts}:
            (folder / "@jupyter-widgets").mkdir(exist_ok=True)
            for font in fonts:
                shutil.copy2(font, folder / "@jupyter-widgets" / font.name)
        target = app.config.root_doc + ".html"
        (outdir / "index.html").write_text(
            f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>mha-course</title>'
            f'<meta http-equiv="refresh" content="0; url={target}"></head>'
            f'<body><a href="{target}">mha-course</a></body></html>\n', encoding="utf-8")


CAPTION_SKIP = re.compile(r"^(NBVAL_\w+|noqa\b|type:)", re.I)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
HUB_VAR = "MHA_COURSE_HUB_URL"


def cell_caption(source: str) -> str:
    """The caption of a code cell: its first comment line (house style opens every cell with one).

    >>> cell_caption("# NBVAL_IGNORE_OUTPUT\\n# Live: the number of heads\\nview = live_view(f)")
    'Live: the number of heads'
    >>> cell_caption("%matplotlib inline\\nx = 1")
    ''
    """
    for line in source.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            text = stripped.lstrip("#").strip()
            if text and not CAPTION_SKIP.match(text):
                return text
        elif stripped and not stripped.startswith("%"):
            return ""
    return ""


def plain_title(title: str) -> str:
    """A page title for the browser's tab: inline TeX as plain text.

    >>> plain_title(r"Efficient attention: climbing the \\(T^2\\) wall")
    'Efficient attention: climbing the T² wall'
    >>> plain_title(r'mix them with <span class="math notranslate nohighlight">\\(W_O\\)</span>, wrap')
    'mix them with W_O, wrap'
    >>> plain_title(r"why divide by $\\sqrt{d_k}$")
    'why divide by √d_k'
    """
    def plain(match):
        tex = match.group(1) or match.group(2) or ""
        for old, new in (("^2", "²"), ("^3", "³"), (r"\sqrt", "√"), (r"\cdot", "·"), (r"\times", "×"),
                         (r"\to", "→"), (r"\ ", " ")):
            tex = tex.replace(old, new)
        return re.sub(r"\\([A-Za-z]+)", r"\1", tex).replace("{", "").replace("}", "")
    title = re.sub(r"<[^>]+>", "", title)
    return re.sub(r"\\\((.+?)\\\)|\$(.+?)\$", plain, html.unescape(title))


def run_link(docname: str) -> tuple:
    """(href, text) of a page's "run this notebook" link: the hub's, or a download of the .ipynb.

    >>> run_link("notebooks/01_qkv")
    ('01_qkv.ipynb', 'run this notebook (download the .ipynb)')
    """
    hub = os.environ.get(HUB_VAR, "").strip().rstrip("/")
    if hub:
        return f"{hub}/hub/user-redirect/lab/tree/{docname}.ipynb", "run this notebook on the workshop hub"
    return docname.rsplit("/", 1)[-1] + ".ipynb", "run this notebook (download the .ipynb)"


def _is_cell(node) -> bool:
    return isinstance(node, nodes.container) and "cell" in node.get("classes", [])


def describe_cells(app, doctree) -> None:
    """Alt text from its cell for every figure; one line under every saved widget (see the module's doc)."""
    docname = app.env.docname
    if not docname.startswith("notebooks/"):
        return
    title = next((t.astext() for t in doctree.findall(nodes.title)), docname)
    for cell in [n for n in doctree.findall(_is_cell)]:
        source = next((b.astext() for b in cell.findall(nodes.literal_block)), "")
        caption = cell_caption(source) or f"a figure of the notebook {plain_title(title)}"
        for image in cell.findall(nodes.image):
            if not image.get("alt") or image.get("alt") == image.get("uri"):
                image["alt"] = caption
        widgets = [r for r in cell.findall(nodes.raw) if WIDGET_VIEW in r.astext()]
        holder = f'<span class="mha-cell-alt" hidden data-alt="{html.escape(caption, quote=True)}"></span>'
        cell += nodes.raw("", holder, format="html")
        if widgets:
            href, text = run_link(docname)
            download = "" if href.startswith("http") else " download"
            cell += nodes.raw("", f'<p class="mha-static-widget">This control moves its figure only in '
                                  f'JupyterLab: <a href="{html.escape(href)}"{download}>'
                                  f'{text}</a>.</p>', format="html")


def plain_page_title(app, pagename, templatename, context, doctree) -> None:
    if context.get("title"):
        context["title"] = plain_title(context["title"])


def check_notebooks(srcdir, patterns=("notebooks/[0-9][0-9]_*.ipynb",)) -> None:
    """ConfigError naming, in one line, the first notebook that is not JSON (and how to get it back).

    Called before Sphinx reads anything, so a truncated notebook is not a crash report.
    """
    for pattern in patterns:
        for path in sorted(Path(srcdir).glob(pattern)):
            try:
                json.loads(path.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, ValueError) as err:
                where = f" (line {err.lineno}, column {err.colno}: {err.msg})" if hasattr(err, "lineno") else ""
                rel = path.relative_to(srcdir)
                raise ConfigError(f"{rel} is not a notebook: it is not JSON{where}; restore it "
                                  f"(git checkout -- {rel}) or fix it in JupyterLab, then build again") from None


def check_sources(app, config) -> None:
    check_notebooks(app.srcdir)


def copy_notebooks(app, exception) -> None:
    """Each notebook page gets its .ipynb beside it, for the "download this notebook" link."""
    if exception is None and app.builder.format == "html":
        for docname in app.env.found_docs:
            src = Path(app.srcdir) / (docname + ".ipynb")
            if docname.startswith("notebooks/") and src.is_file():
                shutil.copy2(src, Path(app.outdir) / (docname + ".ipynb"))


def setup(app):
    app.add_config_value("course_book_npm_dir", "", "env")
    app.connect("config-inited", check_sources)
    app.connect("config-inited", stage_vendor)
    app.connect("doctree-read", describe_cells)
    app.connect("html-page-context", plain_page_title)
    app.connect("build-finished", copy_notebooks)
    app.set_html_assets_policy("always")  # MathJax on every page: the navigation shows math everywhere
    app.add_js_file("course_book.js", priority=1)  # before MathJax and the widget renderer
    app.add_css_file("course_book.css")
    app.connect("build-finished", finish_build)
    app.add_transform(SameDocAnchors)
    app.add_transform(TitleAnchors)
    app.add_post_transform(OtherDocAnchors)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
