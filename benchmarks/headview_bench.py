"""The head view (issue 12) in Chromium: hover and head/layer switches drawn in the browser, payload size, 512 tokens.

Run from the repo root: `python -m benchmarks.headview_bench` (about 2 minutes on 2 cores). Needs /usr/bin/chromium.
Prints a table, then one JSON line with every figure and the machine.

`--events` (issue 23, about 6 minutes; `--views "head view" --tokens 512` for one part): every interaction within a
frame, as the browser's own Event Timing API sees it. A PerformanceObserver of type "event" with durationThreshold 16
(the smallest Chromium allows; durations come in steps of 8 ms) records every input event that took 16 ms or more from
the input to the next frame painted; Chromium's performance.eventCounts gives how many events of each type there were
in all. Real mouse and keyboard input (Playwright), paced like a person (150 ms apart), for the head view (Inside a
head) and the attention map (Attention: one head, the all-heads grid, the model view) at 123 and 512 tokens: hover,
click, layer, head and measure changes (on the map also Beside raw eight times in a row: one map and two in turn), and
in the head view "leave": a token hovered, then the mouse moved off the columns (the events are both's, the paint
time the leave's). Goal: no event over 16 ms at <= 128 tokens, none over
33 ms at 512. The floor is measured first, the same way: a bare page (no Streamlit: buttons and a 640 px canvas
redrawn per click) and the app page's own title and margin (no code of ours listens there). Also the medians of
hover to paint (the views' own stamp: input event to the first frame painted after the redraw); mousemove, which
moves the map's hover, is not an Event Timing event type, so for the map that median is the figure. And the
payloads: what every page's first run sends over the websocket at 512 tokens (goal <= 3 MB) and
what a settled pick of the map sends (goal <= 0.3 MB). `--payloads`: only the pages' first runs.

Measured on the "Inside a head" page with the pretrained model (6 layers × 12 heads):
- payload: the component's data at 128 tokens (all layers × heads, uint16) and at 512 tokens (8-bit weights,
  deflated layer by layer: as many layers as fit in ui.payload.SHIP_LIMIT, nearest the chosen one first).
- hover / head / layer at 128 tokens: a real Playwright mouse hover or click, timed inside the page from the input
  event's timestamp to the first frame painted after the lines were redrawn (requestAnimationFrame, then a task);
  median of 10. Script runs (the app's data-test-script-state turning "running") are counted from the first input
  to the last paint: the redraws never wait for the server. The choice then reaches the app SYNC ms after the last
  click as one fragment run, reported separately.
- layer at 512 tokens: timed from the click to the new layer's lines painted (a layer not shipped is asked for
  first: only the head view's fragment reruns); median of 5 (or runs // 2). Script runs during these switches are
  counted as at 128 tokens. "blank" checks that the page never lost its tokens and that the canvas holds lines
  after every switch.
- layer fetch at 512 tokens: a custom model of 12 layers × 16 heads (untrained) whose layers do not all fit in one
  payload; the first switch to the farthest layer not shipped, timed the same way (one sample), with the script runs
  it caused (one: the head view's own fragment).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import urllib.parse
from pathlib import Path

from playwright.sync_api import sync_playwright

from benchmarks.machine import cpu_name
from devkit.hostile_inputs import LONG_PARAGRAPH
from devkit.server import (
    COUNT_RUNS,  # counts script runs from now on
    RUN_LOG_INIT,  # what COUNT_RUNS reads, installed before the page loads
    launch,
    streamlit_server,
    wait_ready,
)
from encoder import load_pretrained, run
from ui import pages, payload

ROOT = Path(__file__).resolve().parents[1]

TARGETS_MS = {"hover_128": 50, "head_128": 50, "layer_128": 50, "layer_512": 300}
PAYLOAD_LIMIT = 3_000_000  # at 128 tokens; past that, payload.SHIP_LIMIT bounds it
TIMEOUT_MS = 180_000
HV = """document.querySelector('[data-testid="stBidiComponentIsolated"]')?.shadowRoot?.querySelector('.hv')"""
# A layer switch: from the click to the first paint with the new layer's lines.
SWITCH_JS = f"""(layer) => new Promise((resolve) => {{
  const r = {HV};
  let t0;
  r.addEventListener('click', (e) => {{ t0 = e.timeStamp; }}, {{capture: true, once: true}});
  const done = () => r.dataset.layer === String(layer) && !r.classList.contains('loading');
  const obs = new MutationObserver(() => {{
    if (t0 === undefined || !done()) return;
    obs.disconnect();
    requestAnimationFrame(() => setTimeout(() => resolve(performance.now() - t0), 0));
  }});
  obs.observe(r, {{attributes: true}});
  r.querySelector(`button[data-layer="${{layer}}"]`).click();
}})"""
INK_JS = f"""() => {{
  const r = {HV};
  const c = r.querySelector('canvas');
  const d = c.getContext('2d').getImageData(0, 0, c.width, Math.min(c.height, 2000)).data;
  let ink = 0;
  for (let i = 3; i < d.length; i += 4) ink += d[i] > 0;
  return {{ink, tokens: r.querySelectorAll('.hv-left .hv-tok').length}};
}}"""


def text_of(model, tokens: int) -> str:
    """A prefix of the long paragraph that tokenises to exactly `tokens` tokens ([CLS] and [SEP] included)."""
    words = LONG_PARAGRAPH.split()
    lo, hi = 1, len(words)
    while lo < hi:  # the longest prefix with at most `tokens` tokens
        mid = (lo + hi + 1) // 2
        if run(model, " ".join(words[:mid]), max_tokens=512).seq_len <= tokens:
            lo = mid
        else:
            hi = mid - 1
    text = " ".join(words[:lo])
    while run(model, text, max_tokens=512).seq_len < tokens:
        text += " a"
    return text


def state(page) -> dict:
    return page.evaluate(f"() => ({{...{HV}.dataset}})")


def painted_after(page, before: int) -> float:
    """Wait for a paint newer than `before`; its input-to-paint time in ms."""
    page.wait_for_function(f"(n) => +({HV}.dataset.painted || 0) > n", arg=before, timeout=TIMEOUT_MS, polling="raf")
    return float(state(page)["inputMs"])


def timed_inputs(page, act, n: int) -> list[float]:
    out = []
    for i in range(n):
        before = int(state(page).get("painted", 0))
        act(i)
        out.append(painted_after(page, before))
    return out


BIG = {"model": "custom", "d_model": "64", "num_heads": "16", "d_ff": "128", "num_layers": "12"}


def counted_page(browser):
    """A new page whose script runs COUNT_RUNS can count."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.add_init_script(RUN_LOG_INIT)
    return context.new_page()


