"""Writing files safely: the package's one atomic writer (ground floor, standard library only).

One writer for every file the package writes (student copies, executed notebooks, trained
checkpoints, ``misconceptions.make_ensemble``'s arrays): the bytes go to a hidden temporary file in the target's own folder,
are flushed to disk, get the mode the file had (or ``0666 & ~umask`` for a new one: 0644 under
the usual umask 022), and then replace the target in one step (``os.replace``), so a reader,
an interruption or a full disk sees the old file or the new one, never a part of one.

- A symbolic link is written through: the file it points to is replaced, the link stays.
- Temporary files are named ``.<name>.pid<PID>.<random>.tmp``; one left behind by a killed run
  (its process is gone) is removed by the next write into that folder.
- ``commit(tmp, target, keep=...)`` moves whatever is at the target away first (``keep`` renames
  it into a backup) and then links the new file in only if nothing has appeared there since, so a
  file saved by someone else in between is backed up too, never silently replaced.

The command line's path checks are ``mha_course.tools.files``'s.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> atomic_write(folder / "a.txt", b"hello").read_bytes()
b'hello'
"""
from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
import time
from pathlib import Path

__all__ = ["atomic_write", "stage", "commit", "exclusive_write", "real_target", "file_mode", "new_file_mode",
           "remove_stale_temporaries", "is_temporary", "TMP_SUFFIX"]

TMP_SUFFIX = ".tmp"
_OURS = re.compile(r"^\.(?P<name>.+)\.pid(?P<pid>\d+)\.[A-Za-z0-9_]+\.tmp$")
# what the writer before this one left (no pid in the name): removed once it is an hour old
_LEGACY = re.compile(r"^\.(?P<name>.+?)\.(?:[A-Za-z0-9_]{8})(?:\.npz)?\.tmp$")
LEGACY_AGE_S = 3600.0


# ---------------------------------------------------------------------------------------
# modes and links
# ---------------------------------------------------------------------------------------

def new_file_mode() -> int:
    """The mode a new file gets from this process's umask: ``0o666 & ~umask`` (0o644 under umask 022).

    >>> new_file_mode() & 0o600
    384
    """
    try:  # Linux: read it without changing it (os.umask would, for a moment, in every thread)
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def file_mode(path) -> int:
    """The permission bits of the file at ``path``, or ``new_file_mode()`` when there is none."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return new_file_mode()


def real_target(path) -> Path:
    """The file that writing ``path`` must replace: ``path`` itself, or the file a symlink points to.

    >>> real_target("/tmp") == Path("/tmp")
    True
    """
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


# ---------------------------------------------------------------------------------------
# the writer
# ---------------------------------------------------------------------------------------

def is_temporary(name: str) -> bool:
    """True for the name of one of this writer's temporary files (``.<name>.pid<PID>.<random>.tmp``).

    >>> is_temporary(".a.npz.pid12.x1y2.tmp"), is_temporary("a.npz")
    (True, False)
    """
    return bool(_OURS.match(name))


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(folder, name: str | None = None) -> list:
    """Remove this writer's temporary files in ``folder`` left by a process that is gone; return them.

    Only hidden ``.<name>.pid<PID>.<random>.tmp`` files whose process no longer runs (and those
    of the previous writer, without a pid, once they are an hour old); ``name`` limits it to one
    target's temporaries. A running writer's temporary is never touched.
    """
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        ours, legacy = _OURS.match(entry.name), _LEGACY.match(entry.name)
        match = ours or legacy
        if not match or (name is not None and match["name"] not in (name, Path(name).stem)):
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            if ours and os.name == "posix":
                stale = not _pid_alive(int(ours["pid"]))
            else:  # the previous writer's, or no safe way to ask for a pid (os.kill on Windows ends it)
                stale = now - entry.stat(follow_symlinks=False).st_mtime > LEGACY_AGE_S
            if stale:
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            continue
    return removed


def stage(target, data: bytes, mode: int | None = None) -> Path:
    """Write ``data`` to a hidden temporary file next to ``target`` (flushed, mode set); return its path.

    ``mode`` defaults to the mode of the file at ``target`` (or ``new_file_mode()``). On any
    failure the temporary file is removed and the error raised.
    """
    target = Path(target)
    mode = file_mode(target) if mode is None else mode
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.pid{os.getpid()}.", suffix=TMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)  # mkstemp makes it 0600: a notebook or checkpoint is shared work
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def _sync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def commit(tmp, target, keep=None) -> list:
    """Put the staged file ``tmp`` at ``target``; return what ``keep`` saved of the files it found there.

    Without ``keep``: ``os.replace`` (the old file is gone). With ``keep(target) -> Path``, a
    function that renames the file at ``target`` away (into a backup) and returns where it went:
    the new file is then hard-linked in only if nothing is at ``target``; whatever appeared there
    in between (a save from JupyterLab) is kept the same way, and it tries again. So no version
    that was ever at ``target`` is lost. Filesystems without hard links fall back to a rename.
    """
    tmp, target = Path(tmp), Path(target)
    kept = []
    try:
        if keep is None:
            os.replace(tmp, target)
            return kept
        for _ in range(1000):
            if os.path.lexists(target):
                kept.append(keep(target))
            try:
                os.link(tmp, target)
            except FileExistsError:
                continue  # someone saved in between: keep that too
            except OSError as err:
                if err.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK):
                    raise
                if os.path.lexists(target):
                    continue
                os.replace(tmp, target)  # no hard links here: the small window of a rename remains
            tmp.unlink(missing_ok=True)
            return kept
        raise OSError(errno.EBUSY, "the file keeps changing while it is replaced", str(target))
    finally:
        tmp.unlink(missing_ok=True)
        _sync_folder(target.parent)


def atomic_write(target, data: bytes, mode: int | None = None) -> Path:
    """Replace the file at ``target`` by ``data`` in one step; return the path written.

    A symlink is written through (the file it points to is replaced); the mode is the old
    file's (or ``new_file_mode()``); stale temporaries of killed runs in that folder are removed.
    """
    real = real_target(target)
    remove_stale_temporaries(real.parent)
    tmp = stage(real, data, mode)
    commit(tmp, real)
    return real


def exclusive_write(target, data: bytes, mode: int | None = None) -> Path:
    """Write a NEW file ``target`` (FileExistsError if anything is there: a backup is never replaced)."""
    target = Path(target)
    mode = new_file_mode() if mode is None else mode
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(target, mode)
    except BaseException:
        target.unlink(missing_ok=True)  # only our own, incomplete file
        raise
    return target
