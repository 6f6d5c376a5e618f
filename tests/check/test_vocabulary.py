"""One vocabulary (check/vocabulary.py): every class has a sentence and a fix, the slots fill with
the exercise's symbols, and a missing slot falls back to a plain sentence (never a raw '{...}')."""
import pytest

from mha_course.check import mutants, vocabulary


@pytest.mark.parametrize("key", sorted(vocabulary.SENTENCES))
def test_each_class_reads_without_raw_slots_when_nothing_is_filled(key):
    assert "{" not in vocabulary.sentence(key) or key in ("scale", "negated", "inverse", "transpose", "axis-order",
                                                          "flipped", "shifted", "unstacked", "reversed-input",
                                                          "swapped-inputs", "dropped-call", "flipped-mask",
                                                          "repeated", "non-finite", "off-by-one", "float-result",
                                                          "swapped-outputs", "output-for-output", "replaced-input",
                                                          "transposed-input", "negated-input", "argument-changed", "absolute", "squared", "max-normaliser", "wrong-normaliser", "restricted-keys",
                                                          "square-root", "exponential", "logarithm", "input-returned")
    assert vocabulary.fix(key)


def test_every_mutant_category_has_a_sentence():
    assert all(vocabulary.mutant_class(c) for c in mutants.CATEGORIES), [
        c for c in mutants.CATEGORIES if not vocabulary.mutant_class(c)]


def test_slots_are_filled_with_the_exercises_symbols():
    assert vocabulary.sentence("axis", op="softmax", before=-1, after=-2) == \
        "the softmax over axis -2 where axis -1 belongs"
    assert vocabulary.sentence("comparison") == "a comparison off at the boundary (< for <=, or the reverse)"


def test_an_unknown_class_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown mistake class 'nope'; known: scale"):
        vocabulary.sentence("nope")
