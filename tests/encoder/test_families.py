"""Every family we load against transformers' eager forward on the same tiny random checkpoint; and the refusals.

tests/checkpoints.py builds each folder at test time (a tokenizer trained with `tokenizers`, a model initialised
and perturbed with transformers, both saved with save_pretrained). Our loader reads the folder, run() encodes a
sentence, and the token ids, every layer's attention and the hidden states must be transformers' own.
"""

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoTokenizer

from encoder import load_pretrained, run
from encoder.families import FAMILIES
from encoder.model import Encoder, sinusoidal_table
from tests import checkpoints

TEXTS = [checkpoints.SENTENCES[1], checkpoints.SENTENCES[6], checkpoints.SENTENCES[7]]
SPECIALS = {"bert": ("[CLS]", "[SEP]"), "roberta": ("<s>", "</s>"), "xlm-roberta": ("<s>", "</s>"),
            "distilbert": ("[CLS]", "[SEP]"), "electra": ("[CLS]", "[SEP]"), "albert": ("[CLS]", "[SEP]"),
            "modernbert": ("[CLS]", "[SEP]")}


@pytest.fixture(scope="module", params=list(checkpoints.RECIPES))
def family_folder(request, tmp_path_factory) -> tuple[str, Path]:
    family = request.param
    return family, checkpoints.build(family, tmp_path_factory.mktemp(family))


def compare(trace, out, final_norm: bool) -> tuple[float, float]:
    """Largest differences (hidden states, attention) between a Trace and transformers' output for one sentence."""
    theirs = torch.stack(out.hidden_states)[:, 0]  # (L + 1, T, D); the last is after the final norm when there is one
    ours = trace.hidden_states
    if final_norm:
        ours, theirs = ours[:-1], theirs[:-1]
    hidden = max((ours - theirs).abs().max().item(), (trace.output - out.last_hidden_state[0]).abs().max().item())
    attention = torch.stack(out.attentions)[:, 0]  # (L, H, T, T)
    assert trace.attention.shape == attention.shape
    return hidden, (trace.attention - attention).abs().max().item()


def test_every_family_matches_transformers(family_folder):
    family, folder = family_folder
    model = load_pretrained(folder)
    reference = checkpoints.reference(family, folder)
    hf_tokenizer = AutoTokenizer.from_pretrained(str(folder))
    assert model.family == family
    for text in TEXTS:
        trace = run(model, text)
        assert trace.token_ids == hf_tokenizer(text)["input_ids"]
        with torch.no_grad():
            out = reference(torch.tensor([trace.token_ids]), output_attentions=True, output_hidden_states=True)
        hidden, attention = compare(trace, out, model.cfg.final_norm)
        assert hidden <= 1e-4, f"{family}: hidden states differ by {hidden:.2e} on {text!r}"
        assert attention <= 1e-5, f"{family}: attention differs by {attention:.2e} on {text!r}"


def test_special_tokens_come_from_the_tokenizer(family_folder):
    family, folder = family_folder
    trace = run(load_pretrained(folder), TEXTS[0])
    assert trace.special_tokens == SPECIALS[family]
    assert trace.special_positions == (0, trace.seq_len - 1)
    assert (trace.tokens[0], trace.tokens[-1]) == SPECIALS[family]


def test_a_text_longer_than_max_len_is_cut_as_transformers_cuts_it(family_folder):
    family, folder = family_folder
    model = load_pretrained(folder)
    text = " ".join([checkpoints.LONG] * 3)
    trace = run(model, text, max_tokens=100)
    expected = AutoTokenizer.from_pretrained(str(folder))(text, truncation=True, max_length=100)["input_ids"]
    assert trace.truncated and trace.seq_len == 100 and trace.token_ids == expected
    assert trace.tokens[-1] == SPECIALS[family][1] and trace.special_positions == (0, 99)


def test_a_task_checkpoint_loads_its_encoder_and_sets_the_head_aside(family_folder, tmp_path):
    family, _ = family_folder
    folder = checkpoints.build(family, tmp_path / family, task=True)
    names = load_file(str(folder / "model.safetensors"))
    prefix = FAMILIES[family].prefix
    assert any(n.startswith(prefix) for n in names) and not all(n.startswith(prefix) for n in names)
    model = load_pretrained(folder)
    reference = checkpoints.reference(family, folder)  # the base model inside the task checkpoint
    trace = run(model, TEXTS[0])
    with torch.no_grad():
        out = reference(torch.tensor([trace.token_ids]), output_attentions=True, output_hidden_states=True)
    hidden, attention = compare(trace, out, model.cfg.final_norm)
    assert hidden <= 1e-4 and attention <= 1e-5


