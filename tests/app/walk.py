"""Drive the app the way a person does, for tests/app/test_walk.py.

Read what every widget shows, use one control, wait until the app has settled, and compare the screen with the
URL: every widget drawn from ui.settings.SETTINGS has the Streamlit key "w:<setting>", which Streamlit 1.67 puts
on its container as the class `st-key-w-<setting>` (a text box sits in a container of that key, its own key carrying
its generation); the value it shows must be `Setting.show` of the value the URL holds (or of the default when the URL
leaves it out).
"""

from __future__ import annotations

import functools
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from devkit.server import READY, ServerLog, close_tab, new_tab
from encoder.tokenizer import bundled_model_dir, special_tokens, tokenizer
from encoder.viz.text import printable
from ui import captions, checkpoints, lessons, pages, player, quiz, settings
from ui.purpose import ablate_label
from ui.resources import APP_MAX_TOKENS
from ui.settings import SETTINGS

# Plain-text tracebacks in the server log, and no hot reload while other people save files.
SERVER_ENV = {"STREAMLIT_LOGGER_ENABLE_RICH": "false", "STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none"}
VIEWPORT = {"width": 1440, "height": 1300}
LOAD_S = 120  # a page that builds a model or computes on open, on 2 busy cores
STEP_S = 60  # one interaction
QUIET_S = 0.3  # the app counts as settled after this long with no script run and no websocket traffic
NO_RUN_S = 1.0  # an action that starts no script run within this long started none
# Buttons whose run computes for a while (Why are these similar?: the deletion test, over the sentence or over the
# built-in ones).
SLOW_BUTTONS = ("Rank the measures", "Compute the deletion")



PAGES = {entry.url: entry.title for entry in pages.PAGES}  # URL path -> the sidebar's title, from the registry
PATH_ALIASES = {f"/{entry.path}": entry.url for entry in pages.PAGES if entry.default}  # "/" answers here too
SMALL = {"model": "custom", "d_model": "64", "num_heads": "4", "d_ff": "128", "num_layers": "2"}
BROKEN = ("This view ran into a problem", "This app has encountered an error")
MODEL_NAMES = {settings.PRETRAINED: settings.PRETRAINED_LABEL, settings.CUSTOM: settings.CUSTOM_LABEL}
SHORT_NAMES = {settings.PRETRAINED: settings.PRETRAINED_SHORT, settings.CUSTOM: settings.CUSTOM_SHORT}
QUIZ = {q.id: q for q in quiz.QUESTIONS}

# Counts the script runs the page has seen (data-test-script-state turning "running") and when the state last moved.
OBSERVER_JS = """(() => {
  window.__walk = {runs: 0, changed: performance.now()};
  new MutationObserver(records => {
    for (const r of records) {
      window.__walk.changed = performance.now();
      if (r.target.getAttribute('data-test-script-state') === 'running') window.__walk.runs += 1;
    }
  }).observe(document, {subtree: true, attributes: true, attributeFilter: ['data-test-script-state']});
})();"""

STATUS_JS = f"""() => ({{
  ready: !!document.querySelector('{READY}') && !!document.querySelector('[data-testid="stMain"] h1'),
  runs: window.__walk ? window.__walk.runs : 0,
  quietMs: window.__walk ? performance.now() - window.__walk.changed : 0,
}})"""

# Every keyed widget that is drawn (not necessarily on screen: a folded sidebar still holds its widgets), and what
# it shows: the selected option's text, the thumb's text, the box's value, "True"/"False" for a checkbox or toggle.
WIDGETS_JS = """() => {
  const text = e => (e ? e.innerText : '').trim();
  const out = [];
  for (const box of document.querySelectorAll('[data-testid="stElementContainer"][class*="st-key-"]')) {
    let key = [...box.classList].find(c => c.startsWith('st-key-')).slice('st-key-'.length);
    const w = box.querySelector('[data-testid]');
    const r = box.getBoundingClientRect();
    if (!w || r.width === 0 || r.height === 0 || !box.checkVisibility()) continue;
    const kind = w.getAttribute('data-testid');
    // A text box's own key carries its generation (ui/state.py _box_key): the setting's key is on the container
    // around it, which the helpers below find it by.
    const around = box.parentElement && box.parentElement.closest('[data-testid="stVerticalBlock"][class*="st-key-w-"]');
    if (around && (kind === 'stTextArea' || kind === 'stTextInput')) {
      key = [...around.classList].find(c => c.startsWith('st-key-')).slice('st-key-'.length);
    }
    let value = null, options = [], disabled = false;
    if (kind === 'stRadio') {
      const opts = [...w.querySelectorAll('[data-testid="stRadioOption"]')];
      options = opts.map(o => text(o.querySelector('[data-testid="stMarkdownContainer"]')));
      const on = opts.find(o => o.querySelector('input').checked);
      value = on ? text(on.querySelector('[data-testid="stMarkdownContainer"]')) : null;
      disabled = opts.every(o => o.querySelector('input').disabled);
    } else if (kind === 'stCheckbox') {
      const input = w.querySelector('input');
      value = input.checked ? 'True' : 'False';
      disabled = input.disabled;
    } else if (kind === 'stSelectbox') {
      const input = w.querySelector('input');
      value = input.value;
      disabled = input.disabled;
    } else if (kind === 'stSlider') {
      value = text(w.querySelector('[data-testid="stSliderThumbValue"]'));
      const input = w.querySelector('input[type="range"]');
      options = [input.min, input.max, input.value];
      disabled = input.disabled;
    } else if (kind === 'stButtonGroup') {
      const buttons = [...w.querySelectorAll('button[role="radio"]')];  // not the help button
      options = buttons.map(b => text(b));
      value = text(buttons.find(b => b.getAttribute('aria-checked') === 'true')) || null;
      disabled = buttons.every(b => b.disabled);
    } else if (kind === 'stNumberInput' || kind === 'stTextInput') {
      const input = w.querySelector('input');
      value = input.value;
      disabled = input.disabled;
    } else if (kind === 'stMultiSelect') {  // the chips of the live box (a <template> copy of them sits beside it)
      const combo = w.querySelector('.react-aria-ComboBox');
      value = [...combo.querySelectorAll('[data-tag] > span[title]')].map(e => e.innerText.trim()).join('\\n');
      const input = combo.querySelector('input');
      disabled = !input || input.disabled;
    } else if (kind === 'stTextArea') {
      const area = w.querySelector('textarea');
      value = area.value;
      disabled = area.disabled;
    } else continue;
    out.push({key, kind, value, options, disabled, label: text(box.querySelector('[data-testid="stWidgetLabel"]')),
              sidebar: !!box.closest('[data-testid="stSidebar"]')});
  }
  return out;
}"""

