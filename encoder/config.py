"""EncoderConfig: one frozen description of an encoder, shared by the model, the diagram, the caches and the URL."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

ACTIVATIONS = ("relu", "gelu")
NORMS = ("post", "pre")
POSITIONALS = ("sinusoidal", "learned", "none")

# Hard limits that keep a single model within reach of a laptop; the resource guard
# (ui.resources) applies a finer, memory-based budget on top.
LIMITS = {
    "d_model": (8, 4096),
    "num_heads": (1, 64),
    "d_ff": (1, 16384),
    "num_layers": (1, 48),
    "max_len": (2, 4096),
    "vocab_size": (8, 250_000),
    "type_vocab_size": (0, 16),
}
# layer_norm_eps must lie in (0, 0.1]: 1e-12 is BERT's, 1e-6 Keras' LayerNormalization in seed 002, 1e-5 PyTorch's.
LAYER_NORM_EPS_MAX = 0.1


@dataclass(frozen=True)
class EncoderConfig:
    """Hyperparameters of a Transformer encoder; defaults are the base model of "Attention Is All You Need"."""

    d_model: int = 512
    num_heads: int = 8
    d_ff: int = 2048
    num_layers: int = 6
    dropout: float = 0.1
    activation: str = "relu"
    norm: str = "post"
    positional: str = "sinusoidal"
    layer_norm_eps: float = 1e-5
    max_len: int = 512
    vocab_size: int = 30522
    seed: int = 0
    final_norm: bool = False  # a LayerNorm after the stack, as Pre-LN stacks usually have
    embed_norm: bool = False  # a LayerNorm on the embedding sum, as BERT has
    type_vocab_size: int = 0  # BERT's segment (token type) embeddings; 0 = none

    def __post_init__(self) -> None:
        self.validate()

    @property
    def d_head(self) -> int:
        return self.d_model // self.num_heads

    def validate(self) -> None:
        """Raise ValueError naming the field and the fix when a value is impossible."""
        for name, (lo, hi) in LIMITS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name}={value!r} must be a whole number between {lo} and {hi}.")
            if not lo <= value <= hi:
                raise ValueError(f"{name}={value} is out of range; choose a value between {lo} and {hi}.")
        if self.d_model % self.num_heads:
            lower = self.d_model - self.d_model % self.num_heads
            lo, hi = LIMITS["d_model"]
            options = [d for d in (lower, lower + self.num_heads) if lo <= d <= hi]
            hint = "try d_model=" + " or ".join(map(str, options)) if options else "try another d_model"
            heads = [h for h in range(1, min(self.d_model, 64) + 1) if self.d_model % h == 0]
            near = min(heads, key=lambda h: abs(h - self.num_heads))
            raise ValueError(
                f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}; "
                f"{hint}, or num_heads={near}."
            )
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)):
            raise ValueError(f"dropout={self.dropout!r} must be a number in [0, 1).")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout={self.dropout} must be at least 0 and below 1; try 0.1.")
        if isinstance(self.layer_norm_eps, bool) or not isinstance(self.layer_norm_eps, (int, float)):
            raise ValueError(f"layer_norm_eps={self.layer_norm_eps!r} must be a small positive number such as 1e-5.")
        if not 0.0 < self.layer_norm_eps <= LAYER_NORM_EPS_MAX:  # also false for NaN
            raise ValueError(
                f"layer_norm_eps={self.layer_norm_eps} must be positive and at most {LAYER_NORM_EPS_MAX}; "
                "try 1e-5 (or 1e-6, as Keras)."
            )
        for name, allowed in (("activation", ACTIVATIONS), ("norm", NORMS), ("positional", POSITIONALS)):
            if getattr(self, name) not in allowed:
                choices = ", ".join(repr(a) for a in allowed)
                raise ValueError(f"{name}={getattr(self, name)!r} is not supported; choose one of {choices}.")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**63:
            raise ValueError(f"seed={self.seed!r} must be a whole number from 0 to 2**63 - 1.")
        for name in ("final_norm", "embed_norm"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r} must be true or false.")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict, like Keras' get_config()."""
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EncoderConfig:
        """Inverse of to_dict(); unknown keys are rejected by name."""
        if not isinstance(data, dict):
            raise ValueError(f"An encoder config must be a mapping of field names to values, not {type(data).__name__}.")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"Unknown config key(s) {', '.join(map(repr, unknown))}; valid keys are {', '.join(sorted(known))}."
            )
        return cls(**data)

    def replace(self, **changes: Any) -> EncoderConfig:
        return dataclasses.replace(self, **changes)


def pretrained_config(hf: dict[str, Any]) -> EncoderConfig:
    """EncoderConfig for a BERT-style Hugging Face config.json (post-LN, learned positions, embedding LayerNorm)."""
    act = hf.get("hidden_act", "gelu")
    if act not in ("gelu", "relu"):
        raise ValueError(f"config.json has hidden_act={act!r}; only 'gelu' and 'relu' are supported.")
    try:
        return EncoderConfig(
            d_model=hf["hidden_size"],
            num_heads=hf["num_attention_heads"],
            d_ff=hf["intermediate_size"],
            num_layers=hf["num_hidden_layers"],
            dropout=float(hf.get("hidden_dropout_prob", 0.1)),
            activation=act,
            norm="post",
            positional="learned",
            layer_norm_eps=float(hf.get("layer_norm_eps", 1e-12)),
            max_len=hf.get("max_position_embeddings", 512),
            vocab_size=hf["vocab_size"],
            embed_norm=True,
            type_vocab_size=hf.get("type_vocab_size", 2),
        )
    except KeyError as err:
        raise ValueError(f"config.json lacks the key {err.args[0]!r} that a BERT-style config needs.") from None
