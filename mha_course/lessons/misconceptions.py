"""Experiments that test common beliefs about multi-head attention (numpy only).

Each function measures one thing notebook 11 needs, on the trained models of ``train``:

- ``ablated_metrics`` / ``keep_only``: a model with some heads silenced (is MHA an ensemble?);
- ``ensemble_metrics``: independently trained models averaged, as an ensemble really is;
- ``head_attribution``: per head, how big its weights look, what ablating it costs, and its
  gradient x input (first-order estimate of that cost) from ``backward.mha_backward``;
- ``key_attribution`` / ``rank_correlation``: per query and key, weight vs. actual contribution;
- ``rnn_scan`` / ``sequential_steps``: the sequential depth of an RNN vs. attention.

Shapes: ``B`` batch, ``T`` positions, ``D = d_model``, ``h`` heads, ``d_k = D // h``, ``L`` layers.

    >>> sequential_steps(16)
    (16, 1)

Taught in 11_misconceptions_and_interview.ipynb.
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

from .. import _validate
from ..attention import causal_mask, softmax
from ..mha import Trace, init_params, multi_head_attention
from . import checkpoints, training
from . import model as train

__all__ = ["DATA_DIR", "residual_stream", "ENSEMBLE_CONFIG", "ensemble_paths", "make_ensemble", "load_ensemble",
           "ablated_metrics", "keep_only", "ensemble_metrics", "JOINT_SEEDS", "joint_paths", "make_joint_models",
           "load_joint_models", "SeedVerdict", "ensemble_verdict", "head_contributions", "head_attribution",
           "key_attribution",
           "rank_correlation", "rnn_scan", "sequential_steps"]

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
# Independent single-head models at the induction checkpoint's d_model (`make_ensemble` re-makes them).
ENSEMBLE_CONFIG = checkpoints.CHECKPOINT_CONFIGS["induction"]._replace(h=1)
ENSEMBLE_SEEDS = (0, 1, 2)
# The jointly trained h = 2 induction model of notebook 08 (seed 0, its shipped checkpoint) and two more
# seeds of the same config (``make_joint_models`` re-makes them): section 2's verdict is read over all three.
JOINT_SEEDS = (0, 1, 2)


def ensemble_paths() -> list[Path]:
    """-> the paths of the shipped single-head members (``data/ensemble_seed{S}.npz``)."""
    return [DATA_DIR / f"ensemble_seed{s}.npz" for s in ENSEMBLE_SEEDS]


def make_ensemble(folder=None) -> list[Path]:
    """Train ENSEMBLE_CONFIG once per seed, each run on its own; save the checkpoints (slow: minutes)."""
    folder = DATA_DIR if folder is None else Path(folder)
    paths = []
    for seed, path in zip(ENSEMBLE_SEEDS, ensemble_paths()):
        config = ENSEMBLE_CONFIG._replace(seed=seed)
        params, _ = training.train(config)
        paths.append(checkpoints.save_checkpoint(folder / path.name, params, config))
    return paths


def load_ensemble() -> list[tuple]:
    """-> [(Config, Model)] of the shipped single-head members."""
    return [checkpoints.load_checkpoint(p)[:2] for p in ensemble_paths()]


def joint_paths() -> list[Path]:
    """-> the checkpoints of the jointly trained h = 2 models, one per seed of JOINT_SEEDS (seed 0: 08's)."""
    return [checkpoints.checkpoint_path("induction") if s == 0 else DATA_DIR / f"joint_seed{s}.npz"
            for s in JOINT_SEEDS]


def make_joint_models(folder=None) -> list[Path]:
    """Train the induction config once per seed of JOINT_SEEDS but 0 (slow: minutes); save the checkpoints."""
    folder = DATA_DIR if folder is None else Path(folder)
    paths = []
    for seed, path in zip(JOINT_SEEDS[1:], joint_paths()[1:]):
        config = checkpoints.CHECKPOINT_CONFIGS["induction"]._replace(seed=seed)
        params, _ = training.train(config)
        paths.append(checkpoints.save_checkpoint(folder / path.name, params, config))
    return paths


def load_joint_models() -> list[tuple]:
    """-> [(Config, Model)] of the jointly trained h = 2 induction models, one per seed of JOINT_SEEDS."""
    return [checkpoints.load_checkpoint(p)[:2] for p in joint_paths()]


# ----------------------------------------------------------------------------- checks at the entry
_MAKE_MODEL = "pass the params and config of checkpoints.load_checkpoint(...), or model.init_model(config)"


def _model(params, config) -> None:
    """A Model and the Config it was made with; a ValueError or TypeError names the argument otherwise."""
    config = train.check_config(config)
    _validate.instance(params, train.Model, "params", _MAKE_MODEL)
    sizes = (np.shape(params.embed), len(params.layers))
    if sizes != ((config.vocab, config.d_model), config.n_layers):
        raise ValueError(f"params (embed {sizes[0]}, {sizes[1]} layers) were not made for config (vocab="
                         f"{config.vocab}, d_model={config.d_model}, n_layers={config.n_layers}); pass the config "
                         "they were trained with")


def _run(seed, n) -> tuple[int, int]:
    """seed (a whole number >= 0) and n (sequences, >= 1) of one measurement, checked."""
    return _validate.count(seed, "seed"), _validate.positive_int(n, "n")


def _heads(config, heads, name: str = "heads") -> list:
    """heads [(layer, head)], each an index of the model's layers and heads; a ValueError names ``name``."""
    pairs = _validate.items(heads, name, "[(0, 1)]")
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"{name}[{i}]={pair!r} is not a (layer, head) pair; pass e.g. {name}=[(0, 1)]")
        _validate.index(pair[0], config.n_layers, f"{name}[{i}] layer", "layers in the model")
        _validate.index(pair[1], config.h, f"{name}[{i}] head", "heads per layer")
    return [(int(a), int(b)) for a, b in pairs]


