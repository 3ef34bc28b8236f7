"""The container's first process: start the app, warm it, then report ready; stop it cleanly on SIGTERM.

Streamlit answers /_stcore/health as soon as its server listens, before any page has run. A replica that a
balancer or Kubernetes sends students to at that moment makes the first of them pay for the imports, the model
and the first trace. So this process starts `streamlit run app.py`, waits for its health endpoint, warms it over
Streamlit's own protocol (deploy/warm.py: the pretrained model, one trace, every page once) and only then
writes the ready mark that deploy/ready.py (HEALTHCHECK, Kubernetes' startup probe) looks for.

Operator settings come from the environment, as for deploy/serve.sh: STREAMLIT_SERVER_PORT (default 8501),
ALLOWED_HOSTS (host names the browsers use; loopback names are always allowed), OMP_NUM_THREADS,
ENCODER_EXPLORER_MEMORY_MB, ENCODER_EXPLORER_MODELS and any other STREAMLIT_* setting, read by Streamlit itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

APP_DIR = Path(__file__).resolve().parents[1]
READY_MARK = Path(os.environ.get("ENCODER_EXPLORER_READY_FILE", "/tmp/encoder-explorer-ready"))
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 8  # below podman's and Kubernetes' grace periods (10 s and 15 s), so a stop is never a kill


def port() -> int:
    """The app's port, as Streamlit reads it."""
    return int(os.environ.get("STREAMLIT_SERVER_PORT", "8501"))


def healthy(url: str) -> bool:
    """True when the app's health endpoint answers 200."""
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def warm_command(url: str) -> list[str]:
    """The warm-up, as deploy/serve.sh runs it: one session over Streamlit's protocol visits every page."""
    return [sys.executable, "-m", "deploy.warm", url]  # run in APP_DIR, so the app's packages import


def streamlit_command() -> list[str]:
    """`streamlit run app.py` on every address of the container, with the operator's allowed host names."""
    hosts = ["localhost", "127.0.0.1", "::1", *os.environ.get("ALLOWED_HOSTS", "").split()]
    # No welcome message: on a wildcard address Streamlit looks up the machine's external address on the internet
    # to print it (up to 2 s at every start, and a request leaving the cluster); this process says when it is ready.
    return [sys.executable, "-m", "streamlit", "run", "app.py", "--server.address", "0.0.0.0",
            "--server.port", str(port()), "--server.headless", "true", "--logger.hideWelcomeMessage", "true",
            *[arg for host in hosts for arg in ("--server.allowedHosts", host)]]


def main() -> int:
    READY_MARK.unlink(missing_ok=True)
    app = subprocess.Popen(streamlit_command(), cwd=APP_DIR)
    children = [app]
    kill_at: list[float] = []  # set by the first SIGTERM

    def stop(_signum: int = signal.SIGTERM, _frame=None) -> None:
        # First leave the balancer's rotation (the mark goes), then let Streamlit close its sessions.
        READY_MARK.unlink(missing_ok=True)
        if not kill_at:
            kill_at.append(time.monotonic() + STOP_TIMEOUT_S)
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    url = f"http://127.0.0.1:{port()}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while not kill_at and app.poll() is None and not healthy(url):
        if time.monotonic() > deadline:
            print(f"entrypoint: the app did not answer on {url} within {START_TIMEOUT_S} s", file=sys.stderr)
            stop()
        time.sleep(0.2)
    if not kill_at and app.poll() is None:
        warm = subprocess.Popen(warm_command(url), cwd=APP_DIR)
        children.append(warm)
        if warm.wait() == 0 and not kill_at:
            READY_MARK.touch()
            print(f"entrypoint: ready on port {port()}", flush=True)
        elif not kill_at:
            print("entrypoint: the warm-up failed; stopping", file=sys.stderr)
            stop()
    while True:
        try:
            return app.wait(timeout=0.5)  # wakes up, so a stop's deadline holds even if Streamlit hangs
        except subprocess.TimeoutExpired:
            if kill_at and time.monotonic() > kill_at[0]:
                print("entrypoint: the app did not stop in time; killing it", file=sys.stderr)
                app.kill()


if __name__ == "__main__":
    sys.exit(main())
