"""Benchmark: a class on the workshop hub (`make hub`), one machine, N learners at once.

Starts the hub of deploy/hub/ on a free port (its own state folder, a token for this script),
creates N learners through the REST API and starts their servers, all at once or one every
S/N seconds (``--spread S``). Each start is what a learner's first login does: the Unix user
is created, the student copy written, the Jupyter server started. In each server it then runs
a course notebook (default notebooks/01_qkv.ipynb, the committed version with its solutions)
over the Jupyter REST API (a session) and the kernel websocket: every code cell, in order, as
an ``execute_request``; a cell that errors counts as an error unless it is tagged
``raises-exception``.

Time per learner = server start (spawn to ready) + notebook (session to the last reply).
"solo" is the same for one learner alone on the hub, measured first. Memory per learner is the
sum of the peak RSS (VmHWM) of that learner's server and kernel (shared pages are counted in
each), median over the learners; CPU per learner the CPU seconds of all its processes (the
first-login copy included).

    sudo build/hub/venv/bin/python benchmarks/bench_hub.py --learners 16 --spread 60
    make bench-hub LEARNERS=8 SPREAD=0

The last line reads
``N learners: median X s, max Y s, solo Z s, errors E, memory M MiB per learner``; the runs are
kept in benchmarks/results/bench_hub.json (one entry per learners x spread). Every learner's
Unix account it created is removed at the end, and the hub is stopped with all it started.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import pwd
import secrets
import signal
import socket
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "deploy" / "hub"))

from workshop_hub import Hub, HubError, learner_accounts, remove_learner_accounts  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "bench_hub.json"
DEFAULT_NOTEBOOK = Path("notebooks/01_qkv.ipynb")
PREFIX = "mhabench-"


def free_port_block(start: int = 8400) -> int:
    """A port p with p, p+1, p+2 and p+3 free on 127.0.0.1 (the hub uses four)."""
    for port in range(start, start + 2000, 4):
        try:
            for p in (port, port + 1, port + 2, port + 3):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return port
        except OSError:
            continue
    raise HubError(f"no four free ports in a row between {start} and {start + 2000}")


def stale_accounts() -> list:
    """Accounts mhabench-<pid>-... whose benchmark run (that pid) is gone: a run that was killed left them."""
    stale = []
    for name in learner_accounts(PREFIX):
        pid = name[len(PREFIX):].split("-", 1)[0]
        if not pid.isdigit():
            stale.append(name)  # the naming of an earlier version of this script
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            stale.append(name)
        except PermissionError:
            pass
    return stale


def code_cells(path: Path) -> list:
    """[(source, expects_error)] of the notebook's code cells."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [("".join(c["source"]), "raises-exception" in c.get("metadata", {}).get("tags", []))
            for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]


