"""layer_diagram(config) -> graphviz.Digraph: the data flow of one encoder layer; node ids are the tap names."""

from __future__ import annotations

import itertools
import math
import shutil
from contextlib import nullcontext

import graphviz
import pandas as pd

from ..config import EncoderConfig
from ..model import DROPOUTS, TAPS, Wire, flow_edges, placement
from .text import printable

FINAL = "final"  # the node of the stack's final LayerNorm (Trace.final), drawn when the config has one
# The node of the positional encoding, drawn for every model: added to the embeddings (sinusoidal, learned) and so
# into layer 0's input, or turning q and k inside every attention (rotary), or absent (none).
POSITIONS = "positions"

# Pastel fills in the spirit of the seeds' diagrams.
FILL = {
    "input": "#a5d8ff", "output": "#a5d8ff", "attn": "#bac8ff", "ffn_hidden": "#d0bfff", "ffn": "#d0bfff",
    "add1": "#b2f2bb", "add2": "#b2f2bb", "norm1": "#ffec99", "norm2": "#ffec99", FINAL: "#ffec99",
    POSITIONS: "#ffd8a8",
}
RMS_SCALE = ("#f1f6fd", "#dbe8f7", "#c0d7ee", "#94bde0", "#6498cc", "#3a73b0", "#1c4f8a")  # light = small RMS
INK, RESIDUAL, HIGHLIGHT, ALERT = "#343a40", "#868e96", "#e8590c", "#e03131"
FONT = "sans-serif"
HIGHLIGHTS = (*TAPS, *DROPOUTS, FINAL)
INSTALL_HINT = (
    "SVG export needs the Graphviz `dot` program, which is not installed on this server; "
    "install Graphviz: apt-get install graphviz (Debian/Ubuntu) or brew install graphviz (macOS). "
    "The diagram itself still shows, and the DOT download works without it."
)


def _text(*lines: str) -> str:
    """Plain DOT label from lines: backslashes and <...> lose their meaning; lines are centred."""
    return graphviz.nohtml("\\n".join(graphviz.escape(line) for line in lines))


def _num(x: float) -> str:
    return f"{x:.3g}"


def _shape(seq: int | None, width: int) -> str:
    """A tensor's shape, short: "9×384" with a trace, "T×384" (T tokens) without."""
    return f"{'T' if seq is None else seq}×{width}"


GATES = {"geglu": "GeGLU", "swiglu": "SwiGLU"}


def _window_text(cfg: EncoderConfig, layer: int) -> str:
    """The attention window of `layer`, short: "window ±4" or "global" ('' when no layer has a window)."""
    if not cfg.window:
        return ""
    w = cfg.layer_window(layer)
    return f"window ±{w // 2}" if w else "global"


def _compact_node_text(cfg: EncoderConfig, wire: Wire, seq: int | None, layer: int = 0) -> tuple[list[str], dict[str, str]]:
    """One short label line for a projector: the operation, and the shape where the width changes."""
    ends = {"shape": "box", "style": "filled,rounded,bold"}  # the layer's input and output: a heavier frame
    if wire.op == "input":
        return [f"Input {_shape(seq, cfg.d_model)}"], ends
    if wire.op == "=":
        return ["Output"], ends
    if wire.op == "attn":
        extra = " · ".join(t for t in ("RoPE on q, k" if cfg.positional == "rotary" else "", _window_text(cfg, layer)) if t)
        return [f"Self-Attention, {cfg.num_heads} head{'s' if cfg.num_heads > 1 else ''}", *([extra] if extra else [])], {}
    if wire.op == "w1":
        if cfg.ffn in GATES:
            return [f"{GATES[cfg.ffn]} W, V: {_shape(seq, cfg.d_ff)}"], {}
        return [f"W1 + {cfg.activation.upper()}: {_shape(seq, cfg.d_ff)}"], {}
    if wire.op == "w2":
        return ["W2"], {}
    if wire.op == "+":
        return ["+"], {"shape": "circle", "style": "filled", "width": "0.3", "fixedsize": "true"}
    if _skipped(cfg, wire, layer):
        return ["no LayerNorm"], {"style": "filled,rounded,dashed"}
    return ["LayerNorm"], {}  # the heading says "no biases" once for all of them


def _skipped(cfg: EncoderConfig, wire: Wire, layer: int) -> bool:
    """Whether this LayerNorm is the identity in `layer`: ModernBERT's layer 0 has no first LayerNorm."""
    return wire.op == "ln1" and layer == 0 and not cfg.first_norm1


