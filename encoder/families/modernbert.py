"""ModernBERT (Warner et al. 2024): Pre-LN with a final norm, rotary positions, GeGLU, no biases, and global
attention every third layer with a 128-token sliding window in the others."""

from __future__ import annotations

from typing import Any

from ..config import EncoderConfig
from ._base import ConfigKeys, Family, Tensors, layer, linear

GLU = {"gelu": "geglu", "silu": "swiglu"}  # hidden_activation -> our gated FFN
# Our layer modules -> ModernBERT's names inside layers.<i>. (its Wqkv is fused in our order; Wi stacks W and V)
LAYER = {"ln1": "attn_norm", "qkv": "attn.Wqkv", "out": "attn.Wo", "ln2": "mlp_norm", "w1": "mlp.Wi", "w2": "mlp.Wo"}
THETA = {"full_attention": ("global_rope_theta", 160_000.0), "sliding_attention": ("local_rope_theta", 10_000.0)}


def _global_every(layer_types: Any, num_layers: Any) -> tuple[bool, int]:
    """(any sliding layer?, n such that exactly the layers 0, n, 2n, ... are global) from config.json's layer_types."""
    kinds = ("full_attention", "sliding_attention")
    if not isinstance(layer_types, list) or len(layer_types) != num_layers or any(t not in kinds for t in layer_types):
        raise ValueError(f"config.json has layer_types={layer_types!r}; it must list 'full_attention' or "
                         f"'sliding_attention' for each of the num_hidden_layers={num_layers} layers.")
    sliding = [t == "sliding_attention" for t in layer_types]
    if not any(sliding):
        return False, 0
    for n in [*range(1, num_layers + 1), 0]:  # n = 0: no global layer at all
        if sliding == [not (n and i % n == 0) for i in range(num_layers)]:
            return True, n
    raise ValueError("config.json's layer_types alternate global and sliding-window layers in a pattern other than "
                     "'every n-th layer from layer 0 is global', the one this loader builds.")


def _thetas(keys: ConfigKeys) -> dict[str, float]:
    """RoPE's theta per layer kind, from rope_parameters (transformers 5) or global/local_rope_theta (before)."""
    keys.fixed("rope_scaling", None, "scaled rotary positions are not implemented")
    params = keys.get("rope_parameters", None)
    thetas = {}
    for kind, (old_key, default) in THETA.items():
        theta = keys.get(old_key, default)
        if params is not None:
            entry = params.get(kind) if isinstance(params, dict) else None
            if not isinstance(entry, dict) or entry.get("rope_type", "default") != "default" or set(entry) - {
                    "rope_type", "rope_theta"}:
                raise ValueError(f"config.json has rope_parameters={params!r}; only the default rotary positions "
                                 "(a rope_theta per layer kind, nothing else) are implemented.")
            theta = entry.get("rope_theta", theta)
        thetas[kind] = float(theta)
    return thetas


def modernbert_config(hf: dict[str, Any]) -> EncoderConfig:
    """EncoderConfig of a ModernBERT config.json; every key is read, known harmless or refused."""
    keys = ConfigKeys(hf, "ModernBERT")
    act = keys.get("hidden_activation", "gelu")
    if act not in GLU:
        raise ValueError(f"config.json has hidden_activation={act!r}; only 'gelu' (GeGLU) and 'silu' (SwiGLU) are "
                         "implemented.")
    keys.need("num_hidden_layers")
    num_layers = keys.whole("num_hidden_layers", 0, 1, 48, "it is the number of layers")
    biases = {key: keys.get(key, False) for key in ("attention_bias", "mlp_bias", "norm_bias")}
    if len(set(biases.values())) != 1:
        raise ValueError(f"config.json has {', '.join(f'{k}={v}' for k, v in biases.items())}; this loader has one "
                         "bias switch for every layer, so they must agree.")
    layer_types = keys.get("layer_types", None)
    if layer_types is None:  # configs written before transformers 5
        n = keys.whole("global_attn_every_n_layers", 3, 1, 48, "it says how often a layer attends globally")
        layer_types = ["full_attention" if i % n == 0 else "sliding_attention" for i in range(num_layers)]
    else:
        keys.get("global_attn_every_n_layers", None)  # transformers ignores it when layer_types is given
    sliding, every = _global_every(layer_types, num_layers)
    window = keys.whole("local_attention", 128, 2, 8192, "it is the sliding window's width") if sliding else 0
    if window % 2:
        raise ValueError(f"config.json has local_attention={window}; ModernBERT's window reaches local_attention // 2 "
                         "tokens each side, and this loader builds even windows only.")
    thetas = _thetas(keys)
    dropouts = [float(keys.get(k, 0.0)) for k in ("embedding_dropout", "attention_dropout", "mlp_dropout")]
    sizes = dict(d_model=keys.need("hidden_size"), num_heads=keys.need("num_attention_heads"),
                 d_ff=keys.need("intermediate_size"), vocab_size=keys.need("vocab_size"))
    eps, max_len = float(keys.get("norm_eps", 1e-5)), keys.get("max_position_embeddings", 8192)
    keys.done((
        "classifier_activation", "classifier_bias", "classifier_dropout", "classifier_pooling", "decoder_bias",
        "deterministic_flash_attn", "initializer_cutoff_factor", "reference_compile", "repad_logits_with_grad",
        "sparse_pred_ignore_index", "sparse_prediction",
        # unused by ModernBERT's code (it reads norm_eps, and has no position embeddings)
        "layer_norm_eps", "position_embedding_type",
    ))
    return EncoderConfig(
        **sizes, num_layers=num_layers, dropout=max(dropouts), activation="gelu", ffn=GLU[act], norm="pre",
        positional="rotary", layer_norm_eps=eps, max_len=max_len, embed_norm=True, final_norm=True, first_norm1=False,
        bias=biases["norm_bias"], window=window, global_every=every,
        rope_theta=thetas["full_attention"], rope_theta_local=thetas["sliding_attention"],
    )


def modernbert_tensors(cfg: EncoderConfig) -> Tensors:
    """Our parameter -> ModernBERT's tensors."""
    names: Tensors = {"embed.tok.weight": ("embeddings.tok_embeddings.weight",)}
    names |= linear("embed.ln", "embeddings.norm", cfg.bias)
    first = {k: v for k, v in LAYER.items() if k != "ln1"}  # layer 0 has no attn_norm: its input is normalised already
    for i in range(cfg.num_layers):
        names |= layer(f"layers.{i}.", f"layers.{i}.", LAYER if i else first, cfg.bias)
    return names | linear("final_ln", "final_norm", cfg.bias)


MODERNBERT = Family("modernbert", "ModernBERT", "ModernBert", "model.", ("head.", "decoder.", "classifier."),
                    modernbert_config, modernbert_tensors)
