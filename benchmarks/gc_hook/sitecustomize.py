"""Loaded by every Python process started with this folder on PYTHONPATH (benchmarks/capacity.py --gc-stats puts it
there for the replicas): counts the garbage collector's collections and their time per generation, and writes them
as JSON to $GC_STATS_DIR/<pid>.json every second, for the benchmark to read before and after a point."""

import gc
import json
import os
import threading
import time
from pathlib import Path

_OUT = os.environ.get("GC_STATS_DIR")
_COUNTS = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}  # generation -> [collections, seconds]
_STARTED: list[float] = []


def _timed(phase: str, info: dict) -> None:
    if phase == "start":
        _STARTED[:] = [time.perf_counter()]
    elif _STARTED:
        counts = _COUNTS[info["generation"]]
        counts[0] += 1
        counts[1] += time.perf_counter() - _STARTED[0]


def _write() -> None:
    path = Path(_OUT, f"{os.getpid()}.json")
    while True:
        time.sleep(1)
        stats = {"generations": {str(g): c for g, c in _COUNTS.items()}, "tracked": gc.get_count(),
                 "frozen": gc.get_freeze_count(), "thresholds": gc.get_threshold()}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(stats))
        tmp.replace(path)


if _OUT:
    gc.callbacks.append(_timed)
    threading.Thread(target=_write, name="gc-stats", daemon=True).start()
