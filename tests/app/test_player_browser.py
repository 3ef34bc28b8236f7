"""The lesson player in Chromium (issue 21): every built-in slide played with its main figure drawn; a clicker's keys
in presentation mode, the URL following and a reload resuming; typing never changing slides; your own lesson built
from three pages, reordered, downloaded and opened again through the file opener, identical; its link in a fresh
browser; and the hostile lesson files and links through the page.

One server and one Chromium for the module; each test has new tabs (fresh sessions). Helpers that drive
the app as a person does are in tests/app/walk.py.
"""

from __future__ import annotations

import re
import urllib.parse

import pytest
from playwright.sync_api import expect

from tests.app.hostile_lessons import FILES, LINKS, LITERAL_NOTES, packed
from tests.app.test_browser import MARKUP_JS
from tests.app.walk import LOAD_S, STEP_S, Tab, describe, eventually_consistent
from ui import lessons, player
from ui.lessons.format import MAX_BYTES, quoted

pytestmark = pytest.mark.browser
BUILTINS = lessons.builtin_names()
PROJECTOR = {"width": 1280, "height": 720}
# The page's figures are drawn: every plotly chart has its SVG, every diagram its SVG, the head view (a component
# whose root counts its drawings) has drawn once; and there is at least one. The lesson's own components (the keys,
# the file opener) draw nothing and do not count.
DRAWN_JS = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  if (!main || !document.querySelector('[data-testid="stApp"][data-test-script-state="notRunning"]')) return false;
  const plots = [...main.querySelectorAll('[data-testid="stPlotlyChart"]')];
  const graphs = [...main.querySelectorAll('[data-testid="stGraphVizChart"]')];
  const views = [...main.querySelectorAll('[data-testid="stBidiComponentIsolated"]')]
    .map(c => c.shadowRoot && c.shadowRoot.querySelector('.ee[data-draws]')).filter(Boolean);
  return plots.every(c => c.querySelector('svg.main-svg')) && graphs.every(g => g.querySelector('svg g.node'))
    && views.every(v => +v.dataset.draws >= 1) && plots.length + graphs.length + views.length > 0;
}"""
ALERTS_JS = """() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stAlert"]')]
  .map(e => e.innerText.trim())"""
# Markup the app writes itself on these pages (its headings and bold labels); anything else made from Markdown or
# HTML would have come from a lesson's text.
OWN_MARKUP = re.compile(r"^(A:|H1:Encoder Explorer|H3:(Keep and share|Open a lesson)|STRONG:(Question|Answer|Link to "
                        r"this lesson|\d+ / \d+))$")  # A: a heading's own (empty) anchor


def user_markup(tab: Tab, titles: tuple[str, ...] = ()) -> list[str]:
    """Elements made of markup on the page that the app did not write (a slide's title is its own h1)."""
    found = tab.page.evaluate(MARKUP_JS, '[data-testid="stMain"]')
    made = [e for e in found["created"] if not OWN_MARKUP.match(e) and e not in {f"H1:{t}" for t in titles}]
    return made + ["a javascript: link"] * found["jsLinks"] + [f"a dialog: {d}" for d in tab.dialogs]


# ---------------------------------------------------------------------------------------------------- helpers
def at_slide(tab: Tab) -> int:
    return int(urllib.parse.parse_qs(urllib.parse.urlsplit(tab.page.url).query).get("slide", ["0"])[0])


def slide_title(tab: Tab) -> str:
    return tab.page.locator(".st-key-lesson-title h1").inner_text().strip()


def assert_slide(tab: Tab, made: lessons.Lesson, number: int, since: int) -> None:
    """Slide `number` is on screen: the URL says so and is its page with its settings, the title is its title, the
    main figure is drawn, and nothing broke."""
    s = made.slides[number - 1]
    where = f"slide {number} ({s.title!r}) of {made.title!r}"
    assert at_slide(tab) == number, f"{where}: the URL says slide {at_slide(tab)}\n{describe(tab)}"
    try:
        tab.page.wait_for_function(DRAWN_JS, timeout=LOAD_S * 1000, polling=200)
    except Exception as err:
        raise AssertionError(f"{where}: the main figure was not drawn\n{describe(tab)}") from err
    assert tab.path() == lessons.page_of(s).url, f"{where}: on {tab.path()}"
    assert player.view_of(tab.url_values()) == player.view_of(player.slide_values(s)), where
    assert slide_title(tab) == lessons.display_text(s.title), where
    problems = eventually_consistent(tab, since)
    assert not problems, f"{where}\n" + "\n".join(problems) + f"\n{describe(tab)}"
    assert not tab.page.get_by_role("button", name="Back to the slide").count(), where
    assert not [a for a in tab.page.evaluate(ALERTS_JS) if "problem" in a], where
    # The key component has mounted (its module loads after the page's first run) and knows the slide.
    expect(tab.page.locator(".lk")).to_have_attribute("data-slide", str(number), timeout=LOAD_S * 1000)


def slide_list(tab: Tab) -> list[str]:
    """The Lessons page's slide list as it reads: "1. Title · Page" (an expander's summary, without its icon)."""
    found = [t.strip().split("\n")[-1] for t in tab.page.locator('[data-testid="stMain"] summary').all_inner_texts()]
    return [t for t in found if re.match(r"^\d+\. ", t)]


def play(tab: Tab, name: str) -> lessons.Lesson:
    """Open the Lessons page on a lesson and press Play."""
    tab.goto("/lessons", {"lesson": name})
    # A server's first request runs the page alone and then through the frame (ui/pages.py): wait for the page.
    expect(tab.page.get_by_role("button", name="Play", exact=True)).to_be_enabled(timeout=LOAD_S * 1000)
    tab.press_button("Play")
    return lessons.open_lesson(name)[0]


# ------------------------------------------------------------------------------------------------ playing
def test_a_built_in_lesson_plays_to_its_end_with_the_next_button(tabs):
    """Every slide of the first built-in lesson, by the Next button. Every built-in lesson's slides (page, settings,
    title, figure) are played with the keyboard in tests/app/test_projector.py."""
    tab = tabs(PROJECTOR)
    since = len(tab.log.lines)
    made = play(tab, BUILTINS[0])
    assert tab.url_values()["present"] is True
    for number in range(1, len(made.slides) + 1):
        if number > 1:
            tab.press_button("Next")
        assert_slide(tab, made, number, since)
    assert tab.page.get_by_role("button", name="Next").is_disabled()


def test_a_clickers_keys_move_the_lesson_the_url_follows_and_a_reload_resumes(tabs):
    tab = tabs(PROJECTOR)
    since = len(tab.log.lines)
    made = play(tab, "encoder-layer")
    assert_slide(tab, made, 1, since)
    keys = tab.page.locator(".lk")  # the component's root, in its shadow root
    expect(keys).to_have_attribute("data-listening", "page")
    for key, number in (("ArrowRight", 2), ("PageDown", 3), ("ArrowLeft", 2), ("PageUp", 1), (" ", 2), (" ", 3)):
        tab.key(key)
        assert_slide(tab, made, number, since)
    link = tab.page.url
    tab.reload()
    assert tab.page.url == link
    assert_slide(tab, made, 3, since)
    # Two clicks in quick succession (the second while the app switches pages for the first) count twice.
    tab.settle(lambda: (tab.page.keyboard.press("PageDown"), tab.page.wait_for_timeout(60),
                        tab.page.keyboard.press("PageDown")))
    tab.page.wait_for_function("() => /[?&]slide=5(&|$)/.test(location.search)", timeout=LOAD_S * 1000)
    tab.settle()
    assert_slide(tab, made, 5, since)
    tab.key("PageUp")
    tab.key("PageUp")
    assert_slide(tab, made, 3, since)
    for _ in range(len(made.slides)):  # past the end: the last slide stays
        tab.key("PageDown")
    assert_slide(tab, made, len(made.slides), since)
    link = tab.page.url
    fresh = tabs(PROJECTOR)  # the same link in another browser: the same slide
    fresh.goto(urllib.parse.urlsplit(link).path, dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(link).query)))
    assert_slide(fresh, made, len(made.slides), since)


