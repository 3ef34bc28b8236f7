"""One registry per fact: everything keyed by a tap, a device or a page is complete against its one table.

A new tap in encoder.model.PLACEMENTS, a device in encoder.DEVICES or a page in ui/pages.PAGES fails here, with the
table that lacks it named, until every place keyed by it has its entry.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import encoder
import ui
from encoder.model import PLACEMENTS, flow_order
from encoder.viz import diagram
from ui import captions, pages, settings, steps

ROOT = Path(__file__).resolve().parents[1]


def test_the_tap_vocabulary_is_the_wiring_tables():
    assert set(encoder.TAPS) == {wire.tap for wires in PLACEMENTS.values() for wire in wires}
    assert settings.SETTINGS["tap"].options == encoder.TAPS


@pytest.mark.parametrize("tap", encoder.TAPS)
def test_every_tap_has_a_fill_a_caption_and_prose(tap):
    assert tap in diagram.FILL, "diagram.FILL lacks a colour for this tap"
    assert tap in captions.TAP_CAPTIONS, "captions.TAP_CAPTIONS lacks a line for this tap"
    for norm in PLACEMENTS:
        assert tap in steps.PROSE[norm], f"steps.PROSE[{norm!r}] lacks this tap's title and text"
        assert captions.tap_caption(norm, tap).startswith(f"{tap}: ")


def test_nothing_is_keyed_by_a_tap_that_does_not_exist():
    assert set(diagram.FILL) == {*encoder.TAPS, diagram.FINAL, diagram.POSITIONS}
    assert set(captions.TAP_CAPTIONS) == set(encoder.TAPS)
    assert {norm: set(prose) for norm, prose in steps.PROSE.items()} == {norm: set(flow_order(norm)) for norm in PLACEMENTS}


def test_the_captions_name_taps_by_their_operation():
    assert captions.taps_of("ln1", "ln2") == ["norm1", "norm2"] and captions.taps_of("w1") == ["ffn_hidden"]
    assert captions.tap_caption("pre", "norm1") == "norm1: the first LayerNorm, of input"
    assert captions.tap_caption("post", "add2") == "add2: the second residual sum, ffn + norm1"
    with pytest.raises(ValueError, match="choose one of input"):
        captions.tap_caption("post", "q")


def test_one_device_list():
    assert settings.SETTINGS["device"].options == (settings.AUTO_DEVICE, *encoder.DEVICES)
    here = ui.available_devices()
    assert here[0] == settings.AUTO_DEVICE and here[-1] == "cpu" and set(here) <= set(settings.SETTINGS["device"].options)
    assert str(encoder.pick_device()) == encoder.available_devices()[0]


def test_page_files_are_named_after_their_url_paths():
    """A server's first request is routed by the file names in pages/ before the navigation exists (ui/pages.py): a
    URL path that is no file stem gets "Page not found" there, so every page's script is pages/<URL path>.py and the
    folder holds nothing else."""
    stems = {p.stem for p in (ROOT / pages.FOLDER).glob("*.py")}
    assert stems == set(pages.BY_PATH), "pages/ and ui/pages.PAGES must name the same pages"
    for entry in pages.PAGES:
        assert Path(entry.file) == Path(pages.FOLDER) / f"{entry.path}.py" and (ROOT / entry.file).is_file(), entry


def test_one_page_registry():
    paths = [entry.path for entry in pages.PAGES]
    assert len(set(paths)) == len(paths) and len({entry.title for entry in pages.PAGES}) == len(paths)
    assert [entry.default for entry in pages.PAGES].count(True) == 1
    assert all((ROOT / entry.file).is_file() and entry.icon.startswith(":material/") for entry in pages.PAGES)
    sections = [entry.section for entry in pages.PAGES]
    assert sections == sorted(sections, key=sections.index), "a section's pages stand together, in the sidebar's order"
    with pytest.raises(ValueError, match="/diagram"):
        pages.page("dataflow")
