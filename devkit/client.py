"""A browser tab without the browser: Streamlit's WebSocket protocol and its protobufs, as one student uses the app.

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
5. On the Attention page, a click on the map's own Layer or Head buttons ("pick") is drawn in the browser; what
   reaches the server is the settled choice, once the clicking stops: the component's event ("pick", as ui/heatmap.js
   sends it) in its fragment, saying what the browser holds. The student keeps account of that from the map's
   payloads, as the browser does, so the server sends only what it lacks (the new map's exact decimals).

Every script run's latency is the time from sending the BackMsg to receiving `script_finished`. Errors are
exception elements, compile errors, "page not found", runs that did not finish within the timeout and dropped
connections (Disconnected). Connections go to loopback addresses only.

Used by devkit/loadgen.py (simulated classes) and deploy/warm.py (a replica's warm-up).
"""

from __future__ import annotations

import asyncio
import http.cookiejar
import json
import random
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState, ContextInfo
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from ui import pages, payload, state

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
MAP_KEY = "attention-map"  # ui/heatmap.py KEY: the Attention page's map
# Where a Streamlit 1.67 component's events travel: a trigger widget beside the component's element id.
EVENTS_ID = "$$STREAMLIT_INTERNAL_KEY_{}__events"


def require_loopback(base_url: str) -> None:
    """ValueError unless base_url is on this machine: simulated classes never leave it."""
    host = urllib.parse.urlsplit(base_url).hostname
    if host not in LOOPBACK:
        raise ValueError(f"load runs go to loopback addresses only, not {host!r}")


@dataclass
class Widget:
    """A widget the server drew that a student can change: its element id, kind, fragment and range or options."""

    id: str
    kind: str  # slider, selectbox, text_area, ...
    fragment_id: str
    options: tuple[str, ...] = ()
    lo: float = 0
    hi: float = 0


@dataclass
class MapView:
    """The attention map as the student's browser holds it: its element, fragment and choice, and each measure's
    layers and the exact map the app sent (ui/heatmap.py `data`), to say so in a pick."""

    id: str
    fragment_id: str
    trace: str = ""
    sel: dict = field(default_factory=dict)
    layers: int = 1
    heads: int = 1
    stacks: dict[str, set[int]] = field(default_factory=dict)
    exact: str | None = None
    received: list[str] = field(default_factory=list)  # the last payload's parts: "stack:<id>" or "exact"

    def take(self, data: bytes) -> None:
        """What one payload brought (a new trace starts afresh)."""
        header, parts = _unpack(data)
        if header["id"] != self.trace:
            self.trace, self.stacks, self.exact = header["id"], {}, None
        self.sel, self.layers, self.heads = dict(header["sel"]), header["L"], header["H"]
        self.received = []
        for info, part in zip(header["parts"], parts, strict=True):
            if info["kind"] == "stack":
                sub, _ = _unpack(part)
                self.stacks.setdefault(sub["id"], set()).update(sub["layers"])
                self.received.append(f"stack:{sub['id']}")
            elif info["kind"] == "exact":
                self.exact = info["key"]
                self.received.append("exact")

    def held(self, nonce: str) -> dict:
        return {"id": self.trace, "nonce": nonce, "stacks": {k: sorted(v) for k, v in self.stacks.items()},
                "exact": self.exact}


def _unpack(data: bytes) -> tuple[dict, list[bytes]]:
    """A payload's header, and the parts its "zipped" sizes cut from the body."""
    header, body = payload.decode(data)
    parts, at = [], 0
    for size in header.get("zipped") or []:
        parts.append(body[at:at + size])
        at += size
    return header, parts


class Disconnected(Exception):
    """The server closed the connection (a replica died, or nginx dropped us)."""


class Student:
    """One browser tab, minus the browser."""

    def __init__(self, base_url: str, number: int, page: str, query: dict[str, str], timeout: float = 60,
                 picks: bool = True):
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
        self.map: MapView | None = None  # the attention map, while the page shows it
        self.picks = picks  # whether this student clicks the map (the load's mix before picks: False)
        self.nonce = f"student{number}"
        self._fragment_run = False
        self.finished = None  # how the last script run ended (ForwardMsg.ScriptFinishedStatus)
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
    def client_state(self) -> ClientState:
        """What the browser sends with a rerun of this tab's page: its URL, query string and page."""
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
            self.map = None
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
            status = self.finished = msg.script_finished
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
        if kind == "bidi_component" and wid.endswith("-" + MAP_KEY):
            if self.map is None or self.map.id != wid:
                self.map = MapView(wid, fragment_id)
            self.map.fragment_id = fragment_id
            self.map.take(proto.bytes)
            return
        # The setting's name ends the user key: "w:layer", and a text box's carries its generation ("w:text#2").
        key = state.setting_of(wid.split("-", 2)[2])
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
        """Load the tab's link in a fresh session; the first run's latency in seconds, or raise."""
        await self.connect()
        self.widgets, self.page_hash = {}, ""
        return await self.run_script(self.client_state())

    def choices(self) -> list[str]:
        """What the student can change now: the sentence, the page, the layer and head where they are widgets, and
        the map's layer or head where the map is."""
        picks = ["pick"] if self.map and self.picks else []
        return ["text", "page"] + [k for k in ("layer", "head") if k in self.widgets] + picks

    async def pick(self, rng: random.Random) -> float:
        """A new layer or head clicked on the map: its settled pick, one run of the map's fragment."""
        view = self.map
        name, count = rng.choice([("layer", view.layers), ("head", view.heads)])
        value = rng.choice([v for v in range(count) if v != view.sel.get(name)] or [0])
        choice = view.sel | {name: value} | ({"avg": False} if name == "head" else {})
        state = self.client_state()
        state.fragment_id = view.fragment_id
        event = {"event": "pick", "value": choice | {"held": view.held(self.nonce), "need": False}}
        state.widget_states.widgets.add(id=EVENTS_ID.format(view.id)).json_trigger_value = json.dumps([event])
        return await self.run_script(state)

    async def visit(self, page: str) -> float:
        """Switch this tab to the page at URL path `page` ("" for the default page), as a click in the navigation
        does: a rerun with that page's script hash. The run's latency in seconds, or raise."""
        self.page, self.page_hash = page, self.pages.get(page, "")
        return await self.run_script(self.client_state())

    async def interact(self, kind: str, rng: random.Random) -> float:
        """One action of `kind` (see choices()), with a random new value; the run's latency in seconds, or raise."""
        if kind == "page":
            return await self.visit(rng.choice([p for p in self.pages if p != self.page] or list(PAGES)))
        if kind == "pick":
            return await self.pick(rng)
        state = self.client_state()
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

