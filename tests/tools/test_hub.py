"""The workshop hub (`make hub`) and its benchmark, for real: root, Unix users, JupyterHub, the proxy.

- a port that is taken is refused before anything starts, naming the port and the fix;
- `make hub`'s launcher: a learner logs in with the workshop password (a wrong one is refused),
  gets a fresh student copy in a private home (0700, owned by the learner: another learner
  cannot read it), with the solutions turned into stubs, BLAS at one thread and the memory limit
  of ``--memory`` on the server and on a kernel it starts; stopping the launcher leaves no process
  behind;
- benchmarks/bench_hub.py with 2 learners: every notebook cell runs, 0 errors, its last line and
  its JSON; no learner account or process is left afterwards.

They need root, the hub's interpreter (build/hub/venv, made by `make hub`) and
configurable-http-proxy (build/hub-npm); without them they skip with the reason, unless
MHA_COURSE_REQUIRE_HUB=1 (CI's hub step), which makes that a failure. The Unix accounts the
tests create (group mha-learners, names starting with mhatest- or mhabench-) are removed.

    make hub-install && python -m pytest tests/tools/test_hub.py -p no:nbval -q
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "deploy" / "hub"))
import workshop_hub  # noqa: E402  (stdlib only at import time)

HUB_VENV = Path(os.environ.get("MHA_COURSE_HUB_VENV", ROOT / "build" / "hub" / "venv"))
HUB_PY = HUB_VENV / "bin" / "python"
PROXY = workshop_hub.DEFAULT_PROXY
REQUIRED = os.environ.get("MHA_COURSE_REQUIRE_HUB") == "1"

pytestmark = pytest.mark.hub


def _hub_missing() -> str | None:
    if os.geteuid() != 0:
        return "the hub makes Unix users and must run as root"
    if not HUB_PY.exists():
        return f"the hub's interpreter {HUB_PY} is missing (make hub-install builds it)"
    if subprocess.run([str(HUB_PY), "-c", "import jupyterhub, jupyterhub_idle_culler, psutil"],
                      capture_output=True).returncode:
        return f"jupyterhub / jupyterhub-idle-culler / psutil are not installed in {HUB_VENV} (make hub-install)"
    if not PROXY.exists():
        return f"configurable-http-proxy is not at {PROXY} (make hub-install installs it with npm)"
    return None


@pytest.fixture(scope="module")
def hub_ready():
    reason = _hub_missing()
    if reason:
        if REQUIRED:
            pytest.fail(f"MHA_COURSE_REQUIRE_HUB=1 but {reason}")
        pytest.skip(reason)


def _our_processes(since: float) -> list:
    """Processes started since ``since`` by the hub's interpreter or the proxy, still alive."""
    import psutil
    found = []
    for proc in psutil.process_iter(["cmdline", "create_time"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
            if proc.info["create_time"] >= since - 1 and (str(HUB_VENV) in cmd or "configurable-http-proxy" in cmd):
                if proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(f"{proc.pid}: {cmd[:120]}")
        except psutil.NoSuchProcess:
            pass
    return found


def test_a_taken_port_is_refused_with_the_fix():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(workshop_hub.HubError, match=rf"port {port} .*already in use.*HUB_PORT="):
            workshop_hub.check_ports("127.0.0.1", port)
        with pytest.raises(workshop_hub.HubError, match=rf"port {port} \(the proxy's API\)"):
            workshop_hub.check_ports("127.0.0.1", port - 1)


def test_a_learner_logs_in_and_gets_a_private_student_copy(hub_ready, tmp_path):
    import requests
    since = time.time()
    port = _free_block()
    password = "workshop-" + os.urandom(4).hex()
    env = dict(os.environ, MHA_HUB_PASSWORD=password)
    env.pop("PYTHONPATH", None)
    launcher = subprocess.Popen([str(HUB_PY), str(ROOT / "deploy" / "hub" / "workshop_hub.py"), "--port", str(port),
                                 "--state", str(tmp_path / "state"), "--proxy", str(PROXY), "--memory", "1.5"],
                                env=env, stdout=open(tmp_path / "hub.log", "wb"), stderr=subprocess.STDOUT,
                                start_new_session=True)
    names = ["mhatest-ada", "mhatest-bob"]
    url = f"http://127.0.0.1:{port}/"
    try:
        _wait(lambda: _get(url + "hub/api"), 120, launcher, tmp_path / "hub.log")
        wrong = requests.Session()
        wrong.get(url + "hub/login")
        r = wrong.post(url + "hub/login", data={"username": names[0], "password": "not-the-password",
                                                "_xsrf": wrong.cookies.get("_xsrf")}, allow_redirects=False)
        assert r.status_code == 403, r.status_code
        sessions = {}
        for name in names:
            s = requests.Session()
            s.get(url + "hub/login")
            r = s.post(url + "hub/login", data={"username": name, "password": password,
                                                "_xsrf": s.cookies.get("_xsrf")}, allow_redirects=True, timeout=300)
            assert r.status_code == 200, (r.status_code, r.url)
            sessions[name] = s
        for name, s in sessions.items():
            # JupyterLab's page once the server is up (the OAuth redirects give the server's cookie), then its API
            _wait(lambda: _page(s, f"{url}user/{name}/lab"), 180, launcher, tmp_path / "hub.log")
            model = _json(s, f"{url}user/{name}/api/contents/mha-course/notebooks/02_scaled_dot_product.ipynb")
            assert model, "the student copy of notebook 02 is not in the learner's ~/mha-course/notebooks/"
            sources = "".join("".join(c["source"]) for c in model["content"]["cells"])
            assert "NotImplementedError" in sources and "### BEGIN SOLUTION" not in sources, "not a student copy"
            home = Path(f"/home/{name}")
            assert home.stat().st_mode & 0o777 == 0o700
            copy = home / "mha-course" / "notebooks" / "02_scaled_dot_product.ipynb"
            import pwd
            assert copy.stat().st_uid == pwd.getpwnam(name).pw_uid
        peek = subprocess.run(["runuser", "-u", names[1], "--", "ls", f"/home/{names[0]}"], capture_output=True)
        assert peek.returncode != 0, "one learner can read another's home"
        import psutil
        servers = [p for p in psutil.process_iter(["username", "cmdline", "environ"])
                   if p.info["username"] == names[0] and "jupyterhub-singleuser" in " ".join(p.info["cmdline"] or [])]
        assert servers, "no server runs as the learner's own Unix user"
        assert servers[0].info["environ"]["OMP_NUM_THREADS"] == "1"
        assert servers[0].info["environ"]["MHA_COURSE_THREADS"] == "1"
        limit = int(1.5 * 1024 ** 3)  # --memory 1.5 (GiB), for each of the learner's processes
        assert _data_limit(servers[0].pid) == (limit, limit)
        kernel = _start_kernel(sessions[names[0]], f"{url}user/{names[0]}/")
        assert _data_limit(kernel.pid) == (limit, limit), "the kernel did not inherit the limit"
    finally:
        os.killpg(launcher.pid, signal.SIGTERM)
        try:
            launcher.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
        left = _our_processes(since)
        workshop_hub.remove_learner_accounts(workshop_hub.learner_accounts("mhatest-"))
    assert launcher.returncode == 0, (tmp_path / "hub.log").read_text()[-3000:]
    assert not left, f"still running after the hub stopped: {left}"
    assert not workshop_hub.learner_accounts("mhatest-")


def test_bench_hub_with_two_learners(hub_ready, tmp_path):
    since = time.time()
    out = tmp_path / "bench_hub.json"
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    run = subprocess.run([str(HUB_PY), str(ROOT / "benchmarks" / "bench_hub.py"), "--learners", "2",
                          "--json", str(out), "--no-progress"], capture_output=True, text=True, timeout=1200,
                         env=env, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    last = run.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"2 learners: median [\d.]+ s, max [\d.]+ s, solo [\d.]+ s, errors 0, memory \d+ MiB per learner",
                        last), last
    result = json.loads(out.read_text())["2 learners, spread 0 s"]
    assert result["errors"] == 0 and result["memory_mib_per_learner"] > 50
    assert result["median_s"] <= result["max_s"]
    assert not workshop_hub.learner_accounts("mhabench-"), "the benchmark left learner accounts"
    assert not _our_processes(since), "the benchmark left processes running"


# ---- helpers ----------------------------------------------------------------------------------
def _free_block() -> int:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from bench_hub import free_port_block
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return free_port_block(9400)


def _data_limit(pid: int) -> tuple:
    """(soft, hard) RLIMIT_DATA of process ``pid`` in bytes, from /proc/PID/limits (prlimit on
    another user's process may be refused even to root in a container)."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max data size"):
            soft, hard = line.split()[3:5]
            return tuple(-1 if v == "unlimited" else int(v) for v in (soft, hard))
    raise AssertionError(f"no 'Max data size' in /proc/{pid}/limits")


def _start_kernel(session, server_url: str):
    """Start a kernel on a learner's server through its REST API; its process (psutil), once it runs."""
    import psutil
    xsrf = next((c.value for c in session.cookies if c.name == "_xsrf" and c.path.startswith("/user/")),
                next(c.value for c in session.cookies if c.name == "_xsrf"))
    r = session.post(server_url + "api/kernels", json={"name": "python3"}, headers={"X-XSRFToken": xsrf}, timeout=60)
    assert r.status_code == 201, (r.status_code, r.text[:300])
    kernel_id = r.json()["id"]
    deadline = time.time() + 60
    while time.time() < deadline:
        for p in psutil.process_iter(["cmdline"]):
            if any(kernel_id in part for part in (p.info["cmdline"] or [])):
                return p
        time.sleep(0.5)
    raise AssertionError(f"no process for kernel {kernel_id}")


def _get(url):
    import requests
    try:
        return requests.get(url, timeout=3).status_code == 200 or None
    except requests.RequestException:
        return None


def _page(session, url):
    """True once ``url`` (a page of the learner's server) answers 200 from the server itself."""
    import requests
    try:
        r = session.get(url, timeout=30)
    except requests.RequestException:
        return None
    return (r.status_code == 200 and "/user/" in r.url and "/hub/" not in r.url) or None


def _json(session, url):
    """GET a JSON API with the learner's cookies (and the server's xsrf cookie, as JupyterLab sends it)."""
    import requests
    path = "/" + "/".join(url.split("/", 3)[3].split("/")[:2]) + "/"  # /user/<name>/
    xsrf = session.cookies.get("_xsrf", path=path) or session.cookies.get("_xsrf")
    try:
        r = session.get(url, timeout=10, headers={"X-XSRFToken": xsrf} if xsrf else {})
    except requests.RequestException:
        return None
    if r.status_code == 200 and r.headers.get("Content-Type", "").startswith("application/json"):
        return r.json()
    return None


def _wait(probe, timeout, launcher, log):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if launcher.poll() is not None:
            pytest.fail(f"the hub exited ({launcher.returncode}):\n{Path(log).read_text()[-3000:]}")
        got = probe()
        if got:
            return got
        time.sleep(0.5)
    pytest.fail(f"not ready within {timeout} s:\n{Path(log).read_text()[-3000:]}")
