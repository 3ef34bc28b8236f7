"""End to end in a real browser: `streamlit run app.py` driven by Playwright in Debian's Chromium.

Run from the repo root: `python -m benchmarks.browser_bench` (about 4 minutes on 2 cores; `--runs 3` is quicker).
Needs /usr/bin/chromium (or $CHROMIUM). Prints tables, then one JSON line with every figure and the machine.

`--quick` times only head and layer changes at 512 tokens (issue 15: <= 200 ms); `--baseline DIR` (with --quick)
also serves another checkout of the app, e.g. `git archive HEAD | tar -x -C /tmp/base`, and alternates the same
actions between the two pages, so old and new code are compared under the same load in one run.

Measured (medians over --runs runs; the browser itself is started once, outside every timing):

- cold start: from launching the server process to the first attention heatmap drawn in a fresh browser context
  (default URL: pretrained model, the default sentence). Also: server healthy, and the app's script finished.
- warm open: a new visitor (fresh context) opening the app on the already-warm server, to the heatmap drawn.
- new sentence: the text area filled with a new sentence of ~12, 128 or 512 tokens, then Ctrl+Enter; timed from the
  key press to the heatmap redrawn. The model is cached (warm), the sentence is new (one forward pass).
- new head / new layer: a head picked in the "Head" select (timed from the click on the option) or the layer slider
  moved one step with the keyboard (from the key press), to the heatmap redrawn. These rerun only the fragment.
  Every timed view is one the session has not seen yet: Streamlit sends a chart it already sent as a short cache
  reference, which would hide the payload (the browser still redraws it).

"Redrawn" is checked in the page, not inferred from Streamlit's running state: the plotly graph div's heatmap image
(plotly paints the heatmap into an SVG <image>) must have a new `href` than before the action, and the div's data
must show the new input (the new word at its position in the key axis, or "layer L, head H" in the title). The
time until Streamlit reports the script finished ("ready") and the websocket bytes received are reported too.

The server inherits this process's environment; OpenMP settings that change the timings (e.g. OMP_WAIT_POLICY)
are printed with the machine. See benchmarks/RESULTS-app.md.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import platform
import statistics
import time
import urllib.parse
from pathlib import Path

from playwright.sync_api import sync_playwright

from benchmarks.machine import cpu_name
from devkit import server as _server
from devkit.server import launch, streamlit_server, wait_ready

ROOT = Path(__file__).resolve().parents[1]

VIEWPORT = {"width": 1400, "height": 1000}
TOKENS = (12, 128, 512)
TIMEOUT_MS = 180_000
TARGETS = {  # issue 5, seconds
    "cold_start": 8.0,
    "sentence_128": 1.0,
    "sentence_512": 2.5,
    "head": 0.3,
    "layer": 0.3,
}
QUICK_TARGET = 0.2  # issue 15: a head or layer change at 512 tokens, seconds
BODY = ("reads the long story to the class and every child hears each word with great care while the rain falls "
        "on the old school roof").split()
SUBJECTS = ("teacher student farmer doctor pilot writer singer baker painter driver lawyer nurse child mother father "
            "king queen soldier player captain").split()

CHART = '[data-testid="stPlotlyChart"] .js-plotly-plot'
# Installed in every page before the app loads: records each websocket message's arrival time and size in the page's
# clock (performance.now(), 0 = navigation start), so a delay splits into server (until the chart's message
# arrived) and browser (from its arrival to the heatmap painted).
INSTRUMENT = """(() => {
    const bench = window.__bench = {msgs: [], wsOpen: null, t0: 0, drawn: null, prev: null, armed: false};
    for (const type of ['pointerdown', 'keydown']) {
        document.addEventListener(type, () => {
            if (bench.armed) { bench.t0 = performance.now(); bench.armed = false; }
        }, true);
    }
    const Native = window.WebSocket;
    window.WebSocket = class extends Native {
        constructor(...args) {
            super(...args);
            this.addEventListener('open', () => { bench.wsOpen ??= performance.now(); });
            this.addEventListener('message', (e) => {
                const d = e.data;
                bench.msgs.push([performance.now(), d.byteLength ?? d.size ?? d.length ?? 0]);
            });
        }
    };
})();"""
# Past 128 tokens the one-head view is a canvas component (ui/heatmap.js), not a plotly chart: it says what it drew
# in its root's data attributes (draws: a counter, title: "Attention, layer L, head H").
MAP = """document.querySelector('[data-testid="stBidiComponentIsolated"]')?.shadowRoot?.querySelector('.hm')"""
REMEMBER = f"""() => {{
    const hm = {MAP};
    const im = document.querySelector('{CHART} g.hm image');
    Object.assign(window.__bench, {{prev: hm ? 'draws ' + hm.dataset.draws : im ? im.getAttribute('href') : null,
                                    search: location.search, t0: performance.now(), drawn: null, armed: true}});
}}"""
REDRAWN = f"""([pos, word, title]) => {{
    const hm = {MAP};
    if (hm) {{
        if ('draws ' + hm.dataset.draws === window.__bench.prev) return false;
        if (title !== null && !String(hm.dataset.title || '').includes(title)) return false;
        window.__bench.drawn ??= performance.now();
        return true;
    }}
    const gd = document.querySelector('{CHART}');
    if (!gd || !gd.data || !gd.layout) return false;
    const im = gd.querySelector('g.hm image');
    if (!im || im.getAttribute('href') === window.__bench.prev) return false;
    if (word !== null && !String(gd.data[0].x[pos] || '').startsWith(word + ' (')) return false;
    if (title !== null && !String((gd.layout.title || {{}}).text || '').includes(title)) return false;
    window.__bench.drawn ??= performance.now();
    return true;
}}"""
FIRST_DRAWN = f"""() => {{
    if (!document.querySelector('{CHART} g.hm image') && !({MAP})?.dataset.draws) return false;
    window.__bench.drawn ??= performance.now();
    return true;
}}"""
# Page-side split of the last action: the chart's message is the largest one received before the heatmap was drawn.
SPLIT = """() => {
    const b = window.__bench;
    const before = b.msgs.filter(([t]) => t >= b.t0 && t <= b.drawn);
    const chart = before.reduce((best, m) => (m[1] > best[1] ? m : best), [b.t0, 0]);  // none: 0 s
    const after = b.msgs.filter(([t]) => t >= b.t0);
    return {chart_at: (chart[0] - b.t0) / 1e3, drawn_at: (b.drawn - b.t0) / 1e3, chart_bytes: chart[1],
            bytes: after.reduce((s, m) => s + m[1], 0), ws_open: b.wsOpen / 1e3};
}"""


THREAD_ENV = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "MKL_NUM_THREADS")  # reported: they change the timings


def machine() -> dict:
    import torch

    cpu = cpu_name()
    return {"cpu": cpu, "cores": os.cpu_count(), "torch": torch.__version__, "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d %H:%M %Z"), "loadavg_start": os.getloadavg()[0],
            "env": {k: os.environ[k] for k in THREAD_ENV if k in os.environ}}


def sentence(n_tokens: int, variant: int) -> str:
    """Text of n_tokens WordPiece tokens with [CLS]/[SEP] (every word is one token); the subject sits at position 2."""
    words = ["the", SUBJECTS[variant % len(SUBJECTS)]]
    i = 0
    while len(words) < n_tokens - 2:
        words.append(BODY[i % len(BODY)])
        i += 1
    return " ".join(words[: n_tokens - 2])


def med(xs: list[float]) -> float:
    return round(statistics.median(xs), 3)


def act(page, action, pos=None, word=None, title=None) -> dict:
    """Run `action`, wait for the heatmap redrawn, then for the script done.

    In the page's clock, from the action's first pointerdown/keydown event: redrawn = until the heatmap was painted,
    split into server (until the chart's websocket message arrived) and browser (from then until painted).
    In Python's clock, from just before Playwright sends the input: e2e (to redrawn seen) and ready (script done);
    these include Playwright's own overhead (CDP round trips, a click's actionability checks).
    """
    page.evaluate(REMEMBER)
    t0 = action()
    page.wait_for_function(REDRAWN, arg=[pos, word, title], polling="raf", timeout=TIMEOUT_MS)
    t_draw = time.perf_counter() - t0
    if page.evaluate(f"() => !!{MAP}"):  # the canvas map sends its pick once the clicking stops: wait for that run
        page.wait_for_function("() => location.search !== window.__bench.search", timeout=TIMEOUT_MS)
    wait_ready(page, TIMEOUT_MS)
    t_ready = time.perf_counter() - t0
    page.wait_for_timeout(100)  # let the last messages of the run arrive before counting bytes
    split = page.evaluate(SPLIT)
    return {"redrawn": split["drawn_at"], "e2e": t_draw, "ready": t_ready, "bytes": split["bytes"],
            "server": split["chart_at"], "browser": split["drawn_at"] - split["chart_at"], "chart_bytes": split["chart_bytes"]}


def type_sentence(page, text: str):
    box = page.locator("textarea").first
    box.fill(text)

    def fire() -> float:
        t0 = time.perf_counter()
        box.press("Control+Enter")
        return t0

    return fire


def pick_head(page, head: int):
    if page.evaluate(f"() => !!{MAP}"):
        button = page.locator(f'.hm button[data-head="{head}"]')
        button.wait_for()
        return lambda: (time.perf_counter(), button.click())[0]
    page.get_by_role("combobox", name="Head").click()
    option = page.get_by_role("option", name=str(head), exact=True)
    option.wait_for()

    def fire() -> float:
        t0 = time.perf_counter()
        option.click()
        return t0

    return fire


def step_layer(page, key: str, layer: int):
    if page.evaluate(f"() => !!{MAP}"):  # the canvas map's Layer buttons
        button = page.locator(f'.hm button[data-layer="{layer}"]')
        button.wait_for()
        return lambda: (time.perf_counter(), button.click())[0]
    thumb = page.locator('[data-testid="stSlider"]').filter(has_text="Layer").get_by_role("slider")
    thumb.focus()

    def fire() -> float:
        t0 = time.perf_counter()
        thumb.press(key)
        return t0

    return fire


def current(page) -> tuple[int, int]:
    """(layer, head) from the heatmap's title, e.g. "Attention, layer 3, head 1"."""
    title = page.evaluate(f"() => {MAP}?.dataset.title ?? document.querySelector('{CHART}').layout.title.text")
    words = title.replace(",", " ").replace("<b>", " ").replace("</b>", " ").split()
    return int(words[words.index("layer") + 1]), int(words[words.index("head") + 1])


