"""ui/priority.py: long computations run on a thread of their own at a lower OS priority, and their progress bars
still reach the page in the script's order."""

from __future__ import annotations

import sys
import threading

import pytest
from streamlit.testing.v1 import AppTest

from ui import priority


def lowered(base: int) -> int:
    """The niceness a computation runs at: NICE on Linux, never above the caller's priority; elsewhere unchanged."""
    return max(priority.NICE, base) if sys.platform.startswith("linux") else base


def test_behind_runs_on_its_own_thread_at_lower_priority_and_hands_back_result_and_error():
    before = priority.niceness()  # 0 unless the tests themselves run under `nice`
    seen = priority.behind(lambda: (threading.current_thread() is not threading.main_thread(), priority.niceness()))
    assert seen == (True, lowered(before))
    assert priority.niceness() == before  # the caller keeps its own priority
    with pytest.raises(ZeroDivisionError):
        priority.behind(lambda: 1 / 0)
    # A computation that needs another runs it in place: no thread waits on a thread it started for nothing.
    outer = priority.behind(lambda: (threading.get_ident(), priority.behind(threading.get_ident)))
    assert outer[0] == outer[1]


def _script() -> None:
    import streamlit as st

    from ui import priority

    box = st.empty()
    st.write("after the computation")
    with st.container():
        priority.behind(lambda: box.progress(0.5, text="half way"))
        priority.behind(lambda: st.write("written by the computation"))
        st.write(priority.behind(lambda: f"computed at niceness {priority.niceness()}"))
    st.write("the end")


def test_what_a_computation_draws_reaches_the_page_where_the_script_put_it():
    at = AppTest.from_function(_script).run()
    assert not at.exception
    texts = [m.value for m in at.markdown]
    nice = lowered(priority.niceness())
    assert texts == ["after the computation", "written by the computation", f"computed at niceness {nice}", "the end"]
    bars = at.get("progress")
    assert len(bars) == 1 and bars[0].proto.text == "half way"
