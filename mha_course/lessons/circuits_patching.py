"""Interventions on a trained model, one forward pass each (numpy only): running with a cache of
every head's output, direct logit attribution, activation patching (heads, positions, paths),
attribution patching (the gradient estimate), zero/mean/resample ablation and key occlusion.

Interventions run the model with ``train.forward(..., patch=hook)``: the hook gets each layer's
``mha.Trace`` and returns what the layer adds to the residual stream (one forward pass, never
a copy). They need ``config.layer_norm`` False (the models of notebook 08), so that the residual
stream is an exact sum of the embedding and every head's output.

Shapes: ``B`` batch, ``T`` positions, ``V`` vocabulary, ``D = d_model``, ``h`` heads, ``L`` layers.

    >>> from mha_course.lessons import checkpoints
    >>> from mha_course.lessons.circuits_data import make_pair
    >>> config, params, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
    >>> pair = make_pair(config, np.random.default_rng(0), 16)
    >>> round(patching_effect(params, config, pair, [(0, 0), (0, 1), (1, 0), (1, 1)]), 6)
    1.0

Taught in 14_circuits.ipynb (re-exported by ``lessons.circuits``).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from .. import _validate
from ..attention import causal_mask
from ..mha import trace
from . import _args, misconceptions, training
from . import model as train
from .circuits_data import PatchPair, check_pair

__all__ = ["run_with_cache", "LogitAttribution", "direct_logit_attribution", "logit_difference", "patch_heads",
           "patching_effect", "head_patching", "position_patching", "path_patching", "attribution_patching",
           "ABLATIONS", "ablate_heads", "ablation_losses", "key_occlusion"]


def _layer_out(params, layer: int, contributions: np.ndarray) -> np.ndarray:
    """contributions (B, h, T, D) -> the layer's output (B, T, D): their sum (+ b_o)."""
    b_o = params.layers[layer].b_o
    return contributions.sum(1) + (0 if b_o is None else b_o)


def run_with_cache(params, tokens, config) -> tuple[np.ndarray, list]:
    """tokens (B, T) -> logits (B, T, V), [contributions (B, h, T, D)] * L: what each head adds to the stream
    (its output through its slice of W_o; not its attention weights, which are train.forward's second value).

    >>> from mha_course.lessons import checkpoints
    >>> config, params, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
    >>> tokens = train.make_batch(config, np.random.default_rng(0), 2).tokens
    >>> logits, heads = run_with_cache(params, tokens, config)
    >>> bool(np.allclose(logits, train.forward(params, tokens, config)[0])), heads[1].shape
    (True, (2, 2, 24, 32))
    """
    _args.model(params, config)
    _args.no_norm(config)
    _args.tokens(config, tokens, "tokens")
    cache = []

    def record(layer, tr):
        c = misconceptions.head_contributions(tr, params.layers[layer].W_o)  # (B, h, T, D)
        cache.append(c)
        return _layer_out(params, layer, c)
    logits, _ = train.forward(params, tokens, config, patch=record)
    return logits, cache


class LogitAttribution(NamedTuple):
    """Direct logit attribution of the target token: ``embed`` (the direct path from the embeddings),
    ``heads`` (L, h), and ``total`` = embed + heads.sum(), the mean target logit (centred)."""
    embed: float
    heads: np.ndarray
    total: float


def direct_logit_attribution(params, config, batch) -> LogitAttribution:
    """Batch -> LogitAttribution: each component's share of the target's centred logit (the logit minus
    the mean logit over the vocabulary), averaged over the scored positions. Exact: no layer norm.
    ``batch`` is a train.Batch (tokens, targets, scored), e.g. train.make_batch(config, rng, n).
    """
    config = _args.model(params, config)
    batch = _args.batch(config, batch)
    logits, cache = run_with_cache(params, batch.tokens, config)
    U = params.unembed - params.unembed.mean(1, keepdims=True)  # (D, V): centred logits
    direction = U.T[batch.targets]  # (B, T, D): the unembedding of each target

    def share(part):  # part (..., B, T, D) -> (...): mean over scored positions of part . direction
        return (part * direction).sum(-1)[..., batch.scored].mean(-1)
    embed = float(share(train.embed(params, batch.tokens, config)))
    heads = np.stack([share(c.transpose(1, 0, 2, 3)) for c in cache])  # (L, h)
    return LogitAttribution(embed, heads, embed + float(heads.sum()))



