"""Token trajectories: every token's vector after the embeddings and after each layer, in one 2-D PCA (issue 13)."""

import pandas as pd
import streamlit as st

import ui
from encoder.analysis import embeddings
from encoder.viz import export
from encoder.viz import purpose as fig
from encoder.viz.text import label, printable
from ui import pages, purpose

FOLLOW_KEY = "ms:follow"  # the multiselect's own key; the setting lives in the store as "follow"


def choose_tokens(tokens: list[str]) -> list[str]:
    """The highlighted tokens: a multiselect over this sentence's distinct tokens, bound to the store's "follow"."""
    options = list(dict.fromkeys(tokens))
    chosen = [w for w in ui.state.get("follow").split() if w in options]
    st.session_state[FOLLOW_KEY] = chosen  # re-created from the store on every run, like ui.widget's widgets
    st.multiselect("Tokens to highlight", options, key=FOLLOW_KEY, format_func=printable, on_change=purpose.commit_words,
                   args=(FOLLOW_KEY, "follow"), placeholder="Choose tokens to follow through the layers",
                   label_visibility="collapsed" if ui.state.get("present") else "visible")  # the chart's room
    return chosen


@ui.fragment
def trajectories_view() -> None:
    """A highlight change reruns only this part; the projection is computed once per trace."""
    fr, trace = ui.need_trace()
    tokens = trace.labels  # as the figures show them (byte-level BPE's "Ġit" reads "▁it"), in the menu and the URL
    chosen = choose_tokens(tokens)
    highlight = [i for word in chosen for i, t in enumerate(tokens) if t == word]  # colours follow this order
    points, shares = purpose.get_trajectories(fr)  # (depth, seq, 2), the two components' shares of the variance
    name = export.export_name(trace, "trajectories")
    subtitle = "" if fr.present else f"“{label(' '.join(trace.text.split()), 90)}”"  # presenting: the bar shows it
    # Built once per trace, highlight and view for every session (ui.kept_figure), like the projection itself.
    st.plotly_chart(ui.kept_figure(trace, ("trajectories", tuple(highlight), fr.present), lambda: fig.trajectories(
                        points, tokens, highlight, shares, subtitle=subtitle, presentation=fr.present)),
                    config=export.png_config(name))
    kept = float(shares[0] + shares[1])
    ui.caption(f"One PCA, fitted on all {trace.num_layers + 1} × {trace.seq_len} token vectors at once (after the "
               f"embeddings, then after each layer), so every step is drawn in the same coordinates. It keeps the two "
               f"directions along which these vectors vary most: {shares[0]:.0%} and {shares[1]:.0%} of the variance, "
               f"{kept:.0%} together. The other {trace.config.d_model - 2} dimensions ({1 - kept:.0%} of the variance) "
               "are flattened, so two points close on screen can be far apart in the model: check a distance below, "
               "in all dimensions, before trusting it.")
    ui.download("Download coordinates (CSV)", lambda: pd.DataFrame(
        [{"position": i, "token": t, "depth": d, "pc1": float(points[d, i, 0]), "pc2": float(points[d, i, 1])}
         for i, t in enumerate(tokens) for d in range(points.shape[0])]).to_csv(index=False), f"{name}.csv", "text/csv")

    if len(chosen) < 2:
        st.info("Highlight two or more tokens (e.g. “it” and “animal”) to measure how close they get, layer by layer.")
        return
    def similarity() -> object:
        source, *targets = [tokens.index(t) for t in chosen]  # first occurrences
        cosines = {f"{tokens[j]} ({j})": embeddings.token_similarity(trace, source, j) for j in targets}
        colours = [fig.highlight_colour(highlight.index(j)) for j in targets]
        return fig.depth_similarity(cosines, chosen[0], colours, presentation=fr.present)

    st.plotly_chart(ui.kept_figure(trace, ("token-similarity", tuple(chosen), fr.present), similarity),
                    config=export.png_config(export.export_name(trace, "token-similarity", chosen[0])))
    ui.caption(f"Cosine similarity of '{ui.literal(printable(chosen[0], 30))}' (its first occurrence) to the other "
               "highlighted tokens after the embeddings and after each layer, in all dimensions: what the picture "
               "above can only hint at. Tokens that the layers mix into each other grow more alike with depth.")


def page() -> None:
    """Every token's path through the layers in one PCA; without a trace the page stops."""
    ui.need_trace()
    trajectories_view()


pages.show(page)