def test_typing_in_the_sentence_box_or_moving_a_slider_does_not_change_slides(tabs):
    tab = tabs(PROJECTOR)
    since = len(tab.log.lines)
    made = play(tab, "encoder-layer")
    tab.key("ArrowRight")
    assert_slide(tab, made, 2, since)  # the one-head attention map, layer 3 head 1
    popover = tab.page.locator('[data-testid="stPopover"] button').first
    popover.click()
    box = tab.page.get_by_label("Sentence")
    box.click()
    box.press("Control+a")
    box.type("It was tired → so it slept ")  # the typed arrow and spaces stay in the box
    for key in ("ArrowRight", "ArrowLeft", "PageDown", "PageUp", " ", "ArrowRight"):
        box.press(key)
    tab.settle(lambda: box.press("Control+Enter"))
    typed = tab.url_values()["text"]  # Page Up took the caret to the start, where Space typed a space
    assert at_slide(tab) == 2 and typed == " It was tired → so it slept ", tab.page.url
    tab.page.keyboard.press("Escape")
    assert tab.page.get_by_role("button", name="Back to the slide").count() == 1
    tab.settle(lambda: tab.page.get_by_role("button", name="Back to the slide").click())
    assert_slide(tab, made, 2, since)
    tab.page.locator(".st-key-lesson-title h1").click()  # focus back on the page, as a lecturer's click does
    tab.key("ArrowRight")
    tab.key("ArrowRight")
    assert_slide(tab, made, 4, since)  # Activations, with its Layer slider (the map's layers are buttons)
    thumb = tab.page.locator('.st-key-w-layer input[type="range"]')
    thumb.focus()
    layer = tab.url_values()["layer"]
    tab.settle(lambda: thumb.press("ArrowRight"))  # the Layer slider takes the arrow, not the lesson
    assert at_slide(tab) == 4 and tab.url_values()["layer"] == layer + 1
    # Only the layer moved: the sentence typed on slide 2 (still in the closed popover's box in the browser) did not
    # come back with this run.
    now, own = player.view_of(tab.url_values()), player.view_of(player.slide_values(made.slides[3]))
    assert {k for k in now.keys() | own.keys() if now.get(k) != own.get(k)} == {"layer"}, now
    # The slider reruns only its fragment, yet the bar follows at once: off the slide, then on it again.
    back = tab.page.get_by_role("button", name="Back to the slide")
    expect(back).to_have_count(1, timeout=STEP_S * 1000)  # the page's run follows the fragment's
    tab.settle(lambda: thumb.press("ArrowLeft"))
    assert tab.url_values()["layer"] == layer
    expect(back).to_have_count(0, timeout=STEP_S * 1000)
    tab.settle(lambda: thumb.press("ArrowRight"))
    tab.settle(lambda: back.click())
    assert_slide(tab, made, 4, since)
    tab.page.locator(".st-key-lesson-title h1").click()
    tab.key("ArrowRight")
    assert_slide(tab, made, 5, since)


