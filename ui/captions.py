"""Captions computed from the config and the trace on screen, so every sentence a page prints is true for it.

Pure functions (no Streamlit): tests/app/test_captions.py calls them on the pretrained model and on custom ReLU
and GELU models, and checks each statement against the numbers it describes.
"""

from __future__ import annotations

import pandas as pd
from torch import Tensor

from encoder import EncoderConfig, Trace
from encoder.analysis.cost import param_summary
from encoder.model import PLACEMENTS, placement
from encoder.viz.axes import special_names
from encoder.viz.similarity import cosine_matrix

# What each tap holds, one line per tap name of the wiring table (encoder.model.PLACEMENTS); "{reads}" becomes the
# taps it is computed from in the placement on screen, so every line holds for Post-LN and Pre-LN alike.
TAP_CAPTIONS = {
    "input": "the layer's input: in layer 0 the embedded tokens, else the previous layer's output",
    "attn": "multi-head self-attention over {reads}, after W_O (before dropout and the residual add)",
    "add1": "the first residual sum, {reads}",
    "norm1": "the first LayerNorm, of {reads}",
    "ffn_hidden": "the FFN's hidden layer, d_ff wide: the activation of {reads} W1 + b1",
    "ffn": "the FFN's output, {reads} W2 + b2 (before dropout and the residual add)",
    "add2": "the second residual sum, {reads}",
    "norm2": "the second LayerNorm, of {reads}",
    "output": "the layer's output, the same tensor as {reads}",
}
NEAR_MARGIN = 0.1  # neighbours must be this much more alike than far-apart positions to be called "similar"
TRAINED_KEYS = ("pretrained", "ckpt:")  # model keys of trained weights (custom models are random init)


def is_trained(model_key: str) -> bool:
    return model_key.startswith(TRAINED_KEYS)


def tap_caption(norm: str, tap: str) -> str:
    """One line on what a tap holds in a layer of this norm placement, e.g. "norm1: the first LayerNorm, of add1"."""
    wire = next((w for w in placement(norm) if w.tap == tap), None)
    if wire is None:
        raise ValueError(f"tap={tap!r} is unknown; choose one of {', '.join(w.tap for w in placement(norm))}.")
    return f"{tap}: " + TAP_CAPTIONS[tap].format(reads=" + ".join(t for t, _ in wire.inputs))


def taps_of(*ops: str) -> list[str]:
    """The taps that the given operations compute (e.g. "ln1", "ln2": the LayerNorms), in Post-LN order; a tap's
    operation is the same under both placements."""
    return [w.tap for w in PLACEMENTS["post"] if w.op in ops]


def _stats_of(stats: pd.DataFrame, layer: int, column: str, *taps: str) -> list[float]:
    """`column` at each of `taps` in `layer`; one mask for the layer (not DataFrame.query, which parses its expression
    anew on every call, ~5 ms; nor a mask per tap, ~0.3 ms each on every run of the Statistics page)."""
    rows = stats[stats["layer"].to_numpy() == layer]
    found = dict(zip(rows["tap"], rows[column], strict=True))
    return [float(found[tap]) for tap in taps]


def layernorm_caption(stats: pd.DataFrame, layer: int) -> str:
    """What LayerNorm's outputs measure here: it makes each token mean 0 / std 1, then gamma and beta move it."""
    first, second = taps_of("ln1", "ln2")
    (m1, m2), (s1, s2) = (_stats_of(stats, layer, column, first, second) for column in ("mean", "std"))
    return (f"Mean, standard deviation and RMS at each point of layer {layer}'s data flow. LayerNorm scales each "
            f"token's vector to mean 0 and std 1, then multiplies by its learned gamma and adds its learned beta: "
            f"here {first} measures mean {m1:.2f}, std {s1:.2f} and {second} mean {m2:.2f}, std {s2:.2f} (a fresh "
            f"model starts at gamma = 1, beta = 0, so about 0 and 1). The residual sums ({', '.join(taps_of('+'))}) "
            "carry whatever the sub-layers add.")


def zeros_caption(trace: Trace, layer: int, tap: str) -> str:
    """The histogram's caption: the measured share of exact zeros at this tap, and why (ReLU vs GELU)."""
    stats = trace.stats()
    after, = taps_of("w1")  # the activation's output
    zero, hidden = _stats_of(stats, layer, "zero_frac", tap, after)
    act = trace.config.activation
    text = f"Distribution of every value at {tap}: {zero:.1%} of them are exactly zero. "
    if act == "relu":
        text += (f"ReLU sets every negative input to exactly 0, so after it ({after}) {hidden:.0%} of this "
                 "layer's values are zero.")
    else:
        text += (f"This model uses GELU, which is smooth: negative inputs give small negative outputs, not zeros, "
                 f"so only {hidden:.1%} of {after} is exactly zero in this layer.")
    return text


