"""Benchmark: time and peak memory of attention at long sequences, naive against tiled and sliding.

One attention call, float32, B=1, h=8, d_k=d_v=64, self-attention (T = S = seq_len),
no mask, for seq_len 1024 ... 16384, five ways:

- ``textbook``  mha_course.scaled_dot_product_attention: scores, shifted scores, exp and
  weights are each a new (B, h, T, S) array (a MemoryError is caught and reported);
- ``in-place``  a careful naive version: one (B, h, T, S) array, the softmax done in it;
- ``tiled``     mha_course.tiled_attention: an online softmax over key blocks, no T x S array;
- ``sliding``   mha_course.sliding_window_attention with a window of 256 (a different, banded
  attention: its memory target is the point, its time is for scale);
- ``torch``     torch.nn.functional.scaled_dot_product_attention (CPU, its default threads).

Each point runs in a fresh subprocess with no thread variable set (the package chooses its own
threads), so the peak resident memory (ru_maxrss of that process: the interpreter, the inputs and
everything the call allocates) belongs to that call alone and the libraries' threads never
compete. The methods alternate within each of --rounds rounds; a process reports the median of
its --repeats calls (one call from 8192 on), a point the median of its processes' medians and
the largest of their peaks. The textbook and in-place runs are capped at --mem-limit-gib of
address space so a too-big run raises MemoryError instead of waking the OOM killer.

    python benchmarks/bench_efficient.py                       # the full sweep (several minutes)
    python benchmarks/bench_efficient.py --seq-lens 1024 2048  # a quick look
    python benchmarks/bench_efficient.py --methods tiled sliding torch --seq-lens 16384

Writes benchmarks/results/bench_efficient.json (the README's table: python benchmarks/readme_tables.py).
Targets: at 16384 the tiled peak RSS <= 1 GiB and its time <= 1.5x torch's; the sliding
window's peak RSS <= 256 MiB.
"""
from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402  (benchmarks/harness.py, beside this script)

SEQ_LENS = [1024, 2048, 4096, 8192, 16384]
METHODS = ["textbook", "in-place", "tiled", "sliding", "torch"]
HEADS, D_K, WINDOW = 8, 64, 256
GIB, MIB = 2**30, 2**20
TARGETS = {"tiled_peak": GIB, "tiled_over_torch": 1.5, "sliding_peak": 256 * MIB}


def inputs(T: int):
    """Q, K, V (1, h, T, d_k) float32 from a seeded generator."""
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal((1, HEADS, T, D_K), dtype=np.float32) for _ in range(3))


def in_place_naive(Q, K, V):
    """Attention with one (B, h, T, S) array: scores, then the softmax in that same array."""
    Qs = Q * np.float32(1 / math.sqrt(Q.shape[-1]))
    w = Qs @ np.swapaxes(K, -1, -2)  # (B, h, T, d_k) x (B, h, d_k, S) -> (B, h, T, S)
    w -= w.max(axis=-1, keepdims=True)
    np.exp(w, out=w)
    w *= 1 / w.sum(axis=-1, keepdims=True)
    return w @ V  # (B, h, T, S) x (B, h, S, d_v) -> (B, h, T, d_v)


def attention_fn(method: str):
    """The function to time for ``method``: fn(Q, K, V) -> out."""
    import mha_course as mc
    if method == "textbook":
        return lambda Q, K, V: mc.scaled_dot_product_attention(Q, K, V)[0]
    if method == "in-place":
        return in_place_naive
    if method == "tiled":
        return mc.tiled_attention
    if method == "sliding":
        return lambda Q, K, V: mc.sliding_window_attention(Q, K, V, WINDOW)
    import torch
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def run(Q, K, V):
        with torch.no_grad():
            return sdpa(*(torch.from_numpy(a) for a in (Q, K, V))).numpy()
    return run


def measure_point(method: str, T: int, repeats: int) -> dict:
    """In this (fresh) process: the median of ``repeats`` calls and this process's peak RSS."""
    fn = attention_fn(method)
    Q, K, V = inputs(T)
    try:
        times = harness.time_calls(lambda: fn(Q, K, V), 1 if T >= 8192 else repeats, warmup=0 if T >= 8192 else 1)
    except MemoryError as exc:
        return {"error": f"MemoryError ({str(exc)[:60]})"}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    return {"median": statistics.median(times), "peak_bytes": peak, "load": harness.load_average()}


