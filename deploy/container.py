"""Drive the container image from Python: build it with deploy/image.sh, run containers, put nginx in front.

Used by tests/app/test_container.py and benchmarks/capacity.py, so both exercise the operator's own commands
(`deploy/image.sh build|run|edge`, `deploy/serve.sh balancer`). Containers share the host's network, each on its
own loopback port, and are always removed afterwards.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from deploy.cluster import Deployment, free_ports

ROOT = Path(__file__).resolve().parents[1]
IMAGE_SH = ROOT / "deploy" / "image.sh"
SERVE = ROOT / "deploy" / "serve.sh"
ENV = os.environ | {"CONTAINERS_CONF": str(ROOT / "deploy" / "podman" / "containers.conf")}
IMAGE = "localhost/encoder-explorer:latest"


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    """Run podman with the project's containers.conf; raise with its output when check and it fails."""
    out = subprocess.run(["podman", *args], env=ENV, capture_output=True, text=True, timeout=timeout)
    if check and out.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return out


def build(base: str = "debootstrap", timeout: float = 1800) -> float:
    """Build the image with deploy/image.sh (its local Debian base unless `base` names an image); seconds taken."""
    t0 = time.monotonic()
    out = subprocess.run(["bash", str(IMAGE_SH), "build", "--base", base, "--tag", IMAGE], env=ENV,
                         capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"deploy/image.sh build failed:\n{out.stderr[-6000:]}")
    return time.monotonic() - t0


@dataclass
class Container:
    name: str
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ready(self) -> bool:
        """The image's HEALTHCHECK, run now: warm and healthy."""
        return podman("healthcheck", "run", self.name, check=False, timeout=30).returncode == 0

    def wait_ready(self, timeout: float = 180) -> float:
        """Seconds until the HEALTHCHECK passes; raises with the container's log if it exits or times out."""
        t0 = time.monotonic()
        while not self.ready():
            if not self.running():
                raise RuntimeError(f"container {self.name} exited:\n{self.logs()}")
            if time.monotonic() - t0 > timeout:
                raise RuntimeError(f"container {self.name} not ready after {timeout:g} s:\n{self.logs()}")
            time.sleep(0.2)
        return time.monotonic() - t0

    def state(self, field: str) -> str:
        return podman("inspect", "--format", f"{{{{.State.{field}}}}}", self.name).stdout.strip()

    def running(self) -> bool:
        return self.state("Status") == "running"

    def logs(self) -> str:
        out = podman("logs", self.name, check=False)
        return (out.stdout + out.stderr)[-6000:]

    def exec(self, *cmd: str) -> subprocess.CompletedProcess:
        return podman("exec", self.name, *cmd, check=False)

    def stop(self, timeout: float = 30) -> tuple[float, int]:
        """`podman stop` with a long grace period: (seconds it took, the container's exit code)."""
        t0 = time.monotonic()
        podman("stop", "-t", str(int(timeout)), self.name, timeout=timeout + 30)
        return time.monotonic() - t0, int(self.state("ExitCode"))

    def kill(self) -> None:
        """SIGKILL, as an out-of-memory kill or a crashed node would end it."""
        podman("kill", self.name)
        deadline = time.monotonic() + 10
        while self.running() and time.monotonic() < deadline:
            time.sleep(0.05)

    def pids(self) -> list[int]:
        """Host pids of the container's processes (its first process and every descendant)."""
        pids, todo = [], [int(self.state("Pid"))]
        while todo:
            pid = todo.pop()
            pids.append(pid)
            try:
                todo += [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
            except OSError:
                pass
        return pids

    def cpu_seconds(self) -> float:
        """CPU time of the processes now in the container (user + system)."""
        total = 0.0
        for pid in self.pids():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def peak_rss_mb(self) -> float:
        """The largest peak resident size (VmHWM) of its processes: the app's server."""
        peak = 0.0
        for pid in self.pids():
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, float(line.split()[1]) / 1024)
        return peak


@contextmanager
def _started(command: list[str], name: str, port: int, env: dict[str, str]) -> Iterator[Container]:
    """A container that `deploy/image.sh COMMAND ... -d --name NAME` started; always removed afterwards."""
    out = subprocess.run(["bash", str(IMAGE_SH), *command, "-d", "--name", name], env=ENV | env | {"IMAGE": IMAGE},
                         capture_output=True, text=True, timeout=120)
    try:
        if out.returncode != 0:
            raise RuntimeError(f"deploy/image.sh {command[0]} failed:\n{out.stdout}\n{out.stderr}")
        yield Container(name, port)
    finally:
        podman("rm", "-f", "-t", "0", name, check=False)


def container(port: int | None = None, env: dict[str, str] | None = None,
              volumes: tuple[str, ...] = ()) -> AbstractContextManager[Container]:
    """One app container started as `deploy/image.sh run` starts it (not yet ready)."""
    port = port or free_ports(1)[0]
    args = [arg for key, value in (env or {}).items() for arg in ("-e", f"{key}={value}")]
    args += [arg for volume in volumes for arg in ("-v", volume)]
    return _started(["run", *args], f"ee-test-{uuid.uuid4().hex[:8]}", port, {"PORT": str(port)})


def edge(upstream: Container, port: int | None = None) -> AbstractContextManager[Container]:
    """The image's nginx edge (`deploy/image.sh edge`, a pod's shape) in front of one app container."""
    port = port or free_ports(1)[0]
    return _started(["edge", str(upstream.port)], f"ee-edge-{uuid.uuid4().hex[:8]}", port, {"EDGE_PORT": str(port)})


class ContainerDeployment(Deployment):
    """Containers behind the project's nginx (`deploy/serve.sh balancer`), with Deployment's interface."""

    def __init__(self, run_dir: Path, port: int, containers: list[Container], env: dict[str, str]):
        super().__init__(run_dir, port, [c.port for c in containers], env)
        self.containers = {c.port: c for c in containers}

    def pid(self, port: int) -> int | None:
        c = self.containers[port]
        return int(c.state("Pid")) if c.running() else None

    def kill_replica(self, port: int) -> None:
        self.containers[port].kill()

    def cpu_seconds(self, port: int) -> float | None:
        c = self.containers[port]
        return c.cpu_seconds() if c.running() else None

    def peak_rss_mb(self, port: int) -> float | None:
        c = self.containers[port]
        return c.peak_rss_mb() if c.running() else None

    def stop(self) -> None:
        """nginx first (serve.sh stop: it finds no replica pids of its own), then the containers."""
        try:
            self.serve("stop", timeout=60)
        finally:
            for c in self.containers.values():
                podman("rm", "-f", "-t", "0", c.name, check=False)


@contextmanager
def containers_behind_nginx(replicas: int, env: dict[str, str] | None = None,
                            volumes: tuple[str, ...] = ()) -> Iterator[ContainerDeployment]:
    """`replicas` ready containers (started together) behind nginx on free ports; always removed afterwards."""
    run_dir = Path(tempfile.mkdtemp(prefix="encoder-explorer-containers-"))
    *ports, port = free_ports(replicas + 1)
    env = {"STREAMLIT_SERVER_COOKIE_SECRET": os.urandom(16).hex()} | (env or {})
    with ExitStack() as stack:
        started = [stack.enter_context(container(p, env, volumes)) for p in ports]
        for c in started:
            c.wait_ready()
        dep = ContainerDeployment(run_dir, port, started, os.environ | {"SERVE_DIR": str(run_dir),
                                                                         "LISTEN": "127.0.0.1"})
        dep.serve("balancer", str(port), *[f"127.0.0.1:{c.port}" for c in started])
        try:
            yield dep
        finally:
            dep.stop()
