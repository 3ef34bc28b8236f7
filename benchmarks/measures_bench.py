"""Issue 19's measures at 128 tokens on the pretrained model: the value-weighted and residual-and-norm maps, Integrated
Gradients toward a similarity, and the deletion curves.

Run from the repo root: `python -m benchmarks.measures_bench [--threads N] [--seq 128]` (about 2 minutes on 2 idle
cores). Prints a table, then one JSON line with every figure and the machine.

Rows (medians of the repeats; targets from issue 19):
- value + block: MEASURES["value"] and MEASURES["block"] for every layer x head from one trace (target <= 50 ms);
  value_raw and flow (one token, every layer) are listed beside them.
- IG: Integrated Gradients toward the cosine similarity to a second sentence, default steps (target <= 2 s).
- deletion curve: one measure's deletion and insertion curves plus the random order's (target <= 3 s); the whole
  chart (every registered measure and attribution method, scores already computed) is listed beside it.
With --threads 1 the clock is the calling thread's CPU time, which other processes on a shared machine barely
move; otherwise it is wall time. glibc is set up as the app sets it (ui.resources.return_freed_memory: every freed
buffer over 128 kB goes back to the system), so fresh buffers cost their page faults here as on the server.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable

import torch

import encoder  # noqa: E402
from benchmarks.encoder_bench import sentence  # noqa: E402
from benchmarks.machine import cpu_name  # noqa: E402
from encoder.analysis import faithfulness  # noqa: E402
from encoder.analysis.attribution import DEFAULT_STEPS, integrated_gradients, similarity_target  # noqa: E402
from encoder.analysis.measures import MEASURES  # noqa: E402
from ui.resources import return_freed_memory  # noqa: E402

OTHER = "A teacher shows the class how attention moves between the words of a sentence."
TARGETS_S = {"value + block": 0.050, "IG toward similarity": 2.0, "deletion curve (one measure)": 3.0}


def timed(fn: Callable[[], object], clock: Callable[[], float], reps: int) -> dict:
    """Median and best of `reps` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(reps):
        start = clock()
        fn()
        times.append(clock() - start)
    return {"median_s": statistics.median(times), "best_s": min(times), "reps": reps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: PyTorch's choice)")
    parser.add_argument("--seq", type=int, default=128, help="tokens in the sentence, [CLS] and [SEP] included")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    clock = time.thread_time if torch.get_num_threads() == 1 else time.perf_counter
    started = time.perf_counter()
    return_freed_memory()
    info = {"cpu": cpu_name(), "cores": os.cpu_count(), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "python": platform.python_version(), "clock": "thread CPU time" if clock is time.thread_time else "wall",
            "loadavg_1min_start": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}
    model = encoder.load_pretrained(device="cpu")
    trace = encoder.run(model, sentence(args.seq, model.vocab_dir))
    assert trace.seq_len == args.seq, trace.seq_len
    target = similarity_target(OTHER)

    rows = {}
    rows["value + block"] = timed(lambda: (MEASURES["value"].compute(model, trace),
                                           MEASURES["block"].compute(model, trace)), clock, 20)
    rows["value_raw"] = timed(lambda: MEASURES["value_raw"].compute(model, trace), clock, 20)
    rows["flow (one token)"] = timed(lambda: MEASURES["flow"].compute(model, trace, token=5), clock, 2)
    ig = integrated_gradients(model, trace, target)
    rows["IG toward similarity"] = timed(lambda: integrated_gradients(model, trace, target), clock, 3)
    ranked = faithfulness.all_scores(model, trace, target)
    one = {"value": ranked.scores["value"]}
    rows["deletion curve (one measure)"] = timed(lambda: faithfulness.curves(model, trace, target, one), clock, 3)
    rows["whole chart (scores given)"] = timed(
        lambda: faithfulness.curves(model, trace, target, ranked.scores, ranked.labels), clock, 2)
    chart = faithfulness.curves(model, trace, target, ranked.scores, ranked.labels)
    info["loadavg_1min_end"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None

    print(f"machine: {info['cpu']}, {info['cores']} cores, torch {info['torch']}, {info['threads']} threads, "
          f"clock: {info['clock']}, load average {info['loadavg_1min_start']:.1f} -> {info['loadavg_1min_end']:.1f}")
    busy = max(info["loadavg_1min_start"] or 0.0, info["loadavg_1min_end"] or 0.0) > 0.5 * (info["cores"] or 1)
    if busy and clock is time.perf_counter:
        print("warning: other processes kept the cores busy, so these wall times are unreliable; rerun on an idle")
        print("         machine, or with --threads 1 (CPU time, which other processes barely move).")
    print(f"all-MiniLM-L6-v2, {trace.seq_len} tokens; IG: {ig.steps} steps, completeness error "
          f"{abs(ig.delta) / abs(ig.value - ig.baseline_value):.2%}; chart: {len(chart.curves)} curves of "
          f"{len(chart.curves[0].removed)} points")
    head = f"{'what':<30} {'median':>10} {'best':>10} {'target':>8} {'met':>4}"
    print(head)
    print("-" * len(head))
    for name, row in rows.items():
        goal = TARGETS_S.get(name)
        met = "" if goal is None else ("yes" if row["median_s"] <= goal else "no")
        row["target_s"] = goal
        print(f"{name:<30} {row['median_s'] * 1e3:>8.1f} ms {row['best_s'] * 1e3:>7.1f} ms "
              f"{'' if goal is None else f'{goal:g} s':>8} {met:>4}")
    total = time.perf_counter() - started
    print(f"benchmark wall time: {total:.0f} s")
    print(json.dumps({"benchmark": "measures", "machine": info, "seq": trace.seq_len, "ig_steps": ig.steps,
                      "ig_default_steps": DEFAULT_STEPS, "chart_curves": len(chart.curves),
                      "chart_points": len(chart.curves[0].removed), "rows": rows, "wall_s": total}))


if __name__ == "__main__":
    main()
