"""Each checker's verdict, kept in the learner's course folder for the instructor to see.

    record("softmax", notebook="02_scaled_dot_product.ipynb", passed=False, mistake="no max subtraction")

writes ``<folder>/.mha-course/progress.json``, where ``<folder>`` is the learner's course folder:
the one ``mha-course student OUTDIR`` made (it holds a ``.mha-course/`` folder), found from the
kernel's working folder (the notebook's own folder, ``OUTDIR/notebooks/``, or OUTDIR itself), or
named by the environment variable ``MHA_COURSE_PROGRESS_DIR`` (``off`` turns recording off).
Anywhere else (the repository's own notebooks/, CI's nbval run) nothing is recorded.

The file holds one entry per (notebook, exercise): the last verdict (``passed``, the named
``mistake`` or None), its time (``when``, UTC ISO 8601), how many checks (``tries``) and when it
first passed (``done_when``, or None). ``mha-course progress`` reads it (tools/progress.py).

Recording never raises and never waits: no lock; the new file is written next to the old one
and put in place with ``os.replace``, so a reader sees the old file or the new one, never a part
of one; a write that loses a race with another kernel of the same learner is tried again (a few
times, then given up); a read-only folder, a full disk or a corrupt file (set aside as
``progress.json.corrupt``) only means that verdict is not kept.

>>> import os, tempfile, json
>>> folder = tempfile.mkdtemp(); os.mkdir(os.path.join(folder, ".mha-course"))
>>> os.environ["MHA_COURSE_PROGRESS_DIR"] = folder
>>> record("softmax", notebook="02.ipynb", passed=True)
>>> [(e["exercise"], e["passed"], e["tries"]) for e in read_progress(folder)]
[('softmax', True, 1)]
>>> del os.environ["MHA_COURSE_PROGRESS_DIR"]
"""
from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

__all__ = ["ENV", "MARKER", "FILE", "FORMAT", "course_folder", "progress_file", "read_progress", "record"]

ENV = "MHA_COURSE_PROGRESS_DIR"
MARKER = ".mha-course"           # the folder `mha-course student` makes in OUTDIR
FILE = "progress.json"
FORMAT = "mha-course progress 1"
_RETRIES = 3
_MAX_ENTRIES = 2000              # one per exercise; a bound so a flood of names cannot grow it without end
_MAX_TEXT = 200                  # characters kept of a name or a mistake


def course_folder(cwd=None) -> Path | None:
    """The learner's course folder (holding ``.mha-course/``), or None where nothing is recorded.

    ``MHA_COURSE_PROGRESS_DIR`` wins (``off`` or empty: None); else ``cwd`` (default: the working
    folder) or its parent, whichever holds a ``.mha-course`` folder.
    """
    given = os.environ.get(ENV)
    if given is not None:
        if given.strip().lower() in ("", "off", "0", "no"):
            return None
        folder = Path(given).expanduser()
        return folder if (folder / MARKER).is_dir() else None
    here = Path(os.getcwd() if cwd is None else cwd)
    for folder in (here, here.parent):
        if (folder / MARKER).is_dir():
            return folder
    return None


def progress_file(folder) -> Path:
    """``<folder>/.mha-course/progress.json``."""
    return Path(folder) / MARKER / FILE


def read_progress(folder) -> list:
    """The entries of ``<folder>/.mha-course/progress.json`` (dicts), [] if there is none.

    Raises ValueError if the file is not a progress file (corrupt JSON, another format); OSError
    if it cannot be read.
    """
    path = progress_file(folder)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    try:
        data = json.loads(text)
    except ValueError:
        raise ValueError(f"{path} is not valid JSON (a file cut short?); remove it to start afresh") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("entries"), list):
        raise ValueError(f"{path} is not a {FORMAT!r} file; remove it to start afresh")
    return [e for e in data["entries"] if isinstance(e, dict) and isinstance(e.get("exercise"), str)]


def _default_notebook() -> str:
    # Jupyter Server (2.x) tells the kernel which notebook it belongs to
    name = os.environ.get("JPY_SESSION_NAME") or os.environ.get("__vsc_ipynb_file__") or ""
    return os.path.basename(name)


def _text(value, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}")
    return value[:_MAX_TEXT]


def _updated(entries: list, entry: dict) -> list:
    """``entries`` with ``entry`` merged into the one for its (notebook, exercise), which moves last."""
    key = (entry["notebook"], entry["exercise"])
    old = next((e for e in entries if (e.get("notebook"), e.get("exercise")) == key), None)
    rest = [e for e in entries if e is not old]
    tries = (old.get("tries", 0) if old and isinstance(old.get("tries"), int) else 0) + 1
    done_when = old.get("done_when") if old else None
    if entry["passed"] and not done_when:
        done_when = entry["when"]
    return (rest + [dict(entry, tries=tries, done_when=done_when)])[-_MAX_ENTRIES:]


def _write(path: Path, entries: list) -> None:
    data = json.dumps({"format": FORMAT, "entries": entries}, indent=1, ensure_ascii=False).encode("utf-8")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.pid{os.getpid()}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _remove_dead_temporaries(folder: Path) -> None:
    """Temporaries of writers that were killed mid-write (their pid is gone)."""
    for entry in os.scandir(folder):
        name = entry.name
        if not (name.startswith(f".{FILE}.pid") and name.endswith(".tmp")):
            continue
        pid = name[len(f".{FILE}.pid"):].split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                os.unlink(entry.path)
            except OSError:
                pass


def _set_aside_name(path: Path) -> Path:
    """progress.json.corrupt, or .corrupt-2, -3, ... if that is taken: an earlier set-aside copy is never replaced."""
    target, n = path.with_name(FILE + ".corrupt"), 1
    while os.path.lexists(target):
        n += 1
        target = path.with_name(f"{FILE}.corrupt-{n}")
    return target


def record(exercise: str, *, notebook: str | None = None, passed: bool, mistake: str | None = None) -> None:
    """Keep one verdict in the learner's ``.mha-course/progress.json``; never raises, never waits.

    ``exercise`` the checker's name, ``notebook`` the notebook's file name (default: the one the
    kernel belongs to, from Jupyter's ``JPY_SESSION_NAME``), ``passed`` the verdict, ``mistake``
    the named mistake (None when passed or unnamed). Outside a learner's course folder (see
    :func:`course_folder`), or with arguments of the wrong type, nothing is recorded.
    """
    try:
        if not isinstance(passed, bool):
            raise TypeError(f"passed must be True or False, got {passed!r}")
        folder = course_folder()
        if folder is None:
            return
        entry = {"exercise": _text(exercise, "exercise"),
                 "notebook": _text(_default_notebook() if notebook is None else notebook, "notebook"),
                 "passed": passed, "mistake": None if passed else _text(mistake, "mistake"),
                 "when": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        if not entry["exercise"]:
            return
        path = progress_file(folder)
        _remove_dead_temporaries(path.parent)
        for _ in range(_RETRIES):
            try:
                entries = read_progress(folder)
            except ValueError:  # not ours to read: set it aside (once) and start afresh
                os.replace(path, _set_aside_name(path))
                entries = []
            _write(path, _updated(entries, entry))
            mine = [e for e in read_progress(folder)
                    if (e.get("notebook"), e.get("exercise")) == (entry["notebook"], entry["exercise"])]
            if mine and mine[0].get("when") == entry["when"] and mine[0].get("passed") == passed:
                return  # no other kernel replaced the file between our read and our write
    except Exception:  # OSError (read-only, full disk), a corrupt file, bad arguments: the check goes on
        return
