"""The figures of "Why are these similar?" (encoder/viz/attribution.py): the numbers they draw, escaped user text,
underflow drawn as 0, the legend's areas in order, and the presentation sizes."""

import base64
import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
import torch

from encoder import EncoderConfig, build_model, run
from encoder.analysis import faithfulness
from encoder.analysis.attribution import similarity_target
from encoder.viz import attribution as fig
from encoder.viz.style import MIN_PRESENT_FONT

TOKENS = ["[CLS]", "<b>x</b>", "cat", "[SEP]"]


def values(x) -> list:
    """A plotly array as to_plotly_json gives it: a list, or packed as {"dtype", "bdata"}."""
    if isinstance(x, dict) and "bdata" in x:
        return np.frombuffer(base64.b64decode(x["bdata"]), dtype=x["dtype"]).tolist()
    return list(np.asarray(x).tolist())


def test_the_strip_draws_every_score_in_reading_order_on_one_scale():
    a, b = np.array([0.0, 0.5, -0.25, 0.0]), np.arange(30, dtype=float) / 30
    spec = fig.token_strip([("1", TOKENS, a), ("2", [f"t{i}" for i in range(30)], b)], "title").to_plotly_json()
    cell = spec["data"][0]
    cells = [v for row in cell["z"] for v in row if v is not None]
    assert cells == [*a, *b]
    assert cell["zmin"] == -cell["zmax"] and cell["zmax"] == pytest.approx(b.max())
    assert "&lt;b&gt;x&lt;/b&gt;" in cell["text"][0] and not any("<b>" in t for row in cell["text"] for t in row)
    assert any(row == [None] * len(row) for row in cell["z"])  # a blank line between the sentences
    with pytest.raises(ValueError, match="one score per token"):
        fig.token_strip([("1", TOKENS, a[:3])], "title")


def test_long_sentences_keep_their_tokens_in_the_hover_only():
    tokens = [f"w{i}" for i in range(512)]
    cell = fig.token_strip([("1", tokens, np.ones(512))], "t").to_plotly_json()["data"][0]
    assert "text" not in cell and len(cell["z"][0]) == 32 and "w511 (511)" in cell["hovertext"][-1][-1]


def test_a_strip_asks_for_the_width_its_longest_printed_token_needs():
    """layout.meta["min_px"]: below it the page scrolls the strip sideways (tested in Chromium, test_projector)."""
    width = {tuple(words): fig.token_strip([("1", words, np.ones(len(words)))], "t").layout.meta["min_px"]
             for words in (["a", "b"], ["a", "because"], ["a", "extraordinary"])}  # the last one cut to 9 characters
    assert width[("a", "b")] < width[("a", "because")] < width[("a", "extraordinary")] < 1000
    long = fig.token_strip([("1", ["because"] * 200, np.ones(200))], "t")  # no tokens printed past TEXT_UP_TO
    assert long.layout.meta["min_px"] == fig.STRIP_SIDES_PX[False]
    shown = fig.token_strip([("1", ["because"], np.ones(1))], "t", presentation=True).layout.meta["min_px"]
    assert shown > width[("a", "because")]  # larger letters when presenting


def test_values_that_underflow_are_drawn_as_0_and_the_csv_keeps_them():
    scores = torch.tensor([1e-45, -3e-39, 0.5, 2.0e-38], dtype=torch.float64)
    drawn = fig.shown(scores)
    assert drawn.tolist() == [0.0, 0.0, 0.5, 2.0e-38]
    bars = fig.token_bars(TOKENS, scores, "t").to_plotly_json()["data"][0]
    assert values(bars["y"]) == [0.0, 0.0, 0.5, 2.0e-38]
    csv = pd.DataFrame(dict(score=scores.tolist())).to_csv(index=False)  # what the page writes
    assert "1e-45" in csv and "-3e-39" in csv
    assert not np.isnan(drawn).any()


def test_bars_are_red_for_support_and_blue_against():
    bars = fig.token_bars(TOKENS, np.array([0.1, -0.2, 0.0, 0.3]), "t").to_plotly_json()["data"][0]
    assert bars["marker"]["color"] == [fig.POSITIVE, fig.NEGATIVE, fig.POSITIVE, fig.POSITIVE]
    assert not any("<b>" in str(x) for x in bars["x"])


