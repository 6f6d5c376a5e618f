"""``mha-course student OUTDIR``: student copies, where every solution block becomes a stub.

    mha-course student ~/mha-student          # OUTDIR/notebooks/<name> for every course notebook
    mha-course student --update ~/mha-student # new and changed notebooks into that copy

A learner's file is never lost: a copy that exists and differs is learner work (anything
Jupyter can open, nbformat 3 included) and is replaced only with ``--overwrite``, after it is
moved into a new ``OUTDIR/backups/<timestamp>/``; a save that lands while the copy is replaced
is moved there too (see ``files.commit``). Every file is staged next to its target and put in
place in one step by the course's one writer (``files``), keeping the mode the file had.

OUTDIR gets ``.mha-course/``: the mark of a course folder (the checkers record the learner's
progress there, ``check.progress``) and ``copies.json``, what was copied. ``--update`` uses it
for the nbgitpuller rule: a notebook still as copied is replaced by its new version; one the
learner edited is never touched, and the new version lands beside it (``NAME.updated.ipynb``).

Four rooms, one job each: ``student_stubs`` (one notebook's student copy), ``student_plan`` (what
goes where, what is there now, the record of what was copied), ``student_update`` (``--update``)
and this one (writing the copies, and the command). Every public name is importable from here.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ..check.progress import MARKER
from . import files
from .student_plan import (
    MANIFEST,
    StudentInputError,
    error_line,
    existing_kind,
    linked_file,
    mark_language,
    outdir_path,
    plan_copies,
    read_manifest,
    record_copies,
    sha256,
)
from .student_stubs import (
    BEGIN,
    END,
    SUMMARY_CELL,
    StudentCopyError,
    exercise_label,
    soften_check,
    stub_solutions,
    student_notebook,
)
from .student_update import UPDATED, update_student_copies

__all__ = ["BEGIN", "END", "SUMMARY_CELL", "StudentCopyError", "StudentInputError", "exercise_label",
           "stub_solutions", "soften_check", "student_notebook", "write_student_copies", "update_student_copies",
           "read_manifest", "course_notebooks", "MANIFEST", "UPDATED", "add_student_command"]


def _fresh_backup_dir(outdir: Path) -> Path:
    """OUTDIR/backups/YYYYmmdd-HHMMSS (then -2, -3, ...): a folder this run creates, never reuses."""
    base = outdir / "backups" / time.strftime("%Y%m%d-%H%M%S")
    base.parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 10_000):
        folder = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise StudentInputError(f"{base.parent} holds too many backups; remove old ones")



def _clash_error(clash) -> StudentCopyError:
    names = "\n".join(f"  {t}" for t in clash)
    return StudentCopyError(
        f"{len(clash)} file(s) already exist and differ from a fresh student copy; "
        f"nothing was written, your work is safe:\n{names}\n"
        "Run again with --overwrite to replace them (a timestamped backup of each is kept), "
        "or choose another folder.")



def _writes(notebooks, outdir: Path, overwrite: bool, lang=None):
    """[(target, bytes, kind)] to write; kind 'new', 'learner' or 'broken' (the last two backed up first)."""
    plan, assets = plan_copies(notebooks, outdir, lang)
    kinds = [(t, text, existing_kind(t, text)) for t, text in plan]
    writes = [(t, text.encode("utf-8"), kind) for t, text, kind in kinds if kind != "same"]
    clash = [t for t, _, kind in writes if kind == "learner"]
    if clash and not overwrite:
        raise _clash_error(clash)
    writes += [(t, linked_file(s, lang), "asset") for t, s in sorted(assets.items())
               if not t.exists() and not t.is_symlink()]
    return [t for t, _ in plan] + sorted(assets), writes, {t: sha256(text.encode("utf-8")) for t, text in plan}



def _stage_all(writes) -> list:
    """Temporary files for every write, folders made as needed; on any failure none is left.

    A temporary left in those folders by a killed run (its process is gone) is removed first.
    """
    staged = []
    try:
        for target, data, _ in writes:
            target.parent.mkdir(parents=True, exist_ok=True)
            files.remove_stale_temporaries(target.parent)
            staged.append(files.stage(target, data, files.new_file_mode()))
    except BaseException:
        for tmp in staged:
            tmp.unlink(missing_ok=True)
        raise
    return staged



class _Backups:
    """Moves the files a run replaces into one new OUTDIR/backups/<timestamp>/ (made when first needed)."""

    def __init__(self, outdir: Path, log):
        self.outdir, self.log, self.folder = outdir, log, None

    def keeper(self, tmp: Path, kind: str):
        """``keep(target)`` for ``files.commit``: give ``tmp`` the old file's mode, move the old file here."""
        def keep(target: Path) -> Path:
            if self.folder is None:
                self.folder = _fresh_backup_dir(self.outdir)
            dest = self.folder / target.relative_to(self.outdir)
            dest.parent.mkdir(parents=True, exist_ok=True)
            n = 1
            while os.path.lexists(dest):  # a save that came in while replacing: keep each one
                n += 1
                dest = dest.with_name(f"{target.stem}.{n}{target.suffix}")
            os.chmod(tmp, files.file_mode(target))
            os.rename(target, dest)  # atomic: whatever is there at this instant is what is kept
            note = (" (it was not a valid notebook: an interrupted write? not learner work)"
                    if kind == "broken" else "")
            self.log(f"backed up {target} -> {dest}{note}")
            return dest
        return keep