def logit_difference(logits, pair: PatchPair) -> float:
    """logits (B, T, V) of a run on the pair's tokens -> the mean over the batch of logit(answer) -
    logit(distractor) at the query (logits of another batch or shorter sequences are a ValueError)."""
    pair = check_pair(pair)
    x = _validate.finite_array(logits, "logits")
    B, T = pair.clean.shape
    need = int(max(pair.answer.max(), pair.distractor.max())) + 1
    if x.ndim != 3 or x.shape[:2] != (B, T) or x.shape[2] < need:
        raise ValueError(f"logits has shape {x.shape}; the pair's runs give (B={B}, T={T}, V) with V >= {need} "
                         "(train.forward(params, pair.clean, config)[0])")
    return _ld(x, pair)


def _ld(logits: np.ndarray, pair: PatchPair) -> float:
    """logit_difference on arguments already checked."""
    at = logits[:, pair.position]  # (B, V)
    rows = np.arange(at.shape[0])
    return float((at[rows, pair.answer] - at[rows, pair.distractor]).mean())


def _positions_mask(T: int, positions) -> np.ndarray:
    """positions None (all) or a list of ints in 0..T-1 -> (T,) bool; a ValueError names a position out of range."""
    keep = np.zeros(T, dtype=bool)
    if positions is None:
        keep[:] = True
        return keep
    pos = np.asarray(positions)
    if pos.ndim != 1 or (pos.size and pos.dtype.kind not in "iu"):
        raise ValueError(f"positions={positions!r}: give a list of whole positions in 0..{T - 1} (or None: all)")
    bad = [int(p) for p in pos if not 0 <= p < T]
    if bad:
        raise ValueError(f"positions {bad} are outside 0..{T - 1} (T = {T}); negative positions are not "
                         "counted from the end here, give t itself")
    keep[pos.astype(int)] = True
    return keep  # (T,)


def _check_same_tokens(target, source) -> None:
    t, s = np.shape(target), np.shape(source)
    if len(t) != 2 or t != s:
        raise ValueError(f"target has shape {t} and source {s}: patching needs two batches of the same (B, T)")


def patch_heads(params, config, target, source, heads, positions=None) -> np.ndarray:
    """-> logits (B, T, V) of the run on ``target`` tokens in which the heads [(layer, head)] write, at
    ``positions`` (None: all), what they wrote in the run on ``source`` tokens. Later layers see
    the change (they are recomputed). Clean into corrupted (denoising) finds what is sufficient to
    restore the answer; corrupted into clean (noising) finds what is necessary (Heimersheim & Nanda 2024).
    ``target`` and ``source`` are (B, T) of one shape; a head or position that does not exist is a ValueError.
    """
    config = _args.model(params, config)
    target, source = _args.tokens(config, target, "target"), _args.tokens(config, source, "source")
    _check_same_tokens(target, source)
    _args.head_set(config, heads)
    _positions_mask(np.shape(target)[1], positions)
    return _patched(params, config, target, run_with_cache(params, source, config)[1], heads, positions)


def _patched(params, config, target, cache, heads, positions) -> np.ndarray:
    """patch_heads with the source run's contributions ``cache`` already computed."""
    chosen = _args.head_set(config, heads)
    keep = _positions_mask(np.shape(target)[1], positions)

    def hook(layer, tr):
        c = misconceptions.head_contributions(tr, params.layers[layer].W_o)  # (B, h, T, D)
        for head in range(config.h):
            if (layer, head) in chosen:
                c[:, head, keep] = cache[layer][:, head, keep]
        return _layer_out(params, layer, c)
    return train.forward(params, target, config, patch=hook)[0]


