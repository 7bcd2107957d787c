"""Section 2.5, ALiBi: slopes, penalties in nats, and each head's effective window.

    slope_provenance   for each head: from the power-of-two sequence, or interleaved in for other H
    naive_slopes       2^(-8h/H) for h = 1..H at any H: what the recipe is *not* for non-powers of two
    alibi_penalty      m_h * k, read off `alibi_bias`: how many nats head h subtracts at distance k
    weight_ratio       exp(-m_h k): the factor by which that penalty scales an attention weight
    effective_window   the distance at which head h's penalty first reaches `nats`: ceil(nats / m_h)
    mpt_slopes         the slopes as MPT's code builds them, 2^(-alibi_bias_max h / H): MPT-7B uses 8, StoryWriter 16
    passkey_alibi_lines   ALiBi's retrieval in Experiment 6's saved record per phase: the means, and the seeds
                          that lose the farthest key

Every slope comes from `mlbook.transformer.positional.alibi_slopes`; nothing here re-derives it.
"""

from __future__ import annotations

import math

import torch

from mlbook.transformer.positional import alibi_bias, alibi_slopes
from mlbook.transformer.validate import check_int, check_positive_float

__all__ = ["slope_provenance", "naive_slopes", "alibi_penalty", "weight_ratio", "effective_window", "mpt_slopes",
           "passkey_alibi_lines"]


def slope_provenance(n_heads: int) -> list[str]:
    """Per head, "power of two" (the n = 2^floor(log2 H) slopes 2^(-8h/n)) or "interleaved" (the
    extra heads of a non-power-of-two H, taken from every other slope of the 2n-head sequence)."""
    check_int("n_heads", n_heads, 1)
    n = 2 ** int(math.floor(math.log2(n_heads)))
    return ["power of two"] * n + ["interleaved"] * (n_heads - n)


def naive_slopes(n_heads: int) -> torch.Tensor:
    """2^(-8h/H) for h = 1..H, float64: the power-of-two formula applied to any H.

    Equal to `alibi_slopes` when H is a power of two; for other H it is a different set (for
    H = 12 it starts at 2^(-2/3) and ends at 2^(-8)), not the paper's recipe.
    """
    check_int("n_heads", n_heads, 1)
    h = torch.arange(1, n_heads + 1, dtype=torch.float64)  # (H,)
    return 2.0 ** (-8.0 * h / n_heads)  # (H,)


def alibi_penalty(n_heads: int, distance: int) -> torch.Tensor:
    """Nats subtracted from each head's score for a key `distance` tokens before the query: m_h * distance.

    Read off the library's bias, -alibi_bias(H, 1, distance + 1)[0, h, 0, 0] (the query sits at
    position `distance`, the key at 0). Returns (H,) float64.
    """
    check_int("n_heads", n_heads, 1)
    check_int("distance", distance, 0)
    return -alibi_bias(n_heads, 1, distance + 1)[0, :, 0, 0].double()  # (H,)


def weight_ratio(n_heads: int, distance: int) -> torch.Tensor:
    """exp(-m_h * distance): how much the penalty scales the attention weight of a key at that
    distance relative to an equally scored key at distance 0. Returns (H,) float64."""
    return torch.exp(-alibi_penalty(n_heads, distance))  # (H,)


def effective_window(n_heads: int, nats: float = 3.0) -> torch.Tensor:
    """Per head, the smallest integer distance k with m_h * k >= nats: ceil(nats / m_h).

    At `nats` = 3 a key that far back needs a content score 3 nats higher (e^3 = 20 times the
    weight) to compete with the query's own position. Returns (H,) int64.
    """
    check_int("n_heads", n_heads, 1)
    nats = check_positive_float("nats", nats)
    slopes = alibi_slopes(n_heads).double()  # (H,)
    return torch.ceil(nats / slopes - 1e-9).long()  # (H,) guard against nats / m landing a hair above an integer


