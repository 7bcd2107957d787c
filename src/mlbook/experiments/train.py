"""One training and evaluation loop for every experiment: AdamW, linear warm-up then cosine decay,
fixed seeds, a tqdm progress bar with loss and tokens/s, and automatic device choice."""

from __future__ import annotations

import contextlib
import math
import random
import time
from dataclasses import dataclass
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from mlbook.records import pick_device  # the one device picker, shared with the benchmarks
from mlbook.transformer.validate import check_int, env_flag, env_int

__all__ = ["TrainConfig", "pick_device", "cpu_threads", "seed_everything", "lr_at", "train", "evaluate_loss", "BatchFn"]

# A function (step, generator) -> (inputs, targets) on the CPU; targets of -100 are ignored.
BatchFn = Callable[[int, torch.Generator], tuple[torch.Tensor, torch.Tensor]]


@dataclass
class TrainConfig:
    steps: int = 300
    batch_size: int = 16
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 30
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        check_int("steps", self.steps, 1)
        check_int("batch_size", self.batch_size, 1)
        check_int("warmup_steps", self.warmup_steps, 0)
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")


@contextlib.contextmanager
def cpu_threads(device: torch.device) -> Iterator[None]:
    """On the CPU, run with MLBOOK_CPU_THREADS intra-op threads (default 1), then restore.

    The tiny models here issue thousands of small ops (token-by-token streaming, short
    sequences); on a shared 2-core machine two OpenMP threads per process oversubscribe the
    cores and were measured 5-20x slower than one thread. On a GPU this changes nothing.
    """
    if device.type != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(env_int("MLBOOK_CPU_THREADS", 1, 1))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def seed_everything(seed: int) -> torch.Generator:
    random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up to cfg.lr over warmup_steps, then cosine decay to min_lr_ratio * lr."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    cosine = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * cosine)


def _loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor, forward: Callable | None) -> torch.Tensor:
    logits = forward(model, x) if forward is not None else model(x)  # (B, T, V)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1), ignore_index=-100)


def train(
    model: nn.Module,
    batches: BatchFn,
    cfg: TrainConfig,
    device: torch.device | str | None = None,
    *,
    desc: str = "train",
    progress: bool = True,
    forward: Callable[[nn.Module, torch.Tensor], torch.Tensor] | None = None,
) -> dict:
    """Train in place; returns {"loss": [per-step losses], "tokens_per_s": float, "seconds": float}.

    `forward(model, inputs)` overrides how logits are computed (e.g. an encoder-decoder).
    """
    device = pick_device(device if isinstance(device, str) or device is None else str(device))
    model.to(device).train()
    gen = seed_everything(cfg.seed)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and p.requires_grad]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 and p.requires_grad]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr, betas=(0.9, 0.95),
    )
    losses: list[float] = []
    tokens = 0
    start = time.perf_counter()
    bar = _progress(range(cfg.steps), desc, progress)
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        x, y = batches(step, gen)
        x, y = x.to(device), y.to(device)
        loss = _loss(model, x, y, forward)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip:
            nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        losses.append(loss.item())
        tokens += x.numel()
        if hasattr(bar, "set_postfix") and (step % 10 == 0 or step == cfg.steps - 1):
            bar.set_postfix(loss=f"{losses[-1]:.3f}", tok_s=f"{tokens / (time.perf_counter() - start):,.0f}")
    seconds = time.perf_counter() - start
    model.eval()
    return {"loss": losses, "tokens_per_s": tokens / seconds, "seconds": seconds}


def _progress(iterable, desc: str, enabled: bool):  # type: ignore[no-untyped-def]
    # no bar with MLBOOK_NO_PROGRESS, nor in the static site build (MLBOOK_STATIC), whose pages
    # would otherwise store a widget that no kernel can update
    if not enabled or env_flag("MLBOOK_NO_PROGRESS") or env_flag("MLBOOK_STATIC"):
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, leave=False, mininterval=1.0)


@torch.no_grad()
def evaluate_loss(
    model: nn.Module,
    batches: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
    n_batches: int,
    device: torch.device | str | None = None,
    forward: Callable[[nn.Module, torch.Tensor], torch.Tensor] | None = None,
) -> float:
    """Mean cross-entropy (nats per predicted token) over n_batches from batches(i)."""
    device = pick_device(device if isinstance(device, str) or device is None else str(device))
    model.to(device).eval()
    total, count = 0.0, 0
    for i in range(n_batches):
        x, y = batches(i)
        x, y = x.to(device), y.to(device)
        logits = forward(model, x) if forward is not None else model(x)
        flat = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1), ignore_index=-100, reduction="sum")
        total += flat.item()
        count += int((y != -100).sum())
    return total / max(count, 1)
