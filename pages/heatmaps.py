"""Attention: one head, all heads of a layer, every layer x head at once, or the rollout through the layers."""

import streamlit as st

import ui
from encoder import Trace
from encoder.viz import attention, export, purpose
from encoder.viz.axes import special_names
from ui import captions, headview, heatmap, pages


def hide_names(trace: Trace, joint: str = "/") -> str:
    """The model's special tokens, as the notes name them: "[CLS]/[SEP]", "<s>/</s>"."""
    return special_names(trace.special_tokens, joint)


@ui.fragment
def attention_view() -> None:
    """Re-runs alone when a layer/head widget changes: the model is not run again."""
    fr, trace = ui.need_trace()
    view = ui.widget("view")
    # One row that wraps instead of stacking: on a 420 px phone Layer and Head share a line and so do the two
    # toggles (st.columns puts each on its own line there). Empty slots take no room.
    row = st.container(horizontal=True, vertical_alignment="bottom")
    cols = [row.container(width=w) for w in ("stretch", 120, "content", "content")]  # layer, head, avg, hide
    # The model's own special tokens, from its tokenizer.json: as text, never as Markdown or HTML
    hide = ui.widget("hide_special", cols[3], label=ui.literal(captions.hide_label(trace.special_tokens)),
                     disabled=not captions.hides_any(trace))
    if view == "model":
        fig = attention.model_view(trace, hide_special=hide)
        name = export.export_name(trace, "model-view")
        ui.caption("Every head of every layer as a thumbnail (long inputs are block-averaged to keep the page light). "
                   "Rows are query tokens, columns the keys they attend to.")
        headview.clickable_chart(fig, export.png_config(name), "pick-model-view", trace.num_heads)  # click: open it
        return
    tag = export.model_tag(trace.config, fr.model_key)
    # Past 128 tokens one head is a canvas map with its own Layer and Head buttons (no rerun per switch).
    canvas = view == "head" and heatmap.fits(fr, trace, avg=ui.state.get("avg"), hide=hide)
    layer = None if canvas else ui.layer_slider(trace.num_layers, cols[0])
    if view == "rollout":
        fig = purpose.rollout_heatmap(ui.get_rollout(fr)[layer], trace.labels, layer, hide_special=hide,
                                      special=trace.special_positions, special_names=hide_names(trace),
                                      presentation=fr.present)
        st.plotly_chart(fig, config=export.png_config(export.export_name(trace, "rollout", f"L{layer}", model=tag)))
        ui.caption("Attention rollout (Abnar & Zuidema, 2020) estimates how much each input token reaches each "
                   "position after this layer: every layer's head-averaged attention is mixed half and half with the "
                   "identity (the residual connection), its rows are renormalised, and the layers are multiplied. "
                   "It ignores the values, the feed-forward sub-layers and the differences between heads, so read it "
                   "as a rough map of where information can have come from, not as an explanation.")
        return
    if view == "layer":
        scale = ui.state.get("scale")  # drawn below the grid, so the grid sits high on a projector
        fig = attention.attention_grid(trace, layer, hide_special=hide, scale=scale, presentation=fr.present)
        name = export.export_name(trace, "all-heads", f"L{layer}", model=tag)
        headview.clickable_chart(fig, export.png_config(name), "pick-grid", trace.num_heads, layer)  # click: open it
        ui.widget("scale", st.columns([2, 3])[0])
        ui.caption(ui.literal(
            "Each head learns its own pattern: some look at the next or previous word, some at a special token, some "
            "at related words. Without a causal mask every token may attend to both sides (bidirectional). "
            + (f"{hide_names(trace, ' and ')} are hidden and every row is renormalised over the keys left."
               if hide and captions.hides_any(trace) else "")))
        return
    avg = ui.widget("avg", cols[2])
    scale = ui.state.get("scale")  # drawn below the map, so the map sits high on a projector
    if canvas:
        layer, head = heatmap.show(fr, trace, scale, tag)
    else:
        head = ui.head_select(trace.num_heads, cols[1], disabled=avg)
    head_sel = None if avg else head
    name = export.export_name(trace, "attention", f"L{layer}", "avg" if avg else f"H{head}", model=tag)
    if not canvas:
        fig = attention.attention_heatmap(trace, layer, head_sel, hide_special=hide, scale=scale, presentation=fr.present)
        st.plotly_chart(fig, config=export.png_config(name))
    saving = (" The PNG button above the map saves it for slides." if canvas
              else " The camera button in the chart's toolbar saves a high-resolution PNG.")
    ui.caption(ui.literal(captions.attention_caption(hide and captions.hides_any(trace), scale, trace.special_tokens)
                          + saving))
    if window := attention.window_note(trace, layer):
        st.caption(window)  # kept when presenting: it says why a band of the map is grey
    c0, d1, d2 = st.columns([3, 2, 2], vertical_alignment="bottom")
    ui.widget("scale", c0)
    get = ui.trace_lookup(fr)  # the downloads are built on click; they hold the trace's key, not the trace
    d1.download_button("Download CSV", lambda: attention.attention_table(get(), layer, head_sel).to_csv(index=False),
                       file_name=f"{name}.csv", mime="text/csv", icon=":material/download:")
    d2.download_button("Download JSON", lambda: attention.attention_json(get(), layer, head_sel),
                       file_name=f"{name}.json", mime="application/json", icon=":material/download:")


def page() -> None:
    """The chosen view of the attention; without a trace the frame has said why and the page stops."""
    ui.need_trace()
    attention_view()


pages.show(page)
