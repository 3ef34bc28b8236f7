"""A ModernBERT-shaped model: encoder.run() vs transformers' eager ModernBERT on the same weights, and the
sliding window (blocks of queries against their keys) vs a full masked softmax.

Run from the repo root: `python -m benchmarks.families_bench [--threads N]` (a few minutes on 2 cores).
Prints a table, then one JSON line with every figure and the machine it ran on.

The model is a custom EncoderConfig shaped as ModernBERT-base (d_model 768, 12 heads, 22 layers, GeGLU with
d_ff 1152, no biases, Pre-LN with a final norm, rotary positions, global attention every third layer and a
128-token window in the others). Its weights are copied into transformers' ModernBertModel through the loader's
own tensor map, and both outputs are compared before anything is timed. Ours is timed end to end as the app
uses it (tokenization, the stack, the Trace with every tap and the (L, H, T, T) attention); transformers' eager
forward is timed on the token ids, with and without returning the attention and hidden states. The sides run in
turn in every round and are summarised by medians, so a busy machine slows them alike.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

import encoder  # noqa: E402
from benchmarks import encoder_bench  # noqa: E402
from benchmarks.machine import threads_and_clock  # noqa: E402
from encoder import window  # noqa: E402
from encoder.families.modernbert import modernbert_tensors  # noqa: E402

SEQ = 512
BUDGET_S = 60.0  # wall time for the model comparison
MODERN = encoder.EncoderConfig(
    d_model=768, num_heads=12, d_ff=1152, num_layers=22, dropout=0.0, activation="gelu", ffn="geglu", norm="pre",
    positional="rotary", layer_norm_eps=1e-5, max_len=SEQ, vocab_size=30522, final_norm=True, embed_norm=True,
    bias=False, rope_theta=160_000.0, rope_theta_local=10_000.0, window=128, global_every=3, first_norm1=False,
)


def transformers_twin(model: encoder.Encoder) -> torch.nn.Module:
    """transformers' ModernBertModel (eager attention) holding `model`'s weights, through the loader's tensor map."""
    from transformers import ModernBertConfig, ModernBertModel

    cfg = model.cfg
    config = ModernBertConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.d_ff, num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads, hidden_activation="gelu", max_position_embeddings=cfg.max_len,
        norm_eps=cfg.layer_norm_eps, local_attention=cfg.window, global_attn_every_n_layers=cfg.global_every,
        global_rope_theta=cfg.rope_theta, local_rope_theta=cfg.rope_theta_local, pad_token_id=0, bos_token_id=101,
        eos_token_id=102, cls_token_id=101, sep_token_id=102, attn_implementation="eager",
    )
    twin = ModernBertModel(config).eval().requires_grad_(False)
    ours = model.state_dict()
    theirs = {sources[0]: ours[name] for name, sources in modernbert_tensors(cfg).items()}
    missing, unexpected = twin.load_state_dict(theirs, strict=False)
    assert not unexpected and all("rotary" in m for m in missing), (missing, unexpected)
    return twin


def timed(fn: Callable[[], object]) -> float:
    t0 = clock()
    fn()
    return clock() - t0


def rounds(fns: dict[str, Callable[[], object]], budget_s: float, least: int = 5) -> dict[str, list[float]]:
    """Each function once per round, in turn, after two warm-up rounds, until the budget is spent."""
    for _ in range(2):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    start = time.perf_counter()
    while len(next(iter(times.values()))) < least or time.perf_counter() - start < budget_s:
        for name, fn in fns.items():
            times[name].append(timed(fn))
        if len(times[name]) >= 100:
            break
    return times


def compare_models(model: encoder.Encoder, twin: torch.nn.Module) -> dict:
    """run() against transformers' eager ModernBERT at SEQ tokens: differences first, then medians."""
    text = encoder_bench.sentence(SEQ, model.vocab_dir)
    trace = encoder.run(model, text)
    ids = torch.tensor([trace.token_ids])
    assert trace.seq_len == SEQ
    with torch.inference_mode():
        out = twin(ids, output_attentions=True, output_hidden_states=True)
    diffs = {
        "max_abs_diff_output": (trace.output - out.last_hidden_state[0]).abs().max().item(),
        "max_abs_diff_attention": (trace.attention - torch.stack(out.attentions)[:, 0]).abs().max().item(),
    }

    def theirs(**kw) -> Callable[[], object]:
        def call() -> None:
            with torch.inference_mode():
                twin(ids, **kw)
        return call

    times = rounds({"ours": lambda: encoder.run(model, text),
                    "hf_eager_with_outputs": theirs(output_attentions=True, output_hidden_states=True),
                    "hf_eager": theirs()}, BUDGET_S)
    med = {name: statistics.median(t) * 1e3 for name, t in times.items()}
    return {
        "seq": SEQ, **diffs, **{f"{n}_ms": v for n, v in med.items()},
        **{f"{n}_best_ms": min(t) * 1e3 for n, t in times.items()},
        "ratio_vs_hf_eager_with_outputs": med["ours"] / med["hf_eager_with_outputs"],
        "ratio_vs_hf_eager": med["ours"] / med["hf_eager"], "reps": len(times["ours"]),
    }


def full_masked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, radius: int, out: torch.Tensor):
    """The window as a full T x T softmax with the band masked: what the blocks avoid."""
    scores = torch.matmul(q * (1.0 / math.sqrt(q.shape[-1])), k.transpose(-2, -1), out=out)
    scores.masked_fill_(window.band_mask(q.shape[2], radius), float("-inf"))
    pattern = torch.softmax(scores, dim=-1, out=out)
    return pattern, pattern @ v