def _restorable(clean: float, bad: float) -> None:
    if not abs(clean - bad) > 1e-9 * max(1.0, abs(clean)):
        raise ValueError(f"the clean and corrupted runs have the same logit difference ({clean:.6g} and {bad:.6g}), "
                         "so there is nothing to restore and the share is undefined; corrupt the input "
                         "(make_pair changes one token)")


def _ends(params, config, pair: PatchPair) -> tuple:
    """-> (LD clean, LD corrupted, the clean run's contributions)."""
    config = _args.model(params, config)
    pair = check_pair(pair, config)
    logits, cache = run_with_cache(params, pair.clean, config)
    corrupt = _patched(params, config, pair.corrupt, cache, [], None)  # the same code path as every patched run
    return _ld(logits, pair), _ld(corrupt, pair), cache


def patching_effect(params, config, pair: PatchPair, heads, positions=None) -> float:
    """-> the share of the logit difference restored by patching ``heads`` (at ``positions``) from the
    clean run into the corrupted one: (LD_patched - LD_corrupt) / (LD_clean - LD_corrupt); 0 = no
    effect, 1 = fully restored.

    >>> from mha_course.lessons import checkpoints
    >>> from mha_course.lessons.circuits_data import make_pair
    >>> config, params, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
    >>> pair = make_pair(config, np.random.default_rng(0), 16)
    >>> all_heads = [(layer, head) for layer in range(2) for head in range(2)]
    >>> round(patching_effect(params, config, pair, all_heads), 6), round(patching_effect(params, config, pair, []), 6)
    (1.0, 0.0)
    """
    clean, bad, cache = _ends(params, config, pair)
    return _share(params, config, pair, heads, positions, clean, bad, cache)


def _share(params, config, pair, heads, positions, clean, bad, cache) -> float:
    _restorable(clean, bad)
    patched = _ld(_patched(params, config, pair.corrupt, cache, heads, positions), pair)
    return (patched - bad) / (clean - bad)


def head_patching(params, config, pair: PatchPair) -> np.ndarray:
    """-> (L, h): ``patching_effect`` of each head alone, at every position."""
    ends = _ends(params, config, pair)
    return np.array([[_share(params, config, pair, [(layer, head)], None, *ends) for head in range(config.h)]
                      for layer in range(config.n_layers)])


def position_patching(params, config, pair: PatchPair) -> np.ndarray:
    """-> (L, h, T): ``patching_effect`` of each head at each single position (0 after the query)."""
    ends, T = _ends(params, config, pair), pair.clean.shape[1]
    return np.array([[[_share(params, config, pair, [(layer, head)], [t], *ends) if t <= pair.position else 0.0
                       for t in range(T)] for head in range(config.h)] for layer in range(config.n_layers)])


