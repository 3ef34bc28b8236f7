"""Streamlit's AppTest on app.py, routed the way the live server routes: the one harness every AppTest goes through.

Why a harness: with a folder named pages/ beside app.py, Streamlit keeps a legacy router that picks a page script by
its file name (PagesManager.uses_pages_directory). A live server uses it for its first script run only: the first
st.navigation call turns it off for the life of the process. AppTest turns it back on before every run, so any rerun
or switch_page() whose page hash is a pages/ file stem ran that file alone, without app.py: no sidebar, stale
settings. app_test() turns it off after AppTest has reset it, so every run goes through app.py as on the live server.
(The server's first run is covered by app.py's own guard, ui.pages.show, and tests/app/test_deep_links.py.)

Also as on the live server: one script cache for the process (the server's Runtime holds one). AppTest makes a new
one for every run, so every run parsed app.py and the page again and rewrote them for magic: a third of an AppTest
run's CPU. A script whose file changed is compiled again, as the server's file watcher would have it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner.script_cache import ScriptCache
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1 import app_test as _streamlit_app_test
from streamlit.testing.v1 import local_script_runner as _streamlit_runner

from ui import payload, state

APP = Path(__file__).resolve().parents[1] / "app.py"


class _LiveServerPages(PagesManager):
    """Streamlit's PagesManager with the legacy pages/ router off, as after a live server's first st.navigation."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        PagesManager.uses_pages_directory = False  # AppTest reset it (on this subclass) just before building us


class _ProcessScriptCache(ScriptCache):
    """Streamlit's script cache, compiled again when a script's file changes (size or modification time)."""

    def __init__(self) -> None:
        super().__init__()
        self._stamps: dict[str, tuple[int, int]] = {}
        self._stamps_lock = threading.Lock()

    def get_bytecode(self, script_path: str) -> Any:
        path = os.path.abspath(script_path)
        stat = os.stat(path)
        with self._stamps_lock:
            if self._stamps.get(path) != (stat.st_mtime_ns, stat.st_size):
                with self._lock:
                    self._cache.pop(path, None)
                self._stamps[path] = (stat.st_mtime_ns, stat.st_size)
        return super().get_bytecode(path)


_SCRIPTS = _ProcessScriptCache()


def app_test(params: dict[str, str] | None = None, timeout: float = 120) -> AppTest:
    """An AppTest of app.py with `params` in its URL's query string, not yet run."""
    _streamlit_app_test.PagesManager = _LiveServerPages  # AppTest builds its PagesManager by this name
    _streamlit_app_test.ScriptCache = _streamlit_runner.ScriptCache = lambda: _SCRIPTS  # ... and its script caches
    at = AppTest.from_file(str(APP), default_timeout=timeout)
    for key, value in (params or {}).items():
        at.query_params[key] = value
    return at


FIGURE_COMPONENTS = ("attention_map", "head_view", "panels")  # ui/components.register names that draw a figure


def figure_components(at: AppTest) -> list[Any]:
    """The app's own components on the page that draw a figure (the attention map, the head view, the step charts),
    not its helpers (the lesson keys, the file opener)."""
    return [e for e in at.get("bidi_component") if e.proto.component_name.rsplit(".", 1)[-1] in FIGURE_COMPONENTS]


def component_headers(at: AppTest) -> list[dict[str, Any]]:
    """The header of every app component's payload on the page (ui/payload.py's format: [uint32 LE length][JSON]),
    in page order: what the attention map or the head view was given, read without a browser."""
    return [payload.decode(element.proto.bytes)[0] for element in at.get("bidi_component")]


def text_box(at: AppTest, name: str) -> Any:
    """The text box of setting `name`: its key is w:NAME#generation (ui/state.py `_box_key`), a new one each time
    something other than typing changed the setting."""
    found = [box for box in [*at.text_area, *at.text_input]
             if (box.key or "").startswith(state.PREFIX) and state.setting_of(box.key) == name]
    assert len(found) == 1, f"{len(found)} text boxes for {name!r}: {[box.key for box in [*at.text_area, *at.text_input]]}"
    return found[0]
