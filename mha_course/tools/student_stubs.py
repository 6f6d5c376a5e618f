"""The student copy of one notebook: every solution block becomes a stub, every check cell is softened.

``student_notebook(nb)`` is the whole job, pure (``nb`` is not changed): each ``### BEGIN SOLUTION``
... ``### END SOLUTION`` block becomes a hint and, in a function body, ``raise NotImplementedError``
(``stub_solutions``); at the top level, ``name = ...`` for each name it assigns; the check cell after
an exercise has its ``assert check.f(x)`` turned into a plain call (``soften_check``), so Run All goes
on; a notebook with exercises ends with ``check.summary()``. ``tools.student`` writes the copies.

>>> print(stub_solutions("def f(x):\\n    ### BEGIN SOLUTION\\n    return 2 * x\\n    ### END SOLUTION", "Ex 1"))
def f(x):
    # Your code here (about 1 line)
    raise NotImplementedError("Ex 1")
"""
from __future__ import annotations

import ast
import copy
import re
import textwrap

__all__ = ["BEGIN", "END", "SUMMARY_CELL", "StudentCopyError", "exercise_label", "stub_solutions", "soften_check",
           "student_notebook"]

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


_EXERCISE = re.compile(r"^\s*#\s*(Exercise\s+\d+(?:\.\d+)*)\s*:\s*(.*?)\s*$")


SUMMARY_CELL = "# How many of this notebook's exercises are done\nfrom mha_course import check\ncheck.summary()"



class StudentCopyError(RuntimeError):
    """A student copy would replace a learner's file (exit code 1), or cannot be made (see below)."""



def exercise_label(source: str) -> str:
    """'Exercise 2.1: a stable softmax' from a cell's '# Exercise 2.1: a stable softmax' line.

    >>> exercise_label("# Exercise 2.1: a stable softmax\\nx = 1")
    'Exercise 2.1: a stable softmax'
    >>> exercise_label("x = 1")
    'Exercise'
    """
    for line in source.splitlines():
        match = _EXERCISE.match(line)
        if match:
            return f"{match[1]}: {match[2]}" if match[2] else match[1]
    return "Exercise"



def _assigned_names(block: list) -> list:
    """Names a top-level solution block assigns (``my_shapes = {...}`` -> ['my_shapes'])."""
    try:
        tree = ast.parse(textwrap.dedent("\n".join(block)))
    except SyntaxError:
        return []
    names = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        names += [t.id for t in targets if isinstance(t, ast.Name) and t.id not in names]
    return names



def _stub(block: list, indent: str, label: str, in_function: bool) -> list:
    """The lines that replace one solution block (its lines without the markers).

    Inside a function: ``raise NotImplementedError``, which only fires when it is called.
    At the top level of a cell: each name the solution assigns becomes ``...``, so that Run
    All goes on and the check cell reports the exercise as not finished.
    """
    code = [ln for ln in block if ln.strip() and not ln.strip().startswith("#")]
    hint = next((ln.strip()[1:].strip() for ln in block[:1] if ln.strip().startswith("#")), "")
    size = f"about {len(code)} line{'s' if len(code) != 1 else ''}"
    head = f"{indent}# Your code here ({size}){'. Hint: ' + hint if hint else ''}"
    if not in_function:
        names = _assigned_names(block)
        return [head] + [f"{indent}{n} = ...  # replace ... with your answer" for n in names]
    quoted = label.replace("\\", "\\\\").replace('"', '\\"')
    return [head, f'{indent}raise NotImplementedError("{quoted}")']



def _inside_function(lines: list, indent: str) -> bool:
    """True when a block indented by ``indent`` after ``lines`` sits in a ``def`` body."""
    for line in reversed(lines):
        own = line[:len(line) - len(line.lstrip())]
        if line.strip() and len(own) < len(indent):
            if re.match(r"(async\s+)?def\s", line.strip()):
                return True
            indent = own
    return False



