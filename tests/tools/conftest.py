"""Fixtures of the tests of ``mha-course``: a small course of two notebooks with one exercise each."""
import nbformat
import pytest
from cli_helpers import small_notebook


@pytest.fixture
def small_course(tmp_path):
    folder = tmp_path / "course" / "notebooks"
    folder.mkdir(parents=True)
    paths = [folder / "01_a.ipynb", folder / "02_b.ipynb"]
    for p in paths:
        nbformat.write(small_notebook(p.stem), p)
    return paths
