"""Experiment 3 (exercise 3): extending a RoPE model's context, without and with fine-tuning, over seeds.

Per seed: train a tiny RoPE GPT at L = 128. Copy its weights into models that differ only in the
RoPE scaling (`copy_with_rope`): unmodified, linear position interpolation (s = 4), NTK-aware
(s = 4), dynamic NTK, YaRN with the paper's band limits (beta_fast 32, beta_slow 1) and YaRN with
band limits chosen for this model's L and d_head (`TUNED_BETAS`). Score each on the same held-out
windows of 512 characters, at 128, 256 and 512 (the first T characters of each window, so every
length sees the same documents): mean loss, loss on positions >= L (tail), and on positions < L
(head) of the same windows. Then fine-tune each briefly at 512 (`FINETUNE`, the same batches for
every variant) and score again. A model trained from scratch at 512 for as many steps on as many
characters as the base model (a quarter as many windows per batch) is the "trained at the target
length" reference.

Dynamic NTK uses factor = 1 in the Hugging Face formula, i.e. NTK scaling with s = n / L for a
sequence of n tokens, so on a 512-character window it is exactly NTK with s = 4: its fine-tune at
512 is the NTK fine-tune (the same frequencies, batches and steps give the same weights), and the
record reuses it rather than computing it twice.
"""

from __future__ import annotations

from typing import Any

import torch

from mlbook.experiments.claims import claims_table as rows_table, split_seeds_line
from mlbook.experiments.claims import decide, survivors_line
from mlbook.experiments.common import (
    findings,
    ngram_baselines,
    wrap_text,
    CORPUS,
    FINETUNE,
    TUNED_BETAS,
    Timer,
    binned,
    build_gpt,
    copy_with_rope,
    last_mean,
    mean_sd,
    nested_windows,
    paired,
    per_position_loss,
    pm,
    seeds_of,
    train_lm,
    unigram_loss,
)
from mlbook.experiments.data import corpus_tokens, split_tokens
from mlbook.experiments.registry import register
from mlbook.experiments.train import TrainConfig
from mlbook.transformer.models import GPT
from mlbook.transformer.rope_scaling import yarn_bands

__all__ = ["VARIANTS", "LABELS", "SHORT", "TUNED_BETAS", "FINETUNE", "variant_model", "variant_metrics", "summary",
           "format_table", "band_table", "paired_at", "verdict_line", "claims_markdown", "headline", "CLAIMS",
           "CLAIMS_REGISTERED", "AFTER_DATA_MARGIN", "claim_values", "decided_claims", "registered_claims_table",
           "claims_verdict", "seed_splits_line", "ngram_levels", "baseline_table", "beats_4gram"]

# RoPE options per variant; "original_max_len" is filled in with the trained length.
VARIANTS: dict[str, dict[str, Any]] = {
    "none": {},
    "linear": {"scaling": "linear", "factor": 4.0},
    "ntk": {"scaling": "ntk", "factor": 4.0},
    "dynamic": {"scaling": "dynamic", "factor": 1.0},
    "yarn": {"scaling": "yarn", "factor": 4.0},
    "yarn_tuned": {"scaling": "yarn", "factor": 4.0, **TUNED_BETAS},
}
LABELS: dict[str, str] = {
    "none": "unmodified",
    "linear": "linear PI, s=4",
    "ntk": "NTK-aware, s=4",
    "dynamic": "dynamic NTK",
    "yarn": "YaRN, s=4, betas 32/1",
    "yarn_tuned": "YaRN, s=4, betas 4/1",
    "reference": "trained at 512",
}

# The page's claims (section 2.6 and its exercise 3), decided by claims.decide with Holm over the family. A side
# reads "variant/phase@T": the variant's `metric` in phase "before" or "after" the fine-tune, at length T given as
# a multiple of L ("1L", "2L", "4L"); b None compares a with 0. Attached on 2026-12-04, after the full record
# existed, from the comparisons the page already reported (the record says so); the one "no difference" claim
# (PI is flat across lengths) uses a margin chosen after the data, Experiment 7's registered 0.05 nats/char.
AFTER_DATA_MARGIN = 0.05  # nats/char
CLAIMS_REGISTERED = ("after the run: attached on 2026-12-04 from the comparisons the page already reported; not "
                     "registered before the data. Changed: 'PI without fine-tuning is stable at every length' is now "
                     "an equivalence claim with a margin of 0.05 nats/char chosen after the data (the page had read "
                     "an interval); the best zero-shot setting against the reference is named (NTK-aware) instead of "
                     "picked from the data at page time.")
