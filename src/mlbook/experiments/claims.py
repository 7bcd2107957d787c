"""Registered claims and the verdict rule that decides them, shared by every experiment page.

A claim is a dict in an experiment's config ("claims"), so the record stores it and a record made
under other claims is not reused (`registry.load_result` matches the whole config):

    id       a short name
    text     the claim in words, as the page prints it
    source   where the claim comes from (a paper, a released model, or "recipe check")
    expect   "lower" or "higher" (a - b, or a alone against 0), or "equivalent"
    margin   for "equivalent": the margin, fixed before the run, in the metric's unit
    a, b     what is compared; each experiment reads them (`value_of`)

`decide(claims, value_of)` applies the extended rule (EXTENDED_RULE) to the family: each claim's
paired differences over seeds, its 95% t-interval and two-sided p (directional claims) or its two
one-sided tests (equivalence claims), Holm's correction over the family, and the smallest difference
the design could detect. `claims_table` prints the result.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from mlbook.experiments.common import detectable_difference, holm, paired, pm, seed_split, t_test_p, tost

__all__ = ["EXPECT", "EXTENDED_RULE", "check_claims", "decide", "claims_table", "survivors_line", "split_seeds_line"]

EXPECT: tuple[str, ...] = ("lower", "higher", "equivalent")

EXTENDED_RULE = (
    "Verdict rule. Two settings are compared on the same seeds and text through their per-seed differences. "
    "\"Lower\" or \"higher\" needs the 95% t-interval of the mean difference to exclude 0. \"No difference\" "
    "needs an equivalence test: two one-sided t-tests at 5%, i.e. a 90% interval inside a margin fixed with "
    "the claim (before the run, where the page does not say otherwise). Otherwise the page writes \"cannot "
    "tell at this scale\" and gives the interval and the smallest difference the design would detect with 80% "
    "power. The claims of a page form "
    "one family, corrected with Holm's step-down method at 5%, and the page says which survive. Each claim, "
    "its metric and its margin are in the experiment's registered config, which the record stores (with a note "
    "where they were attached after the run, as on the pages whose records predate this rule); a test "
    "fails when the two differ. Where seeds split (a method working on some seeds and failing on others), "
    "the seeds are listed beside the mean.")


def check_claims(claims: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The claims, checked: ValueError naming the first bad field."""
    seen = set()
    for i, c in enumerate(claims):
        if not isinstance(c, dict):
            raise ValueError(f"claims[{i}] must be a dict, got {type(c).__name__}")
        for key in ("id", "text", "source", "expect", "a", "b"):
            if key not in c:
                raise ValueError(f"claims[{i}] ({c.get('id', '?')!r}) lacks {key!r}")
        if c["id"] in seen:
            raise ValueError(f"claims[{i}] repeats the id {c['id']!r}")
        seen.add(c["id"])
        if c["expect"] not in EXPECT:
            raise ValueError(f"claims[{i}] ({c['id']!r}) expect must be one of {', '.join(EXPECT)}, got {c['expect']!r}")
        if c["expect"] == "equivalent":
            m = c.get("margin")
            if isinstance(m, bool) or not isinstance(m, (int, float)) or not m > 0:
                raise ValueError(f"claims[{i}] ({c['id']!r}) is an equivalence claim; margin must be a positive "
                                 f"number, got {m!r}")
        elif "margin" in c:
            raise ValueError(f"claims[{i}] ({c['id']!r}) expects {c['expect']!r}; a margin belongs only to "
                             "'equivalent' claims")
    return list(claims)


ValueOf = Callable[[dict[str, Any], str], Sequence[float]]


def decide(claims: Sequence[dict[str, Any]], value_of: ValueOf, alpha: float = 0.05) -> list[dict[str, Any]]:
    """Each claim decided, the family Holm-corrected. `value_of(claim, "a")` (and "b" unless claim["b"] is
    None) gives one value per seed. Per claim: the claim, "diff" (a `common.paired` dict), "p" (two-sided t
    for lower/higher, TOST for equivalent), "tost" (equivalence claims), "detectable" (80% power), "outcome"
    ("lower", "higher", "equivalent", or "cannot tell"), "holds" (before correction), "p_holm", "significant"
    (Holm rejects the claim's null at alpha, in either direction), "survives" (holds and significant)."""
    rows = []
    for c in check_claims(claims):
        a = list(value_of(c, "a"))
        b = [0.0] * len(a) if c["b"] is None else list(value_of(c, "b"))
        d = paired(a, b)
        row: dict[str, Any] = {"claim": c, "diff": d, "detectable": detectable_difference(d["per_seed"])}
        direction = d["verdict"] if d["verdict"] in ("lower", "higher") else None
        if c["expect"] == "equivalent":
            e = tost(d["per_seed"], c["margin"])
            row.update(tost=e, p=e["p"])
            row["outcome"] = "equivalent" if e["equivalent"] else (direction or "cannot tell")
            row["holds"] = e["equivalent"]
        else:
            row.update(tost=None, p=t_test_p(d["per_seed"]))
            row["outcome"] = direction or "cannot tell"
            row["holds"] = direction == c["expect"]
        rows.append(row)
    # Holm over the whole family: "significant" is Holm's rejection of the claim's null, whatever the
    # direction; a claim holds after the correction only if it holds and is significant, and an outcome
    # against the claim is reported as contradicted only if it too is significant
    adj = holm([r["p"] for r in rows], alpha)
    for r, h in zip(rows, adj):
        r["p_holm"] = h["p_holm"]
        r["significant"] = bool(h["survives"])
        r["survives"] = bool(r["holds"] and h["survives"])
    return rows


