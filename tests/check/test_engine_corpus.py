"""The corpus of fresh learner answers (engine_corpus.py): every wrong answer is named as what it
is, every right answer in an unusual form is accepted; each message stays a few lines."""
import numpy as np
import pytest

from .engine_corpus import CORPUS, verdict

# the answers of the corpus the engine does not name yet (strict: the test says when they are)
GAPS = {}


def _param(entry):
    name, fn, expect = entry
    gap = GAPS.get((name, expect[0] if expect else None))
    return pytest.param(*entry, id=_id(entry), marks=[pytest.mark.xfail(reason=gap, strict=True)] if gap else [])


def _id(entry):
    name, fn, expect = entry
    return f"{name}-{'right' if expect is None else expect[0]}"


@pytest.mark.parametrize("name, fn, expect", [_param(e) for e in CORPUS])
def test_each_answer_of_the_corpus_is_judged_right(name, fn, expect):
    with np.errstate(all="ignore"):
        v, text = verdict(name, fn, expect)
    assert v in ("accepted", "named") and (expect is None) == (v == "accepted"), text
    if expect is not None:
        assert len(text.splitlines()) <= 12 and max(map(len, text.splitlines())) <= 400, text


def test_the_corpus_spans_the_course():
    wrong = [n for n, _, e in CORPUS if e is not None]
    assert len(wrong) >= 30 and len({n for n, _, _ in CORPUS}) >= 25
