"""load_pretrained() against transformers.BertModel on the same folder, and the loader's errors on broken folders."""

import json
import os
import shutil
import struct
import threading
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"  # the oracle reads the installed folder; it must never reach for the network
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, BertModel  # noqa: E402

from encoder import load_pretrained, run  # noqa: E402
from encoder.tokenizer import bundled_model_dir  # noqa: E402

LONG = "The encoder reads every token of this sentence at once, and attention decides which words matter. " * 30
SENTENCES = {
    "plain": "The quick brown fox jumps over the lazy dog.",
    "punctuation": "Wait... what?! (Yes) -- it's 100% true; isn't it? #hashtag @user e-mail: a.b@c.org",
    "accents": "Crème brûlée à la façon de Zoë: naïve café au lait in São Paulo, Ångström, Œuvre.",
    "emoji": "I love pizza 🍕🔥 so much 😂! 👩‍💻 codes.",
    "cjk": "我喜欢学习机器学习。東京は日本の首都です。한국어도 있어요.",
    "mask": "Paris is the [MASK] of France.",
    "long": LONG,
}


@pytest.fixture(scope="session")
def folder() -> Path:
    return bundled_model_dir()


@pytest.fixture(scope="session")
def ours(folder):
    return load_pretrained()


@pytest.fixture(scope="session")
def bert(folder):
    return BertModel.from_pretrained(str(folder), attn_implementation="eager").eval()


@pytest.fixture(scope="session")
def hf_tokenizer(folder):
    return AutoTokenizer.from_pretrained(str(folder))


def test_config_is_minilm(ours, folder):
    cfg = ours.cfg
    assert (cfg.d_model, cfg.num_heads, cfg.d_ff, cfg.num_layers) == (384, 12, 1536, 6)
    assert (cfg.activation, cfg.norm, cfg.positional, cfg.layer_norm_eps) == ("gelu", "post", "learned", 1e-12)
    assert (cfg.embed_norm, cfg.type_vocab_size, cfg.max_len, cfg.vocab_size) == (True, 2, 512, 30522)
    assert Path(ours.vocab_dir) == folder
    assert not ours.training


def test_long_sentence_is_longer_than_512_tokens(hf_tokenizer):
    assert len(hf_tokenizer(LONG)["input_ids"]) > 512


@pytest.mark.parametrize("name", list(SENTENCES))
def test_trace_equals_bert(name, ours, bert, hf_tokenizer):
    text = SENTENCES[name]
    trace = run(ours, text)
    expected = hf_tokenizer(text, truncation=True, max_length=512)
    assert trace.token_ids == expected["input_ids"]
    assert trace.tokens == expected.tokens()
    assert trace.truncated is (name == "long")
    if name == "long":
        assert len(trace.tokens) == 512 and trace.tokens[-1] == "[SEP]"
    with torch.no_grad():
        out = bert(torch.tensor([trace.token_ids]), output_attentions=True, output_hidden_states=True)
    hidden = torch.stack(out.hidden_states)[:, 0]  # (L + 1, T, D)
    attention = torch.stack(out.attentions)[:, 0]  # (L, H, T, T)
    assert trace.hidden_states.shape == hidden.shape and trace.attention.shape == attention.shape
    assert (trace.hidden_states - hidden).abs().max().item() <= 1e-4
    assert (trace.attention - attention).abs().max().item() <= 1e-4
    assert (trace.output - out.last_hidden_state[0]).abs().max().item() <= 1e-4


def test_special_and_unknown_tokens(ours, hf_tokenizer):
    trace = run(ours, SENTENCES["mask"])
    assert "[MASK]" in trace.tokens and trace.token_ids[trace.tokens.index("[MASK]")] == hf_tokenizer.mask_token_id
    assert "cafe" in run(ours, "café").tokens  # the uncased vocabulary strips accents


def test_padded_batch_equals_bert_with_attention_mask(ours, bert, hf_tokenizer):
    batch = hf_tokenizer([SENTENCES["plain"], SENTENCES["mask"], "Hi"], padding=True, return_tensors="pt")
    mask = batch["attention_mask"] == 0
    assert mask.any()
    with torch.no_grad():
        out, patterns, _ = ours(batch["input_ids"], mask)
        ref = bert(batch["input_ids"], attention_mask=batch["attention_mask"], output_attentions=True)
    real = ~mask
    assert (out - ref.last_hidden_state)[real].abs().max().item() <= 1e-4
    for ours_p, ref_p in zip(patterns, ref.attentions, strict=True):
        keys = real[:, None, None, :].expand_as(ours_p)
        assert (ours_p - ref_p)[keys].abs().max().item() <= 1e-4  # torch's BERT leaves ~1e-10 on padding
        assert (ours_p[~keys] == 0).all()


# --- any BERT-style folder ------------------------------------------------------------------------------------


