"""nbval set-up for the notebooks, by the one torch rule (``mha_course.tools.torch_rule``).

Without torch (and without MHA_COURSE_REQUIRE_TORCH=1):
- a notebook that imports torch unguarded (12) is skipped, with the reason;
- a notebook that imports it inside ``try: ... except ImportError`` (06) runs, and each cell that
  reads ``torch`` must print exactly ``torch_rule.SKIPPED_LINE``: that is the output compared
  for it, in place of the PyTorch results stored in the notebook (compared when torch is there).
With MHA_COURSE_REQUIRE_TORCH=1 (CI) nothing is skipped and the stored outputs are compared.
"""
import nbformat
import pytest

from mha_course.tools.torch_rule import SKIPPED_LINE, guarded_torch_cells, notebook_needs_torch, torch_skip_reason


def pytest_collection_modifyitems(config, items):
    reason = torch_skip_reason("this notebook")
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    skipped_output = [nbformat.v4.new_output("stream", name="stdout", text=SKIPPED_LINE + "\n")]
    for item in items:
        path = str(item.fspath)
        if not path.endswith(".ipynb"):
            continue
        if notebook_needs_torch(path):
            item.add_marker(skip)
        elif getattr(item, "cell_num", None) in guarded_torch_cells(path):
            item.cell.outputs = skipped_output
