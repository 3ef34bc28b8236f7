"""Training stability of Post-LN vs Pre-LN, measured on the project's own Encoder.

Two experiments behind the claims of seed 004 ("tricky to train from scratch", "learning rate warm-up",
Pre-LN "much more stable") and of Xiong et al. 2020, "On Layer Normalization in the Transformer Architecture":
1. gradient norms at initialisation, per layer and weight matrix, for a depth the user picks;
2. short real training runs on a synthetic task that needs attention: reverse a sequence of random tokens.

Nothing here touches torch's global state: every random draw comes from an explicit torch.Generator and the
thread count is left alone. Each call builds and trains its own model; the app's shared model is never used.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..config import EncoderConfig
from ..model import Encoder, build_model
from ..trace import Trace, trace_ids

GROUPS = ("W_Q", "W_K", "W_V", "W_O", "W1", "W2")
RUN_LABELS = ("Post-LN, no warm-up", "Post-LN with warm-up", "Pre-LN, no warm-up")

# Defaults of the training demo, measured with benchmarks/stability.py on a quiet 2-core CPU (2 threads): the three
# runs take 27-31 s together; at lr 3e-3 Post-LN without warm-up stays at the chance loss (2.79 vs ln 16 = 2.77)
# for seeds 0-4, while Post-LN with warm-up and Pre-LN reach >= 99% accuracy. Other rates (seed 0, 200 steps):
# at 1e-2 Post-LN fails even with warm-up and Pre-LN still learns; at 1e-3 unwarmed Post-LN leaves chance only near
# step 200; at 3e-4 it learns, and warm-up merely slows Post-LN down: warm-up is a remedy for high rates.
TASK = dict(seq=16, vocab=16, batch=32)
STEPS, WARMUP_STEPS, LR = 200, 100, 3e-3
EVAL_BATCH = 512


def _generator(seed: int, stream: int) -> torch.Generator:
    """A private generator per purpose (read-out init, training data, evaluation data)."""
    return torch.Generator().manual_seed((seed * 1_000_003 + stream) % 2**63)


def reverse_batch(gen: torch.Generator, batch: int, seq: int, vocab: int) -> tuple[Tensor, Tensor]:
    """Random token ids (batch, seq) and their targets, the same ids reversed: position i must read seq-1-i."""
    ids = torch.randint(0, vocab, (batch, seq), generator=gen)
    return ids, ids.flip(1)


def _readout(d_model: int, vocab: int, gen: torch.Generator) -> nn.Linear:
    """Linear read-out from d_model to the vocabulary on each position; Xavier-uniform from `gen`, zero bias."""
    with torch.device("meta"):
        head = nn.Linear(d_model, vocab)  # no draw from the global RNG
    head.to_empty(device="cpu")
    bound = math.sqrt(6.0 / (d_model + vocab))
    with torch.no_grad():
        head.weight.copy_(torch.rand(head.weight.shape, generator=gen) * 2 * bound - bound)
        head.bias.zero_()
    return head


def _task_config(norm: str, num_layers: int, d_model: int, num_heads: int, d_ff: int, seq: int, vocab: int,
                 positional: str, seed: int) -> EncoderConfig:
    # Pre-LN stacks conventionally end with a final LayerNorm (Xiong et al. 2020); Post-LN's last op is one already.
    return EncoderConfig(
        d_model=d_model, num_heads=num_heads, d_ff=d_ff, num_layers=num_layers, dropout=0.0, norm=norm,
        positional=positional, max_len=seq, vocab_size=vocab, seed=seed, final_norm=norm == "pre",
    )


def grad_norms_at_init(
    num_layers: int, norm: str, d_model: int = 128, num_heads: int = 4, d_ff: int = 512, seq: int = 32,
    batch: int = 8, seed: int = 0, vocab: int = 32,
) -> pd.DataFrame:
    """Frobenius norm of the loss gradient of every weight matrix at initialisation (Xiong et al. 2020, Fig. 3).

    Loss: cross-entropy of the reversal task through a linear read-out, random tokens, sinusoidal positions,
    dropout 0. Rows: norm, num_layers, layer, group (W_Q, W_K, W_V, W_O, W1, W2), grad_norm. Weights only.
    """
    cfg = _task_config(norm, num_layers, d_model, num_heads, d_ff, seq, vocab, "sinusoidal", seed)
    model = build_model(cfg, "cpu").requires_grad_(True).train()
    head = _readout(d_model, vocab, _generator(seed, 1))
    ids, targets = reverse_batch(_generator(seed, 2), batch, seq, vocab)
    out, _, _ = model(ids)
    F.cross_entropy(head(out).flatten(0, 1), targets.flatten()).backward()
    rows = []
    for i, layer in enumerate(model.layers):
        q, k, v = layer.attn.qkv.weight.grad.chunk(3, dim=0)  # the (3D, D) matrix stacks W_Q, W_K, W_V
        grads = (q, k, v, layer.attn.out.weight.grad, layer.ffn.w1.weight.grad, layer.ffn.w2.weight.grad)
        rows += [(norm, num_layers, i, g, float(t.norm())) for g, t in zip(GROUPS, grads, strict=True)]
    return pd.DataFrame(rows, columns=["norm", "num_layers", "layer", "group", "grad_norm"])


def depth_trend(
    depths: tuple[int, ...] = (6, 12, 24), seeds: tuple[int, ...] = (0, 1, 2), d_model: int = 128,
    num_heads: int = 4, d_ff: int = 512, seq: int = 32, batch: int = 8, vocab: int = 32,
) -> pd.DataFrame:
    """Per depth and placement: W2 gradient norm of the last and first layer, averaged over init seeds.

    Xiong et al. 2020: Post-LN's last-layer gradient does not shrink with depth; Pre-LN's shrinks like 1/sqrt(L),
    so last_w2 * sqrt(L) (column last_w2_x_sqrt_depth) stays about constant for Pre-LN.
    """
    rows = []
    for norm in ("post", "pre"):
        for depth in depths:
            w2 = [
                grad_norms_at_init(depth, norm, d_model, num_heads, d_ff, seq, batch, s, vocab).query("group == 'W2'")
                for s in seeds
            ]
            last = sum(float(df["grad_norm"].iloc[-1]) for df in w2) / len(w2)
            first = sum(float(df["grad_norm"].iloc[0]) for df in w2) / len(w2)
            rows.append((norm, depth, last, first, last / first, last * math.sqrt(depth)))
    columns = ["norm", "num_layers", "last_w2", "first_w2", "last_over_first", "last_w2_x_sqrt_depth"]
    return pd.DataFrame(rows, columns=columns)


def warmup_lr(step: int, base_lr: float, warmup_steps: int) -> float:
    """Linear warm-up then constant: base_lr * min(1, (step + 1) / warmup_steps); step counts from 0.

    No decay after warm-up, so every run of the demo trains at the same peak rate once warm-up is over.
    warmup_steps = 0 means no warm-up.
    """
    if step < 0 or warmup_steps < 0 or base_lr < 0:
        raise ValueError("step, base_lr and warmup_steps must not be negative.")
    if warmup_steps == 0:
        return base_lr
    return base_lr * min(1.0, (step + 1) / warmup_steps)


@dataclass(frozen=True, eq=False)
class TrainResult:
    """One training run: loss per step, final accuracy, and the trained model with its read-out."""

    label: str
    config: EncoderConfig
    lr: float
    warmup_steps: int
    losses: list[float]  # training cross-entropy, one per step
    accuracy: float  # per-token accuracy on held-out sequences after training
    chance_loss: float  # ln(vocab): the loss of guessing uniformly
    seconds: float
    model: Encoder = field(repr=False)  # eval mode, requires_grad False: safe to share
    readout: nn.Linear = field(repr=False)
    batch: int = TASK["batch"]

    @property
    def final_loss(self) -> float:
        """Mean training loss over the last tenth of the steps (the last step alone is noisy)."""
        k = max(1, len(self.losses) // 10)
        return sum(self.losses[-k:]) / k

    @property
    def learned(self) -> bool:
        """True when the final loss is below half the chance loss."""
        return self.final_loss < 0.5 * self.chance_loss


def train_run(
    norm: str, warmup_steps: int, lr: float, steps: int, num_layers: int = 6, d_model: int = 128,
    num_heads: int = 4, d_ff: int = 512, seed: int = 0, progress: Callable[[float], None] | None = None, *,
    seq: int = TASK["seq"], vocab: int = TASK["vocab"], batch: int = TASK["batch"], positional: str = "learned",
    label: str = "",
) -> TrainResult:
    """Train Encoder + read-out with Adam to reverse random token sequences; deterministic for a given seed.

    Learned positions by default: random position vectors are nearly orthogonal, so "read position seq-1-i" is
    quick to learn; with sinusoidal ones neighbouring positions look alike and every run needs 2-3x the steps.
    Runs with the same seed start from the same weights and see the same batches.
    """
    if steps < 1 or lr <= 0:
        raise ValueError(f"steps={steps} and lr={lr} must be positive.")
    cfg = _task_config(norm, num_layers, d_model, num_heads, d_ff, seq, vocab, positional, seed)
    model = build_model(cfg, "cpu").requires_grad_(True).train()
    head = _readout(d_model, vocab, _generator(seed, 1))
    data = _generator(seed, 2)
    opt = torch.optim.Adam([*model.parameters(), *head.parameters()], lr=lr)
    losses: list[float] = []
    start = time.perf_counter()
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = warmup_lr(step, lr, warmup_steps)
        ids, targets = reverse_batch(data, batch, seq, vocab)
        out, _, _ = model(ids)  # (B, T, D)
        loss = F.cross_entropy(head(out).flatten(0, 1), targets.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if progress is not None and (step % 10 == 9 or step == steps - 1):
            progress((step + 1) / steps)
    model.eval().requires_grad_(False)
    head.eval().requires_grad_(False)
    ids, targets = reverse_batch(_generator(seed, 3), EVAL_BATCH, seq, vocab)
    with torch.inference_mode():
        accuracy = float((head(model(ids)[0]).argmax(-1) == targets).float().mean())
    return TrainResult(
        label=label or f"{norm}, warm-up {warmup_steps}",
        config=cfg,
        lr=lr,
        warmup_steps=warmup_steps,
        losses=losses,
        accuracy=accuracy,
        chance_loss=math.log(vocab),
        seconds=time.perf_counter() - start,
        model=model,
        readout=head,
        batch=batch,
    )


def compare_runs(
    lr: float = LR, steps: int = STEPS, warmup_steps: int = WARMUP_STEPS, num_layers: int = 6, d_model: int = 128,
    num_heads: int = 4, d_ff: int = 512, seed: int = 0, progress: Callable[[float], None] | None = None, **task,
) -> dict[str, TrainResult]:
    """The three runs of the demo, keyed by RUN_LABELS: Post-LN without and with warm-up, Pre-LN without."""
    plan = (("post", 0), ("post", warmup_steps), ("pre", 0))
    results = {}
    for k, (label, (norm, warm)) in enumerate(zip(RUN_LABELS, plan, strict=True)):
        part = None if progress is None else (lambda f, k=k: progress((k + f) / len(plan)))
        results[label] = train_run(
            norm, warm, lr, steps, num_layers, d_model, num_heads, d_ff, seed, part, label=label, **task
        )
    return results


def example(result: TrainResult, seed: int = 0) -> list[int]:
    """One task input: distinct random tokens (so every label is unique), as long as the run's sequences."""
    cfg, gen = result.config, _generator(seed, 4)
    chunks = [torch.randperm(cfg.vocab_size, generator=gen)]
    while sum(len(c) for c in chunks) < cfg.max_len:  # more positions than tokens: repeats are unavoidable
        chunks.append(torch.randperm(cfg.vocab_size, generator=gen))
    ids = torch.cat(chunks)
    return ids[: cfg.max_len].tolist()


