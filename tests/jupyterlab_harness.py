"""Start JupyterLab or Voilà for a real-browser test, and stop exactly what was started.

Each server:
- listens on 127.0.0.1 only, on a free port, behind a random token;
- runs under ``timeout -k 5 <seconds>``, so a crashed test cannot leave it running for long;
- has its own temporary JUPYTER_* / IPYTHONDIR / MPLCONFIGDIR folders (no user settings, no
  "get Jupyter news?" toast) and works on a temporary copy of the notebook with its outputs and
  widget state cleared, so autosave never touches the course files and everything the browser
  shows comes from this run;
- is stopped by its process id (its own process group) when the ``with`` block ends.

Used by tests/cross/test_browser.py; also handy by hand:

    with JupyterLab(Path("notebooks/explorer_app.ipynb")) as lab:
        print(lab.notebook_url)
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def isolated_env(home: Path) -> dict:
    """Environment with every Jupyter / IPython / matplotlib folder inside ``home``."""
    env = dict(os.environ)
    dirs = {"JUPYTER_CONFIG_DIR": "config", "JUPYTER_DATA_DIR": "data",
            "JUPYTER_RUNTIME_DIR": "runtime", "IPYTHONDIR": "ipython",
            "JUPYTERLAB_SETTINGS_DIR": "settings", "JUPYTERLAB_WORKSPACES_DIR": "workspaces",
            "MPLCONFIGDIR": "matplotlib"}
    for var, name in dirs.items():
        (home / name).mkdir(parents=True, exist_ok=True)
        env[var] = str(home / name)
    news = home / "settings" / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True, exist_ok=True)
    (news / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    # Render every cell (no windowing), so a test can see all prompts and outputs.
    tracker = home / "settings" / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True, exist_ok=True)
    (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    env.pop("MPLBACKEND", None)
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


def copy_cleared(src: Path, dst: Path) -> None:
    """Copy a file; a notebook loses its outputs, execution counts and saved widget state, so
    whatever the browser shows afterwards was produced by this run."""
    if src.suffix != ".ipynb":
        shutil.copy(src, dst)
        return
    nb = json.loads(src.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    nb.get("metadata", {}).pop("widgets", None)
    dst.write_text(json.dumps(nb, indent=1), encoding="utf-8")


class _Server:
    """A server process in its own process group, on a temporary copy of one notebook."""

    lifetime = 600  # seconds, enforced by `timeout`

    def __init__(self, notebook: Path, extra_files=()):
        self.notebook = Path(notebook)
        self.extra_files = list(extra_files)
        self.port, self.token = free_port(), secrets.token_hex(16)
        self.proc = None
        self.tmp = None

    def command(self) -> list:
        raise NotImplementedError

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="mha-browser-"))
        self.root = self.tmp / "root"
        self.root.mkdir()
        for path in [self.notebook, *self.extra_files]:
            copy_cleared(Path(path), self.root / Path(path).name)
        self.env = isolated_env(self.tmp / "home")
        self.log = open(self.tmp / "server.log", "wb")
        self.proc = subprocess.Popen(["timeout", "-k", "5", str(self.lifetime), *self.command()],
                                     cwd=self.root, env=self.env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait_until_up()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wait_until_up(self, seconds: float = 60.0) -> None:
        deadline = time.monotonic() + seconds
        url = f"{self.base}/api/status?token={self.token}"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                with urllib.request.urlopen(url, timeout=2):
                    return
            except urllib.error.HTTPError:
                return  # it answers (Voilà serves no /api/status, but it is listening)
            except OSError:
                time.sleep(0.3)
        raise TimeoutError(f"server not up after {seconds:.0f} s:\n{self.log_text()}")

    def log_text(self) -> str:
        self.log.flush()
        return (self.tmp / "server.log").read_text(errors="replace")[-4000:]

    def __exit__(self, *exc):
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # our own process group: timeout + server + kernels
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        if self.tmp is not None:
            self.log.close()
            shutil.rmtree(self.tmp, ignore_errors=True)
        return False


class JupyterLab(_Server):
    """JupyterLab serving a temporary copy of ``notebook``; open ``notebook_url``."""

    def command(self) -> list:
        return [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
                "--ip=127.0.0.1", f"--port={self.port}", f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={self.root}",
                "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate"]

    @property
    def notebook_url(self) -> str:
        return f"{self.base}/lab/tree/{self.notebook.name}?token={self.token}&reset"


class Voila(_Server):
    """Voilà rendering a temporary copy of ``notebook`` as an app; open ``app_url``."""

    def command(self) -> list:
        return [sys.executable, "-m", "voila", "--no-browser", "--Voila.ip=127.0.0.1",
                f"--port={self.port}", f"--token={self.token}", self.notebook.name]

    @property
    def app_url(self) -> str:
        return f"{self.base}/?token={self.token}"


def launch_chromium(playwright):
    """Debian's chromium through playwright (playwright cannot download its own build here)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
