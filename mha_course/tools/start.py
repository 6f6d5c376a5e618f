"""``mha-course start DIR``: the learner's front door, from a pip install, no clone needed.

    pip install mha-course
    mha-course start ~/mha-course        # student copies in ~/mha-course, JupyterLab open on 00

The first run writes the student copies (``DIR/notebooks/NN_*.ipynb``, and the files they
link: ``DIR/docs/glossary.md``, ``DIR/README.md``) with ``tools/student.py``; JupyterLab is then
started with DIR as its root, so a notebook's ``../docs/glossary.md`` link opens. A later run
writes only what is missing (a notebook a newer version added) and never touches a file that is
there: the learner's work is reopened as it was.

Arguments after ``--`` go to JupyterLab as they are (``-- --no-browser --port 8899``).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from . import files
from .student import StudentCopyError, StudentInputError, course_notebooks, write_student_copies

__all__ = ["FIRST_NOTEBOOK", "missing_copies", "prepare", "lab_command", "add_start_command"]

FIRST_NOTEBOOK = "notebooks/00_overview.ipynb"


def missing_copies(notebooks, outdir: Path) -> list:
    """The notebooks among ``notebooks`` that have no copy in ``outdir/notebooks/`` yet (by file name)."""
    return [Path(nb) for nb in notebooks if not (Path(outdir) / "notebooks" / Path(nb).name).exists()]


def prepare(outdir, notebooks=None, log=print, lang=None) -> Path:
    """Write the student copies that ``outdir`` lacks (all of them the first time); return ``outdir``.

    A copy that exists is left as it is, whatever it holds; the linked files that are missing
    are written too. StudentInputError for an unusable ``outdir`` or no notebooks to copy.
    """
    try:
        outdir = files.check_path_arg(outdir, "DIR", "~/mha-course")
    except files.PathError as err:
        raise StudentInputError(str(err)) from None
    notebooks = course_notebooks() if notebooks is None else list(notebooks)
    if not notebooks:
        raise StudentInputError("no course notebooks found in this installation; reinstall it "
                                "(pip install --force-reinstall mha-course)")
    todo = missing_copies(notebooks, outdir)
    if todo:
        write_student_copies(todo, outdir, log=log, lang=lang)
    else:
        log(f"{outdir}: every notebook is there; reopening your copies (nothing was written)")
    return outdir


def lab_command(outdir: Path, lab_args=()) -> list:
    """The JupyterLab command line: root DIR, opened on 00 (``--allow-root`` when run as root)."""
    cmd = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={Path(outdir).resolve()}",
           f"--LabApp.default_url=/lab/tree/{FIRST_NOTEBOOK}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-root" not in lab_args:
        cmd.append("--allow-root")  # Jupyter refuses root unless told; containers often are root
    return cmd + list(lab_args)


def _cmd_start(args) -> int:
    lab_args = [a for a in args.lab_args if a != "--"]
    try:
        outdir = prepare(args.dir, lang=args.lang)
    except StudentCopyError as err:  # StudentInputError included: one line, nothing half-written
        print(f"mha-course start: {err}", file=sys.stderr)
        return 2
    cmd = lab_command(outdir, lab_args)
    print(f"opening JupyterLab on {outdir / FIRST_NOTEBOOK} (Ctrl-C stops it; your work stays in {outdir})")
    sys.stdout.flush()
    return subprocess.call(cmd, cwd=outdir)


def add_start_command(sub) -> None:
    """Add ``start DIR [-- JUPYTERLAB ARGS...]`` to argparse subparsers."""
    st = sub.add_parser("start", help="write the student copies into DIR (once) and open JupyterLab on them",
                        description=__doc__.splitlines()[0].replace("``", ""))
    st.add_argument("dir", help="the folder for your copies, e.g. ~/mha-course (made if missing)")
    st.add_argument("lab_args", nargs="*", metavar="-- JUPYTERLAB_ARGS",
                    help="passed to JupyterLab, after --, e.g. -- --no-browser --port 8899")
    st.add_argument("--lang", default=None, choices=("zh_CN",),
                    help="the course's prose in this language (code cells stay English): zh_CN = 中文")
    st.set_defaults(func=_cmd_start)
