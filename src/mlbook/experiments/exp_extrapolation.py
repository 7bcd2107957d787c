"""Experiment 2: length extrapolation across the six positional schemes.

Train one tiny GPT per scheme (none, sinusoidal, learned, t5, rope, alibi) on the stdlib help
corpus at length L, then measure the loss on held-out windows of 1x, 1.5x, 2x and 4x L. Two
numbers per length: the mean over all positions, and the mean over the positions beyond L
only (the "tail"), because the mean of a long window is dominated by its in-range positions.
A learned table has no row past T_max = L: the model refuses, and the result says so instead
of crashing. `per_position_loss` is shared with the context-extension experiment.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from mlbook.experiments.data import TOKENIZER, corpus_tokens, random_windows, split_tokens
from mlbook.experiments.registry import register
from mlbook.experiments.train import TrainConfig, train
from mlbook.transformer.models import POSITIONAL_SCHEMES, GPT, GPTConfig

__all__ = ["build_model", "unigram_loss", "eval_windows", "per_position_loss", "loss_at_length", "binned", "degradation", "format_table"]

_QUICK = {
    "schemes": list(POSITIONAL_SCHEMES),
    "model": {"d_model": 64, "n_heads": 4, "n_layers": 2},
    "train_len": 64,
    "factors": [1, 1.5, 2, 4],
    "train": {"steps": 250, "batch_size": 16, "lr": 3e-3, "warmup_steps": 25},
    "eval_windows": 64,
    "seed": 0,
}
_FULL = {
    "schemes": list(POSITIONAL_SCHEMES),
    "model": {"d_model": 96, "n_heads": 4, "n_layers": 3},
    "train_len": 64,
    "factors": [1, 1.5, 2, 4],
    "train": {"steps": 800, "batch_size": 16, "lr": 3e-3, "warmup_steps": 50},
    "eval_windows": 128,
    "seed": 0,
}


def build_model(positional: str, model: dict[str, Any], max_len: int, seed: int, **extra: Any) -> GPT:
    """A tiny GPT over the character vocabulary, initialised from `seed`."""
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=TOKENIZER.vocab_size, max_len=max_len, positional=positional, **model, **extra))


def unigram_loss() -> float:
    """Reference level: the cross-entropy (nats/char) of the held-out text under the training
    text's character frequencies (add-one smoothed). A model scoring near it has learned letter
    frequencies and nothing about context."""
    train_part, val_part = split_tokens(corpus_tokens())
    counts = torch.bincount(train_part, minlength=TOKENIZER.vocab_size).double() + 1.0  # (V,)
    logp = (counts / counts.sum()).log()  # (V,)
    return -logp[val_part].mean().item()


def eval_windows(tokens: torch.Tensor, n: int, T: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n held-out (inputs, targets) windows of length T, the same for every model (fixed seed)."""
    return random_windows(tokens, n, T, torch.Generator().manual_seed(seed))


@torch.no_grad()
def per_position_loss(model: GPT, x: torch.Tensor, y: torch.Tensor, device: torch.device | str,
                      batch_size: int = 16) -> torch.Tensor:
    """Cross-entropy at each position, averaged over the windows: x, y (N, T) -> (T,) float64, nats."""
    model.to(device).eval()
    total = torch.zeros(x.shape[1], dtype=torch.float64)
    for i in range(0, x.shape[0], batch_size):
        xb, yb = x[i : i + batch_size].to(device), y[i : i + batch_size].to(device)
        logits = model(xb)  # (b, T, V)
        nll = F.cross_entropy(logits.transpose(1, 2).float(), yb, reduction="none")  # (b, T)
        total += nll.sum(0).cpu().double()  # float64 on the CPU (MPS has no float64)
    return total / x.shape[0]


def loss_at_length(model: GPT, x: torch.Tensor, y: torch.Tensor, L: int, device: torch.device | str) -> dict[str, Any]:
    """{"mean": loss over all T positions, "tail": over positions >= L (None if T <= L),
    "head": over positions < L of the same windows, "reason": None, "curve": the (T,)
    per-position loss}; or mean = tail = head = None and the model's own error message as
    "reason" when it cannot run at this length."""
    try:
        curve = per_position_loss(model, x, y, device)  # (T,)
    except ValueError as err:  # learned positions past T_max: the library refuses
        return {"mean": None, "tail": None, "head": None, "reason": str(err), "curve": None}
    tail = curve[L:].mean().item() if x.shape[1] > L else None
    return {"mean": curve.mean().item(), "tail": tail, "head": curve[:L].mean().item(), "reason": None, "curve": curve}


