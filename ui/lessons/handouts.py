"""A lesson's handout: one self-contained HTML file with every slide's main figure, its talking points and a link back.

The figures are the pages' own (encoder.viz), built from each slide's settings on the live model through the app's
caches: interactive plotly charts, drawn by the plotly.js bundle of the installed plotly package, embedded once; the
layer diagrams as Graphviz SVG. Nothing is fetched from a network when the file is opened. Every text a lesson
carries is HTML-escaped; figure data travels as JSON in <script type="application/json"> with '<', '>' and '&'
escaped, so no note, token or title can close a tag.
"""

from __future__ import annotations

import base64
import datetime
import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd
import plotly
import plotly.graph_objects as go
import torch
from plotly.offline import get_plotlyjs

from encoder.analysis import embeddings
from encoder.analysis.attribution import METHODS, similarity_target
from encoder.analysis.measures import MEASURES
from encoder.analysis.variants import find_token, token_rows
from encoder.viz import activations, attention, attribution, diagram, heads, purpose, teaching
from encoder.viz import text as viz_text

from .. import get_permutation_check, get_rollout, get_variant_trace, why
from .. import measures as measure_maps
from .. import purpose as sentences
from ..captions import ROUNDING, rewired_note
from . import claims
from .edit import display_text
from .format import Lesson, Slide
from .live import Live, open_view

MAX_HANDOUT_BYTES = 8_000_000  # the cap for a 10-slide lesson


@dataclass(frozen=True)
class Svg:
    """A drawing already rendered to SVG (the layer diagrams)."""

    data: bytes


Figure = go.Figure | Svg


# ------------------------------------------------------------------------------------------- main figures
def _attention(live: Live) -> go.Figure:
    v, trace = live.values, live.trace
    hide, layer = v["hide_special"], live.layer
    if v["measure"] != "raw" and v["view"] == "head":  # the slide's measure, as the map showed it
        return _measure(live)
    if v["view"] == "model":
        return attention.model_view(trace, hide_special=hide)
    if v["view"] == "rollout":
        return purpose.rollout_heatmap(get_rollout(live.frame)[layer], trace.labels, layer, hide_special=hide,
                                       special=trace.special_positions)
    if v["view"] == "layer":
        return attention.attention_grid(trace, layer, hide_special=hide, scale=v["scale"])
    return attention.attention_heatmap(trace, layer, None if v["avg"] else live.head, hide_special=hide, scale=v["scale"])


def _measure(live: Live) -> go.Figure:
    """One layer's map of the slide's measure: the head's where the measure has heads, else the layer's."""
    v, trace, m = live.values, live.trace, MEASURES[live.values["measure"]]
    maps = measure_maps.get_maps(live.frame, m.key, live.query if m.needs_token else None)
    one_head = maps.heads is not None and not v["avg"]
    matrix = maps.heads[live.layer, live.head] if one_head else maps.layers[live.layer]
    who = f"head {live.head}" if one_head else ("average of heads" if maps.heads is not None else "whole layer")
    rows = f"row {live.query} only" if m.needs_token else "query (attending)"
    return purpose.rollout_heatmap(matrix, trace.labels, live.layer, hide_special=v["hide_special"],
                                   special=trace.special_positions, title=f"{m.label}, layer {live.layer}, {who}",
                                   rows=rows)


def _why_similar(live: Live) -> go.Figure:
    """The slide's attribution of the sentence's tokens (and the second sentence's, toward the same similarity)."""
    v, fr, trace = live.values, live.frame, live.trace
    knocks, _ = sentences.parse_ablate(v["ablate"], trace.config)
    target = why.target_of(v)
    if target.kind == "token" and not 0 <= target.token < trace.seq_len:
        raise ValueError(f"The sentence has no token {target.token}; choose one from 0 to {trace.seq_len - 1}.")
    texts = [trace.text] + ([v["text_b"]] if target.kind == "similarity" else [])
    targets = [target] + [similarity_target(trace.text, target.pooling)] * (len(texts) - 1)
    found = [(sentences.get_run(fr, t, knocks), why.get_attribution(fr, t, g, v["method"], v["ig_steps"], knocks))
             for t, g in zip(texts, targets, strict=True)]
    what = "the similarity" if target.kind == "similarity" else f"token {target.token}'s own direction"
    return attribution.token_strip([(f"{n}", run.labels, a.scores) for n, (run, a) in enumerate(found, 1)],
                                   f"{METHODS[v['method']].label} toward {what}")


