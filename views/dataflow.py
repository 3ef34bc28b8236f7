"""Data flow: the Graphviz diagram of one encoder layer, drawn from the same config that built the model."""

import streamlit as st

import ui
from encoder.analysis import cost
from encoder.viz import diagram

fr = ui.frame()
if fr.config is None:
    st.stop()  # the frame above says why
cfg, trace = fr.config, fr.trace

cols = st.columns([2, 2, 3], vertical_alignment="bottom")
overlay = ui.widget("overlay", cols[1], disabled=trace is None)
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
    params, ops = cost.param_summary(cfg), cost.flops_summary(cfg, seq)
    m1, m2, m3 = st.columns(3)
    m1.metric("Parameters", f"{params['total'] / 1e6:.2f} M")
    m2.metric("Per layer", f"{params['per_layer'] / 1e6:.2f} M")
    m3.metric(f"FLOPs, {seq} tokens", f"{ops['total'] / 1e9:.2f} G" if ops["total"] >= 1e8 else f"{ops['total'] / 1e6:.1f} M")
    one = cost.param_counts(cfg).query("block == 'layer 0'")[["part", "params"]]
    work = cost.flops(cfg, seq).query("block == 'layer 0'")[["part", "flops"]]
    st.dataframe(one, hide_index=True, width="stretch",
                 column_config={"params": st.column_config.NumberColumn("parameters", format="localized")})
    st.dataframe(work, hide_index=True, width="stretch",
                 column_config={"flops": st.column_config.NumberColumn("FLOPs", format="compact")})
    ui.caption(f"Parameters of one layer by sub-layer, and the floating-point operations of one layer for {seq} "
               "tokens (a multiply-add counts as 2). The FFN holds about two thirds of a layer's weights when "
               "d_ff = 4 × d_model; attention scores grow with the square of the sentence length.")
