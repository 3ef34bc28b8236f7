"""Encoder Explorer's library: a Transformer encoder written from the equations, traced tap by tap."""

from .config import EncoderConfig
from .devices import DEVICES, available_devices, pick_device
from .model import TAPS, Encoder, build_model
from .pretrained import load_pretrained
from .trace import Trace, run

__all__ = ["DEVICES", "TAPS", "Encoder", "EncoderConfig", "Trace", "available_devices", "build_model", "load_pretrained",
           "pick_device", "run"]
