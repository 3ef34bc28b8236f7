"""Server-side cost of the explorer's reruns, measured with Streamlit's AppTest, and the Attention page's payload.

Run from the repo root: `python -m benchmarks.app_bench` (about 4 minutes on 2 cores; `--reps 3` is quicker).
Prints tables, then one JSON line with every figure and the machine it ran on.

For each case (pretrained all-MiniLM-L6-v2 at 12, 128 and 512 tokens; a custom 12-layer x 16-head d_model 1024,
d_ff 4096 encoder at 512 tokens) the app is opened once with empty caches ("cold": model build + first trace +
page), then timed warm, i.e. with the model already cached:

- idle:      a rerun with nothing changed (frame + page with every cache hit: the floor of any rerun);
- sentence:  a new sentence (one forward pass with full trace, then the page);
- head/layer: a new head (selectbox) or layer (slider) on the Attention page; the trace is reused (checked:
             zero forward passes and the same Trace object);
- config:    a new config whose model is cached, so the forward pass runs but no build: for the pretrained model
             the "Training mode" toggle, for the custom model seed 0 <-> 1 (the trace cache is cleared first).
             Building an uncached custom model is reported once as "config, model build".

AppTest has no fragment-only reruns: a widget change reruns the whole script (frame + page), so the head/layer
times here are an upper bound of what the browser's fragment rerun costs. The fragment's own work is timed
directly as well: figure builder, the figure -> JSON conversion st.plotly_chart does, and the two download
payloads (CSV and JSON) of the "One head" view, which are built only when their button is clicked.

Payload: the size of the plotly specs (sum of len(spec) over the page's plotly charts) for the three views of the
Attention page, including the worst case of 12 layers x 12 heads at 512 tokens (d_model 768, d_ff 3072).
Target (issue 5): <= 3 MB.

OpenMP settings in the environment (e.g. OMP_WAIT_POLICY=PASSIVE) change the timings and are printed with the
machine; they must be set before torch is imported. See benchmarks/RESULTS-app.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import time
from collections.abc import Callable

import plotly.io
import plotly.tools
import streamlit as st
import torch
from streamlit.testing.v1 import AppTest

import encoder
from benchmarks.machine import cpu_name
from devkit.apptest import app_test
from encoder.tokenizer import encode
from encoder.viz import attention

TIMEOUT = 300
CUSTOM_1024 = {"model": "custom", "d_model": "1024", "num_heads": "16", "d_ff": "4096", "num_layers": "12"}
CUSTOM_144 = {"model": "custom", "d_model": "768", "num_heads": "12", "d_ff": "3072", "num_layers": "12"}
CASES = [  # (name, URL parameters, tokens, cheap?)
    ("pretrained", {}, 12, True),
    ("pretrained", {}, 128, True),
    ("pretrained", {}, 512, True),
    ("custom 12Lx16H d1024", CUSTOM_1024, 512, False),
]
WORST = ("custom 12Lx12H d768", CUSTOM_144, 512)
PAYLOAD_TARGET = 3_000_000
RERUN_TARGET_S = 0.250  # server-side warm rerun at 128 tokens

BODY = ("reads the long story to the class and every child hears each word with great care while the "
        "rain falls on the old school roof").split()
SUBJECTS = ("teacher student farmer doctor pilot writer singer baker painter driver lawyer nurse child mother "
            "father king queen soldier player captain").split()

FORWARDS = [0]  # forward passes since the last reset: Encoder.forward_embedded is wrapped below
CPU = [0.0]  # process CPU seconds (all threads) of the last timed rerun


def _count_forwards() -> None:
    """Count forward passes at the model's class, however the app reaches encoder.run (directly or via a helper)."""
    original = encoder.Encoder.forward_embedded

    def counted(self, *args, **kwargs):
        FORWARDS[0] += 1
        return original(self, *args, **kwargs)

    encoder.Encoder.forward_embedded = counted


THREAD_ENV = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "MKL_NUM_THREADS")  # reported: they change the timings


def machine() -> dict:
    cpu = cpu_name()
    import plotly

    return {"cpu": cpu, "cores": os.cpu_count(), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "python": platform.python_version(), "streamlit": st.__version__, "plotly": plotly.__version__,
            "date": time.strftime("%Y-%m-%d %H:%M %Z"), "loadavg_start": round(os.getloadavg()[0], 2),
            "env": {k: os.environ[k] for k in THREAD_ENV if k in os.environ}}


