"""The tiny transformer's checkpoints: the shipped configs, training them, saving and loading.

``mha-course train TASK`` trains ``CHECKPOINT_CONFIGS[TASK]`` (``train_checkpoint``) and writes
it (``checkpoint_bytes``); notebooks load the shipped files::

    from mha_course.lessons import checkpoints
    config, params, history = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
    experiments = checkpoints.load_experiments()  # the h sweep, dropout and scale runs of notebook 08

A checkpoint is an .npz of plain arrays (the config as JSON text), checked whole when it is read
(``read_npz``, ``load_checkpoint``): nothing is unpickled, nothing oversized is allocated.

Taught in 08_heads_that_learn.ipynb.
"""
from __future__ import annotations

import io
import json
import math
import zipfile
import zlib
from pathlib import Path
from typing import Optional

import numpy as np

from .. import _validate
from .._files import atomic_write
from ..mha import MHAParams
from .model import POSITIONS, Config, Metrics, Model, check_config, check_model, init_model
from .training import History, check_history, evaluate, train

__all__ = ["CHECKPOINT_DIR", "CHECKPOINT_CONFIGS", "CHECKPOINT_PARENTS", "LONG_CONTEXT", "LONG_SCALINGS",
           "LONG_FINE_TUNE", "train_checkpoint", "make_checkpoint", "save_checkpoint", "load_checkpoint",
           "checkpoint_path", "checkpoint_arrays", "checkpoint_bytes", "npz_bytes", "read_npz", "MAX_NPZ_BYTES",
           "SWEEP_HS", "SWEEP_STEPS", "SCALE_CONFIG", "run_experiments", "save_experiments", "load_experiments",
           "write_npz", "check_arrays"]

CHECKPOINT_DIR = Path(__file__).resolve().parent.parent / "checkpoints"
# The configs of the shipped checkpoints (`mha-course train TASK` re-makes them).
CHECKPOINT_CONFIGS = {
    "previous_token": Config(task="previous_token", vocab=16, seq_len=16, d_model=16, h=2, n_layers=1,
                             batch=32, steps=200, lr=1e-2, seed=0),
    "induction": Config(task="induction", vocab=16, seq_len=24, d_model=32, h=2, n_layers=2,
                        batch=32, steps=800, lr=3e-3, seed=0),
}


# Notebook 13 (long context): the induction model trained at 16 positions with each position scheme
# (vocab 32: distinct copies up to 4x that length; h 4: ALiBi's steepest slope 1/4, not h = 2's 1/16),
# then RoPE fine-tuned for a few steps at 4x with each scaling (the parent checkpoint's weights first).
LONG_CONTEXT = Config(task="induction", vocab=32, seq_len=16, d_model=32, h=4, n_layers=2, batch=32,
                      steps=3000, lr=3e-3, seed=0)
LONG_FINE_TUNE = dict(seq_len=64, steps=150, lr=1e-3, seed=1)
LONG_SCALINGS = {"linear": {"type": "linear", "factor": 4.0}, "ntk": {"type": "ntk", "factor": 4.0},
                 "yarn": {"type": "yarn", "factor": 4.0, "original_max_position": 16}}
CHECKPOINT_CONFIGS.update({f"long_{p}": LONG_CONTEXT._replace(positions=p) for p in POSITIONS})
CHECKPOINT_CONFIGS["long_rope_tuned"] = LONG_CONTEXT._replace(positions="rope", **LONG_FINE_TUNE)
CHECKPOINT_CONFIGS.update({f"long_rope_{name}_tuned": LONG_CONTEXT._replace(positions="rope", rope_scaling=sc,
                                                                           **LONG_FINE_TUNE)
                           for name, sc in LONG_SCALINGS.items()})
CHECKPOINT_CONFIGS.update({f"long_{p}_len{L}": LONG_CONTEXT._replace(positions=p, seq_len=L)
                           for p in ("learned", "rope", "alibi") for L in (8, 32)})  # 13's train_len slider