def tiny_bert_folder(path: Path, folder: Path, model_cls=BertModel, **changes) -> torch.nn.Module:
    """A randomly initialised small BERT saved with save_pretrained, plus the bundled tokenizer.json."""
    config = BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
        max_position_embeddings=64, **changes,
    )
    with torch.random.fork_rng():  # transformers initialises from the global RNG; leave it as it was
        torch.manual_seed(0)
        model = model_cls(config).eval()
    with torch.no_grad():  # non-trivial biases and LayerNorms
        gen = torch.Generator().manual_seed(1)
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=gen))
    model.save_pretrained(str(path))
    shutil.copy(folder / "tokenizer.json", path / "tokenizer.json")
    return model


@pytest.mark.parametrize(
    "model_cls, act", [(BertModel, "gelu"), (BertModel, "relu"), (BertForMaskedLM, "gelu")],
    ids=["bert-gelu", "bert-relu", "masked-lm-prefix"],
)
def test_any_bert_style_folder_loads_and_matches(tmp_path, folder, model_cls, act):
    tiny_bert_folder(tmp_path, folder, model_cls, hidden_act=act)
    if model_cls is BertForMaskedLM:
        assert any(k.startswith("bert.") for k in load_file(str(tmp_path / "model.safetensors")))
    reference = BertModel.from_pretrained(str(tmp_path), attn_implementation="eager").eval()
    model = load_pretrained(tmp_path)
    assert model.cfg.d_model == 32 and model.cfg.activation == act
    trace = run(model, "A tiny BERT, saved by transformers.")
    with torch.no_grad():
        out = reference(torch.tensor([trace.token_ids]), output_attentions=True, output_hidden_states=True)
    assert (trace.hidden_states - torch.stack(out.hidden_states)[:, 0]).abs().max().item() <= 1e-4
    assert (trace.attention - torch.stack(out.attentions)[:, 0]).abs().max().item() <= 1e-4


def test_half_precision_checkpoint_loads_as_float32(tmp_path, folder):
    tiny_bert_folder(tmp_path / "full", folder)
    linked = tmp_path / "half"
    linked.mkdir()
    for name in ("config.json", "tokenizer.json"):
        (linked / name).symlink_to(tmp_path / "full" / name)
    weights = load_file(str(tmp_path / "full" / "model.safetensors"))
    save_file({k: v.to(torch.bfloat16) for k, v in weights.items()}, str(linked / "model.safetensors"))
    full, half = load_pretrained(tmp_path / "full"), load_pretrained(linked)
    assert all(p.dtype == torch.float32 for p in half.parameters())
    for (name, a), (_, b) in zip(full.state_dict().items(), half.state_dict().items(), strict=True):
        torch.testing.assert_close(b, a.to(torch.bfloat16).float(), rtol=0, atol=0, msg=name)


# --- loader errors --------------------------------------------------------------------------------------------

REQUIRED = ("config.json", "model.safetensors", "tokenizer.json")


def linked_copy(src: Path, dst: Path, skip: tuple[str, ...] = ()) -> Path:
    """A folder whose required files are symlinks to the real ones (cheap), minus `skip`."""
    dst.mkdir()
    for name in REQUIRED:
        if name not in skip:
            (dst / name).symlink_to(src / name)
    return dst


def edited_config(src: Path, dst: Path, **changes) -> Path:
    linked_copy(src, dst, skip=("config.json",))
    config = json.loads((src / "config.json").read_text())
    (dst / "config.json").write_text(json.dumps({**config, **changes}))
    return dst


def test_loading_leaves_the_global_rng_alone(folder):
    """The throwaway random init before the weights arrive must not shift a caller's seeded experiment."""
    torch.manual_seed(123)
    expected = torch.rand(4)
    torch.manual_seed(123)
    load_pretrained(folder)
    assert torch.equal(torch.rand(4), expected)


def test_linked_copy_of_the_real_folder_loads(tmp_path, folder):
    model = load_pretrained(linked_copy(folder, tmp_path / "copy"))
    assert model.cfg.d_model == 384


@pytest.mark.parametrize("missing", REQUIRED)
def test_missing_file_is_named(tmp_path, folder, missing):
    broken = linked_copy(folder, tmp_path / "broken", skip=(missing,))
    with pytest.raises(ValueError, match=f"missing {missing}"):
        load_pretrained(broken)


def test_missing_folder_is_named(tmp_path):
    with pytest.raises(ValueError, match="'nowhere' does not exist"):
        load_pretrained(tmp_path / "nowhere")


def test_empty_folder_lists_every_missing_file(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="missing config.json, model.safetensors, tokenizer.json"):
        load_pretrained(tmp_path / "empty")


def safetensors_prefix(folder: Path, extra: int) -> bytes:
    """The real file's 8-byte length, JSON header and `extra` bytes of tensor data."""
    with open(folder / "model.safetensors", "rb") as f:
        (header,) = struct.unpack("<Q", f.read(8))
        f.seek(0)
        return f.read(8 + header + extra)


