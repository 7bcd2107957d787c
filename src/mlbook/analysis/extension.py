"""Numbers for section 2.6, extending a RoPE model's context: what each scaling does to each pair.

Every frequency comes from `mlbook.transformer` (`positional.frequency_ladder`; `RopeScaling`,
`ntk_base`, `yarn_ramp` and `yarn_attention_factor` from `rope_scaling`); the wavelength ladder from
`mlbook.analysis.absolute.pair_wavelengths`. This module arranges them into the quantities the section reasons with:

    angle_coverage        per pair, the largest angle seen in training (L theta_i) against the
                          largest angle needed at a longer length L' ((L' - 1) theta_i)
    scaled_inv_freq       theta_i' for one method (none, PI, NTK, dynamic NTK, YaRN, Llama 3)
    frequency_ratios      theta_i' / theta_i for several methods
    angle_overshoot       per pair, the largest angle needed after scaling over L theta_i
    ntk_stretch           NTK-aware base and how much each pair is slowed
    ntk_factor_needed     the NTK factor s that leaves no never-wrapped pair past its trained range
    yarn_bands_text       which pairs YaRN keeps, blends and interpolates (`yarn_bands`, from
                          `rope_scaling`, re-exported here), as the section prints it; its temperature
    config_yarn_bands     the same bands for a published config, every input read from it
    experiment_readings   the paired comparisons section 2.6 reads Experiment 3's record with
    method_wavelength_table
                          wavelength 2 pi / theta_i' per method for chosen pairs
    fit_attention_score, extrapolation_sum, interpolation_bound, bound_ratio, compare_fit
                          Chen et al.'s interpolation-versus-extrapolation argument, computed

Nothing here draws; `mlbook.viz.extension` plots what these return.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from mlbook.analysis.absolute import first_pair_exceeding, format_sig, pair_frequencies, pair_wavelengths
from mlbook.transformer.rope_scaling import (
    ROPE_SCALINGS,
    SCALING_PARAMETERS,
    RopeScaling,
    YarnBands,
    ntk_base,
    scaling_parameters,
    yarn_attention_factor,
    yarn_bands,
)
from mlbook.transformer.validate import check_choice, check_int, check_positive_float

__all__ = [
    "METHODS",
    "METHOD_LABELS",
    "BAND_PARAMETERS",
    "AngleCoverage",
    "angle_coverage",
    "scaled_inv_freq",
    "frequency_ratios",
    "angle_overshoot",
    "NTKStretch",
    "ntk_stretch",
    "NTKFactorNeeded",
    "ntk_factor_needed",
    "YarnBands",
    "yarn_bands",
    "yarn_bands_text",
    "config_yarn_bands",
    "experiment_readings",
    "YarnTemperature",
    "yarn_temperature",
    "MethodWavelengthTable",
    "method_wavelength_table",
    "attention_score",
    "ScoreFit",
    "fit_attention_score",
    "interpolation_bound",
    "extrapolation_sum",
    "BoundRatio",
    "bound_ratio",
    "FitComparison",
    "compare_fit",
]

# the scalings one factor sets: LongRoPE's per-pair factors are searched for one model, not set by a factor
# every context-extension scaling one factor sets: not LongRoPE (per-pair factors searched per model), nor
# proportional (p-RoPE, which holds pairs still rather than extending a context)
METHODS: tuple[str, ...] = tuple(m for m in ROPE_SCALINGS if m not in ("longrope", "proportional"))
# none, linear, ntk, dynamic, yarn, llama3
# the scalings' band limits (yarn: beta_fast, beta_slow; llama3: low_freq_factor, high_freq_factor)
BAND_PARAMETERS: tuple[str, ...] = tuple(p for p in SCALING_PARAMETERS if p not in ("factor", "original_max_len"))
METHOD_LABELS: dict[str, str] = {
    "none": "none (extrapolate)",
    "linear": "PI (linear)",
    "ntk": "NTK-aware",
    "dynamic": "dynamic NTK",
    "yarn": "YaRN",
    "llama3": "Llama 3",
}


def _check_method(method: object) -> str:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid values are {', '.join(repr(m) for m in METHODS)}")
    return method  # type: ignore[return-value]


# ---------------------------------------------------------------------------
# Why a RoPE model fails past L
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AngleCoverage:
    """Per pair i: theta_i, the trained range of angles [0, L theta_i), the largest angle at L'.

    Positions 0 .. L-1 in training put every query-key angle of pair i in [0, L theta_i);
    a context of L' tokens needs angles up to (L' - 1) theta_i. A pair with L theta_i >= 2 pi
    (wavelength <= L) has been all the way round, so every phase is familiar; a pair with
    L theta_i < 2 pi has only ever seen an arc, and everything past it is new.
    """

    d_head: int
    base: float
    original_max_len: int
    target_len: int
    theta: np.ndarray  # (d/2,)
    seen: np.ndarray  # (d/2,) L theta_i
    needed: np.ndarray  # (d/2,) (L' - 1) theta_i

    @property
    def first_unwrapped(self) -> int | None:
        """First pair that never completes a turn within L (`first_pair_exceeding`)."""
        return first_pair_exceeding(self.d_head, self.base, self.original_max_len)

    @property
    def unwrapped(self) -> tuple[int, ...]:
        """Pairs whose trained angles cover less than one turn: at L' they reach angles never seen."""
        first = self.first_unwrapped
        return () if first is None else tuple(range(first, self.d_head // 2))

    @property
    def ratio(self) -> float:
        """(L' - 1) / L: how far past the trained range the largest angle goes, the same for every pair."""
        return float(self.needed[0] / self.seen[0])

    def rows(self, pairs: Sequence[int]) -> list[tuple[int, float, float, float, str]]:
        out = []
        for i in pairs:
            wrapped = "yes" if self.seen[i] >= 2 * math.pi else "no"
            out.append((int(i), float(self.seen[i]), float(self.seen[i] / (2 * math.pi)), float(self.needed[i]), wrapped))
        return out

    def __repr__(self) -> str:
        first = self.first_unwrapped
        pairs = sorted({0, self.d_head // 4, first - 1 if first else 0, first or 0, self.d_head // 2 - 1})
        head = ("pair i", "seen: L theta_i", "turns", "needed: (L'-1) theta_i", "wrapped")
        cells = [(str(i), format_sig(a, 4), format_sig(t, 3), format_sig(b, 4), w) for i, a, t, b, w in self.rows(pairs)]
        widths = [max(len(h), *(len(c[j]) for c in cells)) for j, h in enumerate(head)]
        line = lambda row: "  ".join(v.rjust(w) for v, w in zip(row, widths))  # noqa: E731
        title = (f"d_head = {self.d_head}, base = {self.base:,g}, L = {self.original_max_len:,}, "
                 f"L' = {self.target_len:,}\nangles in radians; every largest angle grows x{self.ratio:.4f}")
        return "\n".join([title, line(head), "  ".join("-" * w for w in widths)] + [line(c) for c in cells])


def angle_coverage(
    d_head: int = 128, base: float = 10000.0, original_max_len: int = 8192, target_len: int | None = None,
    factor: float = 4.0,
) -> AngleCoverage:
    """seen_i = L theta_i and needed_i = (L' - 1) theta_i, theta_i = base^(-2i/d_head).

    L' = target_len, or round(factor * L) when target_len is None.
    """
    check_int("original_max_len", original_max_len, 1)
    if target_len is None:
        factor = check_positive_float("factor", factor)
        target_len = int(round(factor * original_max_len))
    check_int("target_len", target_len, 1)
    theta = pair_frequencies(d_head, base)
    return AngleCoverage(d_head, float(base), original_max_len, target_len, theta,
                         original_max_len * theta, (target_len - 1) * theta)


# ---------------------------------------------------------------------------
# Frequencies after scaling
# ---------------------------------------------------------------------------


def _method_scaling(method: str, factor: float, original_max_len: int, dynamic_factor: float,
                    params: dict[str, float]) -> RopeScaling:
    """The RopeScaling a comparison means by `method`: of s, L and `params`, the ones the method takes."""
    _check_method(method)
    factor = check_positive_float("factor", factor)
    for key, value in params.items():
        check_choice("scaling parameter", key, BAND_PARAMETERS)
        check_positive_float(key, value)
    given = {"factor": dynamic_factor if method == "dynamic" else factor, "original_max_len": original_max_len, **params}
    takes = scaling_parameters(method)
    return RopeScaling(method, **{k: v for k, v in given.items() if k in takes})


def scaled_inv_freq(
    method: str,
    d_head: int = 128,
    base: float = 10000.0,
    factor: float = 4.0,
    *,
    original_max_len: int = 8192,
    seq_len: int | None = None,
    dynamic_factor: float = 1.0,
    **params: float,
) -> tuple[torch.Tensor, float]:
    """theta_i' (d_head/2,) float32 and the attention factor for one method, from the library.

    `RopeScaling(method, ...).frequencies(d_head, base)` with factor s and trained length L = original_max_len;
    `params` are the band limits (beta_fast, beta_slow for yarn; low_freq_factor, high_freq_factor for
    llama3), each used by the method that takes it, RopeScaling's defaults otherwise. dynamic is
    evaluated at a sequence of n = seq_len tokens (default round(s L)) with alpha = dynamic_factor:
    past L the base becomes base * (alpha n / L - (alpha - 1))^(d/(d-2)), and theta_i' = theta_i for
    n <= L (alpha = 1: the scale is exactly n / L).
    """
    scaling = _method_scaling(method, factor, original_max_len, dynamic_factor, params)
    if method == "dynamic":
        if seq_len is None:
            seq_len = int(round(factor * original_max_len))
        check_int("seq_len", seq_len, 1)
    return scaling.frequencies(d_head, base, seq_len)


def frequency_ratios(
    d_head: int = 128,
    base: float = 10000.0,
    factor: float = 4.0,
    *,
    original_max_len: int = 8192,
    methods: Sequence[str] = METHODS,
    seq_len: int | None = None,
    dynamic_factor: float = 1.0,
    **params: float,
) -> dict[str, np.ndarray]:
    """theta_i' / theta_i per method, each (d_head/2,) float64: 1 keeps a pair, 1/s interpolates it fully.

    Arguments as for `scaled_inv_freq`; `params` (band limits) go to the methods that take them.
    """
    theta = pair_frequencies(d_head, base)
    out = {}
    for m in methods:
        inv_freq, _ = scaled_inv_freq(
            m, d_head, base, factor, original_max_len=original_max_len, seq_len=seq_len,
            dynamic_factor=dynamic_factor, **params,
        )
        out[m] = inv_freq.double().numpy() / theta
    return out


def angle_overshoot(
    method: str,
    d_head: int = 128,
    base: float = 10000.0,
    factor: float = 4.0,
    *,
    original_max_len: int = 8192,
    seq_len: int | None = None,
    **options: float,
) -> np.ndarray:
    """(L' - 1) theta_i' / (L theta_i) per pair: above 1, the method needs angles past the trained range.

    L' = round(s L) for every method except dynamic, which is evaluated at its own length
    n = seq_len (default round(s L)). Only pairs that never wrapped in training
    (`AngleCoverage.unwrapped`) are harmed by an overshoot; the others have seen every phase.
    """
    if seq_len is None:
        seq_len = int(round(check_positive_float("factor", factor) * original_max_len))
    ratio = frequency_ratios(d_head, base, factor, original_max_len=original_max_len, methods=(method,),
                             seq_len=seq_len, **options)[method]
    target = seq_len if method == "dynamic" else int(round(factor * original_max_len))
    return (target - 1) * ratio / original_max_len


@dataclass(frozen=True)
class NTKStretch:
    """NTK-aware scaling: base' = base * s^(d/(d-2)) and the stretch theta_i / theta_i' of every pair."""

    d_head: int
    base: float
    factor: float
    new_base: float
    stretch: np.ndarray  # (d/2,) theta_i / theta_i', from the library's float32 frequencies

    @property
    def fastest(self) -> float:
        return float(self.stretch[0])

    @property
    def slowest(self) -> float:
        return float(self.stretch[-1])

    @property
    def limit(self) -> float:
        """base' / base = s^(d/(d-2)): the stretch of the frequency 1/base, the ladder's limit (no pair has it)."""
        return self.new_base / self.base

    def __repr__(self) -> str:
        d, mid = self.d_head, self.d_head // 4
        return "\n".join([
            f"NTK-aware, d_head = {d}, base = {self.base:,g}, s = {self.factor:g}",
            f"  base' = base * s^(d/(d-2)) = {self.new_base:,.1f}",
            f"  pair 0       theta_0 / theta_0'   = {self.fastest:.6f}",
            f"  pair {mid:<3d}     theta_{mid} / theta_{mid}' = {float(self.stretch[mid]):.6f}",
            f"  pair {d // 2 - 1:<3d}     theta_{d // 2 - 1} / theta_{d // 2 - 1}' = {self.slowest:.6f}",
            f"  frequency 1/base (limit)          = {self.limit:.6f}",
        ])


def ntk_stretch(d_head: int = 128, base: float = 10000.0, factor: float = 4.0) -> NTKStretch:
    """base' = base * s^(d/(d-2)); stretch_i = theta_i / theta_i' = s^(2i/(d-2)): 1 at i = 0, s at i = d/2 - 1."""
    theta = pair_frequencies(d_head, base)
    new_theta = RopeScaling("ntk", factor).frequencies(d_head, base)[0].double().numpy()
    new_base = ntk_base(d_head, float(base), float(factor))
    return NTKStretch(d_head, float(base), float(factor), float(new_base), theta / new_theta)


@dataclass(frozen=True)
class NTKFactorNeeded:
    """For each target ratio r = L'/L, the smallest NTK-aware factor s that needs no new angles."""

    d_head: int
    base: float
    original_max_len: int
    first_unwrapped: int | None  # i_0, the first pair that never completed a turn within L
    targets: tuple[float, ...]
    factors: tuple[float, ...]

    def __repr__(self) -> str:
        i0 = self.first_unwrapped
        lines = [f"NTK-aware, d_head = {self.d_head}, base = {self.base:,g}, L = {self.original_max_len:,}: "
                 f"first never-wrapped pair i_0 = {i0}",
                 "  target L'/L   smallest s with no new angles   s / target"]
        for r, s in zip(self.targets, self.factors):
            lines.append(f"  {r:11g}   {s:29.3f}   {s / r:10.3f}")
        return "\n".join(lines)


def ntk_factor_needed(
    targets: float | Sequence[float] = (2.0, 4.0, 8.0, 16.0), d_head: int = 128, base: float = 10000.0,
    original_max_len: int = 8192,
) -> NTKFactorNeeded:
    """Smallest NTK-aware factor s at which no never-wrapped pair needs an angle past its trained range at L' = r L.

    NTK-aware scaling (base' = base * s^(d/(d-2)), bloc97 2023; Peng et al. 2023, YaRN, arXiv
    2309.00071, section 3.1) slows pair i by s^(2i/(d-2)) (`ntk_stretch`). At L' = r L pair i needs
    angles up to (L' - 1) theta_i / s^(2i/(d-2)) and was trained on [0, L theta_i), so it needs no new
    angle iff s^(2i/(d-2)) >= (L' - 1) / L. Only pairs that never wrapped in training (i >= i_0,
    `AngleCoverage.unwrapped`) are constrained, and the least-slowed of them, i_0, binds:

        s >= ((L' - 1) / L)^((d - 2) / (2 i_0)),   and s >= 1.

    With i_0 = d/2 - 1 this is (L' - 1)/L, about r; every earlier i_0 asks for more than r, which is why
    NTK-aware scaling is run with s set above the ratio it is meant to reach (Peng et al., section 3.1).
    i_0 = 0 (L below 2 pi) is never satisfied: pair 0 is not slowed at all (inf). No never-wrapped pair: 1.
    """
    check_int("original_max_len", original_max_len, 1)
    values = (targets,) if isinstance(targets, (int, float)) else tuple(targets)
    if not values:
        raise ValueError("targets is empty; give at least one target ratio L'/L >= 1")
    for r in values:
        check_positive_float("target ratio L'/L", r)
        if r < 1:
            raise ValueError(f"a target ratio L'/L must be >= 1 (an extension), got {r}")
    L = original_max_len
    i0 = first_pair_exceeding(d_head, base, L)
    factors = []
    for r in values:
        need = (round(r * L) - 1) / L  # (L' - 1) / L
        if i0 is None:
            factors.append(1.0)
        elif i0 == 0:
            factors.append(math.inf)
        else:
            factors.append(max(1.0, need ** ((d_head - 2) / (2 * i0))))
    return NTKFactorNeeded(d_head, float(base), L, i0, tuple(float(r) for r in values), tuple(factors))


# ---------------------------------------------------------------------------
# YaRN: bands and temperature
# ---------------------------------------------------------------------------


def yarn_bands_text(bands: YarnBands) -> str:
    """The bands of `yarn_bands` as the section prints them: each band's pairs and the turns within L they span."""
    def span(ix: tuple[int, ...]) -> str:
        if not ix:
            return "none"
        lo, hi = ix[0], ix[-1]
        return f"pairs {lo}..{hi}: {format_sig(bands.turns[hi], 3)} to {format_sig(bands.turns[lo], 3)} turns in L"

    lines = [
        f"YaRN bands, d_head = {bands.d_head}, base = {bands.base:,g}, L = {bands.original_max_len:,},",
        f"beta_fast = {bands.beta_fast:g}, beta_slow = {bands.beta_slow:g}",
        f"  keep theta_i (extrapolate)      {span(bands.keep)}",
        f"  blend                           {span(bands.blend)}",
        f"  theta_i / s (interpolate)       {span(bands.interpolate)}",
    ]
    if bands.keep and bands.turns[0] < bands.beta_fast:  # the ramp's start clamped to pair 0 (max(low, 0))
        lines.append(f"  (pair 0 turns {format_sig(bands.turns[0], 3)} times, fewer than beta_fast, and is kept\n"
                     "   all the same: the ramp starts at pair 0 at the earliest)")
    return "\n".join(lines)


def config_yarn_bands(config: Mapping[str, Any]) -> YarnBands:
    """YaRN's bands for a published config (either layout), every input read from it as transformers reads it.

    The rotary width and base (`rotary_width`, `hf_rope_base`), and the betas, `truncate` and the anchor L
    (`rope_scaling_from_hf`: `original_max_position_embeddings`, or `max_position_embeddings` where the config
    states none, as `standardize_rope_params` fills it in). Refuses a config whose scaling is not YaRN.
    """
    from mlbook.analysis.model_config import rotary_width
    from mlbook.transformer.hf import hf_rope_base, rope_scaling_from_hf

    scaling = rope_scaling_from_hf(config)
    if scaling.name != "yarn":
        raise ValueError(f"config: its scaling is {scaling.name!r}, not 'yarn'; YaRN's bands are defined for yarn")
    return yarn_bands(rotary_width(config), hf_rope_base(config), scaling.original_max_len, scaling.beta_fast,
                      scaling.beta_slow, truncate=scaling.truncate)


def experiment_readings(record: Mapping[str, Any]) -> str:
    """The comparisons section 2.6 reads Experiment 3's record with, each a paired difference over seeds [95% CI].

    1. Unmodified RoPE at 2L: tail minus head against 0 (the within-window rule) and against the same
       difference of the model trained at 4L (a different, weaker model: untuned batches), to three decimals.
    2. Whether that shortfall is the angles or the missing training: the same tail-minus-head difference
       for NTK-aware and dynamic NTK (angles nearly in range at 2L) against the unmodified model and the
       model trained at 4L, and the unmodified model's after the fine-tune at 4L.
    3. After the fine-tune at 4L: every setting's loss, best first; PI's gain from it against the others';
       PI against unmodified RoPE fine-tuned alike and against the model trained at 4L; the gap between PI
       and the best zero-shot setting, before and after.
    4. The best setting without fine-tuning against the model trained at 4L.
    5. The two YaRN settings against each other at every length, before and after, and each against PI at L.
    6. Which pairs each YaRN setting keeps, blends and interpolates (`yarn_band_table`).
    Loss in nats/char; every number is computed from the record.
    """
    from mlbook.experiments import exp_context_extension as E

    r = record["results"]
    L, T = r["train_len"], r["eval_lengths"]
    n = len(r["seeds"])
    names = [v for v in r["variants"] if v != "dynamic"]  # dynamic NTK is NTK itself at 4L (same fine-tune)

    def minus(a: list[float | None], b: list[float | None]) -> list[float | None]:
        return [None if x is None or y is None else x - y for x, y in zip(a, b)]

    def change(name: str) -> dict[str, Any]:  # after - before at 4L
        return E.paired(minus(E.variant_metrics(record, name, "after", "mean")[-1],
                              E.variant_metrics(record, name, "before", "mean")[-1]), [0.0] * n)

    def said(d: dict[str, Any]) -> str:
        return "cannot tell at this scale" if d["verdict"] == "indistinguishable" else d["verdict"]

    tmh = E.variant_metrics(record, "none", "before", "tail_minus_head")[1]
    vs0 = E.paired(tmh, [0.0] * n)
    lines = [f"Unmodified RoPE at {T[1]}, tail ({L}..{T[1] - 1}) minus head (0..{L - 1}) of the same windows: "
             f"{E.pm(vs0, 3)} ({said(vs0)}{'' if vs0['verdict'] == 'indistinguishable' else ' than 0'})"]
    if "reference" in r:
        vs_ref = E.paired_at(record, "none", "reference", "before", "tail_minus_head", 1)
        lines[-1] += (f"; minus the same difference of the model trained at {T[-1]}: {E.pm(vs_ref, 3)} "
                      f"({said(vs_ref)})")
        near = [v for v in ("ntk", "dynamic") if v in r["variants"]]
        if near:
            short = [E.paired_at(record, v, "reference", "before", "tail_minus_head", 1) for v in near]
            same = [E.paired_at(record, "none", v, "before", "tail_minus_head", 1) for v in near]
            tuned = E.paired_at(record, "none", "reference", "after", "tail_minus_head", 1)
            lines.append(f"The same tail - head at {T[1]}, with the angles (nearly) in range, minus the model trained "
                         f"at {T[-1]}'s: " + ", ".join(f"{E.SHORT[v]} {E.pm(d, 3)}" for v, d in zip(near, short))
                         + "; unmodified RoPE's minus theirs: "
                         + ", ".join(f"{E.SHORT[v]} {E.pm(d, 3)} ({said(d)})" for v, d in zip(near, same))
                         + f"; after the fine-tune at {T[-1]}, unmodified RoPE's minus the model trained at "
                         f"{T[-1]}'s: {E.pm(tuned, 3)} ({said(tuned)})")
    after = E.summary(record, "after")
    ranked = sorted(names, key=lambda v: after[v][-1]["mean"])
    lines.append(f"After {r['finetune']['steps']} steps at {T[-1]}, loss at {T[-1]}, best first (mean ± sd): "
                 + ", ".join(f"{E.SHORT[v]} {E.pm(after[v][-1], 2)}" for v in ranked)
                 + (f"; trained at {T[-1]} {E.pm(after['reference'][-1], 2)}" if "reference" in after else ""))
    gains = {v: change(v) for v in names}
    most = min(names, key=lambda v: gains[v]["mean"])
    lines.append(f"Change from the fine-tune at {T[-1]} (after - before): "
                 + ", ".join(f"{E.SHORT[v]} {E.pm(gains[v], 2)}" for v in names)
                 + f"; the largest gain is {E.SHORT[most]}'s")
    before = E.summary(record, "before")
    zs = min(names, key=lambda v: before[v][-1]["mean"])  # the best setting without fine-tuning, at 4L
    if "linear" in names and "none" in names:
        pi_none = E.paired_at(record, "linear", "none", "after", "mean")
        line = f"PI after - unmodified RoPE after, at {T[-1]}: {E.pm(pi_none, 2)} ({said(pi_none)})"
        if "reference" in r:
            pi_ref = E.paired_at(record, "linear", "reference", "after", "mean")
            line += f"; PI after - trained at {T[-1]}: {E.pm(pi_ref, 2)} ({said(pi_ref)})"
        lines.append(line)
    if "linear" in names and zs != "linear":
        gap_b = E.paired_at(record, "linear", zs, "before", "mean")
        gap_a = E.paired_at(record, "linear", zs, "after", "mean")
        shrink = E.paired(minus(gap_a["per_seed"], gap_b["per_seed"]), [0.0] * len(gap_a["per_seed"]))
        lines.append(f"PI - {E.SHORT[zs]} at {T[-1]}: {E.pm(gap_b, 2)} before the fine-tune, {E.pm(gap_a, 2)} after; "
                     f"the gap changes by {E.pm(shrink, 2)} ({said(shrink)})")
    if "reference" in r:
        d = E.paired_at(record, zs, "reference", "before", "mean")
        lines.append(f"Best without fine-tuning ({E.SHORT[zs]}) - trained at {T[-1]} with untuned batches, "
                     f"at {T[-1]}: {E.pm(d, 2)} ({said(d)})")
    if "yarn" in names and "yarn_tuned" in names:
        parts = []
        for phase, word in (("before", "zero-shot"), ("after", "fine-tuned")):
            ds = [E.paired_at(record, "yarn_tuned", "yarn", phase, "mean", i) for i in range(len(T))]
            parts.append(f"{word} " + ", ".join(f"at {t} {E.pm(d, 3)}" for t, d in zip(T, ds)))
        line = f"{E.SHORT['yarn_tuned']} - {E.SHORT['yarn']}, loss: " + "; ".join(parts)
        if "linear" in names:
            line += (f". Zero-shot at {L}, minus PI: " + ", ".join(
                f"{E.SHORT[v]} {E.pm(E.paired_at(record, v, 'linear', 'before', 'mean', 0), 3)}"
                for v in ("yarn", "yarn_tuned")))
        lines.append(line)
    return E.findings(lines) + "\n\n" + yarn_band_table(record)


def yarn_band_table(record: Mapping[str, Any]) -> str:
    """Which pairs each YaRN setting of Experiment 3 keeps, blends and interpolates, with each pair's turns
    r_i = L / lambda_i within L and its ramp weight w_i (section 2.6's names), read from the record."""
    from mlbook.experiments import exp_context_extension as E

    r = record["results"]
    lines = [E.wrap_text(f"d_head = {r['d_head']}, L = {r['train_len']}: turns of pair i within L, r_i = "
                         + ", ".join(f"{t:.2f}" for t in r["bands"]["yarn"]["turns"]))]
    for name, b in r["bands"].items():
        lines.append(f"{E.LABELS[name]:<22} ramp w_i = {b['ramp']}")
        lines.append(f"{'':<22} keep {b['keep']}, blend {b['blend']}, interpolate {b['interpolate']}")
    return "\n".join(lines)


@dataclass(frozen=True)
class YarnTemperature:
    """YaRN's attention factor sqrt(1/t) = 0.1 ln s + 1 per scale, and the logit multiplier 1/t."""

    factors: tuple[float, ...]
    attention_factor: tuple[float, ...]  # multiplies q and k (the library scales cos and sin)

    @property
    def logit_scale(self) -> tuple[float, ...]:
        """1/t = attention_factor^2: q and k each carry the factor, so q . k carries its square."""
        return tuple(a * a for a in self.attention_factor)

    def __repr__(self) -> str:
        lines = ["     s   sqrt(1/t) on q and k   1/t on the logits"]
        for s, a, g in zip(self.factors, self.attention_factor, self.logit_scale):
            lines.append(f"{s:6g}   {a:20.4f}   {g:17.4f}")
        return "\n".join(lines)


def yarn_temperature(factors: Sequence[float] = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)) -> YarnTemperature:
    """attention_factor(s), the library's `yarn_attention_factor`: 0.1 ln s + 1 (1 for s <= 1)."""
    return YarnTemperature(tuple(float(s) for s in factors), tuple(yarn_attention_factor(s) for s in factors))


# ---------------------------------------------------------------------------
# Wavelength table per method
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MethodWavelengthTable:
    """Wavelength 2 pi / theta_i' (tokens) per method for chosen pairs, at one scale factor."""

    d_head: int
    base: float
    factor: float
    original_max_len: int
    seq_len: int  # the length dynamic NTK is evaluated at
    pairs: tuple[int, ...]
    methods: tuple[str, ...]
    wavelengths: dict[str, tuple[float, ...]] = field(repr=False)

    @property
    def target_len(self) -> int:
        return int(round(self.factor * self.original_max_len))

    def _header(self) -> list[str]:
        short = {"none": "none", "linear": "PI", "ntk": "NTK", "yarn": "YaRN", "llama3": "Llama 3"}
        return [short[m] if m != "dynamic" else f"dynamic@{self.seq_len:,}" for m in self.methods]

    def __repr__(self) -> str:
        head = ["pair i"] + self._header()
        rows = [[str(i)] + [format_sig(self.wavelengths[m][n], 4) for m in self.methods] for n, i in enumerate(self.pairs)]
        widths = [max(len(h), *(len(r[j]) for r in rows)) for j, h in enumerate(head)]
        line = lambda row: "  ".join(v.rjust(w) for v, w in zip(row, widths))  # noqa: E731
        title = (f"wavelength 2 pi / theta_i' in tokens, s = {self.factor:g}\n"
                 f"(d_head = {self.d_head}, base = {self.base:,g}, L = {self.original_max_len:,} -> L' = {self.target_len:,})")
        return "\n".join([title, line(head), "  ".join("-" * w for w in widths)] + [line(r) for r in rows])

    def _repr_html_(self) -> str:
        th = "<th>pair <i>i</i></th>" + "".join(f"<th>{h}</th>" for h in self._header())
        body = "".join(
            f"<tr><td style='text-align:right'>{i}</td>"
            + "".join(f"<td style='text-align:right'>{format_sig(self.wavelengths[m][n], 4)}</td>" for m in self.methods)
            + "</tr>"
            for n, i in enumerate(self.pairs)
        )
        cap = (f"Wavelength 2&pi;/&theta;<sub><i>i</i></sub>&prime; in tokens: d<sub>head</sub> = {self.d_head}, "
               f"base = {self.base:,g}, s = {self.factor:g}, L = {self.original_max_len:,} &rarr; "
               f"L&prime; = {self.target_len:,}")
        return f"<table><caption>{cap}</caption><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def method_wavelength_table(
    d_head: int = 128,
    base: float = 10000.0,
    factor: float = 4.0,
    *,
    original_max_len: int = 8192,
    pairs: Sequence[int] = (0, 16, 32, 48, 63),
    methods: Sequence[str] = METHODS,
    seq_len: int | None = None,
    **options: float,
) -> MethodWavelengthTable:
    """lambda_i' = lambda_i * theta_i / theta_i', lambda_i = `pair_wavelengths` (2 pi / theta_i)."""
    bad = [i for i in pairs if not 0 <= i < d_head // 2]
    if bad:
        raise ValueError(f"pairs {bad} are out of range: d_head={d_head} has pairs 0..{d_head // 2 - 1}")
    for m in methods:
        _check_method(m)
    if seq_len is None:
        seq_len = int(round(check_positive_float("factor", factor) * original_max_len))
    ratios = frequency_ratios(d_head, base, factor, original_max_len=original_max_len, methods=methods,
                              seq_len=seq_len, **options)
    lam = pair_wavelengths(d_head, base)
    waves = {m: tuple(float(lam[i] / ratios[m][i]) for i in pairs) for m in methods}
    return MethodWavelengthTable(d_head, float(base), float(factor), original_max_len, seq_len, tuple(int(i) for i in pairs),
                                 tuple(methods), waves)


# ---------------------------------------------------------------------------
# Chen et al.: interpolation versus extrapolation of the attention score
# ---------------------------------------------------------------------------


def attention_score(
    h: np.ndarray, distance: np.ndarray | Sequence[float] | float, d_head: int, base: float = 10000.0
) -> np.ndarray:
    """a(Delta) = Re sum_j h_j e^{i Delta theta_j}: the RoPE score of a query and key Delta positions apart.

    With h_j = q_j conj(k_j) (pair j of q and k as complex numbers) this is the rotated dot
    product of q at position m and k at position n, Delta = m - n. (Chen et al. write s for the
    distance; this book keeps s for the scale factor.) h: (d_head/2,) complex; distance: any
    shape of real distances (fractional ones are what interpolation produces). Float64.
    """
    h = np.asarray(h)
    if h.shape != (d_head // 2,):
        raise ValueError(f"h must have shape (d_head/2,) = ({d_head // 2},), got {h.shape}")
    theta = pair_frequencies(d_head, base)
    delta = np.asarray(distance, dtype=np.float64)
    phase = np.exp(1j * delta[..., None] * theta)  # (..., d/2)
    return (phase @ h.astype(np.complex128)).real  # (...)


@dataclass(frozen=True)
class ScoreFit:
    """A score function a(Delta) fitted by least squares to random targets at integer Delta in [0, L)."""

    d_head: int
    base: float
    original_max_len: int
    positions: np.ndarray  # (n,) integer distances
    targets: np.ndarray  # (n,) in [-1, 1]
    h: np.ndarray  # (d/2,) complex coefficients
    ridge: float
    seed: int

    def score(self, distance: np.ndarray | Sequence[float] | float) -> np.ndarray:
        return attention_score(self.h, distance, self.d_head, self.base)

    @property
    def rms_residual(self) -> float:
        return float(np.sqrt(np.mean((self.score(self.positions) - self.targets) ** 2)))


def fit_attention_score(
    d_head: int = 128, base: float = 10000.0, original_max_len: int = 2048, n_points: int = 1024,
    ridge: float = 1e-8, seed: int = 0,
) -> ScoreFit:
    """Fit h to n random (Delta_k, y_k), Delta_k distinct integers in [0, L), y_k ~ U(-1, 1):

        minimise sum_k (a(Delta_k) - y_k)^2 + ridge * |h|^2,   a(Delta) = Re sum_j h_j e^{i Delta theta_j}

    (float64 normal equations). The ridge term only makes the solve well defined: nothing in the
    data on [0, L) limits how large the slow pairs' coefficients may grow.
    """
    check_int("original_max_len", original_max_len, 2)
    check_int("n_points", n_points, 1)
    if n_points > original_max_len:
        raise ValueError(f"n_points ({n_points}) must be <= original_max_len ({original_max_len}): one target per integer distance")
    if isinstance(ridge, bool) or not isinstance(ridge, (int, float)) or not math.isfinite(ridge) or ridge < 0:
        raise ValueError(f"ridge must be a finite number >= 0, got {ridge!r}")
    rng = np.random.default_rng(seed)
    s = np.sort(rng.choice(original_max_len, size=n_points, replace=False)).astype(np.float64)  # (n,)
    y = rng.uniform(-1.0, 1.0, size=n_points)  # (n,)
    theta = pair_frequencies(d_head, base)
    phase = np.outer(s, theta)  # (n, d/2)
    design = np.concatenate([np.cos(phase), -np.sin(phase)], axis=1)  # (n, d): Re(h e^{i phi}) = a cos - b sin
    gram = design.T @ design + ridge * np.eye(d_head)
    coef = np.linalg.solve(gram, design.T @ y)  # (d,)
    h = coef[: d_head // 2] + 1j * coef[d_head // 2 :]
    return ScoreFit(d_head, float(base), original_max_len, s, y, h, float(ridge), int(seed))


def interpolation_bound(max_abs_h: float, d_head: int, base: float = 10000.0) -> float:
    """Chen et al.'s Theorem 2.1 at its worst point: |a(D) - a_linear(D)| <= d max|h_j| / (32 ln c), c = base.

    The theorem bounds d max|h_j| (D - D1)(D2 - D) / (8 ln c) between neighbouring integer
    distances D1 < D < D2 = D1 + 1, and (D - D1)(D2 - D) <= 1/4.
    """
    return d_head * float(max_abs_h) / (32.0 * math.log(base))


def extrapolation_sum(distance: np.ndarray | Sequence[float] | float, d_head: int, base: float = 10000.0) -> np.ndarray:
    """B(D) = sum_{k=1}^{d/2} |A_k(D)|, A_k(D) = sum_{j<k} e^{i D theta_j} (summation by parts).

    |a(D)| <= max_j |h_{j+1} - h_j| B(D) (with h_{d/2} = 0) <= 2 max_j |h_j| B(D): the bound that
    holds at any distance D, the only one available for extrapolation.
    """
    theta = pair_frequencies(d_head, base)
    delta = np.asarray(distance, dtype=np.float64)
    partial = np.cumsum(np.exp(1j * delta[..., None] * theta), axis=-1)  # (..., d/2) A_1 .. A_{d/2}
    return np.abs(partial).sum(axis=-1)  # (...)


@dataclass(frozen=True)
class BoundRatio:
    """Extrapolation bound over interpolation bound, 2 B(D) / (d / (32 ln c)) = 64 ln c * B(D)/d, over distances D."""

    d_head: int
    base: float
    s_lo: int
    s_hi: int
    b_over_d: np.ndarray  # (n,) B(D)/d for D = s_lo .. s_hi - 1

    @property
    def estimate(self) -> float:
        """The ratio when B(D) = d: 64 ln c (589.5 for c = 10000), the size of Chen et al.'s 'about 600x'."""
        return 64.0 * math.log(self.base)

    @property
    def ratio(self) -> np.ndarray:
        return self.estimate * self.b_over_d

    def count_below(self, value: float) -> int:
        """How many of the distances have a bound ratio below `value` (e.g. Chen et al.'s 600)."""
        return int((self.ratio < check_positive_float("value", value)).sum())

    def __repr__(self) -> str:
        b, r = self.b_over_d, self.ratio
        return "\n".join([
            f"d_head = {self.d_head}, base = {self.base:,g}, distances {self.s_lo:,} to {self.s_hi - 1:,}",
            f"  64 ln(base) (the ratio if B = d)         {self.estimate:8.1f}",
            f"  B/d            min {b.min():6.2f}   median {np.median(b):6.2f}   max {b.max():6.2f}",
            f"  bound ratio    min {r.min():6.0f}   median {np.median(r):6.0f}   max {r.max():6.0f}",
        ])


def bound_ratio(d_head: int = 128, base: float = 10000.0, original_max_len: int = 2048, factor: float = 4.0) -> BoundRatio:
    """B(D)/d for every integer distance D in [L, s L): the distances only extrapolation reaches."""
    check_int("original_max_len", original_max_len, 1)
    hi = int(round(check_positive_float("factor", factor) * original_max_len))
    s = np.arange(original_max_len, hi, dtype=np.float64)
    return BoundRatio(d_head, float(base), original_max_len, hi, extrapolation_sum(s, d_head, base) / d_head)


@dataclass(frozen=True)
class FitComparison:
    """One fitted score function, read three ways over a context s times longer than L."""

    factor: float
    in_range_max: float  # max |a(s)|, integer s in [0, L)
    extrapolated_max: float  # max |a(s)|, integer s in [L, s L)
    interpolated_max: float  # max |a(m / s)|, m in [0, s L): what PI feeds the model
    interpolation_error: float  # max |a(m / s) - linear interpolation of a at the neighbouring integers|
    theorem_bound: float  # d max|h| / (32 ln c)

    def __repr__(self) -> str:
        return "\n".join([
            f"max |a| on the trained range [0, L)                 {self.in_range_max:12.3g}",
            f"max |a| extrapolated to [L, {self.factor:g}L)                    {self.extrapolated_max:12.3g}",
            f"max |a| interpolated (PI, positions m/{self.factor:g})            {self.interpolated_max:12.3g}",
            f"max |a(m/s) - linear interpolation|                 {self.interpolation_error:12.3g}",
            f"Theorem 2.1 bound d max|h| / (32 ln c)              {self.theorem_bound:12.3g}",
        ])


def compare_fit(fit: ScoreFit, factor: float = 4.0) -> FitComparison:
    """Extrapolate a fitted score to [L, sL) and interpolate it at m/s (PI), with the theorem's bound."""
    factor = check_positive_float("factor", factor, above=1.0)
    L = fit.original_max_len
    hi = int(round(factor * L))
    grid = np.arange(L + 1, dtype=np.float64)  # integers 0..L
    on_grid = fit.score(grid)
    x = np.arange(hi, dtype=np.float64) / factor  # (sL,) PI positions in [0, L)
    a_x = fit.score(x)
    linear = np.interp(x, grid, on_grid)
    return FitComparison(
        factor=factor,
        in_range_max=float(np.abs(on_grid[:L]).max()),
        extrapolated_max=float(np.abs(fit.score(np.arange(L, hi, dtype=np.float64))).max()),
        interpolated_max=float(np.abs(a_x).max()),
        interpolation_error=float(np.abs(a_x - linear).max()),
        theorem_bound=interpolation_bound(float(np.abs(fit.h).max()), fit.d_head, fit.base),
    )
