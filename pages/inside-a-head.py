"""Inside a head: attention as lines between tokens, then one query's q·k → softmax → weighted sum → W_O."""

import numpy as np
import streamlit as st

import ui
from encoder.viz import export
from encoder.viz import heads as inside
from encoder.viz.text import printable
from ui import headview, pages


@ui.fragment
def inside_a_head() -> None:
    """A pick in the head view reruns only this part; the model is not run again."""
    fr, trace = ui.need_trace()
    sel = headview.show(fr, trace)
    ui.caption("Left: each token as a query; right: the keys it reads from. A line's opacity is the attention weight. "
               "Hover a token to see only its lines, click it to pin them (a pinned query is walked through below). "
               "Layer, head, several heads in colour or the head average: all switch in the browser, "
               + ("without waiting." if headview.ships_all(fr, trace) else
                  "but this input is too long for all layers at once: a layer not yet there takes a moment."))
    layer, head, query = sel["layer"], sel["head"], sel["query"]
    tokens = trace.labels
    st.subheader(f"Inside layer {layer}, head {head}")
    cols = st.columns([2, 5], vertical_alignment="bottom")
    query = ui.widget("query", cols[0], options=range(trace.seq_len),
                      format_func=lambda j: f"{j}: {printable(tokens[j], 30)}")
    steps = inside.head_steps(trace, layer, head, query)
    name = export.export_name(trace, f"L{layer}", f"H{head}", f"q{query}")
    st.plotly_chart(inside.scores_figure(steps, presentation=fr.present),
                    config=export.png_config(name + "_scores"))
    gap = float(np.abs(steps.weights - steps.trace_row).max())
    ui.caption(f"q and k are this forward pass's own tensors. The softmax computed here from them differs from the "
               f"attention map the model used by at most {gap:.1e}.")
    st.plotly_chart(inside.values_figure(steps, presentation=fr.present), config=export.png_config(name + "_values"))
    z_gap = float(np.abs(steps.z_sum - steps.z).max())
    if (layer, head) in trace.ablate:
        ui.caption("This head is knocked out in this run: its output z_i was set to zero before W_O.")
    elif trace.train and trace.config.dropout > 0:
        ui.caption(f"Training mode is on: dropout zeroes some weights before the sum, so the forward pass's z_i differs "
                   f"from Σ a·v shown here by up to {z_gap:.2g}. The strip below uses the forward pass's z_i.")
    else:
        ui.caption(f"Σ_j a_ij v_j computed here matches the head output z_i of the forward pass to {z_gap:.1e}.")
    w_o = fr.model.layers[layer].attn.out.weight if fr.model is not None else None
    st.plotly_chart(inside.output_figure(steps, trace.num_heads, w_o, presentation=fr.present),
                    config=export.png_config(name + "_output"))
    ui.caption("Every head's output is written side by side (the outlined block is this head); W_O mixes them back "
               "into d_model numbers per token. That row is the attn tap, which the residual connection adds next.")


def page() -> None:
    """The head view and one query's walk through the head; without a trace the page stops."""
    ui.need_trace()
    inside_a_head()


pages.show(page)
