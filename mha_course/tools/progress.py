"""``mha-course progress DIR...``: the class's progress, learners x exercises.

    mha-course progress ~/mha-student               # one learner's course folder
    mha-course progress /home                       # every /home/<name>/mha-course (the hub's layout)
    mha-course progress /home --csv > class.csv     # one row per learner x exercise
    mha-course progress /home --json

Each checker call in a learner's kernel keeps its verdict in the course folder's
``.mha-course/progress.json`` (``mha_course.check.progress``). This reads those files: for
every learner and exercise, ``done`` (it passed once), ``tried`` (with the last named mistake),
or ``not started``. A DIR is a course folder (it holds ``.mha-course/``) or a folder of them
(``DIR/<learner>/`` or ``DIR/<learner>/mha-course/``); the learner is the folder's name (its
parent's for a folder named ``mha-course``). The exercises are those of the course's notebooks
(``check.<name>(...)`` in the cell after an exercise), and any other a learner has recorded.

The workshop hub shows the same table as a page that refreshes (deploy/hub/progress_service.py).
"""
from __future__ import annotations

import csv
import html
import io
import json
import re
import sys
from pathlib import Path

from ..check import progress as recorder
from . import files

__all__ = ["STATES", "ProgressError", "course_folders", "course_exercises", "gather", "rows",
           "as_text", "as_csv", "as_json", "as_html", "add_progress_command"]

STATES = ("done", "tried", "not started")
_CHECK_CALL = re.compile(r"\bcheck\.([A-Za-z_]\w*)\s*\(")
_NOT_EXERCISES = {"summary", "catalogue", "matches", "forget_results"}
_COURSE_COPY = "mha-course"  # the hub's ~/mha-course


class ProgressError(ValueError):
    """A DIR that is not a course folder nor holds any: one line with the path and the fix."""


def _learner_name(folder: Path) -> str:
    return folder.parent.name if folder.name == _COURSE_COPY and folder.parent.name else folder.name


def course_folders(dirs) -> list:
    """[(learner, course folder)] for the DIRs, sorted by learner; ProgressError for a DIR without any.

    A DIR holding ``.mha-course/`` is one learner's folder; otherwise each ``DIR/<name>/`` or
    ``DIR/<name>/mha-course/`` that holds one is (unreadable homes are skipped).
    """
    found = {}
    for arg in dirs:
        folder = files.check_path_arg(arg, "DIR", "/home")
        if not folder.is_dir():
            raise ProgressError(f"DIR {folder} is not a folder; give a learner's course folder "
                                "(made by mha-course student) or a folder of them, e.g. /home")
        candidates = [folder]
        if not (folder / recorder.MARKER).is_dir():
            try:
                subs = sorted(p for p in folder.iterdir() if p.is_dir())
            except OSError as err:
                raise ProgressError(f"cannot list {folder}: {err.strerror or err}; run as a user who can "
                                    "read the learners' folders (the hub's admin: root)") from None
            candidates = [c for sub in subs for c in (sub, sub / _COURSE_COPY)]
        mine = []
        for cand in candidates:
            try:
                if (cand / recorder.MARKER).is_dir():
                    mine.append(cand)
            except OSError:
                continue
        if not mine:
            raise ProgressError(f"{folder} holds no course folder (none with .mha-course/ in it, nor in "
                                f"{folder}/<learner>/ or {folder}/<learner>/mha-course/); give the folders "
                                "mha-course student made, e.g. /home")
        for cand in mine:
            name, n = _learner_name(cand), 2
            key = name
            while key in found and found[key] != cand.resolve():
                key, n = f"{name}-{n}", n + 1
            found[key] = cand.resolve()
    return sorted(found.items())


def course_exercises(notebooks) -> list:
    """[(notebook file name, exercise)] in course order: ``check.<name>(`` in the cell after each exercise cell."""
    from .student import BEGIN

    if isinstance(notebooks, (str, Path)):
        notebooks = [notebooks]
    out = []
    for path in map(Path, notebooks):
        try:
            nb = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise ProgressError(f"{path}: not a readable notebook ({getattr(err, 'strerror', None) or err}); "
                                f"give the course's notebooks (--notebooks notebooks/*.ipynb) or restore it from git"
                                ) from None
        if not isinstance(nb, dict):
            raise ProgressError(f"{path}: not a notebook (its JSON is a {type(nb).__name__}); "
                                f"give the course's notebooks (--notebooks notebooks/*.ipynb)")
        after_exercise = False
        for cell in nb.get("cells", []):
            if cell.get("cell_type") != "code":
                continue
            source = "".join(cell.get("source", ""))
            if BEGIN in source:
                after_exercise = True
                continue
            if after_exercise:
                for name in _CHECK_CALL.findall(source):
                    if name not in _NOT_EXERCISES and (path.name, name) not in out:
                        out.append((path.name, name))
            after_exercise = False
    return out


