"""Start the workshop hub (`make hub`), and stop it with everything it started.

    python deploy/hub/workshop_hub.py [--ip 127.0.0.1] [--port 8000] [--learners FILE] [--threads 1] [--memory 2]

Run it with the hub's own interpreter (``build/hub/venv/bin/python``, made by `make hub`): the
learners' servers run that interpreter, so it must be one they can read (not a venv whose base
Python lives under /root). Before anything starts it checks, and says what to do otherwise: root
(each learner is a Unix user), jupyterhub and the idle culler, configurable-http-proxy, that the
learners can run the course, that the three ports are free and that the password is long enough.

Stopping (Ctrl-C, SIGTERM, or leaving the ``with Hub(...)`` block) stops JupyterHub, which stops
every learner's server and the proxy; whatever is still alive after that (the hub's process
group, the proxy by its pid file, learners' processes of this interpreter) is killed, so nothing
is left running. Learners' accounts and homes are kept (their work is in them); the benchmark
removes the accounts it created with :func:`remove_learner_accounts`.
"""
from __future__ import annotations

import argparse
import grp
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CONFIG = HERE / "jupyterhub_config.py"
GROUP = "mha-learners"
SBIN_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/bin", "/bin"])
DEFAULT_PROXY = ROOT / "build" / "hub-npm" / "node_modules" / ".bin" / "configurable-http-proxy"
DEFAULT_MEMORY_GIB = 2.0  # what one process of a learner may allocate: the Zero to JupyterHub values' limit

__all__ = ["Hub", "HubError", "check_ports", "remove_learner_accounts", "learner_accounts", "main"]


class HubError(RuntimeError):
    """The hub cannot start: one message that says why and what to do."""


def _who_listens(port: int) -> str:
    try:
        import psutil
        for conn in psutil.net_connections(kind="tcp"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
                proc = psutil.Process(conn.pid)
                return f" by pid {conn.pid} ({' '.join(proc.cmdline())[:80]})"
    except Exception:
        pass
    return ""


def check_ports(ip: str, port: int) -> None:
    """Raise HubError if the proxy's port, its API port (+1) or the hub's port (+2) is taken."""
    for p, role in ((port, "the hub's public port"), (port + 1, "the proxy's API"), (port + 2, "the hub itself")):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((ip if p == port else "127.0.0.1", p))
            except OSError:
                raise HubError(
                    f"port {p} ({role}) is already in use{_who_listens(p)}. Stop that process or choose "
                    f"other ports: make hub HUB_PORT={port + 10} (the hub uses HUB_PORT, +1 and +2)") from None


def _missing(proxy: Path) -> list:
    problems = []
    for module in ("jupyterhub", "jupyterhub_idle_culler", "psutil", "mha_course"):
        try:
            __import__(module)
        except ImportError:
            problems.append(f"{module} is not installed in {sys.executable} (make hub installs the `hub` extra)")
    if not (Path(sys.executable).parent / "jupyterhub-singleuser").exists():
        problems.append(f"jupyterhub-singleuser is not next to {sys.executable} (make hub installs it)")
    if not (proxy.exists() or shutil.which(str(proxy))):
        problems.append(f"configurable-http-proxy is not at {proxy}: make hub installs it with npm "
                        "(npm install --prefix build/hub-npm, version in deploy/hub/package.json)")
    for tool in ("useradd", "userdel", "groupadd", "runuser"):
        if not shutil.which(tool, path=SBIN_PATH):
            problems.append(f"{tool} is missing (the hub makes a Unix user per learner)")
    return problems


def _learners_can_run() -> str | None:
    """None if an unprivileged user can import the course with this interpreter, else the error."""
    run = subprocess.run([shutil.which("runuser", path=SBIN_PATH) or "runuser", "-u", "nobody", "--", sys.executable, "-c", "import mha_course, jupyterhub"],
                         capture_output=True, text=True, cwd="/", timeout=120)
    if run.returncode == 0:
        return None
    return (f"learners cannot run the course with {sys.executable}: {run.stderr.strip().splitlines()[-1:]}. "
            "Use an interpreter and a checkout every user can read: make hub builds build/hub/venv from "
            "/usr/bin/python3 (HUB_PYTHON=...); keep the repository outside /root.")


def learner_accounts(prefix: str = "") -> list:
    """Names of the Unix users in the learners' group (whose names start with ``prefix``)."""
    try:
        gid = grp.getgrnam(GROUP).gr_gid
    except KeyError:
        return []
    return sorted(u.pw_name for u in pwd.getpwall() if u.pw_gid == gid and u.pw_name.startswith(prefix))


def _kill_learner_processes(names, exe_dir: Path) -> int:
    """Kill the processes of these learners that run this hub's interpreter; return how many."""
    import psutil
    uids = set()
    for name in names:
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            pass
    victims = []
    for proc in psutil.process_iter(["uids", "cmdline"]):
        try:
            if proc.info["uids"] and proc.info["uids"].real in uids and any(
                    str(exe_dir) in arg for arg in (proc.info["cmdline"] or [])):
                victims.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    for proc in victims:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(victims, timeout=10)
    return len(victims)


def remove_learner_accounts(names) -> None:
    """Kill the learners' processes, then delete their Unix accounts and homes (only members of GROUP)."""
    members = set(learner_accounts())
    names = [n for n in names if n in members]
    if not names:
        return
    import psutil
    uids = {pwd.getpwnam(n).pw_uid for n in names}
    procs = [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real in uids]
    for proc in procs:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=10)
    for name in names:
        subprocess.run([shutil.which("userdel", path=SBIN_PATH) or "userdel", "--remove", name],
                       capture_output=True, text=True)


