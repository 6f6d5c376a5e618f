"""The shape of the package's code: short functions, imports at the top, no private name shared.

Every module of mha_course is parsed with ast; a function's code lines are the non-blank,
non-comment lines of its body, its docstring left out (nested functions count towards the
function that holds them). A longer function is a sign that two ideas share one place; but a
reader should follow the teaching path without jumping, so one readable function of 30 lines with
a shape comment per line beats five helpers of 4: the limit is 40.
"""
import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "mha_course"
MAX_LINES = 40
CORE_LIMIT = 500  # attention, heads and mha together, docstrings included: read in one sitting
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def code_lines(node: ast.AST, source_lines: list[str]) -> int:
    """Non-blank, non-comment lines of a function's body, without its docstring."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if not body:
        return 0
    lines = source_lines[body[0].lineno - 1:node.end_lineno]
    return sum(1 for line in lines if line.strip() and not line.strip().startswith("#"))


def long_functions(path: Path) -> list[str]:
    """'module.py:line name (N lines)' for every function of ``path`` over MAX_LINES."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = code_lines(node, lines)
            if n > MAX_LINES:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} ({n} lines)")
    return found


def test_code_lines_leave_out_the_docstring_and_comments():
    src = 'def f(x):\n    """Doc.\n\n    More doc.\n    """\n    # a comment\n\n    y = x\n    return y\n'
    assert code_lines(ast.parse(src).body[0], src.splitlines()) == 2


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_function_is_longer_than_40_lines_of_code(path):
    assert long_functions(path) == []


def layout_problems(path: Path) -> list[str]:
    """Module-level imports after the first def/class, and more than one ``__all__`` statement."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    problems, seen_code, alls = [], False, 0
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            seen_code = True
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and seen_code:
            problems.append(f"line {node.lineno}: import below the code")
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        alls += any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)
    return problems + ([f"{alls} __all__ statements"] if alls > 1 else [])


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_at_the_top_and_one_all(path):
    assert layout_problems(path) == []


def private_imports(path: Path) -> list[str]:
    """Names starting with one underscore that ``path`` takes from another module of the package:
    ``from .x import _name`` and ``module._name`` on an imported package module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found, modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("mha_course")):
            for alias in node.names:
                if _is_private(alias.name) and not _is_module(path, node, alias.name):
                    found.append(f"line {node.lineno}: from {'.' * node.level}{node.module or ''} import {alias.name}")
                elif _is_module(path, node, alias.name):
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            modules.update(a.asname or a.name for a in node.names if a.name.startswith("mha_course"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules \
                and _is_private(node.attr):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _is_module(path: Path, node: ast.ImportFrom, name: str) -> bool:
    """True when ``from <node> import name`` names a module or package of mha_course."""
    if node.level:
        base = path.parent
        for _ in range(node.level - 1):
            base = base.parent
    else:
        base = PACKAGE.parent
    target = base.joinpath(*((node.module or "").split(".") if node.module else []), name)
    return target.with_suffix(".py").exists() or (target / "__init__.py").exists()


def test_private_imports_are_found():
    src = PACKAGE / "lessons" / "model.py"
    tree_src = "from ..heads import _split\nfrom .. import _validate\n"
    tmp = ast.parse(tree_src)
    names = [a.name for n in tmp.body for a in n.names]
    assert names == ["_split", "_validate"]
    assert not _is_module(src, tmp.body[0], "_split") and _is_module(src, tmp.body[1], "_validate")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_another_modules_private_name(path):
    assert private_imports(path) == []


def test_the_teaching_core_reads_in_one_sitting():
    lines = sum(len((PACKAGE / f"{m}.py").read_text(encoding="utf-8").splitlines()) for m in ("attention", "heads", "mha"))
    assert lines <= CORE_LIMIT, f"attention.py + heads.py + mha.py are {lines} lines (limit {CORE_LIMIT})"


# the ground floor's helpers: no topic of their own (validation, the process's threads and allocator, the writer)
GROUND_FLOOR = {"__init__.py", "_validate.py", "_arguments.py", "runtime.py", "_files.py", "registry.py"}


def test_at_most_twelve_modules_stand_at_the_top_of_the_package():
    top = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in GROUND_FLOOR)
    assert len(top) <= 12, top


STALE = re.compile(r"\bissues? \d+|\bfloor \d+")


def test_no_tracker_numbers_or_floor_numbers_in_the_code():
    """A tracker's issue number means nothing to a reader of the repository, and the floors are the folders now."""
    roots = [PACKAGE, PACKAGE.parent / "tests", PACKAGE.parent / "benchmarks"]
    found = [f"{p.relative_to(PACKAGE.parent)}:{i}: {line.strip()[:80]}"
             for root in roots for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if STALE.search(line) and "STALE = re.compile" not in line]
    assert not found, "\n".join(found)
