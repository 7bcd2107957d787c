"""Helpers every experiment shares: models, matched evaluation windows, per-position loss, seeds and
the statistics of a comparison across seeds.

Experiments import from here, never from a sibling experiment. The statistics are deliberately
simple and stated once:

    mean_sd(v)        mean and sample standard deviation (ddof = 1) over seeds
    paired(a, b)      per-seed differences a_s - b_s on the same seeds and the same text, with
                      their mean and standard deviation
    verdict(d)        an ordering is claimed only when every seed's difference has the same sign
                      and the mean difference exceeds its standard deviation; otherwise the two
                      are "indistinguishable" at this number of seeds
"""

from __future__ import annotations

import math
import time
from typing import Any, Iterable, Sequence

import torch
import torch.nn.functional as F

from mlbook.experiments.data import TOKENIZER, corpus_tokens, random_windows, split_tokens
from mlbook.experiments.train import TrainConfig, train
from mlbook.transformer.models import GPT, GPTConfig
from mlbook.transformer.positional import _check_int, rope_inv_freq, yarn_ramp

__all__ = [
    "CORPUS",
    "FINETUNE",
    "TUNED_BETAS",
    "seeds_of",
    "build_gpt",
    "copy_with_rope",
    "train_lm",
    "last_mean",
    "unigram_loss",
    "nested_windows",
    "per_position_loss",
    "binned",
    "mean_sd",
    "paired",
    "verdict",
    "pm",
    "yarn_bands",
    "Timer",
    "findings",
    "wrap_text",
]

CORPUS = "pydoc_data.topics (stdlib help text), characters"

# The brief fine-tune at the long length (4L), the same in the context-extension and passkey
# experiments: steps, batch, learning rate and warm-up per budget.
FINETUNE: dict[str, dict[str, Any]] = {
    "quick": {"steps": 12, "batch_size": 4, "lr": 1e-3, "warmup_steps": 2},
    "full": {"steps": 30, "batch_size": 8, "lr": 1e-3, "warmup_steps": 3},
}

# YaRN band limits for the tiny models (L = 128, d_head = 12), replacing the paper's 32 / 1, which
# assume L = 4096 and d_head = 128: keep the pairs that turn at least 4 times within L, interpolate
# those that never complete a turn (beta_slow = 1, as in the paper), blend in between.
TUNED_BETAS: dict[str, float] = {"beta_fast": 4.0, "beta_slow": 1.0}


def seeds_of(cfg: dict[str, Any]) -> list[int]:
    """The seeds a config asks for: cfg["seeds"] (a non-empty list of ints)."""
    seeds = cfg.get("seeds")
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise ValueError(f"config 'seeds' must be a non-empty list of ints, got {seeds!r}")
    return seeds


def build_gpt(positional: str, model: dict[str, Any], max_len: int, seed: int, vocab_size: int | None = None,
              **extra: Any) -> GPT:
    """A tiny GPT over the character vocabulary (or `vocab_size`), initialised from `seed`."""
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=vocab_size or TOKENIZER.vocab_size, max_len=max_len, positional=positional,
                         **model, **extra))


def copy_with_rope(base: GPT, rope: dict[str, Any]) -> GPT:
    """A GPT with `base`'s weights and config except its RoPE options (RoPE itself has no weights).

    Options "scaling" in (dynamic, yarn, llama3) get original_max_len = base.config.max_len."""
    if base.config.positional != "rope":
        raise ValueError(f"copy_with_rope needs a RoPE model, got positional={base.config.positional!r}")
    rope = dict(rope)
    if rope.get("scaling") in ("dynamic", "yarn", "llama3"):
        rope.setdefault("original_max_len", base.config.max_len)
    model = GPT(base.config.replace(rope=rope))
    model.load_state_dict(base.state_dict())
    return model.to(next(base.parameters()).device).eval()


def train_lm(model: GPT, tokens: torch.Tensor, T: int, tcfg: TrainConfig, device: torch.device, desc: str,
             progress: bool) -> dict[str, Any]:
    """Next-character training on random windows of length T from `tokens`."""
    return train(model, lambda step, g: random_windows(tokens, tcfg.batch_size, T, g), tcfg, device, desc=desc,
                 progress=progress)


def last_mean(values: Sequence[float], n: int = 50) -> float:
    """Mean of the last n values (a training loss with the noise of single batches averaged out)."""
    tail = list(values)[-n:]
    return sum(tail) / len(tail)


def unigram_loss() -> float:
    """Reference level: the cross-entropy (nats/char) of the held-out text under the training
    text's character frequencies (add-one smoothed). A model scoring near it has learned letter
    frequencies and nothing about context."""
    train_part, val_part = split_tokens(corpus_tokens())
    counts = torch.bincount(train_part, minlength=TOKENIZER.vocab_size).double() + 1.0  # (V,)
    logp = (counts / counts.sum()).log()  # (V,)
    return -logp[val_part].mean().item()


