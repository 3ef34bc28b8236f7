"""The pages on what the encoder is for (issue 13): Sentence embeddings, Token trajectories, Knock out heads.

AppTest runs them for the pretrained model and small custom models, follows what a class does (an example set,
a highlighted token, a knock-out and its Clear), and feeds them the hostile corpus. A Playwright test opens each
page by URL with its settings and checks that they are restored and written back.
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.parse

import numpy as np
import pytest
from playwright.sync_api import expect, sync_playwright

import ui
from devkit.apptest import text_box
from devkit.hostile_inputs import EMPTY_IDS, HOSTILE, IDS
from devkit.server import READY, launch, streamlit_server
from tests.app.test_app import SMALL_POST, SMALL_PRE, assert_clean, clear_caches, start
from ui import pages, purpose
from ui.state import STORE

EMBEDDINGS, TRAJECTORIES, KNOCKOUT = pages.page("embeddings").file, pages.page("trajectories").file, pages.page("knockout").file
PAGES = [EMBEDDINGS, TRAJECTORIES, KNOCKOUT]
SMALL_NONE = {"model": "custom", "d_model": "32", "num_heads": "4", "d_ff": "64", "num_layers": "2",
              "positional": "none"}


def charts(at) -> dict[str, dict]:
    """The page's plotly figures by title."""
    out = {}
    for el in at.get("plotly_chart"):
        spec = json.loads(el.proto.spec)
        out[spec["layout"]["title"]["text"]] = spec
    return out


def chart(at, prefix: str) -> dict:
    found = [spec for title, spec in charts(at).items() if title.startswith(prefix)]
    assert found, f"no chart titled {prefix!r}: {list(charts(at))}"
    return found[0]


def numbers(values) -> np.ndarray:
    """A plotly array from the JSON spec: a list, or the packed {'dtype', 'bdata', 'shape'} form."""
    if isinstance(values, dict) and "bdata" in values:
        a = np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"])
        return a.reshape([int(n) for n in str(values["shape"]).split(",")]) if "shape" in values else a
    return np.asarray(values, dtype=float)


def open_page(page: str, params: dict | None = None):
    at = start(params)
    at.switch_page(page).run()
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    return at


@pytest.fixture(autouse=True, scope="module")
def fresh_caches():
    clear_caches()
    yield
    clear_caches()


@pytest.mark.parametrize("params", [{}, SMALL_POST, SMALL_PRE, SMALL_NONE],
                         ids=["pretrained", "custom-post", "custom-pre", "custom-no-positions"])
@pytest.mark.parametrize("page", PAGES)
def test_every_new_page_runs(page, params):
    at = open_page(page, params)
    assert at.get("plotly_chart"), "every page draws at least one chart"


def test_example_set_gives_paraphrases_more_similarity_than_unrelated_text():
    at = open_page(EMBEDDINGS)
    name = "Paraphrase, negation, unrelated"
    first, *rest = purpose.SENTENCE_SETS[name]
    assert (first, rest[0], rest[-1]) == ("A man is playing guitar.", "Someone plays an instrument.",
                                          "The stock market fell.")
    [button] = [b for b in at.button if b.label == name]
    button.click().run()
    assert_clean(at)
    store = at.session_state[STORE]
    assert store["text"] == first and store["sentences"].splitlines() == rest
    assert text_box(at, "text").value == "A man is playing guitar."
    sim = numbers(chart(at, "Cosine similarity")["data"][0]["z"])
    assert sim.shape == (4, 4)
    np.testing.assert_allclose(sim, sim.T, atol=1e-6)
    np.testing.assert_allclose(np.diag(sim), 1, atol=1e-5)
    paraphrase, unrelated = sim[0, 1], sim[0, 3]
    assert paraphrase > 0.5 > 0.1 > unrelated, (paraphrase, unrelated)
    assert any("trained on pairs of related sentences" in c.value for c in at.caption)


def test_cls_pooling_and_a_random_model_say_what_their_numbers_mean():
    at = open_page(EMBEDDINGS, {"pool": "cls"})
    assert any("never trained for similarity" in c.value for c in at.caption)
    at = open_page(EMBEDDINGS, SMALL_POST)
    assert any("random weights" in c.value for c in at.caption)
    assert not any("trained on pairs" in c.value for c in at.caption)


def test_without_positions_two_word_orders_give_the_same_pooled_vector():
    at = open_page(EMBEDDINGS, {"text": "The dog bit the man."})
    table = at.dataframe[-1].value
    assert list(table["model"]) == ["this model (positional = learned)", "same weights, positional = none"]
    cos = list(table["cosine(original, reversed)"])
    assert cos[1] == pytest.approx(1, abs=1e-6) and cos[0] < 0.999
    assert table["largest |difference| in a dimension"].iloc[1] < 1e-5
    assert [link.proto.page for link in at.get("page_link")] == ["word-order"]  # the Position page's url_path
    at = open_page(EMBEDDINGS, SMALL_NONE | {"text": "The dog bit the man."})
    table = at.dataframe[-1].value
    assert len(table) == 1 and table["cosine(original, reversed)"].iloc[0] == pytest.approx(1, abs=1e-6)


