"""Performance plumbing of run(), kept out of the model's teaching code.

run() keeps every layer's attention pattern in one (num_layers, 1, H, T, T) tensor. It is allocated once, on
Linux in 2 MB pages, and each layer's attention writes its scores and softmax straight into its slice: no stack
copy (num_layers x num_heads MB of fresh memory at 512 tokens) and far fewer page faults. The slices are handed
out through a context variable for the duration of one run() call, so the shared model object holds no state
and concurrent sessions never see each other's buffers. benchmarks/RESULTS-encoder.md has the measurements.
"""

from __future__ import annotations

import ctypes
import mmap
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch
from torch import Tensor, nn

_ARENA: ContextVar[dict[int, Tensor] | None] = ContextVar("encoder_attention_arena", default=None)
_MADV_HUGEPAGE = 14  # linux/mman.h
_PAGE, _HUGE_PAGE = mmap.PAGESIZE, 2 << 20


def _libc_madvise():
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int), ctypes.c_int
    return fn


_madvise = _libc_madvise() if sys.platform.startswith("linux") else None


def empty_huge(*shape: int, device: torch.device) -> Tensor:
    """torch.empty, but on Linux CPUs a big buffer asks for 2 MB pages before it is first written.

    The attention of a long sentence is tens of MB of fresh memory (6 x 12 x 512 x 512 floats = 75 MB for
    MiniLM). Faulting that in 4 kB pages took ~30 ms on a 2-core test machine, ~10 ms in 2 MB pages, next to a
    ~200 ms forward pass. The hint only changes how the memory is mapped; where it is unavailable, nothing happens.
    """
    out = torch.empty(*shape, device=device)
    if _madvise is not None and out.device.type == "cpu" and out.nbytes >= 2 * _HUGE_PAGE:
        start = -(-out.data_ptr() // _PAGE) * _PAGE  # whole pages inside the buffer only
        end = (out.data_ptr() + out.nbytes) // _PAGE * _PAGE
        _madvise(start, end - start, _MADV_HUGEPAGE)
    return out


@contextmanager
def attention_arena(layers: nn.ModuleList, num_heads: int, seq: int, device: torch.device) -> Iterator[Tensor]:
    """Within the block, layer i's attention writes its (1, H, T, T) pattern into the yielded tensor's [i]."""
    out = empty_huge(len(layers), 1, num_heads, seq, seq, device=device)  # (L, 1, H, T, T)
    token = _ARENA.set({id(layer.attn): out[i] for i, layer in enumerate(layers)})
    try:
        yield out
    finally:
        _ARENA.reset(token)


def pattern_buffer(attn: nn.Module, shape: tuple[int, ...]) -> Tensor | None:
    """The slice this attention module writes its pattern into inside attention_arena, else None (fresh memory)."""
    arena = _ARENA.get()
    if arena is None or torch.is_grad_enabled():  # out= tensors take no part in autograd
        return None
    buf = arena.get(id(attn))
    return buf if buf is not None and buf.shape == shape else None