def mpt_slopes(n_heads: int, alibi_bias_max: float = 8.0) -> torch.Tensor:
    """The slopes as MPT's code builds them (`gen_slopes` in MosaicML's llm-foundry and the MPT model
    cards' modelling code): with n = 2^ceil(log2 H), m_h = 2^(-alibi_bias_max * h / n) for h = 1..n,
    and for H < n the strided pick concat(m[1::2], m[::2])[:H]. Returns (H,) float64.

    alibi_bias_max = 8 (MPT-7B's config) gives the paper's slopes whenever H is a power of two.
    MPT-7B-StoryWriter-65k+'s config sets 16, so its 32 heads run from 2^-0.5 down to 2^-16 and
    its gentlest head charges 1 nat for a key 65,536 tokens back.
    """
    check_int("n_heads", n_heads, 1)
    alibi_bias_max = check_positive_float("alibi_bias_max", alibi_bias_max)
    n = 2 ** math.ceil(math.log2(n_heads))
    h = torch.arange(1, n + 1, dtype=torch.float64)  # (n,)
    slopes = 2.0 ** (-alibi_bias_max * h / n)  # (n,)
    if n != n_heads:
        slopes = torch.cat([slopes[1::2], slopes[::2]])[:n_heads]  # (H,)
    return slopes


def passkey_alibi_lines(budget: str = "full") -> str:
    """ALiBi's passkey retrieval in Experiment 6's saved record, two lines per phase (without
    fine-tuning, after the brief fine-tune at 4L). First: all-digits accuracy averaged over depths at
    the trained length and at the longest one (mean ± sd over seeds), and the paired change between
    them with its 95% interval. Second: the seed split those means hide, for a key at depth 0 (the
    farthest from the question): at each tested length, the seeds on which it is not retrieved
    (accuracy below `exp_passkey.RETRIEVES`, by `common.seed_split`), with their accuracy: the split
    `exp_passkey.seed_splits` lists for ALiBi's key at depth 0. Read through `mlbook.experiments.exp_passkey`,
    never typed; without a saved record, the registry's sentence saying how to make one."""
    from mlbook.experiments import catalog  # noqa: F401  (registers the experiments)
    from mlbook.experiments import exp_passkey as P
    from mlbook.experiments.common import seed_split
    from mlbook.experiments.registry import headline, load_result

    record = load_result("passkey", budget)
    if record is None:
        return headline("passkey", budget)
    r = record["results"]
    L, T = r["lengths"][0], r["lengths"][-1]
    if float(r["depths"][0]) != 0.0:
        raise ValueError("the record's first key depth must be 0 (the farthest from the question), "
                         f"got {r['depths'][0]}")
    lines = []
    for phase in r["phases"]:
        s = P.summary(record, phase, "alibi")
        change = P.length_change(record, phase, "alibi")["accuracy"]
        when = "without fine-tuning" if phase == "zero_shot" else (
            f"after {r['finetune']['steps']} fine-tuning steps at {r['finetune_len']}")
        lines.append(f"ALiBi {when}: all digits right at {L} {P.pm(s['accuracy'][0], 2)}, at {T} "
                     f"{P.pm(s['accuracy'][-1], 2)}; {T} minus {L} {P.pm(change, 2)} ({change['verdict']}, "
                     f"{len(r['seeds'])} seeds)")
        seeds = r["results"][phase]["alibi"]  # one dict per seed: accuracy[length][depth]
        lost = []
        for i, n in enumerate(r["lengths"]):
            far = [float(x["accuracy"][i][0]) for x in seeds]  # (S,) key at depth 0, at length n
            below = seed_split(far, P.RETRIEVES)["below"]
            if below:
                who = " and ".join(", ".join(f"{seeds[j]['seed']} ({far[j]:.2f})" for j in below).rsplit(", ", 1))
                lost.append(f"at {n} on seed{'s' if len(below) > 1 else ''} {who}")
        far_key = "  key at depth 0, the farthest from the question"
        lines.append(f"{far_key}, not retrieved (below {P.RETRIEVES:g}): " + ", ".join(lost)
                     + "; every other seed and length at or above" if lost else
                     f"{far_key}: retrieved ({P.RETRIEVES:g} or above) on every seed at every length")
    return "\n".join(lines)
