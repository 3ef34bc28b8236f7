"""Behaviour of the plotly figure builders: the pictures show the trace's numbers, stay small and never render user markup."""

import base64
import dataclasses
import json
import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io
import pytest
import torch

import encoder
from encoder.model import flow_order
from encoder.viz import activations, attention, axes, export, similarity, style, teaching
from encoder.viz.text import label, text_px

SENTENCE = "The cat sat on the mat."
HOSTILE_TOKENS = ["[CLS]", "<b>x</b>", "a&b", "<a href='javascript:alert(1)'>y</a>", "the", "the", "<br>", "mat", "[SEP]"]
HOSTILE_TEXT = "<i>it</i> & <script>alert(1)</script> \x00\u202e \"q\" \\"
MARKUP = ("<b>", "<a ", "<script", "<i>", "a&b", "\x00")  # raw forms that must never reach a label


@pytest.fixture(scope="module")
def small() -> encoder.Trace:
    cfg = encoder.EncoderConfig(d_model=64, num_heads=4, d_ff=256, num_layers=2)
    return encoder.run(encoder.build_model(cfg), SENTENCE)


@pytest.fixture(scope="module")
def pre() -> encoder.Trace:
    cfg = encoder.EncoderConfig(d_model=64, num_heads=4, d_ff=256, num_layers=6, norm="pre")
    return encoder.run(encoder.build_model(cfg), SENTENCE)


@pytest.fixture(scope="module")
def hostile(small: encoder.Trace) -> encoder.Trace:
    # labels: what the figures show (the tokens as read; a byte-level token can decode to any text)
    return dataclasses.replace(small, tokens=HOSTILE_TOKENS, labels=HOSTILE_TOKENS, text=HOSTILE_TEXT)


@pytest.fixture(scope="module")
def long_trace() -> encoder.Trace:
    # a small vocabulary keeps the random init quick; "word" is id 2773 in the bundled WordPiece vocabulary
    cfg = encoder.EncoderConfig(d_model=192, num_heads=12, d_ff=384, num_layers=12, vocab_size=4096)
    return encoder.run(encoder.build_model(cfg), " ".join(["word"] * 600))