CLAIMS: list[dict[str, Any]] = [
    {"id": "none_degrades_2L", "a": "none/before@2L", "b": None, "metric": "tail_minus_head", "expect": "higher",
     "text": "unmodified RoPE degrades past L, at 2L", "source": "section 2.6"},
    {"id": "none_degrades_4L", "a": "none/before@4L", "b": None, "metric": "tail_minus_head", "expect": "higher",
     "text": "... at 4L", "source": "section 2.6"},
    {"id": "pi_ft_best", "a": "linear/after@4L", "b": "ntk/after@4L", "metric": "mean", "expect": "lower",
     "text": "PI with a brief fine-tune is the way to extend (beats NTK-aware fine-tuned alike)",
     "source": "Chen et al., 2023"},
    {"id": "pi_flat", "a": "linear/before@4L", "b": "linear/before@1L", "metric": "mean", "expect": "equivalent",
     "margin": AFTER_DATA_MARGIN, "text": "PI without fine-tuning is stable at every length (4L against L)",
     "source": "section 2.6"},
    {"id": "pi_cost", "a": "linear/before@1L", "b": "none/before@1L", "metric": "mean", "expect": "higher",
     "text": "... at a cost at L itself", "source": "Chen et al., 2023"},
    {"id": "ntk_long", "a": "ntk/before@4L", "b": "none/before@4L", "metric": "mean", "expect": "lower",
     "text": "NTK-aware beats unmodified RoPE at long lengths", "source": "bloc97, 2023"},
    {"id": "yarn_beats_pi", "a": "yarn_tuned/before@1L", "b": "linear/before@1L", "metric": "mean", "expect": "lower",
     "text": "YaRN keeps the fast pairs: a better PI at L, no fine-tuning", "source": "Peng et al., 2023"},
    {"id": "none_match_ref", "a": "ntk/before@4L", "b": "reference/after@4L", "metric": "mean", "expect": "higher",
     "text": "without fine-tuning none matches a model trained at 4L (the best zero-shot setting, NTK-aware)",
     "source": "section 2.6"},
    {"id": "ft_closes", "a": "linear/after@4L", "b": "linear/before@4L", "metric": "mean", "expect": "lower",
     "text": "a brief fine-tune closes much of PI's gap", "source": "Chen et al., 2023"},
]


def _claims_for(variants: list[str], reference: bool) -> list[dict[str, Any]]:
    have = set(variants) | ({"reference"} if reference else set())
    return [c for c in CLAIMS if all(side is None or side.split("/")[0] in have for side in (c["a"], c["b"]))]


_QUICK = {
    "model": {"d_model": 48, "n_heads": 4, "n_layers": 2},
    "train_len": 64,
    "eval_lengths": [64, 128, 256],
    "train": {"steps": 200, "batch_size": 16, "lr": 5e-3, "warmup_steps": 20},
    "finetune_len": 256,
    "finetune": FINETUNE["quick"],
    "variants": ["none", "linear", "ntk", "yarn_tuned"],
    "reference": False,
    "eval_windows": 16,
    "eval_seed": 1000,
    "seeds": [0],
}
_QUICK["claims"] = _claims_for(_QUICK["variants"], _QUICK["reference"])
_FULL = {
    "model": {"d_model": 48, "n_heads": 4, "n_layers": 2},
    "train_len": 128,
    "eval_lengths": [128, 256, 512],
    "train": {"steps": 400, "batch_size": 16, "lr": 4e-3, "warmup_steps": 30},
    "finetune_len": 512,
    "finetune": FINETUNE["full"],
    "variants": list(VARIANTS),
    "reference": True,  # trained from scratch at 512 for as many steps on as many characters as the base model
    "eval_windows": 32,
    "eval_seed": 1000,
    "seeds": [0, 1, 2, 3, 4],
}
_FULL["claims"] = _claims_for(_FULL["variants"], _FULL["reference"])


