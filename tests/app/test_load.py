"""A class at once (issue 6, point 6): 20 concurrent browser sessions against one `streamlit run app.py`.

One Chromium, one browser context per student (own cookies, own websocket, own Streamlit session), driven with
playwright.async_api so 20 sessions share one event loop instead of 20 browsers on a 2-core machine. Each session
opens its own configuration (mostly small custom encoders, some on the pretrained model), then changes its
sentence ROUNDS times and picks another head. Every session must see only its own tokens and settings, none may
show an exception, and the server's resident memory must stay under RSS_LIMIT_MB. Prints p50/p95 latencies and
the peak RSS; run alone with `pytest -m load -s`.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.async_api import TimeoutError as PlaywrightTimeout
from playwright.async_api import async_playwright

from devkit.server import CHROMIUM_ARGS, READY, require_chromium, streamlit_server
from tests.app.test_browser import EXCEPTION, HEATMAP_JS, SERVER_ENV, WAIT_HEATMAP_JS, App, ServerLog, heatmap_labels
from ui import settings

SESSIONS = 20
ROUNDS = 3  # sentence changes per session, after the first page load; then one head change
# 2-core / 8 GB is the machine the app is sized for (encoder/resources.py); the server must leave most of it to the
# OS and the browsers. We measured a peak of about 1 GB for this workload (pretrained model, model and trace caches,
# 20 sessions); twice that means something is kept per session or never evicted.
RSS_LIMIT_MB = 2048
LOAD_MS = 240_000  # 20 first loads share 2 cores with Chromium
CHANGE_MS = 120_000
SETTLE_MS = 30_000  # from the map drawn to the sidebar, box and URL showing the same run
STAGGER_S = 0.5  # students open the link within ~10 s of each other; their rounds then overlap

# Mostly small custom encoders (distinct configs, so the model cache is exercised), every fifth on the pretrained one.
CUSTOM = [
    dict(d_model=64, num_heads=4, d_ff=128, num_layers=2, norm="post"),
    # Two heads: the change goes to head 1, the setting's default, which the URL leaves out.
    dict(d_model=64, num_heads=2, d_ff=256, num_layers=1, norm="pre"),
    dict(d_model=96, num_heads=3, d_ff=384, num_layers=2, norm="pre", activation="gelu"),
    dict(d_model=128, num_heads=8, d_ff=512, num_layers=3, norm="post", positional="learned"),
    dict(d_model=32, num_heads=1, d_ff=64, num_layers=4, norm="pre", final_norm=True),
    dict(d_model=64, num_heads=4, d_ff=128, num_layers=2, norm="post", seed=7),
]
WORDS = ["apple", "river", "mountain", "garden", "window", "teacher", "engine", "forest", "yellow", "guitar",
         "planet", "coffee", "island", "silver", "doctor", "winter", "castle", "rocket", "violin", "desert"]


NO_ANIMATIONS_JS = """document.addEventListener('DOMContentLoaded', () => {
  const style = document.createElement('style');
  style.textContent = '*, *::before, *::after { animation: none !important; transition: none !important; }';
  document.head.appendChild(style);
});"""


# What a student sees of their own settings: exceptions shown, the address bar, the sentence box, the sidebar's model.
STATE_JS = f"""() => ({{
  exceptions: document.querySelectorAll('{EXCEPTION}').length,
  url: location.search,
  box: document.querySelector('textarea[aria-label="Sentence"]')?.value,
  custom: [...document.querySelectorAll('[data-testid="stSidebar"] input[type=radio]')]
          .some(r => r.checked && r.closest('label')?.innerText.includes('Custom')),
}})"""


def session_config(i: int) -> dict:
    """URL settings of session i: pretrained for every fifth, otherwise one of the custom encoders."""
    if i % 5 == 0:
        return {"head": 0}
    return {"model": "custom", **CUSTOM[i % len(CUSTOM)], "head": 0}


def sentence(i: int, r: int) -> str:
    """A sentence no other session uses: its own word, its number and the round."""
    return f"Student {i} writes about the {WORDS[i]} in round {r} of {ROUNDS}."


def heads_of(cfg: dict) -> int:
    return cfg.get("num_heads", 12)


@dataclass
class Result:
    session: int
    load_s: float = 0.0
    change_s: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class RssSampler:
    """Samples the server's resident set size (VmRSS of /proc/<pid>/status) in a thread; keeps the peak."""

    def __init__(self, pid: int, every: float = 0.2) -> None:
        self.path, self.every, self.peak_mb, self.samples = Path(f"/proc/{pid}/status"), every, 0.0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def read_mb(self) -> float:
        for line in self.path.read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError(f"no VmRSS in {self.path}")

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak_mb = max(self.peak_mb, self.read_mb())
                self.samples += 1
            except (OSError, RuntimeError):
                return
            self._stop.wait(self.every)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far (/proc/<pid>/stat, fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def wait_heatmap(page, labels: list[str], title: str, timeout: float) -> dict:
    exact = labels if len(labels) <= 48 else None
    await page.wait_for_function(WAIT_HEATMAP_JS, arg=[READY, exact, labels, title], timeout=timeout, polling=100)
    return await page.evaluate(HEATMAP_JS)


async def run_session(browser, app: App, i: int, start: asyncio.Event) -> Result:
    """One student: open their link, change the sentence ROUNDS times, pick another head; record what went wrong."""
    res, cfg = Result(i), session_config(i)
    # Twenty renderers share 2 cores with the server: no CSS animations (spinners would burn CPU while waiting).
    context = await browser.new_context(viewport={"width": 1280, "height": 900}, reduced_motion="reduce")
    await context.add_init_script(NO_ANIMATIONS_JS)
    context.set_default_timeout(CHANGE_MS)
    page = await context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), asyncio.ensure_future(d.dismiss())))

    async def check(step: str, text: str, head: int) -> None:
        """This session's own sentence on its heatmap, its own settings in its URL and sidebar, no exception."""
        # The map can be drawn a moment before the sentence box and the sidebar's model radio are in the DOM on a
        # first load with 20 browsers on 2 cores: wait for them (a page that never shows them times out here).
        await page.wait_for_selector('textarea[aria-label="Sentence"]', state="attached", timeout=CHANGE_MS)
        await page.wait_for_selector('[data-testid="stSidebar"] input[type=radio]', state="attached",
                                     timeout=CHANGE_MS)
        wanted = settings.to_query(settings.defaults() | cfg | {"text": text, "head": head})
        wanted.pop("text")  # compared through the box: the URL encodes it
        expect = {"text": text, "custom": cfg.get("model") == "custom", "params": wanted}
        # Under this load the frontend can still be applying the run's values when the map is drawn (CI once read
        # the model radio at its first option for a custom session that then showed Custom): wait, polling and
        # bounded, until the page shows this session's state or an exception, then read it once.
        try:
            await page.wait_for_function(f"""want => {{
              const s = ({STATE_JS})();
              if (s.exceptions) return true;
              const q = new URLSearchParams(s.url);
              return s.box === want.text && s.custom === want.custom
                && Object.entries(want.params).every(([k, v]) => q.get(k) === v);
            }}""", arg=expect, timeout=SETTLE_MS, polling=100)
        except PlaywrightTimeout:
            pass  # what is still wrong is recorded below
        state = await page.evaluate(STATE_JS)
        params = dict(p.split("=", 1) for p in state["url"].lstrip("?").split("&") if "=" in p)
        if state["exceptions"]:
            res.problems.append(f"{step}: exception element shown")
        if state["box"] != text:
            res.problems.append(f"{step}: the box holds {state['box']!r}, not this session's {text!r}")
        if state["custom"] != (cfg.get("model") == "custom"):
            res.problems.append(f"{step}: sidebar model is {'custom' if state['custom'] else 'pretrained'}")
        for key, value in wanted.items():
            if params.get(key) != value:
                res.problems.append(f"{step}: URL has {key}={params.get(key)!r}, this session set {value!r}")

    try:
        await start.wait()
        await asyncio.sleep(i * STAGGER_S)
        text = sentence(i, 0)
        t0 = time.monotonic()
        # "commit": 20 browsers fetching the app's scripts at once on 2 cores; the heatmap wait below is the real check.
        await page.goto(app.link("/", {k: settings.SETTINGS[k].format(v) for k, v in cfg.items()} | {"text": text}),
                        wait_until="commit", timeout=LOAD_MS)
        layer = min(settings.SETTINGS["layer"].default, cfg.get("num_layers", 6) - 1)
        await wait_heatmap(page, heatmap_labels(text), f"layer {layer}, head 0", LOAD_MS)
        res.load_s = time.monotonic() - t0
        await check("load", text, 0)
        box = page.get_by_label("Sentence")
        for r in range(1, ROUNDS + 1):
            text = sentence(i, r)
            await box.fill(text)
            t0 = time.monotonic()
            await box.press("Control+Enter")
            await wait_heatmap(page, heatmap_labels(text), f"layer {layer}, head 0", CHANGE_MS)
            res.change_s.append(time.monotonic() - t0)
            await check(f"round {r}", text, 0)
        # Another head, on the map's own buttons: the session's own model decides how many it offers.
        options = await page.locator(".hm button[data-head]").all_inner_texts()
        if options != [str(h) for h in range(heads_of(cfg))]:
            res.problems.append(f"the map offers heads {options}, this session's model has {heads_of(cfg)} heads")
        head = heads_of(cfg) - 1
        t0 = time.monotonic()
        await page.locator(f'.hm button[data-head="{head}"]').click()
        await wait_heatmap(page, heatmap_labels(text), f"layer {layer}, head {head}", CHANGE_MS)
        res.change_s.append(time.monotonic() - t0)
        # The URL is written in the same script run that drew the heatmap; wait for it, not for a fixed time. A
        # setting at its default is left out of the URL (head 1 of a 2-head model), so then no `head` is expected.
        await page.wait_for_function("head => new URLSearchParams(location.search).get('head') === head",
                                     arg=settings.to_query({"head": head}).get("head"), timeout=CHANGE_MS)
        await check("head", text, head)
    except Exception as err:  # a timeout in one session must not hide the others' results
        heat = await page.evaluate(HEATMAP_JS) if not page.is_closed() else None
        ticks = heat["ticks"][:12] if heat else None
        res.problems.append(f"{type(err).__name__}: {str(err).splitlines()[0][:200]}; heatmap ticks {ticks}")
    finally:
        if dialogs:
            res.problems.append(f"dialogs opened: {dialogs}")
        await context.close()
    return res


