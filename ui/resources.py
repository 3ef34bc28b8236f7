"""Memory guard: estimate a model plus one traced forward pass before building it, and refuse what won't fit."""

from __future__ import annotations

import ctypes
import dataclasses
import os
import sys
from collections.abc import Callable

import torch

from encoder.analysis.cost import param_summary
from encoder.config import EncoderConfig
from encoder.model import Encoder
from encoder.trace import Trace, run

BUDGET_ENV = "ENCODER_EXPLORER_MEMORY_MB"
DEFAULT_BUDGET_MB = 1536  # one model + trace; sized so a 2-core / 8 GB machine holds a few in its caches
FLOAT_BYTES = 4
# The longest sentence the app runs, in tokens, whatever a model could read (ModernBERT: 8192): the views, the
# browser payloads and this budget are sized for it, and a T x T attention map per head grows with its square.
APP_MAX_TOKENS = 512


def app_tokens(cfg: EncoderConfig) -> int:
    """How many tokens the app runs this model on at most: its max_len, or APP_MAX_TOKENS when that is less."""
    return min(cfg.max_len, APP_MAX_TOKENS)


def param_count(cfg: EncoderConfig) -> int:
    """Number of parameters of build_model(cfg)."""
    return param_summary(cfg)["total"]


def trace_floats(cfg: EncoderConfig, seq: int) -> int:
    """Floats kept by one trace: 8 taps of (seq, d_model), ffn_hidden, attention, per-head taps, hidden states."""
    d, h = cfg.d_model, cfg.num_heads
    # Per-head taps: q, k, v are views of the fused (seq, 3 d_model) projection, z a view of concat (seq, d_model).
    per_layer = 8 * seq * d + seq * cfg.d_ff + h * seq * seq + 4 * seq * d
    return cfg.num_layers * per_layer + (cfg.num_layers + 2) * seq * d


def estimate_bytes(cfg: EncoderConfig, seq: int | None = None) -> dict[str, int]:
    """Bytes for the parameters, one trace at `seq` tokens (default: the longest the app runs, app_tokens), and the
    peak transient scores."""
    seq = app_tokens(cfg) if seq is None else seq
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
            f"for one traced sentence of {sized_at(cfg, seq)}), above this server's limit of {_mb(budget)}. "
            f"Lower num_layers, d_model or d_ff (or an operator can raise {BUDGET_ENV})."
        )
    return est


def sized_at(cfg: EncoderConfig, seq: int | None = None) -> str:
    """Which sentence length an estimate is for, in words: the cap or the model's own limit."""
    if seq is not None:
        return f"{seq} tokens"
    if cfg.max_len > APP_MAX_TOKENS:
        return f"{APP_MAX_TOKENS} tokens, the longest this app runs (the model reads up to {cfg.max_len})"
    return f"{cfg.max_len} tokens, the longest this model reads"


def return_freed_memory() -> bool:
    """Ask glibc to give freed tensor memory back to the system at once; True if it agreed.

    By default glibc raises its mmap threshold up to 32 MB after the first large free, so a trace's many 1-30 MB
    tensors land in heap arenas (one per script thread) and, once freed, stay in the process: a server that
    evicted traces kept growing by ~200 MB in tests/app/test_memory.py. A fixed threshold keeps every buffer over
    128 kB in its own mapping, unmapped when freed, and two arenas stop per-thread fragmentation.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    m_mmap_threshold, m_arena_max = -3, -8  # malloc.h
    return bool(libc.mallopt(m_mmap_threshold, 128 * 1024)) and bool(libc.mallopt(m_arena_max, 2))


def _mb(n: int) -> str:
    return f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / 2**20:.0f} MB"


def run_with_cpu_fallback(load: Callable[[str], Encoder], device: str, text: str, train: bool = False) -> Trace:
    """run() on `device`; if the GPU runs out of memory, run on the CPU instead and say so in trace.notice.

    `load(device)` returns the (cached) model for a device, so the CPU copy is built only when needed.
    """
    def traced(model: Encoder) -> Trace:
        return run(model, text, max_tokens=app_tokens(model.cfg), train=train)

    try:
        return traced(load(device))
    except torch.cuda.OutOfMemoryError:
        if device == "cpu":
            raise
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        trace = traced(load("cpu"))
        return dataclasses.replace(trace, notice=f"The {device} device ran out of memory for this input; it ran on the CPU.")
