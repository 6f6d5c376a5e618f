"""``mha-course train TASK [--out PATH]``: train a tiny model of notebook 08 and save its checkpoint."""
from __future__ import annotations

from ..lessons.model import CHECKPOINT_CONFIGS, make_checkpoint, save_experiments


def add_train_command(sub) -> None:
    """Add ``train TASK [--out PATH]`` to argparse subparsers (``mha_course.tools.cli`` calls this)."""
    cmd = sub.add_parser("train", help="train a tiny model on a task and save its checkpoint (.npz)")
    cmd.add_argument("task", choices=[*sorted(CHECKPOINT_CONFIGS), "experiments"],
                     help="the task to train on ('experiments': the h sweep, dropout, scale runs of 08)")
    cmd.add_argument("--out", default=None,
                     help="where to write the .npz (default: the shipped mha_course/checkpoints/TASK.npz)")
    cmd.set_defaults(func=_cmd_train)


def _cmd_train(args) -> int:
    if args.task == "experiments":
        print(f"saved {save_experiments(args.out)}")
        return 0
    path, metrics = make_checkpoint(args.task, args.out, progress=True)
    print(f"trained {args.task}: accuracy {metrics.accuracy:.4f}, loss {metrics.loss:.4f} on fresh "
          f"sequences; saved {path}")
    return 0
