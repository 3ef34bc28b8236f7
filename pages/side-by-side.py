"""Compare: the same weights in Post-LN and Pre-LN, one model on two sentences, or two models on one sentence."""

from typing import Any

import streamlit as st

import ui
from encoder import Trace
from encoder.analysis import variants
from encoder.tokenizer import tokenizer_kind
from encoder.viz import activations, attention, export
from encoder.viz.axes import special_names
from encoder.viz.teaching import token_attention
from encoder.viz.text import label
from ui import captions, pages, settings


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
            f"on {special_names(trace.special_tokens, ' or ')}." if rewired else "")
    note = ui.literal(note)  # it names the model's special tokens, which its tokenizer.json spells
    if note and not fr.present:
        st.warning(note, icon=":material/warning:")
    tag = export.model_tag(trace.config, fr.model_key)

    def drawn(*key, build):  # ui.kept_figure: once per trace and view for every session
        return ui.kept_figure(trace, ("placements", names["post"], names["pre"], *key), build)

    pair = drawn("pair", layer, head, scale, fr.present, build=lambda: attention.attention_pair(
        {names["post"]: post, names["pre"]: pre}, layer, head, scale=scale, presentation=fr.present,
        tallest=attention.PAIR_FIRST_SCREEN))  # the page's main figure: whole on a projector's first screen
    ui.sideways("placement-pair").plotly_chart(pair, config=export.png_config(export.export_name(
        trace, "post-vs-pre", f"L{layer}", f"H{head}", model=tag)))
    if note and fr.present:
        st.warning(note, icon=":material/warning:")
    left, right = st.columns(2)
    # Past DIFF_ON_REQUEST tokens the exact pair above is already ~2.8 MB; the difference map (another ~1.4 MB)
    # comes on request.
    if trace.seq_len <= settings.DIFF_ON_REQUEST or ui.widget("diff_long", left):
        diff = drawn("difference", layer, head, fr.present, build=lambda: attention.attention_difference(
            post.attention[layer, head], pre.attention[layer, head], trace.labels, "Post-LN − Pre-LN",
            presentation=fr.present))
        left.plotly_chart(diff, config=export.png_config(export.export_name(trace, "post-minus-pre", f"L{layer}",
                                                                            f"H{head}", model=tag)))
    right.plotly_chart(drawn("residual", fr.present, build=lambda: activations.residual_norms(
                           {names["post"]: post, names["pre"]: pre}, presentation=fr.present)),
                       config=export.png_config(export.export_name(trace, "residual-post-pre", model=tag)))
    ui.caption("Left: red where Post-LN attends more, blue where Pre-LN does. Right: "
               + " ".join(captions.placement_sentence(run) for run in (post, pre)))
    st.subheader("Layer outputs")
    outputs = drawn("outputs", build=lambda: variants.output_summary({"Post-LN": post, "Pre-LN": pre}))
    st.dataframe(outputs, hide_index=True, width="stretch")


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
    ia, ib = variants.find_token(trace.labels, word), variants.find_token(other.labels, word)
    if ia is None or ib is None:
        st.info("Pick a token that appears in both sentences, as this model's tokenizer splits them (an uncased "
                "model lowercases every word).")
        return
    ra, rb = variants.token_rows(trace, ia, layer), variants.token_rows(other, ib, layer)
    tag = export.model_tag(trace.config, fr.model_key)
    # Stacked, each the full width: the two sentences' tokens differ, so the maps cannot share an axis.
    for which, run, rows in (("First", trace, ra), ("Second", other, rb)):
        st.plotly_chart(token_attention(rows, run.labels, word, f"{which} sentence, layer {layer}",
                                        presentation=fr.present),
                        config=export.png_config(export.export_name(run, "token-attention", f"L{layer}", word,
                                                                    model=tag)))
    if len(trace.tokens) == len(other.tokens):
        fig = token_attention(ra - rb, trace.labels, word, f"Difference (first minus second), layer {layer}", diff=True,
                              presentation=fr.present)
        st.plotly_chart(fig, config=export.png_config(export.export_name(trace, "token-diff", f"L{layer}", word,
                                                                         model=tag)))
        ui.caption("Red: the token attends more to that key in the first sentence; blue: more in the second. In "
                   "trained models some heads move attention from 'animal' to 'street' when 'tired' becomes 'wide'.")
    else:
        st.caption("The sentences have different numbers of tokens, so there is no position-by-position difference.")


def short_name(choice: str) -> str:
    """A model choice's name for a map's title: the pretrained model's, a checkpoint's folder, "Custom model"."""
    if choice == settings.PRETRAINED:
        return export.PRETRAINED_TAG
    return "Custom model" if choice == settings.CUSTOM else choice.removeprefix(settings.CHECKPOINT_PREFIX)


SCALE_NOTES = {"fixed": "Colours run from 0 to 1 in both.", "auto": "Each map's colours stretch to its own largest weight.",
               "row": "Each row is coloured relative to its own largest weight."}


