"""The inputs of notebook 14's experiments: the repeated random tokens of the induction probe and the
clean/corrupted pairs of activation patching (numpy only), with the check of a pair.

Shapes: ``B`` batch (``n``), ``T`` = config.seq_len positions, ``V`` vocabulary.

    >>> import numpy as np
    >>> from mha_course.lessons import checkpoints
    >>> pair = make_pair(checkpoints.CHECKPOINT_CONFIGS["induction"], np.random.default_rng(0), 2)
    >>> pair.clean.shape, pair.position, int((pair.clean != pair.corrupt).sum())
    ((2, 24), 22, 2)

Taught in 14_circuits.ipynb (re-exported by ``lessons.circuits``).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _validate
from . import _args

__all__ = ["repeated_tokens", "PatchPair", "make_pair"]


def repeated_tokens(vocab: int, half: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """-> tokens (n, 2 * half): ``half`` uniformly random tokens, then the same ``half`` again: the
    standard induction probe (Olsson et al. 2022; TransformerLens's and ARENA's repeated random tokens).

    >>> t = repeated_tokens(16, 4, 2, np.random.default_rng(0))
    >>> t.shape, bool((t[:, :4] == t[:, 4:]).all())
    ((2, 8), True)
    """
    vocab, half, n = (_validate.positive_int(v, k) for v, k in ((vocab, "vocab"), (half, "half"), (n, "n")))
    rng = _args.generator(rng)
    if half < 2:
        raise ValueError(f"half={half}: the repeated block needs at least 2 tokens")
    _validate.allocation(3 * 8 * n * half, f"repeated tokens (n, 2 * half) = ({n}, {2 * half})",
                         "ask for fewer sequences n or a shorter half")
    block = rng.integers(0, vocab, size=(n, half))  # (n, half)
    return np.concatenate([block, block], axis=1)  # (n, 2 * half)


class PatchPair(NamedTuple):
    """A clean and a corrupted batch (B, T) that differ at one position; the query ``position`` (one for
    the whole batch), its ``answer`` (B,) (the token after the query's earlier occurrence) and the
    ``distractor`` (B,) (the token the corruption wrote)."""
    clean: np.ndarray
    corrupt: np.ndarray
    position: int
    answer: np.ndarray
    distractor: np.ndarray
    changed: int


def make_pair(config, rng: np.random.Generator, n: int = 64, corrupt: str = "key", repeat: int = 8) -> PatchPair:
    """-> PatchPair of ``n`` induction sequences [noise][A (repeat)][A (repeat)] (the task of notebook 08),
    queried at T - 2 (the last A[repeat - 2], whose answer is A[repeat - 1]).

    ``corrupt="key"``: the earlier A[repeat - 2] is replaced (nothing to match: the induction head's
    query finds no key); ``"value"``: the token after it, A[repeat - 1] (what gets copied), is replaced.
    The new token comes from outside A, so the corrupted model has no right answer to find.

    >>> from mha_course.lessons import checkpoints
    >>> pair = make_pair(checkpoints.CHECKPOINT_CONFIGS["induction"], np.random.default_rng(0), 2)
    >>> pair.clean.shape, pair.position, pair.changed
    ((2, 24), 22, 14)
    """
    config, rng, n = _args.config(config), _args.generator(rng), _validate.positive_int(n, "n")
    if corrupt not in ("key", "value"):
        raise ValueError(f"corrupt={corrupt!r}; choose 'key' (the earlier occurrence) or 'value' (the token after it)")
    T, V = config.seq_len, config.vocab
    repeat = _args.whole(repeat, "repeat", 3, min(T // 2, V - 1),
                         f"the copied block needs 3..seq_len // 2 = {T // 2} tokens, fewer than vocab={V}")
    _validate.allocation(2 * 8 * n * max(V, T), f"a patching pair of n={n} sequences", "ask for fewer sequences n")
    perm = np.argsort(rng.random((n, V)), axis=1)  # (n, V): a random order of the vocabulary per row
    A, outside = perm[:, :repeat], perm[:, repeat]  # (n, repeat) distinct tokens; (n,) one more
    noise = rng.integers(0, V, size=(n, T - 2 * repeat))
    clean = np.concatenate([noise, A, A], axis=1)  # (n, T)
    position = T - 2
    changed = position - repeat + (1 if corrupt == "value" else 0)
    bad = clean.copy()
    bad[:, changed] = outside
    return PatchPair(clean, bad, position, clean[:, position + 1], outside, changed)



def check_pair(pair, config=None) -> PatchPair:
    """A PatchPair as make_pair makes it (for ``config`` when given: tokens below its vocabulary, its
    length) -> the pair; a TypeError or ValueError names pair and the fix otherwise."""
    fix = "make one with make_pair(config, rng, n)"
    if not isinstance(pair, PatchPair):
        raise TypeError(f"pair={pair!r:.60} is not a PatchPair; {fix}")
    vocab = None if config is None else config.vocab
    clean, corrupt = (_args.token_ids(t, vocab, f"pair.{k}") for t, k in ((pair.clean, "clean"), (pair.corrupt, "corrupt")))
    answer, distractor = (_args.token_ids(t, vocab, f"pair.{k}")
                          for t, k in ((pair.answer, "answer"), (pair.distractor, "distractor")))
    B = clean.shape[0] if clean.ndim == 2 else 0
    if clean.ndim != 2 or 0 in clean.shape or corrupt.shape != clean.shape or answer.shape != (B,) or \
            distractor.shape != (B,):
        raise ValueError(f"pair has clean {clean.shape}, corrupt {corrupt.shape}, answer {answer.shape} and "
                         f"distractor {distractor.shape}: want (B, T), (B, T), (B,), (B,) with B, T >= 1; {fix}")
    T = clean.shape[1] if config is None else config.seq_len
    if config is not None and clean.shape[1] != T:
        raise ValueError(f"pair's sequences have {clean.shape[1]} tokens, config.seq_len={T}: make the pair with "
                         "this model's config")
    position = _args.whole(pair.position, "pair.position", 0, clean.shape[1] - 1, f"the query position of a pair; {fix}")
    changed = _args.whole(pair.changed, "pair.changed", 0, position, f"the corrupted position, before the query; {fix}")
    return PatchPair(clean, corrupt, position, answer, distractor, changed)