# The buttons of the main area (download buttons included), the open page, and any sign of a broken app.
PAGE_JS = """(broken) => {
  const main = document.querySelector('[data-testid="stMain"]');
  const sel = '[data-testid="stButton"] button, [data-testid="stDownloadButton"] button';
  const buttons = [...(main ? main.querySelectorAll(sel) : [])]
    .filter(b => b.checkVisibility()).map(b => ({label: b.innerText.trim().split('\\n').pop().trim(), disabled: b.disabled,
                                                download: !!b.closest('[data-testid="stDownloadButton"]')}));
  const bodyText = document.body.innerText;
  return {
    path: location.pathname, url: location.href, title: document.title,
    current: [...document.querySelectorAll('[data-testid="stSidebarNavLink"]')]
      .filter(a => a.getAttribute('aria-current') === 'page').map(a => a.innerText.trim().split('\\n').pop()),
    exceptions: [...document.querySelectorAll('[data-testid="stException"]')].map(e => e.innerText.slice(0, 400)),
    broken: broken.filter(b => bodyText.includes(b)),
    alerts: [...document.querySelectorAll('[data-testid="stAlert"]')].map(e => e.innerText.trim().slice(0, 300)),
    buttons,
  };
}"""


def component_js(cls: str, attrs: tuple[str, ...], extra: str) -> tuple[str, str]:
    """JS for one of the app's components by its root's class, found in any of the page's components (while a lesson
    plays, the clicker keys' comes first): its state once drawn (root's data-*, whether it waits for data, its
    toolbar's buttons by a selector that finds each again (a data-* of `attrs`, else the title), and `extra`
    properties), or null; and whether it has drawn or is not on the page (else its first payload is on its way)."""
    root = f"""[...document.querySelectorAll('[data-testid="stBidiComponentIsolated"]')]
  .map(e => e.shadowRoot?.querySelector('.{cls}')).find(Boolean)"""
    state = f"""() => {{
  const r = {root};
  if (!r || !r.dataset.draws) return null;
  const attrs = {list(attrs)!r};
  const selector = (b) => {{
    const a = attrs.find(k => b.dataset[k] !== undefined);
    return a ? `button[data-${{a}}="${{b.dataset[a]}}"]` : `button[title="${{b.title}}"]`;
  }};
  const buttons = [...r.querySelectorAll('.ee-bar button')].filter(b => b.checkVisibility())
    .map(b => ({{selector: selector(b), label: b.textContent, disabled: b.disabled}}));
  return {{state: {{...r.dataset}}, loading: r.classList.contains('loading'), buttons, {extra}}};
}}"""
    return state, f"() => {{ const r = {root}; return !r || !!r.dataset.draws; }}"


# The Attention page's map (ui/heatmap.js), and the measures it offers.
MAP_JS, MAP_DRAWN_OR_ABSENT_JS = component_js(
    "hm", ("layer", "head", "avg", "flag", "scale"),
    "measures: [...r.querySelector('select.hm-select').options].map(o => o.value)")
# The map's data-* name of each setting it draws, and how a value is written there.
MAP_SETTINGS = {"view": "view", "layer": "layer", "head": "head", "avg": "avg", "hide_special": "hide",
                "scale": "scale", "measure": "measure", "beside": "beside", "query": "query"}


@dataclass
class MapControl:
    """One control of the attention map: a button (by its selector) or the Measure choice (its options)."""

    kind: str  # "button" or "measure"
    selector: str = ""
    label: str = ""
    options: tuple[str, ...] = ()

    @property
    def download(self) -> bool:
        return self.label == "PNG"


# The head view on Inside a head (ui/headview.js): layer, head and mode buttons, the exports, and its tokens.
HV_JS, HV_DRAWN_OR_ABSENT_JS = component_js("hv", ("layer", "head", "mode"),
                                            "tokens: r.querySelectorAll('.hv-left .hv-tok').length")
