"""nbval set-up for the notebooks: a notebook that imports torch is skipped, with the reason, without torch.

With MHA_COURSE_REQUIRE_TORCH=1 (CI) nothing is skipped, so a missing torch fails the notebook's cells.
"""
import importlib.util
import json
import os
import re
from functools import lru_cache

import pytest

_IMPORTS_TORCH = re.compile(r"^\s*(import torch\b|from torch\b)", re.MULTILINE)


@lru_cache(maxsize=None)
def needs_torch(path: str) -> bool:
    """True when a code cell of the notebook at ``path`` imports torch."""
    with open(path, encoding="utf-8") as f:
        cells = json.load(f).get("cells", [])
    return any(_IMPORTS_TORCH.search("".join(c.get("source", ""))) for c in cells
               if c.get("cell_type") == "code")


def _torch_required() -> bool:
    return os.environ.get("MHA_COURSE_REQUIRE_TORCH", "").strip().lower() not in ("", "0", "false", "no")


def pytest_collection_modifyitems(config, items):
    if importlib.util.find_spec("torch") is not None or _torch_required():
        return
    skip = pytest.mark.skip(reason="this notebook needs PyTorch: pip install torch==2.13.0 (CPU) to run it")
    for item in items:
        path = str(item.fspath)
        if path.endswith(".ipynb") and needs_torch(path):
            item.add_marker(skip)
