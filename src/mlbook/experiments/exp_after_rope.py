"""Experiment 7: what came after RoPE, side by side: RoPE, NoPE, partial rotary, p-RoPE and the NoPE/RoPE and
local/global stacks that ship, each claim registered (with its metric and, for "no difference", its margin)
before the run.

Per seed, ten tiny 4-layer GPTs are trained at length L on the same mix as Experiment 6 (passkey batches on
every third step, corpus text on the others), identical but for where position enters:

    rope          every layer rotates q and k (Su et al., 2021), base 10,000
    nope          no layer does: order comes from the causal mask alone (Haviv et al., 2022;
                  Kazemnejad et al., 2023)
    partial_25    every layer rotates the first 25% of each head's channels, the ladder re-spaced over them
                  (GPT-NeoX's rotary_pct 0.25; Qwen3-Next's partial_rotary_factor 0.25)
    partial_75    the same with 75% rotated (Phi-4-mini's partial_rotary_factor 0.75): 25% of the channels
                  never turn, the share p-RoPE leaves unrotated
    prope         every layer rotates, the lowest 25% of the frequencies set to 0 (p-RoPE 0.75, Barbero et
                  al., 2025), at base 10,000, where those pairs barely turn within L: a control
    rope_b100     RoPE at base 100, where the slowest quarter of the pairs turns 0.9-2 rad within L, about
    prope_b100    the angles Gemma's dropped pairs cover at 8k; and p-RoPE 0.75 on that ladder
    hybrid        layers 0-2 rotate, layer 3 does not: a NoPE layer every fourth, full attention
                  everywhere (SmolLM3's shape)
    local_global  layers 0-2 rotate inside a sliding window of L/2, layer 3 attends globally without
                  rotation (Command A's shape; RNoPE-SWA of Yang et al., 2025)
    all_local     every layer rotates inside the window of L/2 (no global layer): what the local layers
                  alone give, the baseline local_global needs

Each model is scored on the same held-out text at L, 2L and 4L (in-range loss: positions < L; loss past L:
positions L..4L-1 of the 4L windows) beside count n-gram models (n = 1..4) fit on the training text and
scored on the same windows, and on passkey samples whose key sits a controlled distance before the
question (inside the window, beyond it but inside L, beyond L) in inputs of length L, 2L and 4L, so that
distance and length vary separately. No model is scaled or fine-tuned. On the RoPE and p-RoPE models the
frequency-usage probe of Barbero et al. measures, per layer, the mean norm of q and of k in each pair.
"""

from __future__ import annotations

import random
from typing import Any

import torch

from mlbook.experiments.common import (
    Timer,
    build_gpt,
    findings,
    mean_sd,
    nested_windows,
    ngram_baselines,
    paired,
    per_position_loss,
    pm,
    rotary_pair_norms,
    seeds_of,
)
from mlbook.experiments.data import PasskeyTask, corpus_tokens, digit_accuracy, passkey_and_text, split_tokens
from mlbook.experiments.registry import register
from mlbook.experiments.train import TrainConfig, train
from mlbook.transformer.models import GPT
from mlbook.transformer.positional import frequency_ladder

__all__ = ["METHODS", "LABELS", "SHAPES", "PROBED", "CLAIMS", "method_settings", "pair_norms", "metric_per_seed",
           "comparisons", "comparison_table", "format_table", "slow_share", "usage_table", "claims_table",
           "verdict_line", "headline"]

METHODS: tuple[str, ...] = ("rope", "nope", "partial_25", "partial_75", "prope", "rope_b100", "prope_b100",
                            "hybrid", "local_global", "all_local")
LABELS: dict[str, str] = {
    "rope": "RoPE", "nope": "NoPE", "partial_25": "partial rotary 25%", "partial_75": "partial rotary 75%",
    "prope": "p-RoPE 0.75, base 10k", "rope_b100": "RoPE, base 100", "prope_b100": "p-RoPE 0.75, base 100",
    "hybrid": "NoPE every 4th layer", "local_global": "local RoPE + global NoPE", "all_local": "local RoPE only",
}
# the released models whose shape each stack copies (config.json fields in brackets)
SHAPES: dict[str, str] = {
    "partial_25": "GPT-NeoX-20B (rotary_pct 0.25), Qwen3-Next (partial_rotary_factor 0.25)",
    "partial_75": "Phi-4-mini (partial_rotary_factor 0.75)",
    "prope_b100": "p-RoPE of Barbero et al. (Gemma 2B/7B experiments)",
    "hybrid": "SmolLM3 (no_rope_layer_interval 4, full attention)",
    "local_global": "Command A and Command R7B (3 sliding RoPE layers : 1 global NoPE layer); Yang et al.'s RNoPE-SWA",
    "all_local": "Mistral 7B v0.1 (every layer a sliding window)",
}
PROBED: tuple[str, ...] = ("rope", "prope", "rope_b100", "prope_b100")  # models whose per-pair q/k norms are recorded