def _measured(r: dict[str, Any], digits: int) -> str:
    d = r["diff"]
    if d["ci95"] is None:
        return pm(d, digits) + " (one seed)"
    text = pm(d, digits)
    if r["tost"] is not None and r["tost"]["ci90"] is not None:
        lo, hi = r["tost"]["ci90"]
        text += f"; 90% [{lo:.{digits}f}, {hi:.{digits}f}] vs ±{r['claim']['margin']:g}"
    return text


def _here(r: dict[str, Any], digits: int) -> str:
    c, d = r["claim"], r["diff"]
    if d["ci95"] is None:
        return "no verdict (one seed)"
    p = "" if r["p_holm"] is None else (" (Holm p < 0.001)" if r["p_holm"] < 0.001 else f" (Holm p = {r['p_holm']:.3f})")
    if r["survives"]:
        return "**holds**, survives Holm" + p
    if r["holds"]:
        return "holds before correction, **not after Holm**" + p
    det = "" if r["detectable"] is None else f"; detectable ≥ {r['detectable']:.{digits}f}"
    if c["expect"] == "equivalent":
        cert = r["tost"]["certifiable"] if r["tost"] else None
        certified = "" if cert is None else f"; the data certify ±{cert:.{digits}f} at best"
        if r["outcome"] in ("lower", "higher"):
            return (f"**does not hold**: not within ±{c['margin']:g}, and the 95% interval says {r['outcome']} "
                    f"(uncorrected){certified}")
        return f"**cannot tell at this scale**: not shown within ±{c['margin']:g}{certified}"
    if r["outcome"] == "cannot tell":
        return f"**cannot tell at this scale**{det}"
    if r["significant"]:
        return f"**contradicted**: {r['outcome']}, survives Holm" + p
    return f"**cannot tell after Holm**: {r['outcome']} before correction" + p


def claims_table(rows: Sequence[dict[str, Any]], digits: int = 3, label: Callable[[dict[str, Any]], str] | None = None
                 ) -> str:
    """Markdown: each claim (with its source), what was compared, the mean difference [95% interval] (and the
    90% interval against the margin for equivalence claims), and the verdict after Holm's correction."""
    lines = ["| claim | compared | measured: mean [95%] | verdict |", "|---|---|---|---|"]
    for r in rows:
        c = r["claim"]
        what = label(c) if label else f"{c['a']} − {c['b']}"
        lines.append(f"| {c['text']} ({c['source']}) | {what} | {_measured(r, digits)} | {_here(r, digits)} |")
    return "\n".join(lines)


def survivors_line(rows: Sequence[dict[str, Any]]) -> str:
    """One sentence: how many of the family's claims hold before and after Holm, naming the survivors."""
    n = len(rows)
    raw = [r for r in rows if r["holds"]]
    kept = [r["claim"]["id"] for r in rows if r["survives"]]
    lost = [r["claim"]["id"] for r in raw if not r["survives"]]
    text = (f"Of {n} registered claims, {len(raw)} hold by the rule before correction and {len(kept)} after Holm's "
            f"correction over all {n}")
    if kept:
        text += f" ({', '.join(kept)})"
    if lost:
        text += f"; lost to the correction: {', '.join(lost)}"
    return text + "."


def split_seeds_line(rows: Sequence[dict[str, Any]], seeds: Sequence[int], digits: int = 3) -> str:
    """The decided claims the rule cannot tell whose per-seed differences have both signs (common.seed_split at 0),
    each with its seeds on either side and the per-seed differences: what a mean and an interval hide. "" if none."""
    parts = []
    for r in rows:
        sp = seed_split(r["diff"]["per_seed"], 0.0)
        if sp["split"] and r["outcome"] == "cannot tell":
            per = ", ".join(f"{v:.{digits}f}".replace("-0." + "0" * digits, "0." + "0" * digits)
                            for v in r["diff"]["per_seed"])
            parts.append(f"{r['claim']['id']}: seeds {[seeds[i] for i in sp['below']]} below 0, "
                         f"{[seeds[i] for i in sp['above']]} above ({per})")
    return ("Seeds split where the rule cannot tell: " + "; ".join(parts) + ".") if parts else ""
