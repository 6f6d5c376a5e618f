"""The tiny transformer's records and their checks: what a run, a model and a batch are.

``Config`` (every choice of one training run), ``Model`` (its weights: embed (V, D), pos (T, D)
or None, one MHAParams per layer, unembed (D, V)), ``Batch`` (tokens, targets, scored: (B, T)
each) and ``Metrics`` (loss, accuracy); ``check_config``, ``check_model``, ``check_tokens``,
``check_batch`` and ``check_logits`` (a forward pass's logits (B, T, V) with its Batch) validate
them once, at the entry of every function of ``lessons.model``, ``lessons.training`` and
``lessons.checkpoints``, with a ValueError that names the fix. ``lessons.model`` re-exports
every name (the notebooks write ``train.Config``).

>>> config = check_config(Config(d_model=8, h=2))
>>> config.h_kv, check_tokens([[0, 3]], config).shape
(2, (1, 2))

Taught in 08_heads_that_learn.ipynb.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from .. import _validate
from ..mha import MHAParams
from ..positions import rope_inv_freq

__all__ = ["Config", "Model", "Batch", "Metrics", "TASKS", "POSITIONS", "check_config", "check_model",
           "check_tokens", "check_batch", "check_logits"]

TASKS = ("previous_token", "induction")
POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "none")


class Config(NamedTuple):
    """Every choice of one training run; ``h_kv`` (None = h) shares key/value heads (GQA/MQA)."""
    task: str = "induction"
    vocab: int = 16
    seq_len: int = 16
    d_model: int = 32
    h: int = 2
    h_kv: Optional[int] = None
    n_layers: int = 2
    positions: str = "learned"
    rope_base: float = 10000.0
    layer_norm: bool = False
    scale: bool = True
    dropout: float = 0.0
    batch: int = 32
    steps: int = 1000
    lr: float = 3e-3
    seed: int = 0
    rope_scaling: Optional[dict] = None  # positions="rope" only: see positions.rope_inv_freq (notebook 13)


class Model(NamedTuple):
    """embed (V, D), pos (T, D) or None, layers (one MHAParams per layer; W_k, W_v, b_k, b_v
    have h_kv * d_k columns), unembed (D, V)."""
    embed: np.ndarray
    pos: Optional[np.ndarray]
    layers: tuple
    unembed: np.ndarray


class Batch(NamedTuple):
    """tokens (B, T) ints, targets (B, T) ints, scored (B, T) bool: the positions the loss counts."""
    tokens: np.ndarray
    targets: np.ndarray
    scored: np.ndarray


class Metrics(NamedTuple):
    """Mean cross-entropy (nats) and accuracy over the scored positions."""
    loss: float
    accuracy: float


# ----------------------------------------------------------------------------- the checks
def check_config(config) -> Config:
    """config, validated, with h_kv filled in (None -> h); a ValueError names what to change.

    Every field is checked: sizes are whole numbers >= 1 (seed >= 0), lr > 0, dropout in [0, 1),
    rope_base > 0, layer_norm and scale True or False, task and positions one of TASKS, POSITIONS.
    """
    if not isinstance(config, Config):
        raise ValueError(f"config must be a train.Config, got {type(config).__name__}; "
                         "use train.Config(task='induction')")
    for name in ("vocab", "seq_len", "d_model", "h", "n_layers", "batch", "steps"):
        _validate.positive_int(getattr(config, name), f"config.{name}")
    _validate.count(config.seed, "config.seed")
    if not isinstance(config.task, str) or config.task not in TASKS or \
            not isinstance(config.positions, str) or config.positions not in POSITIONS:
        raise ValueError(f"config.task={config.task!r}, config.positions={config.positions!r}: "
                         f"valid tasks {TASKS}, valid positions {POSITIONS}")
    for name in ("layer_norm", "scale"):
        _validate.flag(getattr(config, name), f"config.{name}")
    _validate.number(config.lr, "config.lr", 0, low_open=True)
    _validate.number(config.rope_base, "config.rope_base", 0, low_open=True)
    h = _validate.heads(config.d_model, config.h)
    h_kv = h if config.h_kv is None else _validate.positive_int(config.h_kv, "config.h_kv")
    if h % h_kv:
        raise ValueError(f"h={h} is not divisible by h_kv={h_kv} (config.h, config.h_kv); valid h_kv: "
                         + ", ".join(map(str, _validate.divisors(h))))
    _check_sizes(config)
    return config._replace(h_kv=h_kv)


def _check_sizes(config: Config) -> None:
    d_k = config.d_model // config.h
    if config.positions == "rope" and d_k % 2:
        raise ValueError(f"positions='rope' needs an even d_k, but d_model={config.d_model} with "
                         f"h={config.h} gives d_k={d_k}; choose h so that d_k is even")
    if config.task == "induction" and (config.seq_len < 6 or config.vocab < config.seq_len // 2):
        raise ValueError(f"induction needs seq_len >= 6 and vocab >= seq_len // 2 (distinct tokens in "
                         f"a copy); got seq_len={config.seq_len}, vocab={config.vocab}")
    _validate.number(config.dropout, "config.dropout", 0, 1, high_open=True)
    if config.rope_scaling is not None:  # notebook 13: checked by the function that uses it
        if config.positions != "rope":
            raise ValueError(f"rope_scaling={config.rope_scaling!r} needs positions='rope', got "
                             f"positions={config.positions!r}; set rope_scaling=None")
        rope_inv_freq(d_k, config.rope_base, config.rope_scaling)


def check_model(params, config: Optional[Config] = None, name: str = "params") -> Model:
    """params, validated as a Model (of ``config``'s shapes when it is given); a ValueError names the fix.

    With a config: embed (V, D), unembed (D, V), one MHAParams per layer with W_q, W_o (D, D) and W_k,
    W_v (D, h_kv * d_k) (biases None or of matching length), and a position table (P, D) exactly when
    config.positions is "learned" (P may differ from seq_len: ``embed`` refuses what does not fit).
    """
    if not isinstance(params, Model):
        raise ValueError(f"{name} must be a train.Model, got {type(params).__name__}; make one with "
                         "train.init_model(config) or load one with checkpoints.load_checkpoint(path)")
    if config is None:
        return params
    config = check_config(config)
    V, D, L = config.vocab, config.d_model, config.n_layers
    kv = D // config.h * config.h_kv
    fix = "params and config must come together (train.init_model(config), checkpoints.load_checkpoint(path))"
    for field, want in (("embed", (V, D)), ("unembed", (D, V))):
        if np.shape(getattr(params, field)) != want:
            raise ValueError(f"{name}.{field} has shape {np.shape(getattr(params, field))}, but config (vocab={V}, "
                             f"d_model={D}) needs {want}; {fix}")
        _float_weights(getattr(params, field), f"{name}.{field}")
    learned = config.positions == "learned"
    if learned != (params.pos is not None) or (learned and (np.ndim(params.pos) != 2 or np.shape(params.pos)[1] != D)):
        raise ValueError(f"{name}.pos has shape {np.shape(params.pos) if params.pos is not None else None}, but "
                         f"config.positions={config.positions!r} needs "
                         + (f"a (positions, {D}) table" if learned else "None (no learned table)") + f"; {fix}")
    if learned:
        _float_weights(params.pos, f"{name}.pos")
    if not isinstance(params.layers, (tuple, list)) or len(params.layers) != L:
        got = len(params.layers) if isinstance(params.layers, (tuple, list)) else type(params.layers).__name__
        raise ValueError(f"{name}.layers holds {got} layers, but config.n_layers={L}; {fix}")
    wants = dict(W_q=(D, D), W_k=(D, kv), W_v=(D, kv), W_o=(D, D), b_q=(D,), b_k=(kv,), b_v=(kv,), b_o=(D,))
    for i, layer in enumerate(params.layers):
        if not isinstance(layer, MHAParams):
            raise ValueError(f"{name}.layers[{i}] is a {type(layer).__name__}, not an MHAParams; {fix}")
        for field, want in wants.items():
            a = getattr(layer, field)
            if (a is not None or field.startswith("W")) and np.shape(a) != want:
                raise ValueError(f"{name}.layers[{i}].{field} has shape {np.shape(a)}, but config (d_model={D}, "
                                 f"h={config.h}, h_kv={config.h_kv}) needs {want}; {fix}")
            if a is not None:
                _float_weights(a, f"{name}.layers[{i}].{field}")
    return params


def _float_weights(a, name: str) -> None:
    """One weight array of a Model: a numpy array of finite floats (a NaN would spread to every logit)."""
    if not isinstance(a, np.ndarray) or a.dtype.kind != "f":
        raise ValueError(f"{name} is {type(a).__name__} {getattr(a, 'dtype', '')}, expected a numpy array of floats; "
                         "make params with train.init_model(config)")
    _validate.finite(a, name)


def check_tokens(tokens, config: Config, name: str = "tokens") -> np.ndarray:
    """tokens, validated: an int64 (B, T) array of ids in 0 .. config.vocab - 1, T >= 1 (-1, floats, bools refused)."""
    config = check_config(config)
    tokens = _validate.token_ids(tokens, config.vocab, name)
    if tokens.ndim != 2 or tokens.shape[0] == 0 or tokens.shape[1] == 0:
        raise ValueError(f"{name} has shape {tokens.shape}; give (B, T) token ids with B, T >= 1 "
                         f"(one sequence: {name}[None])")
    return tokens


def check_batch(batch: Batch, vocab: Optional[int] = None, name: str = "batch") -> Batch:
    """batch, validated: a Batch of tokens and targets (B, T) (ids below ``vocab`` when given) and a bool
    scored (B, T); returned with int64 tokens and targets."""
    if not isinstance(batch, Batch):
        raise ValueError(f"{name} must be a train.Batch (tokens, targets, scored), got {type(batch).__name__}; "
                         "make one with train.make_batch(config, rng)")
    tokens = _validate.token_ids(batch.tokens, vocab, f"{name}.tokens")
    targets = _validate.token_ids(batch.targets, vocab, f"{name}.targets")
    scored = np.asarray(batch.scored)
    if tokens.ndim != 2 or 0 in tokens.shape or targets.shape != tokens.shape or scored.shape != tokens.shape \
            or scored.dtype != np.bool_:
        raise ValueError(f"{name} has tokens {tokens.shape}, targets {targets.shape}, scored {scored.shape} "
                         f"({scored.dtype}); all three must be (B, T) with B, T >= 1, scored bool: "
                         "make it with train.make_batch(config, rng)")
    return Batch(tokens, targets, scored)


def check_logits(logits, batch: Batch, name: str = "batch") -> tuple:
    """logits (B, T, V), Batch -> (logits as finite floats, the checked Batch): the logits of the forward
    pass over batch.tokens, V >= 1, and targets below V. What every loss of the model checks first.

    >>> b = Batch(np.array([[1, 0]]), np.array([[1, 0]]), np.array([[True, False]]))
    >>> check_logits(np.zeros((1, 3, 2)), b)
    Traceback (most recent call last):
    ...
    ValueError: batch is (1, 2) but logits (1, 3, 2); give the logits of the forward pass over batch.tokens: (B, T, V)
    """
    logits = _validate.finite_array(logits, "logits")
    if logits.ndim != 3 or logits.shape[-1] == 0:
        raise ValueError(f"logits has shape {logits.shape}; give (B, T, V) with V >= 1, one score per token")
    batch = check_batch(batch, logits.shape[-1], name)
    if batch.tokens.shape != logits.shape[:2]:
        raise ValueError(f"{name} is {batch.tokens.shape} but logits {logits.shape}; give the logits of the forward "
                         f"pass over {name}.tokens: (B, T, V)")
    return logits, batch