# Claims, registered before the full run: each compares a - b (or a alone against 0 when b is None) on one
# metric; "lower"/"higher" need the paired 95% interval to exclude 0, "equivalent" needs the 90% interval inside
# +-margin (two one-sided tests at 5%). The family is Holm-corrected on the page.
MARGIN = 0.05  # nats/char: 5% in per-character perplexity, fixed before the run
CLAIMS: list[dict[str, Any]] = [
    {"id": "nope_learns", "a": "nope", "b": None, "metric": "gain", "expect": "higher",
     "text": "a causal decoder without positions still learns from context (beats the count bigram)",
     "source": "Haviv et al., 2022"},
    {"id": "nope_pays", "a": "nope", "b": "rope", "metric": "in_range", "expect": "higher",
     "text": "without positions it pays in range", "source": "Haviv et al., 2022; Kazemnejad et al., 2023"},
    {"id": "hybrid_same", "a": "hybrid", "b": "rope", "metric": "in_range", "expect": "equivalent", "margin": MARGIN,
     "text": "one NoPE layer in four keeps RoPE's in-range loss", "source": "SmolLM3; Yang et al., 2025"},
    {"id": "partial_25_same", "a": "partial_25", "b": "rope", "metric": "in_range", "expect": "equivalent",
     "margin": MARGIN, "text": "rotating 25% of the channels keeps RoPE's in-range loss", "source": "GPT-NeoX"},
    {"id": "partial_75_same", "a": "partial_75", "b": "rope", "metric": "in_range", "expect": "equivalent",
     "margin": MARGIN, "text": "rotating 75% of the channels keeps RoPE's in-range loss", "source": "Phi-4-mini"},
    {"id": "prope_same", "a": "prope_b100", "b": "rope_b100", "metric": "in_range", "expect": "equivalent",
     "margin": MARGIN, "text": "dropping the slowest 25% of the pairs, where they turn, keeps the in-range loss",
     "source": "Barbero et al., 2025"},
    {"id": "hybrid_rise", "a": "hybrid", "b": "rope", "metric": "rise", "expect": "lower",
     "text": "a NoPE layer every fourth makes the loss rise less past L", "source": "Yang et al., 2025"},
    {"id": "local_global_rise", "a": "local_global", "b": "rope", "metric": "rise", "expect": "lower",
     "text": "local RoPE + global NoPE makes the loss rise less past L", "source": "Yang et al., 2025; Command A"},
    {"id": "nope_keeps", "a": "nope", "b": "rope", "metric": "kept", "expect": "higher",
     "text": "NoPE keeps a larger share of its context gain past L than RoPE", "source": "Kazemnejad et al., 2023"},
    {"id": "global_retrieves", "a": "local_global", "b": "all_local", "metric": "passkey@64:43", "expect": "higher",
     "text": "the global NoPE layer retrieves a key beyond the window that local layers alone miss",
     "source": "Yang et al., 2025"},
    {"id": "local_global_far", "a": "local_global", "b": "rope", "metric": "passkey@256:96", "expect": "higher",
     "text": "local RoPE + global NoPE retrieves a key beyond L where RoPE fails", "source": "Yang et al., 2025"},
]

_CELLS_FULL = [[64, 29], [64, 43], [128, 29], [128, 43], [128, 96], [256, 29], [256, 43], [256, 96], [256, 192]]
_QUICK = {
    "methods": ["rope", "nope", "local_global", "all_local"],
    "train_len": 64,
    "window": 32,
    "model": {"d_model": 32, "n_heads": 2, "n_layers": 4},
    "train": {"steps": 300, "batch_size": 8, "lr": 4e-3, "warmup_steps": 15},
    "passkey_every": 3,
    "lengths": [64, 128, 256],
    "passkey_cells": [[64, 29], [64, 43], [256, 29], [256, 96]],
    "n_eval": 8,
    "loss_windows": 8,
    "eval_seed": 1000,
    "seeds": [0],
    "claims": [c for c in CLAIMS if c["a"] in ("rope", "nope", "local_global", "all_local")
               and c["b"] in (None, "rope", "nope", "local_global", "all_local")],
}
_FULL = {
    "methods": list(METHODS),
    "train_len": 64,
    "window": 32,
    "model": {"d_model": 48, "n_heads": 2, "n_layers": 4},
    "train": {"steps": 1500, "batch_size": 16, "lr": 4e-3, "warmup_steps": 45},
    "passkey_every": 3,
    "lengths": [64, 128, 256],
    "passkey_cells": _CELLS_FULL,
    "n_eval": 32,
    "loss_windows": 32,
    "eval_seed": 1000,
    "seeds": [0, 1, 2, 3, 4],
    "claims": CLAIMS,
}