def variant_model(base: GPT, variant: str) -> GPT:
    """A copy of `base` (a trained RoPE GPT) whose RoPE uses the scaling of `variant`."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; valid: {', '.join(VARIANTS)}")
    return copy_with_rope(base, VARIANTS[variant])


def _measure(model: GPT, x: torch.Tensor, y: torch.Tensor, lengths: list[int], L: int,
             device: torch.device) -> dict[str, Any]:
    """Loss at each length on the first T characters of the same windows (one forward per length:
    dynamic NTK depends on the length), and the binned per-position curve at the longest."""
    out: dict[str, Any] = {"mean": [], "tail": [], "head": []}
    curve = None
    for T in lengths:
        curve = per_position_loss(model, x[:, :T], y[:, :T], device)  # (T,)
        out["mean"].append(round(curve.mean().item(), 4))
        out["head"].append(round(curve[:L].mean().item(), 4))
        out["tail"].append(round(curve[L:].mean().item(), 4) if T > L else None)
    out["curve"] = binned(curve, max(1, lengths[-1] // 64))  # type: ignore[arg-type]
    return out


@register(
    "context_extension",
    title="Context extension of a RoPE model trained at L: unmodified, PI, NTK, dynamic NTK and YaRN "
          "at L, 2L and 4L on the same text, before and after a brief fine-tune at 4L",
    claim="Unmodified RoPE degrades sharply past 128 and is unusable by 512; linear interpolation is stable at all "
          "lengths but costs a little at 128; NTK sits between; without fine-tuning none matches a model trained "
          "at the target length; a brief fine-tune closes much of the gap.",
    configs={"quick": _QUICK, "full": _FULL},
)
def run(cfg: dict[str, Any], device: torch.device, progress: bool) -> dict[str, Any]:
    train_part, val_part = split_tokens(corpus_tokens())
    L, L_ft = cfg["train_len"], cfg["finetune_len"]
    lengths = cfg["eval_lengths"]
    x, y = nested_windows(val_part, cfg["eval_windows"], max(lengths), cfg["eval_seed"])  # (N, 4L)
    seeds = seeds_of(cfg)
    d_head = cfg["model"]["d_model"] // cfg["model"]["n_heads"]
    out: dict[str, Any] = {
        "corpus": CORPUS, "train_len": L, "eval_lengths": lengths, "finetune_len": L_ft, "seeds": seeds,
        "eval_windows": cfg["eval_windows"], "unigram": unigram_loss(), "d_head": d_head,
        "finetune": cfg["finetune"],
        "finetune_tokens": cfg["finetune"]["steps"] * cfg["finetune"]["batch_size"] * L_ft,
        "train_tokens": cfg["train"]["steps"] * cfg["train"]["batch_size"] * L,
        "bands": {"yarn": yarn_bands(d_head, 10000.0, L, 32.0, 1.0).as_record(),
                  "yarn_tuned": yarn_bands(d_head, 10000.0, L, TUNED_BETAS["beta_fast"],
                                            TUNED_BETAS["beta_slow"]).as_record()},
        "base": [], "variants": {v: {"label": LABELS[v], "rope": None, "per_seed": []} for v in cfg["variants"]},
        "seconds_per_seed": [],
    }
    if cfg["reference"]:
        out["reference"] = {"label": LABELS["reference"], "per_seed": []}
    for seed in seeds:
        clock = Timer()
        base = build_gpt("rope", cfg["model"], L, seed)
        tcfg = TrainConfig(seed=seed, **cfg["train"])
        log = train_lm(base, train_part, L, tcfg, device, f"context_extension/base seed {seed}", progress)
        out["base"].append({"seed": seed, "params": base.num_params(), "train_seconds": round(log["seconds"], 1),
                            "train_loss_last50": round(last_mean(log["loss"]), 4)})
        fcfg = TrainConfig(seed=seed + 1000, **cfg["finetune"])  # the same batches for every variant
        tuned: dict[str, dict[str, torch.Tensor]] = {}
        for name in cfg["variants"]:
            model = variant_model(base, name)
            before = _measure(model, x, y, lengths, L, device)
            shares = "ntk" if name == "dynamic" and "ntk" in tuned and L_ft == 4 * L else None
            if shares:  # on L_ft = 4L windows dynamic NTK *is* NTK with s = 4: the same fine-tune
                model.load_state_dict(tuned[shares])
                ft_seconds = 0.0
            else:
                ft = train_lm(model, train_part, L_ft, fcfg, device, f"context_extension/{name} seed {seed}", progress)
                ft_seconds = round(ft["seconds"], 1)
                tuned[name] = {k: v.detach().clone() for k, v in model.state_dict().items()}
            after = _measure(model, x, y, lengths, L, device)
            entry = out["variants"][name]
            entry["rope"] = model.config.rope
            entry["per_seed"].append({"seed": seed, "before": before, "after": after,
                                      "finetune_seconds": ft_seconds, "finetune_shared_with": shares})
        if cfg["reference"]:  # from scratch at L_ft: the base model's steps and characters, B L / L_ft windows a batch
            batch = max(1, tcfg.batch_size * L // L_ft)
            rcfg = TrainConfig(seed=seed, **{**cfg["train"], "batch_size": batch})
            steps = rcfg.steps
            ref = build_gpt("rope", cfg["model"], L_ft, seed)
            rlog = train_lm(ref, train_part, L_ft, rcfg, device, f"context_extension/reference seed {seed}", progress)
            out["reference"].update(steps=steps, batch_size=rcfg.batch_size, train_len=L_ft)
            out["reference"]["per_seed"].append({"seed": seed, "train_seconds": round(rlog["seconds"], 1),
                                                 "after": _measure(ref, x, y, lengths, L, device)})
        out["seconds_per_seed"].append(clock())
    return out


# -- derived numbers --------------------------------------------------------------------------


def variant_metrics(record: dict[str, Any], name: str, phase: str, metric: str) -> list[list[float | None]]:
    """[length][seed] values of `metric` (mean, tail, head, tail_minus_head) for a variant (or
    "reference", phase "after") in `phase` ("before" or "after" the fine-tune)."""
    if phase not in ("before", "after"):
        raise ValueError(f"phase must be 'before' or 'after', got {phase!r}")
    if metric not in ("mean", "tail", "head", "tail_minus_head"):
        raise ValueError(f"metric must be mean, tail, head or tail_minus_head, got {metric!r}")
    r = record["results"]
    entry = r["reference"] if name == "reference" else r["variants"][name]
    rows = []
    for i in range(len(r["eval_lengths"])):
        vals = []
        for s in entry["per_seed"]:
            m = s[phase]
            if metric == "tail_minus_head":
                vals.append(None if m["tail"][i] is None else m["tail"][i] - m["head"][i])
            else:
                vals.append(m[metric][i])
        rows.append(vals)
    return rows


def summary(record: dict[str, Any], phase: str, metric: str = "mean") -> dict[str, list[dict[str, Any]]]:
    """{variant: [mean_sd over seeds at each length]} for `phase` and `metric`."""
    r = record["results"]
    names = list(r["variants"]) + (["reference"] if "reference" in r and phase == "after" else [])
    return {n: [mean_sd(v) for v in variant_metrics(record, n, phase, metric)] for n in names}


def format_table(record: dict[str, Any], metric: str = "mean", phase: str = "before") -> str:
    """Mean ± sd over seeds at each length, one row per variant, for one phase: "before" or "after"
    the fine-tune (the model trained at the target length is listed with "after")."""
    if metric not in ("mean", "tail", "tail_minus_head"):
        raise ValueError(f"metric must be 'mean', 'tail' or 'tail_minus_head', got {metric!r}")
    if phase not in ("before", "after"):
        raise ValueError(f"phase must be 'before' or 'after', got {phase!r}")
    r = record["results"]
    L = r["train_len"]
    idx = [i for i, T in enumerate(r["eval_lengths"]) if metric == "mean" or T > L]
    stats = summary(record, phase, metric)
    w = 17
    what = {"mean": "all positions", "tail": f"positions {L}.. only",
            "tail_minus_head": f"positions {L}.. minus positions 0..{L - 1} of the same windows"}[metric]
    when = "without fine-tuning" if phase == "before" else (
        f"after {r['finetune']['steps']} fine-tuning steps at {r['finetune_len']}")
    lines = [wrap_text(f"{when}: loss in nats/char over {what}; mean ± sd over seeds {r['seeds']}; trained at {L} "
                       f"({record['budget']} budget)"),
             f"{'variant':<24}" + "".join(f"{'@' + str(r['eval_lengths'][i]):>{w}}" for i in idx)]
    lines.append("-" * len(lines[-1]))
    for name, st in stats.items():
        label = r["reference"]["label"] if name == "reference" else r["variants"][name]["label"]
        lines.append(f"{label:<24}" + "".join(f"{pm(st[i]):>{w}}" for i in idx))
    if metric == "mean":
        lines.append(f"unigram (letter frequencies, no context): {r['unigram']:.3f}")
    return "\n".join(lines)


def band_table(record: dict[str, Any]) -> str:
    """Which pairs each YaRN setting keeps, blends and interpolates, with each pair's turns within L."""
    r = record["results"]
    lines = [wrap_text(f"d_head = {r['d_head']}, L = {r['train_len']}: turns of pair i within L = "
                       + ", ".join(f"{t:.2f}" for t in r["bands"]["yarn"]["turns"]))]
    for name, b in r["bands"].items():
        lines.append(f"{LABELS[name]:<22} ramp w_i = {b['ramp']}")
        lines.append(f"{'':<22} keep {b['keep']}, blend {b['blend']}, interpolate {b['interpolate']}")
    return "\n".join(lines)