def _members(models, name: str) -> list:
    """[(Config, Model)] of one task, at least one, each pair checked; a ValueError names ``name``."""
    models = _validate.items(models, name, "load_ensemble()")
    if not models:
        raise ValueError(f"{name} is empty; give at least one (Config, Model), e.g. {name}=load_ensemble()")
    for i, pair in enumerate(models):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"{name}[{i}] is a {type(pair).__name__}, not a (Config, Model) pair; pass e.g. "
                             f"{name}=load_ensemble()")
        try:
            _model(pair[1], pair[0])
        except (TypeError, ValueError) as err:
            raise type(err)(f"{name}[{i}]: {err}") from None
    first = models[0][0]
    for i, (config, _) in enumerate(models):
        if (config.task, config.vocab, config.seq_len) != (first.task, first.vocab, first.seq_len):
            raise ValueError(f"{name}[{i}] is a {config.task} model of vocab={config.vocab}, seq_len={config.seq_len} "
                             f"but {name}[0] a {first.task} model of vocab={first.vocab}, seq_len={first.seq_len}; "
                             "an ensemble averages models of one task")
    return models


class SeedVerdict(NamedTuple):
    """Section 2's numbers over seeds: worst_ablation (S,) the accuracy of each joint model without its most
    needed head; intact (S,) its accuracy with every head; member (M,) each ensemble member alone; ensemble
    the members' averaged accuracy."""
    worst_ablation: np.ndarray
    intact: np.ndarray
    member: np.ndarray
    ensemble: float


def ensemble_verdict(joint, members, seed: int = 0, n: int = 256) -> SeedVerdict:
    """[(Config, Model)] joint models, [(Config, Model)] members -> SeedVerdict (the same ``n`` sequences for all).

    The claim of section 2 holds when every joint model falls below every member once one head is silenced:
    ``verdict.worst_ablation.max() < verdict.member.min()``.
    """
    joint, members = _members(joint, "joint"), _members(members, "members")
    _run(seed, n)
    worst, intact = [], []
    for config, params in joint:
        accs = [ablated_metrics(params, config, [(layer, head)], seed, n).accuracy
                for layer in range(config.n_layers) for head in range(config.h)]
        worst.append(min(accs))
        intact.append(ablated_metrics(params, config, [], seed, n).accuracy)
    alone = [ablated_metrics(p, c, [], seed, n).accuracy for c, p in members]
    return SeedVerdict(np.array(worst), np.array(intact), np.array(alone),
                       ensemble_metrics(members, seed, n).accuracy)


def ablated_metrics(params, config, heads, seed: int = 0, n: int = 256) -> train.Metrics:
    """Model, heads [(layer, head)] -> Metrics on ``n`` fresh sequences (``seed``) with those heads silenced.

    >>> config, params, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("previous_token"))
    >>> ablated_metrics(params, config, []).accuracy > 0.99
    True
    """
    _model(params, config)
    heads = _heads(config, heads)
    seed, n = _run(seed, n)
    for layer, head in heads:
        params = train.ablate_head(params, config, layer, head)
    return training.evaluate(params, config, np.random.default_rng(seed), n)


