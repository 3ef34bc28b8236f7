"""The layers of the code base point one way: the model library knows nothing of plots or Streamlit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOADED = """
import json, sys
for name in sys.argv[1:]:
    __import__(name)
print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))
"""


def top_level_modules_after(*imports: str) -> set[str]:
    """The top-level packages a fresh interpreter has loaded after importing `imports`."""
    done = subprocess.run([sys.executable, "-c", LOADED, *imports], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout))


def test_the_model_library_imports_no_plotting_no_streamlit_and_no_transformers():
    loaded = top_level_modules_after("encoder", "encoder.config", "encoder.model", "encoder.trace", "encoder.tokenizer",
                                     "encoder.pretrained", "encoder.families", "encoder.rotary", "encoder.window",
                                     "encoder.knockout")
    assert "torch" in loaded and "tokenizers" in loaded  # the check sees real imports
    banned = {"streamlit", "plotly", "graphviz", "transformers"}  # transformers is the tests' oracle, never the model
    assert not loaded & banned, sorted(loaded & banned)


@pytest.mark.parametrize("package", ["encoder.analysis", "encoder.viz"])
def test_analysis_and_figures_never_import_streamlit(package):
    modules = sorted(p.stem for p in (ROOT / package.replace(".", "/")).glob("*.py") if p.stem != "__init__")
    assert modules, package
    loaded = top_level_modules_after(*(f"{package}.{m}" for m in modules))
    assert "streamlit" not in loaded
