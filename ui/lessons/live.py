"""A slide's view computed as its page computes it: the model, the trace and the layer/head/query on screen.

Claims (claims.py) and the handout's figures (handout.py) both start here, so a number a slide states and the figure
printed beside it come from the same forward pass, through the app's own byte-bounded caches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import encoder

from .. import Frame, check_url_values, frame, model_label, settings
from ..steps import Step, layer_steps


@dataclass(frozen=True)
class Live:
    """One view's settings and the frame they give; `problem` says why there is no trace (or no model) to show."""

    values: dict[str, Any]
    frame: Frame
    problem: str = ""

    @property
    def trace(self) -> encoder.Trace:
        if self.frame.trace is None:
            raise ValueError(self.problem or self.frame.problem or "This view has no trace.")
        return self.frame.trace

    @property
    def config(self) -> encoder.EncoderConfig:
        if self.frame.config is None:
            raise ValueError(self.problem or self.frame.problem)
        return self.frame.config

    # The pages move a setting into what the model on screen has as their widgets draw it (ui.state.fit): a slider
    # clamps (layer 9 on 6 layers is layer 5), an options box falls back to its default, else its first option.
    @property
    def layer(self) -> int:
        return min(max(self.values["layer"], 0), self.config.num_layers - 1)

    @property
    def head(self) -> int:
        heads = range(self.config.num_heads)
        default = settings.SETTINGS["head"].default
        return self.values["head"] if self.values["head"] in heads else (default if default in heads else 0)

    @property
    def query(self) -> int:
        return min(max(self.values["query"], 0), self.trace.seq_len - 1)

    @property
    def step(self) -> Step:
        steps = layer_steps(self.config)
        return steps[min(max(self.values["step"], 0), len(steps) - 1)]


def open_view(values: dict[str, Any]) -> Live:
    """The view these settings describe (e.g. Slide.values()), from the app's caches."""
    values = dict(values)
    wanted = values["model"]
    check_url_values(values)  # a device this server lacks becomes auto, as a link's would
    if values["model"] != wanted:
        values["model"] = wanted
        problem = f"This slide uses the model {_model_name(wanted)}, which is not installed on this server."
        empty = Frame(values=values, config=None, model_key=wanted, device="cpu", model=None, trace=None, problem=problem,
                      level="error")
        return Live(values, empty, problem)
    fr = frame(values)
    return Live(fr.values, fr, fr.problem)


def _model_name(choice: str) -> str:
    return "“" + model_label(choice)[:80] + "”"
