"""EncoderConfig: the seeds' defaults, a ValueError that names the field and the fix, a JSON round trip."""

import dataclasses
import json
import math
import re

import pytest

from encoder import EncoderConfig
from encoder.config import pretrained_config
from encoder.tokenizer import tokenizer


def test_defaults_are_the_base_model_of_the_paper():
    cfg = EncoderConfig()
    assert (cfg.d_model, cfg.num_heads, cfg.d_ff, cfg.num_layers) == (512, 8, 2048, 6)
    assert (cfg.dropout, cfg.activation, cfg.norm, cfg.positional) == (0.1, "relu", "post", "sinusoidal")
    assert (cfg.layer_norm_eps, cfg.max_len, cfg.seed) == (1e-5, 512, 0)
    assert cfg.d_head == 64
    assert (cfg.final_norm, cfg.embed_norm, cfg.type_vocab_size) == (False, False, 0)


def test_default_vocab_size_is_the_wordpiece_vocabulary():
    assert EncoderConfig().vocab_size == tokenizer(512).get_vocab_size() == 30522


def test_config_is_frozen_and_replace_validates():
    cfg = EncoderConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.d_model = 256
    assert cfg.replace(d_model=256).d_model == 256
    with pytest.raises(ValueError, match="num_heads"):
        cfg.replace(num_heads=7)


def test_equal_configs_are_equal_and_hash_alike():
    # The app keys its model cache on the config.
    assert EncoderConfig(d_model=64) == EncoderConfig(d_model=64)
    assert hash(EncoderConfig(d_model=64)) == hash(EncoderConfig(d_model=64))
    assert EncoderConfig(d_model=64) != EncoderConfig(d_model=64, seed=1)


# (changes, words the message must contain: the field with its value, then the fix)
INVALID = [
    (dict(d_model=0), ["d_model=0", "between 8 and 4096"]),
    (dict(d_model=5000), ["d_model=5000", "between 8 and 4096"]),
    (dict(d_model=512.0), ["d_model=512.0", "whole number"]),
    (dict(d_model="512"), ["d_model='512'", "whole number"]),
    (dict(d_model=True), ["d_model=True", "whole number"]),
    (dict(d_model=None), ["d_model=None", "whole number"]),
    (dict(num_heads=0), ["num_heads=0", "between 1 and 64"]),
    (dict(num_heads=65), ["num_heads=65", "between 1 and 64"]),
    (dict(num_heads=8.0), ["num_heads=8.0", "whole number"]),
    (dict(d_ff=0), ["d_ff=0", "between 1 and 16384"]),
    (dict(d_ff=20000), ["d_ff=20000", "between 1 and 16384"]),
    (dict(num_layers=0), ["num_layers=0", "between 1 and 48"]),
    (dict(num_layers=49), ["num_layers=49", "between 1 and 48"]),
    (dict(num_layers="6"), ["num_layers='6'", "whole number"]),
    (dict(max_len=1), ["max_len=1", "between 2 and 8192"]),
    (dict(max_len=8193), ["max_len=8193", "between 2 and 8192"]),
    (dict(vocab_size=7), ["vocab_size=7", "between 8 and 300000"]),
    (dict(type_vocab_size=-1), ["type_vocab_size=-1", "between 0 and 16"]),
    (dict(type_vocab_size=17), ["type_vocab_size=17", "between 0 and 16"]),
    (dict(dropout=1.0), ["dropout=1.0", "below 1", "0.1"]),
    (dict(dropout=-0.1), ["dropout=-0.1", "at least 0"]),
    (dict(dropout=math.nan), ["dropout=nan"]),
    (dict(dropout="0.1"), ["dropout='0.1'", "number"]),
    (dict(dropout=True), ["dropout=True", "number"]),
    (dict(dropout=None), ["dropout=None", "number"]),
    (dict(activation="swish"), ["activation='swish'", "'relu', 'gelu'"]),
    (dict(activation="ReLU"), ["activation='ReLU'", "'relu', 'gelu'"]),
    (dict(activation=None), ["activation=None", "'relu', 'gelu'"]),
    (dict(norm="middle"), ["norm='middle'", "'post', 'pre'"]),
    (dict(norm="Pre-LN"), ["norm='Pre-LN'", "'post', 'pre'"]),
    (dict(positional="alibi"), ["positional='alibi'", "'sinusoidal', 'learned', 'rotary', 'none'"]),
    (dict(positional=None), ["positional=None", "'sinusoidal', 'learned', 'rotary', 'none'"]),
    (dict(layer_norm_eps=0.0), ["layer_norm_eps=0.0", "positive", "1e-5"]),
    (dict(layer_norm_eps=-1e-5), ["layer_norm_eps=-1e-05", "positive"]),
    (dict(layer_norm_eps=1.0), ["layer_norm_eps=1.0", "at most 0.1"]),
    (dict(layer_norm_eps=math.inf), ["layer_norm_eps=inf"]),
    (dict(layer_norm_eps=math.nan), ["layer_norm_eps=nan"]),
    (dict(layer_norm_eps="1e-5"), ["layer_norm_eps='1e-5'", "1e-5"]),
    (dict(seed=-1), ["seed=-1", "2**63 - 1"]),
    (dict(seed=2**63), [f"seed={2**63}", "2**63 - 1"]),
    (dict(seed=1.5), ["seed=1.5", "whole number"]),
    (dict(seed="0"), ["seed='0'", "whole number"]),
    (dict(seed=True), ["seed=True", "whole number"]),
    (dict(final_norm=1), ["final_norm=1", "true or false"]),
    (dict(final_norm="yes"), ["final_norm='yes'", "true or false"]),
    (dict(embed_norm=None), ["embed_norm=None", "true or false"]),
]


