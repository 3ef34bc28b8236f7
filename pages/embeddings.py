"""Sentence embeddings: up to 8 sentences pooled into vectors and compared by cosine similarity (issue 13)."""

import pandas as pd
import streamlit as st
import torch

import ui
from encoder.analysis import embeddings, position
from encoder.viz import export
from encoder.viz import purpose as fig
from encoder.viz.text import label
from ui import captions, pages, purpose

POOLING = {
    "mean": "the mean of its token vectors at the encoder's output (with one sentence at a time every token counts; "
            "in a padded batch the attention mask leaves the padding out), scaled to length 1",
    "cls": "the output vector at the first position ({lead}), scaled to length 1 (BERT feeds its [CLS] vector to a "
           "classifier)",
}


def meaning(kind: str, pool: str) -> str:
    """What the similarities can mean for this kind of model: true for the model on screen."""
    if kind == "random":
        return ("This model has random weights, so its vectors carry no meaning: shared tokens and the random weights "
                "decide these numbers. Switch to the pretrained model to see paraphrases near 1.")
    if kind == "checkpoint":
        return ("Whether these numbers follow meaning depends on how this checkpoint was trained: a model trained for "
                "sentence embeddings, like all-MiniLM-L6-v2, puts paraphrases near 1 and unrelated text near 0.")
    if pool == "cls":
        return ("all-MiniLM-L6-v2 was trained with mean pooling; its [CLS] vector was never trained for similarity. "
                "Compare with “Mean of tokens”, the way the model is used.")
    return ("all-MiniLM-L6-v2 was trained on pairs of related sentences so that, mean-pooled, paraphrases score near 1 "
            "and unrelated sentences near 0. It reads words more than structure: a negation or a swap of subject and "
            "object may still score high.")


def example_buttons(where) -> None:
    """The example sets in one row that wraps: a button moves to the next line rather than cut its name (on a phone
    or in the projector's popover, two or one to a line)."""
    where.markdown("**Example sets** (the first sentence goes into the Sentence box)")
    row = where.container(horizontal=True)
    for name in purpose.SENTENCE_SETS:
        row.button(name, on_click=purpose.use_sentence_set, args=(name,), width="stretch",
                   help=purpose.SET_QUESTIONS[name])


def sentence_controls(present: bool, lead: str | None) -> str:
    """The example sets, the list of sentences and the pooling; the pooling chosen.

    On a projector the sets and the list fold into a popover beside the pooling, so the similarity map is whole on
    screen at first load (tests/app/test_projector.py); the popover's label holds no user text.
    """
    named = {"format_func": lambda pool: ui.literal(captions.pool_name(pool, lead))}  # "[CLS] vector", "<s> vector"
    if not present:
        example_buttons(st)
        left, right = st.columns([3, 1])
        ui.widget("sentences", left, height=140)
        return ui.widget("pool", right, **named)
    # One row that wraps: in fixed columns, presenting at 1024 px with the sidebar unfolded again, the pooling's
    # second option ran past the column's edge ("[CLS] v").
    row = st.container(horizontal=True, vertical_alignment="bottom")
    shown, _ = purpose.sentence_list(ui.state.store())
    box = row.popover(f"{len(shown)} sentences · example sets", icon=":material/edit_note:", width="stretch",
                      key="sentences_box")  # the key keeps it open across the reruns its buttons start
    example_buttons(box)
    ui.widget("sentences", box, height=140)
    return ui.widget("pool", row, **named)


def word_order(fr: ui.Frame, text: str, pool: str, lead: str | None) -> None:
    """Reversed word order: without positions (and without a window) the pooled vector cannot change."""
    st.subheader("Word order and the pooled vector")
    words = text.split()
    reordered = " ".join(reversed(words))
    if len(set(words)) < 2:
        st.info("Type a first sentence with at least two different words to compare it with its words reversed.")
        return
    cfg = fr.config
    runs = {f"this model (positional = {cfg.positional})": ()}
    if blind := position.order_blind_changes(cfg):
        runs[captions.blind_name(blind)] = blind
    rows, same_tokens = [], True
    for name, changes in runs.items():
        a = purpose.get_sentence_vector(fr, text, pool, changes=changes)
        b = purpose.get_sentence_vector(fr, reordered, pool, changes=changes)
        same_tokens &= sorted(a.tokens) == sorted(b.tokens)
        rows.append({"model": name, "cosine(original, reversed)": float(a.vector.double() @ b.vector.double()),
                     "largest |difference| in a dimension": float((a.vector - b.vector).abs().max())})
    st.text("Reversed: " + reordered)
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
                 column_config={"cosine(original, reversed)": st.column_config.NumberColumn(format="%.6f"),
                                "largest |difference| in a dimension": st.column_config.NumberColumn(format="%.2e")})
    at_lead = f" (and the output at {lead}, which stays first)" if lead else ""
    window = (" A sliding window depends on where tokens stand too (a query sees only its neighbours), so the "
              "order-blind row also attends globally." if cfg.window else "")
    ui.caption(ui.literal(
        "Without positional encoding a token's output depends on which tokens are in the sentence, not on where they "
        f"stand, so the mean of the outputs{at_lead} is the same for every order of the same words: cosine 1 up to "
        f"float rounding. With positions the order counts.{window}"))
    if not same_tokens:
        st.caption("Reversing the words changed the tokens themselves here (or cut them at the token limit), so even "
                   "without positions the vectors can differ.")
    if fr.values["train"]:
        st.caption("Training mode is on: dropout falls on different tokens once they move, so even without positions "
                   "the vectors differ a little.")
    st.page_link(pages.page("word-order").file, label="Position: shuffle the words and compare every layer",
                 icon=":material/shuffle:")


