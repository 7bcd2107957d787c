"""Experiment 6: passkey retrieval against context length and key depth, beside perplexity, over seeds.

Per seed, two tiny GPTs are trained at length L on a mix of passkey batches (even steps) and
corpus language-modelling batches (odd steps), one with RoPE and one with ALiBi. The RoPE weights
are then extended to 4L in four ways, each with the fixed factor s = 4 of the context-extension
experiment:

    rope        no scaling (extrapolation past L)
    rope_pi     position interpolation, theta_i / s (Chen et al., 2023)
    rope_ntk    NTK-aware scaling, base s^(d/(d-2)) times larger (bloc97, 2023): page 22's best by loss
    rope_yarn   YaRN with the paper's band limits beta_fast = 32, beta_slow = 1, page 22's better setting

and ALiBi runs as trained. Every method is scored as it is (zero-shot) and after a fine-tune at 4L on
the same mix as training (every `passkey_every`-th batch passkey samples at 4L, the others corpus text;
a text-only fine-tune would let the retrieval skill decay and decide the outcome by design), with two
recipes: the registered one ("finetune": 90 steps at learning rate 3e-4) and, as a check that the
verdicts are not properties of one recipe, the context-extension experiment's (common.FINETUNE, 30
steps at 1e-3), which the earlier design used and which cut unscaled RoPE's retrieval at L. The
claims, with their metrics and margins, are registered in the config ("claims") before the run.

Retrieval accuracy is teacher-forced on the key's digits only (the targets PasskeyTask leaves
unmasked): "all digits" counts a sample right when every digit's argmax is right, "per digit"
averages over digits. The test samples (keys, filler phases) are the same for every method and
seed. Perplexity is the corpus loss on the first T characters of the same held-out windows.
"""

from __future__ import annotations

import random
import textwrap
from typing import Any

import torch

from mlbook.experiments.claims import claims_table as rows_table
from mlbook.experiments.claims import decide, survivors_line
from mlbook.experiments.common import (
    findings,
    FINETUNE,
    Timer,
    build_gpt,
    copy_with_rope,
    mean_sd,
    nested_windows,
    ngram_baselines,
    paired,
    per_position_loss,
    pm,
    seed_split,
    seeds_of,
)
from mlbook.experiments.data import PasskeyTask, corpus_tokens, digit_accuracy, passkey_and_text, split_tokens
from mlbook.experiments.registry import register
from mlbook.experiments.train import TrainConfig, train
from mlbook.transformer.models import GPT

__all__ = ["METHODS", "METHOD_ROPE", "LABELS", "CLAIMS", "FINETUNE_RECIPE", "ACC_MARGIN", "RETRIEVES", "method_model", "digit_accuracy", "passkey_accuracy",
           "grid", "summary", "format_table", "finetune_mix", "accuracy_per_seed", "loss_per_seed", "paired_accuracy",
           "failures_at_train_len", "failures_text", "length_change", "pattern", "comparisons", "comparison_table",
           "claims_table", "patterns_table", "decided_claims", "recipe_check_table", "seed_splits", "baseline_line",
           "verdict_line", "headline"]

METHODS: tuple[str, ...] = ("rope", "rope_pi", "rope_ntk", "rope_yarn", "alibi")
# RoPE options of each RoPE method for the extension factor s (filled in by method_model)
METHOD_ROPE: dict[str, dict[str, Any]] = {
    "rope": {},
    "rope_pi": {"scaling": "linear"},
    "rope_ntk": {"scaling": "ntk"},
    "rope_yarn": {"scaling": "yarn"},  # the paper's beta_fast = 32, beta_slow = 1
}
LABELS: dict[str, str] = {"rope": "RoPE (no scaling)", "rope_pi": "RoPE + PI", "rope_ntk": "RoPE + NTK-aware",
                          "rope_yarn": "RoPE + YaRN", "alibi": "ALiBi"}
SHORT: dict[str, str] = {"rope": "RoPE", "rope_pi": "RoPE + PI", "rope_ntk": "RoPE + NTK", "rope_yarn": "RoPE + YaRN",
                         "alibi": "ALiBi"}
