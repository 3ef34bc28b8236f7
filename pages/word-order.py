"""Position: the positional encoding, and proof that without it the encoder cannot see word order."""

import pandas as pd
import streamlit as st

import ui
from encoder.analysis import position
from encoder.viz import activations, export, similarity
from encoder.viz.teaching import grad_norm_chart
from ui import captions, pages


def page() -> None:
    """The positional table, its similarity across positions, and the shuffle check with and without positions."""
    fr, trace = ui.need_trace()
    cfg = trace.config
    tag = export.model_tag(cfg, fr.model_key)

    st.subheader("The positional encoding of this model")
    if cfg.positional == "none":
        st.info("This model has no positional encoding: positional = none.")
    else:
        if cfg.positional == "rotary":  # nothing is added to the embeddings: the table is the angles q and k turn by
            table, theta = position.rope_table(cfg, trace.seq_len), cfg.layer_theta(0)
            title, name = f"RoPE angles (θ = {theta:g})", "rotary"  # cos, then sin, of layer 0's turns
            caption = captions.rotary_caption(table, theta)
        else:
            table = position.pe_table(cfg, trace.seq_len, fr.model)
            title, name = f"{cfg.positional.capitalize()} positional encoding", "positional"
            caption = captions.position_caption(table, cfg.positional, captions.is_trained(fr.model_key))
        left, right = st.columns(2)
        left.plotly_chart(ui.kept_figure(trace, ("position-table", fr.present), lambda: activations.positional_heatmap(
                              table, f"{title}, {trace.seq_len} positions", presentation=fr.present)),
                          config=export.png_config(export.export_name(trace, name, model=tag)))
        right.plotly_chart(ui.kept_figure(trace, ("position-cosines", fr.present), lambda: similarity.position_similarity(
                               table, presentation=fr.present)),
                           config=export.png_config(export.export_name(trace, f"{name}-similarity", model=tag)))
        ui.caption(caption)

    st.subheader("Shuffle the words")
    ui.caption(captions.shuffle_intro(cfg.positional, cfg.window))
    seed = ui.state.get("shuffle")
    st.button("Shuffle again", icon=":material/shuffle:", on_click=ui.state.put, args=("shuffle", (seed + 1) % 10_000))
    try:
        runs = {f"this model (positional = {cfg.positional})":
                ui.get_permutation_check(fr.model_key, fr.device, (), trace.text, seed)}
        if blind := position.order_blind_changes(cfg):
            runs[captions.blind_name(blind)] = ui.get_permutation_check(fr.model_key, fr.device, blind, trace.text, seed)
    except ValueError as err:
        st.info(str(err))
        st.stop()
    first = next(iter(runs.values()))
    st.text("Shuffled: " + " ".join(first.permuted_tokens))
    summary = pd.DataFrame(
        [{"model": name, "max |out(Px) − P·out(x)|": r.out_diff, "max |A(Px) − P·A·Pᵀ|": r.attn_diff,
          "order-blind": "yes" if r.invariant else "no"} for name, r in runs.items()]
    )
    st.dataframe(summary, hide_index=True, width="stretch")
    per_layer = pd.DataFrame(
        [{"layer": i, "attention difference": d, "model": name}
         for name, r in runs.items() for i, d in enumerate(r.attn_diff_per_layer)]
    )
    # Differences below ROUNDING are float noise: drawn at the floor (and said so), not as a zig-zag on the log axis.
    st.plotly_chart(ui.kept_figure(trace, ("shuffle", seed, fr.present), lambda: grad_norm_chart(
                        per_layer, "layer", "attention difference", "model",
                        "Attention after shuffling vs shuffled attention, per layer", x_title="layer",
                        y_title="max |A(Px) − P·A·Pᵀ|", floor=captions.ROUNDING, presentation=fr.present)),
                    config=export.png_config(export.export_name(trace, "shuffle", f"seed{seed}", model=tag)))
    ui.caption(captions.shuffle_caption({name: r.attn_diff for name, r in runs.items()}))


pages.show(page)
