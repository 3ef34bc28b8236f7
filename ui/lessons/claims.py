"""Claims: the numbers a talking point may state, each computed from the slide's live view.

A talking point that states a number names the claim that computes it and writes the number as the point does:
    {"text": "Each head works in 32 dimensions.", "checks": [{"claim": "d_head", "shows": "32"}]}
verify(slide) opens the slide's view (the model and trace its page would show), computes every claim and says
whether it reads as written: "shows" rounds the claim as the value is written ("0.41", "43%", "1,536", "384"),
"below" and "above" compare with a bound. The built-in lessons are checked this way on the real model in the tests,
and the player can show the same verdicts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

import encoder
from encoder.analysis import cost, embeddings, stability
from encoder.analysis.variants import variant
from encoder.viz.heads import head_steps

from .. import get_permutation_check, get_variant_trace, purpose
from ..caches import CACHE
from .live import Live, open_view

if TYPE_CHECKING:
    from .format import Check, Slide

OPS = ("shows", "below", "above")
Value = float | int | str


@dataclass(frozen=True)
class Claim:
    """A named number of a view: `params` are the args a check may give, `what` says what it measures."""

    name: str
    params: tuple[str, ...]
    compute: Callable[..., Value]
    what: str


CLAIMS: dict[str, Claim] = {}


def claim(*params: str) -> Callable[[Callable[..., Value]], Callable[..., Value]]:
    """Register a claim under its function's name; its docstring is what it measures."""
    def register(fn: Callable[..., Value]) -> Callable[..., Value]:
        CLAIMS[fn.__name__] = Claim(fn.__name__, params, fn, (fn.__doc__ or "").strip())
        return fn
    return register


# ------------------------------------------------------------------------------------------------ the config
@claim()
def d_model(live: Live) -> int:
    """The width of every token vector between sub-layers."""
    return live.config.d_model


@claim()
def num_heads(live: Live) -> int:
    """Attention heads per layer."""
    return live.config.num_heads


@claim()
def d_head(live: Live) -> int:
    """Dimensions of one head's queries, keys and values (d_k = d_model / num_heads), read from the trace's q."""
    return int(live.trace.heads[0]["q"].shape[-1])


@claim()
def d_ff(live: Live) -> int:
    """The FFN's hidden width, read from the trace's ffn_hidden tap."""
    return int(live.trace.taps[0]["ffn_hidden"].shape[-1])


@claim()
def ffn_ratio(live: Live) -> float:
    """d_ff / d_model."""
    return live.config.d_ff / live.config.d_model


@claim()
def layer(live: Live) -> int:
    """The layer on screen (the slide's, moved into the model's range as the page's slider moves it)."""
    return live.layer


@claim()
def head(live: Live) -> int:
    """The head on screen."""
    return live.head


@claim()
def placement(live: Live) -> str:
    """Where LayerNorm sits: "Post-LN" (after each residual add) or "Pre-LN" (inside each branch)."""
    return "Post-LN" if live.config.norm == "post" else "Pre-LN"


@claim()
def num_maps(live: Live) -> int:
    """Attention maps of one forward pass: layers × heads."""
    return live.trace.num_layers * live.trace.num_heads


@claim()
def vocab_size(live: Live) -> int:
    """Rows of the token embedding table."""
    return live.config.vocab_size


@claim()
def depth(live: Live) -> int:
    """The depth chosen on the Training stability page."""
    return live.values["depth"]


@claim()
def num_layers(live: Live) -> int:
    """Layers in the stack, counted in the trace."""
    return live.trace.num_layers


@claim()
def tokens(live: Live) -> int:
    """Tokens of the sentence, [CLS] and [SEP] included."""
    return live.trace.seq_len


@claim("position")
def token(live: Live, position: int | str) -> str:
    """The token at a position (0 = first; -1 = last)."""
    return live.trace.tokens[int(position)]


@claim()
def layer_norm_eps(live: Live) -> str:
    """LayerNorm's epsilon, as the sidebar writes it (1e-12)."""
    return f"{live.config.layer_norm_eps:g}".replace("e-0", "e-")


@claim()
def dropout(live: Live) -> float:
    """The dropout probability of the config."""
    return live.config.dropout


@claim()
def params_per_layer(live: Live) -> float:
    """Parameters of one layer, in millions."""
    return cost.param_summary(live.config)["per_layer"] / 1e6


@claim()
def params_total(live: Live) -> float:
    """Parameters of the whole model, embeddings included, in millions."""
    return cost.param_summary(live.config)["total"] / 1e6


