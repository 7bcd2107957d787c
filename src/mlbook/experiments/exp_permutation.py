"""Experiment 1 (exercise 1): does the model know *where* a token is? A probe that needs position.

The probe is a task no model can solve without order: sequences of random symbols, and at every
position i >= k the target is the symbol k places back, x[i - k] ("lag-k copy"). The symbols are
random, so content says nothing about the answer; only position does. Chance is 1 / n_symbols.

Bidirectional encoders (no mask), the clean case:
    encoder_none      no positional information: exactly permutation-equivariant, so its output
                      at i depends on x[i] and the bag of symbols only; it cannot solve the probe
    encoder_learned   the same encoder with a learned position table
Causal decoders (the tiny GPT), the exercise's case:
    gpt_learned       learned positions, trained on the probe
    gpt_zeroed        the same weights with the position table zeroed after training
    gpt_none          trained with no encoding: only the causal mask carries order

Per model and seed: token accuracy on held-out sequences, per position and overall. The
exercise's own measurement is kept beside it: the output for the reversed input against the
reversed output, out(R x) vs R out(x). For the encoders it is computed in float64 and is zero up to
round-off without positions; for the decoders it mostly measures the mask (query i sees i + 1
tokens, so a reversed input gives each token a different context whatever the encoding).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from mlbook.experiments.common import Timer, findings, last_mean, mean_sd, paired, pm, seeds_of, wrap_text
from mlbook.experiments.registry import register
from mlbook.experiments.train import TrainConfig, train
from mlbook.transformer.models import GPT, GPTConfig, TransformerEncoderBlock
from mlbook.transformer.positional import LearnedPositionalEmbedding

__all__ = ["MODELS", "LABELS", "TinyEncoder", "lag_batch", "equivariance_gap", "probe_accuracy", "summary",
           "format_table", "headline"]

MODELS: tuple[str, ...] = ("encoder_none", "encoder_learned", "gpt_learned", "gpt_zeroed", "gpt_none")
LABELS: dict[str, str] = {
    "encoder_none": "encoder, no positions",
    "encoder_learned": "encoder, learned positions",
    "gpt_learned": "GPT, learned positions",
    "gpt_zeroed": "GPT, same weights, table zeroed",
    "gpt_none": "GPT trained with no encoding",
}

_QUICK = {
    "n_symbols": 16, "seq_len": 24, "lag": 3,
    "model": {"d_model": 48, "n_heads": 4, "n_layers": 2},
    "train": {"steps": 150, "batch_size": 32, "lr": 5e-3, "warmup_steps": 15},
    "n_eval": 256, "eval_seed": 1000,
    "seeds": [0],
}
_FULL = {
    "n_symbols": 16, "seq_len": 24, "lag": 3,
    "model": {"d_model": 64, "n_heads": 4, "n_layers": 2},
    "train": {"steps": 600, "batch_size": 32, "lr": 3e-3, "warmup_steps": 40},
    "n_eval": 2048, "eval_seed": 1000,
    "seeds": [0, 1, 2, 3, 4],
}


class TinyEncoder(nn.Module):
    """Token embedding (+ an optional learned position table) -> bidirectional blocks -> logits."""

    def __init__(self, vocab_size: int, d_model: int, n_heads: int, n_layers: int, max_len: int,
                 positional: str = "none") -> None:
        super().__init__()
        if positional not in ("none", "learned"):
            raise ValueError(f"positional must be 'none' or 'learned', got {positional!r}")
        self.tok_emb = nn.Embedding(vocab_size, d_model)  # (V, d_model)
        self.pos_emb = LearnedPositionalEmbedding(max_len, d_model) if positional == "learned" else None
        self.blocks = nn.ModuleList(TransformerEncoderBlock(d_model, n_heads) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)
        self.apply(GPT._init_weights)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """idx (B, T) -> logits (B, T, V)."""
        return self.head(self.norm(self.hidden(self.tok_emb(idx))))

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        """Embedded input (B, T, d_model) -> the blocks' output (B, T, d_model); adds positions if any."""
        if self.pos_emb is not None:
            x = x + self.pos_emb(x.shape[1]).to(x.dtype)  # (B, T, d_model)
        for block in self.blocks:
            x = block(x)  # (B, T, d_model)
        return x


