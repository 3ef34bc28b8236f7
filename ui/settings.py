"""The explorer's settings: widget choices, defaults, and their round trip through the URL's query string.

One table (SETTINGS) says what each setting may hold; the sidebar draws its widgets from it, the URL is
parsed against it, and a shared link reopens exactly the same view. Bad URL values fall back to defaults
with a sentence saying which and why: a mangled link never breaks the app.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from encoder.config import EncoderConfig

PRETRAINED = "pretrained"
CUSTOM = "custom"
CHECKPOINT_PREFIX = "ckpt:"
PRETRAINED_LABEL = "all-MiniLM-L6-v2 (pretrained)"
CUSTOM_LABEL = "Custom (random init)"

DEFAULT_SENTENCE = "The animal didn't cross the street because it was too tired."
SECOND_SENTENCE = "The animal didn't cross the street because it was too wide."
EXAMPLES = {
    "Coreference (tired → animal)": "The animal didn't cross the street because it was too tired.",
    "Coreference (wide → street)": "The animal didn't cross the street because it was too wide.",
    "Masked word": "The cat sat on the [MASK] and purred.",
    "Capital city": "Paris is the capital of [MASK].",
    "Long sentence": (
        "Transformers read every word of a sentence at once, and self-attention lets each word gather "
        "information from all the others, which is why the encoder is called bidirectional."
    ),
}
MAX_TEXT_CHARS = 20_000  # longer input is cut before tokenizing; the model truncates at max_len tokens anyway


@dataclass(frozen=True)
class Setting:
    key: str
    default: Any
    kind: type  # int, float, str or bool
    options: tuple | None = None  # allowed values, or None for a range
    lo: float | None = None
    hi: float | None = None

    def parse(self, raw: str) -> Any:
        """Convert one URL value, or raise ValueError saying what is allowed."""
        if self.kind is bool:
            low = raw.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError("expected true or false")
        if self.kind is str:
            value: Any = raw
        else:
            try:
                number = float(raw)
            except ValueError:
                raise ValueError("expected a number") from None
            if number != number or number in (float("inf"), float("-inf")):
                raise ValueError("expected a finite number")
            if self.kind is int:
                if number != int(number):
                    raise ValueError("expected a whole number")
                value = int(number)
            else:
                value = round(number, 4)
        if self.options is not None and value not in self.options:
            shown = ", ".join(str(o) for o in self.options[:12])
            raise ValueError(f"choose one of {shown}")
        if self.lo is not None and not self.lo <= value <= self.hi:
            raise ValueError(f"choose a value from {self.lo:g} to {self.hi:g}")
        return value

    def format(self, value: Any) -> str:
        if self.kind is bool:
            return "true" if value else "false"
        return str(value)


D_MODEL_OPTIONS = (32, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
HEAD_OPTIONS = (1, 2, 3, 4, 6, 8, 12, 16)
D_FF_OPTIONS = (64, 128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096)
MAX_LAYERS = 24
LR_OPTIONS = (0.0003, 0.001, 0.003, 0.01)
MAX_SEED = 2**31 - 1

_base = EncoderConfig()
SETTINGS: dict[str, Setting] = {
    s.key: s
    for s in (
        Setting("model", PRETRAINED, str),  # pretrained, custom, or ckpt:<name>; checked against what exists
        Setting("text", DEFAULT_SENTENCE, str),
        Setting("d_model", _base.d_model, int, D_MODEL_OPTIONS),
        Setting("num_heads", _base.num_heads, int, HEAD_OPTIONS),
        Setting("d_ff", _base.d_ff, int, D_FF_OPTIONS),
        Setting("num_layers", _base.num_layers, int, None, 1, MAX_LAYERS),
        Setting("dropout", _base.dropout, float, None, 0.0, 0.5),
        Setting("activation", _base.activation, str, ("relu", "gelu")),
        Setting("norm", _base.norm, str, ("post", "pre")),
        Setting("positional", _base.positional, str, ("sinusoidal", "learned", "none")),
        Setting("final_norm", False, bool),
        Setting("seed", _base.seed, int, None, 0, MAX_SEED),
        Setting("train", False, bool),
        Setting("device", "auto", str, ("auto", "cpu", "cuda", "mps")),
        Setting("present", False, bool),
        Setting("view", "head", str, ("head", "layer", "model")),
        Setting("layer", 3, int, None, 0, MAX_LAYERS - 1),  # pretrained layer 3, head 1: "it" attends to "animal"
        Setting("head", 1, int, None, 0, max(HEAD_OPTIONS) - 1),
        Setting("avg", False, bool),
        Setting("hide_special", False, bool),
        Setting("tap", "output", str, ("input", "attn", "add1", "norm1", "ffn_hidden", "ffn", "add2", "norm2", "output")),
        Setting("overlay", True, bool),
        Setting("compare", "norm", str, ("norm", "sentences")),
        Setting("text_b", SECOND_SENTENCE, str),
        Setting("word", "it", str),
        Setting("step", 0, int, None, 0, 30),
        Setting("depth", 12, int, (2, 4, 6, 12, 24)),
        Setting("lr", 0.003, float, LR_OPTIONS),
        Setting("train_steps", 200, int, (50, 100, 200, 300, 500)),  # stability.STEPS
        Setting("train_layers", 6, int, (2, 4, 6)),
    )
}
CONFIG_KEYS = ("d_model", "num_heads", "d_ff", "num_layers", "dropout", "activation", "norm", "positional", "final_norm", "seed")


def defaults() -> dict[str, Any]:
    return {k: s.default for k, s in SETTINGS.items()}


def from_query(params: Mapping[str, Iterable[str] | str]) -> tuple[dict[str, Any], list[str]]:
    """Parse query parameters (each a value or a list of values) -> (values for known keys, problems).

    Every problem is one sentence naming the parameter and the fallback; unknown keys are reported too.
    """
    values, problems = {}, []
    for key, raw in params.items():
        raws = [raw] if isinstance(raw, str) else list(raw)
        setting = SETTINGS.get(key)
        if setting is None:
            problems.append(f"Ignored the unknown URL parameter {key!r}.")
            continue
        if not raws:
            continue
        if len(raws) > 1:
            problems.append(f"The URL gives {key!r} {len(raws)} times; the last value is used.")
        if key in ("text", "text_b") and len(raws[-1]) > MAX_TEXT_CHARS:
            problems.append(f"The sentence in the URL was cut to its first {MAX_TEXT_CHARS:,} characters.")
            raws[-1] = raws[-1][:MAX_TEXT_CHARS]
        try:
            values[key] = setting.parse(raws[-1])
        except ValueError as err:
            fallback = setting.format(setting.default)
            problems.append(f"URL parameter {key}={_short(raws[-1])} is not valid ({err}); using {fallback}.")
    return values, problems


def to_query(values: Mapping[str, Any]) -> dict[str, str]:
    """The settings that differ from their defaults, as URL query parameters."""
    out = {}
    for key, setting in SETTINGS.items():
        if key in values and values[key] != setting.default:
            out[key] = setting.format(values[key])
    return out


def config_from(values: Mapping[str, Any]) -> EncoderConfig:
    """The custom EncoderConfig the sidebar describes; raises the config's own ValueError when impossible."""
    return EncoderConfig(**{k: values.get(k, SETTINGS[k].default) for k in CONFIG_KEYS})


def _short(text: str, limit: int = 40) -> str:
    text = text.replace("\n", " ")
    return repr(text if len(text) <= limit else text[:limit] + "…")
