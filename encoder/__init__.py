"""Encoder Explorer's library: a Transformer encoder written from the equations, traced tap by tap."""

from .config import EncoderConfig
from .model import TAPS, Encoder, build_model, pick_device
from .pretrained import load_pretrained
from .trace import Trace, run

__all__ = ["TAPS", "Encoder", "EncoderConfig", "Trace", "build_model", "load_pretrained", "pick_device", "run"]