@pytest.mark.parametrize("changes, words", INVALID, ids=[repr(c) for c, _ in INVALID])
def test_every_invalid_value_names_its_field_and_the_fix(changes, words):
    with pytest.raises(ValueError) as info:
        EncoderConfig(**changes)
    message = str(info.value)
    for word in words:
        assert word in message, f"{word!r} missing from {message!r}"


def test_indivisible_d_model_suggests_both_neighbours_and_a_head_count():
    with pytest.raises(ValueError) as info:
        EncoderConfig(d_model=100, num_heads=8)
    assert str(info.value) == (
        "d_model=100 is not divisible by num_heads=8; try d_model=96 or 104, or num_heads=10."
    )


def _suggestions(message: str) -> tuple[list[int], list[int]]:
    """The d_model and num_heads values an indivisibility message proposes."""
    tried = re.search(r"try d_model=(\d+)(?: or (\d+))?", message)
    d_models = [int(v) for v in tried.groups() if v] if tried else []
    heads = [int(v) for v in re.findall(r"or num_heads=(\d+)", message)]
    return d_models, heads


def test_suggestion_parser_reads_the_documented_example():
    message = "d_model=100 is not divisible by num_heads=8; try d_model=96 or 104, or num_heads=10."
    assert _suggestions(message) == ([96, 104], [10])


@pytest.mark.parametrize(
    "d_model_range",
    [range(8, 160), range(3990, 4097)],  # both ends of the allowed range, every head count
    ids=["small", "large"],
)
def test_every_suggested_fix_for_an_indivisible_d_model_is_itself_valid(d_model_range):
    # Following the message's advice must give a config that builds: a suggestion outside
    # d_model's range (e.g. d_model=5 for d_model=9, num_heads=5) sends the user in a circle.
    bad = []
    for d_model in d_model_range:
        for num_heads in range(1, 65):
            if d_model % num_heads == 0:
                continue
            with pytest.raises(ValueError) as info:
                EncoderConfig(d_model=d_model, num_heads=num_heads)
            message = str(info.value)
            assert f"d_model={d_model}" in message and f"num_heads={num_heads}" in message
            d_models, heads = _suggestions(message)
            assert d_models and heads, message
            for suggestion in d_models:
                try:
                    EncoderConfig(d_model=suggestion, num_heads=num_heads)
                except ValueError:
                    bad.append(message)
            for suggestion in heads:
                EncoderConfig(d_model=d_model, num_heads=suggestion)  # the head count is always in range
    assert not bad, f"{len(bad)} messages suggest an invalid d_model, e.g. {bad[:3]}"


