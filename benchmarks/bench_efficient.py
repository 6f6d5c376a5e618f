"""Benchmark: time and peak memory of attention at long sequences, naive against tiled.

One attention call, float32, B=1, h=8, d_k=d_v=64, self-attention (T = S = seq_len),
no mask, for seq_len 1024 ... 16384, four ways:

- ``textbook``  mha_course.scaled_dot_product_attention: scores, shifted scores, exp and
  weights are each a new (B, h, T, S) array (a MemoryError is caught and reported);
- ``in-place``  a careful naive version: one (B, h, T, S) array, the softmax done in it;
- ``tiled``     mha_course.tiled_attention: an online softmax over key blocks, no T x S array
  (its thread pool does the parallel work, so its process runs BLAS on one thread);
- ``torch``     torch.nn.functional.scaled_dot_product_attention (CPU, all cores).

Each point runs in a fresh subprocess, so the peak resident memory (ru_maxrss of that
process: the interpreter, the inputs and everything the call allocates) belongs to that
call alone and the libraries' threads never compete. Time: the best of --repeats calls
(one call from 8192 on). The textbook and in-place runs are capped at --mem-limit-gib of
address space so a too-big run raises MemoryError instead of waking the OOM killer.

    python benchmarks/bench_efficient.py                       # the full sweep (a few minutes)
    python benchmarks/bench_efficient.py --seq-lens 1024 2048  # a quick look
    python benchmarks/bench_efficient.py --methods tiled torch

Targets (issue 14): at 16384 the tiled peak RSS <= 1 GiB, its time <= 1.1x in-place
and <= 2.5x torch.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shlex
import subprocess
import sys
import time

import numpy as np

SEQ_LENS = [1024, 2048, 4096, 8192, 16384]
METHODS = ["textbook", "in-place", "tiled", "torch"]
HEADS, D_K = 8, 64
GIB = 2**30


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
    import torch
    torch.set_num_threads(os.cpu_count() or 1)
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def run(Q, K, V):
        with torch.no_grad():
            return sdpa(*(torch.from_numpy(a) for a in (Q, K, V))).numpy()
    return run


def measure_point(method: str, T: int, repeats: int) -> dict:
    """In this (fresh) process: best time of ``repeats`` calls and this process's peak RSS."""
    fn = attention_fn(method)
    Q, K, V = inputs(T)
    times = []
    try:
        for _ in range(1 if T >= 8192 else repeats):
            start = time.perf_counter()
            fn(Q, K, V)
            times.append(time.perf_counter() - start)
    except MemoryError as exc:
        return {"error": f"MemoryError ({str(exc)[:60]})"}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    return {"seconds": min(times), "peak_bytes": peak}


def run_point(method: str, T: int, repeats: int, mem_limit_gib: float) -> dict:
    """One point in a fresh subprocess; its JSON line back as a dict."""
    env = dict(os.environ)
    if method == "tiled":  # the thread pool is the parallelism; a threaded BLAS on small tiles only spins
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = [sys.executable, __file__, "--point", method, str(T), "--repeats", str(repeats),
           "--mem-limit-gib", str(mem_limit_gib)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        return {"error": f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"}
    return json.loads(lines[-1])


def progress(total: int):
    """A tqdm bar if tqdm is installed, else a plain counter on stderr; call .update(1), .close()."""
    try:
        from tqdm import tqdm
        return tqdm(total=total, desc="sweep", unit="point")
    except ImportError:
        class Counter:
            n = 0

            def update(self, k):
                self.n += k
                print(f"  point {self.n}/{total}", file=sys.stderr, flush=True)

            def close(self):
                pass
        return Counter()


def sweep(seq_lens, methods, repeats: int, mem_limit_gib: float) -> dict:
    """{(method, T): result} for every point, each run in its own subprocess."""
    results, bar = {}, progress(len(seq_lens) * len(methods))
    for T in seq_lens:
        for method in methods:
            results[method, T] = run_point(method, T, repeats, mem_limit_gib)
            bar.update(1)
    bar.close()
    return results


def cell(r: dict) -> str:
    """'1.23 s, 0.45 GiB', or what went wrong."""
    if "seconds" in r:
        return f"{r['seconds']:.2f} s, {r['peak_bytes'] / GIB:.2f} GiB"
    return "MemoryError" if r["error"].startswith("MemoryError") else f"failed ({r['error'][:40]})"


def ratio(results, a: str, b: str, T: int) -> float | None:
    ra, rb = results.get((a, T), {}), results.get((b, T), {})
    return ra["seconds"] / rb["seconds"] if "seconds" in ra and "seconds" in rb else None


def table(results, seq_lens, methods) -> str:
    """The markdown table: time and peak RSS per method, then tiled's time ratios."""
    head = "| seq_len | " + " | ".join(f"{m} time, peak RSS" for m in methods) + " | tiled / in-place | tiled / torch |"
    rows = [head, "|" + "---|" * (len(methods) + 3)]
    for T in seq_lens:
        r1, r2 = ratio(results, "tiled", "in-place", T), ratio(results, "tiled", "torch", T)
        rows.append(f"| {T} | " + " | ".join(cell(results[m, T]) for m in methods)
                    + " | " + " | ".join("-" if r is None else f"{r:.2f}x" for r in (r1, r2)) + " |")
    return "\n".join(rows)


def targets(results, T: int) -> str:
    tiled = results.get(("tiled", T), {})
    if "seconds" not in tiled:
        return f"targets at {T}: no tiled result"
    r1, r2 = ratio(results, "tiled", "in-place", T), ratio(results, "tiled", "torch", T)
    checks = [f"tiled peak {tiled['peak_bytes'] / GIB:.2f} GiB <= 1 GiB: {tiled['peak_bytes'] <= GIB}"]
    checks += [f"tiled/{n} {r:.2f}x <= {lim}x: {r <= lim}" for n, r, lim in (("in-place", r1, 1.1), ("torch", r2, 2.5))
               if r is not None]
    return f"targets at seq_len {T}: " + "; ".join(checks)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seq-lens", type=int, nargs="+", default=SEQ_LENS)
    p.add_argument("--methods", nargs="+", choices=METHODS, default=METHODS)
    p.add_argument("--repeats", type=int, default=3, help="timed calls per point below 8192 (best kept)")
    p.add_argument("--mem-limit-gib", type=float, default=16.0, help="address-space cap of the naive runs")
    p.add_argument("--point", nargs=2, metavar=("METHOD", "SEQ_LEN"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.point:
        method, T = args.point[0], int(args.point[1])
        if method in ("textbook", "in-place"):
            limit = int(args.mem_limit_gib * GIB)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        print(json.dumps(measure_point(method, T, args.repeats)))
        return
    print("$ python benchmarks/bench_efficient.py " + shlex.join(argv if argv is not None else sys.argv[1:]))
    print(f"float32, B=1, h={HEADS}, d_k={D_K}, self-attention; {os.cpu_count()} cores; each point a fresh "
          f"process; peak = that process's max RSS; textbook/in-place capped at {args.mem_limit_gib:g} GiB")
    results = sweep(args.seq_lens, args.methods, args.repeats, args.mem_limit_gib)
    print(table(results, args.seq_lens, args.methods))
    print(targets(results, max(args.seq_lens)))


if __name__ == "__main__":
    main()
