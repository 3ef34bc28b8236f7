"""Step through a layer: walk one encoder layer's data flow, node by node, with the tensor at each stop."""

import pandas as pd
import streamlit as st
import torch

import ui
from encoder.viz import activations, diagram, export, style
from ui import pages
from ui.steps import FINAL, layer_steps


def tensor_stats(x: torch.Tensor) -> dict[str, float]:
    """Mean, std, RMS and share of exact zeros of one (seq, width) tensor, as Trace.stats() gives them for a tap."""
    wide = x.double()
    return {"mean": float(wide.mean()), "std": float(wide.std(correction=0)), "rms": float(wide.square().mean().sqrt()),
            "zero_frac": float((x == 0).double().mean())}


def _stats_row(stats: pd.DataFrame, layer: int, tap: str) -> pd.Series:
    """The statistics of one tap of one layer (a boolean mask: DataFrame.query parses its expression on every run)."""
    return stats[(stats["layer"] == layer) & (stats["tap"] == tap)].iloc[0]


def page() -> None:
    """Previous and Next through the layer's steps: the diagram with the step's node lit, and its tensor."""
    fr, trace = ui.need_trace()
    steps = layer_steps(trace.config)
    at = ui.state.fit("step", lo=0, hi=len(steps) - 1)


    # The buttons are as wide as their labels, so "Previous" and "Next" are never cut; one layer: no slider, no gap.
    cols = st.columns([3, 4, 3] if trace.num_layers > 1 else [3, 7], vertical_alignment="bottom")
    buttons = cols[0].container(horizontal=True)
    buttons.button("Previous", icon=":material/arrow_back:", on_click=ui.state.put, args=("step", at - 1),
                   disabled=at == 0)
    buttons.button("Next", icon=":material/arrow_forward:", on_click=ui.state.put,
                   args=("step", at + 1), disabled=at == len(steps) - 1)
    layer = ui.layer_slider(trace.num_layers, cols[-1])
    steps = layer_steps(trace.config, layer)  # the same stops; their prose follows the layer (its window, its theta)
    step = steps[at]
    cols[1].progress((at + 1) / len(steps), text=f"Step {at + 1} of {len(steps)}: {step.title}")

    left, right = st.columns([1, 1] if fr.present else [2, 3])  # a projector: room for the compact diagram's text
    with left:
        # On a projector the compact drawing, as large as the column and DIAGRAM_HEIGHT allow.
        graph = diagram.layer_diagram(trace.config, layer=layer, highlight=step.key, seq=trace.seq_len, compact=fr.present)
        if fr.present:
            st.graphviz_chart(graph, width="stretch", height=style.DIAGRAM_HEIGHT)
        else:
            st.graphviz_chart(graph, width="content")
    with right:
        st.subheader(step.title)
        if trace.train and step.key in ("drop1", "drop2"):
            st.caption("Training mode is on: the tensor shown is the sub-layer output before dropout.")
        final = step.tap == FINAL  # the stack's final LayerNorm: once, after the last layer
        x = trace.final if final else trace.taps[layer][step.tap]
        where = f"After layer {trace.num_layers - 1}, final LayerNorm" if final else f"Layer {layer}, {step.tap}"
        kept = ("walkthrough", None if final else layer, step.tap, fr.present)  # the final LayerNorm: one, any layer
        st.plotly_chart(
            ui.kept_figure(trace, kept, lambda: activations.tensor_heatmap(
                x, trace.labels, f"{where}: {tuple(x.shape)}", subtitle=style.mode_note(trace.train).removeprefix(" · "),
                presentation=fr.present)),
            config=export.png_config(export.export_name(trace, "step", f"L{layer}", step.tap,
                                                        model=export.model_tag(trace.config, fr.model_key))),
        )
        st.write(step.text)
        row = tensor_stats(x) if final else _stats_row(trace.stats(), layer, step.tap)
        m = st.columns(4)
        m[0].metric("mean", f"{row['mean']:.3f}")
        m[1].metric("std", f"{row['std']:.3f}")
        m[2].metric("RMS", f"{row['rms']:.3f}")
        m[3].metric("exact zeros", f"{row['zero_frac']:.1%}")
        ui.caption("One row per token, one column per feature. Blue is negative, red positive; the scale is symmetric.")


pages.show(page)
