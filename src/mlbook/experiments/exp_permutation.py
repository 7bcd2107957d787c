"""Experiment 1 (exercise 1): permutation sensitivity.

Feed a sequence and its reversal and compare the output for the reversed input with the
reversed output, position by position: out(reverse(x)) against reverse(out(x)). Equal means
the model is permutation-equivariant (it cannot tell the two orders apart). Four models:

1. a tiny GPT with learned positions, briefly trained so it uses them;
2. the same GPT with its position table zeroed: no explicit position, but the causal mask
   still breaks equivariance (query i sees i + 1 tokens), so the outputs still differ;
3. for reference, the same GPT trained from the start with no encoding (NoPE);
4. a TransformerEncoderBlock with no encoding (no mask) in float64: exact equivariance, up
   to round-off of order 1e-16; also checked with a random permutation;
5. the same block with sinusoidal encodings added to its input, for contrast.
"""

from __future__ import annotations

from typing import Any

import torch

from mlbook.experiments.data import corpus_tokens, random_windows, split_tokens
from mlbook.experiments.exp_extrapolation import build_model, eval_windows
from mlbook.experiments.registry import register
from mlbook.experiments.train import TrainConfig, evaluate_loss, train
from mlbook.transformer.models import TransformerEncoderBlock
from mlbook.transformer.positional import sinusoidal_positional_encoding

__all__ = ["equivariance_gap", "format_table", "ROWS"]

ROWS: dict[str, str] = {
    "learned": "GPT, learned positions (trained)",
    "zeroed": "GPT, same weights, position table zeroed",
    "nope": "GPT trained with no encoding (positional='none')",
    "encoder": "TransformerEncoderBlock, no encoding (float64)",
    "encoder_random_perm": "  same block, a random permutation instead",
    "encoder_sinusoidal": "TransformerEncoderBlock + sinusoidal PE (float64)",
}

_QUICK = {
    "model": {"d_model": 64, "n_heads": 4, "n_layers": 2},
    "train_len": 64,
    "train": {"steps": 200, "batch_size": 16, "lr": 3e-3, "warmup_steps": 20},
    "n_sequences": 16,
    "val_batches": 4,
    "seed": 0,
}
_FULL = {
    "model": {"d_model": 96, "n_heads": 4, "n_layers": 3},
    "train_len": 64,
    "train": {"steps": 800, "batch_size": 16, "lr": 3e-3, "warmup_steps": 50},
    "n_sequences": 64,
    "val_batches": 16,
    "seed": 0,
}


def equivariance_gap(f: Any, x: torch.Tensor, perm: torch.Tensor) -> dict[str, Any]:
    """Compare f(x[:, perm]) with f(x)[:, perm] for x (B, T, ...) and f -> (B, T, D).

    Returns max and mean |difference|, the mean |output| (to read the gap against), and the
    mean |difference| at each position of the permuted sequence (T,).
    """
    out = f(x)  # (B, T, D)
    out_perm = f(x[:, perm])  # (B, T, D)
    diff = (out_perm - out[:, perm]).abs().cpu().double()  # (B, T, D)
    return {
        "max_abs": diff.max().item(),
        "mean_abs": diff.mean().item(),
        "mean_abs_output": out.abs().cpu().double().mean().item(),
        "per_position": [float(f"{v:.4g}") for v in diff.mean(dim=(0, 2)).tolist()],  # (T,)
    }


