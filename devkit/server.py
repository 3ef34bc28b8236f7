"""Start `streamlit run app.py` on a free localhost port and drive it with Playwright in Debian's Chromium.

Shared by the browser tests, the load test, the benchmarks and the screenshots. Playwright cannot download its own
browser on our machines, so it is pointed at /usr/bin/chromium (apt-get install chromium).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--process-per-site",  # the tabs of one context (new_tab) share a renderer for the app's origin
]
READY = '[data-testid="stApp"][data-test-script-state="notRunning"]'
# Install in a page before it loads (context.add_init_script or page.add_init_script): the page's WebSocket notes
# every script run the server starts and ends. Streamlit sends one ForwardMsg per WebSocket message; a run starts
# with a `new_session` (field 4, full and fragment runs alike) and ends with a `script_finished` (field 6). The
# message's top-level fields are read from the protobuf bytes, skipping each field's body. The page's
# data-test-script-state attribute cannot count runs: React may batch a short run's start and end into one render,
# so the attribute never changes.
RUN_LOG_INIT = """(() => {
  const Native = window.WebSocket;
  const log = window.__runLog = {started: [], ended: 0, open: false};
  const fields = (b) => {
    const seen = new Set();
    let i = 0;
    const varint = () => { let v = 0, m = 1, c; do { c = b[i++]; v += (c & 127) * m; m *= 128; } while (c & 128); return v; };
    while (i < b.length) {
      const tag = varint(), wire = tag % 8;
      seen.add(Math.floor(tag / 8));
      if (wire === 0) varint();
      else if (wire === 2) { const n = varint(); i += n; }  // not i += varint(): that adds to i's old value
      else if (wire === 1) i += 8;
      else if (wire === 5) i += 4;
      else break;  // groups are not used by Streamlit's messages
    }
    return seen;
  };
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', (e) => {  // added first, so it runs before Streamlit's own handler
        if (!(e.data instanceof ArrayBuffer)) return;
        const f = fields(new Uint8Array(e.data));
        if (f.has(4)) { log.started.push(performance.now()); log.open = true; }
        if (f.has(6)) { log.ended += 1; log.open = false; }
      });
    }
  };
})()"""
# Run in a page with RUN_LOG_INIT installed (page.evaluate): from now on window.__runs counts the script runs the
# server starts or has going, window.__runStarts holds when each started (performance.now()).
COUNT_RUNS = """() => {
  const log = window.__runLog;
  if (!log) throw new Error('the run log is not installed: add devkit.server.RUN_LOG_INIT before the page loads');
  const ended = log.ended, before = log.started.length;
  Object.defineProperty(window, '__runs', {configurable: true, get: () => log.ended - ended + (log.open ? 1 : 0)});
  Object.defineProperty(window, '__runStarts', {configurable: true, get: () => log.started.slice(before)});
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PORT_ATTEMPTS = 3  # ports tried when another process takes the free one first


@contextmanager
def streamlit_server(env: dict[str, str] | None = None, timeout: float = 90) -> Iterator[tuple[str, subprocess.Popen]]:
    """Yield (base URL, process) of a fresh app server; the server is stopped afterwards.

    The port is free when chosen, but another process (the suite's other worker) may take it before streamlit binds
    it: then streamlit exits saying so, and a new port is tried."""
    deadline = time.monotonic() + timeout
    for attempt in range(PORT_ATTEMPTS):
        port = free_port()
        cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port),
               "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=os.environ | (env or {}), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        url = f"http://127.0.0.1:{port}"
        try:
            healthy = _wait_healthy(proc, url, deadline)
        except BaseException:
            _stop(proc)
            raise
        if healthy:
            break
        output = proc.stdout.read()
        if f"Port {port} is not available" not in output or attempt == PORT_ATTEMPTS - 1:
            raise RuntimeError(f"streamlit exited early:\n{output}")
    try:
        yield url, proc
    finally:
        _stop(proc)


def _wait_healthy(proc: subprocess.Popen, url: str, deadline: float) -> bool:
    """True once the server answers its health check; False if it exited first."""
    while True:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("streamlit did not become healthy in time")
        time.sleep(0.3)  # polling the health endpoint, not waiting for a fixed time


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def require_chromium() -> str:
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} not found: install Debian's Chromium (apt-get install -y chromium).")
    return CHROMIUM


def launch(playwright):  # -> playwright Browser
    return playwright.chromium.launch(executable_path=require_chromium(), args=CHROMIUM_ARGS)


def new_tab(browser, viewport: dict, **options):  # -> playwright Page
    """A new tab in the browser context `browser` keeps for these options (viewport, downloads...); close it with
    close_tab. Tabs of one context share Chromium's HTTP and code caches, and with --process-per-site one renderer
    per site: a page load costs about half the CPU it does in a fresh context (README, "How long"). Add init
    scripts to the page (page.add_init_script), not to the shared context."""
    pool = browser.__dict__.setdefault("ee_contexts", {})
    key = repr(sorted({"viewport": viewport, **options}.items()))
    if key not in pool:
        pool[key] = browser.new_context(viewport=viewport, **options)
        pool[key].on("close", lambda _: pool.pop(key, None))
    return pool[key].new_page()


def close_tab(page) -> None:
    """Close a tab of new_tab, first clearing what the app kept in the browser (Streamlit keeps the sidebar's state
    and the theme in localStorage), so that the context's next tab starts as a first visit."""
    if not page.is_closed():
        if page.url.startswith("http"):
            try:
                page.evaluate("() => { localStorage.clear(); sessionStorage.clear(); }")
            except Exception:  # noqa: BLE001 - a crashed or navigating page has nothing left to clear
                pass
        page.close()
    page.context.clear_cookies()


def wait_ready(page, timeout_ms: float = 60_000) -> None:
    """Wait until the app's script has finished running (after a load or an interaction)."""
    page.wait_for_selector(READY, timeout=timeout_ms)


class ServerLog:
    """Drains the server's output (a full pipe would block the server) and keeps it for failure messages."""

    def __init__(self, stream) -> None:
        self.lines: list[str] = []
        threading.Thread(target=self._drain, args=(stream,), daemon=True).start()

    def _drain(self, stream) -> None:
        for line in stream:
            self.lines.append(line)

    def errors(self, since: int = 0) -> str:
        """The log from line `since` on, if it holds an uncaught exception; else ''."""
        text = "".join(self.lines[since:])
        return text[-6000:] if ("Traceback" in text or "Uncaught app" in text) else ""