HV_SETTINGS = ("layer", "head", "avg", "heads", "query")  # what the head view shows and picks


@dataclass
class HeadViewControl:
    """One control of the head view: a button (by its selector), or a token of a column ("left": a query, pinned by
    a click and sent to the app; "right": a key), which the walk chooses."""

    kind: str  # "button" or "token"
    selector: str = ""  # a button's; a token's column
    label: str = ""

    @property
    def download(self) -> bool:
        return self.label in ("PNG", "SVG")


# Inside a head's step charts (ui/panels.js): each one's name (its PNG's file name), once drawn.
PANELS_JS = """() => [...document.querySelectorAll('[data-testid="stBidiComponentIsolated"]')]
  .map(e => e.shadowRoot?.querySelector('.pn')).filter(r => r && r.dataset.draws).map(r => r.dataset.name)"""


@dataclass(frozen=True)
class ChartExport:
    """The PNG button of one of the page's panel charts, by the end of its file name ("scores", "values", ...)."""

    kind: str


@dataclass
class Widget:
    key: str  # the container's st-key-* suffix: "w-<setting>" for settings, "w-quiz_<id>" for quiz answers
    kind: str  # the Streamlit test id: stRadio, stCheckbox, stSelectbox, stSlider, stButtonGroup, ...
    value: str | None
    label: str
    options: list[str]
    disabled: bool
    sidebar: bool

    @property
    def setting(self) -> str | None:
        for prefix in ("w-", "ms-"):  # ms-: a multiselect its page binds to the store itself (Knock out, Trajectories)
            if self.key.startswith(prefix):
                return self.key.removeprefix(prefix)
        return None

    @property
    def chips(self) -> list[str]:
        """A multiselect's chosen options, as its chips show them."""
        return self.value.split("\n") if self.value else []


def kind(message, payload: bytes) -> str | None:
    """Which kind of Streamlit message (BackMsg or ForwardMsg) a websocket frame holds; None if it is none."""
    try:
        message.ParseFromString(payload)
    except Exception:  # noqa: BLE001 - not a message of that type
        return None
    return message.WhichOneof("type")