def test_roberta_positions_start_after_the_padding_index(tmp_path):
    """The silent error of issue 20: read as BERT, a RoBERTa checkpoint computes other numbers."""
    folder = checkpoints.build("roberta", tmp_path / "roberta")
    model = load_pretrained(folder)
    assert (model.cfg.pos_offset, model.cfg.max_len) == (2, 128)
    trace = run(model, TEXTS[0])
    as_bert = model.cfg.replace(pos_offset=0, max_len=130)  # the same table, counted from row 0
    twin = Encoder(as_bert).eval().requires_grad_(False)
    twin.load_state_dict(model.state_dict())
    twin.vocab_dir = model.vocab_dir
    wrong = run(twin, TEXTS[0])
    assert (wrong.output - trace.output).abs().max().item() > 0.1


@pytest.mark.parametrize("family", ["roberta", "modernbert"])
def test_padded_batch_equals_transformers_with_attention_mask(family, tmp_path):
    """RoBERTa's padding takes the padding row and is not counted; ModernBERT's window meets the padding."""
    folder = checkpoints.build(family, tmp_path / family)
    model, reference = load_pretrained(folder), checkpoints.reference(family, folder)
    hf_tokenizer = AutoTokenizer.from_pretrained(str(folder))
    batch = hf_tokenizer([checkpoints.LONG, TEXTS[0], "Hi"], padding=True, return_tensors="pt")
    mask = batch["attention_mask"] == 0
    assert mask.any() and batch["input_ids"].shape[1] > 2 * model.cfg.window
    with torch.no_grad():
        out, patterns, _ = model(batch["input_ids"], mask)  # after the final norm, when there is one
        ref = reference(batch["input_ids"], attention_mask=batch["attention_mask"], output_attentions=True)
    real = ~mask
    assert (out - ref.last_hidden_state)[real].abs().max().item() <= 1e-4
    for ours, theirs in zip(patterns, ref.attentions, strict=True):
        rows = real[:, None, :, None].expand_as(ours)  # real queries; padded ones hold no meaning on either side
        assert (ours - theirs)[rows].abs().max().item() <= 1e-5


def test_modernbert_is_read_as_its_parts(tmp_path):
    folder = checkpoints.build("modernbert", tmp_path / "modernbert")
    cfg = load_pretrained(folder).cfg
    assert (cfg.norm, cfg.positional, cfg.ffn, cfg.bias, cfg.final_norm, cfg.first_norm1) == (
        "pre", "rotary", "geglu", False, True, False)
    assert (cfg.window, cfg.global_every, cfg.rope_theta, cfg.rope_theta_local) == (16, 3, 160_000.0, 10_000.0)
    assert [cfg.layer_window(i) for i in range(cfg.num_layers)] == [0, 16, 16, 0]


def test_modernbert_long_sentence_exercises_the_window(tmp_path):
    folder = checkpoints.build("modernbert", tmp_path / "modernbert", local_attention=8)
    model, reference = load_pretrained(folder), checkpoints.reference("modernbert", folder)
    trace = run(model, checkpoints.LONG)
    assert trace.seq_len > 100 > 4 * model.cfg.window
    with torch.no_grad():
        out = reference(torch.tensor([trace.token_ids]), output_attentions=True, output_hidden_states=True)
    hidden, attention = compare(trace, out, final_norm=True)
    assert hidden <= 1e-4 and attention <= 1e-5
    windowed = trace.attention[1]  # layer 1 attends in a window of 8: 4 keys each side
    far = (torch.arange(trace.seq_len)[:, None] - torch.arange(trace.seq_len)[None, :]).abs() > 4
    assert (windowed[:, far] == 0).all() and (windowed[:, ~far] > 0).all()
    assert (trace.attention[0] > 0).all()  # layer 0 is global