def paired_at(record: dict[str, Any], a: str, b: str, phase: str, metric: str, length_index: int = -1) -> dict[str, Any]:
    """Per-seed difference a - b of `metric` at one length (default: the longest), same seeds and windows."""
    pa = variant_metrics(record, a, "after" if a == "reference" else phase, metric)[length_index]
    pb = variant_metrics(record, b, "after" if b == "reference" else phase, metric)[length_index]
    return paired(pa, pb)


# Short names for sentences
SHORT: dict[str, str] = {"none": "unmodified RoPE", "linear": "PI", "ntk": "NTK-aware", "dynamic": "dynamic NTK",
                         "yarn": "YaRN (32/1)", "yarn_tuned": "YaRN (4/1)", "reference": "the model trained at 4L"}


def _ranked_after(record: dict[str, Any]) -> tuple[str, list[str], dict[str, dict[str, Any]]]:
    """After the fine-tune, at the longest length: the variant with the lowest mean loss, the
    variants indistinguishable from it by the verdict rule, and every variant's paired difference
    against it. Dynamic NTK is NTK itself at 4L (the record reuses its fine-tune), so it is left out."""
    r = record["results"]
    names = [n for n in r["variants"] if n != "dynamic"]
    means = {n: summary(record, "after")[n][-1]["mean"] for n in names}
    best = min(names, key=lambda n: means[n])
    diffs = {n: paired_at(record, n, best, "after", "mean") for n in names if n != best}
    tied = [n for n, d in diffs.items() if d["verdict"] == "indistinguishable"]
    return best, tied, diffs


