"""layer_diagram(config) -> graphviz.Digraph: the data flow of one encoder layer; node ids are the tap names."""

from __future__ import annotations

import math
import unicodedata
from contextlib import nullcontext

import graphviz
import pandas as pd

from ..config import EncoderConfig
from ..model import DROPOUTS, TAPS, Wire, flow_edges, placement

FINAL = "final"  # the node of the stack's final LayerNorm (Trace.final), drawn when the config has one

# Pastel fills in the spirit of the seeds' diagrams.
FILL = {
    "input": "#a5d8ff", "output": "#a5d8ff", "attn": "#bac8ff", "ffn_hidden": "#d0bfff", "ffn": "#d0bfff",
    "add1": "#b2f2bb", "add2": "#b2f2bb", "norm1": "#ffec99", "norm2": "#ffec99", FINAL: "#ffec99",
}
RMS_SCALE = ("#f1f6fd", "#dbe8f7", "#c0d7ee", "#94bde0", "#6498cc", "#3a73b0", "#1c4f8a")  # light = small RMS
INK, RESIDUAL, HIGHLIGHT, ALERT = "#343a40", "#868e96", "#e8590c", "#e03131"
FONT = "sans-serif"
HIGHLIGHTS = (*TAPS, *DROPOUTS)
INSTALL_HINT = (
    "SVG export needs the Graphviz `dot` program, which is not installed on this server; "
    "install Graphviz: apt-get install graphviz (Debian/Ubuntu) or brew install graphviz (macOS). "
    "The diagram itself still shows, and the DOT download works without it."
)


def printable(text: str, limit: int | None = None) -> str:
    """Text with control characters shown as symbols and bidi overrides neutralised, optionally shortened."""
    out = []
    for ch in text:
        code = ord(ch)
        if code < 32:
            out.append(chr(0x2400 + code))  # the Unicode "control picture" for C0 characters, e.g. ␀
        elif code == 127 or unicodedata.category(ch) == "Cc" or 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069:
            out.append("\ufffd")
        else:
            out.append(ch)
    text = "".join(out)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def _text(*lines: str) -> str:
    """Plain DOT label from lines: backslashes and <...> lose their meaning; lines are centred."""
    return graphviz.nohtml("\\n".join(graphviz.escape(line) for line in lines))


def _num(x: float) -> str:
    return f"{x:.3g}"


def _node_text(cfg: EncoderConfig, wire: Wire) -> tuple[list[str], dict[str, str]]:
    """Label lines naming the operation that computes a tap, and the node's shape attributes."""
    if wire.op in ("input", "="):
        return ["Input x" if wire.op == "input" else "Output"], {"shape": "ellipse", "style": "filled"}
    if wire.op == "attn":
        return ["Multi-Head Self-Attention", f"h={cfg.num_heads}, d_k={cfg.d_head}"], {}
    if wire.op == "+":
        return ["+"], {"shape": "circle", "style": "filled", "width": "0.45", "fixedsize": "true", "fontsize": "18"}
    if wire.op in ("ln1", "ln2"):
        return ["LayerNorm"], {}
    if wire.op == "w1":
        return [f"Linear W1 + {cfg.activation.upper()}"], {}
    return ["Linear W2"], {}


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