PHASES: tuple[str, ...] = ("zero_shot", "finetuned")
# the registered fine-tune and the check recipe (the context-extension experiment's)
FINETUNE_RECIPE: dict[str, Any] = {"steps": 90, "batch_size": 8, "lr": 3e-4, "warmup_steps": 9}
ACC_MARGIN = 0.10  # share of samples: the equivalence margin for retrieval, fixed before the run
# Claims registered before the full run. Each side is (phase, method, measure); measure "acc@N" is the
# all-digits accuracy at length N averaged over depths, "acc@N:dK" at the K-th depth only, "loss@N" the
# corpus loss on the first N characters. "lower"/"higher": the paired 95% interval of a - b excludes 0;
# "equivalent": its 90% interval lies inside +-margin. Holm-corrected as one family on the page.
CLAIMS: list[dict[str, Any]] = [
    {"id": "rope_fails_past_L", "a": ["zero_shot", "rope", "acc@512"], "b": ["zero_shot", "rope", "acc@128"],
     "expect": "lower", "text": "unscaled RoPE loses retrieval past L", "source": "Press et al., 2022; Chen et al., 2023"},
    {"id": "alibi_recency", "a": ["zero_shot", "alibi", "acc@512:d0"], "b": ["zero_shot", "alibi", "acc@512:d4"],
     "expect": "lower", "text": "ALiBi's recency prior loses far keys at 4L (key at depth 0 against depth 1)",
     "source": "Press et al., 2022"},
    {"id": "alibi_loss_falls", "a": ["zero_shot", "alibi", "loss@512"], "b": ["zero_shot", "alibi", "loss@128"],
     "expect": "lower", "text": "ALiBi's corpus loss is lower over 4L than over L (perplexity looks fine)",
     "source": "Press et al., 2022"},
    {"id": "alibi_over_rope", "a": ["zero_shot", "alibi", "acc@512"], "b": ["zero_shot", "rope", "acc@512"],
     "expect": "higher", "text": "ALiBi retrieves at 4L where unscaled RoPE does not", "source": "Press et al., 2022"},
    {"id": "ntk_zero_shot", "a": ["zero_shot", "rope_ntk", "acc@512"], "b": ["zero_shot", "rope_pi", "acc@512"],
     "expect": "higher", "text": "NTK-aware scaling retrieves at 4L without fine-tuning better than PI",
     "source": "bloc97, 2023; Peng et al., 2023"},
    {"id": "yarn_keeps_local", "a": ["zero_shot", "rope_yarn", "loss@128"], "b": ["zero_shot", "rope_pi", "loss@128"],
     "expect": "lower", "text": "YaRN keeps the loss at L that PI loses", "source": "Peng et al., 2023"},
    {"id": "pi_needs_finetune", "a": ["finetuned", "rope_pi", "acc@512"], "b": ["zero_shot", "rope_pi", "acc@512"],
     "expect": "higher", "text": "PI needs its fine-tune to retrieve at 4L", "source": "Chen et al., 2023"},
    {"id": "yarn_over_pi", "a": ["finetuned", "rope_yarn", "acc@512"], "b": ["finetuned", "rope_pi", "acc@512"],
     "expect": "higher", "text": "after the fine-tune YaRN retrieves at 4L better than PI", "source": "Peng et al., 2023"},
    {"id": "recipe_keeps_L", "a": ["finetuned", "rope", "acc@128"], "b": ["zero_shot", "rope", "acc@128"],
     "expect": "equivalent", "margin": ACC_MARGIN,
     "text": "the fine-tune keeps unscaled RoPE's retrieval at L (the recipe does not erase the skill)",
     "source": "recipe check"},
]

