"""Training stability: gradient norms at initialisation, and real training runs with and without warm-up."""

import pandas as pd
import streamlit as st

import ui
from encoder.analysis import stability
from encoder.viz import attention, export
from encoder.viz.teaching import grad_norm_chart, training_curves
from ui import pages
from ui.caches import CACHE


# Shared, never changed (cache_resource: no copy per run), so the charts drawn from them are kept beside them.
@st.cache_resource(show_spinner="Computing gradients at initialisation…", max_entries=8)
def grad_norms(depth: int) -> pd.DataFrame:
    return pd.concat([stability.grad_norms_at_init(depth, norm) for norm in ("post", "pre")])


@st.cache_resource(show_spinner="Comparing depths…", max_entries=1)
def trend() -> pd.DataFrame:
    return stability.depth_trend(depths=(6, 12, 24), seeds=(0,))


def gradients(fr: ui.Frame) -> None:
    """Gradient norms at initialisation: per layer for the chosen depth, and the last layer's across depths."""
    st.subheader("1. Gradients at initialisation")
    ui.caption("A fresh model (d_model 128, 4 heads) gets one batch of the sequence-reversal task; these are the "
               "gradient norms of each layer's second FFN matrix W2. Xiong et al. (2020) showed that Post-LN's "
               "gradients are largest near the output and do not shrink as the stack gets deeper, while Pre-LN's shrink "
               "roughly like 1/√L: large early updates are what make Post-LN need a learning-rate warm-up.")
    depth = ui.widget("depth")
    names = {"norm": {"post": "Post-LN", "pre": "Pre-LN"}}
    norms = grad_norms(depth)
    left, right = st.columns(2)
    left.plotly_chart(ui.BESIDE.get(norms, ("w2", fr.present), lambda: grad_norm_chart(
                          norms.query("group == 'W2'").replace(names), "layer", "grad_norm", "norm",
                          f"W2 gradient norm per layer, {depth} layers", x_title="layer (0 = first)",
                          y_title="gradient norm of W2", presentation=fr.present, narrow=True)),
                      config=export.png_config(f"stability_grad-norms_{depth}-layers"))
    depths = trend()
    right.plotly_chart(ui.BESIDE.get(depths, ("last-w2", fr.present), lambda: grad_norm_chart(
                           depths.replace(names), "num_layers", "last_w2", "norm", "Last layer's W2 gradient norm vs depth",
                           x_title="number of layers", y_title="gradient norm of the last layer's W2",
                           presentation=fr.present, narrow=True)),
                       config=export.png_config("stability_grad-norm-vs-depth"))


def training(fr: ui.Frame) -> None:
    """The three training runs (trained once per server, on request) and the attention of a trained model."""
    st.subheader("2. Training with and without warm-up")
    ui.caption("Three copies of one 128-wide encoder learn to reverse sequences of 16 random tokens, with Adam at the "
               "same peak learning rate: Post-LN straight away, Post-LN with a linear warm-up over the first 100 steps, "
               "and Pre-LN straight away. The dashed line is the loss of guessing.")
    cols = st.columns(3)
    lr = ui.widget("lr", cols[0])
    steps = ui.widget("train_steps", cols[1])
    layers = ui.widget("train_layers", cols[2])
    key = ("training-runs", lr, steps, layers)
    runs = CACHE.peek(key)
    if runs is None:
        st.info("These runs have not been trained on this server yet (about 30 s for all three with the defaults "
                "on a quiet 2-core CPU). "
                "Once trained, everyone who opens this page sees them at once.")
        if st.button("Train the three models", icon=":material/model_training:", type="primary"):
            bar = st.progress(0.0, text="Training…")
            # Warm-up over at most half the run, so short runs still reach the peak learning rate. One session trains;
            # another that presses the button meanwhile waits for the same runs.
            CACHE.get(key, lambda: stability.compare_runs(
                lr=lr, steps=steps, num_layers=layers, warmup_steps=min(100, steps // 2),
                progress=lambda f: bar.progress(min(f, 1.0), text=f"Training… {f:.0%}")))
            st.rerun()  # draw the page again from the cached runs: no "not trained yet" notice, no Train button
    if runs is not None:
        first = next(iter(runs.values()))
        st.plotly_chart(training_curves({name: r.losses for name, r in runs.items()}, first.chance_loss,
                                        presentation=fr.present),
                        config=export.png_config(f"stability_training_lr{lr:g}_{steps}-steps_{layers}-layers"))
        st.dataframe(pd.DataFrame([{"run": name, "final loss": round(r.final_loss, 3), "accuracy": f"{r.accuracy:.0%}",
                                    "learned": "yes" if r.learned else "no", "seconds": round(r.seconds, 1)}
                                   for name, r in runs.items()]), hide_index=True, width="stretch")
        trained_attention(fr, runs)


def trained_attention(fr: ui.Frame, runs: dict[str, stability.TrainResult]) -> None:
    """One head of a trained model, opening on the run and head that reverse the sequence best."""
    st.subheader("Attention of a trained model")
    ui.caption("To reverse the sequence, position i must read position 15 − i: after training, some heads of the "
               "first layers attend along the anti-diagonal, where the random-init maps were flat. The view opens on "
               "the head that does it most.")
    c = st.columns(3)
    if ui.state.get("run") not in runs:  # open on a run that learned (the failed one shows no anti-diagonal)
        ui.state.put("run", max(runs, key=lambda n: (runs[n].learned, runs[n].accuracy)))
    name = ui.widget("run", c[0], options=list(runs))
    trained = stability.trained_trace(runs[name])
    best = stability.reversal_heads(runs[name]).iloc[0]
    layer = c[1].slider("Layer of the trained model", 0, trained.num_layers - 1, int(best["layer"]), key=f"tl_{name}")
    head = c[2].selectbox("Head of the trained model", range(trained.num_heads), index=int(best["head"]),
                          key=f"th_{name}")
    if not runs[name].learned:
        st.info(f"The run “{name}” did not learn the task (final loss {runs[name].final_loss:.2f}), so expect no "
                "anti-diagonal here.")
    st.plotly_chart(attention.attention_heatmap(trained, layer, head, presentation=fr.present),
                    config=export.png_config(export.export_name(trained, "trained-attention", f"L{layer}", f"H{head}",
                                                                model=export.safe_filename(name))))


def page() -> None:
    """Both parts; they need no trace, so the page draws even with an empty sentence box."""
    fr = ui.frame()
    gradients(fr)
    training(fr)


pages.show(page)
