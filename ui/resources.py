"""Memory guard: estimate a model plus one traced forward pass before building it, and refuse what won't fit."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

import torch

from encoder.analysis.cost import param_summary
from encoder.config import EncoderConfig
from encoder.model import Encoder
from encoder.trace import Trace, run

BUDGET_ENV = "ENCODER_EXPLORER_MEMORY_MB"
DEFAULT_BUDGET_MB = 1536  # one model + trace; sized so a 2-core / 8 GB machine holds a few in its caches
FLOAT_BYTES = 4


def param_count(cfg: EncoderConfig) -> int:
    """Number of parameters of build_model(cfg)."""
    return param_summary(cfg)["total"]


def trace_floats(cfg: EncoderConfig, seq: int) -> int:
    """Floats kept by one trace: 8 taps of (seq, d_model), ffn_hidden, attention, hidden states."""
    d, h = cfg.d_model, cfg.num_heads
    per_layer = 8 * seq * d + seq * cfg.d_ff + h * seq * seq
    return cfg.num_layers * per_layer + (cfg.num_layers + 2) * seq * d


def estimate_bytes(cfg: EncoderConfig, seq: int | None = None) -> dict[str, int]:
    """Bytes for the parameters, one trace at `seq` tokens (default max_len), and the peak transient scores."""
    seq = cfg.max_len if seq is None else seq
    params = param_count(cfg) * FLOAT_BYTES
    trace = trace_floats(cfg, seq) * FLOAT_BYTES
    transient = 3 * cfg.num_heads * seq * seq * FLOAT_BYTES  # scores, softmax and its copy in one layer
    return {"params": params, "trace": trace, "transient": transient, "total": params + trace + transient}


def budget_bytes() -> int:
    raw = os.environ.get(BUDGET_ENV, "")
    try:
        mb = float(raw) if raw.strip() else DEFAULT_BUDGET_MB
    except ValueError:
        mb = DEFAULT_BUDGET_MB
    return int(max(mb, 1) * 2**20)


def check_budget(cfg: EncoderConfig, seq: int | None = None) -> dict[str, int]:
    """Raise ValueError with the estimate when the model and one trace exceed the memory budget."""
    est = estimate_bytes(cfg, seq)
    budget = budget_bytes()
    if est["total"] > budget:
        raise ValueError(
            f"This model needs about {_mb(est['total'])} ({_mb(est['params'])} of weights and {_mb(est['trace'])} "
            f"for one traced sentence), above this server's limit of {_mb(budget)}. "
            f"Lower num_layers, d_model or d_ff (or an operator can raise {BUDGET_ENV})."
        )
    return est


def _mb(n: int) -> str:
    return f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / 2**20:.0f} MB"


def run_with_cpu_fallback(load: Callable[[str], Encoder], device: str, text: str, train: bool = False) -> Trace:
    """run() on `device`; if the GPU runs out of memory, run on the CPU instead and say so in trace.notice.

    `load(device)` returns the (cached) model for a device, so the CPU copy is built only when needed.
    """
    try:
        return run(load(device), text, train=train)
    except torch.cuda.OutOfMemoryError:
        if device == "cpu":
            raise
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        trace = run(load("cpu"), text, train=train)
        return dataclasses.replace(trace, notice=f"The {device} device ran out of memory for this input; it ran on the CPU.")
