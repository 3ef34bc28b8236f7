"""Checkpoint families: each maps a Hugging Face config.json and its tensors onto our Encoder, exactly or not at all.

A family is recognised by config.json's model_type (or, without one, its architectures). Its reader turns
config.json into an EncoderConfig and refuses keys it neither reads nor knows to be harmless; its tensor map
names every tensor the config implies, and a checkpoint with tensors missing or left over is refused.
"""

from __future__ import annotations

from typing import Any

from ._base import Family, check_names, state_dict, strip_prefix
from .bert import ALBERT, BERT, ELECTRA, ROBERTA, XLM_ROBERTA
from .distilbert import DISTILBERT
from .modernbert import MODERNBERT

FAMILIES: dict[str, Family] = {f.name: f for f in (BERT, ROBERTA, XLM_ROBERTA, DISTILBERT, ELECTRA, ALBERT, MODERNBERT)}

__all__ = ["FAMILIES", "Family", "check_names", "family_of", "state_dict", "strip_prefix"]


def family_of(hf: dict[str, Any]) -> Family:
    """The family config.json names by model_type (or, without one, by architectures); ValueError if none fits."""
    names = ", ".join(FAMILIES)
    model_type = hf.get("model_type")
    archs = hf.get("architectures") or []
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise ValueError(f"config.json has architectures={archs!r}; it must be a list of class names.")
    if model_type is not None:
        family = FAMILIES.get(model_type) if isinstance(model_type, str) else None
        if family is None:
            raise ValueError(f"config.json names model_type={model_type!r}, a family this loader does not map; "
                             f"it loads {names}.")
    else:
        found = {f.name: f for a in archs for f in FAMILIES.values() if f.names_architecture(a)}
        if len(found) != 1:
            raise ValueError("config.json has no model_type, and its architectures do not name one family this "
                             f"loader maps; add \"model_type\" (one of {names}).")
        family = next(iter(found.values()))
    foreign = [a for a in archs if not family.names_architecture(a)]
    if foreign:
        raise ValueError(f"config.json says model_type={family.name!r} but its architectures name {foreign[0]!r}, "
                         f"which is not a {family.label} encoder or a task model built on one.")
    return family
