"""Capacity curve: simulated students (devkit/loadgen.py) against 1 and 2 replicas behind nginx.

For each replica count and class size, a fresh deployment (warmed) takes `--seconds` of students who open a link
and then change sentence, layer, head and page, or click the map's layer or head on the Attention page (its settled
pick), with 2-5 s think times. A deployment is bare replicas
(deploy/serve.sh) or containers of the image (deploy/image.sh run, behind the same nginx configuration); with
both setups, each point runs them one after the other. Prints one row per point and one JSON line per point plus
the machine; writes nothing else. Loopback only; every run stops by itself.

    .venv-test/bin/python -m benchmarks.capacity                       # 1 and 2 replicas x 10, 20, 40, 80
    .venv-test/bin/python -m benchmarks.capacity --replicas 2 --students 40 --seconds 30
    .venv-test/bin/python -m benchmarks.capacity --replicas 2 --students 40 80 --setups bare containers --repeat 2
    .venv-test/bin/python -m benchmarks.capacity --replicas 2 --students 120 --no-picks   # the mix before the picks
    .venv-test/bin/python -m benchmarks.capacity --replicas 2 --students 150 --gc-stats   # + the collector's work

Each row also gives the second half of the point alone (the interactions that started after half the time, and
the CPU per run finished then): by then the class has opened its links and met its sentences, so what is left is
the steady state, without the cold start.

--gc-stats (bare replicas only) adds, per replica, the garbage collector's collections and seconds per generation
during the point (benchmarks/gc_hook/sitecustomize.py, loaded through PYTHONPATH).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import resource
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.machine import cpu_name
from deploy.cluster import Deployment, deployment
from deploy.container import containers_behind_nginx
from devkit.loadgen import Report, percentile, run_load

ROOT = Path(__file__).resolve().parents[1]
SETUPS = {"bare": deployment, "containers": containers_behind_nginx}


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def sample_peaks(dep: Deployment, stop: threading.Event, peaks: dict[int, float]) -> None:
    """Peak RSS per replica: the kernel's high-water mark (VmHWM), read until the point ends."""
    while not stop.wait(0.5):
        for port in dep.replica_ports:
            rss = dep.peak_rss_mb(port)
            if rss:
                peaks[port] = max(peaks.get(port, 0.0), rss)


def gc_stats(folder: Path, pids: list[int]) -> dict[int, dict]:
    """The hook's last counts of each replica: {pid: {generation: [collections, seconds]}}."""
    out = {}
    for pid in pids:
        path = folder / f"{pid}.json"
        if path.exists():
            out[pid] = json.loads(path.read_text())["generations"]
    return out


def gc_delta(before: dict[int, dict], after: dict[int, dict]) -> list[dict]:
    """Per replica, what the collector did between the two readings: collections and seconds per generation."""
    return [{g: [after[pid][g][0] - before.get(pid, {}).get(g, [0, 0.0])[0],
                 round(after[pid][g][1] - before.get(pid, {}).get(g, [0, 0.0])[1], 2)] for g in after[pid]}
            for pid in sorted(after)]


def mark_halfway(dep: Deployment, report: Report, after: float, stop: threading.Event, half: dict) -> None:
    """At `after` seconds into the load: the replicas' CPU seconds so far and the runs finished by then."""
    if stop.wait(after):
        return
    half["cpu"] = sum(dep.cpu_seconds(p) or 0.0 for p in dep.replica_ports)
    half["runs"] = sum(1 for r in list(report.runs) if r.latency is not None)


