"""Save every page of the app at projector, laptop and phone widths into artifacts/screenshots/ (git-ignored).

    .venv-test/bin/python -m scripts.screenshots                 # pretrained model, every page, four sizes
    .venv-test/bin/python -m scripts.screenshots --model custom  # a small custom Pre-LN GELU model instead
    .venv-test/bin/python -m scripts.screenshots --pages heatmaps side-by-side --sizes 1280x720p
    .venv-test/bin/python -m scripts.screenshots --pages inside-a-head --set measure=value  # more URL settings
    .venv-test/bin/python -m scripts.screenshots --lesson pre-ln-post-ln  # every slide of a lesson, as played
    .venv-test/bin/python -m scripts.screenshots --model modern   # the sidebar's ModernBERT-style preset
    ENCODER_EXPLORER_MODELS=DIR .venv-test/bin/python -m scripts.screenshots --param model=ckpt:NAME  # a checkpoint

Sizes: 1024x768 and 1280x720 in presentation mode (what a classroom projector shows: one viewport, the sidebar
folded away), 1440x900 and 420x900 without it (full page). A size ending in "p" turns presentation mode on.
Starts its own `streamlit run app.py` on a free port and drives Debian's Chromium with Playwright.
"""

from __future__ import annotations

import argparse
import threading
import time
import urllib.parse
from pathlib import Path

from playwright.sync_api import sync_playwright

from devkit.server import READY, launch, streamlit_server
from ui import pages, settings

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "artifacts" / "screenshots"
DEFAULT_PATH = next(entry.path for entry in pages.PAGES if entry.default)  # served at "/"
SIZES = ("1024x768p", "1280x720p", "1440x900", "420x900")
MAIN = '[data-testid="stMain"]'
FIGURE = '[data-testid="stMain"] :is([data-testid="stPlotlyChart"], [data-testid="stGraphVizChart"])'  # first one
MODELS = {
    "pretrained": {},
    "custom": {"model": "custom", "d_model": "64", "num_heads": "4", "d_ff": "256", "num_layers": "2", "norm": "pre",
               "activation": "gelu", "positional": "learned"},
    "modern": {"model": "custom"} | {k: settings.SETTINGS[k].format(v) for k, v in settings.PRESETS["ModernBERT-style"].items()},
}
# Idle for `ms` with the frame drawn and every chart that has started drawing finished (plotly and graphviz SVGs).
SETTLED_JS = """([ready, ms]) => {
  const ok = document.querySelector(ready) && document.querySelector('[data-testid="stMain"] h1')
    && [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].every(c => c.querySelector('svg.main-svg'));
  const now = performance.now();
  if (!ok) { window.__settledSince = undefined; return false; }
  if (window.__settledSince === undefined) window.__settledSince = now;
  return now - window.__settledSince >= ms;
}"""


def parse_size(size: str) -> tuple[int, int, bool]:
    present = size.endswith("p")
    w, h = size.rstrip("p").split("x")
    return int(w), int(h), present


def shoot(browser, url: str, path: str, size: str, params: dict[str, str], timeout_ms: int = 240_000,
          tag: str = "", name: str = "") -> Path:
    width, height, present = parse_size(size)
    query = params | ({"present": "true"} if present else {})
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    try:
        page.goto(f"{url}/{path}?{urllib.parse.urlencode(query)}")
        page.evaluate("window.__settledSince = undefined")
        page.wait_for_function(SETTLED_JS, arg=[READY, 800], timeout=timeout_ms, polling=200)
        name = f"{name or path or DEFAULT_PATH}{tag}_{width}x{height}{'_present' if present else ''}.png"
        target = OUT / name
        if present:  # what the projector shows: before scrolling, and with the main figure scrolled to the top
            page.screenshot(path=str(target.with_name(target.stem + "_top.png")))
            figure = page.locator(FIGURE).first
            if figure.count():
                figure.evaluate("e => e.scrollIntoView({block: 'start'})")
                page.screenshot(path=str(target.with_name(target.stem + "_figure.png")))
        # The whole page: Streamlit scrolls inside its main area, so the window grows to that area's height.
        full = page.evaluate(f"document.querySelector('{MAIN}').scrollHeight")
        page.set_viewport_size({"width": width, "height": min(max(full + 80, height), 12_000)})
        page.evaluate("window.__settledSince = undefined")
        page.wait_for_function(SETTLED_JS, arg=[READY, 800], timeout=timeout_ms, polling=200)
        page.screenshot(path=str(target))
        return target
    finally:
        context.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(MODELS), default="pretrained")
    parser.add_argument("--pages", nargs="*", help="URL paths (default: every page of ui/pages.py)")
    parser.add_argument("--sizes", nargs="*", default=list(SIZES))
    parser.add_argument("--text", help="the sentence (default: the app's)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="more URL settings, e.g. measure=value; they are added to the file names")
    parser.add_argument("--lesson", help="instead of pages: every slide of this lesson as the player shows it (a "
                                         "built-in's name or folder:NAME), named lesson-<name>-<slide>")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="any other setting for the URL, e.g. model=ckpt:NAME or compare=models (repeatable)")
    args = parser.parse_args(argv)
    extra = dict(item.split("=", 1) for item in args.set + args.param)
    params = dict(MODELS[args.model]) | ({"text": args.text} if args.text else {}) | extra
    tag = "".join(f"_{k}-{v}" for k, v in extra.items())
    paths = ([entry.url.lstrip("/") for entry in pages.PAGES] if not args.pages
             else ["" if p in ("", "/", DEFAULT_PATH) else p for p in args.pages])
    shots = [(path, params, "") for path in paths]
    if args.lesson:
        from ui import lessons  # the app's modules, loaded only for this

        lesson, _ = lessons.open_lesson(args.lesson)
        stem = args.lesson.replace(":", "-")
        shots = [(s.link()[0].lstrip("/"), s.link()[1] | {"lesson": args.lesson, "slide": str(n)}, f"lesson-{stem}-{n}")
                 for n, s in enumerate(lesson.slides, 1)]
    OUT.mkdir(parents=True, exist_ok=True)
    env = {"STREAMLIT_LOGGER_ENABLE_RICH": "false", "STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none"}
    with streamlit_server(env=env) as (url, proc), sync_playwright() as pw:
        threading.Thread(target=proc.stdout.read, daemon=True).start()  # a full pipe would block the server
        browser = launch(pw)
        for size in args.sizes:
            for path, query, name in shots:
                start = time.monotonic()
                target = shoot(browser, url, path, size, query, tag=tag, name=name)
                print(f"{target.relative_to(ROOT)}  ({time.monotonic() - start:.1f} s)", flush=True)
        browser.close()


if __name__ == "__main__":
    main()
