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

from mlbook.experiments.claims import claims_table as rows_table
from mlbook.experiments.claims import decide, survivors_line
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
    seed_split,
    seeds_of,
)
from mlbook.experiments.data import PasskeyTask, corpus_tokens, digit_accuracy, passkey_and_text, split_tokens
from mlbook.experiments.registry import register
from mlbook.experiments.train import TrainConfig, train
from mlbook.transformer.models import GPT
from mlbook.transformer.positional import frequency_ladder

__all__ = ["METHODS", "LABELS", "SHAPES", "PROBED", "CLAIMS", "MARGIN", "METRICS", "method_settings", "pair_norms",
           "bigram", "metric_per_seed", "comparisons", "decided_claims", "claims_table", "beats_4gram",
           "baseline_table", "format_table", "seed_splits", "usage_table", "dropped_angles", "slow_share",
           "comparison_table", "verdict_line", "headline"]

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


def bigram(record: dict[str, Any], where: str = "in_range") -> float:
    """The count bigram model's loss on the record's windows, in range or past L (the reference for gain)."""
    return record["results"]["baselines"]["ngram"]["2"][where]


def _cell(record: dict[str, Any], metric: str) -> int:
    cells = [tuple(c) for c in record["results"]["passkey_cells"]]
    try:
        length, distance = (int(v) for v in metric.split("@", 1)[1].split(":"))
    except ValueError:
        raise ValueError(f"a passkey metric reads 'passkey@LENGTH:DISTANCE', got {metric!r}") from None
    if (length, distance) not in cells:
        raise ValueError(f"passkey cell must be one of {', '.join(f'{a}:{b}' for a, b in cells)}, got {metric!r}")
    return cells.index((length, distance))


METRICS = ("in_range", "past_L", "rise", "gain", "kept", "lm_loss_last50", "passkey@LENGTH:DISTANCE")


def metric_per_seed(record: dict[str, Any], method: str, metric: str) -> list[float]:
    """One value per seed:

        in_range, past_L   loss (nats/char) on positions < L and L..4L-1 of the same held-out windows
        rise               past_L - in_range
        gain               bigram in_range - in_range: what the model gained over a count bigram
        kept               (bigram past_L - past_L) / gain: the share of that gain left past L
        lm_loss_last50     the training LM loss, mean of the last 50 LM batches
        passkey@N:D        share of passkey samples with all digits right, length N, key D characters back
    """
    _check_method(record, method)
    rows = record["results"]["results"][method]
    if metric in ("in_range", "past_L", "lm_loss_last50"):
        return [row[metric] for row in rows]
    if metric == "rise":
        return [round(row["past_L"] - row["in_range"], 4) for row in rows]
    if metric == "gain":
        return [round(bigram(record) - row["in_range"], 4) for row in rows]
    if metric == "kept":
        return [round((bigram(record, "past_L") - row["past_L"]) / (bigram(record) - row["in_range"]), 4)
                for row in rows]
    if metric.startswith("passkey@"):
        i = _cell(record, metric)
        return [row["passkey"][i] for row in rows]
    raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")


def comparisons(record: dict[str, Any], metric: str, against: str = "rope") -> dict[str, dict[str, Any]]:
    """Paired per-seed differences (method - `against`) of `metric`, same seeds and text."""
    ref = metric_per_seed(record, against, metric)
    return {m: paired(metric_per_seed(record, m, metric), ref) for m in record["results"]["methods"] if m != against}


def _value_of(record: dict[str, Any]):  # type: ignore[no-untyped-def]
    def value_of(claim: dict[str, Any], side: str) -> list[float]:
        return metric_per_seed(record, claim[side], claim["metric"])
    return value_of


def decided_claims(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's registered claims (its config's "claims"), decided by claims.decide (Holm over all)."""
    return decide(record["config"].get("claims", []), _value_of(record))


def _claim_label(c: dict[str, Any]) -> str:
    metric = c["metric"].replace("passkey@", "passkey at ").replace(":", ", key ") + (" back" if "@" in c["metric"] else "")
    return f"{LABELS[c['a']]} − {'0' if c['b'] is None else LABELS[c['b']]}, {metric}"


def claims_table(record: dict[str, Any]) -> str:
    """The registered claims, each decided by the extended rule, Holm-corrected as one family (markdown)."""
    return rows_table(decided_claims(record), 3, _claim_label)


def beats_4gram(record: dict[str, Any]) -> dict[str, list[int]]:
    """Per method, the seeds whose in-range loss is below the count 4-gram model's on the same windows."""
    four = record["results"]["baselines"]["ngram"]["4"]["in_range"]
    return {m: [row["seed"] for row in record["results"]["results"][m] if row["in_range"] < four]
            for m in record["results"]["methods"]}


