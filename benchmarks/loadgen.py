"""Simulated students that speak Streamlit's browser protocol: no browser, just the WebSocket and its protobufs.

What one student does, the way the browser does it (Streamlit 1.67, read from the package's own server code):

1. GET the page's URL (`/heatmaps?text=...&layer=2`) and keep its cookies: nginx's route cookie (sticky replica)
   and Streamlit's XSRF cookie.
2. Open `ws://host/_stcore/stream` with the sub-protocol `streamlit`, those cookies and a same-origin `Origin`.
   Streamlit needs no XSRF token for the WebSocket (only for uploads and the auth cookie); it checks Origin and,
   when `server.allowedHosts` is set, the Host header.
3. Send `BackMsg.rerun_script` with the URL's query string and page name (the page is the URL's path) and wait for
   `ForwardMsg.script_finished`.
4. Interact with think times: real widget-state messages, as the browser sends them when a widget changes. The
   widget ids and options come from the elements the server sent (`$$ID-<hash>-<key>`); a widget drawn inside an
   `st.fragment` is sent with that fragment's id, so a layer or head change reruns only the fragment, as in the
   browser. The student sends only the widget that changed; Streamlit keeps the others' values from the last run.
   A page change is a rerun with the target page's script hash, as a click in the navigation does.

Every script run's latency is the time from sending the BackMsg to receiving `script_finished`. Errors are
exception elements, compile errors, "page not found", runs that did not finish within the timeout and dropped
connections. After a dropped connection a student reconnects like the browser: the same URL (from the server's
last `page_info_changed`), a fresh session; the time until its first finished run is its recovery time.

Runs go to loopback addresses only, and are bounded by students, seconds and interactions per student.

    .venv-test/bin/python benchmarks/loadgen.py http://127.0.0.1:8080 --students 20 --seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import http.cookiejar
import json
import random
import statistics
import time
import urllib.parse
import urllib.request
from collections import Counter
from dataclasses import dataclass, field

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState, ContextInfo
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from ui import pages

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
# URL paths of the app's pages, from its page registry; the default page is served at "/".
PAGES = tuple(entry.url.lstrip("/") for entry in pages.PAGES)
SENTENCES = (
    "The animal didn't cross the street because it was too tired.",
    "The animal didn't cross the street because it was too wide.",
    "The cat sat on the mat.",
    "Paris is the capital of France.",
    "Attention is all you need.",
    "She gave him the book that he had asked for last week.",
    "Transformers read every word of a sentence at once.",
    "The keys to the cabinet are on the table.",
)
ID_PREFIX = "$$ID"  # streamlit.runtime.state.common.GENERATED_ELEMENT_ID_PREFIX; ids are "$$ID-<hash>-<user key>"
WIDGET_KEYS = ("text", "layer", "head")  # the settings a student changes (their URL names)


def require_loopback(base_url: str) -> None:
    host = urllib.parse.urlsplit(base_url).hostname
    if host not in LOOPBACK:
        raise ValueError(f"load runs go to loopback addresses only, not {host!r}")


@dataclass
class Run:
    """One script run: the first load of a link or one interaction."""

    student: int
    kind: str  # open, text, layer, head, page, reopen
    page: str
    start: float  # seconds since the load run started
    latency: float | None = None  # None when it failed
    error: str | None = None


@dataclass
class Widget:
    id: str
    kind: str  # slider, selectbox, text_area, ...
    fragment_id: str
    options: tuple[str, ...] = ()
    lo: float = 0
    hi: float = 0


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


class Disconnected(Exception):
    """The server closed the connection (a replica died, or nginx dropped us)."""


class Student:
    """One browser tab, minus the browser."""

    def __init__(self, base_url: str, number: int, page: str, query: dict[str, str], timeout: float = 60):
        require_loopback(base_url)
        self.base = base_url.rstrip("/")
        self.number = number
        self.page = page
        self.query = urllib.parse.urlencode(query)
        self.timeout = timeout
        self.ws = None
        self.cookies = http.cookiejar.CookieJar()
        self.pages: dict[str, str] = {}  # url path -> page script hash, from the navigation message
        self.page_hash = ""
        self.widgets: dict[str, Widget] = {}  # user key -> widget drawn in the current view
        self.values: dict[str, object] = {}  # user key -> last value seen or sent
        self._fragment_run = False
        self.closed_at: float | None = None
        self.closed = asyncio.Event()

    # -- connection -------------------------------------------------------------------------------------------
    def _get_document(self) -> None:
        url = f"{self.base}/{self.page}" + (f"?{self.query}" if self.query else "")
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies))
        with opener.open(url, timeout=self.timeout) as resp:
            resp.read()

    async def connect(self) -> None:
        """Load the document (for its cookies), then open the app's WebSocket."""
        await asyncio.to_thread(self._get_document)
        ws_url = "ws" + self.base[len("http"):] + "/_stcore/stream"
        cookie = "; ".join(f"{c.name}={c.value}" for c in self.cookies)
        headers = {"Origin": self.base} | ({"Cookie": cookie} if cookie else {})
        self.ws = await websockets.connect(ws_url, subprotocols=["streamlit"], additional_headers=headers,
                                           max_size=None, ping_interval=None, open_timeout=self.timeout,
                                           close_timeout=2)
        self.closed_at = None
        self.closed = asyncio.Event()
        self._watch = asyncio.create_task(self._watch_close(self.ws))

    async def _watch_close(self, ws) -> None:
        """Note when the server side goes away, even between interactions (the browser notices at once too)."""
        await ws.wait_closed()
        if self.ws is ws:
            self.closed_at = time.monotonic()
            self.closed.set()

    async def think(self, seconds: float) -> bool:
        """Wait like a student reading the page; True if the connection closed meanwhile (then reconnect now)."""
        try:
            await asyncio.wait_for(self.closed.wait(), seconds)
            return True
        except TimeoutError:
            return False

    async def close(self) -> None:
        ws, self.ws = self.ws, None
        if ws is not None:
            await ws.close()

    # -- one script run ---------------------------------------------------------------------------------------
    def _client_state(self) -> ClientState:
        url = f"{self.base}/{self.page}" + (f"?{self.query}" if self.query else "")
        return ClientState(query_string=self.query, page_script_hash=self.page_hash, page_name=self.page,
                           context_info=ContextInfo(timezone="UTC", timezone_offset=0, locale="en-US", url=url,
                                                    is_embedded=False, color_scheme="light"))

    async def run_script(self, state: ClientState) -> float:
        """Send one rerun and read ForwardMsgs until the run finishes; the latency in seconds, or raise."""
        if self.ws is None or self.closed_at is not None:
            self.ws = None
            raise Disconnected("disconnected: the connection had closed")
        self._fragment_run = bool(state.fragment_id)
        t0 = time.perf_counter()
        try:
            await self.ws.send(BackMsg(rerun_script=state).SerializeToString())
            async with asyncio.timeout(self.timeout):
                while True:
                    msg = ForwardMsg.FromString(await self.ws.recv(decode=False))
                    if self._handle(msg):
                        return time.perf_counter() - t0
        except TimeoutError:
            raise RuntimeError(f"timeout: no script_finished within {self.timeout:g} s") from None
        except websockets.ConnectionClosed as err:
            self.ws = None
            raise Disconnected(f"disconnected: {err}") from None
        except OSError as err:
            self.ws = None
            raise Disconnected(f"disconnected: {err}") from None

    def _handle(self, msg: ForwardMsg) -> bool:
        """Take what a browser would from one ForwardMsg; True when the script run has finished."""
        kind = msg.WhichOneof("type")
        if kind == "new_session" and not self._fragment_run:
            self.widgets = {}  # a full run redraws every widget; a fragment run only its own
        elif kind == "navigation":
            self.pages = {p.url_pathname: p.page_script_hash for p in msg.navigation.app_pages}
            self.page_hash = msg.navigation.page_script_hash
            for path, page_hash in self.pages.items():
                if page_hash == self.page_hash:
                    self.page = path
        elif kind == "page_info_changed":
            self.query = msg.page_info_changed.query_string
        elif kind == "page_not_found":
            raise RuntimeError(f"page_not_found: {msg.page_not_found.page_name}")
        elif kind == "session_event" and msg.session_event.WhichOneof("type") == "script_compilation_exception":
            raise RuntimeError("compile_error")
        elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            self._element(msg.delta.new_element, msg.delta.fragment_id)
        elif kind == "script_finished":
            status = msg.script_finished
            if status == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                raise RuntimeError("compile_error")
            return status in (ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY)
        return False

    def _element(self, element, fragment_id: str) -> None:
        kind = element.WhichOneof("type")
        if kind == "exception":
            raise RuntimeError(f"exception: {element.exception.type}: {element.exception.message[:200]}")
        proto = getattr(element, kind, None) if kind else None
        wid = getattr(proto, "id", "")
        if not isinstance(wid, str) or not wid.startswith(ID_PREFIX + "-"):
            return
        # The setting's name ends the user key: "text", or "w:text" when the app prefixes its widget keys.
        key = wid.split("-", 2)[2].rsplit(":", 1)[-1]
        if key not in WIDGET_KEYS:
            return
        widget = Widget(wid, kind, fragment_id)
        if kind == "slider":
            widget.lo, widget.hi = proto.min, proto.max
            self.values.setdefault(key, proto.default[0] if proto.default else proto.min)
        elif kind == "selectbox":
            widget.options = tuple(proto.options)
        self.widgets[key] = widget

    # -- what a student does ----------------------------------------------------------------------------------
    async def open(self) -> float:
        await self.connect()
        self.widgets, self.page_hash = {}, ""
        return await self.run_script(self._client_state())

    def choices(self) -> list[str]:
        return ["text", "page"] + [k for k in ("layer", "head") if k in self.widgets]

    async def interact(self, kind: str, rng: random.Random) -> float:
        state = self._client_state()
        if kind == "page":
            self.page = rng.choice([p for p in self.pages if p != self.page] or list(PAGES))
            state.page_script_hash = self.pages.get(self.page, "")
            state.page_name = self.page
            return await self.run_script(state)
        widget = self.widgets[kind]
        ws = state.widget_states.widgets.add(id=widget.id)
        if kind == "text":
            value = rng.choice([s for s in SENTENCES if s != self.values.get("text")])
            ws.string_value = value
        elif widget.kind == "slider":
            options = [v for v in range(int(widget.lo), int(widget.hi) + 1) if v != self.values.get(kind)]
            value = rng.choice(options or [int(widget.lo)])
            ws.double_array_value.data.append(float(value))
        elif widget.kind == "selectbox":
            value = rng.choice([o for o in widget.options if o != self.values.get(kind)] or list(widget.options))
            ws.string_value = value
        else:
            raise RuntimeError(f"unsupported widget {widget.kind} for {kind}")
        self.values[kind] = value
        if widget.fragment_id:
            state.fragment_id = widget.fragment_id
        return await self.run_script(state)


def student_link(number: int, rng: random.Random) -> tuple[str, dict[str, str]]:
    """The link one student opens: a page and settings in the query string, as a teacher would share."""
    page = PAGES[number % len(PAGES)] if number % 3 else ""
    query = {"text": rng.choice(SENTENCES), "layer": str(rng.randrange(6)), "head": str(rng.randrange(12))}
    return page, query


async def _student(base_url: str, number: int, report: Report, t_start: float, deadline: float,
                   think: tuple[float, float], max_interactions: int, ramp: float, timeout: float,
                   seed: int) -> None:
    rng = random.Random(seed * 1000 + number)
    page, query = student_link(number, rng)
    student = Student(base_url, number, page, query, timeout=timeout)
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
                   report: Report | None = None) -> Report:
    """Run `students` simulated students for `seconds` against base_url (loopback only); return the report.

    Pass a Report to watch the run from another thread while it fills.
    """
    require_loopback(base_url)
    report = report or Report(students, seconds)
    report.students, report.seconds = students, seconds
    t_start = time.monotonic()
    deadline = t_start + seconds
    tasks = [asyncio.create_task(_student(base_url, i, report, t_start, deadline, think, max_interactions, ramp,
                                          timeout, seed)) for i in range(students)]
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