def test_leaving_the_lesson_keeps_the_view(tabs):
    tab = tabs(PROJECTOR)
    since = len(tab.log.lines)
    made = play(tab, "pre-ln-post-ln")
    tab.key("PageDown")
    assert_slide(tab, made, 2, since)
    view = player.view_of(tab.url_values())
    tab.press_button("Leave lesson")
    values = tab.url_values()
    assert values["slide"] == 0 and values["present"] is False and player.view_of(values) == view
    assert tab.path() == lessons.page_of(made.slides[1]).url and tab.page.locator("h1").first.inner_text() == (
        "Encoder Explorer")
    assert not eventually_consistent(tab, since)
    tab.key("ArrowRight")  # no lesson: the keys are nobody's
    assert tab.url_values() == values


# --------------------------------------------------------------------------------------------- your own lesson
def test_your_lesson_from_three_pages_reordered_downloaded_opened_identical_and_its_link(tabs, tmp_path):
    tab = tabs()
    since = len(tab.log.lines)
    tab.goto("/", {"layer": "2", "head": "5"})
    assert tab.add_view("Head 5 attends <b>here</b>", "Layer 2, head 5") == 1
    tab.nav("Data flow")
    tab.click_toggle("w-overlay")
    assert tab.add_view() == 2
    tab.nav("Inside a head")
    assert tab.add_view(LITERAL_NOTES[3]) == 3
    tab.open_sidebar()
    tab.settle(lambda: tab.page.get_by_role("button", name="Your lesson: 3 slides").click())
    assert tab.path() == "/lessons" and tab.url_values()["lesson"] == player.MINE
    main = tab.page.locator('[data-testid="stMain"]')

    def slide_button(n: int, label: str) -> None:
        box = main.locator("details").filter(has=tab.page.locator("summary", has_text=re.compile(rf"(^|\D){n}\. ")))
        if box.get_attribute("open") is None:
            box.locator("summary").click()
        tab.settle(lambda: box.get_by_role("button", name=label, exact=True).click())

    slide_button(1, "Move down")
    slide_button(3, "Move up")
    listed = slide_list(tab)
    assert [t.split(" · ")[0] for t in listed] == ["1. Data flow", "2. Inside a head", "3. Layer 2, head 5"]
    first = tab.download("Download the lesson file")
    made, notes = lessons.loads(first)
    assert notes == [] and [s.page for s in made.slides] == ["diagram", "inside-a-head", "heatmaps"]
    assert dict(made.slides[0].query) == {"layer": "2", "head": "5", "overlay": "false"}
    assert made.slides[1].points[0].text == LITERAL_NOTES[3].strip()
    assert made.slides[2].points[0].text == "Head 5 attends <b>here</b>"
    tab.press_button("Empty your lesson")
    path = tmp_path / "week-3.lesson.json"
    path.write_bytes(first)
    tab.settle(lambda: main.locator(".lf-input").set_input_files(str(path)))
    expect(main.get_by_text("it is your lesson now")).to_be_visible()
    again = tab.download("Download the lesson file")
    assert again == first and lessons.loads(again) == (made, [])
    link = main.locator(".cl-box").input_value()
    parts = urllib.parse.urlsplit(link)
    assert parts.path == "/lessons" and urllib.parse.parse_qs(parts.query) == {"lesson": [lessons.to_link(made)]}
    assert tab.copy_link() == "copied"  # the tab may write the clipboard: what it holds is the box's link
    assert not eventually_consistent(tab, since)
    fresh = tabs()
    fresh.page.goto(link)
    fresh.settle(timeout=LOAD_S)
    assert fresh.url_values()["lesson"] == lessons.to_link(made)
    assert slide_list(fresh) == listed
    fresh.press_button("Play")
    assert_slide(fresh, made, 1, since)


