"""Checkers for sections 1 and 2.1 (permutation equivariance, the sinusoidal offset matrix).

A checker calls the reader's function on small cases, compares with the library, and when
they disagree tries the usual mistakes (a transposed rotation, the other pair layout, a
forgotten permutation) to name the one that was made. It prints one verdict and returns
True or False; it never raises, so a notebook cell with an unfinished answer still runs.
"""

from __future__ import annotations

from typing import Callable

import torch

from mlbook.analysis.absolute import offset_matrix, pair_frequencies
from mlbook.exercises.common import (call_answer, failure, fmt_pair, guarded, number_answer, staged_hint, tensor_answer,
                                     verdict)
from mlbook.transformer.positional import frequency_ladder, sinusoidal_positional_encoding

__all__ = ["check_equivariance_error", "check_offset_matrix"]


# ---------------------------------------------------------------------------
# Notebook 01: measuring permutation equivariance
# ---------------------------------------------------------------------------


def _bag_mixer(x: torch.Tensor) -> torch.Tensor:
    """Equivariant: each token plus the mean over all tokens (a set function per token)."""
    return x + x.mean(dim=1, keepdim=True)  # (B, T, d)


def _running_mean(x: torch.Tensor) -> torch.Tensor:
    """Not equivariant: the mean over each prefix, as a causal mask would see it."""
    counts = torch.arange(1, x.shape[1] + 1, dtype=x.dtype)[None, :, None]  # (1, T, 1)
    return x.cumsum(dim=1) / counts  # (B, T, d)


def _negated_running_mean(x: torch.Tensor) -> torch.Tensor:
    """The running mean with its sign flipped: its largest deviation from equivariance is negative, so an
    answer that takes the max of the signed difference (no absolute value) gets it wrong."""
    return -_running_mean(x)  # (B, T, d)


@guarded
def check_equivariance_error(fn: Callable[[Callable, torch.Tensor, torch.Tensor], object]) -> bool:
    """Check fn(f, x, perm) -> max |f(P x) - P f(x)|, with (P x)[:, j] = x[:, perm[j]] and x (B, T, d).

    Cases: an equivariant f (answer 0 to rounding), a causal running mean (answer > 0) and the same
    running mean negated, whose largest deviation is negative (so a max without the absolute value
    fails), with a permutation that is not its own inverse, so P and P^-1 give different answers.
    Named mistakes get a two-stage hint (`staged_hint`): the symptom first, the fix when the same
    mistake is checked again.
    """
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 3, generator=gen, dtype=torch.float64)  # (B, T, d)
    x[1] *= 3.0  # batch rows of different scale: an answer that skips a row shows it
    perm = torch.tensor([1, 2, 3, 4, 0])  # a 5-cycle: perm != argsort(perm)
    inv = torch.argsort(perm)

    def diff(f: Callable, out_perm: torch.Tensor | None = perm) -> torch.Tensor:
        y = f(x)
        y = y if out_perm is None else y[:, out_perm]
        return f(x[:, perm]) - y  # (B, T, d)

    def ref(f: Callable, out_perm: torch.Tensor | None = perm) -> float:
        return diff(f, out_perm).abs().max().item()

    cases = (("equivariant", _bag_mixer), ("causal", _running_mean), ("negated", _negated_running_mean))
    got = {}
    for name, f in cases:
        value, err = call_answer(fn, f, x, perm)
        if err is not None:
            hint = ""
            if "index" in err.lower() or "out of bounds" in err.lower():
                hint = " " + staged_hint(
                    "equivariance_error: wrong axis",
                    "Positions are dimension 1 of x (B, T, d); dimension 0 is the batch and dimension 2 the features.",
                    "Permute with x[:, perm] and f(x)[:, perm], not x[perm] (batch) or x[..., perm] (features).")
            return verdict(False, f"{failure('Your function', err)}.{hint}")
        v, problem = number_answer(value, "Your function", "one number (a float or a 1-element tensor)")
        if problem is not None:
            return verdict(False, problem)
        got[name] = float(v)

    want = {name: ref(f) for name, f in cases}
    # the inputs are float64, but a computation in float32 is right too: its rounding is ~1e-7
    zero = 1e-5
    close = lambda a, b: abs(a - b) <= zero * max(1.0, abs(b))  # noqa: E731
    if all(close(got[name], want[name]) for name, _ in cases):
        return verdict(True, "Zero (to rounding) for the equivariant function and a clear nonzero error for the "
                             "causal running mean, with either sign.")
    if got["equivariant"] < -zero or got["causal"] < 0 or got["negated"] < 0:
        return verdict(False, "An error must be >= 0: take the absolute value before the max.")
    if (close(got["equivariant"], want["equivariant"]) and close(got["causal"], diff(_running_mean).max().item())
            and close(got["negated"], diff(_negated_running_mean).max().item())):
        return verdict(False, staged_hint(
            "equivariance_error: signed max",
            f"Right for the running mean, but for the same function negated you report {got['negated']:.4g} "
            f"instead of {want['negated']:.4g}: flipping the sign of f must not change how far it is from "
            "equivariant. Your answer sees only the deviations in one direction.",
            "Take the absolute value before the max: (...).abs().max()."))
    if got["equivariant"] > zero:
        if close(got["equivariant"], ref(_bag_mixer, None)):
            return verdict(False, staged_hint(
                "equivariance_error: unpermuted output",
                f"For an equivariant f your error is {got['equivariant']:.3g}, not 0: the two sides of your "
                "difference are not lined up position by position. Which side of the difference did you permute?",
                "You compared f(Px) with the unpermuted f(x). Apply the same permutation to the output, "
                "f(x)[:, perm], before subtracting."))
        if close(got["equivariant"], ref(_bag_mixer, inv)):
            return verdict(False, staged_hint(
                "equivariance_error: inverse permutation",
                f"For an equivariant f your error is {got['equivariant']:.3g}, not 0, and it would be 0 if perm were "
                "its own inverse (a reversal, a single swap): check which permutation you applied to the output.",
                "You permuted the output with the inverse permutation. (Px)[:, j] = x[:, perm[j]], so P f(x) is "
                "f(x)[:, perm], not f(x)[:, argsort(perm)]."))
        return verdict(False, staged_hint(
            "equivariance_error: nonzero for an equivariant f",
            f"For an equivariant f the answer must be 0 (to rounding); yours is {got['equivariant']:.3g}.",
            "Compute f(x[:, perm]) - f(x)[:, perm], then the max of its absolute value."))
    if got["causal"] < zero:
        return verdict(False, "You report 0 for a causal running mean, which is not equivariant. Are both sides of "
                              "the difference computed from the same tensor? One side is f of the permuted input, "
                              "the other the permuted output of f on the original input.")
    return verdict(False, staged_hint(
        "equivariance_error: causal size",
        f"Zero for the equivariant case, but {got['causal']:.4g} instead of {want['causal']:.4g} for the causal "
        "running mean: part of the difference is left out. Does your max cover every batch row, position and "
        "feature?",
        "Take the max of |f(x[:, perm]) - f(x)[:, perm]| over the whole tensor: .abs().max(), with no index."))