def peak_rss(pid: int) -> int:
    """The high-water mark of a process's resident memory (VmHWM), in bytes; 0 if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


class Memory:
    """Each learner's processes (by Unix uid): CPU seconds sampled in the background, peak memory at the end.

    A learner's memory is taken when the notebook has run: the sum of the peak resident set
    (VmHWM, the kernel's own high-water mark, so no spike between samples is missed) of the
    processes alive then, the Jupyter server and the kernel. The first-login copy runs before the
    server starts and is not counted. Two peaks that may not coincide are summed: the high side,
    the side to size a class by.
    """

    def __init__(self):
        self.peak_rss, self.cpu, self._uids = {}, {}, {}

    def watch(self, name: str) -> None:
        try:
            self._uids[pwd.getpwnam(name).pw_uid] = name
        except KeyError:
            pass

    def sample(self, final_for: str | None = None) -> None:
        """Record CPU seconds per process; with ``final_for``, also that learner's peak memory."""
        import psutil
        peaks = 0
        for proc in psutil.process_iter(["uids", "cpu_times"]):
            info = proc.info
            if not info["uids"] or info["uids"].real not in self._uids:
                continue
            name = self._uids[info["uids"].real]
            if info["cpu_times"]:
                t = info["cpu_times"]
                self.cpu.setdefault(name, {})[proc.pid] = t.user + t.system
            if name == final_for:
                peaks += peak_rss(proc.pid)
        if final_for is not None:
            self.peak_rss[final_for] = max(self.peak_rss.get(final_for, 0), peaks)

    async def run(self, every: float = 0.5) -> None:
        while True:
            await asyncio.to_thread(self.sample)
            await asyncio.sleep(every)

    def cpu_seconds(self, name: str) -> float:
        return sum(self.cpu.get(name, {}).values())


class Learner:
    """One learner's run: start the server, run the notebook in a kernel, stop the server."""

    def __init__(self, name: str, hub_url: str, token: str, notebook_rel: str, cells: list, memory: Memory,
                 timeout: float):
        self.name, self.url, self.token, self.rel, self.cells = name, hub_url, token, notebook_rel, cells
        self.memory, self.timeout = memory, timeout
        self.start_s = self.run_s = None
        self.error = None
        self.cell_errors = 0

    def _headers(self) -> dict:
        return {"Authorization": f"token {self.token}", "Content-Type": "application/json"}

    async def _api(self, method: str, path: str, body=None, ok=(200, 201, 202, 204)):
        from tornado.httpclient import AsyncHTTPClient, HTTPClientError
        client = AsyncHTTPClient()
        try:
            resp = await client.fetch(self.url + path, method=method, headers=self._headers(),
                                      body=None if body is None else json.dumps(body),
                                      allow_nonstandard_methods=True, request_timeout=self.timeout)
        except HTTPClientError as err:
            text = err.response.body.decode(errors="replace")[:300] if err.response else ""
            raise RuntimeError(f"{method} {path}: HTTP {err.code} {text}") from None
        if resp.code not in ok:
            raise RuntimeError(f"{method} {path}: HTTP {resp.code}")
        return json.loads(resp.body) if resp.body else None

    async def start_server(self) -> None:
        t0 = time.monotonic()
        await self._api("POST", f"hub/api/users/{self.name}/server", {})
        while True:
            model = await self._api("GET", f"hub/api/users/{self.name}")
            server = (model.get("servers") or {}).get("")
            if server and server.get("ready"):
                break
            if not server and model.get("pending") is None and time.monotonic() - t0 > 5:
                raise RuntimeError("the server stopped while starting (see the hub's log)")
            if time.monotonic() - t0 > self.timeout:
                raise RuntimeError(f"the server was not ready within {self.timeout:.0f} s")
            self.memory.watch(self.name)
            await asyncio.sleep(0.25)
        self.memory.watch(self.name)
        self.start_s = time.monotonic() - t0

    async def run_notebook(self) -> None:
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect
        t0 = time.monotonic()
        session = await self._api("POST", f"user/{self.name}/api/sessions",
                                  {"path": self.rel, "type": "notebook", "name": Path(self.rel).name,
                                   "kernel": {"name": "python3"}})
        kernel = session["kernel"]["id"]
        ws_url = self.url.replace("http://", "ws://") + f"user/{self.name}/api/kernels/{kernel}/channels"
        ws = await websocket_connect(HTTPRequest(ws_url, headers={"Authorization": f"token {self.token}"},
                                                 request_timeout=self.timeout), max_message_size=256 * 2**20)
        session_id = uuid.uuid4().hex
        try:
            for index, (code, expects_error) in enumerate(self.cells):
                msg_id = uuid.uuid4().hex
                ws.write_message(json.dumps({
                    "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": self.name,
                               "session": session_id, "date": "", "version": "5.3"},
                    "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                    "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                                "allow_stdin": False, "stop_on_error": True}}))
                deadline = time.monotonic() + self.timeout
                while True:
                    raw = await asyncio.wait_for(ws.read_message(), max(1.0, deadline - time.monotonic()))
                    if raw is None:
                        raise RuntimeError(f"the kernel's websocket closed during cell {index + 1}")
                    if isinstance(raw, bytes):
                        continue  # a binary frame (widget buffers): not a reply
                    msg = json.loads(raw)
                    if msg.get("parent_header", {}).get("msg_id") != msg_id or msg.get("channel") != "shell":
                        continue
                    if msg["header"]["msg_type"] == "execute_reply":
                        if msg["content"].get("status") != "ok" and not expects_error:
                            self.cell_errors += 1
                            raise RuntimeError(f"code cell {index + 1} raised {msg['content'].get('ename')}: "
                                               f"{msg['content'].get('evalue', '')[:200]}")
                        break
        finally:
            ws.close()
        self.run_s = time.monotonic() - t0
        self.memory.sample(final_for=self.name)  # the kernel's last CPU seconds and peak memory, before it goes
        await self._api("DELETE", f"user/{self.name}/api/sessions/{session['id']}")

    async def stop_server(self) -> None:
        try:
            await self._api("DELETE", f"hub/api/users/{self.name}/server")
        except RuntimeError:
            pass

    async def run(self, delay: float = 0.0) -> "Learner":
        await asyncio.sleep(delay)
        try:
            await self.start_server()
            await self.run_notebook()
        except Exception as err:  # one learner's failure is a counted error, not the end of the run
            self.error = f"{type(err).__name__}: {err}"
        return self

    @property
    def total_s(self):
        return None if self.start_s is None or self.run_s is None else self.start_s + self.run_s