def path_patching(params, config, pair: PatchPair, sender, receiver, via: str = "kv") -> float:
    """-> the share of the logit difference restored through one path only: the corrupted run, in which
    the ``receiver`` (layer, head) reads, on its key/value side (``via="kv"``), its query side ("q")
    or both ("qkv"), the residual stream with the ``sender`` (layer, head)'s clean output in place of
    its corrupted one. Every other head reads the corrupted stream; the receiver must be in the last layer.
    """
    if via not in ("q", "kv", "qkv"):
        raise ValueError(f"via={via!r}; choose 'q' (the receiver's queries), 'kv' (its keys and values) or 'qkv'")
    _args.model(params, config)
    check_pair(pair, config)
    _args.head_set(config, [sender], "sender")
    _args.head_set(config, [receiver], "receiver")
    (s_layer, s_head), (r_layer, r_head) = sender, receiver
    if not s_layer < r_layer == config.n_layers - 1:
        raise ValueError(f"sender layer {s_layer}, receiver layer {r_layer}: the sender must come first and "
                         f"the receiver be in the last layer ({config.n_layers - 1})")
    _, clean_cache = run_with_cache(params, pair.clean, config)
    _, bad_cache = run_with_cache(params, pair.corrupt, config)
    delta = clean_cache[s_layer][:, s_head] - bad_cache[s_layer][:, s_head]  # (B, T, D)
    lp = train.layer_params(params, config, r_layer)
    rope = config.rope_base if config.positions == "rope" else None

    def hook(layer, tr):
        c = misconceptions.head_contributions(tr, params.layers[layer].W_o)  # (B, h, T, D)
        if layer == r_layer:
            x = tr["X"]  # the receiver layer's (corrupted) input
            x_q = x + delta if "q" in via else x
            x_kv = x + delta if "kv" in via else x
            mixed = trace(x_q, lp, config.h, causal_mask(x.shape[1]), context=x_kv, rope_base=rope)
            c[:, r_head] = misconceptions.head_contributions(mixed, params.layers[layer].W_o)[:, r_head]
        return _layer_out(params, layer, c)
    clean, bad, _ = _ends(params, config, pair)
    _restorable(clean, bad)
    patched = _ld(train.forward(params, pair.corrupt, config, patch=hook)[0], pair)
    return (patched - bad) / (clean - bad)


def attribution_patching(params, config, pair: PatchPair) -> np.ndarray:
    """-> (L, h): the first-order estimate of ``head_patching`` from ONE forward and ONE backward pass
    of the corrupted run (attribution patching; Nanda 2023, Syed et al. 2023): each head's share is
    g . (c_clean - c_corrupt) / (LD_clean - LD_corrupt), with g the gradient of the logit difference
    with respect to the head's output c (B, T, D), summed over the batch, positions and D.
    Exact where the model is linear in the head's output (a last-layer head); an approximation
    through later layers' softmax (a layer-1 head read by layer 2).

    >>> from mha_course.lessons import checkpoints
    >>> from mha_course.lessons.circuits_data import make_pair
    >>> config, params, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
    >>> attribution_patching(params, config, make_pair(config, np.random.default_rng(0), 8)).shape
    (2, 2)
    """
    _args.model(params, config)
    _args.no_norm(config)
    check_pair(pair, config)
    _, clean_cache = run_with_cache(params, pair.clean, config)
    _, bad_cache = run_with_cache(params, pair.corrupt, config)
    tape = []
    logits, _ = train.forward(params, pair.corrupt, config, tape=tape)
    tape.pop()  # the last residual stream
    B = pair.corrupt.shape[0]
    rows = np.arange(B)
    g_logits = np.zeros_like(logits)  # (B, T, V): d LD / d logits
    np.add.at(g_logits, (rows, pair.position, pair.answer), 1 / B)
    np.add.at(g_logits, (rows, pair.position, pair.distractor), -1 / B)
    g_x = g_logits @ params.unembed.T  # (B, T, V) x (V, D) -> (B, T, D): d LD / d the last residual stream
    grads = [None] * config.n_layers
    for layer in reversed(range(config.n_layers)):
        grads[layer] = g_x  # d LD / d (this layer's output), which each head's output adds to
        g_x = g_x + tape[layer][1](g_x)[0]
    clean = _ld(train.forward(params, pair.clean, config)[0], pair)
    bad = _ld(logits, pair)
    _restorable(clean, bad)
    return np.stack([np.einsum("bhtd,btd->h", clean_cache[layer] - bad_cache[layer], grads[layer])
                     for layer in range(config.n_layers)]) / (clean - bad)  # (L, h)


# ----------------------------------------------------------------------------- ablations
ABLATIONS = ("zero", "mean", "resample")


