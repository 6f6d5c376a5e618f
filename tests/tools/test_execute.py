"""`mha-course execute` under attack (issues 9 and 20): no hang, no process left behind, no
notebook lost, one line naming the notebook (and the cell) instead of a traceback.
"""
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

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
