"""Server CPU of one script run of every page, warm, for the pretrained model at 12 and 128 tokens (issue 15, item 6).

Run from the repo root: `python -m benchmarks.page_cpu [--reps 5]`. Each page is opened once (its caches fill),
then rerun `--reps` times with nothing changed and once per control change listed below; the figure is the process
CPU time (user + system) of the rerun, median over reps. AppTest runs the script in this process, so the CPU time is
the server's. Target: no page above 150 ms at <= 128 tokens. Prints a table and one JSON line with the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as ui/__init__.py sets it, before torch is imported

from benchmarks.machine import cpu_name  # noqa: E402
from devkit.apptest import app_test  # noqa: E402
from ui import pages  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

APP = str(ROOT / "app.py")
SHORT = "The animal didn't cross the street because it was too tired."
LONG = " ".join(["Attention lets every token look at every other token in the sentence."] * 9)  # ~128 tokens
TARGET_MS = 150


def cpu_ms(fn) -> float:
    t0 = time.process_time()
    fn()
    return (time.process_time() - t0) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    files = [entry.file for entry in pages.PAGES]
    rows = []
    for label, text in (("12 tokens", SHORT), ("128 tokens", LONG)):
        for page in files:
            at = app_test({"text": text}, timeout=300).run()
            at.switch_page(page).run()
            runs = [cpu_ms(at.run) for _ in range(args.reps)]
            bad = [e.value for e in at.exception]
            rows.append({"case": label, "page": page, "rerun_ms": statistics.median(runs), "max_ms": max(runs),
                         "exception": bool(bad)})
    print(f"{'case':<11} {'page':<26} {'median ms':>10} {'max ms':>8}")
    for r in rows:
        flag = " over" if r["rerun_ms"] > TARGET_MS else ""
        print(f"{r['case']:<11} {r['page']:<26} {r['rerun_ms']:>10.0f} {r['max_ms']:>8.0f}{flag}"
              + ("  EXCEPTION" if r["exception"] else ""))
    print(json.dumps({"machine": cpu_name(), "cores": os.cpu_count(), "reps": args.reps, "rows": rows}))


if __name__ == "__main__":
    main()
