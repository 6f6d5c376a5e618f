"""Checking the paths the command line is given; the writer itself is ``mha_course._files``.

``check_path_arg`` refuses an empty argument; ``check_new_file`` checks a file to be written
(suffix, folder, not a folder itself, not inside a read-only place) before any work;
``os_error_line`` turns an OSError into one line naming the path and the fix. The writer's
names (``atomic_write``, ``stage``, ``commit``, ...) stay importable from here.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> atomic_write(folder / "a.txt", b"hello").read_bytes()
b'hello'
"""
from __future__ import annotations

import errno
import os
from pathlib import Path

from .._files import (
    TMP_SUFFIX,
    atomic_write,
    commit,
    exclusive_write,
    file_mode,
    is_temporary,
    new_file_mode,
    real_target,
    remove_stale_temporaries,
    stage,
)

__all__ = ["PathError", "atomic_write", "stage", "commit", "exclusive_write", "real_target", "file_mode",
           "new_file_mode", "remove_stale_temporaries", "check_path_arg", "check_new_file", "os_error_line",
           "TMP_SUFFIX"]


class PathError(ValueError):
    """A path argument that cannot be used: one line naming the path and the fix."""


# ---------------------------------------------------------------------------------------
# paths given on the command line
# ---------------------------------------------------------------------------------------

def check_path_arg(arg, what: str, example: str) -> Path:
    """``arg`` as a Path (``~`` expanded); PathError for an empty or blank one, or a NUL byte.

    >>> check_path_arg("~/x", "OUTDIR", "~/mha-student").name
    'x'
    >>> check_path_arg("", "OUTDIR", "~/mha-student")
    Traceback (most recent call last):
    ...
    mha_course.tools.files.PathError: OUTDIR is empty (''); give one, e.g. ~/mha-student
    """
    text = os.fspath(arg) if isinstance(arg, os.PathLike) else arg
    if not isinstance(text, str) or not text.strip():
        raise PathError(f"{what} is empty ({text!r}); give one, e.g. {example}")
    if "\0" in text:
        raise PathError(f"{what} {text!r} contains a NUL byte; give a path, e.g. {example}")
    return Path(text).expanduser()


def _inside(path: Path, folder: Path) -> bool:
    real, top = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
    return real == top or top in real.parents


def check_new_file(arg, what: str, suffix: str, example: str, read_only=(), make_folder: bool = False) -> Path:
    """The path of a file about to be written, checked before any work; PathError (one line) if unusable.

    Refused: an empty path, a suffix other than ``suffix``, an existing folder, a symlink or path
    that leads into one of the ``read_only`` folders, a folder that does not exist (unless
    ``make_folder``: then it is made) or is a file, or one this user cannot write to.
    """
    path = check_path_arg(arg, what, example)
    if path.is_dir():
        raise PathError(f"{what} {path} is a folder; give a file inside it, e.g. {path / Path(example).name}")
    if path.suffix.lower() != suffix:
        raise PathError(f"{what} {path} is not a {suffix} file; give a path ending in {suffix}, e.g. {example}")
    real = real_target(path)
    for folder in read_only:
        if _inside(real, folder):
            raise PathError(f"{what} {path} is inside {folder}, which this command never changes; "
                            f"give a path of your own, e.g. {example}")
    parent = real.parent
    if not parent.exists() and make_folder and not any(p.exists() and not p.is_dir() for p in parent.parents):
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise PathError(os_error_line(err, parent, f"{what}: choose a folder you can write to")) from None
    if not parent.is_dir():
        state = "is not a folder" if parent.exists() else "does not exist"
        raise PathError(f"{what} {path}: the folder {parent} {state}; create it first "
                        f"(mkdir -p {parent}) or give another path, e.g. {example}")
    try:  # a real write, not os.access: root passes os.access even where the filesystem refuses
        stage(real, b"", 0o600).unlink()
    except OSError as err:
        raise PathError(f"{what} {path}: the folder {parent} is not writable ({err.strerror or err}); "
                        f"give a path you can write to, e.g. {example}") from None
    return path


def os_error_line(err: OSError, path, todo: str | None = None) -> str:
    """One line for a failed write: the path, the reason and what to do.

    >>> os_error_line(OSError(28, "No space left on device"), "x.ipynb")
    'cannot write x.ipynb: No space left on device; free some disk space (or raise the file size limit) and run again'
    """
    where = err.filename or path
    if is_temporary(Path(where).name):  # our temporary file: the folder is what the reader can act on
        where = f"into the folder {Path(where).parent}"
    if err.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
        todo = "free some disk space (or raise the file size limit) and run again"
    elif err.errno in (errno.EACCES, errno.EPERM, errno.EROFS) and todo is None:
        todo = "make it writable, or choose a folder you can write to"
    elif todo is None:
        todo = "check that path and run again"
    return f"cannot write {where}: {err.strerror or err}; {todo}"