def token_labels(ids: list[int]) -> list[str]:
    """Token ids as strings such as "t3"."""
    return [f"t{i}" for i in ids]


def trained_trace(result: TrainResult, tokens: list[int] | None = None, seed: int = 0) -> Trace:
    """A Trace of the trained model on one input (default: example(result, seed)), for the app's views.

    The text is the labels joined by spaces; token_ids are the task's ids, not WordPiece ids.
    """
    ids = example(result, seed) if tokens is None else list(tokens)
    cfg = result.config
    if not ids or len(ids) > cfg.max_len or min(ids) < 0 or max(ids) >= cfg.vocab_size:
        raise ValueError(f"tokens must be 1 to {cfg.max_len} ids from 0 to {cfg.vocab_size - 1}.")
    labels = token_labels(ids)
    return trace_ids(result.model, ids, labels, text=" ".join(labels))


def reversal_heads(result: TrainResult, seed: int = 0) -> pd.DataFrame:
    """Per (layer, head): mean attention weight on the mirrored key seq-1-i, on example(result, seed).

    1.0 is a head that does the reversal by itself; about 1/seq is flat. In our runs the reversal heads sit in
    the first one or two layers, not the last: a page can open the Attention view at the top row of this table.
    """
    trace = trained_trace(result, seed=seed)
    T = trace.seq_len
    mirrored = trace.attention[:, :, torch.arange(T), T - 1 - torch.arange(T)].mean(-1)  # (L, H)
    rows = [(layer, head, float(mirrored[layer, head])) for layer in range(trace.num_layers) for head in range(trace.num_heads)]
    df = pd.DataFrame(rows, columns=["layer", "head", "anti_diagonal"])
    return df.sort_values("anti_diagonal", ascending=False, kind="stable").reset_index(drop=True)
