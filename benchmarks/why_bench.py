"""The app side of issues 19 and 27, through AppTest on the pretrained model: what a page sends at 512 tokens, how long
a Measure switch on an already computed trace takes to redraw, and how long the new page's computations take.

Run from the repo root: `python -m benchmarks.why_bench [--quick]` (about 5 minutes on 2 idle cores; --quick leaves
out the 512-token page and the ranking). Prints a table, then one JSON line with every figure and the machine.

Rows:
- payload at 512 tokens (target <= 3 MB per page): Inside a head under each measure (the components' bytes, their
  JS and CSS included: what one run sends), and Why are these similar? after "Compute the attributions" with
  Gradient x Input (the plotly specs).
- measure switch (target <= 150 ms to redraw): a warm rerun of Inside a head at 128 tokens when the Measure select
  moves to a measure already computed for this trace: wall time and the process's CPU time.
- page open: Why are these similar? on a cold cache at 16 and 128 tokens (the attributions of both sentences), then
  the deletion test when asked (every measure and method, the perturbed sentences), and the ranking over the built-in
  sentence pairs.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time

from benchmarks.app_bench import machine, sentence
from devkit.apptest import app_test
from ui import pages
from ui.caches import CACHE

HEAD = pages.page("inside-a-head").file
WHY = pages.page("why-similar").file
PAYLOAD_TARGET = 3_000_000
SWITCH_TARGET_S = 0.150
MEASURES_SHOWN = ("raw", "value", "value_raw", "block", "alti", "rollout", "decompx")


def opened(page: str, params: dict, timeout: float = 1800) -> tuple[object, float, float]:
    """The app on `page` with `params`: (AppTest, wall seconds, process CPU seconds) of the page's own run."""
    at = app_test(params, timeout)
    at.run()
    c0, t0 = time.process_time(), time.perf_counter()
    at.switch_page(page).run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert not at.exception, [e.value for e in at.exception]
    return at, wall, cpu


def component_bytes(at) -> int:
    """What the page's components send in one run (the head view and the three step charts): their payloads, and their
    JS and CSS where inline (served as files under a server and AppTest alike: ui/components.py)."""
    return sum(len(el.proto.bytes) + len(el.proto.js_content) + len(el.proto.css_content)
               for el in at.get("bidi_component"))


def spec_bytes(at) -> int:
    return sum(len(el.proto.spec) for el in at.get("plotly_chart"))


def payloads_512() -> dict:
    text = sentence(512)
    out = {}
    for key in MEASURES_SHOWN:
        at, wall, _ = opened(HEAD, {"text": text, "measure": key})
        out[f"inside-a-head {key}"] = {"bytes": component_bytes(at), "open_s": round(wall, 1)}
    at, _, _ = opened(WHY, {"text": text, "method": "gxi"})
    [button] = [b for b in at.button if b.label == "Compute the attributions"]
    t0 = time.perf_counter()
    button.click().run()
    out["why-similar (Gradient × Input)"] = {"bytes": spec_bytes(at), "open_s": round(time.perf_counter() - t0, 1)}
    return out


def measure_switch(reps: int) -> dict:
    """Warm reruns of Inside a head at 128 tokens, the Measure moving between measures already computed."""
    at, _, _ = opened(HEAD, {"text": sentence(128)})
    order = ("value", "block", "raw", "value_raw")
    for key in order:  # computed once each
        at.selectbox(key="w:measure").set_value(key).run()
    walls, cpus = [], []
    for n in range(reps * len(order)):
        key = order[n % len(order)]
        c0, t0 = time.process_time(), time.perf_counter()
        at.selectbox(key="w:measure").set_value(key).run()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        assert not at.exception
    return {"median_ms": round(1e3 * statistics.median(walls), 1), "min_ms": round(1e3 * min(walls), 1),
            "cpu_median_ms": round(1e3 * statistics.median(cpus), 1), "reps": len(walls)}


def why_open(n_tokens: int) -> dict:
    """The page's first open on a cold cache (the attributions), then "Compute the deletion and insertion curves"."""
    CACHE.clear()
    gc.collect()
    at, wall, cpu = opened(WHY, {"text": sentence(n_tokens), "text_b": sentence(n_tokens, 1)})
    charts = len(at.get("plotly_chart"))
    [button] = [b for b in at.button if b.label == "Compute the deletion and insertion curves"]
    c0, t0 = time.process_time(), time.perf_counter()
    button.click().run()
    curves_wall, curves_cpu = time.perf_counter() - t0, time.process_time() - c0
    assert not at.exception, [e.value for e in at.exception]
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "charts": charts,
            "curves_wall_s": round(curves_wall, 2), "curves_cpu_s": round(curves_cpu, 2)}


def ranking() -> dict:
    at, _, _ = opened(WHY, {})
    [button] = [b for b in at.button if b.label.startswith("Rank the measures")]
    c0, t0 = time.process_time(), time.perf_counter()
    button.click().run()
    return {"wall_s": round(time.perf_counter() - t0, 1), "cpu_s": round(time.process_time() - c0, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="leave out the 512-token payloads and the ranking")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    result = {"machine": machine(), "switch_128": measure_switch(args.reps),
              "why_open": {n: why_open(n) for n in (16, 128)}}
    if not args.quick:
        result["payload_512"] = payloads_512()
        result["ranking"] = ranking()
    result["machine"]["loadavg_end"] = round(__import__("os").getloadavg()[0], 2)
    s = result["switch_128"]
    print(f"Measure switch at 128 tokens, warm (target <= {SWITCH_TARGET_S * 1e3:.0f} ms): median {s['median_ms']} ms, "
          f"min {s['min_ms']} ms, CPU {s['cpu_median_ms']} ms over {s['reps']} reruns")
    for n, row in result["why_open"].items():
        print(f"Why are these similar? cold open at {n} tokens: {row['wall_s']} s wall, {row['cpu_s']} s CPU, "
              f"{row['charts']} charts; then the deletion test {row['curves_wall_s']} s wall, "
              f"{row['curves_cpu_s']} s CPU")
    for name, row in result.get("payload_512", {}).items():
        verdict = "met" if row["bytes"] <= PAYLOAD_TARGET else "OVER"
        print(f"payload at 512 tokens, {name:36s} {row['bytes'] / 1e6:6.2f} MB  ({verdict}; page run {row['open_s']} s)")
    if "ranking" in result:
        print(f"Which measure is right here? {result['ranking']['wall_s']} s wall, {result['ranking']['cpu_s']} s CPU")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
