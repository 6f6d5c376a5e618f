"""Packaging: pyproject.toml and environment.yml agree, the import stays light, the
README's test command (make test) runs pytest, CI requires the PyTorch parity tests, and the
wheel carries the course (notebooks, glossary, README) for `mha-course start`."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_toml(path: Path) -> dict:
    """Parse TOML with tomllib (Python 3.11+) or pip's vendored tomli (3.10)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        from pip._vendor import tomli as tomllib
    with open(path, "rb") as f:
        return tomllib.load(f)


def parse_environment_yml(text: str) -> dict:
    """The small YAML subset a conda environment file uses, without needing PyYAML:
    ``key: value``, ``key:`` + ``- item`` lists, and one nested ``- pip:`` list."""
    data, key, nested, nested_indent = {}, None, None, 0
    for raw in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not line.strip():
            continue
        indent, body = len(line) - len(line.lstrip()), line.strip()
        if indent == 0:
            key, _, value = body.partition(":")
            data[key.strip()] = value.strip() or []
            nested = None
        elif body.startswith("-"):
            item = body[1:].strip()
            if nested is not None and indent > nested_indent:
                nested.append(item)
            elif item.endswith(":"):
                nested, nested_indent = [], indent
                data[key].append({item[:-1].strip(): nested})
            else:
                nested = None
                data[key].append(item)
    return data


def load_environment_yml(path: Path) -> dict:
    text = path.read_text()
    try:
        import yaml
    except ImportError:
        return parse_environment_yml(text)
    return yaml.safe_load(text)


def requirement(spec: str) -> tuple[str, str]:
    """'NumPy >= 1.24' -> ('numpy', '>=1.24'): PEP 503 name and the version part, spaces removed."""
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(.*)$", spec)
    assert m, f"cannot read the requirement {spec!r}"
    return re.sub(r"[-_.]+", "-", m.group(1)).lower(), m.group(2).replace(" ", "")


def python_in_range(version: str, spec: str) -> bool:
    """'3.12', '>=3.10, <3.14' -> True: every comma-separated clause of ``spec`` holds for ``version``."""
    def key(v):
        return tuple(int(x) for x in v.split("."))
    ops = {">=": lambda a, b: a >= b, ">": lambda a, b: a > b, "<=": lambda a, b: a <= b, "<": lambda a, b: a < b,
           "==": lambda a, b: a[:len(b)] == b, "!=": lambda a, b: a[:len(b)] != b}
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        op, bound = re.fullmatch(r"(>=|<=|==|!=|>|<)\s*([\d.]+)", clause).groups()
        if not ops[op](key(version), key(bound)):
            return False
    return True


def test_python_in_range_reads_requires_python():
    assert python_in_range("3.12", ">=3.10") and python_in_range("3.12", ">=3.10, <3.14")
    assert not python_in_range("3.9", ">=3.10") and not python_in_range("3.14", ">=3.10,<3.14")


def test_environment_yml_parser_agrees_with_pyyaml():
    yaml = pytest.importorskip("yaml", reason="PyYAML absent: the fallback parser is the only one")
    text = (ROOT / "environment.yml").read_text()
    assert parse_environment_yml(text) == yaml.safe_load(text)


def test_environment_yml_and_pyproject_name_the_same_dependencies():
    project = load_toml(ROOT / "pyproject.toml")["project"]
    env = load_environment_yml(ROOT / "environment.yml")
    wanted = dict(map(requirement, project["dependencies"] + project["optional-dependencies"]["test"]))
    conda = dict(requirement(d) for d in env["dependencies"] if isinstance(d, str))
    pip_part = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert env["name"] == "mha-course"
    python = conda.pop("python")
    assert re.fullmatch(r"=3\.\d+", python), (
        f"environment.yml pins python{python}; repo2docker (Binder) reads only python=3.X, e.g. python=3.12")
    assert python_in_range(python[1:], project["requires-python"]), (
        f"environment.yml's python{python} is outside pyproject.toml's requires-python {project['requires-python']}")
    assert conda.pop("pip") == ""
    assert conda == wanted, (
        f"only in environment.yml: {sorted(conda.items() - wanted.items())}; "
        f"only in pyproject.toml: {sorted(wanted.items() - conda.items())}")
    assert pip_part == [["-e ."]], "environment.yml should pip-install the checkout itself (-e .)"


def test_import_mha_course_does_not_load_plotting_or_widgets():
    code = ("import json, sys; import mha_course; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('matplotlib', 'ipywidgets', 'IPython', 'torch') or m in "
            "('mha_course.plots', 'mha_course.widgets', 'mha_course.explorer'))))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=True)
    assert json.loads(done.stdout) == [], f"`import mha_course` also imported {done.stdout.strip()}"


def _make_rule(makefile: str, target: str) -> list[str]:
    """The recipe lines of ``target`` in a Makefile's text."""
    lines = makefile.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"^{target}\s*:(?!=)", line))
    recipe = []
    for line in lines[start + 1:]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip())
    return recipe


