"""``mha-course student --update OUTDIR``: new and changed notebooks into a copy, never over learner work.

The nbgitpuller rule: a notebook still as this command wrote it (its sha256 in OUTDIR/.mha-course/
copies.json) is replaced by its new version; one the learner edited is never touched, and the new
version lands beside it as ``NAME.updated.ipynb`` with a note on top; a missing one is written.
Every file is staged next to its target and linked in only where nothing is (``files.stage``), so
a save that lands meanwhile is kept, never overwritten or half-written.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from ..check.progress import MARKER
from . import files, student_plan
from .student_plan import StudentInputError
from .student_stubs import StudentCopyError

__all__ = ["UPDATED", "update_student_copies"]

UPDATED = ".updated"          # 02_x.ipynb edited by the learner: the new version goes to 02_x.updated.ipynb



def _updated_note(name: str) -> str:
    return (f"**Course update.** This is the new version of `{name}`. Your own `{name}` has your edits, "
            "so it was left exactly as it was: copy from here what you need (or work on in this one).")



def _beside(target: Path, text: str, manifest: dict, outdir: Path) -> tuple:
    """(path, bytes) for the new version of an edited ``target``: <stem>.updated[-N].ipynb, with a note on top."""
    import nbformat
    from nbformat.v4 import new_markdown_cell

    nb = nbformat.reads(text, as_version=4)
    nb.cells.insert(0, new_markdown_cell(_updated_note(target.name), id="mha-course-update-note"))
    data = (nbformat.writes(nb) + "\n").encode("utf-8")
    for n in range(1, 1000):
        path = target.with_name(f"{target.stem}{UPDATED}{'' if n == 1 else f'-{n}'}{target.suffix}")
        if not path.exists():
            return path, data, "new"
        here = path.read_bytes()
        if here == data:
            return path, data, "same"
        if manifest.get(str(path.relative_to(outdir))) == student_plan.sha256(here):
            return path, data, "ours"  # an earlier update's file the learner never changed
    raise StudentInputError(f"{target.parent} holds too many {target.stem}{UPDATED}-N copies; remove old ones")



def _put_new(tmp: Path, target: Path) -> bool:
    """Link the staged ``tmp`` in at ``target`` only if nothing is there; False if something is."""
    try:
        os.link(tmp, target)
        return True
    except FileExistsError:
        return False
    except OSError:  # no hard links on this filesystem: the small window of a rename remains
        if os.path.lexists(target):
            return False
        os.replace(tmp, target)
        return True



def _swap_ours(tmp: Path, target: Path, old_sha: str, holding: Path) -> bool:
    """Replace ``target`` by ``tmp`` if it is still the copy we wrote (sha ``old_sha``); False (untouched) if not.

    The old file is first moved aside (one rename); only if what was moved is ours is the new one
    linked in. A save that landed in between is moved back (or kept beside it): never lost.
    """
    os.rename(target, holding)
    if student_plan.sha256(holding.read_bytes()) == old_sha:
        put = _put_new(tmp, target)
        holding.unlink()  # our own old copy; if the learner saved meanwhile, their save stays at target
        return put
    if not _put_new(holding, target):  # a save landed before the move: back it goes (or beside a newer one)
        os.rename(holding, target.with_name(f"{target.stem}.saved-{time.strftime('%Y%m%d-%H%M%S')}{target.suffix}"))
    holding.unlink(missing_ok=True)
    return False



def update_student_copies(notebooks, outdir, log=print, lang=None) -> dict:
    """Bring new and changed notebooks into an existing student copy; return {kind: [paths]}.

    The nbgitpuller rule: a notebook the learner never changed (it is still what this command
    wrote, by OUTDIR/.mha-course/copies.json) is replaced by the new copy; one they edited (or
    one of a copy older than that record) is never touched: the new version lands beside it as
    ``<name>.updated.ipynb`` with a note on top; a missing one (new, or deleted) is written;
    linked files that are missing are added. Kinds: "new", "updated", "beside", "same".
    Every file is staged next to its target and linked in only where nothing is, so nothing a
    learner wrote is overwritten or half-written. OUTDIR without a copy: StudentInputError.
    Without ``lang`` the copies keep the folder's language (OUTDIR/.mha-course/lang); with it,
    that becomes the folder's language.
    """
    outdir = student_plan.outdir_path(outdir, "~/mha-course")
    if not (outdir / "notebooks").is_dir():
        raise StudentInputError(f"{outdir} holds no student copy (no {outdir / 'notebooks'}); make one first: "
                                f"mha-course student {outdir}")
    lang = student_plan.folder_language(outdir) if lang is None else lang
    plan, assets = student_plan.plan_copies(notebooks, outdir, lang)
    manifest, hashes = student_plan.read_manifest(outdir), {}
    done = {"new": [], "updated": [], "beside": [], "same": []}
    (outdir / MARKER).mkdir(exist_ok=True)
    try:
        for target, text in plan:
            _update_one(target, text, manifest, outdir, done, hashes, log)
        _add_missing_assets(assets, done, lang)
        student_plan.mark_language(outdir, lang)
    except OSError as err:
        whole = "Each file is whole: the old version or the new"
        raise StudentInputError(student_plan.error_line(err, outdir, whole)) from None
    finally:
        if hashes:
            try:
                student_plan.record_copies(outdir, hashes)
            except OSError:
                pass  # the files are whole; without the record a later --update treats them as edited
    return done



def _update_one(target, text, manifest, outdir, done, hashes, log) -> None:
    """One notebook of ``update_student_copies``: same, new, replaced (ours) or written beside (theirs)."""
    data = text.encode("utf-8")
    kind = student_plan.existing_kind(target, text)
    old_sha = manifest.get(str(target.relative_to(outdir)))
    ours = kind == "broken" or (kind == "learner" and old_sha == student_plan.sha256(target.read_bytes()))
    if kind == "same":
        done["same"].append(target)
        hashes[target] = student_plan.sha256(data)
        return
    files.remove_stale_temporaries(target.parent)
    tmp = files.stage(target, data, files.file_mode(target))
    try:
        if kind == "new" and _put_new(tmp, target):
            done["new"].append(target)
            hashes[target] = student_plan.sha256(data)
            log(f"new {target}")
            return
        if ours and _swap_ours(tmp, target, old_sha or student_plan.sha256(target.read_bytes()),
                               outdir / MARKER / f".updating-{target.name}"):
            done["updated"].append(target)
            hashes[target] = student_plan.sha256(data)
            log(f"updated {target}")
            return
    finally:
        tmp.unlink(missing_ok=True)
    _write_beside(target, text, manifest, outdir, done, hashes, log)



def _write_beside(target, text, manifest, outdir, done, hashes, log) -> None:
    """The learner edited ``target``: the new version lands as ``<name>.updated.ipynb`` beside it."""
    beside, beside_data, state = _beside(target, text, manifest, outdir)
    if state != "same":
        tmp = files.stage(beside, beside_data, files.new_file_mode())
        try:
            if not (_put_new(tmp, beside) if state == "new" else
                    _swap_ours(tmp, beside, manifest[str(beside.relative_to(outdir))],
                               outdir / MARKER / f".updating-{beside.name}")):
                raise StudentCopyError(f"{beside} changed while it was written; run --update again")
        finally:
            tmp.unlink(missing_ok=True)
    hashes[beside] = student_plan.sha256(beside_data)
    done["beside"].append(beside)
    log(f"kept your {target} (you edited it); the new version is {beside}")



def _add_missing_assets(assets, done, lang) -> None:
    """Linked files a copy lacks are added (in ``lang``); one that is there (the learner's or ours) is left alone."""
    for target, source in sorted(assets.items()):
        if not os.path.lexists(target):
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = files.stage(target, student_plan.linked_file(source, lang), files.new_file_mode())
            try:
                if _put_new(tmp, target):
                    done["new"].append(target)
            finally:
                tmp.unlink(missing_ok=True)
