"""Experiment 2: length extrapolation across the positional schemes, on matched text, over seeds.

One tiny GPT per scheme and seed is trained on the stdlib help corpus at length L. Every model
is then scored on the same held-out windows of 4L characters (the same for every scheme and
seed): one forward pass gives the loss at each position, and because every model is causal the
loss at a length T <= 4L is the mean over the first T positions of those same windows. So all
lengths see the same documents, and per window the "head" (positions 0..L-1) and the "tail"
(positions L..T-1) are the same text for every scheme.

Schemes: none, sinusoidal (with the original sqrt(d_model) embedding scale), sinusoidal without
that scale (to show what it does), learned (cannot run past L: the library refuses), t5 with
Hugging Face's default max_distance = 128 (past 2L in the full budget, so its last buckets are never
trained) and t5_fit with max_distance = L (every bucket trained), rope with 4 heads of d_head 12 (6
pairs, 4 of which never complete a turn within L = 64) and rope_1head with one head of d_head 48
(24 pairs, the same parameter count), alibi. A RoPE model trained at 4L for as many steps on as many characters (batches of a quarter as
many windows) is the "trained at the target length" reference for the tail; the unigram
(letter-frequency) loss is the no-context reference.
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
    Timer,
    binned,
    build_gpt,
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

__all__ = ["SCHEMES", "LABELS", "CLAIMS", "CLAIMS_REGISTERED", "AFTER_DATA_MARGIN", "scheme_metrics", "claim_values",
           "decided_claims", "registered_claims_table", "claims_verdict", "seed_splits_line", "ngram_levels", "baseline_table",
           "beats_4gram", "summary", "format_table", "comparisons", "verdict_line", "claims_markdown", "headline", "unigram_loss", "per_position_loss", "binned"]

# name -> GPT options; "sinusoidal" is the original Transformer's (sqrt(d_model) embedding scale)
SCHEMES: dict[str, dict[str, Any]] = {
    "none": {"positional": "none"},
    "sinusoidal": {"positional": "sinusoidal", "scale_embeddings": True},
    "sinusoidal_unscaled": {"positional": "sinusoidal"},
    "learned": {"positional": "learned"},
    "t5": {"positional": "t5"},  # Hugging Face's default max_distance 128: past 2L for the full budget
    "t5_fit": {"positional": "t5", "t5_max_distance": "train_len"},  # max_distance = L: every bucket trained
    "rope": {"positional": "rope"},
    "rope_1head": {"positional": "rope", "model": {"n_heads": 1}},  # d_head = d_model: 24 pairs, not 6
    "alibi": {"positional": "alibi"},
}
# Short names for sentences (the labels above carry commas)
SHORT: dict[str, str] = {
    "none": "NoPE", "sinusoidal": "sinusoidal", "sinusoidal_unscaled": "unscaled sinusoidal", "learned": "learned",
    "t5": "T5 (max_distance 128)", "t5_fit": "T5 (max_distance L)", "rope": "RoPE", "rope_1head": "RoPE (d_head 48)",
    "alibi": "ALiBi", "reference": "RoPE trained at 4L",
}
LABELS: dict[str, str] = {
    "none": "none (NoPE)", "sinusoidal": "sinusoidal, √d scale", "sinusoidal_unscaled": "sinusoidal, unscaled",
    "learned": "learned", "t5": "T5 bias, max_dist 128", "t5_fit": "T5 bias, max_dist L", "rope": "RoPE",
    "rope_1head": "RoPE, 1 head (d_head 48)", "alibi": "ALiBi", "reference": "RoPE trained at 4L",
}

# The page's claims as the extended rule decides them (claims.decide, Holm over the family): each compares
# scheme a - scheme b on tail - head at one length T = factor x L (positions L..T-1 minus positions 0..L-1 of the
# same windows). They were attached on 2026-12-04, after the full record existed, from the comparisons the page
# already reported; the equivalence margin below was therefore chosen after the data (it is Experiment 7's
# registered margin, 5% in per-character perplexity), and the page says so.
AFTER_DATA_MARGIN = 0.05  # nats/char
CLAIMS_REGISTERED = ("after the run: attached on 2026-12-04 from the comparisons the page already reported; not "
                     "registered before the data. Changed: ALiBi's 'loses no more than trained-at-4L' is now an "
                     "equivalence claim at each longer length (96, 128, 256) with a margin of 0.05 nats/char chosen "
                     "after the data, where the page had decided it at 256 alone by an interval spanning 0.")


def _claim(cid: str, a: str, b: str, factor: float, expect: str, text: str, source: str) -> dict[str, Any]:
    c = {"id": cid, "text": text, "source": source, "expect": expect, "a": a, "b": b,
         "metric": "tail_minus_head", "factor": factor}
    if expect == "equivalent":
        c["margin"] = AFTER_DATA_MARGIN
    return c


CLAIMS: list[dict[str, Any]] = [
    _claim("rope_degrades", "rope", "reference", 4, "higher", "unmodified RoPE degrades past L", "section 2.4"),
    _claim("rope_1head_degrades", "rope_1head", "reference", 4, "higher",
           "... also with 24 pairs in one head (d_head 48)", "section 2.4"),
    _claim("alibi_beats_rope", "alibi", "rope", 4, "lower", "ALiBi loses less past L than RoPE",
           "Press et al., 2022"),
    _claim("alibi_flat_96", "alibi", "reference", 1.5, "equivalent",
           "ALiBi loses no more past L than a model trained at 4L, at 1.5L", "Press et al., 2022"),
    _claim("alibi_flat_128", "alibi", "reference", 2, "equivalent", "... at 2L", "Press et al., 2022"),
    _claim("alibi_flat_256", "alibi", "reference", 4, "equivalent", "... at 4L", "Press et al., 2022"),
    _claim("t5_worse", "t5", "reference", 4, "higher",
           "T5's bias (max_distance 128) loses more than trained-at-length", "section 2.3"),
    _claim("t5_beats_rope", "t5", "rope", 4, "lower", "... but less than RoPE", "section 2.3"),
    _claim("t5_fit_worse", "t5_fit", "reference", 4, "higher",
           "T5's bias (max_distance L) loses more than trained-at-length", "section 2.3"),
    _claim("t5_fit_beats_rope", "t5_fit", "rope", 4, "lower", "... but less than RoPE", "section 2.3"),
    _claim("sinusoidal_worse", "sinusoidal", "reference", 4, "higher",
           "a sinusoidal model does not extrapolate", "section 2.1"),
    _claim("nope_worse", "none", "reference", 4, "higher",
           "without positions the loss still rises past L (more keys to spread attention over)",
           "Wang et al., 2024"),
]


def _claims_for(schemes: list[str], reference: bool) -> list[dict[str, Any]]:
    have = set(schemes) | ({"reference"} if reference else set())
    return [c for c in CLAIMS if c["a"] in have and c["b"] in have]


_QUICK = {
    "schemes": ["none", "sinusoidal", "learned", "t5", "rope", "alibi"],
    "model": {"d_model": 48, "n_heads": 4, "n_layers": 2},
    "train_len": 32,
    "factors": [1, 1.5, 2, 4],
    "train": {"steps": 120, "batch_size": 16, "lr": 6e-3, "warmup_steps": 12},
    "reference": False,
    "eval_windows": 24,
    "eval_seed": 1000,
    "seeds": [0],
}
_QUICK["claims"] = _claims_for(_QUICK["schemes"], _QUICK["reference"])
_FULL = {
    "schemes": ["none", "sinusoidal", "learned", "t5", "t5_fit", "rope", "rope_1head", "alibi"],
    "model": {"d_model": 48, "n_heads": 4, "n_layers": 2},
    "train_len": 64,
    "factors": [1, 1.5, 2, 4],
    "train": {"steps": 400, "batch_size": 16, "lr": 4e-3, "warmup_steps": 30},
    "reference": True,  # RoPE trained at 4L for as many steps on as many characters (a quarter of the windows)
    "eval_windows": 64,
    "eval_seed": 1000,
    "seeds": [0, 1, 2, 3, 4],
}
_FULL["claims"] = _claims_for(_FULL["schemes"], _FULL["reference"])


@register(
    "extrapolation",
    title="Length extrapolation: positional schemes trained at L, evaluated on the same text at 1x, 1.5x, 2x and 4x L",
    claim="Unmodified RoPE degrades past the training length, ALiBi extrapolates, T5's relative bias generalises "
          "a little, sinusoidal degrades, and learned positions cannot run past T_max at all.",
    configs={"quick": _QUICK, "full": _FULL},
)
def run(cfg: dict[str, Any], device: torch.device, progress: bool) -> dict[str, Any]:
    train_part, val_part = split_tokens(corpus_tokens())
    L = cfg["train_len"]
    T_max = int(round(max(cfg["factors"]) * L))
    lengths = [int(round(f * L)) for f in cfg["factors"]]
    x, y = nested_windows(val_part, cfg["eval_windows"], T_max, cfg["eval_seed"])  # (N, 4L) the same for all
    seeds = seeds_of(cfg)
    names = list(cfg["schemes"]) + (["reference"] if cfg["reference"] else [])
    out: dict[str, Any] = {"corpus": CORPUS, "train_len": L, "factors": cfg["factors"], "eval_lengths": lengths,
                           "eval_windows": cfg["eval_windows"], "seeds": seeds, "unigram": unigram_loss(),
                           "schemes": {n: {"label": LABELS[n], "per_seed": []} for n in names},
                           "seconds_per_seed": []}
    for seed in seeds:
        clock = Timer()
        for name in names:
            if name == "reference":  # RoPE at 4L: the same steps and characters, so a batch of B L / 4L windows
                opts, T_train = SCHEMES["rope"], T_max
                batch = max(1, cfg["train"]["batch_size"] * L // T_max)
                tcfg = TrainConfig(seed=seed, **{**cfg["train"], "batch_size": batch})
            else:
                opts, T_train = SCHEMES[name], L
                tcfg = TrainConfig(seed=seed, **cfg["train"])
            extra = {k: (L if v == "train_len" else v) for k, v in opts.items() if k not in ("positional", "model")}
            model = build_gpt(opts["positional"], {**cfg["model"], **opts.get("model", {})}, T_train, seed, **extra)
            log = train_lm(model, train_part, T_train, tcfg, device, f"extrapolation/{name} seed {seed}", progress)
            reason = None
            try:
                curve = per_position_loss(model, x, y, device)  # (4L,)
            except ValueError as err:  # learned positions past T_max: the library refuses
                reason = str(err)
                curve = per_position_loss(model, x[:, :L], y[:, :L], device)  # (L,) what it can run
            entry = out["schemes"][name]
            entry.update(params=model.num_params(), train_len=T_train, train_steps=tcfg.steps,
                         train_batch=tcfg.batch_size)
            entry["per_seed"].append({
                "seed": seed, "curve": [round(v, 4) for v in curve.tolist()], "reason": reason,
                "train_loss_last50": round(last_mean(log["loss"]), 4), "train_seconds": round(log["seconds"], 1),
            })
        out["seconds_per_seed"].append(clock())
    return out


# -- derived numbers (all from the saved per-position curves) ---------------------------------


def _one(curve: list[float], L: int, T: int) -> dict[str, float | None]:
    if len(curve) < T:
        return {"mean": None, "tail": None, "head": None, "tail_minus_head": None}
    c = torch.tensor(curve[:T], dtype=torch.float64)
    head = c[:L].mean().item()
    tail = c[L:].mean().item() if T > L else None
    return {"mean": c.mean().item(), "tail": tail, "head": head,
            "tail_minus_head": None if tail is None else tail - head}


def scheme_metrics(record: dict[str, Any], name: str) -> dict[str, dict[str, list[float | None]]]:
    """Per length T and metric (mean, tail, head, tail_minus_head): the value for each seed.

    `mean` averages positions 0..T-1, `tail` positions L..T-1, `head` positions 0..L-1 of the
    same windows. Returns {metric: {str(T): [one value per seed]}}; None where the model cannot run."""
    r = record["results"]
    L = r["train_len"]
    out: dict[str, dict[str, list[float | None]]] = {m: {} for m in ("mean", "tail", "head", "tail_minus_head")}
    for T in r["eval_lengths"]:
        vals = [_one(s["curve"], L, T) for s in r["schemes"][name]["per_seed"]]
        for m in out:
            out[m][str(T)] = [v[m] for v in vals]
    return out


def summary(record: dict[str, Any]) -> dict[str, Any]:
    """{scheme: {metric: {str(T): mean_sd over seeds}}} for every scheme in the record."""
    return {name: {m: {T: mean_sd(v) for T, v in per_T.items()} for m, per_T in scheme_metrics(record, name).items()}
            for name in record["results"]["schemes"]}


def comparisons(record: dict[str, Any], metric: str = "tail_minus_head", against: str = "alibi") -> dict[str, Any]:
    """Paired per-seed differences (scheme - `against`) of `metric` at the longest length, same text and seeds."""
    r = record["results"]
    T = str(r["eval_lengths"][-1])
    if against not in r["schemes"]:
        raise ValueError(f"against must be one of {', '.join(r['schemes'])}, got {against!r}")
    ref = scheme_metrics(record, against)[metric][T]
    return {name: paired(scheme_metrics(record, name)[metric][T], ref)
            for name in r["schemes"] if name != against}


def format_table(record: dict[str, Any], metric: str = "tail") -> str:
    """Mean ± sd over seeds: the loss at L, then `metric` ("tail", "tail_minus_head" or "mean") at each
    longer length, one row per scheme."""
    if metric not in ("tail", "tail_minus_head", "mean"):
        raise ValueError(f"metric must be 'tail', 'tail_minus_head' or 'mean', got {metric!r}")
    r = record["results"]
    L, lengths = r["train_len"], r["eval_lengths"]
    s = summary(record)
    short = {"tail": "tail", "tail_minus_head": "tail-head", "mean": "mean"}[metric]
    cols = [f"loss@{L}"] + [f"{short}@{T}" for T in lengths[1:]]
    w = 14
    lines = [wrap_text(f"loss in nats/char, mean ± sd over seeds {r['seeds']}; the same {r['eval_windows']} held-out "
                       f"windows for every model; tail = positions {L}..T-1, head = positions 0..{L - 1} of the same "
                       f"windows ({record['budget']} budget)"),
             f"{'scheme':<22}" + "".join(f"{c:>{w}}" for c in cols)]
    lines.append("-" * len(lines[-1]))
    for name, entry in r["schemes"].items():
        m = s[name]
        cells = [m["mean"][str(L)]] + [m[metric][str(T)] for T in lengths[1:]]
        lines.append(f"{entry['label']:<22}" + "".join(f"{pm(c):>{w}}" for c in cells))
    lines.append(f"unigram (letter frequencies, no context): {r['unigram']:.3f}")
    for name, entry in r["schemes"].items():
        reason = entry["per_seed"][0]["reason"]
        if reason:
            lines.append(wrap_text(f"n/a ({name}): {reason.split(';')[0]}"))
    return "\n".join(lines)


def _label(record: dict[str, Any], name: str) -> str:
    return SHORT.get(name, record["results"]["schemes"][name]["label"])


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def verdict_line(record: dict[str, Any]) -> str:
    """One sentence from the registered claims (claims.decide, Holm over the family): first whether any model beats
    a count 4-gram in range, then which schemes lose more past L than the model trained at 4L, and ALiBi's
    comparison with that model length by length."""
    r = record["results"]
    L, T = r["train_len"], r["eval_lengths"][-1]
    if "reference" not in r["schemes"]:
        return (f"This record has no model trained at {T}, so it supports no verdict on extrapolation "
                f"(the quick budget is a smoke test).")
    levels = ngram_levels(record)
    beat = [n for n, seeds in beats_4gram(record, levels).items() if seeds]
    parts = []
    if not beat:
        parts.append(f"No model here beats a count 4-gram in range on the same windows ({levels['4']['in_range']:.3f} "
                     "nats/char): these are under-trained models, and the verdicts are about this budget. ")
    rows = {x["claim"]["id"]: x for x in decided_claims(record)}
    worse = sorted((x for x in rows.values() if x["claim"]["b"] == "reference" and x["claim"]["expect"] == "higher"
                    and x["survives"]), key=lambda x: -x["diff"]["mean"])
    parts.append(f"Trained at L = {L} and scored on the same text up to {T} (paired 95% intervals, Holm over the "
                 f"page's {len(rows)} claims)")
    if worse:
        names = [_label(record, x["claim"]["a"]) for x in worse]
        parts.append(f", {_join(names)} lose more past L than a RoPE model trained at {T}, {names[0]} most "
                     f"({pm(worse[0]['diff'], 2)} nats/char)")
    alibi = [x for i, x in rows.items() if i.startswith("alibi_flat_")]
    if alibi:
        said = []
        for x in alibi:
            o = x["outcome"]
            word = (o if x["survives"] else f"{o} before Holm's correction only") if o in ("higher", "lower") else (
                "within the after-data margin" if x["survives"] else "cannot tell at this scale")
            said.append(f"{word} at {x['claim']['factor']:g}L ({pm(x['diff'], 3)})")
        parts.append(f"; ALiBi minus the model trained at {T}, tail − head: " + ", ".join(said))
    if "learned" in r["schemes"]:
        parts.append("; learned positions cannot run past L at all")
    return "".join(parts) + "."


# Claims the book makes, each with the comparisons that decide it (against the model trained at 4L).
_CLAIMS: tuple[tuple[str, str, str], ...] = (
    ("alibi", "ALiBi extrapolates ([2.5](06_alibi.ipynb))", "flat"),
    ("rope", "unmodified RoPE degrades past L ([2.4](05_rope.ipynb))", "worse"),
    ("rope_1head", "... also with 24 pairs (d_head 48), not only 6", "worse"),
    ("t5", "T5's bias generalises a little ([2.3](04_relative_bias.ipynb)), max_distance 128", "between"),
    ("t5_fit", "... with max_distance = L, every bucket trained", "between"),
    ("sinusoidal", "a sinusoidal model does not extrapolate ([2.1](02_sinusoidal.ipynb))", "worse"),
    ("none", "no encoding: order from the causal mask alone ([1](01_why_position.ipynb))", "report"),
)


def claims_markdown(record: dict[str, Any]) -> str:
    """A markdown table: each claim, tail - head at the first longer length and at the longest
    (mean ± sd), the paired difference against the model trained at 4L with its 95% interval, and
    whether the measurement agrees, all computed from the record by the verdict rule."""
    r = record["results"]
    L, lengths = r["train_len"], r["eval_lengths"]
    T1, T = str(lengths[1]), str(lengths[-1])
    s = summary(record)
    cmp = comparisons(record, against="reference") if "reference" in r["schemes"] else {}
    rope_vs = {n: paired(scheme_metrics(record, n)["tail_minus_head"][T],
                         scheme_metrics(record, "rope")["tail_minus_head"][T])
               for n in ("t5", "t5_fit") if n in r["schemes"] and "rope" in r["schemes"]}
    rows = ["| claim | tail − head at " + T1 + " | at " + T + " | minus the model trained at " + T + " [95% CI] | verdict |",
            "|---|---|---|---|---|"]
    if "learned" in r["schemes"]:
        rows.append(f"| learned positions cannot run past $T_{{max}}$ ([2.2](03_learned.ipynb)) | refused | refused | "
                    f"— | agrees (the library refuses every length past {L}) |")
    for name, claim, expect in _CLAIMS:
        if name not in r["schemes"] or name not in cmp:
            continue
        d = cmp[name]
        v = d["verdict"]
        if expect == "flat":
            word = "agrees: indistinguishable from a model trained there" if v != "higher" else "disagrees: it loses more"
        elif expect == "worse":
            word = "agrees" if v == "higher" else "not shown: indistinguishable from the model trained there"
        elif expect == "between":
            better = rope_vs.get(name, {}).get("verdict") == "lower"
            word = ("agrees: worse than trained-at-length, better than RoPE" if v == "higher" and better
                    else "partly" if v == "higher" or better else "not shown")
        else:
            word = "loses more than trained-at-length" if v == "higher" else "indistinguishable from trained-at-length"
        rows.append(f"| {claim} | {pm(s[name]['tail_minus_head'][T1], 2)} | {pm(s[name]['tail_minus_head'][T], 2)} | "
                    f"{pm(d, 2)} | {word} |")
    return "\n".join(rows)


def headline(record: dict[str, Any]) -> str:
    """The verdict sentence, then tail - head at the longest length per scheme (mean ± sd) with the
    paired difference against the model trained there [95% interval], and the learned table's refusal."""
    r = record["results"]
    L, T = r["train_len"], r["eval_lengths"][-1]
    s = summary(record)
    n = len(r["seeds"])
    cmp = comparisons(record, against="reference") if "reference" in r["schemes"] else {}
    lines = [verdict_line(record)]
    per = []
    for name in r["schemes"]:
        if name in ("learned", "reference") or s[name]["tail_minus_head"][str(T)]["mean"] is None:
            continue
        extra = f", {pm(cmp[name], 2)} against trained-at-{T}" if name in cmp and cmp[name]["n"] else ""
        per.append(f"{_label(record, name)} {pm(s[name]['tail_minus_head'][str(T)], 2)}{extra}")
    lines.append(f"Positions past L minus positions before L at {T} ({n} seeds, mean ± sd, nats/char; paired "
                 f"difference [95% CI]): " + "; ".join(per) + ".")
    if "reference" in r["schemes"]:
        lines.append(f"The RoPE model trained at {T}: {pm(s['reference']['tail_minus_head'][str(T)], 2)}. A flat "
                     f"tail shows tolerance of long inputs, not use of the far context.")
    if "learned" in r["schemes"]:
        lines.append(f"Learned positions cannot run past T_max = {L} (the library refuses); in range they score "
                     f"{pm(s['learned']['mean'][str(L)], 2)} against RoPE's {pm(s['rope']['mean'][str(L)], 2)}.")
    return findings(lines)


