"""DistilBERT: a Post-LN BERT with its own tensor names, no token types and, optionally, sinusoidal positions."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..config import EncoderConfig
from ..model import sinusoidal_table
from ._base import ConfigKeys, Family, Tensors, layer, linear

LAYER_NORM_EPS = 1e-12  # fixed in DistilBERT's code, not in its config
# Our layer modules -> DistilBERT's names inside transformer.layer.<i>.
LAYER = {"qkv": tuple(f"attention.{p}_lin" for p in "qkv"), "out": "attention.out_lin", "ln1": "sa_layer_norm",
         "w1": "ffn.lin1", "w2": "ffn.lin2", "ln2": "output_layer_norm"}


def distilbert_config(hf: dict[str, Any]) -> EncoderConfig:
    """EncoderConfig of a DistilBERT config.json; every key is read, known harmless or refused."""
    keys = ConfigKeys(hf, "DistilBERT")
    act = keys.activation("activation", "gelu")
    d_model = keys.need("dim")
    sizes = dict(num_heads=keys.need("n_heads"), d_ff=keys.need("hidden_dim"), num_layers=keys.need("n_layers"),
                 vocab_size=keys.need("vocab_size"))
    keys.get("sinusoidal_pos_embds", False)  # the table is in the checkpoint either way; settle() looks at it
    keys.get("attention_dropout", 0.1)
    dropout, max_len = float(keys.get("dropout", 0.1)), keys.get("max_position_embeddings", 512)
    keys.done(("qa_dropout", "seq_classif_dropout", "tie_weights_"))
    return EncoderConfig(
        d_model=d_model, **sizes, dropout=dropout, activation=act, norm="post", positional="learned",
        layer_norm_eps=LAYER_NORM_EPS, max_len=max_len, embed_norm=True, type_vocab_size=0,
    )


def distilbert_tensors(cfg: EncoderConfig) -> Tensors:
    """Our parameter -> DistilBERT's tensors (q_lin, k_lin, v_lin stacked into our fused qkv)."""
    names: Tensors = {"embed.tok.weight": ("embeddings.word_embeddings.weight",)}
    if cfg.positional == "learned":
        names["embed.pos.weight"] = ("embeddings.position_embeddings.weight",)
    names |= linear("embed.ln", "embeddings.LayerNorm", True)
    for i in range(cfg.num_layers):
        names |= layer(f"layers.{i}.", f"transformer.layer.{i}.", LAYER, True)
    return names


def distilbert_settle(cfg: EncoderConfig, hf: dict[str, Any], weights: dict[str, Tensor]) -> EncoderConfig:
    """Sinusoidal positions when config.json says so and the saved table is the sinusoid, else the saved table.

    transformers adds the saved table either way; when it equals PE(pos, i) of the paper we compute that
    formula instead, so the app can say "sinusoidal", and drop the tensor (it is the same numbers).
    """
    table = weights.get("embeddings.position_embeddings.weight", weights.get("distilbert.embeddings.position_embeddings.weight"))
    if not hf.get("sinusoidal_pos_embds") or table is None or table.shape != (cfg.max_len, cfg.d_model):
        return cfg
    if not torch.allclose(table.float(), sinusoidal_table(cfg.max_len, cfg.d_model), rtol=0, atol=1e-6):
        return cfg
    for name in ("embeddings.position_embeddings.weight", "distilbert.embeddings.position_embeddings.weight"):
        weights.pop(name, None)
    return cfg.replace(positional="sinusoidal")


DISTILBERT = Family(
    "distilbert", "DistilBERT", "DistilBert", "distilbert.",
    ("vocab_transform.", "vocab_layer_norm.", "vocab_projector.", "pre_classifier.", "classifier.", "qa_outputs."),
    distilbert_config, distilbert_tensors, distilbert_settle,
)