def strings(obj: object) -> list[str]:
    """Every string inside a JSON-like structure."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in strings(v)]
    return []


def test_heatmap_z_is_the_heads_attention(small):
    for layer, head in ((0, 0), (1, 3)):
        fig = attention.attention_heatmap(small, layer, head)
        np.testing.assert_array_equal(np.asarray(fig.data[0].z), small.attention[layer, head].numpy())
        assert f"layer {layer}" in fig.layout.title.text and f"head {head}" in fig.layout.title.text


def test_colour_range_is_fixed_to_0_1(small):
    hm = attention.attention_heatmap(small, 0, 1).data[0]
    assert (hm.zmin, hm.zmax) == (0, 1)
    for fig in (attention.attention_grid(small, 0), attention.model_view(small)):
        assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0, 1)
        assert all(t.coloraxis == "coloraxis" for t in fig.data)


def test_head_none_is_the_average_of_heads(small):
    fig = attention.attention_heatmap(small, 1, None)
    np.testing.assert_allclose(np.asarray(fig.data[0].z), small.attention[1].mean(0).numpy(), rtol=1e-6)
    assert "average of 4 heads" in fig.layout.title.text


def test_repeated_tokens_keep_their_own_rows(small):
    fig = attention.attention_heatmap(small, 0, 0)
    assert len(set(fig.data[0].x)) == len(set(fig.data[0].y)) == small.seq_len
    assert list(fig.layout.yaxis.ticktext).count("the") == list(fig.layout.xaxis.labelalias.values()).count("the") == 2
    # no square-cell constraint: the map fills the plot area, so the colour bar (len 1) is exactly as tall as it
    assert fig.layout.yaxis.autorange == "reversed" and fig.layout.yaxis.scaleanchor is None
    assert fig.data[0].colorbar.len == 1


def test_hide_special_drops_cls_and_sep_and_renormalises_the_rows(small):
    fig = attention.attention_heatmap(small, 0, 2, hide_special=True)
    z = np.asarray(fig.data[0].z, dtype=np.float64)
    kept = small.attention[0, 2, 1:-1, 1:-1].double().numpy()
    np.testing.assert_allclose(z, kept / kept.sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(z.sum(1), 1, atol=1e-5)
    assert "[CLS]" not in fig.layout.xaxis.labelalias.values() and "[SEP]" not in fig.layout.yaxis.ticktext
    assert "rows renormalised" in fig.layout.title.text
    table = attention.attention_table(small, 0, 2, hide_special=True)
    assert not set(table["query_token"]) & {"[CLS]", "[SEP]"}
    assert table.groupby("query_position")["weight"].sum().to_numpy() == pytest.approx(1, abs=1e-5)
    assert json.loads(attention.attention_json(small, 0, 2, hide_special=True))["rows_renormalised"] is True


def test_colour_scales(small):
    w = small.attention[1, 0].numpy()
    auto = attention.attention_heatmap(small, 1, 0, scale="auto").data[0]
    assert (auto.zmin, auto.zmax) == (0, pytest.approx(w.max())) and "auto" in auto.colorbar.title.text
    row = attention.attention_heatmap(small, 1, 0, scale="row").data[0]
    z = np.asarray(row.z)
    np.testing.assert_allclose(z.max(1), 1, rtol=1e-6)
    np.testing.assert_allclose(z * w.max(1, keepdims=True), w, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(row.customdata), w)  # hover still shows the true weight
    assert "customdata" in row.hovertemplate
    grid = attention.attention_grid(small, 1, scale="auto")
    assert grid.layout.coloraxis.cmax == pytest.approx(small.attention[1].numpy().round(3).max())
    with pytest.raises(ValueError, match="scale='loud'"):
        attention.attention_heatmap(small, 0, 0, scale="loud")


def test_per_row_colours_past_the_limit_hover_the_share_they_colour_and_send_one_array():
    """Past ROW_WEIGHTS_UP_TO tokens the true weights beside the colours would double a map's bytes (a 512-token
    pair: 5.7 MB): the hover prints the share of the row's largest weight, which is what the colour shows."""
    def model(norm):
        return encoder.build_model(encoder.EncoderConfig(d_model=32, num_heads=2, d_ff=64, num_layers=1, norm=norm))

    post, pre = model("post"), model("pre")
    for text in (SENTENCE, " ".join(["word"] * 300)):
        runs = {"Post-LN": encoder.run(post, text), "Pre-LN": encoder.run(pre, text)}
        long = runs["Post-LN"].seq_len > attention.ROW_WEIGHTS_UP_TO
        pair = attention.attention_pair(runs, 0, 1, scale="row")
        one = attention.attention_heatmap(runs["Pre-LN"], 0, 1, scale="row").data[0]
        for heatmap, trace in ((pair.data[0], runs["Post-LN"]), (pair.data[1], runs["Pre-LN"]), (one, runs["Pre-LN"])):
            w = trace.attention[0, 1].numpy()
            np.testing.assert_allclose(np.asarray(heatmap.z) * w.max(1, keepdims=True), w, rtol=1e-5)
            assert ("of its row's largest" in heatmap.hovertemplate) == long
            if long:
                assert heatmap.customdata is None and "%{z:.3f}" in heatmap.hovertemplate
            else:
                np.testing.assert_allclose(np.asarray(heatmap.customdata), w)
    fixed = attention.attention_pair(runs, 0, 1, scale="fixed")
    assert len(plotly.io.to_json(pair)) < 1.1 * len(plotly.io.to_json(fixed))  # one array per map, as with fixed


def test_attention_pair_shares_one_colour_bar_and_splits_the_width(small, pre):
    twin = dataclasses.replace(pre, attention=pre.attention[:2])  # same tokens, two layers
    fig = attention.attention_pair({"Post-LN": small, "Pre-LN": twin}, 1, 2)
    assert [t.coloraxis for t in fig.data] == ["coloraxis"] * 2 and fig.layout.coloraxis.colorbar.len == 1
    for axis in (fig.layout.xaxis, fig.layout.xaxis2):
        assert axis.domain[1] - axis.domain[0] >= 0.45
    np.testing.assert_array_equal(np.asarray(fig.data[1].z), twin.attention[1, 2].numpy())