# ---------------------------------------------------------------------------
# Notebook 02: the offset property of the sinusoidal table
# ---------------------------------------------------------------------------


def _blocks(phi: torch.Tensor, *, layout: str = "interleaved", sign: int = 1) -> torch.Tensor:
    """Block rotation [[cos, sign*sin], [-sign*sin, cos]] per pair, in either pair layout."""
    d = 2 * phi.numel()
    c, s = phi.cos(), sign * phi.sin()
    M = torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        a, b = (2 * i, 2 * i + 1) if layout == "interleaved" else (i, i + d // 2)
        M[a, a], M[a, b], M[b, a], M[b, b] = c[i], s[i], -s[i], c[i]
    return M


@guarded
def check_offset_matrix(fn: Callable[[int, int, float], object]) -> bool:
    """Check fn(k, d_model, base) -> the (d_model, d_model) matrix M with PE[t + k] = M @ PE[t].

    PE is `sinusoidal_positional_encoding` (sin at column 2i, cos at 2i+1). Compares with the
    library's `offset_matrix` and names the usual mistakes: the transposed (wrong-way) rotation,
    the rotate-half pair layout, frequencies base^(-i/d) instead of base^(-2i/d), the identity.
    Each named mistake gets a two-stage hint (`staged_hint`): its symptom first, the fix (the correct
    block, layout or exponent) only when the same mistake is checked again.
    """
    cases = ((3, 8, 10000.0), (5, 16, 100.0), (11, 12, 500.0))
    for k, d, base in cases:
        value, err = call_answer(fn, k, d, base)
        if err is not None:
            return verdict(False, failure(f"fn({k}, {d}, {base:g})", err) + ".")
        value, problem = tensor_answer(value, f"fn({k}, {d}, {base:g})")
        if problem is not None:
            return verdict(False, problem)
        if tuple(value.shape) != (d, d):
            return verdict(False, f"fn({k}, {d}, {base:g}) has shape {tuple(value.shape)}; it must be (d_model, "
                                  f"d_model) = ({d}, {d}), one row and one column per PE dimension.")
        M = value.double()
        if not torch.isfinite(M).all():
            return verdict(False, f"fn({k}, {d}, {base:g}) contains NaN or inf: every entry of M_k is a cos, a sin or 0.")
        want = offset_matrix(k, d, base)
        if torch.allclose(M, want, atol=1e-5):
            continue
        phi = torch.from_numpy(pair_frequencies(d, base)) * k  # (d/2,)
        where = f"for k={k}, d_model={d}, base={base:g}"
        if torch.allclose(M, torch.eye(d, dtype=torch.float64), atol=1e-6):
            return verdict(False, f"Your matrix is the identity {where}: it maps PE[t] to itself, not to PE[t+k]. "
                                  "Each (sin, cos) pair must turn by the angle omega_i * k.")
        if torch.allclose(M, want.T, atol=1e-5):
            # two-stage hint: the symptom first, the matrix only when the same mistake comes back
            symptom = (f"Your rotation turns the wrong way {where}: it maps PE[t] to PE[t-k], not PE[t+k]. Check "
                       "where +sin(phi) must sit, from the angle-addition identity for sin(omega_i (t+k)) with the "
                       "pair stored as (sin, cos). (Swapping the members of a pair, (cos, sin) where the table "
                       "stores (sin, cos), gives this same matrix.)")
            fix = ("The fix: sin(a+b) = sin a cos b + cos a sin b puts +sin(phi) in the top-right, so each block is "
                   "R(phi) = [[cos phi, sin phi], [-sin phi, cos phi]], the transpose of the textbook rotation.")
            return verdict(False, staged_hint("offset_matrix: turns the wrong way", symptom, fix))
        blocks = [(2 * i, 2 * i + 2) for i in range(d // 2)]
        eye2 = torch.eye(2, dtype=torch.float64)
        right = [torch.allclose(M[a:b, a:b], want[a:b, a:b], atol=1e-5) for a, b in blocks]
        still = [torch.allclose(M[a:b, a:b], eye2, atol=1e-6) and not r for (a, b), r in zip(blocks, right)]
        outside = M.clone()
        for a, b in blocks:
            outside[a:b, a:b] = 0
        if any(still) and all(r or s for r, s in zip(right, still)) and outside.abs().max() <= 1e-6:
            idle = [i for i, s in enumerate(still) if s]
            return verdict(False, staged_hint(
                "offset_matrix: partial rotation",
                f"Partial rotation {where}: the blocks of pairs {idle} are the identity, so those pairs do not turn; "
                f"only pairs {[i for i, r in enumerate(right) if r]} do.",
                "Every pair i = (column 2i, column 2i + 1) turns by omega_i * k: build all d_model / 2 blocks (a loop "
                "over range(d_model // 2))."))
        if value.dtype in (torch.float16, torch.bfloat16) and torch.allclose(M, want, atol=2e-2):
            return verdict(False, f"Right up to rounding, but your matrix is {value.dtype} {where}: its entries are "
                                  "off by up to " f"{float((M - want).abs().max()):.2g}. Build it in float32.")
        if torch.allclose(M, _blocks(phi, layout="half"), atol=1e-5) or torch.allclose(
            M, _blocks(phi, layout="half", sign=-1), atol=1e-5
        ):
            return verdict(False, staged_hint(
                "offset_matrix: rotate-half layout",
                f"Your blocks couple column i with column i + d/2 {where} (the rotate-half layout of GPT-NeoX and "
                "LLaMA RoPE), so M @ PE[t] mixes columns that hold different pairs. Look at which columns "
                "sinusoidal_positional_encoding gives each pair's sin and cos.",
                "The sinusoidal table interleaves its pairs: sin at column 2i, cos at column 2i + 1."))
        half_rate = frequency_ladder(2 * d, base)[: d // 2].double() * k  # base^(-i/d) * k
        if torch.allclose(M, _blocks(half_rate), atol=1e-5) or torch.allclose(M, _blocks(half_rate, sign=-1), atol=1e-5):
            return verdict(False, staged_hint(
                "offset_matrix: base^(-i/d)",
                f"Right structure, wrong frequencies {where}: your pair i turns by base^(-i/d) * k, so your slowest "
                f"pair turns at {float(half_rate[-1]) / k:.3g} rad per token where the table's turns at "
                f"{float(phi[-1]) / k:.3g}. Read the exponent off the table's formula.",
                "Pair i turns at omega_i = base^(-2i/d): the exponent is the even column index 2i over d."))
        off = M.clone()
        for i in range(d // 2):
            off[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = 0
        if off.abs().max() > 1e-6:
            return verdict(False, f"Your matrix has entries outside the 2x2 blocks on the diagonal {where}. Pair i "
                                  "only ever mixes columns 2i and 2i + 1 with each other.")
        pe = sinusoidal_positional_encoding(40 + k, d, base).double()  # (40 + k, d)
        gap = (pe[k:] - pe[:-k] @ M.T).abs().max().item() if k else 0.0
        return verdict(False, f"M @ PE[t] misses PE[t+k] by up to {gap:.2g} {where}. Build pair i's block from the "
                              "angle-addition identities for sin(omega_i (t+k)) and cos(omega_i (t+k)).")
    return verdict(True, "M_k maps PE[t] to PE[t+k] for every t tested, with the (sin, cos) layout and the "
                         "frequencies omega_i = base^(-2i/d).")
