"""Helpers every experiment shares: models, matched evaluation windows, per-position loss, seeds and
the statistics of a comparison across seeds.

Experiments import from here, never from a sibling experiment. The statistics are deliberately
simple and stated once (VERDICT_RULE is the sentence every experiment page prints):

    rotary_pair_norms(x, r)  norm of each rotary pair of q or k in the half layout (pair i = channels
                      i and i + r/2), the frequency-usage probe of Barbero et al. (2025)
    mean_sd(v)        mean and sample standard deviation (ddof = 1) over seeds
    paired(a, b)      per-seed differences d_s = a_s - b_s on the same seeds and the same text,
                      their mean, sd and 95% t-interval mean ± t_{0.975, n-1} sd / sqrt(n)
    verdict(d)        "lower" or "higher" only when that interval excludes 0; otherwise the two
                      are "indistinguishable" at this number of seeds, whatever the means
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
from mlbook.transformer.rope_scaling import scaling_parameters
from mlbook.transformer.validate import check_int

__all__ = [
    "CORPUS",
    "FINETUNE",
    "TUNED_BETAS",
    "seeds_of",
    "build_gpt",
    "copy_with_rope",
    "train_lm",
    "last_mean",
    "rotary_pair_norms",
    "unigram_loss",
    "ngram_curve",
    "ngram_baselines",
    "nested_windows",
    "per_position_loss",
    "binned",
    "mean_sd",
    "paired",
    "verdict",
    "VERDICT_RULE",
    "t_quantile",
    "t_interval",
    "sign_flip_p",
    "t_cdf",
    "t_test_p",
    "tost",
    "detectable_difference",
    "holm",
    "seed_split",
    "pm",
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

    A scaling that takes original_max_len (dynamic, yarn, llama3) gets base.config.max_len."""
    if base.config.positional != "rope":
        raise ValueError(f"copy_with_rope needs a RoPE model, got positional={base.config.positional!r}")
    rope = dict(rope)
    if "original_max_len" in scaling_parameters(rope.get("scaling", "none")):
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


