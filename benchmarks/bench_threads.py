"""Benchmark: the package's workloads under the thread settings a learner may have.

Each workload is timed in fresh processes with no thread variable set (what ``make course``
gives a learner's JupyterLab kernel), with BLAS pinned to 1 thread and with BLAS pinned to 2
(OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and MKL_NUM_THREADS), the settings alternating round
after round; each process reports the median of its timed calls, each setting the median of
its processes' medians. The package chooses its own threads (``mha_course.fast.run_jobs``), so
the default must be within 1.25x of the best pinned setting for every workload.

Workloads (float32 unless said; B = 1, h = 8, d_k = 64):
  mha            multi_head_attention, T = 1024, d_model = 512, per-head weights returned
  tiled          tiled_attention, T = 4096, no mask
  tiled causal   tiled_attention(causal=True), T = 4096
  sliding        sliding_window_attention, T = 8192, window 256
  linear         linear_attention, T = 8192
  train step     one training step of notebook 08's induction model (lessons.model: loss_and_grads
                 and adam_step; 2 layers, d_model 32, h 2, batch 32, float64)

    python benchmarks/bench_threads.py                     # every workload, 3 rounds (a few minutes)
    python benchmarks/bench_threads.py --workloads mha tiled --rounds 5

Writes benchmarks/results/bench_threads.json (the README's table: python benchmarks/readme_tables.py).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402  (benchmarks/harness.py, beside this script)

WORKLOADS = ["mha", "tiled", "tiled causal", "sliding", "linear", "train step"]
REPEATS = {"mha": 10, "tiled": 5, "tiled causal": 5, "sliding": 5, "linear": 5, "train step": 40}
SETTINGS = ["default", "blas1", "blas2"]
TARGET = 1.25


def workload(name: str):
    """The call to time for ``name``, its inputs made from a seeded generator."""
    import mha_course as mc
    rng = np.random.default_rng(0)
    if name == "mha":
        params = mc.init_params(512, rng=rng, dtype=np.float32)
        x = rng.standard_normal((1, 1024, 512), dtype=np.float32)
        return lambda: mc.multi_head_attention(x, params, 8)
    if name == "train step":
        from mha_course.lessons import checkpoints, model, training
        config = checkpoints.CHECKPOINT_CONFIGS["induction"]
        state = {"params": model.init_model(config, np.random.default_rng(config.seed))}
        state["adam"] = training.adam_init(state["params"])
        batches = [model.make_batch(config, rng) for _ in range(8)]

        def step():
            batch = batches[step.i % len(batches)]
            step.i += 1
            _, grads = training.loss_and_grads(state["params"], batch, config)
            state["params"], state["adam"] = training.adam_step(state["params"], grads, state["adam"], config.lr)
        step.i = 0
        return step
    T = {"tiled": 4096, "tiled causal": 4096, "sliding": 8192, "linear": 8192}[name]
    Q, K, V = (rng.standard_normal((1, 8, T, 64), dtype=np.float32) for _ in range(3))
    return {"tiled": lambda: mc.tiled_attention(Q, K, V),
            "tiled causal": lambda: mc.tiled_attention(Q, K, V, causal=True),
            "sliding": lambda: mc.sliding_window_attention(Q, K, V, 256),
            "linear": lambda: mc.linear_attention(Q, K, V)}[name]


def point(name: str, repeats: int) -> dict:
    """In this fresh process: the median of ``repeats`` calls of one workload."""
    times = harness.time_calls(workload(name), repeats)
    return {"median": sorted(times)[len(times) // 2], "load": harness.load_average()}


def measure(names, rounds: int, script: str) -> list:
    """One row per workload: each setting's per-process medians and their median, default / best pinned."""
    rows = []
    bar = harness.progress(len(names) * len(SETTINGS) * rounds, "bench_threads")
    for name in names:
        runs = {s: [] for s in SETTINGS}
        for _, setting in harness.alternating(SETTINGS, rounds):
            runs[setting].append(harness.run_point(script, [name, REPEATS[name]], setting))
            bar.update(1)
        seconds = {s: harness.median_of_medians(runs[s]) for s in SETTINGS}
        pinned = [seconds[s] for s in SETTINGS if s != "default" and seconds[s]]
        rows.append({"workload": name, "seconds": seconds,
                     "ratio": seconds["default"] / min(pinned) if seconds["default"] and pinned else None,
                     "medians": {s: [r.get("median") for r in runs[s]] for s in SETTINGS},
                     "errors": [r["error"] for s in SETTINGS for r in runs[s] if "error" in r]})
    bar.close()
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=WORKLOADS, metavar="NAME",
                        help=f"some of: {', '.join(repr(w) for w in WORKLOADS)}")
    parser.add_argument("--rounds", type=int, default=3, help="processes per workload and setting")
    parser.add_argument("--out", default="bench_threads", help="results name in benchmarks/results/ (or a path ending in .json)")
    parser.add_argument("--point", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.point:
        print(json.dumps(point(args.point[0], int(args.point[1]))))
        return 0
    argv = sys.argv[1:] if argv is None else argv
    start_load = harness.load_average()
    rows = measure(args.workloads, args.rounds, __file__)
    data = {"benchmark": "bench_threads", "command": harness.command(__file__, argv),
            "setting": "each workload under " + ", ".join(harness.SETTING_NAMES[s] for s in SETTINGS),
            "settings": SETTINGS, "rounds": args.rounds, "repeats": REPEATS, "target": TARGET,
            "work": "fresh process per run, settings alternating; float32, B=1, h=8, d_k=64 "
                    "(the train step: notebook 08's induction model, float64)",
            "load_average": {"start": start_load, "end": harness.load_average()},
            "machine": harness.machine(), "rows": rows}
    path = harness.write_results(args.out, data)
    from readme_tables import threads_table
    print(threads_table(data))
    bad = [r["workload"] for r in rows if r["ratio"] is None or r["ratio"] > TARGET]
    print(f"\ndefault within {TARGET}x of the best pinned setting: "
          + ("every workload" if not bad else "NOT for " + ", ".join(bad)))
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
