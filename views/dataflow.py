"""Data flow: the Graphviz diagram of one encoder layer, drawn from the same config that built the model."""

import streamlit as st

import ui
from encoder import cost, diagram

fr = ui.frame()
if fr.config is None:
    st.info(fr.problem or "Choose a valid configuration to see its diagram.")
    st.stop()
cfg, trace = fr.config, fr.trace

cols = st.columns([2, 2, 3], vertical_alignment="bottom")
overlay = cols[1].toggle("Overlay live statistics", key="overlay", disabled=trace is None)
layer = ui.layer_slider(cfg.num_layers, cols[0])
stats = trace.stats() if (trace is not None and overlay) else None
if trace is not None and (bad := trace.first_nonfinite()) is not None:
    st.error(f"NaN or Inf values appear first at layer {bad[0]}, tap '{bad[1]}' (red border).", icon=":material/warning:")

graph = diagram.layer_diagram(cfg, stats=stats, layer=layer, seq=trace.seq_len if trace is not None else None)
left, right = st.columns([3, 2])
with left:
    st.graphviz_chart(graph, width="content")
    ui.caption("Post-LN (the original paper) normalises after each residual add; Pre-LN normalises the input of each "
               "sub-layer and leaves the residual path untouched. Dashed edges are the residual connections; edge "
               "labels give the tensor shapes. With the overlay, node colour shows RMS and labels give mean / std.")
    d1, d2, _ = st.columns([1, 1, 2])
    d1.download_button("Download DOT", graph.source, file_name="encoder_layer.dot", mime="text/vnd.graphviz",
                       icon=":material/download:")
    try:
        svg = diagram.svg_bytes(graph)
    except ValueError as err:
        d2.caption(str(err))
    else:
        d2.download_button("Download SVG", svg, file_name="encoder_layer.svg", mime="image/svg+xml",
                           icon=":material/download:")
with right:
    st.subheader("Cost of this configuration")
    seq = trace.seq_len if trace is not None else 128
    params = cost.param_counts(cfg)
    st.dataframe(params, hide_index=True, width="stretch")
    st.dataframe(cost.flops(cfg, seq), hide_index=True, width="stretch")
    ui.caption(f"Parameters per sub-layer and floating-point operations for one forward pass over {seq} tokens "
               "(a multiply-add counts as 2). They update as you move the knobs.")
ui.sync_url()