@claim()
def embedding_share(live: Live) -> float:
    """Share of all the model's parameters in its embeddings (tokens, positions, segments and their LayerNorm)."""
    summary = cost.param_summary(live.config)
    return summary["embeddings"] / summary["total"]


@claim("part")
def param_share(live: Live, part: str) -> float:
    """Share of one layer's parameters in a part: "attention", "ffn" or "layernorm"."""
    rows = cost.param_counts(live.config).query("block == 'layer 0'")
    prefix = {"attention": "attention", "ffn": "FFN", "layernorm": "LayerNorm"}[part]
    return float(rows.loc[rows["part"].str.startswith(prefix), "params"].sum() / rows["params"].sum())


# ------------------------------------------------------------------------------------------------- shapes
def _shape(t: torch.Tensor) -> str:
    return " × ".join(str(n) for n in t.shape)


@claim("tap")
def shape(live: Live, tap: str) -> str:
    """The shape of a tap of the layer on screen, tokens × width ("16 × 384")."""
    return _shape(live.trace.taps[live.layer][tap])


@claim("part")
def head_shape(live: Live, part: str) -> str:
    """The shape of the layer's per-head q, k, v or z: heads × tokens × d_k."""
    return _shape(live.trace.heads[live.layer][part])


@claim()
def w_o_shape(live: Live) -> str:
    """The shape of W_O of the layer on screen, as (output, input) features."""
    return _shape(live.frame.model.layers[live.layer].attn.out.weight)


# ---------------------------------------------------------------------------------------------- attention
def _position(live: Live, word: str | int) -> int:
    tokens = live.trace.tokens
    if isinstance(word, int):
        return word
    if word not in tokens:
        raise ValueError(f"The token {word!r} is not in this sentence.")
    return tokens.index(word)


def _pattern(live: Live) -> torch.Tensor:
    """The map on screen: the head's, or the head average when "Average of heads" is on. (T, T)"""
    maps = live.trace.attention[live.layer]  # (H, T, T)
    return maps.mean(0) if live.values["avg"] else maps[live.head]


@claim("query", "key")
def weight(live: Live, query: str, key: str) -> float:
    """The attention weight from a query token to a key token (first occurrences) in the map on screen."""
    return float(_pattern(live)[_position(live, query), _position(live, key)])


@claim("query")
def top_key(live: Live, query: str) -> str:
    """The key token a query token gives its largest weight in the map on screen."""
    return live.trace.tokens[int(_pattern(live)[_position(live, query)].argmax())]


@claim()
def row_sum_gap(live: Live) -> float:
    """The largest distance of any attention row's sum from 1, over every layer and head."""
    return float((live.trace.attention.double().sum(-1) - 1).abs().max())


@claim()
def softmax_gap(live: Live) -> float:
    """How far softmax(q·k/√d_k), recomputed from the head's q and k, is from the trace's attention row."""
    steps = head_steps(live.trace, live.layer, live.head, live.query)
    return float(np.abs(steps.weights - steps.trace_row).max())


@claim()
def value_sum_gap(live: Live) -> float:
    """How far Σ_j a_ij v_j, recomputed from the head's weights and values, is from its output z_i."""
    steps = head_steps(live.trace, live.layer, live.head, live.query)
    return float(np.abs(steps.z_sum - steps.z).max())


@claim()
def w_o_gap(live: Live) -> float:
    """How far concat(z) W_Oᵀ + b, recomputed for every token, is from the layer's attn tap."""
    out = live.frame.model.layers[live.layer].attn.out
    heads = live.trace.heads[live.layer]
    with torch.inference_mode():
        mixed = out(heads["concat"].to(out.weight.device)).cpu()  # (T, D)
    return float((mixed - live.trace.taps[live.layer]["attn"]).abs().max())


@claim()
def right_share(live: Live) -> float:
    """Share of the weight that the map's queries give to keys after themselves (0 under a causal mask)."""
    pattern = _pattern(live).double()
    return float(torch.triu(pattern, diagonal=1).sum() / pattern.sum())


# -------------------------------------------------------------------------------------- activations
@claim("tap", "stat")
def tap_stat(live: Live, tap: str, stat: str) -> float:
    """A statistic (mean, std, rms, min, max, zero_frac) of a tap of the layer on screen, over every token."""
    stats = live.trace.stats()
    return float(stats.loc[(stats["layer"] == live.layer) & (stats["tap"] == tap), stat].iloc[0])


@claim("depth")
def residual_norm(live: Live, depth: str | int) -> float:
    """The mean length of the token vectors after the embeddings (depth 0) or after layer depth - 1 ("last")."""
    norms = live.trace.hidden_states.double().norm(dim=-1).mean(-1)  # (L + 1,)
    return float(norms[-1 if depth == "last" else int(depth)])


