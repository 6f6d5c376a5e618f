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
