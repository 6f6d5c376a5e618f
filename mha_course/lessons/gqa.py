"""Generating tokens from the trained model of notebook 08, with and without the KV cache.

Shapes: ``B`` batch, ``P`` prompt tokens, ``N`` new tokens, ``V`` vocabulary, ``D = d_model``.

Without a cache, every step runs ``train.forward`` over the whole sequence so far and keeps the
last position's logits: step t costs a forward pass over t tokens. With a cache, the prompt is
run once (the **prefill**) and each **decode step** runs one token through every layer, reading
the keys and values of the earlier tokens from that layer's ``KVCache``. Both pick the same
tokens (greedy: the most likely next token), which tests/lessons/test_gqa.py checks.

The caches are the only state: ``new_caches`` makes them, ``forward_cached`` fills them in place.

    from mha_course.lessons import checkpoints
    from mha_course.lessons import gqa as decode
    config, params, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
    tokens = decode.generate(params, config, prompt, 8, use_cache=True, progress=True)

Taught in 09_kv_cache_and_gqa.ipynb.
"""
from __future__ import annotations

import time

import numpy as np

from .. import _validate
from ..gqa import KVCache, gqa_from_mha
from ..mha import MHAParams
from .model import Config, Model, check_config, check_model, check_tokens, forward, init_model

__all__ = ["new_caches", "forward_cached", "greedy_steps", "generate", "seconds_per_token",
           "step_seconds", "timing_model", "max_positions", "to_gqa"]


def max_positions(params: Model) -> int | None:
    """The longest sequence the model can read: its learned position table's length (None: no limit)."""
    params = check_model(params)
    return None if params.pos is None else params.pos.shape[0]