def test_more_than_eight_sentences_are_cut_with_a_notice():
    lines = "\n".join(f"Sentence number {i}." for i in range(12))
    at = open_page(EMBEDDINGS, SMALL_POST | {"sentences": lines})
    assert any("Only the first 8" in i.value and "5 more" in i.value for i in at.info)
    assert numbers(chart(at, "Cosine similarity")["data"][0]["z"]).shape == (8, 8)


def test_highlighted_tokens_are_drawn_and_it_moves_toward_animal():
    at = open_page(TRAJECTORIES)
    spec = chart(at, "Token trajectories")
    names = [d["name"] for d in spec["data"]]
    assert names == ["other tokens", "it (10)", "animal (2)", "street (8)"]
    depth = 6 + 1
    for d in spec["data"][1:]:
        assert len(numbers(d["x"])) == depth
    assert "of the variance" in spec["layout"]["xaxis"]["title"]["text"]
    assert any("of the variance" in c.value and "flattened" in c.value for c in at.caption)
    lines = {d["name"]: numbers(d["y"]) for d in chart(at, "How similar")["data"]}
    animal, street = lines["animal (2)"], lines["street (8)"]
    assert animal[-1] > animal[0] + 0.3, "'it' grows more like 'animal' through the layers"
    assert animal[-1] > street[-1], "and ends closer to 'animal' than to 'street'"
    at.multiselect(key="ms:follow").unselect("street").run()
    assert_clean(at)
    assert at.session_state[STORE]["follow"] == "it animal"
    assert [d["name"] for d in chart(at, "Token trajectories")["data"]][1:] == ["it (10)", "animal (2)"]
    at.multiselect(key="ms:follow").unselect("animal").run()
    assert any("Highlight two or more tokens" in i.value for i in at.info)


def test_knocking_out_nothing_changes_nothing_and_a_head_changes_the_output():
    at = open_page(KNOCKOUT)
    bars = numbers(chart(at, "Change of each token")["data"][0]["y"])
    assert bars.shape == (16,) and not bars.any(), "knocking out nothing must change nothing"
    assert not numbers(chart(at, "How much each layer")["data"][0]["y"]).any()
    intact, knocked = (m.value for m in at.metric[2:4])
    assert intact == knocked

    at.multiselect(key="ms:ablate").select("3.1").run()
    assert_clean(at)
    assert at.session_state[STORE]["ablate"] == "3.1"
    bars = numbers(chart(at, "Change of each token")["data"][0]["y"])
    assert (bars > 1e-3).all(), "zeroing a head of layer 3 moves every token's output"
    moved = numbers(chart(at, "How much each layer")["data"][0]["y"])
    assert not moved[:4].any() and (moved[4:] > 1e-4).all()
    assert at.slider(key="w:layer").min == 4, "the comparison shows the layers after the knock-out"
    pair = chart(at, "Attention, layer 4, head 1")  # the intact and the knocked-out map, side by side
    assert [a["text"] for a in pair["layout"]["annotations"]] == ["<b>Intact</b>", "<b>Knocked out</b>"]
    np.testing.assert_array_equal(numbers(pair["data"][0]["z"]), ui.frame(at.session_state[STORE]).trace.attention[4, 1].numpy())
    assert not np.array_equal(numbers(pair["data"][1]["z"]), numbers(pair["data"][0]["z"]))
    intact, knocked = (m.value for m in at.metric[2:4])
    assert intact != knocked

    at.multiselect(key="ms:ablate").select("4.ffn").run()
    assert at.session_state[STORE]["ablate"] == "3.1,4.ffn"
    [clear] = [b for b in at.button if b.label == "Clear"]
    clear.click().run()
    assert_clean(at)
    assert at.session_state[STORE]["ablate"] == ""
    assert not numbers(chart(at, "Change of each token")["data"][0]["y"]).any()


def test_a_whole_sublayer_can_be_knocked_out_on_a_small_model():
    at = open_page(KNOCKOUT, SMALL_PRE | {"ablate": "0.attn,1.ffn"})
    assert at.multiselect(key="ms:ablate").value == ["0.attn", "1.ffn"]
    assert numbers(chart(at, "Change of each token")["data"][0]["y"]).min() > 0


def test_bad_knockouts_in_the_url_are_named_and_the_rest_applied():
    huge = "1" * 5000  # more digits than int() reads
    at = open_page(KNOCKOUT, SMALL_POST | {"ablate": f"99.99,3.x,<b>x</b>,1.ffn,,9,{huge},0.2"})
    warnings = " ".join(w.value for w in at.warning)
    for part in ("99\\.99", "3\\.x", "\\<b\\>x\\<\\/b\\>"):  # named, and escaped for Markdown
        assert part in warnings, warnings
    assert "and 2 more" in warnings and huge[:100] not in warnings
    assert "e\\.g\\. 1\\.1" in warnings, "the example names a knock-out this model has"
    assert at.multiselect(key="ms:ablate").value == ["0.2", "1.ffn"]


