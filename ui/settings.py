"""The explorer's settings: widget choices, defaults, and their round trip through the URL's query string.

One table (SETTINGS) says what each setting may hold; the sidebar draws its widgets from it, the URL is
parsed against it, and a shared link reopens exactly the same view. Bad URL values fall back to defaults
with a sentence saying which and why: a mangled link never breaks the app.
"""

from __future__ import annotations

import base64
import re
import urllib.parse
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from encoder import TAPS
from encoder.analysis.attribution import DEFAULT_STEPS, METHODS
from encoder.analysis.measures import MEASURES
from encoder.config import EncoderConfig
from encoder.devices import DEVICES

PRETRAINED = "pretrained"
CUSTOM = "custom"
CHECKPOINT_PREFIX = "ckpt:"
PRETRAINED_LABEL = "all-MiniLM-L6-v2 (pretrained)"
CUSTOM_LABEL = "Custom (random init)"
PRETRAINED_SHORT, CUSTOM_SHORT = "MiniLM", "Custom"  # in a box a projector leaves narrow (Compare's second model)
AUTO_DEVICE = "auto"  # the device setting that lets encoder.pick_device choose

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
# The Sentence embeddings page compares the sentence with these: a one-word change, a paraphrase, unrelated text.
MORE_SENTENCES = (SECOND_SENTENCE, "The tired animal stayed on this side of the road.", "The stock market fell.")
# Longer input is cut with a message. The model reads at most 512 tokens (about 2,500 characters of English), and
# a cap keeps every link the app writes openable: 5,000 characters of 4-byte emoji are at most ~27 kB in a link.
MAX_TEXT_CHARS = 5_000
TEXT_KEYS = ("text", "text_b", "sentences")
PACKED = "~"  # a URL value that starts with this is the text deflated and base64url-encoded
PACK_ABOVE = 1_500  # characters of percent-encoded text above which the packed form is tried


WIDGETS = ("radio", "select_slider", "slider", "selectbox", "toggle", "checkbox", "number", "segmented", "text_area",
           "text_input", "")


@dataclass(frozen=True)
class Setting:
    """One setting: what it may hold, its default, and how its widget looks. Every widget of the app is drawn from here."""

    key: str
    default: Any
    kind: type  # int, float, str or bool
    options: tuple | None = None  # allowed values, or None for a range
    lo: float | None = None
    hi: float | None = None
    label: str = ""  # the widget's label; "" for a setting no widget shows directly
    widget: str = ""  # one of WIDGETS
    names: Mapping[Any, str] | None = None  # what an option is called on screen, when not str(option)
    step: float | None = None
    help: str | None = None
    captions: tuple[str, ...] | None = None  # radio only: one line under each option
    form: tuple[str, str] | None = None  # str only: a pattern the whole value matches, and what to write instead

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
            if self.form is not None and not re.fullmatch(self.form[0], raw):
                raise ValueError(self.form[1])
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
                value = round(number, 12) if self.options is not None else round(number, 4)
        if self.options is not None and value not in self.options:
            shown = ", ".join(self.format(o) for o in self.options[:12])
            raise ValueError(f"choose one of {shown}")
        if self.lo is not None and not self.lo <= value <= self.hi:
            raise ValueError(f"choose a value from {self.lo:g} to {self.hi:g}")
        return value

    def format(self, value: Any) -> str:
        """The value as it stands in the URL."""
        if self.kind is bool:
            return "true" if value else "false"
        if self.kind is float:
            return f"{value:g}"
        return str(value)

    def show(self, value: Any) -> str:
        """The value as its widget shows it."""
        if self.names is not None and value in self.names:
            return self.names[value]
        return self.format(value) if self.kind is float else str(value)


