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
"""
from __future__ import annotations

import ast
import copy
import os
import re
import sys
import textwrap
import time
from pathlib import Path

from ..check.progress import MARKER
from . import files
from .execute import NotebookRunError, read_notebook

__all__ = ["BEGIN", "END", "SUMMARY_CELL", "StudentCopyError", "StudentInputError", "exercise_label",
           "stub_solutions", "soften_check", "student_notebook", "write_student_copies", "update_student_copies",
           "read_manifest", "course_notebooks", "MANIFEST", "UPDATED", "add_student_command"]


BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
_EXERCISE = re.compile(r"^\s*#\s*(Exercise\s+\d+(?:\.\d+)*)\s*:\s*(.*?)\s*$")
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|src=[\"']([^\"']+)[\"']")
SUMMARY_CELL = "# How many of this notebook's exercises are done\nfrom mha_course import check\ncheck.summary()"


class StudentCopyError(RuntimeError):
    """A student copy would replace a learner's file (exit code 1), or cannot be made (see below)."""


class StudentInputError(StudentCopyError):
    """A source, OUTDIR or target is unusable: one line naming the path and what to do (exit code 2)."""


def exercise_label(source: str) -> str:
    """'Exercise 2.1: a stable softmax' from a cell's '# Exercise 2.1: a stable softmax' line.

    >>> exercise_label("# Exercise 2.1: a stable softmax\\nx = 1")
    'Exercise 2.1: a stable softmax'
    >>> exercise_label("x = 1")
    'Exercise'
    """
    for line in source.splitlines():
        match = _EXERCISE.match(line)
        if match:
            return f"{match[1]}: {match[2]}" if match[2] else match[1]
    return "Exercise"


def _assigned_names(block: list) -> list:
    """Names a top-level solution block assigns (``my_shapes = {...}`` -> ['my_shapes'])."""
    try:
        tree = ast.parse(textwrap.dedent("\n".join(block)))
    except SyntaxError:
        return []
    names = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        names += [t.id for t in targets if isinstance(t, ast.Name) and t.id not in names]
    return names


def _stub(block: list, indent: str, label: str, in_function: bool) -> list:
    """The lines that replace one solution block (its lines without the markers).

    Inside a function: ``raise NotImplementedError``, which only fires when it is called.
    At the top level of a cell: each name the solution assigns becomes ``...``, so that Run
    All goes on and the check cell reports the exercise as not finished.
    """
    code = [ln for ln in block if ln.strip() and not ln.strip().startswith("#")]
    hint = next((ln.strip()[1:].strip() for ln in block[:1] if ln.strip().startswith("#")), "")
    size = f"about {len(code)} line{'s' if len(code) != 1 else ''}"
    head = f"{indent}# Your code here ({size}){'. Hint: ' + hint if hint else ''}"
    if not in_function:
        names = _assigned_names(block)
        return [head] + [f"{indent}{n} = ...  # replace ... with your answer" for n in names]
    quoted = label.replace("\\", "\\\\").replace('"', '\\"')
    return [head, f'{indent}raise NotImplementedError("{quoted}")']


def _inside_function(lines: list, indent: str) -> bool:
    """True when a block indented by ``indent`` after ``lines`` sits in a ``def`` body."""
    for line in reversed(lines):
        own = line[:len(line) - len(line.lstrip())]
        if line.strip() and len(own) < len(indent):
            if re.match(r"(async\s+)?def\s", line.strip()):
                return True
            indent = own
    return False


def stub_solutions(source: str, label: str = "") -> str:
    """Replace every solution block of a cell's source by a stub, keeping its indentation.

    The block, markers included, becomes a hint comment (the solution's size, and its first
    comment line when it starts with one) and, in a function body,
    ``raise NotImplementedError("<label>")``; at the top level, ``name = ...`` for each name
    the solution assigns.

    >>> src = "def f(x):\\n    ### BEGIN SOLUTION\\n    return 2 * x\\n    ### END SOLUTION"
    >>> print(stub_solutions(src, "Exercise 1.1: double"))
    def f(x):
        # Your code here (about 1 line)
        raise NotImplementedError("Exercise 1.1: double")
    >>> print(stub_solutions("### BEGIN SOLUTION\\nn = 4 * 6 ** 2\\n### END SOLUTION", "Exercise 1.2"))
    # Your code here (about 1 line)
    n = ...  # replace ... with your answer
    """
    label = label or exercise_label(source)
    out, block, indent = [], None, ""
    for line in source.split("\n"):
        stripped = line.strip()
        if stripped == BEGIN and block is None:
            block, indent = [], line[:len(line) - len(line.lstrip())]
        elif stripped == BEGIN or (stripped == END and block is None):
            raise StudentCopyError(f"unbalanced {stripped!r} in the cell of {label!r}")
        elif stripped == END:
            out += _stub(block, indent, label, _inside_function(out, indent))
            block = None
        elif block is not None:
            block.append(line)
        else:
            out.append(line)
    if block is not None:
        raise StudentCopyError(f"{BEGIN!r} without {END!r} in the cell of {label!r}")
    return "\n".join(out)