@claim("norm", "depth")
def placement_norm(live: Live, norm: str, depth: str | int) -> float:
    """residual_norm of the same weights in a norm placement ("post" / "pre"), as the Compare page runs them."""
    trace = live.trace if norm == live.config.norm else _twin(live, norm)
    norms = trace.hidden_states.double().norm(dim=-1).mean(-1)
    return float(norms[-1 if depth == "last" else int(depth)])


def _twin(live: Live, norm: str) -> encoder.Trace:
    fr = live.frame
    return get_variant_trace(fr.model_key, fr.device, (("norm", norm),), live.trace.text, live.trace.train)


# ---------------------------------------------------------------------------------------- training mode
@claim()
def train_eval_gap(live: Live) -> float:
    """The largest change of any output value between training mode (dropout on) and eval mode, same sentence."""
    fr = live.frame
    other = encoder.run(fr.model, live.trace.text, train=not live.trace.train)
    return float((other.output - live.trace.output).abs().max())


def _same(a: torch.Tensor, b: torch.Tensor) -> str:
    return "identical" if torch.equal(a, b) else "different"


@claim()
def eval_vs_no_dropout(live: Live) -> str:
    """'identical' when, in eval mode, this model's output equals that of the same weights with dropout 0 bit for bit."""
    fr = live.frame
    plain = variant(fr.model, dropout=0.0)
    return _same(encoder.run(plain, live.trace.text).output, encoder.run(fr.model, live.trace.text).output)


@claim()
def rerun(live: Live) -> str:
    """'identical' when running this view's forward pass again gives the very same output, bit for bit."""
    return _same(encoder.run(live.frame.model, live.trace.text, train=live.trace.train).output, live.trace.output)


@claim()
def dropped_share(live: Live) -> float:
    """Share of the attention output that dropout zeroed before the first residual add (add1 - input == 0)."""
    taps = live.trace.taps[live.layer]
    return float(((taps["add1"] - taps["input"]) == 0).double().mean())


@claim("eps")
def eps_change(live: Live, eps: float | str) -> float:
    """The largest output difference between this model and the same weights with another LayerNorm epsilon."""
    fr = live.frame
    other = variant(fr.model, layer_norm_eps=float(eps))
    return float((encoder.run(other, live.trace.text).output - live.trace.output).abs().max())


@claim()
def config_round_trip(live: Live) -> str:
    """'identical' when the config, written to JSON (as the link carries it) and read back, rebuilds this very model:
    the same config and, seeded by it, the same weights bit for bit."""
    cfg = live.config
    again = encoder.EncoderConfig.from_dict(json.loads(cfg.to_json()))
    a, b = live.frame.model.state_dict(), encoder.build_model(again, "cpu").state_dict()
    same = again == cfg and a.keys() == b.keys() and all(torch.equal(a[k].cpu(), b[k]) for k in a)
    return "identical" if same else "different"


# ------------------------------------------------------------------------------------------ the stack's use
def _sentence_vectors(live: Live, pool: str) -> list[torch.Tensor]:
    if pool not in embeddings.POOLINGS:
        raise ValueError(f"pool={pool!r}: choose one of {', '.join(embeddings.POOLINGS)}.")
    sentences, _ = purpose.sentence_list(live.values)
    return [purpose.get_sentence_vector(live.frame, s, pool).vector.double() for s in sentences]


@claim("a", "b", "pool")
def similarity(live: Live, a: int | str, b: int | str, pool: str | None = None) -> float:
    """Cosine similarity of sentences a and b (1 = the Sentence box) on the Sentence embeddings page; `pool` ("mean"
    or "cls") compares with the other pooling of the same sentences."""
    vectors = _sentence_vectors(live, pool or live.values["pool"])
    return float(vectors[int(a) - 1] @ vectors[int(b) - 1])


@claim("component")
def pca_share(live: Live, component: int | str) -> float:
    """Share of the variance kept by the trajectories' first (1) or second (2) component, or by both ("both")."""
    if component not in ("both", 1, 2, "1", "2"):
        raise ValueError(f"component={component!r}: choose 1, 2 or both.")
    _, shares = purpose.get_trajectories(live.frame)
    return float(shares.sum() if component == "both" else shares[int(component) - 1])


@claim("a", "b", "depth")
def token_cosine(live: Live, a: str, b: str, depth: str | int) -> float:
    """Cosine of two tokens' vectors after the embeddings (depth 0) or after layer depth - 1 ("last")."""
    values = embeddings.token_similarity(live.trace, _position(live, a), _position(live, b))
    return float(values[-1 if depth == "last" else int(depth)])


