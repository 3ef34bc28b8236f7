"""Activations: per-sublayer statistics of the trace, in data-flow order."""

import streamlit as st

import ui
from encoder.viz import figures

NUMBERS = ("mean", "std", "min", "max", "rms", "zero_frac")


@ui.fragment
def activations_view() -> None:
    """A layer or tap change reruns only this part; the statistics are computed once per trace."""
    fr, trace = ui.need_trace()
    stats = trace.stats()
    cols = st.columns(2)
    layer = ui.layer_slider(trace.num_layers, cols[0])
    tap = ui.widget("tap", cols[1])
    left, right = st.columns(2)
    with left:
        st.plotly_chart(figures.tap_profile(stats, layer, norm=trace.config.norm, presentation=fr.present),
                        config=figures.png_config(figures.export_name(trace, f"L{layer}", "taps")))
        ui.caption("Mean, standard deviation and RMS at each point of one layer's data flow. LayerNorm outputs sit "
                   "near mean 0 / std 1; the residual sums (add1, add2) carry whatever the sub-layers add.")
    with right:
        st.plotly_chart(figures.residual_norms({"this model": trace}),
                        config=figures.png_config(figures.export_name(trace, "residual")))
        ui.caption("Average length of each token's vector after the embeddings and after every layer. In Post-LN it "
                   "is reset by the last LayerNorm of each layer; in Pre-LN the residual stream keeps growing.")
    left, right = st.columns(2)
    with left:
        st.plotly_chart(figures.token_norms(trace, layer, tap),
                        config=figures.png_config(figures.export_name(trace, f"L{layer}", tap, "norms")))
        ui.caption("The L2 norm of each token's vector at the chosen tap.")
    with right:
        st.plotly_chart(figures.tap_histogram(trace, layer, tap),
                        config=figures.png_config(figures.export_name(trace, f"L{layer}", tap, "hist")))
        ui.caption("Distribution of every value at the chosen tap. After ReLU (ffn_hidden) many are exactly zero.")


def page() -> None:
    # Everything with tensors stays local: module globals outlive the run through the fragment above.
    fr, trace = ui.need_trace()
    stats = trace.stats()
    bad = trace.first_nonfinite()
    if bad is not None:
        st.error(f"NaN or Inf values appear first at layer {bad[0]}, tap '{bad[1]}'. Every later statistic is "
                 "affected.", icon=":material/warning:")
    activations_view()
    st.subheader("All statistics")
    ui.caption("One row per layer and tap. zero_frac is the share of exact zeros; nonfinite counts NaN and Inf values.")
    st.dataframe(stats, hide_index=True, width="stretch",
                 column_config={c: st.column_config.NumberColumn(format="%.4f") for c in NUMBERS})
    st.download_button("Download statistics (CSV)", stats.to_csv(index=False),
                       file_name=figures.export_name(trace, "statistics") + ".csv", mime="text/csv",
                       icon=":material/download:")


page()
