"""Quiz: nine questions on the encoder, each linked to the view that shows the answer on the live model."""

import streamlit as st

import ui
from ui import pages, quiz, state


def answers() -> dict[str, int | None]:
    """The store's answers: one character per question, its chosen option or '-'."""
    raw = state.get("quiz").ljust(len(quiz.QUESTIONS), "-")[: len(quiz.QUESTIONS)]
    return {q.id: int(c) if c.isdigit() and int(c) < len(q.options) else None for q, c in zip(quiz.QUESTIONS, raw, strict=True)}


def save(given: dict[str, int | None]) -> None:
    text = "".join("-" if given[q.id] is None else str(given[q.id]) for q in quiz.QUESTIONS)
    state.put("quiz", text.rstrip("-"))


def answer(qid: str) -> None:
    save(answers() | {qid: st.session_state.get(f"w:quiz_{qid}")})


def apply(qid: str) -> None:
    """A link's settings into the store (a button's callback), so the page it opens shows the answer."""
    for key, value in quiz.question(qid).settings:
        state.put(key, value)


def page() -> None:
    """The score, every question with its feedback once answered, and a link to the page that shows the answer."""
    given = answers()
    answered = sum(a is not None for a in given.values())
    st.subheader(f"Score: {quiz.score(given)} / {len(quiz.QUESTIONS)}" + (f" ({answered} answered)" if answered else ""))
    for n, q in enumerate(quiz.QUESTIONS, start=1):
        with st.container(border=True):
            st.session_state[f"w:quiz_{q.id}"] = given[q.id]  # re-created from the store, like every other widget
            choice = st.radio(f"{n}. {q.prompt}", range(len(q.options)), format_func=lambda i, q=q: q.options[i],
                              key=f"w:quiz_{q.id}", on_change=answer, args=(q.id,))
            if choice is not None:
                correct, feedback = quiz.check(q.id, choice)
                (st.success if correct else st.error)(ui.literal(feedback))  # "<s> … </s>" as text
                shows = pages.page(q.page)
                label = ui.literal(f"See it on {shows.title}: {q.demo}")  # as text, never Markdown
                if not q.settings:
                    st.page_link(shows.file, label=label, icon=":material/visibility:")
                elif st.button(label, key=f"see_{q.id}", icon=":material/visibility:", on_click=apply, args=(q.id,)):
                    st.switch_page(shows.file)  # the settings are in the store: the page opens on them
    if answered:
        st.button("Start again", icon=":material/restart_alt:", on_click=state.put, args=("quiz", ""))


pages.show(page)