# -- the registered claims, decided by the extended rule, and the count n-gram baselines ----------------


def claim_values(record: dict[str, Any], claim: dict[str, Any], side: str) -> list[float | None]:
    """One value per seed for claim[side]: the scheme's claim["metric"] at length claim["factor"] x L."""
    r = record["results"]
    name = claim[side]
    if name not in r["schemes"]:
        raise ValueError(f"claim {claim['id']!r}: {side} must be one of {', '.join(r['schemes'])}, got {name!r}")
    if claim["metric"] not in ("mean", "tail", "head", "tail_minus_head"):
        raise ValueError(f"claim {claim['id']!r}: metric must be mean, tail, head or tail_minus_head, "
                         f"got {claim['metric']!r}")
    if claim["factor"] not in r["factors"]:
        raise ValueError(f"claim {claim['id']!r}: factor must be one of {r['factors']}, got {claim['factor']!r}")
    T = int(round(claim["factor"] * r["train_len"]))
    return scheme_metrics(record, name)[claim["metric"]][str(T)]


def decided_claims(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's claims (its config's "claims"), decided by claims.decide: Holm over the whole family. A record
    made with fewer schemes than the registered config (a run with its own `schemes`) is decided on the claims
    whose schemes it has; a committed record always has them all (registry.load_result matches the config)."""
    have = record["results"]["schemes"]
    claims = [c for c in record["config"].get("claims", []) if c["a"] in have and c["b"] in have]
    return decide(claims, lambda c, side: claim_values(record, c, side))


def _claim_label(c: dict[str, Any]) -> str:
    return f"{SHORT[c['a']]} − {SHORT[c['b']]}, tail − head at {c['factor']:g}L"


def registered_claims_table(record: dict[str, Any]) -> str:
    """Markdown: every claim with its mean difference [95%] (and 90% against the margin for equivalence
    claims) and its verdict after Holm's correction over the page's family."""
    return rows_table(decided_claims(record), 3, _claim_label)


def claims_verdict(record: dict[str, Any]) -> str:
    """The survivors of the family, then ALiBi length by length."""
    rows = decided_claims(record)
    text = survivors_line(rows)
    alibi = [r for r in rows if r["claim"]["id"].startswith("alibi_flat_")]
    if alibi:
        words = []
        for r in alibi:
            o = r["outcome"]
            word = ("cannot tell at this scale" if o == "cannot tell" else
                    f"not within ±{r['claim']['margin']:g} (after-data margin)" if o == "equivalent" and not r["survives"]
                    # A direction the step-down never tested (a failed equivalence claim's one-sided interval, or
                    # a difference that does not survive Holm) is said to hold before the correction only.
                    else f"{o} before Holm's correction only" if o in ("higher", "lower") and not r["survives"]
                    else o)
            words.append(f"{word} at {r['claim']['factor']:g}L ({pm(r['diff'], 3)})")
        text += " ALiBi against the model trained at 4L, tail − head: " + "; ".join(words) + "."
    split = seed_splits_line(record, rows)
    return text + (" " + split if split else "")

def seed_splits_line(record: dict[str, Any], rows: list[dict[str, Any]] | None = None, digits: int = 3) -> str:
    """The claims the rule cannot decide whose per-seed differences have both signs, with their seeds
    (claims.split_seeds_line)."""
    return split_seeds_line(decided_claims(record) if rows is None else rows, record["results"]["seeds"], digits)



def ngram_levels(record: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Count n-gram models (n = 1..4, add-0.1, fit on the training split) on the record's own evaluation windows
    (its config's eval_windows and eval_seed, 4L long): loss on positions < L and L..4L-1 (common.ngram_baselines).
    Computed at page time: the record predates them."""
    cfg, r = record["config"], record["results"]
    train_part, val_part = split_tokens(corpus_tokens())
    L, T_max = r["train_len"], r["eval_lengths"][-1]
    x, y = nested_windows(val_part, cfg["eval_windows"], T_max, cfg["eval_seed"])
    return ngram_baselines(train_part, x, y, L)