def _inside_a_head(live: Live) -> go.Figure:
    return heads.scores_figure(heads.head_steps(live.trace, live.layer, live.head, live.query))


def _activations(live: Live) -> go.Figure:
    trace = live.trace
    return activations.tap_profile(trace.stats(), live.layer, norm=trace.config.norm, train=trace.train)


def _dataflow(live: Live) -> Svg:
    trace = live.frame.trace  # the diagram needs only the config; with a trace, the statistics go on its nodes
    stats = trace.stats() if trace is not None and live.values["overlay"] else None
    graph = diagram.layer_diagram(live.config, stats=stats, layer=live.layer,
                                  seq=trace.seq_len if trace is not None else None)
    return Svg(diagram.svg_bytes(graph))


def _tokens(live: Live) -> go.Figure:
    trace = live.trace
    vectors = live.frame.model.embed.tok.weight[trace.token_ids].detach().cpu()  # (seq, d_model), no positions
    return activations.tensor_heatmap(vectors, trace.tokens, f"Token embeddings: {trace.seq_len} × {trace.config.d_model}",
                                  subtitle="rows of the embedding table, no positions")


def _compare(live: Live) -> go.Figure:
    fr, trace, v = live.frame, live.trace, live.values
    if v["compare"] == "sentences":
        at = find_token(trace.tokens, v["word"])
        if at is None:
            raise ValueError(f"The token {v['word']!r} is not in the first sentence.")
        return teaching.token_attention(token_rows(trace, at, live.layer), trace.tokens, v["word"],
                                        f"First sentence, layer {live.layer}")
    other = "pre" if trace.config.norm == "post" else "post"
    twin = get_variant_trace(fr.model_key, fr.device, (("norm", other),), trace.text, trace.train)
    names = {"post": "Post-LN", "pre": "Pre-LN"}
    if rewired_note(fr.model_key, "", trace.config.norm, other):
        names[other] += " (rewired)"
    runs = {trace.config.norm: trace, other: twin}
    return attention.attention_pair({names["post"]: runs["post"], names["pre"]: runs["pre"]}, live.layer, live.head,
                                  scale=v["scale"])


def _step(live: Live) -> Svg:
    trace = live.frame.trace
    graph = diagram.layer_diagram(live.config, layer=live.layer, highlight=live.step.key,
                                  seq=trace.seq_len if trace is not None else None)
    return Svg(diagram.svg_bytes(graph))


def _stability(live: Live) -> go.Figure:
    depth = live.values["depth"]
    df = claims.grad_norms(depth).replace({"norm": {"post": "Post-LN", "pre": "Pre-LN"}})
    return teaching.grad_norm_chart(df, "layer", "grad_norm", "norm", f"W2 gradient norm per layer, {depth} layers",
                                    x_title="layer (0 = first)", y_title="gradient norm of W2")


def _position(live: Live) -> go.Figure:
    fr, cfg, seed = live.frame, live.config, live.values["shuffle"]
    runs = {f"this model (positional = {cfg.positional})": ()}
    if cfg.positional != "none":
        runs["same weights, positional = none"] = (("positional", "none"),)
    checks = {name: get_permutation_check(fr.model_key, fr.device, changes, live.trace.text, seed)
              for name, changes in runs.items()}
    per_layer = pd.DataFrame([{"layer": i, "attention difference": d, "model": name}
                              for name, r in checks.items() for i, d in enumerate(r.attn_diff_per_layer)])
    return teaching.grad_norm_chart(per_layer, "layer", "attention difference", "model",
                                    "Attention after shuffling vs shuffled attention, per layer", x_title="layer",
                                    y_title="max |A(Px) − P·A·Pᵀ|", floor=ROUNDING)


