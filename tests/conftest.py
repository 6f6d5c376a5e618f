"""Fixtures shared by test files in different folders (one copy, loaded once per session)."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def long_context_models():
    """Notebook 13's shipped models, {position scheme: (config, params)} (lessons.long_context)."""
    from mha_course.lessons import long_context as lc
    return {name: lc.load_scheme(name) for name in lc.SCHEMES}


@pytest.fixture(autouse=True)
def close_figures():
    """After every test, close the figures it left open (when it used pyplot at all)."""
    yield
    import sys
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