D_MODEL_OPTIONS = (32, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
HEAD_OPTIONS = (1, 2, 3, 4, 6, 8, 12, 16)
D_FF_OPTIONS = (64, 128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096)
EPS_OPTIONS = (1e-12, 1e-6, 1e-5)  # BERT's, Keras's (seed 002) and PyTorch's default LayerNorm epsilon
MAX_LAYERS = 24
LR_OPTIONS = (0.0003, 0.001, 0.003, 0.01)
MAX_SEED = 2**31 - 1
NORM_LABELS = {"post": "Post-LN (original paper)", "pre": "Pre-LN"}
VIEW_LABELS = {"head": "One head", "layer": "All heads of a layer", "model": "Model view (layers × heads)",
               "rollout": "Rollout"}
COMPARE_LABELS = {"norm": "Post-LN vs Pre-LN (same weights)", "sentences": "Two sentences (same model)",
                  "models": "Two models (same sentence)"}
SCALE_LABELS = {"fixed": "0 to 1", "auto": "Auto", "row": "Per row"}
# Tokens past which Compare and Knock out heads draw the difference of their two exact maps only on request (the
# "diff_long" toggle): at 512 tokens the two maps are ~2.8 MB and a third would take the page past 3 MB.
DIFF_ON_REQUEST = 256
TARGET_LABELS = {"similarity": "Similarity", "token": "One token"}
IG_STEP_OPTIONS = (10, 20, 40, 80)
POSITIONAL_LABELS = {"sinusoidal": "sinusoidal (2017)", "learned": "learned (BERT)", "rotary": "rotary (RoPE)",
                     "none": "none"}
THETA_OPTIONS = (10000.0, 160000.0, 500000.0)  # RoFormer's base; ModernBERT's global layers; a long-context base
THETA_LABELS = {10000.0: "10,000 (RoFormer)", 160000.0: "160,000 (ModernBERT)", 500000.0: "500,000"}
FFN_LABELS = {"plain": "Plain", "geglu": "GeGLU", "swiglu": "SwiGLU"}
WINDOW_OPTIONS = (0, 4, 8, 16, 32, 64, 128, 256)  # tokens; 0 = global (every token sees every token)
GLOBAL_EVERY_OPTIONS = (0, 2, 3, 4, 6)  # 0 = never: every layer has the window

_base = EncoderConfig()
SETTINGS: dict[str, Setting] = {
    s.key: s
    for s in (
        # The model and the sentence (sidebar and the frame).
        Setting("model", PRETRAINED, str, label="Model", widget="radio"),  # options: what exists on this server
        Setting("text", DEFAULT_SENTENCE, str, label="Sentence", widget="text_area"),
        Setting("d_model", _base.d_model, int, D_MODEL_OPTIONS, label="d_model (width)", widget="select_slider"),
        Setting("num_heads", _base.num_heads, int, HEAD_OPTIONS, label="Heads (num_heads)", widget="select_slider"),
        Setting("d_ff", _base.d_ff, int, D_FF_OPTIONS, label="d_ff (FFN width)", widget="select_slider",
                help="Usually 4 × d_model."),
        Setting("num_layers", _base.num_layers, int, None, 1, MAX_LAYERS, label="Layers (num_layers)", widget="slider"),
        Setting("dropout", _base.dropout, float, None, 0.0, 0.5, label="Dropout", widget="slider", step=0.05),
        Setting("activation", _base.activation, str, ("relu", "gelu"), label="Activation", widget="radio",
                names={"relu": "ReLU", "gelu": "GELU"}),
        Setting("norm", _base.norm, str, ("post", "pre"), label="Norm placement", widget="radio", names=NORM_LABELS,
                captions=("LayerNorm after each residual add; needs learning-rate warm-up to train.",
                          "LayerNorm inside each residual branch; trains stably without warm-up.")),
        Setting("positional", _base.positional, str, tuple(POSITIONAL_LABELS), label="Positional encoding",
                widget="selectbox", names=POSITIONAL_LABELS,
                help="Sinusoidal and learned positions are added to the embeddings; rotary positions turn each "
                     "query and key by an angle that grows with its position, so attention sees distances."),
        Setting("rope_theta", _base.rope_theta, float, THETA_OPTIONS, label="RoPE θ", widget="selectbox",
                names=THETA_LABELS, help="The base of the rotation angles: a larger θ turns more slowly, for longer "
                                         "texts."),
        Setting("rope_theta_local", _base.rope_theta_local, float, THETA_OPTIONS, label="RoPE θ in window layers",
                widget="selectbox", names=THETA_LABELS, help="ModernBERT turns its sliding-window layers with 10,000."),
        Setting("ffn", _base.ffn, str, tuple(FFN_LABELS), label="Feed-forward", widget="segmented", names=FFN_LABELS,
                help="Plain: act(x W1) W2. GeGLU / SwiGLU: (GELU or SiLU of x W) × (x V), then W2: a gate the model "
                     "learns (Shazeer 2020)."),
        Setting("bias", _base.bias, bool, label="Biases (Linear and LayerNorm)", widget="checkbox",
                help="ModernBERT has none."),
        Setting("window", _base.window, int, WINDOW_OPTIONS, label="Attention window (tokens)", widget="select_slider",
                names={0: "global"}, help="Global: every token sees every token. w: each token sees the w/2 tokens "
                                          "on either side of it (ModernBERT: 128)."),
        Setting("global_every", _base.global_every, int, GLOBAL_EVERY_OPTIONS, label="Global attention every n layers",
                widget="select_slider", names={0: "never"},
                help="Layers 0, n, 2n, … attend globally, the others in the window (ModernBERT: every 3rd)."),
        Setting("final_norm", False, bool, label="Final LayerNorm after the stack", widget="checkbox",
                help="Pre-LN stacks usually end with one."),
        Setting("layer_norm_eps", _base.layer_norm_eps, float, EPS_OPTIONS, label="LayerNorm epsilon", widget="selectbox",
                names={1e-12: "1e-12 (BERT)", 1e-6: "1e-6 (Keras)", 1e-5: "1e-5 (PyTorch)"}),
        Setting("seed", _base.seed, int, None, 0, MAX_SEED, label="Seed", widget="number", step=1),
        Setting("train", False, bool, label="Training mode (dropout on)", widget="toggle",
                help="Eval mode is the default: dropout is the identity."),
        Setting("device", AUTO_DEVICE, str, (AUTO_DEVICE, *DEVICES), label="Device", widget="selectbox"),
        Setting("present", False, bool, label="Presentation mode", widget="toggle",
                help="Bigger fonts, no explanatory captions, the sidebar folded away: for projecting."),
        # Page settings.
        Setting("view", "head", str, tuple(VIEW_LABELS), label="View", widget="segmented", names=VIEW_LABELS),
        Setting("measure", "raw", str, tuple(MEASURES), label="Measure", widget="selectbox",
                names={k: m.label for k, m in MEASURES.items()},
                help="What the map shows: the raw attention weights, or a measure of how much each token really "
                     "contributes to each position."),
        Setting("layer", 3, int, None, 0, MAX_LAYERS - 1, label="Layer", widget="slider"),  # pretrained L3 H1: "it" -> "animal"
        Setting("head", 1, int, None, 0, max(HEAD_OPTIONS) - 1, label="Head", widget="selectbox"),
        Setting("avg", False, bool, label="Average of heads", widget="toggle"),
        Setting("hide_special", False, bool, label="Hide [CLS] / [SEP]", widget="toggle"),
        Setting("beside", False, bool),  # the attention map's "Beside raw" button: raw attention beside the measure
        Setting("scale", "fixed", str, tuple(SCALE_LABELS), label="Colour scale", widget="segmented", names=SCALE_LABELS,
                help="0 to 1 keeps heads comparable; auto stretches to this map's largest weight; per row stretches "
                     "each row to its own largest weight."),
        Setting("tap", "output", str, TAPS, label="Tap", widget="selectbox"),  # the wiring table's taps
        Setting("overlay", True, bool, label="Overlay live statistics", widget="toggle"),
        Setting("diff_long", False, bool, label="Difference map", widget="toggle",
                help="For long sentences the difference map is sent only on request: it adds ~1.4 MB to the page."),
        Setting("compare", "norm", str, tuple(COMPARE_LABELS), label="Compare", widget="segmented", names=COMPARE_LABELS),
        # Compare's second model (its options: what exists on this server), with its own layer and head
        Setting("model_b", CUSTOM, str, label="Second model", widget="selectbox"),
        Setting("layer_b", 0, int, None, 0, MAX_LAYERS - 1, label="Layer", widget="slider"),  # under the second map
        Setting("head_b", 0, int, None, 0, max(HEAD_OPTIONS) - 1, label="Head", widget="selectbox"),
        Setting("text_b", SECOND_SENTENCE, str, label="Second sentence", widget="text_area"),
        Setting("word", "it", str, label="Token to follow", widget="text_input"),
        Setting("step", 0, int, None, 0, 30),  # moved by the Previous / Next buttons
        Setting("shuffle", 0, int, None, 0, 10_000),  # moved by the Shuffle button
        Setting("depth", 12, int, (2, 4, 6, 12, 24), label="Depth (num_layers)", widget="select_slider"),
        Setting("lr", 0.003, float, LR_OPTIONS, label="Peak learning rate", widget="select_slider"),
        Setting("train_steps", 200, int, (50, 100, 200, 300, 500), label="Training steps", widget="select_slider"),
        Setting("train_layers", 6, int, (2, 4, 6), label="Layers", widget="select_slider"),
        Setting("run", "", str, label="Run", widget="selectbox"),  # a trained run on Training stability; "" = best
        Setting("quiz", "", str),  # one character per question: its chosen option, or "-"
        # Inside a head (issue 12).
        Setting("query", 0, int, None, 0, 4095, label="Query token", widget="selectbox"),
        Setting("heads", "", str, form=(r"([0-9]{1,4}(,[0-9]{1,4})*)?", "expected head numbers separated by commas, "
                                        "such as 1,4,7")),  # the head view's "Several heads"; "" for one or the average
        # What the encoder is for (issue 13).
        Setting("pool", "mean", str, ("mean", "cls"), label="Pooling", widget="segmented",
                names={"mean": "Mean of tokens", "cls": "[CLS] vector"}),
        Setting("sentences", "\n".join(MORE_SENTENCES), str, label="More sentences, one per line", widget="text_area",
                help="Compared with the sentence above; at most 7 more."),
        Setting("ablate", "", str),  # knock-outs, e.g. "3.1,4.attn": layer.head or layer.attn / layer.ffn
        # Why are these similar? (issues 19 and 27): attributions toward a target, and the faithfulness chart.
        Setting("target", "similarity", str, tuple(TARGET_LABELS), label="Attribute toward", widget="segmented",
                names=TARGET_LABELS),
        Setting("token", 1, int, None, 0, 4095, label="Token", widget="selectbox"),  # the "token" target's position
        Setting("method", "ig", str, tuple(METHODS), label="Attribution method", widget="selectbox",
                names={k: m.label for k, m in METHODS.items()}),
        Setting("ig_steps", DEFAULT_STEPS, int, IG_STEP_OPTIONS, label="Integrated Gradients steps",
                widget="select_slider", help="Where the token scores miss f(x) − f(baseline) by more than 1 %, the "
                "steps are doubled until they do not (at most 160)."),
        Setting("follow", "it animal street", str),  # tokens highlighted on Token trajectories, space-separated
        # Lessons (issue 21, ui/player.py): the lesson on the Lessons page or being played, and the player's state.
        Setting("lesson", "", str, label="Lesson", widget="selectbox"),  # a built-in's name, folder:NAME, mine or ~link
        Setting("slide", 0, int, None, 0, 60),  # the slide playing, from 1 (at most ui.lessons.MAX_SLIDES); 0: none
        Setting("points", False, bool),  # the slide's talking points unfolded under the lesson bar
        Setting("answer", False, bool),  # the slide's answer revealed
    )
}
CONFIG_KEYS = ("d_model", "num_heads", "d_ff", "num_layers", "dropout", "norm", "positional", "rope_theta",
               "window", "global_every", "rope_theta_local", "ffn", "activation", "bias", "final_norm", "layer_norm_eps",
               "seed")
# The knobs that only mean something with another setting: drawn, and passed to the model, only then. A hidden knob
# keeps its value in the store (and the URL) but the model gets its default, so it never changes the model.
APPLIES = {
    "rope_theta": lambda v: v["positional"] == "rotary",
    "rope_theta_local": lambda v: v["positional"] == "rotary" and v["window"] > 0,
    "global_every": lambda v: v["window"] > 0,
    "activation": lambda v: v["ffn"] == "plain",  # GeGLU and SwiGLU bring their own (GELU, SiLU)
}
# One click in the sidebar builds these custom models (every config setting, so nothing of the last model stays).
PRESETS = {
    "2017 Transformer": {k: getattr(_base, k) for k in CONFIG_KEYS if k != "seed"},
    # ModernBERT's design (Warner et al. 2024) at a classroom size: its window is 128 tokens; 8 shows the band on one
    # sentence.
    "ModernBERT-style": {k: getattr(_base, k) for k in CONFIG_KEYS if k != "seed"} | dict(
        d_model=256, num_heads=4, d_ff=384, num_layers=6, dropout=0.0, norm="pre", final_norm=True,
        positional="rotary", rope_theta=160000.0, rope_theta_local=10000.0, ffn="geglu", bias=False, window=8,
        global_every=3),
}
PRESET_HELP = {
    "2017 Transformer": "The base encoder of “Attention Is All You Need”: Post-LN, sinusoidal positions, ReLU FFN, "
                        "global attention.",
    "ModernBERT-style": "Rotary positions (θ 160,000), GeGLU, no biases, Pre-LN with a final LayerNorm, a sliding "
                        "window of 8 tokens with global attention every 3rd layer (ModernBERT's window is 128).",
}
SIDEBAR_KEYS = ("train", "device", "present")  # drawn for every model; CONFIG_KEYS only for the custom one


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
            problems.append(f"Ignored the unknown URL parameter {_short(key)}.")
            continue
        if not raws:
            continue
        if len(raws) > 1:
            problems.append(f"The URL gives {key!r} {len(raws)} times; the last value is used.")
        if key in TEXT_KEYS:
            text = unpack_text(raws[-1])
            if utf16_len(text) > MAX_TEXT_CHARS:
                problems.append(f"The sentence in the URL was cut to its first {MAX_TEXT_CHARS:,} characters.")
                text = cut_utf16(text, MAX_TEXT_CHARS)
            values[key] = text
            continue
        try:
            values[key] = setting.parse(raws[-1])
        except ValueError as err:
            fallback = setting.format(setting.default) or "none"
            problems.append(f"URL parameter {key}={_short(raws[-1])} is not valid ({err}); using {fallback}.")
    return values, problems


def to_query(values: Mapping[str, Any]) -> dict[str, str]:
    """The settings that differ from their defaults, as URL query parameters; long text is packed."""
    out = {}
    for key, setting in SETTINGS.items():
        if key in values and values[key] != setting.default:
            out[key] = pack_text(values[key]) if key in TEXT_KEYS else setting.format(values[key])
    return out


def utf16_len(text: str) -> int:
    """Length as the browser's text box counts it (UTF-16 units: an emoji counts 2), which its max_chars checks."""
    return len(text.encode("utf-16-le")) // 2


def cut_utf16(text: str, limit: int) -> str:
    """The longest prefix of at most `limit` UTF-16 units, never splitting a character."""
    units = 0
    for i, ch in enumerate(text):
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > limit:
            return text[:i]
    return text


def pack_text(text: str) -> str:
    """Text as it goes into a link: as typed, or deflated and base64url-encoded when that is shorter."""
    plain = urllib.parse.quote(text, safe="")
    if len(plain) <= PACK_ABOVE and not text.startswith(PACKED):
        return text
    packed = PACKED + base64.urlsafe_b64encode(zlib.compress(text.encode("utf-8"), 9)).decode("ascii").rstrip("=")
    return packed if len(packed) < len(plain) or text.startswith(PACKED) else text


def unpack_text(raw: str) -> str:
    """The text a link carries; a value that only looks packed is taken literally."""
    if not raw.startswith(PACKED):
        return raw
    try:
        data = base64.urlsafe_b64decode(raw[1:] + "=" * (-len(raw[1:]) % 4))
        unzip = zlib.decompressobj()
        text = unzip.decompress(data, 4 * MAX_TEXT_CHARS + 4)  # a bound: no zip bomb reaches memory
        if unzip.unconsumed_tail or not unzip.eof:
            return raw
        return text.decode("utf-8")
    except (ValueError, zlib.error, UnicodeDecodeError):
        return raw


def drawn_config_keys(values: Mapping[str, Any]) -> list[str]:
    """The custom model's sidebar knobs that apply to these settings, in sidebar order (APPLIES)."""
    full = {k: values.get(k, SETTINGS[k].default) for k in CONFIG_KEYS}
    return [k for k in CONFIG_KEYS if k not in APPLIES or APPLIES[k](full)]


def config_from(values: Mapping[str, Any]) -> EncoderConfig:
    """The custom EncoderConfig the sidebar describes; raises a ValueError saying what to change when impossible.

    Knobs that do not apply (APPLIES) take their defaults; the config's own checks come first, then the
    sidebar's (sidebar_problem).
    """
    drawn = drawn_config_keys(values)
    cfg = EncoderConfig(**{k: values.get(k, SETTINGS[k].default) for k in drawn})
    problem = sidebar_problem(cfg)
    if problem:
        raise ValueError(problem)
    return cfg


def sidebar_problem(cfg: EncoderConfig) -> str:
    """What the config allows but the sidebar's choices make pointless, in the sidebar's words ('' when nothing)."""
    if cfg.window and cfg.global_every and cfg.num_layers <= 1:
        return ("The attention window never applies: layer 0 attends globally (Global attention every n layers) and "
                "it is the only layer. In the sidebar, choose Layers 2 or more, or Global attention every n layers: "
                "never.")
    return ""


def config_problem(values: Mapping[str, Any], err: ValueError) -> str:
    """The config's error in the sidebar's terms: when d_model does not split into num_heads, the nearest values
    the sliders can select (EncoderConfig's own hint may name a d_model such as 63 that no slider offers); the
    rotary and window limits with the sidebar's names for them."""
    d, h = values.get("d_model"), values.get("num_heads")
    if values.get("model") != CUSTOM or not isinstance(d, int) or not isinstance(h, int) or h < 1:
        return str(err)
    if d % h == 0:
        return _modern_problem(values, str(err))
    widths = sorted((o for o in D_MODEL_OPTIONS if o % h == 0), key=lambda o: (abs(o - d), o))[:2]
    heads = sorted((o for o in HEAD_OPTIONS if d % o == 0), key=lambda o: (abs(o - h), o))[:2]
    fixes = [f"d_model {' or '.join(map(str, sorted(widths)))}" if widths else "",
             f"Heads {' or '.join(map(str, sorted(heads)))}" if heads else ""]
    return (f"d_model={d} is not divisible by num_heads={h}: each head gets d_model / num_heads dimensions. "
            f"In the sidebar, choose {', or '.join(f for f in fixes if f)}.")


def _modern_problem(values: Mapping[str, Any], message: str) -> str:
    """The config's message on rotary positions or the window, said with the sidebar's labels; others as they are."""
    d, h = values["d_model"], values["num_heads"]
    if message.startswith("positional='rotary'"):
        heads = sorted((o for o in HEAD_OPTIONS if d % o == 0 and (d // o) % 2 == 0), key=lambda o: abs(o - h))[:2]
        fix = f"Heads {' or '.join(map(str, sorted(heads)))}, or " if heads else ""
        return (f"Rotary positions turn pairs of dimensions, so each head's width d_model / num_heads must be even; "
                f"it is {d // h}. In the sidebar, choose {fix}Positional encoding: sinusoidal.")
    if message.startswith("window="):
        return (f"{message} In the sidebar, choose a smaller Attention window (tokens), or global.")
    return message


def _short(text: str, limit: int = 40) -> str:
    text = text.replace("\n", " ")
    return repr(text if len(text) <= limit else text[:limit] + "…")