# ------------------------------------------------------------------------------------------------ bad input
def test_hostile_lesson_files_through_the_file_opener(tabs):
    """Every file of the corpus, picked in the browser: one sentence, or the lesson with its notes; never markup."""
    tab = tabs()
    since = len(tab.log.lines)
    tab.goto("/lessons")
    opener = tab.page.locator('[data-testid="stMain"] .lf-input')
    for name, content in FILES:
        try:
            made, _ = lessons.loads(content)
            said = f"Opened “{quoted(made.title, 60, quote=False)}”"
        except ValueError as err:
            made, said = None, str(err)
        if len(content) > MAX_BYTES:  # never read: the browser names it and says its size
            said = f"has {len(content):,} bytes, more than the 200 kB a lesson file may have"
        picked = {"name": f"{name}.json", "mimeType": "application/json", "buffer": content}
        tab.settle(lambda picked=picked: opener.set_input_files(picked))
        alerts = tab.page.evaluate(ALERTS_JS)
        assert any(said in a for a in alerts), f"{name}: {said!r} not in {alerts}\n{describe(tab)}"
        problems = eventually_consistent(tab, since)
        assert not problems, f"{name}\n" + "\n".join(problems)
        assert user_markup(tab) == [], name


def test_hostile_lesson_links_in_the_url_and_literal_notes_in_the_player(tabs):
    tab = tabs(PROJECTOR)
    since = len(tab.log.lines)
    for name, link in LINKS:
        tab.goto("/lessons", {"lesson": link} if link else None)
        opened = player.open_ref(link)
        alerts = tab.page.evaluate(ALERTS_JS)
        if link and opened.lesson is None:
            assert any(opened.problem in a for a in alerts), f"{name}: {alerts}"
        problems = eventually_consistent(tab, since)
        assert not problems, f"{name}\n" + "\n".join(problems)
    notes = packed(dict(FILES)["literal_notes"])
    made = play(tab, notes)
    tab.press_button("Talking points · question")
    points = tab.page.locator('.st-key-lesson-points-box [data-testid="stText"]').all_inner_texts()
    assert points[:4] == [f"•  {lessons.display_text(n.strip())}" for n in LITERAL_NOTES[:4]]
    assert points[4] == lessons.display_text(LITERAL_NOTES[4])  # the question: a 10,000-character word, wrapped
    assert slide_title(tab) == lessons.display_text(LITERAL_NOTES[0])
    assert user_markup(tab, (lessons.display_text(LITERAL_NOTES[0]),)) == []
    tab.key("ArrowRight")
    assert at_slide(tab) == 2 and len(made.slides) == 2
