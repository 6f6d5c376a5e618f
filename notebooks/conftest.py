"""nbval set-up for the notebooks: a notebook that imports torch is skipped, with the reason, without torch.

The rule is ``mha_course.tools.torch_rule`` (the tests use the same one): with
MHA_COURSE_REQUIRE_TORCH=1 (CI) nothing is skipped, so a missing torch fails the notebook's cells.
"""
import pytest

from mha_course.tools.torch_rule import notebook_needs_torch, torch_skip_reason


def pytest_collection_modifyitems(config, items):
    reason = torch_skip_reason("this notebook")
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        path = str(item.fspath)
        if path.endswith(".ipynb") and notebook_needs_torch(path):
            item.add_marker(skip)
