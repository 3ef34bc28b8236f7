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
]
READY = '[data-testid="stApp"][data-test-script-state="notRunning"]'
# Run in a page (page.evaluate): from now on window.__runs counts the script runs it starts, window.__runStarts
# holds when each started.
# Counted from the observer's records, not from the attribute's value when the callback runs: a short run can start
# and end before one callback, or its start and end can come in two callbacks after it is over.
COUNT_RUNS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  let ended = 0, open = false;
  window.__runStarts = [];
  Object.defineProperty(window, '__runs', {configurable: true, get: () => ended + (open ? 1 : 0)});
  new MutationObserver((records) => {
    const now = app.getAttribute('data-test-script-state');
    records.forEach((r, i) => {
      const set = i + 1 < records.length ? records[i + 1].oldValue : now;  // what this change set the state to
      if (r.oldValue === 'running') {  // a run ended (its start may not have been seen)
        if (!open) window.__runStarts.push(performance.now());
        ended += 1;
        open = false;
      }
      if (set === 'running' && r.oldValue !== 'running' && !open) {
        open = true;
        window.__runStarts.push(performance.now());
      }
    });
  }).observe(app, {attributes: true, attributeOldValue: true, attributeFilter: ['data-test-script-state']});
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def streamlit_server(env: dict[str, str] | None = None, timeout: float = 90) -> Iterator[tuple[str, subprocess.Popen]]:
    """Yield (base URL, process) of a fresh app server; the server is stopped afterwards."""
    port = free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port),
           "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=os.environ | (env or {}), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited early:\n{proc.stdout.read()}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("streamlit did not become healthy in time")
            time.sleep(0.3)
        yield url, proc
    finally:
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
