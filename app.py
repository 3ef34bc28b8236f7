"""Encoder Explorer: the frame. Settings store -> sidebar -> EncoderConfig -> cached model and trace -> the page."""

from __future__ import annotations

import datetime

import streamlit as st

import ui  # first of the app's own imports: it sets OpenMP's wait policy before torch is loaded
from encoder.tokenizer import INSTALL_HINT
from encoder.viz.text import printable
from ui import authoring, pages, player, settings, state
from ui.settings import CUSTOM, PRETRAINED

# The tab's title and icon, and the navigation over the pages of ui/pages.py. Each script is pages/<its URL path>.py:
# named so, a server's very first request, which Streamlit routes by file name before this line has run, finds its
# page; the script then reruns the request through this frame (ui/pages.py says why; tests/app/test_deep_links.py
# opens every page that way).
nav = pages.navigate()

# The store exists before any widget is drawn; the URL follows it from the first line of every run.
url_problems = state.init(ui.check_url_values)
player.follow(nav)  # a lesson's Next, Previous or key asked for another page: open it before anything is drawn
state.sync_url()
values = state.store()


@st.fragment(run_every=datetime.timedelta(minutes=30))
def rerun_after_reconnect() -> None:
    """Draws nothing. A page with a timed fragment makes the browser ask for a script run whenever its WebSocket
    reconnects: after a replica dies, the tab's new session on a survivor redraws this view from the URL at once,
    instead of showing the old page over a session that has not run yet (deploy/, tests/app/test_deploy.py).
    Called before anything is drawn: a fragment's call deep-copies the run's cursors and container stack, which cost
    ~4 % of a run's CPU when this stood at the end of the script."""


rerun_after_reconnect()


def use_preset(name: str) -> None:
    """A preset button: the custom model with the preset's settings, in one click."""
    for key, value in {"model": CUSTOM, **settings.PRESETS[name]}.items():
        state.put(key, value)


with st.sidebar:
    ui.widget("model", options=ui.model_choices(), format_func=ui.model_label, captions=ui.model_captions())
    ui.refused_checkpoints()  # the models folder's folders that cannot load, each with its reason
    if not ui.pretrained_available():
        st.info(f"The pretrained all-MiniLM-L6-v2 is not installed. To add it: `{INSTALL_HINT}`.")
    presets = st.container(horizontal=True, key="presets")
    for name, help_text in settings.PRESET_HELP.items():
        presets.button(name, on_click=use_preset, args=(name,), help=help_text, icon=":material/construction:")
    if values["model"] == CUSTOM:
        for key in settings.drawn_config_keys(values):  # a knob is drawn only where it applies (theta with rotary...)
            ui.widget(key)
    elif values["model"] == PRETRAINED:
        st.caption("6 layers × 12 heads, d_model 384, d_ff 1536, GELU, Post-LN, learned positions.")
    ui.widget("train")
    ui.widget("device", options=ui.available_devices())
    ui.widget("present")
    authoring.add_view(nav.url_path)  # "Add this view to a lesson", and the way to your lesson

# Presentation mode: the sidebar folds away (re-applied on every run, so switching the mode on folds it at once,
# unless the user has folded or unfolded it by hand: Streamlit then remembers their choice in the browser), every
# size grows by 15 % through the root font size (titles keep their hierarchy: Streamlit sizes text in rem) and the
# empty band above the title shrinks. Captions are left out by ui.caption(); notes that must stay use st.caption.
st.set_page_config(initial_sidebar_state="collapsed" if values["present"] else "auto")
if values["present"]:
    # Static CSS only; no user text goes into it. The frame is compact so each page's main figure fits the screen at
    # first load: the band under Streamlit's 60 px header, the title and the gaps between blocks shrink. Two charts
    # in a row go one under the other when each would get less than 380 px (the sidebar unfolded on a 1024 px
    # projector): their titles are broken into lines for that width (encoder/viz/style.py NARROW_TITLE_PX).
    st.html("<style>html {font-size: 18.4px;} [data-testid='stMainBlockContainer'] {padding-top: 76px; "
            "padding-bottom: 1rem;} [data-testid='stMainBlockContainer'] h1 {font-size: 2rem; padding: 0;} "
            "[data-testid='stMainBlockContainer'] [data-testid='stVerticalBlock'] {gap: 0.5rem;} "
            "[data-testid='stHorizontalBlock']:has(> [data-testid='stColumn'] [data-testid='stPlotlyChart']) "
            "{flex-wrap: wrap;} [data-testid='stColumn']:has([data-testid='stPlotlyChart']) "
            "{min-width: min(100%, 380px);}"
            + player.PRESENT_CSS + "</style>")

for problem in url_problems:
    st.warning(ui.literal(problem), icon=":material/link_off:")

lesson = player.playing()  # (the lesson, its slide) while one plays: the slide's title replaces the app's
if values["present"]:  # one row: the title, the sentence box folded into a popover, and a way out (no sidebar)
    row = st.container(horizontal=True, vertical_alignment="center")
    if lesson:
        player.title(row, *lesson)
    else:
        row.title("Encoder Explorer", width="content")
else:
    st.title("Encoder Explorer")


def use_example() -> None:
    choice = st.session_state.get("example")
    if choice:
        state.put("text", settings.EXAMPLES[choice])
    st.session_state["example"] = None


def sentence_label(text: str, words: int = 4) -> str:
    """The folded sentence box's label: the sentence's first words, as plain text (Markdown escaped)."""
    first = text.split()
    shown = printable(" ".join(first[:words]), 26) + (" …" if len(first) > words else "")
    return ui.literal(shown) if first else "Type a sentence"


# Presentation mode folds the sentence box and the examples into a popover labelled with the sentence's first words
# (the key keeps it open while its label follows the text); "Leave presentation" ends the row.
if values["present"]:
    text_at = examples_at = row.popover(sentence_label(values["text"]), icon=":material/edit_note:",
                                        width="content" if lesson else "stretch", key="sentence_box")
    if not lesson:  # a lesson has its own way out, "Leave lesson", in its bar
        row.button("Leave presentation", icon=":material/close_fullscreen:", on_click=state.put,
                   args=("present", False))
else:
    text_at, examples_at = st.columns([3, 1], vertical_alignment="bottom")
ui.widget("text", text_at, height=80)
examples_at.selectbox("Examples", list(settings.EXAMPLES), index=None, placeholder="Try an example…", key="example",
                      on_change=use_example)
if lesson:
    player.bar(*lesson, nav.url_path)
else:
    player.no_bar()


def show_frame() -> None:
    """Run the model for the settings (or find it cached) and say what the pages cannot show."""
    fr = ui.frame()  # a local: module globals outlive the run (callbacks keep them), and sessions hold no tensors
    if fr.trace is None and fr.problem:
        ui.show_problem(fr)
    if fr.trace is not None:
        if fr.trace.truncated:
            st.warning(f"The sentence is longer than the {fr.trace.max_tokens} tokens this app runs the model on; only "
                       f"the first {fr.trace.max_tokens} are shown.", icon=":material/content_cut:")
        if fr.trace.notice:
            st.info(fr.trace.notice)


show_frame()
ui.guard(lambda: pages.run(nav))
state.sync_url()
