"""Download buttons whose file reaches the browser, on a quiet server and under a class.

A button may hand Streamlit a function instead of the file (dot's SVG, the CSVs), so nothing is built on the runs
where nobody downloads. Streamlit 1.67 then loses files in two ways, both fixed here:

1. A click that also reruns the script: the browser asks for the file just after the rerun it triggered, and a
   fast rerun ends first and drops the old file id ("Deferred file ... not found" in the log). 2 clicks in 40 on
   the diagram page lost their file. `download` draws buttons that start no run.
2. The file a click makes belongs to no session, so the end of any two script runs, of any session, deletes it.
   Under a class that is often before the browser has fetched it: with 75 simulated students on one replica, 17 of
   60 clicks got a 404. `keep_new_downloads` keeps every downloadable file for KEEP_S after it was stored.
"""

from __future__ import annotations

import functools
import math
import time
from typing import Any

import streamlit as st
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.runtime.media_file_storage import MediaFileKind
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

KEEP_S = 60.0  # a browser fetches its file within milliseconds of the click; a minute covers a stalled tab
stored_at: dict[str, float] = {}  # downloadable file id -> when it was last stored (time.monotonic)


def download(label: str, data: Any, file_name: str, mime: str, where: Any = None, **extra: Any) -> None:
    """A download button that starts no script run. `data` is the file's text or bytes, or a function that makes
    them when the button is clicked."""
    (where or st).download_button(label, data, file_name=file_name, mime=mime, on_click="ignore",
                                  icon=":material/download:", **extra)


def keep_new_downloads() -> None:
    """Make Streamlit's media manager keep each downloadable file for KEEP_S after it was last stored.

    The time is noted where the file is stored and checked where it would be deleted; both happen under the
    manager's lock, so no sweep can fall between them. A file kept stays marked for deletion, and the first sweep
    after KEEP_S deletes it. Idempotent."""
    if getattr(MediaFileManager._delete_file, "keeps_new_downloads", False):
        return
    store, delete = MemoryMediaFileStorage.load_and_get_id, MediaFileManager._delete_file

    @functools.wraps(store)
    def store_noting_time(self, path_or_data, mimetype, kind, filename=None):
        file_id = store(self, path_or_data, mimetype, kind, filename)
        if kind == MediaFileKind.DOWNLOADABLE:
            stored_at[file_id] = time.monotonic()
        return file_id

    @functools.wraps(delete)
    def delete_unless_new(self, file_id):
        if time.monotonic() - stored_at.get(file_id, -math.inf) < KEEP_S:
            return
        stored_at.pop(file_id, None)
        delete(self, file_id)

    delete_unless_new.keeps_new_downloads = True
    MemoryMediaFileStorage.load_and_get_id = store_noting_time
    MediaFileManager._delete_file = delete_unless_new