def keep_only(config, keep: dict) -> list:
    """config, {layer: head kept} -> the (layer, head) pairs to ablate: every other head of those layers.

    >>> keep_only(train.Config(h=2, n_layers=2), {0: 1})
    [(0, 0)]
    """
    config = train.check_config(config)
    if not isinstance(keep, dict):
        raise TypeError(f"keep must be a dict {{layer: head kept}}, got {type(keep).__name__} ({keep!r:.40}); "
                        "pass e.g. keep={0: 1}")
    _heads(config, list(keep.items()), "keep")
    return [(layer, j) for layer, head in keep.items() for j in range(config.h) if j != head]


def ensemble_metrics(members, seed: int = 0, n: int = 256) -> train.Metrics:
    """[(Config, Model)] of one task -> Metrics of their averaged probabilities on ``n`` fresh sequences."""
    members = _members(members, "members")
    seed, n = _run(seed, n)
    config = members[0][0]
    batch = train.make_batch(config, np.random.default_rng(seed), n)
    probs = np.mean([softmax(train.forward(p, batch.tokens, c)[0]) for c, p in members], axis=0)  # (B, T, V)
    with np.errstate(divide="ignore"):  # log 0 = -inf: a token no member gives any probability
        return train.scored_metrics(np.log(probs), batch)  # log p are logits of p: the one cross-entropy


def residual_stream(params, config, batch) -> tuple[list, list]:
    """Model, Batch -> [Trace] * L and [d loss / d (output of layer l) (B, T, D)] * L, from the one
    forward pass and its backward pass (``model.forward``, ``model.backward``)."""
    _model(params, config)
    _validate.instance(batch, train.Batch, "batch", "make one with model.make_batch(config, rng, n)")
    traces = []
    train.forward(params, batch.tokens, config, traces=traces)
    return traces, training.backward(params, batch, config)[2]


def head_contributions(tr, W_o) -> np.ndarray:
    """Trace, W_o (D, D) -> (B, h, T, D): what each head adds to the output (its rows of W_o).

    >>> from mha_course import init_params, trace
    >>> p = init_params(8, rng=np.random.default_rng(0))
    >>> t = trace(np.ones((1, 3, 8)), p, 2)
    >>> np.allclose(head_contributions(t, p.W_o).sum(1), t.output)
    True
    """
    _validate.instance(tr, Trace, "tr", "make one with mha_course.trace(x, params, h)")
    h, d_k = tr.h, tr.d_k
    W_o = _validate.finite_array(W_o, "W_o")
    if W_o.ndim != 2 or W_o.shape[0] != h * d_k or W_o.shape[1] == 0:
        raise ValueError(f"W_o has shape {W_o.shape}; the trace's {h} heads of d_k={d_k} need W_o ({h * d_k}, D): "
                         "pass the W_o of the params the trace ran with")
    W = W_o.reshape(h, d_k, -1)  # (D, D) -> (h, d_k, D)
    return np.einsum("bhtk,hkd->bhtd", tr["head_outputs"], W)  # (B, h, T, d_k) x (h, d_k, D)


def head_attribution(params, config, seed: int = 0, n: int = 128) -> dict:
    """Model -> per head, arrays (L, h): ``max_weight`` (mean top weight of a query), ``ablation``
    (loss increase when the head is silenced) and ``grad_x_input`` (-gradient · head output: the
    first-order estimate of that increase)."""
    _model(params, config)
    seed, n = _run(seed, n)
    batch = train.make_batch(config, np.random.default_rng(seed), n)
    traces, grads = residual_stream(params, config, batch)
    base = ablated_metrics(params, config, [], seed, n).loss
    out = {"max_weight": [], "ablation": [], "grad_x_input": []}
    for layer, (tr, g) in enumerate(zip(traces, grads)):
        c = head_contributions(tr, params.layers[layer].W_o)  # (B, h, T, D)
        out["max_weight"].append(tr.weights.max(-1).mean(axis=(0, 2)))  # (h,)
        out["grad_x_input"].append(-np.einsum("bhtd,btd->h", c, g))  # removing c changes the loss by ~ -g·c
        out["ablation"].append([ablated_metrics(params, config, [(layer, j)], seed, n).loss - base
                                for j in range(config.h)])
    return {k: np.array(v) for k, v in out.items()}


