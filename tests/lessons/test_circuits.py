"""lessons.circuits: notebook 14's one namespace re-exports every public name of the four modules that
hold them (each tested in its own mirror file), once, and ``mc.prefix_matching_score`` etc. load it lazily.
"""
import subprocess
import sys

import pytest

import mha_course as mc
from mha_course.lessons import circuits as ci
from mha_course.lessons import circuits_data, circuits_patching, circuits_runs, circuits_scores

PARTS = (circuits_data, circuits_scores, circuits_patching, circuits_runs)


def test_every_public_name_of_the_four_modules_is_re_exported_once():
    names = [n for m in PARTS for n in m.__all__]
    assert len(names) == len(set(names)), "a name is public in two modules"
    assert sorted(ci.__all__) == sorted(names)
    for m in PARTS:
        for n in m.__all__:
            assert getattr(ci, n) is getattr(m, n), n


def test_the_names_notebook_14_and_its_views_use_are_there():
    for n in ("head_scores", "make_pair", "patch_heads", "load_trajectories", "compare_over_seeds", "PatchPair",
              "SCORE_NAMES", "ABLATIONS", "PHASE_CHANGE_CONFIGS", "SEEDS"):
        assert n in ci.__all__ and hasattr(ci, n)
    with pytest.raises(AttributeError):
        ci.check_pair  # noqa: B018 -- a check of circuits_data, not part of the namespace


def test_lazy_top_level_names():
    code = ("import sys, mha_course as mc; assert not any('lessons' in m for m in sys.modules); "
            "f = mc.prefix_matching_score; assert 'mha_course.lessons.circuits' in sys.modules; "
            "assert 'composition_score' in dir(mc) and 'copying_score' in mc.__all__; print(f.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "mha_course.lessons.circuits_scores"
    with pytest.raises(AttributeError):
        mc.no_such_name  # noqa: B018
