"""Knock out heads: zero chosen heads or sub-layers inside the forward pass and see what changes (issue 13)."""

import streamlit as st
import torch

import ui
from encoder.viz import attention, export
from encoder.viz import purpose as fig
from ui import pages, purpose, settings

ABLATE_KEY = "ms:ablate"  # the multiselect's own key; the setting lives in the store as "ablate"
NOTHING = "Nothing is knocked out yet, so everything below matches the intact model. Choose heads above."


def choose_knockouts(cfg) -> purpose.Knocks:
    """The multiselect of every head and sub-layer, bound to the store's "ablate"; Clear and an example beside it."""
    knocks, problems = purpose.parse_ablate(ui.state.get("ablate"), cfg)
    for problem in problems:
        st.warning(ui.literal(problem), icon=":material/block:")
    options = purpose.ablate_options(cfg)
    st.session_state[ABLATE_KEY] = purpose.ablate_codes(knocks)  # re-created from the store on every run
    # One row in which the buttons keep their text's width (in fixed columns, 1024 px with the sidebar cut it) and
    # which wraps on a phone.
    row = st.container(horizontal=True, vertical_alignment="bottom")
    row.multiselect("Knock out (zero) these heads or sub-layers", options, key=ABLATE_KEY,
                    format_func=purpose.ablate_label, on_change=purpose.commit_ablate, args=(ABLATE_KEY,),
                    placeholder="Type e.g. L3 H1, L2 FFN…", width="stretch")
    row.button("Clear", on_click=ui.state.put, args=("ablate", ""), disabled=not knocks, icon=":material/restart_alt:")
    example = purpose.example_knockout(cfg)
    row.button(f"Try {purpose.ablate_label(example)}", on_click=ui.state.put, args=("ablate", example),
               help="In the pretrained model, layer 3 head 1 links “it” to “animal”.")
    return knocks


def drawn(trace, knocks: purpose.Knocks, *key, build):
    """What the page draws from the intact and the knocked-out run: ui.kept_figure, per knock-outs and view."""
    return ui.kept_figure(trace, ("knockout", purpose.format_ablate(knocks), *key), build)


def output_effect(fr: ui.Frame, trace, knocked, knocks: purpose.Knocks) -> None:
    """The change of each token's output: the metrics above the bars, or on a projector below them (the bars are
    whole on screen at first load, tests/app/test_projector.py)."""
    if not knocks and not fr.present:  # on a projector the chart's subtitle says it, and every bar is 0
        st.info(NOTHING)
    st.subheader("Each token's final vector")
    change = drawn(trace, knocks, "output-change", build=lambda: fig.output_change(trace.output, knocked.output,
                                                                                   trace.labels))
    if not fr.present:
        change_metrics(change)
    name = export.export_name(trace, "knockout", purpose.format_ablate(knocks) or "none", "output")
    st.plotly_chart(drawn(trace, knocks, "token-change", fr.present,
                          build=lambda: fig.token_change(change, bool(knocks), presentation=fr.present)),
                    config=export.png_config(name))
    if fr.present:
        change_metrics(change)
    ui.caption("How far each token's vector at the encoder's output moves when the chosen parts are zeroed, relative "
               "to its length in the intact model. Knocking out nothing changes nothing: every bar is 0. Zeroing a "
               "head removes its share of the attention output before W_O; the residual path still carries the rest.")
    ui.download("Download changes (CSV)", lambda: change.to_csv(index=False), f"{name}.csv", "text/csv")


def change_metrics(change) -> None:
    worst = change.loc[change["relative_change"].idxmax()]
    a, b = st.columns(2)
    a.metric("Largest change", f"{worst['relative_change']:.1%}", help="‖knocked − intact‖ / ‖intact‖ of one token")
    b.metric("Mean change over tokens", f"{change['relative_change'].mean():.1%}")


def similarity_effect(fr: ui.Frame, knocks: purpose.Knocks) -> None:
    st.subheader("Similarity of two sentences")
    # The pooling under the sentence: in a quarter column beside it, "[CLS] vector" ran past the page's edge
    # (presenting at 1024 px with the sidebar unfolded again).
    text_b = ui.widget("text_b", st, height=68)
    pool = ui.widget("pool", st)
    text_a = ui.state.get("text")
    if not text_b.strip():
        st.info("Type a second sentence to compare with the first.")
        return
    try:
        pairs = {name: [purpose.get_sentence_vector(fr, t, pool, ablate=k).vector.double() for t in (text_a, text_b)]
                 for name, k in (("intact", frozenset()), ("knocked", knocks))}
    except (ValueError, RuntimeError) as err:
        st.error(ui.literal(str(err)))
        return
    intact, knocked = (float(a @ b) for a, b in pairs.values())
    a, b = st.columns(2)
    a.metric("Cosine, intact model", f"{intact:.4f}")
    b.metric("Cosine, with the knock-out", f"{knocked:.4f}", delta=f"{knocked - intact:+.4f}", delta_color="off")
    ui.caption("The cosine similarity of the two sentences' pooled vectors (as on the Sentence embeddings page), with "
               "and without the knock-out. A head that matters for what the sentences share moves it.")