def _node_text(cfg: EncoderConfig, wire: Wire, layer: int = 0) -> tuple[list[str], dict[str, str]]:
    """Label lines naming the operation that computes a tap, and the node's shape attributes."""
    bias = "" if cfg.bias else " (no bias)"
    if wire.op in ("input", "="):
        return ["Input x" if wire.op == "input" else "Output"], {"shape": "ellipse", "style": "filled"}
    if wire.op == "attn":
        window = _window_text(cfg, layer)
        where = {"": [], "global": [f"global attention in layer {layer}"]}.get(
            window, [f"layer {layer}: sliding window, keys ±{cfg.layer_window(layer) // 2}"])
        return ["Multi-Head Self-Attention" + bias, f"h={cfg.num_heads}, d_k={cfg.d_head}", *where], {}
    if wire.op == "+":
        return ["+"], {"shape": "circle", "style": "filled", "width": "0.45", "fixedsize": "true", "fontsize": "18"}
    if wire.op in ("ln1", "ln2"):
        if _skipped(cfg, wire, layer):
            return ["no LayerNorm in layer 0", "(the embeddings end in one)"], {"style": "filled,rounded,dashed"}
        return ["LayerNorm" + ("" if cfg.bias else " (no β)")], {}
    if wire.op == "w1":
        if cfg.ffn in GATES:
            act = "GELU" if cfg.ffn == "geglu" else "SiLU"
            return [f"{GATES[cfg.ffn]}{bias}", f"{act}(x W) ⊙ (x V)"], {}
        return [f"Linear W1 + {cfg.activation.upper()}{bias}"], {}
    return [f"Linear W2{bias}"], {}


def _positions_text(cfg: EncoderConfig, compact: bool) -> tuple[list[str], str, str]:
    """The positional-encoding node's lines, the tap its edge enters, and that edge's label (full drawing)."""
    if cfg.positional == "rotary":
        thetas = f"θ {cfg.rope_theta:,.0f}" + (f", window layers {cfg.rope_theta_local:,.0f}"
                                                if cfg.window and cfg.rope_theta_local != cfg.rope_theta else "")
        if compact:  # the attention node says "RoPE on q, k": an edge across the drawing would cross its columns
            return ["Embeddings; RoPE in attention"], "input", ""
        return ["Rotary positions (RoPE)", thetas], "attn", _text("turns q and k", "in every layer")
    kind = {"sinusoidal": "sinusoidal", "learned": "learned"}.get(cfg.positional)
    if compact:
        return [f"Embeddings + {kind} positions" if kind else "Embeddings, no positions"], "input", ""
    lines = ["Embeddings", f"token + {kind} positions" if kind else "token only: no positional encoding"]
    return lines, "input", _text("into layer 0")


def _compact_edge_text(cfg: EncoderConfig, kind: str, highlight: str | None) -> str:
    """Edge label for a projector: only the dropout (the node labels carry the shapes, dashes mark the residuals)."""
    if kind in ("drop1", "drop2", "hidden"):
        if cfg.dropout > 0:
            return _text(f"dropout {cfg.dropout:g}")
        if kind == highlight:
            return _text("dropout off")
    return ""


