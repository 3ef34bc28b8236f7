"""How the suite's modules are shared between two workers, and in what order.

scripts/test.sh runs the suite on two pytest-xdist workers. Most of its time is spent waiting on a server or a
browser, so two workers on two cores overlap that waiting. Each module is one group (xdist's "scope"), run whole on
one worker, so its server and browser start once, as in a serial run. The modules that put a class's load on servers
(the load generator, many tabs, replicas behind nginx, containers) form one group of their own and run one after
another: side by side they would take each other's CPU and slow the failovers they time. A worker takes the next group
when it is done, so the longest go first: a long group handed out last would run alone at the end. Nothing else
changes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

UNDER_LOAD = (
    "tests/app/test_container.py",
    "tests/app/test_deploy.py",
    "tests/app/test_load.py",
    "tests/app/test_memory.py",
)
# The longest groups, longest first (pytest --durations, 2026-11-27); every other module follows in its usual order.
LONGEST_FIRST = (
    *UNDER_LOAD,
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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    root = Path(__file__).resolve().parents[1]
    gone = [path for path in LONGEST_FIRST if not (root / path).is_file()]
    if gone:  # a renamed module would silently lose its place
        raise pytest.UsageError(f"tests/conftest.py names modules that do not exist: {gone}")
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(module(item.nodeid), len(rank)))  # stable: the rest keep their order


def module(nodeid: str) -> str:
    return nodeid.split("::")[0]


def group(nodeid: str) -> str:
    """The group a test runs in: its module's, or UNDER_LOAD's one group."""
    path = module(nodeid)
    return "under-load" if path in UNDER_LOAD else path


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """xdist's scope scheduling, its scopes being group() (xdist's own groups, `--dist loadgroup`, rename the test
    ids, which pytest 9 no longer lets them do), handed out in collection order (`--no-loadscope-reorder`)."""
    from xdist.scheduler import LoadScopeScheduling  # only when xdist runs the suite

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group(nodeid)

    config.option.loadscopereorder = False
    return ByGroup(config, log)