@pytest.mark.parametrize(("name", "text"), HOSTILE, ids=IDS)
def test_hostile_sentences_render_on_the_new_pages(name, text):
    params = {"model": "custom", "d_model": "32", "num_heads": "4", "d_ff": "64", "num_layers": "2"}
    at = start(params)
    text_box(at, "text").input(text).run()
    for page in PAGES:
        at.switch_page(page).run()
        assert_clean(at)
        assert not at.error, (page, [e.value for e in at.error])
        if name in EMPTY_IDS:  # the frame's prompt instead of the page
            assert any("Type a sentence" in i.value for i in at.info) and not at.get("plotly_chart")
        elif page == EMBEDDINGS:
            text_box(at, "sentences").input(f"{text[:300]}\nA plain sentence.\n{text[-300:]}").run()
            assert_clean(at)
            assert not at.error, [e.value for e in at.error]
        for el in at.get("plotly_chart"):
            spec = el.proto.spec.lower()
            assert "<script" not in spec and "<b>" not in spec and "<img" not in spec


# ----------------------------------------------------------------------------------------------- browser
def _link(base: str, path: str, params: dict) -> str:
    return f"{base}/{path}?{urllib.parse.urlencode(params, quote_via=urllib.parse.quote)}"


def _settle(page, timeout: float = 120_000) -> None:
    page.wait_for_selector(READY, timeout=timeout)
    page.wait_for_function("""(ready) => document.querySelector(ready)
        && [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].every(c => c.querySelector('svg.main-svg'))
        && document.querySelectorAll('[data-testid="stPlotlyChart"]').length > 0""", arg=READY, timeout=timeout,
                           polling=200)


def _chip_labels(page, key: str):
    """The chosen options' labels a multiselect shows (its container carries the class st-key-<key>)."""
    return page.locator(f".st-key-{key} .react-aria-ComboBox [data-tag] > span[title]")


def _chips(page, key: str) -> list[str]:
    return _chip_labels(page, key).all_inner_texts()


def _query(page) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query, keep_blank_values=True)


@pytest.mark.browser
def test_each_new_page_opens_by_url_with_its_settings_restored():
    text = "A man is playing guitar."
    more = "Someone plays an instrument.\nThe stock market fell."
    with streamlit_server(env={"STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none"}) as (url, proc), sync_playwright() as pw:
        threading.Thread(target=proc.stdout.read, daemon=True).start()  # a full pipe would block the server
        browser = launch(pw)
        page = browser.new_context(viewport={"width": 1440, "height": 1300}).new_page()

        page.goto(_link(url, "embeddings", {"text": text, "sentences": more, "pool": "cls"}))
        _settle(page)
        expect(page.get_by_role("textbox", name="Sentence", exact=True)).to_have_value(text)
        expect(page.get_by_role("textbox", name="More sentences, one per line")).to_have_value(more)
        expect(page.locator(".st-key-w-pool").get_by_role("radio", name="[CLS] vector", exact=True)).to_be_checked()
        chart = page.locator('[data-testid="stPlotlyChart"]').first
        chart_text = chart.inner_text()
        rows = chart.evaluate("c => [...c.querySelectorAll('.ytick text')].map(t => [...t.querySelectorAll('tspan.line')]"
                              ".map(l => l.textContent).join(' ') || t.textContent)")  # a label may take two lines
        assert "1 · A man is playing guitar." in rows and "3 · The stock market fell." in rows, rows
        assert "[CLS]" in chart_text  # the title names the pooling
        assert _query(page)["pool"] == ["cls"] and _query(page)["sentences"] == [more]

        page.goto(_link(url, "trajectories", {"follow": "it street"}))
        _settle(page)
        # its own widget, once drawn (the page before's charts can satisfy _settle while this one's run goes on)
        expect(_chip_labels(page, "ms-follow")).to_have_text(["it", "street"], timeout=120_000)
        legend = page.locator('[data-testid="stPlotlyChart"]').first.locator(".legendtext").all_text_contents()
        assert legend == ["other tokens", "it (10)", "street (8)"], legend
        assert _query(page)["follow"] == ["it street"]

        page.goto(_link(url, "knockout", {"ablate": "3.1,4.attn"}))
        _settle(page)
        assert _chips(page, "ms-ablate") == ["L3 H1", "L4 attention (all heads)"]
        assert _query(page)["ablate"] == ["3.1,4.attn"]
        page.get_by_role("button", name="Clear", exact=True).click()
        page.wait_for_function("() => !location.search.includes('ablate')", timeout=60_000, polling=100)
        _settle(page)
        assert _chips(page, "ms-ablate") == []
        assert not page.locator('[data-testid="stException"]').count()
        browser.close()