def method_settings(method: str, n_layers: int, window: int) -> tuple[str, dict[str, Any]]:
    """(positional scheme, extra GPTConfig fields) of a method for a stack of n_layers with local window `window`."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    last = (n_layers - 1,)
    local = {"sliding_window": window, "layer_types": ("sliding_attention",) * (n_layers - 1) + ("full_attention",)}
    return {
        "rope": ("rope", {}),
        "nope": ("none", {}),
        "partial_25": ("rope", {"rope": {"partial_rotary_factor": 0.25}}),
        "partial_75": ("rope", {"rope": {"partial_rotary_factor": 0.75}}),
        "prope": ("rope", {"rope": {"drop_lowest": 0.25}}),
        "rope_b100": ("rope", {"rope": {"base": 100.0}}),
        "prope_b100": ("rope", {"rope": {"base": 100.0, "drop_lowest": 0.25}}),
        "hybrid": ("rope", {"nope_layers": last}),
        "local_global": ("rope", {"nope_layers": last, **local}),
        "all_local": ("rope", {"sliding_window": window, "layer_types": ("sliding_attention",) * n_layers}),
    }[method]


@torch.no_grad()
def pair_norms(model: GPT, x: torch.Tensor, device: torch.device) -> dict[str, list[list[float]]]:
    """Barbero et al.'s frequency-usage probe: per layer, the mean over tokens and heads of the norm of
    each rotary pair of q and of k, before rotation: {"q", "k"}: (n_layers, n_pairs), pair 0 the fastest.

    Pair i is channels (i, i + r/2) of a head (half pairing), r = the rotated width; a layer without
    rotation is probed in the same layout."""
    model.to(device).eval()
    got: dict[tuple[int, str], torch.Tensor] = {}
    hooks = []
    for i, block in enumerate(model.blocks):
        for name in ("q", "k"):
            def hook(_m, _inp, out, i=i, name=name):  # type: ignore[no-untyped-def]
                got[(i, name)] = out.detach()
            hooks.append(getattr(block.attn, f"{name}_proj").register_forward_hook(hook))
    try:
        model(x.to(device))
    finally:
        for h in hooks:
            h.remove()
    d_head = model.config.d_model // model.config.n_heads
    r = model.rotary.rotary_dim if model.rotary is not None else d_head
    out: dict[str, list[list[float]]] = {"q": [], "k": []}
    for i in range(len(model.blocks)):
        for name in ("q", "k"):
            t = got[(i, name)].float()  # (B, T, n * d_head)
            norm = rotary_pair_norms(t.view(*t.shape[:2], -1, d_head), r)  # (B, T, n, r/2)
            out[name].append([round(v, 4) for v in norm.mean((0, 1, 2)).tolist()])
    return out


@torch.no_grad()
def _passkey(model: GPT, x: torch.Tensor, y: torch.Tensor, device: torch.device) -> float:
    """Share of samples with every digit of the key right (teacher-forced argmax on the scored positions)."""
    all_right, _ = digit_accuracy(model.eval()(x.to(device)).cpu(), y)  # (n,)
    return all_right.mean().item()


def _train_summary(losses: list[float], every: int) -> dict[str, Any]:
    """The training losses split by batch kind: the last 50 of each kind's mean, and the LM loss averaged over
    blocks of 100 steps (the curve, to see whether it had flattened)."""
    lm = [v for i, v in enumerate(losses) if i % every != 0]
    pk = [v for i, v in enumerate(losses) if i % every == 0]
    block = [i for i in range(0, len(losses), 100)]
    curve = []
    for b in block:
        part = [v for i, v in enumerate(losses[b : b + 100], start=b) if i % every != 0]
        curve.append(round(sum(part) / len(part), 4))
    return {"lm_loss_last50": round(sum(lm[-50:]) / len(lm[-50:]), 4),
            "passkey_loss_last50": round(sum(pk[-50:]) / len(pk[-50:]), 4), "lm_loss_per_100_steps": curve}


@register(
    "after_rope",
    title="What came after RoPE: RoPE, NoPE, partial rotary, p-RoPE and the NoPE/RoPE and local/global stacks, "
          "in range, past L, and retrieving at controlled distances",
    claim="Registered claims (config 'claims'): NoPE learns but pays in range; NoPE layers, partial rotary and "
          "p-RoPE keep RoPE's in-range loss within 0.05 nats/char; hybrid and local/global stacks rise less past L; "
          "the global NoPE layer retrieves beyond the window and beyond L.",
    configs={"quick": _QUICK, "full": _FULL},
)
def run(cfg: dict[str, Any], device: torch.device, progress: bool) -> dict[str, Any]:
    train_part, val_part = split_tokens(corpus_tokens())
    task = PasskeyTask()
    L, B, n_layers, W = cfg["train_len"], cfg["train"]["batch_size"], cfg["model"]["n_layers"], cfg["window"]
    every = cfg["passkey_every"]
    seeds = seeds_of(cfg)
    T_max = max(cfg["lengths"])
    lm = nested_windows(val_part, cfg["loss_windows"], T_max, cfg["eval_seed"])  # (N, 4L) inputs, targets
    tests, distances = [], []
    for length, distance in cfg["passkey_cells"]:
        x, y, got = task.batch_at(cfg["n_eval"], length, distance, random.Random(cfg["eval_seed"] + 7 * length + distance))
        tests.append((x, y))
        distances.append({"min": min(got), "mean": round(sum(got) / len(got), 2), "max": max(got)})
    out: dict[str, Any] = {"train_len": L, "window": W, "methods": cfg["methods"], "labels": LABELS, "seeds": seeds,
                           "lengths": cfg["lengths"], "passkey_cells": cfg["passkey_cells"],
                           "passkey_distances": distances, "n_eval": cfg["n_eval"],
                           "settings": {m: method_settings(m, n_layers, W)[1] for m in cfg["methods"]},
                           "baselines": {"ngram": ngram_baselines(train_part, lm[0], lm[1], L)},
                           "params": {}, "results": {m: [] for m in cfg["methods"]}, "seconds_per_seed": []}
    for seed in seeds:
        clock = Timer()
        for method in cfg["methods"]:
            positional, extra = method_settings(method, n_layers, W)
            model = build_gpt(positional, cfg["model"], L, seed, **extra)
            out["params"][method] = model.num_params()
            log = train(model, passkey_and_text(task, train_part, L, B, every, random.Random(seed)),
                        TrainConfig(seed=seed, **cfg["train"]), device, desc=f"after_rope/{method} seed {seed}",
                        progress=progress)
            model.eval()
            curve = per_position_loss(model, lm[0], lm[1], device)  # (4L,) nats/char at each position
            row: dict[str, Any] = {
                "seed": seed, "seconds": round(log["seconds"], 1), **_train_summary(log["loss"], every),
                "in_range": round(curve[:L].mean().item(), 4),
                "past_L": round(curve[L:].mean().item(), 4),
                "loss_by_quarter_L": [round(curve[i : i + L // 4].mean().item(), 4) for i in range(0, T_max, L // 4)],
                "passkey": [round(_passkey(model, x, y, device), 4) for x, y in tests],
            }
            if method in PROBED:
                row["pair_norms"] = pair_norms(model, lm[0][:, :L], device)
            out["results"][method].append(row)
        out["seconds_per_seed"].append(clock())
    return out


# -- derived numbers --------------------------------------------------------------------------


def _check_method(record: dict[str, Any], method: str) -> None:
    if method not in record["results"]["methods"]:
        raise ValueError(f"method must be one of {', '.join(record['results']['methods'])}, got {method!r}")


def metric_per_seed(record: dict[str, Any], method: str, metric: str) -> list[float]:
    """One value per seed: "in_range" or "past_L" (nats/char), "rise" (past_L - in_range: how much the
    loss rises past L, on the same windows), or "passkey@N" (share right at length N)."""
    _check_method(record, method)
    rows = record["results"]["results"][method]
    if metric in ("in_range", "past_L"):
        return [row[metric] for row in rows]
    if metric == "rise":
        return [round(row["past_L"] - row["in_range"], 4) for row in rows]
    if metric.startswith("passkey@"):
        lengths = record["results"]["lengths"]
        n = int(metric.split("@", 1)[1])
        if n not in lengths:
            raise ValueError(f"passkey length must be one of {lengths}, got {n}")
        return [row["passkey"][lengths.index(n)] for row in rows]
    raise ValueError(f"metric must be 'in_range', 'past_L', 'rise' or 'passkey@N', got {metric!r}")


def comparisons(record: dict[str, Any], metric: str, against: str = "rope") -> dict[str, dict[str, Any]]:
    """Paired per-seed differences (method - `against`) of `metric`, same seeds and text."""
    ref = metric_per_seed(record, against, metric)
    return {m: paired(metric_per_seed(record, m, metric), ref) for m in record["results"]["methods"] if m != against}


def format_table(record: dict[str, Any]) -> str:
    """Per method, mean ± sd over seeds: in-range loss, loss past L, passkey accuracy at each length."""
    r = record["results"]
    w = 15
    head = f"{'method':<29}{'loss < L':>{w}}{'loss L..4L':>{w}}" + "".join(
        f"{'passkey@' + str(n):>{w}}" for n in r["lengths"])
    lines = [findings([f"trained at L = {r['train_len']} on passkey + text; loss in nats/char on the same held-out "
                       f"text; passkey: all 5 digits right (chance 1e-5), averaged over depths {r['depths']}; mean ± "
                       f"sd over seeds {r['seeds']} ({record['budget']} budget)"]), head, "-" * len(head)]
    for m in r["methods"]:
        cells = [pm(mean_sd(metric_per_seed(record, m, k)), 3) for k in ("in_range", "past_L")]
        cells += [pm(mean_sd(metric_per_seed(record, m, f"passkey@{n}")), 2) for n in r["lengths"]]
        lines.append(f"{LABELS[m]:<29}" + "".join(f"{c:>{w}}" for c in cells))
    return "\n".join(lines)


def usage_table(record: dict[str, Any], method: str = "rope", which: str = "q") -> str:
    """The probe: mean per-pair norm of q (or k) per layer over seeds, pairs from fastest to slowest."""
    if method not in PROBED:
        raise ValueError(f"method must be one of {', '.join(PROBED)} (the probed models), got {method!r}")
    if which not in ("q", "k"):
        raise ValueError(f"which must be 'q' or 'k', got {which!r}")
    rows = record["results"]["results"][method]
    t = torch.tensor([row["pair_norms"][which] for row in rows], dtype=torch.float64).mean(0)  # (layers, pairs)
    head = f"{'layer':<7}" + "".join(f"{'pair ' + str(i):>8}" for i in range(t.shape[1]))
    lines = [head, "-" * len(head)]
    for i, vals in enumerate(t.tolist()):
        lines.append(f"{i:<7}" + "".join(f"{v:>8.2f}" for v in vals))
    return "\n".join(lines)


def comparison_table(record: dict[str, Any]) -> str:
    """Markdown: every method against RoPE on every metric, paired mean difference [95% t-interval], verdict."""
    r = record["results"]
    metrics = [("in_range", "loss < L"), ("past_L", "loss L..4L"), ("rise", "rise past L")] + [
        (f"passkey@{n}", f"passkey at {n}") for n in r["lengths"]]
    lines = ["| method - RoPE | " + " | ".join(label for _, label in metrics) + " |",
             "|---|" + "---|" * len(metrics)]
    for m in r["methods"]:
        if m == "rope":
            continue
        cells = []
        for key, _ in metrics:
            d = comparisons(record, key)[m]
            cells.append(f"{pm(d, 2 if key.startswith('passkey') else 3)} {d['verdict']}")
        lines.append(f"| {LABELS[m]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def slow_share(record: dict[str, Any], method: str = "rope", which: str = "q") -> list[float]:
    """Per layer, the mean norm (over seeds) of the pairs that turn less than a quarter turn over the
    trained length L (wavelength 2 pi / theta_i > 4L, theta_i of the full-width ladder, base 10,000) divided
    by that of the faster pairs: below 1, the slow pairs carry less of q (or k) than the fast ones."""
    if method not in PROBED:
        raise ValueError(f"method must be one of {', '.join(PROBED)} (the probed models), got {method!r}")
    if which not in ("q", "k"):
        raise ValueError(f"which must be 'q' or 'k', got {which!r}")
    r = record["results"]
    d_head = record["config"]["model"]["d_model"] // record["config"]["model"]["n_heads"]
    slow = (2 * torch.pi / frequency_ladder(d_head)) > 4 * r["train_len"]  # (d_head/2,) bool
    t = torch.tensor([row["pair_norms"][which] for row in r["results"][method]], dtype=torch.float64).mean(0)
    return [round((t[i, slow].mean() / t[i, ~slow].mean()).item(), 3) for i in range(t.shape[0])]


def _sentence(cmp: dict[str, dict[str, Any]], better: str) -> tuple[list[str], list[str], list[str]]:
    """Methods whose interval says better / worse than RoPE, and the indistinguishable ones."""
    good = [m for m, d in cmp.items() if d["verdict"] == better]
    bad = [m for m, d in cmp.items() if d["verdict"] not in (better, "indistinguishable", "n/a")]
    same = [m for m, d in cmp.items() if d["verdict"] == "indistinguishable"]
    return good, bad, same


def _names(methods: list[str]) -> str:
    names = [LABELS[m] for m in methods]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def verdict_line(record: dict[str, Any]) -> str:
    """One sentence, against RoPE by the verdict rule: in-range loss, then how much the loss rises past L."""
    r = record["results"]
    if len(r["seeds"]) < 2:
        return "This record has one seed, so it supports no verdict (the quick budget is a smoke test)."
    parts = []
    for metric, what in (("in_range", "in range"), ("rise", f"rise from there to past L = {r['train_len']}")):
        good, bad, same = _sentence(comparisons(record, metric), "lower")
        bits = []
        if good:
            bits.append(f"{_names(good)} lower")
        if bad:
            bits.append(f"{_names(bad)} higher")
        if same:
            bits.append(f"{_names(same)} indistinguishable")
        parts.append(f"{what}: " + ", ".join(bits))
    return "Loss against RoPE on the same seeds and text, " + "; ".join(parts) + "."


# Claims the book makes in section 2.8, each decided against RoPE on one metric.
_CLAIMS: tuple[tuple[str, str, str, str], ...] = (
    ("nope", "in_range", "a causal decoder without positions still learns, at some cost in range", "higher"),
    ("hybrid", "in_range", "one NoPE layer in four costs nothing in range (Llama 4, SmolLM3)", "indistinguishable"),
    ("prope", "in_range", "dropping the slowest 25% of frequencies costs nothing in range (Barbero et al.)",
     "indistinguishable"),
    ("partial", "in_range", "rotating 25% of the channels costs nothing in range (GPT-NeoX)", "indistinguishable"),
    ("nope", "rise", "without positions the loss barely rises past L (nothing to extrapolate)", "lower"),
    ("hybrid", "rise", "a hybrid's loss rises less than RoPE's past L (Llama 4's argument for iRoPE)", "lower"),
    ("local_global", "rise", "local RoPE + global NoPE rises less than RoPE past L", "lower"),
)


def claims_table(record: dict[str, Any]) -> str:
    """Each claim, what the record's paired 95% interval against RoPE says, and whether it holds here."""
    lines = [f"{'claim':<84}{'method - RoPE [95% CI]':>26}  here"]
    lines.append("-" * len(lines[0]))
    for method, metric, text, expect in _CLAIMS:
        if method not in record["results"]["methods"]:
            continue
        d = comparisons(record, metric)[method]
        if d["ci95"] is None:
            here = "no verdict (one seed)"
        else:
            here = "holds" if d["verdict"] == expect else "not here: " + d["verdict"]
        lines.append(f"{text:<84}{pm(d, 3):>26}  {here}")
    return "\n".join(lines)


def headline(record: dict[str, Any]) -> str:
    """The verdict sentence, then each method's paired differences against RoPE with 95% intervals."""
    r = record["results"]
    lines = [verdict_line(record)]
    longest = r["lengths"][-1]
    per = []
    for m in r["methods"]:
        if m == "rope":
            continue
        cells = [pm(comparisons(record, k)[m], 3) for k in ("in_range", "rise")]
        acc = pm(comparisons(record, f"passkey@{r['train_len']}")[m], 2)
        per.append(f"{LABELS[m]}: in range {cells[0]}, rise past L {cells[1]}, passkey at L {acc}")
    lines.append(f"Method - RoPE, mean [95% t-interval] over {len(r['seeds'])} seeds (nats/char; passkey share):")
    return findings(lines[:1]) + "\n" + lines[1] + "\n" + findings(per)