def new_page(browser):
    context = browser.new_context(viewport=VIEWPORT)
    context.add_init_script(INSTRUMENT)
    return context, context.new_page()


def cold_start(browser, runs: int):
    """Fresh server process + fresh browser context, per run; the last server is handed back for the warm part.

    The split, in seconds from process start: server healthy; the page's websocket open (front end loaded);
    the chart's message arrived (the first script run: imports, model load, trace, figure); heatmap painted.
    """
    rows = []
    for i in range(runs):
        context, page = new_page(browser)
        t0 = time.perf_counter()
        server = streamlit_server(timeout=120)
        url, _ = server.__enter__()
        healthy = time.perf_counter() - t0
        t_nav = time.perf_counter() - t0
        page.goto(url)
        page.wait_for_function(FIRST_DRAWN, polling="raf", timeout=TIMEOUT_MS)
        drawn = time.perf_counter() - t0
        wait_ready(page, TIMEOUT_MS)
        ready = time.perf_counter() - t0
        split = page.evaluate(SPLIT)  # t0 = 0: the page's navigation start
        rows.append({"healthy": healthy, "ws_open": t_nav + split["ws_open"], "chart_msg": t_nav + split["chart_at"],
                     "heatmap": drawn, "ready": ready, "bytes": split["bytes"]})
        if i < runs - 1:
            context.close()
            server.__exit__(None, None, None)
    return rows, server, url, context