def ngram_curve(train_tokens: torch.Tensor, x: torch.Tensor, y: torch.Tensor, n: int, k: float = 0.1,
                vocab_size: int | None = None) -> torch.Tensor:
    """Per-position loss (T,) float64, nats, of a count n-gram model fit on `train_tokens` and scored on the
    windows x -> y (N, T), the baseline a model must beat to show it used more context than n - 1 characters.

        p(c | h) = (count(h c) + k) / (count(h) + k V),   h = the n - 1 characters before c, V = vocab_size

    (add-k smoothing, k = 0.1; an unseen history gives 1 / V). The history is read from the window itself, as
    a model sees it: at position t only t + 1 characters are there, so the first n - 2 positions use the
    (t + 2)-gram. n = 1 is the unigram (character frequencies). Counting is exact integer work; only the
    final logarithm is floating point."""
    check_int("n", n, 1)
    if not k > 0:
        raise ValueError(f"k must be > 0, got {k!r}")
    V = vocab_size or TOKENIZER.vocab_size
    if x.shape != y.shape or x.dim() != 2:
        raise ValueError(f"x and y must be (N, T) of one shape, got {tuple(x.shape)} and {tuple(y.shape)}")
    t = train_tokens.long()
    full = torch.cat([x[:, :1], y], 1).long()  # (N, T + 1): the window's characters, x[:, 0] then the targets
    N, T = y.shape
    loss = torch.zeros(N, T, dtype=torch.float64)
    for order in range(1, n + 1):
        h = order - 1  # history length
        # codes of (history, next) in base V over the training stream, and of the history alone
        code = torch.zeros(len(t) - h, dtype=torch.long)
        for j in range(h + 1):
            code = code * V + t[j : len(t) - h + j]
        hist = code // V
        keys, counts = torch.unique(code, return_counts=True)  # sorted
        hkeys, hcounts = torch.unique(hist, return_counts=True)
        # positions that use this order: t >= h - 1 when order == n, else exactly t == h - 1 (short history)
        cols = list(range(max(h - 1, 0), T)) if order == n else ([h - 1] if h - 1 < T else [])
        if order < n and h == 0:
            continue  # the unigram is only used as itself (n = 1): every position has at least one character
        if not cols:
            continue
        cols_t = torch.tensor(cols)
        q = torch.zeros(N, len(cols), dtype=torch.long)
        for j in range(h + 1):  # window characters cols - h + 1 + j ... ending at the target cols + 1
            q = q * V + full[:, cols_t + 1 - h + j]
        qh = q // V

        def lookup(sorted_keys: torch.Tensor, sorted_counts: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
            i = torch.searchsorted(sorted_keys, want).clamp(max=len(sorted_keys) - 1)
            return torch.where(sorted_keys[i] == want, sorted_counts[i], torch.zeros_like(want))

        c_hc = lookup(keys, counts, q).double()
        c_h = lookup(hkeys, hcounts, qh).double() if h else torch.full_like(c_hc, float(len(t)))
        loss[:, cols_t] = -torch.log((c_hc + k) / (c_h + k * V))
    return loss.mean(0)  # (T,)


def ngram_baselines(train_tokens: torch.Tensor, x: torch.Tensor, y: torch.Tensor, split: int,
                    orders: Sequence[int] = (1, 2, 3, 4)) -> dict[str, dict[str, float]]:
    """{"1": {"in_range", "past_L"}, ...}: each count n-gram model's mean loss on positions < split and >= split
    of the windows x -> y (`ngram_curve`), rounded to 4 decimals as the models' losses are."""
    check_int("split", split, 1)
    out = {}
    for n in orders:
        c = ngram_curve(train_tokens, x, y, n)
        out[str(n)] = {"in_range": round(c[:split].mean().item(), 4),
                       "past_L": round(c[split:].mean().item(), 4) if c.shape[0] > split else None}
    return out


def nested_windows(tokens: torch.Tensor, n: int, T_max: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n held-out windows (inputs, targets), each (n, T_max), from a fixed seed.

    Evaluating at a length T <= T_max uses the first T columns, so every length sees the same
    documents: the text at positions 0..T-1 is identical at every length."""
    check_int("n", n, 1)
    check_int("T_max", T_max, 1)
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
    check_int("width", width, 1)
    c = torch.as_tensor(curve, dtype=torch.float64)
    T = c.shape[0] // width * width
    loss = c[:T].view(-1, width).mean(1)  # (T / width,)
    centres = torch.arange(T).view(-1, width).double().mean(1)  # (T / width,)
    return {"position": [round(v, 1) for v in centres.tolist()], "loss": [round(v, 4) for v in loss.tolist()]}


def rotary_pair_norms(x: torch.Tensor, rotary_dim: int) -> torch.Tensor:
    """Norm of each rotary pair of a query or key tensor in the half layout: (..., d_head) -> (..., r/2),

        n_i = sqrt(x_i^2 + x_{i + r/2}^2),   i = 0 .. r/2 - 1,  r = rotary_dim <= d_head,

    pair 0 the fastest. Rotation turns each pair without changing its length, so the norms are the same
    before and after it. Barbero et al. (2025), "Round and Round We Go", average them over tokens to see
    which frequencies a trained model uses. Computed in x's dtype (cast first for more precision).
    """
    check_int("rotary_dim", rotary_dim, 2)
    if rotary_dim % 2 or rotary_dim > x.shape[-1]:
        raise ValueError(f"rotary_dim must be even and at most the last dimension {x.shape[-1]}, got {rotary_dim}")
    half = rotary_dim // 2
    return (x[..., :half] ** 2 + x[..., half:rotary_dim] ** 2).sqrt()  # (..., r/2)


def mean_sd(values: Iterable[float | None]) -> dict[str, Any]:
    """{"mean", "sd", "n"} over the values that are not None; sd is the sample standard deviation
    (ddof = 1), None with a single value; mean is None when there is no value."""
    v = [float(x) for x in values if x is not None]
    if not v:
        return {"mean": None, "sd": None, "n": 0}
    m = sum(v) / len(v)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else None
    return {"mean": m, "sd": sd, "n": len(v)}


VERDICT_RULE = (
    "Verdict rule: two methods are compared on the same seeds and the same text through their per-seed "
    "differences; we print the mean difference with its 95% t-interval, mean ± t(0.975, n-1) · sd / √n, and "
    "call one lower or higher only when that interval excludes 0. An interval that spans 0 is "
    "\"indistinguishable\" at this number of seeds, whatever the means. Full-budget records have 5 seeds "
    "(t(0.975, 4) = 2.776); quick runs have 1 or 2 and support no verdict. (An exact sign-flip test cannot "
    "help at 5 seeds: its smallest two-sided p is 2/32 = 0.0625.)")


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularised incomplete beta function, for 0 <= x <= 1."""
    if x <= 0.0 or x >= 1.0:
        return max(0.0, min(1.0, x))
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t with `df` degrees of freedom, e.g. t_quantile(0.975, 4) = 2.776.

    From the CDF P(T <= t) = 1 - I_{df/(df+t^2)}(df/2, 1/2) / 2 for t >= 0, inverted by bisection
    (to 1e-12); tested against scipy.stats.t.ppf."""
    if not 0.5 <= p < 1.0:
        raise ValueError(f"p must be in [0.5, 1), got {p!r}")
    check_int("df", df, 1)

    def upper_tail(t: float) -> float:  # P(T > t) for t >= 0
        return 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))

    lo, hi = 0.0, 1.0
    while upper_tail(hi) > 1.0 - p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if upper_tail(mid) > 1.0 - p else (lo, mid)
        if hi - lo < 1e-12:
            break
    return (lo + hi) / 2.0


def t_interval(diffs: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """The two-sided `level` t-interval for the mean of `diffs`; None with fewer than 2 values."""
    d = [float(x) for x in diffs]
    s = mean_sd(d)
    if s["n"] < 2:
        return None
    half = t_quantile(0.5 + level / 2.0, s["n"] - 1) * s["sd"] / math.sqrt(s["n"])
    return (s["mean"] - half, s["mean"] + half)


def sign_flip_p(diffs: Sequence[float]) -> float:
    """Exact two-sided p-value of the paired sign-flip (permutation) test: the share of the 2^n
    sign patterns whose |mean| is at least the observed one. Its smallest value is 2 / 2^n."""
    d = [float(x) for x in diffs]
    if not d or len(d) > 20:
        raise ValueError(f"sign_flip_p needs 1 to 20 differences, got {len(d)}")
    observed = abs(sum(d)) - 1e-12
    hits = 0
    for mask in range(2 ** len(d)):
        total = sum(-x if mask >> i & 1 else x for i, x in enumerate(d))
        hits += abs(total) >= observed
    return hits / 2 ** len(d)


def t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom."""
    check_int("df", df, 1)
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))  # P(T > |t|)
    return 1.0 - tail if t >= 0 else tail


