"""The shape of the package's code: no function longer than 25 lines of code.

Every module of mha_course is parsed with ast; a function's code lines are the non-blank,
non-comment lines of its body, its docstring left out (nested functions count towards the
function that holds them). A longer function is a sign that two ideas share one place.
"""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "mha_course"
MAX_LINES = 25
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
def test_no_function_is_longer_than_25_lines_of_code(path):
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