@register(
    "permutation",
    title="Permutation sensitivity: a sequence and its reversal through a GPT and an encoder block",
    claim="Without positional information attention is permutation-equivariant; a decoder's causal mask breaks "
          "that partially (outputs still differ with positions zeroed), a bidirectional encoder block with no "
          "encoding is exactly equivariant up to floating-point error.",
    configs={"quick": _QUICK, "full": _FULL},
)
def run(cfg: dict[str, Any], device: torch.device, progress: bool) -> dict[str, Any]:
    train_part, val_part = split_tokens(corpus_tokens())
    L, seed = cfg["train_len"], cfg["seed"]
    model = build_model("learned", cfg["model"], L, seed)
    tcfg = TrainConfig(seed=seed, **cfg["train"])
    log = train(model, lambda step, g: random_windows(train_part, tcfg.batch_size, L, g), tcfg, device,
                desc="permutation/learned", progress=progress)
    x, _ = eval_windows(val_part, cfg["n_sequences"], L, seed + 1)  # (N, L) held-out text
    x = x.to(device)
    reverse = torch.arange(L - 1, -1, -1, device=device)  # (L,)

    def val_loss(m: torch.nn.Module = model) -> float:
        vgen = torch.Generator().manual_seed(seed + 2)
        return evaluate_loss(m, lambda i: random_windows(val_part, 16, L, vgen), cfg["val_batches"], device)

    nope = build_model("none", cfg["model"], L, seed)
    train(nope, lambda step, g: random_windows(train_part, tcfg.batch_size, L, g), tcfg, device,
          desc="permutation/none", progress=progress)

    gaps: dict[str, Any] = {}
    losses: dict[str, float] = {}
    with torch.no_grad():
        gaps["learned"] = equivariance_gap(model, x, reverse)
        losses["learned"] = val_loss()
        model.pos_emb.table.weight.zero_()  # the same network, now with no explicit position
        gaps["zeroed"] = equivariance_gap(model, x, reverse)
        losses["zeroed"] = val_loss()
        gaps["nope"] = equivariance_gap(nope, x, reverse)
        losses["nope"] = val_loss(nope)

        # A bidirectional block (no mask, no encoding) on the same text's token embeddings, in float64
        # on the CPU (tiny, and float64 is not available on every accelerator, e.g. MPS).
        d = cfg["model"]["d_model"]
        torch.manual_seed(seed)
        block = TransformerEncoderBlock(d, cfg["model"]["n_heads"]).double().eval()
        emb = model.tok_emb(x).cpu().double()  # (N, L, d_model)
        gaps["encoder"] = equivariance_gap(block, emb, reverse.cpu())
        perm = torch.randperm(L, generator=torch.Generator().manual_seed(seed))  # (L,)
        gaps["encoder_random_perm"] = equivariance_gap(block, emb, perm)
        pe = sinusoidal_positional_encoding(L, d).double()  # (L, d_model)
        gaps["encoder_sinusoidal"] = equivariance_gap(lambda e: block(e + pe), emb, reverse.cpu())
    return {
        "corpus": "pydoc_data.topics (stdlib help text), characters",
        "seq_len": L,
        "n_sequences": cfg["n_sequences"],
        "outputs": "GPT rows compare logits (float32); encoder rows compare the block's output (float64)",
        "train_loss_last50": sum(log["loss"][-50:]) / len(log["loss"][-50:]),
        "train_seconds": round(log["seconds"], 2),
        "val_loss": losses,
        "rows": {k: {"label": ROWS[k], **v} for k, v in gaps.items()},
    }


def format_table(record: dict[str, Any]) -> str:
    """max and mean |out(perm x) - perm out(x)|, and the mean |output| for scale, one row per model."""
    r = record["results"]
    head = f"{'model':<52}{'max |diff|':>12}{'mean |diff|':>13}{'mean |out|':>12}"
    lines = [f"{r['n_sequences']} held-out sequences of {r['seq_len']} characters, reversed "
             f"({record['budget']} budget, seed {record['config']['seed']})", head, "-" * len(head)]
    for row in r["rows"].values():
        lines.append(f"{row['label']:<52}{row['max_abs']:>12.3g}{row['mean_abs']:>13.3g}{row['mean_abs_output']:>12.3g}")
    v = r["val_loss"]
    lines.append(f"held-out loss (nats/char): learned GPT {v['learned']:.3f}, its table zeroed {v['zeroed']:.3f}, "
                 f"GPT trained with no encoding {v['nope']:.3f}")
    return "\n".join(lines)
