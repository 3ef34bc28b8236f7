"""Cost panel: parameter counts equal the built model's, FLOPs match torch's counter and scale as expected."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from encoder import EncoderConfig, build_model
from encoder.analysis.cost import flops, flops_summary, panel, param_counts, param_summary
from encoder.config import pretrained_config

SMALL = dict(d_model=64, num_heads=4, d_ff=256, num_layers=2, vocab_size=500, max_len=64)
CONFIGS = [
    EncoderConfig(**SMALL),
    EncoderConfig(**SMALL, norm="pre", final_norm=True),
    EncoderConfig(**SMALL, positional="learned", activation="gelu"),
    EncoderConfig(**{**SMALL, "num_heads": 1}, positional="none"),
    EncoderConfig(d_model=96, num_heads=3, d_ff=100, num_layers=3, vocab_size=300, max_len=40, norm="pre"),
    # BERT-like: learned positions, segment embeddings, embedding LayerNorm
    pretrained_config(dict(hidden_size=64, num_attention_heads=4, intermediate_size=256, num_hidden_layers=2,
                           vocab_size=1000, max_position_embeddings=128, type_vocab_size=2)),
    # ModernBERT-like: rotary, GeGLU, no biases, no first LayerNorm, windowed layers between global ones
    EncoderConfig(**{**SMALL, "num_layers": 4}, norm="pre", final_norm=True, embed_norm=True, positional="rotary",
                  ffn="geglu", bias=False, window=8, global_every=3, first_norm1=False),
    # ALBERT-like: narrow embeddings projected up, one shared layer; RoBERTa-like offset positions; SwiGLU
    EncoderConfig(**SMALL, positional="learned", pos_offset=2, d_embed=16, share_layers=True, type_vocab_size=2,
                  embed_norm=True, ffn="swiglu"),
]


def _name(c: EncoderConfig) -> str:
    return f"{c.norm}-{c.positional}-d{c.d_model}-final{c.final_norm}-seg{c.type_vocab_size}-{c.ffn}-w{c.window}"


def _real(cfg: EncoderConfig) -> int:
    return sum(p.numel() for p in build_model(cfg, "cpu").parameters())


@pytest.mark.parametrize("cfg", CONFIGS, ids=_name)
def test_param_count_equals_the_real_model(cfg):
    df = param_counts(cfg)
    assert int(df["params"].sum()) == _real(cfg)
    summary = param_summary(cfg)
    assert summary["total"] == _real(cfg)
    assert summary["embeddings"] + summary["layers"] + summary["final"] == summary["total"]
    layers = 1 if cfg.share_layers else cfg.num_layers
    ln1 = 0 if cfg.first_norm1 else cfg.d_model  # only layer 0 lacks it
    assert summary["layers"] == layers * summary["per_layer"] + (layers - 1) * ln1


def test_param_count_of_the_default_config_is_the_paper_base_encoder():
    cfg = EncoderConfig()
    assert param_summary(cfg)["total"] == _real(cfg)
    # Per layer: 4 d^2 + 4 d (attention) + 2 d d_ff + d_ff + d (FFN) + 4 d (two LayerNorms) = 3,152,384 for d=512
    assert param_summary(cfg)["per_layer"] == 3_152_384


def test_per_layer_rows_match_the_model_modules():
    cfg = CONFIGS[1]
    model = build_model(cfg, "cpu")
    layer = param_counts(cfg).query("block == 'layer 0'").set_index("part")["params"]
    numel = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert layer[["attention W_Q", "attention W_K", "attention W_V"]].sum() == numel(model.layers[0].attn.qkv)
    assert layer["attention W_O"] == numel(model.layers[0].attn.out)
    assert layer["FFN W1"] == numel(model.layers[0].ffn.w1)
    assert layer["FFN W2"] == numel(model.layers[0].ffn.w2)
    assert layer["LayerNorm 1"] == numel(model.layers[0].ln1)


@pytest.mark.parametrize("cfg", CONFIGS[:5] + CONFIGS[6:], ids=_name)
@pytest.mark.parametrize("seq", [1, 7, 33, 40])  # 40: two query blocks in a window
def test_matmul_flops_equal_torch_flop_counter(cfg, seq):
    model = build_model(cfg, "cpu")
    with FlopCounterMode(display=False) as counter, torch.inference_mode():
        model(torch.randint(0, cfg.vocab_size, (1, seq), generator=torch.Generator().manual_seed(0)))
    assert flops_summary(cfg, seq)["matmul"] == counter.get_total_flops()


def test_flops_scale_with_seq_and_d_model():
    cfg = EncoderConfig(d_model=128, num_heads=4, d_ff=512, num_layers=2, vocab_size=100, max_len=512)
    a, b = flops(cfg, 64).set_index(["block", "part"]), flops(cfg, 128).set_index(["block", "part"])
    key = ("layer 0", "FFN W1")
    assert b.loc[key, "flops"] == 2 * a.loc[key, "flops"]  # per-token work: linear in seq
    key = ("layer 0", "scores QK^T / sqrt(d_head)")
    assert b.loc[key, "matmul"] == 4 * a.loc[key, "matmul"]  # every pair of tokens: quadratic in seq
    wide = cfg.replace(d_model=256, d_ff=1024)
    c = flops(wide, 64).set_index(["block", "part"])
    assert c.loc[("layer 0", "W_O"), "matmul"] == 4 * a.loc[("layer 0", "W_O"), "matmul"]
    # 24 T d^2 + 4 T^2 d per layer when d_ff = 4 d (multiply-adds only)
    T, d = 64, 128
    layer0 = a.loc["layer 0"]
    assert int(layer0["matmul"].sum()) == 24 * T * d * d + 4 * T * T * d


def test_flops_rows_are_non_negative_and_seq_is_checked():
    df = flops(CONFIGS[0], 5)
    assert (df["flops"] >= 0).all() and (df["flops"] == df["matmul"] + df["other"]).all()
    assert set(df["kind"]) == {"matmul", "elementwise"}
    with pytest.raises(ValueError, match="seq"):
        flops(CONFIGS[0], 0)


@pytest.mark.parametrize("cfg", CONFIGS, ids=_name)
def test_the_cached_panel_is_layer_0_of_the_full_tables(cfg):
    got = panel(cfg, 17)
    assert got.params == param_summary(cfg) and got.ops == flops_summary(cfg, 17)
    counts, ops = param_counts(cfg), flops(cfg, 17)
    assert got.layer_params.to_dict("records") == counts.loc[counts["block"] == "layer 0", ["part", "params"]].to_dict("records")
    assert got.layer_flops.to_dict("records") == ops.loc[ops["block"] == "layer 0", ["part", "flops"]].to_dict("records")
    assert got.layer_params["params"].sum() == got.params["per_layer"]
    assert got.layer_flops["flops"].sum() == got.ops["per_layer"]
    assert panel(cfg, 17) is got and panel(cfg, 18) is not got  # once per (config, length)