def sentence(n_tokens: int, variant: int = 0) -> str:
    """Text of exactly n_tokens tokens ([CLS] and [SEP] included); each variant starts with a different subject."""
    words = ["the", SUBJECTS[variant % len(SUBJECTS)]]
    i = 0
    while len(words) < n_tokens - 2:
        words.append(BODY[i % len(BODY)])
        i += 1
    text = " ".join(words[: n_tokens - 2])
    got = len(encode(text, 10_000).tokens)
    assert got == n_tokens, (got, n_tokens, text[:80])
    return text


def ms(seconds: float) -> float:
    return round(seconds * 1e3, 1)


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def run(at: AppTest, action: Callable[[], object] | None = None) -> tuple[float, int]:
    """Time one rerun (after `action` set a widget); returns (seconds, forward passes during it)."""
    FORWARDS[0] = 0
    c0, t0 = time.process_time(), time.perf_counter()
    (action() if action else at).run()
    dt = time.perf_counter() - t0
    CPU[0] = time.process_time() - c0
    assert not at.exception, [e.value for e in at.exception]
    return dt, FORWARDS[0]


def record(row: dict, key: str, walls: list[float], cpus: list[float]) -> None:
    """Median wall time (the figure reported), its minimum, and the median process CPU time (all threads).

    On a shared machine the minimum and the CPU time show the work itself; the median includes contention.
    """
    row[f"{key}_ms"], row[f"{key}_min_ms"], row[f"{key}_cpu_ms"] = ms(med(walls)), ms(min(walls)), ms(med(cpus))


def frame(at: AppTest):
    return at.session_state["frame"]


def spec_bytes(at: AppTest) -> int:
    return sum(len(el.proto.spec) for el in at.get("plotly_chart"))


def view_payloads(at: AppTest) -> dict:
    """Spec bytes and rerun time of each Attention view; leaves the page on the "One head" view."""
    out = {}
    for view in ("head", "layer", "model", "head"):
        dt, fwd = run(at, lambda v=view: at.segmented_control(key="view").set_value(v))
        assert fwd == 0
        out[view] = {"bytes": spec_bytes(at), "rerun_ms": ms(dt)}
    return out


def timed(fn: Callable[[], object], reps: int) -> tuple[float, object]:
    times, value = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t0)
    return med(times), value


