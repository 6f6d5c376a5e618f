"""The README is checked, not trusted: every command it shows has the test that runs it.

Every command in the README (its shell blocks, the ``$ command`` lines over the speed tables, and
each inline `make ...`, `mha-course ...`, `pip ...`, `python ...` span) must be a key of COVERED,
whose value names the test that runs it, or the CI step (in .ci/run) that does; a command that
needs sudo, a hub, conda, Windows or a browser says so in its entry. A new command in the README
with no entry fails here, and so does an entry whose test is gone. The cheap ones are also run
here: the package example, ``mha-course --help`` and a dry run (``make -n``) of every make command.
"""
from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mha_course.tools.torch_rule import guarded_torch_cells, notebook_needs_torch

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

BENCH = "a benchmark (it measures this machine, minutes): not run by a test; "
COVERED = {
    # Start: the learner's route
    "pip install mha_course-0.1.0-py3-none-any.whl": "ci: the learner's route",
    "python -m build": "tests/cross/test_packaging.py::test_the_wheel_and_the_sdist_ship_the_course",
    "mha-course start ~/mha-course": "tests/cross/test_browser.py::test_the_wheel_in_a_fresh_venv_runs_01_in_jupyterlab",
    "mha-course start": "tests/tools/test_start.py::test_the_first_run_writes_every_copy_and_the_linked_files",
    "mha-course start ~/mha-course -- --no-browser --port 8899":
        "tests/tools/test_start.py::test_start_runs_jupyterlab_in_dir_with_the_arguments_after_the_dashes",
    # Start: the Chinese edition (中文)
    "mha-course start ~/mha-course --lang zh_CN":
        "tests/tools/test_i18n_course.py::test_start_with_lang_writes_chinese_copies_with_the_english_code",
    "make site BOOK_LANG=zh_CN": "ci: the web book in Chromium",
    "make i18n": "tests/tools/test_i18n.py::test_every_catalogue_is_in_step_with_the_english",
    # the workshop (engineer hub's rows)
    "mha-course student --update OUTDIR":
        "tests/tools/test_student_update.py::test_update_replaces_untouched_copies_and_never_an_edited_one",
    "mha-course progress DIR...":
        "tests/tools/test_progress.py::test_the_text_table_shows_done_tried_with_the_mistake_and_not_started",
    # Start: the contributor's route
    "make course": "tests/cross/test_browser.py::test_make_course_opens_the_glossary_link_of_a_notebook",
    "make test": "ci: newcomer make test",
    "make course PYTHON=python3.12": "tests/cross/test_makefile.py::test_a_python_path_with_a_space_is_quoted",
    "conda env create -f environment.yml":
        "needs conda: tests/cross/test_packaging.py::test_environment_yml_and_pyproject_name_the_same_dependencies",
    "conda activate mha-course":
        "needs conda: tests/cross/test_packaging.py::test_environment_yml_and_pyproject_name_the_same_dependencies",
    "jupyter lab --LabApp.default_url=/lab/tree/notebooks/00_overview.ipynb":
        "tests/cross/test_browser.py::test_make_course_opens_the_glossary_link_of_a_notebook",
    "python -m pytest": "ci: newcomer make test",
    "py -m venv .venv": "needs Windows: ci: newcomer make test",  # make test makes its venv the same way
    '.venv\\Scripts\\python -m pip install -e ".[test]"': "needs Windows: ci: newcomer make test",
    ".venv\\Scripts\\jupyter lab --LabApp.default_url=/lab/tree/notebooks/00_overview.ipynb":
        "needs Windows: tests/cross/test_browser.py::test_make_course_opens_the_glossary_link_of_a_notebook",
    ".venv\\Scripts\\python -m pytest": "needs Windows: ci: newcomer make test",
    'pip install -e ".[test,reference]"': "ci: make test (full)",
    ".ci/run": "ci: the newcomer's path",
    "pytest tests/cross/test_busy_machine.py --busy": "ci: timing notebooks on a busy machine",
    "mha-course train TASK": "tests/tools/test_train.py",
    "make app": "needs a browser: tests/cross/test_browser.py::test_explorer_app_in_voila",
    # Speed (engineer house's section): three tables are printed from the results files, and held equal
    "python benchmarks/readme_tables.py": "tests/cross/test_efficient_readme.py::test_each_results_file_has_its_table_in_the_readme",
    "make bench": BENCH + "tests/cross/test_efficient_readme.py::test_each_results_file_has_its_table_in_the_readme",
    "python benchmarks/bench_threads.py --rounds 5": BENCH + "tests/cross/test_efficient_readme.py",
    "python benchmarks/bench_mha.py --rounds 7": BENCH + "tests/cross/test_efficient_readme.py",
    "python benchmarks/bench_efficient.py --seq-lens 1024 4096 16384 --mem-limit-gib 12":
        BENCH + "tests/cross/test_efficient_readme.py",
    "python benchmarks/bench_explorer.py --repeats 15": BENCH + "its table is pasted",
    "python benchmarks/bench_training.py --threads 1 --steps 100": BENCH + "its table is pasted",
    "python benchmarks/bench_training.py --steps 100": BENCH + "its table is pasted",
    "python benchmarks/bench_decode.py": BENCH + "its table is pasted",
    "python benchmarks/bench_small_t.py 2 128 256 512 1024": BENCH + "its numbers are pasted (the floor at small T)",
    "python benchmarks/bench_decode.py --quality --h 4": BENCH + "its table is pasted",
    "python benchmarks/bench_decode.py --quality --h 4 --steps 500": BENCH + "its table is pasted",
    # the workshop hub (engineer hub's section)
    "sudo make bench-hub LEARNERS=16": "needs sudo and a hub: ci: the workshop hub",
    "sudo make bench-hub LEARNERS=16 SPREAD=60": "needs sudo and a hub: ci: the workshop hub",
    "sudo make hub": "needs sudo and a hub: ci: the workshop hub",
    "make hub": "needs sudo and a hub: ci: the workshop hub",
    "make hub-install": "ci: the workshop hub",
    # working on the course
    "make notebooks": "tests/tools/test_execute.py",
    "mha-course execute --timeout S": "tests/tools/test_execute.py",
    "make clean-venv": "tests/cross/test_makefile.py::test_clean_venv_removes_that_folder_only",
    "mha-course student OUTDIR": "tests/tools/test_student.py",
    "MHA_COURSE_THREADS=2 make test": "ci: notebooks at 2 BLAS threads",
    "make site": "ci: the web book in Chromium",
    "make site HUB_URL=https://hub.example.org": "tests/cross/test_makefile.py::test_make_site_passes_the_hub_url_to_the_book",
}
COMMAND = re.compile(r"^(make |sudo |mha-course|pip |python |pytest |conda |jupyter |\.ci/run|\.venv\\|py |"
                     r"MHA_COURSE_\w+=\S+ )")


