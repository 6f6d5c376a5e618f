"""The course notebooks keep the promises the course makes about every lesson.

Checked statically on the committed .ipynb files (nbval checks their outputs):
learning goals / prerequisites / time up front; summary, misconceptions and hidden answers at
the end; a glossary link; at least three exercises with solution marks and an automatic check;
widget cells marked for nbval; error demonstrations tagged; no copy of a package function.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import mha_course

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
LESSONS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
CORE = ["00_overview", "01_qkv", "02_scaled_dot_product", "03_multi_head_split",
        "04_concat_output", "05_complexity"]
WIDGET_CALLS = ("live_view(", "SizeControls(", "Explorer(", "interact(", "interactive(")


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _src(cell: dict) -> str:
    return "".join(cell["source"])


def _markdown(path: Path) -> str:
    return "\n".join(_src(c) for c in _cells(path) if c["cell_type"] == "markdown")


def _code_cells(path: Path) -> list[dict]:
    return [c for c in _cells(path) if c["cell_type"] == "code"]


def _strip_solutions(src: str) -> str:
    return re.sub(r"### BEGIN SOLUTION.*?### END SOLUTION", "", src, flags=re.S)


lesson = pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])


def test_core_notebooks_present_in_order():
    """Every core notebook is there, first, in the order the course teaches them."""
    names = [p.stem for p in LESSONS]
    assert names[: len(CORE)] == CORE, f"the core notebooks must open the course, in order: {CORE}; got {names}"


def test_lessons_are_numbered_without_gaps():
    numbers = [int(p.stem[:2]) for p in LESSONS]
    assert numbers == list(range(len(numbers))), numbers


@lesson
def test_opens_with_goals_prerequisites_and_time(path):
    opening = "\n".join(_src(c) for c in _cells(path)[:3] if c["cell_type"] == "markdown").lower()
    for needle in ("learning goals", "prerequisites", "minutes"):
        assert needle in opening, f"{path.name}: the opening should state its {needle}"


@lesson
def test_closes_with_summary_misconceptions_and_hidden_answers(path):
    text = _markdown(path).lower()
    for needle in ("summary", "misconception", "<details>", "</details>"):
        assert needle in text, f"{path.name}: missing {needle!r}"


@lesson
def test_links_the_glossary(path):
    assert "../docs/glossary.md" in _markdown(path), f"{path.name}: link ../docs/glossary.md"


@lesson
def test_has_three_checked_exercises(path):
    cells = _code_cells(path)
    exercises = [i for i, c in enumerate(cells)
                 if re.match(r"#\s*Exercise \d+\.\d+: \S", _src(c).lstrip())]
    assert len(exercises) >= 3, f"{path.name}: {len(exercises)} exercises, need at least 3"
    for i in exercises:
        src = _src(cells[i])
        assert src.count("### BEGIN SOLUTION") == src.count("### END SOLUTION") >= 1, \
            f"{path.name}: exercise cell {i} lacks balanced solution marks"
        following = _src(cells[i + 1]) if i + 1 < len(cells) else ""
        assert "check." in following or "assert" in following, \
            f"{path.name}: the cell after exercise {src.splitlines()[0]!r} should check it"


@lesson
def test_widget_cells_are_marked_for_nbval(path):
    """A cell that displays a live widget varies under nbval; it must be NBVAL_IGNORE_OUTPUT."""
    for c in _code_cells(path):
        shows_widget = any("application/vnd.jupyter.widget-view+json" in o.get("data", {})
                           for o in c.get("outputs", []))
        if shows_widget:
            first = _src(c).lstrip().splitlines()[0].strip()
            assert first == "# NBVAL_IGNORE_OUTPUT", f"{path.name}: widget cell not marked:\n{_src(c)}"


@lesson
def test_has_a_live_widget_and_a_static_view(path):
    cells = _code_cells(path)
    assert any(any(call in _src(c) for call in WIDGET_CALLS) for c in cells), \
        f"{path.name}: every lesson has at least one live control set"
    assert any(any("image/png" in o.get("data", {}) for o in c.get("outputs", []))
               for c in cells if not _src(c).lstrip().startswith("# NBVAL_IGNORE_OUTPUT")), \
        f"{path.name}: the view should also be drawn statically in a compared cell"


@lesson
def test_markers_are_exact(path):
    for c in _code_cells(path):
        for line in _src(c).splitlines():
            if "NBVAL_" in line and line.strip().startswith("#"):
                assert re.fullmatch(r"#\s*NBVAL_[A-Z_]+", line.strip()), \
                    f"{path.name}: text after an nbval marker disables it: {line!r}"


@lesson
def test_error_cells_are_tagged(path):
    for c in _code_cells(path):
        errors = [o for o in c.get("outputs", []) if o.get("output_type") == "error"]
        if errors:
            assert "raises-exception" in c.get("metadata", {}).get("tags", []), \
                f"{path.name}: a cell raising {errors[0]['ename']} lacks the raises-exception tag"


@lesson
def test_first_cell_is_deterministic(path):
    first = _src(_code_cells(path)[0])
    for needle in ("%matplotlib inline", "set_printoptions", "default_rng("):
        assert needle in first, f"{path.name}: first code cell should contain {needle!r}"


# The pieces a forward pass is made of: a notebook function that loops over them re-implements
# the package's pipeline (as notebook 10's ``forward_with`` once re-implemented the model's forward).
PIPELINE_PIECES = {"embed", "layer_params", "split_heads", "combine_heads", "multi_head_attention",
                   "grouped_query_attention", "scaled_dot_product_attention", "apply_rope", "layer_norm",
                   "linear", "softmax", "trace"}


def copied_pipelines(source: str) -> list[str]:
    """Functions defined in ``source`` that loop over three or more pieces of the package's forward pass."""
    import ast
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef):
            continue
        calls = {c.func.attr if isinstance(c.func, ast.Attribute) else getattr(c.func, "id", "")
                 for c in ast.walk(node) if isinstance(c, ast.Call)}
        loops = any(isinstance(n, (ast.For, ast.While, ast.comprehension)) for n in ast.walk(node))
        if loops and len(calls & PIPELINE_PIECES) >= 3:
            found.append(node.name)
    return found