# --------------------------------------------------------------------------------------------------- the server
# ------------------------------------------------------------------------------------------------- the browser
class Tab:
    """One browser tab on the app: watches the script's runs and the websocket, reads and drives the widgets."""

    def __init__(self, page: Page, base: str, log: ServerLog) -> None:
        self.base, self.log = base, log
        page.add_init_script(OBSERVER_JS)
        self.page = page
        self.ws_last = time.monotonic()
        self.rerun_asked = False  # the page asked the server for a run, and no run has finished since
        self.page.on("websocket", self._watch)
        self.dialogs: list[str] = []
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))

    def _watch(self, ws) -> None:
        def sent(payload) -> None:
            self.ws_last = time.monotonic()
            if isinstance(payload, bytes) and kind(BackMsg(), payload) == "rerun_script":
                self.rerun_asked = True

        def received(payload) -> None:
            self.ws_last = time.monotonic()
            if isinstance(payload, bytes) and kind(ForwardMsg(), payload) == "script_finished":
                self.rerun_asked = False

        ws.on("framesent", sent)
        ws.on("framereceived", received)

    # ---- waiting
    def status(self) -> dict:
        return self.page.evaluate(STATUS_JS)

    def settle(self, act: Callable[[], Any] | None = None, timeout: float = STEP_S) -> None:
        """Do `act` (if given), then wait until the script run it started (if any) is over and the app is quiet.

        A run counts as started when the page's script state turned "running" after the action; an action that
        starts nothing within NO_RUN_S (a click on a value already chosen) settles then, unless the page asked the
        server for a run that has not finished yet (on a busy machine a run may start more than NO_RUN_S late).
        """
        runs = self.status()["runs"]
        if act is not None:
            act()
        start = time.monotonic()
        deadline = start + timeout
        while True:
            s = self.status()
            now = time.monotonic()
            quiet = (s["ready"] and s["quietMs"] >= QUIET_S * 1000 and now - self.ws_last >= QUIET_S
                     and not self.rerun_asked)
            if quiet and (s["runs"] > runs or act is None or now - start >= NO_RUN_S):
                return
            if now > deadline:
                raise AssertionError(f"the app did not settle within {timeout:.0f} s: {s}, "
                                     f"websocket quiet for {now - self.ws_last:.1f} s")
            time.sleep(0.1)

    def goto(self, path: str = "/", params: dict | None = None, timeout: float = LOAD_S) -> None:
        url = self.base + path + ("?" + urllib.parse.urlencode(params, quote_via=urllib.parse.quote) if params else "")
        self.page.goto(url)
        self.settle(timeout=timeout)

    def reload(self, timeout: float = LOAD_S) -> None:
        self.page.reload()
        self.settle(timeout=timeout)

    # ---- reading
    def widgets(self) -> list[Widget]:
        return [Widget(**w) for w in self.page.evaluate(WIDGETS_JS)]

    def map(self) -> dict | None:
        """The attention map's state and controls (MAP_JS), or None when it is not on the page."""
        return self.page.evaluate(MAP_JS)

    def map_controls(self) -> list[MapControl]:
        """The map's usable controls: its enabled buttons and each option of its Measure choice. A map that is on the
        page waits for its first drawing (up to STEP_S): listed before it, a seed's walk took other steps under load."""
        shown = self.once_drawn("the attention map", MAP_DRAWN_OR_ABSENT_JS, self.map)
        if shown is None:
            return []
        out = [MapControl("button", b["selector"], b["label"]) for b in shown["buttons"] if not b["disabled"]]
        return out + [MapControl("measure", label=key, options=tuple(shown["measures"])) for key in shown["measures"]]

    def once_drawn(self, what: str, drawn_or_absent: str, state: Callable[[], dict | None]) -> dict | None:
        """A component's state() once it has drawn (waiting up to STEP_S), or None when it is not on the page."""
        try:
            self.page.wait_for_function(drawn_or_absent, timeout=STEP_S * 1000, polling=100)
        except PlaywrightTimeout:
            raise AssertionError(f"{what} was on the page for {STEP_S} s and never drew") from None
        return state()

    def drawn_settings(self) -> set[str]:
        """The settings on screen: those of the Streamlit widgets, and the map's and head view's when on the page."""
        drawn = {w.setting for w in self.widgets() if w.setting is not None}
        drawn |= set(MAP_SETTINGS) if self.map() is not None else set()
        return drawn | (set(HV_SETTINGS) if self.head_view() is not None else set())

    def use_map(self, control: MapControl, value: str | None = None) -> int | None:
        """Click a map button (or choose measure `value`), then wait until the map's choice has reached the app
        (it goes once the clicking stops) and the URL holds it; for the PNG button, the size of the file saved."""
        root = self.page.locator(".hm")  # the locator pierces the component's shadow root
        if control.download:
            return self.saved_size(root.locator(control.selector))
        if control.kind == "measure":
            root.locator("select.hm-select").select_option(value)
        else:
            root.locator(control.selector).click()
        self.until_in_url("the map", self.map, map_mismatches)
        return None

    def saved_size(self, button) -> int:
        """Click a component's export button: the size of the file saved."""
        with self.page.expect_download(timeout=STEP_S * 1000) as info:
            button.click()
        path = info.value.path()
        return path.stat().st_size if path else -1

    def until_in_url(self, what: str, state: Callable[[], dict | None],
                     mismatched: Callable[[dict, dict[str, Any]], list[str]]) -> None:
        """Wait until the app has settled and a component's choice (its state(), compared by mismatched) has reached
        the URL: it goes once the clicking stops."""
        deadline = time.monotonic() + STEP_S
        while True:
            shown, values = state(), url_settings(self.page.url)[0]
            s = self.status()
            settled = s["ready"] and s["quietMs"] >= QUIET_S * 1000 and time.monotonic() - self.ws_last >= QUIET_S
            if settled and (shown is None or (not mismatched(shown, values) and not shown["loading"])):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}'s choice never reached the URL: {shown and shown['state']}, "
                                     f"{mismatched(shown, values) if shown else ''}")
            time.sleep(0.1)

    def head_view(self) -> dict | None:
        """The head view's state and controls (HV_JS), or None when it is not on the page."""
        return self.page.evaluate(HV_JS)

    def head_view_controls(self) -> list[HeadViewControl]:
        """The head view's enabled buttons and its two columns of tokens, once it has drawn (up to STEP_S)."""
        shown = self.once_drawn("the head view", HV_DRAWN_OR_ABSENT_JS, self.head_view)
        if shown is None:
            return []
        out = [HeadViewControl("button", b["selector"], b["label"]) for b in shown["buttons"] if not b["disabled"]]
        return out + [HeadViewControl("token", "left"), HeadViewControl("token", "right")]

    def use_head_view(self, control: HeadViewControl, i: int = 0) -> int | None:
        """Click a head-view button, or token i of a column, then wait until the view's choice has reached the app
        (once the clicking stops) and the URL holds it; for an export, the size of the file saved."""
        root = self.page.locator(".hv")  # the locator pierces the component's shadow root
        if control.download:
            return self.saved_size(root.locator(control.selector))
        if control.kind == "token":
            root.locator(f".hv-{control.selector} .hv-tok").nth(i).click()
        else:
            root.locator(control.selector).click()
        self.until_in_url("the head view", self.head_view, head_view_mismatches)
        return None

    def chart_exports(self) -> list[ChartExport]:
        """The PNG buttons of the page's panel charts (Inside a head's steps), by kind, in page order."""
        return [ChartExport(name.rsplit("_", 1)[-1]) for name in self.page.evaluate(PANELS_JS)]

    def save_chart(self, control: ChartExport) -> int:
        """Click a panel chart's PNG button: the size of the file saved."""
        chart = self.page.locator(f'.pn[data-name$="_{control.kind}"]')  # the locator pierces the shadow root
        chart.scroll_into_view_if_needed()
        return self.saved_size(chart.locator("button", has_text="PNG"))

    def shown(self) -> dict:
        return self.page.evaluate(PAGE_JS, list(BROKEN))

    def path(self) -> str:
        path = urllib.parse.urlsplit(self.page.url).path
        return PATH_ALIASES.get(path, path)

    def url_values(self) -> dict[str, Any]:
        values, problems = url_settings(self.page.url)
        assert not problems, f"the app wrote a URL it cannot read back: {problems} in {self.page.url[:300]}"
        return values

    def signature(self) -> dict[str, str | None]:
        """What the page shows: its path and title, and every setting widget's label -> displayed value."""
        self.open_sidebar()  # folded or not (a person may have unfolded it), its settings count
        page = self.shown()
        sig = {"page": self.path(), "title": page["title"]}
        for w in self.widgets():
            if w.setting is not None:
                sig[f"{w.key} {w.label}"] = w.value
        shown = self.map()
        if shown is not None:
            sig |= {f"map {key}": shown["state"].get(name) for key, name in MAP_SETTINGS.items()}
        view = self.head_view()
        if view is not None:  # a pinned token is not part of a link (the query is: the walkthrough shows it)
            sig |= {f"head view {key}": view["state"].get(key) for key in ("layer", "head", "mode", "heads")}
        return sig

    # ---- acting: each helper performs one user action and waits until the app has settled
    def nav(self, title: str) -> None:
        self.open_sidebar()
        link = self.page.locator('[data-testid="stSidebarNavLink"]').filter(
            has=self.page.get_by_text(title, exact=True))
        more = self.page.locator('[data-testid="stSidebarNavViewButton"]')
        if not link.count() and more.count():
            more.click()  # a long navigation shows its first pages and a "View more" button
        self.settle(lambda: link.click(), timeout=LOAD_S)

    def open_sidebar(self) -> None:
        """Unfold the sidebar when presentation mode (or a narrow window) folded it away, as a person would."""
        button = self.page.locator('[data-testid="stExpandSidebarButton"]')
        if button.count() and button.first.is_visible():
            button.first.click()
            self.page.wait_for_function(
                """() => { const s = document.querySelector('[data-testid="stSidebar"]');
                           const r = s && s.getBoundingClientRect(); return r && r.left >= 0 && r.width > 100; }""",
                timeout=10_000)

    def container(self, key: str):
        """The widget's container, with the sidebar unfolded first when the widget lives there."""
        box = self.page.locator(f".st-key-{key}")
        if box.count() and box.first.evaluate("e => !!e.closest('[data-testid=\"stSidebar\"]')"):
            self.open_sidebar()
        return box

    def pick_radio(self, key: str, option: str) -> None:
        box = self.container(key)
        option_label = box.locator('[data-testid="stRadioOption"]').filter(
            has=self.page.locator('[data-testid="stMarkdownContainer"]', has_text=option)).first
        self.settle(lambda: option_label.click())

    def click_toggle(self, key: str) -> None:
        self.settle(lambda: self.container(key).locator("label").first.click())

    def pick_segment(self, key: str, option: str) -> None:
        button = self.container(key).get_by_role("radio", name=option, exact=True)
        self.settle(lambda: button.click())

    def open_select(self, key: str) -> list[str]:
        """Open a selectbox's list and return its options as shown. A person whose click did not open the list tries
        again: the list's button, then the arrow key on the focused box (seed 3 once kept its list shut after both
        clicks, on CI, the box focused and no script running)."""
        box = self.container(key)
        field, listbox = box.locator("input"), self.page.locator('[role="listbox"]').last
        tries = (field.click, box.locator('button[aria-haspopup="listbox"]').click, lambda: field.press("ArrowDown"))
        for attempt in tries:
            if field.get_attribute("aria-expanded") != "true":  # the button is a toggle: press only a shut list
                attempt()
            try:  # the list may open a moment after the click
                expect(field).to_have_attribute("aria-expanded", "true", timeout=5_000)
                listbox.wait_for(timeout=5_000)
            except (AssertionError, PlaywrightTimeout):
                continue
            return [t.strip() for t in listbox.locator('[role="option"]').all_inner_texts()]
        state = self.page.evaluate(OPEN_STATE_JS, [key, READY])  # say what the page showed
        raise AssertionError(f"the list of {key} never opened: {state}")

    def pick_select(self, key: str, option: str) -> None:
        """Choose `option` in an opened (or closed) selectbox: filter the list by typing, then click the option."""
        box = self.container(key).locator("input")
        if box.get_attribute("aria-expanded") != "true":
            box.click()
        box.fill(option)
        choice = self.page.locator('[role="listbox"]').last.get_by_role("option", name=option, exact=True)
        self.settle(lambda: choice.click())

    def open_multi(self, key: str) -> list[str]:
        """Open a multiselect's list and return the options it offers (the chosen ones are not offered again)."""
        combo = self.container(key).locator(".react-aria-ComboBox")
        combo.get_by_role("button", name="Open", exact=True).click()
        listbox = self.page.locator('[role="listbox"]').last
        listbox.wait_for(timeout=10_000)
        try:  # every option already chosen leaves the list empty
            listbox.locator('[role="option"]').first.wait_for(timeout=5_000)
        except PlaywrightTimeout:
            self.page.keyboard.press("Escape")
            return []
        return [t.strip() for t in listbox.locator('[role="option"]').all_inner_texts()]

    def pick_multi(self, key: str, option: str) -> None:
        """Add `option` to a multiselect as a person does: type it to filter the list, click it, close the list.

        Clicking an option far down the list without filtering first scrolls the (virtualised) list under the
        pointer, and on a busy machine the press then lands on an option being redrawn and picks nothing."""
        self.container(key).locator(".react-aria-ComboBox input").fill(option)
        choice = self.page.locator('[role="listbox"]').last.get_by_role("option", name=option, exact=True)
        self.settle(lambda: choice.click())
        self.page.keyboard.press("Escape")

    def unpick_multi(self, key: str, chip: str) -> None:
        """Remove one chosen option with its chip's cross."""
        combo = self.container(key).locator(".react-aria-ComboBox")
        cross = combo.get_by_role("button", name=f"Remove {chip}", exact=True)
        self.settle(lambda: cross.click())

    def slide(self, key: str, presses: int, wait_each: bool = True) -> None:
        """Move a slider's thumb with the keyboard: right for presses > 0, left for presses < 0.

        wait_each: let the app settle after every press, as a person who watches the chart does; without it the
        presses come back to back, during the reruns they start (a person holding the key down).
        """
        thumb = self.container(key).locator('input[type="range"]')
        arrow = "ArrowRight" if presses > 0 else "ArrowLeft"
        thumb.focus()
        if wait_each:
            for _ in range(abs(presses)):
                self.settle(lambda: thumb.press(arrow))
            return

        def act() -> None:
            for _ in range(abs(presses)):
                thumb.press(arrow)
        self.settle(act)

    def type_number(self, key: str, value: int) -> None:
        box = self.container(key).locator("input")
        self.settle(lambda: (box.fill(str(value)), box.press("Enter")))

    def type_text(self, key: str, text: str) -> None:
        """Fill a text area (committed with Ctrl+Enter) or a text input (Enter)."""
        area = self.container(key).locator("textarea, input").first
        is_area = area.evaluate("e => e.tagName") == "TEXTAREA"
        self.settle(lambda: (area.fill(text), area.press("Control+Enter" if is_area else "Enter")))

    def press_button(self, label: str) -> int | None:
        """Click a main-area button; for a download button, return the size of the file it gave."""
        main = self.page.locator('[data-testid="stMain"]')
        button = main.locator('[data-testid="stButton"] button, [data-testid="stDownloadButton"] button').filter(
            has_text=label).first
        if button.locator("xpath=ancestor::*[@data-testid='stDownloadButton']").count():
            runs = self.status()["runs"]
            with self.page.expect_download(timeout=STEP_S * 1000) as info:
                button.click()
            path = info.value.path()
            self.settle()
            # A download that also reran the script could lose its file to that run (ui.download says how).
            assert self.status()["runs"] == runs, f"the download button {label!r} started a script run"
            return path.stat().st_size if path else -1
        self.settle(lambda: button.click(), timeout=LOAD_S if label.startswith(SLOW_BUTTONS) else STEP_S)
        return None

    def copy_link(self) -> str:
        """Press the Lessons page's Copy link: the link reaches the clipboard ("copied") or is selected for Ctrl+C
        ("selected"); no script run starts. Returns which. Tabs grant the clipboard, so a copy is read back."""
        root = self.page.locator('[data-testid="stMain"] .cl')
        before, runs = int(root.get_attribute("data-copies") or 0), self.status()["runs"]
        self.page.bring_to_front()  # the clipboard answers the focused page only (a walk's fresh tabs took the front)
        root.locator(".cl-btn").click()
        expect(root).to_have_attribute("data-copies", str(before + 1), timeout=STEP_S * 1000)
        how = root.get_attribute("data-copied")
        assert how in ("copied", "selected"), f"Copy link ended as {how!r}"
        expect(root.locator(".cl-status")).not_to_be_empty()
        if how == "copied":
            assert self.page.evaluate("navigator.clipboard.readText()") == root.locator(".cl-box").input_value()
        self.settle()
        assert self.status()["runs"] == runs, "Copy link started a script run"
        return how

    # ---- lessons (issue 21)
    def add_view(self, note: str = "", title: str = "") -> int:
        """"Add this view to a lesson" in the sidebar, with a title and note; return the slides of your lesson."""
        self.open_sidebar()
        bar = self.page.locator('[data-testid="stSidebar"]')
        box = bar.locator("details").filter(has=self.page.locator("summary", has_text="Add this view to a lesson"))
        if box.get_attribute("open") is None:  # opening the box runs the script (it builds the form): wait for it,
            self.settle(lambda: box.locator("summary").click())  # or the form's click can land in that run's redraw
        box.get_by_label("Slide title (optional)").fill(title)
        box.get_by_label("Note (optional): a talking point").fill(note)
        self.settle(lambda: box.get_by_role("button", name="Add this view", exact=True).click())
        return self.own_slides()

    def own_slides(self) -> int:
        """The slides of your lesson, as the sidebar's button counts them."""
        self.open_sidebar()
        label = self.page.locator('[data-testid="stSidebar"] .st-key-open-own button').filter(
            has_text="Your lesson: ").first.inner_text()
        return int(label.split(":")[1].split()[0])

    def key(self, key: str) -> None:
        """Press a key on the page (not in a box), as a presentation clicker does. While a lesson plays, first wait
        until its key listener has heard from the app which slide is drawn: until then it ignores keys (it knows of
        no slides), so a key pressed as soon as the page's run ended could be lost."""
        slide = self.url_values()["slide"]
        if slide:
            expect(self.page.locator(".lk").first).to_have_attribute("data-slide", str(slide), timeout=STEP_S * 1000)
        self.settle(lambda: self.page.keyboard.press(key))

    def download(self, label: str) -> bytes:
        """The file a main-area download button gives."""
        button = self.page.locator('[data-testid="stMain"] [data-testid="stDownloadButton"] button').filter(
            has_text=label).first
        with self.page.expect_download(timeout=STEP_S * 1000) as info:
            button.click()
        return info.value.path().read_bytes()


