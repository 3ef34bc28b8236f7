"""Why are these similar? The words that carry two sentences' similarity (or one token's direction), by attribution,
and a deletion test of which measure predicts the model (issues 19 and 27)."""

import pandas as pd
import streamlit as st

import ui
from encoder import Trace
from encoder.analysis.attribution import METHODS, Attribution, Target, similarity_target
from encoder.analysis.measures import MEASURES
from encoder.analysis.ranking import PUBLISHED, published_order
from encoder.viz import attribution as fig
from encoder.viz import export
from encoder.viz.style import figure_meta
from encoder.viz.text import printable
from ui import pages, purpose, why

SIGN = "Red: the word supports the target; blue: it works against it; white: it does not move it."
CURVES = "the deletion and insertion curves"
CURVES_HELP = ("Every measure and method ranks the words, then the model runs again on the sentence with words replaced, "
               "for each ranking. Computed once per sentence and target on this server.")
NUMBER = st.column_config.NumberColumn(format="%.4f")  # a value that underflows shows as 0.0000; the CSV keeps it


def controls(fr: ui.Frame, trace: Trace) -> tuple[str, str]:
    """The target (similarity to the second sentence, or one token), pooling or token, method and IG steps; returns
    (target kind, method). On a projector they share one row, the second sentence and the steps in popovers."""
    present = fr.present
    if present:
        row = st.container(horizontal=True, vertical_alignment="bottom")
        kind = ui.widget("target", row.container(width="content"), label_visibility="collapsed")
        if kind == "similarity":
            box = row.popover("Second sentence", icon=":material/edit_note:", key="why_text_b_box")
            ui.widget("text_b", box, height=68)
            ui.widget("pool", row.container(width="content"))
        else:
            token_widget(trace, row.container(width=220))
        method = ui.widget("method", row.container(width=240))
        ui.widget("ig_steps", row.popover("IG steps", key="why_steps_box"))
        return kind, method
    top, side = st.columns([3, 2], vertical_alignment="bottom")
    kind = ui.widget("target", side)
    if kind == "similarity":
        ui.widget("text_b", top, height=68)
    cols = st.columns(3, vertical_alignment="bottom")
    if kind == "similarity":
        ui.widget("pool", cols[0])
    else:
        token_widget(trace, cols[0])
    method = ui.widget("method", cols[1])
    ui.widget("ig_steps", cols[2])
    return kind, method


def token_widget(trace: Trace, where) -> int:
    tokens = trace.tokens
    return ui.widget("token", where, options=range(trace.seq_len),
                     format_func=lambda j: f"{j}: {printable(tokens[j], 20)}")


def knockouts(fr: ui.Frame) -> purpose.Knocks:
    """The knock-outs set on Knock out heads, which every number here follows; said so, with a way back."""
    knocks, problems = purpose.parse_ablate(fr.values["ablate"], fr.config)
    for problem in problems:
        st.warning(ui.literal(problem), icon=":material/block:")
    if knocks:
        names = ", ".join(purpose.ablate_label(code) for code in purpose.ablate_codes(knocks))
        row = st.container(horizontal=True, vertical_alignment="center")
        row.info(f"Knocked out (on Knock out heads): {names}. The attributions and curves below are the knocked-out "
                 "model's.", icon=":material/block:", width="stretch")
        row.button("Use the intact model", on_click=ui.state.put, args=("ablate", ""), icon=":material/restart_alt:")
    return knocks


def on_request(tokens: int, what: str, key: str, *, slow: bool = True, help: str | None = None) -> bool:
    """A button for work computed when asked, said to take long at this length when `slow`; True in the run it is
    pressed."""
    if slow:
        st.info(f"This sentence has {tokens} tokens, so {what} take a while here (a minute or more on a busy 2-core "
                "server); they are computed when you ask.", icon=":material/hourglass_top:")
    return st.button(f"Compute {what}", key=key, icon=":material/play_arrow:", help=help)


def attributions(fr: ui.Frame, texts: list[str], target: Target, method: str, steps: int,
                 knocks: purpose.Knocks) -> list[tuple[Trace, Attribution]] | None:
    """Each sentence's attribution toward the target (the second one toward the same similarity, seen from its side)."""
    runs = [purpose.get_run(fr, text, knocks) for text in texts]
    targets = [target] + [similarity_target(texts[0], target.pooling)] * (len(texts) - 1)
    longest = max(run.seq_len for run in runs)
    ready = all(why.attribution_cached(fr, t, g, method, steps, knocks) for t, g in zip(texts, targets, strict=True))
    if longest > why.AUTO_ATTRIBUTE and not ready and not on_request(longest, "the attributions", "why_attribute"):
        return None
    progress = why.Progress()
    try:
        out = [(run, why.get_attribution(fr, text, tgt, method, steps, knocks, progress))
               for run, text, tgt in zip(runs, texts, targets, strict=True)]
    finally:
        progress.done()
    return out


