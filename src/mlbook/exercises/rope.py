"""Exercise checkers for section 2.4: RoPE.

check_rope_rotation(fn)        fn(x, m, base) -> R_m x in the half layout, written from scratch
check_pairing_permutation(fn)  fn(d_head) -> the channel permutation from the half to the interleaved layout

Each checker runs the reader's function on small cases, compares it with the library
(`RotaryEmbedding`, `convert_rotary_weights`), and when they disagree compares it with the
library run with one mistake planted (the sine's sign flipped, the other pairing, angles not
shared by the two halves of a pair, base^(-i/d) frequencies, angles in bfloat16, the inverse
permutation) to name the one that was made. It prints one verdict and returns True or False;
it never raises.
"""

from __future__ import annotations

from typing import Callable

import torch

from mlbook.analysis.rope import pairing_permutation
from mlbook.exercises.common import (call_answer, failure, guarded, pair_kinds, pair_kinds_message, tensor_answer,
                                     verdict)
from mlbook.transformer.positional import RotaryEmbedding, apply_rotary, frequency_ladder

__all__ = ["check_rope_rotation", "check_pairing_permutation"]


# ---------------------------------------------------------------------------
# check_rope_rotation: R_m x for one position, half layout
# ---------------------------------------------------------------------------


def _rotate_with(x: torch.Tensor, angle: torch.Tensor, pairing: str = "half", sign: float = 1.0) -> torch.Tensor:
    """The library's apply_rotary with a given angle per column: x (..., d), angle (d,) -> (..., d)."""
    cos, sin = angle.cos()[None], sign * angle.sin()[None]  # (1, d) each
    return apply_rotary(x.unsqueeze(-2), cos, sin, pairing).squeeze(-2)  # (..., d)


def _half_table(per_pair: torch.Tensor) -> torch.Tensor:
    return torch.cat([per_pair, per_pair])  # (d,) pair i at columns i and i + d/2


