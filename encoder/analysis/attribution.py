"""Gradient-based attributions toward one scalar the user chooses, with Captum, on the shared model as it is.

Targets: the cosine similarity of this sentence's pooled embedding to a second sentence's (the pooling the model
is used with), or, for any model, one token's output vector projected onto its own intact direction. The inputs
attributed to are the embedding layer's output (token + position (+ segment) embeddings after its LayerNorm, the
stack's input), one vector per token, as Captum's BERT tutorial does; a token's score is the sum over its features.

The shared model is never changed: its parameters keep requires_grad=False (gradients reach our own copy of the
input only), nothing is hooked (Captum's IntegratedGradients and InputXGradient only call the function handed to
them; attention x gradient asks torch.autograd.grad for the patterns the layers return), and PyTorch's grad mode
is per thread, so another session's inference_mode pass never notices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from ..model import Encoder
from ..tokenizer import tokenizer
from ..trace import Trace, model_device, run
from .embeddings import POOLINGS, cls_pool, mean_pool, sentence_embedding
from .measures import special_positions

# Integrated Gradients starts with 20 Gauss-Legendre nodes (Captum's default rule), enough for the similarity
# targets on the default sentence and at 128 tokens; when the parts miss f(x) − f(x') by more than 1 % (some
# token targets need 32), it runs again with twice the nodes, up to MAX_STEPS. The result says how many it used.
DEFAULT_STEPS = 20
MAX_STEPS = 160
COMPLETENESS = 0.01
GRAD_MEMORY = 1 << 30  # bytes of activations one batched backward pass may hold
REMOVAL_TOKENS = ("[MASK]", "<mask>", "[PAD]", "<pad>")  # the "absent word", in order of preference

Progress = Callable[[int, int], None]  # progress(done, total)


@dataclass(frozen=True)
class Target:
    """The scalar attributions and faithfulness curves follow: kind "similarity" (to `other`, pooled by `pooling`)
    or "token" (position `token`'s output projected onto its intact direction)."""

    kind: str
    other: str = ""
    pooling: str = "mean"
    token: int = 0

    def rows(self, seq: int) -> tuple[int, ...]:
        """The output positions the target reads: the token, [CLS] for "cls" pooling, every position for "mean"."""
        if self.kind == "token":
            return (self.token,)
        return (0,) if self.pooling == "cls" else tuple(range(seq))

    def describe(self, trace: Trace) -> str:
        """One sentence naming the target, with the token as text (for a caption; never markup)."""
        if self.kind == "token":
            return f"the output of token {self.token} ({trace.tokens[self.token]!r}) projected onto its own direction"
        return f"the cosine similarity of the sentence's {self.pooling}-pooled embedding to the second sentence's"


def similarity_target(other: str, pooling: str = "mean") -> Target:
    """Target: cos(pooled embedding of this sentence, pooled embedding of `other`)."""
    return Target("similarity", other=other, pooling=pooling)


def token_target(token: int) -> Target:
    """Target: h_i · h_i(intact) / ‖h_i(intact)‖ for output position `token`."""
    return Target("token", token=token)


@dataclass(frozen=True)
class Attribution:
    """One method's attribution of the target to the input tokens."""

    method: str  # a key of METHODS
    scores: Tensor  # (T,): positive supports the target; the sum over a token's embedding features
    value: float  # the target at the sentence, f(x)
    heads: Tensor | None = None  # (L, H, T, T): attention x gradient per layer and head
    baseline_value: float | None = None  # f(x') at the baseline (Integrated Gradients)
    delta: float | None = None  # Σ scores − (f(x) − f(x')): Integrated Gradients' completeness error
    steps: int | None = None
    baseline: str = ""  # what the baseline is, in words


def removal_token(model: Encoder) -> tuple[int, str]:
    """The token that stands for an absent word: the vocabulary's mask token, else its padding token."""
    tok = tokenizer(model.cfg.max_len, model.vocab_dir)
    for name in REMOVAL_TOKENS:
        index = tok.token_to_id(name)
        if index is not None and index < model.cfg.vocab_size:
            return index, name
    raise ValueError("The vocabulary has neither a mask nor a padding token to stand for a removed word.")


def removable(trace: Trace) -> tuple[int, ...]:
    """The positions that may be replaced: every one but the special tokens."""
    special = set(special_positions(trace))
    return tuple(i for i in range(trace.seq_len) if i not in special)


def check_target(model: Encoder, trace: Trace, target: Target) -> None:
    """ValueError with a sentence when the target or trace cannot be attributed; nothing is computed."""
    if trace.config != model.cfg:
        raise ValueError("This trace was made by another model; run the sentence through this model first.")
    if trace.train:
        raise ValueError("Attributions follow the forward pass without dropout; switch dropout (training mode) off.")
    if not removable(trace):
        raise ValueError("The sentence has only special tokens ([CLS] and [SEP]): there is no word to attribute to.")
    if target.kind == "token":
        if isinstance(target.token, bool) or not isinstance(target.token, int) or not 0 <= target.token < trace.seq_len:
            raise ValueError(f"token={target.token!r} is not a position; choose one from 0 to {trace.seq_len - 1}.")
    elif target.kind == "similarity":
        if target.pooling not in POOLINGS:
            raise ValueError(f"pooling={target.pooling!r} is not supported; choose 'mean' or 'cls'.")
        if not isinstance(target.other, str) or not target.other.strip():
            raise ValueError("The second sentence is empty; type a sentence to compare with.")
    else:
        raise ValueError(f"target kind {target.kind!r} is not supported; choose 'similarity' or 'token'.")


def objective(model: Encoder, trace: Trace, target: Target) -> Callable[[Tensor], Tensor]:
    """The target as a function of the encoder's output, (B, T, D) -> (B,), with its fixed reference precomputed."""
    check_target(model, trace, target)
    device = model_device(model)
    if target.kind == "token":
        intact = trace.output[target.token].double()
        length = torch.linalg.vector_norm(intact)
        if not length > 0:
            raise ValueError(f"Token {target.token}'s output is all zeros: it has no direction to project onto.")
        direction = (intact / length).float().to(device)
        return lambda out: out[:, target.token] @ direction
    other = run(model, target.other, max_tokens=trace.max_tokens, ablate=trace.ablate, device=device)
    reference = sentence_embedding(other, target.pooling).to(device)  # (D,), unit length
    pool = mean_pool if target.pooling == "mean" else cls_pool
    return lambda out: pool(out) @ reference  # both unit vectors: the cosine


def embedded(model: Encoder, ids: Tensor) -> Tensor:
    """The stack's input for token ids (B, T) -> (B, T, D), computed without a graph."""
    with torch.inference_mode(False), torch.no_grad():
        return model.embed(ids.to(model_device(model)))


def replaced(trace: Trace, positions: tuple[int, ...], token: int) -> Tensor:
    """The trace's token ids (1, T) with `positions` replaced by `token`."""
    ids = torch.tensor([trace.token_ids])
    ids[0, list(positions)] = token
    return ids


def batch_size(model: Encoder, seq: int) -> int:
    """How many sequences one batched backward pass may hold within GRAD_MEMORY (a rough count of float32 activations)."""
    cfg = model.cfg
    per_layer = 3 * cfg.num_heads * seq * seq + 2 * seq * cfg.d_ff + 12 * seq * cfg.d_model
    return max(1, GRAD_MEMORY // (4 * cfg.num_layers * per_layer))


def _forward(model: Encoder, trace: Trace, fn: Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    """Stack input (B, T, D) -> target (B,), with the trace's knock-outs."""
    return lambda x: fn(model.forward_embedded(x, None, None, trace.ablate)[0])


def integrated_gradients(model: Encoder, trace: Trace, target: Target, steps: int = DEFAULT_STEPS,
                         progress: Progress | None = None) -> Attribution:
    """Integrated Gradients (Sundararajan et al. 2017) by Captum, batched: baseline = every word replaced by the mask
    token (positions and special tokens kept), `steps` Gauss-Legendre nodes, doubled while the scores miss
    f(x) − f(x') by more than 1 % (up to MAX_STEPS); progress(done, steps) counts the nodes of the current run."""
    if isinstance(steps, bool) or not isinstance(steps, int) or not 2 <= steps <= MAX_STEPS:
        raise ValueError(f"steps={steps!r} must be a whole number from 2 to {MAX_STEPS}; {DEFAULT_STEPS} is the default.")
    fn = objective(model, trace, target)
    token, name = removal_token(model)
    x = embedded(model, torch.tensor([trace.token_ids]))
    base = embedded(model, replaced(trace, removable(trace), token))
    forward = _forward(model, trace, fn)
    with torch.inference_mode():
        fx, fb = forward(torch.cat([x, base])).double().tolist()
    done = 0

    def counted(batch: Tensor) -> Tensor:
        nonlocal done
        out = forward(batch)
        done += batch.shape[0]
        if progress is not None:
            progress(min(done, steps), steps)
        return out

    from captum.attr import IntegratedGradients  # here: captum.attr loads matplotlib, 1.5 s of a page's cold start

    while True:
        done = 0
        with torch.inference_mode(False), torch.enable_grad():
            attr = IntegratedGradients(counted).attribute(x, baselines=base, n_steps=steps,
                                                          internal_batch_size=batch_size(model, trace.seq_len))
        scores = attr[0].detach().double().sum(-1)  # (T,)
        delta = float(scores.sum()) - (fx - fb)
        if abs(delta) <= COMPLETENESS * abs(fx - fb) + 1e-6 or 2 * steps > MAX_STEPS:
            break
        steps *= 2
    return Attribution("ig", scores.float().cpu(), fx, baseline_value=fb, delta=delta, steps=steps,
                       baseline=f"every word replaced by {name}; positions and special tokens kept")


def gradient_x_input(model: Encoder, trace: Trace, target: Target) -> Attribution:
    """Gradient × Input by Captum: ∂f/∂x · x per token, at the sentence itself."""
    from captum.attr import InputXGradient  # here, as in integrated_gradients

    forward = _forward(model, trace, objective(model, trace, target))
    x = embedded(model, torch.tensor([trace.token_ids])).requires_grad_()  # our own tensor, not the model's
    with torch.inference_mode(False), torch.enable_grad():
        attr = InputXGradient(forward).attribute(x)
    with torch.inference_mode():
        value = float(forward(x.detach())[0])
    return Attribution("gxi", attr[0].detach().double().sum(-1).float().cpu(), value)


def attention_x_gradient(model: Encoder, trace: Trace, target: Target) -> Attribution:
    """α ⊙ ∂f/∂α for every layer and head, (L, H, T, T); a token's score sums its column over layers, heads and rows.

    Columns are positions entering each layer, so the sum treats position j at every depth as token j. Captum has
    no attention-weight method that leaves the model unhooked, so the gradient comes from torch.autograd.grad.
    """
    fn = objective(model, trace, target)
    x = embedded(model, torch.tensor([trace.token_ids])).requires_grad_()  # our own tensor: the graph starts here
    with torch.inference_mode(False), torch.enable_grad():
        out, patterns, _ = model.forward_embedded(x, None, None, trace.ablate)
        value = fn(out)
        # A knocked-out attention sub-layer leaves its pattern out of the graph: its gradient is zero.
        grads = torch.autograd.grad(value.sum(), patterns, allow_unused=True, materialize_grads=True)
    heads = torch.stack([(p * g)[0] for p, g in zip(patterns, grads, strict=True)]).detach().float().cpu()
    return Attribution("attgrad", heads.double().sum((0, 1, 2)).float(), float(value.detach()[0]), heads=heads)


@dataclass(frozen=True)
class Method:
    """An attribution method: its name on screen, one true sentence about it, and the function."""

    key: str
    label: str
    describe: str
    compute: Callable[..., Attribution]  # compute(model, trace, target) -> Attribution


METHODS: dict[str, Method] = {m.key: m for m in (
    Method("ig", "Integrated Gradients", "The gradient averaged along the straight path from every word replaced "
           "by the mask token to the sentence, times the difference; the token scores add up to the change of the "
           "target.", integrated_gradients),
    Method("gxi", "Gradient × Input", "The gradient at the sentence times the input vector: a linear look at this "
           "one point that ignores how the target bends further away.", gradient_x_input),
    Method("attgrad", "Attention × gradient", "Each head's weight times the target's gradient with respect to it, "
           "summed over a token's column: it sees attention's share only, not the values, W_O or the feed-forward "
           "sub-layer.", attention_x_gradient),
)}


def attribute(model: Encoder, trace: Trace, target: Target, method: str, **options) -> Attribution:
    """Run one method of METHODS (options: steps= and progress= for "ig")."""
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not offered; choose one of {', '.join(METHODS)}.")
    return METHODS[method].compute(model, trace, target, **options)
