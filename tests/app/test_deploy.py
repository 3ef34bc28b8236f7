"""The deployment recipe, for real: deploy/serve.sh starts 2 replicas + nginx; a browser and simulated students use
the app through nginx; one replica is killed mid-lesson; the operator hardening answers as configured.

Everything runs on loopback ports chosen at random, is bounded in time, and is stopped by the fixture's finaliser.
"""

from __future__ import annotations

import asyncio
import http.client
import random
import threading
import time
import urllib.parse

import pytest
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from deploy.cluster import Deployment, deployment, established
from devkit.client import Student
from devkit.loadgen import Report, run_load
from devkit.server import wait_ready

pytestmark = pytest.mark.deploy

SENTENCE = "The keys to the cabinet are on the table."
QUERY = urllib.parse.urlencode({"text": SENTENCE, "layer": 2, "head": 3})
CHART = '[data-testid="stPlotlyChart"]'
FIGURE = f'{CHART}, [data-testid="stBidiComponentIsolated"]'  # a plotly chart, or the Attention page's map
SENTENCE_BOX = 'textarea[aria-label="Sentence"]'  # the main box (the sidebar has a lesson note box too)
EXCEPTION = '[data-testid="stException"]'
RECONNECTED = '[data-testid="stApp"][data-test-connection-state="CONNECTED"][data-test-script-state="notRunning"]'
TAB_RECOVERY_S = 30  # the stated bound: a tab on a killed replica shows its view again within this time
STUDENT_RECOVERY_S = 15


@pytest.fixture(scope="module")
def dep() -> Deployment:
    with deployment(2) as d:
        yield d
    for port in d.replica_ports:  # the finaliser really stopped everything
        assert d.pid(port) is None
    assert d.nginx_pid() is None



def upgrade(dep: Deployment, host: str, origin: str | None) -> int:
    """Status of a WebSocket upgrade to /_stcore/stream through nginx with these Host and Origin headers."""
    conn = http.client.HTTPConnection("127.0.0.1", dep.port, timeout=10)
    headers = {"Host": host, "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": "streamlit"}
    if origin:
        headers["Origin"] = origin
    try:
        conn.request("GET", "/_stcore/stream", headers=headers)
        return conn.getresponse().status
    finally:
        conn.close()


def request(dep: Deployment, method: str, path: str, body: bytes | None = None) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", dep.port, timeout=10)
    conn.request(method, path, body=body)
    resp = conn.getresponse()
    resp.read()
    conn.close()
    return resp


def test_operator_hardening_through_nginx(dep: Deployment) -> None:
    local = f"127.0.0.1:{dep.port}"
    assert upgrade(dep, local, f"http://{local}") == 101  # the control: a same-origin browser gets its WebSocket
    # The DNS-rebinding shape: a page on evil.example whose name now points here; Origin equals Host.
    assert upgrade(dep, f"evil.example:{dep.port}", f"http://evil.example:{dep.port}") == 403
    assert upgrade(dep, f"evil.example:{dep.port}", None) == 403
    # Metrics stay on the replica's own port.
    assert request(dep, "GET", "/_stcore/metrics").status == 404
    direct = http.client.HTTPConnection("127.0.0.1", dep.replica_ports[0], timeout=10)
    direct.request("GET", "/_stcore/metrics")
    assert direct.getresponse().status == 200
    direct.close()
    # No uploads: the endpoint is closed, and no body larger than 16 kB gets through at all.
    assert request(dep, "PUT", "/_stcore/upload_file/some-session/some-file", b"x" * 900_000).status in (404, 413)
    assert request(dep, "PUT", "/_stcore/upload_file/some-session/some-file", b"x" * 1000).status == 404
    assert request(dep, "POST", "/", b"x" * 100_000).status == 413
    # An unknown deeper path goes to its first segment, query kept, instead of a blank page.
    resp = request(dep, "GET", f"/statistics/x/y?{QUERY}")
    assert resp.status == 302
    assert resp.getheader("Location").endswith(f"/statistics?{QUERY}")
    # ...but not the browser's base-path probe from a page URL, which must reach Streamlit and get its 404.
    assert request(dep, "GET", "/statistics/_stcore/health").status == 404
    assert request(dep, "GET", "/_stcore/health").status == 200


def test_browser_session_through_nginx(dep: Deployment, browser) -> None:
    page = browser.new_page()
    try:
        page.goto(f"{dep.url}/?{QUERY}")
        wait_ready(page, 90_000)
        page.wait_for_selector(FIGURE, timeout=60_000)
        assert page.locator(SENTENCE_BOX).input_value() == SENTENCE
        assert page.locator(EXCEPTION).count() == 0
        page.goto(f"{dep.url}/statistics?{QUERY}")
        wait_ready(page, 90_000)
        page.wait_for_selector(CHART, timeout=60_000)
        assert page.locator(EXCEPTION).count() == 0
    finally:
        page.close()
    log = (dep.run_dir / "nginx-access.log").read_text()
    assert "GET /_stcore/stream" in log and "upstream=127.0.0.1:" in log


def load_in_thread(url: str, students: int, **kwargs) -> tuple[threading.Thread, Report]:
    """Simulated students in a thread with its own event loop; the report fills while they work."""
    report = Report(students, 0)
    thread = threading.Thread(target=lambda: asyncio.run(run_load(url, students, report=report, **kwargs)), daemon=True)
    thread.start()
    return thread, report