def t_test_p(diffs: Sequence[float]) -> float | None:
    """Two-sided p-value of the paired t-test of mean(diffs) = 0; None with fewer than 2 values, 0.0 when
    every difference is the same non-zero number and 1.0 when all are 0."""
    s = mean_sd(diffs)
    if s["n"] < 2:
        return None
    if s["sd"] == 0:
        return 1.0 if s["mean"] == 0 else 0.0
    t = s["mean"] / (s["sd"] / math.sqrt(s["n"]))
    return 2.0 * (1.0 - t_cdf(abs(t), s["n"] - 1))


def tost(diffs: Sequence[float], margin: float) -> dict[str, Any]:
    """Two one-sided t-tests at 5% for equivalence within +-margin (Schuirmann, 1987): {"ci90", "p",
    "equivalent", "margin"}. Equivalent when the 90% t-interval lies inside (-margin, margin), i.e. when
    p = max(P(mean <= -margin), P(mean >= margin)) < 0.05; "certifiable" is the smallest margin the data
    would have certified, max |end of the 90% interval|."""
    margin = check_margin(margin)
    s = mean_sd(diffs)
    if s["n"] < 2:
        return {"ci90": None, "p": None, "equivalent": False, "margin": margin, "certifiable": None}
    ci = t_interval(diffs, 0.90)
    assert ci is not None
    if s["sd"] == 0:
        p = 0.0 if abs(s["mean"]) < margin else 1.0
    else:
        se = s["sd"] / math.sqrt(s["n"])
        p_low = 1.0 - t_cdf((s["mean"] + margin) / se, s["n"] - 1)  # H0: mean <= -margin
        p_high = t_cdf((s["mean"] - margin) / se, s["n"] - 1)  # H0: mean >= margin
        p = max(p_low, p_high)
    return {"ci90": list(ci), "p": p, "equivalent": p < 0.05, "margin": margin,
            "certifiable": max(abs(ci[0]), abs(ci[1]))}


def check_margin(margin: object) -> float:
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not margin > 0 or math.isinf(margin):
        raise ValueError(f"margin must be a positive finite number, got {margin!r}")
    return float(margin)


def detectable_difference(diffs: Sequence[float], power: float = 0.8) -> float | None:
    """The smallest true mean difference the paired two-sided 5% t-test would detect with probability
    `power` at this number of seeds and this seed-to-seed spread: (t_{0.975, n-1} + t_{power, n-1}) sd / sqrt(n)
    (the usual approximation, treating sd as known); None with fewer than 2 values."""
    if not 0.5 <= power < 1.0:
        raise ValueError(f"power must be in [0.5, 1), got {power!r}")
    s = mean_sd(diffs)
    if s["n"] < 2:
        return None
    return (t_quantile(0.975, s["n"] - 1) + t_quantile(power, s["n"] - 1)) * s["sd"] / math.sqrt(s["n"])