def readme_commands(text: str = README) -> list:
    """Every command the README shows, in order, each once (comments after `#` dropped)."""
    found = []
    for lang, body in re.findall(r"```(\w*)\n(.*?)```", text, flags=re.S):
        for line in body.splitlines():
            if lang in ("bash", "sh", "powershell") or line.startswith("$ "):
                found.append(re.sub(r"\s+#.*$", "", line.removeprefix("$ ")).strip())
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    found += [span.strip() for span in re.findall(r"`([^`\n]+)`", prose)
              if COMMAND.match(span) or span == ".ci/run" or span == "mha-course start"]
    return list(dict.fromkeys(c for c in found if c))


def test_every_command_of_the_readme_has_the_test_that_runs_it():
    shown = readme_commands()
    missing = [c for c in shown if c not in COVERED]
    stale = [c for c in COVERED if c not in shown]
    assert not missing, f"README commands with no test named in COVERED: {missing}"
    assert not stale, f"COVERED names commands the README no longer shows: {stale}"


@pytest.mark.parametrize("command", sorted(COVERED))
def test_each_named_test_or_ci_step_exists(command):
    where = COVERED[command]
    for step in re.findall(r"ci: ([^;:]+?)(?:$|;)", where):
        assert f'"{step}' in CI or f"{step}" in CI, f"{command!r}: .ci/run has no step {step!r}"
    for ref in re.findall(r"(tests/\S+?\.py)(?:::(\w+))?(?=$|\s|;)", where):
        path, name = ref
        assert (ROOT / path).is_file(), f"{command!r}: {path} does not exist"
        if name:
            assert re.search(rf"^def {name}\(", (ROOT / path).read_text(), flags=re.M), f"{command!r}: no {name}"


def test_the_extraction_finds_blocks_output_lines_and_inline_commands():
    text = ("run `make x Y=1` or `python -m z`, not `numpy`\n```bash\nmake a   # a comment\n```\n"
            "```\n$ python b.py --n 2\n\n| table |\n```\n")
    assert readme_commands(text) == ["make a", "python b.py --n 2", "make x Y=1", "python -m z"]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("command", [c for c in COVERED if c.startswith(("make ", "sudo make "))])