def _commit(writes, staged, outdir: Path, log) -> None:
    """Put each staged file in place; a file found at a notebook's target is moved into a backup first."""
    backups = _Backups(outdir, log)
    for (target, _, kind), tmp in zip(writes, staged):
        files.commit(tmp, target, keep=None if kind == "asset" else backups.keeper(tmp, kind))
        log(f"wrote {target}")



def write_student_copies(notebooks, outdir, overwrite: bool = False, log=print, lang=None) -> list:
    """Write OUTDIR/notebooks/<name> for each notebook, plus the files they link; return paths.

    ``lang`` ("zh_CN"): the copies' prose in that language, from the course's catalogues (code
    cells unchanged), and the checkers of this course folder speak it too (OUTDIR/.mha-course/lang).

    Never replaces a learner's file: if a notebook copy exists and differs, nothing at all
    is written and StudentCopyError names the files, unless ``overwrite``; then each replaced
    file is first moved to a new OUTDIR/backups/<timestamp>/ (and so is a save that lands
    meanwhile). A copy that is not a notebook Jupyter can open (an interrupted write) is no
    learner work: it is backed up and replaced. Linked files that exist are kept. An empty
    OUTDIR, bad sources or targets raise StudentInputError; every file is staged next to its
    target and put in place in one step, so a failure leaves each file whole.
    """
    outdir = outdir_path(outdir)
    paths, writes, hashes = _writes(notebooks, outdir, overwrite, lang)
    try:
        staged = _stage_all(writes)
    except OSError as err:
        raise StudentInputError(error_line(err, outdir, "Nothing was changed")) from None
    try:
        _commit(writes, staged, outdir, log)
    except OSError as err:
        raise StudentInputError(error_line(err, outdir, "Files not yet replaced are unchanged")) from None
    finally:
        for tmp in staged:
            tmp.unlink(missing_ok=True)
    try:
        record_copies(outdir, hashes)
        mark_language(outdir, lang)
    except OSError as err:  # the copies are whole; only the course folder's records are missing
        raise StudentInputError(error_line(err, outdir / MARKER, "The copies are written; run again "
                                               "to record them")) from None
    return paths



def course_notebooks() -> list:
    """The course's notebooks: a clone's notebooks/, else the copy a wheel ships, else ./notebooks/."""
    package = Path(__file__).resolve().parent.parent
    for folder in (package.parent / "notebooks", package / "course" / "notebooks", Path.cwd() / "notebooks"):
        found = sorted(folder.glob("*.ipynb"))
        if found:
            return found
    return []



def _cmd_student(args) -> int:
    notebooks = args.notebooks or course_notebooks()
    if not notebooks:
        print("mha-course student: no notebooks found; pass them with --notebooks notebooks/*.ipynb",
              file=sys.stderr)
        return 2
    try:
        if args.update:
            done = update_student_copies(notebooks, args.outdir, lang=args.lang)
            print(f"student copy updated: {len(done['new'])} new, {len(done['updated'])} updated, "
                  f"{len(done['beside'])} beside an edited notebook, {len(done['same'])} unchanged, in "
                  f"{Path(args.outdir).expanduser()}")
            return 0
        paths = write_student_copies(notebooks, args.outdir, overwrite=args.overwrite, lang=args.lang)
    except StudentInputError as err:
        print(f"mha-course student: {err}", file=sys.stderr)
        return 2
    except StudentCopyError as err:
        print(f"mha-course student: {err}", file=sys.stderr)
        return 1
    print(f"student copies ready: {len(notebooks)} notebook(s) and {len(paths) - len(notebooks)} linked "
          f"file(s) in {Path(args.outdir).expanduser()}")
    return 0



def add_student_command(sub) -> None:
    """Add ``student OUTDIR [--notebooks NB...] [--overwrite | --update]`` to argparse subparsers."""
    st = sub.add_parser("student", help="write student copies: solution blocks become stubs")
    st.add_argument("outdir", help="folder for the copies (notebooks go to OUTDIR/notebooks/)")
    st.add_argument("--notebooks", nargs="+", default=None,
                    help="notebooks to copy (default: the course's notebooks/*.ipynb)")
    mode = st.add_mutually_exclusive_group()
    mode.add_argument("--overwrite", action="store_true",
                      help="replace existing copies, keeping a timestamped backup of each")
    mode.add_argument("--update", action="store_true",
                      help="bring new and changed notebooks into an existing copy: a notebook you edited is "
                           "never touched (the new version lands beside it as NAME.updated.ipynb)")
    st.add_argument("--lang", default=None, choices=("zh_CN",),
                    help="the copies' prose in this language (code cells stay English): zh_CN = 中文")
    st.set_defaults(func=_cmd_student)