def key_attribution(params, config, layer: int, seed: int = 0, n: int = 64):
    """Model, layer -> weights (B, h, T, S) and attribution (B, h, T, S): the size of the gradient x input of
    key s's share in query t's output, |g_t · w_ts v_s W_o|, for the loss on the scored queries."""
    _model(params, config)
    layer = _validate.index(layer, config.n_layers, "layer", "layers in the model")
    seed, n = _run(seed, n)
    batch = train.make_batch(config, np.random.default_rng(seed), n)
    traces, grads = residual_stream(params, config, batch)
    g = grads[layer]  # (B, T, D)
    tr, h = traces[layer], config.h
    vo = np.einsum("bhsk,hkd->bhsd", tr["V_heads"], params.layers[layer].W_o.reshape(h, tr.d_k, -1))
    attr = np.abs(tr.weights * np.einsum("bhsd,btd->bhts", vo, g))  # (B, h, T, S)
    return tr.weights, attr, batch


def _ranks(a: np.ndarray) -> np.ndarray:
    return np.argsort(np.argsort(a, axis=-1), axis=-1).astype(float)


def rank_correlation(a, b) -> np.ndarray:
    """a, b (..., n) -> (...): Spearman rank correlation along the last axis (no ties assumed: tied
    values are ranked in the order they come). n >= 2; a NaN, which has no rank, and a constant input,
    for which the correlation is undefined, are refused.

    >>> rank_correlation(np.array([1.0, 2, 3]), np.array([10.0, 30, 20]))
    np.float64(0.5)
    """
    a, b = _validate.finite_array(a, "a"), _validate.finite_array(b, "b")
    if a.shape != b.shape or a.ndim == 0 or a.shape[-1] < 2:
        raise ValueError(f"a has shape {a.shape} and b {b.shape}; give two arrays of one shape (..., n) with "
                         "n >= 2 values to rank along the last axis")
    for arr, name in ((a, "a"), (b, "b")):
        constant = np.ptp(arr, axis=-1) == 0  # (...,): every value alike, so no ranking at all
        if constant.any():
            raise ValueError(f"{name} is constant along its last axis (first such row: {arr[constant][0][:5].tolist()}); "
                             "a rank correlation is undefined for a constant input: give values that differ")
    ra, rb = _ranks(a), _ranks(b)
    ra, rb = ra - ra.mean(-1, keepdims=True), rb - rb.mean(-1, keepdims=True)
    return (ra * rb).sum(-1) / np.sqrt((ra ** 2).sum(-1) * (rb ** 2).sum(-1))


def rnn_scan(x, W_x, W_h) -> tuple[np.ndarray, int]:
    """x (B, T, D), W_x (D, D), W_h (D, D) -> states (B, T, D) and the number of sequential steps (T).

    s_t = tanh(x_t W_x + s_{t-1} W_h): step t needs step t - 1, so T steps run one after another.

    >>> s, steps = rnn_scan(np.ones((1, 5, 3)), np.eye(3), np.eye(3))
    >>> s.shape, steps
    ((1, 5, 3), 5)
    """
    x = _validate.finite_array(x, "x")
    _validate.ndim(x, "x", 3, "(B, T, D)")
    if 0 in x.shape:
        raise ValueError(f"x has shape {x.shape}, an empty axis; give at least one sequence, step and feature")
    B, T, D = x.shape
    for name, W in (("W_x", W_x), ("W_h", W_h)):
        if _validate.finite_array(W, name).shape != (D, D):
            raise ValueError(f"{name} has shape {np.shape(W)}; the state and x have D={D} features: give "
                             f"{name} shape ({D}, {D})")
    W_x, W_h = np.asarray(W_x, dtype=float), np.asarray(W_h, dtype=float)
    s, states, steps = np.zeros((B, D)), [], 0
    for t in range(T):
        s = np.tanh(x[:, t] @ W_x + s @ W_h)  # (B, D): needs the previous state
        states.append(s)
        steps += 1
    return np.stack(states, axis=1), steps


def sequential_steps(T: int, d_model: int = 8, h: int = 2) -> tuple[int, int]:
    """T -> (steps of an RNN over T positions, steps of one attention layer): (T, 1).

    Attention computes all T outputs in one call: every position at once, however long T is.
    """
    T = _validate.positive_int(T, "T")
    h = _validate.heads(_validate.positive_int(d_model, "d_model"), h)
    _validate.allocation(8 * T * (T * (h + 1) + 4 * d_model), f"attention over T={T} tokens (its (h, T, T) weights)",
                         "ask for fewer tokens T")
    rng = np.random.default_rng(0)
    x, W = rng.normal(size=(1, T, d_model)), np.eye(d_model)
    _, rnn_steps = rnn_scan(x, W, W)
    p = init_params(d_model, rng=rng)
    calls = [multi_head_attention(x, p, h, causal_mask(T))]  # one call covers every position
    return rnn_steps, len(calls)