def open_view(page, url: str, text: str, params: dict | None = None) -> float:
    t0 = time.perf_counter()
    page.goto(f"{url}{pages.page('inside-a-head').url}?" + urllib.parse.urlencode({"text": text} | (params or {})))
    wait_ready(page, TIMEOUT_MS)
    page.wait_for_function(f"() => !!{HV}?.dataset.draws", timeout=TIMEOUT_MS)
    return time.perf_counter() - t0


def bench(runs: int) -> dict:
    model = load_pretrained()
    texts = {n: text_of(model, n) for n in (128, 512)}
    traces = {n: run(model, t) for n, t in texts.items()}
    sel = dict(layer=3, head=1, avg=False, query=0)
    size = {n: len(payload.build(traces[n], sel, name="x")) for n in texts}
    out = {"payload_128_bytes": size[128], "payload_512_bytes": size[512]}
    with streamlit_server() as (url, _), sync_playwright() as pw:
        browser = launch(pw)
        page = counted_page(browser)
        out["open_128_s"] = open_view(page, url, texts[128])
        page.evaluate(COUNT_RUNS)
        toks = page.locator(".hv .hv-left .hv-tok")
        hover = timed_inputs(page, lambda i: toks.nth(5 + 9 * i).hover(), runs)
        heads = timed_inputs(page, lambda i: page.locator(f'.hv button[data-head="{(i * 5 + 2) % 12}"]').click(), runs)
        layers = timed_inputs(page, lambda i: page.locator(f'.hv button[data-layer="{(i + 4) % 6}"]').click(), runs)
        out["runs_during_switches"] = page.evaluate("() => window.__runs")
        t0 = time.perf_counter()
        page.wait_for_function("() => window.__runs > 0", timeout=TIMEOUT_MS)  # the deferred pick, once
        wait_ready(page, TIMEOUT_MS)
        out["pick_reaches_app_s"] = time.perf_counter() - t0
        out["runs_after_pick"] = page.evaluate("() => window.__runs")
        out |= {"hover_128_ms": statistics.median(hover), "head_128_ms": statistics.median(heads),
                "layer_128_ms": statistics.median(layers), "hover_128_max_ms": max(hover),
                "head_128_max_ms": max(heads), "layer_128_max_ms": max(layers)}

        page = counted_page(browser)
        out["open_512_s"] = open_view(page, url, texts[512])
        page.wait_for_function(f"() => !{HV}.classList.contains('loading')", timeout=TIMEOUT_MS)
        page.evaluate(COUNT_RUNS)
        switches, blank = [], False
        for i in range(max(5, runs // 2)):
            switches.append(page.evaluate(SWITCH_JS, (i + 4) % 6))
            ink = page.evaluate(INK_JS)
            blank |= ink["ink"] == 0 or ink["tokens"] != 512
        out |= {"layer_512_ms": statistics.median(switches), "layer_512_max_ms": max(switches), "blank_512": blank,
                "runs_during_512_switches": page.evaluate("() => window.__runs"),
                "layers_shipped_512": state(page).get("held", "")}

        page = counted_page(browser)
        open_view(page, url, texts[512], BIG)
        page.wait_for_function(f"() => !{HV}.classList.contains('loading')", timeout=TIMEOUT_MS)
        held = {int(n) for n in state(page)["held"].split(",")}
        page.evaluate(COUNT_RUNS)
        out["layer_512_fetch_ms"] = page.evaluate(SWITCH_JS, max(set(range(12)) - held))
        out["runs_during_512_fetch"] = page.evaluate("() => window.__runs")
        out["big_layers_shipped"] = len(held)
        browser.close()
    return out


# ------------------------------------------------------------------------------------------------ Event Timing
# Before the app loads: every Event Timing entry of 16 ms or more, and every websocket message's size and time.
EVENTS_INIT = """(() => {
  const ev = window.__ev = {entries: [], ws: []};
  const entry = ev.entry = (e) => ({name: e.name, duration: e.duration, start: e.startTime,
    ps: e.processingStart, pe: e.processingEnd});
  ev.observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) ev.entries.push(entry(e));
  });
  ev.observer.observe({type: 'event', durationThreshold: 16, buffered: true});
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', (e) => ev.ws.push([performance.now(), e.data.byteLength ?? e.data.size ?? 0]));
    }
  };
})()"""
# Event types Event Timing reports (mousemove and pointermove are not among them).
TIMED = ("click", "pointerdown", "pointerup", "mousedown", "mouseup", "pointerover", "pointerenter", "mouseover",
         "mouseenter", "pointerout", "pointerleave", "mouseout", "mouseleave", "keydown", "keyup", "keypress", "input")
START_JS = """() => { window.__ev.entries = []; window.__ev.counts = Object.fromEntries(performance.eventCounts);
                     window.__ev.t0 = performance.now(); }"""
# After the last input: two frames and a task, so the observer has had the entries of the last events.
END_JS = """() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(() => {
  const ev = window.__ev;
  ev.entries.push(...ev.observer.takeRecords().map(ev.entry));
  const counts = {};
  for (const [k, v] of performance.eventCounts) if (v - (ev.counts[k] || 0)) counts[k] = v - (ev.counts[k] || 0);
  done({entries: ev.entries.filter(e => e.start >= ev.t0), counts});
}, 100))))"""
WS_BYTES = "(t0) => window.__ev.ws.filter(([t]) => t >= t0).reduce((s, [, n]) => s + n, 0)"
HM = """document.querySelector('[data-testid="stBidiComponentIsolated"]')?.shadowRoot?.querySelector('.hm')"""
PAUSE_MS = 150  # between inputs: a person clicking through heads (a pacing, not a synchronisation)


def root_state(page, view: str) -> dict:
    if not view:  # the bare page draws no stamp
        return {}
    return page.evaluate(f"() => ({{...({HV if view == 'hv' else HM}).dataset}})")


def timed_batch(page, view: str, inputs: list) -> dict:
    """Run real inputs, PAUSE_MS apart; the Event Timing entries and event counts they caused, and the views' own
    input-to-paint times of those that redrew something."""
    page.evaluate(START_JS)
    paints = []
    for act in inputs:
        before = int(root_state(page, view).get("painted", 0))
        act()
        page.wait_for_timeout(PAUSE_MS)
        after = root_state(page, view)
        if int(after.get("painted", 0)) > before:
            paints.append(float(after["inputMs"]))
    got = page.evaluate(END_JS)
    timed = {k: v for k, v in got["counts"].items() if k in TIMED}
    entries = got["entries"]
    return {"events": sum(timed.values()), "counts": timed, "durations": sorted(e["duration"] for e in entries),
            "paints": paints, "handlers": per_input(entries)}


def per_input(entries: list[dict]) -> list[float]:
    """The event handlers' time of each input (processingEnd - processingStart summed over its entries): an input's
    events start within a few ms of each other, inputs PAUSE_MS apart."""
    out: list[float] = []
    last = None
    for e in sorted(entries, key=lambda e: e["start"]):
        if last is None or e["start"] - last > PAUSE_MS / 2:
            out.append(0.0)
        out[-1] += e["pe"] - e["ps"]
        last = e["start"]
    return out


def open_at(page, url: str, path: str, params: dict, view: str) -> None:
    page.goto(f"{url}{path}?" + urllib.parse.urlencode(params))
    wait_ready(page, TIMEOUT_MS)
    root = HV if view == "hv" else HM
    page.wait_for_function(f"() => {{ const r = {root}; return r && r.dataset.draws && !r.classList.contains('loading'); }}",
                           timeout=TIMEOUT_MS)
    settle_app(page)


def settle_app(page) -> None:
    """Wait for the pick of the last clicks (sent SYNC_MS after them) and its run to be over."""
    page.wait_for_timeout(1200)
    wait_ready(page, TIMEOUT_MS)


def centre(page, selector: str, i: int) -> tuple[float, float]:
    b = page.locator(selector).nth(i).bounding_box()
    return b["x"] + b["width"] / 2, b["y"] + b["height"] / 2


def on_screen(page, selector: str) -> list[int]:
    """The indices of the elements wholly inside the viewport: a person hovers what they see (a mouse moved past the
    window's edge reaches nothing, and a click would scroll first)."""
    return page.evaluate(f"""(sel) => {{ const h = window.innerHeight;
      return [...({HV}).querySelectorAll(sel.replace(/^[.]hv /, ''))].map((e, i) => [e.getBoundingClientRect(), i])
        .filter(([b]) => b.top >= 0 && b.bottom <= h).map(([, i]) => i); }}""", selector)


HOLD_MS = 80  # --hand: a press about as long as a quick click by hand


# A selector's centre in the window, scrolled to the middle first if it is not wholly in view: read from the page
# at once. (Playwright's hover() and click() first watch the element over two animation frames, so the pointer then
# arrives just after a frame began and its event waits most of a frame for the next one, every time; a hand's
# pointer arrives at any moment of a frame.)
CENTRE_JS = """(e) => {
  let r = e.getBoundingClientRect();
  if (r.top < 0 || r.bottom > innerHeight) { e.scrollIntoView({block: 'center'}); r = e.getBoundingClientRect(); }
  return [r.x + r.width / 2, r.y + r.height / 2];
}"""


def press(page, target, hand: bool) -> None:
    """One click on a selector or at (x, y): Playwright's own (the pointer arrives, presses and releases within a few
    ms, so the three inputs share one frame and the first one's duration holds the others' work), or with hand as a
    hand makes it: the pointer arrives, rests PAUSE_MS (its hover is timed), presses for HOLD_MS, releases, all at
    one point (CENTRE_JS for a selector)."""
    if not hand:
        if isinstance(target, str):
            page.locator(target).click()
        else:
            page.mouse.click(*target)
        return
    x, y = page.locator(target).evaluate(CENTRE_JS) if isinstance(target, str) else target
    page.mouse.move(x, y)
    page.wait_for_timeout(PAUSE_MS)  # pacings, as between inputs
    page.mouse.down()
    page.wait_for_timeout(HOLD_MS)
    page.mouse.up()


def clicks(page, targets: list, hand: bool = False) -> list:
    return [lambda target=target: press(page, target, hand) for target in targets]


def measure_keys(page, select: str, n: int) -> list:
    """Keyboard steps through a <select> (real keydown events): focus it, then ArrowDown and ArrowUp in turn."""
    page.locator(select).focus()
    return [lambda i=i: page.keyboard.press("ArrowDown" if i % 2 == 0 else "ArrowUp") for i in range(n)]


def leave_after(page, xy) -> None:
    """Hover a token, then leave the columns: the view's paint time is the leave's (its events are both's)."""
    page.mouse.move(*xy)
    page.wait_for_timeout(PAUSE_MS)
    page.mouse.move(2, 2)


def headview_events(page, url: str, text: str, hand: bool = False) -> dict:
    open_at(page, url, pages.page("inside-a-head").url, {"text": text}, "hv")
    out = {}
    toks = ".hv .hv-left .hv-tok"
    seen = on_screen(page, toks)
    moves = [centre(page, toks, seen[(3 + 7 * i) % len(seen)]) for i in range(12)]
    out["hover"] = timed_batch(page, "hv", [lambda xy=xy: page.mouse.move(*xy) for xy in moves])
    out["leave"] = timed_batch(page, "hv", [lambda xy=xy: leave_after(page, xy) for xy in moves[:6]])
    picks = [f"{toks} >> nth={seen[(2 + 5 * i) % len(seen)]}" for i in range(6)]
    out["click"] = timed_batch(page, "hv", clicks(page, picks, hand))
    settle_app(page)
    out["layer"] = timed_batch(page, "hv", clicks(page, [f'.hv button[data-layer="{(i + 4) % 6}"]' for i in range(6)], hand))
    settle_app(page)
    out["head"] = timed_batch(page, "hv", clicks(page, [f'.hv button[data-head="{(i * 5 + 2) % 12}"]' for i in range(8)], hand))
    settle_app(page)
    if page.locator(".hv select").count():  # the head view's Measure choice, where it has one
        out["measure"] = timed_batch(page, "hv", measure_keys(page, ".hv select", 6))
        settle_app(page)
    return out


def map_events(page, url: str, text: str, hand: bool = False) -> dict:
    """The map: one head, then the grid and the model view. The measure switches step through the measures with the
    keyboard; a measure the browser lacks is asked for at once (that wait is the app's, not an input's)."""
    open_at(page, url, "/", {"text": text, "measure": "value"}, "hm")
    out = {}
    box = page.locator(".hm canvas.hm-map").first.bounding_box()
    cells = [(box["x"] + box["width"] * (0.1 + 0.07 * i), box["y"] + box["height"] * (0.9 - 0.06 * i)) for i in range(12)]
    out["hover"] = timed_batch(page, "hm", [lambda xy=xy: page.mouse.move(*xy) for xy in cells])
    toggles = ['.hm button[data-avg="1"]', '.hm button[data-flag="hide_special"]', '.hm button[data-scale="row"]',
               '.hm button[data-flag="beside"]']
    out["click"] = timed_batch(page, "hm", clicks(page, toggles + toggles[:2] + ['.hm button[data-scale="fixed"]'], hand))
    settle_app(page)
    # Beside raw on and off eight times: one map and two in turn, the toggle that changes the most of the layout
    out["beside"] = timed_batch(page, "hm", clicks(page, ['.hm button[data-flag="beside"]'] * 8, hand))
    settle_app(page)
    out["layer"] = timed_batch(page, "hm", clicks(page, [f'.hm button[data-layer="{(i + 4) % 6}"]' for i in range(6)], hand))
    settle_app(page)
    out["head"] = timed_batch(page, "hm", clicks(page, [f'.hm button[data-head="{(i * 5 + 2) % 12}"]' for i in range(8)], hand))
    settle_app(page)
    out["measure"] = timed_batch(page, "hm", measure_keys(page, ".hm select.hm-select", 6))
    settle_app(page)
    page.locator('[data-testid="stButtonGroup"] button', has_text="All heads of a layer").click()
    wait_ready(page, TIMEOUT_MS)
    page.wait_for_function(f"() => {HM}?.dataset.thumbs && !{HM}.classList.contains('loading')", timeout=TIMEOUT_MS)
    out["grid layer"] = timed_batch(page, "hm", clicks(page, [f'.hm button[data-layer="{(i + 1) % 6}"]' for i in range(6)], hand))
    settle_app(page)
    page.locator('[data-testid="stButtonGroup"] button', has_text="Model view").click()
    wait_ready(page, TIMEOUT_MS)
    page.wait_for_function(f"() => {HM}?.dataset.thumbs === '72' && !{HM}.classList.contains('loading')",
                           timeout=TIMEOUT_MS)
    out["model measure"] = timed_batch(page, "hm", measure_keys(page, ".hm select.hm-select", 4))
    settle_app(page)
    return out


def settled_bytes(page, url: str, text: str, runs: int, view: str = "hm") -> list[int]:
    """Websocket bytes of the settled run after one head click on the map (the browser holds every layer), or
    (view "hv") in the head view on Inside a head: its run also brings the three step charts of the new head."""
    open_at(page, url, "/" if view == "hm" else pages.page("inside-a-head").url, {"text": text}, view)
    sizes = []
    for i in range(runs):
        t0 = page.evaluate("() => performance.now()")
        search = page.evaluate("() => location.search")
        page.locator(f'.{view} button[data-head="{(i * 5 + 3) % 12}"]').click()
        page.wait_for_function("(s) => location.search !== s", arg=search, timeout=TIMEOUT_MS)
        settle_app(page)
        sizes.append(page.evaluate(WS_BYTES, t0))
    return sizes


# The heaviest choices a page offers besides its defaults: (what, page path, URL settings).
HEAVY = (("Knock out heads, L3 H1 knocked out, layer 5", "knockout", {"ablate": "3.1", "layer": "5"}),
         ("Compare, colours per row", "side-by-side", {"scale": "row"}))


def page_bytes(browser, url: str, text: str) -> dict[str, int]:
    """Websocket bytes of every page's first run at 512 tokens, opened by its URL in a fresh tab, then of HEAVY."""
    out = {}
    opened = [(entry.title, entry.url, {}) for entry in pages.PAGES]
    opened += [(title, pages.page(path).url, params) for title, path, params in HEAVY]
    for title, path, params in opened:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.add_init_script(EVENTS_INIT)
        page = context.new_page()
        page.goto(f"{url}{path}?" + urllib.parse.urlencode({"text": text} | params))
        wait_ready(page, TIMEOUT_MS)
        settle_app(page)  # a page's later runs (a component's first pick, a fragment) come within this
        out[title] = page.evaluate(WS_BYTES, 0)
        context.close()
    return out


def distribution(durations: list[float]) -> str:
    """Counts of the reported durations per 8 ms step: '16:3 24:1'."""
    steps: dict[int, int] = {}
    for d in durations:
        steps[int(d)] = steps.get(int(d), 0) + 1
    return " ".join(f"{k}:{v}" for k, v in sorted(steps.items())) or "-"


# The floor: the same kinds of input where no code of ours listens. "app page": on the Attention page with its map
# (the page's title and the empty margin right of the main column); "bare page": a page of plain buttons and one
# canvas redrawn on each click, no Streamlit. What the app page shows over the bare one is the page's, not a view's.
BARE_PAGE = """<!doctype html><body style="margin:0;font:14px sans-serif"><div id="row"></div><p id="out">-</p>
<canvas id="c" width="640" height="640"></canvas><script>
const row = document.getElementById('row'), out = document.getElementById('out');
for (let i = 0; i < 12; i++) {
  const b = row.appendChild(document.createElement('button'));
  b.textContent = 'b' + i; b.style.cssText = 'width:90px;height:30px';
  b.addEventListener('pointerenter', () => { b.style.background = '#fc8'; });
  b.addEventListener('pointerleave', () => { b.style.background = ''; });
  b.addEventListener('click', () => { out.textContent = 'clicked ' + b.textContent; });
}
const c = document.getElementById('c'), g = c.getContext('2d');
const draw = (k) => { const img = new ImageData(123, 123);
  for (let i = 0; i < img.data.length; i += 4) img.data.set([(i * 7 + k * 31) % 255, 80, 200, 255], i);
  const off = new OffscreenCanvas(123, 123); off.getContext('2d').putImageData(img, 0, 0);
  g.imageSmoothingEnabled = false; g.drawImage(off, 0, 0, 640, 640); };
let k = 0; draw(k); c.addEventListener('click', () => draw(++k));
</script>"""


def floor_events(page, url: str, text: str, hand: bool = False) -> dict:
    """Hovers and clicks on the app page's title and empty margin: no handler of ours, only Streamlit's own."""
    open_at(page, url, "/", {"text": text, "measure": "value"}, "hm")
    b = page.locator('[data-testid="stMain"] h1').first.bounding_box()
    width = page.viewport_size["width"]
    points = [(b["x"] + b["width"] * f, b["y"] + b["height"] / 2) for f in (0.1, 0.5, 0.9)]
    points += [(width - 40, 300 + 250 * i) for i in range(3)]
    return {"hover": timed_batch(page, "hm", [lambda xy=xy: page.mouse.move(*xy) for xy in points * 2]),
            "click": timed_batch(page, "hm", clicks(page, points, hand))}


def bare_events(page, hand: bool = False) -> dict:
    """The bare page: hovers and clicks on its buttons, clicks that redraw its 640 px canvas from 123 x 123 cells."""
    page.set_content(BARE_PAGE)
    buttons = [centre(page, "#row button", i) for i in range(12)]
    box = page.locator("#c").bounding_box()
    return {"hover": timed_batch(page, "", [lambda xy=xy: page.mouse.move(*xy) for xy in buttons]),
            "click": timed_batch(page, "", clicks(page, buttons[:8], hand)),
            "canvas click": timed_batch(page, "", clicks(page, [(box["x"] + 40 + 60 * i, box["y"] + 60)
                                                                for i in range(8)], hand))}


VIEWS = {"head view": headview_events, "map": map_events}


def payloads_only() -> None:
    """`--payloads`: only what every page's first run sends at 512 tokens (about 2 minutes)."""
    text = text_of(load_pretrained(), 512)
    started = time.strftime("%Y-%m-%d %H:%M %Z")
    with streamlit_server() as (url, _), sync_playwright() as pw:
        browser = launch(pw)
        sizes = page_bytes(browser, url, text)
        browser.close()
    print(f"machine: {cpu_name()}, {os.cpu_count()} cores, Chromium headless, {started}")
    print("first run of every page at 512 tokens (websocket bytes; goal <= 3 MB):")
    for title, size in sizes.items():
        print(f"  {title:<45} {size / 1e6:6.2f} MB{'' if size <= 3e6 else '   <- over'}")
    print(json.dumps({"bench": "payloads", "page_bytes": sizes, "machine": {"cpu": cpu_name(), "date": started}}))


def events(args) -> None:
    model = load_pretrained()
    texts = {n: text_of(model, n) for n in args.tokens}
    whole = set(args.tokens) == {123, 512} and set(args.views) == set(VIEWS)
    start_load = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M %Z")
    results: dict = {}
    with streamlit_server() as (url, _), sync_playwright() as pw:
        browser = launch(pw)

        def fresh_page():
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            context.add_init_script(EVENTS_INIT)
            return context.new_page()

        results[("bare page", 0)] = bare_events(page := fresh_page(), args.hand)
        page.context.close()
        for n, text in texts.items():
            results[("app page", n)] = floor_events(page := fresh_page(), url, text, args.hand)
            page.context.close()
            for name in args.views:
                results[(name, n)] = VIEWS[name](page := fresh_page(), url, text, args.hand)
                page.context.close()
        settled, settled_hv, sizes = [], [], {}
        if whole:  # the payloads are measured with the whole run only
            settled = settled_bytes(page := fresh_page(), url, texts[512], max(3, args.runs // 2))
            page.context.close()
            settled_hv = settled_bytes(page := fresh_page(), url, texts[512], max(3, args.runs // 2), "hv")
            page.context.close()
            sizes = page_bytes(browser, url, texts[512])
        browser.close()
    load = (start_load[0], os.getloadavg()[0])
    print(f"machine: {cpu_name()}, {os.cpu_count()} cores, Chromium headless, {started}; load average "
          f"{load[0]:.1f} at start, {load[1]:.1f} at end")
    print("\nEvent Timing (durationThreshold 16 ms; Chromium reports durations in 8 ms steps): the timed events each "
          "kind of input caused, how many took >= 16 ms, over 16 and over 33, and the reported durations (ms:count). Of "
          "those entries: the time in event handlers per input (processingEnd - processingStart, summed over its "
          "events), median and max; the rest of a duration is the browser's: waiting for the next frame, style, "
          "layout, paint, raster and presentation. The floor first: \"bare page\" (no Streamlit: buttons, and a 640 px "
          "canvas redrawn per click) and \"app page\" (the Attention page with its map, inputs on its title and empty "
          "margin, which no code of ours handles). Clicks: " + (f"by hand (the pointer arrives, rests {PAUSE_MS} ms, "
          f"presses for {HOLD_MS} ms; its arrival's events count with the click)" if args.hand else "Playwright's (the "
          "pointer arrives, presses and releases within a few ms: one frame holds all three)"))
    head = (f"{'view':<10} {'tokens':>6} {'input':<14} {'events':>6} {'>=16':>5} {'>16':>4} {'>33':>4} "
            f"{'to paint, med':>14} {'handlers med/max':>16}  durations")
    print(head + "\n" + "-" * len(head))
    rows = []
    for (name, n), kinds in results.items():
        limit = 16 if n <= 128 else 33  # the bare page: 0 tokens
        for kind, r in kinds.items():
            over = sum(d > limit for d in r["durations"])
            paint = statistics.median(r["paints"]) if r["paints"] else float("nan")
            handler = (statistics.median(r["handlers"]), max(r["handlers"])) if r["handlers"] else (0.0, 0.0)
            rows.append({"view": name, "tokens": n, "input": kind, "events": r["events"], "ge16": len(r["durations"]),
                         "over16": sum(d > 16 for d in r["durations"]), "over33": sum(d > 33 for d in r["durations"]),
                         "max": max(r["durations"], default=0), "paint_median_ms": round(paint, 1),
                         "met": over == 0, "counts": r["counts"], "durations": r["durations"],
                         "handler_median_ms": round(handler[0], 2), "handler_max_ms": round(handler[1], 2)})
            print(f"{name:<10} {n:>6} {kind:<14} {r['events']:>6} {len(r['durations']):>5} "
                  f"{rows[-1]['over16']:>4} {rows[-1]['over33']:>4} {paint:>14.1f} {handler[0]:>7.1f}/{handler[1]:<7.1f} "
                  f" {distribution(r['durations'])}"
                  f"{'' if over == 0 else '   <- over ' + str(limit) + ' ms'}")
    if not whole:
        print(json.dumps({"bench": "events", "rows": rows, "hand": args.hand, "machine": {"cpu": cpu_name(), "loadavg": load}}))
        return
    for name, got in (("map", settled), ("Inside a head", settled_hv)):
        print(f"\n{name}, settled run at 512 tokens (a head click): {', '.join(f'{b / 1e6:.3f}' for b in got)} MB "
              f"(goal <= 0.3 MB)")
    print("first run of every page at 512 tokens (websocket bytes; goal <= 3 MB):")
    for title, size in sizes.items():
        print(f"  {title:<45} {size / 1e6:6.2f} MB{'' if size <= 3e6 else '   <- over'}")
    machine = {"cpu": cpu_name(), "cores": os.cpu_count(), "loadavg": load, "date": started}
    print(json.dumps({"bench": "events", "rows": rows, "hand": args.hand, "settled_bytes": settled,
                      "settled_bytes_inside_a_head": settled_hv, "page_bytes": sizes,
                      "machine": machine}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--events", action="store_true", help="Event Timing of every input, and the payloads (issue 23)")
    parser.add_argument("--views", nargs="+", choices=list(VIEWS), default=list(VIEWS),
                        help="with --events: only these views (the payloads are measured only with all of them)")
    parser.add_argument("--tokens", nargs="+", type=int, choices=(123, 512), default=[123, 512],
                        help="with --events: only these lengths (the payloads need both)")
    parser.add_argument("--payloads", action="store_true", help="only every page's first run at 512 tokens, in bytes")
    parser.add_argument("--hand", action="store_true", help="with --events: clicks as a hand makes them (the pointer "
                        f"arrives, rests {PAUSE_MS} ms, presses for {HOLD_MS} ms), not Playwright's press and release "
                        "within a few ms of arriving")
    args = parser.parse_args()
    if args.payloads:
        payloads_only()
        return
    if args.events:
        events(args)
        return
    r = bench(args.runs)
    rows = [
        ("token hover, 128 tokens", r["hover_128_ms"], r["hover_128_max_ms"], TARGETS_MS["hover_128"]),
        ("head switch, 128 tokens", r["head_128_ms"], r["head_128_max_ms"], TARGETS_MS["head_128"]),
        ("layer switch, 128 tokens", r["layer_128_ms"], r["layer_128_max_ms"], TARGETS_MS["layer_128"]),
        ("layer switch, 512 tokens", r["layer_512_ms"], r["layer_512_max_ms"], TARGETS_MS["layer_512"]),
    ]
    print(f"{'input -> lines painted':28} {'median ms':>10} {'max ms':>8} {'target':>7}  met")
    for name, med, worst, target in rows:
        print(f"{name:28} {med:10.1f} {worst:8.1f} {target:7d}  {'yes' if med <= target else 'NO'}")
    print(f"script runs during the 128-token hovers and switches: {r['runs_during_switches']} (target 0); the pick "
          f"then reached the app as {r['runs_after_pick']} run(s), {r['pick_reaches_app_s']:.2f} s after the last click")
    print(f"payload: {r['payload_128_bytes'] / 1e6:.2f} MB at 128 tokens (all 6 × 12 maps; limit 3 MB), "
          f"{r['payload_512_bytes'] / 1e6:.2f} MB at 512 tokens (8-bit, deflated; layers in the browser: "
          f"{r['layers_shipped_512']})")
    print(f"script runs during the 512-token layer switches: {r['runs_during_512_switches']}")
    print(f"12 layers × 16 heads at 512 tokens: {r['big_layers_shipped']} layers shipped; a layer fetched in "
          f"{r['layer_512_fetch_ms']:.0f} ms with {r['runs_during_512_fetch']} script run(s)")
    print(f"page open to lines drawn: {r['open_128_s']:.2f} s at 128 tokens, {r['open_512_s']:.2f} s at 512; "
          f"blank page at 512: {'yes' if r['blank_512'] else 'no'}")
    machine = {"cpu": cpu_name(), "cores": os.cpu_count(), "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "")}
    print(json.dumps({"bench": "headview", **{k: round(v, 2) if isinstance(v, float) else v for k, v in r.items()},
                      "machine": machine}))


if __name__ == "__main__":
    main()