def _rms_colours(rows: pd.DataFrame) -> tuple[dict[str, int], float, float]:
    """Index into RMS_SCALE for each tap (log scale over this layer's finite RMS values), and the range."""
    finite = {r.tap: float(r.rms) for r in rows.itertuples() if math.isfinite(r.rms) and r.rms > 0}
    if not finite:
        return {}, math.nan, math.nan
    lo, hi = min(finite.values()), max(finite.values())
    span = math.log(hi) - math.log(lo)
    top = len(RMS_SCALE) - 1
    return {t: round(top * (math.log(v) - math.log(lo)) / span) if span > 0 else top // 2 for t, v in finite.items()}, lo, hi


def _legend(lo: float, hi: float, any_nonfinite: bool) -> str:
    """HTML-like graph label with colour swatches; holds numbers only, never user text."""
    swatches = "".join(f'<TD BGCOLOR="{c}" WIDTH="18" HEIGHT="14"></TD>' for c in RMS_SCALE)
    row = f"<TR><TD>RMS {_num(lo)}</TD>{swatches}<TD>{_num(hi)}  (log scale)</TD></TR>" if math.isfinite(lo) else ""
    alert = f'<TR><TD COLSPAN="{len(RMS_SCALE) + 2}"><FONT COLOR="{ALERT}">red border: NaN/Inf</FONT></TD></TR>'
    return f'<<TABLE BORDER="0" CELLSPACING="2" CELLPADDING="2">{row}{alert if any_nonfinite else ""}</TABLE>>'


def layer_diagram(
    config: EncoderConfig,
    stats: pd.DataFrame | None = None,
    layer: int = 0,
    highlight: str | None = None,
    seq: int | None = None,
    title: str | None = None,
) -> graphviz.Digraph:
    """Digraph of one encoder layer for `config`; with `stats` (Trace.stats()) nodes show that layer's numbers."""
    if highlight is not None and highlight not in HIGHLIGHTS:
        raise ValueError(f"highlight={highlight!r} is not a tap or dropout; choose one of {', '.join(HIGHLIGHTS)}.")
    rows = None
    if stats is not None:
        rows = stats[stats["layer"] == layer]
        if rows.empty:
            top = int(stats["layer"].max()) if len(stats) else -1
            raise ValueError(f"The statistics have no layer {layer}; choose a layer from 0 to {top}.")
    norm = config.norm
    g = graphviz.Digraph(
        "encoder_layer",
        graph_attr=dict(rankdir="TB", fontname=FONT, fontsize="18", fontcolor=INK, nodesep="0.4", ranksep="0.32",
                        newrank="true", labelloc="t", pad="0.2"),
        node_attr=dict(shape="box", style="filled,rounded", fontname=FONT, fontsize="14", fontcolor=INK, color="#495057",
                       penwidth="1.2", margin="0.18,0.07"),
        edge_attr=dict(fontname=FONT, fontsize="12", fontcolor="#495057", color="#495057", arrowsize="0.7"),
    )
    if title:
        g.attr(label=_text(printable(title, 120)))
    colours, lo, hi = _rms_colours(rows) if rows is not None else ({}, math.nan, math.nan)
    bad = {r.tap: int(r.nonfinite) for r in rows.itertuples() if r.nonfinite > 0} if rows is not None else {}
    where = "Post-LN: LayerNorm after each residual add" if norm == "post" else "Pre-LN: LayerNorm before each sub-layer"
    heading = [f"Encoder layer × {config.num_layers}", where]
    if rows is not None:
        heading.append(f"statistics of layer {layer}")
    with g.subgraph(name="cluster_layer") as outer:
        outer.attr(label=_text(*heading), style="filled,rounded", fillcolor="#f8f9fa", color="#ced4da", fontsize="16",
                   labeljust="c", margin="16")
        inner = outer.subgraph(name="cluster_stats") if rows is not None else nullcontext(outer)
        with inner as body:
            if rows is not None:
                body.attr(label=_legend(lo, hi, bool(bad)), labelloc="b", color="#f8f9fa", fontsize="12")
            for wire in placement(norm):
                tap = wire.tap
                lines, attrs = _node_text(config, wire)
                attrs = {"fillcolor": FILL[tap], "tooltip": tap, **attrs}
                if rows is not None:
                    row = rows[rows["tap"] == tap]
                    if not row.empty:
                        r = row.iloc[0]
                        lines = [*lines, f"mean {_num(r['mean'])} / std {_num(r['std'])}"]
                        attrs["tooltip"] = f"{tap}: RMS {_num(r['rms'])}, min {_num(r['min'])}, max {_num(r['max'])}"
                        if attrs.get("shape") == "circle":  # a "+" circle cannot hold the numbers
                            attrs.update(shape="box", style="filled,rounded", fixedsize="false", fontsize="14")
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
    for tail, head, kind in flow_edges(norm):
        attrs = {}
        if kind == "res":
            attrs = dict(style="dashed", color=RESIDUAL, fontcolor=RESIDUAL, penwidth="1.5", tooltip="residual connection")
        if kind == highlight:
            attrs = dict(color=HIGHLIGHT, fontcolor=HIGHLIGHT, penwidth="3.5", arrowsize="1")
        g.edge(tail, head, _edge_text(config, kind, seq, highlight), **attrs)
    if config.final_norm:  # Encoder.final_ln: once, after the last of the num_layers layers
        g.node(FINAL, _text("Final LayerNorm", "after the stack"), fillcolor=FILL[FINAL], tooltip="final LayerNorm")
        g.edge("output", FINAL, _text(f"after layer {config.num_layers - 1}"), style="dashed")
    return g


def svg_bytes(graph: graphviz.Digraph) -> bytes:
    """The diagram as SVG, drawn by the Graphviz `dot` program; ValueError saying how to install it when absent."""
    try:
        return graph.pipe(format="svg", engine="dot")
    except graphviz.ExecutableNotFound:
        raise ValueError(INSTALL_HINT) from None
    except graphviz.CalledProcessError as err:
        detail = (err.stderr or b"").decode(errors="replace").strip()[:300]
        raise ValueError(f"Graphviz could not draw this diagram: {detail}") from None
