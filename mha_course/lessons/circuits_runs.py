"""Training runs watched: the induction phase change (a run observed every few steps) and every
experiment of notebook 14 repeated over training seeds, with the summaries that compare them (numpy).

Shapes: ``n`` checkpoints of a run, ``L`` layers, ``h`` heads, ``T`` positions.

    >>> seed_summary([1.0, 2.0, 3.0])
    '2.000 ± 1.000'

Taught in 14_circuits.ipynb (re-exported by ``lessons.circuits``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, NamedTuple, Optional

import numpy as np

from . import _args, checkpoints, training
from . import model as train
from .circuits_data import make_pair, repeated_tokens
from .circuits_patching import (
    ABLATIONS,
    ablation_losses,
    attribution_patching,
    direct_logit_attribution,
    head_patching,
    key_occlusion,
    path_patching,
)
from .circuits_scores import (
    SCORE_NAMES,
    attention_rollout,
    composition_baseline_scores,
    composition_scores,
    copying_score,
    head_scores,
    ov_circuit,
    ov_spectrum,
    repeat_induction_score,
)

__all__ = ["Trajectory", "PHASE_CHANGE_CONFIGS", "PHASE_CHANGE_EVERY", "train_trajectory", "formation_step",
           "trajectory_path", "trajectory_arrays", "save_trajectories", "load_trajectories", "SEEDS",
           "seed_results", "seed_results_path", "load_seed_results", "formed", "seed_summary", "compare_over_seeds"]

# ----------------------------------------------------------------------------- the phase change
class Trajectory(NamedTuple):
    """A training run seen every few steps. ``steps`` (n,) updates done; ``losses`` (steps,) the training
    loss of every step; at each checkpoint, on a fixed probe batch: ``probe_loss`` (n,), ``scores``
    (n, 3, L, h) (SCORE_NAMES order), ``k_composition`` (n, h, h) (layer 0 -> layer 1; (n, 0, 0) for one
    layer) and ``weights`` (n, L, h, T, T) on probe sequence 0, whose tokens are ``tokens`` (T,)."""
    config: train.Config
    steps: np.ndarray
    losses: np.ndarray
    probe_loss: np.ndarray
    scores: np.ndarray
    k_composition: np.ndarray
    weights: np.ndarray
    tokens: np.ndarray


# The runs of notebook 14 §2: notebook 08's two-layer induction model, and the same with one layer.
PHASE_CHANGE_CONFIGS = {"two_layer": checkpoints.CHECKPOINT_CONFIGS["induction"],
                        "one_layer": checkpoints.CHECKPOINT_CONFIGS["induction"]._replace(n_layers=1)}
PHASE_CHANGE_EVERY = 5


def _observe(params, config, probe) -> tuple:
    logits, weights = train.forward(params, probe.tokens, config)
    scores = head_scores(weights, probe.tokens)
    comp = (composition_scores(params, config)["K"] if config.n_layers > 1 else np.zeros((0, 0)))
    return (training.metrics(params, probe, config).loss, np.stack([scores[n] for n in SCORE_NAMES]), comp,
            np.stack(weights)[:, 0].astype(np.float32))


def train_trajectory(config, every: int = PHASE_CHANGE_EVERY, progress: bool = False,
                     callback: Optional[Callable] = None, n_probe: int = 64) -> Trajectory:
    """config -> Trajectory: ``training.train(config)`` (the same run, the same numbers), observed at
    step 0 and every ``every`` steps on a probe batch of ``n_probe`` sequences (seed config.seed + 3).
    ``callback(step, metrics, params)`` is passed on to training.train (a live loss plot)."""
    _args.no_norm(config)
    probe = train.make_batch(config, np.random.default_rng(config.seed + 3), n_probe)
    seen = [(0, _observe(train.init_model(config), config, probe))]

    def watch(step, metrics, params):
        if (step + 1) % every == 0:
            seen.append((step + 1, _observe(params, config, probe)))
        return bool(callback(step, metrics, params)) if callback is not None else False
    _, history = training.train(config, callback=watch, progress=progress)
    parts = list(zip(*[obs for _, obs in seen]))
    return Trajectory(config, np.array([s for s, _ in seen]), history.losses, np.array(parts[0]),
                      np.stack(parts[1]), np.stack(parts[2]), np.stack(parts[3]), probe.tokens[0])


def formation_step(trajectory: Trajectory, threshold: float = 0.5) -> Optional[int]:
    """-> the first checkpoint step at which the best last-layer prefix-matching score reaches ``threshold``
    (None if it never does: the one-layer model). ``threshold`` is a score, in [0, 1]."""
    if not isinstance(trajectory, Trajectory):
        raise TypeError(f"trajectory={trajectory!r:.60} is not a Trajectory; use train_trajectory(config) or "
                        "load_trajectories()[name]")
    threshold = _args.number(threshold, "threshold", 0.0, 1.0)
    best = trajectory.scores[:, SCORE_NAMES.index("prefix_matching"), -1].max(-1)  # (n,)
    if trajectory.config.n_layers < 2 or not (best >= threshold).any():
        return None
    return int(trajectory.steps[np.argmax(best >= threshold)])


def trajectory_path() -> Path:
    """-> the shipped trajectories (``mha_course/checkpoints/phase_change.npz``)."""
    return checkpoints.CHECKPOINT_DIR / "phase_change.npz"


def trajectory_arrays(progress: bool = False) -> dict:
    """Train every PHASE_CHANGE_CONFIGS run with ``train_trajectory`` -> the arrays of the .npz that
    ``load_trajectories`` reads. What ``mha-course train phase_change`` runs (about 30 s)."""
    arrays = {}
    for name, config in PHASE_CHANGE_CONFIGS.items():
        t = train_trajectory(config, progress=progress)
        arrays[f"{name}.config"] = np.array(json.dumps(config._asdict()))
        for field in Trajectory._fields[1:]:
            a = getattr(t, field)
            arrays[f"{name}.{field}"] = a.astype(np.float32) if a.dtype == np.float64 else a
    return arrays


def save_trajectories(path=None, progress: bool = False) -> Path:
    """``trajectory_arrays`` written to ``path`` (default: the shipped file), atomically."""
    return checkpoints.write_npz(trajectory_path() if path is None else path, trajectory_arrays(progress))


def load_trajectories(path=None) -> dict:
    """-> {name: Trajectory} as ``save_trajectories`` wrote them (default: the shipped file)."""
    path = Path(trajectory_path() if path is None else path)
    fix = "make them with `mha-course train phase_change`"
    z = checkpoints.read_npz(path, "trajectory file", fix)
    out = {}
    for name in PHASE_CHANGE_CONFIGS:
        missing = [f"{name}.{f}" for f in Trajectory._fields if f"{name}.{f}" not in z]
        if missing:
            raise ValueError(f"{path} holds no {', '.join(missing[:3])}: it is not a trajectory file (a checkpoint?); "
                             f"{fix}")
        try:
            config = train.Config(**json.loads(str(z[f"{name}.config"])))
        except (TypeError, ValueError):
            raise ValueError(f"{path}: {name}.config is not a model configuration; {fix}") from None
        out[name] = Trajectory(config, *(z[f"{name}.{f}"] for f in Trajectory._fields[1:]))
    return out


# ----------------------------------------------------------------------------- over seeds
SEEDS = (0, 1, 2, 3, 4)  # seed 0 is the shipped checkpoint's run


def _roles(params, config, probe) -> tuple:
    """-> (previous-token head, the other layer-0 head, induction head, the other layer-1 head) as (layer, head)."""
    scores = head_scores(train.forward(params, probe.tokens, config)[1], probe.tokens)
    prev = int(np.argmax(scores["previous_token"][0]))
    ind = int(np.argmax(scores["prefix_matching"][1]))
    return (0, prev), (0, 1 - prev), (1, ind), (1, 1 - ind)


def _seed_row(params, config, two: Trajectory, one: Trajectory, rng_seed: int = 1400) -> dict:
    """One trained seed -> {quantity: float}, its heads named by role (they differ between seeds)."""
    probe = train.make_batch(config, np.random.default_rng(rng_seed), 256)
    pair = make_pair(config, np.random.default_rng(rng_seed + 1), 128, corrupt="key")
    pair_v = make_pair(config, np.random.default_rng(rng_seed + 1), 128, corrupt="value")
    reference = train.make_batch(config, np.random.default_rng(rng_seed + 2), 256).tokens
    prev, other, ind, backup = roles = _roles(params, config, probe)
    names = ("prev", "other", "ind", "backup")
    scores = head_scores(train.forward(params, probe.tokens, config)[1], probe.tokens)
    comp = composition_scores(params, config)
    dla = direct_logit_attribution(params, config, probe)
    key, value = head_patching(params, config, pair), head_patching(params, config, pair_v)
    attr = attribution_patching(params, config, pair)
    abl = ablation_losses(params, config, probe, reference, [[r] for r in roles] + [[ind, backup]])
    prev_best = two.scores[:, SCORE_NAMES.index("previous_token"), 0].max(-1)  # (n,): the best layer-0 head
    top = [w.max(-1).mean(axis=(0, 2)) for w in train.forward(params, probe.tokens, config)[1]]  # [(h,)] * L
    row = {"formation_step": formation_step(two),  # None (NaN) when no layer-1 head reaches 0.5 in the run
           "final_loss": two.probe_loss[-1],
           "previous_token_step": two.steps[np.argmax(prev_best >= 0.5)] if (prev_best >= 0.5).any() else np.nan,
           "top_weight_prev": top[0][prev[1]], "top_weight_ind": top[1][ind[1]],
           "one_layer_loss": one.probe_loss[-1],
           "one_layer_prefix": one.scores[:, SCORE_NAMES.index("prefix_matching"), -1].max(),
           "previous_token_prev": scores["previous_token"][prev], "prefix_ind": scores["prefix_matching"][ind],
           "prefix_backup": scores["prefix_matching"][backup], **_seed_readings(params, config, pair, roles, rng_seed)}
    for kind in "QKV":
        row[f"{kind.lower()}_comp_ind"] = comp[kind][prev[1], ind[1]]
        row[f"{kind.lower()}_comp_backup"] = comp[kind][prev[1], backup[1]]
    row["copying_ind"] = copying_score(ov_circuit(params, config, *ind))
    row["copying_prev"] = copying_score(ov_circuit(params, config, *prev))
    row["dla_ind"], row["dla_prev"] = dla.heads[ind], dla.heads[prev]
    for name, r in zip(names, roles):
        row[f"patch_{name}"], row[f"patch_value_{name}"], row[f"attribution_{name}"] = key[r], value[r], attr[r]
    row["path_q"] = path_patching(params, config, pair, prev, ind, "q")
    row["path_kv"] = path_patching(params, config, pair, prev, ind, "kv")
    for kind in ABLATIONS:
        for name, v in zip((*names, "both"), abl[kind]):
            row[f"{kind}_{name}"] = v
    return {k: np.nan if v is None else float(v) for k, v in row.items()}  # None: the head never formed


def _top_three(v, t: int) -> list:
    """(T,) -> the three positions <= t where v is largest, in order of position."""
    return sorted(np.argsort(-v[:t + 1], kind="stable")[:3].tolist())


def _seed_readings(params, config, pair, roles, rng_seed: int) -> dict:
    """The seed's weight readings beyond the head scores, heads named by role (prev, other, ind, backup):
    the induction score on repeated random tokens (``repeat_<role>``), the top singular value's share of
    the OV circuit's squared norm (``ov_top_share_<role>``), and whether rollout and the last layer's
    weights find the three positions that key occlusion finds at the pair's query (1.0 yes, 0.0 no)."""
    half = config.seq_len // 2
    rep = repeated_tokens(config.vocab, half, 256, np.random.default_rng(rng_seed + 4))
    rep_w = train.forward(params, rep, config)[1]  # [(B, h, T, T)] * L
    row = {}
    for name, (layer, head) in zip(("prev", "other", "ind", "backup"), roles):
        row[f"repeat_{name}"] = repeat_induction_score(rep_w[layer], half)[head]
        s = ov_spectrum(params, config, layer, head)  # (V,), largest first
        row[f"ov_top_share_{name}"] = s[0] ** 2 / (s ** 2).sum()
    w_pair, t = train.forward(params, pair.clean, config)[1], pair.position
    found = _top_three(key_occlusion(params, config, pair, np.random.default_rng(rng_seed + 3)), t)
    row["rollout_finds_occlusion"] = float(_top_three(attention_rollout(w_pair)[:, t].mean(0), t) == found)
    row["last_layer_finds_occlusion"] = float(_top_three(w_pair[-1][:, :, t].mean((0, 1)), t) == found)
    return row


