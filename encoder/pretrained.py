"""Load a BERT-style folder (config.json + model.safetensors + tokenizer.json) into our own Encoder."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from .config import EncoderConfig, pretrained_config
from .model import Encoder, pick_device
from .tokenizer import bundled_model_dir

REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json")


def _layer_map(i: int) -> dict[str, str]:
    """Our parameter name -> BERT's, for layer i (q, k, v are concatenated into our fused qkv)."""
    src = f"encoder.layer.{i}."
    dst = f"layers.{i}."
    return {
        dst + "attn.out.weight": src + "attention.output.dense.weight",
        dst + "attn.out.bias": src + "attention.output.dense.bias",
        dst + "ln1.weight": src + "attention.output.LayerNorm.weight",
        dst + "ln1.bias": src + "attention.output.LayerNorm.bias",
        dst + "ffn.w1.weight": src + "intermediate.dense.weight",
        dst + "ffn.w1.bias": src + "intermediate.dense.bias",
        dst + "ffn.w2.weight": src + "output.dense.weight",
        dst + "ffn.w2.bias": src + "output.dense.bias",
        dst + "ln2.weight": src + "output.LayerNorm.weight",
        dst + "ln2.bias": src + "output.LayerNorm.bias",
    }


def bert_state_dict(weights: dict[str, torch.Tensor], cfg: EncoderConfig) -> dict[str, torch.Tensor]:
    """Rename a BERT checkpoint's tensors to our module names; missing tensors are named in the error."""
    weights = {k.removeprefix("bert."): v for k, v in weights.items()}
    mapping = {
        "embed.tok.weight": "embeddings.word_embeddings.weight",
        "embed.pos.weight": "embeddings.position_embeddings.weight",
        "embed.seg.weight": "embeddings.token_type_embeddings.weight",
        "embed.ln.weight": "embeddings.LayerNorm.weight",
        "embed.ln.bias": "embeddings.LayerNorm.bias",
    }
    for i in range(cfg.num_layers):
        mapping.update(_layer_map(i))
    missing = [src for src in mapping.values() if src not in weights]
    for i in range(cfg.num_layers):
        for part in ("query", "key", "value"):
            for kind in ("weight", "bias"):
                name = f"encoder.layer.{i}.attention.self.{part}.{kind}"
                if name not in weights:
                    missing.append(name)
    if missing:
        more = f" (and {len(missing) - 3} more)" if len(missing) > 3 else ""
        raise ValueError(f"model.safetensors lacks {', '.join(missing[:3])}{more}.")
    state = {dst: weights[src] for dst, src in mapping.items()}
    for i in range(cfg.num_layers):
        pre = f"encoder.layer.{i}.attention.self."
        for kind in ("weight", "bias"):
            state[f"layers.{i}.attn.qkv.{kind}"] = torch.cat([weights[pre + p + "." + kind] for p in ("query", "key", "value")])
    return state


_GLOBAL_RNG = threading.Lock()  # held while a load draws from, and then restores, torch's global RNG


def load_pretrained(folder: str | Path | None = None, device: str | torch.device | None = None) -> Encoder:
    """Our Encoder filled with a BERT-style checkpoint; default: the bundled all-MiniLM-L6-v2."""
    folder = Path(folder) if folder is not None else bundled_model_dir()
    if not folder.is_dir():
        raise ValueError(f"The model folder {folder.name!r} does not exist.")
    absent = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if absent:
        raise ValueError(f"The model folder {folder.name!r} is missing {', '.join(absent)}.")
    try:
        hf = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"config.json in {folder.name!r} is not valid JSON ({err}).") from None
    if not isinstance(hf, dict):
        raise ValueError(f"config.json in {folder.name!r} is not a JSON object.")
    cfg = pretrained_config(hf)
    try:
        weights = load_file(str(folder / "model.safetensors"))
    except (SafetensorError, OSError, ValueError) as err:
        raise ValueError(f"model.safetensors in {folder.name!r} could not be read ({err}).") from None
    state = bert_state_dict(weights, cfg)
    extra = f"encoder.layer.{cfg.num_layers}.attention.output.dense.weight"
    if extra in weights or "bert." + extra in weights:
        raise ValueError(
            f"model.safetensors has more layers than config.json's num_hidden_layers={cfg.num_layers}; fix config.json."
        )
    # Built on the CPU, not the meta device: meta's init goes through torch._refs, which imports torch._dynamo
    # (1.2-1.7 s of cold start; benchmarks/RESULTS-app.md). The random init is overwritten below, and fork_rng
    # keeps it from moving the caller's global RNG. fork_rng saves and restores process-wide state, so two sessions
    # loading at once take turns: otherwise one could restore a state the other had already moved.
    with _GLOBAL_RNG, torch.random.fork_rng(devices=[]):
        model = Encoder(cfg)
    expected = model.state_dict()
    for name, tensor in state.items():
        if tuple(tensor.shape) != tuple(expected[name].shape):
            raise ValueError(
                f"Shape mismatch for {name}: the checkpoint has {tuple(tensor.shape)}, "
                f"config.json implies {tuple(expected[name].shape)}."
            )
    model.load_state_dict({k: v.float() for k, v in state.items()}, strict=True, assign=True)
    model.vocab_dir = folder
    return model.to(pick_device(device)).eval().requires_grad_(False)