def lag_batch(batch_size: int, seq_len: int, n_symbols: int, lag: int, generator: torch.Generator
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, y), each (B, T): random symbols and, at i >= lag, the target x[i - lag]; -100 before."""
    if not 0 < lag < seq_len:
        raise ValueError(f"lag must be in 1 .. seq_len - 1 = {seq_len - 1}, got {lag}")
    x = torch.randint(0, n_symbols, (batch_size, seq_len), generator=generator)  # (B, T)
    y = torch.full_like(x, -100)
    y[:, lag:] = x[:, :-lag]  # (B, T - lag) the symbol lag places back
    return x, y


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


@torch.no_grad()
def probe_accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, device: torch.device) -> dict[str, Any]:
    """Token accuracy on the scored positions (y != -100): overall and per position (T,)."""
    model.eval()
    pred = model(x.to(device)).argmax(-1).cpu()  # (N, T)
    scored = y != -100  # (N, T)
    right = (pred == y) & scored  # (N, T)
    per_pos = [round((right[:, i].sum() / scored[:, i].sum()).item(), 4) if scored[:, i].any() else None
               for i in range(x.shape[1])]
    return {"accuracy": (right.sum() / scored.sum()).item(), "per_position": per_pos}


@register(
    "permutation",
    title="Permutation probe: can the model tell where a symbol is? Encoders with and without positions, "
          "and a causal GPT with learned, zeroed and no positions, on a lag-copy task",
    claim="Without positional information attention is permutation-equivariant and cannot use order; a "
          "decoder's causal mask breaks that partially; a bidirectional encoder with no encoding is exactly "
          "equivariant up to floating-point error.",
    configs={"quick": _QUICK, "full": _FULL},
)
def run(cfg: dict[str, Any], device: torch.device, progress: bool) -> dict[str, Any]:
    V, T, k = cfg["n_symbols"], cfg["seq_len"], cfg["lag"]
    m = cfg["model"]
    seeds = seeds_of(cfg)
    x_eval, y_eval = lag_batch(cfg["n_eval"], T, V, k, torch.Generator().manual_seed(cfg["eval_seed"]))  # (N, T)
    reverse = torch.arange(T - 1, -1, -1)  # (T,)
    out: dict[str, Any] = {"task": f"lag-{k} copy of random symbols", "n_symbols": V, "seq_len": T, "lag": k,
                           "chance": 1.0 / V, "seeds": seeds, "n_eval": cfg["n_eval"],
                           "models": {name: {"label": LABELS[name], "per_seed": []} for name in MODELS},
                           "seconds_per_seed": []}
    for seed in seeds:
        clock = Timer()
        tcfg = TrainConfig(seed=seed, **cfg["train"])

        def batches(step: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
            return lag_batch(tcfg.batch_size, T, V, k, g)

        trained: dict[str, nn.Module] = {}
        logs: dict[str, dict[str, Any]] = {}
        for name in ("encoder_none", "encoder_learned", "gpt_learned", "gpt_none"):
            torch.manual_seed(seed)
            if name.startswith("encoder"):
                model: nn.Module = TinyEncoder(V, m["d_model"], m["n_heads"], m["n_layers"], T, name.split("_")[1])
            else:
                model = GPT(GPTConfig(vocab_size=V, max_len=T, positional=name.split("_")[1], **m))
            logs[name] = train(model, batches, tcfg, device, desc=f"permutation/{name} seed {seed}", progress=progress)
            trained[name] = model.eval()
        zeroed = GPT(trained["gpt_learned"].config)
        zeroed.load_state_dict(trained["gpt_learned"].state_dict())
        zeroed = zeroed.to(device).eval()
        with torch.no_grad():
            zeroed.pos_emb.table.weight.zero_()  # the same network, no explicit position left
        trained["gpt_zeroed"] = zeroed
        for name in MODELS:
            model = trained[name]
            acc = probe_accuracy(model, x_eval, y_eval, device)
            xs = x_eval[:256].to(device)
            with torch.no_grad():
                if name.startswith("encoder"):  # float64 on the CPU: the symmetry is exact up to round-off
                    enc = model.to("cpu").double()
                    emb = enc.tok_emb(xs.cpu())  # (n, T, d_model) float64
                    gap = equivariance_gap(enc.hidden, emb, reverse)
                    model.float().to(device)
                else:
                    gap = equivariance_gap(model, xs, reverse.to(device))
            log = logs.get(name.replace("zeroed", "learned"))
            out["models"][name]["per_seed"].append({
                "seed": seed, "accuracy": round(acc["accuracy"], 4), "per_position": acc["per_position"],
                "reversal_gap": {key: gap[key] for key in ("max_abs", "mean_abs", "mean_abs_output")},
                "train_loss_last50": None if name == "gpt_zeroed" or log is None else round(last_mean(log["loss"]), 4),
            })
        out["seconds_per_seed"].append(clock())
    return out


def summary(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per model: accuracy (mean_sd over seeds) and the largest reversal gap over seeds."""
    r = record["results"]
    return {name: {"accuracy": mean_sd(s["accuracy"] for s in e["per_seed"]),
                   "gap_max": max(s["reversal_gap"]["max_abs"] for s in e["per_seed"]),
                   "gap_mean": mean_sd(s["reversal_gap"]["mean_abs"] for s in e["per_seed"]),
                   "output_mean": mean_sd(s["reversal_gap"]["mean_abs_output"] for s in e["per_seed"])}
            for name, e in r["models"].items()}