def nested_windows(tokens: torch.Tensor, n: int, T_max: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n held-out windows (inputs, targets), each (n, T_max), from a fixed seed.

    Evaluating at a length T <= T_max uses the first T columns, so every length sees the same
    documents: the text at positions 0..T-1 is identical at every length."""
    _check_int("n", n, 1)
    _check_int("T_max", T_max, 1)
    return random_windows(tokens, n, T_max, torch.Generator().manual_seed(seed))


@torch.no_grad()
def per_position_loss(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, device: torch.device | str,
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


def binned(curve: torch.Tensor | Sequence[float], width: int) -> dict[str, list[float]]:
    """Average a per-position curve over bins of `width` positions (keeps the JSON and plots small)."""
    _check_int("width", width, 1)
    c = torch.as_tensor(curve, dtype=torch.float64)
    T = c.shape[0] // width * width
    loss = c[:T].view(-1, width).mean(1)  # (T / width,)
    centres = torch.arange(T).view(-1, width).double().mean(1)  # (T / width,)
    return {"position": [round(v, 1) for v in centres.tolist()], "loss": [round(v, 4) for v in loss.tolist()]}


def mean_sd(values: Iterable[float | None]) -> dict[str, Any]:
    """{"mean", "sd", "n"} over the values that are not None; sd is the sample standard deviation
    (ddof = 1), None with a single value; mean is None when there is no value."""
    v = [float(x) for x in values if x is not None]
    if not v:
        return {"mean": None, "sd": None, "n": 0}
    m = sum(v) / len(v)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else None
    return {"mean": m, "sd": sd, "n": len(v)}


def verdict(diffs: Sequence[float]) -> str:
    """'lower', 'higher' or 'indistinguishable' for per-seed differences a - b.

    An ordering needs every seed to agree in sign and the mean difference to exceed its
    standard deviation across seeds; with one seed there is no spread, hence no verdict."""
    d = [float(x) for x in diffs]
    s = mean_sd(d)
    if s["n"] < 2 or s["sd"] is None:
        return "indistinguishable"
    same_sign = all(x > 0 for x in d) or all(x < 0 for x in d)
    if same_sign and abs(s["mean"]) > s["sd"]:
        return "lower" if s["mean"] < 0 else "higher"
    return "indistinguishable"


def paired(a: Sequence[float | None], b: Sequence[float | None]) -> dict[str, Any]:
    """Per-seed differences a_s - b_s (both measured on the same seed and text), their mean and
    sd, and the verdict for 'a is lower/higher than b'. Seeds where either is None are skipped."""
    if len(a) != len(b):
        raise ValueError(f"paired needs one value per seed on both sides, got {len(a)} and {len(b)}")
    d = [x - y for x, y in zip(a, b) if x is not None and y is not None]
    s = mean_sd(d)
    return {"mean": s["mean"], "sd": s["sd"], "n": s["n"], "per_seed": d, "verdict": verdict(d) if d else "n/a"}


def pm(stat: dict[str, Any], digits: int = 3) -> str:
    """'1.234 ± 0.012' from a mean_sd/paired dict; 'n/a' without a mean; no ± with one seed."""
    if stat.get("mean") is None:
        return "n/a"
    mean = f"{stat['mean']:.{digits}f}"
    if mean.startswith("-") and float(mean) == 0.0:
        mean = mean[1:]  # no "-0.000"
    if stat.get("sd") is None:
        return mean
    return f"{mean} ± {stat['sd']:.{digits}f}"


def yarn_bands(d_head: int, base: float, original_max_len: int, beta_fast: float, beta_slow: float) -> dict[str, Any]:
    """Which RoPE pairs YaRN keeps, blends and interpolates for these band limits.

    From the library's `yarn_ramp` r_i (theta_i' = (1 - r_i) theta_i + r_i theta_i / s): r_i = 0
    keeps pair i (extrapolation), r_i = 1 interpolates it, anything between blends. Also returns
    each pair's number of full turns within original_max_len, L theta_i / (2 pi)."""
    ramp = yarn_ramp(d_head, base, original_max_len=original_max_len, beta_fast=beta_fast, beta_slow=beta_slow)
    r = [round(v, 4) for v in ramp.tolist()]
    theta, _ = rope_inv_freq(d_head, base)  # (d/2,) unscaled theta_i
    turns = original_max_len * theta.double() / (2 * math.pi)  # (d/2,) L theta_i / 2 pi
    return {
        "beta_fast": beta_fast, "beta_slow": beta_slow, "ramp": r,
        "turns": [round(v, 3) for v in turns.tolist()],
        "keep": [i for i, v in enumerate(r) if v == 0.0],
        "blend": [i for i, v in enumerate(r) if 0.0 < v < 1.0],
        "interpolate": [i for i, v in enumerate(r) if v == 1.0],
    }


def findings(lines: Sequence[str], width: int = 78) -> str:
    """Headline findings as text a page can print: one bullet per finding, wrapped at `width`
    characters with continuation lines indented (code output does not wrap on the site)."""
    import textwrap

    keep = "\u00a0±\u00a0"  # a number and its spread stay on one line
    return "\n".join(textwrap.fill(line.replace(" ± ", keep), width, initial_indent="- ", subsequent_indent="  ")
                     for line in lines).replace(keep, " ± ")


def wrap_text(text: str, width: int = 78) -> str:
    """A table's caption line wrapped to `width` characters, a number and its spread kept together."""
    import textwrap

    keep = "\u00a0±\u00a0"
    return textwrap.fill(text.replace(" ± ", keep), width).replace(keep, " ± ")


class Timer:
    """Seconds since construction, rounded: `Timer()()`."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def __call__(self) -> float:
        return round(time.perf_counter() - self.start, 1)