@claim("stat")
def knockout_change(live: Live, stat: str) -> float:
    """The relative change of the tokens' outputs under the slide's knock-outs: "max" or "mean" over tokens."""
    knocks, _ = purpose.parse_ablate(live.values["ablate"], live.config)
    knocked = purpose.get_run(live.frame, live.trace.text, knocks)
    change = (knocked.output - live.trace.output).double().norm(dim=-1) / live.trace.output.double().norm(dim=-1)
    return float(change.max() if stat == "max" else change.mean())


# ------------------------------------------------------------------------------------ position and warm-up
@claim("model")
def shuffle_gap(live: Live, model: str) -> float:
    """max |A(Px) - P A(x) Pᵀ| on the Position page: "this" model, or the same weights with positional "none"."""
    fr = live.frame
    changes = () if model == "this" else (("positional", "none"),)
    return get_permutation_check(fr.model_key, fr.device, changes, live.trace.text, live.values["shuffle"]).attn_diff


def grad_norms(depth: int) -> pd.DataFrame:
    """W2's gradient norm per layer at initialisation, Post-LN and Pre-LN (the Training stability page's first chart)."""
    def compute() -> pd.DataFrame:
        both = [stability.grad_norms_at_init(depth, norm) for norm in ("post", "pre")]
        return pd.concat(both).query("group == 'W2'").reset_index(drop=True)
    return CACHE.get(("lesson-grad-norms", depth), compute)


@claim("norm", "layer")
def w2_grad(live: Live, norm: str, layer: str | int) -> float:
    """The gradient norm of W2 at initialisation in a layer ("first", "last" or a number) for a placement."""
    df = grad_norms(live.values["depth"])
    rows = df[df["norm"] == norm].sort_values("layer")["grad_norm"].to_numpy()
    return float(rows[{"first": 0, "last": -1}.get(layer, layer) if isinstance(layer, str) else layer])


@claim()
def w2_grad_ratio(live: Live) -> float:
    """The smallest ratio, over layers, of Post-LN's W2 gradient norm at initialisation to Pre-LN's."""
    df = grad_norms(live.values["depth"])
    post = df[df["norm"] == "post"].sort_values("layer")["grad_norm"].to_numpy()
    pre = df[df["norm"] == "pre"].sort_values("layer")["grad_norm"].to_numpy()
    return float((post / pre).min())


# ----------------------------------------------------------------------------------------------- verdicts
@dataclass(frozen=True)
class Verdict:
    """One check on a live view: `shown` is the claim as the point would write it (or the error that stopped it)."""

    point: int
    check: Check
    shown: str
    ok: bool

    def sentence(self) -> str:
        c = self.check
        if self.ok:
            return f"{c.claim} {c.op} {c.value}: holds (here {self.shown})."
        return f"{c.claim} {c.op} {c.value}: does not hold here ({self.shown})."


def evaluate(check: Check, live: Live) -> tuple[str, bool]:
    """(the claim as written, whether it reads as the check says) on this live view."""
    try:
        actual = CLAIMS[check.claim].compute(live, **dict(check.args))
    except ValueError as err:  # the claims' own sentences (a token not in the sentence, a model not installed)
        return f"cannot be computed here: {str(err)[:160]}", False
    except (KeyError, IndexError, TypeError, RuntimeError, ZeroDivisionError):
        return f"cannot be computed here with the args {dict(check.args)!r}", False
    if check.op == "shows":
        shown = written_like(actual, check.value)
        return shown, shown == check.value
    bound = float(check.value)
    ok = float(actual) < bound if check.op == "below" else float(actual) > bound
    return f"{float(actual):.3g}", ok


def written_like(actual: Value, like: str) -> str:
    """`actual` written as `like` is: the same decimals, percent sign and thousands separators ("0.41", "43%")."""
    if isinstance(actual, str):
        return actual
    match = re.fullmatch(r"-?[\d,]+(?:\.(\d+))?(%?)", like)
    if match is None:
        return str(actual)
    places, percent = len(match.group(1) or ""), match.group(2)
    number = float(actual) * (100 if percent else 1)
    text = f"{number:{',' if ',' in like else ''}.{places}f}"
    if float(text.replace(",", "")) == 0:
        text = text.lstrip("-")  # -0.00 reads as 0.00
    return text + percent


def verify(slide: Slide) -> list[Verdict]:
    """Every check of the slide's talking points on its live view (the model and trace its page would show)."""
    if not any(p.checks for p in slide.points):
        return []
    live = open_view(slide.values())
    return [Verdict(i, check, *evaluate(check, live))
            for i, point in enumerate(slide.points) for check in point.checks]
