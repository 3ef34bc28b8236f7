"""Streamlit glue shared by the frame (app.py) and the pages: the frame's model and trace, caches, small widgets.

The encoder library never imports Streamlit; this package is the only place where the two meet. Settings live in
ui/state.py's store; tensors live only in ui/caches.py's byte-bounded cache. A session keeps keys, never tensors.
"""

from __future__ import annotations

import os

# Before torch is imported, by app.py or by a page script that a server's first request runs alone (ui/pages.py):
# idle OpenMP threads sleep instead of spinning, so sessions sharing 2 cores don't stall each other
# (benchmarks/RESULTS-app.md: a 128-token forward on busy cores went from 1457 ms to 87 ms).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import contextlib
import dataclasses
import functools
import gc
import hashlib
import json
import logging
from collections.abc import Callable, Hashable
from typing import Any

import streamlit as st
import torch

import encoder
from encoder.analysis import embeddings, position
from encoder.analysis.variants import variant, variant_config
from encoder.tokenizer import pretrained_available
from encoder.viz import activations, attention, similarity  # noqa: F401 (imported before gc.freeze below: plotly, pandas)

from . import checkpoints, settings, state
from .caches import BESIDE, CACHE
from .checkpoints import checkpoint_dir, list_checkpoints
from .downloads import download, keep_new_downloads  # noqa: F401 (download: the pages draw their buttons with ui.download)
from .resources import APP_MAX_TOKENS, app_tokens, check_budget, return_freed_memory, run_with_cpu_fallback
from .state import widget

__all__ = ["BESIDE", "Frame", "frame", "need_trace", "widget", "state", "settings", "fragment", "guard", "caption", "literal"]
_log = logging.getLogger("encoder_explorer")


@dataclasses.dataclass(frozen=True)
class Frame:
    """What this run shows: the settings, the model and its trace. Built per run; never stored in the session."""

    values: dict[str, Any]
    config: encoder.EncoderConfig | None
    model_key: str  # "pretrained", "ckpt:<name>" or the custom config's JSON: the cache key of the model
    device: str
    model: encoder.Encoder | None
    trace: encoder.Trace | None
    problem: str  # why there is no trace (empty sentence, impossible config...), shown by pages that need one
    level: str = "info"  # how to show the problem: "info" (a prompt) or "error"

    @property
    def present(self) -> bool:
        return bool(self.values.get("present"))

    @property
    def trace_key(self) -> tuple[str, str, str, bool]:
        """What identifies this frame's trace in the cache: (model key, device, sentence, training mode)."""
        return self.model_key, self.device, self.values["text"], bool(self.values["train"])

    @property
    def trace_id(self) -> str:
        """A short, stable name of the trace (16 hex digits), for the browser to tell one trace from another."""
        return hashlib.sha256(repr(self.trace_key).encode()).hexdigest()[:16]


def available_devices() -> list[str]:
    """The sidebar's device options on this server: "auto" (encoder.pick_device's choice), then what it has."""
    return [settings.AUTO_DEVICE, *encoder.available_devices()]


def resolve_device(choice: str) -> str:
    if choice not in available_devices() or choice == settings.AUTO_DEVICE:
        return str(encoder.pick_device())
    return choice


def model_label(choice: str) -> str:
    if choice == settings.PRETRAINED:
        return settings.PRETRAINED_LABEL
    if choice == settings.CUSTOM:
        return settings.CUSTOM_LABEL
    return f"Checkpoint: {choice.removeprefix(settings.CHECKPOINT_PREFIX)}"


def short_model_label(choice: str) -> str:
    """The model's name in a word, for a box a projector leaves narrow; the titles beside it name it in full."""
    if choice == settings.PRETRAINED:
        return settings.PRETRAINED_SHORT
    if choice == settings.CUSTOM:
        return settings.CUSTOM_SHORT
    return choice.removeprefix(settings.CHECKPOINT_PREFIX)


def model_choices() -> list[str]:
    """The sidebar's model options: the pretrained model (if installed), custom, and the operator's checkpoints."""
    choices = [settings.PRETRAINED] if pretrained_available() else []
    choices.append(settings.CUSTOM)
    return choices + [settings.CHECKPOINT_PREFIX + name for name in list_checkpoints()]


