"""The components' JavaScript: its unit tests under node's test runner, and the Python payload read back by the
JavaScript that the app registers (ui/components.py's join), both in CI. Node is required: without it these fail."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from ui import components, payload

HERE = Path(__file__).parent
COMPONENTS = ("headview", "heatmap")  # the ones that read the attention payload
LESSON_COMPONENTS = ("lesson_keys", "lesson_file", "copy_link")  # the lesson player's keys, file opener, link box


def node() -> str:
    path = shutil.which("node")
    if path is None:
        pytest.fail("node is not installed: `apt-get install nodejs` (the components' tests run under `node --test`)")
    return path


def fake_trace(att: torch.Tensor):
    L, H, T, _ = att.shape
    tokens = [f"<t{i}>" for i in range(T)]
    return type("T", (), dict(seq_len=T, num_layers=L, num_heads=H, tokens=tokens, labels=[f"▁{t}" for t in tokens],
                              special_positions=(0, T - 1), text="x", attention=att))


def test_node_unit_tests_pass():
    files = sorted(str(p) for p in HERE.glob("*.test.mjs"))
    assert len(files) >= 3, files
    done = subprocess.run([node(), "--test", *files], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    counts = dict(line[2:].split(" ", 1) for line in done.stdout.splitlines() if line.startswith(("# pass", "# fail")))
    assert int(counts["fail"]) == 0 and int(counts["pass"]) >= 20, counts


def test_the_base_is_joined_before_each_component_as_node_loads_it():
    base = (HERE.parents[1] / "ui" / "component_base.js").read_text(encoding="utf-8")
    for stem in (*COMPONENTS, *LESSON_COMPONENTS, "panels"):
        own = (HERE.parents[1] / "ui" / f"{stem}.js").read_text(encoding="utf-8")
        assert components.joined(stem, "js") == base + "\n" + own  # what tests/js/load.mjs evaluates
        assert "export default" in own and "export default" not in base


def decode_in_node(tmp_path: Path, stem: str, payloads: list[bytes]) -> list[dict]:
    """Each payload as the component's registered module reads it (tests/js/decode_payload.mjs)."""
    module = tmp_path / f"{stem}.mjs"
    module.write_text(components.joined(stem, "js"), encoding="utf-8")
    files = []
    for n, data in enumerate(payloads):
        files.append(tmp_path / f"{n}.bin")
        files[-1].write_bytes(data)
    done = subprocess.run([node(), str(HERE / "decode_payload.mjs"), str(module), *map(str, files)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def assert_within_half_a_step(got: dict, maps: torch.Tensor, levels: int, top: torch.Tensor | None = None) -> None:
    """Every layer the browser holds of (L, H, T, T) maps, within half a step of each layer's top value."""
    L, H, T = maps.shape[0], maps.shape[1], maps.shape[-1]
    assert got["header"]["T"] == T and got["header"]["H"] == H and got["held"] == ",".join(map(str, range(L)))
    for layer in range(L):
        shown = np.array(got["values"][str(layer)]).reshape(H, T, T)
        step = (1.0 if top is None else float(top[layer])) / levels
        err = np.abs(shown - maps[layer].double().numpy()).max()
        assert err <= 0.5 * step * (1 + 1e-6) + 1e-7, (levels, layer, err, step)


@pytest.mark.parametrize("stem", COMPONENTS)
def test_the_registered_javascript_reads_the_python_payload(tmp_path, stem):
    """payload.build's uint16 (≤ 128 tokens) and deflated 8-bit (longer) payloads, with a float32 tail, decoded by
    the component's registered module: every weight within half a step of the trace, the tail exact."""
    gen = torch.Generator().manual_seed(2)
    traces = [fake_trace(torch.rand(2, 3, 5, 5, generator=gen).softmax(-1)),
              fake_trace(torch.rand(3, 2, 130, 130, generator=gen).pow(8).softmax(-1))]
    tails = [t.attention[1, 1].numpy().astype("<f4") for t in traces]
    payloads = [payload.build(t, dict(layer=1, head=1, avg=False, query=0), name="n") + tail.tobytes()
                for t, tail in zip(traces, tails, strict=True)]
    got = decode_in_node(tmp_path, stem, payloads)
    for shown, trace, tail, levels in zip(got, traces, tails, (payload.LEVELS, payload.LEVELS_8), strict=True):
        assert shown["header"]["tokens"] == trace.labels  # as the figures label them, for the eye
        assert shown["header"]["special"] == [0, trace.seq_len - 1]  # what "Hide" leaves out, by position
        assert_within_half_a_step(shown, trace.attention, levels)
        assert np.array_equal(np.array(shown["tail"], np.float32), tail.ravel())


@pytest.mark.parametrize("T", [9, 140])
def test_any_non_negative_map_ships_as_the_browser_reads_it(tmp_path, T):
    """The maps of the measures (encoder/analysis/measures.py): (L, T, T) or (L, H, T, T), values past 1 included,
    read back within half a step of each layer's top; negative or missing values are refused with a sentence."""
    gen = torch.Generator().manual_seed(3)
    trace = fake_trace(torch.rand(3, 2, T, T, generator=gen).softmax(-1))
    flat = torch.rand(3, T, T, generator=gen) * torch.tensor([0.5, 3.0, 40.0]).view(3, 1, 1)  # layer 0 within [0, 1]
    sel = dict(layer=0, head=0, avg=False, query=0)
    payloads = [payload.build(trace, sel, name="n", stack=flat), payload.build(trace, sel, name="n", stack=trace.attention)]
    got = decode_in_node(tmp_path, "heatmap", payloads)
    levels = payload.LEVELS if T <= payload.FULL_UP_TO else payload.LEVELS_8
    top = torch.tensor([1.0, float(flat[1].max()), float(flat[2].max())])
    assert got[0]["header"]["top"] == pytest.approx(top.tolist()) and got[0]["header"]["H"] == 1
    assert_within_half_a_step(got[0], flat.unsqueeze(1), levels, top)
    assert "top" not in got[1]["header"]  # attention: steps of 1/levels, as without a stack
    assert_within_half_a_step(got[1], trace.attention, levels)
    for bad in (flat - 1, flat.masked_fill(flat > 39, float("nan"))):
        with pytest.raises(ValueError, match="non-negative"):
            payload.build(trace, sel, name="n", stack=bad)


@pytest.mark.parametrize("T", [9, 140])
def test_the_attention_maps_payload_reads_back_in_the_browsers_code(tmp_path, T):
    """ui/heatmap.py's payload (a custom model's trace, raw attention and value-weighted beside it) read by the
    registered ui/heatmap.js: every stack's layers within half a step of the maps, the exact part's four decimals
    digit for digit Python's, file names as encoder/viz/export.py writes them."""
    from types import SimpleNamespace

    from encoder import EncoderConfig
    from encoder.viz import export
    from ui import get_trace, heatmap

    cfg = EncoderConfig(d_model=32, num_heads=2, d_ff=64, num_layers=2)
    key = (cfg.to_json(), "cpu", " ".join(["alpha beta gamma"] * 60)[: 6 * (T - 2)], False)
    trace = get_trace(*key)
    words = key[2].split()
    while trace.seq_len != T:  # trim or pad the sentence to exactly T tokens
        words = words[:-1] if trace.seq_len > T else [*words, "x"]
        key = (*key[:2], " ".join(words), False)
        trace = get_trace(*key)
    fr = SimpleNamespace(trace_key=key, trace_id="abc123", present=False)
    sel = dict(layer=1, head=1, avg=False, query=0, view="head", hide_special=True, beside=True, scale="fixed",
               measure="value")
    data = heatmap.data(fr, trace, sel, "custom", None)
    (tmp_path / "map.mjs").write_text(components.joined("heatmap", "js"), encoding="utf-8")
    (tmp_path / "map.bin").write_bytes(data)
    done = subprocess.run([node(), str(HERE / "decode_map.mjs"), str(tmp_path / "map.mjs"), str(tmp_path / "map.bin")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout)
    assert got["header"]["tokens"] == trace.tokens and got["header"]["specials"] == list(trace.special_positions)
    for name in ("value", "raw"):
        maps, top = heatmap.stack(fr, name, None)
        shown = got["stacks"][name]
        assert shown["id"] == f"abc123:{name}" and shown["held"] == "0,1"
        levels = payload.LEVELS if T <= payload.FULL_UP_TO else payload.LEVELS_8
        for layer, values in shown["values"].items():
            err = np.abs(np.array(values).reshape(maps.shape[1:]) - maps[int(layer)].double().numpy()).max()
            assert err <= 0.5 * top[int(layer)] / levels + 1e-7, (name, layer, err)
    keep = heatmap.kept(trace, True)
    exact = heatmap.plane(heatmap.stack(fr, "value", None)[0], sel, keep, True).numpy()
    assert got["exact"]["key"] == heatmap.exact_key(sel) == "value|-|1|1|1" and got["exact"]["K"] == len(keep)
    assert got["exact"]["text"] == [f"{float(v):.4f}" for v in exact.ravel()]
    names = got["header"]["names"]
    assert names == {"model": "custom", "words": export.sentence_words(trace)}
    assert export.export_name(trace, "value", "L1", "H1", model="custom") == "_".join(["custom", "value", "L1", "H1",
                                                                                       names["words"]])[:140]


# ------------------------------------------------------------------ the components' code served as files (issue 23)
ONCE = """
from tests.js.probe_component import mount
mount(key="probe", data={"link": "x", "label": "y"})
"""
BLOCKED = """
from pathlib import Path
from ui.components import register
register("blocked", "copy_link", root=Path({root!r}))(key="probe", data={{"link": "x", "label": "y"}})
"""


def test_a_components_code_is_written_once_whole_and_moves_with_its_digest(tmp_path):
    code = {ext: components.joined("copy_link", ext) for ext in ("js", "css")}
    paths = components.written("probe", "copy_link", code, tmp_path)
    assert paths is not None and paths["js"].endswith("/copy_link.js") and paths["css"].endswith("/copy_link.css")
    for ext, rel in paths.items():
        assert (tmp_path / "probe" / rel).read_text(encoding="utf-8") == code[ext]
    assert components.written("probe", "copy_link", code, tmp_path) == paths  # the same code, the same place
    changed = components.written("probe", "copy_link", {**code, "js": code["js"] + "\n// changed"}, tmp_path)
    assert changed["js"].split("/")[0] != paths["js"].split("/")[0]  # new code, a new folder: no stale copy
    assert not list(tmp_path.rglob("*.part"))
    # where the folder cannot be made (a file stands in its way) the code stays inline
    (tmp_path / "blocked").write_text("", encoding="utf-8")
    assert components.written("probe", "copy_link", code, tmp_path / "blocked") is None


def test_every_runtime_gets_the_code_as_a_file_and_no_run_carries_it(tmp_path):
    """A module is imported once, but AppTest gives each app its own runtime (a server has one): the folder is
    declared on the runtime a mount runs in. A run's message names the file and holds none of the code; where no
    folder can be written, the code is inline."""
    from streamlit.testing.v1 import AppTest

    for _ in range(3):
        at = AppTest.from_string(ONCE, default_timeout=60).run()
        assert not at.exception, [e.value for e in at.exception]
        (el,) = at.get("bidi_component")
        assert el.proto.component_name == "encoder_explorer.probe"
        assert el.proto.js_content == "" and el.proto.css_content == ""
        digest, name = el.proto.js_source_path.split("/")
        assert name == "copy_link.js" and el.proto.css_source_path == f"{digest}/copy_link.css"
        for ext in ("js", "css"):
            served = components.ASSETS / "probe" / digest / f"copy_link.{ext}"
            assert served.read_text(encoding="utf-8") == components.joined("copy_link", ext)
    (tmp_path / "blocked").write_text("", encoding="utf-8")
    at = AppTest.from_string(BLOCKED.format(root=str(tmp_path / "blocked")), default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    (el,) = at.get("bidi_component")
    assert el.proto.js_content == components.joined("copy_link", "js") and el.proto.js_source_path == ""


def test_a_folder_another_user_could_write_to_is_not_used(tmp_path):
    """In a shared /tmp another user could swap the code in a folder they can write to: such a root is refused."""
    code = {ext: components.joined("copy_link", ext) for ext in ("js", "css")}
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert components.written("probe", "copy_link", code, shared) is None
    shared.chmod(0o700)
    assert components.written("probe", "copy_link", code, shared) is not None
    assert components.ASSETS.name.endswith(f"-{components.OWNER}")
