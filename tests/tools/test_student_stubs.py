"""One notebook's student copy (tools/student_stubs.py): stubs that keep indentation, label and hint,
check cells softened so Run All goes on, everything else kept, and the solutions pasted back give the
original. Run through ``tools.student``, which re-exports every name (the notebooks' and CLI's spelling).
"""
import nbformat
import pytest
from cli_helpers import (
    fixture_notebook,
    paste_solutions,
    small_course_fixture,  # noqa: F401  (the fixture small_course)
    small_notebook,
)

from mha_course.tools import student as st
from mha_course.tools import student_stubs


def test_student_re_exports_the_stub_makers():
    assert all(getattr(st, name) is getattr(student_stubs, name) for name in student_stubs.__all__)


def test_a_cell_without_markers_or_a_check_is_kept_as_it_is():
    assert student_stubs.stub_solutions("x = 1\nprint(x)") == "x = 1\nprint(x)"
    assert student_stubs.soften_check("assert x == 1") == "assert x == 1"  # only check.<name>(...) asserts
    nb = small_notebook()
    nb.cells = [c for c in nb.cells if "BEGIN SOLUTION" not in c.source]
    assert student_stubs.student_notebook(nb) == nb  # no exercise: no summary cell, nothing changed


def test_stub_keeps_indentation_label_and_hint():
    src = fixture_notebook().cells[2].source
    out = st.stub_solutions(src)
    assert out.splitlines() == [
        "# Exercise 9.1: a numerically stable softmax",
        "def my_softmax(x, axis=-1):",
        "    # Your code here (about 4 lines). Hint: subtract each row's maximum",
        '    raise NotImplementedError("Exercise 9.1: a numerically stable softmax")',
    ]
    compile(out, "<stub>", "exec")  # the stub is valid Python


def test_stub_quotes_are_escaped_and_code_stays_valid():
    src = '# Exercise 1.2: the "chief" merges\ndef f():\n    ### BEGIN SOLUTION\n    x = 1\n    ### END SOLUTION'
    out = st.stub_solutions(src)
    namespace = {}
    exec(compile(out, "<stub>", "exec"), namespace)
    with pytest.raises(NotImplementedError, match=r'Exercise 1.2: the "chief" merges'):
        namespace["f"]()


@pytest.mark.parametrize("src", ["### BEGIN SOLUTION\nx = 1", "x = 1\n### END SOLUTION",
                                 "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION"])
def test_unbalanced_markers_are_refused(src):
    with pytest.raises(st.StudentCopyError, match="SOLUTION"):
        st.stub_solutions(src)


def test_top_level_stub_assigns_ellipsis_and_keeps_going():
    out = st.stub_solutions(fixture_notebook().cells[6].source)
    assert "my_shapes = ...  # replace ... with your answer" in out and "raise" not in out
    namespace = {"np": __import__("numpy"), "mc": __import__("mha_course")}
    exec(compile(out, "<stub>", "exec"), namespace)  # runs: Run All does not stop here
    assert namespace["my_shapes"] is Ellipsis


def test_check_cells_are_softened_only_in_the_student_copy():
    original = fixture_notebook()
    student = st.student_notebook(original)
    assert student.cells[3].source == ("if check.softmax(my_softmax):\n    # the softmax of two huge equal logits\n"
                                       "    print(my_softmax(np.array([1e4, 1e4])))")
    assert student.cells[7].source == ("if check.stage_shapes(my_shapes, B, T, D, H):\n"
                                       "    print(my_shapes['weights'])")
    assert original.cells[3].source.startswith("assert check.softmax(my_softmax)\n")  # the answer key keeps it
    assert student.cells[-1].source == st.SUMMARY_CELL and len(student.cells) == len(original.cells) + 1
    assert st.student_notebook(original) == student  # deterministic (cell ids too): a re-run is no clash


def test_student_notebook_stubs_clears_and_keeps_everything_else():
    original = fixture_notebook()
    before = nbformat.writes(original)
    student = st.student_notebook(original)
    assert nbformat.writes(original) == before  # the input is not changed
    assert "BEGIN SOLUTION" not in nbformat.writes(student)
    cleared = {2, 3, 6, 7}  # the two exercise cells and their check cells
    for i, (o, s) in enumerate(zip(original.cells, student.cells)):
        if i in cleared:
            assert s.outputs == [] and s.execution_count is None, i
        else:
            assert s == o, i  # source, outputs, metadata, execution count all kept
    assert student.metadata == original.metadata


def test_pasting_the_solutions_back_restores_the_original_sources():
    original = fixture_notebook()
    restored = paste_solutions(st.student_notebook(original), original, upto=99)
    for o, r in zip(original.cells, restored.cells):
        assert r.source in (o.source, st.soften_check(o.source))
