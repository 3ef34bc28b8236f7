"""The settings store: the one place a setting lives, from the first line of a run to the URL.

How state works (the rule for every page):
- `init()` runs first in every script run. It creates the store (a plain dict in session state that no widget
  owns) once per session, seeded from the URL; later runs only read it.
- Every widget is drawn with `widget(key)`, from the settings table in ui/settings.py. Its Streamlit key is
  `w:<key>`, re-created from the store on every run (a slider keeps its own in the run its own move started, so
  quick arrow presses are not undone), and its on_change callback writes the new value back into the store.
  Streamlit may delete a widget's key whenever that widget is not drawn (another page, a fragment rerun, a sidebar
  knob of the other model); the store never loses anything, so no setting can go missing.
- Buttons change the store in their on_click callbacks (`put`).
- `sync_url()` writes the store's non-default values into the address bar, at the start of every run and of
  every fragment run: a reload or a copied link at any moment reopens the same view.
A new page adds a setting by adding one row to SETTINGS and drawing it with `widget(...)`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from . import settings
from .settings import SETTINGS

STORE = "settings"
PREFIX = "w:"
GENERATION = "#"  # a text box's key: PREFIX, the setting, GENERATION and the box's generation ("w:text#2")
SEEN = "widgets drawn"  # setting -> (page, kind, options or range) of its widget's last drawing
MOVED = "widgets moved"  # the settings whose widgets' on_change started this run (a slider's arrow press)
BOXES = "text boxes"  # text setting -> its box's generation: how often the store's text changed other than by typing
_MISSING = object()


def store() -> dict[str, Any]:
    """The session's settings: every key of SETTINGS, always present."""
    ss = st.session_state
    if STORE not in ss:
        ss[STORE] = settings.defaults()
    return ss[STORE]


def init(check: Callable[[dict[str, Any]], list[str]] | None = None) -> list[str]:
    """Create the store from the URL on a session's first run; return what was wrong with the URL (else [])."""
    ss = st.session_state
    if STORE in ss:
        return []
    params = {k: st.query_params.get_all(k) for k in st.query_params}
    values, problems = settings.from_query(params)
    ss[STORE] = settings.defaults() | values
    if check is not None:
        problems += check(ss[STORE])
    return problems


def get(key: str) -> Any:
    return store()[key]


def put(key: str, value: Any) -> None:
    """Set a setting (from a callback or before its widget is drawn)."""
    store()[key] = value


def kind_slides(kind: str) -> bool:
    """Widgets a user moves in quick steps (arrow keys), whose in-flight steps a re-sent value would undo."""
    return kind in ("slider", "select_slider")


def fragment_run() -> bool:
    """Whether this run is a fragment's own (the rest of the page is not drawn again)."""
    ctx = get_script_run_ctx()
    return bool(ctx is not None and ctx.fragment_ids_this_run)


def _page() -> str:
    """The page this run draws (Streamlit gives a page's widgets ids of their own)."""
    ctx = get_script_run_ctx()
    return ctx.page_script_hash if ctx is not None else ""


def _commit(key: str, wkey: str) -> None:
    st.session_state.setdefault(MOVED, set()).add(key)  # callbacks run first in the run the move started
    value = st.session_state.get(wkey)
    setting = SETTINGS[key]
    if value is None and setting.kind is not str:
        return  # a cleared number input keeps the old value
    if setting.kind is float and value is not None:
        value = round(float(value), 12 if setting.options else 4)  # slider steps like 0.15000000000000002
    store()[key] = "" if value is None else value


def fit(key: str, options: Sequence | None = None, lo: float | None = None, hi: float | None = None) -> Any:
    """The stored value, moved into what the widget can show now (e.g. layer 5 on a 2-layer model -> 1)."""
    setting = SETTINGS[key]
    value = store()[key]
    if options is not None:
        options = list(options)
        if options and value not in options:
            value = setting.default if setting.default in options else options[0]
    else:
        lo = setting.lo if lo is None else lo
        hi = setting.hi if hi is None else hi
        if lo is not None and hi is not None:
            value = min(max(value, lo), hi)
    store()[key] = value
    return value