# Two models' maps on a projector, their page's main figure: whole on the first screen below the page's controls (their
# top ~235 px down at 1280 x 720 presenting), and every row of a 16-token sentence named (attention_heatmap).
TWO_MODELS_FIRST_SCREEN = 470


def two_models(fr: ui.Frame, trace: Trace, top: Any) -> None:
    """The same sentence in the sidebar's model and a second one, each map on its own tokens, layer and head.

    top: the row of the Compare choice. On a projector the colour scale goes there and the second model's choice
    beside its own Layer and Head, so the maps start one row higher: on a 720 px screen that row is what naming all
    16 rows of the default sentence takes."""
    # On a projector the controls' labels fold away: the choices name themselves, and each map's title and subtitle
    # just below name its model, layer and head.
    labels = "collapsed" if fr.present else "visible"
    if fr.present:
        scale_at = top.container(width="content")
    else:  # the second model's choice and the scale in a row above the columns, whose maps then start level
        row = st.container(horizontal=True, vertical_alignment="bottom")
        model_at, scale_at = row.container(width="stretch"), row.container(width="content")
    scale = ui.widget("scale", scale_at, label_visibility=labels)
    left, right = st.columns(2)
    picks = [col.container(horizontal=True, vertical_alignment="bottom") for col in (left, right)]
    if fr.present:  # 120 px: with the Layer slider's least width (8 rem) and Head, one line in a 1024 px projector's column
        model_at = picks[1].container(width=120)
    second = ui.widget("model_b", model_at, options=ui.model_choices(),
                       format_func=ui.short_model_label if fr.present else ui.model_label, label_visibility=labels)
    values_b = dict(fr.values, model=second)
    try:
        key_b = ui.model_key_of(values_b)  # a custom second model: the sidebar's config
        model_b = ui.get_model(key_b, fr.device)
        other = ui.get_trace(key_b, fr.device, trace.text, trace.train)
    except ValueError as err:
        st.error(ui.literal(f"The second model cannot run: {settings.config_problem(values_b, err)}"))
        return
    except (RuntimeError, MemoryError) as err:
        st.error(f"The second model could not run this input ({type(err).__name__}). Try a shorter sentence.")
        return
    sides = ((trace, fr.model, fr.values["model"], fr.model_key, ("layer", "head")),
             (other, model_b, second, key_b, ("layer_b", "head_b")))
    for col, pick, (run, model, choice, key, (layer_key, head_key)) in zip((left, right), picks, sides, strict=True):
        if run.num_layers == 1:
            ui.state.put(layer_key, 0)
            layer = 0
        else:
            layer = ui.widget(layer_key, pick.container(width="stretch"), hi=run.num_layers - 1,
                              label_visibility=labels)
        head = ui.widget(head_key, pick.container(width=90 if fr.present else 120), options=range(run.num_heads),
                         label_visibility=labels)
        kind = tokenizer_kind(run.config.max_len, model.vocab_dir)
        # the model's short name as the title (half a projector's width), what is drawn of it below
        title = label(short_name(choice), 28)
        subtitle = f"layer {layer}, head {head} · {run.seq_len} {kind} tokens"
        fig = ui.kept_figure(run, ("two-models", layer, head, scale, fr.present, title, subtitle),
                             lambda run=run, layer=layer, head=head, title=title, subtitle=subtitle:
                             attention.attention_heatmap(run, layer, head, scale=scale, presentation=fr.present,
                                                         title=title, subtitle=subtitle,
                                                         tallest=TWO_MODELS_FIRST_SCREEN))
        col.plotly_chart(fig, config=export.png_config(export.export_name(
            run, "two-models", f"L{layer}", f"H{head}", model=export.model_tag(run.config, key))))
        if window := attention.window_note(run, layer):
            col.caption(window)
    same = trace.tokens == other.tokens
    ui.caption(ui.literal(
        ("Both models cut this sentence into the same tokens, so the two maps line up cell by cell. " if same else
         f"Each model reads the sentence with its own tokenizer: {trace.seq_len} tokens on the left, {other.seq_len} "
         "on the right, so each map has its own axes and a cell is not the same pair of words in both. ")
        + "Each map is one head of one layer of its own model: the layers and heads of two models are not "
          "counterparts. " + SCALE_NOTES[scale]))


def page() -> None:
    """The comparison the Compare setting chooses."""
    fr, trace = ui.need_trace()
    # On a projector the options name themselves: without the label the main figure is whole on screen at first load.
    top = st.container(horizontal=True, vertical_alignment="bottom")
    mode = ui.widget("compare", top.container(width="content"), label_visibility="collapsed" if fr.present else "visible")
    if mode == "models":
        two_models(fr, trace, top)
    else:
        {"norm": placements, "sentences": sentences}[mode](fr, trace)


pages.show(page)
