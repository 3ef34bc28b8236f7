"""Knock-outs: which heads or sub-layers a forward pass zeroes, checked and sorted per layer."""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from dataclasses import dataclass

from .config import EncoderConfig

SUBLAYERS = ("attn", "ffn")


@dataclass(frozen=True)
class Knockout:
    """What one layer zeroes in a forward pass: some heads' outputs before W_O, or a whole sub-layer's output."""

    heads: tuple[int, ...] = ()
    attn: bool = False
    ffn: bool = False


KEEP_ALL = Knockout()


def _whole(x: object) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def check_ablate(cfg: EncoderConfig, ablate: Iterable | None) -> frozenset[tuple[int, int | str]]:
    """Validate knock-outs {(layer, head), (layer, "attn"), (layer, "ffn")}; ValueError names a bad one."""
    if ablate is None:
        return frozenset()
    if isinstance(ablate, (str, bytes)) or not isinstance(ablate, Iterable):
        raise ValueError(f"ablate={ablate!r} must be a set of pairs such as {{(0, 3), (1, 'ffn')}}.")
    items = set()
    for item in ablate:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise ValueError(f"ablate item {item!r} must be a pair: (layer, head), (layer, 'attn') or (layer, 'ffn').")
        layer, what = item
        if not _whole(layer) or not 0 <= layer < cfg.num_layers:
            raise ValueError(f"ablate item {tuple(item)!r}: layer {layer!r} does not exist; "
                             f"choose a layer from 0 to {cfg.num_layers - 1}.")
        if isinstance(what, str) and what not in SUBLAYERS:
            raise ValueError(f"ablate item {tuple(item)!r}: {what!r} is no sub-layer; use 'attn', 'ffn' or a head number.")
        if not isinstance(what, str) and (not _whole(what) or not 0 <= what < cfg.num_heads):
            raise ValueError(f"ablate item {tuple(item)!r}: head {what!r} does not exist; "
                             f"choose a head from 0 to {cfg.num_heads - 1}.")
        items.add((int(layer), what if isinstance(what, str) else int(what)))
    return frozenset(items)


def knockouts(cfg: EncoderConfig, ablate: Iterable | None) -> list[Knockout]:
    """check_ablate's pairs sorted into one Knockout per layer."""
    items = check_ablate(cfg, ablate)
    return [
        Knockout(
            heads=tuple(sorted(h for i, h in items if i == layer and isinstance(h, int))),
            attn=(layer, "attn") in items,
            ffn=(layer, "ffn") in items,
        )
        for layer in range(cfg.num_layers)
    ]