async def drive(app: App) -> list[Result]:
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=require_chromium(), args=CHROMIUM_ARGS)
        start = asyncio.Event()
        tasks = [asyncio.create_task(run_session(browser, app, i, start)) for i in range(SESSIONS)]
        start.set()  # the class is told to open the link
        results = await asyncio.gather(*tasks)
        await browser.close()
    return results


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if len(values) > 1 else values[0]


@pytest.mark.load
def test_twenty_concurrent_sessions_stay_isolated():
    with streamlit_server(env=SERVER_ENV) as (url, proc):
        app = App(url, ServerLog(proc.stdout))
        with RssSampler(proc.pid) as rss:
            idle_mb = rss.read_mb()
            t0, cpu0 = time.monotonic(), cpu_seconds(proc.pid)
            results = asyncio.run(drive(app))
            wall, cpu = time.monotonic() - t0, cpu_seconds(proc.pid) - cpu0
            final_mb = rss.read_mb()
        errors = app.log.errors()
        alive = proc.poll() is None

    loads = [r.load_s for r in results if r.load_s]
    changes = [s for r in results for s in r.change_s]
    problems = [f"session {r.session}: {p}" for r in results for p in r.problems]
    interactions = ROUNDS + 1
    summary = (
        f"Load test: {SESSIONS} concurrent sessions x {interactions} interactions ({ROUNDS} sentence changes + 1 head "
        f"change) after the first load, {SESSIONS // 5} on the pretrained model, the rest on "
        f"{len(CUSTOM)} custom configs; first load p50 {percentile(loads, 50):.1f} s / p95 {percentile(loads, 95):.1f} s; "
        f"interaction p50 {percentile(changes, 50):.2f} s / p95 {percentile(changes, 95):.2f} s; server RSS "
        f"{idle_mb:.0f} MB idle, peak {rss.peak_mb:.0f} MB (bound {RSS_LIMIT_MB} MB, {rss.samples} samples), "
        f"{final_mb:.0f} MB at the end; {wall:.0f} s wall; server CPU {cpu:.0f} s in all, "
        f"{cpu / (SESSIONS * (interactions + 1)):.2f} s per page load or interaction; {len(problems)} problems."
    ) if loads and changes else "Load test: no session finished its first load."
    print("\n" + summary)
    for p in problems[:40]:
        print("  ", p)
    if errors:
        print(f"--- server log ---\n{errors}")

    assert alive, "the server died during the load test"
    assert not problems, f"{len(problems)} problems, first: {problems[:10]}"
    assert len(changes) == SESSIONS * interactions
    assert not errors, f"uncaught exceptions in the server log:\n{errors}"
    assert rss.peak_mb < RSS_LIMIT_MB, f"server RSS peaked at {rss.peak_mb:.0f} MB, above {RSS_LIMIT_MB} MB"
