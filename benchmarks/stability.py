"""The Training stability page's numbers: the three default runs (wall time, loss, accuracy) and the gradient trend.

Run from the repo root: `python -m benchmarks.stability` (about a minute on 2 cores), `--seeds 0 1 2` for more
seeds, `--trend` to add the gradient norms at initialisation for depths 6, 12, 24 (Xiong et al. 2020).
Prints tables, then one JSON line with every figure and the machine it ran on.

The claim checked (issue 4): at lr 3e-3 with Adam, a 6-layer d_model 128 encoder trained to reverse random token
sequences stays at the chance loss with Post-LN and no warm-up, and learns with Post-LN plus warm-up and with
Pre-LN without warm-up; the three runs take under 60 s together on a 2-core CPU. Wall time depends on what
else the machine runs: the load average at start and end and the process CPU time are printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import torch

from benchmarks.machine import cpu_name
from encoder.analysis import stability


def machine() -> dict:
    cpu = cpu_name()
    return {"cpu": cpu, "cores": os.cpu_count(), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "python": platform.python_version()}


def load() -> float | None:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--lr", type=float, default=stability.LR)
    parser.add_argument("--steps", type=int, default=stability.STEPS)
    parser.add_argument("--warmup", type=int, default=stability.WARMUP_STEPS)
    parser.add_argument("--trend", action="store_true", help="also measure the gradient norms at initialisation")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads for this process (default: torch's choice, 2 on a 2-core machine); with 1, "
                        "the CPU time measures the work alone even when other processes compete for the cores")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)  # this script's process only; the library never sets it

    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores, torch {info['torch']}, {info['threads']} threads")
    print(f"task: reverse {stability.TASK}, 6 layers, d_model 128, lr {args.lr}, {args.steps} steps, "
          f"warm-up {args.warmup} steps (linear, then constant)\n")
    runs, seeds = [], []
    print(f"{'seed':>4}  {'run':<22} {'final loss':>10} {'chance':>7} {'accuracy':>9} {'learned':>8} {'seconds':>8}")
    for seed in args.seeds:
        load_start, wall, cpu = load(), time.perf_counter(), time.process_time()
        results = stability.compare_runs(args.lr, args.steps, args.warmup, seed=seed)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        for label, r in results.items():
            print(f"{seed:>4}  {label:<22} {r.final_loss:>10.3f} {r.chance_loss:>7.3f} {r.accuracy:>9.3f} "
                  f"{'yes' if r.learned else 'no':>8} {r.seconds:>8.1f}")
            runs.append({"seed": seed, "run": label, "final_loss": round(r.final_loss, 4), "accuracy": round(r.accuracy, 4),
                         "learned": r.learned, "seconds": round(r.seconds, 2),
                         # mean training loss over the 10 steps up to every 50th step: when did it break away?
                         "loss_by_step": {s: round(sum(r.losses[s - 10:s]) / 10, 3) for s in range(50, len(r.losses) + 1, 50)}})
        cold, warm, pre = results.values()
        holds = not cold.learned and warm.learned and pre.learned
        seeds.append({"seed": seed, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "claim_holds": holds,
                      "load_start": load_start, "load_end": load()})
        print(f"      three runs: {wall:.1f} s wall, {cpu:.1f} s CPU, load average {load_start:.1f} -> {load():.1f}; "
              f"claim {'holds' if holds else 'FAILS'}\n")

    trend = []
    if args.trend:
        df = stability.depth_trend()
        print(df.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        trend = df.round(4).to_dict(orient="records")
    print(json.dumps({"benchmark": "stability", "machine": info, "lr": args.lr, "steps": args.steps,
                      "warmup_steps": args.warmup, "task": stability.TASK, "seeds": seeds, "runs": runs,
                      "trend": trend}))


if __name__ == "__main__":
    main()
