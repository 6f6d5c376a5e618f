"""lessons.circuits_data: the repeated random tokens and the clean/corrupted pairs of patching, their
structure (what differs, where the answer is) and their refusals.
"""
import numpy as np
import pytest

from mha_course.lessons import checkpoints
from mha_course.lessons import circuits_data as cdata

CONFIG = checkpoints.CHECKPOINT_CONFIGS["induction"]


def test_repeated_tokens_repeat_their_first_half():
    tok = cdata.repeated_tokens(16, 5, 3, np.random.default_rng(0))
    assert tok.shape == (3, 10) and (tok[:, :5] == tok[:, 5:]).all()
    assert tok.min() >= 0 and tok.max() < 16


@pytest.mark.parametrize("corrupt", ["key", "value"])
def test_a_pair_differs_at_one_position_by_a_token_from_outside_the_copy(corrupt):
    pair = cdata.make_pair(CONFIG, np.random.default_rng(1), 16, corrupt=corrupt)
    diff = pair.clean != pair.corrupt
    assert (diff.sum(1) == 1).all() and diff[:, pair.changed].all()
    assert pair.position == CONFIG.seq_len - 2
    rows = np.arange(16)
    assert (pair.answer == pair.clean[rows, pair.position + 1]).all()
    copy = pair.clean[:, CONFIG.seq_len - 8:]  # the second copy of A (repeat 8)
    assert not (copy == pair.distractor[:, None]).any()
    assert (pair.corrupt[rows, pair.changed] == pair.distractor).all()


def test_repeated_tokens_refuses_sizes_past_the_course_limit():
    with pytest.raises(ValueError, match=r"repeated tokens \(n, 2 \* half\) = \(10000000, 200\)"):
        cdata.repeated_tokens(50, 100, 10_000_000, np.random.default_rng(4))