def binned(curve: torch.Tensor, width: int) -> dict[str, list[float]]:
    """Average a per-position curve over bins of `width` positions (keeps the JSON and plots small)."""
    T = curve.shape[0] // width * width
    loss = curve[:T].view(-1, width).mean(1)  # (T / width,)
    centres = torch.arange(T).view(-1, width).double().mean(1)  # (T / width,)
    return {"position": [round(c, 1) for c in centres.tolist()], "loss": [round(v, 4) for v in loss.tolist()]}


@register(
    "extrapolation",
    title="Length extrapolation: six positional schemes trained at L, evaluated at 1x, 1.5x, 2x and 4x L",
    claim="Unmodified RoPE degrades past the training length, ALiBi extrapolates, T5's relative bias generalises "
          "a little, sinusoidal degrades, and learned positions cannot run past T_max at all.",
    configs={"quick": _QUICK, "full": _FULL},
)
def run(cfg: dict[str, Any], device: torch.device, progress: bool) -> dict[str, Any]:
    train_part, val_part = split_tokens(corpus_tokens())
    L = cfg["train_len"]
    lengths = [int(round(f * L)) for f in cfg["factors"]]
    windows = {T: eval_windows(val_part, cfg["eval_windows"], T, cfg["seed"] + 1) for T in lengths}
    out: dict[str, Any] = {"corpus": "pydoc_data.topics (stdlib help text), characters", "train_len": L,
                           "factors": cfg["factors"], "eval_lengths": lengths, "bin_width": max(1, L // 8),
                           "schemes": {}}
    for scheme in cfg["schemes"]:
        model = build_model(scheme, cfg["model"], L, cfg["seed"])
        tcfg = TrainConfig(seed=cfg["seed"], **cfg["train"])
        log = train(model, lambda step, g: random_windows(train_part, tcfg.batch_size, L, g), tcfg, device,
                    desc=f"extrapolation/{scheme}", progress=progress)
        evals = [loss_at_length(model, *windows[T], L, device) for T in lengths]
        longest = max((i for i, e in enumerate(evals) if e["curve"] is not None), default=0)
        out["schemes"][scheme] = {
            "params": model.num_params(),
            "train_loss_last50": sum(log["loss"][-50:]) / len(log["loss"][-50:]),
            "train_seconds": round(log["seconds"], 2),
            "mean": [e["mean"] for e in evals],
            "tail": [e["tail"] for e in evals],
            "head": [e["head"] for e in evals],
            "reason": [e["reason"] for e in evals],
            "curve_length": lengths[longest],
            "curve": binned(evals[longest]["curve"], out["bin_width"]),
        }
    return out


def degradation(scheme: dict[str, Any]) -> float | None:
    """At the longest length: loss on the positions beyond L minus the loss on positions 0..L-1
    of the same windows (so text difficulty cancels); None where the model cannot run.

    Positions near 0 have little context and a higher loss, so a model that extrapolates
    perfectly scores below 0 here; a positive value is degradation past L."""
    tail, head = scheme["tail"][-1], scheme["head"][-1]
    return None if tail is None or head is None else tail - head


def _cell(v: float | None, width: int = 7) -> str:
    return f"{'n/a':>{width}}" if v is None else f"{v:{width}.3f}"


def format_table(record: dict[str, Any]) -> str:
    """The measured losses as a text table: one row per scheme, mean and tail at each length."""
    r = record["results"]
    L, lengths = r["train_len"], r["eval_lengths"]
    head = f"{'scheme':<11}" + "".join(f"{'mean@' + str(T):>10}" for T in lengths)
    head += "".join(f"{'tail@' + str(T):>10}" for T in lengths[1:]) + f"{'tail-head@' + str(lengths[-1]):>15}"
    lines = [f"loss in nats/char; trained at L = {L}; tail = positions {L}.. only; head = positions 0..{L - 1} "
             f"of the same windows ({record['budget']} budget, seed {record['config']['seed']})", head, "-" * len(head)]
    for name, s in r["schemes"].items():
        lines.append(f"{name:<11}" + "".join(_cell(v, 10) for v in s["mean"])
                     + "".join(_cell(v, 10) for v in s["tail"][1:]) + _cell(degradation(s), 15))
    for name, s in r["schemes"].items():
        first = next((x for x in s["reason"] if x), None)  # the model's own refusal, at the first length it failed
        if first:
            lines.append(f"n/a ({name}): {first.split(';')[0]}")
    return "\n".join(lines)
