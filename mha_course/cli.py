"""The ``mha-course`` command: re-executing the notebooks (and, later, student copies).

    mha-course execute notebooks/*.ipynb     # re-run in place, reproducibly

Re-execution pins BLAS to one thread, runs the kernel on this very interpreter (never a
foreign ``python3`` kernelspec), stores outputs in order, and retries a notebook whose
kernel died or timed out (not one whose cell raised an unexpected error).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

__all__ = ["main", "execute_notebook"]

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mha-course", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("execute", help="re-execute notebooks in place, reproducibly")
    ex.add_argument("notebooks", nargs="+", help="notebook files to execute")
    ex.add_argument("--timeout", type=int, default=600, help="seconds per cell (default 600)")
    ex.add_argument("--retries", type=int, default=2,
                    help="extra attempts when the kernel dies or times out (default 2)")
    ex.set_defaults(func=_cmd_execute)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