def test_twenty_students_through_nginx(dep: Deployment) -> None:
    # In its own thread: Playwright's sync API keeps an event loop running in this one.
    thread, report = load_in_thread(dep.url, 20, seconds=40, ramp=5, timeout=60, seed=1)
    thread.join(timeout=40 + 60 + 40)
    assert not thread.is_alive(), "the load run did not stop by itself"
    summary = report.summary()
    print("\nload through nginx:", summary)
    for run in report.errors[:10]:
        print(f"  student {run.student} {run.kind} on /{run.page} at {run.start:.1f} s: {run.error}")
    assert summary["errors"] == 0, summary
    assert summary["dropped"] == 0 and summary["unrecovered"] == 0, summary
    assert sum(r.kind == "open" and r.latency is not None for r in report.runs) == 20
    assert summary["interactions"] >= 20 * 3, summary  # think times of 2-5 s leave room for ~8 each
    # Sticky by cookie, not by address: 20 students from one address still reach both replicas.
    log = (dep.run_dir / "nginx-access.log").read_text().splitlines()
    used = {line.split("upstream=")[1].split()[0] for line in log if "GET /_stcore/stream" in line}
    assert used >= {f"127.0.0.1:{p}" for p in dep.replica_ports}, used


def test_a_students_map_pick_is_one_fragment_run_that_sends_only_the_new_map(dep: Deployment) -> None:
    """The load's "pick": the map's own Layer or Head buttons, settled, as the simulated student sends it (the
    component's event in its fragment, with what the browser holds); the app applies the choice and sends only the
    new map's exact values."""
    async def picks() -> list[tuple[dict, list[str], int, dict]]:
        student = Student(dep.url, 0, "", {"text": "The cat sat on the mat."})
        await student.open()
        assert "pick" in student.choices() and student.map.received[0].startswith("stack:"), student.map.received
        held = {k: set(v) for k, v in student.map.stacks.items()}
        out = []
        for seed in range(3):
            before = dict(student.map.sel)
            await student.pick(random.Random(seed))
            out.append((before, student.map.received, student.finished, dict(student.map.sel)))
        assert student.map.stacks == held, "a settled pick brings no layers the browser holds"
        await student.close()
        return out

    done: list = []  # in its own thread: Playwright's sync API keeps an event loop running in this one
    thread = threading.Thread(target=lambda: done.append(asyncio.run(picks())), daemon=True)
    thread.start()
    thread.join(timeout=120)
    assert done, "the student's picks did not finish (an error in its thread fails the test: pyproject filterwarnings)"
    for before, received, finished, after in done[0]:
        assert received == ["exact"], received
        assert finished == ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
        changed = {k for k in after if after[k] != before[k]}
        assert changed and changed <= {"layer", "head"}, (before, after)


def serving_replica(dep: Deployment, timeout: float = 20) -> int:
    """The replica port holding the only open app session (the browser tab's WebSocket)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = [p for p in dep.replica_ports if established(p) > 0]
        if len(busy) == 1:
            return busy[0]
        time.sleep(0.1)
    raise AssertionError(f"no single replica holds the tab: {[established(p) for p in dep.replica_ports]}")


def test_replica_killed_mid_lesson(dep: Deployment, browser) -> None:
    """A tab and 12 students are connected through nginx; the tab's replica is killed with SIGKILL."""
    page = browser.new_page()
    frames: list[int] = []  # frames received, one counter per WebSocket the tab opened

    def on_websocket(ws) -> None:
        frames.append(0)
        i = len(frames) - 1
        ws.on("framereceived", lambda _frame: frames.__setitem__(i, frames[i] + 1))

    page.on("websocket", on_websocket)
    try:
        page.goto(f"{dep.url}/statistics?{QUERY}")
        wait_ready(page, 90_000)
        page.wait_for_selector(CHART, timeout=60_000)
        url_before = page.url
        victim = serving_replica(dep)
        survivor = next(p for p in dep.replica_ports if p != victim)

        thread, report = load_in_thread(dep.url, 12, seconds=50, ramp=2, timeout=60, seed=2)
        deadline = time.monotonic() + 60
        while sum(r.kind == "open" and r.latency is not None for r in report.runs) < 12:
            assert time.monotonic() < deadline, "the students did not all get their first page"
            time.sleep(0.1)
        students_on_victim = established(victim) - 1  # minus the tab

        t_kill = time.monotonic()
        dep.kill_replica(victim)
        # The tab opens a new WebSocket through nginx (to the survivor), reruns its URL and redraws.
        deadline = t_kill + TAB_RECOVERY_S
        while not (len(frames) >= 2 and frames[-1] > 0) and time.monotonic() < deadline:
            page.wait_for_timeout(100)  # polls the condition; Playwright delivers the socket events meanwhile
        assert len(frames) >= 2 and frames[-1] > 0, "the tab did not reconnect"
        page.wait_for_selector(RECONNECTED, timeout=max(1, deadline - time.monotonic()) * 1000)
        page.wait_for_selector(CHART, timeout=max(1, deadline - time.monotonic()) * 1000)
        tab_recovery = time.monotonic() - t_kill
        print(f"\ntab on replica {victim} recovered on {survivor} in {tab_recovery:.1f} s")
        assert tab_recovery <= TAB_RECOVERY_S
        assert page.url == url_before  # same page, same settings
        assert page.locator(SENTENCE_BOX).input_value() == SENTENCE
        assert page.locator(EXCEPTION).count() == 0
        assert dep.pid(victim) is None and established(survivor) >= 1

        thread.join(timeout=50 + 60 + 40)
        assert not thread.is_alive(), "the load run did not stop by itself"
        summary = report.summary()
        print(f"failover under load: {students_on_victim} students on the killed replica; {summary}")
        assert summary["errors"] == 0, [r.error for r in report.errors][:5]
        assert summary["unrecovered"] == 0
        assert len(report.recoveries) == students_on_victim, summary
        assert summary["dropped"] <= students_on_victim
        assert max(report.recoveries, default=0) <= STUDENT_RECOVERY_S, summary
    finally:
        page.close()