def stub_solutions(source: str, label: str = "") -> str:
    """Replace every solution block of a cell's source by a stub, keeping its indentation.

    The block, markers included, becomes a hint comment (the solution's size, and its first
    comment line when it starts with one) and, in a function body,
    ``raise NotImplementedError("<label>")``; at the top level, ``name = ...`` for each name
    the solution assigns.

    >>> src = "def f(x):\\n    ### BEGIN SOLUTION\\n    return 2 * x\\n    ### END SOLUTION"
    >>> print(stub_solutions(src, "Exercise 1.1: double"))
    def f(x):
        # Your code here (about 1 line)
        raise NotImplementedError("Exercise 1.1: double")
    >>> print(stub_solutions("### BEGIN SOLUTION\\nn = 4 * 6 ** 2\\n### END SOLUTION", "Exercise 1.2"))
    # Your code here (about 1 line)
    n = ...  # replace ... with your answer
    """
    label = label or exercise_label(source)
    out, block, indent = [], None, ""
    for line in source.split("\n"):
        stripped = line.strip()
        if stripped == BEGIN and block is None:
            block, indent = [], line[:len(line) - len(line.lstrip())]
        elif stripped == BEGIN or (stripped == END and block is None):
            raise StudentCopyError(f"unbalanced {stripped!r} in the cell of {label!r}")
        elif stripped == END:
            out += _stub(block, indent, label, _inside_function(out, indent))
            block = None
        elif block is not None:
            block.append(line)
        else:
            out.append(line)
    if block is not None:
        raise StudentCopyError(f"{BEGIN!r} without {END!r} in the cell of {label!r}")
    return "\n".join(out)



def _is_check_assert(node) -> bool:
    """``assert check.<name>(...)`` without a message."""
    call = node.test if isinstance(node, ast.Assert) and node.msg is None else None
    return (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Name) and call.func.value.id == "check")



def soften_check(source: str) -> str:
    """A check cell for a student copy: ``assert check.f(x)`` -> ``_ = check.f(x)``, so Run All goes on.

    The checker prints its one line (done, wrong, or not finished yet) and returns a bool;
    the lines after it run only when the check passes (they often call the learner's code).

    >>> print(soften_check("# Check 2.1\\nassert check.softmax(f)"))
    # Check 2.1
    _ = check.softmax(f)
    >>> print(soften_check("assert check.param_count(f)\\nprint(f(8, 2))"))
    if check.param_count(f):
        print(f(8, 2))
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    found = [n for n in tree.body if _is_check_assert(n)]
    if not found:
        return source
    node, lines = found[0], source.split("\n")
    call = ast.get_source_segment(source, node.test)
    before, after = lines[:node.lineno - 1], lines[node.end_lineno:]
    if not any(ln.strip() for ln in after):
        return "\n".join(before + [f"_ = {call}"] + after)
    rest = soften_check("\n".join(after))
    return "\n".join(before + [f"if {call}:"] + [f"    {ln}" if ln.strip() else ln for ln in rest.split("\n")])



def _clear(cell) -> None:
    cell.outputs = []
    cell.execution_count = None



def student_notebook(nb):
    """A new notebook node: solution blocks stubbed, check cells softened, a summary at the end.

    A check cell is the code cell right after an exercise cell when it uses ``check.`` or
    ``assert``; its ``assert check.<name>(...)`` becomes a plain call (see ``soften_check``)
    and, like the exercise cells, its outputs are cleared. A notebook with exercises gets a
    last cell ``check.summary()``. Every other cell, output and metadata is kept as it is;
    ``nb`` is not changed.
    """
    from nbformat.v4 import new_code_cell

    nb = copy.deepcopy(nb)
    after_exercise = n_exercises = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if BEGIN in cell.source:
            cell.source = stub_solutions(cell.source)
            _clear(cell)
            after_exercise, n_exercises = True, n_exercises + 1
            continue
        if after_exercise and ("check." in cell.source or "assert" in cell.source):
            cell.source = soften_check(cell.source)
            _clear(cell)
        after_exercise = False
    if n_exercises:
        nb.cells.append(new_code_cell(SUMMARY_CELL, id="mha-course-summary"))  # a fixed id: same copy each run
    return nb
