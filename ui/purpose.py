"""Streamlit glue for the pages on what the encoder is for (issue 13): sentence lists, the knock-out setting, and
cached, budget-checked forward passes with knock-outs or a token limit.

Tensors live only in ui.caches.CACHE under key tuples; a session keeps its settings. The callbacks here change the
store (ui.state.put) and hold no tensors, so the pages that use them keep nothing alive between runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import streamlit as st
from torch import Tensor

import encoder
from encoder.analysis import embeddings
from encoder.model import SUBLAYERS, check_ablate

from . import Frame, get_trace, get_variant, settings, state
from .caches import CACHE
from .resources import app_tokens, check_budget

MAX_SENTENCES = 8  # the current sentence and up to seven more
SENTENCE_TOKENS = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2: the pretrained vectors match it
Knocks = frozenset[tuple[int, int | str]]

# Example sets for the Sentence embeddings page: the first goes into the Sentence box, the rest into the list.
SENTENCE_SETS: dict[str, tuple[str, ...]] = {
    "Paraphrase, negation, unrelated": (
        "A man is playing guitar.", "Someone plays an instrument.", "A man is not playing guitar.",
        "The stock market fell.",
    ),
    "Same words, other order": (
        "The dog bit the man.", "The man bit the dog.", "A dog attacked a man.", "Dogs make loyal pets.",
    ),
    "Coreference pair": (settings.DEFAULT_SENTENCE, *settings.MORE_SENTENCES),  # the page's default
    "Two topics": (
        "The cat sat on the mat.", "A kitten was sleeping on the rug.", "Stocks rallied after the earnings report.",
        "The central bank raised interest rates.",
    ),
}
SET_QUESTIONS = {
    "Paraphrase, negation, unrelated": "Is the paraphrase (2) closer to sentence 1 than the stock market (4)? "
                                       "And the negation (3), which means the opposite?",
    "Same words, other order": "Sentences 1 and 2 use the same words with opposite meanings: how close are they, "
                               "next to the paraphrase (3)?",
    "Coreference pair": "One word differs between 1 and 2 (tired / wide): does the vector notice?",
    "Two topics": "Do the pets (1, 2) and the finance sentences (3, 4) form two blocks?",
}


# ------------------------------------------------------------------------------------------------ sentences
def sentence_list(values: dict[str, Any]) -> tuple[list[str], int]:
    """The current sentence, then the non-blank lines of `sentences`, at most MAX_SENTENCES; and how many were left out."""
    more = [line.strip() for line in values["sentences"].splitlines() if line.strip()]
    first = [values["text"]] if values["text"].strip() else []
    room = MAX_SENTENCES - len(first)
    return first + more[:room], max(0, len(more) - room)


def use_sentence_set(name: str) -> None:
    """Button callback: one example set into the Sentence box and the list."""
    first, *rest = SENTENCE_SETS[name]
    state.put("text", first)
    state.put("sentences", "\n".join(rest))


def sentence_limit(fr: Frame) -> int | None:
    """Tokens per sentence for sentence vectors: the pretrained model is read as sentence-transformers reads it."""
    if fr.values["model"] == settings.PRETRAINED and fr.config is not None:
        return min(SENTENCE_TOKENS, fr.config.max_len)
    return None


def model_kind(fr: Frame) -> str:
    """'pretrained', 'checkpoint' or 'random': what the similarities on screen can mean."""
    if fr.values["model"] == settings.PRETRAINED:
        return "pretrained"
    return "random" if fr.values["model"] == settings.CUSTOM else "checkpoint"


# -------------------------------------------------------------------------------------------------- knock-outs
def ablate_code(item: tuple[int, int | str]) -> str:
    """(3, 1) -> "3.1", (4, "attn") -> "4.attn": the form the URL and the multiselect use."""
    return f"{item[0]}.{item[1]}"


def ablate_label(code: str) -> str:
    layer, _, what = code.partition(".")
    if what == "attn":
        return f"L{layer} attention (all heads)"
    if what == "ffn":
        return f"L{layer} FFN"
    return f"L{layer} H{what}"


def _order(item: tuple[int, int | str]) -> tuple[int, int]:
    """Layer, then heads in order, then the whole attention, then the FFN."""
    what = item[1]
    return item[0], what if isinstance(what, int) else 10_000 + SUBLAYERS.index(what)


def ablate_options(cfg: encoder.EncoderConfig) -> list[str]:
    """Every knock-out this model allows, in layer order: each head, the whole attention, the FFN."""
    return [ablate_code((layer, what)) for layer in range(cfg.num_layers)
            for what in (*range(cfg.num_heads), *SUBLAYERS)]


def ablate_codes(items: Iterable[tuple[int, int | str]]) -> list[str]:
    """The knock-outs' codes in layer order."""
    return [ablate_code(i) for i in sorted(set(items), key=_order)]


