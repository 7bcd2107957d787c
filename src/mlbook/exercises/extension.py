"""Exercise checkers for section 2.6: context extension (PI, NTK, YaRN).

Each checker calls the reader's function on a few cases, compares it with the library
(`mlbook.transformer.positional` through `mlbook.analysis.extension`), and when they disagree
tries the usual mistakes (the exponent upside down, positions multiplied instead of divided,
rounding to integers, YaRN's bands the wrong way round) to name the one that was made. One
verdict line, True or False, never raises.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch

from mlbook.analysis.absolute import pair_wavelengths
from mlbook.analysis.extension import ntk_stretch
from mlbook.exercises.common import (call_answer, describe, failure, fmt_pair, guarded, number_answer, rtol_for,
                                     significant_bits, tensor_answer, verdict)
from mlbook.transformer.positional import RotaryEmbedding
from mlbook.transformer.rope_scaling import YARN_BAND_NAMES, RopeScaling, yarn_bands

__all__ = ["check_ntk_base", "check_pi_positions", "check_yarn_band"]


# ---------------------------------------------------------------------------
# NTK-aware base
# ---------------------------------------------------------------------------


@guarded
def check_ntk_base(fn: Callable[[float, float, int], object]) -> bool:
    """Check fn(base, s, d_head) -> the NTK-aware base base * s^(d_head / (d_head - 2)).

    Names: the exponent upside down ((d-2)/d), no exponent (base * s), dividing by s^(d/(d-2)),
    the pair count d/2 in place of d, and s^(2/d). Reference: `ntk_stretch(...).new_base`.
    """
    cases = ((10000.0, 4.0, 128), (500000.0, 8.0, 64), (10000.0, 2.0, 8))
    for base, s, d in cases:
        value, err = call_answer(fn, base, s, d)
        if err is not None:
            return verdict(False, failure(f"fn({base:g}, {s:g}, {d})", err) + ".")
        got, problem = number_answer(value, f"fn({base:g}, {s:g}, {d})", "one number (the new base)")
        if problem is not None:
            return verdict(False, problem)
        got = float(got)
        want = ntk_stretch(d, base, s).new_base
        close = lambda a, b: abs(a - b) <= rtol_for(torch.float32) * abs(b)  # noqa: E731 (a float32 answer is right)
        if close(got, want):
            continue
        where = f"for base={base:g}, s={s:g}, d_head={d}"
        h = d // 2
        mistakes = (
            (base * s ** ((d - 2) / d), "the exponent is upside down: you used (d-2)/d. With base' = base * s^(d/(d-2)) "
                                        "the slowest pair, theta = base'^(-(d-2)/d), picks up s^(-(d/(d-2))*((d-2)/d)) "
                                        "= 1/s exactly; with your exponent it is slowed by less than s."),
            (base * s, "you multiplied the base by s alone. That slows the slowest pair by s^((d-2)/d), a little "
                       "less than s; the exponent d/(d-2) is what makes it exactly s."),
            (base / s ** (d / (d - 2)), "you divided the base. A smaller base makes every pair faster; to stretch the "
                                        "slow pairs, multiply: base' = base * s^(d/(d-2))."),
            (base * s ** (h / (h - 2)) if h > 2 else math.nan, "you used the number of pairs d/2 where the head size d "
                                                                "belongs: the exponent is d_head / (d_head - 2)."),
            (base * s ** (2 / d), "you used s^(2/d), the stretch of pair 1 under a different recipe. The NTK-aware base "
                                  "is base * s^(d/(d-2))."),
            (s ** (d / (d - 2)), "you returned the factor s^(d/(d-2)) without multiplying by the base."),
        )
        for cand, message in mistakes:
            if math.isfinite(cand) and close(got, cand):
                return verdict(False, f"Not the NTK base {where}: {message}")
        shown, expected = fmt_pair(got, want)
        return verdict(False, f"fn gives {shown} {where}; the NTK-aware base is {expected}. Use "
                              "base * s ** (d_head / (d_head - 2)).")
    return verdict(True, "base' = base * s^(d/(d-2)): theta_0 = 1 stays, the slowest pair is slowed by exactly s.")


# ---------------------------------------------------------------------------
# Position interpolation
# ---------------------------------------------------------------------------


def _pi_reference(L: int, L_new: int) -> torch.Tensor:
    """Positions PI feeds RoPE, read from the library: pair 0 of scaling='linear' turns m / s rad at m (theta_0 = 1)."""
    rope = RotaryEmbedding(2, rope_scaling=RopeScaling("linear", factor=L_new / L))
    return rope.angles(torch.arange(L_new)).double()[:, 0]  # (L_new,) m / s


@guarded
def check_pi_positions(fn: Callable[[int, int], object]) -> bool:
    """Check fn(L, L_new) -> the (L_new,) positions m' = m / s, s = L_new / L, for tokens m = 0 .. L_new - 1.

    The reference is the library: `RotaryEmbedding(d_head, rope_scaling=RopeScaling("linear", factor=s))` turns pair 0
    (theta_0 = 1) by exactly m / s. Names: multiplying by s, rounding to integers, (L-1)/(L_new-1)
    instead of L/L_new, and the wrong length.
    """
    cases = ((2048, 8192), (100, 250), (512, 8192))
    for L, L_new in cases:
        value, err = call_answer(fn, L, L_new)
        if err is not None:
            return verdict(False, failure(f"fn({L}, {L_new})", err) + ".")
        if not isinstance(value, (torch.Tensor, str)):
            try:
                value = torch.as_tensor(value, dtype=torch.float64)
            except Exception:  # noqa: BLE001 - not a sequence of numbers: tensor_answer names it
                pass
        value, problem = tensor_answer(value, f"fn({L}, {L_new})", "a tensor (or list) of positions")
        if problem is not None:
            return verdict(False, problem)
        if value.dtype == torch.bool:
            return verdict(False, f"fn({L}, {L_new}) returned a bool tensor; return the positions as floats.")
        got = value.double().flatten()
        where = f"for L={L}, L_new={L_new}"
        if got.numel() != L_new:
            hint = " That is the trained length: PI keeps one position per token of the new context." if got.numel() == L else ""
            return verdict(False, f"fn returns {got.numel()} positions {where}; there must be one per token, "
                                  f"L_new = {L_new}.{hint}")
        if not torch.isfinite(got).all():
            return verdict(False, f"fn({L}, {L_new}) contains NaN or inf: every position m / s is a finite number.")
        want = _pi_reference(L, L_new)
        # float32 positions up to 8192 are exact to ~5e-4; any float dtype at least float32 is right
        tol = 1e-5 + rtol_for(torch.float32) * float(want.abs().max())
        if torch.allclose(got, want, atol=tol, rtol=0):
            continue
        if value.dtype in (torch.float16, torch.bfloat16) and torch.allclose(got, want, rtol=1e-2, atol=1e-2):
            return verdict(False, f"Right up to rounding, but your positions are {value.dtype} {where}: it keeps "
                                  f"only {significant_bits(value.dtype)} significant bits, so near {L} "
                                  f"neighbouring positions m / s merge. Compute them in float32 or float64.")
        m = torch.arange(L_new, dtype=torch.float64)
        s = L_new / L
        if torch.allclose(got, m * s, atol=tol, rtol=0):
            return verdict(False, f"You multiplied by s {where}: positions then run to {float(m[-1] * s):,.0f}, "
                                  f"s^2 times past the trained range. Interpolation divides: m' = m / s.")
        if torch.allclose(got, torch.floor(m / s), atol=1e-9) or torch.allclose(got, torch.round(m / s), atol=1e-9):
            return verdict(False, f"Your positions are whole numbers {where}: rounding m / s puts {s:g} neighbouring "
                                  "tokens on the same position, so the model cannot tell their order. Keep m / s as "
                                  "a float; RoPE's angles m' theta_i are fine at fractional m'.")
        if torch.allclose(got, m * (L - 1) / (L_new - 1), atol=tol, rtol=0):
            return verdict(False, f"You scaled by (L-1)/(L_new-1) {where}, so the last token lands exactly on L-1. "
                                  "PI (and the library's scaling='linear') divides by s = L_new / L: the last token "
                                  f"sits at {float(want[-1]):,.2f}, just below L, and every angle stays in [0, L theta_i).")
        if torch.allclose(got, m * L / L_new + 1, atol=tol, rtol=0) or torch.allclose(got, (m + 1) / s, atol=tol, rtol=0):
            return verdict(False, f"Off by one {where}: positions start at 0 (token 0 is at position 0).")
        return verdict(False, f"Your positions differ from m / s {where} (largest difference "
                              f"{float((got - want).abs().max()):.3g}). Token m goes to m * L / L_new.")
    return verdict(True, "m' = m / s: every position of the long context lands in [0, L), at fractional steps of 1/s.")


# ---------------------------------------------------------------------------
# YaRN bands
# ---------------------------------------------------------------------------

_BANDS = YARN_BAND_NAMES  # ("keep", "blend", "interpolate"), as the library names them


def _bands_by_turns(turns: np.ndarray, beta_fast: float, beta_slow: float) -> list[str]:
    """The band rule written with r = turns in L: keep if r >= beta_fast, interpolate if r <= beta_slow."""
    return ["keep" if r >= beta_fast else ("interpolate" if r <= beta_slow else "blend") for r in turns]


@guarded
def check_yarn_band(fn: Callable[..., object]) -> bool:
    """Check fn(i, d_head, base, L, beta_fast, beta_slow) -> 'keep', 'blend' or 'interpolate' for pair i.

    Reference: `yarn_bands(...).band_of(i)`, i.e. the library's `yarn_ramp` (0: keep theta_i,
    1: theta_i / s), which like Hugging Face always keeps pair 0 (the ramp starts at pair 0 at the
    earliest). Names: the turns rule applied to pair 0 too, bands the wrong way round, beta_fast
    and beta_slow swapped, turns and wavelength confused (lambda / L instead of L / lambda),
    frequencies base^(-i/d).
    """
    # The last case is Experiment 3's head (d_head 12, L 128): no pair turns 32 times in L, so the ramp's start
    # is clamped to pair 0, which the implementations keep although the turns rule would blend it.
    cases = ((128, 10000.0, 8192, 32.0, 1.0), (64, 500000.0, 4096, 32.0, 1.0), (128, 10000.0, 2048, 16.0, 2.0),
             (12, 10000.0, 128, 32.0, 1.0))
    for d, base, L, bf, bs in cases:
        bands = yarn_bands(d, base, L, bf, bs)
        want = [bands.band_of(i) for i in range(d // 2)]
        got = []
        for i in range(d // 2):
            value, err = call_answer(fn, i, d, base, L, bf, bs)
            if err is not None:
                return verdict(False, failure(f"fn({i}, {d}, {base:g}, {L}, {bf:g}, {bs:g})", err) + ".")
            if not (isinstance(value, str) and value in _BANDS):
                return verdict(False, f"Return one of 'keep', 'blend', 'interpolate'; fn({i}, {d}, {base:g}, "
                                      f"{L}, {bf:g}, {bs:g}) returned {describe(value)}.")
            got.append(value)
        if got == want:
            continue
        where = f"for d_head={d}, base={base:g}, L={L}, beta_fast={bf:g}, beta_slow={bs:g}"
        flip = {"keep": "interpolate", "interpolate": "keep", "blend": "blend"}
        if got == [flip[b] for b in want]:
            return verdict(False, f"Your bands are the wrong way round {where}: the fast pairs (low i, many turns "
                                  "within L) must keep theta_i, since interpolating them blurs neighbouring tokens; "
                                  "the slow pairs (fewer than beta_slow turns, never wrapped) are the ones divided by s.")
        turns = bands.turns
        by_turns = _bands_by_turns(turns, bf, bs)
        if got == by_turns and got[1:] == want[1:] and want[0] == "keep":
            return verdict(False, f"Pair 0 {where} makes {turns[0]:.3g} turns within L, fewer than beta_fast, so the "
                                  "turns rule (and the paper's gamma) would blend it; but the implementations clamp "
                                  "the start of the ramp at pair 0 (Hugging Face's find_correction_range, "
                                  "max(low, 0); the library's yarn_ramp), so pair 0 is always kept. Return 'keep' "
                                  "for i = 0.")
        if got == _bands_by_turns(turns, bs, bf):
            return verdict(False, f"You swapped beta_fast and beta_slow {where}: beta_fast ({bf:g}) is the number of "
                                  f"turns above which a pair is kept, beta_slow ({bs:g}) the number below which it is "
                                  "interpolated.")
        inverted = pair_wavelengths(d, base) / L  # lambda / L: the reciprocal of the turns
        if got == _bands_by_turns(inverted, bf, bs) or got == [flip[b] for b in _bands_by_turns(inverted, bf, bs)]:
            return verdict(False, f"You used wavelength / L {where}; the number of turns pair i makes within L is the "
                                  "reciprocal, r_i = L / lambda_i = L theta_i / (2 pi).")
        half_turns = L / pair_wavelengths(2 * d, base)[: d // 2]  # theta_i = base^(-i/d): the pair index not doubled
        if got == _bands_by_turns(half_turns, bf, bs):
            return verdict(False, f"Your frequencies are base^(-i/d) {where}; pair i turns at theta_i = "
                                  "base^(-2i/d), so the band edges sit at half the pair index you found.")
        wrong = [i for i in range(d // 2) if got[i] != want[i]]
        i = wrong[0]
        return verdict(False, f"Pair {i} {where} makes {turns[i]:.3g} turns within L and belongs in "
                              f"'{want[i]}', not '{got[i]}' ({len(wrong)} pair(s) differ). Keep pairs with at least "
                              "beta_fast turns, interpolate those with at most beta_slow, blend the rest.")
    return verdict(True, "Pairs with at least beta_fast turns in L keep theta_i (pair 0 always), those with at most "
                         "beta_slow are divided by s, the rest blend: the same bands as the library's yarn_ramp.")
