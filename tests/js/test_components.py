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
COMPONENTS = ("headview", "heatmap")


def node() -> str:
    path = shutil.which("node")
    if path is None:
        pytest.fail("node is not installed: `apt-get install nodejs` (the components' tests run under `node --test`)")
    return path


def fake_trace(att: torch.Tensor):
    L, H, T, _ = att.shape
    return type("T", (), dict(seq_len=T, num_layers=L, num_heads=H, tokens=[f"<t{i}>" for i in range(T)], text="x",
                              attention=att))


def test_node_unit_tests_pass():
    files = sorted(str(p) for p in HERE.glob("*.test.mjs"))
    assert len(files) >= 3, files
    done = subprocess.run([node(), "--test", *files], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    counts = dict(line[2:].split(" ", 1) for line in done.stdout.splitlines() if line.startswith(("# pass", "# fail")))
    assert int(counts["fail"]) == 0 and int(counts["pass"]) >= 20, counts


def test_the_base_is_joined_before_each_component_as_node_loads_it():
    base = (HERE.parents[1] / "ui" / "component_base.js").read_text(encoding="utf-8")
    for stem in COMPONENTS:
        own = (HERE.parents[1] / "ui" / f"{stem}.js").read_text(encoding="utf-8")
        assert components.joined(stem, "js") == base + "\n" + own  # what tests/js/load.mjs evaluates
        assert "export default" in own and "export default" not in base


@pytest.mark.parametrize("stem", COMPONENTS)
def test_the_registered_javascript_reads_the_python_payload(tmp_path, stem):
    """payload.build's uint16 (≤ 128 tokens) and deflated 8-bit (longer) payloads, with a float32 tail, decoded by
    the component's registered module: every weight within half a step of the trace, the tail exact."""
    gen = torch.Generator().manual_seed(2)
    short = fake_trace(torch.rand(2, 3, 5, 5, generator=gen).softmax(-1))
    long = fake_trace(torch.rand(3, 2, 130, 130, generator=gen).pow(8).softmax(-1))
    module = tmp_path / f"{stem}.mjs"
    module.write_text(components.joined(stem, "js"), encoding="utf-8")
    cases = []
    for n, (trace, levels) in enumerate([(short, payload.LEVELS), (long, payload.LEVELS_8)]):
        tail = trace.attention[1, 1].numpy().astype("<f4")
        data = payload.build(trace, dict(layer=1, head=1, avg=False, query=0), name="n") + tail.tobytes()
        (tmp_path / f"{n}.bin").write_bytes(data)
        cases.append((trace, levels, tail))
    done = subprocess.run([node(), str(HERE / "decode_payload.mjs"), str(module), *(str(tmp_path / f"{n}.bin")
                                                                                   for n in range(len(cases)))],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    for got, (trace, levels, tail) in zip(json.loads(done.stdout), cases, strict=True):
        L, H, T = trace.num_layers, trace.num_heads, trace.seq_len
        assert got["header"]["tokens"] == trace.tokens and got["header"]["T"] == T
        assert got["held"] == ",".join(map(str, range(L)))
        for layer in range(L):
            shown = np.array(got["values"][str(layer)]).reshape(H, T, T)
            err = np.abs(shown - trace.attention[layer].double().numpy()).max()
            assert err <= 0.5 / levels + 1e-7, (levels, layer, err)
        assert np.array_equal(np.array(got["tail"], np.float32), tail.ravel())