def _embeddings(live: Live) -> go.Figure:
    pool = live.values["pool"]
    shown, _ = sentences.sentence_list(live.values)
    vectors = torch.stack([sentences.get_sentence_vector(live.frame, s, pool).vector for s in shown])  # (n, d_model)
    pooled = "mean-pooled" if pool == "mean" else "[CLS] vectors"
    return purpose.similarity_heatmap(embeddings.cosine_matrix(vectors), shown, title=f"Cosine similarity ({pooled})")


def _trajectories(live: Live) -> go.Figure:
    trace = live.trace
    chosen = [w for w in live.values["follow"].split() if w in trace.tokens]
    highlight = [i for word in dict.fromkeys(chosen) for i, t in enumerate(trace.tokens) if t == word]
    points, shares = sentences.get_trajectories(live.frame)
    subtitle = f"“{viz_text.label(' '.join(trace.text.split()), 90)}”"
    return purpose.trajectories(points, trace.tokens, highlight, shares, subtitle=subtitle)


def _knockout(live: Live) -> go.Figure:
    trace = live.trace
    knocks, _ = sentences.parse_ablate(live.values["ablate"], trace.config)
    knocked = sentences.get_run(live.frame, trace.text, knocks)
    return purpose.token_change(purpose.output_change(trace.output, knocked.output, trace.tokens), bool(knocks))


# Each page's main figure, by URL path: the one a handout prints for a slide on that page (None: the page has no
# figure). A page added to the app needs an entry here; tests/app/test_lessons.py fails until it has one.
MAIN_FIGURES: dict[str, Callable[[Live], Figure] | None] = {
    "heatmaps": _attention,
    "inside-a-head": _inside_a_head,
    "statistics": _activations,
    "diagram": _dataflow,
    "wordpieces": _tokens,
    "side-by-side": _compare,
    "walkthrough": _step,
    "warmup": _stability,
    "word-order": _position,
    "check": None,
    "embeddings": _embeddings,
    "trajectories": _trajectories,
    "knockout": _knockout,
    "why-similar": _why_similar,
}
NEEDS_CONFIG_ONLY = ("diagram", "walkthrough")  # drawn from the config alone (with statistics when there is a trace)
NEEDS_NO_MODEL = ("warmup",)  # trains models of its own


def main_figure(page: str, values: dict[str, Any]) -> Figure | None:
    """The main figure of a page for these settings; ValueError with a sentence when the view cannot be drawn."""
    if page not in MAIN_FIGURES:
        raise ValueError(f"There is no page {page!r}.")
    build = MAIN_FIGURES[page]
    if build is None:
        return None
    live = open_view(values)
    missing = live.frame.config is None if page in NEEDS_CONFIG_ONLY else live.frame.trace is None
    if missing and page not in NEEDS_NO_MODEL:
        raise ValueError(live.problem or live.frame.problem or "This view cannot be drawn.")
    return build(live)


# ------------------------------------------------------------------------------------------------- the file
CSS = """
body{font-family:Helvetica,Arial,sans-serif;max-width:1100px;margin:2rem auto;padding:0 1rem;color:#212529;
line-height:1.45}
h1{font-size:2rem;margin-bottom:.3rem}.meta{color:#495057;font-size:.9rem}
section{border-top:1px solid #dee2e6;padding:1.2rem 0;break-inside:avoid}
h2{font-size:1.35rem;margin:.2rem 0 .8rem}
.text{white-space:pre-wrap;overflow-wrap:anywhere}
.figure{min-height:200px}.figure img{max-width:100%;height:auto}
.missing{background:#fff4e6;border-left:4px solid #f08c00;padding:.6rem .8rem}
ul.points li{margin:.3rem 0}
details{margin:.6rem 0;background:#f8f9fa;padding:.5rem .8rem;border-radius:4px}
.link a{word-break:break-all;font-size:.9rem}
@media print{.link a{color:#212529}}
"""

