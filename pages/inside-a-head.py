"""Inside a head: attention as lines between tokens, then one query's q·k → softmax → weighted sum → W_O."""

import numpy as np
import streamlit as st

import ui
from encoder.analysis.measures import MEASURES
from encoder.viz import export
from encoder.viz import heads as inside
from encoder.viz.text import printable
from ui import headview, measure_lines, pages, panels


def measure_control(fr: ui.Frame, trace) -> str:
    """The Measure choice for the lines, and the measure computed (a progress bar while it runs); returns its one true
    sentence, or says why a measure that refuses this model or sentence is not drawn (the lines stay raw attention)."""
    # On a projector the label goes (the options name themselves) and the sentence moves below the view, so the head
    # view stays whole on screen.
    left, right = st.columns([1, 2] if fr.present else [1, 3], vertical_alignment="center")
    key = ui.widget("measure", left, label_visibility="collapsed" if fr.present else "visible")
    problem = measure_lines.prepare(fr, trace)
    if problem:
        st.warning(f"{ui.literal(problem)} The lines below are the raw attention weights.", icon=":material/info:")
        return ""
    m = MEASURES[key]
    said = m.describe + ("" if m.per_head else " It has no per-head form, so its lines are the whole layer's.")
    if not fr.present:
        right.caption(said)
        return ""
    return said


@ui.fragment
def inside_a_head() -> None:
    """A pick in the head view or a new Measure reruns only this part; the model is not run again."""
    fr, trace = ui.need_trace()
    said = measure_control(fr, trace)
    sel = headview.show(fr, trace)
    if said:  # said on a projector too: what the lines leave out is the point of choosing them
        st.caption(said)
    raw = measure_lines.current(fr, trace).stack is None
    ui.caption(("Left: each token as a query; right: the keys it reads from. A line's opacity is the attention weight. "
                if raw else "Left: each position; right: the tokens it takes from, by the measure above. ")
               + "Hover a token to see only its lines, click it to pin them (a pinned query is walked through below). "
               "Layer, head, several heads in colour or the head average: all switch in the browser, "
               + ("without waiting." if headview.ships_all(fr, trace) else
                  "but this input is too long for all layers at once: a layer not yet there takes a moment."))
    layer, head, query = sel["layer"], sel["head"], sel["query"]
    tokens = trace.labels
    st.subheader(f"Inside layer {layer}, head {head}")
    cols = st.columns([2, 5], vertical_alignment="bottom")
    query = ui.widget("query", cols[0], options=range(trace.seq_len),
                      format_func=lambda j: f"{j}: {printable(tokens[j], 30)}")
    def drawn(what, build):  # once per trace, head, query and view for every session (ui.kept_figure)
        return ui.kept_figure(trace, ("inside", what, layer, head, query, fr.present), build)

    steps = ui.kept_figure(trace, ("inside", "steps", layer, head, query), lambda: inside.head_steps(trace, layer, head,
                                                                                                     query))
    name = export.export_name(trace, f"L{layer}", f"H{head}", f"q{query}")
    # Drawn in the browser (ui/panels.py): every printed number and panel title fits; where the column is narrower (a
    # phone), a chart scrolls sideways.
    panels.show("head-scores", drawn("scores", lambda: panels.chart(inside.scores_figure(steps, presentation=fr.present),
                                                                    name + "_scores")))
    gap = float(np.abs(steps.weights - steps.trace_row).max())
    ui.caption(f"q and k are this forward pass's own tensors. The softmax computed here from them differs from the "
               f"attention map the model used by at most {gap:.1e}.")
    panels.show("head-values", drawn("values", lambda: panels.chart(inside.values_figure(steps, presentation=fr.present),
                                                                    name + "_values")))
    z_gap = float(np.abs(steps.z_sum - steps.z).max())
    if (layer, head) in trace.ablate:
        ui.caption("This head is knocked out in this run: its output z_i was set to zero before W_O.")
    elif trace.train and trace.config.dropout > 0:
        ui.caption(f"Training mode is on: dropout zeroes some weights before the sum, so the forward pass's z_i differs "
                   f"from Σ a·v shown here by up to {z_gap:.2g}. The strip below uses the forward pass's z_i.")
    else:
        ui.caption(f"Σ_j a_ij v_j computed here matches the head output z_i of the forward pass to {z_gap:.1e}.")
    w_o = fr.model.layers[layer].attn.out.weight if fr.model is not None else None
    panels.show("head-output", drawn("output", lambda: panels.chart(
        inside.output_figure(steps, trace.num_heads, w_o, presentation=fr.present), name + "_output")))
    ui.caption("Every head's output is written side by side (the outlined block is this head); W_O mixes them back "
               "into d_model numbers per token. That row is the attn tap, which the residual connection adds next.")


def page() -> None:
    """The head view and one query's walk through the head; without a trace the page stops."""
    ui.need_trace()
    inside_a_head()


pages.show(page)
