"""Experiment 6: passkey retrieval against context length and key depth, beside perplexity.

Two tiny GPTs are trained at length L on a mix of passkey batches (even steps) and corpus
language-modelling batches (odd steps), one with RoPE and one with ALiBi. At evaluation the
RoPE weights are reused unchanged under three position schemes, with s = length / L:

    rope        no scaling (extrapolation past L)
    rope_pi     position interpolation, theta_i / s (Chen et al., 2023)
    rope_yarn   YaRN with factor s (Peng et al., 2023)

and ALiBi runs as trained. No fine-tuning at the longer lengths: PI was proposed *with* a
short fine-tune, so its zero-shot numbers here are a lower bound on what the method does.

Retrieval accuracy is teacher-forced on the key's digits only (the targets PasskeyTask
leaves unmasked): "all digits" counts a sample right when every digit's argmax is right,
"per digit" averages over digits. Perplexity is the corpus loss at the same lengths.
"""

from __future__ import annotations

import random
from typing import Any

import torch

from mlbook.experiments.data import TOKENIZER, PasskeyTask, corpus_tokens, random_windows, split_tokens
from mlbook.experiments.registry import register
from mlbook.experiments.train import TrainConfig, evaluate_loss, train
from mlbook.transformer.models import GPT, GPTConfig

__all__ = ["METHODS", "build_model", "method_model", "passkey_accuracy", "digit_accuracy", "run"]

METHODS: tuple[str, ...] = ("rope", "rope_pi", "rope_yarn", "alibi")

_QUICK = {
    "train_len": 128,
    "model": {"d_model": 64, "n_heads": 4, "n_layers": 2},
    "train": {"steps": 300, "batch_size": 8, "lr": 3e-3, "warmup_steps": 30},
    "passkey_every": 2,  # every 2nd step is a passkey batch, the others corpus text
    "lengths": [128, 256, 384, 512],
    "depths": [0.0, 0.25, 0.5, 0.75, 1.0],
    "n_eval": 16,
    "loss_batches": 2,
    "loss_batch_size": 8,
    "seed": 0,
}
_FULL = {
    **_QUICK,
    "model": {"d_model": 64, "n_heads": 4, "n_layers": 3},
    "train": {"steps": 2000, "batch_size": 16, "lr": 3e-3, "warmup_steps": 100},
    "n_eval": 64,
    "loss_batches": 8,
}


def build_model(scheme: str, cfg: dict[str, Any], rope: dict[str, Any] | None = None) -> GPT:
    m = cfg["model"]
    return GPT(GPTConfig(vocab_size=TOKENIZER.vocab_size, d_model=m["d_model"], n_heads=m["n_heads"],
                         n_layers=m["n_layers"], max_len=cfg["train_len"], positional=scheme, rope=rope or {}))


def method_model(method: str, trained: dict[str, GPT], length: int, cfg: dict[str, Any]) -> GPT:
    """The trained weights under `method`'s position scheme for a context of `length` tokens."""
    if method == "alibi":
        return trained["alibi"]
    if method == "rope":
        return trained["rope"]
    s = max(1.0, length / cfg["train_len"])
    scaling = {"rope_pi": "linear", "rope_yarn": "yarn"}[method]
    model = build_model("rope", cfg, {"scaling": scaling, "factor": s})
    model.load_state_dict(trained["rope"].state_dict())  # RoPE has no weights: same parameters
    return model.to(next(trained["rope"].parameters()).device).eval()


def digit_accuracy(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Accuracy on the scored positions only (targets != -100), each row holding the same number
    of them. Returns (all digits right per row (B,), right per digit (B, n_digits)), both float."""
    scored = targets != -100  # (B, T)
    n = int(scored[0].sum())
    if n == 0 or not bool((scored.sum(1) == n).all()):
        raise ValueError("every row must score the same, non-zero number of positions (the key's digits)")
    pred = logits.argmax(-1)[scored].view(-1, n)  # (B, n)
    right = (pred == targets[scored].view(-1, n)).float()  # (B, n)
    return right.min(1).values, right


@torch.no_grad()
def passkey_accuracy(model: GPT, task: PasskeyTask, length: int, depth: float, n: int, rng: random.Random,
                     device: torch.device) -> dict[str, float]:
    x, y = task.batch(n, length, rng, depth)  # (n, length - 1) each
    all_right, per_digit = digit_accuracy(model(x.to(device)).cpu(), y)
    return {"all_digits": all_right.mean().item(), "per_digit": per_digit.mean().item()}


@register(
    "passkey",
    title="Passkey retrieval vs length and depth, beside perplexity: RoPE (none, PI, YaRN) and ALiBi",
    claim="Perplexity can stay flat while long-range retrieval fails (ALiBi's recency prior; over-interpolated "
          "high frequencies).",
    configs={"quick": _QUICK, "full": _FULL},
)
def run(cfg: dict[str, Any], device: torch.device, progress: bool) -> dict[str, Any]:
    train_part, val_part = split_tokens(corpus_tokens())
    task = PasskeyTask()
    L, B = cfg["train_len"], cfg["train"]["batch_size"]
    trained: dict[str, GPT] = {}
    out: dict[str, Any] = {"train_len": L, "train": {}, "methods": list(METHODS), "lengths": cfg["lengths"],
                           "depths": cfg["depths"], "accuracy": {}, "per_digit": {}, "loss": {}}
    for scheme in ("rope", "alibi"):
        torch.manual_seed(cfg["seed"])
        model = build_model(scheme, cfg)
        key_rng = random.Random(cfg["seed"])

        def batches(step: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
            if step % cfg["passkey_every"] == 0:
                return task.batch(B, L, key_rng)  # (B, L - 1): loss on the 5 digits only
            return random_windows(train_part, B, L - 1, g)  # (B, L - 1): every next character

        log = train(model, batches, TrainConfig(seed=cfg["seed"], **cfg["train"]), device,
                    desc=f"passkey/{scheme}", progress=progress)
        every = cfg["passkey_every"]
        pk = [v for i, v in enumerate(log["loss"]) if i % every == 0][-25:]
        lm = [v for i, v in enumerate(log["loss"]) if i % every != 0][-25:]
        out["train"][scheme] = {"passkey_loss_last": sum(pk) / len(pk), "lm_loss_last": sum(lm) / max(len(lm), 1),
                                "seconds": log["seconds"], "tokens_per_s": log["tokens_per_s"]}
        trained[scheme] = model.eval()
    for method in METHODS:
        acc, dig, loss = [], [], []
        for length in cfg["lengths"]:
            model = method_model(method, trained, length, cfg)
            rng = random.Random(cfg["seed"] + 7 * length)  # same keys and filler for every method
            cells = [passkey_accuracy(model, task, length, d, cfg["n_eval"], rng, device) for d in cfg["depths"]]
            acc.append([c["all_digits"] for c in cells])
            dig.append([c["per_digit"] for c in cells])
            gen = torch.Generator().manual_seed(cfg["seed"] + length)
            loss.append(evaluate_loss(model, lambda i: random_windows(val_part, cfg["loss_batch_size"], length, gen),
                                      cfg["loss_batches"], device))
        out["accuracy"][method], out["per_digit"][method], out["loss"][method] = acc, dig, loss  # (lengths, depths)
    return out