DRAW = """
document.querySelectorAll('script[type="application/json"][data-figure]').forEach(function (node) {
  var fig = JSON.parse(node.textContent);
  Plotly.newPlot(node.dataset.figure, fig.data, fig.layout,
                 {displaylogo: false, responsive: true, toImageButtonOptions: {format: 'png', scale: 3}});
});
"""


def plotly_js() -> str:
    """The installed plotly package's offline plotly.js, safe inside one <script> element."""
    return re.sub(r"<(/script|!--)", r"<\\\1", get_plotlyjs(), flags=re.IGNORECASE)


def _esc(text: str) -> str:
    return html.escape(display_text(text), quote=True)


def _script_json(text: str) -> str:
    """JSON made safe inside <script>: no '<', '>' or '&' survives as itself (JSON strings accept \\u escapes)."""
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _figure_html(n: int, fig: Figure | None, problem: str) -> str:
    if problem:
        return f'<p class="missing text">{_esc(problem)}</p>'
    if fig is None:
        return '<p class="missing">This page has no figure; open it live to use it.</p>'
    if isinstance(fig, Svg):
        data = base64.b64encode(fig.data).decode("ascii")
        return f'<div class="figure"><img alt="Layer diagram" src="data:image/svg+xml;base64,{data}"></div>'
    spec = _script_json(fig.to_json())
    return (f'<div class="figure" id="figure-{n}"></div>'
            f'<script type="application/json" data-figure="figure-{n}">{spec}</script>')


def _slide_html(n: int, slide: Slide, base_url: str) -> str:
    try:
        fig, problem = main_figure(slide.page, slide.values()), ""
    except ValueError as err:
        fig, problem = None, str(err)
    parts = [f'<section id="slide-{n}"><h2 class="text">{n}. {_esc(slide.title)}</h2>', _figure_html(n, fig, problem)]
    if slide.points:
        parts.append('<ul class="points">' + "".join(f'<li class="text">{_esc(p.text)}</li>' for p in slide.points)
                     + "</ul>")
    if slide.question is not None:
        answer = f'<p class="text">{_esc(slide.question.answer)}</p>' if slide.question.answer else ""
        parts.append(f'<details><summary class="text">{_esc(slide.question.ask)}</summary>{answer}</details>')
    url = slide.url(base_url)
    parts.append(f'<p class="link">Open this view live: <a href="{html.escape(url, quote=True)}">'
                 f"{html.escape(url)}</a></p></section>")
    return "\n".join(parts)


def handout(lesson: Lesson, base_url: str = "", progress: Callable[[int, int], None] | None = None) -> bytes:
    """The lesson as one HTML file that opens offline: figures, talking points, questions and links back.

    base_url: the app's address (e.g. "https://class.example.org/"); "" writes links relative to the file's place.
    progress(done, total) is told after each slide (the Lessons page's progress bar).
    """
    if base_url and not base_url.startswith(("http://", "https://")):
        raise ValueError("The handout's base address must start with http:// or https://, or be empty.")
    date = datetime.date.today().isoformat()
    body = [f'<header><h1 class="text">{_esc(lesson.title)}</h1>']
    if lesson.description:
        body.append(f'<p class="text">{_esc(lesson.description)}</p>')
    count = len(lesson.slides)
    body.append(f'<p class="meta">{count} slide{"s" if count != 1 else ""}. Made with Encoder Explorer on {date}; '
                "the figures are the live model's, drawn from each slide's own settings.</p></header>")
    for n, slide in enumerate(lesson.slides, 1):
        body.append(_slide_html(n, slide, base_url))
        if progress is not None:
            progress(n, count)
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_esc(lesson.title)}</title><style>{CSS}</style>"
            f"<script>/* plotly.js from plotly {plotly.__version__} */\n{plotly_js()}</script></head>\n<body>\n"
            + "\n".join(body) + f"\n<script>{DRAW}</script>\n</body></html>\n")
    return page.encode("utf-8")