def test_make_test_runs_pytest():
    recipe = _make_rule((ROOT / "Makefile").read_text(), "test")
    assert any(re.search(r"(-m\s+pytest|\bpytest)\b", line) for line in recipe), recipe
    if shutil.which("make"):  # what make itself would run, without running it
        dry = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert dry.returncode == 0, dry.stderr
        assert re.search(r"python\"? -m pytest", dry.stdout), dry.stdout


def _ci_script() -> list[str]:
    return [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
            if line.strip() and not line.strip().startswith("#")]


def test_ci_runs_the_newcomers_make_test_first_without_torch():
    script = _ci_script()
    newcomer = next(i for i, line in enumerate(script) if "make test" in line and "EXTRAS=test " in line)
    full = next(i for i, line in enumerate(script) if re.match(r"^export\s+EXTRAS=", line))
    assert newcomer < full, "the newcomer's make test runs before the full run"
    before = script[:newcomer]
    assert any(line.startswith("git clone") for line in before), "the newcomer's path starts from a fresh clone"
    assert any(line.startswith("unset") and "PIP_FIND_LINKS" in line and "MHA_COURSE_REQUIRE_TORCH" in line
               for line in before), "the newcomer's pip must not see the local torch wheel, nor the CI flags"
    venv = re.search(r"VENV=(\S+)", script[newcomer]).group(1)
    assert venv != ".venv", "the newcomer gets a fresh virtual environment"


def test_ci_requires_torch_and_runs_the_test_command():
    script = _ci_script()
    assert any(re.match(r"^(export\s+)?MHA_COURSE_REQUIRE_TORCH=1(\s|$)", line) for line in script), script
    assert any(re.match(r"^(export\s+)?MHA_COURSE_REQUIRE_BROWSER=1(\s|$)", line) for line in script), script
    assert any(line.endswith(" make test") for line in script)
    extras = next(re.search(r"EXTRAS=\"?([\w,]+)", line).group(1) for line in script
                  if re.match(r"^export\s+EXTRAS=", line))
    optional = load_toml(ROOT / "pyproject.toml")["project"]["optional-dependencies"]
    pinned = [req for extra in extras.split(",") for req in optional.get(extra, [])]
    assert "torch==2.13.0" in pinned, f"CI installs extras {extras} = {pinned}: torch==2.13.0 missing"
    assert any("MHA_COURSE_THREADS=2" in line and "pytest notebooks" in line for line in script)
    assert any("tests/cross/test_busy_machine.py" in line and "--busy" in line for line in script)


def test_the_wheel_and_the_sdist_ship_the_course(tmp_path):
    """`python -m build`: the wheel holds every notebook, the glossary and the README under
    mha_course/course/ (what `mha-course start` copies), SPDX license metadata, and twine passes both."""
    pytest.importorskip("build", reason="the dev extra is not installed (pip install -e '.[dev]')")
    import tarfile
    import zipfile
    run = subprocess.run([sys.executable, "-m", "build", "--outdir", str(tmp_path), str(ROOT)],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "project.license" not in run.stdout + run.stderr, "setuptools warns about the license table"
    wheel, = tmp_path.glob("*.whl")
    sdist, = tmp_path.glob("*.tar.gz")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        metadata = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
            assert z.read(f"mha_course/course/notebooks/{nb.name}") == nb.read_bytes(), nb.name
        for rel in ("docs/glossary.md", "README.md"):
            assert z.read(f"mha_course/course/{rel}") == (ROOT / rel).read_bytes(), rel
    assert "License-Expression: MIT" in metadata and "Classifier: License ::" not in metadata
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    with tarfile.open(sdist) as t:
        inside = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    assert {"setup.py", "LICENSE", "docs/glossary.md", "notebooks/01_qkv.ipynb"} <= inside
    twine = pytest.importorskip("twine", reason="twine is not installed (pip install -e '.[dev]')")
    assert twine
    check = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)],
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_student_copy_links_only_files_the_wheel_ships(tmp_path):
    """Whatever a student copy of the course brings along (the files its notebooks link) is in setup.py's list."""
    from mha_course.tools.student import write_student_copies
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    paths = write_student_copies(notebooks, tmp_path / "out", log=lambda line: None)
    linked = {str(p.relative_to(tmp_path / "out")) for p in paths} - {f"notebooks/{nb.name}" for nb in notebooks}
    shipped = re.search(r"COURSE_FILES = \[(.*?)\]", (ROOT / "setup.py").read_text()).group(1)
    assert linked and linked <= {f for f in re.findall(r'"([^"]+)"', shipped) if "*" not in f}, (linked, shipped)


def test_ci_installs_the_wheel_in_a_fresh_venv_and_runs_01():
    script = _ci_script()
    text = "\n".join(script)
    assert re.search(r"python -m build\b", text) and re.search(r"twine check", text)
    assert any("-m venv" in line and "learner" in line for line in script), "a fresh venv for the learner"
    assert any("MHA_COURSE_LEARNER_VENV" in line and "test_browser.py" in line for line in script)
    assert any(re.search(r"learner.*mha-course\"? execute", line) for line in script), "a student copy of 01 run"
