"""How long the explorer takes to answer a slider change, per mode and size (no browser).

    python benchmarks/bench_explorer.py            # prints a table: mode x sizes -> median ms

What is timed is exactly what a slider change runs in the kernel: ``SizeControls`` fires
the explorer's callback, which computes the one Trace, updates the visible mode's figure in
place, draws it with Agg and encodes the PNG that goes to the browser. The slider alternates
between two values of h (or of seq_len), so every call really changes the picture. Sending
the PNG over the websocket and decoding it in the browser are not included.

Targets: median <= 150 ms at the default sizes (d_model <= 64, seq_len <= 16) and
<= 400 ms at d_model = 512, seq_len = 128. BLAS is pinned to one thread, as in the notebooks.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402  (benchmarks/harness.py: loads mha_course/runtime.py by path, before numpy)

for _var in harness.THREAD_VARS:
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import numpy as np  # noqa: E402

from mha_course.explorer import MODES, Explorer  # noqa: E402

# (label, Explorer sizes, {slider: the two values it alternates between}, target ms)
CASES = [
    ("d_model=16, h=4, seq_len=6 (default)", dict(d_model=16, h=4, seq_len=6),
     {"h": (4, 2), "seq_len": (6, 7)}, 150),
    ("d_model=64, h=8, seq_len=16", dict(d_model=64, h=8, seq_len=16),
     {"h": (8, 4), "seq_len": (16, 15)}, 150),
    ("d_model=512, h=8, seq_len=128", dict(d_model=512, h=8, seq_len=128,
                                          d_model_options=(64, 512), seq_len_range=(1, 128)),
     {"h": (8, 4), "seq_len": (128, 127)}, 400),
]


def time_slider(explorer: Explorer, mode: str, slider: str, values, repeats: int):
    """(wall ms, CPU ms) of each change of ``slider`` with ``mode`` visible, after a warm-up."""
    explorer.mode.value = mode
    explorer.controls.set(**{slider: values[1]})  # warm-up: builds the mode's figure once
    wall, cpu = [], []
    for i in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        explorer.controls.set(**{slider: values[i % 2]})  # what the browser's slider triggers
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    explorer.controls.set(**{slider: values[0]})
    return 1e3 * np.array(wall), 1e3 * np.array(cpu)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="slider changes per cell (default 15)")
    args = parser.parse_args(argv)
    print(f"$ python benchmarks/bench_explorer.py --repeats {args.repeats}")
    print(f"python {platform.python_version()}, matplotlib {matplotlib.__version__}, "
          f"{os.cpu_count()} CPUs, BLAS threads {os.environ['OPENBLAS_NUM_THREADS']}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"median wall-clock ms per slider change [median CPU ms of this process], "
          f"{args.repeats} changes each\n")
    print("| sizes | slider | target | " + " | ".join(MODES) + " |")
    print("|---|---|---|" + "---|" * len(MODES))
    failed = False
    for label, sizes, sliders, target in CASES:
        explorer = Explorer(**sizes)
        for slider, values in sliders.items():
            cells = []
            for mode in MODES:
                wall, cpu = time_slider(explorer, mode, slider, values, args.repeats)
                failed |= bool(np.median(wall) > target)
                cells.append(f"{np.median(wall):.0f} [{np.median(cpu):.0f}]")
            print(f"| {label} | {slider} | <= {target} | " + " | ".join(cells) + " |")
    print("\nall medians within target" if not failed else "\nSOME MEDIANS ABOVE TARGET")
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
