"""When PyTorch is needed and missing: skip with the reason, unless ``MHA_COURSE_REQUIRE_TORCH=1``.

The one rule for every test and notebook that needs torch (``tests/_mha_checks.py`` and
``notebooks/conftest.py`` both ask it): a newcomer's ``make test`` without PyTorch skips them
and says why; CI's full run sets ``MHA_COURSE_REQUIRE_TORCH=1``, and then a missing torch fails.

>>> INSTALL_TORCH
'pip install torch==2.13.0'
"""
from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
from functools import lru_cache

__all__ = ["REQUIRE_TORCH_VAR", "INSTALL_TORCH", "torch_required", "torch_available", "torch_skip_reason",
           "notebook_needs_torch", "unguarded_torch_imports", "uses_torch", "guarded_torch_cells",
           "SKIPPED_LINE"]

REQUIRE_TORCH_VAR = "MHA_COURSE_REQUIRE_TORCH"
INSTALL_TORCH = "pip install torch==2.13.0"


def torch_required() -> bool:
    """True when the environment says what needs torch must run (CI sets MHA_COURSE_REQUIRE_TORCH=1)."""
    return os.environ.get(REQUIRE_TORCH_VAR, "").strip().lower() not in ("", "0", "false", "no")


def torch_available() -> bool:
    """True when ``import torch`` would find a package (torch itself is not imported)."""
    try:
        return importlib.util.find_spec("torch") is not None
    except ImportError:  # a finder that refuses it: as good as absent
        return False


def torch_skip_reason(what: str = "this test") -> str | None:
    """The reason to skip ``what`` (torch missing and not required), or None: run it.

    >>> reason = torch_skip_reason("notebook 12")
    >>> reason is None or reason.endswith("pip install torch==2.13.0 (CPU) to run it")
    True
    """
    if torch_available() or torch_required():
        return None
    return f"{what} needs PyTorch, which is not installed: {INSTALL_TORCH} (CPU) to run it"


SKIPPED_LINE = f"skipped: PyTorch is not installed ({INSTALL_TORCH})"
_MISSING = ("ImportError", "ModuleNotFoundError", "Exception", "BaseException")


def _code(source: str) -> str:
    """A cell's source as Python: IPython's ``%magic`` and ``!shell`` lines become comments."""
    return "\n".join("#" + line if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n"))


def _imports_torch(node) -> bool:
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] == "torch" for alias in node.names)
    return isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch" and not node.level


def _guarded(handlers) -> bool:
    """True when an except clause catches a missing module (bare, ImportError or broader)."""
    def names(t):
        if t is None:
            return ["BaseException"]
        if isinstance(t, ast.Tuple):
            return [n for e in t.elts for n in names(e)]
        return [t.id] if isinstance(t, ast.Name) else []
    return any(n in _MISSING for h in handlers for n in names(h.type))


def unguarded_torch_imports(source: str) -> list:
    """Line numbers of a cell's ``import torch`` / ``from torch ...`` that no ``try/except ImportError`` guards.

    The cell is parsed (ast), so a comment or a string that says ``import torch`` is no import,
    and an import inside ``try: ... except ImportError:`` is guarded: the notebook runs without torch.

    >>> unguarded_torch_imports("import numpy as np\\nimport torch.nn as nn")
    [2]
    >>> unguarded_torch_imports("try:\\n    import torch\\nexcept ImportError:\\n    torch = None")
    []
    >>> unguarded_torch_imports("# import torch\\ns = 'import torch'")
    []
    """
    try:
        tree = ast.parse(_code(source))
    except SyntaxError:  # not Python we can read: fall back to the line rule, the safe side
        return [n for n, line in enumerate(source.split("\n"), 1)
                if re.match(r"\s*(import\s+torch\b|from\s+torch\b)", line)]
    guarded = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and _guarded(node.handlers):
            guarded.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    return sorted(node.lineno for node in ast.walk(tree) if _imports_torch(node) and id(node) not in guarded)


def uses_torch(source: str) -> bool:
    """True when a cell's code reads the name ``torch`` (e.g. a guarded ``if torch is None:`` cell).

    >>> uses_torch("if torch is None:\\n    print('skipped')")
    True
    >>> uses_torch("# torch is optional here\\nx = 1")
    False
    """
    try:
        tree = ast.parse(_code(source))
    except SyntaxError:
        return bool(re.search(r"\btorch\b", source))
    return any(isinstance(n, ast.Name) and n.id == "torch" for n in ast.walk(tree))


def _code_cells(path) -> list:
    with open(path, encoding="utf-8") as f:
        cells = json.load(f).get("cells", [])
    return [c for c in cells if c.get("cell_type") == "code"]


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


@lru_cache(maxsize=None)
def notebook_needs_torch(path) -> bool:
    """True when a code cell of the notebook at ``path`` imports torch without a ``try/except ImportError``."""
    return any(unguarded_torch_imports(_source(c)) for c in _code_cells(path))


def guarded_torch_cells(path) -> list:
    """Indices (among the code cells) of the cells that read ``torch`` in a notebook that runs without it.

    Without torch each of them prints :data:`SKIPPED_LINE` and nothing else (tested); the
    import cell itself (a ``try: import torch``) is not one of them. [] for a notebook that needs torch.
    """
    if notebook_needs_torch(path):
        return []
    cells = _code_cells(path)
    return [i for i, c in enumerate(cells) if uses_torch(_source(c)) and not any(
        _imports_torch(n) for n in ast.walk(_parse_or_empty(_source(c))))]


def _parse_or_empty(source: str):
    try:
        return ast.parse(_code(source))
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])
