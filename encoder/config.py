"""EncoderConfig: one frozen description of an encoder, shared by the model, the diagram, the caches and the URL."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

ACTIVATIONS = ("relu", "gelu", "gelu_tanh")  # gelu_tanh: GELU's tanh approximation (ALBERT's gelu_new)
NORMS = ("post", "pre")
POSITIONALS = ("sinusoidal", "learned", "rotary", "none")
FFNS = ("plain", "geglu", "swiglu")  # plain: act(x W_1) W_2; geglu/swiglu: (GELU/SiLU(x W) * x V) W_2 (Shazeer 2020)

# Hard limits that keep a single model within reach of a laptop; the resource guard
# (ui.resources) applies a finer, memory-based budget on top.
LIMITS = {
    "d_model": (8, 4096),
    "num_heads": (1, 64),
    "d_ff": (1, 16384),
    "num_layers": (1, 48),
    "max_len": (2, 8192),  # ModernBERT reads 8192 tokens
    "vocab_size": (8, 300_000),  # XLM-RoBERTa has 250002
    "type_vocab_size": (0, 16),
    "pos_offset": (0, 16),
    "window": (0, 8192),
    "global_every": (0, 48),
}
EMBED_LIMITS = (8, 4096)  # d_embed, when not 0
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
    # Learned positions start at this row of the table (RoBERTa: pad_token_id + 1 = 2). The row before it is the
    # padding token's: a token whose id is pos_offset - 1 takes that row and is not counted, as RoBERTa does.
    pos_offset: int = 0
    d_embed: int = 0  # 0: embeddings are d_model wide; else this wide, then a Linear to d_model (ELECTRA, ALBERT)
    share_layers: bool = False  # every layer uses one set of weights (ALBERT)
    ffn: str = "plain"  # "plain", "geglu" or "swiglu": see FFNS
    bias: bool = True  # biases in every Linear and LayerNorm; ModernBERT has none
    rope_theta: float = 10000.0  # RoPE's base theta in global layers (RoFormer: 10000; ModernBERT: 160000)
    rope_theta_local: float = 10000.0  # RoPE's theta in sliding-window layers (ModernBERT: 10000)
    # Sliding-window attention: 0 = every token sees every token; w > 0 (even) = a token sees the keys at most w/2
    # positions away, w + 1 tokens with itself, as ModernBERT's local_attention = 128.
    window: int = 0
    global_every: int = 0  # with a window: layers 0, n, 2n, ... attend globally (ModernBERT: 3); 0 = none does
    # Pre-LN layer 0 normalises its attention input; ModernBERT's does not, as its embeddings end in a LayerNorm.
    first_norm1: bool = True

    def __post_init__(self) -> None:
        self.validate()

    @property
    def d_head(self) -> int:
        return self.d_model // self.num_heads

    @property
    def ffn_activation(self) -> str:
        """The nonlinearity the FFN applies: the activation field for plain, GELU for GeGLU, SiLU for SwiGLU."""
        return {"geglu": "gelu", "swiglu": "silu"}.get(self.ffn, self.activation)

    def layer_window(self, layer: int) -> int:
        """The sliding window of `layer` (0 = global attention): ModernBERT's alternation with global_every."""
        if not self.window or (self.global_every and layer % self.global_every == 0):
            return 0
        return self.window

    def layer_theta(self, layer: int) -> float:
        """RoPE's theta in `layer`: rope_theta when it attends globally, rope_theta_local in a window."""
        return self.rope_theta_local if self.layer_window(layer) else self.rope_theta

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
        for name, allowed in (("activation", ACTIVATIONS), ("norm", NORMS), ("positional", POSITIONALS), ("ffn", FFNS)):
            if getattr(self, name) not in allowed:
                choices = ", ".join(repr(a) for a in allowed)
                raise ValueError(f"{name}={getattr(self, name)!r} is not supported; choose one of {choices}.")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**63:
            raise ValueError(f"seed={self.seed!r} must be a whole number from 0 to 2**63 - 1.")
        for name in ("final_norm", "embed_norm", "share_layers", "bias", "first_norm1"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r} must be true or false.")
        self._validate_modern()

    def _validate_modern(self) -> None:
        """The settings of later encoders: positions, embedding width, window, RoPE's theta, layer 0's norm."""
        if self.pos_offset and self.positional != "learned":
            raise ValueError(f"pos_offset={self.pos_offset} shifts a learned position table; "
                             "set positional='learned' or pos_offset=0.")
        lo, hi = EMBED_LIMITS
        if isinstance(self.d_embed, bool) or not isinstance(self.d_embed, int) or not (
                self.d_embed == 0 or lo <= self.d_embed <= hi):
            raise ValueError(f"d_embed={self.d_embed!r} must be 0 (embeddings as wide as d_model) "
                             f"or a whole number between {lo} and {hi}.")
        if self.window % 2:
            raise ValueError(f"window={self.window} must be even: a token sees window/2 positions on each side "
                             f"(ModernBERT: 128); try window={self.window - 1} or {self.window + 1}.")
        if self.window and self.window // 2 >= self.max_len - 1:
            raise ValueError(f"window={self.window} already covers every token of a max_len={self.max_len} "
                             f"sequence; choose a window below {2 * (self.max_len - 1)} or window=0 (global).")
        for name in ("rope_theta", "rope_theta_local"):
            theta = getattr(self, name)
            if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not 1.0 < theta < 1e12:
                raise ValueError(f"{name}={theta!r} must be a number above 1 (RoPE's base: 10000 in RoFormer, "
                                 "160000 in ModernBERT's global layers).")
        if self.positional == "rotary" and self.d_head % 2:
            raise ValueError(f"positional='rotary' turns pairs of dimensions, so d_head = d_model / num_heads must "
                             f"be even; it is {self.d_head} (d_model={self.d_model}, num_heads={self.num_heads}).")
        if not self.first_norm1 and self.norm != "pre":
            raise ValueError("first_norm1=False leaves out layer 0's first LayerNorm, which only Pre-LN may skip "
                             "(its embeddings are normalised already); set norm='pre' or first_norm1=True.")
        if not self.first_norm1 and self.share_layers:
            raise ValueError("share_layers=True needs every layer alike, but first_norm1=False gives layer 0 no "
                             "first LayerNorm; set one of them back.")

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
    """EncoderConfig for a BERT config.json (post-LN, learned positions, embedding LayerNorm); see encoder/families."""
    from .families.bert import BERT  # the families import this module

    return BERT.read_config(hf)