def gather(folders) -> dict:
    """{learner: {(notebook, exercise): entry}} from each course folder's progress file.

    A file that cannot be read or is corrupt gives {"error": "<why>"} for that learner instead.
    """
    out = {}
    for learner, folder in folders:
        try:
            out[learner] = {(e.get("notebook") or "", e["exercise"]): e for e in recorder.read_progress(folder)}
        except (OSError, ValueError) as err:
            out[learner] = {"error": getattr(err, "strerror", None) or str(err)}
    return out


def _state(entry) -> tuple:
    if entry is None:
        return "not started", None
    if entry.get("done_when") or entry.get("passed"):
        return "done", None
    return "tried", entry.get("mistake")


def rows(progress: dict, exercises=()) -> list:
    """One dict per learner x exercise: learner, notebook, exercise, state, mistake, tries, when.

    The exercises are ``exercises`` (course order) and then any other a learner recorded.
    """
    if not isinstance(progress, dict):
        raise TypeError(f"progress must be the dict gather() returns ({{learner: {{(notebook, exercise): entry}}}}), "
                        f"got {type(progress).__name__}")
    columns = list(exercises)
    for entries in progress.values():
        for key in entries:
            if key != "error" and key not in columns:
                columns.append(key)
    out = []
    for learner, entries in progress.items():
        if "error" in entries:
            out.append(dict(learner=learner, notebook="", exercise="", state="unreadable",
                            mistake=entries["error"], tries=0, when=None))
            continue
        for key in columns:
            entry = entries.get(key)
            state, mistake = _state(entry)
            out.append(dict(learner=learner, notebook=key[0], exercise=key[1], state=state, mistake=mistake,
                            tries=(entry or {}).get("tries", 0), when=(entry or {}).get("when")))
    return out


def _by_notebook(table: list) -> dict:
    """{notebook: {"exercises": [...], "learners": {learner: {exercise: row}}}} for exercises someone touched."""
    touched = {(r["notebook"], r["exercise"]) for r in table if r["state"] in ("done", "tried")}
    out = {}
    for r in table:
        if (r["notebook"], r["exercise"]) not in touched:
            continue
        book = out.setdefault(r["notebook"], {"exercises": [], "learners": {}})
        if r["exercise"] not in book["exercises"]:
            book["exercises"].append(r["exercise"])
        book["learners"].setdefault(r["learner"], {})[r["exercise"]] = r
    return out


def _counts(table: list) -> dict:
    counts = {}
    for r in table:
        c = counts.setdefault(r["learner"], dict.fromkeys(STATES + ("unreadable",), 0))
        c[r["state"]] += 1
    return counts


def _cell_text(r) -> str:
    if r["state"] == "tried":
        return f"tried: {r['mistake']}" if r["mistake"] else "tried"
    return {"done": "done", "not started": "-"}[r["state"]]


def as_text(table: list) -> str:
    """The table for a terminal: a line per learner (counts), then per notebook a learners x exercises grid."""
    if not table:
        return "no learners"
    lines = []
    counts = _counts(table)
    width = max(len(n) for n in counts) + 2
    for learner, c in counts.items():
        if c["unreadable"]:
            why = next(r["mistake"] for r in table if r["learner"] == learner)
            lines.append(f"{learner:<{width}}unreadable progress file: {why}")
        else:
            lines.append(f"{learner:<{width}}{c['done']} done, {c['tried']} tried, {c['not started']} not started")
    for notebook, book in _by_notebook(table).items():
        grid = [[notebook] + book["exercises"]]
        for learner in counts:
            cells = book["learners"].get(learner, {})
            grid.append([f"  {learner}"] + [_cell_text(cells[e]) if e in cells else "-" for e in book["exercises"]])
        widths = [max(len(row[i]) for row in grid) for i in range(len(grid[0]))]
        lines.append("")
        lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in grid]
    return "\n".join(lines)


