"""The memory guard: the estimate matches the real model, and over-budget configs are refused with the estimate."""

import pytest
import torch

from encoder import EncoderConfig, build_model, run
from encoder.config import pretrained_config
from ui import resources


@pytest.mark.parametrize(
    "cfg",
    [
        EncoderConfig(d_model=32, num_heads=4, d_ff=64, num_layers=2, vocab_size=30522),
        EncoderConfig(d_model=64, num_heads=2, d_ff=96, num_layers=3, positional="learned", final_norm=True),
        pretrained_config({"hidden_size": 48, "num_attention_heads": 3, "intermediate_size": 80,
                           "num_hidden_layers": 2, "vocab_size": 30522}),
    ],
)
def test_param_count_matches_the_model(cfg):
    assert resources.param_count(cfg) == sum(p.numel() for p in build_model(cfg).parameters())


def test_trace_estimate_matches_a_real_trace():
    cfg = EncoderConfig(d_model=32, num_heads=4, d_ff=64, num_layers=2)
    trace = run(build_model(cfg), "one two three four five")
    kept = sum(t.numel() for layer in trace.taps for t in layer.values())
    kept += trace.attention.numel() + trace.hidden_states.numel()
    # Per-head taps by the memory they hold: q, k, v share the fused projection's storage, z shares concat's.
    heads = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for layer in trace.heads for t in layer.values()}
    assert len(heads) == 2 * cfg.num_layers
    kept += sum(heads.values()) // 4
    # The estimate keeps one more (seq, d_model) slot for a final LayerNorm's output.
    assert resources.trace_floats(cfg, trace.seq_len) == kept + trace.seq_len * cfg.d_model


def test_budget_refuses_big_models_with_the_estimate(monkeypatch):
    big = EncoderConfig(d_model=1024, num_heads=16, d_ff=4096, num_layers=24)
    with pytest.raises(ValueError, match=r"needs about [\d.]+ GB.*limit"):
        resources.check_budget(big)
    monkeypatch.setenv(resources.BUDGET_ENV, "100000")
    assert resources.check_budget(big)["total"] > 2**30
    monkeypatch.setenv(resources.BUDGET_ENV, "not a number")
    assert resources.budget_bytes() == resources.DEFAULT_BUDGET_MB * 2**20


def test_the_benchmark_model_fits_the_default_budget():
    resources.check_budget(EncoderConfig(d_model=1024, num_heads=16, d_ff=4096, num_layers=12))


def test_gpu_out_of_memory_falls_back_to_the_cpu_with_a_notice():
    cpu_model = build_model(EncoderConfig(d_model=32, num_heads=4, d_ff=64, num_layers=1))
    asked = []

    def load(device: str):
        asked.append(device)
        if device != "cpu":  # this machine has no GPU: stand in for one whose memory is full
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return cpu_model

    trace = resources.run_with_cpu_fallback(load, "cuda", "falls back")
    assert asked == ["cuda", "cpu"] and trace.device == "cpu" and "ran on the CPU" in trace.notice
    with pytest.raises(torch.cuda.OutOfMemoryError):
        resources.run_with_cpu_fallback(lambda d: (_ for _ in ()).throw(torch.cuda.OutOfMemoryError("x")), "cpu", "a")
