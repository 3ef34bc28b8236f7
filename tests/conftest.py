"""How scripts/test.sh splits the suite: most of it on two workers, then some modules alone, one after another.

Most of the suite's time is spent waiting on a server or a browser, so scripts/test.sh runs it on two pytest-xdist
workers, which overlap that waiting on two cores. Each module runs whole on one worker (`--dist loadfile`), so its
server and browser start once, as in a serial run. A worker takes the next module when it is done, so the longest go
first (`--no-loadscope-reorder` keeps this order): a long module handed out last would run alone at the end.

The modules marked `alone` run afterwards in a second, serial pytest run, as the whole suite used to run. They put a
class's load on servers (the load generator, many tabs, replicas behind nginx, containers) and time failovers against
the promise to students: beside another worker they took its CPU and it theirs (a displaced student took 5.7 s to
recover, over the 5 s bound, while the other worker ran the 20-browser load test).

The random walks ran alone too until a multiselect's lost pick on a busy machine was understood: the walk clicked
an option far down the (virtualised) list, the list scrolled under the pointer, and the press landed on an option
being redrawn (no rerun was ever sent). Tab.pick_multi now types the option to filter the list first, as a person
does, and the walks run on the workers, first, since they are the longest module.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ALONE = (
    "tests/app/test_container.py",
    "tests/app/test_deploy.py",
    "tests/app/test_load.py",
    "tests/app/test_memory.py",
)
# The longest of the other modules, longest first (pytest --durations, 2026-11-27); the rest follow in their order.
LONGEST_FIRST = (
    "tests/app/test_walk.py",
    "tests/app/test_projector.py",
    "tests/app/test_deep_links.py",
    "tests/app/test_heatmap.py",
    "tests/app/test_player_browser.py",
    "tests/app/test_browser.py",
    "tests/app/test_headview.py",
    "tests/app/test_families_browser.py",
    "tests/app/test_lessons.py",
    "tests/app/test_purpose_pages.py",
)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks added here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    root = Path(__file__).resolve().parents[1]
    gone = [path for path in ALONE + LONGEST_FIRST if not (root / path).is_file()]
    if gone:  # a renamed module would silently lose its place
        raise pytest.UsageError(f"tests/conftest.py names modules that do not exist: {gone}")
    for item in items:
        if module(item) in ALONE:
            item.add_marker(pytest.mark.alone)
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(module(item), len(rank)))  # stable: the rest keep their order


def module(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]