def point(replicas: int, students: int, seconds: float, seed: int, setup: str = "bare", picks: bool = True,
          gc_folder: Path | None = None) -> dict:
    env = {"PYTHONPATH": str(ROOT / "benchmarks" / "gc_hook"), "GC_STATS_DIR": str(gc_folder)} if gc_folder else None
    with SETUPS[setup](replicas, env=env) as dep:
        pids = [dep.pid(p) for p in dep.replica_ports] if gc_folder else []
        if gc_folder:
            time.sleep(1.5)  # the hook writes every second: a reading taken now is the warm-up's
        gc_before = gc_stats(gc_folder, pids) if gc_folder else {}
        cpu0 = {p: dep.cpu_seconds(p) or 0.0 for p in dep.replica_ports}
        own0 = resource.getrusage(resource.RUSAGE_SELF)
        peaks: dict[int, float] = {}
        stop = threading.Event()
        sampler = threading.Thread(target=sample_peaks, args=(dep, stop, peaks), daemon=True)
        sampler.start()
        report, half = Report(students, seconds), {}
        halfway = threading.Thread(target=mark_halfway, args=(dep, report, seconds / 2, stop, half), daemon=True)
        halfway.start()
        report = asyncio.run(run_load(dep.url, students, seconds, seed=seed, picks=picks, report=report))
        stop.set()
        sampler.join()
        halfway.join()
        for port in dep.replica_ports:
            peaks[port] = max(peaks.get(port, 0.0), dep.peak_rss_mb(port) or 0.0)
        cpu = sum((dep.cpu_seconds(p) or 0.0) - cpu0[p] for p in dep.replica_ports)
        own = resource.getrusage(resource.RUSAGE_SELF)
        if gc_folder:
            time.sleep(1.5)
        gc_after = gc_stats(gc_folder, pids) if gc_folder else {}
    runs = [r for r in report.runs if r.latency is not None]
    summary = report.summary()
    later = [r.latency for r in report.interactions if r.latency is not None and r.start >= seconds / 2]
    if half and later:  # the second half: the class has opened its links and met its sentences once
        summary |= {"second_half_p95_s": round(percentile(later, 95), 3),
                    "second_half_cpu_ms_per_run": round(1000 * (cpu - (half["cpu"] - sum(cpu0.values())))
                                                          / max(len(runs) - half["runs"], 1))}
    return summary | {
        "setup": setup,
        "replicas": replicas,
        "server_cpu_s": round(cpu, 1),
        "server_cpu_ms_per_run": round(1000 * cpu / max(len(runs), 1)),
        "server_cores_used": round(cpu / report.seconds, 2),
        "loadgen_cpu_s": round(own.ru_utime + own.ru_stime - own0.ru_utime - own0.ru_stime, 1),
        "peak_rss_mb": [round(peaks[p]) for p in sorted(peaks)],
    } | ({"gc_per_replica": gc_delta(gc_before, gc_after)} if gc_folder else {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--students", type=int, nargs="+", default=[10, 20, 40, 80])
    parser.add_argument("--seconds", type=float, default=45)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--setups", nargs="+", choices=sorted(SETUPS), default=["bare"])
    parser.add_argument("--repeat", type=int, default=1, help="run every point this many times (setups alternate)")
    parser.add_argument("--no-picks", action="store_true",
                        help="the mix before the map's picks: no click on the map's layer or head")
    parser.add_argument("--gc-stats", action="store_true",
                        help="also report the garbage collector's collections and seconds per replica (bare only)")
    args = parser.parse_args()
    if args.gc_stats and args.setups != ["bare"]:
        parser.error("--gc-stats needs --setups bare: the hook is loaded through the replicas' PYTHONPATH")
    machine = {"cpu": cpu_name(), "cores": os.cpu_count(), "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
               "loadavg_before": loadavg()}
    print(json.dumps({"machine": machine}))
    print(f"{'setup':>10} {'replicas':>8} {'students':>8} {'runs/s':>7} {'p50 s':>6} {'p95 s':>6} {'max s':>6} "
          f"{'errors':>6} {'cpu ms/run':>10} {'cores':>5} {'peak RSS MB':>14} {'2nd half: p95 s':>15} {'ms/run':>6}")
    best: dict[str, int] = {}
    for replicas in args.replicas:
        for students in args.students:
            for _ in range(args.repeat):
                for setup in args.setups:
                    t0 = time.monotonic()
                    with tempfile.TemporaryDirectory(prefix="gc-stats-") as folder:
                        row = point(replicas, students, args.seconds, args.seed, setup, picks=not args.no_picks,
                                    gc_folder=Path(folder) if args.gc_stats else None)
                    row["loadavg_after"] = loadavg()
                    row["wall_s"] = round(time.monotonic() - t0)
                    print(f"{setup:>10} {replicas:>8} {students:>8} {row['interactions_per_s']:>7} {row['p50_s']:>6} "
                          f"{row['p95_s']:>6} {row['max_s']:>6} {row['errors']:>6} {row['server_cpu_ms_per_run']:>10} "
                          f"{row['server_cores_used']:>5} {str(row['peak_rss_mb']):>14} {row.get('second_half_p95_s', '-'):>15} "
                          f"{row.get('second_half_cpu_ms_per_run', '-'):>6}", flush=True)
                    print(json.dumps(row), flush=True)
                    for i, gens in enumerate(row.get("gc_per_replica", [])):
                        print(f"{'':>10} replica {i}: collections (seconds) by generation: "
                              + ", ".join(f"{g}: {n} ({s} s)" for g, (n, s) in gens.items()), flush=True)
                    if row["p95_s"] is not None and row["p95_s"] <= 1.0 and row["errors"] == 0:
                        key = f"{setup} {replicas}"
                        best[key] = max(best.get(key, 0), students)
    print(json.dumps({"largest_class_p95_le_1s": best, "machine": machine | {"loadavg_after": loadavg()}}))


if __name__ == "__main__":
    main()
