"""layer_steps(config): the walk through one encoder layer's data flow, step by step, in the placement's order.

The order and the dropout stops come from encoder.model.PLACEMENTS; this module holds only the prose, by node.
"""

from __future__ import annotations

from dataclasses import dataclass

from encoder.config import EncoderConfig
from encoder.model import DROPOUTS, placement
from encoder.viz import diagram


@dataclass(frozen=True)
class Step:
    """One stop on the walk: `key` is the diagram node to highlight, `tap` the tensor to show."""

    key: str  # a tap name, or "drop1"/"drop2" (the dropout on the edge into add1/add2)
    tap: str  # the tap whose (seq, width) tensor this step shows
    title: str
    text: str


SUBLAYER_NAMES = {"attn": "attention", "ffn": "FFN"}  # the sub-layer output a dropout edge starts from


def _dropout(key: str, tap: str, add: str) -> Step:
    which = SUBLAYER_NAMES[tap]
    return Step(
        key,
        tap,
        f"Dropout on the {which} output",
        f"During training, dropout zeroes a random fraction p of the {which} output and scales the rest by "
        f"1/(1-p) before the residual add ({add}). In eval mode, as here, dropout is the identity, so the "
        f"tensor shown is the {which} output itself.",
    )


def _input(layer_role: str) -> tuple[str, str]:
    return (
        "Layer input",
        f"One d_model-wide vector per token: the embeddings plus positional encoding in layer 0, otherwise "
        f"the previous layer's output. It feeds {layer_role} and is also carried around it by the residual connection.",
    )


_ATTN = (
    "Multi-head self-attention: every token's query is compared with the keys of all tokens (no mask, so "
    "it sees left and right), softmax(QK^T / sqrt(d_head)) weights the values, and W_O mixes the heads."
)
_FFN_HIDDEN = (
    "FFN hidden layer",
    "The first FFN matrix W1 widens each token's vector from d_model to d_ff (usually 4x) and the activation "
    "(ReLU or GELU) zeroes or squashes negative parts. Each position is processed on its own.",
)
_FFN = ("FFN output", "The second FFN matrix W2 projects the d_ff-wide hidden vector back to d_model, again token by token.")

# (title, text) of each node, per placement.
PROSE: dict[str, dict[str, tuple[str, str]]] = {
    "post": {
        "input": _input("self-attention directly"),
        "attn": ("Self-attention", _ATTN),
        "add1": (
            "Residual add 1",
            "The layer input is added to the attention output: x + Dropout(MHA(x)). The skip path lets "
            "gradients flow straight through and keeps what the token already knew.",
        ),
        "norm1": (
            "LayerNorm 1 (Add & Norm)",
            "Post-LN, as in the original paper: the sum is normalised per token to zero mean and unit variance, "
            "then scaled and shifted. This normalised tensor feeds the FFN and its residual path.",
        ),
        "ffn_hidden": _FFN_HIDDEN,
        "ffn": _FFN,
        "add2": (
            "Residual add 2",
            "The FFN's input (the output of LayerNorm 1) is added back to the FFN output: the second residual connection.",
        ),
        "norm2": (
            "LayerNorm 2 (Add & Norm)",
            "The second LayerNorm sits after the add, on the main path, so every layer's output is normalised; "
            "this placement makes deep stacks sensitive to the learning rate early in training.",
        ),
        "output": (
            "Layer output",
            "In Post-LN the output is the result of LayerNorm 2: one contextual vector per token, the input "
            "of the next identical layer.",
        ),
    },
    "pre": {
        "input": _input("LayerNorm 1"),
        "norm1": (
            "LayerNorm 1 (before attention)",
            "Pre-LN: the input is normalised per token before it enters the sub-layer; the residual path "
            "keeps the unnormalised input.",
        ),
        "attn": ("Self-attention", _ATTN + " Here it reads the normalised input."),
        "add1": (
            "Residual add 1",
            "x + Dropout(MHA(LN(x))): the attention result is added to the raw layer input, so the residual "
            "stream is never normalised inside the layer.",
        ),
        "norm2": ("LayerNorm 2 (before the FFN)", "The residual stream is normalised again, this time as the FFN's input only."),
        "ffn_hidden": _FFN_HIDDEN,
        "ffn": _FFN,
        "add2": (
            "Residual add 2",
            "The FFN output is added to the residual stream (add1). With no LayerNorm on the main path, "
            "gradients reach early layers undisturbed, which is why Pre-LN trains stably without warm-up.",
        ),
        "output": (
            "Layer output",
            "In Pre-LN the output is the sum from residual add 2, not normalised; its size tends to grow "
            "with depth, which is why Pre-LN stacks usually end with a final LayerNorm.",
        ),
    },
}


