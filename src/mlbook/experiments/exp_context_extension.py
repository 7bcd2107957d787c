"""Experiment 3 (exercise 3): extending a RoPE model's context, without and with fine-tuning.

Train a tiny RoPE GPT at L = 128. Copy its weights into models that differ only in the RoPE
scaling (`GPT(cfg.replace(rope=...)).load_state_dict(...)`): unmodified, linear position
interpolation (s = 4), NTK-aware (s = 4), dynamic NTK and YaRN (s = 4). Measure the loss at
128, 256 and 512, over all positions and over the positions beyond L only. Then fine-tune each
variant briefly at 512 (the same steps, data and learning rate for each) and measure again.

Dynamic NTK here uses factor = 1 in the Hugging Face formula, i.e. NTK scaling with
s = n / L for a sequence of n tokens; evaluated in one forward pass, every position of a
sequence of length n uses the base for n.
"""

from __future__ import annotations

from typing import Any

import torch

from mlbook.experiments.data import corpus_tokens, random_windows, split_tokens
from mlbook.experiments.exp_extrapolation import build_model, eval_windows, loss_at_length
from mlbook.experiments.registry import register
from mlbook.experiments.train import TrainConfig, train
from mlbook.transformer.models import GPT

__all__ = ["VARIANTS", "LABELS", "variant_model", "format_table"]

# RoPE options per variant; "original_max_len" is filled in with the trained length.
VARIANTS: dict[str, dict[str, Any]] = {
    "none": {},
    "linear": {"scaling": "linear", "factor": 4.0},
    "ntk": {"scaling": "ntk", "factor": 4.0},
    "dynamic": {"scaling": "dynamic", "factor": 1.0},
    "yarn": {"scaling": "yarn", "factor": 4.0},
}
LABELS: dict[str, str] = {
    "none": "unmodified",
    "linear": "linear PI, s=4",
    "ntk": "NTK-aware, s=4",
    "dynamic": "dynamic NTK",
    "yarn": "YaRN, s=4",
}

_QUICK = {
    "model": {"d_model": 64, "n_heads": 4, "n_layers": 2},
    "train_len": 128,
    "eval_lengths": [128, 256, 512],
    "train": {"steps": 300, "batch_size": 16, "lr": 3e-3, "warmup_steps": 30},
    "finetune_len": 512,
    "finetune": {"steps": 25, "batch_size": 8, "lr": 1e-3, "warmup_steps": 5},
    "variants": list(VARIANTS),
    "eval_windows": 16,
    "seed": 0,
}
_FULL = {
    "model": {"d_model": 96, "n_heads": 4, "n_layers": 3},
    "train_len": 128,
    "eval_lengths": [128, 256, 512],
    "train": {"steps": 900, "batch_size": 16, "lr": 3e-3, "warmup_steps": 50},
    "finetune_len": 512,
    "finetune": {"steps": 60, "batch_size": 8, "lr": 1e-3, "warmup_steps": 6},
    "variants": list(VARIANTS),
    "eval_windows": 48,
    "seed": 0,
}


def variant_model(base: GPT, variant: str) -> GPT:
    """A copy of `base` (a trained RoPE GPT) whose RoPE uses the scaling of `variant`."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; valid: {', '.join(VARIANTS)}")
    rope = dict(VARIANTS[variant])
    if rope.get("scaling") in ("dynamic", "yarn", "llama3"):
        rope["original_max_len"] = base.config.max_len
    model = GPT(base.config.replace(rope=rope))
    model.load_state_dict(base.state_dict())
    return model.to(next(base.parameters()).device)


@register(
    "context_extension",
    title="Context extension of a RoPE model trained at 128: unmodified, PI, NTK, dynamic NTK and YaRN "
          "at 128, 256 and 512, before and after a brief fine-tune at 512",
    claim="Unmodified RoPE degrades sharply past 128 and is unusable by 512; linear interpolation is stable at all "
          "lengths but costs a little at 128; NTK sits between; a brief fine-tune at the long length closes the gap.",
    configs={"quick": _QUICK, "full": _FULL},
)
def run(cfg: dict[str, Any], device: torch.device, progress: bool) -> dict[str, Any]:
    train_part, val_part = split_tokens(corpus_tokens())
    L, L_ft, seed = cfg["train_len"], cfg["finetune_len"], cfg["seed"]
    base = build_model("rope", cfg["model"], L, seed)
    tcfg = TrainConfig(seed=seed, **cfg["train"])
    log = train(base, lambda step, g: random_windows(train_part, tcfg.batch_size, L, g), tcfg, device,
                desc="context_extension/base", progress=progress)
    windows = {T: eval_windows(val_part, cfg["eval_windows"], T, seed + 1) for T in cfg["eval_lengths"]}

    def measure(model: GPT) -> dict[str, list[float | None]]:
        evals = [loss_at_length(model, *windows[T], L, device) for T in cfg["eval_lengths"]]
        return {"mean": [e["mean"] for e in evals], "tail": [e["tail"] for e in evals]}

    fcfg = TrainConfig(seed=seed + 1, **cfg["finetune"])  # the same batches for every variant
    out: dict[str, Any] = {
        "corpus": "pydoc_data.topics (stdlib help text), characters",
        "train_len": L, "eval_lengths": cfg["eval_lengths"], "finetune_len": L_ft,
        "finetune_steps": fcfg.steps, "finetune_tokens": fcfg.steps * fcfg.batch_size * L_ft,
        "base": {"params": base.num_params(), "train_seconds": round(log["seconds"], 2),
                 "train_loss_last50": sum(log["loss"][-50:]) / len(log["loss"][-50:]),
                 "train_tokens": tcfg.steps * tcfg.batch_size * L},
        "variants": {},
    }
    for name in cfg["variants"]:
        model = variant_model(base, name)
        before = measure(model)
        ft = train(model, lambda step, g: random_windows(train_part, fcfg.batch_size, L_ft, g), fcfg, device,
                   desc=f"context_extension/{name}", progress=progress)
        after = measure(model)
        out["variants"][name] = {"label": LABELS[name], "rope": model.config.rope, "before": before, "after": after,
                                 "finetune_seconds": round(ft["seconds"], 2)}
    return out


def format_table(record: dict[str, Any], metric: str = "mean") -> str:
    """Loss at each evaluation length, before and after fine-tuning, one row per variant.
    metric="mean" averages all positions; "tail" only those beyond the trained length."""
    if metric not in ("mean", "tail"):
        raise ValueError(f"metric must be 'mean' or 'tail', got {metric!r}")
    r = record["results"]
    lengths = r["eval_lengths"] if metric == "mean" else [T for T in r["eval_lengths"] if T > r["train_len"]]
    skip = len(r["eval_lengths"]) - len(lengths)
    head = f"{'variant':<16}" + "".join(f"{'before@' + str(T):>12}" for T in lengths) + \
        "".join(f"{'after@' + str(T):>12}" for T in lengths)
    what = "all positions" if metric == "mean" else f"positions {r['train_len']}.. only"
    lines = [f"loss in nats/char over {what}; trained at {r['train_len']}; fine-tuned {r['finetune_steps']} steps at "
             f"{r['finetune_len']} ({record['budget']} budget, seed {record['config']['seed']})", head, "-" * len(head)]
    for v in r["variants"].values():
        vals = v["before"][metric][skip:] + v["after"][metric][skip:]
        lines.append(f"{v['label']:<16}" + "".join(f"{x:>12.3f}" for x in vals))
    return "\n".join(lines)
