"""Experiment 6: passkey retrieval against context length and key depth, beside perplexity, over seeds.

Per seed, two tiny GPTs are trained at length L on a mix of passkey batches (even steps) and
corpus language-modelling batches (odd steps), one with RoPE and one with ALiBi. The RoPE weights
are then extended to 4L in three ways, each with the fixed factor s = 4 of the context-extension
experiment:

    rope        no scaling (extrapolation past L)
    rope_pi     position interpolation, theta_i / s (Chen et al., 2023)
    rope_yarn   YaRN with the band limits chosen for this model (common.TUNED_BETAS)

and ALiBi runs as trained. Every method is scored as it is (zero-shot) and again after a brief
fine-tune at 4L with the steps, batch and learning rate of the context-extension experiment
(common.FINETUNE), on the same mix as training: every `passkey_every`-th batch passkey samples at
4L, the others corpus text. (A text-only fine-tune would let the retrieval skill, trained in at L,
decay, and so would decide the outcome by design.) Fine-tuning is how position interpolation was
proposed.

Retrieval accuracy is teacher-forced on the key's digits only (the targets PasskeyTask leaves
unmasked): "all digits" counts a sample right when every digit's argmax is right, "per digit"
averages over digits. The test samples (keys, filler phases) are the same for every method and
seed. Perplexity is the corpus loss on the first T characters of the same held-out windows.
"""

from __future__ import annotations

import random
from typing import Any

import torch

from mlbook.experiments.common import (
    findings,
    FINETUNE,
    TUNED_BETAS,
    Timer,
    build_gpt,
    copy_with_rope,
    mean_sd,
    nested_windows,
    paired,
    per_position_loss,
    pm,
    seeds_of,
)
from mlbook.experiments.data import PasskeyTask, corpus_tokens, random_windows, split_tokens
from mlbook.experiments.registry import register
from mlbook.experiments.train import TrainConfig, train
from mlbook.transformer.models import GPT

__all__ = ["METHODS", "METHOD_ROPE", "LABELS", "method_model", "digit_accuracy", "passkey_accuracy", "grid",
           "summary", "format_table", "headline"]

METHODS: tuple[str, ...] = ("rope", "rope_pi", "rope_yarn", "alibi")
# RoPE options of each RoPE method for the extension factor s (filled in by method_model)
METHOD_ROPE: dict[str, dict[str, Any]] = {
    "rope": {},
    "rope_pi": {"scaling": "linear"},
    "rope_yarn": {"scaling": "yarn", **TUNED_BETAS},
}
LABELS: dict[str, str] = {"rope": "RoPE (no scaling)", "rope_pi": "RoPE + PI", "rope_yarn": "RoPE + YaRN",
                          "alibi": "ALiBi"}
SHORT: dict[str, str] = {"rope": "RoPE", "rope_pi": "RoPE + PI", "rope_yarn": "RoPE + YaRN", "alibi": "ALiBi"}
PHASES: tuple[str, ...] = ("zero_shot", "finetuned")

_QUICK = {
    "schemes": ["rope"],  # the quick budget trains no ALiBi model
    "train_len": 64,
    "model": {"d_model": 48, "n_heads": 4, "n_layers": 2},
    # 1200 steps: retrieval at L is learned (all digits right on every test sample); at 400 or 800 it is not
    "train": {"steps": 1200, "batch_size": 16, "lr": 4e-3, "warmup_steps": 30},
    "passkey_every": 2,  # every 2nd step is a passkey batch, the others corpus text
    "factor": 4,
    "finetune": FINETUNE["quick"],
    "finetune_data": "passkey and text, as in training",
    "lengths": [64, 128, 256],
    "depths": [0.0, 0.5, 1.0],
    "n_eval": 16,
    "loss_windows": 8,
    "eval_seed": 1000,
    "seeds": [0],
}
_FULL = {
    "schemes": ["rope", "alibi"],
    "train_len": 128,
    "model": {"d_model": 64, "n_heads": 4, "n_layers": 2},
    "train": {"steps": 2400, "batch_size": 16, "lr": 3e-3, "warmup_steps": 100},
    "passkey_every": 2,
    "factor": 4,
    "finetune": FINETUNE["full"],
    "finetune_data": "passkey and text, as in training",
    "lengths": [128, 256, 384, 512],
    "depths": [0.0, 0.25, 0.5, 0.75, 1.0],
    "n_eval": 32,
    "loss_windows": 16,
    "eval_seed": 1000,
    "seeds": [0, 1, 2, 3, 4],
}