def holm(pvalues: Sequence[float | None], alpha: float = 0.05) -> list[dict[str, Any]]:
    """Holm's step-down correction (Holm, 1979) over a family of tests: per test, in the given order,
    {"p", "p_holm" (adjusted, capped at 1), "survives" (rejected at family-wise level alpha)}. A None p (no
    test possible) takes no part and never survives."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    idx = sorted((i for i, p in enumerate(pvalues) if p is not None), key=lambda i: pvalues[i])  # type: ignore[arg-type, return-value]
    m = len(idx)
    out: list[dict[str, Any]] = [{"p": p, "p_holm": None, "survives": False} for p in pvalues]
    running, stopped = 0.0, False
    for rank, i in enumerate(idx):
        adj = min(1.0, (m - rank) * float(pvalues[i]))  # type: ignore[arg-type]
        running = max(running, adj)  # adjusted p-values never decrease down the order
        out[i]["p_holm"] = running
        stopped = stopped or running >= alpha
        out[i]["survives"] = not stopped
    return out


def seed_split(values: Sequence[float], threshold: float) -> dict[str, Any]:
    """Which seeds sit on either side of `threshold` (e.g. 0.5 for a retrieval share): {"below", "above"}
    as seed indices, and "split" when both sides are non-empty, the case a mean and sd hide (a method
    that works on 3 seeds and fails on 2 has a mean that describes no seed)."""
    below = [i for i, v in enumerate(values) if v < threshold]
    above = [i for i, v in enumerate(values) if v >= threshold]
    return {"below": below, "above": above, "split": bool(below) and bool(above)}


def verdict(diffs: Sequence[float]) -> str:
    """'lower', 'higher' or 'indistinguishable' for per-seed differences a - b (VERDICT_RULE).

    An ordering needs the 95% t-interval of the mean difference to exclude 0; with one seed
    there is no interval, hence no verdict."""
    ci = t_interval(diffs)
    if ci is None or ci[0] <= 0.0 <= ci[1]:
        return "indistinguishable"
    return "lower" if ci[1] < 0.0 else "higher"


def paired(a: Sequence[float | None], b: Sequence[float | None]) -> dict[str, Any]:
    """Per-seed differences a_s - b_s (both measured on the same seed and text), their mean, sd,
    95% t-interval ("ci95", None with one seed) and the verdict for 'a is lower/higher than b'.
    Seeds where either is None are skipped."""
    if len(a) != len(b):
        raise ValueError(f"paired needs one value per seed on both sides, got {len(a)} and {len(b)}")
    d = [x - y for x, y in zip(a, b) if x is not None and y is not None]
    s = mean_sd(d)
    ci = t_interval(d) if d else None
    return {"mean": s["mean"], "sd": s["sd"], "n": s["n"], "per_seed": d, "ci95": None if ci is None else list(ci),
            "verdict": verdict(d) if d else "n/a"}


def _num(x: float, digits: int) -> str:
    text = f"{x:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0.0 else text  # no "-0.000"


def pm(stat: dict[str, Any], digits: int = 3) -> str:
    """'1.234 ± 0.012' (mean ± sd) from a mean_sd dict; from a paired dict, the mean difference
    and its 95% t-interval, '0.580 [0.160, 1.000]'. 'n/a' without a mean; the mean alone with
    one seed."""
    if stat.get("mean") is None:
        return "n/a"
    mean = _num(stat["mean"], digits)
    if "ci95" in stat:
        ci = stat["ci95"]
        return mean if ci is None else f"{mean} [{_num(ci[0], digits)}, {_num(ci[1], digits)}]"
    if stat.get("sd") is None:
        return mean
    return f"{mean} ± {stat['sd']:.{digits}f}"


def findings(lines: Sequence[str], width: int = 78) -> str:
    """Headline findings as text a page can print: one bullet per finding, wrapped at `width`
    characters with continuation lines indented (code output does not wrap on the site)."""
    import textwrap

    keep = "\u00a0±\u00a0"  # a number and its spread stay on one line
    return "\n".join(textwrap.fill(line.replace(" ± ", keep), width, initial_indent="- ", subsequent_indent="  ",
                                   break_on_hyphens=False)
                     for line in lines).replace(keep, " ± ")


def wrap_text(text: str, width: int = 78) -> str:
    """A table's caption line wrapped to `width` characters, a number and its spread kept together."""
    import textwrap

    keep = "\u00a0±\u00a0"
    return textwrap.fill(text.replace(" ± ", keep), width, break_on_hyphens=False).replace(keep, " ± ")


class Timer:
    """Seconds since construction, rounded: `Timer()()`."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def __call__(self) -> float:
        return round(time.perf_counter() - self.start, 1)
