"""What every checkpoint family shares: the Family record, a config.json reader that refuses what it does not
read, and the map from a checkpoint's tensors to our parameters that refuses what it does not use."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from ..config import EncoderConfig

# config.json keys that never change an encoder's forward pass: bookkeeping, task heads, generation, training.
HARMLESS = frozenset({
    "_attn_implementation", "_attn_implementation_autoset", "_name_or_path", "architectures", "attn_implementation",
    "bad_words_ids", "begin_suppress_tokens", "bos_token_id", "chunk_size_feed_forward", "classifier_dropout",
    "cls_token_id", "cross_attention_hidden_size", "decoder_start_token_id", "diversity_penalty", "do_sample", "dtype",
    "early_stopping", "encoder_no_repeat_ngram_size", "eos_token_id", "exponential_decay_length_penalty",
    "finetuning_task", "forced_bos_token_id", "forced_eos_token_id", "gradient_checkpointing", "id2label",
    "initializer_range", "label2id", "length_penalty", "mask_token_id", "max_length", "min_length", "model_type",
    "name_or_path", "no_repeat_ngram_size", "num_beam_groups", "num_beams", "num_labels", "num_return_sequences",
    "output_attentions", "output_hidden_states", "output_past", "output_scores", "pad_token_id", "prefix",
    "problem_type", "remove_invalid_values", "repetition_penalty", "return_dict", "return_dict_in_generate",
    "sep_token_id", "suppress_tokens", "task_specific_params", "temperature", "tf_legacy_loss", "tie_encoder_decoder",
    "tie_word_embeddings", "tokenizer_class", "top_k", "top_p", "torch_dtype", "torchscript", "transformers_version",
    "typical_p", "unk_token_id", "use_bfloat16", "use_cache", "xla_device",
})
# Keys that would change the computation if set, each with the one value we implement and why the others are refused.
FIXED: dict[str, tuple[Any, str]] = {
    "is_decoder": (False, "a decoder hides the tokens to the right of each query, and this loader builds encoders, "
                          "which see the whole sentence"),
    "add_cross_attention": (False, "cross-attention reads a second sequence, which this encoder has no input for"),
    "is_encoder_decoder": (False, "an encoder-decoder model is more than the encoder this loader builds"),
    "pruned_heads": ({}, "pruned layers have fewer heads than the others, and every layer here has num_heads"),
}
ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}


class ConfigKeys:
    """Reads a config.json dict key by key; done() refuses every key that was neither read nor known harmless."""

    def __init__(self, hf: dict[str, Any], label: str):
        self.hf, self.label, self.read = hf, label, set()

    def need(self, key: str) -> Any:
        """The value of a key the config cannot do without."""
        self.read.add(key)
        if key not in self.hf:
            raise ValueError(f"config.json lacks the key {key!r} that a {self.label} config needs.")
        return self.hf[key]

    def get(self, key: str, default: Any) -> Any:
        """The value of a key, or the default transformers uses when it is absent."""
        self.read.add(key)
        return self.hf.get(key, default)

    def whole(self, key: str, default: int, lo: int, hi: int, why: str) -> int:
        """A whole-number key within [lo, hi]; `why` says what it is for."""
        value = self.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise ValueError(f"config.json has {key}={value!r}; {why}, so it must be a whole number from {lo} to {hi}.")
        return value

    def fixed(self, key: str, allowed: Any, why: str) -> None:
        """Refuse a key whose value is not the one we implement (absent counts as `allowed`)."""
        self.read.add(key)
        value = self.hf.get(key, allowed)
        if value != allowed and not (allowed == {} and not value):
            raise ValueError(f"config.json has {key}={value!r}, which this loader does not implement: {why}.")

    def activation(self, key: str, default: str) -> str:
        """Our name for a transformers activation we compute exactly."""
        act = self.get(key, default)
        if act not in ACTIVATIONS:
            raise ValueError(f"config.json has {key}={act!r}; only 'gelu' and 'relu' (and GELU's tanh form "
                             "'gelu_new') are supported.")
        return ACTIVATIONS[act]

    def done(self, harmless: Iterable[str] = ()) -> None:
        """Refuse keys this family neither read nor knows to leave the computation alone."""
        for key, (allowed, why) in FIXED.items():
            self.fixed(key, allowed, why)
        unknown = sorted(set(self.hf) - self.read - HARMLESS - set(harmless))
        if unknown:
            names = ", ".join(repr(k) for k in unknown[:5]) + (f" (and {len(unknown) - 5} more)" if len(unknown) > 5 else "")
            raise ValueError(f"config.json has {names}, unknown to the {self.label} loader; a key it does not know "
                             "could change the computation, so the model is not loaded. Remove the key if you are "
                             "sure it has no effect.")


Tensors = dict[str, tuple[str, ...]]  # our parameter name -> the checkpoint tensors it is made of (stacked on dim 0)


def _same_config(cfg: EncoderConfig, hf: dict[str, Any], weights: dict[str, Tensor]) -> EncoderConfig:
    return cfg


@dataclass(frozen=True)
class Family:
    """One checkpoint family: how to recognise it, read its config.json and name its tensors."""

    name: str  # config.json's model_type
    label: str  # for sentences: "RoBERTa"
    architecture: str  # the class-name stem in config.json's architectures: "Roberta" (RobertaModel, RobertaFor...)
    prefix: str  # where task checkpoints (RobertaForMaskedLM, ...) keep the encoder's tensors: "roberta."
    heads: tuple[str, ...]  # tensor-name prefixes of task heads (pooler, LM head, classifier): not the encoder
    read_config: Callable[[dict[str, Any]], EncoderConfig]
    tensors: Callable[[EncoderConfig], Tensors]
    # a last look at the weights that may refine the config (DistilBERT: is its position table the sinusoid?)
    settle: Callable[[EncoderConfig, dict[str, Any], dict[str, Tensor]], EncoderConfig] = field(default=_same_config)

    def names_architecture(self, name: str) -> bool:
        """Whether a class name in config.json's architectures is this family's model or a task model on it."""
        rest = name.removeprefix(self.architecture)
        return rest != name and (rest == "Model" or rest.startswith("For"))


def linear(ours: str, theirs: str, bias: bool) -> Tensors:
    """A Linear's or LayerNorm's weight (and bias) under our name and theirs."""
    return stacked(ours, (theirs,), bias)


def stacked(ours: str, theirs: Iterable[str], bias: bool) -> Tensors:
    """One Linear of ours made of several of theirs stacked on the output axis (W_Q, W_K, W_V -> qkv)."""
    theirs = tuple(theirs)
    kinds = ("weight", "bias") if bias else ("weight",)
    return {f"{ours}.{k}": tuple(f"{t}.{k}" for t in theirs) for k in kinds}


def layer(dst: str, src: str, names: dict[str, str | tuple[str, ...]], bias: bool) -> Tensors:
    """One layer's tensors: `names` gives their name (after `src`) for each of our modules qkv, out, ln1, w1, w2, ln2.

    qkv may be three names (W_Q, W_K, W_V, stacked into our fused matrix) or one already fused; a module that is
    absent from `names` (ModernBERT's first ln1) has no tensors.
    """
    ours = {"qkv": "attn.qkv", "out": "attn.out", "ln1": "ln1", "w1": "ffn.w1", "w2": "ffn.w2", "ln2": "ln2"}
    tensors: Tensors = {}
    for key, theirs in names.items():
        parts = (theirs,) if isinstance(theirs, str) else theirs
        tensors |= stacked(dst + ours[key], (src + t for t in parts), bias)
    return tensors


def _listing(names: list[str]) -> str:
    more = f" (and {len(names) - 3} more)" if len(names) > 3 else ""
    return ", ".join(names[:3]) + more


def strip_prefix(names: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The checkpoint's names with a task model's prefix taken off (bert.embeddings... -> embeddings...)."""
    out: dict[str, Any] = {}
    for name, value in names.items():
        short = name.removeprefix(prefix) if prefix else name
        if short in out:
            raise ValueError(f"model.safetensors holds both {name} and {short}: two copies of one tensor; keep one.")
        out[short] = value
    return out


# Buffers that older transformers versions saved with the weights, and the only values we accept for them.
_BUFFERS: dict[str, Callable[[Tensor], bool]] = {
    "embeddings.position_ids": lambda t: torch.equal(t.reshape(-1), torch.arange(t.numel(), dtype=t.dtype)),
    "embeddings.token_type_ids": lambda t: not t.any(),
}


def check_names(family: Family, cfg: EncoderConfig, names: Iterable[str]) -> tuple[list[str], list[str]]:
    """(the checkpoint tensors our parameters are made of, the task-head tensors set aside), from names alone.

    Every tensor the config implies must be there, and every tensor must be one of them, a task head or a
    buffer saved by older versions; anything else is named in a ValueError, since it means the checkpoint is
    not the model config.json describes.
    """
    names = list(names)
    wanted = list(dict.fromkeys(src for sources in family.tensors(cfg).values() for src in sources))
    present = set(names)
    missing = [name for name in wanted if name not in present]
    if missing:
        raise ValueError(f"model.safetensors lacks {_listing(missing)}.")
    heads = [name for name in names if name.startswith(family.heads)]
    known = set(wanted) | set(heads) | set(_BUFFERS)
    unused = [name for name in names if name not in known]
    if unused:
        raise ValueError(
            f"model.safetensors has tensors that a {family.label} encoder with this config.json does not use: "
            f"{_listing(unused)}. Check num_hidden_layers and the other sizes in config.json, or remove those tensors."
        )
    return wanted, heads


def state_dict(family: Family, cfg: EncoderConfig, weights: dict[str, Tensor]) -> tuple[dict[str, Tensor], list[str]]:
    """Our parameters made of a checkpoint's tensors, and the task-head tensors set aside (see check_names)."""
    weights = strip_prefix(weights, family.prefix)
    _, heads = check_names(family, cfg, weights)
    for name, ok in _BUFFERS.items():
        if name in weights and not ok(weights[name]):
            raise ValueError(f"model.safetensors has a {name} buffer with unusual values; transformers would use "
                             "them as the ids, which this loader does not; remove the tensor.")
    state = {}
    for ours, sources in family.tensors(cfg).items():
        parts = [weights[s] for s in sources]
        if len({p.shape[1:] for p in parts}) > 1:
            shapes = ", ".join(f"{s} {tuple(p.shape)}" for s, p in zip(sources, parts, strict=True))
            raise ValueError(f"Shape mismatch for {ours}: its parts do not fit together ({shapes}).")
        state[ours] = parts[0] if len(parts) == 1 else torch.cat(parts)
    return state, heads