def _is_check_assert(node) -> bool:
    """``assert check.<name>(...)`` without a message."""
    call = node.test if isinstance(node, ast.Assert) and node.msg is None else None
    return (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Name) and call.func.value.id == "check")


def soften_check(source: str) -> str:
    """A check cell for a student copy: ``assert check.f(x)`` -> ``_ = check.f(x)``, so Run All goes on.

    The checker prints its one line (done, wrong, or not finished yet) and returns a bool;
    the lines after it run only when the check passes (they often call the learner's code).

    >>> print(soften_check("# Check 2.1\\nassert check.softmax(f)"))
    # Check 2.1
    _ = check.softmax(f)
    >>> print(soften_check("assert check.param_count(f)\\nprint(f(8, 2))"))
    if check.param_count(f):
        print(f(8, 2))
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    found = [n for n in tree.body if _is_check_assert(n)]
    if not found:
        return source
    node, lines = found[0], source.split("\n")
    call = ast.get_source_segment(source, node.test)
    before, after = lines[:node.lineno - 1], lines[node.end_lineno:]
    if not any(ln.strip() for ln in after):
        return "\n".join(before + [f"_ = {call}"] + after)
    rest = soften_check("\n".join(after))
    return "\n".join(before + [f"if {call}:"] + [f"    {ln}" if ln.strip() else ln for ln in rest.split("\n")])


def _clear(cell) -> None:
    cell.outputs = []
    cell.execution_count = None


def student_notebook(nb):
    """A new notebook node: solution blocks stubbed, check cells softened, a summary at the end.

    A check cell is the code cell right after an exercise cell when it uses ``check.`` or
    ``assert``; its ``assert check.<name>(...)`` becomes a plain call (see ``soften_check``)
    and, like the exercise cells, its outputs are cleared. A notebook with exercises gets a
    last cell ``check.summary()``. Every other cell, output and metadata is kept as it is;
    ``nb`` is not changed.
    """
    from nbformat.v4 import new_code_cell

    nb = copy.deepcopy(nb)
    after_exercise = n_exercises = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if BEGIN in cell.source:
            cell.source = stub_solutions(cell.source)
            _clear(cell)
            after_exercise, n_exercises = True, n_exercises + 1
            continue
        if after_exercise and ("check." in cell.source or "assert" in cell.source):
            cell.source = soften_check(cell.source)
            _clear(cell)
        after_exercise = False
    if n_exercises:
        nb.cells.append(new_code_cell(SUMMARY_CELL, id="mha-course-summary"))  # a fixed id: same copy each run
    return nb


def _linked_files(nb, nb_dir: Path) -> list:
    """Relative files that the markdown cells link or show (e.g. ../docs/glossary.md), no notebooks."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for match in _LINK.finditer(cell.source):
            target = (match[1] or match[2]).split("#")[0]
            web = re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("/")
            # other notebooks are never copied as they are: they would carry their solutions
            if target and not web and not target.endswith(".ipynb") and (nb_dir / target).is_file():
                found.append(target)
    return sorted(set(found))


def _student_text(path: Path, lang=None) -> tuple:
    """(the student copy of the notebook at ``path`` as text, the source notebook); bad source: one line.

    With ``lang`` (e.g. "zh_CN") the copy's markdown comes from the catalogue of that language
    (``tools.i18n``); its code cells are the English ones, unchanged."""
    import nbformat

    from . import i18n

    try:
        nb = read_notebook(path, "source notebook")
        copy = student_notebook(nb)
        if lang is not None:
            copy = i18n.translated(copy, path.stem, lang)
        return nbformat.writes(copy) + "\n", nb
    except NotebookRunError as err:
        raise StudentInputError(str(err)) from None
    except StudentCopyError as err:
        raise StudentInputError(f"{path}: {err}; fix the solution markers in that cell") from None


