"""Benchmark: a training step of mha_course.train (numpy, our backward pass) against the same
model trained with torch autograd, and the wall time for the induction model to reach 95 %.

Both sides train the shipped induction config (``train.CHECKPOINT_CONFIGS["induction"]``:
2 layers, d_model=32, h=2, seq_len=24, batch 32, float64) from the SAME initial parameters on
the SAME batches (drawn by ``train.make_batch``), with Adam; the torch model is written with
the same ops (x @ W, causal mask, softmax, @ V, residuals, cross-entropy on the scored
positions) and torch.optim.Adam. Before timing, the first losses of both are compared (they
must agree to 1e-9: the same model). Each side runs in its own process with the same
OMP/OPENBLAS/MKL thread count (and torch.set_num_threads), so their threads cannot compete.

Then, in a process of its own, our model trains from scratch until its accuracy on the second
half of 512 fixed held-out induction sequences reaches 95 % (checked every 25 steps, the
checks included in the wall time).

    python benchmarks/bench_training.py                 # 2 threads, 300 timed steps
    python benchmarks/bench_training.py --threads 1 --steps 100
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time

import numpy as np

from mha_course import runtime
from mha_course.lessons import checkpoints, training
from mha_course.lessons import model as tr

CONFIG = checkpoints.CHECKPOINT_CONFIGS["induction"]
TARGET = 0.95


def _batches(n: int):
    rng = np.random.default_rng(CONFIG.seed)
    return [tr.make_batch(CONFIG, rng) for _ in range(n)]


def numpy_side(steps: int) -> dict:
    """Steps/s of our numpy step (loss_and_grads + adam_step), and its first losses."""
    params = tr.init_model(CONFIG, np.random.default_rng(CONFIG.seed))
    state, losses, batches = training.adam_init(params), [], _batches(steps + 5)
    for i, batch in enumerate(batches):
        if i == 5:
            start = time.perf_counter()  # 5 untimed warm-up steps
        metrics, grads = training.loss_and_grads(params, batch, CONFIG)
        params, state = training.adam_step(params, grads, state, CONFIG.lr)
        losses.append(metrics.loss)
    return {"steps_per_s": steps / (time.perf_counter() - start), "losses": losses[:5]}


def _torch_model(torch, params):
    leaf = lambda a: torch.tensor(a, requires_grad=True)  # noqa: E731
    return {"embed": leaf(params.embed), "pos": leaf(params.pos), "unembed": leaf(params.unembed),
            "layers": [[leaf(a) for a in layer[:4]] for layer in params.layers]}


def _torch_loss(torch, m, batch):
    tokens, targets = torch.from_numpy(batch.tokens), torch.from_numpy(batch.targets)
    scored = torch.from_numpy(batch.scored)
    B, T = tokens.shape
    h, D = CONFIG.h, CONFIG.d_model
    x = m["embed"][tokens] + m["pos"][:T]
    blocked = ~torch.tril(torch.ones(T, T, dtype=torch.bool))
    for W_q, W_k, W_v, W_o in m["layers"]:
        Qh, Kh, Vh = ((x @ W).reshape(B, T, h, D // h).transpose(1, 2) for W in (W_q, W_k, W_v))
        scores = (Qh @ Kh.transpose(-1, -2) / (D // h) ** 0.5).masked_fill(blocked, -float("inf"))
        out = (torch.softmax(scores, -1) @ Vh).transpose(1, 2).reshape(B, T, D) @ W_o
        x = x + out
    logits = x @ m["unembed"]
    return torch.nn.functional.cross_entropy(logits[scored], targets[scored])


def torch_side(steps: int, threads: int) -> dict:
    """Steps/s of the same model with torch autograd and torch.optim.Adam, and its first losses."""
    import torch
    torch.set_num_threads(threads)
    m = _torch_model(torch, tr.init_model(CONFIG, np.random.default_rng(CONFIG.seed)))
    leaves = [m["embed"], m["pos"], m["unembed"], *[w for layer in m["layers"] for w in layer]]
    opt = torch.optim.Adam(leaves, lr=CONFIG.lr, betas=(0.9, 0.999), eps=1e-8)
    losses = []
    for i, batch in enumerate(_batches(steps + 5)):
        if i == 5:
            start = time.perf_counter()
        opt.zero_grad()
        loss = _torch_loss(torch, m, batch)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return {"steps_per_s": steps / (time.perf_counter() - start), "losses": losses[:5],
            "torch": torch.__version__}


def time_to_target() -> dict:
    """Wall time (s) and steps for our model to reach TARGET accuracy on held-out sequences."""
    held_out = tr.make_batch(CONFIG, np.random.default_rng(12345), 512)
    reached = {}

    def check(step, metrics, params):
        if step % 25 == 24:
            logits, _ = tr.forward(params, held_out.tokens, CONFIG)
            accuracy = float((logits.argmax(-1) == held_out.targets)[held_out.scored].mean())
            if accuracy >= TARGET:
                reached.update(step=step + 1, accuracy=accuracy)
                return True
        return False
    start = time.perf_counter()
    training.train(CONFIG._replace(steps=5000), callback=check)
    return {"seconds": time.perf_counter() - start, **reached}


def _in_process(side: str, threads: int, steps: int) -> dict:
    env = {**os.environ, **runtime.thread_env(threads)}
    cmd = [sys.executable, __file__, "--side", side, "--threads", str(threads), "--steps", str(steps)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{side} side failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _report(ours: dict, theirs: dict, target: dict, gap: float, threads: int) -> None:
    c = CONFIG
    print(f"# training step, {c.n_layers} layers, d_model={c.d_model}, h={c.h}, seq_len={c.seq_len}, "
          f"batch={c.batch}, float64, {threads} thread(s); {platform.processor() or platform.machine()}, "
          f"numpy {np.__version__}, torch {theirs['torch']}; first 5 losses agree to {gap:.1e}; "
          f"load average {os.getloadavg()[0]:.1f}")
    print("| | steps/s | time per step |")
    print("|---|---|---|")
    for name, r in (("mha_course (numpy, our backward)", ours), ("torch autograd + torch.optim.Adam", theirs)):
        print(f"| {name} | {r['steps_per_s']:.1f} | {1000 / r['steps_per_s']:.2f} ms |")
    print(f"\nour step takes {theirs['steps_per_s'] / ours['steps_per_s']:.2f}x torch's (target <= 1.5x)")
    print(f"induction to {TARGET:.0%} held-out accuracy: {target['seconds']:.1f} s wall, "
          f"{target.get('step', 'not reached in 5000')} steps (accuracy {target.get('accuracy', float('nan')):.3f}; "
          f"target <= 60 s)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2, help="BLAS / torch threads of each side (default 2)")
    ap.add_argument("--steps", type=int, default=300, help="timed training steps per side (default 300)")
    ap.add_argument("--side", choices=["numpy", "torch", "target"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.side:
        result = {"numpy": lambda: numpy_side(args.steps), "torch": lambda: torch_side(args.steps, args.threads),
                  "target": time_to_target}[args.side]()
        print(json.dumps(result))
        return 0
    ours, theirs = (_in_process(s, args.threads, args.steps) for s in ("numpy", "torch"))
    gap = float(np.abs(np.subtract(ours["losses"], theirs["losses"])).max())
    if gap > 1e-9:
        raise SystemExit(f"the two models differ: first losses {ours['losses']} vs {theirs['losses']}")
    target = _in_process("target", args.threads, args.steps)
    _report(ours, theirs, target, gap, args.threads)
    print(f"\ncommand: python benchmarks/bench_training.py {shlex.join(argv or sys.argv[1:])}".rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
