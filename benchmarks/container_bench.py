"""Cold start of the container image: from `podman run` to a server answering /_stcore/health, and to ready
(warm: deploy/entrypoint.py has run deploy/warm.py over every page and written its mark; the image's HEALTHCHECK
passes). Goal (issue 25): ready within 20 s on the 2-core machine.

Each run starts a fresh container as `deploy/image.sh run` does (read-only, unprivileged), on a free loopback
port, and removes it afterwards. The image must be built (`deploy/image.sh build --base debootstrap`). Readiness
is polled without adding load: the health endpoint over HTTP and the entrypoint's mark through /proc/PID/root
(root on the host sees the container's /tmp), every 50 ms; the HEALTHCHECK is run once at the end to confirm.
Prints a table and one JSON line with the machine and the image's size.

    .venv-test/bin/python -m benchmarks.container_bench [--runs 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import time
from pathlib import Path

from benchmarks.machine import cpu_name
from deploy.container import IMAGE, container, podman
from deploy.entrypoint import READY_MARK, healthy


def cold_start() -> dict:
    """Seconds from `podman run` to health 200 and to ready, and the warm server's resident memory."""
    t0 = time.monotonic()
    with container() as c:
        started = time.monotonic() - t0
        pid = int(c.state("Pid"))
        mark = Path(f"/proc/{pid}/root") / READY_MARK.relative_to("/")
        health = None
        while True:
            now = time.monotonic() - t0
            if health is None and healthy(c.url):
                health = now
            if health is not None and mark.exists():
                ready = now
                break
            if now > 300 or not Path(f"/proc/{pid}").exists():
                raise RuntimeError(f"container not ready after {now:.0f} s:\n{c.logs()}")
            time.sleep(0.05)
        assert c.ready(), "the HEALTHCHECK disagrees with the mark"
        return {"podman_run_s": round(started, 2), "health_s": round(health, 2), "ready_s": round(ready, 2),
                "rss_mb": round(max(float(line.split()[1]) / 1024 for pid in c.pids()
                                    for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                                    if line.startswith("VmRSS:")))}


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    size = int(podman("image", "inspect", "--format", "{{.Size}}", IMAGE).stdout)
    machine = {"cpu": cpu_name(), "cores": os.cpu_count(), "loadavg_before": loadavg(),
               "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")}
    print(f"image {IMAGE}: {size / 1e9:.2f} GB ({size / 2**30:.2f} GiB)")
    print(f"{'run':>4} {'podman run s':>12} {'health 200 s':>12} {'ready s':>8} {'RSS MB':>7}")
    rows = []
    for i in range(args.runs):
        row = cold_start()
        rows.append(row)
        print(f"{i + 1:>4} {row['podman_run_s']:>12} {row['health_s']:>12} {row['ready_s']:>8} {row['rss_mb']:>7}",
              flush=True)
    ready = [r["ready_s"] for r in rows]
    print(json.dumps({"image_bytes": size, "ready_median_s": statistics.median(ready), "ready_max_s": max(ready),
                      "goal_s": 20, "runs": rows, "machine": machine | {"loadavg_after": loadavg()}}))


if __name__ == "__main__":
    main()