def verdict_line(record: dict[str, Any]) -> str:
    """One sentence, by the verdict rule: the best setting after the brief fine-tune at 4L (how
    position interpolation is used), those indistinguishable from it, where PI ends, and PI's cost
    at the trained length without fine-tuning."""
    r = record["results"]
    L, T = r["train_len"], r["eval_lengths"][-1]
    best, tied, diffs = _ranked_after(record)
    steps = r["finetune"]["steps"]
    text = ""
    if record["config"].get("eval_seed") is not None:  # the count baseline regenerates the record's windows
        levels = ngram_levels(record)
        if not any(beats_4gram(record, levels).values()):
            text = (f"No setting here beats a count 4-gram in range on the same windows "
                    f"({levels['4']['in_range']:.3f} nats/char): these are under-trained models, and the verdicts are "
                    f"about this budget. ")
    text += f"After {steps} fine-tuning steps at {T}, the way position interpolation is used, {SHORT[best]} has the lowest loss at {T}"
    if tied:
        text += " (" + ", ".join(SHORT[n] for n in tied) + " indistinguishable from it)"
    if "linear" in diffs:
        text += f" and PI ends {pm(diffs['linear'], 2)} nats/char above it"
    pi_cost = paired_at(record, "linear", "none", "before", "mean", 0)
    text += f"; without fine-tuning PI costs {pm(pi_cost, 2)} nats/char at the trained length {L} itself"
    longer = [(i, T_i) for i, T_i in enumerate(r["eval_lengths"]) if T_i > L]
    worse = [T_i for i, T_i in longer if _tmh_vs_zero(record, "none", "before", i)["verdict"] == "higher"]
    if worse:
        fine = [T_i for _, T_i in longer if T_i < worse[0]]
        # Shorter lengths are not called fine: a "no degradation" verdict is one the Holm-gated rule does not give.
        text += f", and unmodified RoPE degrades at {worse[0]}" + (
            f" (at {', '.join(map(str, fine))} we cannot tell after Holm's correction)" if fine else "")
    else:
        text += ", and unmodified RoPE shows no degradation past L at these lengths"
    rows = decided_claims(record)
    if rows:
        text += f"; {sum(x['survives'] for x in rows)} of the page's {len(rows)} claims survive Holm's correction"
    return text + "."


