"""The path checks of the command line (tools/files.py); the writer is tested in tests/core/test_files.py."""
import os

import pytest

from mha_course.tools import files


@pytest.mark.parametrize("arg", ["", "   ", "a\0b"], ids=["empty", "blank", "nul"])
def test_check_path_arg_refuses_empty_paths(arg):
    with pytest.raises(files.PathError, match="OUTDIR"):
        files.check_path_arg(arg, "OUTDIR", "~/mha-student")


def test_check_new_file(tmp_path):
    (tmp_path / "adir.npz").mkdir()
    ro = tmp_path / "package"
    ro.mkdir()
    (tmp_path / "into.npz").symlink_to(ro / "m.npz")
    cases = {"": "is empty", str(tmp_path / "notes.ipynb"): "not a .npz file",
             str(tmp_path / "adir.npz"): "is a folder", str(tmp_path / "nodir" / "x.npz"): "does not exist",
             str(ro / "m.npz"): "never changes", str(tmp_path / "into.npz"): "never changes"}
    for arg, needle in cases.items():
        with pytest.raises(files.PathError, match=needle) as err:
            files.check_new_file(arg, "--out", ".npz", "checkpoints/x.npz", read_only=[ro])
        assert len(str(err.value).splitlines()) == 1
    made = files.check_new_file(tmp_path / "new" / "deeper" / "x.npz", "--out", ".npz", "x.npz", make_folder=True)
    assert made.parent.is_dir()


def test_os_error_line_names_the_file_and_the_fix():
    line = files.os_error_line(PermissionError(13, "Permission denied", "/ro/x.ipynb"), "x")
    assert line.startswith("cannot write /ro/x.ipynb: Permission denied;") and "\n" not in line


def test_os_error_line_names_the_folder_not_a_temporary_file(tmp_path):
    tmp = tmp_path / f".x.ipynb.pid{os.getpid()}.abcd1234.tmp"
    line = files.os_error_line(PermissionError(1, "Operation not permitted", str(tmp)), "x")
    assert line.startswith(f"cannot write into the folder {tmp_path}: Operation not permitted;"), line