def baseline_table(record: dict[str, Any]) -> str:
    """The count n-gram models beside the trained ones on the same windows: loss in range and past L, and for
    each model its gain over the bigram and the share of that gain kept past L (mean ± sd over seeds)."""
    r = record["results"]
    w = 15
    head = f"{'model':<27}{'loss < L':>{w}}{'loss L..4L':>{w}}{'gain on 2-gram':>{w + 1}}{'kept past L':>{w}}"
    lines = [head, "-" * len(head)]
    for n, b in r["baselines"]["ngram"].items():
        lines.append(f"{'count ' + n + '-gram':<27}{b['in_range']:>{w}.3f}{b['past_L']:>{w}.3f}{'':>{w + 1}}{'':>{w}}")
    for m in r["methods"]:
        cells = [pm(mean_sd(metric_per_seed(record, m, k)), 3) for k in ("in_range", "past_L", "gain")]
        cells.append(pm(mean_sd(metric_per_seed(record, m, "kept")), 2))
        lines.append(f"{LABELS[m]:<27}{cells[0]:>{w}}{cells[1]:>{w}}{cells[2]:>{w + 1}}{cells[3]:>{w}}")
    return "\n".join(lines)


def format_table(record: dict[str, Any]) -> str:
    """Per method, mean ± sd over seeds: in-range loss, loss past L, final training LM loss, and passkey accuracy
    in each (length, distance) cell."""
    r = record["results"]
    w = 14
    cells = [f"{n}:{d}" for n, d in r["passkey_cells"]]
    head = f"{'method':<27}{'loss < L':>{w}}{'loss L..4L':>{w}}{'train loss':>{w}}"
    lines = [findings([f"trained at L = {r['train_len']} on passkey + text, window {r['window']} for local layers; "
                       f"loss in nats/char on the same held-out text; train loss: last 50 LM batches; mean ± sd "
                       f"over seeds {r['seeds']} ({record['budget']} budget)"]), head, "-" * len(head)]
    for m in r["methods"]:
        c = [pm(mean_sd(metric_per_seed(record, m, k)), 3) for k in ("in_range", "past_L", "lm_loss_last50")]
        lines.append(f"{LABELS[m]:<27}" + "".join(f"{v:>{w}}" for v in c))
    lines += ["", findings([f"passkey: share of {r['n_eval']} samples with all 5 digits right (chance 1e-5), per "
                            "cell 'length:distance', the key's first digit that many characters before the "
                            "answer's"]), f"{'method':<27}" + "".join(f"{c:>8}" for c in cells), "-" * (27 + 8 * len(cells))]
    for m in r["methods"]:
        means = [mean_sd(metric_per_seed(record, m, f"passkey@{c}"))["mean"] for c in cells]
        lines.append(f"{LABELS[m]:<27}" + "".join(f"{v:>8.2f}" for v in means))
    return "\n".join(lines)


def seed_splits(record: dict[str, Any], threshold: float = 0.5) -> list[str]:
    """Every (method, passkey cell) where seeds split around `threshold`: 'RoPE at 64:43: seeds 1, 3 below 0.5
    (0.12, 0.03), seeds 0, 2, 4 at or above', the cases a mean hides."""
    r = record["results"]
    out = []
    for m in r["methods"]:
        for n, d in r["passkey_cells"]:
            v = metric_per_seed(record, m, f"passkey@{n}:{d}")
            sp = seed_split(v, threshold)
            if sp["split"]:
                seeds = [r["seeds"][i] for i in sp["below"]]
                vals = ", ".join(f"{v[i]:.2f}" for i in sp["below"])
                rest = ", ".join(str(r["seeds"][i]) for i in sp["above"])
                out.append(f"{LABELS[m]} at {n}:{d}: seed{'s' if len(seeds) > 1 else ''} "
                           f"{', '.join(map(str, seeds))} below {threshold:g} ({vals}); seeds {rest} at or above")
    return out


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


def _ladder(record: dict[str, Any], method: str) -> torch.Tensor:
    d_head = record["config"]["model"]["d_model"] // record["config"]["model"]["n_heads"]
    base = record["results"]["settings"][method].get("rope", {}).get("base", 10000.0)
    return frequency_ladder(d_head, base)


def dropped_angles(record: dict[str, Any], method: str) -> list[dict[str, float]]:
    """For a p-RoPE method: each dropped pair's frequency in the full ladder and the angle it would turn over
    the trained positions (L - 1) and over 4L - 1, in radians: how much rotation p-RoPE takes away."""
    _check_method(record, method)
    p = record["results"]["settings"][method].get("rope", {}).get("drop_lowest")
    if not p:
        raise ValueError(f"method {method!r} drops no frequencies (no drop_lowest in its settings)")
    theta = _ladder(record, method)
    k = round(p * theta.shape[0])
    L, T = record["results"]["train_len"], max(record["results"]["lengths"])
    return [{"pair": i, "theta": theta[i].item(), "over_L": (L - 1) * theta[i].item(), "over_4L": (T - 1) * theta[i].item()}
            for i in range(theta.shape[0] - k, theta.shape[0])]


