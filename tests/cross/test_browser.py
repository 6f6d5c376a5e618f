"""The explorer in a real browser: JupyterLab and Voilà, driven by headless Chromium.

What a learner does, checked the way a learner would see it:
- open the overview notebook (a temporary copy), Run All, wait for every prompt and an idle kernel;
- no error output except in cells tagged ``raises-exception``, nothing on stderr;
- the explorer's sliders are real widgets (noUiSlider handles), not "Error displaying widget"
  or "Loading widget...";
- moving the h slider with the keyboard changes the shapes shown and redraws the picture;
- each of the four modes can be selected and shows its content;
- the standalone app (Voilà) renders the same explorer and answers the h slider;
- `make course`'s command line opens 00 with the repository as root, and its glossary link opens;
- the learner's route: a venv with only the wheel, `mha-course start DIR` outside a clone, Run All
  on the student copy of 01, its glossary link, and a second start that writes nothing
  (MHA_COURSE_LEARNER_VENV, set by .ci/run; skipped without it).

Screenshots go to test-artifacts/ (gitignored). The tests skip with the reason when chromium
or playwright is missing, unless MHA_COURSE_REQUIRE_BROWSER=1 (CI), which makes that a failure.

    python -m pytest tests/cross/test_browser.py -p no:xdist -q
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from jupyterlab_harness import CHROMIUM, JupyterLab, Voila, copy_cleared, free_port, isolated_env, launch_chromium

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
OVERVIEW = ROOT / "notebooks" / "00_overview.ipynb"
APP = ROOT / "notebooks" / "explorer_app.ipynb"
VIEWPORT = {"width": 1280, "height": 800}
REQUIRED = os.environ.get("MHA_COURSE_REQUIRE_BROWSER") == "1"
WIDGET_FAILURES = ("Error displaying widget", "Loading widget...")
SHAPES = ".mha-explorer .mha-explorer-shapes"
IMAGE = ".mha-explorer img"
MODE_CONTENT = {  # what each mode's caption promises, and a control only that mode shows
    "Architecture": (re.compile("every arrow shows its live shape"), None),
    "Data": (re.compile("heads side by side"), None),
    "State": (re.compile(r"stage \d+/12: \w+ \("), "Next"),
    "Performance": (re.compile("press Measure sweep"), "Measure sweep"),
}

pytestmark = pytest.mark.browser


def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[browser]')"
    if not Path(CHROMIUM).exists():
        return f"chromium is not installed at {CHROMIUM} (apt-get install chromium)"
    return None


@pytest.fixture(scope="module")
def browser():
    reason = _missing()
    if reason:
        if REQUIRED:
            pytest.fail(f"MHA_COURSE_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        chromium = launch_chromium(p)
        try:
            yield chromium
        finally:
            chromium.close()


def _notebook_with_explorer() -> Path:
    """00_overview once it embeds the explorer; until then the standalone app notebook."""
    if OVERVIEW.exists() and "Explorer(" in OVERVIEW.read_text(encoding="utf-8"):
        return OVERVIEW
    return APP


def _tagged_error_cells(path: Path) -> set[int]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return {i for i, c in enumerate(cells) if "raises-exception" in c.get("metadata", {}).get("tags", [])}


def _shot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def _run_all(page, n_code: int, timeout_s: float = 90) -> None:
    """Run > Run All Cells, then wait until every code prompt reads [n]: and the kernel is idle.

    If no cell has started a few seconds after the click (the kernel was still connecting),
    the menu command is given once more.
    """
    from playwright.sync_api import expect
    idle = page.locator('.jp-Notebook-ExecutionIndicator[data-status="idle"]')
    expect(page.get_by_text(re.compile(r"\| Idle$"))).to_have_count(1, timeout=60_000)
    prompts = page.locator(".jp-CodeCell .jp-InputArea-prompt")
    deadline = time.monotonic() + timeout_s
    for attempt in (1, 2):
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name=re.compile(r"^Run All Cells")).click()
        started = time.monotonic() + 10
        while time.monotonic() < min(started, deadline):
            if any(t.strip() != "[ ]:" for t in prompts.all_inner_texts()):
                break
            time.sleep(0.25)
        else:
            continue  # nothing started: click Run All again
        break
    while time.monotonic() < deadline:
        texts = prompts.all_inner_texts()
        if len(texts) == n_code and all(re.fullmatch(r"\[\d+\]:", t.strip()) for t in texts) \
                and idle.count() == 1:
            return
        time.sleep(0.5)
    raise AssertionError(f"cells did not all run within {timeout_s:.0f} s: prompts {texts}")


def _check_outputs(page, notebook: Path) -> None:
    """No error and no stderr output, except in cells tagged raises-exception (JupyterLab
    renders an error's traceback with the stderr mime type, so both are looked for)."""
    cells = page.locator(".jp-Notebook .jp-Cell")  # every cell is rendered (windowing off)
    allowed = _tagged_error_cells(notebook)
    bad = ('[data-mime-type="application/vnd.jupyter.error"], '
           '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
    for i in range(cells.count()):
        texts = [t for t in cells.nth(i).locator(bad).all_inner_texts() if t.strip()]
        assert not texts or i in allowed, f"cell {i} (not tagged raises-exception) printed:\n{texts[0][:800]}"
        if i in allowed:
            assert texts, f"cell {i} is tagged raises-exception but showed no error"
    body = page.locator(".jp-Notebook").inner_text()
    for failure in WIDGET_FAILURES:
        assert failure not in body, f"{failure!r} in the notebook: the widget manager failed"


def _check_sliders(page) -> None:
    from playwright.sync_api import expect
    explorer = page.locator(".mha-explorer").first
    expect(explorer.locator(".noUi-handle").first).to_be_attached(timeout=30_000)
    assert explorer.locator(".noUi-handle").count() >= 3, "d_model, h and seq_len sliders"
    for failure in WIDGET_FAILURES:
        assert failure not in explorer.inner_text()


def _move_h_slider(page, name: str) -> None:
    """An arrow key on the h handle moves h to the next divisor of d_model; the shapes shown
    and the picture follow."""
    from playwright.sync_api import expect
    shapes, image = page.locator(SHAPES).first, page.locator(IMAGE).first
    expect(shapes).to_contain_text("d_model=")
    d_model, h, T = (int(v) for v in re.search(r"d_model=(\d+) · h=(\d+) · d_k=\d+ · seq_len=(\d+)",
                                                shapes.inner_text()).groups())
    divisors = [d for d in range(1, d_model + 1) if d_model % d == 0]
    i = divisors.index(h)
    key, new = ("ArrowRight", divisors[i + 1]) if i + 1 < len(divisors) else ("ArrowLeft", divisors[i - 1])
    src = image.get_attribute("src")
    handle = page.locator(".mha-explorer-h .noUi-handle").first
    handle.scroll_into_view_if_needed()
    handle.focus()
    handle.press(key)
    expect(shapes).to_contain_text(f"h={new} · d_k={d_model // new}", timeout=20_000)
    expect(shapes).to_contain_text(f"Q_heads (1, {new}, {T}, {d_model // new})")
    expect(image).not_to_have_attribute("src", src, timeout=20_000)  # the redraw lands later
    _shot(page, f"{name}-h{new}")


def _visit_modes(page, name: str) -> None:
    """Select every mode; each shows its caption, its own controls and a new picture."""
    from playwright.sync_api import expect
    explorer, image = page.locator(".mha-explorer").first, page.locator(IMAGE).first
    for mode in ["Data", "State", "Performance", "Architecture"]:
        src = image.get_attribute("src")
        explorer.get_by_role("button", name=mode, exact=True).click()
        expect(explorer.locator(".mha-explorer-mode")).to_have_text(mode, timeout=20_000)
        caption, control = MODE_CONTENT[mode]
        expect(explorer).to_contain_text(caption)
        expect(image).not_to_have_attribute("src", src, timeout=20_000)
        if control:
            expect(explorer.get_by_role("button", name=control)).to_be_visible()
        box = image.bounding_box()
        assert box and box["width"] > 600 and box["height"] > 300, f"{mode}: picture {box}"
        image.scroll_into_view_if_needed()
        _shot(page, f"{name}-{mode.lower()}")
        if mode == "State":
            _step_state(page, explorer, image)
        if mode == "Performance":
            _measure(page, explorer, image, name)


def _step_state(page, explorer, image) -> None:
    """Next (or Previous on the last stage) moves one stage; caption and picture follow."""
    from playwright.sync_api import expect
    stage = int(re.search(r"stage (\d+)/12", explorer.inner_text()).group(1))
    button, new = ("Next", stage + 1) if stage < 12 else ("Previous", stage - 1)
    src = image.get_attribute("src")
    explorer.get_by_role("button", name=button).click()
    expect(explorer).to_contain_text(f"stage {new}/12:", timeout=20_000)
    expect(image).not_to_have_attribute("src", src, timeout=20_000)


def _measure(page, explorer, image, name: str) -> None:
    from playwright.sync_api import expect
    src = image.get_attribute("src")
    explorer.get_by_role("button", name="Measure sweep").click()
    expect(image).not_to_have_attribute("src", src, timeout=60_000)
    bar = explorer.locator(".widget-hprogress .progress-bar")
    expect(bar).to_have_attribute("style", re.compile(r"width:\s*100%"), timeout=10_000)
    image.scroll_into_view_if_needed()
    _shot(page, f"{name}-performance-measured")


def test_explorer_in_jupyterlab(browser):
    notebook = _notebook_with_explorer()
    n_code = sum(c["cell_type"] == "code" and "".join(c["source"]).strip() != ""
                 for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"])
    name = f"lab-{notebook.stem}"
    with JupyterLab(notebook) as lab:
        page = browser.new_page(viewport=VIEWPORT)
        try:
            page.goto(lab.notebook_url)
            page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=60_000)
            page.keyboard.press("Control+b")  # hide the file browser, as on a workshop screen
            _run_all(page, n_code)
            _shot(page, f"{name}-run-all")
            _check_outputs(page, notebook)
            _check_sliders(page)
            page.locator(".mha-explorer").first.scroll_into_view_if_needed()
            _shot(page, f"{name}-explorer")
            _move_h_slider(page, name)
            _visit_modes(page, name)
        except BaseException:
            _shot(page, f"{name}-failure")
            (ARTIFACTS / f"{name}-server.log").write_text(lab.log_text())
            raise
        finally:
            page.close()


def test_explorer_app_in_voila(browser):
    """The workshop app: `voila notebooks/explorer_app.ipynb`. Voilà occasionally stalls while
    executing a widget notebook, so a stalled load is retried (fresh page, fresh kernel)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    with Voila(APP) as app:
        for attempt in range(1, 4):
            page = browser.new_page(viewport=VIEWPORT)
            try:
                page.goto(app.app_url)
                page.locator(".mha-explorer .noUi-handle").first.wait_for(timeout=30_000)
                break
            except PlaywrightTimeout:
                _shot(page, f"voila-stalled-{attempt}")
                page.close()
                if attempt == 3:
                    raise AssertionError(f"Voilà did not render the explorer in 3 loads:\n"
                                         f"{app.log_text()}")
        try:
            _check_sliders(page)
            _shot(page, "voila-explorer")
            _move_h_slider(page, "voila")
        except BaseException:
            _shot(page, "voila-failure")
            (ARTIFACTS / "voila-server.log").write_text(app.log_text())
            raise
        finally:
            page.close()


# ---- the course's two front doors: `make course` (a clone) and `mha-course start` (a wheel) -----------
LEARNER_VENV = os.environ.get("MHA_COURSE_LEARNER_VENV", "")  # .ci/run: a fresh venv holding only the wheel


class _LabIn:
    """JupyterLab started by ``command`` (plus port, token, no browser) in ``cwd``, stopped by its process group."""

    def __init__(self, command: list, cwd: Path, home: Path, env_drop=()):
        self.command, self.cwd, self.home, self.env_drop = command, cwd, home, env_drop
        self.port, self.token = free_port(), secrets.token_hex(16)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        env = isolated_env(self.home)
        for name in self.env_drop:
            env.pop(name, None)
        self.log_path = self.home / "server.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            ["timeout", "-k", "5", "600", *self.command, "--no-browser", "--ip=127.0.0.1", f"--port={self.port}",
             f"--IdentityProvider.token={self.token}",
             "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate"],
            cwd=self.cwd, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"JupyterLab exited ({self.proc.returncode}):\n{self.log_text()}")
            try:
                with urllib.request.urlopen(f"{self.base}/api/status?token={self.token}", timeout=2):
                    return self
            except OSError:
                time.sleep(0.3)
        self.__exit__()
        raise AssertionError(f"JupyterLab not up after 120 s:\n{self.log_text()}")

    def log_text(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.log.close()
        return False


def _open_glossary_link(page, lab) -> None:
    """Click the notebook's [glossary](../docs/glossary.md) link; the glossary opens in a tab of its own."""
    from playwright.sync_api import expect
    link = page.locator(".jp-RenderedMarkdown a", has_text=re.compile(r"^glossary$")).first
    link.scroll_into_view_if_needed()
    link.click()
    expect(page.locator(".lm-TabBar-tabLabel", has_text="glossary.md").first).to_be_visible(timeout=30_000)
    expect(page.locator(".jp-MainAreaWidget:visible").last).to_contain_text("Glossary", timeout=30_000)
    assert "404 GET /api/contents" not in lab.log_text(), lab.log_text()


def _make_course_command() -> list:
    """The JupyterLab command line that `make course` runs (make -n), as argv."""
    dry = subprocess.run(["make", "-n", "-W", "pyproject.toml", "course", "VENV=.venv-dry-run-never-made"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    line = next(ln for ln in dry.stdout.splitlines() if '/jupyter" lab' in ln)
    args = shlex.split(line)
    return [sys.executable, "-m", "jupyterlab", *args[2:]]


def test_make_course_opens_the_glossary_link_of_a_notebook(browser, tmp_path):
    """`make course`'s own command line, run in a copy of the repository's course files: JupyterLab
    opens on 00 with the repository as root, and 00's glossary link opens the glossary."""
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    (root / "docs").mkdir()
    copy_cleared(OVERVIEW, root / "notebooks" / OVERVIEW.name)
    for rel in ("docs/glossary.md", "README.md"):
        (root / rel).write_bytes((ROOT / rel).read_bytes())
    command = _make_course_command()
    assert "--ServerApp.root_dir=." in command
    with _LabIn(command, root, tmp_path / "home") as lab:
        page = browser.new_page(viewport=VIEWPORT)
        try:
            page.goto(f"{lab.base}/?token={lab.token}")  # / redirects to the default URL: make course's notebook
            from playwright.sync_api import expect
            expect(page.locator(".lm-TabBar-tabLabel", has_text="00_overview.ipynb").first).to_be_visible(
                timeout=60_000)
            _open_glossary_link(page, lab)
            _shot(page, "make-course-glossary")
        except BaseException:
            _shot(page, "make-course-failure")
            raise
        finally:
            page.close()


def test_the_wheel_in_a_fresh_venv_runs_01_in_jupyterlab(browser, tmp_path):
    """The learner's route, on a venv that holds only the wheel (.ci/run makes it): `mha-course start DIR`
    outside any clone writes the student copies, opens JupyterLab on DIR, Run All on 01 works, the
    glossary link opens, and a second start writes nothing."""
    if not LEARNER_VENV:
        if os.environ.get("MHA_COURSE_REQUIRE_LEARNER") == "1":
            pytest.fail("MHA_COURSE_REQUIRE_LEARNER=1 but MHA_COURSE_LEARNER_VENV is not set")
        pytest.skip("needs MHA_COURSE_LEARNER_VENV: a venv with only the wheel installed (.ci/run's learner step)")
    start = [str(Path(LEARNER_VENV) / "bin" / "mha-course"), "start", str(tmp_path / "mha-course"), "--"]
    away = tmp_path / "elsewhere"
    away.mkdir()
    with _LabIn(start, away, tmp_path / "home", env_drop=("PYTHONPATH",)) as lab:
        course = tmp_path / "mha-course"
        student = course / "notebooks" / "01_qkv.ipynb"
        assert "# Your code here" in student.read_text(encoding="utf-8"), "not a student copy"
        assert (course / "docs" / "glossary.md").is_file()
        n_code = sum(1 for c in json.loads(student.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code")
        page = browser.new_page(viewport=VIEWPORT)
        try:
            page.goto(f"{lab.base}/lab/tree/notebooks/01_qkv.ipynb?token={lab.token}&reset")
            _run_all(page, n_code, timeout_s=240)
            _check_outputs(page, student)
            assert page.locator(".jp-Notebook").get_by_text("not finished yet").count() >= 1
            _shot(page, "learner-01-run-all")
            _open_glossary_link(page, lab)
        except BaseException:
            _shot(page, "learner-failure")
            (ARTIFACTS / "learner-server.log").write_text(lab.log_text())
            raise
        finally:
            page.close()
    before = {p: p.read_bytes() for p in course.rglob("*") if p.is_file() and ".ipynb_checkpoints" not in p.parts}
    again = subprocess.run([*start, "--version"], cwd=away, capture_output=True, text=True, timeout=120,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert again.returncode == 0 and "nothing was written" in again.stdout, again.stdout + again.stderr
    after = {p: p.read_bytes() for p in course.rglob("*") if p.is_file() and ".ipynb_checkpoints" not in p.parts}
    assert after == before, "a second mha-course start changed the learner's files"
