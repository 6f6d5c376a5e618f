"""tools/torch_rule.py: the one rule for what needs PyTorch: skip with the reason, or required in CI."""
import json

import pytest

from mha_course.tools import torch_rule


@pytest.mark.parametrize("value, required", [("", False), ("0", False), ("no", False), ("1", True), ("yes", True)])
def test_required_follows_the_variable(monkeypatch, value, required):
    monkeypatch.setenv(torch_rule.REQUIRE_TORCH_VAR, value)
    assert torch_rule.torch_required() is required


def test_the_reason_names_the_install_line_and_disappears_when_required(monkeypatch):
    monkeypatch.setattr(torch_rule, "torch_available", lambda: False)
    monkeypatch.delenv(torch_rule.REQUIRE_TORCH_VAR, raising=False)
    reason = torch_rule.torch_skip_reason("notebook 12")
    assert reason.startswith("notebook 12 needs PyTorch") and "pip install torch==2.13.0" in reason
    monkeypatch.setenv(torch_rule.REQUIRE_TORCH_VAR, "1")
    assert torch_rule.torch_skip_reason("notebook 12") is None  # required: run it, and fail without torch


def test_a_notebook_needs_torch_only_when_a_code_cell_imports_it(tmp_path):
    def notebook(cells):
        path = tmp_path / f"nb{len(list(tmp_path.iterdir()))}.ipynb"
        path.write_text(json.dumps({"cells": cells}))
        return path
    code = lambda s: {"cell_type": "code", "source": s}  # noqa: E731
    assert torch_rule.notebook_needs_torch(notebook([code("import numpy as np\nimport torch\n")]))
    assert torch_rule.notebook_needs_torch(notebook([code("from torch import nn")]))
    assert not torch_rule.notebook_needs_torch(notebook([code("# import torch later"), {"cell_type": "markdown",
                                                                                       "source": "import torch"}]))
    assert not torch_rule.notebook_needs_torch(notebook([code("import torchvision_like_name_is_not_torch = 1")]))
    assert torch_rule.notebook_needs_torch(notebook([code("%matplotlib inline\nimport torch.nn.functional as F")]))
    assert torch_rule.notebook_needs_torch(notebook([code("def f():\n    import torch\n    return torch")]))


def test_a_guarded_import_does_not_need_torch_and_its_cells_are_found(tmp_path):
    guarded = "%matplotlib inline\ntry:\n    import torch  # optional\nexcept ImportError:\n    torch = None"
    cells = [{"cell_type": "code", "source": guarded},
             {"cell_type": "markdown", "source": "torch is optional"},
             {"cell_type": "code", "source": "x = 1  # no torch here"},
             {"cell_type": "code", "source": ["if torch is None:\n", f"    print({torch_rule.SKIPPED_LINE!r})"]}]
    path = tmp_path / "guarded.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    assert not torch_rule.notebook_needs_torch(path)
    assert torch_rule.guarded_torch_cells(path) == [2]  # among the code cells; the import cell is not one


@pytest.mark.parametrize("handler", ["except ValueError:", "finally:"])
def test_an_import_in_a_try_that_does_not_catch_import_errors_is_unguarded(handler):
    body = "    torch = None" if handler.startswith("except") else "    pass"
    assert torch_rule.unguarded_torch_imports(f"try:\n    import torch\n{handler}\n{body}") == [2]


def test_every_guarded_cell_of_the_course_prints_the_skipped_line_without_torch():
    """What notebooks/conftest.py compares without torch is what the cell's guard prints."""
    from pathlib import Path
    found = 0
    for path in sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb")):
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        for i in torch_rule.guarded_torch_cells(path):
            src = "".join(cells[i]["source"])
            found += 1
            guard = f'if torch is None:\n    print("{torch_rule.SKIPPED_LINE}")\nelse:\n'
            assert guard in src, f"{path.name}, code cell {i}: a cell that reads torch opens with {guard!r}"
    assert found >= 3  # notebook 06's three PyTorch comparisons
