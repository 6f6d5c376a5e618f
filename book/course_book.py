"""Sphinx extension of the course's web book: offline assets, the table of contents, links.

- **Offline assets.** MathJax 3, require.js and the ipywidgets HTML manager, installed from npm
  by `make site` into ``course_book_npm_dir/node_modules``, are staged into
  ``course_book_npm_dir/static/vendor/`` (the book's ``_static/vendor/``). A missing package
  stops the build with the command that installs it.
- **Table of contents.** The README is the landing page; a hidden toctree is appended to it at
  read time (the README on GitHub stays as it is), globbing ``notebooks/[0-9][0-9]_*``, so a new
  lesson joins the book by existing, then the glossary and the instructor guide.
- **JupyterLab-style heading links.** JupyterLab gives a heading the id of its text with spaces
  turned into ``-`` (``#1.-The-chain-rule,-read-backwards``); MyST gives it a GitHub-style slug
  (``#1-the-chain-rule-read-backwards``). A link whose anchor is not a slug of its target page
  is matched to that page's heading by :func:`loose_key` (letters and digits only, lower case,
  URL-decoded) and pointed at its slug. The notebooks are left as they are; a link that matches
  no heading (or two) is left alone, and MyST's warning fails the build.
"""
from __future__ import annotations

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

TOCTREE = """

```{toctree}
:hidden:
:glob:
:caption: The course

notebooks/[0-9][0-9]_*
```

```{toctree}
:hidden:
:caption: Reference

docs/glossary
docs/instructor
```
"""


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


def add_toctree(app, docname: str, source: list) -> None:
    """Append the hidden table of contents to the landing page (the README) at read time."""
    if docname == app.config.root_doc:
        source[0] += TOCTREE


def finish_build(app, exception) -> None:
    """index.html sends a browser to the landing page (the README); the widget fonts go next to the pages.

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


def setup(app):
    app.add_config_value("course_book_npm_dir", "", "env")
    app.connect("config-inited", stage_vendor)
    app.connect("source-read", add_toctree)
    app.connect("build-finished", finish_build)
    app.add_transform(SameDocAnchors)
    app.add_post_transform(OtherDocAnchors)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
