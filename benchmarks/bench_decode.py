"""Benchmark: the time of one generated token with and without the KV cache, by position.

The model has the structure of the shipped induction checkpoint (2 layers, d_model 32, h 2,
learned positions, float64) with random weights and a position table long enough for the
longest position: weights do not change the time, and the checkpoint only knows 24 positions.
At each position t (tokens already seen) it times one decode step:

- with the cache: one token through every layer, reading t cached keys and values
  (``decode.forward_cached``; the prefill of t tokens is done first and not timed);
- without: ``train.forward`` over all t + 1 tokens, as the no-cache loop does every step.

The two are timed alternately in one run (median of ``--repeats``), so the ratio is taken
under the same machine load. ``--d-model/--h/--h-kv/--layers`` time a wider model.

``--quality`` instead trains the induction model from scratch as MHA (h_kv = h), GQA and MQA
with the same budget (the shipped checkpoint's config: steps, batch, lr, seed) and prints the
accuracy on the second copy of 1,024 test sequences, and the cache bytes per token.

    python benchmarks/bench_decode.py                       # positions 256, 1024, 2048
    python benchmarks/bench_decode.py --quick               # fewer repeats
    python benchmarks/bench_decode.py --d-model 256 --h 8 --h-kv 2 --positions 1024 2048
    python benchmarks/bench_decode.py --quality --h 4      # MHA, GQA (h_kv 2), MQA, same budget
"""
from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import sys
import time

import numpy as np

from mha_course import runtime
from mha_course.gqa import kv_cache_bytes_per_token
from mha_course.lessons import checkpoints, training
from mha_course.lessons import gqa as decode
from mha_course.lessons.complexity import format_bytes

POSITIONS = [256, 1024, 2048]


def measure(config, params, position: int, repeats: int, rng) -> dict:
    """Median seconds of one step with and without the cache, timed alternately.

    Each cache sample is the best of 3 successive decode steps after its prefill (a step is
    short, so one interruption of the process would otherwise decide it); each no-cache
    sample is one forward pass over position + 1 tokens.
    """
    times = {"cache": [], "no cache": []}
    for _ in range(repeats):
        for name in times:
            times[name].append(decode.step_seconds(params, config, position, use_cache=name == "cache",
                                                   repeats=3 if name == "cache" else 1, rng=rng))
    return {name: statistics.median(v) for name, v in times.items()}


def table(rows: dict, config) -> str:
    per_token = kv_cache_bytes_per_token(config.n_layers, config.h_kv or config.h,
                                         config.d_model // config.h, bytes_per_number=8)
    lines = ["| position | with cache (ms/token) | without (ms/token) | speed-up | cache size |",
             "|---:|---:|---:|---:|---:|"]
    for t, r in rows.items():
        lines.append(f"| {t} | {r['cache'] * 1e3:.3f} | {r['no cache'] * 1e3:.2f} | "
                     f"{r['no cache'] / r['cache']:.0f}x | {format_bytes(per_token * t)} |")
    return "\n".join(lines)


def quality(base, h: int) -> str:
    """Train MHA / GQA / MQA versions of ``base`` with h heads and one budget; a table of their accuracy."""
    lines = ["| variant | h | h_kv | accuracy (second copy) | loss | cache bytes per token (fp16) | train s |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for h_kv in sorted({h, max(1, h // 2), 1}, reverse=True):
        config = base._replace(h=h, h_kv=h_kv)
        start = time.perf_counter()
        params, _ = training.train(config)
        seconds = time.perf_counter() - start
        m = training.evaluate(params, config, np.random.default_rng(12345), n=1024)
        name = "MHA" if h_kv == h else "MQA" if h_kv == 1 else "GQA"
        per_token = kv_cache_bytes_per_token(config.n_layers, h_kv, config.d_model // h, 2)
        lines.append(f"| {name} | {h} | {h_kv} | {m.accuracy:.1%} | {m.loss:.3f} | {per_token} | {seconds:.0f} |")
        print(f"{name} h_kv={h_kv}: accuracy {m.accuracy:.1%} after {config.steps} steps", file=sys.stderr)
    return "\n".join(lines)


def header(config, repeats: int) -> str:
    threads = {v: os.environ.get(v, "unset") for v in runtime.THREAD_VARS}
    return (f"model: {config.n_layers} layers, d_model {config.d_model}, h {config.h}, "
            f"h_kv {config.h_kv or config.h}, vocab {config.vocab}, float64, random weights; "
            f"median of {repeats} alternating repeats; numpy {np.__version__}, "
            f"Python {platform.python_version()}, {os.cpu_count()} cores, {threads}, "
            f"load average {os.getloadavg()[0]:.1f}")


BASE = checkpoints.CHECKPOINT_CONFIGS["induction"]


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--positions", type=int, nargs="+", default=POSITIONS)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="3 repeats")
    ap.add_argument("--quality", action="store_true", help="train MHA, GQA, MQA with one budget instead")
    ap.add_argument("--steps", type=int, default=BASE.steps, help="with --quality: the training budget")
    for name in ("d_model", "h", "h_kv", "n_layers"):
        ap.add_argument("--" + name.replace("_", "-").replace("n-layers", "layers"), dest=name,
                        type=int, default=getattr(BASE, name))
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    repeats = 3 if args.quick else args.repeats
    command = "python " + " ".join(shlex.quote(a) for a in ["benchmarks/bench_decode.py", *(argv or sys.argv[1:])])
    if args.quality:
        base = BASE._replace(steps=args.steps)
        budget = f"budget: {base.steps} steps of batch {base.batch}, lr {base.lr}, seed {base.seed}"
        print(f"$ {command}\n\ninduction, {base.n_layers} layers, d_model {base.d_model}; {budget}\n\n"
              f"{quality(base, args.h)}")
        return 0
    structure = BASE._replace(d_model=args.d_model, h=args.h, h_kv=args.h_kv, n_layers=args.n_layers)
    config, params = decode.timing_model(structure, max(args.positions) + 3)  # room for 3 timed steps
    rng, rows = np.random.default_rng(0), {}
    for i, t in enumerate(args.positions, 1):
        rows[t] = measure(config, params, t, repeats, rng)
        print(f"[{i}/{len(args.positions)}] position {t}: {rows[t]['cache'] * 1e3:.3f} ms with the cache, "
              f"{rows[t]['no cache'] * 1e3:.1f} ms without", file=sys.stderr)
    print(f"$ {command}\n\n{header(config, repeats)}\n\n{table(rows, config)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
