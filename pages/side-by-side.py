"""Compare: the same weights in Post-LN and Pre-LN, or one model on two sentences."""

import streamlit as st

import ui
from encoder import Trace
from encoder.analysis import variants
from encoder.viz import activations, attention, export
from encoder.viz.teaching import token_attention
from ui import captions, pages

LONG = 256  # tokens above which the difference map is drawn only on request (page payload <= 3 MB at 512)


def placements(fr: ui.Frame, trace: Trace) -> None:
    """The same weights as Post-LN and as Pre-LN: the attention pair, their difference, norms and outputs."""
    other = "pre" if trace.config.norm == "post" else "post"
    try:
        twin = ui.get_variant_trace(fr.model_key, fr.device, (("norm", other),), trace.text, trace.train)
    except (ValueError, RuntimeError) as err:
        st.error(f"Could not run the other placement: {err}")
        return
    runs = {trace.config.norm: trace, other: twin}
    post, pre = runs["post"], runs["pre"]
    rewired = captions.rewired_note(fr.model_key, ui.model_label(fr.values["model"]), trace.config.norm, other)
    names = {"post": "Post-LN", "pre": "Pre-LN"}
    if rewired:
        names[other] += " (rewired)"
    ui.caption("Both columns use exactly the same weights; only the place of LayerNorm differs. Post-LN normalises "
               "after each residual add (the original paper); Pre-LN normalises each sub-layer's input.")
    # One row that wraps instead of stacking (on a phone Layer and Head share a line); with one layer there is no
    # Layer slider and its empty slot takes no room.
    row = st.container(horizontal=True, vertical_alignment="bottom")
    layer_col, head_col, scale_col = (row.container(width=w) for w in ("stretch", 120, "content"))
    layer = ui.layer_slider(trace.num_layers, layer_col)
    head = ui.head_select(trace.num_heads, head_col)
    scale = ui.widget("scale", scale_col)
    # The rewired note is shown in presentation mode too (students would read the rewired column as "what Pre-LN
    # looks like"), there just below the pair, whose column title already says "(rewired)": the pair stays whole
    # on a 720 px screen.
    note = (f"{rewired} Here {captions.cls_share(runs[other], layer, head):.0%} of its rows put their largest weight "
            "on [CLS] or [SEP]." if rewired else "")
    if note and not fr.present:
        st.warning(note, icon=":material/warning:")
    tag = export.model_tag(trace.config, fr.model_key)
    pair = attention.attention_pair({names["post"]: post, names["pre"]: pre}, layer, head, scale=scale,
                                    presentation=fr.present)
    st.plotly_chart(pair, config=export.png_config(export.export_name(trace, "post-vs-pre", f"L{layer}", f"H{head}",
                                                                      model=tag)))
    if note and fr.present:
        st.warning(note, icon=":material/warning:")
    left, right = st.columns(2)
    # Past LONG tokens the exact pair above is already ~3 MB; the difference map (another ~1.5 MB) comes on request.
    if trace.seq_len <= LONG or ui.widget("diff_long", left):
        diff = attention.attention_difference(post.attention[layer, head], pre.attention[layer, head], trace.tokens,
                                              "Post-LN − Pre-LN", presentation=fr.present)
        left.plotly_chart(diff, config=export.png_config(export.export_name(trace, "post-minus-pre", f"L{layer}",
                                                                            f"H{head}", model=tag)))
    right.plotly_chart(activations.residual_norms({names["post"]: post, names["pre"]: pre}, presentation=fr.present),
                       config=export.png_config(export.export_name(trace, "residual-post-pre", model=tag)))
    ui.caption("Left: red where Post-LN attends more, blue where Pre-LN does. Right: "
               + " ".join(captions.placement_sentence(run) for run in (post, pre)))
    st.subheader("Layer outputs")
    st.dataframe(variants.output_summary({"Post-LN": post, "Pre-LN": pre}), hide_index=True, width="stretch")


def sentences(fr: ui.Frame, trace: Trace) -> None:
    """One model on two sentences: one token's attention in each, and their difference when the lengths match."""
    # On a projector the second sentence folds into a popover in the row of Layer and Token, as the first one does in
    # the frame, so the first map is whole on screen at first load; its label holds no user text.
    if fr.present:
        box, *cols = st.columns([3, 3, 2], vertical_alignment="bottom")
        box = box.popover("Second sentence", icon=":material/edit_note:", width="stretch", key="text_b_box")
    else:
        box = st
    text_b = ui.widget("text_b", box, height=68)
    if not text_b.strip():
        st.info("Type a second sentence to compare with the first.")
        return
    try:
        other = ui.get_trace(fr.model_key, fr.device, text_b, trace.train)
    except (ValueError, RuntimeError) as err:
        st.error(str(err))
        return
    if not fr.present:
        cols = st.columns([3, 2], vertical_alignment="bottom")
    layer_col, word_col = cols if trace.num_layers > 1 else cols[::-1]  # no gap where a 1-layer model has no slider
    layer = ui.layer_slider(trace.num_layers, layer_col)
    word = ui.widget("word", word_col)
    ia, ib = variants.find_token(trace.tokens, word), variants.find_token(other.tokens, word)
    if ia is None or ib is None:
        st.info("Pick a token that appears in both sentences (as a WordPiece token, lowercase for this model).")
        return
    ra, rb = variants.token_rows(trace, ia, layer), variants.token_rows(other, ib, layer)
    tag = export.model_tag(trace.config, fr.model_key)
    # Stacked, each the full width: the two sentences' tokens differ, so the maps cannot share an axis.
    for which, run, rows in (("First", trace, ra), ("Second", other, rb)):
        st.plotly_chart(token_attention(rows, run.tokens, word, f"{which} sentence, layer {layer}",
                                        presentation=fr.present),
                        config=export.png_config(export.export_name(run, "token-attention", f"L{layer}", word,
                                                                    model=tag)))
    if len(trace.tokens) == len(other.tokens):
        fig = token_attention(ra - rb, trace.tokens, word, f"Difference (first minus second), layer {layer}", diff=True,
                              presentation=fr.present)
        st.plotly_chart(fig, config=export.png_config(export.export_name(trace, "token-diff", f"L{layer}", word,
                                                                         model=tag)))
        ui.caption("Red: the token attends more to that key in the first sentence; blue: more in the second. In "
                   "trained models some heads move attention from 'animal' to 'street' when 'tired' becomes 'wide'.")
    else:
        st.caption("The sentences have different numbers of tokens, so there is no position-by-position difference.")


def page() -> None:
    """The comparison the Compare setting chooses."""
    fr, trace = ui.need_trace()
    # On a projector the options name themselves: without the label the main figure is whole on screen at first load.
    mode = ui.widget("compare", label_visibility="collapsed" if fr.present else "visible")
    (placements if mode == "norm" else sentences)(fr, trace)


pages.show(page)
