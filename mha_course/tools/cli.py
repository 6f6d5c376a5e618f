"""The mha-course command: the course in JupyterLab, student copies, re-running notebooks, training.

    mha-course start ~/mha-course             # your copies of the course, opened in JupyterLab (tools/start.py)
    mha-course student ~/mha-student          # exercise copies: solutions become stubs (tools/student.py)
    mha-course execute notebooks/*.ipynb      # re-run in place, reproducibly (tools/execute.py)
    mha-course train induction                # ./checkpoints/induction.npz (tools/train.py)
    mha-course progress /home                 # the class: learners x exercises (tools/progress.py)

Each subcommand lives in its own module, which adds its parser; every file they write goes
through tools/files.py (one atomic writer, one path check).
"""
from __future__ import annotations

import argparse
import asyncio
import sys

from .execute import add_execute_command
from .progress import add_progress_command
from .start import add_start_command
from .student import add_student_command
from .train import add_train_command

__all__ = ["main", "build_parser", "COMMANDS"]

COMMANDS = [add_start_command, add_student_command, add_execute_command, add_train_command, add_progress_command]


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of ``mha-course``: one subcommand per entry of COMMANDS."""
    parser = argparse.ArgumentParser(prog="mha-course", description=__doc__.split("\n\n")[0],
                                     epilog="examples:\n" + __doc__.split("\n\n")[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return parser


def main(argv=None) -> int:
    """Run ``mha-course ARGS`` (``argv`` defaults to sys.argv[1:]); return the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C, or SIGTERM for execute
        print(f"mha-course {args.command}: interrupted; each file written so far is whole "
              "(the old version or the new one)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