class Hub:
    """The workshop hub as a process group: ``with Hub(port=8000, password=...) as hub: ...``."""

    def __init__(self, *, ip="127.0.0.1", port=8000, password=None, learners=None, threads=1,
                 cull_timeout=3600, state=None, proxy=None, service_token=None, log=None, progress=True,
                 spawn_limit=0, memory_gib=DEFAULT_MEMORY_GIB):
        self.ip, self.port, self.threads, self.cull_timeout = ip, int(port), int(threads), int(cull_timeout)
        self.memory_gib = memory_gib
        self.password = password or os.environ.get("MHA_HUB_PASSWORD") or secrets.token_urlsafe(9)
        self.learners = learners
        self.state = Path(state or ROOT / "build" / "hub" / "state").resolve()
        proxy = str(proxy or os.environ.get("MHA_HUB_PROXY") or DEFAULT_PROXY)
        self.proxy = Path(proxy).resolve() if "/" in proxy else Path(shutil.which(proxy) or proxy)
        self.service_token = service_token
        self.log_path = Path(log) if log else None
        self.progress = progress and self.log_path is not None  # else the hub's own log lines are the progress
        self.spawn_limit = spawn_limit
        self.proc = None
        self.url = f"http://{ip}:{self.port}/"

    # -- checks -----------------------------------------------------------------------------------
    def check(self) -> None:
        if os.geteuid() != 0:
            raise HubError("the hub makes a Unix user per learner and runs each learner's server as that "
                           "user (LocalProcessSpawner): run it as root, e.g. sudo make hub")
        problems = _missing(self.proxy)
        if problems:
            raise HubError("missing: " + "; ".join(problems))
        if len(self.password) < 8:
            raise HubError(f"the workshop password has {len(self.password)} characters; give one of at least 8")
        if not 0.25 <= self.memory_gib <= 1024:
            raise HubError(f"--memory {self.memory_gib:g} GiB is not a memory limit for one process; give one "
                           "from 0.25 to 1024 GiB (default 2)")
        if self.learners and not Path(self.learners).is_file():
            raise HubError(f"the learners file {self.learners} does not exist (one name or name:password a line)")
        problem = _learners_can_run()
        if problem:
            raise HubError(problem)
        check_ports(self.ip, self.port)

    def env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
        env.update(MHA_HUB_IP=self.ip, MHA_HUB_PORT=str(self.port), MHA_HUB_STATE=str(self.state),
                   MHA_HUB_PASSWORD=self.password, MHA_HUB_THREADS=str(self.threads),
                   MHA_HUB_CULL_TIMEOUT=str(self.cull_timeout), MHA_HUB_PROXY=str(self.proxy),
                   MHA_HUB_PROXY_TOKEN=secrets.token_hex(32), MHA_HUB_SPAWN_LIMIT=str(self.spawn_limit),
                   MHA_HUB_MEMORY_KIB=str(int(self.memory_gib * 1024 * 1024)))
        env.pop("MHA_HUB_LEARNERS", None)
        if self.learners:
            env["MHA_HUB_LEARNERS"] = str(Path(self.learners).resolve())
        if self.service_token:
            env["MHA_HUB_SERVICE_TOKEN"] = self.service_token
        return env

    # -- start and stop ---------------------------------------------------------------------------
    def start(self, timeout: float = 120) -> "Hub":
        self.check()
        self.state.mkdir(parents=True, exist_ok=True)
        out = open(self.log_path, "ab") if self.log_path else None
        exe = Path(sys.executable).parent / "jupyterhub"
        self.proc = subprocess.Popen([str(exe), "-f", str(CONFIG)], cwd=self.state, env=self.env(),
                                     stdout=out, stderr=subprocess.STDOUT if out else None,
                                     start_new_session=True)  # its own process group, killed as one
        if out:
            out.close()
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        from tqdm import tqdm
        start = time.monotonic()
        with tqdm(total=int(timeout), desc="starting the hub", unit="s", disable=not self.progress, mininterval=1,
                  leave=False, file=sys.stderr) as bar:
            while True:
                if self.proc.poll() is not None:
                    raise HubError(f"JupyterHub exited with code {self.proc.returncode} while starting"
                                   + self._log_tail())
                try:
                    with urllib.request.urlopen(f"{self.url}hub/api", timeout=2) as r:
                        if r.status == 200:
                            return
                except (urllib.error.URLError, OSError):
                    pass
                elapsed = time.monotonic() - start
                if elapsed > timeout:
                    raise HubError(f"JupyterHub did not answer on {self.url} within {timeout:.0f} s" + self._log_tail())
                bar.n = min(int(elapsed), int(timeout))
                bar.refresh()
                time.sleep(0.3)

    def _log_tail(self) -> str:
        if self.log_path and self.log_path.exists():
            return ":\n" + "\n".join(self.log_path.read_text(errors="replace").splitlines()[-15:])
        return " (its log is above)"

    def stop(self, grace: float = 30) -> None:
        """Stop the hub (it stops the learners' servers and the proxy), then kill whatever is left."""
        import psutil
        left = []
        if self.proc is not None and self.proc.poll() is None:
            try:  # the proxy, the culler, the learners' servers and kernels: each in a session of its own
                left = psutil.Process(self.proc.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                pass
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
        for proc in left:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(left, timeout=10)
        pid_file = self.state / "proxy.pid"
        if pid_file.exists():
            try:
                pid = int(pid_file.read_text().strip())
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                if b"configurable-http-proxy" in cmdline:
                    os.killpg(pid, signal.SIGKILL)
            except (ValueError, OSError):
                pass
            pid_file.unlink(missing_ok=True)
        _kill_learner_processes(learner_accounts(), Path(sys.executable).parent)

    def __enter__(self) -> "Hub":
        return self.start() if self.proc is None else self

    def __exit__(self, *exc) -> None:
        self.stop()


def _stop_with_parent() -> None:
    """If whoever started us dies (make killed by a signal), stop too: SIGTERM to ourselves."""
    import threading
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(1)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="A JupyterHub for a workshop on this machine (make hub).")
    parser.add_argument("--ip", default=os.environ.get("MHA_HUB_IP", "127.0.0.1"),
                        help="address learners reach (default 127.0.0.1; 0.0.0.0 for a room's network)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("MHA_HUB_PORT", "8000")),
                        help="the hub's port (default 8000; it also uses the next two)")
    parser.add_argument("--learners", help="a file of learners: one `name` or `name:password` a line; "
                                           "without it anyone with the workshop password may log in")
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads per learner (default 1)")
    parser.add_argument("--memory", type=float, default=DEFAULT_MEMORY_GIB, metavar="GIB",
                        help="memory one process of a learner may allocate, in GiB (default 2): past it, numpy "
                             "raises MemoryError in that learner's kernel instead of the machine running out")
    parser.add_argument("--cull-timeout", type=int, default=3600,
                        help="stop a server idle this many seconds (default 3600)")
    parser.add_argument("--state", default=None, help="folder for the hub's database and secrets "
                                                      "(default build/hub/state)")
    parser.add_argument("--proxy", default=None, help="configurable-http-proxy (default build/hub-npm's)")
    args = parser.parse_args(argv)
    given = os.environ.get("MHA_HUB_PASSWORD")
    hub = Hub(ip=args.ip, port=args.port, password=given, learners=args.learners, threads=args.threads,
              cull_timeout=args.cull_timeout, state=args.state, proxy=args.proxy, memory_gib=args.memory)

    def _stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    _stop_with_parent()
    try:
        hub.start()
    except HubError as err:
        print(f"make hub: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        hub.stop()
        return 130
    who = f"the learners in {args.learners}" if args.learners else "anyone"
    print(f"\nThe workshop hub is at {hub.url} ({who}; workshop password: "
          f"{'from MHA_HUB_PASSWORD' if given else hub.password}).\n"
          f"Each learner logs in with a name of their choice and gets ~/mha-course/notebooks/ on first login.\n"
          f"BLAS threads per learner: {args.threads}; memory per process: {args.memory:g} GiB; "
          f"idle servers stop after {args.cull_timeout} s.\n"
          "Ctrl-C stops the hub and every learner's server.\n", flush=True)
    try:
        hub.proc.wait()
        print(f"make hub: JupyterHub exited with code {hub.proc.returncode}", file=sys.stderr)
        return hub.proc.returncode or 1
    except KeyboardInterrupt:
        print("\nstopping the hub and every learner's server ...", file=sys.stderr, flush=True)
        return 0
    finally:
        hub.stop()


if __name__ == "__main__":
    sys.exit(main())
