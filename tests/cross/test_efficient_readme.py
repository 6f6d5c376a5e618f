"""The README's speed tables are what the results files say: benchmarks/readme_tables.py prints each
block (command, thread setting, load average, table) from benchmarks/results/*.json, and every block
must stand in the README exactly as printed, so no number in the speed section is typed by hand."""
import json
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
NAMES = ["bench_mha", "bench_threads", "bench_efficient"]


def _tables() -> dict:
    return runpy.run_path(str(ROOT / "benchmarks" / "readme_tables.py"))["tables"]()


def _speed_section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## Speed")
    end = text.index("\n## ", start + 1)
    return text[start:end]


@pytest.mark.parametrize("name", NAMES)
def test_each_results_file_has_its_table_in_the_readme(name):
    assert any((folder / f"{name}.json").exists() for folder in (RESULTS, RESULTS / "pending")), \
        f"run python benchmarks/{name}.py to write {name}.json"
    block = _tables()[name]
    assert f"```\n{block}\n```" in _speed_section(), (
        f"the README's {name} table is not what benchmarks/results/{name}.json gives: paste the block that "
        f"python benchmarks/readme_tables.py {name} prints")


@pytest.mark.parametrize("name", NAMES)
def test_each_block_names_its_command_thread_setting_and_load(name):
    path = RESULTS / f"{name}.json"
    data = json.loads((path if path.exists() else RESULTS / "pending" / f"{name}.json").read_text())
    block = _tables()[name]
    assert block.startswith(f"$ python benchmarks/{name}.py")
    assert data["setting"] in block and "load average" in block


def test_the_readme_asks_for_no_thread_variable():
    """The package chooses its threads: the speed section never tells a learner to pin BLAS."""
    section = _speed_section()
    for phrase in ("set OPENBLAS_NUM_THREADS", "OPENBLAS_NUM_THREADS=1 python", "export OMP_NUM_THREADS"):
        assert phrase not in section