def residual_caption(trace: Trace) -> str:
    """The residual-norm chart's caption, with the measured first and last norms."""
    norms = trace.hidden_states.double().norm(dim=-1).mean(-1)
    first, last = float(norms[0]), float(norms[-1])
    return (f"Average length of each token's vector after the embeddings ({first:.3g}) and after every layer "
            f"(after the last: {last:.3g}). " + placement_sentence(trace))


def placement_sentence(trace: Trace) -> str:
    """What the norm placement does to the residual stream's norm, with the measured trend for Pre-LN."""
    if trace.config.norm == "post":
        return "In Post-LN each layer ends with a LayerNorm, so the norm is reset after every layer."
    norms = trace.hidden_states.double().norm(dim=-1).mean(-1)
    first, last, top = float(norms[0]), float(norms[-1]), float(norms.max())
    trend = "grows with depth" if last > first and last >= 0.99 * top else "is not reset between layers"
    final = " (a final LayerNorm acts only after the last layer)" if trace.config.final_norm else ""
    return f"In Pre-LN nothing normalises the residual stream between layers, so its norm {trend}{final}."


def neighbour_similarity(table: Tensor) -> tuple[float, float]:
    """(mean cosine of neighbouring positions, mean cosine of positions at least half the table apart)."""
    n = table.shape[0]
    if n < 3:
        return float("nan"), float("nan")
    sim = cosine_matrix(table)
    near = float(sim.diagonal(1).mean())
    far = [float(sim.diagonal(k).mean()) for k in range(max(2, n // 2), n)]
    return near, sum(far) / len(far)


def position_caption(table: Tensor, positional: str, trained: bool) -> str:
    """Whether nearby positions really get similar vectors here: measured, not assumed."""
    near, far = neighbour_similarity(table)
    if near != near:  # fewer than 3 positions
        return "Each position gets its own vector, added to the token embedding."
    measured = f"neighbours {near:.2f} on average, positions half the sentence apart {far:.2f}"
    if near > far + NEAR_MARGIN:
        return ("Each position gets its own vector, added to the token embedding. Nearby positions have more "
                f"similar vectors ({measured}), so attention can tell near from far.")
    if positional == "learned" and not trained:
        return ("Each position gets its own vector, added to the token embedding. These learned position vectors "
                f"are untrained (random init), so neighbours are no more alike than distant positions ({measured}); "
                "training is what would give them structure.")
    return ("Each position gets its own vector, added to the token embedding. In this sentence's range nearby "
            f"positions are not clearly more alike than distant ones ({measured}).")


TOKENIZER_NOTES = {
    "WordPiece": "WordPiece splits rare words into known pieces; a piece that continues a word starts with ##.",
    "byte-level BPE": ("Byte-level BPE splits text into pieces of bytes, so no character is ever unknown. A piece "
                       "that starts a new word carries the space before it, shown here as ▁ (the model's own token "
                       "has Ġ); a byte that is only part of a character (an emoji, an accent) shows as <0x..>."),
    "BPE": "BPE splits rare words into pieces merged from frequent pairs of characters.",
    "Unigram": ("SentencePiece's Unigram model splits text into the likeliest pieces; ▁ marks the space a piece "
                "starts with."),
}


def tokens_caption(kind: str, specials: tuple[str, ...]) -> str:
    """How this model's tokenizer cut the sentence, and the special tokens it adds (from the tokenizer, so true)."""
    text = TOKENIZER_NOTES.get(kind, f"This model's {kind} tokenizer splits the text into pieces from its vocabulary.")
    if len(specials) >= 2:
        text += f" It adds {specials[0]} at the start and {specials[-1]} at the end."
    elif specials:
        text += f" It adds {specials[0]} to every sentence."
    else:
        text += " It adds no special tokens."
    return text


def positional_line(positional: str) -> str:
    """One sentence on where this model's positions enter (every kind of positional encoding)."""
    return {"none": "none: this model cannot tell word order apart.",
            "rotary": ("rotary (RoPE): nothing is added to these rows; every layer turns each query and key by an "
                       "angle that grows with its position, so attention sees how far apart two tokens are."),
            }.get(positional, f"{positional}, added to these rows before the first layer.")


def lead_token(trace: Trace) -> str | None:
    """The special token every sentence starts with ([CLS], <s>), or None when the first token is a word."""
    return trace.tokens[0] if trace.special_positions[:1] == (0,) else None


def pool_name(pool: str, lead: str | None) -> str:
    """The Pooling option's name: "Mean of tokens", or the first token's vector named by that token ("[CLS] vector",
    "<s> vector")."""
    if pool == "mean":
        return "Mean of tokens"
    return f"{lead} vector" if lead else "First-token vector"


def blind_name(changes: tuple[tuple[str, object], ...]) -> str:
    """A row name for the same weights made order-blind (encoder.analysis.position.order_blind_changes)."""
    parts = {"positional": "positional = none", "window": "global attention"}
    return "same weights, " + ", ".join(parts[k] for k, _ in changes)


def _layers(layers: list[int]) -> str:
    return ", ".join(map(str, layers)) if len(layers) < 6 else f"{len(layers)} of them"


def design_lines(cfg: EncoderConfig) -> list[str]:
    """One true sentence on each design choice of later encoders, for the config on screen: positions, attention
    window, feed-forward, biases, final LayerNorm (the numbers are computed from the config)."""
    positions = {
        "sinusoidal": "Positions: sinusoidal, added to the token embeddings before layer 0 (the 2017 paper).",
        "learned": "Positions: a learned vector per position, added to the token embeddings before layer 0 (BERT).",
        "rotary": (f"Positions: rotary (RoPE, θ = {cfg.rope_theta:g}"
                   + (f", {cfg.rope_theta_local:g} in window layers" if cfg.window else "") + "). Nothing is added to "
                   "the embeddings; every layer turns each query and key by angles that grow with its position, so "
                   "the scores depend on how far apart two tokens are."),
        "none": "Positions: none. The model cannot tell one word order from another (see the Position page).",
    }[cfg.positional]
    windowed = [i for i in range(cfg.num_layers) if cfg.layer_window(i)]
    if not windowed:
        attention = "Attention: global. Every token sees every token in every layer."
    else:
        everywhere = sorted(set(range(cfg.num_layers)) - set(windowed))
        attention = (f"Attention: a sliding window of {cfg.window} tokens (each token sees the {cfg.window // 2} on "
                     f"either side) in layer{'s' if len(windowed) > 1 else ''} {_layers(windowed)}"
                     + (f"; global in layer{'s' if len(everywhere) > 1 else ''} {_layers(everywhere)}." if everywhere
                        else "."))
    if cfg.ffn == "plain":
        ffn = (f"Feed-forward: {cfg.activation.upper()}(x W1{' + b1' if cfg.bias else ''}) W2{' + b2' if cfg.bias else ''}"
               f", two matrices through a {cfg.d_ff}-wide hidden layer.")
    else:
        act = "GELU" if cfg.ffn == "geglu" else "SiLU"
        ffn = (f"Feed-forward: {'GeGLU' if cfg.ffn == 'geglu' else 'SwiGLU'}, ({act}(x W) ⊙ x V) W2: three matrices, "
               f"the product of two {cfg.d_ff}-wide projections gating each other.")
    if cfg.bias:
        bias = "Biases: every Linear adds one and every LayerNorm shifts by β."
    else:
        saved = param_summary(cfg.replace(bias=True))["total"] - param_summary(cfg)["total"]
        bias = (f"No biases: no Linear adds one and no LayerNorm shifts (as ModernBERT), {saved:,} parameters fewer "
                "than with them.")
    final = ("Final LayerNorm: one more after the last layer, on the encoder's output." if cfg.final_norm else
             "No final LayerNorm: the last layer's output is the encoder's output.")
    return [positions, attention, ffn, bias, final]


def hides_any(trace: Trace) -> bool:
    """Whether hiding the special tokens removes anything (figures show every token when nothing else would be left)."""
    return 0 < len(trace.special_positions) < trace.seq_len


def hide_label(specials: tuple[str, ...]) -> str:
    """The Hide toggle's label, by the model's own special tokens: "Hide [CLS] / [SEP]", "Hide <s> / </s>"."""
    return f"Hide {special_names(specials)}"


def attention_caption(hidden: bool, scale: str, specials: tuple[str, ...]) -> str:
    """The one-head view's caption: what a row is, whether it still sums to 1, and what the colours mean."""
    text = "Each row is one query token and shows softmax(QKᵀ/√d_k): how much it draws from each key token. "
    if hidden:
        text += (f"{special_names(specials, ' and ')} are hidden and each row is renormalised over the keys left, so "
                 "every row shown sums to 1 again (the weights are shares of what is left, not of the whole row). ")
    else:
        text += "Every row sums to 1. "
    text += {"fixed": "Colours run from 0 to 1 for every head, so heads can be compared.",
             "auto": "Colours stretch to this map's largest weight: compare shapes, not shades, across heads.",
             "row": "Each row is coloured relative to its own largest weight: the darkest cell is where that token "
                    "looks most, however spread out its attention is."}[scale]
    return text


def embedding_caption(trace: Trace, vectors: Tensor, trained: bool) -> str:
    """The Tokens page's embedding-similarity caption, with the measured mean similarity between different tokens."""
    ids = trace.token_ids
    n = len(ids)
    sim = cosine_matrix(vectors)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if ids[i] != ids[j]]
    mean = sum(float(sim[i, j]) for i, j in pairs) / len(pairs) if pairs else float("nan")
    text = (f"Each token's row of the embedding table (before positions are added); right: cosine similarity "
            f"between them. Different tokens here average {mean:.2f}. ")
    if trained:
        text += "The pretrained table puts tokens that are used alike closer together."
    else:
        text += (f"This model is random init, so different tokens are nearly orthogonal (about ±"
                 f"{1 / vectors.shape[1] ** 0.5:.2f} for d_model {vectors.shape[1]}); the same token always gets "
                 "the same row.")
    return text


def rewired_note(model_key: str, model_name: str, config_norm: str, other: str) -> str:
    """A trained model shown with its LayerNorms moved: say it was never trained that way ('' for custom models)."""
    if not is_trained(model_key) or config_norm == other:
        return ""
    trained_as = "Post-LN" if config_norm == "post" else "Pre-LN"
    rewired = "Pre-LN" if other == "pre" else "Post-LN"
    return (f"{model_name} was trained as {trained_as}. The {rewired} column runs the same weights with the "
            f"LayerNorms moved: a model that was never trained that way, so it shows what the rewiring breaks, "
            f"not what a trained {rewired} model looks like.")


def cls_share(trace: Trace, layer: int, head: int) -> float:
    """Share of query rows whose largest weight is on a special token ([CLS] or [SEP], <s> or </s>), for one head."""
    special = list(trace.special_positions)
    if not special:
        return 0.0
    top = trace.attention[layer, head].argmax(-1)
    return float(sum(int(t) in special for t in top)) / trace.seq_len


def dropout_note(train: bool, dropout: float) -> str:
    """The visible note for training mode; '' in eval mode."""
    if not train:
        return ""
    if dropout == 0:
        return "Training mode is on, but this model's dropout is 0, so nothing is dropped."
    return (f"Training mode is on: dropout (p = {dropout:g}) zeroes a random {dropout:.0%} of values at every "
            "dropout site and scales the rest up, so every figure shows one random draw.")


ROUNDING = 1e-5  # differences below this in float32 attention are rounding, not information


def rotary_caption(table: Tensor, theta: float) -> str:
    """The rotary table's caption: each row's angles, and the measured fact that row similarity depends on distance."""
    sim = cosine_matrix(table.double())
    n = table.shape[0]
    spread = max((float(sim.diagonal(k).max() - sim.diagonal(k).min()) for k in range(1, n)), default=0.0)
    return (f"Rotary positions (RoPE, θ = {theta:g}) add nothing to the embeddings. Left: at position m, each of the "
            f"{table.shape[1] // 2} pairs of dimensions of every query and key is turned by the angle m·θ_i (cos, then "
            "sin). Right: how alike two positions' turns are. Every diagonal is constant (measured spread "
            f"{spread:.1g}): q_m·k_n depends on the distance m − n alone, so attention sees relative positions.")


def shuffle_intro(positional: str, window: int) -> str:
    """What the shuffle check tests, for this model's kind of positions (and its sliding window, if any)."""
    text = ("Attention is a weighted sum, so without positional information each layer is blind to order: shuffling "
            "the input only shuffles the outputs and the rows and columns of every attention map.")
    if positional == "rotary":
        text += (" Rotary positions add nothing to the input, yet they are positional: every score depends on the "
                 "distance between query and key, and a shuffle changes the distances.")
    if window:
        text += (" A sliding window is positional too: a query sees only the keys near it, and a shuffle changes "
                 "which keys those are; the order-blind row therefore also attends globally.")
    return text


def shuffle_caption(attn_diff: dict[str, float]) -> str:
    """The shuffle chart's caption: which models computed the same thing for every word order (measured)."""
    blind = [name for name, d in attn_diff.items() if d < ROUNDING]
    seeing = [name for name, d in attn_diff.items() if d >= ROUNDING]
    parts = []
    if blind:
        top = max(attn_diff[n] for n in blind)
        parts.append(f"For {' and '.join(blind)} the differences are float rounding (at most {top:.1g}): the model "
                     "computed the same thing for every word order.")
    if seeing:
        top = max(attn_diff[n] for n in seeing)
        parts.append(f"For {' and '.join(seeing)} they reach {top:.2g}: the model knows where each word stands.")
    return " ".join(parts)
