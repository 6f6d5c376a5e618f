"""The ``mha-course`` command: re-executing the notebooks and writing student copies.

    mha-course execute notebooks/*.ipynb     # re-run in place, reproducibly
    mha-course student ~/mha-student          # exercise copies: solutions become stubs

Re-execution pins BLAS to one thread (``MHA_COURSE_THREADS`` changes that), runs nbclient's
own asynchronous kernel manager on this very interpreter (never a foreign ``python3``
kernelspec), stops a cell at ``--timeout`` and notices a dead kernel at once.

Every file is written to a temporary file in its own folder and then ``os.replace``d into
place, so an interrupted run (Ctrl-C, a kill, a full disk) leaves each file whole: either
the old one or the new one, never a truncated one.
"""
from __future__ import annotations

import argparse
import ast
import asyncio
import copy
import errno
import json
import os
import re
import signal
import sys
import tempfile
import textwrap
import time
from pathlib import Path

__all__ = ["main", "execute_notebook", "stub_solutions", "student_notebook", "write_student_copies",
           "StudentCopyError", "StudentInputError", "NotebookRunError", "COMMANDS"]

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def thread_env(threads=None) -> dict:
    """{BLAS variable: count}: ``threads``, else $MHA_COURSE_THREADS, else 1 (reproducible last bits).

    >>> thread_env(2)["OMP_NUM_THREADS"]
    '2'
    """
    value = str(threads if threads is not None else os.environ.get("MHA_COURSE_THREADS", "1"))
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"MHA_COURSE_THREADS={value!r} must be a whole number >= 1, e.g. 2")
    return {var: value for var in THREAD_VARS}


PINNED_ENV = thread_env(1)


# ---------------------------------------------------------------------------------------
# Writing files: a temporary file in the same folder, then os.replace
# ---------------------------------------------------------------------------------------