FINAL = diagram.FINAL  # the step (and diagram node) of the stack's final LayerNorm; its tensor is Trace.final
FINAL_PROSE = (
    "Final LayerNorm (after the stack)",
    "After the last layer one more LayerNorm normalises every token's vector: that is what the encoder outputs. It "
    "acts once, not in every layer, so the tensor shown is the encoder's output whichever layer is chosen.",
)
ACTIVATION_NAMES = {"relu": "ReLU, which zeroes the negative parts", "gelu": "GELU, which squashes the negative parts",
                    "gelu_tanh": "GELU (tanh approximation), which squashes the negative parts"}


def _positional_input(config: EncoderConfig, role: str) -> str:
    """The layer-input step's text: where positions enter this model."""
    enter = {
        "sinusoidal": "the token embeddings plus the sinusoidal positional encoding in layer 0",
        "learned": "the token embeddings plus the learned position embeddings in layer 0",
        "rotary": ("the token embeddings alone in layer 0 (rotary positions add nothing here: they turn the queries "
                   "and keys inside every attention)"),
        "none": "the token embeddings alone in layer 0 (this model has no positional encoding)",
    }[config.positional]
    return (f"One d_model-wide vector per token: {enter}, otherwise the previous layer's output. It feeds {role} and "
            "is also carried around it by the residual connection.")


def _adapted(config: EncoderConfig, layer: int, tap: str, title: str, text: str) -> tuple[str, str]:
    """A node's prose made true for this config and layer: positions, window, RoPE, gated FFN, biases."""
    if tap == "input":
        text = _positional_input(config, "self-attention directly" if config.norm == "post" else "LayerNorm 1")
    elif tap == "attn":
        radius = config.layer_window(layer) // 2
        if radius:
            text = text.replace("with the keys of all tokens (no mask, so it sees left and right)",
                                f"only with the keys at most {radius} positions away on either side (layer {layer} "
                                "attends in a sliding window: the other keys' scores become −∞, so their weights are 0)")
        elif config.window:
            text += f" Layer {layer} is one of this model's global layers: no window here."
        if config.positional == "rotary":
            text += (f" Before the scores, rotary positions turn each query and key by angles that grow with its "
                     f"position (θ = {config.layer_theta(layer):g}), so each score depends on how far apart the two "
                     "tokens are.")
    elif tap == "ffn_hidden":
        if config.ffn != "plain":
            gate, act = ("GeGLU", "GELU") if config.ffn == "geglu" else ("SwiGLU", "SiLU")
            title = f"FFN hidden layer ({gate})"
            text = (f"Two matrices W and V widen each token's vector from d_model to d_ff; {act}(x W) is multiplied "
                    "element by element with x V, a gate the model learns (Shazeer 2020). Each position is processed "
                    "on its own.")
        else:
            text = text.replace("the activation (ReLU or GELU) zeroes or squashes negative parts",
                                f"the activation is {ACTIVATION_NAMES[config.activation]}")
    elif tap in ("norm1", "norm2") and not config.bias:
        text += " This model's LayerNorms have no bias β: they scale, but do not shift."
    if tap == "norm1" and layer == 0 and not config.first_norm1:
        title, text = ("No LayerNorm 1 in layer 0", "In this model layer 0's attention reads its input as it is: the "
                       "embeddings already end in a LayerNorm (as ModernBERT's do). The tensor shown is the input.")
    if tap in ("attn", "ffn") and not config.bias:
        text += " Its matrices have no bias terms."
    if tap == "output" and config.final_norm and config.norm == "pre":
        text += " This model has one: the last step."
    return title, text


def layer_steps(config: EncoderConfig, layer: int = 0) -> list[Step]:
    """The ordered steps through `layer` for config.norm: each tap in computation order, a dropout stop before each
    add, and the final LayerNorm last when the config has one; the prose is true for this config and layer."""
    steps = []
    for wire in placement(config.norm):
        steps += [_dropout(kind, tail, wire.tap) for tail, kind in wire.inputs if kind in DROPOUTS]
        steps.append(Step(wire.tap, wire.tap, *_adapted(config, layer, wire.tap, *PROSE[config.norm][wire.tap])))
    if config.final_norm:
        steps.append(Step(FINAL, FINAL, *FINAL_PROSE))
    return steps