def show_attributions(fr: ui.Frame, trace: Trace, found: list[tuple[Trace, Attribution]], target: Target,
                      method: str, knocks: purpose.Knocks) -> None:
    """The tokens coloured by score, a bar per token, what the method is, and the scores as CSV."""
    first = found[0][1]
    what = "the similarity" if target.kind == "similarity" else f"token {target.token}'s own direction"
    value = (f"cosine {first.value:.3f}" if target.kind == "similarity"
             else f"projection {first.value:.3f}")
    label = METHODS[method].label
    name = export.export_name(trace, "why-similar", method, purpose.format_ablate(knocks) or "intact")
    strip = fig.token_strip([(f"{n}", run.tokens, a.scores) for n, (run, a) in enumerate(found, 1)],
                            f"{label} toward {what}", subtitle=value, presentation=fr.present)
    # Every printed token fits its cell: where the column is narrower (a phone), the strip scrolls sideways.
    ui.sideways("why-strip", figure_meta(strip)["min_px"]).plotly_chart(strip, config=export.png_config(name + "_tokens"))
    ui.caption(f"Each cell is a token of sentence 1{' (then sentence 2)' if len(found) > 1 else ''}, in reading "
               f"order. {SIGN} {METHODS[method].describe}")
    ig = [(n, a) for n, (_, a) in enumerate(found, 1) if a.delta is not None]
    if ig:  # stated on a projector too: the baseline and the steps are part of the method
        gaps = " and ".join(f"{abs(a.delta):.1e} (sentence {n}, {a.steps} steps)" for n, a in ig)
        st.caption(f"Baseline: {ig[0][1].baseline}. The scores add up to f(x) − f(baseline) within {gaps}.")
    for n, (run, a) in enumerate(found, 1):
        st.plotly_chart(fig.token_bars(run.tokens, a.scores, f"Sentence {n}: a bar per token", subtitle=label,
                                       presentation=fr.present), config=export.png_config(f"{name}_bars{n}"))
    def scores_csv() -> str:
        rows = [dict(sentence=n, position=i, token=tok, method=method, score=float(s))
                for n, (run, a) in enumerate(found, 1)
                for i, (tok, s) in enumerate(zip(run.tokens, a.scores.tolist(), strict=True))]
        return pd.DataFrame(rows).to_csv(index=False)

    ui.download("Download token scores (CSV)", scores_csv, f"{name}.csv", "text/csv")


def deletion_test(fr: ui.Frame, trace: Trace, text: str, target: Target, steps: int, knocks: purpose.Knocks) -> None:
    """The faithfulness chart for sentence 1: every measure and method, deletion and insertion, with their areas."""
    st.subheader("Does the ranking predict the model?")
    ui.caption("Each measure and attribution method ranks the words of sentence 1. The words are then replaced, most "
               "important first (deletion), or brought back into a sentence of replacements (insertion), and the "
               "model is run again. A faithful ranking makes the target fall fast when its words go (low area on the "
               "left) and come back fast when they return (high area on the right). The dashed line is a random order.")
    run = purpose.get_run(fr, text, knocks)
    # On request at every length (it costs more than the attributions above: every measure and method, then the
    # perturbed sentences), then kept for every session.
    if not why.chart_cached(fr, text, target, steps, knocks) and not on_request(
            run.seq_len, CURVES, "why_curves", slow=run.seq_len > why.SLOW_CURVES, help=CURVES_HELP):
        return
    progress = why.Progress()
    try:
        chart, ranked = why.get_chart(fr, text, target, steps, knocks, progress)
    finally:
        progress.done()
    axis = "cosine similarity" if target.kind == "similarity" else "projection on its direction"
    name = export.export_name(trace, "faithfulness", purpose.format_ablate(knocks) or "intact")
    present = fr.present  # the chart is cached and never changes: its figure is built once per view of it
    st.plotly_chart(ui.BESIDE.get(chart, ("faithfulness", axis, present), lambda: fig.faithfulness_chart(
        chart, axis, subtitle=f"{chart.words} words · random order seeded", presentation=present)),
                    config=export.png_config(name))
    st.caption(chart.note)  # the replacement token and the rules: stated on a projector too
    if ranked.skipped:
        st.caption("Left out: " + " ".join(f"{ranked.labels.get(k, k)}: {why_text}"
                                           for k, why_text in ranked.skipped.items()))
    summary = chart.summary()
    st.dataframe(summary.drop(columns="key"), hide_index=True, width="stretch",
                 column_config={c: NUMBER for c in summary.columns if c not in ("key", "measure")})
    left, right = st.columns(2)
    ui.download("Download curves (CSV)", lambda: chart.points().to_csv(index=False), f"{name}_curves.csv", "text/csv",
                where=left)
    def rankings_csv() -> str:
        scores = pd.DataFrame({key: s.double().numpy() for key, s in ranked.scores.items()})
        scores.insert(0, "token", run.tokens)
        scores.insert(0, "position", range(run.seq_len))
        return scores.to_csv(index=False)

    ui.download("Download word rankings (CSV)", rankings_csv, f"{name}_scores.csv", "text/csv", where=right)