def test_a_pairs_map_titles_are_centred_over_their_maps_and_never_wider_than_their_room(small, pre):
    twin = dataclasses.replace(pre, attention=pre.attention[:2])
    long_name = "A <b>model</b> whose name runs on and on past its map"
    for presentation in (False, True):
        fig = attention.attention_pair({"Pre-LN (rewired)": small, long_name: twin}, 1, 2, presentation=presentation)
        size = fig.layout.font.size
        first, second = fig.layout.annotations
        for note, axis in ((first, fig.layout.xaxis), (second, fig.layout.xaxis2)):
            assert note.xanchor == "center" and note.x == pytest.approx(sum(axis.domain) / 2)  # plotly's "auto" anchor
            inner = note.text.removeprefix("<b>").removesuffix("</b>")  # put them left and right of the centres
            assert text_px(inner, size) * 1.1 <= attention.PAIR_TITLE_PX, note.text
        assert first.text == "<b>Pre-LN (rewired)</b>"  # the pages' own names stay whole
        assert second.text.endswith("…</b>") and "&lt;b&gt;" in second.text  # shortened, and user text stays text


def test_presentation_figures_fit_a_projector_with_readable_labels(small, long_trace):
    for trace in (small, long_trace):
        fig = attention.attention_heatmap(trace, 0, 0, presentation=True)
        assert fig.layout.height <= style.PRESENT_HEIGHT
        assert fig.layout.xaxis.tickfont.size >= style.MIN_PRESENT_FONT and fig.layout.font.size >= 14
        shown = len(fig.layout.yaxis.tickvals or [])
        # labels never overprint: at most one per 1.4 label heights of the plot area
        assert shown * 1.4 * fig.layout.yaxis.tickfont.size <= fig.layout.height
    assert activations.tensor_heatmap(torch.randn(40, 64), ["w"] * 40, "x", presentation=True).layout.height <= 600


def test_maps_below_a_pages_first_screen_name_every_token_on_a_projector(small):
    """Issue 23: on a 420 px projector figure a pair of 16-token maps named every third row and the difference map
    every second. Below a page's first screen they grow until every row is named at 14 px, one label per 1.4 label
    heights of the map, and never past PRESENT_TALLEST; the page's main pair stays within PAIR_FIRST_SCREEN. The key axis is
    left to plotly's spacing by the drawn width (tested in Chromium), each key named by its token alone."""
    default = encoder.run(encoder.build_model(small.config), "The animal didn't cross the street because it was too tired.")
    T = default.seq_len
    assert T == 16
    twin = dataclasses.replace(default, attention=default.attention.flip(0))
    pair = attention.attention_pair({"Post-LN": default, "Pre-LN": twin}, 1, 0, presentation=True)
    diff = attention.attention_difference(twin.attention[1, 0], default.attention[1, 0], default.labels, "Δ",
                                          presentation=True)
    cosines = similarity.token_similarity(torch.randn(T, 8), default.labels, "cos", presentation=True)
    for fig, top in ((pair, attention.PAIR_TOP), (diff, axes.MAP_TOP), (cosines, axes.MAP_TOP)):
        y = fig.layout.yaxis
        assert list(y.ticktext) == [label(t, 16) for t in default.labels]  # every row, by its token
        assert y.tickfont.size >= style.MIN_PRESENT_FONT
        assert style.PRESENT_HEIGHT < fig.layout.height <= style.PRESENT_TALLEST
        assert T * axes.TICK_SPACING * y.tickfont.size <= fig.layout.height - top - axes.TICK_MARGIN
        x = fig.layout.xaxis
        assert x.tickmode == "auto" and x.tickvals is None and x.tickfont.size == y.tickfont.size
        assert x.labelalias == dict(zip(fig.data[0].x, (label(t, 16) for t in default.labels), strict=True))
    assert pair.layout.title.subtitle.text.startswith("“The animal")  # room for the sentence below a first screen
    # The page's main pair (Compare), whole on a projector's first screen: every row named once the sentence is left
    # out and the room below the maps is what the key labels take, at 1.15 label heights.
    main = attention.attention_pair({"Post-LN": default, "Pre-LN": twin}, 1, 0, presentation=True,
                                    tallest=attention.PAIR_FIRST_SCREEN)
    y = main.layout.yaxis
    assert list(y.ticktext) == [label(t, 16) for t in default.labels] and y.tickfont.size == style.MIN_PRESENT_FONT
    assert main.layout.height <= attention.PAIR_FIRST_SCREEN and not main.layout.title.subtitle.text
    room = main.layout.height - attention.PAIR_TOP_BARE - main.layout.margin.b
    assert T * attention.PAIR_SPACING * y.tickfont.size <= room < T * axes.TICK_SPACING * y.tickfont.size
    cramped = attention.attention_pair({"Post-LN": default, "Pre-LN": twin}, 1, 0, presentation=True,
                                       tallest=style.PRESENT_HEIGHT)  # no room even so: every k-th row, sentence kept
    assert len(cramped.layout.yaxis.tickvals) < T and cramped.layout.title.subtitle.text
    laptop = attention.attention_pair({"Post-LN": default, "Pre-LN": twin}, 1, 0)
    assert len(laptop.layout.yaxis.tickvals) == T and laptop.layout.height <= 720


