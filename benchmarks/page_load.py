"""The browser's work to load each page: Chromium's main-thread task and script time per page load.

Run from the repo root: `python -m benchmarks.page_load [--reps 3] [--fresh] [--paths /lessons /statistics]`. One
app server and one Chromium tab (1440 x 1300, as the browser tests); each page is loaded once (the server's caches
and the browser's HTTP and code caches fill), then `--reps` more times, each a full page load (`goto`, as a saved link
or a reload is) until the script run has finished and the page has been still for a second. With `--fresh` each of
those loads is in a new browser context, its caches empty, as a first visit's (and every browser test's tab) is.
The figures are the renderer's own counters (the DevTools protocol's Performance.getMetrics: TaskDuration,
ScriptDuration, LayoutDuration, RecalcStyleDuration, which start again at zero with each new document), read when
the load is still, median over reps, with the server's CPU time over the same loads. Most of a load's script is
Streamlit's frontend booting and the chunks its elements load on first use (plotly.js for a chart); a page's own
share is what it adds beside that. Prints a table and one JSON line with the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

from playwright.sync_api import sync_playwright

from benchmarks.machine import cpu_name
from devkit.server import READY, launch, streamlit_server
from ui import pages

VIEWPORT = {"width": 1440, "height": 1300}
COUNTERS = ("TaskDuration", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration")
STILL_MS = 1000
LOAD_MS = 180_000


def server_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def counters(cdp) -> dict[str, float]:
    return {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"] if m["name"] in COUNTERS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--paths", nargs="*", default=[entry.url for entry in pages.PAGES])
    parser.add_argument("--fresh", action="store_true",
                        help="each load in a new browser context, its caches empty: a first visit (and every test's tab)")
    args = parser.parse_args()
    rows = []
    with streamlit_server() as (url, proc), sync_playwright() as pw:
        browser = launch(pw)
        warm = browser.new_context(viewport=VIEWPORT).new_page()

        def load(path: str) -> tuple[dict[str, float], float]:
            page = browser.new_context(viewport=VIEWPORT).new_page() if args.fresh else warm
            cdp = page.context.new_cdp_session(page)
            cdp.send("Performance.enable")
            cpu = server_cpu_s(proc.pid)
            page.goto(url + path)
            page.wait_for_selector(READY, timeout=LOAD_MS)
            page.wait_for_timeout(STILL_MS)  # what a load draws after the run (charts, components) is counted too
            got = counters(cdp), server_cpu_s(proc.pid) - cpu  # the counters start again with each new document
            cdp.detach()
            if args.fresh:
                page.context.close()
            return got

        for path in args.paths:
            load(path)
            runs = [load(path) for _ in range(args.reps)]
            row = {"path": path, **{k: statistics.median(r[0][k] for r in runs) for k in COUNTERS},
                   "server_cpu_s": statistics.median(r[1] for r in runs)}
            rows.append(row)
        browser.close()
    print(f"{'page':<16} {'task s':>7} {'script s':>9} {'layout s':>9} {'style s':>8} {'server CPU s':>13}")
    for r in rows:
        print(f"{r['path']:<16} {r['TaskDuration']:>7.2f} {r['ScriptDuration']:>9.2f} {r['LayoutDuration']:>9.2f} "
              f"{r['RecalcStyleDuration']:>8.2f} {r['server_cpu_s']:>13.2f}")
    print(json.dumps({"machine": cpu_name(), "cores": os.cpu_count(), "reps": args.reps, "fresh": args.fresh,
                      "rows": rows}))


if __name__ == "__main__":
    main()
