"""ALTI, Value Zeroing and DecompX on the pretrained model: time at 128 tokens, and DecompX's peak memory at 512.

Run from the repo root: `python -m benchmarks.contributions_bench [--threads N] [--skip-512]` (a few minutes on
2 cores). Prints a table, then one JSON line with every figure and the machine it ran on.

Times are medians over rounds that take the measures in turn, so a busy neighbour slows them alike. With
--threads 1 the clock is the thread's CPU time (the work alone, which other processes barely move), as in
encoder_bench.py. The 512-token figures come from a child process whose peak resident memory is reset (Linux
/proc/self/clear_refs) after the model and the trace are loaded, so the peak is what the measure itself holds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as app.py sets it: waiting threads yield the cores

import torch  # noqa: E402

import encoder  # noqa: E402
from benchmarks import encoder_bench  # noqa: E402
from benchmarks.encoder_bench import gemm_peak, machine, sentence  # noqa: E402
from encoder.analysis import alti, decompx, value_zeroing  # noqa: E402

TARGETS_S = {"alti": 0.150, "value_zeroing": 1.5, "decompx": 2.0}  # issue 27, 128 tokens, all layers
MEASURES = {
    "alti": lambda m, t: alti.alti_layers(m, t),
    "value_zeroing": lambda m, t: value_zeroing.zeroing_layers(m, t),
    "decompx": lambda m, t: decompx.decompx_layers(m, t, carry=True),
    "decompx_layer": lambda m, t: decompx.decompx_layers(m, t, carry=False),
}
clock = time.perf_counter


def gflop(cfg: encoder.EncoderConfig, seq: int) -> dict[str, float]:
    """Multiply-adds x 2 of each measure's matrix products over all layers (the elementwise work is left out)."""
    s, d, f, h = seq, cfg.d_model, cfg.d_ff, cfg.num_heads
    alti_ = s * s * h * d  # sum over heads of alpha f_h(x_j), per row and token
    vz = s * s * h * f + s * s * f * d + s * s * h * d  # W1 per head, W2 on every (t, i) row, the deltas
    ffn = min(2 * s * s * d * f, s * (d * f * d + s * d * d))  # part by part, or one matrix per row
    dx = 2 * s * s * d * d + s * s * s * d + ffn  # W_V, the mixing, W_O, the FFN
    dx_layer = s * s * h * d + ffn
    per_layer = {"alti": alti_, "value_zeroing": vz, "decompx": dx, "decompx_layer": dx_layer}
    return {k: 2 * v * cfg.num_layers / 1e9 for k, v in per_layer.items()}


def time_measures(model: encoder.Encoder, trace: encoder.Trace, rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {k: [] for k in MEASURES}
    for fn in MEASURES.values():  # warm-up: allocator, kernels
        fn(model, trace)
    for _ in range(rounds):
        for key, fn in MEASURES.items():
            t0 = clock()
            fn(model, trace)
            times[key].append(clock() - t0)
    return times


def _peak_kb() -> int:
    return int(re.search(r"VmHWM:\s+(\d+)", Path("/proc/self/status").read_text()).group(1))


def child_512(key: str) -> None:
    """In a fresh process: one measure at 512 tokens, its wall time and the peak memory it added (JSON on stdout)."""
    model = encoder.load_pretrained(device="cpu")
    trace = encoder.run(model, sentence(512, model.vocab_dir))
    assert trace.seq_len == 512
    Path("/proc/self/clear_refs").write_text("5")  # the peak so far becomes the current resident size
    base = _peak_kb()
    t0, c0 = time.perf_counter(), time.thread_time()
    MEASURES[key](model, trace)
    wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
    print(json.dumps({"measure": key, "seq": 512, "wall_s": wall, "thread_cpu_s": cpu,
                      "peak_added_mb": (_peak_kb() - base) / 1024}))


def run_512(key: str, threads: int | None) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.contributions_bench", "--child-512", key]
    cmd += [f"--threads={threads}"] if threads else []
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1]).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: PyTorch's choice)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--skip-512", action="store_true", help="leave out the 512-token runs (minutes under load)")
    parser.add_argument("--child-512", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    global clock
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.child_512:
        child_512(args.child_512)
        return
    if torch.get_num_threads() == 1:
        clock = encoder_bench.clock = time.thread_time  # the GEMM peak probe too
    t_start = time.perf_counter()
    info = machine() | {"clock": "wall" if clock is time.perf_counter else "thread CPU time",
                        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "")}
    mm = torch.randn(2048, 2048), torch.randn(2048, 2048), torch.empty(2048, 2048)
    peak = gemm_peak(*mm)
    model = encoder.load_pretrained(device="cpu")
    trace = encoder.run(model, sentence(128, model.vocab_dir))
    assert trace.seq_len == 128
    times = time_measures(model, trace, args.rounds)
    flops = gflop(model.cfg, 128)
    rows = {}
    for key, ts in times.items():
        median = statistics.median(ts)
        rows[key] = {"median_s": median, "best_s": min(ts), "gflop": flops[key], "gflops": flops[key] / median,
                     "target_s": TARGETS_S.get(key), "met": median <= TARGETS_S[key] if key in TARGETS_S else None}
    big = {} if args.skip_512 else {key: run_512(key, args.threads) for key in ("alti", "decompx", "value_zeroing")}
    peak = max(peak, gemm_peak(*mm))
    info["loadavg_1min_end"] = os.getloadavg()[0]

    print(f"machine: {info['cpu']}, {info['cores']} cores, torch {info['torch']}, {info['threads']} threads, "
          f"clock: {info['clock']}, load average {info['loadavg_1min_start']:.1f} -> {info['loadavg_1min_end']:.1f}")
    if max(info["loadavg_1min_start"], info["loadavg_1min_end"]) > 0.5 * (info["cores"] or 1) and clock is time.perf_counter:
        print("warning: other processes kept the cores busy, so these wall times are unreliable; rerun on an idle "
              "machine, or with --threads 1 (CPU time).")
    print(f"fp32 GEMM peak seen: {peak:.1f} GFLOP/s; pretrained all-MiniLM-L6-v2, 128 tokens, all 6 layers")
    head = f"{'measure':<15} {'median s':>9} {'best s':>7} {'target s':>9} {'met':>4} {'GFLOP':>7} {'GFLOP/s':>8} {'% peak':>7}"
    print(head)
    print("-" * len(head))
    for key, r in rows.items():
        target = f"{r['target_s']:.3f}" if r["target_s"] else "-"
        met = "-" if r["met"] is None else ("yes" if r["met"] else "NO")
        print(f"{key:<15} {r['median_s']:>9.3f} {r['best_s']:>7.3f} {target:>9} {met:>4} {r['gflop']:>7.1f} "
              f"{r['gflops']:>8.1f} {100 * r['gflops'] / peak:>6.1f}%")
    for key, r in big.items():
        print(f"512 tokens, {key}: {r['wall_s']:.1f} s wall ({r['thread_cpu_s']:.1f} s CPU of the calling thread), "
              f"peak memory added {r['peak_added_mb']:.0f} MB")
    total = time.perf_counter() - t_start
    print(f"benchmark wall time: {total:.0f} s")
    print(json.dumps({"benchmark": "contributions", "machine": info, "gemm_peak_gflops": peak, "seq": 128,
                      "rows": rows, "seq_512": big, "decompx_max_bytes": decompx.MAX_BYTES, "wall_s": total}))


if __name__ == "__main__":
    main()
