"""Figures for what the encoder is for (encoder/viz/purpose.py): built from known inputs, checked value by value."""

from __future__ import annotations

import base64
import itertools
import json

import numpy as np
import pytest
import torch

import encoder
from encoder.analysis import embeddings
from encoder.viz import labels, purpose

SMALL = encoder.EncoderConfig(d_model=32, num_heads=4, d_ff=64, num_layers=3)
HOSTILE = ["<b>bold</b>", "<script>alert(1)</script>", "a & b"]


@pytest.fixture(scope="module")
def small():
    return encoder.build_model(SMALL)


def spec(fig) -> dict:
    """The figure as plain data, every array a numpy array or a list (plotly's JSON packs numbers as binary)."""
    return {"data": [{k: _plain(v) for k, v in d.to_plotly_json().items()} for d in fig.data],
            "layout": fig.layout.to_plotly_json()}


def _plain(value: object) -> object:
    if isinstance(value, dict) and "bdata" in value:
        a = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        return a.reshape([int(n) for n in str(value["shape"]).split(",")]) if "shape" in value else a
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def strings(obj: object) -> list[str]:
    """Every string inside a nested structure of dicts and lists."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in strings(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in strings(v)]
    return []


def no_markup(fig) -> None:
    text = fig.to_json().lower()
    for tag in ("<b>", "<script", "<img"):
        assert tag not in text


def unit_rows(n: int, d: int, seed: int = 0) -> torch.Tensor:
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed))
    return x / x.norm(dim=-1, keepdim=True)


# ------------------------------------------------------------------------------------------ similarity
def test_similarity_heatmap_shows_the_matrix_symmetric_with_ones_on_the_diagonal():
    vectors = unit_rows(5, 16)
    sim = embeddings.cosine_matrix(vectors)
    sentences = ["One.", "Two.", *HOSTILE]
    s = spec(purpose.similarity_heatmap(sim, sentences))
    z = np.array(s["data"][0]["z"], dtype=float)
    np.testing.assert_allclose(z, z.T, atol=1e-6)
    np.testing.assert_allclose(np.diag(z), 1.0, atol=1e-6)
    np.testing.assert_allclose(z, (vectors @ vectors.T).numpy(), atol=1e-6)
    assert (s["data"][0]["zmin"], s["data"][0]["zmax"]) == (-1, 1)
    assert s["data"][0]["text"][0][0] == "1.00" and s["data"][0]["text"][1][0] == f"{z[1, 0]:.2f}"
    assert list(s["data"][0]["x"][:2]) == ["1 · One.", "2 · Two."]
    assert s["data"][0]["x"][2] == "3 · &lt;b&gt;bold&lt;/b&gt;"
    no_markup(purpose.similarity_heatmap(sim, sentences))


def test_repeated_sentences_keep_their_own_rows():
    sim = torch.ones(2, 2)
    s = spec(purpose.similarity_heatmap(sim, ["Same.", "Same."]))
    assert len(set(s["data"][0]["x"])) == 2


def test_sentences_that_start_alike_are_labelled_where_they_differ():
    start = "The animal didn't cross the street because it was too"
    tired, wide = f"{start} tired.", f"{start} wide."
    names = purpose.sentence_labels([tired, wide, "The tired animal stayed on this side of the road.", tired,
                                     "The animal didn't"])
    assert names[0] == names[3].replace("4", "1", 1) == "1 · … was too tired."
    assert names[1] == "2 · … was too wide."
    assert names[2].startswith("3 · The tired animal") and names[4] == "5 · The animal<br>didn't"  # short starts: whole
    assert len({name.split(" · ", 1)[1] for name in names}) == 4  # only the repeat reads like another
    long = "x" * 30  # one shared word longer than a label shows: the words after it are all kept
    assert purpose.distinct_part([long, "is", "rare"], [[long, "was", "fine"]]) == ["…", long, "is", "rare"]


def test_similarity_heatmap_rejects_a_matrix_of_the_wrong_shape():
    with pytest.raises(ValueError, match="3 sentences"):
        purpose.similarity_heatmap(torch.ones(2, 2), ["a", "b", "c"])


def test_sentence_vectors_draw_one_row_per_sentence():
    vectors = unit_rows(3, 40)
    s = spec(purpose.sentence_vectors(vectors, ["a", "b", "c"], "three vectors"))
    z = np.array(s["data"][0]["z"], dtype=float)
    assert z.shape == (3, 40)
    np.testing.assert_allclose(z, vectors.numpy(), atol=1e-6)
    with pytest.raises(ValueError):
        purpose.sentence_vectors(vectors, ["a", "b"], "wrong")


# ---------------------------------------------------------------------------------------- trajectories
def test_trajectories_have_one_point_per_depth_for_every_token(small):
    trace = encoder.run(small, "the cat sat on the mat because it was tired")
    points, shares = embeddings.trajectories(trace)
    depth = trace.num_layers + 1
    assert tuple(points.shape) == (depth, trace.seq_len, 2)
    highlight = [trace.tokens.index("it"), trace.tokens.index("cat")]
    s = spec(purpose.trajectories(points, trace.tokens, highlight, shares))
    others, *paths = s["data"]
    assert [p["name"] for p in paths] == ["it (8)", "cat (2)"]
    assert [p["line"]["color"] for p in paths] == [purpose.highlight_colour(0), purpose.highlight_colour(1)]
    notes = {(a["text"], round(a["x"], 5), round(a["y"], 5)) for a in s["layout"]["annotations"]}
    for p, pos in zip(paths, highlight, strict=True):
        assert len(p["x"]) == depth
        np.testing.assert_allclose(p["x"], points[:, pos, 0].double().numpy(), atol=1e-6)
        np.testing.assert_allclose(p["y"], points[:, pos, 1].double().numpy(), atol=1e-6)
        end = (f"{trace.tokens[pos]} (L{depth - 2})", round(float(points[-1, pos, 0]), 5), round(float(points[-1, pos, 1]), 5))
        assert end in notes, notes  # each highlighted path's last point names it (its first, "emb", where room is)
    for axis, k in (("xaxis", 0), ("yaxis", 1)):  # the axes span the points, not the plot's shape
        lo, hi = float(points[..., k].min()), float(points[..., k].max())
        r = s["layout"][axis]["range"]
        assert r[0] <= lo and r[1] >= hi and (r[1] - r[0]) <= 1.2 * (hi - lo), (axis, r, lo, hi)
    # the grey paths: depth points and one gap for each of the other tokens
    assert len(others["x"]) == (trace.seq_len - len(highlight)) * (depth + 1)
    assert sum(x is None for x in others["x"]) == trace.seq_len - len(highlight)
    assert f"{float(shares[0]):.0%} of the variance" in s["layout"]["xaxis"]["title"]["text"]


def test_trajectory_labels_are_escaped_and_every_token_can_be_highlighted():
    tokens = ["[CLS]", *HOSTILE, "[SEP]"]
    points = torch.randn(4, len(tokens), 2)
    fig = purpose.trajectories(points, tokens, range(len(tokens)))
    no_markup(fig)
    assert len(spec(fig)["data"]) == len(tokens)  # no grey trace when nothing is left grey


def test_placed_labels_never_overlap_at_any_scale_and_stay_in_the_plot():
    rng = np.random.default_rng(0)
    pts = rng.normal(size=(40, 2)) * [6, 4]
    wanted = [labels.Label(float(x), float(y), text=f"token {i} (L5)" if i < 5 else "emb", size=16, marker=6)
              for i, (x, y) in enumerate(pts)]
    xr, yr = (pts[:, 0].min() - 1, pts[:, 0].max() + 1), (pts[:, 1].min() - 1, pts[:, 1].max() + 1)
    placed = labels.place(wanted, xr, yr, (20.0, 40.0))
    assert [p.index for p in placed][:5] == [0, 1, 2, 3, 4] and len(placed) < len(wanted)  # first come, first placed
    origin = (xr[0], yr[1])
    for scale in (20.0, 27.5, 33.0, 40.0):  # the two ends the placement checked, and scales in between
        boxes = [labels.box(wanted[p.index], p.side, origin, scale) for p in placed]
        for a, b in itertools.combinations(boxes, 2):
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (scale, a, b)
        assert all(b[0] >= 0 and b[1] >= 0 and b[2] <= (xr[1] - xr[0]) * scale and b[3] <= (yr[1] - yr[0]) * scale
                   for b in boxes)


def test_placed_labels_leave_the_markers_they_are_given_visible_at_any_scale():
    """A path's points cluster where a token barely moves: "emb" was printed over them. Every label is clear of the
    given markers at both ends of the scale and in between, and a label that would cover one moves to another side."""
    path = np.array([[0.5 * d, 0.05 * d * d] for d in range(7)])  # seven points heading right, a little up
    markers = [(float(x), float(y), 3.0 + d) for d, (x, y) in enumerate(path)]
    wanted = [labels.Label(float(path[0, 0]), float(path[0, 1]), "emb", 14, 3.0),
              labels.Label(float(path[-1, 0]), float(path[-1, 1]), "animal (L5)", 16, 9.0)]
    xr, yr = (path[:, 0].min() - 8, path[:, 0].max() + 8), (path[:, 1].min() - 4, path[:, 1].max() + 4)
    origin = (xr[0], yr[1])
    placed = labels.place(wanted, xr, yr, (20.0, 40.0), markers)
    assert len(placed) == 2 and placed[0].side != labels.SIDES[0], "'emb' leaves the path's side (right) for another"
    for scale in (20.0, 30.0, 40.0):
        for p in placed:
            b = labels.box(wanted[p.index], p.side, origin, scale)
            for x, y, r in markers:
                m = labels.marker_box(x, y, r, origin, scale)
                assert b[2] <= m[0] or m[2] <= b[0] or b[3] <= m[1] or m[3] <= b[1], (scale, wanted[p.index].text, m)
    unseen = labels.place(wanted, xr, yr, (20.0, 40.0))  # told of no markers: the first side, over the path
    covers = any(not (b[2] <= m[0] or m[2] <= b[0] or b[3] <= m[1] or m[3] <= b[1])
                 for p in unseen for b in [labels.box(wanted[p.index], p.side, origin, 30.0)]
                 for m in [labels.marker_box(x, y, r, origin, 30.0) for x, y, r in markers])
    assert covers, "the sample does put a label over the path when the markers are not given"


def test_trajectories_reject_points_that_do_not_match_the_tokens():
    with pytest.raises(ValueError, match="3, 2"):
        purpose.trajectories(torch.zeros(4, 2, 2), ["a", "b", "c"])


def test_depth_similarity_draws_one_line_per_token():
    s = spec(purpose.depth_similarity({"animal (2)": [0.0, 0.3, 0.6], "<b>x</b> (5)": torch.tensor([0.1, 0.1, 0.2])},
                                      "it", ["#000001", "#000002"]))
    assert [len(d["y"]) for d in s["data"]] == [3, 3]
    assert [d["line"]["color"] for d in s["data"]] == ["#000001", "#000002"]
    np.testing.assert_array_equal(s["data"][0]["y"], [0.0, 0.3, 0.6])
    assert s["layout"]["xaxis"]["ticktext"] == ["emb", "L0", "L1"]
    assert "<b>" not in json.dumps(strings(s))


# ------------------------------------------------------------------------------------------ knock-outs
def test_output_change_from_known_vectors():
    intact = torch.tensor([[3.0, 4.0], [1.0, 0.0], [0.0, 2.0]])
    knocked = torch.tensor([[3.0, 4.0], [2.0, 0.0], [2.0, 0.0]])
    change = purpose.output_change(intact, knocked, ["a", "b", "c"])
    np.testing.assert_allclose(change["relative_change"], [0.0, 1.0, np.sqrt(8) / 2])
    np.testing.assert_allclose(change["cosine_to_intact"], [1.0, 1.0, 0.0], atol=1e-12)
    s = spec(purpose.token_change(change, True))
    np.testing.assert_allclose(s["data"][0]["y"], change["relative_change"])
    title = spec(purpose.token_change(change, False, presentation=True))["layout"]["title"]
    assert title["text"] == "Change of each token's output vector"  # whole at 1024 px presenting with the sidebar open
    assert title["subtitle"]["text"].startswith("nothing knocked out") and not s["layout"]["title"]["subtitle"]["text"]
    with pytest.raises(ValueError):
        purpose.output_change(intact, knocked[:2], ["a", "b", "c"])


def test_attention_change_is_zero_up_to_the_knocked_layer_and_not_after(small):
    text = "the animal did not cross the street because it was tired"
    intact = encoder.run(small, text)
    knocked = encoder.run(small, text, ablate={(1, 2)})
    s = spec(purpose.attention_change(intact.attention, knocked.attention, {1}))
    bars = s["data"][0]["y"]
    assert bars[0] == 0 and bars[1] == 0, "a knock-out zeroes the head's output, not its own pattern"
    assert bars[2] > 1e-4, "the next layer reads a changed input"
    assert s["data"][0]["marker"]["color"][1] != s["data"][0]["marker"]["color"][0]
    assert list(s["layout"]["xaxis"]["ticktext"]) == ["0", "1 (knocked out)", "2"]
    none = spec(purpose.attention_change(intact.attention, encoder.run(small, text).attention))
    np.testing.assert_array_equal(none["data"][0]["y"], [0, 0, 0])


# --------------------------------------------------------------------------------------------- rollout
def test_rollout_heatmap_shows_the_matrix_and_can_hide_special_tokens():
    tokens = ["[CLS]", "it", "<b>x</b>", "[SEP]"]
    m = torch.softmax(torch.randn(4, 4, generator=torch.Generator().manual_seed(1)), dim=-1)
    s = spec(purpose.rollout_heatmap(m, tokens, 5))
    z = np.array(s["data"][0]["z"], dtype=float)
    np.testing.assert_allclose(z, m.numpy(), atol=1e-6)
    assert s["data"][0]["zmin"] == 0 and s["data"][0]["zmax"] == pytest.approx(float(m.max()), abs=1e-6)
    assert "layers 0–5" in s["layout"]["title"]["text"]
    hidden = spec(purpose.rollout_heatmap(m, tokens, 5, hide_special=True, special=(0, 3), special_names="[CLS]/[SEP]"))
    np.testing.assert_allclose(np.array(hidden["data"][0]["z"], dtype=float), m[1:3, 1:3].numpy(), atol=1e-6)
    assert "([CLS]/[SEP] hidden)" in hidden["layout"]["title"]["text"]
    # the positions come from the tokenizer (Trace.special_positions), not from the names: none given, none hidden
    np.testing.assert_allclose(np.array(spec(purpose.rollout_heatmap(m, tokens, 5, hide_special=True))["data"][0]["z"],
                                        dtype=float), m.numpy(), atol=1e-6)
    roberta = spec(purpose.rollout_heatmap(m, ["<s>", "▁it", "x", "</s>"], 5, hide_special=True, special=(0, 3),
                                           special_names="<s>/</s>"))
    assert "(&lt;s&gt;/&lt;/s&gt; hidden)" in roberta["layout"]["title"]["text"]
    no_markup(purpose.rollout_heatmap(m, tokens, 5))
    with pytest.raises(ValueError):
        purpose.rollout_heatmap(m[:3], tokens, 5)


def test_rollout_of_a_real_trace_is_drawn_for_every_layer(small):
    trace = encoder.run(small, "rollout mixes attention with the residual path")
    rolled = embeddings.attention_rollout(trace.attention)  # (layers, seq, seq)
    for layer in range(trace.num_layers):
        z = np.array(spec(purpose.rollout_heatmap(rolled[layer], trace.tokens, layer))["data"][0]["z"], dtype=float)
        np.testing.assert_allclose(z.sum(-1), 1.0, atol=1e-5)