def model_captions() -> list[str]:
    """One line under each model choice (model_choices order): a checkpoint's family, shape, parameters and size,
    read before it loads; nothing under the pretrained and custom models, whose line is drawn below."""
    listed = {settings.CHECKPOINT_PREFIX + c.name: c.summary for c in checkpoints.scan() if c.info is not None}
    return [listed.get(choice, "") for choice in model_choices()]


def refused_checkpoints(where: Any = None) -> None:
    """The models folder's folders that cannot load, each with the sentence that says why (none: nothing drawn)."""
    refused = checkpoints.refused()
    if not refused:
        return
    box = (st if where is None else where).expander(f"{len(refused)} model folder{'s' if len(refused) > 1 else ''} "
                                                    "cannot load", icon=":material/block:")
    for c in refused:
        box.caption(literal(f"{c.name}: {c.reason}"))  # folder names and reasons as text, never Markdown


def _unavailable(choice: str, instead: str) -> str:
    """Why a model named in a link cannot be used here, and what is used instead."""
    name = choice.removeprefix(settings.CHECKPOINT_PREFIX)
    entry = checkpoints.find(name) if choice.startswith(settings.CHECKPOINT_PREFIX) else None
    if entry is not None and entry.info is None:  # a folder of the models directory that cannot load: say why
        return f"The model {choice!r} is not available here: {entry.reason} {instead[0].upper()}{instead[1:]}."
    return f"The model {choice!r} is not available here; {instead}."


def check_url_values(values: dict[str, Any]) -> list[str]:
    """Fix settings from a link that this server cannot honour (a device or model it lacks); say what changed."""
    problems = []
    if values["device"] not in available_devices():
        problems.append(f"The device {values['device']!r} is not available here; using auto.")
        values["device"] = settings.AUTO_DEVICE
    choices = model_choices()
    if values["model"] not in choices:
        problems.append(_unavailable(values["model"], f"using {model_label(choices[0])}"))
        values["model"] = choices[0]
    if values["model_b"] not in choices:
        fallback = settings.CUSTOM if values["model"] != settings.CUSTOM or len(choices) < 2 else choices[0]
        problems.append(_unavailable(values["model_b"], f"Compare's second model is {model_label(fallback)}"))
        values["model_b"] = fallback
    return problems


def get_model(model_key: str, device: str) -> encoder.Encoder:
    """One shared, never-mutated model per (model, device).

    model_key: "pretrained", "ckpt:<name>" (a folder of the operator's models directory), or a config's JSON.
    """
    def build() -> encoder.Encoder:
        if model_key == settings.PRETRAINED:
            return encoder.load_pretrained(device=device)
        if model_key.startswith(settings.CHECKPOINT_PREFIX):  # checkpoint_dir refuses a folder above the budget
            return encoder.load_pretrained(checkpoint_dir(model_key.removeprefix(settings.CHECKPOINT_PREFIX)), device=device)
        cfg = encoder.EncoderConfig.from_dict(json.loads(model_key))
        check_budget(cfg)
        return encoder.build_model(cfg, device=device)

    return CACHE.get(("model", model_key, device), build)


def get_trace(model_key: str, device: str, text: str, train: bool) -> encoder.Trace:
    """One forward pass per (model, device, sentence, mode); layer/head changes reuse it."""
    return CACHE.get(("trace", model_key, device, text, train),
                     lambda: run_with_cpu_fallback(lambda dev: get_model(model_key, dev), device, text, train))


def get_variant(model_key: str, device: str, changes: tuple[tuple[str, Any], ...]) -> encoder.Encoder:
    """The cached model under a changed config (e.g. (("norm", "pre"),)), sharing its weights."""
    if not changes:
        return get_model(model_key, device)

    def build() -> encoder.Encoder:
        base = get_model(model_key, device)
        check_budget(variant_config(base.cfg, **dict(changes)))
        return variant(base, **dict(changes))

    return CACHE.get(("variant", model_key, device, changes), build)


def traced(model: encoder.Encoder, text: str, train: bool = False) -> encoder.Trace:
    """run() as the app runs a model: on at most app_tokens() tokens of the text."""
    return encoder.run(model, text, max_tokens=app_tokens(model.cfg), train=train)


