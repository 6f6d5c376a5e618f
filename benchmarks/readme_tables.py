"""The README's speed tables, made from the results files in benchmarks/results/.

    python benchmarks/readme_tables.py            # prints the markdown of every table
    python benchmarks/readme_tables.py bench_mha  # one of them

Each block is the command that measured it, the thread setting and the load average, then the
table; tests/cross/test_efficient_readme.py holds the README's speed section equal to what this prints.
The results files are written by bench_mha.py, bench_threads.py and bench_efficient.py.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402  (benchmarks/harness.py, beside this script)

GIB = 2**30


def _header(data: dict) -> list:
    m, load = data["machine"], data["load_average"]
    return [f"$ {data['command']}", "",
            f"{data['work']}; {data['setting']}; load average {load['start']:.1f} at the start, "
            f"{load['end']:.1f} at the end; {m['cpus']} CPUs, {m['machine']}, numpy {m['numpy']} ({m['blas']}), "
            f"OPENBLAS_CORETYPE {m['OPENBLAS_CORETYPE']}, OPENBLAS_L2_SIZE {m['OPENBLAS_L2_SIZE']}", ""]


def _ms(seconds) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"


def mha_table(data: dict) -> str:
    """bench_mha.json -> its block: seq_len, ours and torch's medians of medians, their ratio, the diff."""
    lines = _header(data) + ["| seq_len | ours (ms) | torch (ms) | ours / torch | max abs diff |",
                             "|---:|---:|---:|---:|---:|"]
    for r in data["rows"]:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        diff = "-" if r["max_abs_diff"] is None else f"{r['max_abs_diff']:.1e}"
        lines.append(f"| {r['seq_len']} | {_ms(r['ours_s'])} | {_ms(r['torch_s'])} | {ratio} | {diff} |")
    return "\n".join(lines)


def threads_table(data: dict) -> str:
    """bench_threads.json -> its block: each workload under each thread setting, default / best pinned."""
    names = [harness.SETTING_NAMES[s] for s in data["settings"]]
    lines = _header(data) + ["| workload | " + " | ".join(f"{n} (ms)" for n in names) + " | default / best pinned |",
                             "|---|" + "---:|" * (len(names) + 1)]
    for r in data["rows"]:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        lines.append(f"| {r['workload']} | " + " | ".join(_ms(r["seconds"].get(s)) for s in data["settings"])
                     + f" | {ratio} |")
    return "\n".join(lines)


def _cell(r: dict | None) -> str:
    if not r:
        return "-"
    if "seconds" in r:
        return f"{r['seconds']:.2f} s, {r['peak_gib']:.2f} GiB"
    return "MemoryError" if r.get("error", "").startswith("MemoryError") else "failed"


def efficient_table(data: dict) -> str:
    """bench_efficient.json -> its block: time and peak RSS per method and seq_len, the ratios to torch."""
    methods = data["methods"]
    lines = _header(data) + ["| seq_len | " + " | ".join(f"{m} time, peak RSS" for m in methods)
                             + " | tiled / torch | sliding / torch |", "|---|" + "---|" * (len(methods) + 2)]
    for T in sorted({r["seq_len"] for r in data["rows"]}):
        at = {r["method"]: r for r in data["rows"] if r["seq_len"] == T}
        ratios = [at[m]["seconds"] / at["torch"]["seconds"] if "seconds" in at.get(m, {})
                  and "seconds" in at.get("torch", {}) else None for m in ("tiled", "sliding")]
        lines.append(f"| {T} | " + " | ".join(_cell(at.get(m)) for m in methods) + " | "
                     + " | ".join("-" if x is None else f"{x:.2f}x" for x in ratios) + " |")
    return "\n".join(lines)


TABLES = {"bench_mha": mha_table, "bench_threads": threads_table, "bench_efficient": efficient_table}
# Results that a notebook reads wait in results/pending/ until that notebook is re-executed with them
# (notebook 10 prints benchmarks/results/bench_efficient.json when it exists): move the file up then.
PENDING = harness.RESULTS / "pending"


def results_file(name: str) -> Path | None:
    """Where NAME's results are: benchmarks/results/NAME.json, else results/pending/NAME.json, else None."""
    for folder in (harness.RESULTS, PENDING):
        if (folder / f"{name}.json").exists():
            return folder / f"{name}.json"
    return None


def tables() -> dict:
    """{results name: its markdown block} for every results file that exists."""
    import json
    return {name: fn(json.loads(results_file(name).read_text())) for name, fn in TABLES.items()
            if results_file(name) is not None}


def main(argv=None) -> int:
    names = (sys.argv[1:] if argv is None else argv) or list(TABLES)
    made = tables()
    for name in names:
        print(f"```\n{made[name]}\n```\n" if name in made else f"(no benchmarks/results/{name}.json yet)\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