def summarise(rs: list[dict]) -> dict:
    return {"redrawn": med([r["redrawn"] for r in rs]), "min": round(min(r["redrawn"] for r in rs), 3),
            "server": med([r["server"] for r in rs]), "browser": med([r["browser"] for r in rs]),
            "e2e": med([r["e2e"] for r in rs]), "ready": med([r["ready"] for r in rs]),
            "bytes": int(statistics.median(r["bytes"] for r in rs))}


def step_to_new(page, seen: set[tuple[int, int]], kind: str):
    """The next head (kind "head") or layer step (kind "layer") that shows a (layer, head) this session has not seen;
    returns (fire, title). A layer step with no unseen neighbour first moves to an unseen head, untimed."""
    layer, head = current(page)
    if kind == "head":
        new = next(h for h in itertools.chain(range(head + 1, 12), range(head)) if (layer, h) not in seen)
        seen.add((layer, new))
        return pick_head(page, new), f"layer {layer}, head {new}"
    for key, new in (("ArrowRight", layer + 1), ("ArrowLeft", layer - 1)):
        if 0 <= new < 6 and (new, head) not in seen:
            seen.add((new, head))
            return step_layer(page, key, new), f"layer {new}, head {head}"
    fire, title = step_to_new(page, seen, "head")
    act(page, fire, title=title)
    return step_to_new(page, seen, "layer")


