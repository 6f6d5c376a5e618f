"""CPU time per call at small T: ours vs nn.MultiheadAttention, each in a fresh process, BLAS pinned to 1 thread (torch too): CPU time per
call (process_time, robust to a busy machine), wall time per call, and minor page faults per call. Variants:
ours with the allocator setting (default) and with MHA_COURSE_KEEP_FREED_MEMORY=0; torch alone, and torch
with the allocator setting applied (what bench_mha did before: its torch process imported mha_course).

    python benchmarks/bench_small_t.py 2 128 256 512 1024    # rounds, then seq_lens (the README's table)
"""
import json
import os
import subprocess
import sys

CHILD = r'''
import json, os, resource, sys, time
side, T = sys.argv[1], int(sys.argv[2])
import numpy as np
sys.path.insert(0, os.environ["BENCH_DIR"])
import bench_mha as b
if side.startswith("torch"):
    import torch; torch.set_num_threads(1)
    if side == "torch+malloc":
        from mha_course import runtime; runtime.keep_freed_memory()
f = b.side_fn("ours" if side.startswith("ours") else "torch", T)
n = {128: 100, 256: 50, 512: 20, 1024: 8, 2048: 4}[T]
for _ in range(max(3, n // 10)): f()
cpu, wall = [], []
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(n):
    c, w = time.process_time(), time.perf_counter(); f(); cpu.append(time.process_time() - c); wall.append(time.perf_counter() - w)
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / n
cpu.sort(); wall.sort()
print(json.dumps({"cpu": sum(cpu) / n, "cpu_med": cpu[n // 2], "wall_med": wall[n // 2], "faults": faults}))
'''
env = {**os.environ, "BENCH_DIR": os.path.dirname(os.path.abspath(__file__)), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
sides = {"ours": {}, "ours-malloc": {"MHA_COURSE_KEEP_FREED_MEMORY": "0"}, "torch": {}, "torch+malloc": {}}
Ts = [int(t) for t in sys.argv[2:]] or [128, 256, 512, 1024, 2048]
res = {}
for r in range(int(sys.argv[1])):
    for T in Ts:
        for side, extra in sides.items():
            out = subprocess.run([sys.executable, "-c", CHILD, side, str(T)], capture_output=True, text=True, env={**env, **extra})
            if out.returncode: print(out.stderr[-500:]); continue
            res.setdefault((side, T), []).append(json.loads(out.stdout)); print(r, side, T, out.stdout.strip(), flush=True)
    print("round", r, "load", os.getloadavg(), flush=True)
med = lambda xs: sorted(xs)[len(xs) // 2]
for T in Ts:
    row = {s: {k: med([p[k] for p in res[(s, T)]]) for k in ("cpu", "cpu_med", "wall_med", "faults")} for s in sides if (s, T) in res}
    print(f"T={T}: " + "; ".join(f"{s} cpu {v['cpu_med']*1e3:.2f} ms (mean {v['cpu']*1e3:.2f}) wall {v['wall_med']*1e3:.2f} faults {v['faults']:.0f}" for s, v in row.items()))
    o, t = row["ours"]["cpu_med"], row["torch"]["cpu_med"]
    print(f"   ratio ours/torch cpu {o/t:.2f}; ours(no malloc)/torch {row['ours-malloc']['cpu_med']/t:.2f}; ours/torch+malloc {o/row['torch+malloc']['cpu_med']:.2f}")