def test_valid_edge_values_are_accepted():
    EncoderConfig(d_model=8, num_heads=1, d_ff=1, num_layers=1, max_len=2, vocab_size=8, dropout=0.0)
    EncoderConfig(d_model=4096, num_heads=64, d_ff=16384, num_layers=48, max_len=4096, vocab_size=250_000)
    EncoderConfig(dropout=0, layer_norm_eps=0.1, seed=2**63 - 1, type_vocab_size=16)
    EncoderConfig(d_model=9, num_heads=1)  # odd widths are fine with one head


CONFIGS = [
    EncoderConfig(),
    EncoderConfig(d_model=384, num_heads=12, d_ff=1536, activation="gelu", norm="pre", positional="learned",
                  layer_norm_eps=1e-12, final_norm=True, embed_norm=True, type_vocab_size=2, seed=2**63 - 1),
    EncoderConfig(d_model=9, num_heads=3, d_ff=1, num_layers=1, dropout=0, positional="none", max_len=2, vocab_size=8),
]


@pytest.mark.parametrize("cfg", CONFIGS)
def test_json_round_trip(cfg):
    data = json.loads(json.dumps(cfg.to_dict()))
    again = EncoderConfig.from_dict(data)
    assert again == cfg
    assert again.to_dict() == cfg.to_dict()
    assert EncoderConfig.from_dict(json.loads(cfg.to_json())) == cfg


def test_to_dict_has_every_field_and_nothing_else():
    data = EncoderConfig().to_dict()
    assert set(data) == {f.name for f in dataclasses.fields(EncoderConfig)}
    for name in ("d_model", "num_heads", "d_ff", "num_layers", "dropout", "activation", "norm", "positional",
                 "layer_norm_eps", "max_len", "vocab_size", "seed"):
        assert name in data


def test_from_dict_fills_missing_keys_with_defaults():
    assert EncoderConfig.from_dict({"d_model": 256}) == EncoderConfig(d_model=256)
    assert EncoderConfig.from_dict({}) == EncoderConfig()


def test_from_dict_rejects_unknown_keys_by_name():
    with pytest.raises(ValueError) as info:
        EncoderConfig.from_dict({"d_model": 256, "n_heads": 8, "hidden": 3})
    message = str(info.value)
    assert "'hidden'" in message and "'n_heads'" in message
    assert "num_heads" in message  # the valid keys are listed, so the typo is easy to fix


@pytest.mark.parametrize("data", [None, [("d_model", 256)], '{"d_model": 256}'])
def test_from_dict_rejects_non_mappings(data):
    with pytest.raises(ValueError, match="mapping"):
        EncoderConfig.from_dict(data)


def test_from_dict_validates_values():
    with pytest.raises(ValueError, match="activation='tanh'"):
        EncoderConfig.from_dict({"activation": "tanh"})


def test_pretrained_config_reads_a_bert_config():
    cfg = pretrained_config({"hidden_size": 384, "num_attention_heads": 12, "intermediate_size": 1536,
                             "num_hidden_layers": 6, "vocab_size": 30522, "hidden_act": "gelu"})
    assert (cfg.d_model, cfg.num_heads, cfg.d_ff, cfg.num_layers, cfg.vocab_size) == (384, 12, 1536, 6, 30522)
    assert (cfg.norm, cfg.positional, cfg.activation, cfg.embed_norm) == ("post", "learned", "gelu", True)
    assert (cfg.layer_norm_eps, cfg.max_len, cfg.type_vocab_size) == (1e-12, 512, 2)


def test_pretrained_config_names_what_is_wrong():
    base = {"hidden_size": 384, "num_attention_heads": 12, "intermediate_size": 1536, "num_hidden_layers": 6,
            "vocab_size": 30522}
    with pytest.raises(ValueError, match="'hidden_size'"):
        pretrained_config({k: v for k, v in base.items() if k != "hidden_size"})
    with pytest.raises(ValueError, match="hidden_act='silu'"):
        pretrained_config({**base, "hidden_act": "silu"})
    with pytest.raises(ValueError, match="num_heads=7"):
        pretrained_config({**base, "num_attention_heads": 7})