# Why a selectbox's list is not open: its input's state, the sidebar's, and the lists on the page.
OPEN_STATE_JS = """([key, ready]) => {
  const box = document.querySelector(`.st-key-${key}`), input = box?.querySelector('input');
  const side = document.querySelector('[data-testid="stSidebar"]')?.getBoundingClientRect();
  return {found: !!box, expanded: input?.getAttribute('aria-expanded'), focused: document.activeElement === input,
          sidebar: side ? [Math.round(side.left), Math.round(side.width)] : null,
          lists: document.querySelectorAll('[role="listbox"]').length, running: !document.querySelector(ready)};
}"""


class Tabs:
    """A factory of tabs on one server, each a new tab (a fresh session, nothing kept in the browser: new_tab);
    close() ends them all."""

    def __init__(self, browser, url: str, log: ServerLog) -> None:
        self.browser, self.url, self.log, self.made = browser, url, log, []

    def __call__(self, viewport: dict | None = None) -> Tab:
        page = new_tab(self.browser, viewport or VIEWPORT, accept_downloads=True)
        page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=self.url)  # Copy link
        self.made.append(Tab(page, self.url, self.log))
        return self.made[-1]

    def close(self) -> None:
        for tab in self.made:
            close_tab(tab.page)


# ------------------------------------------------------------------------------------------- screen vs the URL
def url_settings(url: str) -> tuple[dict[str, Any], list[str]]:
    """Every setting's value as the URL gives it (defaults where it is silent), and what the URL got wrong."""
    params = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query, keep_blank_values=True)
    values, problems = settings.from_query(params)
    return settings.defaults() | values, problems