def quick(args) -> None:
    """Head and layer changes at 512 tokens only; with --baseline, the same actions alternate between two servers."""
    info = machine()
    roots = {"new": ROOT} | ({"old": Path(args.baseline).resolve()} if args.baseline else {})
    text = sentence(512, 1)
    rows: dict[str, dict[str, list[dict]]] = {name: {"head": [], "layer": []} for name in roots}
    with sync_playwright() as pw, contextlib.ExitStack() as stack:
        browser = launch(pw)
        stack.callback(browser.close)
        pages, seen = {}, {}
        for name, root in roots.items():
            _server.ROOT = root  # streamlit_server() runs ROOT / "app.py" with ROOT as the working directory
            url, _ = stack.enter_context(streamlit_server(timeout=120))
            _, page = new_page(browser)
            page.goto(f"{url}/?{urllib.parse.urlencode({'text': text})}")
            page.wait_for_function(FIRST_DRAWN, polling="raf", timeout=TIMEOUT_MS)
            wait_ready(page, TIMEOUT_MS)
            pages[name], seen[name] = page, {current(page)}
        _server.ROOT = ROOT
        order = list(roots)
        for i in range(args.runs):
            for kind in ("head", "layer"):
                for name in order if i % 2 == 0 else order[::-1]:  # neither side always goes first
                    fire, title = step_to_new(pages[name], seen[name], kind)
                    rows[name][kind].append(act(pages[name], fire, title=title))
    info["loadavg_end"] = os.getloadavg()[0]
    print(f"machine: {info['cpu']}, {info['cores']} cores, Chromium headless, {info['date']}; load average "
          f"{info['loadavg_start']:.1f} at start, {info['loadavg_end']:.1f} at end")
    print(f"\n512 tokens, median of {args.runs} (s): redrawn = input event -> heatmap painted = server + browser; "
          f"target <= {QUICK_TARGET:g} s")
    head = f"{'code':<5} {'action':<11} {'redrawn':>8} {'min':>6} {'server':>7} {'browser':>8} {'ready':>6} {'ws bytes':>10}"
    print(head + "\n" + "-" * len(head))
    summary = {}
    for name in roots:
        for kind in ("head", "layer"):
            s = summary[f"{name}_{kind}"] = summarise(rows[name][kind])
            print(f"{name:<5} {'new ' + kind:<11} {s['redrawn']:>8.3f} {s['min']:>6.3f} {s['server']:>7.3f} "
                  f"{s['browser']:>8.3f} {s['ready']:>6.3f} {s['bytes']:>10,}")
    if "old" in roots:
        for kind in ("head", "layer"):
            new, old = summary[f"new_{kind}"]["redrawn"], summary[f"old_{kind}"]["redrawn"]
            print(f"{kind}: new / old = {new / old:.2f}")
    print(json.dumps({"benchmark": "browser-quick", "machine": info, "runs": args.runs, "baseline": args.baseline,
                      "summary": summary, "rows": rows}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per measurement (median reported)")
    parser.add_argument("--quick", action="store_true", help="only head and layer changes at 512 tokens (1..12 runs)")
    parser.add_argument("--baseline", metavar="DIR", help="with --quick: another checkout to compare, served alongside")
    args = parser.parse_args()
    if args.quick:
        if not 1 <= args.runs <= 12:
            parser.error("--runs must be 1..12 with --quick (every timed view must be new: 6 layers x 12 heads)")
        quick(args)
        return
    if args.baseline:
        parser.error("--baseline needs --quick")
    if not 1 <= args.runs <= 5:
        parser.error("--runs must be 1..5 (every timed sentence, head and layer must be new to the session)")
    t_start = time.perf_counter()
    info = machine()
    out: dict = {"benchmark": "browser", "machine": info, "runs": args.runs}
    with sync_playwright() as pw:
        browser = launch(pw)
        cold, server, url, context = cold_start(browser, args.runs)
        try:
            out["cold"] = cold
            context.close()

            opens = []
            for _ in range(args.runs):
                ctx, page = new_page(browser)
                t0 = time.perf_counter()
                page.goto(url)
                page.wait_for_function(FIRST_DRAWN, polling="raf", timeout=TIMEOUT_MS)
                drawn = time.perf_counter() - t0
                wait_ready(page, TIMEOUT_MS)
                split = page.evaluate(SPLIT)
                opens.append({"ws_open": split["ws_open"], "chart_msg": split["chart_at"], "heatmap": drawn,
                              "bytes": split["bytes"]})
                ctx.close()
            out["warm_open"] = opens

            ctx, page = new_page(browser)
            page.goto(url)
            page.wait_for_function(FIRST_DRAWN, polling="raf", timeout=TIMEOUT_MS)
            wait_ready(page, TIMEOUT_MS)
            out["interactive"] = []
            variant = 0
            for n in TOKENS:
                variant += 1  # first sentence of this length: untimed
                act(page, type_sentence(page, sentence(n, variant)), pos=2, word=SUBJECTS[variant % len(SUBJECTS)])
                row: dict = {"tokens": n, "sentence": [], "head": [], "layer": []}
                for _ in range(args.runs):
                    variant += 1
                    row["sentence"].append(act(page, type_sentence(page, sentence(n, variant)), pos=2,
                                               word=SUBJECTS[variant % len(SUBJECTS)]))
                for _ in range(args.runs):
                    layer, head = current(page)
                    new = (head + 1) % 12
                    row["head"].append(act(page, pick_head(page, new), title=f"layer {layer}, head {new}"))
                for _ in range(args.runs):
                    # First (untimed) a head not shown yet, so the timed layer step shows a (layer, head) pair this
                    # session has never seen: Streamlit sends a chart it sent before as a ~1 KB cache reference.
                    layer, head = current(page)
                    act(page, pick_head(page, (head + 1) % 12), title=f"layer {layer}, head {(head + 1) % 12}")
                    layer, head = current(page)
                    key, new = ("ArrowRight", layer + 1) if layer < 5 else ("ArrowLeft", layer - 1)
                    row["layer"].append(act(page, step_layer(page, key, new), title=f"layer {new}, head {head}"))
                out["interactive"].append(row)
            ctx.close()
        finally:
            server.__exit__(None, None, None)
            browser.close()

    info["loadavg_end"] = os.getloadavg()[0]
    print(f"machine: {info['cpu']}, {info['cores']} cores, torch {info['torch']}, Chromium headless, {info['date']}; "
          f"load average {info['loadavg_start']:.1f} at start, {info['loadavg_end']:.1f} at end; server's OpenMP env "
          f"{info['env'] or 'default'}")
    c = out["cold"]
    summary = {f"cold_{k}_s": med([r[k] for r in c]) for k in ("healthy", "ws_open", "chart_msg", "heatmap", "ready")}
    summary.update({f"open_{k}_s": med([r[k] for r in out["warm_open"]]) for k in ("ws_open", "chart_msg", "heatmap")})
    print(f"\ncold start, seconds from `streamlit run` process start (median of {len(c)}; target: heatmap <= "
          f"{TARGETS['cold_start']:g} s)")
    print(f"  server healthy {summary['cold_healthy_s']:.2f} | page websocket open {summary['cold_ws_open_s']:.2f} | "
          f"chart message in {summary['cold_chart_msg_s']:.2f} | heatmap drawn {summary['cold_heatmap_s']:.2f} | "
          f"script done {summary['cold_ready_s']:.2f}   (heatmap per run: {', '.join(format(r['heatmap'], '.1f') for r in c)})")
    print(f"warm open, a new visitor on the warm server, s from navigation: websocket open {summary['open_ws_open_s']:.2f} | "
          f"chart message in {summary['open_chart_msg_s']:.2f} | heatmap drawn {summary['open_heatmap_s']:.2f}")
    print("\nwarm interactions, pretrained model (median s). redrawn = input event -> heatmap painted = server (until the "
          "chart's message arrived) + browser;\ne2e = the same seen from Playwright; ready = until the script finished; "
          "ws bytes = received on the websocket until ready")
    head = (f"{'action':<13} {'tokens':>6} {'redrawn':>8} {'min':>6} {'server':>7} {'browser':>8} {'e2e':>6} {'ready':>6} "
            f"{'ws bytes':>10}  target")
    print(head)
    print("-" * (len(head) + 14))
    for row in out["interactive"]:
        n = row["tokens"]
        for kind in ("sentence", "head", "layer"):
            s = summary[f"{kind}_{n}"] = summarise(row[kind])
            target = TARGETS.get(f"{kind}_{n}", TARGETS.get(kind))
            verdict = "" if target is None else f"<= {target:g} s: {'met' if s['redrawn'] <= target else 'MISSED'}"
            print(f"{'new ' + kind:<13} {n:>6} {s['redrawn']:>8.3f} {s['min']:>6.3f} {s['server']:>7.3f} "
                  f"{s['browser']:>8.3f} {s['e2e']:>6.3f} {s['ready']:>6.3f} {s['bytes']:>10,}  {verdict}")
    targets = {
        "cold_start_s": {"target": TARGETS["cold_start"], "measured": summary["cold_heatmap_s"]},
        "sentence_128_s": {"target": TARGETS["sentence_128"], "measured": summary["sentence_128"]["redrawn"]},
        "sentence_512_s": {"target": TARGETS["sentence_512"], "measured": summary["sentence_512"]["redrawn"]},
        **{f"{kind}_{n}_s": {"target": TARGETS[kind], "measured": summary[f"{kind}_{n}"]["redrawn"]}
           for kind in ("head", "layer") for n in TOKENS},
    }
    for t in targets.values():
        t["met"] = t["measured"] <= t["target"]
    print("\ntargets: " + "; ".join(f"{k} {v['measured']:.2f} (<= {v['target']:g}: {'met' if v['met'] else 'MISSED'})"
                                    for k, v in targets.items()))
    out["summary"], out["targets"] = summary, targets
    out["elapsed_s"] = round(time.perf_counter() - t_start, 1)
    print(f"total {out['elapsed_s']:.0f} s")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
