"""ui/caches.py's Beside: what is drawn from a cached object is built once per (object, key) and goes with the object."""

from __future__ import annotations

import datetime
import gc
import json
import threading
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.io import to_json

import encoder
import ui
from encoder.viz import activations, attention, attribution, purpose
from encoder.viz import heads as inside
from encoder.viz.style import QuickFigure
from ui.caches import Beside, ByteCache, KeptFigure, keepable


@dataclass(frozen=True, eq=False)
class Held:
    """Stands in for a cached trace or chart: compared by identity, as the pages hold them."""

    name: str


@dataclass(frozen=True, eq=False)
class Trace:
    """Stands in for a cached trace: its tensors count against the cache's byte budget."""

    weights: torch.Tensor


def test_built_once_per_object_and_key():
    beside, calls = Beside(), []

    def build(tag):
        calls.append(tag)
        return [tag]

    a, b = Held("a"), Held("b")
    first = beside.get(a, ("taps", 0), lambda: build("a0"))
    assert beside.get(a, ("taps", 0), lambda: build("again")) is first  # a rerun, another session: the same figure
    assert beside.get(a, ("taps", 1), lambda: build("a1")) == ["a1"]  # another layer: built
    assert beside.get(b, ("taps", 0), lambda: build("b0")) == ["b0"]  # another object with equal fields: built
    assert calls == ["a0", "a1", "b0"]
    assert len(beside) == 3


def test_what_is_kept_goes_with_its_object_and_never_reaches_a_later_one():
    beside = Beside()
    owner = Held("trace")
    beside.get(owner, "fig", lambda: "drawn from the first trace")
    gone = id(owner)
    del owner
    gc.collect()
    assert len(beside) == 0  # freed with the trace, however many sessions drew it
    # A new object may get the old one's id: it must never see the old figure.
    for _ in range(1000):
        other = Held("trace")
        if id(other) == gone:
            break
    assert beside.get(other, "fig", lambda: "its own") == "its own"


def test_concurrent_first_builds_agree_on_one_value():
    beside, owner, seen = Beside(), Held("t"), []
    start = threading.Barrier(4)

    def session():
        start.wait()
        seen.append(beside.get(owner, "fig", lambda: object()))

    threads = [threading.Thread(target=session) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(v) for v in seen}) == 1  # whoever built first, every session shows the kept one


def test_figures_go_when_the_byte_cache_evicts_their_object():
    # The app's pattern: a trace held by a ByteCache (CACHE), its figures beside it. A newer trace that pushes the
    # old one out of the budget must take the old figures with it, while a rerun still finds its own.
    store, beside = ByteCache(lambda: 1000), Beside()
    old = store.get("old sentence", lambda: Trace(torch.zeros(200)))  # 800 bytes of the 1,000
    assert store.get("old sentence", lambda: Trace(torch.ones(200))) is old  # the identity a rerun relies on
    beside.get(old, "map", lambda: "the old map")
    del old
    new = store.get("new sentence", lambda: Trace(torch.zeros(200)))  # evicts the old trace
    assert store.keys() == ["new sentence"]
    assert len(beside) == 0
    assert beside.get(new, "map", lambda: "the new map") == "the new map"


def test_each_object_keeps_at_most_its_share_the_least_recently_used_going_first():
    beside, owner = Beside(per_owner=3), Held("long sentence")
    for layer in range(3):
        beside.get(owner, layer, lambda layer=layer: f"figure {layer}")
    beside.get(owner, 0, lambda: "rebuilt")  # used again: now the most recent
    beside.get(owner, 3, lambda: "figure 3")  # one too many: layer 1, the least recently used, goes
    assert len(beside) == 3
    assert beside.get(owner, 0, lambda: "rebuilt") == "figure 0"
    assert beside.get(owner, 1, lambda: "rebuilt") == "rebuilt"


def test_figures_of_a_trace_are_kept_only_for_eval_mode_traces_up_to_128_tokens():
    """ui.kept_figure: a figure of two runs (a trace and its knock-out) is kept beside the trace; a training-mode run
    (one draw of dropout, which the cache may draw again) and a long trace's maps (memory) are built each time."""
    model = encoder.build_model(encoder.EncoderConfig(d_model=32, num_heads=2, d_ff=64, num_layers=1))
    short, train = encoder.run(model, "a b c"), encoder.run(model, "a b c", train=True)
    long = encoder.run(model, " ".join(["word"] * 200))
    assert long.seq_len > ui.KEEP_FIGURES_UP_TO
    calls = []

    def build(tag):
        calls.append(tag)
        return [tag]

    first = ui.kept_figure(short, ("knockout", "0.1", "pair"), lambda: build("short"))
    assert ui.kept_figure(short, ("knockout", "0.1", "pair"), lambda: build("again")) is first
    assert ui.kept_figure(short, ("knockout", "", "pair"), lambda: build("other knock-outs")) == ["other knock-outs"]
    for trace, tag in ((train, "train"), (long, "long")):
        assert ui.kept_figure(trace, ("pair",), lambda tag=tag: build(tag)) is not ui.kept_figure(
            trace, ("pair",), lambda tag=tag: build(tag))
    assert calls == ["short", "other knock-outs", "train", "train", "long", "long"]