def test_a_single_map_given_a_first_screens_room_names_every_row_on_a_projector(small):
    """Compare's two models on a 720 px projector named every second row of the default sentence (420 px each).
    Given its first screen's room, a map names every row at 14 px, 1.15 label heights apart, with the room below it
    that the key labels take (as the Compare pair does), and stays within that room; without it, nothing changes."""
    default = encoder.run(encoder.build_model(small.config), "The animal didn't cross the street because it was too tired.")
    T, rows = default.seq_len, [label(t, 16) for t in default.labels]
    fig = attention.attention_heatmap(default, 1, 0, presentation=True, title="Custom model",
                                      subtitle="layer 1, head 0 · 16 WordPiece tokens", tallest=470)
    y = fig.layout.yaxis
    assert list(y.ticktext) == rows and y.tickfont.size == style.MIN_PRESENT_FONT
    assert fig.layout.title.text == "Custom model" and fig.layout.title.subtitle.text.startswith("layer 1, head 0")
    assert style.PRESENT_HEIGHT < fig.layout.height <= 470
    room = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    assert T * attention.PAIR_SPACING * y.tickfont.size <= room < T * axes.TICK_SPACING * y.tickfont.size
    plain = attention.attention_heatmap(default, 1, 0, presentation=True)  # the usual projector map: as before
    assert plain.layout.height == style.PRESENT_HEIGHT and len(plain.layout.yaxis.tickvals) < T
    assert plain.layout.title.subtitle.text.startswith("“The animal")
    long = encoder.run(encoder.build_model(small.config), " ".join(["the animal was tired"] * 8))
    cramped = attention.attention_heatmap(long, 1, 0, presentation=True, tallest=470)  # every k-th row, within it
    assert cramped.layout.height <= 470 and len(cramped.layout.yaxis.tickvals) < long.seq_len


def test_training_mode_figures_say_dropout_is_on(small):
    on = dataclasses.replace(small, train=True)
    for build in (lambda t: attention.attention_heatmap(t, 0, 0), lambda t: attention.attention_grid(t, 0),
                  lambda t: activations.tap_histogram(t, 0, "ffn"), lambda t: activations.residual_norms({"m": t})):
        assert "dropout on" in build(on).layout.title.subtitle.text
        assert "dropout on" not in (build(small).layout.title.subtitle.text or "")


def test_grid_and_model_view_are_single_figures(small):
    grid = attention.attention_grid(small, 1)
    assert len(grid.data) == small.num_heads and {t.type for t in grid.data} == {"heatmap"}
    np.testing.assert_allclose(np.asarray(grid.data[3].z), small.attention[1, 3].numpy().round(3), atol=1e-6)
    view = attention.model_view(small)
    assert len(view.data) == small.num_layers * small.num_heads
    assert len({t.xaxis for t in view.data}) == len(view.data)  # each map on its own axes
    np.testing.assert_allclose(np.asarray(view.data[5].z), small.attention[1, 1].numpy().round(3), atol=1e-6)


@pytest.mark.parametrize("build", [
    lambda t: attention.attention_heatmap(t, 0, 1),
    lambda t: attention.attention_heatmap(t, 1, None, hide_special=True, presentation=True),
    lambda t: attention.attention_grid(t, 1),
    lambda t: attention.attention_grid(t, 0, hide_special=True, presentation=True),
    lambda t: attention.model_view(t),
], ids=["head", "average-hidden-presentation", "grid", "grid-hidden-presentation", "model-view"])
def test_unvalidated_attention_figures_equal_validated_ones(small, build):
    """The attention figures skip plotly.py's validation for speed: rebuilt with validation, every property is
    accepted (an unknown key raises) and the JSON sent to the browser is the same (e.g. colour scales spelled out,
    which plotly.js would otherwise read as its own, different "Blues")."""
    fig = build(small)
    validated = go.Figure(fig.to_dict())
    assert json.loads(fig.to_json()) == json.loads(validated.to_json())


