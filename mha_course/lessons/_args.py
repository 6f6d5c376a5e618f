"""The argument checks of the experiments on trained models (notebooks 13 and 14), one per kind of
argument: a model with its config, token ids for a config, a Batch, a layer index, a set of heads,
attention weights, a number in a range, a random generator.

Each returns the value checked (converted where that helps) or raises ``ValueError`` /
``TypeError`` whose message names the argument and says how to fix it. The public functions of
``lessons.long_context`` and ``lessons.circuits_*`` call them at their boundary; nothing inside a
computation re-checks. Negative indices are refused, not counted from the end: a layer or head of
-1 is a mistake more often than a wish for the last one, and numpy would read it silently.

    >>> from mha_course.lessons import model as train
    >>> config = train.Config(vocab=8, seq_len=8, d_model=8, h=2, n_layers=2)
    >>> layer(config, -1)
    Traceback (most recent call last):
    ...
    ValueError: layer=-1 is outside 0..1; config.n_layers=2: layers count from 0 and negative ones are not counted from the end; give layer=1 for the last
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import _validate
from . import model as train

__all__ = ["whole", "model", "config", "no_norm", "models", "flag", "tokens", "token_ids", "batch", "layer", "head", "head_set", "weights",
           "number", "generator"]


def whole(value, name: str, low: int, high: int, what: str) -> int:
    """``value`` as an int in low..high (inclusive); bools, floats, strings and numbers outside refused.
    ``what`` says what it counts (e.g. "layers count from 0")."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name}={value!r:.60} must be a whole number in {low}..{high} (got "
                         f"{type(value).__name__}); {what}")
    if not low <= value <= high:
        raise ValueError(f"{name}={value} is outside {low}..{high}; {what}")
    return int(value)


def config(config) -> train.Config:
    """A train.Config, checked (``train.check_config``); anything else is a ValueError naming config."""
    if not isinstance(config, train.Config):
        raise TypeError(f"config={config!r:.60} is not a Config; pass the config of load_checkpoint or "
                        "train.Config(...)")
    return train.check_config(config)


def model(params, config_) -> train.Config:
    """params a Model whose layers fit config (what checkpoints.load_checkpoint returns) -> the checked config."""
    cfg = config(config_)
    if not isinstance(params, train.Model):
        raise TypeError(f"params={params!r:.60} is not a Model; pass the params of load_checkpoint or init_model")
    if len(params.layers) != cfg.n_layers or params.embed.shape != (cfg.vocab, cfg.d_model):
        raise ValueError(f"params has {len(params.layers)} layers and embeddings {params.embed.shape}, but "
                         f"config says n_layers={cfg.n_layers}, (vocab, d_model)=({cfg.vocab}, {cfg.d_model}): "
                         "pass the config that belongs to these params")
    return cfg


def no_norm(config_) -> train.Config:
    """A config without layer norm: the residual stream is then an exact sum of every head's output."""
    cfg = config(config_)
    if cfg.layer_norm:
        raise ValueError("config.layer_norm=True: the residual stream is no longer a sum of head outputs; "
                         "these tools need a model without layer norm (notebook 08's models)")
    return cfg


def tokens(config_, value, name: str = "tokens") -> np.ndarray:
    """token ids (B, T) for ``config``: whole numbers in 0..vocab-1, B, T >= 1 -> an int64 array."""
    ids = _validate.token_ids(value, config_.vocab, name)
    if ids.ndim != 2 or 0 in ids.shape:
        raise ValueError(f"{name} has shape {ids.shape}; give token ids (B, T) with B, T >= 1 "
                         f"(one sequence: {name}[None])")
    return ids


def token_ids(value, vocab=None, name: str = "tokens") -> np.ndarray:
    """token ids without a config: whole numbers >= 0, below ``vocab`` when it is given -> int64 array."""
    return _validate.token_ids(value, None if vocab is None else _validate.positive_int(vocab, "vocab"), name)


def batch(config_, value, name: str = "batch") -> train.Batch:
    """A train.Batch for ``config``: tokens and targets (B, T) ids below vocab, ``scored`` (B, T) bool with
    at least one scored position -> the Batch with int64 ids."""
    if not isinstance(value, train.Batch):
        raise TypeError(f"{name}={value!r:.60} is not a Batch; make one with train.make_batch(config, rng, n)")
    tok = tokens(config_, value.tokens, f"{name}.tokens")
    targets = tokens(config_, value.targets, f"{name}.targets")
    scored = np.asarray(value.scored)
    if targets.shape != tok.shape or scored.shape != tok.shape or scored.dtype != np.bool_:
        raise ValueError(f"{name} has tokens {tok.shape}, targets {targets.shape} and scored {scored.shape} of "
                         f"{scored.dtype}; all three must be (B, T), scored bool: use train.make_batch")
    if not scored.any():
        raise ValueError(f"{name}.scored is all False: no position is scored, so there is nothing to average; "
                         "use train.make_batch (it scores the positions of the task)")
    return train.Batch(tok, targets, scored)


