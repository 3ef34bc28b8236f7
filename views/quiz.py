"""Quiz: eight questions on the encoder, each linked to the view that shows the answer on the live model."""

import streamlit as st

import ui
from ui import quiz

ui.frame()
VIEWS = {
    "attention": ("views/attention.py", "Attention"),
    "dataflow": ("views/dataflow.py", "Data flow"),
    "activations": ("views/activations.py", "Activations"),
    "compare": ("views/compare.py", "Compare"),
    "position": ("views/position.py", "Position"),
    "stability": ("views/stability.py", "Training stability"),
    "tokens": ("views/tokens.py", "Tokens & embeddings"),
}
ss = st.session_state
answers = {q.id: ss.get(f"quiz_{q.id}") for q in quiz.QUESTIONS}
answered = sum(a is not None for a in answers.values())
st.subheader(f"Score: {quiz.score(answers)} / {len(quiz.QUESTIONS)}" + (f" ({answered} answered)" if answered else ""))
for n, q in enumerate(quiz.QUESTIONS, start=1):
    with st.container(border=True):
        choice = st.radio(f"{n}. {q.prompt}", range(len(q.options)), format_func=lambda i, q=q: q.options[i],
                          index=None, key=f"quiz_{q.id}")
        if choice is not None:
            correct, feedback = quiz.check(q.id, choice)
            (st.success if correct else st.error)(feedback)
            path, title = VIEWS[q.page]
            st.page_link(path, label=f"See it on {title}: {q.demo}", icon=":material/visibility:")


def reset() -> None:
    for q in quiz.QUESTIONS:
        ss[f"quiz_{q.id}"] = None


if answered:
    st.button("Start again", icon=":material/restart_alt:", on_click=reset)