def test_every_make_command_of_the_readme_is_a_target_make_can_plan(command, tmp_path):
    args = shlex.split(command.removeprefix("sudo "))[1:]
    dry = subprocess.run(["make", "-n", f"VENV={tmp_path / 'venv'}", *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert dry.returncode == 0 and dry.stdout.strip(), f"make -n {' '.join(args)}: {dry.stderr}"


def test_the_package_example_runs_and_prints_what_it_says():
    block = re.search(r"```python\n(.*?)```", README, flags=re.S).group(1)
    assert "(2, 6, 16), (2, 4, 6, 6)" in block
    code = block + "\nprint('SHAPES', out.shape, weights.shape)\n"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "SHAPES (2, 6, 16) (2, 4, 6, 6)" in run.stdout
    assert "weights" in run.stdout and "output" in run.stdout  # the Trace's table


def test_mha_course_help_is_plain_text():
    """`mha-course --help` and every subcommand's --help: no reST markup (``x``, :func:) from the docstrings."""
    from mha_course.tools.cli import build_parser
    run = subprocess.run([sys.executable, "-m", "mha_course.tools.cli", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0 and "start" in run.stdout and "student" in run.stdout
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert len(sub.choices) >= 5, sorted(sub.choices)
    for name, parser in {"mha-course": build_parser(), **sub.choices}.items():
        text = run.stdout if name == "mha-course" else parser.format_help()
        assert not re.search(r"``|:(func|class|mod|data|meth):`", text), f"{name} --help:\n{text}"


def test_what_the_readme_says_needs_pytorch_is_what_the_torch_rule_skips():
    sentence = re.search(r"what needs PyTorch \(([^)]*)\)", README).group(1)
    named = set(re.findall(r"notebook (\d\d)", sentence))
    assert named == {p.name[:2] for p in NOTEBOOKS if notebook_needs_torch(p)}, sentence
    guarded = {p.name[:2] for p in NOTEBOOKS if guarded_torch_cells(p)}
    said = set(re.findall(r"Notebook (\d\d) runs? without\s+PyTorch", README))
    assert said == guarded and guarded, (said, guarded)


def test_the_speed_section_says_which_tables_are_printed():
    section = README[README.index("## Speed"):]
    section = section[:section.index("\n## ", 1)]
    claim = re.search(r"The (\w+) tables of (.*?) are printed by\s+`python benchmarks/readme_tables.py`", section,
                      flags=re.S)
    assert claim, "the speed section says which of its tables readme_tables.py prints"
    scripts = re.findall(r"`(bench_\w+)\.py`", claim.group(2))
    printed = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "readme_tables.py")], capture_output=True,
                             text=True, timeout=120, cwd=ROOT).stdout
    commands = re.findall(r"^\$ python benchmarks/(bench_\w+)\.py", printed, flags=re.M)
    assert sorted(scripts) == sorted(commands), (scripts, commands)
    words = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
    assert words[claim.group(1)] == len(commands)


def test_the_working_table_points_up_to_the_sections_above_it():
    table = README[README.index("## Working on the course"):]
    for heading in re.findall(r"^## (\w+)", README[:README.index("## Working on the course")], flags=re.M):
        for row in re.findall(rf"^\|.*\b{heading}\b.*$", table, flags=re.M | re.I):
            assert "below" not in row, f"the {heading} section is above this table: {row}"


def test_the_wheel_the_learner_installs_is_the_one_python_m_build_makes():
    """The README's and the landing page's `pip install mha_course-X-py3-none-any.whl` name this version's wheel."""
    project = (ROOT / "pyproject.toml").read_text(encoding="utf-8").split("[project]", 1)[1]
    name, version = (re.search(rf'^{key} = "([^"]+)"', project, flags=re.M).group(1) for key in ("name", "version"))
    wheel = f"{re.sub(r'[-_.]+', '_', name)}-{version}-py3-none-any.whl"
    for page in ("README.md", "book/index.md"):
        shown = re.findall(r"pip install (\S+\.whl)", (ROOT / page).read_text(encoding="utf-8"))
        assert shown and set(shown) == {wheel}, f"{page} installs {shown}; python -m build makes {wheel}"


def test_the_package_layout_names_every_module_and_every_subcommand():
    """The layout block names every module of the core, lessons/ and widgets/ (a file added later must be placed
    there), and the `mha-course` subcommands on the tools/ line."""
    from mha_course.tools.cli import build_parser
    block = re.search(r"^```\n(mha_course/ .*?)^```", README, flags=re.S | re.M).group(1)
    lines = {name: next(line for line in block.splitlines() if line.strip().startswith(name))
             for name in ("lessons/", "widgets/", "tools/")}
    lessons = block[block.index(lines["lessons/"]):block.index("  views/")]
    where = {"mha_course": block[:block.index(lines["lessons/"])], "mha_course/lessons": lessons,
             "mha_course/widgets": lines["widgets/"]}
    missing = [f"{folder}/{path.name}" for folder, text in where.items() for path in sorted((ROOT / folder).glob("*.py"))
               if path.stem != "__init__" and not (folder.endswith("lessons") and path.stem.startswith("_"))
               and not re.search(rf"\b{re.escape(path.stem)}\b", text)]
    assert not missing, f"the README's package layout does not name {missing}"
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    named = set(re.findall(r"\w+", lines["tools/"].split(":", 1)[1]))
    assert set(sub.choices) <= named, (sorted(sub.choices), lines["tools/"])
