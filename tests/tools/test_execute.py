"""`mha-course execute` under attack: no hang, no process left behind, no
notebook lost, one line naming the notebook (and the cell) instead of a traceback.
"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from cli_helpers import read_only, run_subprocess
from nbformat.v4 import new_code_cell, new_notebook

from mha_course.tools import execute

CELLS = {"loop": "while True: pass", "sleep": "import time\ntime.sleep(30)",
         "die": "import os\nos._exit(1)", "raise": "raise ValueError('my bad cell')", "ok": "print(6 * 7)"}


def test_execute_stops_at_timeouts_and_dead_kernels_and_names_notebook_and_cell(tmp_path):
    paths = {}
    for name, src in CELLS.items():
        paths[name] = tmp_path / f"{name}.ipynb"
        nbformat.write(new_notebook(cells=[new_code_cell("x = 1"), new_code_cell(f"# {name} cell\n{src}")]),
                       paths[name])
    (tmp_path / "corrupt.ipynb").write_text('{"cells": [')
    before = {n: p.read_bytes() for n, p in paths.items()}
    args = [*paths.values(), tmp_path / "corrupt.ipynb", tmp_path / "missing.ipynb", "--timeout", "3"]
    run = subprocess.run([sys.executable, "-m", "mha_course.tools.cli", "execute", *map(str, args)],
                         capture_output=True, text=True, timeout=240)  # a hang guard, not a timing
    assert run.returncode == 1, run.stderr
    lines = [ln for ln in run.stderr.splitlines() if ln.startswith("mha-course execute:")]
    expected = {"loop": "cell 1 (`# loop cell`) did not finish within --timeout 3 s",
                "sleep": "cell 1 (`# sleep cell`) did not finish within --timeout 3 s",
                "die": "the kernel died in cell 1 (`# die cell`)",
                "raise": "cell 1 (`# raise cell`) raised ValueError: my bad cell",
                "corrupt": "not a readable notebook", "missing": "the notebook does not exist"}
    for name, message in expected.items():
        assert any(f"{name}.ipynb: {message}" in ln for ln in lines), (name, run.stderr)
    assert f"1 of 7 notebook(s) executed; passed: {paths['ok']}; failed: " in run.stderr
    for name in ("loop", "sleep", "die", "raise"):
        assert paths[name].read_bytes() == before[name]  # a failed notebook is left as it was
    done = nbformat.read(paths["ok"], as_version=4)
    assert done.cells[1].outputs[0].text == "42\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_execute_stops_on_a_signal_and_leaves_the_notebook_as_it_was(tmp_path, sig):
    path = tmp_path / "loop.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("while True: pass")]), path)
    before = path.read_bytes()
    proc = subprocess.Popen([sys.executable, "-m", "mha_course.tools.cli", "execute", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    for _ in range(600):  # until the kernel runs (at most a minute), then a little more
        if proc.poll() is not None or (children.exists() and children.read_text().strip()):
            break
        time.sleep(0.1)
    time.sleep(2)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)  # a hang guard, not a timing
    assert proc.returncode == 130 and "interrupted" in err, err
    assert path.read_bytes() == before


# ---------------------------------------------------------------- limits, processes, files
def write_notebook(path: Path, *sources) -> Path:
    nbformat.write(new_notebook(cells=[new_code_cell(s) for s in sources]), path)
    return path


@pytest.mark.parametrize("args, needle", [(["--timeout", "0"], "--timeout"), (["--timeout", "-5"], "--timeout"),
                                          (["--retries", "-1"], "--retries"), (["--timeout", "x"], "--timeout")],
                         ids=["timeout-0", "timeout-negative", "retries-negative", "timeout-text"])
def test_a_limit_that_means_no_limit_is_refused(tmp_path, args, needle):
    path = write_notebook(tmp_path / "ok.ipynb", "print(1)")
    before = path.read_bytes()
    run = run_subprocess("execute", [path, *args], timeout=120)
    assert run.returncode == 2 and needle in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert path.read_bytes() == before


@pytest.mark.parametrize("kwargs", [{"timeout": 0}, {"timeout": -5}, {"retries": -1}, {"timeout": True}])
def test_execute_notebook_refuses_them_too(tmp_path, kwargs):
    with pytest.raises(ValueError, match="must be a whole number"):
        execute.execute_notebook(write_notebook(tmp_path / "ok.ipynb", "print(1)"), **kwargs)


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, or a pid now taken by another program, is not ours running)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z" and "sleep" in stat


def test_a_timed_out_cells_processes_are_killed_with_it(tmp_path):
    pids = tmp_path / "pids.txt"
    path = write_notebook(tmp_path / "spawn.ipynb", (
        "import subprocess, time\n"
        "a = subprocess.Popen(['sleep', '301'])\n"                            # in the kernel's group
        "b = subprocess.Popen(['sleep', '302'], start_new_session=True)\n"   # one that left it
        "c = subprocess.Popen('sleep 303 & wait', shell=True)\n"              # a grandchild
        f"open({str(pids)!r}, 'w').write(f'{{a.pid}} {{b.pid}} {{c.pid}}')\n"
        "time.sleep(60)"))
    run = run_subprocess("execute", [path, "--timeout", "5"], timeout=240)
    assert run.returncode == 1 and "did not finish within --timeout 5 s" in run.stderr, run.stderr
    started = [int(p) for p in pids.read_text().split()]
    time.sleep(0.5)
    left = [p for p in started if alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)  # clean up what the old code left, then fail
    assert not left, f"processes of the timed-out cell still run: {left}"


def test_a_symlinked_notebook_is_written_through_the_link(tmp_path):
    (tmp_path / "shared").mkdir()
    real = write_notebook(tmp_path / "shared" / "real.ipynb", "print(6 * 7)")
    link = tmp_path / "link.ipynb"
    link.symlink_to("shared/real.ipynb")
    run = run_subprocess("execute", [link], timeout=240)
    assert run.returncode == 0, run.stderr
    assert link.is_symlink() and os.readlink(link) == "shared/real.ipynb"
    assert nbformat.read(real, as_version=4).cells[0].outputs[0].text == "42\n"


def test_an_executed_notebook_keeps_its_mode(tmp_path):
    paths = [write_notebook(tmp_path / f"m{oct(m)}.ipynb", "print(1)") for m in (0o644, 0o664, 0o640)]
    for p, m in zip(paths, (0o644, 0o664, 0o640)):
        os.chmod(p, m)
    run = run_subprocess("execute", paths, timeout=300)
    assert run.returncode == 0, run.stderr
    assert [os.stat(p).st_mode & 0o777 for p in paths] == [0o644, 0o664, 0o640]


def test_a_killed_runs_temporary_is_removed_by_the_next_execute(tmp_path):
    path = write_notebook(tmp_path / "x.ipynb", "print(1)")
    run = run_subprocess("execute", [path], prelude="os.rename = lambda a, b: os.kill(os.getpid(), signal.SIGKILL)",
                         timeout=240)
    assert run.returncode == -9
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # the killed run left its temporary
    assert run_subprocess("execute", [path], timeout=240).returncode == 0
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_read_only_folder_is_one_line_and_the_batch_goes_on(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    stuck = write_notebook(locked / "stuck.ipynb", "print(1)")
    ok = write_notebook(tmp_path / "ok.ipynb", "print(2)")
    before = stuck.read_bytes()
    read_only(locked, True)
    try:
        run = run_subprocess("execute", [stuck, ok], timeout=300)
    finally:
        read_only(locked, False)
    lines = [ln for ln in run.stderr.splitlines() if ln.startswith("mha-course execute:")]
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert len(lines) == 1 and str(stuck) in lines[0] and "cannot write" in lines[0], run.stderr
    assert "1 of 2 notebook(s) executed" in run.stderr and stuck.read_bytes() == before
    assert nbformat.read(ok, as_version=4).cells[0].outputs[0].text == "2\n"


def test_a_file_size_limit_is_one_line_and_the_batch_goes_on(tmp_path):
    big = write_notebook(tmp_path / "big.ipynb", "print('x' * 400_000)")
    small = write_notebook(tmp_path / "small.ipynb", "print(3)")
    before = big.read_bytes()
    run = run_subprocess("execute", [big, small], limit_bytes=200_000, timeout=300)
    lines = [ln for ln in run.stderr.splitlines() if ln.startswith("mha-course execute:")]
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert len(lines) == 1 and str(big) in lines[0] and "disk space" in lines[0], run.stderr
    assert big.read_bytes() == before and nbformat.read(small, as_version=4).cells[0].outputs[0].text == "3\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


# ----------------------------------------------------------------------------- a save while it runs
def test_a_save_that_lands_while_it_runs_is_kept_and_the_result_written_beside(tmp_path):
    """The notebook's own cell saves it (as JupyterLab would, mid-run): that save stays, the run goes beside."""
    path = tmp_path / "nb.ipynb"
    nb = new_notebook(cells=[new_code_cell("import pathlib\np = pathlib.Path('nb.ipynb')\n"
                                           "p.write_text(p.read_text().replace('MARKER', 'SAVED'))"),
                             new_code_cell("print(6 * 7)  # MARKER")])
    nbformat.write(nb, path)
    run = run_subprocess("execute", [path], timeout=240)  # a hang guard, not a timing
    assert run.returncode == 1, run.stderr
    aside = tmp_path / "nb.executed.ipynb"
    assert f"{path}: it changed on disk while it ran" in run.stderr and str(aside) in run.stderr, run.stderr
    saved = path.read_text()
    assert "SAVED" in saved and "MARKER" not in saved and '"outputs": []' in saved  # the learner's save, as saved
    done = nbformat.read(aside, as_version=4)
    assert done.cells[1].outputs[0].text == "42\n" and "MARKER" in done.cells[1].source
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left


