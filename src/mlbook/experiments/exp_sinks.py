"""Experiment 5 (exercise 6): attention sinks in a tiny GPT.

1. Train a tiny GPT on the stdlib help corpus and measure the attention mass each layer puts
   on position 0 (mean over heads and queries, and per query position), beside the mass a
   uniform causal head would put there, 1 / (q + 1).
2. Stream held-out text token by token, far past the trained length, with three caches of
   the same budget: the full KV cache (every token, absolute positions: past the trained
   length RoPE sees rotations it never trained on), a plain sliding window
   SinkCache(0, W) and the StreamingLLM cache SinkCache(n_sink, W - n_sink); both windowed
   caches assign positions by slot. Loss per segment of the stream.
3. Truncation: inside the trained length, prefill a prefix, delete the first token (or the
   first n_sink, or a middle token as a control) from every layer's cache, and compare the
   loss on the rest of the window with the intact cache.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from mlbook.experiments.data import TOKENIZER, corpus_tokens, random_windows, split_tokens
from mlbook.experiments.registry import register
from mlbook.experiments.train import TrainConfig, evaluate_loss, train
from mlbook.transformer.cache import KVCache, SinkCache
from mlbook.transformer.models import GPT, GPTConfig

__all__ = ["TruncatedKVCache", "build_model", "sink_mass", "stream_losses", "truncation_losses", "CACHE_KINDS"]

CACHE_KINDS: tuple[str, ...] = ("full", "window", "sink")

_QUICK = {
    "schemes": ["rope"],
    "model": {"d_model": 64, "n_heads": 4, "n_layers": 4},
    "train_len": 64,
    "train": {"steps": 500, "batch_size": 16, "lr": 3e-3, "warmup_steps": 30},
    "mass_windows": 32,
    "stream": {"n_streams": 8, "length": 1024, "window": 64, "n_sink": 4, "segment": 128},
    "truncate": {"n_windows": 64, "prefix": 16, "n_sink": 4},
    "val_batches": 8,
    "seed": 0,
}
_FULL = {
    "schemes": ["rope", "alibi"],
    "model": {"d_model": 64, "n_heads": 4, "n_layers": 6},
    "train_len": 64,
    "train": {"steps": 2000, "batch_size": 16, "lr": 3e-3, "warmup_steps": 100},
    "mass_windows": 64,
    "stream": {"n_streams": 16, "length": 1024, "window": 64, "n_sink": 4, "segment": 128},
    "truncate": {"n_windows": 128, "prefix": 16, "n_sink": 4},
    "val_batches": 16,
    "seed": 0,
}


class TruncatedKVCache(KVCache):
    """A KVCache from which the oldest tokens can be deleted after they were written.

    `length` still counts the deleted tokens, so the next token gets its true absolute
    position (RoPE rotates new queries and keys at `length`); only the keys and values of the
    deleted tokens are gone. `drop(slots)` removes the given slots of what is held.
    """

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.dropped = 0

    @property
    def length(self) -> int:
        return self.dropped + (0 if self.k is None else self.k.shape[2])

    def drop(self, slots: list[int]) -> None:
        if self.k is None:
            raise ValueError("nothing to drop: the cache is empty")
        held = self.k.shape[2]
        keep = torch.tensor([s for s in range(held) if s not in set(slots)], device=self.k.device)
        self.k, self.v = self.k.index_select(2, keep), self.v.index_select(2, keep)  # (B, H, held - n, d_head)
        self.dropped += held - len(keep)


def build_model(scheme: str, cfg: dict[str, Any]) -> GPT:
    m = cfg["model"]
    return GPT(GPTConfig(vocab_size=TOKENIZER.vocab_size, d_model=m["d_model"], n_heads=m["n_heads"],
                         n_layers=m["n_layers"], max_len=cfg["train_len"], positional=scheme))


@torch.no_grad()
def sink_mass(model: GPT, x: torch.Tensor) -> dict[str, Any]:
    """Attention mass on position 0 (and on the first 4) for windows x (B, T).

    Returns per layer the mean over heads and queries 1..T-1 (query 0 can only see itself),
    per (layer, head), per (layer, query position), and the uniform baseline mean 1/(q+1).
    """
    _, weights = model(x, return_attention=True)  # L x (B, H, T, T)
    T = x.shape[1]
    on0 = torch.stack([w[..., 0] for w in weights])  # (L, B, H, T) mass of query q on key 0
    on4 = torch.stack([w[..., :4].sum(-1) for w in weights])  # (L, B, H, T)
    q = torch.arange(1, T)
    return {
        "per_layer": on0[..., 1:].mean(dim=(1, 2, 3)).tolist(),  # (L,)
        "per_layer_first4": on4[..., 4:].mean(dim=(1, 2, 3)).tolist(),  # (L,) queries 4.. (first 4 see only sinks)
        "per_head": on0[..., 1:].mean(dim=(1, 3)).tolist(),  # (L, H)
        "per_query": on0.mean(dim=(1, 2)).tolist(),  # (L, T)
        "uniform_baseline": (1.0 / (q + 1).float()).mean().item(),  # what a uniform causal head puts on 0
        "uniform_per_query": (1.0 / (torch.arange(T) + 1).float()).tolist(),  # (T,)
    }


@torch.no_grad()
def stream_losses(model: GPT, streams: torch.Tensor, kind: str, window: int, n_sink: int) -> torch.Tensor:
    """Per-token loss (B, N - 1) of feeding streams (B, N) one token at a time through a cache.

    kind: "full" (KVCache holding all N tokens, absolute positions), "window" (SinkCache(0,
    window + n_sink): the same budget with no sinks) or "sink" (SinkCache(n_sink, window)).
    """
    B, N = streams.shape
    if kind == "full":
        caches: list = [KVCache(N) for _ in model.blocks]
    elif kind == "window":
        caches = [SinkCache(0, window + n_sink) for _ in model.blocks]
    elif kind == "sink":
        caches = [SinkCache(n_sink, window) for _ in model.blocks]
    else:
        raise ValueError(f"kind must be one of {', '.join(CACHE_KINDS)}, got {kind!r}")
    dev = next(model.parameters()).device
    streams = streams.to(dev)
    losses = torch.empty(B, N - 1)
    for t in range(N - 1):
        logits = model(streams[:, t : t + 1], caches)  # (B, 1, V)
        losses[:, t] = F.cross_entropy(logits[:, 0].float(), streams[:, t + 1], reduction="none").cpu()
    return losses


@torch.no_grad()
def truncation_losses(model: GPT, x: torch.Tensor, prefix: int, drop: list[int]) -> float:
    """Mean loss on tokens prefix+1 .. T-1 of windows x (B, T) after deleting cache slots `drop`
    once the first `prefix` tokens were written (every layer's cache). drop=[] is the intact run."""
    B, T = x.shape
    caches = [TruncatedKVCache(T) for _ in model.blocks]
    model(x[:, :prefix], caches)  # prefill
    if drop:
        for c in caches:
            c.drop(drop)
    logits = model(x[:, prefix:-1], caches)  # (B, T - prefix - 1, V): predicts tokens prefix+1 .. T-1
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), x[:, prefix + 1 :].reshape(-1)).item()