def test_model_view_of_12x12_at_512_tokens_is_small(long_trace):
    assert long_trace.seq_len == 512
    fig = attention.model_view(long_trace)
    assert len(fig.data) == 144
    size = len(fig.to_json())
    assert size < 3_000_000, f"model view JSON is {size:,} bytes"
    z = np.asarray(fig.data[0].z, dtype=np.float64)
    assert z.shape == (32, 32)
    np.testing.assert_allclose(z, z.round(3), atol=1e-6)
    block = long_trace.attention[0, 0, :16, :16].double().mean().item()  # 512 / 32 = blocks of 16
    assert abs(z[0, 0] - block) < 6e-4


def test_a_512_token_map_travels_as_its_float32_bytes_with_slashes_kept(long_trace):
    """plotly.io.to_json, as Streamlit calls it, keeps '/' (a base64 map is 1 in 64 of them) but still escapes '<'
    and '>', so no '</script>' can form; the map's bytes come back bit for bit."""
    fig = attention.attention_heatmap(long_trace, 11, 5)
    fig.layout.title.text = "a </script> b/c"
    text = plotly.io.to_json(fig, validate=False)
    assert "\\u002f" not in text and "</" not in text and "\\u003c\\u002fscript" not in text
    assert "\\u003c/script\\u003e" in text
    z = json.loads(text)["data"][0]["z"]
    assert z["dtype"] == "f4"
    weights = np.frombuffer(base64.b64decode(z["bdata"]), dtype="<f4").reshape(512, 512)
    np.testing.assert_array_equal(weights, long_trace.attention[11, 5].numpy())
    assert len(text) < 4 / 3 * weights.nbytes + 60_000, len(text)  # base64 and the labels, no 6-byte escapes


def test_user_text_never_reaches_a_label_as_markup(hostile):
    figs = [
        attention.attention_heatmap(hostile, 0, 0), attention.attention_heatmap(hostile, 1, None, hide_special=True),
        attention.attention_grid(hostile, 0), attention.model_view(hostile), activations.token_norms(hostile, 0, "attn"),
        activations.tensor_heatmap(hostile.taps[0]["ffn"], hostile.tokens, "<b>title</b>"),
        attention.attention_difference(hostile.attention[0, 0], hostile.attention[1, 0], hostile.tokens, "Δ"),
        activations.residual_norms({"<b>x</b>": hostile}),
    ]
    for fig in figs:
        text = strings(json.loads(fig.to_json()))
        leaks = [s for s in text if any(m in s for m in MARKUP) or s == "<br>" or "<br> (" in s]
        assert not leaks, leaks
        assert any("&lt;b&gt;x" in s for s in text), fig.layout.title.text  # the token is there, escaped
    subtitle = figs[0].layout.title.subtitle.text
    assert "&lt;i&gt;it&lt;/i&gt; &amp; &lt;script&gt;" in subtitle and "\x00" not in subtitle


def test_export_name_and_png_config(small, hostile):
    assert (export.export_name(small, "attention", "L2", "H5", model=export.model_tag(small.config, "pretrained"))
            == "all-MiniLM-L6-v2_attention_L2_H5_the-cat-sat-on")
    assert (export.export_name(small, "attention", "L2", "H5")
            == "custom-post-relu-d64-h4-L2_attention_L2_H5_the-cat-sat-on")
    assert export.model_tag(small.config, "ckpt:my bert") == "my-bert"
    for name in (export.export_name(hostile, "L0", "../x y"), export.export_name(hostile)):
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,140}", name), name
    cfg = export.png_config("a/b c<>&.png" * 20)
    opts = cfg["toImageButtonOptions"]
    assert opts["format"] == "png" and opts["scale"] >= 3 and cfg["displaylogo"] is False
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,80}", opts["filename"])


def test_attention_table_and_json_hold_the_weights(hostile):
    table = attention.attention_table(hostile, 1, 2)
    T = hostile.seq_len
    assert len(table) == T * T and list(table.columns[:2]) == ["query_position", "query_token"]
    np.testing.assert_allclose(table["weight"].to_numpy().reshape(T, T), hostile.attention[1, 2].numpy(), rtol=1e-6)
    assert table.loc[T, "query_token"] == "<b>x</b>"  # data files keep the raw tokens
    data = json.loads(attention.attention_json(hostile, 1, None))
    assert data["head"] is None and data["tokens"] == HOSTILE_TOKENS
    np.testing.assert_allclose(data["weights"], hostile.attention[1].mean(0).numpy(), atol=1e-6)