def test_modernbert_with_the_configs_written_before_transformers_5(tmp_path):
    """ModernBERT-base's own config.json has global_attn_every_n_layers and global/local_rope_theta."""
    folder = checkpoints.build("modernbert", tmp_path / "modernbert")
    config = json.loads((folder / "config.json").read_text())
    del config["layer_types"], config["rope_parameters"]
    config |= {"global_attn_every_n_layers": 3, "global_rope_theta": 160000.0, "local_rope_theta": 10000.0,
               "layer_norm_eps": 1e-5, "position_embedding_type": "absolute", "reference_compile": None}
    (folder / "config.json").write_text(json.dumps(config))
    cfg = load_pretrained(folder).cfg
    assert (cfg.window, cfg.global_every, cfg.rope_theta, cfg.rope_theta_local) == (16, 3, 160_000.0, 10_000.0)


def test_distilbert_sinusoidal_table_is_read_as_the_formula(tmp_path):
    folder = checkpoints.build("distilbert", tmp_path / "sin", sinusoidal_pos_embds=True, perturb_skip=("position",))
    weights = load_file(str(folder / "model.safetensors"))
    assert torch.allclose(weights["embeddings.position_embeddings.weight"], sinusoidal_table(128, 32), atol=1e-6)
    model = load_pretrained(folder)
    assert model.cfg.positional == "sinusoidal"
    trace = run(model, TEXTS[0])
    with torch.no_grad():
        out = checkpoints.reference("distilbert", folder)(torch.tensor([trace.token_ids]), output_attentions=True,
                                                          output_hidden_states=True)
    hidden, attention = compare(trace, out, final_norm=False)
    assert hidden <= 1e-4 and attention <= 1e-5


def test_distilbert_with_an_edited_sinusoidal_table_keeps_the_saved_table(tmp_path):
    folder = checkpoints.build("distilbert", tmp_path / "edited", sinusoidal_pos_embds=True)  # the table perturbed too
    model = load_pretrained(folder)
    assert model.cfg.positional == "learned"  # what transformers computes: the saved numbers
    trace = run(model, TEXTS[0])
    with torch.no_grad():
        out = checkpoints.reference("distilbert", folder)(torch.tensor([trace.token_ids]), output_attentions=True,
                                                          output_hidden_states=True)
    assert compare(trace, out, final_norm=False)[0] <= 1e-4


def test_albert_has_one_layer_applied_num_layers_times(tmp_path):
    folder = checkpoints.build("albert", tmp_path / "albert")
    # albert-base-v2's config.json still has these keys of the TensorFlow original, at these values
    edit_config(folder, down_scale_factor=1, gap_size=0, net_structure_type=0, num_memory_blocks=0)
    model = load_pretrained(folder)
    assert model.cfg.share_layers and model.cfg.d_embed == 16
    first = dict(model.layers[0].named_parameters())
    for layer in model.layers[1:]:
        for name, p in layer.named_parameters():
            assert p is first[name]
    assert sum(p.numel() for p in model.parameters()) < sum(p.numel() for p in model.state_dict().values())


# --- where folders come from ------------------------------------------------------------------------------------


def hf_cache(folder: Path, root: Path, revisions: tuple[str, ...], ref: str | None) -> Path:
    """models--org--name laid out as the Hugging Face cache: blobs, snapshots/<rev>/ of symlinks, refs/main."""
    cache = root / "models--org--tiny"
    (cache / "blobs").mkdir(parents=True)
    for i, path in enumerate(sorted(folder.iterdir())):
        shutil.copy(path, cache / "blobs" / f"blob{i}")
        for rev in revisions:
            (cache / "snapshots" / rev).mkdir(parents=True, exist_ok=True)
            (cache / "snapshots" / rev / path.name).symlink_to(Path("../../blobs") / f"blob{i}")
    if ref is not None:
        (cache / "refs").mkdir()
        (cache / "refs" / "main").write_text(ref)
    return cache


@pytest.fixture(scope="module")
def roberta_folder(tmp_path_factory) -> Path:
    return checkpoints.build("roberta", tmp_path_factory.mktemp("roberta"))


@pytest.mark.parametrize("revisions, ref", [(("a1b2",), None), (("a1b2", "c3d4"), "c3d4")], ids=["one", "refs-main"])
def test_a_hugging_face_cache_folder_loads_like_a_flat_one(roberta_folder, tmp_path, revisions, ref):
    flat = load_pretrained(roberta_folder)
    cached = load_pretrained(hf_cache(roberta_folder, tmp_path, revisions, ref))
    assert cached.vocab_dir.name == (ref or revisions[0]) and cached.vocab_dir.parent.name == "snapshots"
    a, b = run(flat, TEXTS[0]), run(cached, TEXTS[0])
    assert a.token_ids == b.token_ids and torch.equal(a.output, b.output)


