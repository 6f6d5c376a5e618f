"""When PyTorch is needed and missing: skip with the reason, unless ``MHA_COURSE_REQUIRE_TORCH=1``.

The one rule for every test and notebook that needs torch (``tests/_mha_checks.py`` and
``notebooks/conftest.py`` both ask it): a newcomer's ``make test`` without PyTorch skips them
and says why; CI's full run sets ``MHA_COURSE_REQUIRE_TORCH=1``, and then a missing torch fails.

>>> INSTALL_TORCH
'pip install torch==2.13.0'
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
from functools import lru_cache

__all__ = ["REQUIRE_TORCH_VAR", "INSTALL_TORCH", "torch_required", "torch_available", "torch_skip_reason",
           "notebook_needs_torch"]

REQUIRE_TORCH_VAR = "MHA_COURSE_REQUIRE_TORCH"
INSTALL_TORCH = "pip install torch==2.13.0"


def torch_required() -> bool:
    """True when the environment says what needs torch must run (CI sets MHA_COURSE_REQUIRE_TORCH=1)."""
    return os.environ.get(REQUIRE_TORCH_VAR, "").strip().lower() not in ("", "0", "false", "no")


def torch_available() -> bool:
    """True when ``import torch`` would find a package (torch itself is not imported)."""
    return importlib.util.find_spec("torch") is not None


def torch_skip_reason(what: str = "this test") -> str | None:
    """The reason to skip ``what`` (torch missing and not required), or None: run it.

    >>> reason = torch_skip_reason("notebook 12")
    >>> reason is None or reason.endswith("pip install torch==2.13.0 (CPU) to run it")
    True
    """
    if torch_available() or torch_required():
        return None
    return f"{what} needs PyTorch, which is not installed: {INSTALL_TORCH} (CPU) to run it"


_IMPORTS_TORCH = re.compile(r"^\s*(import torch\b|from torch\b)", re.MULTILINE)


@lru_cache(maxsize=None)
def notebook_needs_torch(path) -> bool:
    """True when a code cell of the notebook at ``path`` imports torch (``import torch``, ``from torch ...``)."""
    with open(path, encoding="utf-8") as f:
        cells = json.load(f).get("cells", [])
    return any(_IMPORTS_TORCH.search("".join(c.get("source", ""))) for c in cells
               if c.get("cell_type") == "code")
