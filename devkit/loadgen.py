"""Simulated students against the app: a class of devkit.client.Student tabs with think times, and its report.

Each student opens a link a teacher would share (a page and settings in the query string), then changes the
sentence, the layer, the head or the page, with 2-5 s to read in between, and reconnects like the browser when its
connection drops (a replica died). Runs go to loopback addresses only, and are bounded by students, seconds and
interactions per student.

    .venv-test/bin/python -m devkit.loadgen http://127.0.0.1:8080 --students 20 --seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field

import websockets

from .client import PAGES, SENTENCES, Disconnected, Student, require_loopback


@dataclass
class Run:
    """One script run: the first load of a link or one interaction."""

    student: int
    kind: str  # open, text, layer, head, pick (the map's layer or head), page, reopen
    page: str
    start: float  # seconds since the load run started
    latency: float | None = None  # None when it failed
    error: str | None = None


@dataclass
class Report:
    students: int
    seconds: float
    runs: list[Run] = field(default_factory=list)
    recoveries: list[float] = field(default_factory=list)  # seconds from a dropped connection to the next finished run
    unrecovered: int = 0

    @property
    def interactions(self) -> list[Run]:
        return [r for r in self.runs if r.kind not in ("open", "reopen")]

    @property
    def errors(self) -> list[Run]:
        """Runs that showed the student an error: an exception element, page not found, a timeout."""
        return [r for r in self.runs if r.error and not r.error.startswith("disconnected")]

    @property
    def dropped(self) -> list[Run]:
        """Interactions lost because the connection went away (a replica died): the browser reconnects."""
        return [r for r in self.runs if r.error and r.error.startswith("disconnected")]

    def summary(self) -> dict:
        done = [r.latency for r in self.interactions if r.latency is not None]
        opens = [r.latency for r in self.runs if r.kind == "open" and r.latency is not None]
        return {
            "students": self.students,
            "seconds": round(self.seconds, 1),
            "script_runs": len(self.runs),
            "interactions": len(self.interactions),
            "interactions_per_s": round(len(done) / self.seconds, 2) if self.seconds else 0.0,
            "p50_s": round(percentile(done, 50), 3) if done else None,
            "p95_s": round(percentile(done, 95), 3) if done else None,
            "max_s": round(max(done), 3) if done else None,
            "open_p50_s": round(percentile(opens, 50), 3) if opens else None,
            "open_p95_s": round(percentile(opens, 95), 3) if opens else None,
            "errors": len(self.errors),
            "error_kinds": dict(Counter(r.error.split(":")[0] for r in self.errors)),
            "kinds": dict(Counter(r.kind for r in self.interactions)),
            "dropped": len(self.dropped),
            "recoveries": len(self.recoveries),
            "recovery_max_s": round(max(self.recoveries), 2) if self.recoveries else None,
            "unrecovered": self.unrecovered,
        }


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (linear interpolation between closest ranks)."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if q < 100 else max(values)


def student_link(number: int, rng: random.Random) -> tuple[str, dict[str, str]]:
    """The link one student opens: a page and settings in the query string, as a teacher would share."""
    page = PAGES[number % len(PAGES)] if number % 3 else ""
    query = {"text": rng.choice(SENTENCES), "layer": str(rng.randrange(6)), "head": str(rng.randrange(12))}
    return page, query


async def _student(base_url: str, number: int, report: Report, t_start: float, deadline: float,
                   think: tuple[float, float], max_interactions: int, ramp: float, timeout: float,
                   seed: int, picks: bool) -> None:
    rng = random.Random(seed * 1000 + number)
    page, query = student_link(number, rng)
    student = Student(base_url, number, page, query, timeout=timeout, picks=picks)
    await asyncio.sleep(ramp * number / max(report.students, 1))
    kind, done = "open", 0
    dropped_at: float | None = None
    try:
        while time.monotonic() < deadline and done <= max_interactions:
            run = Run(number, kind, student.page, time.monotonic() - t_start)
            report.runs.append(run)
            try:
                run.latency = await (student.open() if kind in ("open", "reopen") else student.interact(kind, rng))
                if dropped_at is not None:
                    report.recoveries.append(time.monotonic() - dropped_at)
                    dropped_at = None
            except Disconnected as err:
                run.error = str(err)
                dropped_at = dropped_at or student.closed_at or time.monotonic()
                kind = "reopen"
                await asyncio.sleep(0.5)  # the browser, too, waits a moment before it reconnects
                continue
            except (RuntimeError, OSError, websockets.InvalidStatus, websockets.InvalidHandshake) as err:
                if kind == "reopen":  # nginx or the replica not answering yet: keep trying, like the browser
                    report.runs.remove(run)
                    await asyncio.sleep(0.5)
                    continue
                run.error = str(err) or type(err).__name__
            done += 1
            if await student.think(min(rng.uniform(*think), max(0.0, deadline - time.monotonic()))):
                dropped_at, kind = student.closed_at, "reopen"
                await asyncio.sleep(0.5)  # the browser, too, waits a moment before it reconnects
                continue
            kind = rng.choice(student.choices())
    finally:
        if dropped_at is not None:
            report.unrecovered += 1
        await student.close()


async def run_load(base_url: str, students: int, seconds: float, think: tuple[float, float] = (2.0, 5.0),
                   max_interactions: int = 1000, ramp: float = 5.0, timeout: float = 60.0, seed: int = 0,
                   report: Report | None = None, picks: bool = True) -> Report:
    """Run `students` simulated students for `seconds` against base_url (loopback only); return the report.
    picks: the students also click the map's layer and head on the Attention page (False: the mix before them).

    Pass a Report to watch the run from another thread while it fills.
    """
    require_loopback(base_url)
    report = report or Report(students, seconds)
    report.students, report.seconds = students, seconds
    t_start = time.monotonic()
    deadline = t_start + seconds
    tasks = [asyncio.create_task(_student(base_url, i, report, t_start, deadline, think, max_interactions, ramp,
                                          timeout, seed, picks)) for i in range(students)]
    # Bounded: each student stops at the deadline; a run in flight may take up to `timeout` more.
    await asyncio.wait(tasks, timeout=seconds + timeout + 30)
    for task in tasks:
        task.cancel()
        if task.done() and not task.cancelled() and task.exception() is not None:
            raise task.exception()  # a bug in the load generator, not in the app: stop loudly
    report.seconds = time.monotonic() - t_start
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="base URL, loopback only (nginx or one replica)")
    parser.add_argument("--students", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--think", type=float, nargs=2, default=(2.0, 5.0), metavar=("MIN", "MAX"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    report = asyncio.run(run_load(args.url, args.students, args.seconds, tuple(args.think), seed=args.seed))
    for run in report.errors[:20]:
        print(f"student {run.student} {run.kind} on /{run.page} at {run.start:.1f} s: {run.error}")
    print(json.dumps(report.summary()))


if __name__ == "__main__":
    main()