def test_write_back_replaces_only_what_was_read(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_bytes(b"old")
    assert execute.write_back(path, b"old", b"new") is None and path.read_bytes() == b"new"
    aside = execute.write_back(path, b"old", b"newer")  # the file holds "new" now, not what was read
    assert aside == tmp_path / "nb.executed.ipynb" and aside.read_bytes() == b"newer" and path.read_bytes() == b"new"
    again = execute.write_back(path, b"old", b"newest")
    assert again == tmp_path / "nb.executed-2.ipynb" and aside.read_bytes() == b"newer"  # no copy replaced
    path.unlink()
    gone = execute.write_back(path, b"new", b"after delete")
    assert gone.read_bytes() == b"after delete" and not path.exists()  # a deleted notebook is not brought back
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nb.executed-2.ipynb", "nb.executed-3.ipynb",
                                                         "nb.executed.ipynb"]


# ----------------------------------------------------------------------------- a kernel killed mid-run
@pytest.mark.parametrize("how", ["os.kill(os.getpid(), signal.SIGKILL)", "os._exit(3)"])
def test_a_kernel_killed_mid_run_ends_that_notebook_at_once_naming_it_and_the_cell(tmp_path, how):
    """With the default --timeout 600 the run must still end at once: the test's own guard (240 s) would
    stop a run that waited for the cell timeout, as the intermittent hang once did."""
    dead = write_notebook(tmp_path / "dead.ipynb", f"# the kernel dies here\nimport os, signal\n{how}")
    ok = write_notebook(tmp_path / "ok.ipynb", "print(6 * 7)")
    before = dead.read_bytes()
    run = run_subprocess("execute", [dead, ok], timeout=240)  # a hang guard, not a timing
    assert run.returncode == 1, run.stderr
    lines = [ln for ln in run.stderr.splitlines() if ln.startswith("mha-course execute:")]
    assert lines == [f"mha-course execute: {dead}: the kernel died in cell 0 (`# the kernel dies here`) "
                     "(os._exit, a crash or out of memory)"], run.stderr
    assert dead.read_bytes() == before
    assert nbformat.read(ok, as_version=4).cells[0].outputs[0].text == "42\n"  # the next notebook still runs