def format_ablate(items: Iterable[tuple[int, int | str]]) -> str:
    """The setting's text: codes in layer order, comma-separated ("" for none)."""
    return ",".join(ablate_codes(items))


def parse_ablate(text: str, cfg: encoder.EncoderConfig) -> tuple[Knocks, list[str]]:
    """The knock-outs in the setting's text that this model has; a sentence for each part that was ignored."""
    items: set[tuple[int, int | str]] = set()
    ignored = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            items |= check_ablate(cfg, [_item(part)])
        except ValueError:
            ignored.append(part)
    problems = []
    if ignored:
        shown = ", ".join(repr(p if len(p) <= 20 else p[:19] + "…") for p in ignored[:3])
        more = f" and {len(ignored) - 3} more" if len(ignored) > 3 else ""
        problems.append(f"Ignored the knock-out {shown}{more}: this model has layers 0 to {cfg.num_layers - 1} and "
                        f"heads 0 to {cfg.num_heads - 1}; write layer.head, layer.attn or layer.ffn (e.g. "
                        f"{example_knockout(cfg)}).")
    return frozenset(items), problems


def example_knockout(cfg: encoder.EncoderConfig) -> str:
    """Layer 3 head 1 (in the pretrained model it links "it" to "animal"), or the nearest this model has."""
    return ablate_code((min(3, cfg.num_layers - 1), min(1, cfg.num_heads - 1)))


def commit_ablate(wkey: str) -> None:
    """The multiselect's callback: its choice (codes from ablate_options), in canonical order, into the store."""
    state.put("ablate", format_ablate(_item(code) for code in st.session_state.get(wkey) or []))


def _item(code: str) -> tuple[int, int | str]:
    """"3.1" -> (3, 1), "4.attn" -> (4, "attn"); ValueError for anything else."""
    layer, _, what = code.partition(".")
    return int(layer), what if what in SUBLAYERS else int(what)


def commit_words(wkey: str, setting: str) -> None:
    """A token multiselect's callback: the chosen tokens, space-separated, into the store (tokens hold no spaces)."""
    state.put(setting, " ".join(st.session_state.get(wkey) or []))


# ------------------------------------------------------------------------------------------- forward passes
def _model(fr: Frame, changes: tuple[tuple[str, Any], ...]) -> encoder.Encoder:
    model = get_variant(fr.model_key, fr.device, changes)
    check_budget(model.cfg)  # a checkpoint or variant may not have been checked when it was built
    return model


def get_run(fr: Frame, text: str, ablate: Knocks = frozenset(), max_tokens: int | None = None) -> encoder.Trace:
    """The frame's model on `text` with knock-outs and a token limit: one cached forward pass per key."""
    if not ablate and max_tokens is None:
        return get_trace(fr.model_key, fr.device, text, fr.values["train"])  # the frame's own cache entry
    key = ("purpose-trace", fr.model_key, fr.device, text, fr.values["train"], format_ablate(ablate), max_tokens)
    model = _model(fr, ())
    return CACHE.get(key, lambda: encoder.run(model, text, max_tokens=max_tokens or app_tokens(model.cfg),
                                              ablate=ablate, train=fr.values["train"]))


@dataclasses.dataclass(frozen=True)
class SentenceVector:
    """One sentence's pooled vector and what it was computed from; small enough to cache by the hundred."""

    vector: Tensor  # (d_model,), L2-normalised
    tokens: tuple[str, ...]
    truncated: bool


def get_sentence_vector(fr: Frame, text: str, pool: str, *, changes: tuple[tuple[str, Any], ...] = (),
                        ablate: Knocks = frozenset()) -> SentenceVector:
    """`text`'s sentence vector under the frame's model (or a variant of it); the trace itself is not kept."""
    limit = sentence_limit(fr)

    def compute() -> SentenceVector:
        model = _model(fr, changes)
        trace = encoder.run(model, text, max_tokens=limit or app_tokens(model.cfg), ablate=ablate,
                            train=fr.values["train"])
        vector = embeddings.sentence_embedding(trace, pool)
        return SentenceVector(vector.detach().clone(), tuple(trace.tokens), trace.truncated)  # a copy: no view of the trace

    key = ("sentence-vector", fr.model_key, fr.device, changes, text, fr.values["train"], pool, limit,
           format_ablate(ablate))
    return CACHE.get(key, compute)


def get_trajectories(fr: Frame) -> tuple[Tensor, Tensor]:
    """The frame's trace in one 2-D PCA: (points (depth, seq, 2), shares (2,)), once per trace (an SVD of all the
    layers' states: ~0.3 s at 512 tokens on a busy 2-core machine, so a highlight change must not redo it)."""
    key = ("trajectories", *fr.trace_key)
    return CACHE.get(key, lambda: embeddings.trajectories(fr.trace))
