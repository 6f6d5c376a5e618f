"""The explorer fixture: a fresh widget per test, its figures closed after."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from mha_course import explorer as ex  # noqa: E402


@pytest.fixture
def explorer():
    e = ex.Explorer()
    yield e
    plt.close("all")
