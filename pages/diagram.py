"""Data flow: the Graphviz diagram of one encoder layer, drawn from the same config that built the model."""

import streamlit as st

import ui
from encoder.analysis import cost
from encoder.config import EncoderConfig
from encoder.viz import diagram, export, style
from ui import captions, pages

# On a projector the diagram starts right below the title (its controls are in the right-hand column): at
# 1280x720 and 1024x768 it may be this tall and still end on screen (tests/app/test_projector_diagram.py).
PRESENT_HEIGHT = style.DIAGRAM_HEIGHT + 80


def cost_of(cfg: EncoderConfig, seq: int) -> None:
    """Parameters and FLOPs of this configuration for `seq` tokens, in total and for one layer by sub-layer."""
    st.subheader("Cost of this configuration")
    params, ops, one, work = cost.panel(cfg, seq)
    # One row of numbers as wide as they are, that wraps: in two fixed columns of the narrow side (presenting at 1024
    # px with the sidebar unfolded again) "22.57 M" was cut to "22…".
    row = st.container(horizontal=True, gap="large")
    row.metric("Parameters", f"{params['total'] / 1e6:.2f} M", width="content")
    row.metric("Per layer", f"{params['per_layer'] / 1e6:.2f} M", width="content")
    flops = f"{ops['total'] / 1e9:.2f} G" if ops["total"] >= 1e8 else f"{ops['total'] / 1e6:.1f} M"
    row.metric(f"FLOPs for {seq} tokens", flops, width="content")
    st.dataframe(one, hide_index=True, width="stretch",
                 column_config={"params": st.column_config.NumberColumn("parameters", format="localized")})
    st.dataframe(work, hide_index=True, width="stretch",
                 column_config={"flops": st.column_config.NumberColumn("FLOPs", format="compact")})
    ui.caption(f"Parameters of one layer by sub-layer, and the floating-point operations of one layer for {seq} "
               "tokens (a multiply-add counts as 2). The FFN holds about two thirds of a layer's weights when "
               "d_ff = 4 × d_model; attention scores grow with the square of the sentence length.")


def page() -> None:
    """The diagram of one layer of the model on screen (drawn without a trace too), its downloads and its cost."""
    fr = ui.frame()
    if fr.config is None:
        st.stop()  # the frame above says why
    cfg, trace = fr.config, fr.trace

    if fr.present:  # the controls beside the diagram, which then has the screen's height below the title
        left, right = st.columns([3, 2])
        layer_col, overlay_col = right.container(), right.container()
    else:
        cols = st.columns([2, 3, 2], vertical_alignment="bottom")
        # With one layer there is no Layer slider: the overlay toggle takes the first column instead of leaving a gap.
        layer_col, overlay_col = cols[:2] if cfg.num_layers > 1 else cols[1::-1]
    overlay = ui.widget("overlay", overlay_col, disabled=trace is None)
    layer = ui.layer_slider(cfg.num_layers, layer_col)
    stats = trace.stats() if (trace is not None and overlay) else None
    if trace is not None and (bad := trace.first_nonfinite()) is not None:
        where = right if fr.present else st
        where.error(f"NaN or Inf values appear first at layer {bad[0]}, tap '{bad[1]}' (red border).", icon=":material/warning:")

    tokens = trace.seq_len if trace is not None else None
    graph = diagram.layer_diagram(cfg, stats=stats, layer=layer, seq=tokens)
    svg_problem = diagram.svg_problem()  # no `dot`: the browser still draws the diagram, only the SVG export is missing
    tag = export.model_tag(cfg, fr.model_key)
    name = (export.export_name(trace, "diagram", f"L{layer}", model=tag) if trace is not None
            else export.safe_filename(f"{tag}_diagram_L{layer}"))
    if not fr.present:
        left, right = st.columns([3, 2])
    with left:
        if fr.present:  # the compact drawing, as large as the column and the screen allow; the downloads stay full
            compact = diagram.layer_diagram(cfg, stats=stats, layer=layer, seq=tokens, compact=True)
            st.graphviz_chart(compact, width="stretch", height=PRESENT_HEIGHT)
        else:
            st.graphviz_chart(graph, width="content")
        ui.caption("Post-LN (the original paper) normalises after each residual add; Pre-LN normalises the input of each "
                   "sub-layer and leaves the residual path untouched. Dashed edges are the residual connections; edge "
                   "labels give the tensor shapes. With the overlay, node colour shows RMS and labels give mean / std.")
        ui.caption("  \n".join(captions.design_lines(cfg)))  # one line per design choice, for this config
        row = st.container(horizontal=True)  # buttons as wide as their labels: "DOT" and "SVG" always readable
        ui.download("Download DOT", graph.source, f"{name}.dot", "text/vnd.graphviz", where=row)
        if svg_problem:
            row.caption(svg_problem)
        else:  # drawn by `dot` when asked for, not on every run
            ui.download("Download SVG", lambda: diagram.svg_bytes(graph), f"{name}.svg", "image/svg+xml", where=row)
    with right:
        cost_of(cfg, trace.seq_len if trace is not None else 128)


pages.show(page)