def method_model(method: str, trained: dict[str, GPT], factor: float) -> GPT:
    """The trained weights under `method`'s position scheme, extended by `factor` (RoPE methods)."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")
    if method == "alibi":
        return trained["alibi"]
    rope = dict(METHOD_ROPE[method])
    if rope:
        rope["factor"] = float(factor)
    return copy_with_rope(trained["rope"], rope)


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
def passkey_accuracy(model: GPT, x: torch.Tensor, y: torch.Tensor, device: torch.device) -> dict[str, float]:
    """All-digits and per-digit accuracy on passkey samples x, y (n, length - 1)."""
    all_right, per_digit = digit_accuracy(model.eval()(x.to(device)).cpu(), y)
    return {"all_digits": all_right.mean().item(), "per_digit": per_digit.mean().item()}


def _test_set(task: PasskeyTask, cfg: dict[str, Any]) -> dict[tuple[int, float], tuple[torch.Tensor, torch.Tensor]]:
    """The same passkey samples for every method and seed: one batch per (length, depth)."""
    out = {}
    for length in cfg["lengths"]:
        rng = random.Random(cfg["eval_seed"] + length)
        for depth in cfg["depths"]:
            out[(length, depth)] = task.batch(cfg["n_eval"], length, rng, depth)  # (n, length - 1) each
    return out


def _mixed_batches(task: PasskeyTask, text: torch.Tensor, length: int, batch_size: int, every: int,
                   key_rng: random.Random):  # type: ignore[no-untyped-def]
    """Batches for `train`: every `every`-th step passkey samples at `length` (keys at random
    depths, loss on the key's digits only), the other steps corpus windows (loss on every next
    character). Used both to train at L and to fine-tune at 4L, so the fine-tune keeps the task."""
    def batches(step: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        if step % every == 0:
            return task.batch(batch_size, length, key_rng)  # (B, length - 1): loss on the digits only
        return random_windows(text, batch_size, length - 1, g)  # (B, length - 1): every next character

    return batches


def _score(model: GPT, tests: dict, lm: tuple[torch.Tensor, torch.Tensor], cfg: dict[str, Any],
           device: torch.device) -> dict[str, Any]:
    acc, dig, loss = [], [], []
    for length in cfg["lengths"]:
        cells = [passkey_accuracy(model, *tests[(length, d)], device) for d in cfg["depths"]]
        acc.append([round(c["all_digits"], 4) for c in cells])
        dig.append([round(c["per_digit"], 4) for c in cells])
        x, y = lm
        loss.append(round(per_position_loss(model, x[:, :length], y[:, :length], device).mean().item(), 4))
    return {"accuracy": acc, "per_digit": dig, "loss": loss}  # (lengths, depths), (lengths, depths), (lengths,)


@register(
    "passkey",
    title="Passkey retrieval vs length and depth, beside perplexity: RoPE (none, PI, YaRN) and ALiBi, zero-shot "
          "and after the context-extension fine-tune",
    claim="Perplexity can stay flat while long-range retrieval fails (ALiBi's recency prior; over-interpolated "
          "high frequencies).",
    configs={"quick": _QUICK, "full": _FULL},
)
def run(cfg: dict[str, Any], device: torch.device, progress: bool) -> dict[str, Any]:
    train_part, val_part = split_tokens(corpus_tokens())
    task = PasskeyTask()
    L, B, s = cfg["train_len"], cfg["train"]["batch_size"], cfg["factor"]
    L_ft = s * L
    seeds = seeds_of(cfg)
    tests = _test_set(task, cfg)
    methods = [m for m in METHODS if m != "alibi" or "alibi" in cfg["schemes"]]
    lm = nested_windows(val_part, cfg["loss_windows"], max(cfg["lengths"]), cfg["eval_seed"])  # (N, 4L)
    out: dict[str, Any] = {"train_len": L, "factor": s, "finetune_len": L_ft, "finetune": cfg["finetune"],
                           "finetune_data": cfg["finetune_data"],
                           "methods": methods, "labels": LABELS, "phases": list(PHASES), "seeds": seeds,
                           "lengths": cfg["lengths"], "depths": cfg["depths"], "n_eval": cfg["n_eval"],
                           "yarn": METHOD_ROPE["rope_yarn"], "train": {k: [] for k in cfg["schemes"]},
                           "results": {p: {m: [] for m in methods} for p in PHASES}, "seconds_per_seed": []}
    fcfg = TrainConfig(**cfg["finetune"])
    for seed in seeds:
        clock = Timer()
        trained: dict[str, GPT] = {}
        for scheme in cfg["schemes"]:
            model = build_gpt(scheme, cfg["model"], L, seed)
            batches = _mixed_batches(task, train_part, L, B, cfg["passkey_every"], random.Random(seed))
            log = train(model, batches, TrainConfig(seed=seed, **cfg["train"]), device,
                        desc=f"passkey/{scheme} seed {seed}", progress=progress)
            every = cfg["passkey_every"]
            pk = [v for i, v in enumerate(log["loss"]) if i % every == 0][-25:]
            text = [v for i, v in enumerate(log["loss"]) if i % every != 0][-25:]
            out["train"][scheme].append({"seed": seed, "passkey_loss_last": round(sum(pk) / len(pk), 4),
                                         "lm_loss_last": round(sum(text) / max(len(text), 1), 4),
                                         "seconds": round(log["seconds"], 1)})
            trained[scheme] = model.eval()
        for method in methods:
            model = method_model(method, trained, s)
            zero = _score(model, tests, lm, cfg, device)
            tuned = model if method != "alibi" else build_gpt("alibi", cfg["model"], L, seed)
            if method == "alibi":
                tuned.load_state_dict(trained["alibi"].state_dict())
            ft = train(tuned, _mixed_batches(task, train_part, L_ft, cfg["finetune"]["batch_size"],
                                             cfg["passkey_every"], random.Random(seed + 1000)),
                       TrainConfig(seed=seed + 1000, **cfg["finetune"]), device,
                       desc=f"passkey/{method} fine-tune seed {seed}", progress=progress)
            out["results"]["zero_shot"][method].append({"seed": seed, **zero})
            out["results"]["finetuned"][method].append({"seed": seed, **_score(tuned, tests, lm, cfg, device),
                                                        "finetune_seconds": round(ft["seconds"], 1)})
        out["seconds_per_seed"].append(clock())
    out["finetune_steps"] = fcfg.steps
    return out


# -- derived numbers --------------------------------------------------------------------------


def grid(record: dict[str, Any], phase: str, method: str, what: str = "accuracy") -> dict[str, Any]:
    """Mean and sd over seeds of the (lengths x depths) grid of `what` (accuracy or per_digit)."""
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {', '.join(PHASES)}, got {phase!r}")
    if what not in ("accuracy", "per_digit"):
        raise ValueError(f"what must be 'accuracy' or 'per_digit', got {what!r}")
    seeds = record["results"]["results"][phase][method]
    t = torch.tensor([s[what] for s in seeds], dtype=torch.float64)  # (seeds, lengths, depths)
    sd = t.std(0, unbiased=True) if t.shape[0] > 1 else torch.full_like(t[0], float("nan"))
    return {"mean": t.mean(0).tolist(), "sd": sd.tolist()}


def summary(record: dict[str, Any], phase: str, method: str) -> dict[str, Any]:
    """Per length, mean_sd over seeds of: accuracy averaged over depths, corpus loss, and accuracy at each depth."""
    r = record["results"]
    seeds = r["results"][phase][method]
    n_len = len(r["lengths"])
    return {
        "accuracy": [mean_sd(sum(s["accuracy"][i]) / len(s["accuracy"][i]) for s in seeds) for i in range(n_len)],
        "per_digit": [mean_sd(sum(s["per_digit"][i]) / len(s["per_digit"][i]) for s in seeds) for i in range(n_len)],
        "loss": [mean_sd(s["loss"][i] for s in seeds) for i in range(n_len)],
        "by_depth": [[mean_sd(s["accuracy"][i][j] for s in seeds) for j in range(len(r["depths"]))]
                     for i in range(n_len)],
    }


def format_table(record: dict[str, Any], phase: str = "zero_shot") -> str:
    """Per method and length: corpus loss, all-digits accuracy averaged over depths, accuracy at the
    depth nearest the start and at depth 1 (next to the question); mean ± sd over seeds."""
    r = record["results"]
    w = 13  # "0.59 ± 0.52" is 11 characters; two spaces between columns
    what = "without fine-tuning" if phase == "zero_shot" else (
        f"after {r['finetune']['steps']} fine-tuning steps at {r['finetune_len']} on passkey samples and "
        f"corpus text, alternating")
    head = (f"{'method':<12}{'length':>7}{'corpus loss':>{w + 3}}{'accuracy':>{w}}{'@ depth 0':>{w}}{'@ depth 1':>{w}}"
            f"{'per digit':>{w}}")
    lines = [findings([f"{what}; accuracy = all {PasskeyTask().n_digits} digits right (chance 1e-5), averaged over "
                       f"depths, {r['n_eval']} samples per cell; per digit: chance 0.1; mean ± sd over seeds "
                       f"{r['seeds']} ({record['budget']} budget)"]), head, "-" * len(head)]
    for m in r["methods"]:
        s = summary(record, phase, m)
        for i, length in enumerate(r["lengths"]):
            lines.append(f"{SHORT[m]:<12}{length:>7}{pm(s['loss'][i]):>{w + 3}}{pm(s['accuracy'][i], 2):>{w}}"
                         f"{pm(s['by_depth'][i][0], 2):>{w}}{pm(s['by_depth'][i][-1], 2):>{w}}"
                         f"{pm(s['per_digit'][i], 2):>{w}}")
    return "\n".join(lines)


def paired_accuracy(record: dict[str, Any], a: tuple[str, str], b: tuple[str, str], length_index: int = -1
                    ) -> dict[str, Any]:
    """Per-seed difference of depth-averaged accuracy at one length between (phase, method) a and b."""
    def vals(pm_: tuple[str, str]) -> list[float]:
        seeds = record["results"]["results"][pm_[0]][pm_[1]]
        return [sum(s["accuracy"][length_index]) / len(s["accuracy"][length_index]) for s in seeds]

    return paired(vals(a), vals(b))


def headline(record: dict[str, Any]) -> str:
    """Three lines: retrieval at L, YaRN zero-shot at 4L beside its loss, and after the fine-tune."""
    r = record["results"]
    L, T = r["train_len"], r["lengths"][-1]
    n = len(r["seeds"])
    z = {m: summary(record, "zero_shot", m) for m in r["methods"]}
    f = {m: summary(record, "finetuned", m) for m in r["methods"]}
    if "alibi" not in z:  # a record without an ALiBi model (the quick budget)
        z["alibi"] = f["alibi"] = {k: [{"mean": None, "sd": None}] * len(r["lengths"]) for k in ("accuracy", "loss")}
    return findings([
        f"Passkey retrieval, all digits right ({n} seeds, mean ± sd): at the trained length {L}, RoPE "
        f"{pm(z['rope']['accuracy'][0], 2)}, ALiBi {pm(z['alibi']['accuracy'][0], 2)}; at {T} without fine-tuning, "
        f"RoPE {pm(z['rope']['accuracy'][-1], 2)}, PI {pm(z['rope_pi']['accuracy'][-1], 2)}, "
        f"YaRN {pm(z['rope_yarn']['accuracy'][-1], 2)}, ALiBi {pm(z['alibi']['accuracy'][-1], 2)}.",
        f"Corpus loss from {L} to {T} without fine-tuning: YaRN {pm(z['rope_yarn']['loss'][0], 2)} -> "
        f"{pm(z['rope_yarn']['loss'][-1], 2)}, ALiBi {pm(z['alibi']['loss'][0], 2)} -> {pm(z['alibi']['loss'][-1], 2)}, "
        f"RoPE {pm(z['rope']['loss'][0], 2)} -> {pm(z['rope']['loss'][-1], 2)} nats/char.",
        f"After the same {r['finetune']['steps']}-step fine-tune at {r['finetune_len']} as in the context-extension "
        f"experiment, accuracy at {T}: RoPE {pm(f['rope']['accuracy'][-1], 2)}, PI {pm(f['rope_pi']['accuracy'][-1], 2)}, "
        f"YaRN {pm(f['rope_yarn']['accuracy'][-1], 2)}, ALiBi {pm(f['alibi']['accuracy'][-1], 2)}.",
    ])
