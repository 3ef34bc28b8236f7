"""The data-flow diagram: taps as nodes, the real data flow per norm placement, live statistics, and DOT that always parses."""

import json
import shutil
import subprocess

import pytest

import encoder
from encoder import TAPS
from encoder.model import flow_edges, flow_order
from encoder.viz import diagram, style

MINILM = encoder.EncoderConfig(d_model=384, num_heads=12, d_ff=1536, num_layers=6, activation="gelu")
HOSTILE_TITLES = ['say "hi"', "back\\slash", "trailing\\", "}", "a -> b", "<b>bold</b>", "<<TABLE>>", "\\N \\G \\l",
                  'x"; node [label="pwn"]; "', "line\nbreak\x00 \u202e", "}}} digraph { a -> b }"]


def dot(graph, fmt: str) -> str:
    """Run the Graphviz `dot` program on the graph's source; fail (never skip) when it is missing."""
    if shutil.which("dot") is None:
        pytest.fail("Graphviz `dot` is not installed: apt-get install graphviz (Debian/Ubuntu) or brew install graphviz")
    done = subprocess.run(["dot", f"-T{fmt}"], input=graph.source.encode(), capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr.decode()
    assert b"syntax error" not in done.stderr and b"Warning" not in done.stderr, done.stderr.decode()
    return done.stdout.decode()


def layout(graph) -> tuple[dict[str, dict], dict[tuple[str, str], dict], list[dict]]:
    """Nodes by name, edges by (tail, head) and clusters, as Graphviz itself parsed them."""
    data = json.loads(dot(graph, "json"))
    objects = data["objects"]
    nodes = {o["name"]: o for o in objects if "nodes" not in o}
    names = {o["_gvid"]: o["name"] for o in objects}
    edges = {(names[e["tail"]], names[e["head"]]): e for e in data.get("edges", [])}
    return nodes, edges, [o for o in objects if "nodes" in o]


@pytest.fixture(scope="module")
def trace() -> encoder.Trace:
    cfg = encoder.EncoderConfig(d_model=64, num_heads=4, d_ff=256, num_layers=3)
    return encoder.run(encoder.build_model(cfg), "The cat sat on the mat.")


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_every_node_is_a_tap_the_model_produced_and_every_tap_is_drawn(norm):
    cfg = MINILM.replace(norm=norm)
    nodes, edges, _ = layout(diagram.layer_diagram(cfg))
    small = encoder.build_model(encoder.EncoderConfig(d_model=16, num_heads=2, d_ff=32, num_layers=1, norm=norm))
    produced = encoder.run(small, "a b").taps[0]  # what the forward really returned
    # the layer's nodes, and outside it the positional encoding, drawn for every model
    assert sorted(set(nodes) - {diagram.POSITIONS}) == sorted(produced) == sorted(flow_order(norm))
    assert {name for edge in edges for name in edge} == {*produced, diagram.POSITIONS}


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_edges_are_the_placement_table(norm):
    graph = diagram.layer_diagram(MINILM.replace(norm=norm))
    edges = layout(graph)[1]
    table = flow_edges(norm)
    into = {(diagram.POSITIONS, "input")}  # the embeddings' positions enter layer 0's input
    assert set(edges) == {(tail, head) for tail, head, _ in table} | into and len(edges) == len(table) + 1
    dashed = {e for e, attrs in edges.items() if attrs.get("style") == "dashed"}
    assert dashed == {(tail, head) for tail, head, kind in table if kind == "res"} | into
    (qkv,) = [(tail, head) for tail, head, kind in table if kind == "qkv"]
    assert "Q, K, V" in edges[qkv]["label"]
    assert graph.source.count("->") == len(table) + 1


def test_post_and_pre_draw_different_data_flows():
    post, pre = (layout(diagram.layer_diagram(MINILM.replace(norm=n)))[1] for n in ("post", "pre"))
    assert set(post) != set(pre)
    assert ("add1", "norm1") in post and ("input", "norm1") in pre  # LayerNorm after vs before the add


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_final_layer_norm_is_drawn_when_the_config_has_one(norm):
    cfg = MINILM.replace(norm=norm, final_norm=True)
    nodes, edges, clusters = layout(diagram.layer_diagram(cfg))
    assert set(nodes) == {*TAPS, diagram.FINAL, diagram.POSITIONS}
    assert "Final LayerNorm" in nodes[diagram.FINAL]["label"] and "after the stack" in nodes[diagram.FINAL]["label"]
    assert ("output", diagram.FINAL) in edges and "after layer 5" in edges["output", diagram.FINAL]["label"]
    layer_cluster = next(c for c in clusters if "Encoder layer" in c["label"])
    inside = {o["name"] for o in json.loads(dot(diagram.layer_diagram(cfg), "json"))["objects"]
              if o.get("_gvid") in layer_cluster["nodes"]}
    assert diagram.FINAL not in inside and diagram.POSITIONS not in inside  # once, not inside the repeated layer
    assert diagram.FINAL not in layout(diagram.layer_diagram(cfg.replace(final_norm=False)))[0]


def test_edges_carry_real_shapes_and_dropout():
    edges = layout(diagram.layer_diagram(MINILM, seq=9))[1]
    assert edges["norm1", "ffn_hidden"]["label"] == "(9, 384)"
    assert "(9, 1536)" in edges["ffn_hidden", "ffn"]["label"]
    for edge in (("attn", "add1"), ("ffn", "add2")):
        assert edges[edge]["label"] == "dropout p=0.1\\n(9, 384)"
    generic = layout(diagram.layer_diagram(MINILM.replace(d_model=96, num_heads=4, d_ff=200, dropout=0.0)))[1]
    assert generic["norm1", "ffn_hidden"]["label"] == "(seq, 96)" and generic["ffn_hidden", "ffn"]["label"] == "(seq, 200)"
    assert not any("dropout" in e["label"] for e in generic.values())


def test_labels_name_the_operations_and_the_stack():
    nodes, _, clusters = layout(diagram.layer_diagram(MINILM))
    assert "Multi-Head Self-Attention" in nodes["attn"]["label"] and "h=12, d_k=32" in nodes["attn"]["label"]
    assert nodes["ffn_hidden"]["label"] == "Linear W1 + GELU" and nodes["ffn"]["label"] == "Linear W2"
    assert nodes["add1"]["label"] == "+" and nodes["norm2"]["label"] == "LayerNorm"
    assert any("Encoder layer × 6" in c["label"] for c in clusters)
    relu = layout(diagram.layer_diagram(MINILM.replace(activation="relu", num_layers=2)))
    assert relu[0]["ffn_hidden"]["label"] == "Linear W1 + RELU" and any("× 2" in c["label"] for c in relu[2])


@pytest.mark.parametrize("title", HOSTILE_TITLES)
def test_hostile_titles_still_parse_and_show_literally(title):
    svg = dot(diagram.layer_diagram(MINILM, title=title), "svg")
    assert svg.count('class="node"') == len(TAPS) + 1  # and the positional encoding
    # nothing in the title changed a node: injected defaults (node [label=...]) would relabel them
    assert svg.count("Self&#45;Attention<") == 1 and svg.count(">LayerNorm<") == 2
    assert "<b>" not in svg and "<TABLE" not in svg


def test_titles_are_escaped_in_the_source():
    source = diagram.layer_diagram(MINILM, title='<b>x</b> "q" end\\').source
    assert 'label="<b>x</b> \\"q\\" end\\\\"' in source
    assert source.count("->") == len(flow_edges("post")) + 1  # nothing from the title became an edge


@pytest.mark.parametrize("cfg", [
    encoder.EncoderConfig(),
    encoder.EncoderConfig(d_model=64, num_heads=1, d_ff=1, num_layers=1, dropout=0.0, norm="pre", activation="gelu"),
    encoder.EncoderConfig(d_model=4096, num_heads=64, d_ff=16384, num_layers=48, dropout=0.5),
])
def test_svg_for_several_configs(cfg):
    svg = diagram.svg_bytes(diagram.layer_diagram(cfg, seq=7, highlight="drop2"))
    assert svg.startswith(b"<?xml") and svg.count(b'class="node"') == len(TAPS) + 1
    assert f"(7, {cfg.d_ff})".encode() in svg


def test_stats_overlay_shows_numbers_and_colours(trace):
    stats = trace.stats()
    nodes, _, clusters = layout(diagram.layer_diagram(trace.config, stats=stats, layer=1))
    rows = stats[stats.layer == 1].set_index("tap")
    for tap in TAPS:
        assert f"mean {rows.loc[tap, 'mean']:.3g} / std {rows.loc[tap, 'std']:.3g}" in nodes[tap]["label"]
        assert "NaN" not in nodes[tap]["label"]
    low, high = rows["rms"].idxmin(), rows["rms"].idxmax()
    assert nodes[low]["fillcolor"] == diagram.RMS_SCALE[0] and nodes[high]["fillcolor"] == diagram.RMS_SCALE[-1]
    assert any("RMS" in c["label"] and "statistics of layer 1" not in c["label"] for c in clusters)  # the legend
    other = layout(diagram.layer_diagram(trace.config, stats=stats, layer=2))[0]
    assert other["attn"]["label"] != nodes["attn"]["label"]


def test_nonfinite_taps_get_a_red_border_and_a_count(trace):
    stats = trace.stats()
    stats.loc[(stats.layer == 0) & (stats.tap.isin(["ffn", "add2"])), "nonfinite"] = 3
    stats.loc[(stats.layer == 0) & (stats.tap == "add2"), ["mean", "std", "rms"]] = float("nan")
    nodes, _, clusters = layout(diagram.layer_diagram(trace.config, stats=stats, layer=0, highlight="add2"))
    for tap in ("ffn", "add2"):
        assert "NaN/Inf: 3" in nodes[tap]["label"] and nodes[tap]["color"] == diagram.ALERT
    assert "NaN" not in nodes["attn"]["label"] and nodes["attn"]["color"] != diagram.ALERT
    assert any("NaN/Inf" in c["label"] for c in clusters)


def test_highlight_a_tap_or_a_dropout():
    nodes = layout(diagram.layer_diagram(MINILM, highlight="ffn"))[0]
    assert nodes["ffn"]["color"] == diagram.HIGHLIGHT and float(nodes["ffn"]["penwidth"]) > 3
    assert all(n.get("color") != diagram.HIGHLIGHT for name, n in nodes.items() if name != "ffn")
    edges = layout(diagram.layer_diagram(MINILM.replace(norm="pre", dropout=0.0), highlight="drop1"))[1]
    assert edges["attn", "add1"]["color"] == diagram.HIGHLIGHT and "dropout off" in edges["attn", "add1"]["label"]
    assert edges["ffn", "add2"].get("color") != diagram.HIGHLIGHT
    with pytest.raises(ValueError, match="highlight='ffn2'"):
        diagram.layer_diagram(MINILM, highlight="ffn2")


def test_stats_for_a_missing_layer_is_a_clear_error(trace):
    with pytest.raises(ValueError, match="no layer 5; choose a layer from 0 to 2"):
        diagram.layer_diagram(trace.config, stats=trace.stats(), layer=5)


def test_svg_bytes_without_dot_says_how_to_install(monkeypatch):
    assert diagram.svg_problem() == ""  # the page offers the SVG download here, drawn when clicked
    monkeypatch.setenv("PATH", "/nonexistent")
    assert "apt-get install graphviz" in diagram.svg_problem()  # the page says so in place of the button
    with pytest.raises(ValueError, match="apt-get install graphviz"):
        diagram.svg_bytes(diagram.layer_diagram(MINILM))


# The compact drawing (presentation mode): same taps and data flow, two columns, short labels, small enough to draw
# large. st.graphviz_chart draws all its text at 11.04 px in presentation mode (tests/app/test_projector_diagram.py
# measures the result in Chromium); here the layout itself is checked with Debian's `dot`.
COMPACT_CONFIGS = [MINILM, MINILM.replace(norm="pre", final_norm=True, activation="relu", dropout=0.0, num_heads=1,
                                          d_model=64, d_ff=256, num_layers=2)]


def drawn_edges(edges: dict) -> set[tuple[str, str]]:
    """(tail, head) as the arrows point: an edge up the second column is laid out reversed, with dir=back."""
    return {(h, t) if e.get("dir") == "back" else (t, h) for (t, h), e in edges.items() if e.get("style") != "invis"}


@pytest.mark.parametrize("cfg", COMPACT_CONFIGS, ids=["post", "pre-final"])
def test_compact_drawing_keeps_the_taps_and_the_placement_table(cfg):
    nodes, edges, _ = layout(diagram.layer_diagram(cfg, compact=True))
    full_nodes, full_edges, _ = layout(diagram.layer_diagram(cfg))
    assert set(nodes) == set(full_nodes) == {*TAPS, diagram.POSITIONS, *([diagram.FINAL] if cfg.final_norm else [])}
    outside = {(diagram.POSITIONS, "input")} | ({("output", diagram.FINAL)} if cfg.final_norm else set())
    assert drawn_edges(edges) == set(full_edges) == {(t, h) for t, h, _ in flow_edges(cfg.norm)} | outside
    dashed = {e for e, attrs in edges.items() if attrs.get("style") == "dashed"}
    res = {(t, h) for t, h, kind in flow_edges(cfg.norm) if kind == "res"}
    assert drawn_edges({e: edges[e] for e in dashed}) == res | outside


def test_compact_columns_split_at_the_residual_stream_and_follow_the_norm_placement():
    """Post-LN: attention column ends with LayerNorm 1 (after the add); Pre-LN: it ends with the add, and LayerNorm 2
    heads the FFN column. Down the first column, up the second: input and output share the top row."""
    for norm, first_last, second_first in (("post", "norm1", "ffn_hidden"), ("pre", "add1", "norm2")):
        nodes = layout(diagram.layer_diagram(MINILM.replace(norm=norm), compact=True))[0]
        x = {name: float(n["pos"].split(",")[0]) for name, n in nodes.items()}
        y = {name: float(n["pos"].split(",")[1]) for name, n in nodes.items()}  # Graphviz: y grows upwards
        order = flow_order(norm)
        cut = order.index(first_last) + 1
        first, second = order[:cut], order[cut:]
        assert second[0] == second_first
        assert all(y[a] > y[b] for a, b in zip(first, first[1:], strict=False)), f"{norm}: first column goes down"
        assert all(y[a] < y[b] for a, b in zip(second, second[1:], strict=False)), f"{norm}: second column goes up"
        assert y["input"] == y["output"] and x["input"] < x["output"]
        assert max(x[t] for t in first) < min(x[t] for t in second[1:])  # side by side (the turn sits between)


def test_compact_labels_are_short_and_true_to_the_config():
    nodes, edges, clusters = layout(diagram.layer_diagram(MINILM, seq=9, compact=True, highlight="drop1"))
    assert nodes["attn"]["label"] == "Self-Attention, 12 heads" and nodes["norm1"]["label"] == "LayerNorm"
    assert nodes["ffn_hidden"]["label"] == "W1 + GELU: 9×1536" and nodes["input"]["label"] == "Input 9×384"
    assert max(len(n["label"]) for n in nodes.values() if n["name"] != diagram.POSITIONS) <= 24  # one short line each
    assert nodes[diagram.POSITIONS]["label"] == "Embeddings + sinusoidal positions"
    assert any(c["label"] == "Post-LN layer × 6" for c in clusters)
    drops = {e: a["label"] for e, a in edges.items() if a.get("label")}
    assert set(drops.values()) == {"dropout 0.1"} and len(drops) == 3  # drop1, the FFN's hidden, drop2
    assert edges["attn", "add1"]["color"] == diagram.HIGHLIGHT
    other = layout(diagram.layer_diagram(COMPACT_CONFIGS[1], compact=True, highlight="drop2"))
    assert other[0]["attn"]["label"] == "Self-Attention, 1 head" and other[0]["ffn_hidden"]["label"] == "W1 + RELU: T×256"
    assert any(c["label"] == "Pre-LN layer × 2" for c in other[2])
    assert {a.get("label") for a in other[1].values() if a.get("label")} == {"dropout off"}  # p=0: only the highlighted
    assert "Final LayerNorm\\nafter layer 1" == other[0][diagram.FINAL]["label"]


def test_compact_overlay_shows_short_numbers(trace):
    stats = trace.stats()
    nodes, _, clusters = layout(diagram.layer_diagram(trace.config, stats=stats, layer=1, compact=True))
    rows = stats[stats.layer == 1].set_index("tap")
    for tap in TAPS:
        if tap == "output":  # the same tensor as the tap before it: drawn once, coloured like it
            assert nodes[tap]["label"] == "Output" and nodes[tap]["fillcolor"] == nodes["norm2"]["fillcolor"]
            continue
        mean, std = (f"{v:.2f}".replace("-0.00", "0.00") for v in rows.loc[tap, ["mean", "std"]])
        assert nodes[tap]["label"].endswith(f"μ {mean}  σ {std}"), nodes[tap]["label"]
    assert any("statistics of layer 1" in c["label"] for c in clusters)


@pytest.mark.parametrize("cfg", COMPACT_CONFIGS, ids=["post", "pre-final"])
def test_compact_drawing_is_small_enough_to_draw_large(cfg):
    """At the scale where its 11 pt text is 14 px on screen, the drawing fits DIAGRAM_HEIGHT and 420 px (a half
    column of a 1024-wide projector); the full drawing would need more than twice the height."""
    scale = style.MIN_PRESENT_FONT / float(diagram.COMPACT_FONT)  # px per pt
    for seq in (None, 16):
        compact = json.loads(dot(diagram.layer_diagram(cfg, seq=seq, compact=True), "json"))["bb"]
        full = json.loads(dot(diagram.layer_diagram(cfg, seq=seq), "json"))["bb"]
        width, height = (float(v) for v in compact.split(",")[2:])
        assert height * scale <= style.DIAGRAM_HEIGHT and width * scale <= 420, (width, height)
        assert 2 * height < float(full.split(",")[3])


@pytest.mark.parametrize("title", HOSTILE_TITLES)
def test_compact_hostile_titles_still_parse_and_change_no_node(title):
    svg = dot(diagram.layer_diagram(MINILM, title=title, compact=True), "svg")
    assert svg.count('class="node"') == len(TAPS) + 1 and svg.count(">LayerNorm<") == 2 and "<b>" not in svg


# ---------------------------------------------------------------- the settings of later encoders (issue 20)
MODERN = encoder.EncoderConfig(d_model=256, num_heads=4, d_ff=384, num_layers=6, dropout=0.0, norm="pre",
                               final_norm=True, positional="rotary", rope_theta=160000.0, ffn="geglu", bias=False,
                               window=8, global_every=3)
KINDS = {"sinusoidal": "sinusoidal positions", "learned": "learned positions", "rotary": "RoPE", "none": "no positions"}


@pytest.mark.parametrize("compact", [False, True], ids=["full", "compact"])
@pytest.mark.parametrize("positional", list(KINDS))
def test_the_positional_encoding_is_drawn_for_every_kind(positional, compact):
    cfg = MINILM.replace(positional=positional)
    nodes, edges, clusters = layout(diagram.layer_diagram(cfg, compact=compact))
    assert set(nodes) == {*TAPS, diagram.POSITIONS}  # every tap, and the positions outside the repeated layer
    label = nodes[diagram.POSITIONS]["label"]
    if positional == "rotary" and not compact:
        assert "Rotary positions (RoPE)" in label and "θ 10,000" in label
        assert "turns q and k" in edges[diagram.POSITIONS, "attn"]["label"]  # into every attention, not the input
        assert edges[diagram.POSITIONS, "input"]["style"] == "invis"
    else:
        assert KINDS[positional] in label or (positional == "none" and "no positional encoding" in label), label
        assert edges[diagram.POSITIONS, "input"]["style"] == "dashed"
    if positional == "rotary" and compact:
        assert "RoPE on q, k" in nodes["attn"]["label"]
    layer_cluster = next(c for c in clusters if c["name"] == "cluster_layer")
    inside = {o["name"] for o in json.loads(dot(diagram.layer_diagram(cfg, compact=compact), "json"))["objects"]
              if o.get("_gvid") in layer_cluster["nodes"]}
    assert diagram.POSITIONS not in inside


@pytest.mark.parametrize(("ffn", "full", "short"), [("geglu", "GELU(x W) ⊙ (x V)", "GeGLU W, V: 9×48"),
                                                     ("swiglu", "SiLU(x W) ⊙ (x V)", "SwiGLU W, V: 9×48")])
def test_a_gated_feed_forward_is_drawn_as_its_gate(ffn, full, short):
    cfg = MINILM.replace(d_model=32, num_heads=4, d_ff=48, ffn=ffn)
    assert full in layout(diagram.layer_diagram(cfg, seq=9))[0]["ffn_hidden"]["label"]
    assert layout(diagram.layer_diagram(cfg, seq=9, compact=True))[0]["ffn_hidden"]["label"] == short
    assert "(9, 48)" in layout(diagram.layer_diagram(cfg, seq=9))[1]["ffn_hidden", "ffn"]["label"]  # d_ff wide


def test_no_biases_are_drawn_on_every_linear_and_layer_norm():
    nodes, _, clusters = layout(diagram.layer_diagram(MINILM.replace(bias=False)))
    assert nodes["ffn"]["label"] == "Linear W2 (no bias)" and nodes["norm1"]["label"] == "LayerNorm (no β)"
    assert "(no bias)" in nodes["attn"]["label"] and "(no bias)" in nodes["ffn_hidden"]["label"]
    assert any("no biases in any Linear or LayerNorm" in c["label"] for c in clusters)
    compact = layout(diagram.layer_diagram(MINILM.replace(bias=False), compact=True))[2]
    assert any(c["label"] == "Post-LN layer × 6, no biases" for c in compact)
    assert "bias" not in " ".join(n["label"] for n in layout(diagram.layer_diagram(MINILM))[0].values())


def test_the_window_is_drawn_for_the_layer_shown():
    """global_every=3: layers 0 and 3 attend globally, the others in the window of 8 tokens (4 on each side)."""
    for layer, full, short in ((0, "global attention in layer 0", "global"), (1, "layer 1: sliding window, keys ±4",
                                                                           "window ±4"), (3, "global", "global")):
        nodes, _, clusters = layout(diagram.layer_diagram(MODERN, layer=layer))
        assert full in nodes["attn"]["label"] and any(f"drawn: layer {layer}" in c["label"] for c in clusters)
        compact = layout(diagram.layer_diagram(MODERN, layer=layer, compact=True))
        assert compact[0]["attn"]["label"].endswith(short) and "RoPE on q, k" in compact[0]["attn"]["label"]
        assert any(f"layer {layer}" in c["label"] for c in compact[2])
    assert "window" not in layout(diagram.layer_diagram(MINILM, layer=1))[0]["attn"]["label"]


def test_the_final_layer_norm_can_be_highlighted():
    nodes = layout(diagram.layer_diagram(MODERN, highlight=diagram.FINAL))[0]
    assert nodes[diagram.FINAL]["color"] == diagram.HIGHLIGHT
    assert layout(diagram.layer_diagram(MODERN, highlight=diagram.FINAL, compact=True))[0][diagram.FINAL]["color"] \
        == diagram.HIGHLIGHT


def test_a_modernbert_style_layer_draws_every_tap_and_its_compact_drawing_still_draws_large(trace):
    """Every setting at once (rotary, GeGLU, no bias, Pre-LN, final norm, window): every tap of the wiring table is a
    node, DOT parses, and the compact drawing fits a projector column at 14 px text, with the statistics too."""
    full_nodes, full_edges, _ = layout(diagram.layer_diagram(MODERN, seq=16, layer=1))
    assert set(full_nodes) == {*TAPS, diagram.POSITIONS, diagram.FINAL}
    assert {(t, h) for t, h, _ in flow_edges("pre")} <= set(full_edges)
    scale = style.MIN_PRESENT_FONT / float(diagram.COMPACT_FONT)
    stats = trace.stats()
    for seq, rows in ((None, None), (16, None), (9, stats)):
        cfg = MODERN if rows is None else trace.config.replace(bias=False, positional="rotary", window=4)
        compact = json.loads(dot(diagram.layer_diagram(cfg, stats=rows, layer=1, seq=seq, compact=True), "json"))["bb"]
        width, height = (float(v) for v in compact.split(",")[2:])
        assert height * scale <= style.DIAGRAM_HEIGHT and width * scale <= 420, (width, height)