def models(value, name: str = "models") -> dict:
    """{name: (Config, Model)}, at least one, each pair checked -> the dict (configs checked)."""
    if not isinstance(value, dict) or not value:
        raise ValueError(f"{name}={value!r:.60}: give a non-empty dict {{name: (config, params)}}, e.g. "
                         "{'rope': long_context.load_scheme('rope')}")
    out = {}
    for key, pair in value.items():
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise ValueError(f"{name}[{key!r}] is not a (config, params) pair; give what load_checkpoint or "
                             "long_context.load_scheme returns")
        try:
            out[key] = (model(pair[1], pair[0]), pair[1])
        except (TypeError, ValueError) as e:
            raise ValueError(f"{name}[{key!r}]: {e}") from None
    return out


def flag(value, name: str) -> bool:
    """True or False (numpy's bool too); 1, 2 and strings refused."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name}={value!r:.40} must be True or False")
    return bool(value)


def layer(config_, value, name: str = "layer") -> int:
    """A layer index of the model: a whole number in 0..n_layers-1 (-1 refused)."""
    last = config_.n_layers - 1
    return whole(value, name, 0, last, f"config.n_layers={config_.n_layers}: layers count from 0 and negative "
                                       f"ones are not counted from the end; give {name}={last} for the last")


def head(config_, value, name: str = "head") -> int:
    """A head index of the model: a whole number in 0..h-1 (-1 refused)."""
    last = config_.h - 1
    return whole(value, name, 0, last, f"config.h={config_.h}: heads count from 0 and negative ones are not "
                                       f"counted from the end; give {name}={last} for the last")


def head_set(config_, value, name: str = "heads") -> set:
    """[(layer, head)] -> the set of pairs, each a head of the model (whole numbers, from 0; -1 refused)."""
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        raise ValueError(f"{name}={value!r:.60}: give a list of (layer, head) pairs, e.g. {name}=[(0, 1)]")
    pairs = list(value)
    if any(isinstance(p, (str, bytes)) or not hasattr(p, "__len__") or len(p) != 2 for p in pairs):
        raise ValueError(f"{name}={value!r:.60}: give a list of (layer, head) pairs, e.g. {name}=[(0, 1)]")
    bad = [p for p in pairs if not all(isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))
                                       for v in p) or not (0 <= p[0] < config_.n_layers and 0 <= p[1] < config_.h)]
    if bad:
        raise ValueError(f"{name} {bad} do not exist: layers 0..{config_.n_layers - 1}, heads 0..{config_.h - 1} "
                         "(whole numbers, counted from 0; -1 is not the last)")
    return {(int(a), int(b)) for a, b in pairs}


def weights(value, name: str = "weights") -> np.ndarray:
    """Self-attention weights (B, h, T, T) or (h, T, T), T >= 2, each row a probability distribution
    (entries in [0, 1], summing to 1) -> (B, h, T, T) float64."""
    w = _validate.finite_array(value, name)
    if w.ndim == 3:
        w = w[None]
    if w.ndim != 4 or w.shape[-1] != w.shape[-2] or w.shape[-1] < 2 or 0 in w.shape:
        raise ValueError(f"{name} has shape {np.shape(value)}; expected self-attention weights (B, h, T, T) or "
                         "(h, T, T) with T >= 2 (one layer's weights from train.forward)")
    w = w.astype(np.float64, copy=False)
    if w.min() < 0 or not np.allclose(w.sum(-1), 1.0, atol=1e-2):
        raise ValueError(f"{name} is not attention weights: its entries run from {w.min():.3g} to {w.max():.3g} and "
                         f"its rows sum to {w.sum(-1).min():.3g}..{w.sum(-1).max():.3g}; each row must be a "
                         "probability distribution over the keys (the softmax's output, rows summing to 1)")
    return w


def number(value, name: str, low: float, high: float) -> float:
    """A finite real number in [low, high] -> float; NaN, inf, bools and strings refused."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name}={value!r:.60} must be a number in [{low}, {high}] (got {type(value).__name__})")
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"{name}={value} must be a finite number in [{low}, {high}]")
    return float(value)


def generator(value, name: str = "rng") -> np.random.Generator:
    """A numpy Generator (randomness only through one passed in)."""
    if not isinstance(value, np.random.Generator):
        raise TypeError(f"{name}={value!r:.60} is not a numpy Generator; pass np.random.default_rng(seed)")
    return value