def expected_display(key: str, values: dict[str, Any]) -> str | None:
    """What the widget of setting `key` should show for these settings."""
    if key.startswith("quiz_"):
        q = QUIZ[key.removeprefix("quiz_")]
        n = list(QUIZ).index(q.id)
        c = (values["quiz"] + "-" * len(QUIZ))[n]
        return q.options[int(c)] if c.isdigit() and int(c) < len(q.options) else None
    if key == "lesson":  # the Lessons page shows a lesson's title; no lesson named yet: the first on offer
        return player.ref_label(values["lesson"] or lessons.catalogue()[0].ref)
    if key == "model_b" and values["present"]:  # presenting, Compare's second model has a box 120 px wide
        value = values[key]
        return SHORT_NAMES.get(value, value.removeprefix(settings.CHECKPOINT_PREFIX))
    if key in ("model", "model_b"):
        value = values[key]
        return MODEL_NAMES.get(value, f"Checkpoint: {value.removeprefix(settings.CHECKPOINT_PREFIX)}")
    if key == "pool":  # named by the model's first token: "[CLS] vector", "<s> vector"
        return captions.pool_name(values["pool"], model_specials(values["model"])[1])
    return SETTINGS[key].show(values[key])


def expected_label(key: str, values: dict[str, Any]) -> str:
    """The label of setting `key`'s widget: the table's, or for Hide the model's own special tokens."""
    if key == "hide_special":
        return captions.hide_label(model_specials(values["model"])[0])
    return SETTINGS[key].label