@pytest.fixture(scope="module")
def chart():
    model = build_model(EncoderConfig(d_model=32, num_heads=4, d_ff=64, num_layers=2))
    return faithfulness.faithfulness(model, run(model, "The cat sat on the warm mat."),
                                     similarity_target("A kitten slept on the rug."))[0]


def test_the_faithfulness_chart_lists_every_ranking_with_its_areas_best_first(chart):
    spec = fig.faithfulness_chart(chart, "cosine similarity").to_plotly_json()
    named = [t for t in spec["data"] if t.get("showlegend", True)]
    ordered = sorted(chart.curves, key=lambda c: c.deletion_auc)
    assert [t["name"] for t in named] == [f"{c.label} · {c.deletion_auc:.2f} / {c.insertion_auc:.2f}" for c in ordered]
    assert len(spec["data"]) == 2 * len(chart.curves)  # a deletion and an insertion line each
    deletion = {t["legendgroup"]: t for t in spec["data"] if t["xaxis"] == "x"}
    for c in chart.curves:
        np.testing.assert_allclose(values(deletion[c.key]["y"]), c.deletion.numpy())
    titles = [a["text"] for a in spec["layout"]["annotations"]]
    assert titles == ["Deletion → [MASK]", "Insertion"]
    assert deletion["random"]["line"]["dash"] == "dash"


@pytest.mark.parametrize("presentation", [False, True])
def test_the_faithfulness_chart_built_from_dicts_is_what_plotly_validates(chart, presentation):
    """It skips plotly.py's validation for speed: rebuilt with validation, every property is accepted (an unknown key
    raises) and the JSON is the same; its axes are make_subplots' pair sharing y, with the curves on both."""
    built = fig.faithfulness_chart(chart, "cosine similarity", subtitle="<b>s</b>", presentation=presentation)
    assert json.loads(built.to_json()) == json.loads(go.Figure(built.to_dict()).to_json())
    layout = built.to_plotly_json()["layout"]
    assert layout["yaxis2"]["matches"] == "y" and layout["xaxis"]["domain"][1] < layout["xaxis2"]["domain"][0]
    assert [layout[a]["title"]["text"] for a in ("xaxis", "xaxis2", "yaxis")] == ["words removed", "words kept",
                                                                                   "cosine similarity"]
    assert {t.xaxis for t in built.data} == {"x", "x2"}
    again = fig.faithfulness_chart(chart, "other", presentation=presentation).to_plotly_json()["layout"]
    assert again["yaxis"]["title"]["text"] == "other"  # the shared grid is copied, never changed in place


def test_presentation_sizes(chart):
    spec = fig.faithfulness_chart(chart, "cosine", presentation=True).to_plotly_json()
    layout = spec["layout"]
    assert layout["height"] <= 620 and layout["legend"]["font"]["size"] >= MIN_PRESENT_FONT
    assert all(a["font"]["size"] >= MIN_PRESENT_FONT for a in layout["annotations"])
    strip = fig.token_strip([("1", TOKENS, np.ones(4))], "t", presentation=True).to_plotly_json()
    assert strip["data"][0]["textfont"]["size"] >= MIN_PRESENT_FONT
    assert strip["layout"]["yaxis"]["tickfont"]["size"] >= MIN_PRESENT_FONT


def test_the_ranking_chart_puts_the_best_on_top_and_marks_the_published_four():
    table = pd.DataFrame(dict(key=["decompx", "raw", "random"], measure=["DecompX", "Raw", "Random order"],
                              mean_aopc=[0.5, 0.3, 0.1], std_aopc=[0.05, 0.02, 1e-45], n=[8, 8, 8]))
    bars = fig.ranking_chart(table, ("decompx",)).to_plotly_json()["data"][0]
    assert list(bars["y"]) == ["Random order", "Raw", "DecompX"]  # plotly's first category is the bottom one
    assert bars["marker"]["color"] == [fig.RANDOM_COLOUR, "#4c6ef5", "#e8590c"]
    assert values(bars["error_x"]["array"]) == [0.0, 0.02, 0.05]
