"""Benchmark: the running time of one multi-head attention forward pass against the sequence length.

Notebook 05's timing figure is drawn from the file this script writes, so the notebook's compared
outputs never depend on the machine that runs it. One forward pass of ``mc.multi_head_attention``,
float64, B = 1, d_model = 32, h = 4 (the crossover T = 2·d_model is at 64), for seq_len 16 ... 2048,
under two thread settings:

- ``blas1``    BLAS pinned to one thread (what ``mha-course execute`` gives a notebook);
- ``default``  no thread variable set (what a learner's JupyterLab kernel gets).

Each (seq_len, setting) point runs in a fresh subprocess: a warm-up call, then --repeats timed
calls; the process reports their median and their minimum. The points alternate within each of
--rounds rounds; a point's result is the median of its processes' medians, and its floor the
smallest minimum (the minimum is what a busy machine disturbs least). The load average is
recorded before and after, so a reader can tell a quiet run from a busy one.

    python benchmarks/bench_complexity.py                 # the sweep notebook 05 reads (about a minute)
    python benchmarks/bench_complexity.py --rounds 5 --repeats 9

Writes benchmarks/results/bench_complexity.json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402  (benchmarks/harness.py, beside this script)

SEQ_LENS = [16, 32, 64, 128, 256, 512, 1024, 2048]
D_MODEL, HEADS = 32, 4
SETTINGS = ["blas1", "default"]


def point(T: int, repeats: int) -> dict:
    """Time one forward pass at seq_len T in this process: {"median", "min"} in seconds."""
    import numpy as np

    import mha_course as mc
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, T, D_MODEL))  # (B, T, d_model)
    params = mc.init_params(D_MODEL, rng=rng)
    times = harness.time_calls(lambda: mc.multi_head_attention(x, params, HEADS), repeats)
    return {"median": statistics.median(times), "min": min(times)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-lens", type=int, nargs="+", default=SEQ_LENS)
    parser.add_argument("--settings", nargs="+", default=SETTINGS, choices=sorted(harness.SETTINGS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", default="bench_complexity", help="results name or a .json path")
    parser.add_argument("--point", nargs=2, type=int, metavar=("T", "REPEATS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.point:
        print(json.dumps(point(*args.point)))
        return 0
    if min(args.seq_lens) < 1 or args.rounds < 1 or args.repeats < 1:
        parser.error(f"--seq-lens, --rounds and --repeats must be >= 1, got {args.seq_lens}, "
                     f"{args.rounds}, {args.repeats}")
    load_before = harness.load_average()
    sides = [(T, s) for s in args.settings for T in args.seq_lens]
    runs = {side: [] for side in sides}
    order = harness.alternating(sides, args.rounds)
    with harness.progress(len(order), "bench_complexity") as bar:
        for _, (T, setting) in order:
            runs[(T, setting)].append(harness.run_point(__file__, [T, args.repeats], setting))
            bar.update()
    results = {}
    for setting in args.settings:
        rows = []
        for T in args.seq_lens:
            done = [r for r in runs[(T, setting)] if "median" in r]
            rows.append({"seq_len": T,
                         "median_s": harness.median_of_medians(done),
                         "min_s": min(r["min"] for r in done) if done else None,
                         "errors": [r["error"] for r in runs[(T, setting)] if "error" in r]})
        results[setting] = rows
    data = {"command": harness.command(__file__, sys.argv[1:] if argv is None else argv),
            "machine": harness.machine(), "load_before": load_before, "load_after": harness.load_average(),
            "d_model": D_MODEL, "h": HEADS, "batch": 1, "dtype": "float64",
            "rounds": args.rounds, "repeats": args.repeats, "settings": results}
    path = harness.write_results(args.out, data)
    print(data["command"])
    print(f"load {load_before} -> {data['load_after']};  d_model={D_MODEL}, h={HEADS}")
    print(f"{'seq_len':>8}" + "".join(f"{s + ' median':>18}{s + ' min':>14}" for s in args.settings))
    for i, T in enumerate(args.seq_lens):
        cells = ""
        for s in args.settings:
            row = results[s][i]
            cells += (f"{row['median_s'] * 1e3:>15.3f} ms{row['min_s'] * 1e3:>11.3f} ms"
                      if row["median_s"] is not None else f"{'failed':>18}{'':>14}")
        print(f"{T:>8}{cells}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