def fragment_costs(trace: encoder.Trace, layer: int, head: int, reps: int) -> dict:
    """The Attention fragment's own work, timed outside Streamlit (medians, ms)."""
    out = {}
    t, fig = timed(lambda: attention.attention_heatmap(trace, layer, head), reps)
    out["head_build"] = ms(t)
    t, fig_dict = timed(lambda: plotly.tools.return_figure_from_figure_or_data(fig, True), reps)
    out["head_to_dict"] = ms(t)
    t, spec = timed(lambda: plotly.io.to_json(fig_dict, validate=False), reps)
    out["head_to_json"] = ms(t)
    out["head_spec_bytes"] = len(spec)
    t, csv = timed(lambda: attention.attention_table(trace, layer, head).to_csv(index=False), reps)
    out["head_csv"] = ms(t)
    out["csv_bytes"] = len(csv)
    t, js = timed(lambda: attention.attention_json(trace, layer, head), reps)
    out["head_json_download"] = ms(t)
    out["json_download_bytes"] = len(js)
    out["head_chart_only"] = round(out["head_build"] + out["head_to_dict"] + out["head_to_json"], 1)  # per rerun
    builds = (("layer", lambda: attention.attention_grid(trace, layer)), ("model", lambda: attention.model_view(trace)))
    for view, build in builds:
        small = max(1, reps // 2)
        t_build, fig = timed(build, small)
        t_json, _ = timed(lambda f=fig: plotly.io.to_json(plotly.tools.return_figure_from_figure_or_data(f, True),
                                                          validate=False), small)
        out[f"{view}_build"], out[f"{view}_serialise"] = ms(t_build), ms(t_json)
    return out


def open_cold(params: dict, n_tokens: int) -> tuple[AppTest, float, int]:
    """The app opened on `params` and an n_tokens sentence with empty caches: (app, seconds, forward passes)."""
    st.cache_resource.clear()
    gc.collect()
    at = app_test(params | {"text": sentence(n_tokens)}, TIMEOUT)
    cold, fwd = run(at)
    return at, cold, fwd


def bench_case(name: str, params: dict, n_tokens: int, reps: int) -> dict:
    at, cold, fwd = open_cold(params, n_tokens)
    fr = frame(at)
    assert fr.trace is not None and fr.trace.seq_len == n_tokens and fwd == 1, (fr.problem, fwd)
    L, H = fr.trace.num_layers, fr.trace.num_heads
    row: dict = {"case": name, "tokens": n_tokens, "layers": L, "heads": H, "cold_ms": ms(cold), "reps": reps}

    walls, cpus = [], []
    for _ in range(reps):
        walls.append(run(at)[0])
        cpus.append(CPU[0])
    record(row, "idle", walls, cpus)

    walls, cpus = [], []
    for i in range(1, reps + 1):
        text = sentence(n_tokens, i)
        dt, fwd = run(at, lambda t=text: at.text_area(key="text").set_value(t))
        assert fwd == 1 and frame(at).trace.text == text
        walls.append(dt)
        cpus.append(CPU[0])
    record(row, "sentence", walls, cpus)

    trace = frame(at).trace
    for widget, count, getter in (("head", H, lambda: at.selectbox(key="head")), ("layer", L, lambda: at.slider(key="layer"))):
        walls, cpus = [], []
        for i in range(1, reps + 1):
            value = i % count
            dt, fwd = run(at, lambda v=value, g=getter: g().set_value(v))
            assert fwd == 0 and frame(at).trace is trace, "a layer/head change ran the model again"
            walls.append(dt)
            cpus.append(CPU[0])
        record(row, widget, walls, cpus)
    layer, head = at.slider(key="layer").value, at.selectbox(key="head").value

    row["payload"] = view_payloads(at)
    row["fragment"] = fragment_costs(trace, layer, head, reps)

    # (c) a new config whose model is cached: the forward pass runs, the model is not rebuilt.
    import ui  # the same module the app imported (python -m puts the repo root on sys.path)

    if params.get("model") == "custom":
        key, values = "seed", [0, 1]
        setter = lambda v: at.number_input(key="seed").set_value(v)  # noqa: E731
        dt, fwd = run(at, lambda: setter(1))  # seed 1 is not cached yet: a model build
        row["config_build_ms"] = ms(dt)
    else:
        key, values = "train", [True, False]
        setter = lambda v: at.toggle(key="train").set_value(v)  # noqa: E731
    walls, cpus = [], []
    for i in range(reps):
        ui.get_trace.clear()
        dt, fwd = run(at, lambda v=values[i % 2]: setter(v))
        assert fwd == 1 and frame(at).trace is not None, frame(at).problem
        walls.append(dt)
        cpus.append(CPU[0])
    record(row, "config", walls, cpus)
    row["config_change"] = key
    return row


def bench_worst(reps: int) -> dict:
    name, params, n_tokens = WORST
    at, cold, _ = open_cold(params, n_tokens)
    trace = frame(at).trace
    assert trace.seq_len == n_tokens
    row = {"case": name, "tokens": n_tokens, "layers": trace.num_layers, "heads": trace.num_heads, "cold_ms": ms(cold),
           "payload": view_payloads(at), "fragment": fragment_costs(trace, 0, 0, max(2, reps // 2))}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5, help="repetitions per warm measurement (median reported)")
    args = parser.parse_args()
    t_start = time.perf_counter()
    info = machine()
    _count_forwards()

    # Warm the interpreter (imports of torch, plotly, pages), so "cold" below means empty caches, not imports.
    at = app_test(timeout=TIMEOUT)
    t0 = time.perf_counter()
    at.run()
    first_run = time.perf_counter() - t0
    del at

    rows = [bench_case(name, params, n, args.reps if cheap else max(2, args.reps - 2)) for name, params, n, cheap in CASES]
    worst = bench_worst(args.reps)
    info["loadavg_end"] = round(os.getloadavg()[0], 2)

    print(f"machine: {info['cpu']}, {info['cores']} cores, torch {info['torch']} ({info['threads']} threads), "
          f"streamlit {info['streamlit']}, plotly {info['plotly']}, {info['date']}; load average {info['loadavg_start']:.1f} "
          f"at start, {info['loadavg_end']:.1f} at end (other processes share these cores: compare min and CPU below); "
          f"OpenMP env {info['env'] or 'default'}")
    print(f"first AppTest run in this process (torch already imported; page imports + model load + page): {first_run:.1f} s\n")
    print("Server-side rerun time (AppTest, whole script = frame + page; median ms; 'config' = cached model, new trace)")
    head = (f"{'case':<22} {'tok':>4} {'cold':>7} {'idle':>6} {'sentence':>9} {'head':>6} {'layer':>6} "
            f"{'config':>7}  {'change':<6} {'build':>7}")
    print(head)
    print("-" * len(head))
    for r in rows:
        build = f"{r['config_build_ms']:>7.0f}" if "config_build_ms" in r else f"{'-':>7}"
        print(f"{r['case']:<22} {r['tokens']:>4} {r['cold_ms']:>7.0f} {r['idle_ms']:>6.0f} {r['sentence_ms']:>9.0f} "
              f"{r['head_ms']:>6.0f} {r['layer_ms']:>6.0f} {r['config_ms']:>7.0f}  {r['config_change']:<6} {build}")
    print("\nThe same reruns: fastest wall time / median process CPU time (all threads; 2 torch threads can give CPU > wall)")
    head = f"{'case':<22} {'tok':>4} {'idle':>11} {'sentence':>11} {'head':>11} {'layer':>11} {'config':>11}"
    print(head)
    print("-" * len(head))
    for r in rows:
        keys = ("idle", "sentence", "head", "layer", "config")
        cells = " ".join(f"{r[k + '_min_ms']:>5.0f}/{r[k + '_cpu_ms']:<5.0f}" for k in keys)
        print(f"{r['case']:<22} {r['tokens']:>4} {cells}")

    print("\nAttention fragment's own work, outside Streamlit (median ms): the 'One head' view at the current layer/head")
    print("(per rerun: figure + to_dict + to_json = chart; the CSV and JSON downloads run only when clicked)")
    head = (f"{'case':<22} {'tok':>4} {'figure':>7} {'to_dict':>8} {'to_json':>8} {'chart':>7} {'CSV dl':>7} "
            f"{'JSON dl':>8} {'grid':>6} {'grid js':>8} {'model':>6} {'model js':>9}")
    print(head)
    print("-" * len(head))
    for r in [*rows, worst]:
        f = r["fragment"]
        print(f"{r['case']:<22} {r['tokens']:>4} {f['head_build']:>7.1f} {f['head_to_dict']:>8.1f} {f['head_to_json']:>8.1f} "
              f"{f['head_chart_only']:>7.1f} {f['head_csv']:>7.1f} {f['head_json_download']:>8.1f} {f['layer_build']:>6.1f} "
              f"{f['layer_serialise']:>8.1f} {f['model_build']:>6.1f} {f['model_serialise']:>9.1f}")

    print(f"\nAttention page payload: plotly spec bytes per view (target <= {PAYLOAD_TARGET / 1e6:.0f} MB)")
    head = f"{'case':<22} {'tok':>4} {'LxH':>6} {'one head':>10} {'all heads':>10} {'model view':>11}  {'worst':>5}"
    print(head)
    print("-" * len(head))
    for r in [*rows, worst]:
        p = r["payload"]
        top = max(v["bytes"] for v in p.values())
        flag = "ok" if top <= PAYLOAD_TARGET else "OVER"
        print(f"{r['case']:<22} {r['tokens']:>4} {r['layers']:>2}x{r['heads']:<3} {p['head']['bytes']:>10,} "
              f"{p['layer']['bytes']:>10,} {p['model']['bytes']:>11,}  {flag:>5}")

    at128 = next(r for r in rows if r["case"] == "pretrained" and r["tokens"] == 128)
    targets = {
        "warm_rerun_128_ms": {"target": RERUN_TARGET_S * 1e3, "measured": at128["sentence_ms"],
                              "met": at128["sentence_ms"] <= RERUN_TARGET_S * 1e3},
        "payload_144_heads_512_bytes": {"target": PAYLOAD_TARGET, "measured": max(v["bytes"] for v in worst["payload"].values()),
                                        "met": max(v["bytes"] for v in worst["payload"].values()) <= PAYLOAD_TARGET},
        "layer_head_change_runs_model": False,  # asserted above: zero forward passes on every head/layer change
    }
    verdict = lambda t: "met" if targets[t]["met"] else "missed"  # noqa: E731
    print(f"\ntargets: warm rerun after a new sentence at 128 tokens {at128['sentence_ms']:.0f} ms (target 250 ms, "
          f"{verdict('warm_rerun_128_ms')}); payload for 144 heads at 512 tokens "
          f"{targets['payload_144_heads_512_bytes']['measured']:,} B (target 3 MB, {verdict('payload_144_heads_512_bytes')}); "
          f"layer/head changes ran the model 0 times")
    elapsed = time.perf_counter() - t_start
    print(f"total {elapsed:.0f} s")
    print(json.dumps({"benchmark": "app", "machine": info, "first_run_s": round(first_run, 2), "cases": rows,
                      "worst_case": worst, "targets": targets, "elapsed_s": round(elapsed, 1)}))


if __name__ == "__main__":
    main()