def page() -> None:
    """The sentences' similarity map and ranking, their vectors, and the word-order check."""
    # Tensors stay in this function's locals: the page keeps nothing between runs.
    fr, trace = ui.need_trace()
    lead = captions.lead_token(trace)
    pool = sentence_controls(fr.present, lead)
    values = ui.state.store()
    sentences, left_out = purpose.sentence_list(values)
    if left_out:
        st.info(f"Only the first {purpose.MAX_SENTENCES} sentences are compared; {left_out} more were left out.")
    kept, vectors = [], []
    for i, sentence in enumerate(sentences, 1):
        try:
            vectors.append(purpose.get_sentence_vector(fr, sentence, pool))
            kept.append(sentence)
        except (ValueError, RuntimeError) as err:
            st.warning(f"Sentence {i} could not be encoded and is left out: {ui.literal(str(err))}")
    if not vectors:
        return
    if len(kept) < 2:
        st.info("Add a second sentence (one per line in the box above), or pick an example set, to compare them.")
    stack = torch.stack([v.vector for v in vectors])  # (n, d_model)
    sim = embeddings.cosine_matrix(stack)  # (n, n)
    kind = purpose.model_kind(fr)
    limit = purpose.sentence_limit(fr)
    cut = [i for i, v in enumerate(vectors, 1) if v.truncated]
    if cut:
        st.caption(f"Sentence(s) {', '.join(map(str, cut))} are longer than {limit or fr.config.max_len} tokens; only "
                   "the first ones count" + (", as in sentence-transformers." if limit else "."))

    name = export.export_name(trace, "similarity", pool)
    pooled = "mean-pooled" if pool == "mean" else f"{label(lead or 'first-token', 12)} vectors"  # fits a 420 px phone
    # The map takes the whole width and the ranking follows below it: beside the table, at 1024 px (with the sidebar,
    # or presenting) its cells were narrower than their numbers.
    # The two figures are built once per model (the trace's), sentence list, pooling and view for every session
    # (ui.kept_figure; each sentence's vector is cached on its own). The title's words follow from these.
    view = (tuple(kept), pool, fr.present)
    st.plotly_chart(ui.kept_figure(trace, ("similarity", *view), lambda: fig.similarity_heatmap(
                        sim, kept, title=f"Cosine similarity ({pooled})", presentation=fr.present)),
                    config=export.png_config(name))
    ranking = pd.DataFrame({"#": range(1, len(kept) + 1), "cosine to 1": sim[0].double().numpy(), "sentence": kept})
    st.markdown("**Closest to sentence 1**")
    st.dataframe(ranking.sort_values("cosine to 1", ascending=False), hide_index=True, width="stretch",
                 column_config={"cosine to 1": st.column_config.ProgressColumn(format="%.3f", min_value=-1,
                                                                                max_value=1)})
    off = sim[~torch.eye(len(kept), dtype=torch.bool)]
    spread = f" Here the pairs range from {off.min():.2f} to {off.max():.2f}." if off.numel() else ""
    ui.caption(f"Each cell is the cosine of the angle between two sentence vectors: 1 = the same direction, 0 = "
               f"unrelated, −1 = opposite.{spread} {meaning(kind, pool)}")
    if fr.values["train"]:
        st.caption("Training mode is on: dropout changes every vector. Turn it off in the sidebar for the model's own "
                   "embeddings.")
    def similarities_csv() -> str:
        csv = pd.DataFrame(sim.double().numpy(), columns=[f"s{i}" for i in range(1, len(kept) + 1)])
        csv.insert(0, "sentence", kept)
        return csv.to_csv(index=False)

    ui.download("Download similarities (CSV)", similarities_csv, f"{name}.csv", "text/csv")

    st.subheader("The sentence vectors")
    d = stack.shape[1]
    st.plotly_chart(ui.kept_figure(trace, ("sentence-vectors", *view), lambda: fig.sentence_vectors(
                        stack, kept, f"{len(kept)} sentence vectors, {d} dimensions each", presentation=fr.present)),
                    config=export.png_config(export.export_name(trace, "sentence-vectors", pool)))
    first = lead or "a word: this tokenizer adds no special token in front"
    ui.caption(ui.literal(f"Row i is sentence i's vector: {POOLING[pool].format(lead=first)}. The similarity above is "
                          "the dot product of two rows."))
    def vectors_csv() -> str:
        vec = pd.DataFrame(stack.double().numpy(), columns=[f"dim{j}" for j in range(d)])
        vec.insert(0, "sentence", kept)
        return vec.to_csv(index=False)

    ui.download("Download vectors (CSV)", vectors_csv, export.export_name(trace, "sentence-vectors", pool) + ".csv",
                "text/csv")
    word_order(fr, values["text"], pool, lead)


pages.show(page)
