"""Long computations run behind the clicks: on a worker thread at a lower OS priority.

In a class, most script runs are short (tens of milliseconds of CPU). A sentence the server has not seen makes a few
pages compute for a second or more: Why are these similar?'s attributions and faithfulness curves, the whole-model
measures. On a replica's one core such a computation and the class's short runs used to share the CPU evenly, so
every click on that replica waited for as long as the computation lasted. `behind(compute)` runs it on a worker
thread whose niceness is NICE: the kernel serves the short runs first and gives the computation what is left, so
on an idle machine it takes as long as before, and on a busy one only its own student waits.

The script's thread waits for the result, so nothing else in that run changes order. The worker runs with the
script's context attached, so a progress bar it fills reaches the page as the script's own elements do; Streamlit
stops and reruns scripts only at calls on the script's own thread, as before.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable
from typing import TypeVar

from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.scriptrunner_utils.script_run_context import SCRIPT_RUN_CONTEXT_ATTR_NAME

NICE = 10  # 0 is the default; at 10 the kernel gives a thread about a tenth of the share of a default one
_NAME = "behind-the-clicks"

T = TypeVar("T")


def niceness() -> int:
    """The niceness of the calling thread (Linux: each thread has its own)."""
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def behind(compute: Callable[[], T]) -> T:
    """compute() run on a thread of its own at niceness NICE; its result, or its exception, in the caller's thread.
    Run in place when called from such a thread already (a computation that needs another).

    A new thread each time, not a pool: a computation may wait for another session's (the byte cache computes each
    key once), and a pool whose every worker waited so would never finish. Starting a thread costs microseconds."""
    if threading.current_thread().name == _NAME:
        return compute()
    ctx = get_script_run_ctx(suppress_warning=True)
    context = contextvars.copy_context()  # Streamlit keeps the run's place on the page (fragment, cursor) in these
    out: list = []

    def work() -> None:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), max(NICE, niceness()))  # never higher
        except (AttributeError, OSError):  # not Linux, or not allowed: the computation runs at the caller's priority
            pass
        setattr(threading.current_thread(), SCRIPT_RUN_CONTEXT_ATTR_NAME, ctx)  # as add_script_run_ctx does
        try:
            out.append((True, context.run(compute)))
        except BaseException as err:  # noqa: BLE001 - handed to the caller as it is
            out.append((False, err))

    thread = threading.Thread(target=work, name=_NAME, daemon=True)
    thread.start()
    thread.join()
    ok, value = out[0]
    if not ok:
        raise value
    return value