@functools.lru_cache(maxsize=16)
def model_specials(model: str) -> tuple[tuple[str, ...], str | None]:
    """The special tokens of a model choice's tokenizer, and the one every sentence starts with (None: a word)."""
    if model == settings.PRETRAINED:
        folder = bundled_model_dir()
    elif model.startswith(settings.CHECKPOINT_PREFIX):
        folder = checkpoints.checkpoint_dir(model.removeprefix(settings.CHECKPOINT_PREFIX))
    else:
        folder = None  # a custom model reads the bundled vocabulary, as encoder.Encoder's vocab_dir None does
    specials = special_tokens(APP_MAX_TOKENS, folder)
    first = tokenizer(APP_MAX_TOKENS, folder).encode("x").tokens[0]
    return specials, first if first in specials else None


def multi_labels(key: str, values: dict[str, Any]) -> list[str]:
    """The chips a multiselect may show for these settings: the URL's tokens to follow or knock-outs."""
    if key == "follow":
        return [printable(t) for t in values["follow"].split()]
    if key == "ablate":
        return [ablate_label(code.strip()) for code in values["ablate"].split(",") if code.strip()]
    raise AssertionError(f"a multiselect for {key!r}, which the walk does not know")


def mismatches(widgets: list[Widget], values: dict[str, Any]) -> list[str]:
    """Every drawn setting widget whose label or displayed value disagrees with `values` (the URL's settings)."""
    wrong = []
    for w in widgets:
        key = w.setting
        if key is None:
            continue
        if w.kind == "stMultiSelect":
            # Its options are this sentence's tokens or this model's heads: every chip must be one the URL names.
            extra = set(w.chips) - set(multi_labels(key, values))
            if extra or len(set(w.chips)) != len(w.chips):
                wrong.append(f"{key}: chips {w.chips}, the URL says {values.get(key)!r}")
            continue
        if not key.startswith("quiz_"):
            if key not in SETTINGS:
                wrong.append(f"{w.key}: a widget keyed like a setting, but there is no setting {key!r}")
                continue
            if w.label != expected_label(key, values):
                wrong.append(f"{key}: label {w.label!r}, the settings table says {expected_label(key, values)!r}")
        want = expected_display(key, values)
        if w.kind == "stSlider" and not key.startswith("quiz_") and SETTINGS[key].widget == "slider":
            same = w.value is not None and abs(float(w.value) - float(values[key])) < 1e-9  # "0.10" shows 0.1
        elif w.kind == "stSelectbox" and want is not None:  # a page may name its options: query 15 -> "15: [SEP]"
            same = w.value == want or (w.value or "").startswith(f"{want}: ")
        else:
            same = w.value == want
        if not same:
            wrong.append(f"{key}: shows {_short(w.value)}, the URL says {_short(want)}")
    return wrong