def _stage(target: Path, data: bytes) -> Path:
    """Write ``data`` to a hidden temporary file next to ``target``; return its path."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def atomic_write(target, data: bytes) -> None:
    """Replace ``target`` by ``data`` in one step: readers see the old file or the new one."""
    target = Path(target)
    tmp = _stage(target, data)
    try:
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _exclusive_write(target: Path, data: bytes) -> None:
    """Write a new file ``target``; refuse (FileExistsError) if it exists: backups are never replaced."""
    with open(target, "xb") as f:
        try:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        except BaseException:
            target.unlink(missing_ok=True)  # only our own, incomplete file
            raise


# ---------------------------------------------------------------------------------------
# mha-course execute
# ---------------------------------------------------------------------------------------

class NotebookRunError(RuntimeError):
    """A notebook could not be executed: one line naming the notebook (and the cell)."""


class _CellRaised(NotebookRunError):
    """A cell raised: running it again would raise again, so it is never retried."""


def _current_env_kernel_manager(workdir: str):
    """An AsyncKernelManager whose kernel is ``sys.executable -m ipykernel_launcher``.

    Asynchronous, as nbclient expects: a blocking manager inside nbclient's event loop cannot
    see a timeout or a dead kernel. The kernelspec and the kernel's IPC sockets live in
    ``workdir`` (a temporary folder).
    """
    from jupyter_client import AsyncKernelManager
    from jupyter_client.kernelspec import KernelSpecManager

    spec_dir = Path(workdir) / "kernels" / "current"
    spec_dir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec_dir / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": "current", "language": "python"}))
    ksm = KernelSpecManager(kernel_dirs=[str(spec_dir.parent)], ensure_native_kernel=False)
    # IPC sockets in ``workdir``, not TCP ports: two kernels started at once can never pick the
    # same port (and so never read each other's messages)
    return AsyncKernelManager(kernel_name="current", kernel_spec_manager=ksm, transport="ipc",
                              ip=str(Path(workdir) / "kernel"))


def _cell_name(nb, index) -> str:
    """'cell 7 (`# Exercise 2.1: ...`)': the index and the first line of its source."""
    if index is None or not 0 <= index < len(nb.cells):
        return "kernel start-up"
    first = next((ln for ln in nb.cells[index].source.splitlines() if ln.strip()), "")
    return f"cell {index} (`{first[:60]}`)"


def _read_notebook(path: Path, what: str = "notebook"):
    """nbformat.read, with one line naming the path instead of a traceback."""
    import nbformat

    if not path.is_file():
        state = "is a folder" if path.is_dir() else "does not exist"
        raise NotebookRunError(f"{path}: the {what} {state}; give the path of an .ipynb file")
    try:
        nb = nbformat.read(path, as_version=4)
        if not isinstance(nb.get("cells"), list):
            raise ValueError("it has no list of cells")
        return nb
    except Exception as err:  # NotJSONError, UnicodeDecodeError, a JSON that is no notebook, ...
        reason = str(err).splitlines()[0][:120] if str(err) else type(err).__name__
        raise NotebookRunError(f"{path}: not a readable {what} ({reason}); restore it from git or "
                               "save it again from JupyterLab") from None


def _run_client(nb, path: Path, timeout: int) -> None:
    """Execute ``nb`` in a fresh kernel; NotebookRunError names the notebook and the failing cell."""
    from nbclient import NotebookClient

    current = {"index": None}
    with tempfile.TemporaryDirectory() as tmp:
        client = NotebookClient(
            nb, timeout=timeout, km=_current_env_kernel_manager(tmp), record_timing=False,
            resources={"metadata": {"path": str(path.parent)}}, shutdown_kernel="immediate",
            on_cell_start=lambda cell, cell_index: current.update(index=cell_index))
        try:
            client.execute()
        except Exception as err:
            # Ctrl-C / SIGTERM: before the kernel runs, our handler records it; while it runs,
            # nbclient's own handler shuts the kernel down (and leaves this future behind),
            # which would otherwise read as a dead kernel
            if _SIGNALLED or getattr(client, "_async_cleanup_kernel_future", None) is not None:
                raise KeyboardInterrupt from None
            raise _run_error(err, nb, path, timeout, current["index"]) from None


def _run_error(err: Exception, nb, path: Path, timeout: int, index) -> Exception:
    """The one-line NotebookRunError for what nbclient raised while running cell ``index``."""
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    cell = _cell_name(nb, index)
    if isinstance(err, CellTimeoutError):
        return NotebookRunError(f"{path}: {cell} did not finish within --timeout {timeout} s; it was stopped")
    if isinstance(err, DeadKernelError):
        return NotebookRunError(f"{path}: the kernel died in {cell} (os._exit, a crash or out of memory)")
    if isinstance(err, CellExecutionError):
        evalue = str(getattr(err, "evalue", ""))[:200]
        return _CellRaised(f"{path}: {cell} raised {getattr(err, 'ename', 'an error')}: {evalue}")
    if isinstance(err, RuntimeError):  # the kernel did not start
        return NotebookRunError(f"{path}: the kernel did not start ({err})")
    return err


def execute_notebook(path, timeout: int = 600, retries: int = 0) -> None:
    """Execute the notebook at ``path`` top to bottom and write it back (atomically) with its outputs.

    Cells tagged ``raises-exception`` may raise. Any other error, a cell running past
    ``timeout`` seconds or a dead kernel raises NotebookRunError naming the notebook and the
    cell; the file is then left as it was. ``retries`` extra attempts follow a timeout or a
    dead kernel (not a raising cell, which would raise again).
    """
    import nbformat

    path = Path(path)
    os.environ.update(thread_env())
    os.environ.pop("MPLBACKEND", None)
    for attempt in range(retries + 1):
        nb = _read_notebook(path)
        try:
            _run_client(nb, path, timeout)
            break
        except NotebookRunError as err:
            if attempt == retries or isinstance(err, _CellRaised):
                raise
            print(f"{err}; attempt {attempt + 1} of {retries + 1}, trying again", file=sys.stderr)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    atomic_write(path, (nbformat.writes(nb) + "\n").encode("utf-8"))


_SIGNALLED: list = []  # the signals received: what looks like a dead kernel after one is our stop


def _raise_on_signal(signum, frame):
    _SIGNALLED.append(signum)
    raise KeyboardInterrupt(f"signal {signum}")  # unwinds nbclient, which shuts its kernel down


def _cmd_execute(args) -> int:
    try:
        thread_env()
    except ValueError as err:
        print(f"mha-course execute: {err}", file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _raise_on_signal)
    passed, failed = [], []
    for nb in args.notebooks:
        try:
            execute_notebook(nb, timeout=args.timeout, retries=args.retries)
        except NotebookRunError as err:
            print(f"mha-course execute: {err}", file=sys.stderr)
            failed.append(nb)
            continue
        passed.append(nb)
        print(f"executed {nb}")
    if len(args.notebooks) > 1 or failed:
        print(f"{len(passed)} of {len(args.notebooks)} notebook(s) executed"
              + (f"; passed: {', '.join(map(str, passed))}" if passed else "")
              + (f"; failed: {', '.join(map(str, failed))}" if failed else ""),
              file=sys.stderr if failed else sys.stdout)
    return 1 if failed else 0


def _execute_parser(sub) -> None:
    ex = sub.add_parser("execute", help="re-execute notebooks in place, reproducibly")
    ex.add_argument("notebooks", nargs="+", help="notebook files to execute")
    ex.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    ex.add_argument("--retries", type=int, default=0,
                    help="extra attempts after a failure such as a timeout (default 0)")
    ex.set_defaults(func=_cmd_execute)


# ---------------------------------------------------------------------------------------
# Student copies: every ### BEGIN SOLUTION ... ### END SOLUTION block becomes a stub
# ---------------------------------------------------------------------------------------

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


def _student_text(path: Path) -> tuple:
    """(the student copy of the notebook at ``path`` as text, the source notebook); bad source: one line."""
    import nbformat

    try:
        nb = _read_notebook(path, "source notebook")
        return nbformat.writes(student_notebook(nb)) + "\n", nb
    except NotebookRunError as err:
        raise StudentInputError(str(err)) from None
    except StudentCopyError as err:
        raise StudentInputError(f"{path}: {err}; fix the solution markers in that cell") from None


def _plan(notebooks, outdir: Path):
    """[(target, content: str)] for the notebooks, and {target: source Path} for the files they link."""
    plan, assets, seen = [], {}, {}
    for path in map(Path, notebooks):
        target = outdir / "notebooks" / path.name
        if target in seen:
            what = "twice" if _same_file(seen[target], path) else f"and {seen[target]} both"
            raise StudentInputError(f"{path} is named {what} for {target}; name each notebook once, "
                                    "and never two with the same file name")
        seen[target] = path
        text, nb = _student_text(path)
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
    """What is at ``target``: 'new' (nothing), 'same' (this very copy), 'learner', or 'broken' (no notebook)."""
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
        return "learner" if isinstance(json.loads(decoded).get("cells"), list) else "broken"
    except (ValueError, AttributeError):
        return "broken"


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


def _os_error_line(err: OSError, path) -> str:
    """One line for a failed write: the path, the reason and what to do."""
    where = err.filename or path
    if err.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
        todo = "free some disk space (or raise the file size limit) and run again"
    elif err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        todo = "choose a folder you can write to, e.g. ~/mha-student"
    else:
        todo = "check that path, or choose another OUTDIR"
    return f"cannot write {where}: {err.strerror or err}; {todo}. Nothing was changed"


def _clash_error(clash) -> StudentCopyError:
    names = "\n".join(f"  {t}" for t in clash)
    return StudentCopyError(
        f"{len(clash)} file(s) already exist and differ from a fresh student copy; "
        f"nothing was written, your work is safe:\n{names}\n"
        "Run again with --overwrite to replace them (a timestamped backup of each is kept), "
        "or choose another folder.")


def _writes(notebooks, outdir: Path, overwrite: bool):
    """[(target, bytes, kind)] to write; kind 'new', 'learner' or 'broken' (the last two backed up first)."""
    _check_outdir(outdir)
    plan, assets = _plan(notebooks, outdir)
    _refuse_sources_as_targets(plan, notebooks)
    kinds = [(t, text, _existing(t, text)) for t, text in plan]
    writes = [(t, text.encode("utf-8"), kind) for t, text, kind in kinds if kind != "same"]
    clash = [t for t, _, kind in writes if kind == "learner"]
    if clash and not overwrite:
        raise _clash_error(clash)
    writes += [(t, s.read_bytes(), "new") for t, s in sorted(assets.items())
               if not t.exists() and not t.is_symlink()]
    return [t for t, _ in plan] + sorted(assets), writes


def _stage_all(writes) -> list:
    """Temporary files for every write, folders made as needed; on any failure none is left."""
    staged = []
    try:
        for target, data, _ in writes:
            target.parent.mkdir(parents=True, exist_ok=True)
            staged.append(_stage(target, data))
    except BaseException:
        for tmp in staged:
            tmp.unlink(missing_ok=True)
        raise
    return staged


def _commit(writes, staged, outdir: Path, log) -> None:
    """Back up what is replaced (into a new folder, exclusive writes), then os.replace each file."""
    folder = _fresh_backup_dir(outdir) if any(kind != "new" for _, _, kind in writes) else None
    for target, _, kind in writes:
        if kind != "new":
            dest = folder / target.relative_to(outdir)
            dest.parent.mkdir(parents=True, exist_ok=True)
            _exclusive_write(dest, target.read_bytes())
            note = " (it was not a valid notebook: an interrupted write? not learner work)" if kind == "broken" else ""
            log(f"backed up {target} -> {dest}{note}")
    for (target, _, _), tmp in zip(writes, staged):
        os.replace(tmp, target)
        log(f"wrote {target}")


def write_student_copies(notebooks, outdir, overwrite: bool = False, log=print) -> list:
    """Write OUTDIR/notebooks/<name> for each notebook, plus the files they link; return paths.

    Never replaces a learner's file: if a notebook copy exists and differs, nothing at all
    is written and StudentCopyError names the files, unless ``overwrite``; then each replaced
    file is first copied to a new OUTDIR/backups/<timestamp>/. A copy that is not a valid
    notebook (an interrupted write) is no learner work: it is backed up and replaced. Linked
    files that exist are kept. Bad sources or targets raise StudentInputError; every file is
    staged next to its target and ``os.replace``d, so a failure leaves each file whole.
    """
    outdir = Path(outdir).expanduser()
    paths, writes = _writes(notebooks, outdir, overwrite)
    try:
        staged = _stage_all(writes)
    except OSError as err:
        raise StudentInputError(_os_error_line(err, outdir)) from None
    try:
        _commit(writes, staged, outdir, log)
    except OSError as err:
        raise StudentInputError(_os_error_line(err, outdir).replace("Nothing was changed",
                                                                  "Files not yet replaced are unchanged"))
    finally:
        for tmp in staged:
            tmp.unlink(missing_ok=True)
    return paths


def _default_notebooks() -> list:
    here = Path(__file__).resolve().parent.parent / "notebooks"
    for folder in (here, Path.cwd() / "notebooks"):
        found = sorted(folder.glob("*.ipynb"))
        if found:
            return found
    return []


def _cmd_student(args) -> int:
    notebooks = args.notebooks or _default_notebooks()
    if not notebooks:
        print("mha-course student: no notebooks found; pass them with --notebooks notebooks/*.ipynb",
              file=sys.stderr)
        return 2
    try:
        paths = write_student_copies(notebooks, args.outdir, overwrite=args.overwrite)
    except StudentInputError as err:
        print(f"mha-course student: {err}", file=sys.stderr)
        return 2
    except StudentCopyError as err:
        print(f"mha-course student: {err}", file=sys.stderr)
        return 1
    print(f"student copies ready: {len(notebooks)} notebook(s) and {len(paths) - len(notebooks)} linked "
          f"file(s) in {Path(args.outdir).expanduser()}")
    return 0


def _student_parser(sub) -> None:
    st = sub.add_parser("student", help="write student copies: solution blocks become stubs")
    st.add_argument("outdir", help="folder for the copies (notebooks go to OUTDIR/notebooks/)")
    st.add_argument("--notebooks", nargs="+", default=None,
                    help="notebooks to copy (default: the course's notebooks/*.ipynb)")
    st.add_argument("--overwrite", action="store_true",
                    help="replace existing copies, keeping a timestamped backup of each")
    st.set_defaults(func=_cmd_student)


# ---------------------------------------------------------------------------------------
# The command line: one entry per subcommand (each adds its parser and sets ``func``)
# ---------------------------------------------------------------------------------------

def _train_parser(sub) -> None:
    from .lessons.circuits import save_trajectories  # `train phase_change`: notebook 14's observed runs
    from .train import add_train_command  # `train TASK`: lives beside the model it trains
    add_train_command(sub, {"phase_change": lambda out: save_trajectories(out, progress=True)})


COMMANDS = [_execute_parser, _student_parser, _train_parser]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mha-course", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C, or SIGTERM for execute
        print(f"mha-course {args.command}: interrupted; each file written so far is whole "
              "(the old version or the new one)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