def slow_share(record: dict[str, Any], method: str = "rope", which: str = "q", cut: float = 4.0) -> list[float]:
    """Per layer, the mean norm (over seeds) of the slow pairs, those whose wavelength 2 pi / theta_i exceeds
    cut * L (theta_i of the method's own full-width ladder; cut 4: less than a quarter turn over the trained
    length), divided by that of the faster pairs: below 1, the slow pairs carry less of q (or k)."""
    if method not in PROBED:
        raise ValueError(f"method must be one of {', '.join(PROBED)} (the probed models), got {method!r}")
    if which not in ("q", "k"):
        raise ValueError(f"which must be 'q' or 'k', got {which!r}")
    if isinstance(cut, bool) or not isinstance(cut, (int, float)) or not cut > 0:
        raise ValueError(f"cut must be a positive number (a multiple of L), got {cut!r}")
    r = record["results"]
    slow = (2 * torch.pi / _ladder(record, method)) > cut * r["train_len"]  # (d_head/2,) bool
    if not bool(slow.any()) or bool(slow.all()):
        raise ValueError(f"method {method!r} has no split into slow and fast pairs at cut {cut:g} L = "
                         f"{cut * r['train_len']:g}")
    t = torch.tensor([row["pair_norms"][which] for row in r["results"][method]], dtype=torch.float64).mean(0)
    return [round((t[i, slow].mean() / t[i, ~slow].mean()).item(), 3) for i in range(t.shape[0])]


def comparison_table(record: dict[str, Any]) -> str:
    """Markdown: every method against RoPE on the loss metrics, paired mean difference [95% t-interval] and the
    95% verdict, uncorrected: a description of the record, not the family of claims (claims_table)."""
    metrics = [("in_range", "loss < L"), ("rise", "rise past L"), ("gain", "gain on 2-gram"), ("kept", "share kept")]
    lines = ["| method − RoPE | " + " | ".join(label for _, label in metrics) + " |", "|---|" + "---|" * len(metrics)]
    for m in record["results"]["methods"]:
        if m == "rope":
            continue
        cells = []
        for key, _ in metrics:
            d = comparisons(record, key)[m]
            verdict = "cannot tell" if d["verdict"] == "indistinguishable" else d["verdict"]
            cells.append(f"{pm(d, 2 if key == 'kept' else 3)} {verdict}")
        lines.append(f"| {LABELS[m]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _names(methods: list[str]) -> str:
    names = [LABELS[m] for m in methods]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def verdict_line(record: dict[str, Any]) -> str:
    """The first thing the page says: whether the models beat a count 4-gram in range (if not, every verdict is
    about under-trained models), then how many registered claims survive Holm's correction."""
    r = record["results"]
    if len(r["seeds"]) < 2:
        return "This record has one seed, so it supports no verdict (the quick budget is a smoke test)."
    four = r["baselines"]["ngram"]["4"]["in_range"]
    beat = beats_4gram(record)
    n = len(r["seeds"])
    every = [m for m in r["methods"] if len(beat[m]) == n]
    some = [m for m in r["methods"] if 0 < len(beat[m]) < n]
    never = [m for m in r["methods"] if not beat[m]]
    if not every and not some:
        first = (f"No model beats a count 4-gram model in range ({four:.3f} nats/char) on any seed: these are "
                 f"under-trained models ({record['config']['train']['steps']} steps on 2 cores), and every verdict "
                 "below is about models at this budget, not about the designs at convergence.")
    elif not some and not never:
        first = f"Every model beats a count 4-gram model in range ({four:.3f} nats/char) on every seed."
    elif not some and len(never) < len(every):
        first = (f"In range, every model but {_names(never)} beats a count 4-gram model ({four:.3f} nats/char) on every "
                 f"seed, and {_names(never)} on none, so {'its' if len(never) == 1 else 'their'} verdicts are about a "
                 "model that has not learned enough at this budget.")
    else:
        first = f"In range, {_names(every) if every else 'no model'} beat{'s' if len(every) == 1 else ''} a count 4-gram " \
                f"model ({four:.3f} nats/char) on every seed"
        if some:
            first += f", {_names(some)} on some"
        if never:
            first += f"; {_names(never)} on none, so {'its' if len(never) == 1 else 'their'} verdicts are about a model " \
                     "that has not learned enough at this budget"
        first += "."
    return first + " " + survivors_line(decided_claims(record))


def headline(record: dict[str, Any]) -> str:
    """The verdict, then each registered claim's measured difference and verdict after Holm."""
    lines = [verdict_line(record)]
    if len(record["results"]["seeds"]) >= 2:
        for row in decided_claims(record):
            c = row["claim"]
            state = ("holds" if row["survives"] else "holds before Holm only" if row["holds"] else
                     "cannot tell" if row["outcome"] == "cannot tell" else row["outcome"])
            lines.append(f"{c['id']}: {_claim_label(c)} {pm(row['diff'], 3)}: {state}")
    return findings(lines)
