"""File names and plotly export settings: every download and PNG names the model, the view and the sentence."""

from __future__ import annotations

import re
import unicodedata

from ..config import EncoderConfig
from ..trace import Trace

PRETRAINED_TAG = "all-MiniLM-L6-v2"


def safe_filename(name: str, limit: int = 80) -> str:
    """Only [A-Za-z0-9_-], at most `limit` characters, never empty."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", name)
    name = re.sub(r"-{2,}", "-", name).strip("-_")[:limit].rstrip("-_")
    return name or "figure"


def png_config(filename: str) -> dict:
    """Plotly config whose camera button saves a 3x PNG under `filename`."""
    return {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 3, "filename": safe_filename(filename)}}


def model_tag(config: EncoderConfig, model_key: str | None = None) -> str:
    """A short name of the model for file names: the pretrained model's name, a checkpoint's folder, or the
    custom config's main choices (custom-post-relu-d64-h4-L2)."""
    if model_key == "pretrained":
        return PRETRAINED_TAG
    if model_key and model_key.startswith("ckpt:"):
        return safe_filename(model_key.removeprefix("ckpt:"), 30)
    if model_key is None and config.embed_norm:
        return f"bert-L{config.num_layers}-d{config.d_model}"
    ffn = config.activation if config.ffn == "plain" else config.ffn  # GeGLU and SwiGLU bring their own activation
    extra = ("-rope" if config.positional == "rotary" else "") + (f"-w{config.window}" if config.window else "")
    return f"custom-{config.norm}-{ffn}-d{config.d_model}-h{config.num_heads}-L{config.num_layers}{extra}"


def sentence_words(trace: Trace) -> str:
    """The sentence's first four words for a file name, lower-case ASCII: the-cat-sat-on."""
    ascii_text = unicodedata.normalize("NFKD", " ".join(trace.text.split()[:200])).encode("ascii", "ignore").decode()
    return "-".join([w for w in (re.sub(r"[^a-z0-9]+", "", w) for w in ascii_text.lower().split()) if w][:4])


def export_name(trace: Trace, *parts: object, model: str | None = None) -> str:
    """File name: the model, the view and its layer/head (`parts`) and the sentence's first words, e.g.
    all-MiniLM-L6-v2_attention_L2_H5_the-cat-sat-on. `model` defaults to model_tag(trace.config).
    (ui/heatmap.js `fileName` joins the same pieces in the browser.)"""
    tag = model_tag(trace.config) if model is None else model
    names = [safe_filename(str(p), 40) for p in (tag, *parts)]
    return safe_filename("_".join(p for p in [*names, sentence_words(trace)] if p), 140)