def compare_window(seq: int, heads: int = 12, d_head: int = 64, radius: int = 64) -> dict:
    """One layer's windowed attention at `seq` tokens, writing the full (H, T, T) pattern either way."""
    gen = torch.Generator().manual_seed(seq)
    q, k, v = (torch.randn(1, heads, seq, d_head, generator=gen) for _ in range(3))
    out = torch.empty(1, heads, seq, seq)
    with torch.inference_mode():
        a, za = window.banded_attention(q, k, v, radius, None, out.clone(), lambda t: t)
        b, zb = full_masked(q, k, v, radius, out.clone())
        diff = max((a - b).abs().max().item(), (za - zb).abs().max().item())
        times = rounds({"blocks": lambda: window.banded_attention(q, k, v, radius, None, out, lambda t: t),
                        "full_mask": lambda: full_masked(q, k, v, radius, out)}, 6.0 if seq <= 512 else 15.0)
    blocks, full = statistics.median(times["blocks"]) * 1e3, statistics.median(times["full_mask"]) * 1e3
    return {"seq": seq, "radius": radius, "blocks_ms": blocks, "full_mask_ms": full, "speedup": full / blocks,
            "scores_share": window.scored_pairs(seq, radius) / seq**2, "max_abs_diff": diff, "reps": len(times["blocks"])}


def whole_run_with_full_mask(model: encoder.Encoder) -> dict:
    """run() with the window in blocks vs the same run() with one block of every key (a full masked softmax)."""
    text = encoder_bench.sentence(SEQ, model.vocab_dir)
    saved = window.MIN_BLOCK

    def full() -> None:
        window.MIN_BLOCK = 10**9  # one block holding every query: the full T x T scores, masked to the band
        try:
            encoder.run(model, text)
        finally:
            window.MIN_BLOCK = saved

    times = rounds({"blocks": lambda: encoder.run(model, text), "full_mask": full}, BUDGET_S / 2)
    blocks, masked = (statistics.median(times[n]) * 1e3 for n in ("blocks", "full_mask"))
    return {"seq": SEQ, "run_blocks_ms": blocks, "run_full_mask_ms": masked, "saved_ms": masked - blocks,
            "reps": len(times["blocks"])}


clock = time.perf_counter


def main() -> None:
    global clock
    clock = threads_and_clock(__doc__.splitlines()[0])
    t_start = time.perf_counter()
    info = encoder_bench.machine()
    info["clock"] = "wall" if clock is time.perf_counter else "thread CPU time"
    model = encoder.build_model(MODERN, device="cpu")
    with torch.no_grad():  # non-trivial norms, so a swapped or missing weight would show in the differences
        gen = torch.Generator().manual_seed(1)
        for p in model.parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=gen))
    twin = transformers_twin(model)
    row = compare_models(model, twin)
    windows = [compare_window(seq) for seq in (512, 2048)]
    whole = whole_run_with_full_mask(model)
    info["loadavg_1min_end"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    total = time.perf_counter() - t_start

    print(f"machine: {info['cpu']}, {info['cores']} cores, torch {info['torch']}, {info['threads']} threads, "
          f"clock: {info['clock']}, load average {info['loadavg_1min_start']:.1f} -> {info['loadavg_1min_end']:.1f}")
    print(f"ModernBERT-shaped custom model ({MODERN.num_layers} layers, d_model {MODERN.d_model}, GeGLU, window "
          f"{MODERN.window}, global every {MODERN.global_every}) at {SEQ} tokens, {row['reps']} rounds:")
    print(f"  max |ours - transformers|: output {row['max_abs_diff_output']:.1e}, attention "
          f"{row['max_abs_diff_attention']:.1e}")
    head = f"  {'':<44} {'median ms':>10} {'best ms':>9} {'ours / this':>12}"
    print(head)
    print("  " + "-" * (len(head) - 2))
    for name, label in (("ours", "encoder.run() (tokenize, stack, full Trace)"),
                        ("hf_eager_with_outputs", "transformers eager, attentions + hidden states"),
                        ("hf_eager", "transformers eager, last hidden state only")):
        ratio = row["ours_ms"] / row[f"{name}_ms"]
        print(f"  {label:<44} {row[f'{name}_ms']:>10.1f} {row[f'{name}_best_ms']:>9.1f} {ratio:>12.2f}")
    print("Sliding window, one layer (12 heads, d_head 64, 64 keys each side), the full (H, T, T) pattern written:")
    print(f"  {'tokens':>6} {'blocks ms':>10} {'full mask ms':>13} {'speed-up':>9} {'scores computed':>16}")
    for w in windows:
        print(f"  {w['seq']:>6} {w['blocks_ms']:>10.2f} {w['full_mask_ms']:>13.2f} {w['speedup']:>8.2f}x "
              f"{100 * w['scores_share']:>15.1f}%")
    print(f"Whole run() at {SEQ} tokens: window in blocks {whole['run_blocks_ms']:.1f} ms, as a full masked softmax "
          f"{whole['run_full_mask_ms']:.1f} ms (medians)")
    print(f"benchmark wall time: {total:.0f} s")
    print(json.dumps({"benchmark": "families", "machine": info, "config": MODERN.to_dict(), "modernbert": row,
                      "window": windows, "run_window": whole, "wall_s": total}))


if __name__ == "__main__":
    main()