def _columns(norm: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The taps of the two sub-layers, for a two-column drawing: the first column ends at the residual stream
    between them (the tap the second residual add reads: norm1 in Post-LN, add1 in Pre-LN)."""
    wires = placement(norm)
    second_add = [w for w in wires if w.op == "+"][1]
    split = next(tail for tail, kind in second_add.inputs if kind == "res")
    order = tuple(w.tap for w in wires)
    cut = order.index(split) + 1
    return order[:cut], order[cut:]


def _edge_text(cfg: EncoderConfig, kind: str, seq: int | None, highlight: str | None) -> str:
    """Edge label: what travels along it, with its real shape."""
    rows = "seq" if seq is None else str(seq)
    shape = f"({rows}, {cfg.d_ff if kind == 'hidden' else cfg.d_model})"
    if kind == "qkv":
        return _text("Q, K, V", shape)
    if kind in ("drop1", "drop2", "hidden"):
        if cfg.dropout > 0:
            return _text(f"dropout p={cfg.dropout:g}", shape)
        if kind == highlight:
            return _text("dropout off (p=0)", shape)
    return _text("residual") if kind == "res" else _text(shape)


def _short(x: float) -> str:
    """A statistic for a projector: two decimals (0.00 for the mean of a LayerNorm's output), 3 digits when large."""
    text = f"{x:.2f}" if abs(x) < 100 else f"{x:.3g}"
    return "0.00" if text == "-0.00" else text


def _rms_colours(rows: pd.DataFrame) -> tuple[dict[str, int], float, float]:
    """Index into RMS_SCALE for each tap (log scale over this layer's finite RMS values), and the range."""
    finite = {tap: float(rms) for tap, rms in zip(rows["tap"], rows["rms"], strict=True) if math.isfinite(rms) and rms > 0}
    if not finite:
        return {}, math.nan, math.nan
    lo, hi = min(finite.values()), max(finite.values())
    span = math.log(hi) - math.log(lo)
    top = len(RMS_SCALE) - 1
    return {t: round(top * (math.log(v) - math.log(lo)) / span) if span > 0 else top // 2 for t, v in finite.items()}, lo, hi


def _legend(lo: float, hi: float, any_nonfinite: bool, compact: bool = False) -> str:
    """HTML-like graph label with colour swatches; holds numbers only, never user text."""
    width, scale = (10, "(log)") if compact else (18, " (log scale)")
    swatches = "".join(f'<TD BGCOLOR="{c}" WIDTH="{width}" HEIGHT="14"></TD>' for c in RMS_SCALE)
    row = f"<TR><TD>RMS {_num(lo)}</TD>{swatches}<TD>{_num(hi)} {scale}</TD></TR>" if math.isfinite(lo) else ""
    alert = f'<TR><TD COLSPAN="{len(RMS_SCALE) + 2}"><FONT COLOR="{ALERT}">red border: NaN/Inf</FONT></TD></TR>'
    return f'<<TABLE BORDER="0" CELLSPACING="2" CELLPADDING="2">{row}{alert if any_nonfinite else ""}</TABLE>>'


# Streamlit's st.graphviz_chart draws every text of the SVG in one CSS font size (0.8 × its small font: 11.04 px in
# presentation mode, whose root font is 18.4 px), whatever the DOT says; the compact drawing is laid out for that size,
# so its boxes fit its text and its text grows only with the drawing's scale.
COMPACT_FONT = "11"
# Graphviz sizes text with built-in metrics, by name: Arial's for Helvetica, Times' for an unknown name such as
# sans-serif, which are narrower than Streamlit's font and would let labels stick out of their boxes.
COMPACT_FONTNAME = "Helvetica"
# Graph, node and edge attributes of the full drawing (False) and the compact one (True), which is for a projector:
# one column per sub-layer with tight spacing, short enough to be drawn large below the title of a 16:9 or 4:3 screen.
STYLES = {
    False: (dict(rankdir="TB", fontname=FONT, fontsize="18", fontcolor=INK, nodesep="0.4", ranksep="0.32",
                 newrank="true", labelloc="t", pad="0.2"),
            dict(shape="box", style="filled,rounded", fontname=FONT, fontsize="14", fontcolor=INK, color="#495057",
                 penwidth="1.2", margin="0.18,0.07"),
            dict(fontname=FONT, fontsize="12", fontcolor="#495057", color="#495057", arrowsize="0.7")),
    True: (dict(rankdir="TB", fontname=COMPACT_FONTNAME, fontsize=COMPACT_FONT, fontcolor=INK, nodesep="0.2", ranksep="0.15",
                newrank="true", labelloc="t", pad="0.03"),
           dict(shape="box", style="filled,rounded", fontname=COMPACT_FONTNAME, fontsize=COMPACT_FONT, fontcolor=INK,
                color="#495057", penwidth="1", margin="0.08,0.03", width="0.4", height="0.3"),
           dict(fontname=COMPACT_FONTNAME, fontsize=COMPACT_FONT, fontcolor="#495057", color="#495057", arrowsize="0.6")),
}


def layer_diagram(
    config: EncoderConfig,
    stats: pd.DataFrame | None = None,
    layer: int = 0,
    highlight: str | None = None,
    seq: int | None = None,
    title: str | None = None,
    compact: bool = False,
) -> graphviz.Digraph:
    """Digraph of one encoder layer for `config`; with `stats` (Trace.stats()) nodes show that layer's numbers.

    compact=True draws it for a projector: one-line labels, one column per sub-layer (down the first, up the
    second), dropout as the only edge label; the same nodes (the taps) and data-flow edges (PLACEMENTS).
    """
    if highlight is not None and highlight not in HIGHLIGHTS:
        raise ValueError(f"highlight={highlight!r} is not a tap or dropout; choose one of {', '.join(HIGHLIGHTS)}.")
    rows = None
    if stats is not None:
        rows = stats[stats["layer"] == layer]
        if rows.empty:
            top = int(stats["layer"].max()) if len(stats) else -1
            raise ValueError(f"The statistics have no layer {layer}; choose a layer from 0 to {top}.")
    norm = config.norm
    graph_attr, node_attr, edge_attr = STYLES[compact]
    g = graphviz.Digraph("encoder_layer", graph_attr=graph_attr, node_attr=node_attr, edge_attr=edge_attr)
    if title:
        g.attr(label=_text(printable(title, 120)))
    colours, lo, hi = _rms_colours(rows) if rows is not None else ({}, math.nan, math.nan)
    # Each tap's row once, as a dict: a DataFrame mask per tap (and itertuples, which indexes cell by cell) cost
    # ~5 ms a diagram, drawn on every run of the page
    by_tap = {} if rows is None else {r["tap"]: r for r in rows.to_dict("records")}  # one row per tap in a layer
    bad = {tap: int(r["nonfinite"]) for tap, r in by_tap.items() if r["nonfinite"] > 0}
    if compact:
        heading = [f"{'Post' if norm == 'post' else 'Pre'}-LN layer × {config.num_layers}"
                   + ("" if config.bias else ", no biases")
                   + (f", layer {layer}" if rows is None and config.window else "")
                   + ("" if rows is None else f", statistics of layer {layer}")]
    else:
        where = "Post-LN: LayerNorm after each residual add" if norm == "post" else "Pre-LN: LayerNorm before each sub-layer"
        heading = [f"Encoder layer × {config.num_layers}", where]
        if config.window:
            heading.append(f"drawn: layer {layer} ({_window_text(config, layer)})")
        if not config.bias:
            heading.append("no biases in any Linear or LayerNorm")
        if rows is not None:
            heading.append(f"statistics of layer {layer}")
    with g.subgraph(name="cluster_layer") as outer:
        # The heading under the layer, where no edge runs: at the top the edge from the embeddings into the layer
        # struck through it. Compact: on the left (an edge up to a final LayerNorm may run on the right), with no
        # border, since dot may set an edge label of the right-hand column partly outside the cluster. The full
        # drawing's edge down to a final LayerNorm leaves the layer at the bottom's centre: there it stays on top.
        below = compact or not config.final_norm
        outer.attr(label=_text(*heading), style="filled,rounded", fillcolor="#f8f9fa",
                   color="#f8f9fa" if compact else "#ced4da", fontsize=COMPACT_FONT if compact else "16",
                   labeljust="l" if compact else "c", labelloc="b" if below else "t", margin="6" if compact else "16")
        inner = outer.subgraph(name="cluster_stats") if rows is not None else nullcontext(outer)
        with inner as body:
            if rows is not None:
                body.attr(label=_legend(lo, hi, bool(bad), compact), labelloc="b", color="#f8f9fa",
                          fontsize=COMPACT_FONT if compact else "12")
            for wire in placement(norm):
                tap = wire.tap
                lines, attrs = (_compact_node_text(config, wire, seq, layer) if compact
                                else _node_text(config, wire, layer))
                attrs = {"fillcolor": FILL[tap], "tooltip": tap, **attrs}
                if rows is not None:
                    r = by_tap.get(tap)
                    if r is not None:
                        if not compact:
                            lines = [*lines, f"mean {_num(r['mean'])} / std {_num(r['std'])}"]
                        elif wire.op != "=":  # the output is the tensor beside it: its numbers once are enough
                            lines = [*lines, f"μ {_short(r['mean'])}  σ {_short(r['std'])}"]
                        attrs["tooltip"] = f"{tap}: RMS {_num(r['rms'])}, min {_num(r['min'])}, max {_num(r['max'])}"
                        if attrs.get("shape") == "circle":  # a "+" circle cannot hold the numbers
                            attrs.update(shape="box", style="filled,rounded", fixedsize="false",
                                         fontsize=node_attr["fontsize"])
                        if tap in colours:
                            attrs["fillcolor"] = RMS_SCALE[colours[tap]]
                            attrs["fontcolor"] = "white" if colours[tap] >= len(RMS_SCALE) - 2 else INK
                        else:
                            attrs["fillcolor"] = "white"
                if tap in bad:
                    lines = [*lines, f"NaN/Inf: {bad[tap]}"]
                    attrs.update(color=ALERT, penwidth="3")
                if tap == highlight:
                    attrs.update(color=ALERT if tap in bad else HIGHLIGHT, penwidth="4.5")
                body.node(tap, _text(*lines), **attrs)
            if compact:
                _two_columns(body, norm)
    rank, first = (_ranks(norm), _columns(norm)[0]) if compact else ({}, ())
    for tail, head, kind in flow_edges(norm):
        attrs = {}
        if kind == "res":
            attrs = dict(style="dashed", color=RESIDUAL, fontcolor=RESIDUAL, penwidth="1.5", tooltip="residual connection")
        if kind == highlight:
            attrs = dict(color=HIGHLIGHT, fontcolor=HIGHLIGHT, penwidth="3.5", arrowsize="1")
        ends = (tail, head)
        if compact and rank[head] < rank[tail]:  # up the second column: laid out as a downward edge, drawn backwards
            ends, attrs["dir"] = (head, tail), "back"
        if compact and kind == "res" and head in first:  # around the first column's left, clear of the second
            attrs.update(tailport="w", headport="w")
        label = _compact_edge_text(config, kind, highlight) if compact else _edge_text(config, kind, seq, highlight)
        g.edge(*ends, label, **attrs)
    # The positional encoding, outside the repeated layer: above its input (sinusoidal, learned, none), or turning q
    # and k in the attention of every layer (rotary).
    lines, into, label = _positions_text(config, compact)
    g.node(POSITIONS, _text(*lines), fillcolor=FILL[POSITIONS], tooltip=f"positional encoding: {config.positional}",
           **({"style": "filled,rounded,dashed"} if config.positional == "none" else {}))
    g.edge(POSITIONS, into, label, style="dashed", color=RESIDUAL)
    if into != "input":  # drawn above the layer's input, where the tokens come in
        g.edge(POSITIONS, "input", style="invis")
    if config.final_norm:  # Encoder.final_ln: once, after the last of the num_layers layers
        ring = dict(color=HIGHLIGHT, penwidth="4.5") if highlight == FINAL else {}
        if compact:
            g.node(FINAL, _text("Final LayerNorm", f"after layer {config.num_layers - 1}"), fillcolor=FILL[FINAL],
                   tooltip="final LayerNorm, once after the stack", **ring)
            g.edge(FINAL, "output", style="dashed", dir="back")  # above the output, which is on the top row
        else:
            g.node(FINAL, _text("Final LayerNorm", "after the stack"), fillcolor=FILL[FINAL], tooltip="final LayerNorm",
                   **ring)
            g.edge("output", FINAL, _text(f"after layer {config.num_layers - 1}"), style="dashed")
    return g


def _ranks(norm: str) -> dict[str, int]:
    """Row of each tap in the two-column drawing: down the first sub-layer's column, up the second's, so the layer's
    input and output are both on the top row and the step from one column to the other is short."""
    first, second = _columns(norm)
    return {**{tap: i for i, tap in enumerate(first)}, **{tap: len(second) - 1 - i for i, tap in enumerate(second)}}


def _two_columns(body: graphviz.Digraph, norm: str) -> None:
    """The rows of the two-column drawing, each ordered first column, second column (invisible edges)."""
    rank = _ranks(norm)
    first, second = _columns(norm)
    for i in range(max(rank.values()) + 1):
        row = [tap for tap in (*first, *second) if rank[tap] == i]
        with body.subgraph() as same:
            same.attr(rank="same")
            for tap in row:
                same.node(tap)
            for left, right in itertools.pairwise(row):
                same.edge(left, right, style="invis")


def svg_problem() -> str:
    """Why this server cannot export SVG (no Graphviz `dot` on its PATH), or "" when it can."""
    return "" if shutil.which("dot") else INSTALL_HINT


def svg_bytes(graph: graphviz.Digraph) -> bytes:
    """The diagram as SVG, drawn by the Graphviz `dot` program; ValueError saying how to install it when absent."""
    try:
        return graph.pipe(format="svg", engine="dot")
    except graphviz.ExecutableNotFound:
        raise ValueError(INSTALL_HINT) from None
    except graphviz.CalledProcessError as err:
        detail = (err.stderr or b"").decode(errors="replace").strip()[:300]
        raise ValueError(f"Graphviz could not draw this diagram: {detail}") from None
