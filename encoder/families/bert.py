"""BERT and the families that keep its tensor names: RoBERTa, XLM-RoBERTa, ELECTRA and ALBERT.

All are Post-LN encoders with learned absolute positions, token types and a LayerNorm on the embeddings.
RoBERTa and XLM-RoBERTa count positions from pad_token_id + 1; ELECTRA's embeddings may be narrower than its
layers, with a Linear between; ALBERT has narrow embeddings too and one layer applied num_hidden_layers times.
"""

from __future__ import annotations

from typing import Any

from ..config import EncoderConfig
from ._base import ConfigKeys, Family, Tensors, layer, linear

EMBEDDINGS = {"tok": "word_embeddings", "pos": "position_embeddings", "seg": "token_type_embeddings"}
# Our layer modules -> BERT's names inside encoder.layer.<i>. and ALBERT's inside its one shared layer.
BERT_LAYER = {"qkv": tuple(f"attention.self.{p}" for p in ("query", "key", "value")),
              "out": "attention.output.dense", "ln1": "attention.output.LayerNorm", "w1": "intermediate.dense",
              "w2": "output.dense", "ln2": "output.LayerNorm"}
ALBERT_LAYER = {"qkv": tuple(f"attention.{p}" for p in ("query", "key", "value")), "out": "attention.dense",
                "ln1": "attention.LayerNorm", "w1": "ffn", "w2": "ffn_output", "ln2": "full_layer_layer_norm"}


def bert_like_config(hf: dict[str, Any], label: str, *, offset: bool = False, projected: bool = False,
                     albert: bool = False, harmless: tuple[str, ...] = ()) -> EncoderConfig:
    """EncoderConfig of a BERT-named config.json; every key is read, known harmless or refused."""
    keys = ConfigKeys(hf, label)
    act = keys.activation("hidden_act", "gelu_new" if albert else "gelu")
    d_model = keys.need("hidden_size")
    sizes = dict(num_heads=keys.need("num_attention_heads"), d_ff=keys.need("intermediate_size"),
                 num_layers=keys.need("num_hidden_layers"), vocab_size=keys.need("vocab_size"))
    keys.fixed("position_embedding_type", "absolute", "relative position scores are not implemented; only "
               "learned absolute positions ('absolute') are")
    keys.get("attention_probs_dropout_prob", 0.1)  # dropout: no effect on an inference pass
    positions = keys.whole("max_position_embeddings", 512, 2, 8192 + 16, "it sizes the position table")
    pos_offset = 0
    if offset:  # RoBERTa: position ids start at padding_idx + 1 (fairseq's convention)
        pos_offset = keys.whole("pad_token_id", 1, 0, 15, "RoBERTa's positions start at pad_token_id + 1") + 1
    d_embed = 0
    if projected or albert:
        width = keys.whole("embedding_size", 128, 1, 4096, "it is the width of the embeddings")
        # ELECTRA projects only when the widths differ; ALBERT always has its embedding_hidden_mapping_in
        d_embed = width if albert or width != d_model else 0
    if albert:
        for key, why in (("num_hidden_groups", "groups of layers with weights of their own"),
                         ("inner_group_num", "several different layers inside the shared group")):
            keys.fixed(key, 1, f"this loader maps ALBERT's one shared layer, not {why}")
        # Keys of the original TensorFlow ALBERT that albert-base-v2's config.json still carries; transformers
        # reads none of them, so only the values of that plain model are accepted.
        for key, plain in (("down_scale_factor", 1), ("gap_size", 0), ("net_structure_type", 0), ("num_memory_blocks", 0)):
            keys.fixed(key, plain, "transformers' ALBERT ignores it, so its effect in the original model is unknown here")
    dropout = float(keys.get("hidden_dropout_prob", 0.0 if albert else 0.1))
    eps = float(keys.get("layer_norm_eps", 1e-12))
    types = keys.get("type_vocab_size", 2)
    keys.done(harmless)
    return EncoderConfig(
        d_model=d_model,
        **sizes,
        dropout=dropout,
        activation=act,
        norm="post",
        positional="learned",
        layer_norm_eps=eps,
        max_len=positions - pos_offset,
        embed_norm=True,
        type_vocab_size=types,
        pos_offset=pos_offset,
        d_embed=d_embed,
        share_layers=albert,
    )


def _embeddings(cfg: EncoderConfig) -> Tensors:
    names: Tensors = {f"embed.{ours}.weight": (f"embeddings.{theirs}.weight",) for ours, theirs in EMBEDDINGS.items()}
    if not cfg.type_vocab_size:
        del names["embed.seg.weight"]
    return names | linear("embed.ln", "embeddings.LayerNorm", True)


def bert_tensors(cfg: EncoderConfig) -> Tensors:
    """Our parameter -> BERT's tensors (q, k, v are stacked into our fused qkv)."""
    names = _embeddings(cfg)
    if cfg.d_embed:
        names |= linear("embed.proj", "embeddings_project", True)  # ELECTRA
    for i in range(cfg.num_layers):
        names |= layer(f"layers.{i}.", f"encoder.layer.{i}.", BERT_LAYER, True)
    return names


def albert_tensors(cfg: EncoderConfig) -> Tensors:
    """Our parameter -> ALBERT's tensors: every layer of ours reads the one shared layer."""
    names = _embeddings(cfg) | linear("embed.proj", "encoder.embedding_hidden_mapping_in", True)
    for i in range(cfg.num_layers):
        names |= layer(f"layers.{i}.", "encoder.albert_layer_groups.0.albert_layers.0.", ALBERT_LAYER, True)
    return names


TASK_HEADS = ("classifier.", "qa_outputs.")

BERT = Family("bert", "BERT", "Bert", "bert.", ("pooler.", "cls.", *TASK_HEADS),
              lambda hf: bert_like_config(hf, "BERT"), bert_tensors)
ROBERTA = Family("roberta", "RoBERTa", "Roberta", "roberta.", ("pooler.", "lm_head.", *TASK_HEADS),
                 lambda hf: bert_like_config(hf, "RoBERTa", offset=True), bert_tensors)
XLM_ROBERTA = Family("xlm-roberta", "XLM-RoBERTa", "XLMRoberta", "roberta.", ("pooler.", "lm_head.", *TASK_HEADS),
                     lambda hf: bert_like_config(hf, "XLM-RoBERTa", offset=True), bert_tensors)
ELECTRA = Family(
    "electra", "ELECTRA", "Electra", "electra.",
    ("generator_predictions.", "generator_lm_head.", "discriminator_predictions.", "sequence_summary.", *TASK_HEADS),
    lambda hf: bert_like_config(hf, "ELECTRA", projected=True, harmless=(
        "summary_type", "summary_use_proj", "summary_activation", "summary_last_dropout", "summary_proj_to_labels")),
    bert_tensors,
)
ALBERT = Family("albert", "ALBERT", "Albert", "albert.", ("pooler.", "predictions.", "sop_classifier.", *TASK_HEADS),
                lambda hf: bert_like_config(hf, "ALBERT", albert=True, harmless=("classifier_dropout_prob",)),
                albert_tensors)