@pytest.mark.parametrize("kind", ["empty", "garbage", "truncated"])
def test_corrupt_safetensors_is_named(tmp_path, folder, kind):
    broken = linked_copy(folder, tmp_path / "broken", skip=("model.safetensors",))
    content = {"empty": b"", "garbage": b"this is not a safetensors file" * 10,
               "truncated": safetensors_prefix(folder, 1000)}[kind]
    (broken / "model.safetensors").write_bytes(content)
    with pytest.raises(ValueError, match="model.safetensors in 'broken' could not be read"):
        load_pretrained(broken)


@pytest.mark.parametrize("text", ['{"hidden_size": 384,', "", "not json at all", "\xff\xfe"])
def test_config_that_is_not_json_is_named(tmp_path, folder, text):
    broken = linked_copy(folder, tmp_path / "broken", skip=("config.json",))
    (broken / "config.json").write_text(text, encoding="latin-1")
    with pytest.raises(ValueError, match="config.json in 'broken' is not valid JSON"):
        load_pretrained(broken)


def test_config_that_is_not_an_object_is_named(tmp_path, folder):
    broken = linked_copy(folder, tmp_path / "broken", skip=("config.json",))
    (broken / "config.json").write_text("[384, 12]")
    with pytest.raises(ValueError, match="not a JSON object"):
        load_pretrained(broken)


@pytest.mark.parametrize(
    "changes, words",
    [
        (dict(hidden_size=768), ["Shape mismatch for embed.tok.weight", "(30522, 384)", "(30522, 768)"]),
        (dict(intermediate_size=1024), ["Shape mismatch for layers.0.ffn.w1.weight", "(1536, 384)", "(1024, 384)"]),
        (dict(vocab_size=30000), ["Shape mismatch for embed.tok.weight", "(30522, 384)", "(30000, 384)"]),
        (dict(max_position_embeddings=256), ["Shape mismatch for embed.pos.weight", "(512, 384)", "(256, 384)"]),
        (dict(num_hidden_layers=7), ["model.safetensors lacks", "encoder.layer.6."]),
        (dict(num_attention_heads=7), ["d_model=384 is not divisible by num_heads=7"]),
        (dict(hidden_act="tanh"), ["hidden_act='tanh'"]),
        (dict(hidden_size="384"), ["d_model='384'"]),
    ],
    ids=["hidden_size", "intermediate_size", "vocab_size", "max_position", "layers", "heads", "act", "type"],
)
def test_config_that_disagrees_with_the_weights_is_named(tmp_path, folder, changes, words):
    broken = edited_config(folder, tmp_path / "broken", **changes)
    with pytest.raises(ValueError) as info:
        load_pretrained(broken)
    for word in words:
        assert word in str(info.value), f"{word!r} missing from {info.value}"


def test_config_without_a_required_key_is_named(tmp_path, folder):
    broken = linked_copy(folder, tmp_path / "broken", skip=("config.json",))
    config = json.loads((folder / "config.json").read_text())
    del config["num_attention_heads"]
    (broken / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="'num_attention_heads'"):
        load_pretrained(broken)


def test_checkpoint_missing_a_tensor_is_named(tmp_path, folder):
    tiny_bert_folder(tmp_path, folder)
    weights = load_file(str(tmp_path / "model.safetensors"))
    del weights["encoder.layer.1.attention.self.key.bias"]
    save_file(weights, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match=r"lacks encoder\.layer\.1\.attention\.self\.key\.bias"):
        load_pretrained(tmp_path)


def test_checkpoint_with_a_wrongly_shaped_tensor_is_named(tmp_path, folder):
    tiny_bert_folder(tmp_path, folder)
    weights = load_file(str(tmp_path / "model.safetensors"))
    weights["encoder.layer.0.attention.output.dense.weight"] = torch.zeros(32, 16)
    save_file(weights, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match=r"Shape mismatch for layers\.0\.attn\.out\.weight.*\(32, 16\).*\(32, 32\)"):
        load_pretrained(tmp_path)


def test_corrupt_tokenizer_is_refused_when_loading(tmp_path, folder):
    broken = linked_copy(folder, tmp_path / "broken", skip=("tokenizer.json",))
    (broken / "tokenizer.json").write_text("{ not a tokenizer")
    with pytest.raises(ValueError, match="tokenizer file tokenizer.json in 'broken'"):
        load_pretrained(broken)


def test_concurrent_loads_leave_the_global_rng_where_it_was():
    """Sessions load models at the same time; none of them may move torch's process-wide RNG."""
    torch.manual_seed(1234)
    before = torch.random.get_rng_state()
    loaders = [threading.Thread(target=load_pretrained) for _ in range(4)]
    for t in loaders:
        t.start()
    for t in loaders:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in loaders)
    assert torch.equal(torch.random.get_rng_state(), before)