def per_position(record: dict[str, Any], name: str) -> dict[str, list[float | None]]:
    """Accuracy at each position, mean and sd over seeds (None where no target is scored)."""
    seeds = record["results"]["models"][name]["per_seed"]
    stats = [mean_sd(vals) for vals in zip(*(s["per_position"] for s in seeds))]
    return {"mean": [s["mean"] for s in stats], "sd": [s["sd"] for s in stats]}


def format_table(record: dict[str, Any]) -> str:
    """One row per model: probe accuracy (mean ± sd over seeds) and the reversal test."""
    r = record["results"]
    s = summary(record)
    head = f"{'model':<32}{'accuracy':>16}{'max |f(Rx)-Rf(x)|':>20}{'mean |f|':>10}"
    lines = [wrap_text(f"{r['task']}, {r['seq_len']} symbols out of {r['n_symbols']} (chance {r['chance']:.4f}); "
                       f"{r['n_eval']} held-out sequences; seeds {r['seeds']} ({record['budget']} budget); R = "
                       f"reversal"), head, "-" * len(head)]
    for name, e in r["models"].items():
        lines.append(f"{e['label']:<32}{pm(s[name]['accuracy']):>16}{s[name]['gap_max']:>20.3g}"
                     f"{s[name]['output_mean']['mean']:>10.3g}")
    lines.append("encoder rows: the blocks' output in float64; GPT rows: logits in float32")
    return "\n".join(lines)


def paired_accuracy(record: dict[str, Any], a: str, b: str) -> dict[str, Any]:
    """Per-seed accuracy difference a - b (the same seeds and held-out sequences)."""
    ms = record["results"]["models"]
    return paired([s["accuracy"] for s in ms[a]["per_seed"]], [s["accuracy"] for s in ms[b]["per_seed"]])


def headline(record: dict[str, Any]) -> str:
    """Three lines: the encoders, the causal GPTs, and the reversal test."""
    r = record["results"]
    s = summary(record)
    n = len(r["seeds"])

    def acc(name: str) -> str:
        return pm(s[name]["accuracy"], 2)

    return findings([
        f"Lag-{r['lag']} copy probe, chance {r['chance']:.3f} ({n} seeds, accuracy mean ± sd): a bidirectional encoder "
        f"scores {acc('encoder_none')} with no positions and {acc('encoder_learned')} with learned positions.",
        f"Causal GPT: learned positions {acc('gpt_learned')}; the same weights with the table zeroed "
        f"{acc('gpt_zeroed')}; trained with no encoding, so that only the causal mask carries order, {acc('gpt_none')}.",
        f"Reversal test (exercise 1): the position-free encoder is equivariant to {s['encoder_none']['gap_max']:.1e} "
        f"(float64 round-off); the GPTs' logits differ by {s['gpt_zeroed']['gap_mean']['mean']:.2g} on average with the "
        f"table zeroed and {s['gpt_none']['gap_mean']['mean']:.2g} with no encoding: the mask alone makes them differ.",
    ])