def map_mismatches(shown: dict, values: dict[str, Any]) -> list[str]:
    """Every choice the attention map shows that the URL's settings do not hold."""
    wrong = []
    for key, name in MAP_SETTINGS.items():
        want = values[key]
        want = ("1" if want else "0") if isinstance(want, bool) else str(want)
        if shown["state"].get(name) != want:
            wrong.append(f"map {key}: shows {shown['state'].get(name)!r}, the URL says {want!r}")
    return wrong


def head_view_mismatches(shown: dict, values: dict[str, Any]) -> list[str]:
    """Every choice the head view shows that the URL's settings do not hold: layer, head (where heads are shown),
    the average, several heads, and a pinned query token."""
    s, wrong = shown["state"], []
    want = {"layer": str(values["layer"]), "several": values["heads"] if s.get("mode") != "avg" else s.get("several"),
            "mode == avg": str(bool(values["avg"]))}
    have = {"layer": s.get("layer"), "several": s.get("several"), "mode == avg": str(s.get("mode") == "avg")}
    if s.get("heads"):  # heads are shown (not the average, nor a measure without heads): the head followed
        want["head"], have["head"] = str(values["head"]), s.get("head")
    focus = s.get("focus") or ""
    if s.get("pinned") and focus.startswith("q"):
        want["query"], have["query"] = str(values["query"]), focus[1:]
    for key, value in want.items():
        if have[key] != value:
            wrong.append(f"head view {key}: shows {have[key]!r}, the URL says {value!r}")
    return wrong


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(str(value))} chars)"


def check_screen(tab: Tab, since: int = 0) -> list[str]:
    """No exception, no broken page, and the URL holds every setting on screen; returns the problems found."""
    page = tab.shown()
    problems = [f"exception element: {e}" for e in page["exceptions"]]
    problems += [f"error box: {b!r}" for b in page["broken"]]
    if tab.dialogs:
        problems.append(f"a dialog opened: {tab.dialogs}")
    path = tab.path()
    if path not in PAGES:
        problems.append(f"unknown page path {path!r}")
    elif page["current"] and PAGES[path] not in page["current"]:
        problems.append(f"the URL is on {PAGES[path]!r} but the sidebar marks {page['current']}")
    values, url_problems = url_settings(page["url"])
    problems += [f"URL not readable: {p}" for p in url_problems]
    problems += mismatches(tab.widgets(), values)
    shown = tab.map()
    if shown is not None:
        problems += map_mismatches(shown, values)
    view = tab.head_view()
    if view is not None:
        problems += head_view_mismatches(view, values)
    impossible = config_problem(values)
    if impossible and not any(impossible[:30] in alert for alert in page["alerts"]):
        problems.append(f"an impossible config without its message: {impossible!r}; alerts: {page['alerts']}")
    logged = tab.log.errors(since)
    if logged:
        problems.append(f"server log:\n{logged}")
    return problems


def config_problem(values: dict[str, Any]) -> str | None:
    """Why the custom model these settings describe cannot be built (the message the app must show), or None."""
    if values["model"] != settings.CUSTOM:
        return None
    try:
        settings.config_from(values)
    except ValueError as err:
        return str(err)
    return None


def eventually_consistent(tab: Tab, since: int = 0, timeout: float = 5.0) -> list[str]:
    """check_screen, retried for a short while: a URL update can land a moment after the last rerun's deltas."""
    deadline = time.monotonic() + timeout
    while True:
        problems = check_screen(tab, since)
        if not problems or time.monotonic() > deadline or any("exception" in p or "error box" in p for p in problems):
            return problems
        time.sleep(0.25)


def slider_index(widget: Widget) -> tuple[int, int, int]:
    """(min, max, value) of a slider's thumb, in steps (a select_slider counts options)."""
    lo, hi, value = (float(x) for x in widget.options)
    return int(lo), int(hi), int(round(value))


def option_index(key: str, shown: str | None) -> int | None:
    """The index in the setting's options of the option a select_slider shows."""
    setting = SETTINGS[key]
    for i, option in enumerate(setting.options or ()):
        if setting.show(option) == shown:
            return i
    return None


def describe(tab: Tab) -> str:
    page = tab.shown()
    return (f"url={page['url'][:400]}\ntitle={page['title']!r} nav={page['current']}\nalerts={page['alerts']}\n"
            f"exceptions={page['exceptions']}")