CHECKPOINT_PARENTS = {name: "long_rope" for name in CHECKPOINT_CONFIGS if name.endswith("_tuned")}


def train_checkpoint(task: str, progress: bool = False, parent: Optional[Model] = None
                     ) -> tuple[Config, Model, History, Metrics]:
    """task -> (config, trained Model, History, Metrics on fresh data): CHECKPOINT_CONFIGS[task] trained.

    What ``mha-course train TASK`` runs before it writes the checkpoint (``checkpoint_bytes``).
    """
    config = CHECKPOINT_CONFIGS[_task(task)]
    progress = _validate.flag(progress, "progress")
    parent = None if parent is None else check_model(parent, config, "parent")
    if parent is None and task in CHECKPOINT_PARENTS:  # a fine-tune starts from its parent's weights (13)
        parent = load_checkpoint(checkpoint_path(CHECKPOINT_PARENTS[task]))[1]
    snaps = 0 if task.startswith("long_") else max(1, config.steps // 16)  # 13 needs no snapshots: small files
    params, history = train(config, progress=progress, snapshot_every=snaps, params=parent)
    return config, params, history, evaluate(params, config, np.random.default_rng(config.seed + 2))


def make_checkpoint(task: str, path, progress: bool = False) -> tuple[Path, Metrics]:
    """task, path -> (path written, Metrics on fresh data): trains CHECKPOINT_CONFIGS[task] and saves it."""
    _task(task), _validate.path(path, for_writing=True)  # refused before minutes of training, not after
    config, params, history, metrics = train_checkpoint(task, progress)
    return save_checkpoint(path, params, config, history), metrics


# The experiments of notebook 08 section 5, too slow to run live: `mha-course train experiments`.
SWEEP_HS = (1, 2, 4, 8, 16, 32)
SWEEP_STEPS = 600
SCALE_CONFIG = Config(task="previous_token", vocab=16, seq_len=16, d_model=128, h=1, n_layers=1,
                      batch=32, steps=300, lr=3e-3)


def _final(config: Config, seed: int = 0) -> tuple[np.ndarray, Metrics]:
    """Train ``config`` with ``seed``: its loss curve and Metrics on fresh sequences."""
    config = config._replace(seed=seed)
    params, history = train(config)
    return history.losses, evaluate(params, config, np.random.default_rng(1000 + seed), 512)


def run_experiments(seeds=(0, 1, 2)) -> dict:
    """-> name -> array: the h sweep, one layer vs two, dropout, and the 1/sqrt(d_k) scale, over ``seeds``.

    h_sweep_losses (len(seeds), len(SWEEP_HS), SWEEP_STEPS) and h_sweep_final (seeds, hs) on
    induction at d_model=32; one_layer_accuracy; dropout_{0,10}_losses; scale_{on,off}_losses
    (seed 0's run, as notebook 08 draws them); and the same runs for every seed, ``<name>_seeds``
    with a first axis of len(seeds) (dropout 0 is the two-layer model of one_layer's comparison).
    """
    base, out = CHECKPOINT_CONFIGS["induction"], {"seeds": np.array(seeds)}
    runs = [[_final(base._replace(h=h, steps=SWEEP_STEPS), s) for h in SWEEP_HS] for s in seeds]
    out["h_sweep_hs"] = np.array(SWEEP_HS)
    out["h_sweep_losses"] = np.array([[r[0] for r in row] for row in runs])
    out["h_sweep_final"] = np.array([[r[1].loss for r in row] for row in runs])
    out["h_sweep_accuracy"] = np.array([[r[1].accuracy for r in row] for row in runs])
    configs = {"one_layer": base._replace(n_layers=1), "dropout_0": base._replace(dropout=0.0),
               "dropout_10": base._replace(dropout=0.1)}
    for name, config in configs.items():
        per_seed = [_final(config, s) for s in seeds]
        out[f"{name}_losses_seeds"] = np.array([losses for losses, _ in per_seed])
        out[f"{name}_accuracy_seeds"] = np.array([m.accuracy for _, m in per_seed])
        out[f"{name}_accuracy"] = np.array(per_seed[0][1].accuracy)
        if name != "one_layer":
            out[f"{name}_losses"] = per_seed[0][0]
    out["one_layer_losses"] = out["one_layer_losses_seeds"][0]
    for name, scale in (("on", True), ("off", False)):
        out[f"scale_{name}_losses_seeds"] = np.array([_final(SCALE_CONFIG._replace(scale=scale), s)[0] for s in seeds])
        out[f"scale_{name}_losses"] = out[f"scale_{name}_losses_seeds"][0]
    return out


def save_experiments(path) -> Path:
    """Run ``run_experiments`` and write the arrays to ``path`` (``mha-course train experiments`` writes
    ./checkpoints/experiments.npz; the shipped file is ``CHECKPOINT_DIR / "experiments.npz"``)."""
    return write_npz(path, run_experiments())


def load_experiments(path=None) -> dict:
    """-> the arrays that ``save_experiments`` wrote (default: the shipped experiments.npz).

    A file that is not such an .npz (text, cut short, damaged, an array of Python objects, a
    header that claims more data than the file holds) is one ValueError naming the path.
    """
    path = CHECKPOINT_DIR / "experiments.npz" if path is None else _validate.path(path)
    arrays = read_npz(path, "experiments file", "make it again with `mha-course train experiments`")
    for key, a in arrays.items():
        if a.dtype.kind not in "biuf":
            raise ValueError(f"{path}: not an .npz experiments file ({key!r} holds {a.dtype} values, not "
                             "numbers); make it again with `mha-course train experiments`")
    return arrays


def npz_bytes(arrays: dict) -> bytes:
    """{name: array} -> the bytes of a compressed .npz holding them (no Python objects).

    >>> len(npz_bytes({"a": np.zeros(3)})) > 0
    True
    """
    arrays = check_arrays(arrays)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def write_npz(path, arrays: dict) -> Path:
    """Write {name: array} to ``path`` as one compressed .npz, atomically (``mha_course._files.atomic_write``):
    the arrays are checked and packed before anything is written, so a refused call leaves the file as it was."""
    path = _validate.path(path, for_writing=True)
    return atomic_write(path, npz_bytes(arrays))


def check_arrays(arrays, name: str = "arrays") -> dict:
    """arrays, validated as what an .npz holds: a dict of names (non-empty str without "/") to arrays of
    numbers, bools or text (nothing that would be pickled); returned as {name: np.ndarray}."""
    if not isinstance(arrays, dict):
        raise ValueError(f"{name} must be a dict {{name: array}}, got {type(arrays).__name__}; e.g. "
                         f"{name}={{'losses': np.zeros(3)}}")
    out = {}
    for key, value in arrays.items():
        if not isinstance(key, str) or not key or "/" in key:
            raise ValueError(f"{name} has the key {key!r}; each name must be a non-empty str without '/' "
                             "(it becomes a file name inside the .npz)")
        try:
            a = np.asarray(value)
        except ValueError:
            raise ValueError(f"{name}[{key!r}] is not a rectangular array (ragged nested lists?); give every row "
                             "the same length") from None
        if a.dtype.kind not in "biufU":
            raise ValueError(f"{name}[{key!r}] holds {a.dtype} values; an .npz here holds numbers, bools or text "
                             "only (an object array would be pickled)")
        out[key] = a
    return out


def checkpoint_path(task: str) -> Path:
    """task -> the path of its shipped checkpoint (``mha_course/checkpoints/TASK.npz``)."""
    return CHECKPOINT_DIR / f"{_task(task)}.npz"


def _task(task) -> str:
    """task, one of CHECKPOINT_CONFIGS' names, else a ValueError listing them."""
    if not isinstance(task, str) or task not in CHECKPOINT_CONFIGS:
        raise ValueError(f"no shipped checkpoint for task={task!r}; shipped: {sorted(CHECKPOINT_CONFIGS)}")
    return task


def _flatten(params: Model) -> dict:
    arrays = {"embed": params.embed, "unembed": params.unembed}
    if params.pos is not None:
        arrays["pos"] = params.pos
    for i, layer in enumerate(params.layers):
        arrays.update({f"layer{i}.{n}": a for n, a in zip(MHAParams._fields, layer) if a is not None})
    return arrays


def checkpoint_arrays(params: Model, config: Config, history: Optional[History] = None) -> dict:
    """Model, Config [, History] -> {name: array}: what a checkpoint .npz holds (config as JSON text)."""
    check_config(config)
    params = check_model(params, config)
    history = None if history is None else check_history(history, config)
    arrays = _flatten(params)
    if history is not None:
        arrays.update({f"history.{n}": np.asarray(a) for n, a in zip(History._fields, history)})
    arrays["config"] = np.array(json.dumps(config._asdict()))
    return arrays


def checkpoint_bytes(params: Model, config: Config, history: Optional[History] = None) -> bytes:
    """Model, Config [, History] -> the bytes of its checkpoint .npz (what ``load_checkpoint`` reads)."""
    return npz_bytes(checkpoint_arrays(params, config, history))


def save_checkpoint(path, params: Model, config: Config, history: Optional[History] = None) -> Path:
    """Write config, params (and history) to ``path`` (which must end in .npz), atomically (``mha_course._files.atomic_write``:
    a temp file, then os.replace; a new file gets ``0666 & ~umask``, an old one keeps its mode). Everything
    is checked and packed before the file is touched: a refused call leaves it as it was."""
    path = _validate.path(path, for_writing=True)
    if path.suffix != ".npz":  # load_checkpoint reads .npz archives; a name without it would hide what it holds
        raise ValueError(f"path={str(path)!r} must end in .npz (a checkpoint is an .npz archive, as load_checkpoint "
                         f"reads it); e.g. path={str(path.with_suffix('.npz'))!r}")
    return atomic_write(path, checkpoint_bytes(params, config, history))


MAX_NPZ_BYTES = 1 << 30  # what one .npz may hold once unpacked (the shipped ones hold < 2 MB)


def read_npz(path, what: str = "checkpoint", fix: str = "make it again with `mha-course train TASK`") -> dict:
    """path -> {name: array} of an .npz, every array checked before it is read; ValueError otherwise.

    Refused, each with one ValueError naming ``path`` and ``fix``: a missing path or a folder,
    a file that is no zip archive (text, a notebook), one cut short or damaged, a member that
    is no .npy array or holds Python objects (never unpickled), and a header that claims more
    data than the member holds or more than MAX_NPZ_BYTES in all (nothing that size is allocated).
    """
    path = _validate.path(path)
    if not path.exists():
        raise ValueError(f"no {what} at path={str(path)!r}; {fix}")
    if path.is_dir():
        raise ValueError(f"path={str(path)!r} is a folder, not an .npz {what}; give the path of the .npz file")

    def bad(why):
        return ValueError(f"{path}: not an .npz {what} ({why}); {fix}")

    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        raise bad("it is no zip archive: a text file, another format, or a file cut short") from None
    arrays, budget = {}, [MAX_NPZ_BYTES]
    with archive:
        for info in archive.infolist():
            name = info.filename
            if not name.endswith(".npy") or name[:-4] in arrays:
                raise bad(f"it holds {name!r}, which is no array of its own")
            try:
                arrays[name[:-4]] = _read_member(archive, info, bad, budget)
            except ValueError as err:
                if str(err).startswith(str(path)):
                    raise
                raise bad(f"{name!r} is damaged: {str(err)[:80]}") from None
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as err:
                raise bad(f"{name!r} is cut short or damaged: {str(err)[:80]}") from None
    return arrays


def _read_member(archive, info, bad, budget: list) -> np.ndarray:
    """One .npy member of an .npz: its header checked against its size and the budget left, then its data."""
    name = info.filename
    with archive.open(info) as f:
        version = np.lib.format.read_magic(f)
        if version not in ((1, 0), (2, 0)):
            raise bad(f"{name!r} has .npy format {version}, which is not read here")
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
            np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(f)
        if dtype.hasobject:
            raise bad(f"{name!r} holds Python objects, which a checkpoint never does")
        nbytes, held = math.prod(shape) * dtype.itemsize, max(info.file_size - f.tell(), 0)
        budget[0] -= nbytes
        if nbytes != held or budget[0] < 0:
            raise bad(f"{name!r} claims shape {shape} ({nbytes:,} bytes) but holds {held:,}")
        data = f.read(nbytes)
    if len(data) != nbytes:
        raise bad(f"{name!r} is cut short")
    return np.frombuffer(data, dtype).reshape(shape, order="F" if fortran else "C").copy()


def _read_config(arrays: dict, bad) -> Config:
    """The validated Config of a checkpoint's arrays (the "config" entry: JSON text)."""
    if "config" not in arrays:
        raise bad("it has no config")
    raw = arrays.pop("config")
    if raw.shape != () or raw.dtype.kind != "U":
        raise bad(f"its config is {raw.dtype} {raw.shape}, not JSON text")
    try:
        fields = json.loads(str(raw))
    except json.JSONDecodeError as err:
        raise bad(f"its config is not JSON ({err.msg})") from None
    if not isinstance(fields, dict):
        raise bad(f"its config is a JSON {type(fields).__name__}, not an object of Config fields")
    unknown = sorted(set(fields) - set(Config._fields))
    if unknown:
        raise bad(f"its config has fields Config does not know: {unknown}")
    try:
        config = Config(**fields)
        check_config(config)  # validated; returned as stored (h_kv None stays None)
    except (TypeError, ValueError) as err:
        raise bad(f"its config is not valid: {err}") from None
    return config


def load_checkpoint(path) -> tuple[Config, Model, Optional[History]]:
    """path (.npz from save_checkpoint) -> (Config, Model, History or None), checked whole at load.

    The config must be valid, and the arrays exactly those a model of that config has (names,
    shapes, finite floats: an ``n_layers=3`` config with one layer stored is refused), with a
    history whole or absent. Anything else is one ValueError naming the path (see ``read_npz``).
    """
    path = _validate.path(path)
    fix = "make one with `mha-course train TASK` or checkpoints.save_checkpoint(path, params, config)"
    arrays = read_npz(path, "checkpoint", fix)

    def bad(why):
        return ValueError(f"{path}: not a usable checkpoint ({why}); {fix}")

    config = _read_config(arrays, bad)
    history_keys = [f"history.{n}" for n in History._fields]
    stored = {k: arrays.pop(k) for k in history_keys if k in arrays}
    expected = {k: a.shape for k, a in _flatten(init_model(config, np.random.default_rng(0))).items()}
    config_line = f"n_layers={config.n_layers}, positions={config.positions!r}"
    missing, extra = sorted(expected.keys() - arrays.keys()), sorted(arrays.keys() - expected.keys())
    if missing or extra:
        raise bad(f"a model of its config ({config_line}) has "
                  f"{len(expected)} arrays; missing {missing[:6]}, not expected {extra[:6]}")
    for key, shape in expected.items():
        a = arrays[key]
        if a.shape != shape or a.dtype.kind != "f" or not np.isfinite(a).all():
            raise bad(f"{key!r} is {a.dtype} {a.shape}, expected finite floats of shape {shape}")
    layers = tuple(MHAParams(*(arrays.get(f"layer{i}.{n}") for n in MHAParams._fields))
                   for i in range(config.n_layers))
    params = Model(arrays["embed"], arrays.get("pos"), layers, arrays["unembed"])
    history = None
    if stored:
        if len(stored) != len(history_keys):
            raise bad(f"its history is partial: it has {sorted(stored)}, a history has all of {history_keys}")
        try:
            history = check_history(History(*(stored[k] for k in history_keys)), config)
        except ValueError as err:
            raise bad(f"its history is not whole: {err}") from None
    return config, params, history
