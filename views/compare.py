"""Compare: the same weights in Post-LN and Pre-LN, or one model on two sentences."""

import streamlit as st

import ui
from encoder.analysis import variants
from encoder.viz import figures
from encoder.viz.teaching import token_attention

fr, trace = ui.need_trace()
mode = ui.widget("compare")


def placements() -> None:
    other = "pre" if trace.config.norm == "post" else "post"
    try:
        twin = ui.get_variant_trace(fr.model_key, fr.device, (("norm", other),), trace.text, trace.train)
    except (ValueError, RuntimeError) as err:
        st.error(f"Could not run the other placement: {err}")
        return
    runs = {trace.config.norm: trace, other: twin}
    post, pre = runs["post"], runs["pre"]
    ui.caption("Both columns use exactly the same weights; only the place of LayerNorm differs. Post-LN normalises "
               "after each residual add (the original paper); Pre-LN normalises each sub-layer's input.")
    cols = st.columns([3, 2, 2], vertical_alignment="bottom")
    layer = ui.layer_slider(trace.num_layers, cols[0])
    head = ui.head_select(trace.num_heads, cols[1])
    left, right = st.columns(2)
    for col, name, run in ((left, "Post-LN", post), (right, "Pre-LN", pre)):
        fig = figures.attention_heatmap(run, layer, head, presentation=fr.present)
        fig.update_layout(title_text=f"{name}: layer {layer}, head {head}")
        col.plotly_chart(fig, config=figures.png_config(figures.export_name(run, name, f"L{layer}", f"H{head}")))
    left, right = st.columns(2)
    diff = figures.attention_difference(post.attention[layer, head], pre.attention[layer, head], trace.tokens,
                                        f"Post-LN minus Pre-LN, layer {layer}, head {head}", presentation=fr.present)
    left.plotly_chart(diff, config=figures.png_config(figures.export_name(trace, "post-minus-pre", f"L{layer}")))
    right.plotly_chart(figures.residual_norms({"Post-LN": post, "Pre-LN": pre}, presentation=fr.present),
                       config=figures.png_config(figures.export_name(trace, "residual-post-pre")))
    ui.caption("Right: in Pre-LN nothing normalises the residual stream between layers, so its norm grows with depth; "
               "Post-LN resets it after every layer.")
    st.subheader("Layer outputs")
    st.dataframe(variants.output_summary({"Post-LN": post, "Pre-LN": pre}), hide_index=True, width="stretch")


def sentences() -> None:
    text_b = ui.widget("text_b", height=68)
    if not text_b.strip():
        st.info("Type a second sentence to compare with the first.")
        return
    try:
        other = ui.get_trace(fr.model_key, fr.device, text_b, trace.train)
    except (ValueError, RuntimeError) as err:
        st.error(str(err))
        return
    cols = st.columns([3, 2], vertical_alignment="bottom")
    layer = ui.layer_slider(trace.num_layers, cols[0])
    word = ui.widget("word", cols[1])
    ia, ib = variants.find_token(trace.tokens, word), variants.find_token(other.tokens, word)
    if ia is None or ib is None:
        st.info("Pick a token that appears in both sentences (as a WordPiece token, lowercase for this model).")
        return
    ra, rb = variants.token_rows(trace, ia, layer), variants.token_rows(other, ib, layer)
    left, right = st.columns(2)
    left.plotly_chart(token_attention(ra, trace.tokens, word, f"First sentence, layer {layer}", presentation=fr.present),
                      config=figures.png_config(figures.export_name(trace, "token", f"L{layer}")))
    right.plotly_chart(token_attention(rb, other.tokens, word, f"Second sentence, layer {layer}", presentation=fr.present),
                       config=figures.png_config(figures.export_name(other, "token", f"L{layer}")))
    if len(trace.tokens) == len(other.tokens):
        fig = token_attention(ra - rb, trace.tokens, word, f"Difference (first minus second), layer {layer}", diff=True,
                              presentation=fr.present)
        st.plotly_chart(fig, config=figures.png_config(figures.export_name(trace, "token-diff", f"L{layer}")))
        ui.caption("Red: the token attends more to that key in the first sentence; blue: more in the second. In "
                   "trained models some heads move attention from 'animal' to 'street' when 'tired' becomes 'wide'.")
    else:
        st.caption("The sentences have different numbers of tokens, so there is no position-by-position difference.")


if mode == "norm":
    placements()
else:
    sentences()
