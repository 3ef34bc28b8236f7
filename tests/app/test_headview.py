"""The head view (issue 12) in Chromium: exact weights on the drawn lines, switches in the browser that reach the
URL, long inputs as 8-bit weights that say so and switch layers without a script run, hostile tokens kept literal,
nothing fetched from outside, and slide exports. Plus the payload's encoding, without a browser. (A click on a
thumbnail of the attention map: tests/app/test_heatmap.py.)
"""

from __future__ import annotations

import json
import re
import urllib.parse
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from playwright.sync_api import Page, expect

from devkit.hostile_inputs import BY_ID, EMPTY_IDS, IDS
from devkit.server import COUNT_RUNS, close_tab
from encoder import load_pretrained, run
from tests.app import test_browser
from tests.app.test_browser import CHANGE_MS, LOAD_MS, App, assert_clean, new_page, query, settle
from ui import payload, settings

app = test_browser.app  # the browser tests' server fixture; `browser` comes from conftest.py
SENTENCE = settings.DEFAULT_SENTENCE
STEP = 1 / payload.LEVELS  # weights travel in steps of 1/65535; a drawn weight is within half a step
TOL = STEP / 2 + 1e-6
TOL_8 = 1 / 510 + 1e-6  # past 128 tokens: 8-bit steps of 1/255

HV = """() => document.querySelector('[data-testid="stBidiComponentIsolated"]')?.shadowRoot?.querySelector('.hv')"""
STATE_JS = f"""() => {{
  const r = ({HV})();
  if (!r) return null;
  return {{...r.dataset, loading: r.classList.contains('loading'),
          lines: r.focusLines.map(l => [l.q, l.k, l.head, l.weight]),
          focusShown: !r.querySelector('canvas.hv-focus').hidden,
          left: [...r.querySelectorAll('.hv-left .hv-text')].map(e => e.textContent),
          right: [...r.querySelectorAll('.hv-right .hv-text')].map(e => e.textContent),
          elements: [...r.querySelectorAll('*')].map(e => e.tagName.toLowerCase()),
          status: r.querySelector('.hv-status').textContent}};
}}"""

@pytest.fixture(scope="module")
def model():
    return load_pretrained()


@pytest.fixture
def page(browser) -> Iterator[Page]:
    page = new_page(browser)
    page.outside = []  # every request that leaves this machine
    page.on("request", lambda r: page.outside.append(r.url) if not _local(r.url) else None)
    yield page
    close_tab(page)