def as_csv(table: list) -> str:
    """CSV, one row per learner x exercise: learner,notebook,exercise,state,mistake,tries,when."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=["learner", "notebook", "exercise", "state", "mistake", "tries", "when"],
                            lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    return out.getvalue()


def as_json(table: list) -> str:
    """JSON: {"learners": {learner: {"done": n, ...}}, "rows": [one per learner x exercise]}."""
    return json.dumps({"learners": _counts(table), "rows": table}, indent=1, ensure_ascii=False)


_STYLE = """body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em}th,td{border:1px solid #ccc;padding:3px 8px;font-size:14px}
th{background:#f3f3f3;text-align:left}td.done{background:#d9f2d9}td.tried{background:#fde2c8}
td.none{color:#999}p.when{color:#666;font-size:13px}"""


def _html_counts(counts: dict, absent) -> list:
    """The page's first table: done / tried / not started per learner, then the learners not logged in yet."""
    esc = html.escape
    parts = [] if counts or absent else ["<p>No learner has logged in yet.</p>"]
    parts.append("<table><tr><th>learner</th><th>done</th><th>tried</th><th>not started</th></tr>")
    for learner, c in counts.items():
        if c["unreadable"]:
            parts.append(f"<tr><td>{esc(learner)}</td><td colspan=3>unreadable progress file</td></tr>")
        else:
            parts.append(f"<tr><td>{esc(learner)}</td><td>{c['done']}</td><td>{c['tried']}</td>"
                         f"<td>{c['not started']}</td></tr>")
    parts.extend(f"<tr><td>{esc(learner)}</td><td colspan=3 class='none'>not logged in yet</td></tr>"
                 for learner in absent if learner not in counts)
    parts.append("</table>")
    return parts


def as_html(table: list, refresh_s: int | None = 10, title: str = "The class's progress", when: str = "",
            absent=()) -> str:
    """A page: the counts per learner, then per notebook a learners x exercises table (``refresh_s``: reload
    every so many seconds, a whole number >= 1, or None for a page that never reloads; ``absent``: the names
    of the class who have no course folder yet, listed as not logged in)."""
    if refresh_s is not None and (isinstance(refresh_s, bool) or not isinstance(refresh_s, int) or refresh_s < 1):
        raise ValueError(f"refresh_s={refresh_s!r} must be a whole number of seconds >= 1, or None for no reload")
    esc = html.escape
    head = f'<meta http-equiv="refresh" content="{int(refresh_s)}">' if refresh_s else ""
    parts = [f"<!doctype html><html><head><meta charset='utf-8'>{head}<title>{esc(title)}</title>"
             f"<style>{_STYLE}</style></head><body><h1>{esc(title)}</h1>"]
    if when:
        parts.append(f"<p class='when'>as of {esc(when)}" + (f"; this page reloads every {int(refresh_s)} s"
                                                               if refresh_s else "") + "</p>")
    counts = _counts(table)
    parts += _html_counts(counts, absent)
    for notebook, book in _by_notebook(table).items():
        parts.append(f"<h2>{esc(notebook)}</h2><table><tr><th>learner</th>"
                     + "".join(f"<th>{esc(e)}</th>" for e in book["exercises"]) + "</tr>")
        for learner in counts:
            cells = book["learners"].get(learner, {})
            tds = []
            for e in book["exercises"]:
                r = cells.get(e)
                state = r["state"] if r else "not started"
                css = {"done": "done", "tried": "tried"}.get(state, "none")
                tries = f"{r['tries']} {'try' if r['tries'] == 1 else 'tries'}" if r else ""
                tip = f" title='{esc(tries)}, last {esc(str(r['when']))}'" if r and r["tries"] else ""
                tds.append(f"<td class='{css}'{tip}>{esc(_cell_text(r) if r else '-')}</td>")
            parts.append(f"<tr><td>{esc(learner)}</td>{''.join(tds)}</tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _cmd_progress(args) -> int:
    from .student import course_notebooks

    try:
        folders = course_folders(args.dirs)
    except (ProgressError, files.PathError) as err:
        print(f"mha-course progress: {err}", file=sys.stderr)
        return 2
    try:
        exercises = course_exercises(args.notebooks or course_notebooks())
    except ProgressError as err:
        print(f"mha-course progress: {err}", file=sys.stderr)
        return 2
    table = rows(gather(folders), exercises)
    print(as_json(table) if args.json else as_csv(table) if args.csv else as_text(table), end="" if args.csv else "\n")
    return 0


def add_progress_command(sub) -> None:
    """Add ``progress DIR... [--json | --csv] [--notebooks NB...]`` to argparse subparsers."""
    pr = sub.add_parser("progress", help="the class's progress: learners x exercises (done, tried, not started)")
    pr.add_argument("dirs", nargs="+", metavar="DIR",
                    help="a learner's course folder (made by mha-course student) or a folder of them, e.g. /home")
    form = pr.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="JSON: counts per learner and one row per learner x exercise")
    form.add_argument("--csv", action="store_true", help="CSV: one row per learner x exercise")
    pr.add_argument("--notebooks", nargs="+", default=None,
                    help="the course's notebooks, for the list of exercises (default: the course's notebooks/)")
    pr.set_defaults(func=_cmd_progress)