def test_tap_profile_follows_the_data_flow_and_flags_nan(small, pre):
    for trace in (small, pre):
        stats = trace.stats()
        fig = activations.tap_profile(stats, 1, trace.config.norm)
        rms = next(t for t in fig.data if t.name == "RMS")
        assert list(rms.x) == list(flow_order(trace.config.norm))
        expected = stats[stats.layer == 1].set_index("tap").loc[list(rms.x), "rms"]
        np.testing.assert_allclose(rms.y, expected)
        assert "NaN" not in fig.layout.title.text
    stats = small.stats()
    stats.loc[(stats.layer == 1) & (stats.tap == "ffn"), "nonfinite"] = 7
    fig = activations.tap_profile(stats, 1)
    flag = next(t for t in fig.data if t.name == "NaN/Inf")
    assert list(flag.x) == ["ffn"] and "NaN/Inf: 7" in flag.text and "'ffn'" in fig.layout.title.text


def test_residual_norms_one_line_per_trace(small, pre):
    fig = activations.residual_norms({"Post-LN": small, "Pre-LN": pre})
    assert [t.name for t in fig.data] == ["Post-LN", "Pre-LN"]
    for line, trace in zip(fig.data, (small, pre), strict=True):
        np.testing.assert_allclose(line.y, trace.hidden_states.double().norm(dim=-1).mean(-1).numpy())
        assert list(line.x) == list(range(-1, trace.num_layers))  # embeddings, then layers 0..N-1 like the sliders
    assert list(fig.layout.xaxis.ticktext[:2]) == ["embeddings", "0"]
    assert not np.allclose(fig.data[0].y[:3], fig.data[1].y[:3])


def test_token_norms_are_per_token_l2(small):
    fig = activations.token_norms(small, 1, "ffn_hidden")
    np.testing.assert_allclose(fig.data[0].y, small.taps[1]["ffn_hidden"].double().norm(dim=-1).numpy())


def test_histogram_counts_finite_values_and_reports_dropped(small):
    taps = [dict(layer) for layer in small.taps]
    bad = taps[1]["ffn"].clone()
    bad[0, 0], bad[2, 5] = float("nan"), float("inf")
    taps[1]["ffn"] = bad
    trace = dataclasses.replace(small, taps=taps)
    fig = activations.tap_histogram(trace, 1, "ffn", bins=30)
    assert int(np.sum(fig.data[0].y)) == bad.numel() - 2 and len(fig.data[0].y) == 30
    assert "2 NaN/Inf dropped" in fig.layout.title.text.replace("<br>", " ")  # wrapped to fit a half column
    assert "dropped" not in activations.tap_histogram(small, 1, "ffn").layout.title.text
    assert "NaN/Inf" in activations.token_norms(trace, 1, "ffn").layout.title.text


def test_tensor_heatmap_is_centred_and_downsampled():
    x = torch.randn(5, 2000)
    fig = activations.tensor_heatmap(x, list("abcde"), "values")
    hm = fig.data[0]
    z = np.asarray(hm.z)
    assert z.shape[0] == 5 and z.shape[1] <= 512 and hm.zmid == 0 and hm.zmin == -hm.zmax
    assert abs(z[0, 0] - x[0, :4].double().mean().item()) < 1e-5  # first block of ~3.9 columns -> 4
    small = activations.tensor_heatmap(x[:, :8], list("abcde"), "values").data[0]
    np.testing.assert_allclose(np.asarray(small.z), x[:, :8].numpy(), rtol=1e-6)


def test_positional_tables(small):
    table = encoder.model.sinusoidal_table(small.seq_len, 16)
    np.testing.assert_allclose(np.asarray(activations.positional_heatmap(table, "PE").data[0].z), table.numpy(), atol=1e-6)
    sim = similarity.position_similarity(table).data[0]
    z = np.asarray(sim.z)
    assert z.shape == (small.seq_len,) * 2 and (sim.zmin, sim.zmax) == (-1, 1)
    np.testing.assert_allclose(np.diag(z), 1, atol=1e-6)
    np.testing.assert_allclose(z, z.T, atol=1e-6)