@register(
    "sinks",
    title="Attention sinks: mass on position 0, and streaming with full, sliding-window and sink caches",
    claim="Mass on position 0 grows with depth and is substantial in mid-to-late layers; a sliding window that "
          "evicts the first tokens raises loss, and keeping 4 sink tokens restores it.",
    configs={"quick": _QUICK, "full": _FULL},
)
def run(cfg: dict[str, Any], device: torch.device, progress: bool) -> dict[str, Any]:
    train_part, val_part = split_tokens(corpus_tokens())
    L = cfg["train_len"]
    s = cfg["stream"]
    tr = cfg["truncate"]
    gen = torch.Generator().manual_seed(cfg["seed"] + 1)
    mass_x, _ = random_windows(val_part, cfg["mass_windows"], L, gen)  # (B, L)
    trunc_x, _ = random_windows(val_part, tr["n_windows"], L, gen)  # (B, L)
    # non-overlapping held-out streams, one per batch row
    n = s["length"]
    if s["n_streams"] * n > len(val_part):
        raise ValueError(f"n_streams * length ({s['n_streams'] * n}) exceeds the held-out text ({len(val_part)})")
    streams = val_part[: s["n_streams"] * n].view(s["n_streams"], n)  # (B, N)
    out: dict[str, Any] = {"corpus": "pydoc_data.topics (stdlib help text), characters", "train_len": L,
                           "stream_length": n, "stream_over_train": n / L, "schemes": {}}
    for scheme in cfg["schemes"]:
        torch.manual_seed(cfg["seed"])  # the initial weights, independent of what ran before
        model = build_model(scheme, cfg)
        tcfg = TrainConfig(seed=cfg["seed"], **cfg["train"])
        log = train(model, lambda step, g: random_windows(train_part, tcfg.batch_size, L, g), tcfg, device,
                    desc=f"sinks/{scheme}", progress=progress)
        model.eval()
        vgen = torch.Generator().manual_seed(cfg["seed"] + 2)
        val = evaluate_loss(model, lambda i: random_windows(val_part, 16, L, vgen), cfg["val_batches"], device)
        mass = sink_mass(model, mass_x.to(device))
        per_token = {k: stream_losses(model, streams, k, s["window"] - s["n_sink"], s["n_sink"]) for k in CACHE_KINDS}
        seg = s["segment"]
        segments = {k: [v[:, i : i + seg].mean().item() for i in range(0, n - 1, seg)] for k, v in per_token.items()}
        drops = {"none": [], "first": [0], f"first{tr['n_sink']}": list(range(tr["n_sink"])),
                 "middle": [tr["prefix"] // 2]}
        trunc = {name: truncation_losses(model, trunc_x.to(device), tr["prefix"], d) for name, d in drops.items()}
        out["schemes"][scheme] = {
            "params": model.num_params(),
            "train_loss_last50": sum(log["loss"][-50:]) / len(log["loss"][-50:]),
            "train_seconds": log["seconds"],
            "tokens_per_s": log["tokens_per_s"],
            "val_loss_at_train_len": val,
            "mass": mass,
            "stream": {
                "segment": seg,
                "segment_starts": list(range(0, n - 1, seg)),
                "loss_per_segment": segments,
                "loss_past_window": {k: v[:, s["window"]:].mean().item() for k, v in per_token.items()},
                "loss_past_train_len": {k: v[:, L:].mean().item() for k, v in per_token.items()},
                "loss_within_train_len": {k: v[:, : L - 1].mean().item() for k, v in per_token.items()},
            },
            "truncate": {"prefix": tr["prefix"], "dropped_slots": drops, "loss": trunc},
        }
    return out
