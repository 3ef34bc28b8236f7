"""A progress bar for long computations (attributions, whole-model measures): the step count while it runs, nothing
left on the page once it is done."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st


class Progress:
    """A progress bar in a placeholder: `progress(what)` gives a progress(done, total) that fills it with the step
    count; `done()` removes it."""

    def __init__(self, where: Any = None) -> None:
        self.box = (where or st).empty()
        self.bar = None

    def __call__(self, what: str) -> Callable[[int, int], None]:
        def step(done: int, total: int) -> None:
            text = f"{what}: {done} of {total}"
            if self.bar is None:
                self.bar = self.box.progress(0.0, text=text)
            self.bar.progress(min(1.0, done / max(total, 1)), text=text)
        step(0, 1)  # shown at once: the first step may take a while
        return step

    def done(self) -> None:
        self.box.empty()
        self.bar = None
