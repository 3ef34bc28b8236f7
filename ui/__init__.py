"""Streamlit glue shared by the frame (app.py) and the pages: caches, session settings and small widgets.

The encoder library never imports Streamlit; this module is the only place where the two meet.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import threading
from typing import Any

import streamlit as st
import torch

import encoder
from encoder.analysis.variants import variant
from encoder.tokenizer import pretrained_available
from encoder.viz import figures  # noqa: F401 (imported before gc.freeze below, with plotly and pandas)
from ui import settings
from ui.checkpoints import checkpoint_dir, list_checkpoints
from ui.resources import check_budget, run_with_cpu_fallback

PAGE_KEY = "frame"


@dataclasses.dataclass(frozen=True)
class Frame:
    """What the frame computed this run; pages read it from st.session_state."""

    values: dict[str, Any]
    config: encoder.EncoderConfig | None
    model_key: str  # "pretrained", "ckpt:<name>" or the custom config's JSON: the cache key of the model
    device: str
    model: encoder.Encoder | None
    trace: encoder.Trace | None
    problem: str  # why there is no trace (empty sentence, impossible config...), shown by pages that need one

    @property
    def present(self) -> bool:
        return bool(self.values.get("present"))


def available_devices() -> list[str]:
    devices = ["auto", "cpu"]
    if torch.cuda.is_available():
        devices.append("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        devices.append("mps")
    return devices


def resolve_device(choice: str) -> str:
    if choice not in available_devices() or choice == "auto":
        return str(encoder.pick_device())
    return choice


def model_label(choice: str) -> str:
    if choice == settings.PRETRAINED:
        return settings.PRETRAINED_LABEL
    if choice == settings.CUSTOM:
        return settings.CUSTOM_LABEL
    return f"Checkpoint: {choice.removeprefix(settings.CHECKPOINT_PREFIX)}"


def model_choices() -> list[str]:
    """The sidebar's model options: the pretrained model (if installed), custom, and the operator's checkpoints."""
    choices = [settings.PRETRAINED] if pretrained_available() else []
    choices.append(settings.CUSTOM)
    return choices + [settings.CHECKPOINT_PREFIX + name for name in list_checkpoints()]


@st.cache_resource(max_entries=3, show_spinner="Building the model…")
def get_model(model_key: str, device: str) -> encoder.Encoder:
    """One shared, never-mutated model per (model, device).

    model_key: "pretrained", "ckpt:<name>" (a folder of the operator's models directory), or a config's JSON.
    """
    if model_key == settings.PRETRAINED:
        return encoder.load_pretrained(device=device)
    if model_key.startswith(settings.CHECKPOINT_PREFIX):
        folder = checkpoint_dir(model_key.removeprefix(settings.CHECKPOINT_PREFIX))
        return encoder.load_pretrained(folder, device=device)
    cfg = encoder.EncoderConfig.from_dict(json.loads(model_key))
    check_budget(cfg)
    return encoder.build_model(cfg, device=device)


@st.cache_resource(max_entries=16, show_spinner="Running the encoder…")
def get_trace(model_key: str, device: str, text: str, train: bool) -> encoder.Trace:
    """One forward pass per (model, device, sentence, mode); layer/head changes reuse it."""
    return run_with_cpu_fallback(lambda dev: get_model(model_key, dev), device, text, train)


@st.cache_resource(max_entries=4, show_spinner=False)
def get_variant(model_key: str, device: str, changes: tuple[tuple[str, str], ...]) -> encoder.Encoder:
    """The cached model under a changed config (e.g. (("norm", "pre"),)), sharing its weights."""
    return variant(get_model(model_key, device), **dict(changes))


@st.cache_resource(max_entries=16, show_spinner="Running the encoder…")
def get_variant_trace(model_key: str, device: str, norm: str, text: str, train: bool) -> encoder.Trace:
    return encoder.run(get_variant(model_key, device, (("norm", norm),)), text, train=train)


@st.cache_resource(show_spinner=False)
def training_store() -> dict:
    """Training results shared by every session, so a class that opens the page sees the runs at once."""
    return {"lock": threading.Lock(), "runs": {}}


def frame() -> Frame:
    """The frame's state for this run; a page opened on its own (without app.py) gets a friendly stop."""
    state = st.session_state.get(PAGE_KEY)
    if state is None:
        st.info("This view opens from the Encoder Explorer home page.")
        st.page_link("app.py", label="Open Encoder Explorer")
        st.stop()
    return state


def need_trace() -> tuple[Frame, encoder.Trace]:
    """The frame and its trace; when there is none, say why and stop this page."""
    fr = frame()
    if fr.trace is None:
        st.info(fr.problem or "Type a sentence above to see the encoder at work.")
        st.stop()
    return fr, fr.trace


def literal(text: str) -> str:
    """Text that Streamlit's Markdown shows as typed: every ASCII punctuation mark backslash-escaped.

    Messages that quote a URL value or a model name go through this, so `**x**` or `[a](javascript:...)`
    in a link stays text (and `:smile:` is no emoji shortcode).
    """
    return "".join("\\" + c if c in _PUNCTUATION else c for c in text)


_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def caption(text: str) -> None:
    """An explanatory caption; hidden in presentation mode for clean slides."""
    if not frame().present:
        st.caption(text)


def clamp(key: str, hi: int, lo: int = 0) -> None:
    """Keep a stored widget value inside a range that depends on the current model."""
    value = st.session_state.get(key, settings.SETTINGS[key].default)
    st.session_state[key] = min(max(value, lo), hi)


def layer_slider(num_layers: int, container: Any = st) -> int:
    if num_layers == 1:
        st.session_state["layer"] = 0
        return 0
    clamp("layer", num_layers - 1)
    return container.slider("Layer", 0, num_layers - 1, key="layer")


def sync_url() -> None:
    """Write the non-default settings into the URL so a copied link reopens this exact view."""
    values = {k: st.session_state[k] for k in settings.SETTINGS if k in st.session_state}
    wanted = settings.to_query(values)
    if dict(st.query_params) != wanted:
        st.query_params.from_dict(wanted)


# The process's long-lived objects (torch, plotly's validators, pandas: ~270k) move out of the garbage collector's
# view, once, at the first import: a full collection then takes ~0 ms instead of ~150 ms on these 2-core machines.
gc.freeze()
