"""Activations: per-sublayer statistics of the trace, in data-flow order."""

import streamlit as st

import ui
from encoder.viz import activations, export
from ui import captions, pages

NUMBERS = ("mean", "std", "min", "max", "rms", "zero_frac")


@ui.fragment
def activations_view() -> None:
    """A layer or tap change reruns only this part; the statistics are computed once per trace."""
    fr, trace = ui.need_trace()
    stats = trace.stats()
    cols = st.columns(2)
    # With one layer there is no Layer slider: the Tap box takes the first column instead of leaving a gap.
    layer_col, tap_col = cols if trace.num_layers > 1 else cols[::-1]
    layer = ui.layer_slider(trace.num_layers, layer_col)
    tap = ui.widget("tap", tap_col)
    tag = export.model_tag(trace.config, fr.model_key)
    present = fr.present

    def drawn(*key, build):  # built once per trace and view, for every session (the trace never changes)
        return ui.BESIDE.get(trace, (*key, present), build)

    left, right = st.columns(2)
    with left:
        st.plotly_chart(drawn("taps", layer, build=lambda: activations.tap_profile(
                            stats, layer, norm=trace.config.norm, train=trace.train, presentation=present)),
                        config=export.png_config(export.export_name(trace, "taps", f"L{layer}", model=tag)))
        ui.caption(captions.layernorm_caption(stats, layer))
    with right:
        st.plotly_chart(drawn("residual", build=lambda: activations.residual_norms({"this model": trace},
                                                                                   presentation=present)),
                        config=export.png_config(export.export_name(trace, "residual-norm", model=tag)))
        ui.caption(captions.residual_caption(trace))
    left, right = st.columns(2)
    with left:
        st.plotly_chart(drawn("token-norms", layer, tap, build=lambda: activations.token_norms(trace, layer, tap,
                                                                                               presentation=present)),
                        config=export.png_config(export.export_name(trace, "token-norms", f"L{layer}", tap, model=tag)))
        ui.caption(f"The L2 norm of each token's vector at {captions.tap_caption(trace.config.norm, tap)}.")
    with right:
        st.plotly_chart(drawn("histogram", layer, tap, build=lambda: activations.tap_histogram(trace, layer, tap,
                                                                                               presentation=present)),
                        config=export.png_config(export.export_name(trace, "histogram", f"L{layer}", tap, model=tag)))
        ui.caption(captions.zeros_caption(trace, layer, tap))


def page() -> None:
    """The NaN/Inf warning, the chosen layer and tap's figures, and every statistic as a table."""
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
    name = export.export_name(trace, "statistics", model=export.model_tag(trace.config, fr.model_key))
    ui.download("Download statistics (CSV)", lambda: stats.to_csv(index=False), name + ".csv", "text/csv")


pages.show(page)