def test_a_kept_figure_draws_what_its_figure_draws_and_makes_its_dict_once():
    trace = encoder.run(encoder.load_pretrained(), "The cat sat on the mat.")
    beside, owner = Beside(), Held("trace")
    kept = beside.get(owner, "map", lambda: attention.attention_heatmap(trace, 2, 3))
    assert type(kept) is KeptFigure and kept.layout.height  # still the figure: the pages read its properties
    fresh = to_json(attention.attention_heatmap(trace, 2, 3), validate=False)
    # What st.plotly_chart sends, byte for byte, on every draw; the second draw reuses the first one's dict.
    assert [to_json(kept, validate=False) for _ in range(3)] == [fresh] * 3
    assert kept.to_dict() is kept.to_dict()
    assert beside.get(owner, "note", lambda: "not a figure") == "not a figure"


def test_a_kept_figures_dict_is_plotlys_own_for_every_kind_of_value():
    """KeptFigure makes its dict in one pass (plain_copy) instead of plotly.py's deep copy and base64 pass, and a
    figure made by style.quick that nothing has read yet straight from the dicts it was made from (QuickFigure),
    without building plotly.py's objects: what is sent is plotly's own dict (the same JSON, keys perhaps in another
    order) for the app's figures (maps, thumbnails, a pair, a head's three figures, attributions, trajectories,
    histograms) and for values plotly treats apart (a skipped key's array, an array inside a list, a tuple, a date, an
    empty array, int64 ticks), and the figure itself is left as it was (its arrays still arrays)."""
    model = encoder.load_pretrained()
    trace = encoder.run(model, "The animal didn't cross the street because it was too tired.")
    steps = inside.head_steps(trace, 2, 3, 10)
    scores = np.linspace(-1, 1, trace.seq_len)

    def odd() -> go.Figure:
        return go.Figure(data=[dict(type="heatmap", z=np.arange(6, dtype=np.int64).reshape(2, 3), x=("a", "b", "c"),
                                    customdata=[np.ones(2, np.float32), {"v": np.zeros(2)}], text=np.array(["x", "y"]),
                                    meta=dict(when=datetime.date(2026, 11, 28), empty=np.zeros(0)))],
                         layout=dict(xaxis=dict(range=np.array([0.0, 2.0]), tickvals=np.arange(3)), title=dict(text="t")),
                         _validate=False)  # as style.quick builds them: the values stay what they were given

    builds = [lambda: attention.attention_heatmap(trace, 2, 3),
              lambda: attention.attention_heatmap(trace, 1, None, True, scale="row", presentation=True),
              lambda: attention.attention_grid(trace, 2), lambda: attention.model_view(trace),
              lambda: attention.attention_pair({"a": trace, "b": trace}, 1, 0, presentation=True),
              lambda: inside.scores_figure(steps), lambda: inside.values_figure(steps, presentation=True),
              lambda: inside.output_figure(steps, trace.num_heads, model.layers[2].attn.out.weight),
              lambda: attribution.token_strip([("1", trace.tokens, scores)], "t", subtitle="s"),
              lambda: attribution.token_bars(trace.tokens, scores, "t", subtitle="s", presentation=True),
              lambda: purpose.trajectories(torch.randn(7, trace.seq_len, 2, generator=torch.Generator().manual_seed(0)),
                                           trace.labels, [10, 2], torch.tensor([0.5, 0.2]), subtitle="s"),
              lambda: activations.tap_histogram(trace, 0, "ffn"), lambda: activations.residual_norms({"m": trace}), odd]
    for build in builds:
        fresh = build()
        expected = to_json(go.Figure.to_dict(fresh), validate=False)
        lazy = keepable(build())
        made_quick = isinstance(fresh, QuickFigure)
        assert type(lazy) is KeptFigure and (lazy.plain() is not None) == made_quick  # never read: not built
        assert json.loads(to_json(lazy.to_dict(), validate=False)) == json.loads(expected), fresh.layout.title.text
        assert lazy.to_dict() is lazy.to_dict() and (lazy.plain() is not None) == made_quick
        assert lazy.layout.title.text == fresh.layout.title.text and lazy.plain() is None  # read: built, as before
        assert to_json(go.Figure.to_dict(lazy), validate=False) == expected
        built = keepable(build())
        built.layout.height  # noqa: B018  (read first: its dict from plotly.py's objects)
        assert to_json(built.to_dict(), validate=False) == expected
        assert to_json(go.Figure.to_dict(built), validate=False) == expected  # the figure itself is unchanged
    kept = keepable(odd())
    kept.layout  # noqa: B018
    sent = kept.to_dict()
    assert isinstance(kept._data[0]["z"], np.ndarray) and isinstance(kept._layout["xaxis"]["range"], np.ndarray)
    assert sent["data"][0]["z"]["dtype"] == "i1" and isinstance(sent["layout"]["xaxis"]["range"], np.ndarray)


def test_sessions_reading_one_unbuilt_figure_at_once_all_see_it_whole():
    """A kept QuickFigure is shared by every session: threads that read it at the same moment while its plotly.py
    objects are not built yet each get the figure's values (one builds, the others wait), never a half-built one."""
    trace = encoder.run(encoder.load_pretrained(), "The cat sat on the mat.")
    for _ in range(5):
        fig = keepable(attention.attention_grid(trace, 1))
        assert fig.plain() is not None
        start, seen, errors = threading.Barrier(8), [], []

        def read(fig=fig, start=start, seen=seen, errors=errors) -> None:
            start.wait()
            try:
                seen.append((fig.layout.height, len(fig.data), fig.data[0].type))
            except Exception as err:  # noqa: BLE001 (any error here is the failure)
                errors.append(repr(err))

        threads = [threading.Thread(target=read) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors and len(set(seen)) == 1 and len(seen) == 8, (errors, seen)
        assert fig.plain() is None and seen[0][1] == trace.num_heads
