"""Sphinx configuration of the course's web book (`make site` -> build/site/).

Plain Sphinx with MyST-NB and the Sphinx Book Theme: the same engine and look as Jupyter Book 1,
without its _config.yml/_toc.yml layer. Why not Jupyter Book 1 itself: it writes this conf.py
from YAML, so the link fix below would need its local-extension escape hatch anyway, it pins a
tall stack of its own (bibtex, thebe, ...) and is the end of its line; Jupyter Book 2 is another
tool that downloads its theme at build time, so it cannot build offline. The source folder is the repository itself, so every
link that works on GitHub and in JupyterLab (`notebooks/01_qkv.ipynb`, `../docs/glossary.md`)
is an in-book link as it stands; only the files below are read:

- book/index.md, the landing page for learners (its table of contents globs the notebooks);
- README.md, the repository's page (for contributors);
- notebooks/NN_*.ipynb, globbed, so a new lesson joins the book without an edit here;
- docs/glossary.md and docs/instructor.md.

Notebooks are never executed: the pages show the committed outputs, and the widgets are drawn
from the widget state saved in each notebook. MathJax 3, require.js and the ipywidgets HTML
manager are served from the book's own _static/vendor/ (installed from npm by `make site`), so
the book works without a network. The build runs with -W: a warning fails it.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parent.parent
# Where `make site` installed the npm packages (node_modules/ inside it); course_book stages
# the files the pages load from there into <this>/static/vendor/.
course_book_npm_dir = os.environ.get("MHA_COURSE_BOOK_NPM", str(ROOT / "build" / "book-npm"))

project = "mha-course: multi-head attention from first principles"
author = "the mha-course authors"
copyright = "the mha-course authors (MIT licence)"

extensions = ["myst_nb", "course_book", "language_switch"]  # next to this file: vendoring, toctree, links; English <-> 中文
# The Chinese book (make site BOOK_LANG=zh_CN) is built from translated copies of the same pages (tools/i18n.py).
language = "zh_CN" if os.environ.get("MHA_COURSE_BOOK_LANG") == "zh_CN" else "en"
root_doc = "book/index"  # the landing page, written for learners (book/index.md)
include_patterns = ["book/index.md", "README.md", "docs/glossary.md", "docs/instructor.md",
                    "notebooks/[0-9][0-9]_*.ipynb"]
exclude_patterns = ["build", ".venv", "**/.ipynb_checkpoints"]
templates_path: list = []

# ---- MyST and notebooks ----------------------------------------------------------------------
nb_execution_mode = "off"               # the committed outputs are the pages' outputs
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 6                # GitHub-style slugs: docs/instructor.md#5-presenting
myst_dmath_double_inline = True
nb_merge_streams = True

# ---- served from the book's own files ---------------------------------------------------------
html_static_path = [str(Path(course_book_npm_dir) / "static"), str(Path(__file__).resolve().parent / "static")]
mathjax_path = "vendor/mathjax/es5/tex-chtml.js"
nb_ipywidgets_js = {
    "vendor/requirejs/require.js": {},
    "vendor/html-manager/dist/embed-amd.js": {
        # a widget module outside the bundled controls would be fetched from here: our own files
        "data-jupyter-widgets-cdn": "_static/vendor/",
        "data-jupyter-widgets-cdn-only": "",
    },
}

# ---- look --------------------------------------------------------------------------------------
html_theme = "sphinx_book_theme"
html_title = "mha-course"
html_favicon = str(Path(__file__).resolve().parent / "static" / "favicon.svg")  # else a 404 for /favicon.ico
html_theme_options = {
    "show_toc_level": 2,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "search_bar_text": "Search the course...",
}
html_context = {"default_mode": "light"}  # no "invalid theme mode" console error on a first visit
html_last_updated_fmt = None
html_copy_source = False
html_show_sourcelink = False