def get_variant_trace(model_key: str, device: str, changes: tuple[tuple[str, Any], ...], text: str,
                      train: bool) -> encoder.Trace:
    return CACHE.get(("variant-trace", model_key, device, changes, text, train),
                     lambda: traced(get_variant(model_key, device, changes), text, train))


KEEP_FIGURES_UP_TO = 128  # tokens: a longer trace's maps are built each time (a 512-token pair of maps is ~2 MB)


def kept_figure(trace: encoder.Trace, key: Hashable, build: Callable[[], Any]) -> Any:
    """A figure drawn from `trace` and the runs cached with it (its knock-outs, its other placement), built once per
    trace and `key` for every session and rerun (BESIDE); `key` names the view and everything else it depends on.
    Built each time in training mode, where a run is one random draw of dropout and a cache evicting and running it
    again would draw anew beside a figure of the old draw, and past KEEP_FIGURES_UP_TO tokens (memory)."""
    if trace.train or trace.seq_len > KEEP_FIGURES_UP_TO:
        return build()
    return BESIDE.get(trace, key, build)


def get_permutation_check(model_key: str, device: str, changes: tuple[tuple[str, Any], ...], text: str,
                          seed: int) -> position.PermutationResult:
    """The Position page's shuffle proof, computed once per (model, sentence, shuffle)."""
    return CACHE.get(("permutation", model_key, device, changes, text, seed),
                     lambda: position.permutation_check(get_variant(model_key, device, changes), text, seed,
                                                        max_tokens=APP_MAX_TOKENS))


def model_key_of(values: dict[str, Any]) -> str:
    """The model's cache key for these settings; raises the config's ValueError for an impossible custom model."""
    if values["model"] == settings.CUSTOM:
        return settings.config_from(values).to_json()
    return values["model"]


def frame(values: dict[str, Any] | None = None) -> Frame:
    """The model and trace that the settings (default: this session's) describe, from the caches."""
    if values is None:
        if state.get("model") not in model_choices():  # e.g. a checkpoint folder removed while the session was open
            state.put("model", model_choices()[0])
        values = state.store()
    values = dict(values)
    device = resolve_device(values["device"])
    model_key, model, trace, problem, level = values["model"], None, None, "", "info"
    try:
        model_key = model_key_of(values)
        with waiting("Building the model…", ("model", model_key, device)):
            model = get_model(model_key, device)
        if values["text"].strip():
            with waiting("Running the encoder…", ("trace", model_key, device, values["text"], values["train"])):
                trace = get_trace(model_key, device, values["text"], values["train"])
        else:
            problem = "Type a sentence above, or pick an example, to see the encoder at work."
    except ValueError as err:
        problem, level = settings.config_problem(values, err), "error"
    except (RuntimeError, MemoryError) as err:
        _log.warning("forward pass failed: %r", err)
        problem, level = (f"The encoder could not run this input ({type(err).__name__}). "
                          "Try a shorter sentence or a smaller model."), "error"
    return Frame(values=values, config=model.cfg if model is not None else None, model_key=model_key, device=device,
                 model=model, trace=trace, problem=problem, level=level)


def waiting(text: str, key: Hashable) -> contextlib.AbstractContextManager:
    """A spinner while the value under `key` is built; nothing at all when it is cached, which is nearly every run (a
    spinner costs a timer thread and a message to the browser even when it never shows)."""
    return contextlib.nullcontext() if CACHE.peek(key) is not None else st.spinner(text, show_time=True)


def trace_lookup(fr: Frame) -> Callable[[], encoder.Trace]:
    """A function that fetches the frame's trace by its key: for work done later (downloads), holding no tensor."""
    key = fr.trace_key
    return lambda: get_trace(*key)


def get_rollout(fr: Frame) -> torch.Tensor:
    """Attention rollout through every layer of the frame's trace, (L, T, T), computed once per trace."""
    key = fr.trace_key
    return CACHE.get(("rollout", *key), lambda: embeddings.attention_rollout(get_trace(*key).attention))


def need_trace() -> tuple[Frame, encoder.Trace]:
    """The frame and its trace; when there is none, stop this page (the frame above already said why)."""
    fr = frame()
    if fr.trace is None:
        st.stop()
    return fr, fr.trace


