"""Warm one replica before it is put behind nginx: open a session over Streamlit's WebSocket protocol.

The first run builds the pretrained model and traces the default sentence; then every page is opened once, so
the first student on each page does not pay for imports and caches. Exits non-zero if any run fails.

    python -m deploy.warm http://127.0.0.1:8501     (from the repository root)
"""

from __future__ import annotations

import asyncio
import sys
import time

from devkit.client import Student


async def warm(url: str, timeout: float = 180) -> list[tuple[str, float]]:
    """Open the app on url, then each page; (page, seconds) per run. Raises if a run fails."""
    student = Student(url, 0, "", {}, timeout=timeout)
    try:
        timings = [("/", await student.open())]
        for page, page_hash in list(student.pages.items()):  # every page the app's navigation lists
            if page_hash != student.page_hash:
                timings.append((f"/{page}", await student.visit(page)))
        return timings
    finally:
        await student.close()


def main() -> None:
    url = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8501"
    t0 = time.perf_counter()
    try:
        timings = asyncio.run(warm(url))
    except Exception as err:  # noqa: BLE001 - any failure means "not ready"; say why
        sys.exit(f"warm-up of {url} failed: {err}")
    runs = ", ".join(f"{page} {s:.1f} s" for page, s in timings)
    print(f"warmed {url} in {time.perf_counter() - t0:.1f} s ({runs})")


if __name__ == "__main__":
    main()