def ablate_heads(params, config, tokens, heads, kind: str = "zero", reference=None) -> Callable:
    """-> a ``patch`` hook for train.forward / training.metrics that ablates heads [(layer, head)]:
    ``"zero"`` writes nothing; ``"mean"`` writes the head's mean output per position over the
    ``reference`` batch (B', T); ``"resample"`` writes its output on ``reference`` (B, T), another
    batch of the same shape (a different sequence for each row). ``tokens`` only fixes the shape.
    """
    if kind not in ABLATIONS:
        raise ValueError(f"kind={kind!r}; choose one of {ABLATIONS}")
    config = _args.model(params, config)
    tokens = _args.tokens(config, tokens, "tokens")
    chosen = _args.head_set(config, heads)
    if kind == "zero" and reference is not None:
        raise ValueError("reference is read only by kind='mean' and 'resample'; kind='zero' writes nothing, so a "
                         "reference would be ignored: pass reference=None (or choose another kind)")
    if kind != "zero":
        if reference is None:
            raise ValueError(f"kind={kind!r} needs reference tokens (B, T): a batch drawn apart from the tokens")
        reference = _args.tokens(config, reference, "reference")
        if reference.ndim != 2 or reference.shape[1] != tokens.shape[1] or (kind == "resample" and reference.shape != tokens.shape):
            raise ValueError(f"reference has shape {reference.shape}, tokens {tokens.shape}: mean needs the same T, "
                             "resample the same (B, T)")
        _, cache = run_with_cache(params, reference, config)

    def hook(layer, tr):
        c = misconceptions.head_contributions(tr, params.layers[layer].W_o)  # (B, h, T, D)
        for head in range(config.h):
            if (layer, head) in chosen:
                if kind == "zero":
                    c[:, head] = 0
                elif kind == "mean":
                    c[:, head] = cache[layer][:, head].mean(0)  # (T, D): the mean over the reference batch
                else:
                    c[:, head] = cache[layer][:, head]
        return _layer_out(params, layer, c)
    return hook


def ablation_losses(params, config, batch, reference, heads_sets) -> dict:
    """-> {kind: (len(heads_sets),)}: the loss increase on ``batch`` when each set of heads is ablated
    that way (``reference`` tokens (B', T) for mean, (B, T) for resample), against the intact model's loss.
    ``heads_sets`` is a list of head lists, e.g. [[(0, 1)], [(1, 0), (1, 1)]]."""
    config = _args.model(params, _args.no_norm(config))
    batch = _args.batch(config, batch)
    if isinstance(heads_sets, (str, bytes, dict)) or not hasattr(heads_sets, "__iter__"):
        raise ValueError(f"heads_sets={heads_sets!r:.60}: give a list of head lists, e.g. [[(0, 1)], [(1, 0)]]")
    heads_sets = [sorted(_args.head_set(config, heads, f"heads_sets[{n}]")) for n, heads in enumerate(heads_sets)]
    hooks = {kind: [ablate_heads(params, config, batch.tokens, heads, kind, None if kind == "zero" else reference)
                    for heads in heads_sets] for kind in ABLATIONS}  # every argument checked before any run
    base = training.metrics(params, batch, config).loss
    return {kind: np.array([training.metrics(params, batch, config, patch=hook).loss - base for hook in hooks[kind]])
            for kind in ABLATIONS}



def key_occlusion(params, config, pair: PatchPair, rng: np.random.Generator) -> np.ndarray:
    """-> (T,): for each position s <= the query, how much the answer's logit at the query falls when
    the token at s is replaced by a random other token (mean over the batch): an input ablation."""
    config = _args.model(params, config)
    pair, rng = check_pair(pair, config), _args.generator(rng)
    if config.vocab < 2:
        raise ValueError(f"config.vocab={config.vocab}: occlusion replaces a token by another one, so it needs "
                         "a vocabulary of 2 or more")
    tokens, t = pair.clean, pair.position
    rows = np.arange(tokens.shape[0])
    base = train.forward(params, tokens, config)[0][rows, t, pair.answer]  # (B,)
    drop = np.zeros(tokens.shape[1])
    for s in range(t + 1):
        other = tokens.copy()
        other[:, s] = (tokens[:, s] + rng.integers(1, config.vocab, size=len(rows))) % config.vocab
        drop[s] = float((base - train.forward(params, other, config)[0][rows, t, pair.answer]).mean())
    return drop