def test_attention_difference_is_symmetric_around_zero(small):
    a, b = small.attention[0, 0], small.attention[1, 2]
    hm = attention.attention_difference(a, b, small.tokens, "layer 0 minus layer 1").data[0]
    np.testing.assert_allclose(np.asarray(hm.z), (a - b).numpy(), atol=1e-6)
    assert hm.zmax == pytest.approx((a - b).abs().max().item()) and hm.zmin == -hm.zmax
    with pytest.raises(ValueError, match="Expected two"):
        attention.attention_difference(a, b[:3, :3], small.tokens, "x")


def test_presentation_mode_uses_larger_fonts(small):
    normal = attention.attention_heatmap(small, 0, 0).layout
    big = attention.attention_heatmap(small, 0, 0, presentation=True).layout
    assert big.font.size > normal.font.size and big.title.font.size > normal.title.font.size


def test_out_of_range_requests_raise_value_error(small):
    with pytest.raises(ValueError, match="layer=2"):
        attention.attention_heatmap(small, 2, 0)
    with pytest.raises(ValueError, match="head=4"):
        attention.attention_table(small, 0, 4)
    with pytest.raises(ValueError, match="tap='nope'"):
        activations.token_norms(small, 0, "nope")


def test_log_axis_ticks_read_as_their_values():
    """Plotly's own labels of a short log range read "5 6 7 8 9 1 2" (0.5 shown as 5); ours say 0.5."""
    from encoder.viz.teaching import grad_norm_chart, log_ticks

    ticks, text = log_ticks(0.505, 3.86)
    assert [float(t) for t in text] == ticks and "0.5" in text and "2" in text
    df = pd.DataFrame({"n": [6, 12, 24] * 2, "g": [3.7, 2.95, 3.86, 1.16, 0.69, 0.51], "norm": ["post"] * 3 + ["pre"] * 3})
    fig = grad_norm_chart(df, "n", "g", "norm", "t", y_title="gradient norm of the last layer's W2")
    assert fig.layout.yaxis.title.text == "gradient norm of the last layer's W2"
    lo, hi = fig.layout.yaxis.range
    assert 10**lo < 0.51 and 10**hi > 3.86  # every point is inside the axis
    floored = grad_norm_chart(df.assign(g=[3e-8, 1e-7, 2e-8, 1, 1, 1]), "n", "g", "norm", "t", floor=1e-6)
    assert min(floored.data[0].y) == 1e-6 and "drawn at 1e-06" in floored.layout.title.subtitle.text


STYLED = {  # figures built with plotly's validated objects and given the common look by style.apply
    "tap-profile": lambda t, p: activations.tap_profile(t.stats(), 1, presentation=p),
    "residual-norms": lambda t, p: activations.residual_norms({"<b>x</b>": t, "y": t}, presentation=p),
    "token-norms": lambda t, p: activations.token_norms(t, 0, "attn", presentation=p),
    "histogram": lambda t, p: activations.tap_histogram(t, 1, "ffn", presentation=p),
    "tensor": lambda t, p: activations.tensor_heatmap(t.taps[0]["ffn"], t.tokens, "a title", presentation=p),
    "positions": lambda t, p: similarity.position_similarity(t.hidden_states[0], presentation=p),
    "grad-norms": lambda t, p: teaching.grad_norm_chart(
        pd.DataFrame({"layer": [0, 1, 0, 1], "norm": [1.0, 2.0, 3.0, 1.5], "kind": ["post", "post", "pre", "pre"]}),
        "layer", "norm", "kind", "W2 gradient norm per layer, 2 layers", presentation=p, narrow=True),
}


@pytest.mark.parametrize("presentation", [False, True], ids=["screen", "presentation"])
@pytest.mark.parametrize("name", STYLED)
def test_styled_figures_equal_validated_ones(small, name, presentation):
    """style.apply merges the look into the figure's plain dicts without validating them again: rebuilt with
    validation, every property is accepted and the JSON is the same; when presenting, no axis ticks below 16 px."""
    fig = STYLED[name](small, presentation)
    validated = go.Figure(fig.to_dict())
    assert json.loads(fig.to_json()) == json.loads(validated.to_json())
    spec = json.loads(fig.to_json())
    assert spec["layout"]["template"]["layout"]  # plotly_white, spelled out
    axes_ = [v for k, v in spec["layout"].items() if k.startswith(("xaxis", "yaxis"))]
    assert axes_
    if presentation:
        assert all(a.get("tickfont", {}).get("size", 0) >= 16 for a in axes_), axes_