def test_a_cache_folder_with_several_snapshots_and_no_ref_is_refused(roberta_folder, tmp_path):
    with pytest.raises(ValueError, match="holds 2 snapshots and no refs/main"):
        load_pretrained(hf_cache(roberta_folder, tmp_path, ("a1b2", "c3d4"), None))


# --- refusals ---------------------------------------------------------------------------------------------------


def copy_of(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def edit_config(folder: Path, drop: tuple[str, ...] = (), **changes) -> Path:
    config = json.loads((folder / "config.json").read_text())
    for key in drop:
        config.pop(key, None)
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    return folder


def refusal(folder: Path) -> str:
    with pytest.raises(ValueError) as info:
        load_pretrained(folder)
    return str(info.value)


@pytest.mark.parametrize(
    "changes, drop, words",
    [
        (dict(model_type="gpt2", architectures=["GPT2Model"]), (), ["model_type='gpt2'", "does not map", "modernbert"]),
        (dict(model_type="camembert"), (), ["model_type='camembert'", "does not map"]),
        ({}, ("model_type", "architectures"), ["no model_type", "add \"model_type\""]),
        (dict(architectures=["BertModel"]), (), ["model_type='roberta'", "'BertModel'"]),
        (dict(architectures=["RobertaForCausalLM"], is_decoder=True), (), ["is_decoder=True", "decoder"]),
        (dict(add_cross_attention=True), (), ["add_cross_attention=True", "cross-attention"]),
        (dict(position_embedding_type="relative_key"), (), ["position_embedding_type='relative_key'", "'absolute'"]),
        (dict(pruned_heads={"0": [1]}), (), ["pruned_heads", "fewer heads"]),
        (dict(shiny_new_option=3), (), ["'shiny_new_option'", "unknown to the RoBERTa loader", "Remove the key"]),
        (dict(hidden_act="swish"), (), ["hidden_act='swish'"]),
        (dict(pad_token_id=40), (), ["pad_token_id=40", "from 0 to 15"]),
        (dict(hidden_size=64), (), ["Shape mismatch for embed.tok.weight"]),
        (dict(num_hidden_layers=4), (), ["lacks", "encoder.layer.3."]),
        (dict(num_hidden_layers=2), (), ["does not use", "encoder.layer.2.", "num_hidden_layers"]),
    ],
    ids=["gpt2", "camembert", "no-type", "wrong-architecture", "decoder", "cross-attention", "relative-positions",
         "pruned", "unknown-key", "activation", "pad-id", "hidden-size", "more-layers", "fewer-layers"],
)
def test_a_config_we_do_not_implement_is_refused_by_name(roberta_folder, tmp_path, changes, drop, words):
    message = refusal(edit_config(copy_of(roberta_folder, tmp_path / "edited"), drop, **changes))
    for word in words:
        assert word in message, f"{word!r} missing from {message!r}"


@pytest.mark.parametrize(
    "family, changes, words",
    [
        ("albert", dict(num_hidden_groups=2), ["num_hidden_groups=2", "one shared layer"]),
        ("albert", dict(inner_group_num=2), ["inner_group_num=2"]),
        ("albert", dict(down_scale_factor=1, gap_size=0, net_structure_type=1, num_memory_blocks=0),
         ["net_structure_type=1"]),
        ("modernbert", dict(norm_bias=True), ["norm_bias=True", "must agree"]),
        ("modernbert", dict(hidden_activation="relu"), ["hidden_activation='relu'", "GeGLU"]),
        ("modernbert", dict(layer_types=["full_attention", "sliding_attention", "full_attention", "full_attention"]),
         ["pattern other than"]),
        ("modernbert", dict(rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4},
                                             "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}),
         ["rope_parameters", "default rotary"]),
        ("modernbert", dict(local_attention=7), ["local_attention=7", "even"]),
        ("distilbert", dict(activation="tanh"), ["activation='tanh'"]),
        ("electra", dict(embedding_size=24), ["Shape mismatch for embed.tok.weight"]),
    ],
    ids=["albert-groups", "albert-inner", "albert-tf-keys", "modernbert-bias", "modernbert-act", "modernbert-layers",
         "modernbert-rope", "modernbert-window", "distilbert-act", "electra-embedding"],
)
def test_family_specific_settings_we_do_not_implement_are_refused(family, changes, words, tmp_path):
    message = refusal(edit_config(checkpoints.build(family, tmp_path / family), **changes))
    for word in words:
        assert word in message, f"{word!r} missing from {message!r}"


def edit_weights(folder: Path, drop: tuple[str, ...] = (), **extra: torch.Tensor) -> Path:
    weights = load_file(str(folder / "model.safetensors"))
    for name in drop:
        del weights[name]
    save_file({**weights, **extra}, str(folder / "model.safetensors"))
    return folder


def test_missing_tensors_are_named(roberta_folder, tmp_path):
    folder = edit_weights(copy_of(roberta_folder, tmp_path / "x"), drop=("encoder.layer.1.attention.self.value.bias",
                                                                        "embeddings.LayerNorm.weight"))
    message = refusal(folder)
    assert message.startswith("model.safetensors lacks ")
    assert "embeddings.LayerNorm.weight" in message and "encoder.layer.1.attention.self.value.bias" in message


def test_extra_tensors_are_named(roberta_folder, tmp_path):
    extra = {"encoder.layer.0.attention.self.rel_bias": torch.zeros(4), "adapter.down.weight": torch.zeros(2, 2)}
    message = refusal(edit_weights(copy_of(roberta_folder, tmp_path / "x"), **extra))
    assert "does not use" in message and "adapter.down.weight" in message and "rel_bias" in message


def test_a_position_ids_buffer_with_other_ids_is_refused(roberta_folder, tmp_path):
    folder = copy_of(roberta_folder, tmp_path / "x")
    good = load_pretrained(edit_weights(folder, **{"embeddings.position_ids": torch.arange(130)[None]}))
    assert good.family == "roberta"
    message = refusal(edit_weights(folder, **{"embeddings.position_ids": torch.arange(130).flip(0)[None]}))
    assert "embeddings.position_ids" in message


def test_two_copies_of_the_encoder_are_refused(tmp_path):
    folder = checkpoints.build("bert", tmp_path / "bert", task=True)
    weights = load_file(str(folder / "model.safetensors"))
    name = "bert.embeddings.LayerNorm.weight"
    message = refusal(edit_weights(folder, **{name.removeprefix("bert."): weights[name]}))
    assert "two copies" in message


@pytest.mark.parametrize("content", ["{ not json", '{"model": 3}', '{"version": "1.0", "model": {"type": "Nope"}}', ""],
                         ids=["not-json", "no-model", "unknown-model", "empty"])
def test_a_malformed_tokenizer_json_is_refused_when_loading(roberta_folder, tmp_path, content):
    folder = copy_of(roberta_folder, tmp_path / "bad-tokenizer")
    (folder / "tokenizer.json").write_text(content)
    message = refusal(folder)
    assert "Could not read the tokenizer file tokenizer.json in 'bad-tokenizer'" in message
    assert "saved by Hugging Face tokenizers" in message


def test_pytorch_weights_alone_are_refused_with_a_hint(roberta_folder, tmp_path):
    folder = copy_of(roberta_folder, tmp_path / "bin")
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    assert "only safetensors weights are read" in refusal(folder)


def test_a_roberta_model_without_positions_is_one_variant_away(tmp_path):
    """The Position page drops the position table: RoBERTa's offset goes with it, and the rest is the same model."""
    from encoder.analysis import position, variants

    model = load_pretrained(checkpoints.build("roberta", tmp_path / "roberta"))
    blind = variants.variant(model, positional="none")
    assert (blind.cfg.positional, blind.cfg.pos_offset, blind.family) == ("none", 0, "roberta")
    assert torch.equal(position.pe_table(model.cfg, 5, model), model.embed.pos.weight[2:7])
    result = position.permutation_check(blind, TEXTS[0], seed=0)
    assert result.out_diff <= 1e-4 and result.attn_diff <= 1e-5


@pytest.mark.parametrize("family", ["albert", "roberta", "modernbert"])
def test_describe_reads_family_and_size_without_loading(family, tmp_path):
    from encoder.pretrained import describe

    folder = checkpoints.build(family, tmp_path / family, task=True)
    info = describe(folder)
    model = load_pretrained(folder)
    assert (info.family, info.config) == (family, model.cfg)
    assert info.params == sum(p.numel() for p in model.parameters())  # ALBERT's shared layer counted once
    assert info.file_bytes == (folder / "model.safetensors").stat().st_size
    edit_weights(folder, **{"stray.weight": torch.zeros(3)})
    with pytest.raises(ValueError, match="does not use: stray.weight"):
        describe(folder)
