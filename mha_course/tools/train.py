"""``mha-course train TASK [--out PATH]``: train a tiny model of notebook 08 and save its checkpoint.

The checkpoint goes to ``./checkpoints/TASK.npz`` in the current folder (``--out`` chooses
another ``.npz``), never into the package: the shipped checkpoints are read-only to this
command. The path is checked before training (a missing folder, a folder, a notebook or any
other non-``.npz`` target is one line naming the path and the fix); an existing file is kept
as ``NAME.npz.<timestamp>.bak`` beside it, and the new one is written by ``files.atomic_write``.

A maintainer who re-makes a shipped checkpoint does it on purpose, in Python::

    from mha_course.lessons import model
    checkpoints.make_checkpoint("induction", checkpoints.checkpoint_path("induction"))
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ..lessons import checkpoints, circuits, long_seeds, model
from . import files

__all__ = ["PACKAGE_DIR", "default_out", "check_out", "backup_existing", "add_train_command"]

PACKAGE_DIR = Path(model.__file__).resolve().parent.parent  # mha_course/: never written by `train`
# beyond the checkpoints: the runs of notebooks 08 (experiments), 13 (long_seeds: every table over
# seeds 0-2, about 15 CPU-minutes; long_rope_seeds: its RoPE models' sections 2 and 7) and 14 (phase_change; circuit_seeds: every experiment of 14 over
# circuits.SEEDS), name -> arrays
ARTIFACTS = {"experiments": lambda: checkpoints.run_experiments(),
             "long_seeds": lambda: long_seeds.results(progress=True),
             "long_rope_seeds": lambda: long_seeds.rope_seed_results(progress=True),
             "phase_change": lambda: circuits.trajectory_arrays(progress=True),
             "circuit_seeds": lambda: circuits.seed_results(progress=True)}
TASKS = [*sorted(checkpoints.CHECKPOINT_CONFIGS), *ARTIFACTS, "long_context"]


def default_out(task: str) -> Path:
    """task -> ./checkpoints/TASK.npz in the current folder.

    >>> default_out("induction").relative_to(Path.cwd()).as_posix()
    'checkpoints/induction.npz'
    """
    return Path.cwd() / "checkpoints" / f"{task}.npz"


def check_out(task: str, out=None) -> Path:
    """The checkpoint path for ``--out`` (None: ``default_out(task)``, its folder made), checked before training.

    PathError (one line): empty, not ``.npz``, a folder, inside the package, a folder that does
    not exist or cannot be written.
    """
    example = f"checkpoints/{task}.npz"
    return files.check_new_file(default_out(task) if out is None else out, "--out", ".npz", example,
                                read_only=[PACKAGE_DIR], make_folder=out is None)


def backup_existing(path: Path):
    """Keep the file at ``path`` (through a symlink) as ``NAME.<timestamp>.bak`` beside it; return that or None."""
    real = files.real_target(path)
    if not real.exists():
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1, 10_000):
        backup = real.with_name(f"{real.name}.{stamp}{'' if n == 1 else f'-{n}'}.bak")
        try:
            os.link(real, backup)  # the very file, under a new name; never replaces an older backup
            return backup
        except FileExistsError:
            continue
        except OSError:  # no hard links here: a copy
            try:
                return files.exclusive_write(backup, real.read_bytes(), files.file_mode(real))
            except FileExistsError:
                continue
    raise files.PathError(f"{real.parent} holds too many backups of {real.name}; remove old ones")


def _write(path: Path, data: bytes) -> Path:
    backup = backup_existing(path)
    written = files.atomic_write(path, data)
    if backup is not None:
        print(f"kept the previous {path.name} as {backup}")
    return written


def _train_long_context(args) -> int:
    """Every long_* checkpoint of notebook 13 into ./checkpoints/ (``--out``: the folder), parents first."""
    if args.out is not None and not Path(args.out).is_dir():
        print(f"mha-course train long_context: --out {args.out} must be an existing folder (it writes one "
              ".npz per checkpoint)", file=sys.stderr)
        return 2
    trained = {}
    for task in (t for t in checkpoints.CHECKPOINT_CONFIGS if t.startswith("long_")):  # long_rope before its fine-tunes
        path = check_out(task, None if args.out is None else Path(args.out) / f"{task}.npz")
        parent = trained.get(checkpoints.CHECKPOINT_PARENTS.get(task))
        config, params, history, metrics = checkpoints.train_checkpoint(task, progress=True, parent=parent)
        trained[task] = params
        print(f"trained {task}: accuracy {metrics.accuracy:.4f}, loss {metrics.loss:.4f}; "
              f"saved {_write(path, checkpoints.checkpoint_bytes(params, config, history))}")
    return 0


def _cmd_train(args) -> int:
    try:
        if args.task == "long_context":
            return _train_long_context(args)
        path = check_out(args.task, args.out)
        if args.task in ARTIFACTS:
            print(f"saved {_write(path, checkpoints.npz_bytes(ARTIFACTS[args.task]()))}")
            return 0
        config, params, history, metrics = checkpoints.train_checkpoint(args.task, progress=True)
        written = _write(path, checkpoints.checkpoint_bytes(params, config, history))
    except files.PathError as err:
        print(f"mha-course train: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"mha-course train: {files.os_error_line(err, args.out or default_out(args.task))}", file=sys.stderr)
        return 2
    print(f"trained {args.task}: accuracy {metrics.accuracy:.4f}, loss {metrics.loss:.4f} on fresh "
          f"sequences; saved {written}")
    return 0


def add_train_command(sub) -> None:
    """Add ``train TASK [--out PATH]`` to argparse subparsers (``mha_course.tools.cli`` calls this)."""
    cmd = sub.add_parser("train", help="train a tiny model on a task and save its checkpoint (.npz)")
    cmd.add_argument("task", choices=TASKS,
                     help="the task to train on ('experiments': the h sweep, dropout, scale runs of 08 over 3 seeds; "
                          "'long_seeds': the tables of 13 over 3 seeds; 'long_rope_seeds': 13's RoPE head and quantised "
                          "caches over 3 seeds; 'phase_change': the observed runs of 14; "
                          "'circuit_seeds': 14's experiments over 5 seeds; 'long_context': every long_* checkpoint of 13)")
    cmd.add_argument("--out", default=None,
                     help="where to write the .npz (default: ./checkpoints/TASK.npz in the current folder; "
                          "an existing file is kept as NAME.npz.<timestamp>.bak)")
    cmd.set_defaults(func=_cmd_train)