def widget(key: str, where: Any = None, *, options: Sequence | None = None, lo: float | None = None,
           hi: float | None = None, **extra: Any) -> Any:
    """Draw the setting's widget from the table, bound to the store; return the value in force."""
    setting = SETTINGS[key]
    where = st if where is None else where
    opts = list(options) if options is not None else (list(setting.options) if setting.options is not None else None)
    lo = setting.lo if lo is None else lo
    hi = setting.hi if hi is None else hi
    value = fit(key, opts, lo, hi)
    wkey = PREFIX + key
    if setting.widget in ("text_area", "text_input"):
        where = where.container(key=wkey)  # the box's place keeps the setting's key; the box's own key may change
        wkey = _box_key(key, value)
    # Re-created from the store on every run, so the value sent to the browser is always the store's (a widget the
    # browser mounts later, e.g. in a popover, shows it too). One exception: a slider in the run its own move started,
    # while it stays on screen with that value. Writing its key then undid arrow presses made while the run was going
    # (six quick presses lost five). Any other run writes it: a run cut short by a newer one may never have sent the
    # slider to the browser, which then shows the first option (num_heads 1 while the store held 4).
    seen = st.session_state.setdefault(SEEN, {})
    moved = st.session_state.setdefault(MOVED, set())
    here = (_page(), setting.widget, tuple(opts) if opts is not None else (lo, hi))
    kept = (kind_slides(setting.widget) and key in moved and seen.get(key) == here
            and st.session_state.get(wkey, _MISSING) == value)
    moved.discard(key)
    if not kept:
        st.session_state[wkey] = value
    seen[key] = here
    show = extra.pop("format_func", setting.show)
    # A label or radio captions that depend on what is on screen (the model's own special tokens, a checkpoint's size)
    label, captions = extra.pop("label", setting.label), extra.pop("captions", setting.captions)
    common = dict(key=wkey, on_change=_commit, args=(key, wkey), help=setting.help) | extra
    kind = setting.widget
    if kind == "radio":
        where.radio(label, opts, format_func=show, captions=captions, **common)
    elif kind == "select_slider":
        where.select_slider(label, opts, format_func=show, **common)
    elif kind == "slider":
        step = setting.step if setting.step is not None else (1 if setting.kind is int else None)
        where.slider(label, setting.kind(lo), setting.kind(hi), step=step, **common)
    elif kind == "selectbox":
        where.selectbox(label, opts, format_func=show, **common)
    elif kind == "toggle":
        where.toggle(label, **common)
    elif kind == "checkbox":
        where.checkbox(label, **common)
    elif kind == "number":
        where.number_input(label, setting.kind(lo), setting.kind(hi), step=setting.kind(setting.step or 1), **common)
    elif kind == "segmented":
        where.segmented_control(label, opts, format_func=show, required=True, **common)
    elif kind == "text_area":
        where.text_area(label, max_chars=settings.MAX_TEXT_CHARS, **common)
    elif kind == "text_input":
        where.text_input(label, max_chars=40, **common)
    else:
        raise ValueError(f"The setting {key!r} has no widget.")
    return store()[key]


def _box_key(key: str, value: str) -> str:
    """A text box's key: a new one whenever the store's text changed other than by typing in the box (a lesson's
    slide, an example). A browser keeps what was typed into a box it is not showing (one in a closed popover) and
    sends it with a later run, which would put the old text back; a box with a new key has no old text to send."""
    boxes = st.session_state.setdefault(BOXES, {})
    n = boxes.get(key, 0)
    if st.session_state.get(f"{PREFIX}{key}{GENERATION}{n}", value) != value:
        n = boxes[key] = n + 1
    return f"{PREFIX}{key}{GENERATION}{n}"


def setting_of(widget_key: str) -> str:
    """The setting a widget's key is bound to: "w:layer" -> "layer", a text box's "w:text#2" -> "text"."""
    return widget_key.removeprefix(PREFIX).split(GENERATION, 1)[0]


def sync_url() -> None:
    """Write the store's non-default settings into the address bar."""
    wanted = settings.to_query(store())
    if dict(st.query_params) != wanted:
        st.query_params.from_dict(wanted)