async def _run_class(hub_url, token, names, spread, notebook_rel, cells, memory, timeout, progress):
    from tqdm import tqdm
    learners = [Learner(n, hub_url, token, notebook_rel, cells, memory, timeout) for n in names]
    step = spread / len(learners) if spread and len(learners) > 1 else 0.0
    sampler = asyncio.create_task(memory.run())
    try:
        tasks = [asyncio.create_task(lr.run(i * step)) for i, lr in enumerate(learners)]
        with tqdm(total=len(tasks), desc=f"{len(tasks)} learner(s)", unit="learner", disable=not progress, mininterval=1,
                  file=sys.stderr, leave=False) as bar:
            for done in asyncio.as_completed(tasks):
                await done
                bar.update(1)
    finally:
        sampler.cancel()
        await asyncio.gather(*(lr.stop_server() for lr in learners))
    return learners


async def _create_users(hub_url, token, names):
    from tornado.httpclient import AsyncHTTPClient
    await AsyncHTTPClient().fetch(hub_url + "hub/api/users", method="POST",
                                  headers={"Authorization": f"token {token}"},
                                  body=json.dumps({"usernames": names}))


def _mib(value) -> float:
    return value / 2**20


def summarize(n, spread, solo, learners, memory, load_before, load_after, notebook) -> dict:
    ok = [lr for lr in learners if lr.error is None]
    total = [lr.total_s for lr in ok]
    rss = [_mib(memory.peak_rss[lr.name]) for lr in learners if lr.name in memory.peak_rss]
    cpu = [memory.cpu_seconds(lr.name) for lr in ok]
    med = (lambda xs: statistics.median(xs) if xs else float("nan"))
    return {
        "learners": n, "spread_s": spread, "notebook": notebook, "cores": os.cpu_count(),
        "load_average_before": load_before, "load_average_after": load_after,
        "solo_s": solo.total_s if solo.error is None else None,
        "solo_start_s": solo.start_s, "solo_notebook_s": solo.run_s,
        "median_s": med(total), "max_s": max(total) if total else float("nan"),
        "start_median_s": med([lr.start_s for lr in ok]), "start_max_s": max((lr.start_s for lr in ok), default=None),
        "notebook_median_s": med([lr.run_s for lr in ok]), "notebook_max_s": max((lr.run_s for lr in ok), default=None),
        "errors": sum(1 for lr in learners if lr.error is not None) + (1 if solo.error else 0),
        "error_messages": sorted({lr.error for lr in learners + [solo] if lr.error}),
        "memory_mib_per_learner": med(rss), "memory_mib_max": max(rss) if rss else None,
        "cpu_s_per_learner": med(cpu),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def table(r: dict) -> str:
    f = (lambda x: "-" if x is None or x != x else f"{x:.1f}")
    started = "at once" if not r["spread_s"] else f"over {r['spread_s']:g} s"
    return "\n".join([
        f"# {r['learners']} learner(s), started {started}; "
        f"{r['notebook']} in each; {r['machine']}; load average {r['load_average_before']:.1f} before, "
        f"{r['load_average_after']:.1f} after",
        "| learners | spread | time per learner, median | max | server start, median | notebook, median | solo "
        "| errors | memory per learner (peak RSS) | CPU per learner |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {r['learners']} | {r['spread_s']:g} s | {f(r['median_s'])} s | {f(r['max_s'])} s | "
        f"{f(r['start_median_s'])} s | {f(r['notebook_median_s'])} s | {f(r['solo_s'])} s | {r['errors']} | "
        f"{r['memory_mib_per_learner']:.0f} MiB | {f(r['cpu_s_per_learner'])} s |",
    ])


def last_line(r: dict) -> str:
    f = (lambda x: "nan" if x is None or x != x else f"{x:.1f}")
    return (f"{r['learners']} learners: median {f(r['median_s'])} s, max {f(r['max_s'])} s, solo {f(r['solo_s'])} s, "
            f"errors {r['errors']}, memory {r['memory_mib_per_learner']:.0f} MiB per learner")


def save(r: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    runs = json.loads(path.read_text()) if path.exists() else {}
    key = f"{r['learners']} learners, spread {r['spread_s']:g} s"
    if Path(r["notebook"]).name != DEFAULT_NOTEBOOK.name:
        key += f", {Path(r['notebook']).stem}"
    runs[key] = r
    path.write_text(json.dumps(dict(sorted(runs.items(), key=lambda kv: (kv[1]["learners"], kv[1]["spread_s"]))),
                               indent=1) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--learners", type=int, required=True, help="how many learners start")
    parser.add_argument("--spread", type=float, default=0.0, help="start them over this many seconds (0: at once)")
    parser.add_argument("--notebook", default=str(DEFAULT_NOTEBOOK), help="the course notebook each one runs")
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads per learner (the hub's setting)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds a start or a cell may take")
    parser.add_argument("--json", default=str(RESULTS), help=f"where the runs are kept (default {RESULTS})")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    if args.learners < 1:
        parser.error(f"--learners {args.learners}: give at least 1")
    notebook = (ROOT / args.notebook).resolve()
    if not notebook.is_file():
        parser.error(f"--notebook {args.notebook}: no such notebook")
    cells = code_cells(notebook)
    # the student copy keeps the course's layout: ~/mha-course/notebooks/<name>
    notebook_rel = f"mha-course/notebooks/{notebook.name}"

    def _interrupt(signum, frame):  # a SIGTERM stops the run like Ctrl-C: the hub and the accounts go too
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _interrupt)
    stale = stale_accounts()
    if stale:
        remove_learner_accounts(stale)  # left by an earlier run that was killed (its pid is gone)
    token = secrets.token_hex(32)
    mine = f"{PREFIX}{os.getpid()}-"  # this run's accounts: another run's (or a class's) are never touched
    names = [f"{mine}{i:02d}" for i in range(1, args.learners + 1)]
    solo_name = f"{mine}solo"
    state = Path(tempfile.mkdtemp(prefix="mha-bench-hub-"))
    hub = Hub(port=free_port_block(), password=secrets.token_urlsafe(12), service_token=token,
              state=state, log=state / "hub.log", threads=args.threads, progress=not args.no_progress,
              cull_timeout=3600)
    load_before = os.getloadavg()[0]
    try:
        hub.start()
    except HubError as err:
        print(f"bench_hub: {err}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_create_users(hub.url, token, names + [solo_name]))
        solo_memory = Memory()
        solo = asyncio.run(_run_class(hub.url, token, [solo_name], 0, notebook_rel, cells, solo_memory,
                                      args.timeout, not args.no_progress))[0]
        memory = Memory()
        learners = asyncio.run(_run_class(hub.url, token, names, args.spread, notebook_rel, cells, memory,
                                          args.timeout, not args.no_progress))
    finally:
        hub.stop()
        remove_learner_accounts(names + [solo_name])
    result = summarize(args.learners, args.spread, solo, learners, memory, load_before, os.getloadavg()[0],
                       args.notebook)
    save(result, Path(args.json))
    print(table(result))
    for message in result["error_messages"]:
        print(f"error: {message}")
    if result["errors"]:
        print(f"the hub's log: {state / 'hub.log'}")
    print(last_line(result))
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
