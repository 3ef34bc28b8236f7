"""Encoder Explorer: the frame. Sidebar -> EncoderConfig -> cached model and trace -> st.navigation(pages)."""

from __future__ import annotations

import os

# Before torch is imported: idle OpenMP threads sleep instead of spinning, so sessions sharing 2 cores don't stall
# each other (benchmarks/RESULTS-app.md: a 128-token forward on busy cores went from 1457 ms to 87 ms).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import streamlit as st  # noqa: E402

import ui
from encoder.tokenizer import INSTALL_HINT  # noqa: E402
from ui import settings
from ui.settings import CUSTOM, PRETRAINED  # noqa: E402

st.set_page_config(page_title="Encoder Explorer", page_icon=":material/hub:", layout="wide")

# The page files live in views/, not pages/: a folder named pages/ next to app.py makes Streamlit treat the first
# run after a server start as a legacy multipage app, so the first deep link (e.g. /diagram) showed "Page not
# found" and a link named after a file ran that page without this frame. Checked in tests/test_browser.py.
PAGES = {
    "Explore": [
        st.Page("views/attention.py", title="Attention", icon=":material/grid_on:", url_path="heatmaps", default=True),
        st.Page("views/activations.py", title="Activations", icon=":material/monitoring:", url_path="statistics"),
        st.Page("views/dataflow.py", title="Data flow", icon=":material/account_tree:", url_path="diagram"),
        st.Page("views/tokens.py", title="Tokens & embeddings", icon=":material/token:", url_path="wordpieces"),
    ],
    "Teach": [
        st.Page("views/compare.py", title="Compare", icon=":material/compare:", url_path="side-by-side"),
        st.Page("views/step.py", title="Step through a layer", icon=":material/footprint:", url_path="walkthrough"),
        st.Page("views/stability.py", title="Training stability", icon=":material/show_chart:", url_path="warmup"),
        st.Page("views/position.py", title="Position", icon=":material/shuffle:", url_path="word-order"),
        st.Page("views/quiz.py", title="Quiz", icon=":material/quiz:", url_path="check"),
    ],
}
nav = st.navigation(PAGES)
ss = st.session_state

# Settings: seeded once per session from the URL, then owned by the widgets.
if "_init" not in ss:
    params = {k: st.query_params.get_all(k) for k in st.query_params}
    values, problems = settings.from_query(params)
    if values.get("device", "auto") not in ui.available_devices():
        problems.append(f"The device {values['device']!r} is not available here; using auto.")
        values["device"] = "auto"
    choices = ui.model_choices()
    if values.get("model", settings.PRETRAINED) not in choices:
        if "model" in values:
            problems.append(f"The model {values['model']!r} is not available here; using {ui.model_label(choices[0])}.")
        values["model"] = choices[0]
    for key, value in (settings.defaults() | values).items():
        ss[key] = value
    ss["_url_problems"] = problems
    ss["_init"] = True
for key in [*settings.SETTINGS, *(k for k in ss if str(k).startswith("quiz_"))]:
    ss[key] = ss[key]  # keeps the values of widgets this run does not draw (custom knobs while pretrained, quiz answers)
if ss["model"] not in ui.model_choices():  # e.g. a checkpoint folder removed while the session was open
    ss["model"] = ui.model_choices()[0]

NORM_LABELS = {"post": "Post-LN (original paper)", "pre": "Pre-LN"}

with st.sidebar:
    st.radio("Model", ui.model_choices(), format_func=ui.model_label, key="model")
    if not ui.pretrained_available():
        st.info(f"The pretrained all-MiniLM-L6-v2 is not installed. To add it: `{INSTALL_HINT}`.")
    if ss["model"] == CUSTOM:
        st.select_slider("d_model (width)", settings.D_MODEL_OPTIONS, key="d_model")
        st.select_slider("Heads (num_heads)", settings.HEAD_OPTIONS, key="num_heads")
        st.select_slider("d_ff (FFN width, usually 4 × d_model)", settings.D_FF_OPTIONS, key="d_ff")
        st.slider("Layers (num_layers)", 1, settings.MAX_LAYERS, key="num_layers")
        st.slider("Dropout", 0.0, 0.5, step=0.05, key="dropout")
        st.radio("Activation", ["relu", "gelu"], format_func=str.upper, key="activation", horizontal=True)
        st.radio(
            "Norm placement",
            ["post", "pre"],
            format_func=NORM_LABELS.get,
            captions=[
                "LayerNorm after each residual add; needs learning-rate warm-up to train.",
                "LayerNorm inside each residual branch; trains stably without warm-up.",
            ],
            key="norm",
        )
        st.selectbox("Positional encoding", ["sinusoidal", "learned", "none"], key="positional")
        st.checkbox("Final LayerNorm after the stack", key="final_norm", help="Pre-LN stacks usually end with one.")
        st.number_input("Seed", 0, settings.MAX_SEED, step=1, key="seed")
    elif ss["model"] == PRETRAINED:
        st.caption("6 layers × 12 heads, d_model 384, d_ff 1536, GELU, Post-LN, learned positions.")
    st.toggle("Training mode (dropout on)", key="train", help="Eval mode is the default: dropout is the identity.")
    st.selectbox("Device", ui.available_devices(), key="device")
    st.toggle("Presentation mode", key="present", help="Bigger fonts, no explanatory captions: for projecting.")

if ss["present"]:
    # Static CSS only; no user text goes into it.
    st.html("<style>html, body, [class*='st-'] {font-size: 1.15rem;} .stCaption {display: none;}</style>")

for problem in ss.pop("_url_problems", []):
    st.warning(ui.literal(problem), icon=":material/link_off:")

st.title("Encoder Explorer")


def use_example() -> None:
    if ss.get("example"):
        ss["text"] = settings.EXAMPLES[ss["example"]]
    ss["example"] = None


left, right = st.columns([3, 1], vertical_alignment="bottom")
left.text_area("Sentence", key="text", max_chars=settings.MAX_TEXT_CHARS, height=80)
right.selectbox("Examples", list(settings.EXAMPLES), index=None, placeholder="Try an example…", key="example",
                on_change=use_example)

device = ui.resolve_device(ss["device"])
model_key, model, trace, problem = ss["model"], None, None, ""
try:
    if ss["model"] == CUSTOM:
        model_key = settings.config_from(ss).to_json()
    model = ui.get_model(model_key, device)
    if ss["text"].strip():
        trace = ui.get_trace(model_key, device, ss["text"], ss["train"])
    else:
        problem = "Type a sentence above, or pick an example, to see the encoder at work."
        st.info(problem, icon=":material/edit:")
except ValueError as err:
    problem = str(err)
    st.error(ui.literal(problem), icon=":material/error:")
except (RuntimeError, MemoryError) as err:
    problem = f"The encoder could not run this input ({type(err).__name__}). Try a shorter sentence or a smaller model."
    st.error(problem, icon=":material/error:")

if trace is not None:
    if trace.truncated:
        st.warning(f"The sentence is longer than the model's {model.cfg.max_len} tokens; only the first "
                   f"{model.cfg.max_len} are shown.", icon=":material/content_cut:")
    if trace.notice:
        st.info(trace.notice)

ss[ui.PAGE_KEY] = ui.Frame(
    values={k: ss[k] for k in settings.SETTINGS},
    config=model.cfg if model is not None else None,
    model_key=model_key,
    device=device,
    model=model,
    trace=trace,
    problem=problem,
)
ui.sync_url()
nav.run()
