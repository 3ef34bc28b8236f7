"""What every benchmark prints about the machine it ran on."""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from pathlib import Path

import torch


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo, else what platform reports."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def threads_and_clock(description: str) -> Callable[[], float]:
    """Read --threads from the command line, apply it, and return the clock to time with.

    Wall time by default. With one thread every kernel runs on the calling thread, so its CPU time measures the
    work alone: on a machine shared with other busy processes that is the figure that stays put.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: PyTorch's choice)")
    if (threads := parser.parse_args().threads) is not None:
        torch.set_num_threads(threads)
    return time.thread_time if torch.get_num_threads() == 1 else time.perf_counter
