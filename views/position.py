"""Position: the positional encoding, and proof that without it the encoder cannot see word order."""

import pandas as pd
import streamlit as st

import ui
from encoder.analysis import position
from encoder.viz import figures
from encoder.viz.teaching import grad_norm_chart

fr, trace = ui.need_trace()
cfg = trace.config

st.subheader("The positional encoding of this model")
table = position.pe_table(cfg, trace.seq_len, fr.model)
if cfg.positional == "none":
    st.info("This model has no positional encoding: positional = none.")
else:
    left, right = st.columns(2)
    left.plotly_chart(figures.positional_heatmap(table, f"{cfg.positional.capitalize()} positional encoding, "
                                                 f"{trace.seq_len} positions", presentation=fr.present),
                      config=figures.png_config(figures.export_name(trace, "positional")))
    right.plotly_chart(figures.position_similarity(table, presentation=fr.present),
                       config=figures.png_config(figures.export_name(trace, "position-similarity")))
    ui.caption("Each position gets its own vector, added to the token embedding. Nearby positions have similar "
               "vectors (right), so attention can tell near from far.")

st.subheader("Shuffle the words")
ui.caption("Attention is a weighted sum, so without positional information each layer is blind to order: "
           "shuffling the input only shuffles the outputs and the rows and columns of every attention map.")
seed = ui.state.get("shuffle")
st.button("Shuffle again", icon=":material/shuffle:", on_click=ui.state.put, args=("shuffle", (seed + 1) % 10_000))
try:
    runs = {f"this model (positional = {cfg.positional})":
            ui.get_permutation_check(fr.model_key, fr.device, (), trace.text, seed)}
    if cfg.positional != "none":
        runs["same weights, positional = none"] = ui.get_permutation_check(
            fr.model_key, fr.device, (("positional", "none"),), trace.text, seed)
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
    [{"layer": i, "attention difference": max(d, 1e-9), "model": name}
     for name, r in runs.items() for i, d in enumerate(r.attn_diff_per_layer)]
)
st.plotly_chart(grad_norm_chart(per_layer, "layer", "attention difference", "model",
                                "Attention after shuffling vs shuffled attention, per layer", presentation=fr.present),
                config=figures.png_config(figures.export_name(trace, "shuffle")))
ui.caption("Without positional encoding the differences are float rounding (about 1e-7): the model computed the same "
           "thing for every word order. With it they are large: the model now knows where each word stands.")