def _gain_kept(record: dict[str, Any], name: str, levels: dict[str, dict[str, float]]) -> tuple[list, list]:
    T = str(record["results"]["eval_lengths"][-1])
    m = scheme_metrics(record, name)
    big_in, big_past = levels["2"]["in_range"], levels["2"]["past_L"]
    gain = [None if h is None else big_in - h for h in m["head"][T]]
    kept = [None if t is None or g is None else (big_past - t) / g for t, g in zip(m["tail"][T], gain)]
    return gain, kept


def baseline_table(record: dict[str, Any], levels: dict[str, dict[str, float]] | None = None) -> str:
    """The count n-gram models beside the trained ones on the same windows: loss on positions < L and L..4L-1,
    each model's gain over the bigram in range, and the share of that gain it keeps past L
    ((bigram past L - loss past L) / gain; 1 = keeps all of it), mean ± sd over seeds."""
    levels = levels or ngram_levels(record)
    r = record["results"]
    L, T = r["train_len"], r["eval_lengths"][-1]
    w = 15
    head = f"{'model':<26}{'loss < ' + str(L):>{w}}{f'loss {L}..{T - 1}':>{w}}{'gain on 2-gram':>{w + 1}}{'kept past L':>{w}}"
    lines = [head, "-" * len(head)]
    for n, b in levels.items():
        lines.append(f"{'count ' + n + '-gram':<26}{b['in_range']:>{w}.3f}{b['past_L']:>{w}.3f}")
    for name, entry in r["schemes"].items():
        m = scheme_metrics(record, name)
        gain, kept = _gain_kept(record, name, levels)
        cells = [pm(mean_sd(m["head"][str(T)] if m["head"][str(T)][0] is not None else m["mean"][str(L)])),
                 pm(mean_sd(m["tail"][str(T)])), pm(mean_sd(gain)), pm(mean_sd(kept), 2)]
        lines.append(f"{entry['label']:<26}" + f"{cells[0]:>{w}}{cells[1]:>{w}}{cells[2]:>{w + 1}}{cells[3]:>{w}}")
    return "\n".join(lines)


def beats_4gram(record: dict[str, Any], levels: dict[str, dict[str, float]] | None = None) -> dict[str, list[int]]:
    """Per scheme, the seeds whose loss on positions < L is below the count 4-gram model's on the same windows."""
    levels = levels or ngram_levels(record)
    four = levels["4"]["in_range"]
    L = record["results"]["train_len"]
    return {name: [s["seed"] for s in e["per_seed"] if sum(s["curve"][:L]) / L < four]
            for name, e in record["results"]["schemes"].items()}