def _tmh_vs_zero(record: dict[str, Any], name: str, phase: str, i: int) -> dict[str, Any]:
    vals = variant_metrics(record, name, phase, "tail_minus_head")[i]
    return paired(vals, [0.0 if v is not None else None for v in vals])


def claims_markdown(record: dict[str, Any]) -> str:
    """A markdown table: each claim of section 2.6 with the paired difference that decides it
    [95% interval] and the verdict by the rule, all from the record (loss in nats/char)."""
    r = record["results"]
    L, T = r["train_len"], r["eval_lengths"]
    steps = r["finetune"]["steps"]
    best, tied, diffs = _ranked_after(record)

    def word(d: dict[str, Any], want: str) -> str:
        v = d["verdict"]
        return "agrees" if v == want else ("indistinguishable" if v == "indistinguishable" else "disagrees")

    rows = ["| claim | measured: paired difference [95% CI] | verdict |", "|---|---|---|"]
    d2, d4 = _tmh_vs_zero(record, "none", "before", 1), _tmh_vs_zero(record, "none", "before", -1)
    rows.append(f"| unmodified RoPE degrades past L | tail − head at {T[1]}: {pm(d2, 2)}; at {T[-1]}: {pm(d4, 2)} | "
                f"at {T[1]}: {word(d2, 'higher')}; at {T[-1]}: {word(d4, 'higher')} |")
    pi_after = diffs.get("linear")
    if pi_after is not None:
        rows.append(f"| PI with a brief fine-tune ({steps} steps at {T[-1]}) is the way to use it | PI − {SHORT[best]} after: "
                    f"{pm(pi_after, 2)} | {'PI is not the best here' if pi_after['verdict'] == 'higher' else 'PI is among the best'} |")
    flat = paired([a - b for a, b in zip(variant_metrics(record, "linear", "before", "mean")[-1],
                                         variant_metrics(record, "linear", "before", "mean")[0])],
                  [0.0] * len(r["seeds"]))
    rows.append(f"| PI without fine-tuning is stable at every length | PI at {T[-1]} − PI at {L}: {pm(flat, 2)} | "
                f"{'agrees: flat' if flat['verdict'] != 'higher' else 'nearly: a small rise, but distinguishable from 0'} |")
    cost = paired_at(record, "linear", "none", "before", "mean", 0)
    rows.append(f"| ... at a small cost at {L} | PI − unmodified at {L}: {pm(cost, 2)} | "
                f"{'a cost, of this size' if cost['verdict'] == 'higher' else 'no cost shown'} |")
    ntk_short = paired_at(record, "ntk", "none", "before", "mean", 0)
    ntk_long = paired_at(record, "ntk", "none", "before", "mean", -1)
    rows.append(f"| NTK-aware sits between: near unmodified at short lengths, better at long ones | NTK − unmodified at "
                f"{L}: {pm(ntk_short, 2)}; at {T[-1]}: {pm(ntk_long, 2)} | at {T[-1]}: {word(ntk_long, 'lower')} |")
    y_pi = paired_at(record, "yarn_tuned", "linear", "before", "mean", 0)
    rows.append(f"| YaRN keeps the fast pairs: a better PI | YaRN (4/1) − PI at {L}, no fine-tuning: {pm(y_pi, 2)} | "
                f"{word(y_pi, 'lower')} |")
    if "reference" in r:
        zs = min((n for n in r["variants"] if n != "dynamic"),
                 key=lambda n: summary(record, "before")[n][-1]["mean"])
        vs_ref = paired_at(record, zs, "reference", "before", "mean", -1)
        rows.append(f"| without fine-tuning none matches a model trained at {T[-1]} | best without fine-tuning "
                    f"({SHORT[zs]}) − trained at {T[-1]} (untuned batches): {pm(vs_ref, 2)} | "
                    f"{'agrees' if vs_ref['verdict'] == 'higher' else 'not against this reference (see below)'} |")
    gain = paired([a - b for a, b in zip(variant_metrics(record, "linear", "after", "mean")[-1],
                                         variant_metrics(record, "linear", "before", "mean")[-1])],
                  [0.0] * len(r["seeds"]))
    rows.append(f"| a brief fine-tune closes much of the gap | PI after − PI before at {T[-1]}: {pm(gain, 2)} | "
                f"{word(gain, 'lower')} |")
    return "\n".join(rows)


