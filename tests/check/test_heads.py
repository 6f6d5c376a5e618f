"""check.heads (notebooks 03-04): right answers in a learner's own words pass, slips are named."""
import math

import numpy as np
import pytest

from mha_course import check


def split_einsum(x, h):
    B, T, D = x.shape
    return np.einsum("bthk->bhtk", x.reshape(B, T, h, D // h))


def split_stack(x, h):
    d_k = x.shape[-1] // h
    return np.stack([x[..., i * d_k:(i + 1) * d_k] for i in range(h)], axis=1)


def split_swapaxes(x, h):
    B, T, D = x.shape
    return np.swapaxes(x.reshape(B, T, h, -1), 1, 2)


def combine_concat(x):
    return np.concatenate([x[:, i] for i in range(x.shape[1])], axis=-1)


def combine_moveaxis(x):
    B, h, T, d_k = x.shape
    return np.moveaxis(x, 1, 2).reshape(B, T, h * d_k)


def combine_no_transpose(x):  # the classic bug, the other way round
    B, h, T, d_k = x.shape
    return x.reshape(B, T, h * d_k)


@pytest.mark.parametrize("fn", [split_einsum, split_stack, split_swapaxes])
def test_split_heads_in_other_words_passes(capsys, fn):
    assert check.split_heads(fn) is True


@pytest.mark.parametrize("fn", [combine_concat, combine_moveaxis])
def test_combine_heads_in_other_words_passes(capsys, fn):
    assert check.combine_heads(fn) is True


def test_the_reshape_without_transpose_is_named(capsys):
    def split_reshape_only(x, h):
        B, T, D = x.shape
        return x.reshape(B, h, T, D // h)
    assert check.split_heads(split_reshape_only) is False
    assert "without a transpose" in capsys.readouterr().out
    assert check.combine_heads(combine_no_transpose) is False
    assert "without the transpose back" in capsys.readouterr().out


def test_head_queries_a_slice_of_the_columns_passes_and_the_rows_fail(capsys):
    def right(X, W_q, h, i):
        d_k = W_q.shape[1] // h
        return X @ W_q[:, i * d_k:(i + 1) * d_k]

    def rows_instead(X, W_q, h, i):
        d_k = W_q.shape[0] // h
        return X @ W_q[i * d_k:(i + 1) * d_k].T
    assert check.head_queries(right) is True
    assert check.head_queries(rows_instead) is False


def test_new_head_mistakes_are_named(capsys):
    assert check.combine_heads(lambda x: np.concatenate([x.sum(axis=1)] * x.shape[1], axis=-1)) is False
    assert "heads summed, and the sum repeated h times" in capsys.readouterr().out

    def previous_head(X, W_q, h, i):
        d_k = W_q.shape[1] // h
        return X @ W_q[:, (i - 1) * d_k:i * d_k]
    assert check.head_queries(previous_head) is False
    assert "the block of head i-1" in capsys.readouterr().out
    assert check.head_queries(lambda X, W_q, h, i: X @ W_q[:, i * h:(i + 1) * h]) is False
    assert "h where d_k belongs" in capsys.readouterr().out
    assert check.bug_source_position(lambda i, t, T, h: math.ceil((i * T + t) / h)) is False
    assert "rounded up" in capsys.readouterr().out
    assert check.bug_source_position(lambda i, t, T, h: (t + i * T) - h * ((t + i * T) // h)) is False
    assert "the remainder" in capsys.readouterr().out


def test_head_queries_never_calls_wrong_values_right_when_a_full_projection_is_used(capsys):
    """A full projection X @ W_q is refused by the exercise's rule; the message says the values are right
    only when they are, and otherwise diagnoses them too."""
    def first_block_of_full_projection(X, W_q, h, i):  # the full product, then head 0's columns for every i
        return (X @ W_q)[..., : W_q.shape[1] // h]

    def right_columns_of_full_projection(X, W_q, h, i):
        d_k = W_q.shape[1] // h
        return (X @ W_q)[..., i * d_k:(i + 1) * d_k]

    assert check.head_queries(first_block_of_full_projection) is False
    out = capsys.readouterr().out
    assert "the values are right" not in out and "full projection" in out
    assert "the first block of columns for every head" in out
    assert check.head_queries(right_columns_of_full_projection) is False
    assert "the values are right, but your function multiplies X by all of W_q" in capsys.readouterr().out


# ---- the token axis split, and the bug position's slips
def test_the_token_axis_split_is_named(capsys):
    def learner(x, h):
        B, T, D = x.shape
        return x.reshape(B, h, T // h, D) if T % h == 0 else np.stack(np.split(x, h, axis=1), axis=1)
    assert check.split_heads(learner) is False
    assert "Looks like: the token axis split into h groups" in capsys.readouterr().out


@pytest.mark.parametrize("fn, said", [
    (lambda i, t, T, h: divmod(t, h)[0], "t // h: the rows of the heads before head i"),
    (lambda i, t, T, h: (t + h * i) // T, "T and h swapped"),
    (lambda i, t, T, h: (1 + i * T + t) // h, "off by one: (i*T + t + 1) // h"),
    (lambda i, t, T, h: (i * T + t - 1) // h, "off by one: (i*T + t - 1) // h"),
])
def test_bug_position_slips_are_named(capsys, fn, said):
    assert check.bug_source_position(fn) is False
    assert f"Looks like: {said}" in capsys.readouterr().out


def test_the_bug_position_formula_is_what_the_buggy_reshape_does():
    """The checker's reference is the learner's formula (i·T + t) // h; here it is held to the buggy
    ``reshape(B, h, T, d_k)`` itself, on every head and row of several sizes."""
    from mha_course.check.heads import BUG_SOURCE_POSITION, split_no_transpose
    for T, h, d_k in ((6, 4, 2), (5, 3, 3), (4, 6, 1), (9, 5, 2)):
        codes = np.arange(T * h * d_k).reshape(1, T, h * d_k) // (h * d_k)  # entry (t, f) holds its position t
        heads = split_no_transpose(codes, h)  # (1, h, T, d_k), buggy
        for i in range(h):
            for t in range(T):
                assert BUG_SOURCE_POSITION.reference(i, t, T, h) == heads[0, i, t, 0]
