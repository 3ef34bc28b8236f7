"""Tokens & embeddings: the WordPiece tokens and the positional-encoding table of the current config."""

import pandas as pd
import streamlit as st

import ui
from encoder.viz import figures

fr, trace = ui.need_trace()

st.subheader(f"{trace.seq_len} WordPiece tokens")
if trace.truncated:
    st.warning(f"The input was truncated to the model's maximum of {trace.config.max_len} tokens.")
ui.caption("WordPiece splits rare words into known pieces (continuations start with ##) and adds [CLS] at the start "
           "and [SEP] at the end. Uncased models lowercase and strip accents first.")
st.dataframe(pd.DataFrame({"position": range(trace.seq_len), "token": trace.tokens, "id": trace.token_ids}),
             hide_index=True, width="stretch", height=min(400, 38 + 35 * trace.seq_len))

st.subheader("Positional encoding")
positions = fr.model.embed.positions(trace.seq_len)
if positions is None:
    st.info("This model has no positional encoding (positional = none): its layers cannot tell word order apart. "
            "See the Position page for the proof.")
else:
    kind = trace.config.positional
    left, right = st.columns(2)
    left.plotly_chart(figures.positional_heatmap(positions.detach().cpu(), f"{kind.capitalize()} positional encoding"),
                      config=figures.png_config(figures.export_name(trace, "positional")))
    right.plotly_chart(figures.position_similarity(positions.detach().cpu()),
                       config=figures.png_config(figures.export_name(trace, "position-similarity")))
    ui.caption("Left: the vector added to the token embedding at each position. Right: cosine similarity between "
               "positions; nearby positions get similar vectors, which is how attention can tell near from far.")
