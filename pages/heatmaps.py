"""Attention: one head, all heads of a layer, every layer x head at once, or the rollout through the layers."""

import streamlit as st

import ui
from encoder import Trace
from encoder.analysis.measures import MEASURES
from encoder.viz import attention, export, purpose
from encoder.viz.axes import special_names
from ui import captions, heatmap, pages


def rollout_view(fr: ui.Frame, trace, tag: str) -> None:
    """Attention rollout after the chosen layer: one plotly map (it has no heads, and the Measure choice of the map
    offers the same rollout with the map's switches)."""
    row = st.container(horizontal=True, vertical_alignment="bottom")
    layer = ui.layer_slider(trace.num_layers, row.container(width="stretch"))
    # The model's own special tokens, from its tokenizer.json: as text, never as Markdown or HTML
    hide = ui.widget("hide_special", row.container(width="content"),
                     label=ui.literal(captions.hide_label(trace.special_tokens)), disabled=not captions.hides_any(trace))
    fig = purpose.rollout_heatmap(ui.get_rollout(fr)[layer], trace.labels, layer, hide_special=hide,
                                  special=trace.special_positions, special_names=hide_names(trace),
                                  presentation=fr.present)
    st.plotly_chart(fig, config=export.png_config(export.export_name(trace, "rollout", f"L{layer}", model=tag)))
    ui.caption("Attention rollout (Abnar & Zuidema, 2020) estimates how much each input token reaches each "
               "position after this layer: every layer's head-averaged attention is mixed half and half with the "
               "identity (the residual connection), its rows are renormalised, and the layers are multiplied. "
               "It ignores the values, the feed-forward sub-layers and the differences between heads, so read it "
               "as a rough map of where information can have come from, not as an explanation.")


def hide_names(trace: Trace, joint: str = "/") -> str:
    """The model's special tokens, as the notes name them: "[CLS]/[SEP]", "<s>/</s>"."""
    return special_names(trace.special_tokens, joint)


@ui.fragment
def attention_view() -> None:
    """Re-runs alone when the view changes or the map's settled choice comes back: the model is not run again."""
    fr, trace = ui.need_trace()
    view = ui.widget("view")
    tag = export.model_tag(trace.config, fr.model_key)
    if view == "rollout":
        rollout_view(fr, trace, tag)
        return
    # The map's place on the page is the same for every view, so switching views keeps the browser's component
    # (and the maps it holds); a measure's progress goes below it.
    slot, status = st.empty(), st.empty()
    with slot:
        sel = heatmap.show(fr, trace, view, tag, status)
    if view != "head":
        ui.caption("Rows are query tokens, columns the keys they attend to. Click a map to open that head.")
        return
    ui.caption("Each row is one query token: how much it draws from each key token, under the measure chosen above "
               "the map (raw attention: softmax(QKᵀ/√d_k), every row summing to 1). Layer, head, measure, hidden "
               "special tokens and the colour scale switch in the browser; hover a cell for its value, and the PNG "
               "button saves the map for slides.")
    if window := attention.window_note(trace, sel["layer"], band=False):
        st.caption(window)  # kept when presenting: it says why part of every row is 0
    download(fr, trace, sel, tag)


def download(fr: ui.Frame, trace, sel: dict, tag: str) -> None:
    """CSV and JSON of the one-head map on screen, built on click (they hold the trace's key, not the trace)."""
    key, layer = sel["measure"], sel["layer"]
    per_head = MEASURES[key].per_head
    head = None if sel["avg"] or not per_head else sel["head"]
    who = "avg" if head is None and per_head else ("all" if not per_head else f"H{head}")
    name = export.export_name(trace, "attention" if key == "raw" else key, f"L{layer}", who, model=tag)
    get = ui.trace_lookup(fr)
    d1, d2, _ = st.columns([2, 2, 3], vertical_alignment="bottom")
    if key == "raw":
        hide = sel["hide_special"]
        ui.download("Download CSV", lambda: attention.attention_table(get(), layer, head, hide).to_csv(index=False),
                    f"{name}.csv", "text/csv", where=d1)
        ui.download("Download JSON", lambda: attention.attention_json(get(), layer, head, hide), f"{name}.json",
                    "application/json", where=d2)
        return
    ui.download("Download CSV", lambda: heatmap.table(fr, sel).to_csv(index=False), f"{name}.csv", "text/csv", where=d1)


def page() -> None:
    """The chosen view of the attention; without a trace the frame has said why and the page stops."""
    ui.need_trace()
    attention_view()


pages.show(page)