def show_problem(fr: Frame) -> None:
    if fr.level == "error":
        st.error(literal(fr.problem), icon=":material/error:")
    else:
        st.info(literal(fr.problem or "Type a sentence above to see the encoder at work."), icon=":material/edit:")


PAGE_FAILED = ("This view ran into a problem it could not show. The sidebar and the other pages still work: change a "
               "setting, or open another page.")


def guard(body: Callable[[], Any]) -> Any:
    """Run a page (or a fragment) so that a failure shows one short message here and breaks nothing else."""
    try:
        return body()
    except Exception:  # Streamlit's stop and rerun are BaseExceptions and pass through
        _log.exception("a page failed")
        st.error(PAGE_FAILED, icon=":material/sentiment_dissatisfied:")
        return None


# What the lesson bar drawn last says (ui/player.py bar), for a fragment's run, which does not redraw it: (on the slide,
# a check of the store against the slide's view); absent without a bar, or where a fragment cannot change what it says.
BAR_SAYS = "lesson-bar: says"


def fragment(body: Callable[[], None]) -> Callable[[], None]:
    """st.fragment that keeps the URL in step with the store and cannot take the session down; when its change takes
    a lesson's view off its slide (or back), the whole page runs, so the lesson bar's "Back to the slide" follows."""
    @st.fragment
    @functools.wraps(body)
    def run() -> None:
        state.sync_url()
        guard(body)
        state.sync_url()
        says = st.session_state.get(BAR_SAYS)  # ui/player.py bar()
        if says is not None and state.fragment_run() and says[1]() != says[0]:
            st.rerun(scope="app")

    return run


def literal(text: str) -> str:
    """Text that Streamlit's Markdown shows as typed: every ASCII punctuation mark backslash-escaped.

    Messages that quote a URL value or a model name go through this, so `**x**` or `[a](javascript:...)`
    in a link stays text (and `:smile:` is no emoji shortcode).
    """
    return "".join("\\" + c if c in _PUNCTUATION else c for c in text)


_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


PAIR_MIN_PX = 640  # two maps side by side, their query labels and one colour bar: as on a 1024 px laptop, sidebar open


def sideways(key: str, min_px: int = PAIR_MIN_PX):
    """A container whose chart keeps at least `min_px` of width: on a narrower screen (a phone) it scrolls sideways
    instead of squeezing two maps, their labels and titles over each other. Static CSS only."""
    st.html(f"<style>.st-key-{key} {{overflow-x: auto;}} .st-key-{key} [data-testid='stElementContainer'] "
            f"{{min-width: {int(min_px)}px;}}</style>")  # plotly takes the width of the element's container
    return st.container(key=key)


def caption(text: str) -> None:
    """An explanatory caption; hidden in presentation mode for clean slides."""
    if not state.get("present"):
        st.caption(text)


def layer_slider(num_layers: int, where: Any = None) -> int:
    """The Layer slider for a model with num_layers; with one layer there is nothing to choose."""
    if num_layers == 1:
        state.put("layer", 0)
        return 0
    return widget("layer", where, hi=num_layers - 1)


def head_select(num_heads: int, where: Any = None, **extra: Any) -> int:
    return widget("head", where, options=range(num_heads), **extra)


keep_new_downloads()  # a file a download click made waits for its browser, even under a class (ui/downloads.py)
return_freed_memory()
# The process's long-lived objects (torch, plotly's validators, pandas: ~270k) move out of the garbage collector's
# view, once, at the first import: a full collection then takes ~0 ms instead of ~150 ms on these 2-core machines.
gc.freeze()
# Python collects its youngest objects every 700 new container objects. A script run makes tens of thousands, so under
# a class (150 students, 2 replicas) each replica collected ~25 times a second, and the objects alive at those moments
# (the run's figures and messages) were promoted until a full collection of ~500k objects came, ~9 times a minute,
# each holding the GIL for 220-280 ms. Every 20,000: ~40 young collections a minute and no full one within a minute;
# p95 1.08-1.85 s in 3 runs before, 0.43-1.54 s in 5 after (benchmarks/RESULTS-serving.md). A full collection still
# comes every 100 young ones, and the caches collect at once when they evict.
gc.set_threshold(20_000, 10, 10)
