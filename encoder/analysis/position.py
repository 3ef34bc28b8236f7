"""Position: the positional-encoding table, and the check that without it the encoder ignores word order.

Seed 004: without positional information the layers are "totally invariant to the position of the tokens",
since attention is a weighted sum. Precisely, they are permutation-equivariant: permuting the input rows
permutes the output rows, out(P x) = P out(x), and the attention as A(P x) = P A(x) P^T.

Two settings of later encoders carry position without a table. Rotary positions (RoPE) add nothing to the
embeddings, but turn q and k so that each score depends on how far apart query and key are: relative positions,
which a shuffle changes. A sliding window lets a query see only the keys near it, so it too depends on where the
tokens stand. A model is order-blind only without both (order_blind_changes).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from torch import Tensor

from ..config import EncoderConfig
from ..model import Encoder, build_model, sinusoidal_table
from ..rotary import rope_angles
from ..tokenizer import encode, special_positions, special_tokens, tokenizer


def _derangement_ish(n: int, seed: int, items: list[str]) -> list[int]:
    """A seeded permutation of range(n) that changes the order of `items` whenever that is possible."""
    rng = random.Random(seed)  # a private generator: the global random state is untouched
    perm = list(range(n))
    if len(set(items)) < 2:
        return perm
    for _ in range(100):
        rng.shuffle(perm)
        if [items[i] for i in perm] != items:
            return perm
    return perm[1:] + perm[:1]  # a rotation changes the order whenever two items differ


def order_blind_changes(config: EncoderConfig) -> tuple[tuple[str, object], ...]:
    """The config changes under which the same weights cannot see word order: no positional encoding (sinusoidal,
    learned or rotary), and global attention instead of a sliding window. () when the model is order-blind already."""
    changes = []
    if config.positional != "none":
        changes.append(("positional", "none"))
    if config.window:
        changes.append(("window", 0))
    return tuple(changes)


def _word_groups(word_ids: list[int | None], fixed: set[int]) -> list[list[int]]:
    """Token indices grouped into the words the tokenizer cut them from (its word ids: a WordPiece "##ing", a BPE
    piece without Ġ, a Unigram piece without ▁ join the piece before); the positions in `fixed` are left out."""
    groups: dict[int | None, list[int]] = {}
    for i, word in enumerate(word_ids):
        if i not in fixed:
            groups.setdefault(word if word is not None else -1 - i, []).append(i)
    return list(groups.values())


@dataclass(frozen=True)
class PermutationResult:
    """How far the encoder is from permutation-equivariance on one input."""

    tokens: list[str]
    permuted_tokens: list[str]
    permutation: list[int]  # permuted position i holds original position permutation[i]
    out_diff: float  # max |out(P x) - P out(x)|
    attn_diff: float  # max over layers of |A(P x) - P A(x) P^T|
    attn_diff_per_layer: list[float]
    out_scale: float  # max |out(x)|, to read out_diff against
    tol: float

    @property
    def invariant(self) -> bool:
        """True when both differences are float noise: the model did not see the order."""
        return self.out_diff <= self.tol * max(1.0, self.out_scale) and self.attn_diff <= self.tol


def permutation_check_ids(model: Encoder, ids: list[int], permutation: list[int], tol: float = 1e-4) -> PermutationResult:
    """Run the model on ids and on ids[permutation] and compare the outputs and attention up to the permutation."""
    n = len(ids)
    if sorted(permutation) != list(range(n)):
        raise ValueError(f"permutation must reorder all {n} positions 0..{n - 1} exactly once.")
    device = next(model.parameters()).device
    x = torch.tensor([ids], device=device)  # (1, T)
    p = torch.tensor(permutation, device=device)
    with torch.inference_mode():
        out, patterns, _ = model(x)
        out_p, patterns_p, _ = model(x[:, p])
    out, out_p = out[0].double().cpu(), out_p[0].double().cpu()  # (T, D)
    p = p.cpu()
    out_diff = float((out_p - out[p]).abs().max())
    per_layer = []
    for a, a_p in zip(patterns, patterns_p, strict=True):
        a, a_p = a[0].double().cpu(), a_p[0].double().cpu()  # (H, T, T)
        per_layer.append(float((a_p - a[:, p][:, :, p]).abs().max()))  # P A P^T
    return PermutationResult(
        tokens=[str(i) for i in ids],
        permuted_tokens=[str(ids[i]) for i in permutation],
        permutation=list(permutation),
        out_diff=out_diff,
        attn_diff=max(per_layer),
        attn_diff_per_layer=per_layer,
        out_scale=float(out.abs().max()),
        tol=tol,
    )


def permutation_check(model: Encoder, text: str, seed: int, tol: float = 1e-4,
                      max_tokens: int | None = None) -> PermutationResult:
    """Shuffle the words between the special tokens and check out(Px) = P out(x), A(Px) = P A P^T.

    The text is cut at max_tokens tokens (at most the model's max_len, which is the default).
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("Type a sentence to shuffle; the input is empty.")
    limit = min(model.cfg.max_len, max_tokens or model.cfg.max_len)
    enc = encode(text, limit, model.vocab_dir)
    if max(enc.ids) >= model.cfg.vocab_size:
        raise ValueError(f"vocab_size={model.cfg.vocab_size} is smaller than the tokenizer's vocabulary.")
    # Permute whole words (a word's pieces stay together, in order); the special tokens ([CLS] and [SEP], <s> and
    # </s>) stay where the tokenizer put them.
    fixed = set(special_positions(enc.tokens, special_tokens(model.cfg.max_len, model.vocab_dir)))
    word_ids = tokenizer(limit, model.vocab_dir).encode(text).word_ids
    groups = _word_groups(word_ids, fixed)
    order = _derangement_ish(len(groups), seed, [" ".join(enc.tokens[i] for i in g) for g in groups])
    moved = iter(i for k in order for i in groups[k])
    permutation = [i if i in fixed else next(moved) for i in range(len(enc.ids))]
    if [enc.ids[i] for i in permutation] == enc.ids:
        raise ValueError("There is nothing to shuffle: type a sentence with at least two different words.")
    result = permutation_check_ids(model, enc.ids, permutation, tol)
    return PermutationResult(
        tokens=list(enc.tokens),
        permuted_tokens=[enc.tokens[i] for i in permutation],
        permutation=permutation,
        out_diff=result.out_diff,
        attn_diff=result.attn_diff,
        attn_diff_per_layer=result.attn_diff_per_layer,
        out_scale=result.out_scale,
        tol=tol,
    )


def rope_table(config: EncoderConfig, seq: int, layer: int = 0) -> Tensor:
    """(seq, d_head): cos then sin of the angles rotary positions turn `layer`'s queries and keys by at each position
    (its theta: rope_theta, or rope_theta_local in a sliding-window layer). Row m's cosine with row n is the mean of
    cos((m - n) theta_i): it depends on the distance m - n alone."""
    if config.positional != "rotary":
        raise ValueError(f"positional={config.positional!r} turns nothing; rope_table needs positional='rotary'.")
    if isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq <= config.max_len:
        raise ValueError(f"seq={seq!r} must be a whole number from 1 to max_len={config.max_len}.")
    cos, sin = rope_angles(seq, config.d_head, config.layer_theta(layer), torch.device("cpu"))  # (seq, d_head/2) each
    return torch.cat((cos, sin), dim=-1)


def pe_table(config: EncoderConfig, seq: int, model: Encoder | None = None) -> Tensor:
    """The (seq, width) positional term added to the embeddings: sinusoidal, learned (from `model`), or zeros.

    width is d_embed when the embeddings are narrower than d_model. Rotary positions add nothing (zeros): they turn
    q and k inside attention instead.
    """
    if isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq <= config.max_len:
        raise ValueError(f"seq={seq!r} must be a whole number from 1 to max_len={config.max_len}.")
    width = config.d_embed or config.d_model
    if config.positional == "sinusoidal":
        return sinusoidal_table(seq, width)
    if config.positional == "learned":
        model = model if model is not None else build_model(config, "cpu")
        return model.embed.positions(seq).detach().float().cpu().clone()  # from row pos_offset (RoBERTa: 2)
    return torch.zeros(seq, width)
