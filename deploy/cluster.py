"""Drive deploy/serve.sh from Python: start N replicas + nginx on free loopback ports, inspect them, stop them.

Used by tests/app/test_deploy.py and benchmarks/capacity.py, so both exercise the operator's own script.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVE = ROOT / "deploy" / "serve.sh"


def free_ports(n: int) -> list[int]:
    """n distinct free loopback ports (held open together, so they differ)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class Deployment:
    run_dir: Path
    port: int
    replica_ports: list[int]
    env: dict[str, str]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def serve(self, *args: str, timeout: float = 300) -> str:
        out = subprocess.run(["bash", str(SERVE), *args], cwd=ROOT, env=self.env, capture_output=True, text=True,
                             timeout=timeout)
        if out.returncode != 0:
            raise RuntimeError(f"serve.sh {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
        return out.stdout

    def pid(self, port: int) -> int | None:
        """The pid of the replica on port (None once it is gone)."""
        try:
            pid = int((self.run_dir / f"replica-{port}.pid").read_text())
        except (OSError, ValueError):
            return None
        return pid if _alive(pid) else None

    def nginx_pid(self) -> int | None:
        try:
            pid = int((self.run_dir / "nginx.pid").read_text())
        except (OSError, ValueError):
            return None
        return pid if _alive(pid) else None

    def kill_replica(self, port: int) -> None:
        """SIGKILL: the replica dies as in a crash or an OOM kill, with no chance to close its sockets cleanly."""
        pid = self.pid(port)
        if pid is None:
            raise RuntimeError(f"no replica running on port {port}")
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)

    def websockets_on(self, port: int) -> int:
        """Established TCP connections to a replica's port: its open app sessions (nginx holds one per tab)."""
        return established(port)

    def peak_rss_mb(self, port: int) -> float | None:
        pid = self.pid(port)
        return _status_kb(pid, "VmHWM") / 1024 if pid else None

    def cpu_seconds(self, port: int) -> float | None:
        pid = self.pid(port)
        if not pid:
            return None
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime

    def stop(self) -> None:
        """serve.sh stop, then make sure: anything still alive from this run directory is killed by its pid."""
        pids = [p for p in [self.nginx_pid(), *(self.pid(port) for port in self.replica_ports)] if p]
        try:
            self.serve("stop", timeout=60)
        finally:
            for pid in pids:
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)


def established(port: int) -> int:
    """Established connections whose local port is `port` (server side), from /proc/net/tcp{,6}."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            if state == "01" and int(local.rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


def _alive(pid: int) -> bool:
    try:
        state = _status(pid).get("State", "")
    except OSError:
        return False
    return not state.startswith("Z")


def _status(pid: int) -> dict[str, str]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def _status_kb(pid: int, key: str) -> float:
    return float(_status(pid)[key].split()[0])


@contextmanager
def deployment(replicas: int, env: dict[str, str] | None = None) -> Iterator[Deployment]:
    """Start `replicas` replicas + nginx with deploy/serve.sh on free ports; always stopped afterwards."""
    run_dir = Path(tempfile.mkdtemp(prefix="encoder-explorer-serve-"))
    *replica_ports, port = free_ports(replicas + 1)
    full_env = os.environ | (env or {}) | {
        "SERVE_DIR": str(run_dir),
        "REPLICA_PORTS": " ".join(map(str, replica_ports)),
        "LISTEN": "127.0.0.1",
    }
    dep = Deployment(run_dir, port, replica_ports, full_env)
    try:
        dep.serve("start", str(replicas), str(port))
        yield dep
    finally:
        dep.stop()