@ui.fragment
def attention_effect() -> None:
    """Layer and head changes rerun only this part; both traces come from the cache."""
    fr, trace = ui.need_trace()
    knocks, _ = purpose.parse_ablate(ui.state.get("ablate"), trace.config)
    knocked = purpose.get_run(fr, trace.text, knocks)
    st.subheader("Attention in the later layers")
    layers = {k[0] for k in knocks}  # knocked-out layers
    st.plotly_chart(drawn(trace, knocks, "attention-change", fr.present, build=lambda: fig.attention_change(
                        trace.attention, knocked.attention, layers, presentation=fr.present)),
                    config=export.png_config(export.export_name(trace, "knockout", "attention-change")))
    if layers:
        ui.caption(f"A knocked-out head still computes its attention pattern; only its output is zeroed. So layer "
                   f"{min(layers)} and the layers before it attend exactly as before (0 here), and only the layers after "
                   "it can change, because their input changed.")
    # One row in which the head average's switch keeps its label whole (fixed thirds cut it at 1024 px with the sidebar
    # unfolded on a projector) and which wraps on a phone. The switch is drawn first: it disables the head choice.
    row = st.container(horizontal=True, vertical_alignment="bottom")
    slots = [row.container(width="stretch"), row.container(width=140), row.container(width="content")]
    last = trace.num_layers - 1
    later = min(layers) + 1 if layers else 0  # the first layer whose attention a knock-out can move
    if 0 < later < last:
        layer = ui.widget("layer", slots[0], lo=later, hi=last)  # only the layers a knock-out can move
    else:
        layer = ui.layer_slider(trace.num_layers, slots[0])
    avg = ui.widget("avg", slots[2])
    head = ui.head_select(trace.num_heads, slots[1], disabled=avg)
    head_sel = None if avg else head
    who = "average of heads" if avg else f"head {head}"
    # One figure: the query labels once and one colour bar leave each map room at 1024 px with the sidebar open,
    # where two half-width charts each kept about 45 px of map.
    pair = drawn(trace, knocks, "pair", layer, head_sel, fr.present, build=lambda: attention.attention_pair(
        {"Intact": trace, "Knocked out": knocked}, layer, head_sel, presentation=fr.present))
    ui.sideways("knockout-pair").plotly_chart(pair, config=export.png_config(export.export_name(
        trace, "intact-vs-knocked", f"L{layer}", who)))
    before, after = ((run.attention[layer].mean(0) if avg else run.attention[layer, head]) for run in (trace, knocked))
    if torch.equal(before, after):
        st.info(f"Layer {layer} attends exactly as in the intact model: the knock-outs come after it, or it is the "
                "knocked-out layer itself (its patterns are computed before its output is zeroed).")
        return
    # Past DIFF_ON_REQUEST tokens the two exact maps above are already ~2.8 MB; the difference comes on request.
    if trace.seq_len > settings.DIFF_ON_REQUEST and not ui.widget("diff_long", st):
        return
    diff = drawn(trace, knocks, "difference", layer, head_sel, fr.present, build=lambda: attention.attention_difference(
        after, before, trace.labels, f"Knocked out minus intact, layer {layer}, {who}", presentation=fr.present))
    st.plotly_chart(diff, config=export.png_config(export.export_name(trace, "knockout-diff", f"L{layer}")))
    ui.caption("Red: the query attends more to that key after the knock-out; blue: less.")


def page() -> None:
    """The knock-out picker and what it changes: each token's output, two sentences' similarity, attention."""
    # Tensors stay in this function's locals: the fragment and the callbacks keep nothing alive.
    fr, trace = ui.need_trace()
    knocks = choose_knockouts(trace.config)
    try:
        knocked = purpose.get_run(fr, trace.text, knocks)
    except (ValueError, RuntimeError) as err:
        st.error(ui.literal(str(err)))
        return
    output_effect(fr, trace, knocked, knocks)
    similarity_effect(fr, knocks)
    attention_effect()


pages.show(page)