def sweep(seq_lens, methods, repeats: int, rounds: int, mem_limit_gib: float) -> list:
    """One row per seq_len and method: its median of medians, its largest peak (or its error)."""
    rows, bar = [], harness.progress(len(seq_lens) * len(methods) * rounds, "bench_efficient")
    for T in seq_lens:
        runs = {m: [] for m in methods}
        for _, method in harness.alternating(list(methods), rounds):
            runs[method].append(harness.run_point(__file__, [method, T, "--repeats", repeats,
                                                             "--mem-limit-gib", mem_limit_gib]))
            bar.update(1)
        for m, rs in runs.items():
            ok = [r for r in rs if "median" in r]
            if not ok:
                rows.append({"seq_len": T, "method": m, "error": rs[0].get("error", "failed")})
                continue
            peak = max(r["peak_bytes"] for r in ok)
            rows.append({"seq_len": T, "method": m, "seconds": harness.median_of_medians(ok), "peak_bytes": peak,
                         "peak_gib": peak / GIB, "medians": [r["median"] for r in ok]})
    bar.close()
    return rows


def ratio(rows, method: str, T: int) -> float | None:
    """``method``'s time over torch's at seq_len ``T``, or None."""
    got = {r["method"]: r.get("seconds") for r in rows if r["seq_len"] == T}
    return got[method] / got["torch"] if got.get(method) and got.get("torch") else None


def targets(rows) -> str:
    """The targets at the longest seq_len measured, as a sentence."""
    T = max(r["seq_len"] for r in rows)
    at = {r["method"]: r for r in rows if r["seq_len"] == T}
    checks = []
    if "peak_bytes" in at.get("tiled", {}):
        checks.append(f"tiled peak {at['tiled']['peak_gib']:.2f} GiB <= 1 GiB: {at['tiled']['peak_bytes'] <= GIB}")
    if ratio(rows, "tiled", T) is not None:
        r = ratio(rows, "tiled", T)
        checks.append(f"tiled / torch {r:.2f}x <= 1.5x: {r <= TARGETS['tiled_over_torch']}")
    if "peak_bytes" in at.get("sliding", {}):
        peak = at["sliding"]["peak_bytes"]
        checks.append(f"sliding peak {peak / MIB:.0f} MiB <= 256 MiB: {peak <= TARGETS['sliding_peak']}")
    return f"targets at seq_len {T}: " + "; ".join(checks)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seq-lens", type=int, nargs="+", default=SEQ_LENS)
    p.add_argument("--methods", nargs="+", choices=METHODS, default=METHODS)
    p.add_argument("--repeats", type=int, default=3, help="timed calls per process below 8192 (the median kept)")
    p.add_argument("--rounds", type=int, default=2, help="processes per method and seq_len, alternating")
    p.add_argument("--mem-limit-gib", type=float, default=16.0, help="address-space cap of the naive runs")
    p.add_argument("--out", default="bench_efficient", help="results name in benchmarks/results/ (or a path ending in .json)")
    p.add_argument("--point", nargs=2, metavar=("METHOD", "SEQ_LEN"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.point:
        method, T = args.point[0], int(args.point[1])
        if method in ("textbook", "in-place"):
            limit = int(args.mem_limit_gib * GIB)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        print(json.dumps(measure_point(method, T, args.repeats)))
        return
    argv = sys.argv[1:] if argv is None else argv
    start_load = harness.load_average()
    rows = sweep(args.seq_lens, args.methods, args.repeats, args.rounds, args.mem_limit_gib)
    data = {"benchmark": "bench_efficient", "command": harness.command(__file__, argv),
            "setting": harness.SETTING_NAMES["default"], "methods": args.methods, "rounds": args.rounds,
            "work": f"one call, float32, B=1, h={HEADS}, d_k={D_K}, self-attention, no mask (sliding: window "
                    f"{WINDOW}); a fresh process per point, peak = its max RSS; textbook/in-place capped at "
                    f"{args.mem_limit_gib:g} GiB",
            "load_average": {"start": start_load, "end": harness.load_average()},
            "machine": {**harness.machine(), "torch": harness.version("torch")}, "rows": rows}
    path = harness.write_results(args.out, data)
    from readme_tables import efficient_table
    print(efficient_table(data))
    print(targets(rows))
    print(f"written to {path}")


if __name__ == "__main__":
    main()
