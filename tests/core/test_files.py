"""The package's one atomic writer (mha_course/_files.py): whole or old, modes, links, temporaries.

``tools``' commands and ``lessons.checkpoints`` write through it; a test below holds that the
checkpoint writer and the command line give a new file the same mode.
"""
import os
import stat
import subprocess
import sys

import numpy as np
import pytest

from mha_course import _files as files


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_atomic_write_replaces_whole_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "x.ipynb"
    target.write_bytes(b"old")
    files.atomic_write(target, b"new")
    assert target.read_bytes() == b"new" and os.listdir(tmp_path) == ["x.ipynb"]


def test_a_symlink_is_written_through_to_the_real_file(tmp_path):
    (tmp_path / "shared").mkdir()
    real = tmp_path / "shared" / "real.ipynb"
    real.write_bytes(b"old")
    link = tmp_path / "link.ipynb"
    link.symlink_to("shared/real.ipynb")
    assert files.atomic_write(link, b"new") == real
    assert link.is_symlink() and real.read_bytes() == b"new"


@pytest.mark.parametrize("old_mode", [0o644, 0o664, 0o600])
def test_the_old_mode_is_kept(tmp_path, old_mode):
    target = tmp_path / "x.ipynb"
    target.write_bytes(b"old")
    os.chmod(target, old_mode)
    files.atomic_write(target, b"new")
    assert mode(target) == old_mode


def test_a_new_file_gets_the_umask_mode_not_0600(tmp_path):
    old = os.umask(0o022)
    try:
        assert files.new_file_mode() == 0o644
        files.atomic_write(tmp_path / "new.ipynb", b"x")
        assert mode(tmp_path / "new.ipynb") == 0o644
        os.umask(0o002)
        assert files.new_file_mode() == 0o664
    finally:
        os.umask(old)


def test_a_killed_runs_temporaries_are_removed_by_the_next_write_and_a_live_ones_kept(tmp_path):
    dead = tmp_path / f".x.ipynb.pid{dead_pid()}.abcd1234.tmp"
    live = tmp_path / f".x.ipynb.pid{os.getppid()}.abcd1234.tmp"  # our parent is running
    legacy_old, legacy_new = tmp_path / ".x.ipynb.k2j4l5m6.tmp", tmp_path / ".y.ipynb.k2j4l5m6.tmp"
    for p in (dead, live, legacy_old, legacy_new):
        p.write_bytes(b"partial")
    os.utime(legacy_old, (0, 0))  # an hour and more old: left by a killed run of the previous writer
    files.atomic_write(tmp_path / "x.ipynb", b"new")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, legacy_new.name, "x.ipynb"])


def test_commit_keeps_a_file_that_appears_while_replacing(tmp_path):
    target = tmp_path / "x.ipynb"
    target.write_bytes(b"learner v1")
    kept = []
    tmp = files.stage(target, b"fresh copy")

    def keep(t):
        dest = tmp_path / f"backup{len(kept)}"
        os.rename(t, dest)
        kept.append(dest)
        if len(kept) == 1:
            t.write_bytes(b"learner v2")  # a save that lands right after the first move
        return dest

    files.commit(tmp, target, keep=keep)
    assert target.read_bytes() == b"fresh copy"
    assert [p.read_bytes() for p in kept] == [b"learner v1", b"learner v2"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["backup0", "backup1", "x.ipynb"]


def test_checkpoints_and_the_command_line_write_new_files_alike(tmp_path):
    """One writer: a checkpoint saved by the library gets the mode a command-line write gets."""
    from mha_course.lessons import checkpoints, model
    config = model.Config(task="previous_token", vocab=4, seq_len=4, d_model=4, h=1, n_layers=1)
    path = checkpoints.save_checkpoint(tmp_path / "m.npz", model.init_model(config), config)
    other = files.atomic_write(tmp_path / "other.bin", b"x")
    assert mode(path) == mode(other) == files.new_file_mode()
    assert checkpoints.load_checkpoint(path)[0] == config and np.isfinite(checkpoints.read_npz(path)["embed"]).all()