def headline(record: dict[str, Any]) -> str:
    """The verdict sentence, then the numbers: after the fine-tune (the setting PI is used in),
    each setting against the best [95% interval]; then without fine-tuning, at 4L and at L."""
    r = record["results"]
    L, T = r["train_len"], r["eval_lengths"][-1]
    b, a = summary(record, "before"), summary(record, "after")
    n = len(r["seeds"])
    best, _, diffs = _ranked_after(record)

    def at(stat: dict[str, list[dict[str, Any]]], name: str, i: int) -> str:
        return pm(stat[name][i], 2) if name in stat else "n/a"

    order = ["ntk", "yarn_tuned", "yarn", "none", "linear"]
    lines = [verdict_line(record),
             f"After {r['finetune']['steps']} fine-tuning steps at {T}, mean loss at {T} ({n} seeds, mean ± sd, "
             f"nats/char): " + ", ".join(f"{SHORT[m]} {at(a, m, -1)}" for m in order if m in a)
             + (f"; a model trained at {T} from scratch with untuned batches {at(a, 'reference', -1)}" if "reference" in a
                else "") + ".",
             f"Paired against {SHORT[best]} after the fine-tune [95% CI]: "
             + ", ".join(f"{SHORT[m]} {pm(d, 2)}" for m, d in diffs.items()) + ".",
             f"Without fine-tuning, at {T}: " + ", ".join(f"{SHORT[m]} {at(b, m, -1)}" for m in order if m in b)
             + f"; at {L} itself PI costs {pm(paired_at(record, 'linear', 'none', 'before', 'mean', 0), 2)} against "
             f"unmodified RoPE, NTK {pm(paired_at(record, 'ntk', 'none', 'before', 'mean', 0), 2)}."]
    return findings(lines)


# -- the registered claims, decided by the extended rule, and the count n-gram baselines ----------------


def claim_values(record: dict[str, Any], claim: dict[str, Any], side: str) -> list[float | None]:
    """One value per seed for claim[side] ("variant/phase@kL"): claim["metric"] of that variant and phase at k x L."""
    r = record["results"]
    spec = claim[side]
    try:
        name, rest = spec.split("/")
        phase, factor = rest.split("@")
        T = int(factor.rstrip("L")) * r["train_len"]
    except (ValueError, AttributeError):
        raise ValueError(f"claim {claim['id']!r}: {side} must read 'variant/phase@kL', got {spec!r}") from None
    names = list(r["variants"]) + (["reference"] if "reference" in r else [])
    if name not in names:
        raise ValueError(f"claim {claim['id']!r}: variant must be one of {', '.join(names)}, got {name!r}")
    if T not in r["eval_lengths"]:
        raise ValueError(f"claim {claim['id']!r}: length must be one of {r['eval_lengths']}, got {T} ({factor})")
    return variant_metrics(record, name, phase, claim["metric"])[r["eval_lengths"].index(T)]


