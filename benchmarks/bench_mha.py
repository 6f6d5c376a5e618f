"""Benchmark: mha_course.multi_head_attention against torch.nn.MultiheadAttention, each in its own process.

Both do the same work: float32, B=1, d_model=512, h=8, self-attention, per-head weights
returned (torch: need_weights=True, average_attn_weights=False, under torch.no_grad()). Each
side runs in a fresh process of its own with no thread variable set (what a learner's
JupyterLab kernel gets: numpy's BLAS and torch each on every core), so neither library's
spinning threads slow the other; the processes alternate, ours and torch's, round after round.
Each process times --repeats calls after a warm-up and reports their median; a side's time is
the median of its processes' medians. One more process per seq_len runs both and reports the
largest difference of their outputs and weights.

    python benchmarks/bench_mha.py                  # seq_len 128 ... 4096, 5 rounds (a few minutes)
    python benchmarks/bench_mha.py --quick          # 128, 512, 1024, 3 rounds
    python benchmarks/bench_mha.py --seq-lens 512 2048 --rounds 7

Writes benchmarks/results/bench_mha.json (the README's table: python benchmarks/readme_tables.py).
Target: ours / torch at most 1.0 at every seq_len from 128 to 4096.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402  (benchmarks/harness.py, beside this script)

D_MODEL, HEADS, BATCH = 512, 8, 1
SEQ_LENS = [128, 256, 512, 1024, 2048, 4096]
QUICK_SEQ_LENS = [128, 512, 1024]
REPEATS = {128: 40, 256: 30, 512: 15, 1024: 8, 2048: 5, 4096: 3}  # timed calls per process


def problem(seq_len: int):
    """x (1, T, 512) and MHAParams, float32, from a generator seeded by T."""
    import mha_course as mc
    rng = np.random.default_rng(seq_len)
    params = mc.init_params(D_MODEL, rng=rng, dtype=np.float32)
    return rng.standard_normal((BATCH, seq_len, D_MODEL), dtype=np.float32), params


def torch_module(torch, params):
    """nn.MultiheadAttention with our parameters copied in (x @ W is torch's x @ W.T)."""
    m = torch.nn.MultiheadAttention(D_MODEL, HEADS, bias=False, batch_first=True).eval()
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.from_numpy(np.concatenate([params.W_q.T, params.W_k.T, params.W_v.T])))
        m.out_proj.weight.copy_(torch.from_numpy(np.ascontiguousarray(params.W_o.T)))
    return m


def side_fn(side: str, seq_len: int):
    """The call to time: ours or torch's forward pass at ``seq_len`` (out and per-head weights)."""
    x, params = problem(seq_len)
    if side == "ours":
        import mha_course as mc
        return lambda: mc.multi_head_attention(x, params, HEADS)
    import torch
    module, xt = torch_module(torch, params), torch.from_numpy(x)

    def theirs():
        with torch.no_grad():
            return module(xt, xt, xt, need_weights=True, average_attn_weights=False)
    return theirs


def point(side: str, seq_len: int, repeats: int) -> dict:
    """In this fresh process: the median of ``repeats`` calls of one side (or, side "diff", the
    largest |difference| between the two sides' outputs and weights)."""
    if side == "diff":
        (out, w), (out_t, w_t) = side_fn("ours", seq_len)(), side_fn("torch", seq_len)()
        return {"max_abs_diff": max(float(np.abs(out - out_t.numpy()).max()), float(np.abs(w - w_t.numpy()).max()))}
    times = harness.time_calls(side_fn(side, seq_len), repeats)
    return {"median": sorted(times)[len(times) // 2], "load": harness.load_average()}


def measure(seq_lens, rounds: int, script: str) -> list:
    """One row per seq_len: each side's per-process medians, the median of those, the ratio, the diff."""
    rows = []
    bar = harness.progress(len(seq_lens) * (2 * rounds + 1), "bench_mha")
    for T in seq_lens:
        runs = {"ours": [], "torch": []}
        for _, side in harness.alternating(["ours", "torch"], rounds):
            runs[side].append(harness.run_point(script, [side, T, REPEATS.get(T, 5)]))
            bar.update(1)
        diff = harness.run_point(script, ["diff", T, 1])
        bar.update(1)
        ours, theirs = harness.median_of_medians(runs["ours"]), harness.median_of_medians(runs["torch"])
        rows.append({"seq_len": T, "ours_s": ours, "torch_s": theirs,
                     "ratio": None if not (ours and theirs) else ours / theirs,
                     "ours_medians": [r.get("median") for r in runs["ours"]],
                     "torch_medians": [r.get("median") for r in runs["torch"]],
                     "errors": [r["error"] for r in runs["ours"] + runs["torch"] if "error" in r],
                     "max_abs_diff": diff.get("max_abs_diff")})
    bar.close()
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seq_len 128, 512, 1024 and 3 rounds")
    parser.add_argument("--seq-lens", type=int, nargs="+", metavar="T", help="seq_len values to time")
    parser.add_argument("--rounds", type=int, help="processes per side and seq_len (default 5, quick 3)")
    parser.add_argument("--out", default="bench_mha", help="results name in benchmarks/results/ (or a path ending in .json)")
    parser.add_argument("--point", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.point:
        print(json.dumps(point(args.point[0], int(args.point[1]), int(args.point[2]))))
        return 0
    seq_lens = args.seq_lens or (QUICK_SEQ_LENS if args.quick else SEQ_LENS)
    rounds = args.rounds or (3 if args.quick else 5)
    argv = sys.argv[1:] if argv is None else argv
    start_load = harness.load_average()
    rows = measure(seq_lens, rounds, __file__)
    data = {"benchmark": "bench_mha", "command": harness.command(__file__, argv),
            "setting": harness.SETTING_NAMES["default"], "rounds": rounds, "repeats": REPEATS,
            "work": f"float32, B={BATCH}, d_model={D_MODEL}, h={HEADS}, self-attention, per-head weights returned; "
                    "torch: nn.MultiheadAttention(need_weights=True, average_attn_weights=False), no_grad",
            "load_average": {"start": start_load, "end": harness.load_average()},
            "machine": {**harness.machine(), "torch": harness.version("torch")}, "rows": rows}
    path = harness.write_results(args.out, data)
    from readme_tables import mha_table
    print(mha_table(data))
    print(f"\nwritten to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