def seed_results(seeds=SEEDS, progress: bool = False) -> dict:
    """-> {quantity: (len(seeds),)} plus "seeds" and the random composition baseline ("baseline" (200,)):
    notebook 08's induction model and its one-layer twin trained with each seed (``train_trajectory``),
    then every experiment of notebook 14 run on it with its heads named by role (prev, other, ind, backup).
    What ``mha-course train circuit_seeds`` runs (about 20 s of CPU per seed)."""
    rows = []
    for seed in seeds:
        configs = {name: c._replace(seed=int(seed)) for name, c in PHASE_CHANGE_CONFIGS.items()}
        final = {}
        two = train_trajectory(configs["two_layer"], progress=progress,
                               callback=lambda step, m, p: final.update(params=p) or False)
        one = train_trajectory(configs["one_layer"], progress=progress)
        rows.append(_seed_row(final["params"], configs["two_layer"], two, one))
    config = PHASE_CHANGE_CONFIGS["two_layer"]
    out = {k: np.array([r[k] for r in rows]) for k in rows[0]}
    out["seeds"] = np.array(seeds, dtype=np.int64)
    out["baseline"] = composition_baseline_scores(config.d_model, config.d_model // config.h, np.random.default_rng(0))
    return out


def seed_results_path() -> Path:
    """-> the shipped results over seeds (``mha_course/checkpoints/circuit_seeds.npz``)."""
    return checkpoints.CHECKPOINT_DIR / "circuit_seeds.npz"


def load_seed_results(path=None) -> dict:
    """-> {quantity: (n_seeds,)} as ``seed_results`` made them (default: the shipped file)."""
    path = Path(seed_results_path() if path is None else path)
    z = checkpoints.read_npz(path, "results file", "make it with `mha-course train circuit_seeds`")
    if "seeds" not in z or "baseline" not in z:
        raise ValueError(f"{path} holds no 'seeds' or 'baseline': it is not a results file of seed_results; "
                         "make it with `mha-course train circuit_seeds`")
    return z


def formed(results: dict) -> np.ndarray:
    """results of ``seed_results`` -> (n_seeds,) bool: the seeds whose induction head formed within the run."""
    if not hasattr(results, "keys") or "formation_step" not in results.keys():
        raise ValueError(f"results={results!r:.60} holds no 'formation_step': give the dict of seed_results or "
                         "load_seed_results()")
    return np.isfinite(_per_seed(results["formation_step"], "results['formation_step']", allow_nan=True))


def _per_seed(values, name: str, allow_nan: bool = False) -> np.ndarray:
    """values (n,), n >= 2, one number per seed -> float64 (NaN allowed only where a run never got there)."""
    try:
        v = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={values!r:.60} is not one number per seed; give a 1-D array of floats") from None
    if v.ndim != 1 or v.size < 2 or np.isinf(v).any() or (not allow_nan and np.isnan(v).any()):
        raise ValueError(f"{name} has shape {v.shape}; give one finite value per seed, at least 2 seeds")
    return v


def seed_summary(values, decimals: int = 3) -> str:
    """values (n,) over seeds -> "mean ± sd" (the sample standard deviation), to ``decimals`` places.

    >>> seed_summary([1.0, 2.0, 3.0]), seed_summary([375, 540, 505, 385], decimals=0)
    ('2.000 ± 1.000', '451 ± 84')
    """
    v = _per_seed(values, "values")
    if isinstance(decimals, bool) or not isinstance(decimals, (int, np.integer)) or not 0 <= decimals <= 12:
        raise ValueError(f"decimals={decimals!r} must be a whole number from 0 to 12")
    return f"{v.mean():.{decimals}f} ± {v.std(ddof=1):.{decimals}f}"


def compare_over_seeds(a, b) -> str:
    """a, b (n,): one value per seed, paired -> "a > b", "a < b" or "within the noise".

    A difference counts when it has the same sign in every seed and its mean is larger than its
    spread (the standard deviation of the per-seed differences); otherwise it is within the noise.

    >>> compare_over_seeds([2.0, 2.1, 1.9], [1.0, 1.0, 1.1]), compare_over_seeds([1.0, 2.0, 1.5], [1.1, 1.0, 1.0])
    ('a > b', 'within the noise')
    """
    a, b = _per_seed(a, "a"), _per_seed(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a has shape {a.shape} and b {b.shape}; give one finite value per seed for each "
                         "(the same seeds, paired)")
    d = a - b
    if abs(d.mean()) > d.std(ddof=1) and (np.all(d > 0) or np.all(d < 0)):
        return "a > b" if d.mean() > 0 else "a < b"
    return "within the noise"