def _candidates(d: int, m: int, base: float) -> list[tuple[str, Callable[[torch.Tensor], torch.Tensor], str]]:
    """(name, rotation with that mistake, message) for the usual mistakes; the first entry is the right answer."""
    theta = frequency_ladder(d, base)  # (d/2,) float32, base^(-2i/d)
    angle = m * theta.double()  # (d/2,)
    theta_i_over_d = frequency_ladder(2 * d, base)  # (d,) base^(-2j/(2d)) = base^(-j/d)
    bf16_all = (torch.tensor(float(m)).bfloat16() * theta.bfloat16()).double()  # (d/2,) product in bf16
    bf16_freq = m * theta.bfloat16().double()  # (d/2,) inv_freq rounded to bf16
    bf16_product = (m * theta.bfloat16()).double()  # (d/2,) m exact, inv_freq and the product in bf16
    bf16_angle = (m * theta).bfloat16().double()  # (d/2,) float32 ladder and product, the angle cast to bf16
    fp16_all = (torch.tensor(float(m)).half() * theta.half()).double()  # (d/2,) product in float16
    fp16_freq = m * theta.half().double()  # (d/2,) inv_freq rounded to float16
    rope = RotaryEmbedding(d, base)
    return [
        ("correct", lambda x: rope.rotate(x.unsqueeze(-2), offset=m).squeeze(-2), ""),
        ("identity", lambda x: x, "Your function returns x unchanged: pair i must turn by the angle m * theta_i."),
        ("sign", lambda x: _rotate_with(x, _half_table(angle), sign=-1.0),
         "Wrong sign of the sine term: you turn each pair by -m * theta_i (clockwise), i.e. you return R_{-m} x. "
         "For a pair (a, b) the rotation is (a cos t - b sin t, b cos t + a sin t): x * cos + rotate_half(x) * sin, "
         "with rotate_half(x) = [-x2, x1]. Scores would still depend on n - m only, so a relative-position test "
         "cannot catch this; a weight port would."),
        ("interleaved", lambda x: _rotate_with(x, angle.repeat_interleave(2), pairing="interleaved"),
         "Wrong pairing: you rotate adjacent dims (2i, 2i + 1), the interleaved layout of RoFormer and GPT-J. "
         "This exercise (and the library, GPT-NeoX and LLaMA) pairs dim i with dim i + d/2: rotate_half(x) = "
         "[-x2, x1] with x1, x2 the two halves."),
        ("interleaved_table", lambda x: _rotate_with(x, angle.repeat_interleave(2)),
         "Angles not shared across halves: your cos/sin table repeats each angle in adjacent columns "
         "(repeat_interleave, the GPT-J table) but the rotation pairs dim i with dim i + d/2, so the two halves "
         "of a pair turn by different angles. Build the table as torch.cat([angles, angles]): column i and "
         "column i + d/2 must hold the same angle m * theta_i."),
        ("one_angle_per_dim", lambda x: _rotate_with(x, m * theta_i_over_d.double()),
         "Angles not shared across halves: you give each of the d dims its own angle (d frequencies "
         "base^(-j/d), j = 0..d-1). There are d/2 frequencies, one per pair: theta_i = base^(-2i/d) for "
         "i < d/2, and dims i and i + d/2 share it (torch.cat([angles, angles]))."),
        ("first_half_only", lambda x: _rotate_with(x, torch.cat([angle, torch.zeros_like(angle)])),
         "Angles not shared across halves: only the first half of the cos/sin table holds the angles (the second "
         "half acts as angle 0), so each pair is not a rotation. Column i + d/2 needs the same angle as column i."),
        ("exponent_i", lambda x: _rotate_with(x, _half_table(m * theta_i_over_d[: d // 2].double())),
         "Wrong frequencies: you used theta_i = base^(-i/d). The exponent is -2i/d (2i is the index of the "
         "pair's first dim in the interleaved counting), so theta_i = base^(-2i/d_head), from 1 down to about "
         "1/base."),
        ("bf16", lambda x: _rotate_with(x, _half_table(bf16_all)),
         "Angles computed in bfloat16, position included: bfloat16 keeps 8 significant bits, so m itself is "
         "rounded (3000 becomes 3008), and so are theta_i and their product. The score then depends on where "
         "the two tokens sit, not only on n - m. Compute m * theta_i in float32 (or float64), take cos and "
         "sin, and only then cast to x's dtype."),
        ("bf16_product", lambda x: _rotate_with(x, _half_table(bf16_product)),
         "Frequencies and the product m * theta_i in bfloat16 (m itself is exact, but m * theta with a bfloat16 "
         "theta is rounded to 8 significant bits): at m = 3000 the spacing of bfloat16 numbers near the angle is "
         "16 radians, and the rounding depends on m, so the score depends on where the tokens sit, not only on "
         "n - m. Keep theta_i and m * theta_i in float32, take cos and sin, and only then cast to x's dtype."),
        ("bf16_freq", lambda x: _rotate_with(x, _half_table(bf16_freq)),
         "Your frequency ladder is rounded to bfloat16 (theta_i off by up to 0.4%); the positions and the "
         "product are exact. Used everywhere that is just another ladder and the score stays relative, but a "
         "model trained with float32 frequencies sees the phase of pair i off by |n - m| * |theta~_i - theta_i|, "
         "an error that grows with the distance between query and key (radians at m = 3000 here). Keep inv_freq "
         "in float32, whatever dtype the model runs in."),
        ("bf16_angle", lambda x: _rotate_with(x, _half_table(bf16_angle)),
         "Your angles are rounded to bfloat16 after a float32 product: theta_i and m * theta_i are right, but "
         "the angle table is cast to bfloat16 before cos and sin (the emb.to(x.dtype) slip). bfloat16 keeps 8 "
         "significant bits, so near an angle of 3,000 radians (pair 0 at m = 3000) the rounding step is 16 "
         "radians, and the rounding depends on m: the score then depends on where the tokens sit, not only on "
         "n - m. Take cos and sin of the float32 angles and cast those to x's dtype, not the angles."),
        ("fp16", lambda x: _rotate_with(x, _half_table(fp16_all)),
         "Angles computed in float16: your answer is close at small positions but off by up to a radian at "
         "large m. float16 keeps 11 significant bits, so above m = 2048 the product m * theta_i is rounded to "
         "a multiple of 2 (and past 65504 it overflows to inf). Compute m * theta_i in float32 (or float64), "
         "take cos and sin, and only then cast to x's dtype."),
        ("fp16_freq", lambda x: _rotate_with(x, _half_table(fp16_freq)),
         "Your frequency ladder is rounded to float16 (theta_i off by up to 0.05%, 11 significant bits); the "
         "positions and the product are exact. Used everywhere that is just another ladder and the score stays "
         "relative, but a model trained with float32 frequencies sees the phase of pair i off by "
         "|n - m| * |theta~_i - theta_i|, an error that grows with the distance between query and key (up to "
         "0.07 rad on the 8-wide head and 0.48 on the 64-wide one at m = 3000 here). Keep inv_freq in "
         "float32, whatever dtype the model runs in."),
    ]


_ROTATION_CASES = ((8, 5, 10000.0), (16, 37, 100.0), (8, 3000, 10000.0))
_LOW_PRECISION = ("bf16", "bf16_product", "bf16_freq", "bf16_angle", "fp16", "fp16_freq")


_TELL_APART = ((8, 3000, 10000.0), (64, 3000, 10000.0))  # at d_head = 8 a bf16 product and a bf16 angle agree


def _low_precision_message(fn: Callable, fallback: str) -> str:
    """Which low-precision recipe fn follows, told apart at m = 3000 (at small m a rounded position is exact,
    so bfloat16 positions, products and ladders can look alike) on a head of 8 and one of 64 (at 8 a bfloat16
    product and a float32 product rounded to bfloat16 give the same angles): the closest recipe's message, or
    `fallback`."""
    gaps: dict[str, float] = {}
    messages: dict[str, str] = {}
    for d, m, base in _TELL_APART:
        x = torch.randn(3, d, generator=torch.Generator().manual_seed(1))  # (3, d_head)
        value, err = call_answer(fn, x.clone(), m, base)
        if err is not None or not isinstance(value, torch.Tensor) or tuple(value.shape) != tuple(x.shape):
            return fallback
        got = value.double()
        for name, rotate, message in _candidates(d, m, base)[1:]:
            if name in _LOW_PRECISION:
                gaps[name] = max(gaps.get(name, 0.0), float((got - rotate(x).double()).abs().max()))
                messages[name] = message
    name = min(gaps, key=gaps.get)
    (_, m, base) = _TELL_APART[0]
    heads = " and ".join(str(d) for d, _, _ in _TELL_APART)
    where = f"at m = {m}, d_head = {heads}, base = {base:g}"
    return f"{messages[name]} (Seen {where}.)" if gaps[name] <= 2e-2 else fallback


@guarded
def check_rope_rotation(fn: Callable[[torch.Tensor, int, float], object]) -> bool:
    """Check fn(x, m, base) -> R_m x: every row of x (..., d_head) rotated as if at position m, half layout.

    Pair i is (x_i, x_{i + d/2}), turned counter-clockwise by m * theta_i, theta_i = base^(-2i/d_head):
    (a, b) -> (a cos t - b sin t, b cos t + a sin t). Compared with `RotaryEmbedding(d_head, base).rotate`
    at m = 5, 37 and 3000; the mistakes named: no rotation, the sine's sign, interleaved pairing,
    angles not shared by the two halves of a pair, base^(-i/d) frequencies, angles in bfloat16 or
    float16 (positions, ladder, product, or float32 angles cast to bfloat16), only some pairs rotated,
    the two members of a pair swapped; and a result in another dtype than x's (a float64 q or k breaks the
    attention matmul with float32 values).
    """
    gen = torch.Generator().manual_seed(0)
    for d, m, base in _ROTATION_CASES:
        x = torch.randn(3, d, generator=gen)  # (3, d_head) float32 rows
        where = f"at m = {m}, d_head = {d}, base = {base:g}"
        call = f"fn(x, {m}, {base:g})"
        value, err = call_answer(fn, x.clone(), m, base)
        if err is not None:
            return verdict(False, failure(f"{call} with x of shape {tuple(x.shape)}", err) + ".")
        value, problem = tensor_answer(value, call, "a torch.Tensor shaped like x")
        if problem is not None:
            return verdict(False, problem)
        if tuple(value.shape) != tuple(x.shape):
            return verdict(False, f"{call} has shape {tuple(value.shape)}; it must keep the shape of "
                                  f"x, {tuple(x.shape)} (each row rotated on its own).")
        if not value.is_floating_point():
            return verdict(False, f"fn returned dtype {value.dtype}; return a floating-point tensor.")
        if value.dtype in (torch.bfloat16, torch.float16):
            return verdict(False, f"For float32 x you return {value.dtype}: the rotation (and the angles before it) "
                                  "should run in float32; return x's dtype.")
        got = value.double()
        if not torch.isfinite(got).all():
            return verdict(False, f"fn returned NaN or inf {where}.")
        candidates = _candidates(d, m, base)
        want = candidates[0][1](x).double()
        # float32 angles are exact to about 1e-7 * m radians: allow for a float64 answer at m = 3000
        tol = 1e-4 if m < 1000 else 2e-3
        if torch.allclose(got, want, atol=tol, rtol=0):
            if value.dtype != x.dtype:
                return verdict(False, f"Right values, but for {x.dtype} x you return {value.dtype} {where}. Return "
                                      "x's dtype (.to(x.dtype) after computing in float64): a float64 q or k would "
                                      "make the scores float64, and the attention matmul with float32 values "
                                      "refuses mixed dtypes.")
            continue
        for name, rotate, message in candidates[1:]:
            if torch.allclose(got, rotate(x).double(), atol=tol, rtol=0):
                seen = f"{message} (Seen {where}.)"
                return verdict(False, _low_precision_message(fn, seen) if name in _LOW_PRECISION else seen)
        angle = m * frequency_ladder(d, base).double()  # (d/2,) the right angle of each pair
        problem = pair_kinds_message(pair_kinds(x, got, angle.cos(), angle.sin(), tol), where)
        if problem is not None:
            return verdict(False, problem)
        near = []
        for name, rotate, message in candidates[1:]:  # a low-precision recipe of its own: closest of ours
            if name in _LOW_PRECISION:
                gap = float((got - rotate(x).double()).abs().max())
                if gap <= 2e-2:
                    near.append((gap, message))
        if near:
            return verdict(False, _low_precision_message(fn, f"{min(near)[1]} (Seen {where}.)"))
        gap = (got - want).abs().max().item()
        if m >= 1000 and gap > 1e-3:
            return verdict(False, f"Right at m = 5 and 37, but off by up to {gap:.2g} {where}: the angles are "
                                  "not accurate at large positions. Compute m * theta_i in float32 or float64, "
                                  "not bfloat16 or float16.")
        same_norm = torch.allclose(got.norm(dim=-1), x.double().norm(dim=-1), rtol=1e-4)
        hint = ("" if same_norm else " It also changes the length of the rows, so it is not a rotation: each pair "
                "must keep its length.")
        return verdict(False, f"Your result differs from R_m x by up to {gap:.3g} {where}.{hint} Pair i = "
                              "(x_i, x_(i+d/2)) turns by m * theta_i, theta_i = base^(-2i/d_head): "
                              "x * cos + rotate_half(x) * sin with cos, sin = torch.cat([angles, angles]).cos() "
                              "and .sin().")
    return verdict(True, "R_m x matches the library at m = 5, 37 and 3000: pairs (i, i + d/2), counter-clockwise, "
                         "theta_i = base^(-2i/d_head), float32 angles.")


# ---------------------------------------------------------------------------
# check_pairing_permutation: the channel permutation between the layouts
# ---------------------------------------------------------------------------


@guarded
def check_pairing_permutation(fn: Callable[[int], object]) -> bool:
    """Check fn(d_head) -> perm, a (d_head,) integer tensor with x_interleaved = x_half[perm].

    The property that matters: rotating x in the half layout and then permuting equals permuting
    and then rotating in the interleaved layout, (R_m^half x)[perm] = R_m^inter (x[perm]). Compared
    with the permutation `convert_rotary_weights` applies; names the inverse permutation, the identity
    and an answer that is not a permutation.
    """
    for d in (8, 12, 64):
        value, err = call_answer(fn, d)
        if err is not None:
            return verdict(False, failure(f"fn({d})", err) + ".")
        if not isinstance(value, torch.Tensor) and not isinstance(value, str):
            try:
                value = torch.as_tensor(value)
            except Exception:  # noqa: BLE001 - not a sequence of numbers: tensor_answer says what it is
                pass
        value, problem = tensor_answer(value, f"fn({d})", "a tensor (or list) of d_head integers")
        if problem is not None:
            return verdict(False, problem)
        if value.is_floating_point() or value.is_complex() or value.dtype == torch.bool:
            return verdict(False, f"fn({d}) has dtype {value.dtype}; return integer indices (torch.long).")
        perm = value.long().flatten()
        if perm.numel() != d:
            return verdict(False, f"fn({d}) has {perm.numel()} entries; it needs one index per dim, {d}.")
        if sorted(perm.tolist()) != list(range(d)):
            return verdict(False, f"fn({d}) is not a permutation of 0..{d - 1} (some index is repeated or missing): "
                                  "every channel must appear exactly once.")
        want = pairing_permutation(d)  # (d,) [0, d/2, 1, d/2 + 1, ...]
        if torch.equal(perm, want):
            continue
        where = f"for d_head = {d}"
        if torch.equal(perm, torch.arange(d)):
            return verdict(False, f"That is the identity {where}: the layouts store a pair in different channels. "
                                  "Interleaved slot 2i holds half dim i, slot 2i + 1 holds half dim i + d/2.")
        swapped = want.reshape(-1, 2).flip(-1).flatten()  # [d/2, 0, d/2 + 1, 1, ...]
        if torch.equal(perm, swapped) or torch.equal(perm, torch.argsort(swapped)):
            return verdict(False, f"Swapped members of each pair {where}: your slot 2i holds half dim i + d/2 and slot "
                                  "2i + 1 half dim i. The pair's first member, the one that comes first in the "
                                  "rotation (a cos t - b sin t), is half dim i: slot 2i must hold it, so perm[2i] = i "
                                  "and perm[2i + 1] = i + d/2. With the members exchanged every pair turns the "
                                  "other way.")
        if torch.equal(perm, torch.argsort(want)):
            return verdict(False, f"That is the inverse permutation {where}: x_half[perm] must give the interleaved "
                                  "vector, so perm[2i] = i and perm[2i + 1] = i + d/2 (perm = [0, d/2, 1, d/2 + 1, "
                                  "...]). Yours maps the other way: interleaved -> half.")
        x = torch.randn(d, generator=torch.Generator().manual_seed(d), dtype=torch.float64)  # (d,) half layout
        rope_h, rope_i = RotaryEmbedding(d, pairing="half"), RotaryEmbedding(d, pairing="interleaved")
        lhs = rope_h.rotate(x[None], offset=7)[0][perm]  # (d,) rotate, then permute
        rhs = rope_i.rotate(x[perm][None], offset=7)[0]  # (d,) permute, then rotate
        gap = (lhs - rhs).abs().max().item()
        if gap < 1e-9:
            return verdict(False, f"Your permutation commutes with the rotation {where}, but it also reorders the "
                                  "pairs: interleaved pair i must be half pair i (theta_i is shared), so "
                                  "perm[2i] = i and perm[2i + 1] = i + d/2.")
        return verdict(False, f"With your permutation {where}, rotating then permuting differs from permuting then "
                              f"rotating by up to {gap:.2g}: some pair is split across two pairs. Interleaved slot "
                              "2i must hold half dim i and slot 2i + 1 half dim i + d/2.")
    return verdict(True, "perm = [0, d/2, 1, d/2 + 1, ...]: x_half[perm] is the interleaved vector, and rotating "
                         "commutes with it, as convert_rotary_weights uses it.")
