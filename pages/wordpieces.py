"""Tokens & embeddings: the model's tokens, their rows of the embedding table, and how alike those rows are."""

import pandas as pd
import streamlit as st

import ui
from encoder.tokenizer import tokenizer_kind
from encoder.viz import activations, export, similarity, style
from ui import captions, pages


def page() -> None:
    """The tokens, their rows of the embedding table and their similarity; a link to the Position page."""
    fr, trace = ui.need_trace()
    tag = export.model_tag(trace.config, fr.model_key)

    kind = tokenizer_kind(trace.config.max_len, fr.model.vocab_dir)
    st.subheader(f"{trace.seq_len} {kind} tokens and their embeddings")
    if trace.truncated:
        st.warning(f"The input was truncated to {trace.max_tokens} tokens.")
    ui.caption(ui.literal(captions.tokens_caption(kind, trace.special_tokens)))
    vectors = fr.model.embed.tok.weight[trace.token_ids].detach().cpu()  # (seq, d_model): the table's rows, no positions
    left, right = st.columns([1, 2])
    table = {"position": range(trace.seq_len), "token": trace.tokens, "id": trace.token_ids}
    if trace.labels != trace.tokens:  # byte-level BPE: the model's token beside how it reads
        table = {"position": table["position"], "reads": trace.labels} | table
    left.dataframe(pd.DataFrame(table),
                   hide_index=True, width="stretch", height=min(style.PRESENT_HEIGHT if fr.present else 520,
                                                                38 + 35 * trace.seq_len))
    right.plotly_chart(ui.kept_figure(trace, ("embedding-rows", fr.present), lambda: activations.tensor_heatmap(
                           vectors, trace.labels, f"Token embeddings: {trace.seq_len} × {vectors.shape[1]}",
                           subtitle="rows of the embedding table, no positions", presentation=fr.present)),
                       config=export.png_config(export.export_name(trace, "token-embeddings", model=tag)))
    left, right = st.columns([2, 1])
    left.plotly_chart(ui.kept_figure(trace, ("embedding-cosines", fr.present), lambda: similarity.token_similarity(
                          vectors, trace.labels, "Token embeddings: cosine similarity", presentation=fr.present)),
                      config=export.png_config(export.export_name(trace, "token-similarity", model=tag)))
    with right:
        ui.caption(captions.embedding_caption(trace, vectors, captions.is_trained(fr.model_key)))
        positional = trace.config.positional
        st.markdown("**Positional encoding:** " + captions.positional_line(positional))
        position = pages.page("word-order")
        st.page_link(position.file, label=f"See it on the {position.title} page", icon=position.icon)


pages.show(page)
