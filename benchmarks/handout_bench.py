"""The handout of a 10-slide lesson: build time and size (issue 21: <= 10 s and <= 8 MB), cold and warm.

Run from the repo root: `python -m benchmarks.handout_bench [--reps 3]`. The 10-slide lesson takes, from the built-in
lessons in order, the first slide of each page until ten pages are covered (a diagram, both layer diagrams' SVG,
attention, a head's steps, statistics, tokens, trajectories, sentence embeddings, Post-LN vs Pre-LN, gradient norms).
"Cold" is the first build in this process (models loaded, sentences traced, gradients computed); "warm" rebuilds it
with the app's caches filled, as a second download in a running server would. Every built-in lesson is then built
once more. Prints a table and one JSON line with the machine.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").setLevel(logging.ERROR)

from benchmarks.machine import cpu_name  # noqa: E402

TARGET_S, TARGET_MB = 10.0, 8.0


def ten_slides():  # -> lessons.Lesson
    from ui import lessons

    picked, pages = [], set()
    for name in lessons.builtin_names():
        for s in lessons.load_builtin(name).slides:
            if s.page not in pages and len(picked) < 10:
                picked.append(s)
                pages.add(s.page)
    return lessons.Lesson("Ten pages", tuple(picked))


def timed(lesson) -> tuple[float, int]:
    from ui import lessons

    started = time.perf_counter()
    data = lessons.handout(lesson)
    return time.perf_counter() - started, len(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="warm rebuilds of the 10-slide lesson")
    args = parser.parse_args()
    load_before = os.getloadavg()
    started = time.perf_counter()
    from ui import lessons

    imported = time.perf_counter() - started
    lesson = ten_slides()
    cold, size = timed(lesson)
    warm = [timed(lesson)[0] for _ in range(args.reps)]
    rows = [{"lesson": f"{len(lesson.slides)} slides: {', '.join(s.page for s in lesson.slides)}", "case": "cold",
             "seconds": round(cold, 2), "mb": round(size / 1e6, 2)},
            {"lesson": "the same", "case": f"warm (median of {args.reps})", "seconds": round(statistics.median(warm), 2),
             "mb": round(size / 1e6, 2)}]
    for name in lessons.builtin_names():
        made = lessons.load_builtin(name)
        seconds, size = timed(made)
        rows.append({"lesson": f"{name} ({len(made.slides)} slides)", "case": "after the above", "seconds": round(seconds, 2),
                     "mb": round(size / 1e6, 2)})
    print(f"import of ui.lessons: {imported:.1f} s (not counted)")
    print(f"{'lesson':<44} {'case':<20} {'seconds':>8} {'MB':>6}")
    for r in rows:
        over = " over" if r["seconds"] > TARGET_S or r["mb"] > TARGET_MB else ""
        print(f"{r['lesson'][:44]:<44} {r['case']:<20} {r['seconds']:>8.2f} {r['mb']:>6.2f}{over}")
    print(json.dumps({"machine": cpu_name(), "cores": os.cpu_count(), "load_before": [round(x, 1) for x in load_before],
                      "load_after": [round(x, 1) for x in os.getloadavg()], "target_s": TARGET_S, "target_mb": TARGET_MB,
                      "rows": rows}))


if __name__ == "__main__":
    main()
