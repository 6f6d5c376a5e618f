"""tools/cli.py: one parser, one subcommand per module, and Ctrl-C as one line, never a traceback."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mha_course.tools import cli

ROOT = Path(__file__).resolve().parents[2]


def test_every_subcommand_is_registered():
    sub = next(a for a in cli.build_parser()._actions if a.dest == "command")
    assert set(sub.choices) == {"start", "execute", "student", "train", "progress"}


def test_no_subcommand_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as err:
        cli.main([])
    assert err.value.code == 2 and "command" in capsys.readouterr().err


def test_an_interruption_is_one_line(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt
    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    sub = next(a for a in parser._actions if a.dest == "command")
    sub.choices["student"].set_defaults(func=interrupted)
    assert cli.main(["student", "somewhere"]) == 130
    assert "interrupted" in capsys.readouterr().err


def test_the_console_script_runs_as_a_module():
    run = subprocess.run([sys.executable, "-m", "mha_course.tools.cli", "--help"], capture_output=True, text=True)
    assert run.returncode == 0 and "execute" in run.stdout and "student" in run.stdout


def test_an_empty_notebook_name_suggests_a_notebook_that_exists_and_is_quoted_in_the_summary(capsys):
    assert cli.main(["execute", ""]) == 1
    err = capsys.readouterr().err
    example = re.search(r"e\.g\. (\S+\.ipynb)", err).group(1)
    assert (ROOT / example).is_file(), f"the example {example} does not exist"
    assert err.rstrip().endswith("failed: ''"), err
