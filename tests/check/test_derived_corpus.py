"""The second corpus (derived_corpus.py): mistakes of the classes a blind learner's unnamed ones
belong to, on other exercises; each is refused and its message names the mistake, in a few lines."""
import numpy as np
import pytest

from .derived_corpus import CORPUS, verdict


@pytest.mark.parametrize("name, fn, words", CORPUS, ids=[f"{n}-{w[0]}" for n, _, w in CORPUS])
def test_each_mistake_is_refused_and_named(name, fn, words):
    if name.startswith("torch_"):
        pytest.importorskip("torch", reason="the PyTorch exercises need torch (CI's full run has it)")
    with np.errstate(all="ignore"):
        ok, said = verdict(name, fn)
    assert ok is False, said
    assert any(w in said.lower() for w in words), said
    assert len(said.splitlines()) <= 14, said


def test_the_corpus_spans_every_notebook_with_three_mistakes_each():
    from mha_course import check
    names = [n for n, _, _ in CORPUS]
    assert len(names) >= 42 and all(hasattr(check, n) for n in names)