def _local(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme in ("blob", "data", "about") or parts.hostname in ("127.0.0.1", "localhost", "::1")


def open_view(page: Page, app: App, params: dict | None = None) -> dict:
    page.goto(app.link("/inside-a-head", params))
    settle(page)
    return wait_state(page, lambda s: s["draws"] is not None)


def state(page: Page) -> dict | None:
    return page.evaluate(STATE_JS)


def wait_state(page: Page, ok, timeout: float = CHANGE_MS) -> dict:
    """Poll the component's state until ok(state) holds; the last state in the failure message."""
    import time

    deadline = time.monotonic() + timeout / 1000
    last = None
    while time.monotonic() < deadline:
        last = state(page)
        if last is not None and last.get("draws") and ok(last):
            return last
        page.wait_for_timeout(50)  # a polling interval, not a synchronisation sleep
    raise AssertionError(f"head view never reached the expected state; last: {str(last)[:1500]}")


def token(page: Page, side: str, i: int):
    return page.locator(f".hv .hv-{side} .hv-tok").nth(i)


def check_lines(lines: list, expected: torch.Tensor, query_i: int, heads: list[str], tol: float = TOL) -> None:
    """The drawn lines of query i: one per (head, key), each weight within tol (half a step) of expected[head][key]."""
    assert sorted({h for _, _, h, _ in lines}) == sorted(heads)
    for q, k, h, w in lines:
        assert q == query_i
        want = float(expected[heads.index(h)][k])
        assert abs(w - want) <= tol, f"head {h}, key {k}: drawn {w}, trace {want}"
    assert len(lines) == len(heads) * expected.shape[-1]


def fake_trace(att: torch.Tensor):
    L, H, T, _ = att.shape
    return type("T", (), dict(seq_len=T, num_layers=L, num_heads=H, tokens=["tok"] * T, labels=["tok"] * T,
                              special_positions=(), text="x", attention=att))


def decoded(data: bytes) -> tuple[dict, bytes]:
    """The payload's header and body (after the padding)."""
    n = int.from_bytes(data[:4], "little")
    return json.loads(data[4:4 + n]), data[-(-(4 + n) // 8) * 8:]


# ------------------------------------------------------------------------------------------------ no browser
def test_several_heads_keep_this_models_heads_once_each_ascending():
    assert payload.several_heads("7,1,4", 12) == "1,4,7"
    assert payload.several_heads(" 2, x,99,\u0663,,2,12,11,-1,1e1,0003,00004," + "9" * 5000, 12) == "2,3,11"
    assert payload.several_heads("", 12) == payload.several_heads(None, 12) == payload.several_heads(["1"], 12) == ""


def test_payload_round_trips_within_half_a_step():
    att = torch.rand(2, 3, 5, 5, generator=torch.Generator().manual_seed(0)).softmax(-1)
    trace = type("T", (), dict(seq_len=5, num_layers=2, num_heads=3, tokens=list("abcde"), labels=list("abcde"),
                               special_positions=(0, 4), text="x", attention=att))
    header, body = decoded(payload.build(trace, dict(layer=1, head=2, avg=False, query=0), name="n"))
    w = np.frombuffer(body, dtype="<u2").reshape(2, 3, 5, 5) / payload.LEVELS
    assert header["layers"] == [0, 1] and header["tokens"] == list("abcde") and header["sel"]["head"] == 2
    assert np.abs(w - att.numpy()).max() <= 0.5 / payload.LEVELS + 1e-9


def test_layers_the_view_holds_are_not_sent_again():
    """A settled pick says which layers the view holds of the trace; the next payload leaves those out (all of them
    up to 128 tokens, where every layer travels at once; each one past that)."""
    gen = torch.Generator().manual_seed(4)
    short, long = (fake_trace(torch.rand(3, 2, T, T, generator=gen).softmax(-1)) for T in (9, 140))
    sel = dict(layer=1, head=0, avg=False, query=0)
    assert decoded(payload.build(short, sel, name="n", held={0, 1, 2}))[0]["layers"] == []
    assert decoded(payload.build(short, sel, name="n", held={0, 2}))[0]["layers"] == [0, 1, 2]  # all or none
    header, body = decoded(payload.build(long, sel, name="n", held={1}))
    assert sorted(header["layers"]) == [0, 2] and len(body) == sum(header["zipped"])
    for bad in (None, "x", {"id": 3, "layers": [1]}, {"id": "a", "layers": "1"}, {"id": "a"}):
        assert payload.clean_held(bad) is None
    assert payload.clean_held({"id": "a", "layers": [2, -1, "3", 2.0, True, 0, 2]}) == {"id": "a", "layers": [0, 2]}


def test_payload_at_128_tokens_fits_3_mb():
    data = payload.build(fake_trace(torch.full((6, 12, 128, 128), 1 / 128)), dict(layer=4, head=0, avg=False, query=0),
                            name="n")
    assert decoded(data)[0]["bits"] == 16
    assert len(data) == pytest.approx(6 * 12 * 128 * 128 * 2, rel=0.01) and len(data) < 3_000_000


def test_past_128_tokens_8_bit_layers_decode_within_1_over_510(model):
    trace = run(model, BY_ID["paragraph_20k"])
    assert trace.seq_len == 512
    header, body = decoded(payload.build(trace, dict(layer=3, head=0, avg=False, query=0), name="n"))
    assert header["bits"] == 8 and header["layers"] == [3, 4, 2, 5, 1, 0]  # all of them, nearest the chosen first
    assert len(body) == sum(header["zipped"]) <= payload.SHIP_LIMIT
    at = 0
    for layer, size in zip(header["layers"], header["zipped"], strict=True):
        w = np.frombuffer(zlib.decompress(body[at:at + size]), dtype="u1").reshape(12, 512, 512) / 255
        at += size
        err = np.abs(w - trace.attention[layer].double().numpy()).max()
        assert 1 / 1020 < err <= 1 / 510 + 1e-6, (layer, err)  # 8-bit steps, within half of one


def test_layers_past_the_ship_limit_stay_on_the_server(monkeypatch):
    att = torch.rand(5, 2, 200, 200, generator=torch.Generator().manual_seed(1)).softmax(-1)
    one = len(payload.deflated_layer(att[0]))
    monkeypatch.setattr(payload, "SHIP_LIMIT", int(2.5 * one))
    header, body = decoded(payload.build(fake_trace(att), dict(layer=1, head=0, avg=False, query=0), name="n"))
    assert header["layers"] == [1, 2] and len(body) == sum(header["zipped"]) <= payload.SHIP_LIMIT
    monkeypatch.setattr(payload, "SHIP_LIMIT", 1)  # the chosen layer ships whatever the limit
    assert decoded(payload.build(fake_trace(att), dict(layer=4, head=0, avg=False, query=0), name="n"))[0]["layers"] == [4]
    assert payload.nearest_first(2, 5) == [2, 3, 1, 4, 0]


# ------------------------------------------------------------------------------------------------ browser
def test_hover_switch_and_average_draw_the_traces_weights_and_reach_the_url(page, app, model):
    trace = run(model, SENTENCE)
    it = trace.tokens.index("it")
    s = open_view(page, app)
    assert s["shipped"] == "all" and (s["layer"], s["heads"], s["mode"]) == ("3", "1", "one")
    assert s["left"] == trace.tokens and s["right"] == trace.tokens

    token(page, "left", it).hover()
    s = wait_state(page, lambda s: s["focus"] == f"q{it}")
    check_lines(s["lines"], trace.attention[3, 1:2, it], it, ["1"])
    assert "0.677" in page.locator(".hv .hv-right .hv-tok").nth(trace.tokens.index("animal")).inner_text()

    # Switch layer and head inside the component: redrawn at once from the shipped weights.
    page.locator('.hv button[data-layer="2"]').click()
    page.locator('.hv button[data-head="5"]').click()
    token(page, "left", it).hover()
    s = wait_state(page, lambda s: s["layer"] == "2" and s["heads"] == "5" and s["focus"] == f"q{it}" and s["lines"])
    check_lines(s["lines"], trace.attention[2, 5:6, it], it, ["5"])
    pressed = page.evaluate(f"""() => Object.fromEntries([...({HV})().querySelectorAll('button[data-layer], button[data-head]')]
      .map(b => [`${{b.dataset.layer ?? ''}}/${{b.dataset.head ?? ''}}`, b.getAttribute('aria-pressed')]))""")
    assert {k for k, v in pressed.items() if v == "true"} == {"2/", "/5"}, pressed  # said, not only coloured
    assert set(pressed.values()) == {"true", "false"}

    # Several heads in colours, then the head average.
    page.locator('.hv button[data-mode="several"]').click()
    page.locator('.hv button[data-head="0"]').click()
    token(page, "left", it).hover()
    s = wait_state(page, lambda s: s["heads"] == "0,5" and s["lines"])
    check_lines(s["lines"], trace.attention[2, [0, 5], it], it, ["0", "5"])
    page.locator('.hv button[data-mode="avg"]').click()
    token(page, "left", it).hover()
    s = wait_state(page, lambda s: s["mode"] == "avg" and s["lines"] and s["lines"][0][2] == "avg")
    check_lines(s["lines"], trace.attention[2, :, it].mean(0, keepdim=True), it, ["avg"])

    # Pin "it": the choice goes back to the app once the clicking stops, so the URL and the walkthrough follow.
    page.locator('.hv button[data-mode="one"]').click()
    page.locator('.hv button[data-head="5"]').click()
    token(page, "left", it).click()
    page.wait_for_function("() => location.search.includes('query=')", timeout=CHANGE_MS)
    settle(page)
    assert query(page) | {"text": []} == {"layer": ["2"], "head": ["5"], "query": [str(it)], "text": []}
    assert page.get_by_text("Inside layer 2, head 5").count() == 1
    assert_clean(page, app)
    assert not page.outside, page.outside


def test_a_settled_pick_does_not_send_the_layers_again_and_a_view_mounted_anew_gets_them(page, app, model):
    """Every layer (uint16 up to 128 tokens) travels once; a head click's settled run brings none of them again (it
    resent 2.2 MB at 123 tokens, 2.6 MB at 512), and the lines drawn afterwards are still the trace's. Leaving the
    page and coming back mounts a new view, which holds nothing: it gets every layer again."""
    trace = run(model, SENTENCE)
    it = trace.tokens.index("it")
    s = open_view(page, app)
    assert s["received"] == "0.1.2.3.4.5"
    search = page.evaluate("() => location.search")
    page.locator('.hv button[data-head="7"]').click()
    page.wait_for_function("(s) => location.search !== s", arg=search, timeout=CHANGE_MS)
    settle(page)
    s = wait_state(page, lambda s: int(s["payloads"]) >= 2)
    assert s["received"] == "" and s["held"] == "0,1,2,3,4,5", s  # the pick's run: no layer again
    page.locator('.hv button[data-layer="4"]').click()
    token(page, "left", it).hover()
    s = wait_state(page, lambda s: s["layer"] == "4" and s["focus"] == f"q{it}" and s["lines"])
    check_lines(s["lines"], trace.attention[4, 7:8, it], it, ["7"])
    page.wait_for_function("() => new URLSearchParams(location.search).get('layer') === '4'", timeout=CHANGE_MS)
    settle(page)
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Activations").click()
    settle(page)
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Inside a head").click()
    settle(page)
    s = wait_state(page, lambda s: s["received"] == "0.1.2.3.4.5")
    token(page, "left", it).hover()
    s = wait_state(page, lambda s: s["focus"] == f"q{it}" and s["lines"])
    check_lines(s["lines"], trace.attention[4, 7:8, it], it, ["7"])
    assert_clean(page, app)


def test_several_heads_reach_the_url_and_reopen_from_it(page, app, model):
    trace = run(model, SENTENCE)
    it = trace.tokens.index("it")
    open_view(page, app)  # layer 3, head 1
    page.locator('.hv button[data-mode="several"]').click()
    for h in (4, 7, 9, 9, 1):  # on, on, on (followed), off (followed: 1, the lowest shown), off (followed: 4)
        page.locator(f'.hv button[data-head="{h}"]').click()
    page.wait_for_function("() => new URLSearchParams(location.search).get('heads') === '4,7'", timeout=CHANGE_MS)
    settle(page)
    assert query(page)["head"] == ["4"] and page.get_by_text("Inside layer 3, head 4").count() == 1

    page.reload()
    settle(page)
    token(page, "left", it).hover()
    s = wait_state(page, lambda s: s["focus"] == f"q{it}" and s["lines"])
    assert (s["mode"], s["heads"]) == ("several", "4,7")
    check_lines(s["lines"], trace.attention[3, [4, 7], it], it, ["4", "7"])

    # The head chosen on another page (the map's Head) joins them when the view is back.
    page.goto(app.link("/", {"heads": "4,7", "head": "4"}))
    settle(page)
    page.locator('.hm button[data-head="9"]').click()
    page.wait_for_function("() => new URLSearchParams(location.search).get('head') === '9'", timeout=CHANGE_MS)
    settle(page)
    page.goto(app.link("/inside-a-head", urllib.parse.parse_qsl(urllib.parse.urlsplit(page.url).query)))
    settle(page)
    s = wait_state(page, lambda s: s["mode"] == "several")
    assert (s["heads"], s["head"]) == ("4,7,9", "9") and query(page)["heads"] == ["4,7,9"]

    # A link's heads: what is not a head of this model is left out, and the head the walkthrough follows joins them;
    # what is not a list of numbers is refused with a sentence (tests/app/test_app.py).
    s = open_view(page, app, {"heads": "2,99,6,2", "head": "5"})
    assert (s["mode"], s["heads"], s["head"]) == ("several", "2,5,6", "5")
    page.wait_for_function("() => new URLSearchParams(location.search).get('heads') === '2,5,6'", timeout=CHANGE_MS)
    assert page.get_by_text("Inside layer 3, head 5").count() == 1
    page.locator('.hv button[data-mode="avg"]').click()  # the average: no several heads in the URL
    page.wait_for_function("() => { const q = new URLSearchParams(location.search); "
                           "return q.get('avg') === 'true' && !q.has('heads'); }", timeout=CHANGE_MS)
    settle(page)
    page.reload()
    settle(page)
    assert wait_state(page, lambda s: True)["mode"] == "avg"
    assert_clean(page, app)


# Counts script runs from now on: each time the app's script state turns "running" (also used by the benchmark).


# Click a layer; when its lines are drawn, the script runs so far and the walkthrough's headings.
SWITCHED_JS = f"""(layer) => new Promise((resolve) => {{
  const r = ({HV})();
  const obs = new MutationObserver(() => {{
    if (r.dataset.layer !== String(layer) || r.classList.contains('loading')) return;
    obs.disconnect();
    resolve({{runs: window.__runs, held: r.dataset.held,
              headings: [...document.querySelectorAll('h3')].map(h => h.textContent).join(' | ')}});
  }});
  obs.observe(r, {{attributes: true}});
  r.querySelector(`button[data-layer="${{layer}}"]`).click();
}})"""


def test_long_input_switches_layers_without_a_script_run_and_says_its_precision(page, app, model):
    text = BY_ID["repeated_600_tokens"]
    trace = run(model, text)
    assert trace.seq_len == 512
    open_view(page, app, {"text": text})
    s = wait_state(page, lambda s: s["held"] == "0,1,2,3,4,5" and not s["loading"])
    assert s["shipped"] == "all" and s["t"] == "512" and "8-bit" in s["status"] and "± 0.002" in s["status"]
    page.evaluate(COUNT_RUNS)
    got = page.evaluate(SWITCHED_JS, 4)  # when layer 4 is drawn, before the settled choice goes back (0.8 s later)
    assert got["runs"] == 0 and "Inside layer 3, head 1" in got["headings"], got  # drawn from what the browser holds
    token(page, "left", 7).hover()
    s = wait_state(page, lambda s: s["layer"] == "4" and s["focus"] == "q7" and s["lines"])
    check_lines(s["lines"], trace.attention[4, 1:2, 7], 7, ["1"], tol=TOL_8)
    assert "± 0.002" in s["status"]
    # Once the clicking stops the choice reaches the app in one run, and the walkthrough follows.
    page.wait_for_function("() => location.search.includes('layer=4')", timeout=CHANGE_MS)
    settle(page)
    assert page.get_by_text("Inside layer 4, head 1").count() == 1
    assert page.evaluate("() => window.__runs") == 1
    token(page, "left", 7).click()
    token(page, "right", 0).hover()
    s = wait_state(page, lambda s: s["pinned"] and s["status"].startswith("“"))
    shown = re.fullmatch(r"“.*” \(7\) → “.*” \(0\): head 1 (0\.\d{3}) ± 0\.002", s["status"])
    assert shown, s["status"]
    assert abs(float(shown[1]) - float(trace.attention[4, 1, 7, 0])) <= TOL_8 + 0.0005  # 3 decimals of an 8-bit value
    assert_clean(page, app)


# 8 layers × 16 heads at 512 tokens: ~0.6 MB a layer deflated, so not all of them fit in SHIP_LIMIT.
# Dropout on at 0.5 makes every map noisy, so its 8-bit layers deflate poorly: ~6 MB for 8 x 16 heads at 512 tokens,
# more than payload.SHIP_LIMIT (a random model's smooth maps in inference deflate to 1.8 MB: they would all fit).
BIG = {"model": "custom", "d_model": "64", "num_heads": "16", "d_ff": "128", "num_layers": "8", "dropout": "0.5",
       "train": "true"}


# The focus canvas against the rows on screen: its band in the lines' column, the column's rows in sight, and how
# many of its pixels in sight hold ink.
BAND_JS = f"""() => {{
  const r = ({HV})();
  const c = r.querySelector('canvas.hv-focus'), mid = r.querySelector('.hv-mid').getBoundingClientRect();
  const end = r.querySelector('.hv-right .hv-tok:last-child').getBoundingClientRect().bottom - mid.top;
  const top = c.offsetTop, rows = [Math.max(0, -mid.top), Math.min(end, innerHeight - mid.top)];
  const dpr = c.width / c.clientWidth;
  const from = Math.max(0, rows[0] - top) * dpr, to = Math.min(c.clientHeight, rows[1] - top) * dpr;
  const d = c.getContext('2d').getImageData(0, Math.floor(from), c.width, Math.max(1, Math.floor(to - from))).data;
  let ink = 0;
  for (let i = 3; i < d.length; i += 4) ink += d[i] > 0;
  return {{shown: !c.hidden, band: [top, top + c.clientHeight], rows, ink}};
}}"""


# The keys' rows wholly on screen: (row, the numbers in its box).
NUMS_JS = f"""() => [...({HV})().querySelectorAll('.hv-right .hv-tok')].map((d, i) => [i, d.getBoundingClientRect()])
  .filter(([, b]) => b.top >= 0 && b.bottom <= innerHeight)
  .map(([i]) => [i, [...({HV})().querySelectorAll('.hv-right .hv-w')[i].children].map(e => e.textContent).join(' ')])"""


def test_a_pinned_tokens_lines_follow_the_rows_on_screen_as_the_page_scrolls(page, app):
    """At 512 tokens the focus lines are painted on a canvas about twice the screen's height, over the rows in sight:
    scrolling the page far down keeps them drawn where the reader looks."""
    open_view(page, app, {"text": BY_ID["repeated_600_tokens"]})
    wait_state(page, lambda s: s["t"] == "512" and not s["loading"])
    token(page, "left", 40).click()  # pinned: its lines stay while the page scrolls
    wait_state(page, lambda s: s["pinned"] and s["focus"] == "q40" and s["lines"])
    seen = []
    for row in (200, 380, 505):
        token(page, "right", row).scroll_into_view_if_needed()
        covered = f"() => {{ const b = ({BAND_JS})(); return b.band[0] <= b.rows[0] && b.rows[1] <= b.band[1] + 1; }}"
        page.wait_for_function(covered, timeout=CHANGE_MS)  # + 1: a canvas is whole pixels
        got = page.evaluate(BAND_JS)
        assert got["shown"] and got["ink"] > 0, got  # lines from query 40 cross every row below it
        seen.append(got["band"][0])
        # every key row in sight shows query 40's weight on it (the numbers are written near the screen only)
        weights = {k: w for q, k, _, w in state(page)["lines"]}
        page.wait_for_function(f"() => ({NUMS_JS})().every(([, t]) => t !== '')", timeout=CHANGE_MS)
        rows = page.evaluate(NUMS_JS)
        assert row in [i for i, _ in rows]
        assert all(abs(float(text) - weights[i]) <= 0.005 + 1e-9 for i, text in rows), rows  # two decimals
    assert seen == sorted(seen) and seen[0] < seen[-1]  # the band moved down with the page
    assert state(page)["focus"] == "q40"
    assert_clean(page, app)


def test_a_layer_that_did_not_fit_reruns_the_head_view_alone(page, app):
    open_view(page, app, BIG | {"text": BY_ID["repeated_600_tokens"]})
    s = wait_state(page, lambda s: not s["loading"] and s["held"].count(",") >= 2)
    held = {int(n) for n in s["held"].split(",")}
    assert s["shipped"] == "some" and 3 in held and len(held) < 8
    missing = max(set(range(8)) - held)
    page.evaluate(COUNT_RUNS)
    got = page.evaluate(SWITCHED_JS, missing)
    assert got["runs"] == 1, got  # one run brought the layer ...
    assert "Inside layer 3, head 1" in got["headings"], got  # ... and it was not the walkthrough's
    assert str(missing) in got["held"].split(",")
    page.wait_for_function(f"() => location.search.includes('layer={missing}')", timeout=CHANGE_MS)
    # The settled choice: the page follows once the fetched layer is in (a run after the URL's); wait for it, as
    # a busy machine can leave more than settle()'s quiet spell between the two runs.
    expect(page.get_by_text(f"Inside layer {missing}, head 1")).to_have_count(1, timeout=CHANGE_MS)
    settle(page)
    assert_clean(page, app)


# The corpus in a few page loads (each load is a new session and forward pass, ~8 s on 2 cores): the size cases
# alone, the empty ones alone, and every other entry on its own line of one of three sentences. WordPiece splits
# words without context, so each entry gives the same tokens there as alone.
SIZE_IDS = ("paragraph_20k", "word_10k_chars", "repeated_600_tokens", "many_lines")
REST = [name for name in IDS if name not in SIZE_IDS and name not in EMPTY_IDS]
GROUPS = {**{name: [name] for name in (*SIZE_IDS, *sorted(EMPTY_IDS))},
          **{f"mixed_{n}": REST[n::3] for n in range(3)}}


@pytest.mark.parametrize("group", GROUPS)
def test_hostile_tokens_stay_literal_text(page, app, model, group):
    text = settings.cut_utf16("\n".join(BY_ID[name] for name in GROUPS[group]), settings.MAX_TEXT_CHARS)
    page.goto(app.link("/inside-a-head", {"text": text}))
    settle(page)
    if not text.strip():
        assert state(page) is None
        assert_clean(page, app)
        return
    trace = run(model, text)
    assert group in SIZE_IDS or not trace.truncated
    s = wait_state(page, lambda s: True)
    assert s["left"] == trace.tokens and s["right"] == trace.tokens  # textContent equals each token, as is
    assert set(s["elements"]) <= {"div", "span", "button", "canvas", "svg", "line"}, "markup made from a token"
    assert page.evaluate("() => document.querySelectorAll('a[href^=\"javascript\" i]').length") == 0
    assert_clean(page, app)  # includes: no dialog opened
    assert not page.outside, page.outside


def test_slide_exports_are_files_with_the_tokens_as_text(page, app):
    s = open_view(page, app, {"text": "<b>bold</b> & [a](javascript:alert(1))", "present": "true"})
    with page.expect_download() as svg:
        page.locator(".hv button", has_text="SVG").click()
    root = ET.parse(svg.value.path()).getroot()  # well-formed XML: every token escaped
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert texts[1:] == [t for tok in s["left"] for t in (tok, tok)]
    assert svg.value.suggested_filename.endswith(".svg")
    with page.expect_download() as png:
        page.locator(".hv button", has_text="PNG").click()
    assert open(png.value.path(), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert not page.dialogs and not page.outside, page.outside


# What the components' own code (served as /_stcore/bidi-components/encoder_explorer.<name>/…) hooks into the window:
# 'resize' listeners and ResizeObservers still live, each noted by the stack that made it, dropped when removed.
HOOKS_JS = """(() => {
  const ours = () => new Error().stack.includes('/bidi-components/encoder_explorer.');
  const live = window.__componentHooks = {listeners: new Set(), observers: new Set()};
  const add = window.addEventListener, remove = window.removeEventListener;
  window.addEventListener = function (type, fn, ...rest) {
    if (type === 'resize' && ours()) live.listeners.add(fn);
    return add.call(this, type, fn, ...rest);
  };
  window.removeEventListener = function (type, fn, ...rest) {
    live.listeners.delete(fn);
    return remove.call(this, type, fn, ...rest);
  };
  const Observer = window.ResizeObserver;
  window.ResizeObserver = class extends Observer {
    constructor(fn) { super(fn); if (ours()) live.observers.add(this); }
    disconnect() { live.observers.delete(this); return super.disconnect(); }
  };
})()"""
HOOKS = "() => [window.__componentHooks.listeners.size, window.__componentHooks.observers.size]"


def test_a_component_that_leaves_the_page_leaves_no_listener_or_observer(page, app):
    """Each component's cleanup (returned to Streamlit) ends its window listener, observer and timers: going from
    the map to the head view and on to a page without a component leaves exactly the live component's hooks."""
    page.add_init_script(HOOKS_JS)
    page.goto(app.link("/", {"text": test_browser.EXACT_TEXT}))  # past 128 tokens: the canvas map
    settle(page)
    page.wait_for_function("() => document.querySelector('[data-testid=\"stBidiComponentIsolated\"]')"
                           "?.shadowRoot?.querySelector('.hm')?.dataset.draws", timeout=LOAD_MS)
    # one window listener; three observers: the view's own size, the page above it moving it, and its status line's
    # height (component_base)
    assert page.evaluate(HOOKS) == [1, 3]
    # Inside a head: the head view's, and each of its three step charts' (ui/panels.js: a window listener, an observer
    # of its size and one of the page above it moving it)
    for title, hooks in (("Inside a head", [1 + 3, 3 + 3 * 2]), ("Activations", [0, 0])):
        page.locator('[data-testid="stSidebarNav"] a').filter(has_text=title).click()
        settle(page)
        if title == "Inside a head":
            wait_state(page, lambda s: s["t"] == "512")
            assert page.evaluate("() => document.querySelector('[data-testid=\"stBidiComponentIsolated\"]')"
                                 ".shadowRoot.querySelectorAll('.hm, .hv').length") == 1
        assert page.evaluate(HOOKS) == hooks, title
    assert_clean(page, app)


def test_the_components_code_comes_as_files_and_no_run_carries_it(page, app):
    """Each component's code is its ui/components.py join, fetched from the server as a file (its module once per
    page load; its few kB of style sheet again on a page's return), and no message of the page's runs, the first or
    another page's, carries any of it."""
    from ui import components

    frames: list[bytes] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda data: frames.append(
        data if isinstance(data, bytes) else data.encode())))
    fetched: list[str] = []
    page.on("response", lambda r: fetched.append(r.url) if "/_stcore/bidi-components/" in r.url else None)
    open_view(page, app)
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Attention").click()
    settle(page)
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Inside a head").click()
    settle(page)
    wait_state(page, lambda s: s["draws"] is not None)  # the view mounted anew (Attention has none)
    stems = {}
    for url in fetched:
        name, digest, file = urllib.parse.urlsplit(url).path.split("/bidi-components/")[1].split("/")
        stem, ext = file.rsplit(".", 1)
        response = page.request.get(url)
        assert response.ok and response.text() == components.joined(stem, ext), url
        stems[name] = stems.get(name, set()) | {stem}
    assert stems == {"encoder_explorer.head_view": {"headview"}, "encoder_explorer.panels": {"panels"},
                     "encoder_explorer.attention_map": {"heatmap"}}, fetched
    scripts = [url for url in fetched if url.endswith(".js")]
    assert len(scripts) == len(set(scripts)) == 3  # each module once, however often its component is mounted
    code = [components.joined(stem, "js").encode() for stem in ("headview", "panels", "heatmap")]
    assert frames and not any(own[-200:] in frame for frame in frames for own in code)
    assert_clean(page, app)


# ------------------------------------------------------------------------------------- the Measure (issues 19, 27)
def test_a_measure_ships_through_the_payload_within_half_a_step(model):
    from encoder.analysis.measures import MEASURES
    from ui import measure_lines

    trace = run(model, SENTENCE)
    maps = MEASURES["value_raw"].compute(model, trace).heads  # lengths: every layer's largest passes 1
    header, body = decoded(payload.build(trace, dict(layer=3, head=1, avg=False, query=0), name="n", stack=maps))
    top = np.asarray(header["top"])
    assert (top > 1).all() and np.allclose(top, maps.flatten(1).amax(1).numpy())
    w = np.frombuffer(body, dtype="<u2").reshape(maps.shape) / payload.LEVELS * top[:, None, None, None]
    assert np.abs(w - maps.numpy()).max() <= 0.5 * top.max() / payload.LEVELS + 1e-6
    # Past 128 tokens: 8-bit layers deflated one by one, cached per measure, as many as fit under 3 MB.
    long = run(model, " ".join([SENTENCE] * 40))  # 512 tokens whose value lengths deflate to ~3.5 MB
    stack = MEASURES["value_raw"].compute(model, long).heads
    fr = type("F", (), dict(trace_key=("test", "cpu", "long", False)))()
    lines = measure_lines.Lines("value_raw", stack, None, "id", {})
    data = payload.build(long, dict(layer=2, head=0, avg=False, query=0), name="n", stack=stack,
                         deflated=measure_lines.deflated(fr, lines, 2, False))
    header, body = decoded(data)
    shipped = header["layers"]
    assert len(data) <= 3_000_000 and shipped == payload.nearest_first(2, 6)[:len(shipped)]
    assert sum(header["zipped"]) <= payload.SHIP_LIMIT
    # the view fetches the others one by one when not all fit
    assert measure_lines.ships_all(fr, long, lines) == (len(shipped) == 6)
    w = np.frombuffer(zlib.decompress(body[:header["zipped"][0]]), dtype="u1").reshape(12, 512, 512)
    assert np.abs(w / 255 * header["top"][2] - stack[2].numpy()).max() <= 0.5 * header["top"][2] / 255 + 1e-5


HEAD_BUTTONS_JS = f"""() => [...({HV})().querySelectorAll('button[data-head], button[data-mode]')]
  .map(b => [b.dataset.head ?? b.dataset.mode, b.disabled])"""


def test_value_weighted_lines_switch_heads_in_the_browser(page, app, model):
    from encoder.analysis.measures import MEASURES

    trace = run(model, SENTENCE)
    value = MEASURES["value"].compute(model, trace).heads
    it = trace.tokens.index("it")
    s = open_view(page, app, {"measure": "value"})
    assert s["measure"] == "value" and "Value-weighted, rows sum to 1" in s["status"]
    token(page, "left", it).hover()
    s = wait_state(page, lambda s: s["focus"] == f"q{it}" and s["lines"])
    check_lines(s["lines"], value[3, 1:2, it], it, ["1"])
    page.evaluate(COUNT_RUNS)
    page.locator('.hv button[data-head="7"]').click()
    token(page, "left", it).hover()
    s = wait_state(page, lambda s: s["heads"] == "7" and s["focus"] == f"q{it}" and s["lines"])
    check_lines(s["lines"], value[3, 7:8, it], it, ["7"])
    assert page.evaluate("() => window.__runs") == 0  # drawn from what the browser holds
    # raw attention puts far more on [CLS]/[SEP] than what flows: the lines say so on screen
    raw_special = float(trace.attention[3, 7, it, [0, -1]].sum())
    drawn_special = sum(w for _, k, _, w in s["lines"] if k in (0, trace.seq_len - 1))
    assert drawn_special < raw_special
    assert_clean(page, app)


def test_a_layer_measure_turns_the_head_picker_off_and_survives_a_reload(page, app, model):
    from encoder.analysis.measures import MEASURES

    trace = run(model, SENTENCE)
    block = MEASURES["block"].compute(model, trace).layers
    it = trace.tokens.index("it")
    s = open_view(page, app, {"measure": "block", "layer": "2"})
    assert s["measure"] == "block" and s["heads"] == "" and "the whole layer" in s["status"]
    assert all(disabled for _, disabled in page.evaluate(HEAD_BUTTONS_JS))
    assert page.get_by_text("It has no per-head form, so its lines are the whole layer's.").count() == 1
    token(page, "left", it).click()  # pinned: its lines and the app's query
    s = wait_state(page, lambda s: s["pinned"] and s["lines"])
    check_lines(s["lines"], block[2:3, it], it, ["layer"])
    page.wait_for_function("() => location.search.includes('query=')", timeout=CHANGE_MS)
    settle(page)
    assert query(page)["measure"] == ["block"] and "head" not in query(page)  # head 1, the default, kept: not 0
    page.reload()
    settle(page)
    s = wait_state(page, lambda s: s["measure"] == "block")
    assert s["layer"] == "2" and all(d for _, d in page.evaluate(HEAD_BUTTONS_JS))
    assert_clean(page, app)


def test_attention_flow_follows_the_pinned_query(page, app, model):
    from encoder.analysis.measures import MEASURES

    trace = run(model, SENTENCE)
    it, animal = trace.tokens.index("it"), trace.tokens.index("animal")
    s = open_view(page, app, {"measure": "flow", "query": str(it)})
    s = wait_state(page, lambda s: s["pinned"] and s["focus"] == f"q{it}" and s["lines"])  # pinned on arrival
    check_lines(s["lines"], MEASURES["flow"].compute(model, trace, token=it).layers[3, it:it + 1], it, ["layer"])
    token(page, "left", it).click()  # release it: away from the tokens the view says what its lines are
    page.mouse.move(1, 1)
    s = wait_state(page, lambda s: not s["pinned"] and not s["focus"])
    assert f"Attention flow, rows sum to 1, computed for position {it} only" in s["status"], s["status"]
    # pin another query: its flow is computed and drawn
    token(page, "left", animal).click()
    page.wait_for_function(f"() => location.search.includes('query={animal}')", timeout=CHANGE_MS)
    settle(page)
    s = wait_state(page, lambda s: s["focus"] == f"q{animal}" and s["lines"] and s["lines"][0][0] == animal)
    want = MEASURES["flow"].compute(model, trace, token=animal).layers[3, animal:animal + 1]
    check_lines(s["lines"], want, animal, ["layer"])
    assert_clean(page, app)


# The overview canvas: whether it is on screen, and a digest of its pixels (equal digests: the same picture).
OVERVIEW_JS = f"""() => {{
  const c = ({HV})().querySelector('canvas.hv-canvas');
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let sum = 0, ink = 0;
  for (let i = 3; i < d.length; i += 4) {{ sum = (sum * 31 + d[i] + i) % 2147483647; ink += d[i] > 0; }}
  return {{shown: !c.hidden && getComputedStyle(c).opacity !== '0', sum, ink}};
}}"""


def test_leaving_the_columns_shows_the_overview_of_what_is_chosen_now(page, app):
    # The overview is kept (hidden) while a token has the focus, and shown again on leaving; it must then be the
    # overview of the layer chosen now, even when the layer changed while a pinned token held the focus.
    open_view(page, app)
    page.mouse.move(2, 2)
    wait_state(page, lambda s: s["inked"] == "whole")  # rows off screen are inked in idle time
    layer3 = page.evaluate(OVERVIEW_JS)
    assert layer3["shown"] and layer3["ink"] > 0
    page.locator('.hv button[data-layer="2"]').click()
    wait_state(page, lambda s: s["layer"] == "2" and not s["focus"] and s["inked"] == "whole")
    layer2 = page.evaluate(OVERVIEW_JS)
    assert layer2["shown"] and layer2["sum"] != layer3["sum"]
    page.locator('.hv button[data-layer="3"]').click()
    wait_state(page, lambda s: s["layer"] == "3" and s["inked"] == "whole")
    assert page.evaluate(OVERVIEW_JS) == layer3

    token(page, "left", 4).hover()
    wait_state(page, lambda s: s["focus"] == "q4" and s["lines"])
    assert not page.evaluate(OVERVIEW_JS)["shown"]  # the focus lines alone
    page.mouse.move(2, 2)
    wait_state(page, lambda s: not s["focus"])
    assert page.evaluate(OVERVIEW_JS) == layer3  # shown again, the same picture

    token(page, "left", 4).click()  # pinned: the focus stays while the mouse goes to the layer buttons
    page.locator('.hv button[data-layer="2"]').click()
    wait_state(page, lambda s: s["layer"] == "2" and s["pinned"] and s["lines"])
    assert not page.evaluate(OVERVIEW_JS)["shown"]
    token(page, "left", 4).click()  # released
    page.mouse.move(2, 2)
    wait_state(page, lambda s: not s["focus"] and not s["pinned"] and s["inked"] == "whole")
    assert page.evaluate(OVERVIEW_JS) == layer2  # layer 2's overview, not the kept picture of layer 3


INKED_LOG_JS = f"""() => {{
  const r = ({HV})();
  window.__inked = [];
  new MutationObserver(() => window.__inked.push(r.dataset.inked)).observe(r, {{attributeFilter: ['data-inked']}});
}}"""
# The overview's opacity per pixel kept (keep) or compared with the kept one: pixels whose opacity differs by more
# than 3 of 255, the largest difference, and the opacity summed over strips of 50 rows, now and kept.
ALPHA_JS = f"""(keep) => {{
  const c = ({HV})().querySelector('canvas.hv-canvas');
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const a = new Uint8Array(d.length / 4);
  for (let i = 0; i < a.length; i++) a[i] = d[4 * i + 3];
  if (keep) {{ window.__alpha = a; return a.length; }}
  const k = window.__alpha, strips = [];
  let over = 0, most = 0;
  for (let i = 0; i < a.length; i++) {{
    const diff = Math.abs(a[i] - k[i]);
    over += diff > 3;
    most = Math.max(most, diff);
    const s = Math.floor(i / c.width / 50);
    strips[s] = strips[s] || [0, 0];
    strips[s][0] += a[i];
    strips[s][1] += k[i];
  }}
  return {{n: a.length, over, most, strips}};
}}"""


def test_the_overview_inked_in_bands_is_the_picture_inked_at_once(page, app):
    """Without a GPU a canvas rasterises each stroke over its whole height: the overview inks the rows on screen
    first and the rest in idle time, half a screen a step, each band clipped to its rows. On a screen tall enough for
    every row it is inked at once; on a short one in bands, and the picture is the same up to antialiasing (the clip
    changes Skia's rounding: measured, 0.1 % of pixels more than 3 of 255 apart, none more than 54)."""
    text = " ".join([settings.DEFAULT_SENTENCE] * 6)  # 86 tokens: about 1,700 px of rows
    page.set_viewport_size({"width": 1280, "height": 3200})
    open_view(page, app, {"text": text})
    page.mouse.move(2, 2)
    s = wait_state(page, lambda s: s["inked"] == "whole" and not s["loading"] and s["layer"] == "3")
    assert int(s["t"]) > 80
    assert page.evaluate(ALPHA_JS, True) > 500_000
    page.set_viewport_size({"width": 1280, "height": 700})
    page.evaluate(INKED_LOG_JS)
    for layer in ("2", "3"):
        page.locator(f'.hv button[data-layer="{layer}"]').click()
        wait_state(page, lambda s, layer=layer: s["layer"] == layer and s["inked"] == "whole")
    assert "part" in page.evaluate("window.__inked"), "inked in one pass: the rows off screen were not left for later"
    got = page.evaluate(ALPHA_JS, False)
    assert got["over"] <= got["n"] * 0.003 and got["most"] <= 96, got  # no line, band or strip missing or moved
    for now, kept in got["strips"]:
        assert abs(now - kept) <= 0.01 * kept + 500, got["strips"]
    assert_clean(page, app)


# Each token row's left edge and width; the token row under a point (in the component's shadow root).
ROWS_JS = f"""() => [...({HV})().querySelectorAll('.hv-tok')].map(e => {{
  const b = e.getBoundingClientRect(); return [Math.round(b.left), Math.round(b.width)]; }})"""
ROWS_TOPS_JS = f"""() => [...({HV})().querySelectorAll('.hv-tok')].map(e => Math.round(e.getBoundingClientRect().top))"""
UNDER_JS = f"""([x, y]) => {{
  const t = ({HV})().getRootNode().elementFromPoint(x, y)?.closest('.hv-tok');
  if (!t) return null;
  const col = t.parentElement;
  return [col.classList.contains('hv-right') ? 'right' : 'left', [...col.querySelectorAll('.hv-tok')].indexOf(t)];
}}"""
# The numbers in sight (on their box's first line; the rest wrapped below it, out of sight): each whole or cut, per
# row; and every token's text whether cut (an ellipsis).
NUMBERS_JS = f"""() => {{
  const r = ({HV})();
  const rows = [...r.querySelectorAll('.hv-left .hv-w')].map(w => {{
    const b = w.getBoundingClientRect();
    return [...w.children].filter(s => s.textContent && s.getBoundingClientRect().top < b.bottom - 1).map(s => {{
      const n = s.getBoundingClientRect(); return n.left >= b.left - 0.5 && n.right <= b.right + 0.5; }}); }});
  const cut = [...r.querySelectorAll('.hv-text')].filter(t => t.scrollWidth > t.clientWidth).map(t => t.textContent);
  return {{rows, cut}};
}}"""


def test_rows_stay_put_from_query_to_key_and_numbers_show_whole(page, app):
    """Both columns keep the numbers' room, so hovering a key (here at its left edge) moves no row and the key stays
    under the pointer: when only the keys' column had that room, the queries' column widened on a key's hover and
    slid the key away from the pointer. With all 12 heads the numbers that fit show whole and no token is cut."""
    open_view(page, app)
    rows = page.evaluate(ROWS_JS)
    token(page, "left", 5).hover()
    wait_state(page, lambda s: s["focus"] == "q5" and s["lines"])
    assert page.evaluate(ROWS_JS) == rows
    box = token(page, "right", 5).bounding_box()
    at = [box["x"] + 2, box["y"] + box["height"] / 2]
    page.mouse.move(*at)
    wait_state(page, lambda s: s["focus"] == "k5" and s["lines"])
    assert page.evaluate(ROWS_JS) == rows
    assert page.evaluate(UNDER_JS, at) == ["right", 5]

    page.locator(".hv button", has_text="Several heads").click()
    for h in range(12):
        if h != settings.SETTINGS["head"].default:
            page.locator(f'.hv button[data-head="{h}"]').click()
    wait_state(page, lambda s: s["heads"] == ",".join(map(str, range(12))))
    box = token(page, "right", 5).bounding_box()  # the numbers' room is now twelve numbers wide
    at = [box["x"] + 2, box["y"] + box["height"] / 2]
    rows = page.evaluate(ROWS_JS)
    page.mouse.move(*at)
    s = wait_state(page, lambda s: s["focus"] == "k5" and len({h for _, _, h, _ in s["lines"]}) == 12)
    shown = page.evaluate(NUMBERS_JS)
    assert len(shown["rows"]) == len(s["left"]) and all(shown["rows"]), shown  # numbers on every query's row
    assert all(all(row) for row in shown["rows"]), shown["rows"]  # each whole
    assert shown["cut"] == [], shown["cut"]
    assert page.evaluate(ROWS_JS) == rows
    assert page.evaluate(UNDER_JS, at) == ["right", 5]
    assert_clean(page, app)


@pytest.mark.parametrize("size", [(1024, 768), (420, 900)], ids=["projector-1024", "phone-420"])
def test_the_row_under_the_pointer_is_the_row_hovered(browser, app, size):
    """Where the overview's status takes two lines and a hover's one (a 1024 px projector, a phone), the shorter text
    pulled every row up by a line as the hover landed, and the row that took the focus was the next one down. The
    status line now keeps its height while its width stays."""
    page = new_page(browser)
    page.set_viewport_size({"width": size[0], "height": size[1]})
    try:
        open_view(page, app, {"present": "true"} if size[0] > 800 else None)
        token(page, "left", 5).scroll_into_view_if_needed()
        rows = page.evaluate(ROWS_TOPS_JS)
        for side, i in [("left", 5), ("right", 9), ("left", 12)]:
            box = token(page, side, i).bounding_box()
            at = [box["x"] + box["width"] / 2, box["y"] + box["height"] / 2]
            page.mouse.move(*at)
            wait_state(page, lambda s, want=f"{'q' if side == 'left' else 'k'}{i}": s["focus"] == want)
            assert page.evaluate(ROWS_TOPS_JS) == rows
            assert page.evaluate(UNDER_JS, at) == [side, i]
        assert_clean(page, app)
    finally:
        close_tab(page)
