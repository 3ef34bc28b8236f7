"""Lessons: pick a lesson (built in, the operator's folder, a shared link, or your own), see its slides, and play it."""

import streamlit as st

import ui
from ui import authoring, lessons, pages, player
from ui.lessons.pages import PLAYER

KEYS_HELP = ("Play opens presentation mode at the first slide. A clicker's keys move through it: →, Page Down or Space "
             "for the next slide, ← or Page Up for the previous one. Leave lesson keeps the view on screen.")


def page() -> None:
    """The Lesson box and Play; the slides (your own lesson's editable); its file, link and handout; open one."""
    shelf = lessons.shelf()  # the operator's folder listed and read once for this run
    offered, asked = player.on_offer(shelf), ui.state.get("lesson")
    if asked and asked not in offered:  # a link named a lesson this server does not offer: say so, show the first
        st.warning(ui.literal(f"The lesson this link names cannot be opened: {player.open_ref(asked).problem}"),
                   icon=":material/link_off:")
    row = st.container(horizontal=True, vertical_alignment="bottom")
    ref = ui.widget("lesson", row, options=offered, format_func=player.ref_label, width=520)
    opened = player.open_ref(ref)
    lesson = opened.lesson
    row.button("Play", icon=":material/play_arrow:", type="primary", key="play-lesson", on_click=player.play,
               args=(ref,), disabled=lesson is None or not lesson.slides)
    player.left_out_warning(shelf)
    authoring.messages("page")
    if lesson is None:
        st.error(ui.literal(opened.problem), icon=":material/error:")
    else:
        count = len(lesson.slides)
        st.caption(f"{player.SOURCES[opened.source]} · {count} slide{'s' if count != 1 else ''}. {KEYS_HELP}")
        if opened.notes:
            authoring.read_notes(opened.notes)
        authoring.heading(opened)
        if not lesson.slides:
            st.info("Your lesson has no slides yet. Open any page, set up the view you want, and use “Add this view "
                    "to a lesson” in the sidebar; or open a lesson file below.", icon=":material/playlist_add:")
        authoring.slides(opened)
        st.subheader("Keep and share")
        authoring.keep(opened, PLAYER)
    st.subheader("Open a lesson")
    authoring.importer()


pages.show(page)
