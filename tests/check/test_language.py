"""check/language.py: the checkers' fixed phrases in the course folder's language (gettext, checks.po)."""
from __future__ import annotations

import pytest

from mha_course.check import language, progress
from mha_course.tools import i18n


def test_english_is_the_template_filled_in(monkeypatch, tmp_path):
    monkeypatch.delenv(language.ENV, raising=False)
    monkeypatch.chdir(tmp_path)                       # no course folder here: English
    assert language.course_language() is None
    assert language.say("✔ {name}: all {n} cases match", name="softmax", n=4) == "✔ softmax: all 4 cases match"


def test_a_chinese_course_folder_gets_its_phrases_in_chinese(monkeypatch, tmp_path):
    monkeypatch.delenv(language.ENV, raising=False)
    (tmp_path / progress.MARKER).mkdir()
    (tmp_path / progress.MARKER / language.LANGUAGE_FILE).write_text("zh_CN\n")
    monkeypatch.setenv(progress.ENV, str(tmp_path))
    assert language.course_language() == "zh_CN"
    said = language.say("✔ {name}: all {n} cases match", name="softmax", n=4)
    assert said.startswith("✔ softmax") and "4" in said and said != "✔ softmax: all 4 cases match"


def test_every_phrase_a_checker_says_is_translated_with_the_same_fields():
    """Every say() template of check/ is in checks.po, translated, not fuzzy, with the same {fields}."""
    import string
    cat = i18n.read_catalogue(i18n.catalogue_path("checks"))
    table = i18n.translations(cat)
    phrases = [t for t, _ in i18n.checker_phrases(i18n.root() / "mha_course" / "check")]
    assert phrases
    fields = lambda s: sorted(f for _, f, _, _ in string.Formatter().parse(s) if f)  # noqa: E731
    missing = [p for p in phrases if p not in table]
    assert not missing, missing
    assert all(fields(table[p]) == fields(p) for p in phrases)


@pytest.mark.parametrize("bad", [{"n": 3}, {}])
def test_a_template_that_cannot_be_filled_falls_back_to_english_never_raising(bad):
    with pytest.raises(KeyError):                     # the English itself needs its fields ...
        language.say("✔ {name}: all {n} cases match", lang="xx", **bad)
    assert language.say("no exercise checked yet in this kernel", lang="zh_CN")  # ... a fixed phrase never fails
