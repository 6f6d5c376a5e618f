"""The Makefile loses nothing: quoted paths, a VENV with a space refused in one line, `make site` swapped in whole.

Each test runs the real Makefile (``make -f``) in a temporary folder, with a fake venv whose
``bin/python`` is a small shell script where a recipe would run Python, so nothing is installed.
"""
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = ROOT / "Makefile"
PATH_VARS = ("VENV", "BIN", "PYTHON", "HUB_VENV", "HUB_PYTHON", "BOOK_NPM", "HUB_NPM", "STAMP", "HUB_STAMP")

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def make(cwd: Path, *args, env=None):
    return subprocess.run(["make", "--no-print-directory", "-f", str(MAKEFILE), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60, env=env)


def recipe_lines() -> list:
    return [line for line in MAKEFILE.read_text().splitlines() if line.startswith("\t")]


def test_every_recipe_quotes_the_paths_it_is_given():
    unquoted = []
    for line in recipe_lines():
        outside = re.sub(r'"[^"]*"', "", line.split("@echo '")[0])  # outside double quotes (not in a message)
        found = [v for v in PATH_VARS if f"$({v})" in outside]
        if found:
            unquoted.append((found, line.strip()))
    assert not unquoted, f"paths used unquoted in recipes: {unquoted}"


@pytest.mark.parametrize("venv", ["my venv", "", " "])
def test_clean_venv_with_a_space_removes_nothing_and_says_so_in_one_line(tmp_path, venv):
    for name in ("my", "venv", "my venv"):
        (tmp_path / name).mkdir()
    done = make(tmp_path, "clean-venv", f"VENV={venv}")
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "VENV=" in errors[0] and "space" in errors[0], done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my", "my venv", "venv"]


def test_clean_venv_removes_that_folder_only(tmp_path):
    for name in ("keep", "my-venv", "my-venv-2"):
        (tmp_path / name).mkdir()
    (tmp_path / "my-venv" / "pyvenv.cfg").write_text("")
    done = make(tmp_path, "clean-venv", "VENV=my-venv")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep", "my-venv-2"]


def test_a_python_path_with_a_space_is_quoted(tmp_path):
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    done = make(tmp_path, "-n", "course", "PYTHON=/opt/my python/bin/python3", "VENV=v")
    assert done.returncode == 0, done.stderr
    assert '"/opt/my python/bin/python3" -m venv "v"' in done.stdout


def test_make_course_serves_the_repository_root_and_opens_00():
    done = make(ROOT, "-n", "-W", "pyproject.toml", "course", "VENV=.venv-dry-run-never-made")
    lab = [line for line in done.stdout.splitlines() if "jupyter\" lab" in line]
    assert len(lab) == 1, done.stdout + done.stderr
    assert "--ServerApp.root_dir=." in lab[0]
    assert "--LabApp.default_url=/lab/tree/notebooks/00_overview.ipynb" in lab[0]


FAKE_PYTHON = """#!/bin/sh
# a stand-in for the venv's python: `-m sphinx ... OUTDIR` writes OUTDIR/index.html, or fails half-way
for last; do :; done
echo "LANG=$LANG" >> "$(dirname "$0")/../../locales.log"
mkdir -p "$last"
echo "$BOOK_TEXT" > "$last/index.html"
if [ -n "$BOOK_FAILS" ]; then echo "sphinx: interrupted" >&2; exit 1; fi
"""


def _site_folder(tmp_path: Path) -> Path:
    (tmp_path / "book").mkdir()
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copy(ROOT / "book" / "package.json", tmp_path / "book" / "package.json")
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    for stamp in (tmp_path / "venv" / ".installed-site", tmp_path / "build" / "book-npm" / ".installed"):
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.touch()
    return tmp_path


def test_make_site_swaps_the_new_book_in_and_a_failed_build_keeps_the_last(tmp_path):
    folder = _site_folder(tmp_path)
    first = make(folder, "site", "VENV=venv", env=dict(os.environ, BOOK_TEXT="first book"))
    assert first.returncode == 0, first.stderr
    book = folder / "build" / "site" / "index.html"
    assert book.read_text().strip() == "first book"
    failed = make(folder, "site", "VENV=venv", env=dict(os.environ, BOOK_TEXT="half a book", BOOK_FAILS="1"))
    assert failed.returncode != 0
    assert book.read_text().strip() == "first book", "a failed rebuild must keep the last book"
    again = make(folder, "site", "VENV=venv", env=dict(os.environ, BOOK_TEXT="second book"))
    assert again.returncode == 0, again.stderr
    assert book.read_text().strip() == "second book"
    assert sorted(p.name for p in (folder / "build").iterdir()) == ["book-npm", "site", "site-doctrees"] or \
        sorted(p.name for p in (folder / "build").iterdir()) == ["book-npm", "site"]


def test_make_site_passes_the_hub_url_to_the_book(tmp_path):
    done = make(_site_folder(tmp_path), "-n", "site", "VENV=venv", "HUB_URL=https://hub.example.org")
    assert 'MHA_COURSE_HUB_URL="https://hub.example.org"' in done.stdout, done.stdout + done.stderr


def test_the_chinese_book_is_asked_for_with_book_lang_and_leaves_the_locale_alone(tmp_path):
    # `make site LANG=zh_CN` once handed Sphinx the locale zh_CN, which CI's machine lacks:
    # Sphinx's setlocale() failed. The book's language has its own variable.
    folder = _site_folder(tmp_path)
    done = make(folder, "site", "VENV=venv", "BOOK_LANG=zh_CN", env=dict(os.environ, BOOK_TEXT="both", LANG="C.UTF-8"))
    assert done.returncode == 0, done.stderr
    assert (folder / "build" / "site" / "zh_CN" / "index.html").is_file(), done.stdout
    assert 'MHA_COURSE_BOOK_BOTH="1"' in done.stdout
    logged = (folder / "locales.log").read_text().split()
    assert len(logged) == 3 and set(logged) == {"LANG=C.UTF-8"}, logged