def which_measure(fr: ui.Frame, kind: str, steps: int, knocks: purpose.Knocks) -> None:
    """Issue 27's table: the deletion test over the built-in pairs, mean AOPC per measure, the published ordering."""
    st.subheader("Which measure is right here?")
    pool = fr.values["pool"]
    cases = why.ranking_cases(kind, pool)
    what = ("their similarity" if kind == "similarity"
            else f"the first word's own direction (token {why.RANKING_TOKEN})")
    ui.caption(f"The same deletion test over {len(cases)} built-in sentences (the example sets of Sentence embeddings) "
               f"toward {what}: the AOPC is the mean drop of the target as the top 0–100 % of the words are replaced, "
               "so higher is more faithful. The DecompX paper reports, for BERT on SST-2: DecompX 0.627 > ALTI 0.416 > "
               "Integrated Gradients 0.340 > Gradient × Input 0.310.")
    ranking = why.ranking_cached(fr, kind, pool, steps, knocks)
    if ranking is None:
        if not st.button(f"Rank the measures on {len(cases)} sentences", icon=":material/leaderboard:",
                         key="why_rank"):
            return
        progress = why.Progress()
        try:
            ranking = why.get_ranking(fr, kind, pool, steps, knocks, progress)
        finally:
            progress.done()
    labels = {k: m.label for k, m in MEASURES.items()} | {k: m.label for k, m in METHODS.items()}
    order = published_order(ranking.table, lambda key: labels.get(key, key), ranking.skipped)
    present = fr.present  # the ranking is cached and never changes: its figure is built once per view of it
    st.plotly_chart(ui.BESIDE.get(ranking, ("ranking", len(cases), present), lambda: fig.ranking_chart(
        ranking.table, PUBLISHED, subtitle=f"{len(cases)} sentences · ± one standard deviation", presentation=present)),
                    config=export.png_config(ranking_name(fr, kind)))
    say = {True: st.success, False: st.warning, None: st.info}[order.holds]
    extra = ("" if purpose.model_kind(fr) == "pretrained" else " This model was not trained as BERT was, so there is "
             "no reason to expect the published ordering here.")
    say(order.text + extra, icon=":material/balance:")
    table = ranking.table.drop(columns="key")
    st.dataframe(table, hide_index=True, width="stretch",
                 column_config={c: NUMBER for c in table.columns if c.endswith("aopc") or c.startswith("mean_")})
    st.caption(f"Computed in {ranking.seconds:.1f} s for this model and target, then kept for every session.")
    ui.download("Download the ranking (CSV)", lambda: ranking.cases.merge(
        ranking.table[["key", "mean_aopc", "std_aopc"]], on="key").to_csv(index=False),
        ranking_name(fr, kind) + ".csv", "text/csv")


def ranking_name(fr: ui.Frame, kind: str) -> str:
    """The ranking's file name: the model and the target, not the sentence on screen (the set is built in)."""
    return export.safe_filename(f"{export.model_tag(fr.config, fr.model_key)}_measure-ranking_{kind}")


def page() -> None:
    """The attributions of the chosen method, the faithfulness chart and the measures ranked over a built-in set."""
    fr, trace = ui.need_trace()
    kind, method = controls(fr, trace)
    knocks = knockouts(fr)
    values = ui.state.store()
    target = why.target_of(values)
    steps = int(values["ig_steps"])
    texts = [values["text"]]
    if kind == "similarity":
        if not values["text_b"].strip():
            st.info("Type a second sentence to see which words make the two similar, or attribute toward one token.")
            return
        texts.append(values["text_b"])
    try:
        found = attributions(fr, texts, target, method, steps, knocks)
        if found is not None:
            show_attributions(fr, trace, found, target, method, knocks)
        if kind == "similarity" and purpose.model_kind(fr) == "random":
            ui.caption("This model has random weights: its similarity carries no meaning, but the attributions still "
                       "say exactly which words moved this number.")
        deletion_test(fr, trace, texts[0], target, steps, knocks)
        which_measure(fr, kind, steps, knocks)
    except (ValueError, RuntimeError) as err:  # a sentence of special tokens only, training mode, a refused model
        st.warning(ui.literal(str(err)), icon=":material/info:")


pages.show(page)
