"""A file a download click makes must outlive other sessions' script runs until its browser has fetched it
(ui/downloads.py). Driven on Streamlit's own media manager and in-memory storage, as the server uses them."""

from __future__ import annotations

import pytest
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

import ui  # noqa: F401 (importing the app's ui package applies keep_new_downloads, as a server's first run does)
from ui import downloads


def clicked(manager: MediaFileManager, content: bytes) -> str:
    """Draw a deferred download button in one run, click it: the URL the browser is sent to fetch."""
    placeholder = manager.add_deferred(lambda: content, "text/csv", "$$ID-0-0", "scores.csv")
    return manager.execute_deferred(placeholder)


def fetch(manager: MediaFileManager, url: str) -> bytes | None:
    """What the browser's GET of that URL finds (Streamlit's /media route reads the storage this way)."""
    found = manager.read_file(url.rsplit("/", 1)[1])
    return None if found is None else found.content


@pytest.fixture
def manager() -> MediaFileManager:
    return MediaFileManager(MemoryMediaFileStorage("/media"))


def test_a_downloaded_file_survives_other_sessions_runs(manager):
    url = clicked(manager, b"token,score\nit,0.5\n")
    for _ in range(5):  # five runs of other sessions end, each sweeping files no session refers to
        manager.remove_orphaned_files()
    assert fetch(manager, url) == b"token,score\nit,0.5\n"


def test_the_file_is_deleted_once_kept_long_enough(manager, monkeypatch):
    url = clicked(manager, b"a,b\n1,2\n")
    monkeypatch.setattr(downloads, "KEEP_S", 0.0)
    manager.remove_orphaned_files()  # marks it
    manager.remove_orphaned_files()  # deletes it: memory is returned as before
    assert fetch(manager, url) is None
    assert url.rsplit("/", 1)[1].split(".")[0] not in downloads.stored_at


def test_streamlit_alone_loses_the_file_after_two_runs(monkeypatch):
    """Why ui/downloads.py patches Streamlit: without it, two runs of any sessions delete the file before the
    browser may ask for it. When this fails, Streamlit keeps such files itself, and the patch can go."""
    monkeypatch.setattr(MediaFileManager, "_delete_file", MediaFileManager._delete_file.__wrapped__)
    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", MemoryMediaFileStorage.load_and_get_id.__wrapped__)
    manager = MediaFileManager(MemoryMediaFileStorage("/media"))
    url = clicked(manager, b"x\n")
    manager.remove_orphaned_files()
    manager.remove_orphaned_files()
    assert fetch(manager, url) is None


def test_the_patch_is_applied_once():
    delete = MediaFileManager._delete_file
    downloads.keep_new_downloads()
    assert MediaFileManager._delete_file is delete