_QUICK = {
    "schemes": ["rope"],  # the quick budget trains no ALiBi model
    "train_len": 64,
    "model": {"d_model": 48, "n_heads": 4, "n_layers": 2},
    # 1200 steps: retrieval at L is learned (all digits right on every test sample); at 400 or 800 it is not
    "train": {"steps": 1200, "batch_size": 16, "lr": 4e-3, "warmup_steps": 30},
    "passkey_every": 2,  # every 2nd step is a passkey batch, the others corpus text
    "factor": 4,
    "finetune": FINETUNE["quick"],
    "finetune_check": None,
    "finetune_data": "passkey and text, as in training",
    "lengths": [64, 128, 256],
    "depths": [0.0, 0.5, 1.0],
    "n_eval": 16,
    "loss_windows": 8,
    "eval_seed": 1000,
    "seeds": [0],
    "claims": [],
}
_FULL = {
    "schemes": ["rope", "alibi"],
    "train_len": 128,
    "model": {"d_model": 64, "n_heads": 4, "n_layers": 2},
    "train": {"steps": 2400, "batch_size": 16, "lr": 3e-3, "warmup_steps": 100},
    "passkey_every": 2,
    "factor": 4,
    "finetune": FINETUNE_RECIPE,
    "finetune_check": FINETUNE["full"],
    "finetune_data": "passkey and text, as in training",
    "lengths": [128, 256, 384, 512],
    "depths": [0.0, 0.25, 0.5, 0.75, 1.0],
    "n_eval": 32,
    "loss_windows": 16,
    "eval_seed": 1000,
    "seeds": [0, 1, 2, 3, 4],
    "claims": CLAIMS,
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
    check = cfg.get("finetune_check")
    out: dict[str, Any] = {"train_len": L, "factor": s, "finetune_len": L_ft, "finetune": cfg["finetune"],
                           "finetune_check": check, "results_check": {m: [] for m in methods} if check else None,
                           "baselines": {"ngram": ngram_baselines(train_part, lm[0], lm[1], L)},
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
            batches = passkey_and_text(task, train_part, L, B, cfg["passkey_every"], random.Random(seed))
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
            ft = train(tuned, passkey_and_text(task, train_part, L_ft, cfg["finetune"]["batch_size"],
                                             cfg["passkey_every"], random.Random(seed + 1000)),
                       TrainConfig(seed=seed + 1000, **cfg["finetune"]), device,
                       desc=f"passkey/{method} fine-tune seed {seed}", progress=progress)
            out["results"]["zero_shot"][method].append({"seed": seed, **zero})
            out["results"]["finetuned"][method].append({"seed": seed, **_score(tuned, tests, lm, cfg, device),
                                                        "finetune_seconds": round(ft["seconds"], 1),
                                                        "finetune_loss_last10": round(sum(ft["loss"][-10:]) / 10, 4)})
            if check:  # the same start, the check recipe
                other = method_model(method, trained, s) if method != "alibi" else build_gpt("alibi", cfg["model"], L, seed)
                if method == "alibi":
                    other.load_state_dict(trained["alibi"].state_dict())
                ck = train(other, passkey_and_text(task, train_part, L_ft, check["batch_size"], cfg["passkey_every"],
                                                   random.Random(seed + 1000)),
                           TrainConfig(seed=seed + 1000, **check), device,
                           desc=f"passkey/{method} check fine-tune seed {seed}", progress=progress)
                out["results_check"][method].append({"seed": seed, **_score(other, tests, lm, cfg, device),
                                                     "finetune_seconds": round(ck["seconds"], 1),
                                                     "finetune_loss_last10": round(sum(ck["loss"][-10:]) / 10, 4)})
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
        f"after {r['finetune']['steps']} fine-tuning steps at {r['finetune_len']} on {finetune_mix(record)}")
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


# A seed "retrieves" at a length when at least this share of its test samples, averaged over
# depths, has every digit right (guessing scores 1e-5).
RETRIEVES = 0.5


def finetune_mix(record: dict[str, Any]) -> str:
    """What the brief fine-tune at 4L trained on: the record's "finetune_data", or "corpus text only"
    for a record made before that key existed (the earlier design, whose fine-tune had no passkeys)."""
    return record["results"].get("finetune_data", "corpus text only")


def accuracy_per_seed(record: dict[str, Any], phase: str, method: str, length_index: int) -> list[float]:
    """All-digits accuracy averaged over depths at lengths[length_index], one value per seed."""
    seeds = record["results"]["results"][phase][method]
    return [sum(s["accuracy"][length_index]) / len(s["accuracy"][length_index]) for s in seeds]


def loss_per_seed(record: dict[str, Any], phase: str, method: str, length_index: int) -> list[float]:
    """Corpus loss (nats/char) on the first lengths[length_index] characters, one value per seed."""
    return [s["loss"][length_index] for s in record["results"]["results"][phase][method]]


def paired_accuracy(record: dict[str, Any], a: tuple[str, str], b: tuple[str, str], length_index: int = -1
                    ) -> dict[str, Any]:
    """Per-seed difference of depth-averaged accuracy at one length between (phase, method) a and b."""
    return paired(accuracy_per_seed(record, *a, length_index), accuracy_per_seed(record, *b, length_index))


def failures_at_train_len(record: dict[str, Any]) -> dict[str, dict[str, list[int]]]:
    """phase -> method -> the seeds that do not retrieve at the trained length L (depth-averaged
    all-digits accuracy below RETRIEVES): a method that fails at L says nothing about extension."""
    r = record["results"]
    out: dict[str, dict[str, list[int]]] = {}
    for phase in r["phases"]:
        out[phase] = {}
        for m in r["methods"]:
            seeds = [s["seed"] for s in r["results"][phase][m]]
            acc = accuracy_per_seed(record, phase, m, 0)
            out[phase][m] = [seed for seed, a in zip(seeds, acc) if a < RETRIEVES]
    return out


def length_change(record: dict[str, Any], phase: str, method: str) -> dict[str, dict[str, Any]]:
    """From L to the longest length: paired per-seed changes (at 4L minus at L) of the depth-averaged
    accuracy and of the corpus loss, each a `common.paired` dict."""
    return {"accuracy": paired(accuracy_per_seed(record, phase, method, -1), accuracy_per_seed(record, phase, method, 0)),
            "loss": paired(loss_per_seed(record, phase, method, -1), loss_per_seed(record, phase, method, 0))}


def pattern(record: dict[str, Any], phase: str, method: str) -> str:
    """Which case (phase, method) is in, from L to 4L under common.VERDICT_RULE:

        "fails at L"                 no seed retrieves at L (see RETRIEVES): nothing to extend
        "flat loss, lower retrieval" accuracy lower, loss not higher: the case perplexity misses
        "lower retrieval, higher loss" accuracy lower and the loss rises with it: perplexity warns
        "retrieval not lower"        the accuracy interval does not put 4L below L
    """
    r = record["results"]
    if len(failures_at_train_len(record)[phase][method]) == len(r["results"][phase][method]):
        return "fails at L"
    d = length_change(record, phase, method)
    if d["accuracy"]["verdict"] != "lower":
        return "retrieval not lower"
    return "lower retrieval, higher loss" if d["loss"]["verdict"] == "higher" else "flat loss, lower retrieval"


_PHASE = {"zero_shot": "zero-shot", "finetuned": "fine-tuned"}


def comparisons(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Every comparison the page reports, as `common.paired` dicts (per-seed differences a - b,
    mean, 95% t-interval, verdict) with "group", "a", "b", "measure" added. Groups:

        length     per phase and method, at 4L minus at L: accuracy, corpus loss
        methods    per phase, at 4L: YaRN - PI, YaRN - RoPE, PI - RoPE, ALiBi - YaRN, ALiBi - RoPE
        finetune   per method, fine-tuned minus zero-shot: accuracy at 4L and at L, loss at 4L
        depth      per phase and method, at 4L: accuracy with the key at depth 0 minus at depth 1
    """
    r = record["results"]
    L, T = r["lengths"][0], r["lengths"][-1]
    methods = r["methods"]
    out: list[dict[str, Any]] = []

    def add(group: str, a: str, b: str, measure: str, d: dict[str, Any]) -> None:
        out.append({"group": group, "a": a, "b": b, "measure": measure, **d})

    for phase in r["phases"]:
        for m in methods:
            d = length_change(record, phase, m)
            add("length", f"{SHORT[m]} {_PHASE[phase]} at {T}", f"at {L}", "accuracy", d["accuracy"])
            add("length", f"{SHORT[m]} {_PHASE[phase]} at {T}", f"at {L}", "corpus loss", d["loss"])
    pairs = [(a, b) for a, b in (("rope_yarn", "rope_pi"), ("rope_ntk", "rope_pi"), ("rope_yarn", "rope_ntk"),
                                 ("rope_yarn", "rope"), ("rope_ntk", "rope"), ("rope_pi", "rope"),
                                 ("alibi", "rope_yarn"), ("alibi", "rope")) if a in methods and b in methods]
    for phase in r["phases"]:
        for a, b in pairs:
            add("methods", f"{SHORT[a]} {_PHASE[phase]} at {T}", SHORT[b], "accuracy",
                paired_accuracy(record, (phase, a), (phase, b)))
    for m in methods:
        add("finetune", f"{SHORT[m]} fine-tuned at {T}", "zero-shot", "accuracy",
            paired_accuracy(record, ("finetuned", m), ("zero_shot", m)))
        add("finetune", f"{SHORT[m]} fine-tuned at {L}", "zero-shot", "accuracy",
            paired_accuracy(record, ("finetuned", m), ("zero_shot", m), 0))
        add("finetune", f"{SHORT[m]} fine-tuned at {T}", "zero-shot", "corpus loss",
            paired(loss_per_seed(record, "finetuned", m, -1), loss_per_seed(record, "zero_shot", m, -1)))
    for phase in r["phases"]:
        for m in methods:
            seeds = r["results"][phase][m]
            add("depth", f"{SHORT[m]} {_PHASE[phase]} at {T}, key at depth {r['depths'][0]:g}",
                f"at depth {r['depths'][-1]:g}", "accuracy",
                paired([s["accuracy"][-1][0] for s in seeds], [s["accuracy"][-1][-1] for s in seeds]))
    return out


def comparison_table(record: dict[str, Any], group: str | None = None, digits: int = 2) -> str:
    """The comparisons (of one `group`, or all) as a markdown table: a − b, the measure, the mean
    paired difference with its 95% t-interval (common.pm) and the verdict (common.VERDICT_RULE)."""
    groups = ("length", "methods", "finetune", "depth")
    if group is not None and group not in groups:
        raise ValueError(f"group must be one of {', '.join(groups)} or None, got {group!r}")
    rows = ["| a − b | measure | mean difference [95% interval] | verdict |", "|---|---|---|---|"]
    for c in comparisons(record):
        if group is None or c["group"] == group:
            shown = max(digits, 3) if c["measure"] == "corpus loss" else digits  # a loss interval near 0 needs 3
            rows.append(f"| {c['a']} − {c['b']} | {c['measure']} | {pm(c, shown)} | {c['verdict']} |")
    return "\n".join(rows)


def _join(items: list[str]) -> str:
    return "" if not items else items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


_NAME = {"rope": "unscaled RoPE", "rope_pi": "RoPE + PI", "rope_ntk": "RoPE + NTK-aware", "rope_yarn": "RoPE + YaRN",
         "alibi": "ALiBi"}


def _who(record: dict[str, Any], cases: list[tuple[str, str]]) -> str:
    """'RoPE + YaRN and ALiBi, with and without the fine-tune' from (phase, method) pairs."""
    r = record["results"]
    groups: dict[str, list[str]] = {}
    for m in r["methods"]:
        phases = [p for p in r["phases"] if (p, m) in cases]
        if phases:
            when = ("with and without the fine-tune" if len(phases) == len(r["phases"]) else
                    "without fine-tuning" if phases == ["zero_shot"] else "after the fine-tune")
            groups.setdefault(when, []).append(_NAME[m])
    return _join([f"{_join(names)}, {when}" for when, names in groups.items()])


def verdict_line(record: dict[str, Any]) -> str:
    """One sentence: per phase, which methods lose retrieval from L to 4L as their loss rises, which
    lose it while the loss rise cannot be told from zero (the case perplexity misses), which show no drop the rule can
    detect, and which retrieve on no seed even at L, by `pattern` (paired 95% intervals,
    common.VERDICT_RULE); with fewer than 2 seeds, no verdict."""
    r = record["results"]
    L, T, k = r["lengths"][0], r["lengths"][-1], len(r["seeds"])
    if k < 2:
        return ("One seed gives no 95% interval, so this run supports no verdict: it is a smoke test of the code, "
                "and the comparisons come from the full-budget record.")
    when = {"zero_shot": "without fine-tuning", "finetuned": f"after the fine-tune at {T} ({finetune_mix(record)})"}
    verbs = {  # pattern -> (verb for one method, verb for several)
        "lower retrieval, higher loss": ("loses retrieval as its loss rises", "lose retrieval as their loss rises"),
        "flat loss, lower retrieval": ("loses retrieval while its loss rise cannot be told from zero",
                                       "lose retrieval while their loss rise cannot be told from zero"),
        "retrieval not lower": ("shows no drop the rule can detect", "show no drop the rule can detect"),
        "fails at L": (f"retrieves on no seed even at {L}", f"retrieve on no seed even at {L}"),
    }
    parts, flat_any = [], False
    for phase in r["phases"]:
        groups: dict[str, list[str]] = {}
        for m in r["methods"]:
            groups.setdefault(pattern(record, phase, m), []).append(_NAME[m])
        flat_any |= "flat loss, lower retrieval" in groups
        bits = [f"{_join(names)} {verbs[case][len(names) > 1]}" for case, names in
                sorted(groups.items(), key=lambda kv: list(verbs).index(kv[0]))]
        parts.append(f"{when[phase]}, " + _join(bits))
    text = f"From the trained length {L} to {T} ({k} seeds, paired 95% intervals): " + "; ".join(parts)
    if not flat_any:
        text += "; in no case does retrieval fall while the corpus loss rise cannot be told from zero"
    text += "."
    b = r.get("baselines", {}).get("ngram")
    if b:  # whether the models learned enough to answer, said first
        four = b["4"]["in_range"]
        loss_at_l = {m: _side(record, ["zero_shot", m, f"loss@{L}"]) for m in r["methods"]}
        every = [m for m in r["methods"] if all(x < four for x in loss_at_l[m])]
        never = [m for m in r["methods"] if not any(x < four for x in loss_at_l[m])]
        some = [m for m in r["methods"] if m not in every and m not in never]
        if not every and not some:
            first = (f"No model beats a count 4-gram model at L ({four:.3f} nats/char) on any seed: these are "
                     "under-trained models, and the verdicts are about this budget. ")
        else:
            first = f"Without fine-tuning, {_join([SHORT[m] for m in every]) or 'no setting'} beat a count 4-gram model at L " \
                    f"({four:.3f} nats/char) on every seed"
            if some:
                first += f", {_join([SHORT[m] for m in some])} on some"
            if never:
                first += f"; {_join([SHORT[m] for m in never])} on none"
            first += ". "
        text = first + text
    if record["config"].get("claims"):
        text += " " + survivors_line(decided_claims(record))
    return text


def failures_text(record: dict[str, Any]) -> str:
    """The per-seed failures at L in words: 'none' or 'RoPE + YaRN zero-shot seed 2; ...'."""
    fails = failures_at_train_len(record)
    items = [f"{SHORT[m]} {_PHASE[p]} seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"
             for p, by in fails.items() for m, seeds in by.items() if seeds]
    return "; ".join(items) if items else "none"


def patterns_table(record: dict[str, Any]) -> str:
    """The patterns the page describes (flat loss with lower retrieval, and so on), what the record measured
    (paired differences, mean [95% interval], uncorrected) as a markdown table: a description beside the
    registered claims (`claims_table`), which decide."""
    r = record["results"]
    L, T, k = r["lengths"][0], r["lengths"][-1], len(r["seeds"])
    methods = r["methods"]
    rows = ["| claim | measured (mean difference [95% interval]) | verdict |", "|---|---|---|"]
    flat = [(p, m) for p in r["phases"] for m in methods if pattern(record, p, m) == "flat loss, lower retrieval"]
    measured = "; ".join(f"{SHORT[m]} {_PHASE[p]}, {T} − {L}: accuracy {pm(length_change(record, p, m)['accuracy'], 2)}, "
                         f"loss {pm(length_change(record, p, m)['loss'], 3)}" for p, m in flat)
    rows.append(f"| retrieval can fail while perplexity looks fine ([section 4](11_systems.ipynb)) | "
                f"{measured or 'no method and phase with a lower accuracy and a loss that is not higher'} | "
                + (f"**agrees** for {_who(record, flat)}" if flat else f"**not shown** at {k} seeds") + " |")
    d = length_change(record, "zero_shot", "rope")
    rows.append(f"| unmodified RoPE fails past $L$ | RoPE zero-shot, {T} − {L}: accuracy {pm(d['accuracy'], 2)}, loss "
                f"{pm(d['loss'], 3)} | "
                + ("**agrees**" + ("; here the loss warns too" if d["loss"]["verdict"] == "higher" else "")
                   if d["accuracy"]["verdict"] == "lower" else f"**not shown** at {k} seeds") + " |")
    if "alibi" in methods:
        depth = {c["a"]: c for c in comparisons(record) if c["group"] == "depth" and c["a"].startswith("ALiBi ")}
        far = [c for c in depth.values() if c["verdict"] == "lower"]
        measured = "; ".join(f"{c['a'].split(' at ')[0]}: {pm(c, 2)}" for c in depth.values())
        beats = paired_accuracy(record, ("zero_shot", "alibi"), ("zero_shot", "rope"))
        rows.append(f"| ALiBi's recency prior hurts retrieval from far back ([section 2.5](06_alibi.ipynb)) | at {T}, key at "
                    f"depth {r['depths'][0]:g} (farthest) − depth {r['depths'][-1]:g} (nearest): {measured} | "
                    + (f"**agrees in direction**: far keys are retrieved less ({_join([c['a'].split(' at ')[0] for c in far])})"
                       if far else f"**not shown** at {k} seeds: far and near keys indistinguishable")
                    + f"; ALiBi − unmodified RoPE at {T} zero-shot: {pm(beats, 2)} ({beats['verdict']}) |")
    if "rope_pi" in methods:
        acc = paired_accuracy(record, ("finetuned", "rope_pi"), ("zero_shot", "rope_pi"))
        loss = paired(loss_per_seed(record, "finetuned", "rope_pi", -1), loss_per_seed(record, "zero_shot", "rope_pi", -1))
        at_l = "fails at L" == pattern(record, "zero_shot", "rope_pi")
        rows.append(f"| PI needs its short fine-tune ([section 2.6](07_context_extension.ipynb)) | RoPE + PI at {T}, "
                    f"fine-tuned − zero-shot: accuracy {pm(acc, 2)}, loss {pm(loss, 2)}"
                    + (f"; zero-shot it retrieves on no seed even at {L}" if at_l else "") + " | "
                    + ("**agrees**: retrieval is higher after the fine-tune" if acc["verdict"] == "higher" else
                       f"**partly**: the fine-tune lowers the loss; retrieval {acc['verdict']}" if loss["verdict"] == "lower"
                       else f"**not shown** at {k} seeds: loss {loss['verdict']}, retrieval {acc['verdict']}")
                    + " |")
    if "rope_pi" in methods and "rope_yarn" in methods:
        loss_l = paired(loss_per_seed(record, "zero_shot", "rope_yarn", 0), loss_per_seed(record, "zero_shot", "rope_pi", 0))
        acc_t = paired_accuracy(record, ("zero_shot", "rope_yarn"), ("zero_shot", "rope_pi"))
        rows.append(f"| YaRN keeps local resolution where PI loses it ([section 2.6](07_context_extension.ipynb)) | "
                    f"zero-shot, YaRN − PI: loss at {L} {pm(loss_l, 2)}, accuracy at {T} {pm(acc_t, 2)} | "
                    + ("**agrees**: YaRN's loss at L is lower" if loss_l["verdict"] == "lower" else
                       f"**not shown** at {k} seeds: YaRN's loss at L is {loss_l['verdict']}")
                    + f"; retrieval at {T}: "
                    + ("indistinguishable at this number of seeds" if acc_t["verdict"] == "indistinguishable"
                       else f"{acc_t['verdict']} for YaRN") + " |")
    return "\n".join(rows)


def headline(record: dict[str, Any]) -> str:
    """`verdict_line`, then retrieval at L with the seeds that fail there, the changes from L to 4L,
    the methods against each other at 4L and the fine-tune's effect, each paired difference with its
    95% interval and verdict."""
    r = record["results"]
    L, T = r["lengths"][0], r["lengths"][-1]
    n = len(r["seeds"])
    methods = r["methods"]
    z = {m: summary(record, "zero_shot", m) for m in methods}

    def d(x: dict[str, Any], digits: int = 2) -> str:
        return f"{pm(x, digits)} ({x['verdict']})"

    lines = [
        f"{n} seed{'s' if n != 1 else ''}; fine-tune: {r['finetune']['steps']} steps at {r['finetune_len']} on "
        f"{finetune_mix(record)}. Retrieval at the trained length {L}, all digits right (mean ± sd), zero-shot: "
        + ", ".join(f"{SHORT[m]} {pm(z[m]['accuracy'][0], 2)}" for m in methods)
        + f". Seeds below {RETRIEVES:g} at {L}: {failures_text(record)}.",
    ]
    for phase in r["phases"]:
        ch = {m: length_change(record, phase, m) for m in methods}
        lines.append(f"{T} minus {L}, {_PHASE[phase]}, mean [95% interval]: accuracy "
                     + "; ".join(f"{SHORT[m]} {d(ch[m]['accuracy'])}" for m in methods) + "; corpus loss "
                     + "; ".join(f"{SHORT[m]} {d(ch[m]['loss'], 3)}" for m in methods) + ".")
    pairs = [(a, b) for a, b in (("rope_yarn", "rope_pi"), ("rope_ntk", "rope_pi"), ("rope_yarn", "rope"),
                                 ("alibi", "rope_yarn"), ("alibi", "rope")) if a in methods and b in methods]
    for phase in r["phases"]:
        lines.append(f"Accuracy at {T}, {_PHASE[phase]}: " + "; ".join(
            f"{SHORT[a]} − {SHORT[b]} {d(paired_accuracy(record, (phase, a), (phase, b)))}" for a, b in pairs) + ".")
    lines.append(f"Fine-tuned − zero-shot accuracy at {T}: " + "; ".join(
        f"{SHORT[m]} {d(paired_accuracy(record, ('finetuned', m), ('zero_shot', m)))}" for m in methods)
        + f"; at {L}: " + "; ".join(
        f"{SHORT[m]} {d(paired_accuracy(record, ('finetuned', m), ('zero_shot', m), 0))}" for m in methods) + ".")
    # the verdict first, as on the other experiment pages, wrapped only at spaces so that joining
    # its lines gives verdict_line back
    verdict = textwrap.fill(verdict_line(record), 78, initial_indent="- ", subsequent_indent="  ",
                            break_on_hyphens=False, break_long_words=False)
    return verdict + "\n" + findings(lines)


# -- the registered claims, the recipe check, seeds that split ----------------------------------------------


def _side(record: dict[str, Any], side: list[Any]) -> list[float]:
    """One value per seed of (phase, method, measure): phase zero_shot, finetuned or finetuned_check (the check
    recipe); measure acc@N (depth-averaged), acc@N:dK (K-th depth), loss@N."""
    phase, method, measure = side
    r = record["results"]
    if method not in r["methods"]:
        raise ValueError(f"method must be one of {', '.join(r['methods'])}, got {method!r}")
    if phase == "finetuned_check":
        if not r.get("results_check"):
            raise ValueError("this record has no check recipe (results_check)")
        rows = r["results_check"][method]
    elif phase in PHASES:
        rows = r["results"][phase][method]
    else:
        raise ValueError(f"phase must be one of {', '.join(PHASES)} or finetuned_check, got {phase!r}")
    kind, _, where = measure.partition("@")
    length, _, depth = where.partition(":")
    if kind not in ("acc", "loss") or not length.isdigit() or int(length) not in r["lengths"]:
        raise ValueError(f"measure must be acc@N, acc@N:dK or loss@N with N in {r['lengths']}, got {measure!r}")
    i = r["lengths"].index(int(length))
    if kind == "loss":
        return [row["loss"][i] for row in rows]
    if depth:
        j = int(depth.lstrip("d"))
        if not 0 <= j < len(r["depths"]):
            raise ValueError(f"depth index must be in 0..{len(r['depths']) - 1}, got {measure!r}")
        return [row["accuracy"][i][j] for row in rows]
    return [sum(row["accuracy"][i]) / len(row["accuracy"][i]) for row in rows]


def decided_claims(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's registered claims (config "claims"), decided by claims.decide, Holm over the family."""
    return decide(record["config"].get("claims", []), lambda c, which: _side(record, c[which]))


_PH = {"zero_shot": "zero-shot", "finetuned": "fine-tuned", "finetuned_check": "check fine-tune"}


def _label(c: dict[str, Any]) -> str:
    (pa, ma, xa), (pb, mb, xb) = c["a"], c["b"]
    if (pa, ma) == (pb, mb):
        return f"{SHORT[ma]} {_PH[pa]}: {xa} − {xb}"
    if xa == xb and pa == pb:
        return f"{_PH[pa]} {xa}: {SHORT[ma]} − {SHORT[mb]}"
    return f"{SHORT[ma]} {_PH[pa]} {xa} − {SHORT[mb]} {_PH[pb]} {xb}"


def claims_table(record: dict[str, Any]) -> str:
    """The registered claims, each decided by the extended rule, Holm-corrected as one family (markdown)."""
    return rows_table(decided_claims(record), 2, _label)


def recipe_check_table(record: dict[str, Any]) -> str:
    """Per method: depth-averaged accuracy at L and 4L zero-shot, after the registered fine-tune and after the
    check recipe (mean ± sd), and registered minus check at 4L (mean [95% interval]): whether a verdict about
    the fine-tune is a property of the recipe."""
    r = record["results"]
    if not r.get("results_check"):
        return "This record has no check recipe."
    L, T = r["lengths"][0], r["lengths"][-1]
    reg, chk = r["finetune"], r["finetune_check"]
    w = 13
    head = (f"{'method':<13}" + "".join(f"{h:>{w}}" for h in (f"zero {L}", f"zero {T}", f"reg. {L}", f"reg. {T}",
                                                               f"check {L}", f"check {T}")) + f"{'reg. − check @' + str(T):>26}")
    lines = [findings([f"registered fine-tune: {reg['steps']} steps at lr {reg['lr']:g}; check: {chk['steps']} steps at "
                       f"lr {chk['lr']:g}; both at {r['finetune_len']} on {finetune_mix(record)}, from the same weights "
                       f"and batches; all-digits accuracy averaged over depths, mean ± sd over seeds {r['seeds']}"]),
             head, "-" * len(head)]
    for m in r["methods"]:
        cells = [pm(mean_sd(_side(record, [p, m, f"acc@{n}"])), 2)
                 for p in ("zero_shot", "finetuned", "finetuned_check") for n in (L, T)]
        d = paired(_side(record, ["finetuned", m, f"acc@{T}"]), _side(record, ["finetuned_check", m, f"acc@{T}"]))
        lines.append(f"{SHORT[m]:<13}" + "".join(f"{c:>{w}}" for c in cells) + f"{pm(d, 3):>26}")
    return "\n".join(lines)


def seed_splits(record: dict[str, Any]) -> list[str]:
    """Every (phase, method, length) where seeds split around RETRIEVES (some retrieve, some do not), and every
    one where the farthest key (depth 0) splits: the seed-level results a mean and a t-interval hide."""
    r = record["results"]
    out = []
    phases = list(r["phases"]) + (["finetuned_check"] if r.get("results_check") else [])
    for phase in phases:
        for m in r["methods"]:
            for n in r["lengths"]:
                for measure, what in ((f"acc@{n}", "averaged over depths"), (f"acc@{n}:d0", "key at depth 0")):
                    v = _side(record, [phase, m, measure])
                    sp = seed_split(v, RETRIEVES)
                    if sp["split"]:
                        low = ", ".join(f"{r['seeds'][i]} ({v[i]:.2f})" for i in sp["below"])
                        out.append(f"{SHORT[m]} {_PH[phase]} at {n}, {what}: seeds {low} below {RETRIEVES:g}, "
                                   f"the other {len(sp['above'])} at or above")
    return out


def baseline_line(record: dict[str, Any]) -> str:
    """The count n-gram models on the record's loss windows, in range, beside each model's loss at L: which
    models beat the 4-gram, and each one's gain over the bigram."""
    r = record["results"]
    b = r.get("baselines", {}).get("ngram")
    if not b:
        return "This record predates the n-gram baselines."
    L = r["lengths"][0]
    parts = [f"count n-gram models on the same windows, positions < {L}: " +
             ", ".join(f"{n}-gram {v['in_range']:.3f}" for n, v in b.items())]
    for phase in r["phases"]:
        for m in r["methods"]:
            v = _side(record, [phase, m, f"loss@{L}"])
            beat = sum(x < b["4"]["in_range"] for x in v)
            gain = mean_sd([b["2"]["in_range"] - x for x in v])
            parts.append(f"{SHORT[m]} {_PH[phase]}: loss at {L} {pm(mean_sd(v), 3)}, gain on the bigram "
                         f"{pm(gain, 3)}, below the 4-gram on {beat} of {len(v)} seeds")
    return findings(parts)