def decided_claims(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's claims (its config's "claims"), decided by claims.decide: Holm over the whole family."""
    return decide(record["config"].get("claims", []), lambda c, side: claim_values(record, c, side))


def _side_label(spec: str | None) -> str:
    if spec is None:
        return "0"
    name, rest = spec.split("/")
    phase, factor = rest.split("@")
    when = "" if name == "reference" else (" zero-shot" if phase == "before" else " fine-tuned")
    return f"{SHORT[name]}{when} at {factor}"


def _claim_label(c: dict[str, Any]) -> str:
    what = {"mean": "mean loss", "tail_minus_head": "tail − head"}.get(c["metric"], c["metric"])
    return f"{_side_label(c['a'])} − {_side_label(c['b'])}, {what}"


def registered_claims_table(record: dict[str, Any]) -> str:
    """Markdown: every claim with its mean difference [95%] (90% against the margin for the equivalence claim) and
    its verdict after Holm's correction over the page's family."""
    return rows_table(decided_claims(record), 3, _claim_label)


def claims_verdict(record: dict[str, Any]) -> str:
    """Which claims survive Holm's correction over the page's family."""
    rows = decided_claims(record)
    split = seed_splits_line(record, rows, 3)
    return survivors_line(rows) + (" " + split if split else "")

def seed_splits_line(record: dict[str, Any], rows: list[dict[str, Any]] | None = None, digits: int = 3) -> str:
    """The claims the rule cannot decide whose per-seed differences have both signs, with their seeds
    (claims.split_seeds_line)."""
    return split_seeds_line(decided_claims(record) if rows is None else rows, record["results"]["seeds"], digits)



def ngram_levels(record: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Count n-gram models (n = 1..4, add-0.1, fit on the training split) on the record's own evaluation windows
    (its config's eval_windows and eval_seed, 4L long): loss on positions < L and L..4L-1. Computed at page time
    (common.ngram_baselines): the record predates them."""
    cfg, r = record["config"], record["results"]
    train_part, val_part = split_tokens(corpus_tokens())
    x, y = nested_windows(val_part, cfg["eval_windows"], max(r["eval_lengths"]), cfg["eval_seed"])
    return ngram_baselines(train_part, x, y, r["train_len"])


def _gain_kept(record: dict[str, Any], name: str, phase: str, levels: dict[str, dict[str, float]]
               ) -> tuple[list[float], list[float]]:
    head = variant_metrics(record, name, phase, "head")[-1]
    tail = variant_metrics(record, name, phase, "tail")[-1]
    gain = [levels["2"]["in_range"] - h for h in head]
    # a share of a gain is defined only where there is a gain (zero-shot PI is worse than the bigram in range)
    return gain, [(levels["2"]["past_L"] - t) / g if g > 0 else None for t, g in zip(tail, gain)]


def baseline_table(record: dict[str, Any], levels: dict[str, dict[str, float]] | None = None) -> str:
    """The count n-gram models beside every setting on the same windows, zero-shot and after the fine-tune: loss on
    positions < L and L..4L-1, the gain over the bigram in range, and the share of that gain kept past L
    ((bigram past L - loss past L) / gain; n/a where the gain is not positive), mean ± sd over seeds."""
    levels = levels or ngram_levels(record)
    r = record["results"]
    L, T = r["train_len"], max(r["eval_lengths"])
    w = 15
    head = f"{'model':<34}{'loss < ' + str(L):>{w}}{f'loss {L}..{T - 1}':>{w}}{'gain on 2-gram':>{w + 1}}{'kept past L':>{w}}"
    lines = [head, "-" * len(head)]
    for n, b in levels.items():
        lines.append(f"{'count ' + n + '-gram':<34}{b['in_range']:>{w}.3f}{b['past_L']:>{w}.3f}")
    rows = [(n, "before") for n in r["variants"]] + [(n, "after") for n in r["variants"]]
    rows += [("reference", "after")] if "reference" in r else []
    for name, phase in rows:
        label = (r["reference"]["label"] if name == "reference" else
                 f"{r['variants'][name]['label']}, {'zero-shot' if phase == 'before' else 'fine-tuned'}")
        gain, kept = _gain_kept(record, name, phase, levels)
        cells = [pm(mean_sd(variant_metrics(record, name, phase, "head")[-1])),
                 pm(mean_sd(variant_metrics(record, name, phase, "tail")[-1])), pm(mean_sd(gain)),
                 pm(mean_sd(kept), 2)]
        lines.append(f"{label:<34}{cells[0]:>{w}}{cells[1]:>{w}}{cells[2]:>{w + 1}}{cells[3]:>{w}}")
    return "\n".join(lines)


def beats_4gram(record: dict[str, Any], levels: dict[str, dict[str, float]] | None = None) -> dict[str, list[int]]:
    """Per setting (zero-shot; the reference after training), the seeds whose loss on positions < L is below the
    count 4-gram model's on the same windows."""
    levels = levels or ngram_levels(record)
    r = record["results"]
    four = levels["4"]["in_range"]
    names = list(r["variants"]) + (["reference"] if "reference" in r else [])
    out = {}
    for n in names:
        head = variant_metrics(record, n, "after" if n == "reference" else "before", "head")[-1]
        out[n] = [s for s, h in zip(r["seeds"], head) if h < four]
    return out
