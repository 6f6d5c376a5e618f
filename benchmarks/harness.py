"""What every benchmark here shares: fresh processes, thread settings, medians of medians, results json.

A measurement is a *point*: one workload under one thread setting, timed in a process of its own
(so that no library's spinning threads, warm caches or allocator state from an earlier point slow
or speed the next). The points are run in rounds, alternating the sides within each round, so that
the machine's bursts of load fall on every side alike; each process reports the median of its timed
calls, and the result of a point is the median of its processes' medians.

Thread settings (``SETTINGS``): ``default`` has no thread variable set, which is what a learner's
JupyterLab kernel gets from ``make course``; ``blas1`` / ``blas2`` pin OpenBLAS, OpenMP and MKL to
1 or 2 threads. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are left as the environment has them (the
header of each result says which were set and which kernel ran).
"""
from __future__ import annotations

import importlib.util
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _load_runtime():
    """mha_course/runtime.py, loaded by path: importing the package would start numpy (and its BLAS)
    before a benchmark has set its thread variables."""
    path = Path(__file__).resolve().parents[1] / "mha_course" / "runtime.py"
    spec = importlib.util.spec_from_file_location("_mha_course_runtime", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


runtime = _load_runtime()
THREAD_VARS = runtime.THREAD_VARS  # the BLAS thread variables, named once in mha_course/runtime.py
SETTINGS = {
    "default": {},  # no thread variable: what a learner's kernel gets
    "blas1": {v: "1" for v in THREAD_VARS},
    "blas2": {v: "2" for v in THREAD_VARS},
}
SETTING_NAMES = {"default": "no thread variable set", "blas1": "BLAS pinned to 1 thread",
                 "blas2": "BLAS pinned to 2 threads"}


def setting_env(setting: str) -> dict:
    """The environment of a fresh process under ``setting``: every thread variable removed, then set."""
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS and k != runtime.THREADS_VAR}
    env.update(SETTINGS[setting])
    return env


def run_point(script: str, args: list, setting: str = "default", timeout: float = 1800) -> dict:
    """Run ``python script --point args...`` in a fresh process under ``setting``; its last stdout line as JSON."""
    cmd = [sys.executable, script, "--point", *map(str, args)]
    try:
        done = subprocess.run(cmd, env=setting_env(setting), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        return {"error": f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"}
    return json.loads(lines[-1])


def time_calls(fn, repeats: int, warmup: int = 1) -> list:
    """Wall seconds of ``repeats`` calls of ``fn()`` after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def alternating(sides: list, rounds: int) -> list:
    """[(round, side), ...]: every side once per round, the order rotated from round to round."""
    order = []
    for r in range(rounds):
        k = r % len(sides)
        order += [(r, s) for s in sides[k:] + sides[:k]]
    return order


def median_of_medians(results: list) -> float | None:
    """The median of the per-process medians ("median" in each result), or None if none succeeded."""
    medians = [r["median"] for r in results if "median" in r]
    return statistics.median(medians) if medians else None


def load_average() -> float:
    """The 1-minute load average (how busy the machine was), or -1 where it cannot be read."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return -1.0


def blas_kernel() -> str:
    """numpy's BLAS as threadpoolctl names it: library, version, kernel, default thread count."""
    from threadpoolctl import threadpool_info
    for lib in threadpool_info():
        if lib.get("user_api") == "blas":
            return (f"{lib['internal_api']} {lib.get('version')} ({lib.get('architecture', '?')} kernel, "
                    f"{lib['num_threads']} threads by default)")
    return "BLAS not found by threadpoolctl"


def machine() -> dict:
    """What the numbers were measured on (the header of every results file)."""
    import numpy as np
    env = {v: os.environ.get(v, "unset") for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    return {"cpus": os.cpu_count(), "machine": platform.machine(), "python": platform.python_version(),
            "numpy": np.__version__, "blas": blas_kernel(), **env}


def version(package: str) -> str:
    """The installed version of ``package`` (without importing it), or "not installed"."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed
    try:
        return installed(package)
    except PackageNotFoundError:
        return "not installed"


def command(script: str, argv: list) -> str:
    """The command line that reproduces a run, as the README shows it: python benchmarks/NAME.py ARGS."""
    return shlex.join(["python", f"benchmarks/{Path(script).name}", *argv])


def write_results(name: str, data: dict) -> Path:
    """Write ``data`` to benchmarks/results/NAME.json (or to NAME itself when it is a path ending in
    .json), sorted keys, one trailing newline; return the path."""
    path = Path(name) if name.endswith(".json") else RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path


def read_results(name: str) -> dict:
    """benchmarks/results/NAME.json as a dict (``bench_mha``, ``bench_threads``, ``bench_efficient``)."""
    return json.loads((RESULTS / f"{name}.json").read_text())


def progress(total: int, desc: str):
    """A tqdm bar on stderr (tqdm is a core dependency of the course)."""
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit="process", file=sys.stderr)