def _plan(notebooks, outdir: Path, lang=None):
    """[(target, content: str)] for the notebooks, and {target: source Path} for the files they link."""
    plan, assets, seen = [], {}, {}
    for path in map(Path, notebooks):
        target = outdir / "notebooks" / path.name
        if target in seen:
            what = "twice" if _same_file(seen[target], path) else f"and {seen[target]} both"
            raise StudentInputError(f"{path} is named {what} for {target}; name each notebook once, "
                                    "and never two with the same file name")
        seen[target] = path
        text, nb = _student_text(path, lang)
        plan.append((target, text))
        for rel in _linked_files(nb, path.parent):
            asset = Path(os.path.normpath(outdir / "notebooks" / rel))
            if outdir.resolve() in asset.resolve().parents:
                assets[asset] = (path.parent / rel).resolve()
    return plan, assets


def _same_file(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _refuse_sources_as_targets(plan, notebooks) -> None:
    sources = {os.path.realpath(p) for p in notebooks}
    for target, _ in plan:
        if os.path.realpath(target) in sources:
            raise StudentInputError(f"{target} is one of the source notebooks (the answer keys); "
                                    "choose an OUTDIR outside the course, e.g. ~/mha-student")


def _check_outdir(outdir: Path) -> None:
    """OUTDIR, and every folder above it that exists, must be a folder."""
    for folder in (outdir, outdir / "notebooks", *outdir.parents):
        if folder.exists() and not folder.is_dir():
            raise StudentInputError(f"{folder} is a file, not a folder; choose another OUTDIR")



def _existing(target: Path, text: str):
    """What is at ``target``: 'new' (nothing), 'same' (this very copy), 'learner', or 'broken' (no notebook).

    Learner work is anything Jupyter can open (nbformat 3 or 4, as nbformat reads it); an
    empty, truncated or other file is 'broken' (an interrupted write): backed up and replaced.
    """
    import nbformat

    if target.is_dir():
        raise StudentInputError(f"{target} is a folder where the notebook copy goes; move it away "
                                "or choose another OUTDIR")
    if not target.exists():
        return "new"
    data = target.read_bytes()
    if data == text.encode("utf-8"):
        return "same"
    try:
        decoded = data.decode("utf-8")
    except UnicodeDecodeError:
        raise StudentInputError(f"{target} is not UTF-8 text, so not a notebook JupyterLab can open; "
                                "move it away (or rename it) and run again") from None
    try:
        nb = nbformat.reads(decoded, as_version=4)
    except Exception:  # NotJSONError, a JSON without "nbformat", an unknown version, ...
        return "broken"
    return "learner" if isinstance(nb.get("cells"), list) else "broken"


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


def _os_error_line(err: OSError, path, after: str) -> str:
    return f"{files.os_error_line(err, path, 'choose a folder you can write to, e.g. ~/mha-student')}. {after}"


def _clash_error(clash) -> StudentCopyError:
    names = "\n".join(f"  {t}" for t in clash)
    return StudentCopyError(
        f"{len(clash)} file(s) already exist and differ from a fresh student copy; "
        f"nothing was written, your work is safe:\n{names}\n"
        "Run again with --overwrite to replace them (a timestamped backup of each is kept), "
        "or choose another folder.")


def _writes(notebooks, outdir: Path, overwrite: bool, lang=None):
    """[(target, bytes, kind)] to write; kind 'new', 'learner' or 'broken' (the last two backed up first)."""
    _check_outdir(outdir)
    plan, assets = _plan(notebooks, outdir, lang)
    _refuse_sources_as_targets(plan, notebooks)
    kinds = [(t, text, _existing(t, text)) for t, text in plan]
    writes = [(t, text.encode("utf-8"), kind) for t, text, kind in kinds if kind != "same"]
    clash = [t for t, _, kind in writes if kind == "learner"]
    if clash and not overwrite:
        raise _clash_error(clash)
    writes += [(t, s.read_bytes(), "asset") for t, s in sorted(assets.items())
               if not t.exists() and not t.is_symlink()]
    return [t for t, _ in plan] + sorted(assets), writes, {t: _sha(text.encode("utf-8")) for t, text in plan}


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
    try:
        outdir = files.check_path_arg(outdir, "OUTDIR", "~/mha-student")
    except files.PathError as err:
        raise StudentInputError(str(err)) from None
    paths, writes, hashes = _writes(notebooks, outdir, overwrite, lang)
    try:
        staged = _stage_all(writes)
    except OSError as err:
        raise StudentInputError(_os_error_line(err, outdir, "Nothing was changed")) from None
    try:
        _commit(writes, staged, outdir, log)
    except OSError as err:
        raise StudentInputError(_os_error_line(err, outdir, "Files not yet replaced are unchanged")) from None
    finally:
        for tmp in staged:
            tmp.unlink(missing_ok=True)
    try:
        _mark(outdir, hashes)
        _mark_language(outdir, lang)
    except OSError as err:  # the copies are whole; only the course folder's records are missing
        raise StudentInputError(_os_error_line(err, outdir / MARKER, "The copies are written; run again "
                                               "to record them")) from None
    return paths


LANGUAGE = "lang"             # in OUTDIR/.mha-course/: the course folder's language, e.g. zh_CN (absent: English)


def _mark_language(outdir: Path, lang) -> None:
    """Record the course folder's language for its checkers (nothing for English)."""
    from . import i18n

    if lang is None:
        return
    i18n.check_lang(lang)
    files.atomic_write(outdir / MARKER / LANGUAGE, f"{lang}\n".encode())


# ---------------------------------------------------------------------------------------
# the course folder's record of what was copied, and --update (the nbgitpuller rule)
# ---------------------------------------------------------------------------------------

MANIFEST = "copies.json"      # in OUTDIR/.mha-course/: {relative path: sha256 of the copy as written}
UPDATED = ".updated"          # 02_x.ipynb edited by the learner: the new version goes to 02_x.updated.ipynb


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def read_manifest(outdir) -> dict:
    """{path relative to OUTDIR: sha256 of the copy this command wrote there}; {} if none (or unreadable)."""
    import json

    try:
        data = json.loads((Path(outdir) / MARKER / MANIFEST).read_text(encoding="utf-8"))
        return {k: v for k, v in data.get("files", {}).items() if isinstance(k, str) and isinstance(v, str)}
    except (OSError, ValueError, AttributeError):
        return {}


def _mark(outdir: Path, hashes: dict) -> None:
    """Make OUTDIR/.mha-course/ (the course folder's mark: checkers record progress there) and note the copies."""
    import json

    folder = outdir / MARKER
    folder.mkdir(exist_ok=True)
    known = read_manifest(outdir)
    known.update({str(Path(t).relative_to(outdir)): h for t, h in hashes.items()})
    files.atomic_write(folder / MANIFEST, json.dumps({"files": dict(sorted(known.items()))}, indent=1).encode())


def _updated_note(name: str) -> str:
    return (f"**Course update.** This is the new version of `{name}`. Your own `{name}` has your edits, "
            "so it was left exactly as it was: copy from here what you need (or work on in this one).")


def _beside(target: Path, text: str, manifest: dict, outdir: Path) -> tuple:
    """(path, bytes) for the new version of an edited ``target``: <stem>.updated[-N].ipynb, with a note on top."""
    import nbformat
    from nbformat.v4 import new_markdown_cell

    nb = nbformat.reads(text, as_version=4)
    nb.cells.insert(0, new_markdown_cell(_updated_note(target.name), id="mha-course-update-note"))
    data = (nbformat.writes(nb) + "\n").encode("utf-8")
    for n in range(1, 1000):
        path = target.with_name(f"{target.stem}{UPDATED}{'' if n == 1 else f'-{n}'}{target.suffix}")
        if not path.exists():
            return path, data, "new"
        here = path.read_bytes()
        if here == data:
            return path, data, "same"
        if manifest.get(str(path.relative_to(outdir))) == _sha(here):
            return path, data, "ours"  # an earlier update's file the learner never changed
    raise StudentInputError(f"{target.parent} holds too many {target.stem}{UPDATED}-N copies; remove old ones")


def _put_new(tmp: Path, target: Path) -> bool:
    """Link the staged ``tmp`` in at ``target`` only if nothing is there; False if something is."""
    try:
        os.link(tmp, target)
        return True
    except FileExistsError:
        return False
    except OSError:  # no hard links on this filesystem: the small window of a rename remains
        if os.path.lexists(target):
            return False
        os.replace(tmp, target)
        return True


def _swap_ours(tmp: Path, target: Path, old_sha: str, holding: Path) -> bool:
    """Replace ``target`` by ``tmp`` if it is still the copy we wrote (sha ``old_sha``); False (untouched) if not.

    The old file is first moved aside (one rename); only if what was moved is ours is the new one
    linked in. A save that landed in between is moved back (or kept beside it): never lost.
    """
    os.rename(target, holding)
    if _sha(holding.read_bytes()) == old_sha:
        put = _put_new(tmp, target)
        holding.unlink()  # our own old copy; if the learner saved meanwhile, their save stays at target
        return put
    if not _put_new(holding, target):  # a save landed before the move: back it goes (or beside a newer one)
        os.rename(holding, target.with_name(f"{target.stem}.saved-{time.strftime('%Y%m%d-%H%M%S')}{target.suffix}"))
    holding.unlink(missing_ok=True)
    return False


def update_student_copies(notebooks, outdir, log=print, lang=None) -> dict:
    """Bring new and changed notebooks into an existing student copy; return {kind: [paths]}.

    The nbgitpuller rule: a notebook the learner never changed (it is still what this command
    wrote, by OUTDIR/.mha-course/copies.json) is replaced by the new copy; one they edited (or
    one of a copy older than that record) is never touched: the new version lands beside it as
    ``<name>.updated.ipynb`` with a note on top; a missing one (new, or deleted) is written;
    linked files that are missing are added. Kinds: "new", "updated", "beside", "same".
    Every file is staged next to its target and linked in only where nothing is, so nothing a
    learner wrote is overwritten or half-written. OUTDIR without a copy: StudentInputError.
    """
    try:
        outdir = files.check_path_arg(outdir, "OUTDIR", "~/mha-course")
    except files.PathError as err:
        raise StudentInputError(str(err)) from None
    if not (outdir / "notebooks").is_dir():
        raise StudentInputError(f"{outdir} holds no student copy (no {outdir / 'notebooks'}); make one first: "
                                f"mha-course student {outdir}")
    _check_outdir(outdir)
    plan, assets = _plan(notebooks, outdir, lang)
    _refuse_sources_as_targets(plan, notebooks)
    manifest, done, hashes = read_manifest(outdir), {"new": [], "updated": [], "beside": [], "same": []}, {}
    (outdir / MARKER).mkdir(exist_ok=True)
    try:
        for target, text in plan:
            _update_one(target, text, manifest, outdir, done, hashes, log)
        _add_missing_assets(assets, done)
    except OSError as err:
        raise StudentInputError(_os_error_line(err, outdir, "Each file is whole: the old version or the new")) from None
    finally:
        if hashes:
            try:
                _mark(outdir, hashes)
            except OSError:
                pass  # the files are whole; without the record a later --update treats them as edited
    return done


def _update_one(target, text, manifest, outdir, done, hashes, log) -> None:
    """One notebook of ``update_student_copies``: same, new, replaced (ours) or written beside (theirs)."""
    data = text.encode("utf-8")
    kind = _existing(target, text)
    old_sha = manifest.get(str(target.relative_to(outdir)))
    ours = kind == "broken" or (kind == "learner" and old_sha == _sha(target.read_bytes()))
    if kind == "same":
        done["same"].append(target)
        hashes[target] = _sha(data)
        return
    files.remove_stale_temporaries(target.parent)
    tmp = files.stage(target, data, files.file_mode(target))
    try:
        if kind == "new" and _put_new(tmp, target):
            done["new"].append(target)
            hashes[target] = _sha(data)
            log(f"new {target}")
            return
        if ours and _swap_ours(tmp, target, old_sha or _sha(target.read_bytes()),
                               outdir / MARKER / f".updating-{target.name}"):
            done["updated"].append(target)
            hashes[target] = _sha(data)
            log(f"updated {target}")
            return
    finally:
        tmp.unlink(missing_ok=True)
    _write_beside(target, text, manifest, outdir, done, hashes, log)


def _write_beside(target, text, manifest, outdir, done, hashes, log) -> None:
    """The learner edited ``target``: the new version lands as ``<name>.updated.ipynb`` beside it."""
    beside, beside_data, state = _beside(target, text, manifest, outdir)
    if state != "same":
        tmp = files.stage(beside, beside_data, files.new_file_mode())
        try:
            if not (_put_new(tmp, beside) if state == "new" else
                    _swap_ours(tmp, beside, manifest[str(beside.relative_to(outdir))],
                               outdir / MARKER / f".updating-{beside.name}")):
                raise StudentCopyError(f"{beside} changed while it was written; run --update again")
        finally:
            tmp.unlink(missing_ok=True)
    hashes[beside] = _sha(beside_data)
    done["beside"].append(beside)
    log(f"kept your {target} (you edited it); the new version is {beside}")


def _add_missing_assets(assets, done) -> None:
    """Linked files a copy lacks are added; one that is there (the learner's or ours) is left alone."""
    for target, source in sorted(assets.items()):
        if not os.path.lexists(target):
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = files.stage(target, source.read_bytes(), files.new_file_mode())
            try:
                if _put_new(tmp, target):
                    done["new"].append(target)
            finally:
                tmp.unlink(missing_ok=True)


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
