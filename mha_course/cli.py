"""The ``mha-course`` command: re-executing the notebooks and writing student copies.

    mha-course execute notebooks/*.ipynb     # re-run in place, reproducibly
    mha-course student ~/mha-student          # exercise copies: solutions become stubs

Re-execution pins BLAS to one thread, runs the kernel on this very interpreter (never a
foreign ``python3`` kernelspec), stores outputs in order, and retries a notebook whose
kernel died or timed out (not one whose cell raised an unexpected error).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["main", "execute_notebook", "stub_solutions", "student_notebook", "write_student_copies",
           "StudentCopyError"]

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
PINNED_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _current_env_kernel_manager(workdir: str):
    """A KernelManager whose kernel is ``sys.executable -m ipykernel_launcher``."""
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager

    spec_dir = Path(workdir) / "kernels" / "current"
    spec_dir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec_dir / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": "current", "language": "python"}))
    ksm = KernelSpecManager(kernel_dirs=[str(spec_dir.parent)], ensure_native_kernel=False)
    return KernelManager(kernel_name="current", kernel_spec_manager=ksm)


def execute_notebook(path, timeout: int = 600, retries: int = 2) -> None:
    """Execute the notebook at ``path`` top to bottom and write it back with its outputs.

    Cells tagged ``raises-exception`` may raise; any other error stops with the cell shown.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    path = Path(path)
    os.environ.update(PINNED_ENV)
    os.environ.pop("MPLBACKEND", None)
    for attempt in range(1, retries + 2):
        nb = nbformat.read(path, as_version=4)
        with tempfile.TemporaryDirectory() as tmp:
            client = NotebookClient(nb, timeout=timeout, km=_current_env_kernel_manager(tmp),
                                    resources={"metadata": {"path": str(path.parent)}},
                                    record_timing=False)
            try:
                client.execute()
            except CellExecutionError:
                raise
            except (CellTimeoutError, DeadKernelError, RuntimeError) as err:
                print(f"{path}: attempt {attempt} failed ({type(err).__name__}: {err})",
                      file=sys.stderr)
                if attempt > retries:
                    raise
                continue
        nb.metadata["kernelspec"] = dict(KERNELSPEC)
        nbformat.write(nb, path)
        print(f"executed {path}")
        return


def _cmd_execute(args) -> int:
    for nb in args.notebooks:
        execute_notebook(nb, timeout=args.timeout, retries=args.retries)
    return 0


# ---------------------------------------------------------------------------------------
# Student copies: every ### BEGIN SOLUTION ... ### END SOLUTION block becomes a stub
# ---------------------------------------------------------------------------------------

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
_EXERCISE = re.compile(r"^\s*#\s*(Exercise\s+\d+(?:\.\d+)*)\s*:\s*(.*?)\s*$")
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|src=[\"']([^\"']+)[\"']")


class StudentCopyError(RuntimeError):
    """A student copy would replace existing files, or a notebook's solution blocks are broken."""


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


def _stub(block: list, indent: str, label: str) -> list:
    """The two lines that replace one solution block (its lines without the markers)."""
    code = [ln for ln in block if ln.strip() and not ln.strip().startswith("#")]
    hint = next((ln.strip()[1:].strip() for ln in block[:1] if ln.strip().startswith("#")), "")
    size = f"about {len(code)} line{'s' if len(code) != 1 else ''}"
    quoted = label.replace("\\", "\\\\").replace('"', '\\"')
    return [f"{indent}# Your code here ({size}){'. Hint: ' + hint if hint else ''}",
            f'{indent}raise NotImplementedError("{quoted}")']


