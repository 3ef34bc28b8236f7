"""The devices the encoder can run on: one list, in the order they are preferred, for the library and the app."""

from __future__ import annotations

import torch

DEVICES = ("cuda", "mps", "cpu")  # a GPU when there is one (NVIDIA, then Apple's), else the CPU


def has_device(name: str) -> bool:
    """Whether this machine can run on the device `name` (one of DEVICES) now."""
    if name == "cuda":
        return torch.cuda.is_available()
    if name == "mps":
        mps = getattr(torch.backends, "mps", None)
        return mps is not None and mps.is_available()
    return name == "cpu"


def available_devices() -> list[str]:
    """The devices of DEVICES this machine has, preferred first; the CPU is always last."""
    return [name for name in DEVICES if has_device(name)]


def pick_device(prefer: str | None = None) -> torch.device:
    """CUDA when there is one, else Apple's MPS, else the CPU; `prefer` overrides."""
    return torch.device(prefer or available_devices()[0])
