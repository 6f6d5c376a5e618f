"""Benchmark: mha_course.multi_head_attention against torch.nn.MultiheadAttention.

Both do the same work: float32, B=1, d_model=512, h=8, self-attention, per-head weights
returned (torch: need_weights=True, average_attn_weights=False, under torch.no_grad()),
torch on as many threads as numpy's BLAS. For each seq_len it prints the median wall time
of each, their ratio, and the GFLOP/s each reaches (8·T·d_model² + 4·T²·d_model FLOPs,
from mha_course.complexity) next to the np.matmul float32 peak measured in the same run.

    python benchmarks/bench_mha.py                 # seq_len 128 ... 4096
    python benchmarks/bench_mha.py --quick         # fewer sizes and repeats
    python benchmarks/bench_mha.py --seq-lens 512 2048

On machines where OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are set (to work around old
OpenBLAS bugs), numpy may run a slower kernel; to measure the real one, unset both in
the benchmark command only: `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python ...`.
The header says which were set and which BLAS kernel ran.
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

import mha_course as mc
from mha_course.lessons.complexity import attention_flops, projection_flops

D_MODEL, HEADS, BATCH = 512, 8, 1
SEQ_LENS = [128, 512, 1024, 2048, 4096]
QUICK_SEQ_LENS = [128, 512, 1024]


def blas_info() -> tuple[int, str]:
    """(numpy's BLAS thread count, a description of its library and kernel)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return os.cpu_count() or 1, "BLAS threads unknown (threadpoolctl not installed): using os.cpu_count()"
    for lib in threadpool_info():
        if lib.get("user_api") == "blas" and "numpy" in lib.get("filepath", ""):
            return lib["num_threads"], (f"{lib['internal_api']} {lib.get('version')}, kernel "
                                        f"{lib.get('architecture', '?')}, {lib['num_threads']} threads")
    return os.cpu_count() or 1, "numpy's BLAS not found by threadpoolctl: using os.cpu_count()"


def median_times(fns: dict, repeats: int, rounds: int = 2) -> dict:
    """Median wall time in seconds of each ``fn()`` over ``repeats`` timed calls, in ``rounds``.

    Each round times every fn in a group of its own (a pause, one untimed warm-up call, then
    the timed calls), so the BLAS/OpenMP threads that one library leaves spinning after its
    last call do not slow the other; alternating the groups over the rounds spreads bursts
    of load from elsewhere on the machine over both sides.
    """
    times = {name: [] for name in fns}
    per_round = max(1, -(-repeats // rounds))
    for _ in range(rounds):
        for name, fn in fns.items():
            time.sleep(0.3)
            fn()
            for _ in range(per_round):
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def matmul_peak(repeats: int, n: int = 2048) -> float:
    """GFLOP/s of the fastest of ``repeats`` float32 (n, n) @ (n, n) np.matmul calls (2·n³ FLOPs)."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    out = np.matmul(a, b)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        np.matmul(a, b, out=out)
        times.append(time.perf_counter() - start)
    return 2 * n**3 / min(times) / 1e9


def torch_module(torch, params: mc.MHAParams):
    """nn.MultiheadAttention with our parameters copied in (x @ W is torch's x @ W.T)."""
    m = torch.nn.MultiheadAttention(D_MODEL, HEADS, bias=False, batch_first=True).eval()
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.from_numpy(np.concatenate([params.W_q.T, params.W_k.T, params.W_v.T])))
        m.out_proj.weight.copy_(torch.from_numpy(np.ascontiguousarray(params.W_o.T)))
    return m


def measure(torch, seq_len: int, repeats: int) -> dict:
    """Median seconds of ours and torch's forward pass at one seq_len, and their max |difference|."""
    rng = np.random.default_rng(seq_len)
    params = mc.init_params(D_MODEL, rng=rng, dtype=np.float32)
    x = rng.standard_normal((BATCH, seq_len, D_MODEL), dtype=np.float32)
    module, xt = torch_module(torch, params), torch.from_numpy(x)

    def ours():
        return mc.multi_head_attention(x, params, HEADS)

    def theirs():
        with torch.no_grad():
            return module(xt, xt, xt, need_weights=True, average_attn_weights=False)

    (out, w), (out_t, w_t) = ours(), theirs()
    diff = max(float(np.abs(out - out_t.numpy()).max()), float(np.abs(w - w_t.numpy()).max()))
    del out, w, out_t, w_t
    return {**median_times({"ours": ours, "torch": theirs}, repeats), "diff": diff}


def table(rows: dict, peak: float) -> str:
    """The markdown table of the results."""
    lines = ["| seq_len | ours (ms) | torch (ms) | ours / torch | ours GFLOP/s | torch GFLOP/s | "
             "np.matmul peak GFLOP/s | max abs diff |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for T, r in rows.items():
        flops = projection_flops(T, D_MODEL) + attention_flops(T, D_MODEL)
        lines.append(f"| {T} | {r['ours'] * 1e3:.1f} | {r['torch'] * 1e3:.1f} | {r['ours'] / r['torch']:.2f} | "
                     f"{flops / r['ours'] / 1e9:.0f} | {flops / r['torch'] / 1e9:.0f} | {peak:.0f} | "
                     f"{r['diff']:.1e} |")
    return "\n".join(lines)


def header(torch, threads: int, blas: str, repeats: int) -> str:
    env = ", ".join(f"{v}={os.environ[v]!r}" if v in os.environ else f"{v} unset"
                    for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"))
    return (f"float32, B={BATCH}, d_model={D_MODEL}, h={HEADS}, self-attention, per-head weights returned; "
            f"torch: nn.MultiheadAttention(need_weights=True, average_attn_weights=False), no_grad; "
            f"median of {repeats} calls each, timed in alternating groups.\n"
            f"numpy {np.__version__} ({blas}); torch {torch.__version__} on {torch.get_num_threads()} "
            f"threads (= {threads}); {env}; Python {platform.python_version()}, "
            f"{os.cpu_count()} CPUs, {platform.machine()}.")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seq_len 128, 512, 1024 with 4 repeats")
    parser.add_argument("--seq-lens", type=int, nargs="+", metavar="T", help="seq_len values to time")
    parser.add_argument("--repeats", type=int, help="timed calls of each (default 8, quick 4)")
    args = parser.parse_args(argv)
    seq_lens = args.seq_lens or (QUICK_SEQ_LENS if args.quick else SEQ_LENS)
    repeats = args.repeats or (4 if args.quick else 8)

    import torch
    threads, blas = blas_info()
    torch.set_num_threads(threads)
    peak = matmul_peak(repeats)
    print(f"np.matmul float32 peak: {peak:.0f} GFLOP/s", file=sys.stderr)
    rows = {}
    for i, T in enumerate(seq_lens, 1):
        rows[T] = measure(torch, T, repeats)
        print(f"[{i}/{len(seq_lens)}] seq_len={T}: ours {rows[T]['ours'] * 1e3:.1f} ms, "
              f"torch {rows[T]['torch'] * 1e3:.1f} ms", file=sys.stderr, flush=True)
    command = " ".join(shlex.quote(a) for a in ["python", os.path.relpath(sys.argv[0]), *sys.argv[1:]])
    print(f"$ {command}\n\n{header(torch, threads, blas, repeats)}\n\n{table(rows, peak)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