def stub_solutions(source: str, label: str = "") -> str:
    """Replace every solution block of a cell's source by a stub, keeping its indentation.

    The block, markers included, becomes a hint comment (the solution's size, and its first
    comment line when it starts with one) and ``raise NotImplementedError("<label>")``.

    >>> src = "def f(x):\\n    ### BEGIN SOLUTION\\n    return 2 * x\\n    ### END SOLUTION"
    >>> print(stub_solutions(src, "Exercise 1.1: double"))
    def f(x):
        # Your code here (about 1 line)
        raise NotImplementedError("Exercise 1.1: double")
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
            out += _stub(block, indent, label)
            block = None
        elif block is not None:
            block.append(line)
        else:
            out.append(line)
    if block is not None:
        raise StudentCopyError(f"{BEGIN!r} without {END!r} in the cell of {label!r}")
    return "\n".join(out)


def _clear(cell) -> None:
    cell.outputs = []
    cell.execution_count = None


def student_notebook(nb):
    """A new notebook node: solution blocks stubbed; exercise and check cells' outputs cleared.

    A check cell is the code cell right after an exercise cell when it uses ``check.`` or
    ``assert``. Every other cell, output and metadata is kept as it is; ``nb`` is not changed.
    """
    nb = copy.deepcopy(nb)
    after_exercise = False
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if BEGIN in cell.source:
            cell.source = stub_solutions(cell.source)
            _clear(cell)
            after_exercise = True
            continue
        if after_exercise and ("check." in cell.source or "assert" in cell.source):
            _clear(cell)
        after_exercise = False
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


def _plan(notebooks, outdir: Path):
    """[(target, content: str or source Path)] for the notebooks and the files they link."""
    import nbformat

    plan, assets = [], {}
    for path in notebooks:
        path = Path(path)
        nb = nbformat.read(path, as_version=4)
        plan.append((outdir / "notebooks" / path.name, nbformat.writes(student_notebook(nb)) + "\n"))
        for rel in _linked_files(nb, path.parent):
            target = Path(os.path.normpath(outdir / "notebooks" / rel))
            if outdir.resolve() in target.resolve().parents:
                assets[target] = (path.parent / rel).resolve()
    return plan, assets


def _fresh_stamp(outdir: Path) -> str:
    """YYYYmmdd-HHMMSS, with -2, -3, ... appended if that backup folder already exists."""
    stamp = base = time.strftime("%Y%m%d-%H%M%S")
    n = 1
    while (outdir / "backups" / stamp).exists():
        n += 1
        stamp = f"{base}-{n}"
    return stamp


def _backup(target: Path, outdir: Path, stamp: str) -> Path:
    dest = outdir / "backups" / stamp / target.relative_to(outdir)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(target, dest)
    return dest


def write_student_copies(notebooks, outdir, overwrite: bool = False, log=print) -> list:
    """Write OUTDIR/notebooks/<name> for each notebook, plus the files they link; return paths.

    Never replaces a learner's file: if a notebook copy exists and differs, nothing at all
    is written and StudentCopyError names the files, unless ``overwrite``; then each replaced
    file is first copied to OUTDIR/backups/<timestamp>/. Linked files that exist are kept.
    """
    outdir = Path(outdir).expanduser()
    plan, assets = _plan(notebooks, outdir)
    changed = [(t, text) for t, text in plan if not t.exists() or t.read_text(encoding="utf-8") != text]
    clash = [t for t, _ in changed if t.exists()]
    if clash and not overwrite:
        names = "\n".join(f"  {t}" for t in clash)
        raise StudentCopyError(
            f"{len(clash)} file(s) already exist and differ from a fresh student copy; "
            f"nothing was written, your work is safe:\n{names}\n"
            "Run again with --overwrite to replace them (a timestamped backup of each is kept), "
            "or choose another folder.")
    stamp = _fresh_stamp(outdir) if clash else ""
    for target, text in changed:
        if target.exists():
            log(f"backed up {target} -> {_backup(target, outdir, stamp)}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        log(f"wrote {target}")
    for target, source in sorted(assets.items()):
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
            log(f"copied {target}")
    return [t for t, _ in plan] + sorted(assets)


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
    except StudentCopyError as err:
        print(f"mha-course student: {err}", file=sys.stderr)
        return 1
    print(f"student copies ready: {len(notebooks)} notebook(s) and {len(paths) - len(notebooks)} linked "
          f"file(s) in {Path(args.outdir).expanduser()}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mha-course", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("execute", help="re-execute notebooks in place, reproducibly")
    ex.add_argument("notebooks", nargs="+", help="notebook files to execute")
    ex.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    ex.add_argument("--retries", type=int, default=2,
                    help="extra attempts when the kernel dies or times out (default 2)")
    ex.set_defaults(func=_cmd_execute)
    st = sub.add_parser("student", help="write student copies: solution blocks become stubs")
    st.add_argument("outdir", help="folder for the copies (notebooks go to OUTDIR/notebooks/)")
    st.add_argument("--notebooks", nargs="+", default=None,
                    help="notebooks to copy (default: the course's notebooks/*.ipynb)")
    st.add_argument("--overwrite", action="store_true",
                    help="replace existing copies, keeping a timestamped backup of each")
    st.set_defaults(func=_cmd_student)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