def new_caches(params: Model, config: Config, batch: int, max_len: int) -> list[KVCache]:
    """One empty KVCache (batch, h_kv, d_k, max_len) per layer, float64 like the model."""
    config = check_config(config)
    params = check_model(params, config)
    h_kv, d_k = config.h_kv, config.d_model // config.h
    batch, max_len = _validate.positive_int(batch, "batch"), _validate.positive_int(max_len, "max_len")
    _validate.allocation(2 * 8 * batch * h_kv * d_k * max_len, f"a KV cache of max_len={max_len} tokens per layer",
                         "make the caches for the tokens you will decode (max_len = prompt + new tokens)")
    return [KVCache(batch, h_kv, config.d_model // config.h, max_len) for _ in params.layers]


def forward_cached(params: Model, tokens, config: Config, caches: list[KVCache]) -> np.ndarray:
    """tokens (B, T) new tokens -> logits (B, T, V); appends to every layer's cache **in place**.

    ``model.forward`` with ``caches``: the T tokens follow the ``caches[0].length`` already cached,
    positions start there and attention is causal over everything cached.
    """
    return forward(params, tokens, config, caches=caches)[0]


def _check_prompt(prompt, params: Model, config: Config, n_new) -> np.ndarray:
    """The prompt (B, P) of token ids, checked with the model, its config and n_new."""
    config = check_config(config)
    check_model(params, config)
    prompt = np.asarray(prompt)
    if prompt.ndim != 2 or 0 in prompt.shape or not np.issubdtype(prompt.dtype, np.integer):
        raise ValueError(f"prompt must be a (B, P) array of token ids with P >= 1, got shape {prompt.shape} "
                         f"and dtype {prompt.dtype}; a single sequence is prompt[None]")
    if prompt.min() < 0 or prompt.max() >= config.vocab:
        raise ValueError(f"prompt holds token ids {prompt.min()}..{prompt.max()} but the vocabulary is "
                         f"0..{config.vocab - 1}")
    prompt = check_tokens(prompt, config, "prompt")  # int64
    _validate.positive_int(n_new, "n_new")
    limit, needed = max_positions(params), prompt.shape[1] + n_new - 1  # the last token is not read
    if limit is not None and needed > limit:
        raise ValueError(f"a prompt of {prompt.shape[1]} tokens + n_new={n_new} needs positions for {needed} "
                         f"tokens but the model has learned {limit}; ask for n_new <= {limit - prompt.shape[1] + 1}")
    return prompt


def greedy_steps(params: Model, config: Config, prompt, n_new: int, *, use_cache: bool = True, caches=None):
    """prompt (B, P) -> yields (next tokens (B,), their logits (B, V)) for n_new greedy steps: the one loop.

    With a cache (``use_cache``, or ``caches`` given: one empty cache per layer, **appended in place**,
    e.g. a paged cache's; caches that already hold tokens are refused): a prefill, then one decode step per token; without, ``forward`` over the whole
    sequence every step. ``generate``, ``seconds_per_token`` and ``long_context.serve`` run it.

    >>> config = Config(task="previous_token", vocab=8, seq_len=12, d_model=8, h=2, n_layers=1)
    >>> params = init_model(config)
    >>> new = [int(t[0]) for t, _ in greedy_steps(params, config, [[1, 2]], 3)]
    >>> new == generate(params, config, [[1, 2]], 3)[0, 2:].tolist()
    True
    """
    prompt = _check_prompt(prompt, params, config, n_new)
    use_cache, config = _validate.flag(use_cache, "use_cache"), check_config(config)
    if caches is not None:  # the prompt starts a sequence: caches holding another one would precede it
        if not isinstance(caches, (list, tuple)):
            raise ValueError(f"caches must be a list of caches, one per layer, got {type(caches).__name__}; "
                             "make them with new_caches(params, config, batch, max_len)")
        held = [getattr(c, "length", None) for c in caches]
        if any(n != 0 for n in held):
            raise ValueError(f"caches hold {held} tokens already: greedy_steps starts a new sequence at position 0, "
                             "so its prompt would follow those tokens; give empty caches (cache.reset() each, or "
                             "new_caches(params, config, batch, max_len))")

    def steps():  # a generator, so it runs as the caller reads it; everything was checked above
        tokens, caches_ = prompt, caches
        if caches_ is None and use_cache:
            caches_ = new_caches(params, config, prompt.shape[0], prompt.shape[1] + n_new)
        if caches_ is not None:
            logits = forward_cached(params, prompt, config, caches_)  # the prefill
        for step in range(n_new):
            if caches_ is None:
                logits, _ = forward(params, tokens, config)  # the whole sequence, every step
            last = logits[:, -1]  # (B, V)
            nxt = last.argmax(-1)  # (B,)
            tokens = np.concatenate([tokens, nxt[:, None]], axis=1)
            yield nxt, last
            if caches_ is not None and step < n_new - 1:
                logits = forward_cached(params, nxt[:, None], config, caches_)  # one decode step
    return steps()


def generate(params: Model, config: Config, prompt, n_new: int, *, use_cache: bool = True,
             progress: bool = False) -> np.ndarray:
    """prompt (B, P) token ids -> tokens (B, P + N): the prompt and N greedy new tokens.

    ``use_cache`` True: a prefill then one decode step per token; False: train.forward over
    everything, every step. The two give the same tokens. ``progress``: a tqdm bar.

    >>> config = Config(task="previous_token", vocab=8, seq_len=12, d_model=8, h=2, n_layers=2)
    >>> params = init_model(config)
    >>> a = generate(params, config, [[1, 2, 3]], 5)
    >>> a.shape, bool((a == generate(params, config, [[1, 2, 3]], 5, use_cache=False)).all())
    ((1, 8), True)
    """
    progress = _validate.flag(progress, "progress")
    steps = greedy_steps(params, config, prompt, n_new, use_cache=use_cache)  # checks everything first
    new = [t for t, _ in _bar(steps, n_new, progress, use_cache)]
    return np.concatenate([_check_prompt(prompt, params, config, n_new), np.stack(new, axis=1)], axis=1)


def _bar(steps, total: int, progress: bool, use_cache: bool):
    if not progress:
        return steps
    from tqdm.auto import tqdm  # imported only when a bar is wanted
    return tqdm(steps, total=total, desc="decoding " + ("with" if use_cache else "without") + " cache",
                unit="tok", leave=False, mininterval=0.5)


def seconds_per_token(params: Model, config: Config, prompt, n_new: int, *, use_cache: bool = True,
                      progress: bool = False) -> np.ndarray:
    """prompt (B, P) -> seconds (N,): the wall time of each generated token, the prefill in the first.

    The same loop as ``generate``; entry t is the time to produce token P + t.
    """
    progress = _validate.flag(progress, "progress")
    steps = greedy_steps(params, config, prompt, n_new, use_cache=use_cache)  # checks everything first
    seconds, last = [], time.perf_counter()
    for _ in _bar(steps, n_new, progress, use_cache):
        now = time.perf_counter()
        seconds.append(now - last)
        last = now
    return np.array(seconds)


def step_seconds(params: Model, config: Config, position: int, *, use_cache: bool,
                 repeats: int = 3, rng: np.random.Generator) -> float:
    """The best-of-``repeats`` wall time of one decode step at ``position`` (tokens already seen).

    With the cache: a prefill of ``position`` random tokens (not timed), then ``repeats`` decode
    steps, each timed (positions position .. position + repeats - 1). Without: ``train.forward``
    over position + 1 tokens, ``repeats`` times, as the no-cache loop does at that step.
    """
    config = check_config(config)
    params = check_model(params, config)
    position, repeats = _validate.positive_int(position, "position"), _validate.positive_int(repeats, "repeats")
    use_cache, rng = _validate.flag(use_cache, "use_cache"), _validate.generator(rng)
    tokens = rng.integers(0, config.vocab, size=(1, position + repeats))
    if use_cache:
        caches = new_caches(params, config, 1, position + repeats)
        forward_cached(params, tokens[:, :position], config, caches)  # the prefill, not timed
        run = [lambda t=t: forward_cached(params, tokens[:, t:t + 1], config, caches)
               for t in range(position, position + repeats)]
    else:
        run = [lambda: forward(params, tokens[:, :position + 1], config)] * repeats
    best = np.inf
    for step in run:
        start = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - start)
    return best


def to_gqa(params: Model, config: Config, h_kv: int) -> tuple[Config, Model]:
    """A trained Model with h key/value heads per layer -> one with h_kv, each the mean of its group.

    The conversion of Ainslie et al. (2023), ``gqa.gqa_from_mha`` on every layer: the queries
    stay, the g = h // h_kv key/value heads of a group are averaged. Accuracy drops; a short
    further training ("uptraining") wins most of it back.

    >>> cfg, m = to_gqa(init_model(Config(d_model=8, h=4)), Config(d_model=8, h=4), 1)
    >>> cfg.h_kv, m.layers[0].W_k.shape
    (1, (8, 2))
    """
    config = check_config(config)
    params = check_model(params, config)
    if config.h_kv != config.h:
        raise ValueError(f"to_gqa starts from a model with h_kv = h = {config.h}; this one has h_kv={config.h_kv}")
    layers = tuple(MHAParams(*gqa_from_mha(p, config.h, h_kv)) for p in params.layers)
    return config._replace(h_kv=h_kv), params._replace(layers=layers)


def timing_model(config: Config, max_len: int, seed: int = 0) -> tuple[Config, Model]:
    """A random-weights model of ``config``'s structure with learned positions for ``max_len`` tokens.

    For timings only (weights do not change the time): the shipped checkpoint knows its
    training length only. ``task`` becomes "previous_token", which sets the data, not the model.

    >>> cfg, m = timing_model(Config(d_model=8, h=2), 100)
    >>> m.pos.shape, cfg.seq_len
    ((100, 8), 100)
    """
    check_config(config)
    config = config._replace(task="previous_token", seq_len=_validate.positive_int(max_len, "max_len"),
                             seed=_validate.count(seed, "seed"))
    return config, init_model(config)