def test_a_copied_forward_pass_is_found():
    copy = ("def forward_with(core, params, config, tokens):\n"
            "    x = train.embed(params, tokens, config)\n"
            "    for layer in range(config.n_layers):\n"
            "        p = train.layer_params(params, config, layer)\n"
            "        Q, K, V = (mc.split_heads(x @ W, config.h) for W in (p.W_q, p.W_k, p.W_v))\n"
            "        x = x + mc.combine_heads(core(Q, K, V)) @ p.W_o\n"
            "    return x @ params.unembed\n")
    assert copied_pipelines(copy) == ["forward_with"]
    assert copied_pipelines("def core(Q, K, V):\n    return mc.linear_attention(Q, K, V, causal=True)\n") == []


@lesson
def test_never_copies_the_package(path):
    public = set(mha_course.__all__)
    for c in _code_cells(path):
        src = _strip_solutions(_src(c))
        defined = re.findall(r"^\s*def (\w+)\(", src, flags=re.M)
        copied = public.intersection(defined)
        assert not copied, f"{path.name}: redefines package functions {copied}; import them"
        try:
            pipelines = copied_pipelines("\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("%", "!"))))
        except SyntaxError:
            continue
        assert not pipelines, f"{path.name}: {pipelines} re-implement the package's forward pass; call it instead"


# ---- minutes: one source (the opening's "**Time.** About N minutes"), read by the maps ----------
ROOT = NOTEBOOKS.parent
TIME = re.compile(r"\*\*(?:Estimated )?[Tt]ime[.:]?\*\*[.:]?\s*(?:[Aa]bout\s+)?(\d+)\s+minutes")
README_ROW = re.compile(r"^\|\s*\[(\d\d_\w+)\]\(notebooks/\1\.ipynb\)\s*\|.*\|\s*(\d+)\s*\|\s*$", re.M)
OVERVIEW_ROW = re.compile(r"^\|\s*\[(\d\d_\w+)\]\(\1\.ipynb\)\s*\|.*\|\s*(\d+)\s*\|\s*$", re.M)


def minutes(path: Path) -> int:
    """The one statement of a lesson's time, in its opening markdown cells."""
    opening = "\n".join(_src(c) for c in _cells(path)[:3] if c["cell_type"] == "markdown")
    found = TIME.findall(opening)
    assert len(found) == 1, f"{path.name}: state the time once, as '**Time.** About N minutes', got {found}"
    return int(found[0])


def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


@lesson
def test_states_its_minutes_once(path):
    assert 5 <= minutes(path) <= 120


def test_readme_map_gives_every_lesson_its_own_minutes():
    rows = {stem: int(n) for stem, n in README_ROW.findall(_readme())}
    want = {p.stem: minutes(p) for p in LESSONS}
    assert rows == want, f"README course map {rows} != the notebooks' own minutes {want}"


def test_readme_total_is_the_sum_of_the_map():
    rows = [int(n) for _, n in README_ROW.findall(_readme())]
    total = re.findall(r"About (\d+) minutes in all", _readme())
    assert total == [str(sum(rows))], f"README total {total} != sum of the map {sum(rows)}"


def test_overview_map_agrees_with_the_notebooks():
    cell = next(_src(c) for c in _cells(NOTEBOOKS / "00_overview.ipynb") if _src(c).startswith("## The course map"))
    rows = {stem: int(n) for stem, n in OVERVIEW_ROW.findall(cell)}
    assert rows == {s: minutes(NOTEBOOKS / f"{s}.ipynb") for s in rows}, rows
    assert set(rows) == set(CORE)
    total = re.findall(r"about (\d+) minutes together", cell)
    assert total == [str(sum(rows.values()))], f"00's total {total} != {sum(rows.values())}"


# ---- sliders: the README says exactly which sliders each core lesson has ---------------------
def sliders(path: Path) -> set:
    """Names of the live sliders a lesson displays, read from its saved widget state.

    The sliders reachable from a displayed widget view (an output's widget-view model and the
    models it holds), leaving out those whose layout hides them.
    """
    nb = json.loads(path.read_text(encoding="utf-8"))
    state = nb["metadata"].get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    todo = [o["data"]["application/vnd.jupyter.widget-view+json"]["model_id"] for c in _code_cells(path)
            for o in c.get("outputs", []) if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    seen, names = set(), set()
    while todo:
        model_id = todo.pop()
        if model_id in seen or model_id not in state:
            continue
        seen.add(model_id)
        model = state[model_id]
        layout = state.get(str(model["state"].get("layout", ""))[len("IPY_MODEL_"):], {}).get("state", {})
        if layout.get("display") == "none" or layout.get("visibility") == "hidden":
            continue
        if model["model_name"].endswith("SliderModel"):
            names.add(model["state"].get("description"))
        for key, value in model["state"].items():
            for ref in (value if isinstance(value, list) else [value]):
                if key not in ("layout", "style") and isinstance(ref, str) and ref.startswith("IPY_MODEL_"):
                    todo.append(ref[len("IPY_MODEL_"):])
    return names


def test_readme_slider_list_is_exact():
    line = re.search(r"Live sliders, lesson by lesson: (.*?)\.\s*$", _readme(), flags=re.M)
    assert line, "README: state the sliders of each lesson ('Live sliders, lesson by lesson: 00 d_model, h; ...')"
    claimed = {num: {s.strip().strip("`") for s in names.split(",")}
               for num, names in re.findall(r"(\d\d) ([^;]+)", line.group(1))}
    for num, names in claimed.items():
        path = next(p for p in LESSONS if p.stem.startswith(num))
        assert names == sliders(path), f"README says {path.stem} has sliders {names}; it has {sliders(path)}"
    assert set(claimed) == {p.stem[:2] for p in LESSONS if sliders(p)}, "every lesson with sliders is listed"


# ---- no repeats across the core course: figures and interview questions -------------------------
def _core_paths():
    return [NOTEBOOKS / f"{n}.ipynb" for n in CORE]


def test_no_figure_is_repeated_across_the_core_notebooks():
    import hashlib
    seen: dict = {}
    for path in _core_paths():
        for i, c in enumerate(_code_cells(path)):
            for o in c.get("outputs", []):
                png = o.get("data", {}).get("image/png")
                if png:
                    key = hashlib.sha1("".join(png).encode()).hexdigest()
                    assert key not in seen, f"{path.stem} code cell {i} repeats the figure of {seen[key]}"
                    seen[key] = f"{path.stem} code cell {i}"


def _interview_questions(path: Path) -> list[str]:
    text = _markdown(path)
    part = text.split("## Interview questions", 1)[-1] if "## Interview questions" in text else \
        text.split("Interview questions", 1)[-1]
    part = re.sub(r"<details>.*?</details>", "", part, flags=re.S)
    questions = re.findall(r"^\s*(?:\*\*)?\d+\.\s*(?:\*\*)?\s*\*?(.+?)$", part, flags=re.M)
    return [re.sub(r"\W+", " ", q).strip().lower() for q in questions]


_STOP = set("a an and are as at by do does for from how if in is it of on one or same show than that the "
            "this to what when which why with you your".split())


def repeated_question(q: str, other: str) -> bool:
    """Two questions ask the same thing: most content words of the shorter one are in the other."""
    a, b = (set(x.split()) - _STOP for x in (q, other))
    return len(a & b) >= 0.6 * min(len(a), len(b))


def test_interview_questions_are_not_repeated_across_the_core_notebooks():
    seen: dict = {}
    for path in _core_paths():
        questions = _interview_questions(path)
        assert len(questions) >= 3, f"{path.stem}: found interview questions {questions}"
        for q in questions:
            for other, where in seen.items():
                assert not repeated_question(q, other), f"{path.stem}: interview question {q!r} repeats {where}: {other!r}"
            seen[q] = path.stem


def test_repeated_question_catches_the_same_question_in_other_words():
    assert repeated_question("why does an attention block with 8 heads have as many parameters as one with a single head",
                             "show that multi head attention with h heads has as many parameters as single head attention")
    assert not repeated_question("why not one wide head it has the same parameters and the same flops",
                                 "why is a transpose needed after the reshape in split_heads")
