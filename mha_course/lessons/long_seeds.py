"""Notebook 13's experiments over seeds: every table trained and evaluated for seeds 0, 1 and 2 (numpy).

One run of notebook 13 is one base model per position scheme and one fine-tune per RoPE scaling:
a difference between two of its numbers may be the seed's, not the scheme's. Here every model is
trained for each seed of ``SEEDS`` (seed 0: the shipped ``long_<scheme>`` checkpoints), evaluated
on the same batches, and the numbers are kept in one small file, ``RESULTS_PATH``, which the notebook
reads (nbval never trains). ``mha-course train long_seeds`` makes it again (about 15 CPU-minutes).

- ``fine_tune``: the fair budget: every fine-tune trains at 4x the length until the mean of its last
  ``FINE_TUNE["window"]`` training losses is at most ``FINE_TUNE["target_loss"]`` (or ``max_steps``).
- ``rope_seed_results``: each seed's RoPE model read as sections 2 and 7 read seed 0's (its layer-1
  previous-token head at each length, the quantised caches), in its own small file ``ROPE_SEEDS_PATH``
  (``mha-course train long_rope_seeds``, about a CPU-minute per trained seed).
- ``summary``: mean and spread (min .. max) over seeds of one table entry; ``separated``: whether two
  rows differ by more than their spreads (the only differences the notebook reads as results).

Shapes: ``S`` seeds, ``M`` models of a table, ``K`` evaluation lengths (``LENGTHS``).

Taught in 13_long_context.ipynb.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import _validate
from ..positions import dynamic_rope_scaling
from . import checkpoints, training
from . import long_context as lc
from . import model as train
from .seeds import Summary, format_values, separated, summary

__all__ = ["SEEDS", "SCHEMES", "FIXES", "TUNED", "STREAMS", "FINE_TUNE", "RESULTS_PATH", "base_config",
           "base_models", "fine_tune", "fine_tunes", "fix_models", "at_length_scaling", "DYNAMIC",
           "evaluate_fixes", "evaluate_models",
           "stream_settings", "evaluate_streams", "run_seed", "results", "load_results",
           "QUANT_BITS", "ROPE_SEEDS_PATH", "evaluate_quantized", "evaluate_head_distance", "rope_seed_results",
           "load_rope_seeds",
           "Summary", "summary", "separated", "format_summary", "format_values"]

SEEDS = (0, 1, 2)
SCHEMES = lc.SCHEMES
RESULTS_PATH = checkpoints.CHECKPOINT_DIR / "long_seeds.npz"
YARN = checkpoints.LONG_SCALINGS["yarn"]
# RoPE's fixes without retraining (factor 4), and the dynamic ones (factor max(1, T/16) at length T)
FIXES = {"rope": None, "rope + linear": checkpoints.LONG_SCALINGS["linear"], "rope + ntk": checkpoints.LONG_SCALINGS["ntk"],
         "rope + yarn": YARN, "rope + yarn (paper ramp)": {**YARN, "ramp": "paper"},
         "rope + dynamic ntk": {"type": "ntk", "original_max_position": lc.TRAIN_LEN},
         "rope + dynamic yarn": YARN}
DYNAMIC = ("rope + dynamic ntk", "rope + dynamic yarn")
# the fine-tunes: from each seed's RoPE model, at 4x the length, the same stopping rule for all
TUNED = {"rope, tuned": None, "rope + linear, tuned": checkpoints.LONG_SCALINGS["linear"],
         "rope + ntk, tuned": checkpoints.LONG_SCALINGS["ntk"], "rope + yarn, tuned": YARN,
         "rope + yarn (paper ramp), tuned": {**YARN, "ramp": "paper"}}
FINE_TUNE = dict(seq_len=4 * lc.TRAIN_LEN, lr=3e-3, target_loss=0.5, window=50, max_steps=1500)
# the streams of section 4: (window, sinks, positions) per setting; None: full attention
STREAMS = {"full attention": (None, 0, "absolute"), "window 16": (16, 0, "absolute"),
           "window 16 + 1 sink": (16, 1, "absolute"), "window 16 + 4 sinks": (16, 4, "absolute"),
           "window 16 + 1 sink, cache positions": (16, 1, "cache"),
           "window 16 + 4 sinks, cache positions": (16, 4, "cache"),
           "window 16, cache positions": (16, 0, "cache")}


# section 7's quantised caches: bits per stored number (None: float64, 16: float16)
QUANT_BITS = (None, 16, 8, 4, 3, 2)
ROPE_SEEDS_PATH = checkpoints.CHECKPOINT_DIR / "long_rope_seeds.npz"


def base_config(scheme: str, seed: int):
    """The config of the ``scheme`` model of ``seed`` (notebook 13's LONG_CONTEXT, that seed)."""
    if scheme not in SCHEMES:
        raise ValueError(f"scheme={scheme!r}; choose one of {SCHEMES}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed={seed!r} must be a whole number >= 0, for example 1")
    return checkpoints.LONG_CONTEXT._replace(positions=scheme, seed=int(seed))


def base_models(seed: int, folder=None, progress: bool = False) -> dict:
    """seed -> {scheme: (Config, Model)}: seed 0 the shipped checkpoints, others trained (and kept in
    ``folder`` as ``seed<s>_<scheme>.npz`` if given; read back from there when present)."""
    out = {}
    for scheme in SCHEMES:
        if seed == 0:
            out[scheme] = lc.load_scheme(scheme)
            continue
        path = None if folder is None else Path(folder) / f"seed{seed}_{scheme}.npz"
        if path is not None and path.exists():
            out[scheme] = checkpoints.load_checkpoint(path)[:2]
            continue
        config = base_config(scheme, seed)
        params, history = training.train(config, progress=progress)
        if path is not None:
            checkpoints.save_checkpoint(path, params, config, history)
        out[scheme] = (config, params)
    return out


def fine_tune(config, params, scaling, seed: int, progress: bool = False) -> tuple:
    """The RoPE model -> (fine-tuned Model, steps taken, mean of its last ``window`` training losses).

    From ``params``, at ``FINE_TUNE["seq_len"]`` tokens with ``scaling``, Adam at ``lr`` until the
    mean training loss of the last ``window`` steps is at most ``target_loss``, or ``max_steps``.
    """
    rule = FINE_TUNE
    cfg = config._replace(rope_scaling=scaling, seq_len=rule["seq_len"], lr=rule["lr"], steps=rule["max_steps"],
                          seed=seed + 1)
    losses = []

    def stop(step, metrics, _params):
        losses.append(metrics.loss)
        return len(losses) >= rule["window"] and np.mean(losses[-rule["window"]:]) <= rule["target_loss"]
    tuned, history = training.train(cfg, callback=stop, progress=progress, params=params)
    return tuned, len(history.losses), float(np.mean(history.losses[-rule["window"]:]))


def fine_tunes(seed: int, rope, folder=None, progress: bool = False) -> dict:
    """seed, its (Config, Model) of RoPE -> {name of TUNED: (Config at the training length, Model, steps,
    final loss)}; kept in ``folder`` as ``seed<s>_tuned<i>.npz`` (read back when present)."""
    config, params = rope
    out = {}
    for i, (name, scaling) in enumerate(TUNED.items()):
        path = None if folder is None else Path(folder) / f"seed{seed}_tuned{i}.npz"
        if path is not None and path.exists():
            cfg, tuned, history = checkpoints.load_checkpoint(path)
            steps, final = len(history.losses), float(np.mean(history.losses[-FINE_TUNE["window"]:]))
        else:
            tuned, steps, final = fine_tune(config, params, scaling, seed, progress)
            cfg = config._replace(rope_scaling=scaling)
            if path is not None:
                checkpoints.save_checkpoint(path, tuned, cfg._replace(seq_len=FINE_TUNE["seq_len"]),
                                      training.History(np.full(steps, final), np.zeros(0, int),
                                                    np.zeros((0, cfg.n_layers, cfg.h, 0, 0))))
        out[name] = (cfg._replace(seq_len=lc.TRAIN_LEN), tuned, steps, final)
    return out


def fix_models(rope) -> dict:
    """(Config, Model) of RoPE -> {name of FIXES: (Config, Model)}, the same weights; a dynamic
    scaling is kept as given and resolved per length by ``evaluate_fixes``."""
    config, params = rope
    return {name: (config._replace(rope_scaling=None if name in DYNAMIC else sc), params)
            for name, sc in FIXES.items()}


def at_length_scaling(config, name: str, T: int):
    """The config a FIXES model reads T tokens with: a dynamic scaling resolved for T.

    ``name`` is a key of FIXES (a name of another table would silently get the config unchanged).
    """
    config = train.check_config(config)
    if name not in FIXES:
        raise ValueError(f"name={name!r:.60} is not a fix of FIXES; choose one of {', '.join(map(repr, FIXES))}")
    T = _validate.positive_int(T, "T")
    if name not in DYNAMIC:
        return config
    return config._replace(rope_scaling=dynamic_rope_scaling(FIXES[name], T))


def evaluate_models(models: dict, kind: str, n: int = 256, lengths=lc.LENGTHS) -> np.ndarray:
    """{name: (Config, Model)} -> (M, K, 2): accuracy and loss at each length (``lc.evaluate_at``,
    seed T: the batches of notebook 13's tables); a FIXES name with a dynamic scaling is resolved per T."""
    out = np.zeros((len(models), len(lengths), 2))
    for i, (name, (config, params)) in enumerate(models.items()):
        for k, T in enumerate(lengths):
            m, _ = lc.evaluate_at(params, at_length_scaling(config, name, T), T, kind, seed=T, n=n)
            out[i, k] = m.accuracy, m.loss
    return out


def evaluate_fixes(rope, kind: str, n: int = 256) -> np.ndarray:
    """(Config, Model) of RoPE -> (len(FIXES), K, 2) accuracy and loss of each fix."""
    return evaluate_models(fix_models(rope), kind, n)


def stream_settings() -> dict:
    """STREAMS as {label: (window, sinks, positions)}."""
    return dict(STREAMS)


def evaluate_streams(rope, n: int = 64, episodes: int = 8) -> np.ndarray:
    """(Config, Model) of RoPE -> (len(STREAMS), 2): accuracy and loss over a stream of ``episodes``
    episodes (``lc.stream_batch``, seed 1), for each window / sinks / positions setting."""
    config, params = rope
    stream = lc.stream_batch(config, episodes, np.random.default_rng(1), n)
    out = np.zeros((len(STREAMS), 2))
    for i, (window, sinks, positions) in enumerate(STREAMS.values()):
        _, m = lc.stream_position_losses(params, config, stream, window, sinks, positions=positions)
        out[i] = m.accuracy, m.loss
    return out


def evaluate_quantized(rope, n: int = 256) -> np.ndarray:
    """(Config, Model) of RoPE -> (len(QUANT_BITS), 2): accuracy and loss with every layer's cache stored at
    each precision of ``QUANT_BITS`` (``lc.quantized_metrics``), on notebook 13's batch (seed 5, n sequences)."""
    config, params = rope
    batch = train.make_batch(config, np.random.default_rng(5), n)
    out = np.zeros((len(QUANT_BITS), 2))
    for i, bits in enumerate(QUANT_BITS):
        m = lc.quantized_metrics(params, config, batch, bits)
        out[i] = m.accuracy, m.loss
    return out


def evaluate_head_distance(rope, n: int = 128) -> np.ndarray:
    """(Config, Model) of RoPE -> (K, 2): its layer-1 previous-token head (the one with the most weight on t - 1
    at the training length) on the shifted task at each length of LENGTHS (seed T, n sequences): its weight on
    key t - 1, and on the keys TRAIN_LEN or more tokens back (``lc.weight_by_distance``)."""
    config, params = rope
    rows = [lc.weight_by_distance(params, config, lc.shifted_batch(config, T, np.random.default_rng(T), n), layer=0)
            for T in lc.LENGTHS]  # [(h, T)] * K
    head = int(np.argmax(rows[lc.LENGTHS.index(lc.TRAIN_LEN)][:, 1]))
    return np.array([[w[head, 1], w[head, lc.TRAIN_LEN:].sum()] for w in rows])


def rope_seed_results(seeds=SEEDS, folder=None, progress: bool = False) -> dict:
    """Train (for seeds other than 0) each seed's RoPE model -> {"seeds" (S,), "head_distance" (S, K, 2),
    "bits" (len(QUANT_BITS),) with 0 for float64, "quantized" (S, len(QUANT_BITS), 2)}: sections 2 and 7 over
    seeds (``mha-course train long_rope_seeds``; ``folder``: read ``seed<s>_rope.npz`` from there when present)."""
    rows = []
    for seed in seeds:
        config = base_config("rope", seed)
        path = None if folder is None else Path(folder) / f"seed{seed}_rope.npz"
        if seed == 0:
            rope = lc.load_scheme("rope")
        elif path is not None and path.exists():
            rope = checkpoints.load_checkpoint(path)[:2]
        else:
            rope = (config, training.train(config, progress=progress)[0])
        rows.append((evaluate_head_distance(rope), evaluate_quantized(rope)))
    return {"seeds": np.array(seeds), "head_distance": np.stack([r[0] for r in rows]),
            "bits": np.array([0 if b is None else b for b in QUANT_BITS]), "quantized": np.stack([r[1] for r in rows])}


def load_rope_seeds(path=None) -> dict:
    """-> the arrays of ``rope_seed_results`` (default: the shipped ``ROPE_SEEDS_PATH``); a ValueError names a bad file."""
    path = Path(ROPE_SEEDS_PATH if path is None else path)
    arrays = checkpoints.read_npz(path, "results file", "make it again with `mha-course train long_rope_seeds`")
    if {"seeds", "head_distance", "bits", "quantized"} - set(arrays):
        raise ValueError(f"{path}: not a long_rope_seeds results file (it needs seeds, head_distance, bits and "
                         "quantized); make it again with `mha-course train long_rope_seeds`")
    return arrays


def run_seed(seed: int, folder=None, progress: bool = False) -> dict:
    """seed -> {name: array} of that seed's tables (base models and fine-tunes trained if needed)."""
    models = base_models(seed, folder, progress)
    tuned = fine_tunes(seed, models["rope"], folder, progress)
    tuned_models = {name: (c, p) for name, (c, p, _, _) in tuned.items()}
    probe = train.make_batch(models["rope"][0], np.random.default_rng(0), 256)
    out = {"stretched": evaluate_models(models, "stretched"), "shifted": evaluate_models(models, "shifted"),
           "fixes_stretched": evaluate_fixes(models["rope"], "stretched"),
           "fixes_shifted": evaluate_fixes(models["rope"], "shifted"),
           "tuned_stretched": evaluate_models(tuned_models, "stretched"),
           "tuned_shifted": evaluate_models(tuned_models, "shifted"),
           "tuned_steps": np.array([t[2] for t in tuned.values()]),
           "tuned_final_loss": np.array([t[3] for t in tuned.values()]),
           "sink_max": np.array([lc.sink_weight(p, c, probe).max() for c, p in models.values()]),
           "streams": evaluate_streams(models["rope"])}
    return out


def results(seeds=SEEDS, folder=None, progress: bool = False) -> dict:
    """-> {name: array (S, ...)}: ``run_seed`` of every seed, stacked along a first axis, and ``seeds``."""
    runs = [run_seed(s, folder, progress) for s in seeds]
    return {"seeds": np.array(seeds), **{k: np.stack([r[k] for r in runs]) for k in runs[0]}}


def load_results(path=None) -> dict:
    """-> the arrays of ``results`` (default: the shipped ``RESULTS_PATH``); a ValueError names a bad file."""
    path = Path(RESULTS_PATH if path is None else path)
    arrays = checkpoints.read_npz(path, "results file", "make it again with `mha-course train long_seeds`")
    missing = {"seeds", "stretched", "shifted", "fixes_stretched", "tuned_stretched", "streams"} - set(arrays)
    if missing:
        raise ValueError(f"{path}: not a long_seeds results file (no {sorted(missing)}); make it again with "
                         "`mha-course train long_seeds`")
    return arrays


def format_summary(table: np.ndarray, names, lengths=lc.LENGTHS, train_len: int = lc.TRAIN_LEN,
                   column: int = 0) -> str:
    """(S, M, K, 2) -> text: for each model, mean (min-max) over seeds of accuracy (``column`` 0) or
    loss (1) at each length; ``names`` (M,), ``lengths`` (K,)."""
    table = _validate.finite_array(table, "table")
    names = _validate.items(list(names) if isinstance(names, dict) else names, "names", "list(FIXES)")  # a dict: its keys
    lengths = _validate.positive_ints(lengths, "lengths")
    lengths = [int(lengths)] if np.ndim(lengths) == 0 else lengths.tolist()
    train_len = _validate.positive_int(train_len, "train_len")
    column = _validate.index(column, 2, "column", "columns (0 accuracy, 1 loss)")
    want = ("S", len(names), len(lengths), 2)
    if table.ndim != 4 or table.shape[1:] != want[1:] or table.shape[0] == 0:
        raise ValueError(f"table has shape {table.shape}; give (S, M, K, 2) = {want}: one row per name, one "
                         "column per length, at least one seed, as results() makes them")
    what = "accuracy" if column == 0 else "loss"
    head = f"{what + ', mean (min-max)':<34}" + "".join(f"{f'{T // train_len}x = {T}':>22}" for T in lengths)
    rows = [f"{name:<34}" + "".join(f"{str(summary(table[:, i, k, column])):>22}" for k in range(len(lengths)))
            for i, name in enumerate(names)]
    return "\n".join([head, *rows])
