"""Exercise checkers for section 2.3 (exercise 5): Swin's 2-D relative bias.

`check_swin_index`: the (w^2, w^2) table row for every (query cell, key cell) pair of a w x w
window, index = (dy + w - 1)(2w - 1) + (dx + w - 1) with (dy, dx) = query cell minus key cell
and cells numbered row-major. `check_swin_bias`: gathering a ((2w-1)^2, H) table into the
(H, w^2, w^2) bias. Each compares with `RelativePositionBias2D` and names the usual mistakes:
an off-by-one shift, swapped axes (or column-major cells), key minus query, the wrong stride,
a missing permute. Each named mistake gets a two-stage hint (`staged_hint`): the symptom first,
the fix when the same mistake is checked again.
"""

from __future__ import annotations

from typing import Callable

import torch

from mlbook.analysis.relative import swin_index, swin_table_entries
from mlbook.exercises.common import call_answer, failure, guarded, staged_hint, tensor_answer, verdict

__all__ = ["check_swin_index", "check_swin_bias"]

_WINDOWS = (7, 3, 4)


def _variant(
    w: int, *, sign: int = 1, swap: bool = False, shift: int | None = None, stride: int | None = None
) -> torch.Tensor:
    """An index built with one planted mistake (the defaults reproduce Swin's). Numbering cells
    column-major gives the same index as swap=True, so it needs no variant of its own."""
    shift = w - 1 if shift is None else shift
    stride = 2 * w - 1 if stride is None else stride
    ys, xs = torch.meshgrid(torch.arange(w), torch.arange(w), indexing="ij")  # (w, w)
    cells = torch.stack([ys.flatten(), xs.flatten()])  # (2, w^2) (y, x) of cell y * w + x
    delta = sign * (cells[:, :, None] - cells[:, None, :])  # (2, w^2, w^2) (dy, dx)
    dy, dx = (delta[1], delta[0]) if swap else (delta[0], delta[1])
    return (dy + shift) * stride + (dx + shift)  # (w^2, w^2)


def _offsets(w: int) -> tuple[torch.Tensor, torch.Tensor]:
    ys, xs = torch.meshgrid(torch.arange(w), torch.arange(w), indexing="ij")
    cells = torch.stack([ys.flatten(), xs.flatten()])  # (2, w^2) row-major
    delta = cells[:, :, None] - cells[:, None, :]  # (2, w^2, w^2)
    return delta[0], delta[1]


@guarded
def check_swin_index(fn: Callable[[int], object]) -> bool:
    """Check fn(window) -> (w^2, w^2) integer tensor of table rows, for windows 7, 3 and 4.

    Row q, column k: query cell q, key cell k, both numbered y * w + x. The answer must equal
    RelativePositionBias2D's index, (dy + w - 1)(2w - 1) + (dx + w - 1), (dy, dx) = q - k.
    """
    for w in _WINDOWS:
        value, err = call_answer(fn, w)
        if err is not None:
            return verdict(False, failure(f"fn({w})", err) + ".")
        value, problem = tensor_answer(value, f"fn({w})", "a torch.Tensor of integer table rows")
        if problem is not None:
            return verdict(False, problem)
        n = w * w
        if tuple(value.shape) != (n, n):
            return verdict(False, f"fn({w}) has shape {tuple(value.shape)}; it must be (w^2, w^2) = ({n}, {n}): one "
                                  "row per query cell and one column per key cell of the window.")
        if value.is_floating_point() or value.is_complex() or value.dtype == torch.bool:
            return verdict(False, f"fn({w}) has dtype {value.dtype}; table rows are looked up with an integer "
                                  "tensor (torch.long).")
        got = value.long()
        want = swin_index(w)
        if torch.equal(got, want):
            continue
        size = swin_table_entries(w)
        where = f"for window {w}"
        diff = (got != want).nonzero()[0].tolist()  # the first (query, key) pair read from the wrong row
        q, k = diff
        seen = (f"Query cell (y, x) = {divmod(q, w)}, key cell {divmod(k, w)} reads row {int(got[q, k])} instead of "
                f"row {int(want[q, k])} {where}.")
        lo, hi, rows = int(got.min()), int(got.max()), torch.unique(got).numel()
        # the swapped-axes variants first go wrong at query (0, 0), key (0, 1): one step in x from the diagonal
        centre = int(want[q, q])  # the row of offset (0, 0), the same in every variant
        step = (f"The two cells are in the same row, one column apart, so their offset differs by one step in x "
                f"from that of a cell paired with itself (row {centre}).")
        # (answer, key, symptom, fix): each named mistake is a two-stage hint, the symptom first
        named = [
            (_variant(w, swap=True), "swapped axes",
             f"{step} Swin's row goes from {centre} to {int(want[q, k])}, yours to {int(got[q, k])}. Which part "
             "of your index did that step in x move?",
             "Your axes are swapped: you put dx in the slow position. Swin's table is indexed "
             "(dy + w - 1) * (2w - 1) + (dx + w - 1): rows of the 2-D table are dy, columns dx. (Numbering the "
             "cells column-major, x * w + y, instead of row-major gives exactly this index: if dy is already the "
             "multiplied one, check how you numbered the cells.)"),
            (_variant(w, sign=-1), "key minus query",
             "Every index is valid and translation invariant, but each offset is read mirrored: which cell is "
             "subtracted from which?",
             "You used key minus query. Swin (and RelativePositionBias2D) take (dy, dx) = query cell - key cell, so "
             "a pretrained table would be read back to front."),
            (_variant(w, sign=-1, swap=True), "two slips",
             f"Two things are off. {step} Swin's row goes from {centre} to {int(want[q, k])}, yours to "
             f"{int(got[q, k])}. Compare how far, and in which direction, your row moved.",
             "Two slips: key minus query instead of query minus key, and dx in the slow position instead of dy."),
            (_variant(w, shift=w), "shift w",
             f"Your largest index is {hi}, past the table's {size} rows (0..{size - 1}): by how much must the "
             "offsets be shifted so that the smallest is 0?",
             f"Off by one: you shifted the offsets by w = {w} instead of w - 1 = {w - 1}. The offsets run over "
             f"[-(w-1), w-1], so adding w - 1 maps them onto 0..2w-2."),
            (_variant(w, shift=w - 2), "shift w - 2",
             f"Your smallest index is {lo}: negative, so it reads the table from the end. By how much must the "
             "offsets be shifted so that the smallest is 0?",
             f"Off by one: you shifted the offsets by w - 2 = {w - 2} instead of w - 1 = {w - 1}."),
            (_variant(w, stride=w), "stride w",
             f"Your {size} offsets use only {rows} distinct rows: different offsets share a row. How many "
             "values does dx + w - 1 take?",
             f"Wrong stride: you multiplied (dy + w - 1) by w = {w}. There are 2w - 1 = {2 * w - 1} values of "
             "dx + w - 1, so the stride must be 2w - 1."),
            (_variant(w, stride=2 * w), "stride 2w",
             f"No two offsets collide, but your indices run up to {hi}, past the table's {size} rows, and leave "
             "gaps. How many values does dx + w - 1 take?",
             f"Wrong stride: 2w = {2 * w} instead of 2w - 1 = {2 * w - 1}."),
            (_variant(w, shift=0), "no shift",
             f"Your smallest index is {lo}: negative for half the pairs, since dy and dx are negative there.",
             "You forgot to shift the offsets: add w - 1 to each of dy and dx before combining them."),
        ]
        for cand, key, symptom, fix in named:
            if torch.equal(got, cand):
                return verdict(False, staged_hint(f"swin_index: {key}", f"{seen} {symptom}", fix))
        if int(got.min()) < 0 or int(got.max()) >= size:
            return verdict(False, f"Your indices run from {int(got.min())} to {int(got.max())} {where}; the table "
                                  f"has rows 0..{size - 1} ((2w - 1)^2 = {size}).")
        dy, dx = _offsets(w)
        key = (dy + w - 1) * (2 * w - 1) + (dx + w - 1)  # the offset, as one number
        for k in range(size):
            vals = got[key == k]
            if vals.numel() and (vals != vals[0]).any():
                return verdict(False, f"Not translation invariant {where}: pairs with the same offset (dy, dx) "
                                      "get different rows. The index must depend on the cells only through "
                                      "their difference.")
        if torch.unique(got).numel() < size:
            return verdict(False, f"Different offsets share a row {where}: your {size} offsets use only "
                                  f"{torch.unique(got).numel()} distinct rows.")
        return verdict(False, f"A consistent labelling {where}, but not Swin's: use (dy + w - 1) * (2w - 1) + "
                              "(dx + w - 1) with (dy, dx) = query cell - key cell.")
    return verdict(True, "(dy + w - 1)(2w - 1) + (dx + w - 1) for every pair, with (dy, dx) = query minus key and "
                         "cells numbered row-major: the same rows as RelativePositionBias2D.")


@guarded
def check_swin_bias(fn: Callable[[torch.Tensor, int], object]) -> bool:
    """Check fn(table, window) -> (H, w^2, w^2): the bias gathered from a ((2w-1)^2, H) table with
    Swin's index, for windows 7 and 3 with H = 4 and 3 heads (different, so swapped dims show)."""
    for w, H in ((7, 4), (3, 3)):
        gen = torch.Generator().manual_seed(w)
        table = torch.randn(swin_table_entries(w), H, generator=gen)  # ((2w-1)^2, H)
        value, err = call_answer(fn, table.clone(), w)
        where = f"for window {w}, H = {H}"
        if err is not None:
            return verdict(False, failure(f"fn(table, {w})", err) + ".")
        value, problem = tensor_answer(value, f"fn(table, {w})")
        if problem is not None:
            return verdict(False, problem)
        n = w * w
        gathered = table[swin_index(w).reshape(-1)].reshape(n, n, H)  # (w^2, w^2, H)
        want = gathered.permute(2, 0, 1)  # (H, w^2, w^2)
        if tuple(value.shape) == (n, n, H):
            if torch.allclose(value.float(), gathered):
                return verdict(False, staged_hint(
                    "swin_bias: heads last",
                    f"Right values, wrong layout {where}: you return (w^2, w^2, H), but attention scores are "
                    "(H, T_q, T_k), and the bias is added to them.",
                    "Move the head axis to the front: .permute(2, 0, 1)."))
        if tuple(value.shape) != (H, n, n):
            return verdict(False, f"Shape {tuple(value.shape)} {where}; it must be (H, w^2, w^2) = ({H}, {n}, {n}).")
        if not value.is_floating_point():
            return verdict(False, f"fn(table, {w}) has dtype {value.dtype}: the bias is gathered from the float table, "
                                  "so it keeps the table's dtype (torch.float32).")
        got = value.float()
        if not torch.isfinite(got).all():
            return verdict(False, f"Your bias contains NaN or inf {where}: every entry is a value of the table.")
        if value.dtype in (torch.float16, torch.bfloat16) and torch.allclose(got, want, rtol=1e-2, atol=1e-2):
            return verdict(False, f"Right values up to rounding, but dtype {value.dtype} {where}: the table is float32, "
                                  "and gathering keeps its dtype; a cast to half precision rounds every bias. Leave "
                                  "the dtype as it is (indexing and permute do not change it).")
        if torch.allclose(got, want):
            if value.dtype != table.dtype:
                return verdict(False, f"Right values, but dtype {value.dtype} {where}: the bias is added to float32 "
                                      f"scores, and a {value.dtype} bias turns them {value.dtype}, which the attention "
                                      "matmul with float32 values then refuses. Keep the table's dtype: indexing "
                                      "and permute do not change it.")
            continue
        if torch.allclose(got, gathered.reshape(H, n, n)):
            return verdict(False, staged_hint(
                "swin_bias: reshape",
                f"The shape is right, but your bias[0, 0, 1] is {float(got[0, 0, 1]):.4g} where head 0's "
                f"table[index[0, 1], 0] is {float(want[0, 0, 1]):.4g} {where}; it is another head's value, so heads "
                "and positions are mixed. What does your last step do to the order of the entries in memory?",
                "You reshaped (w^2, w^2, H) to (H, w^2, w^2). A reshape keeps the memory order and scrambles heads "
                "with positions; move the head axis with permute(2, 0, 1) instead."))
        if torch.allclose(got, want.transpose(-1, -2)):
            return verdict(False, staged_hint(
                "swin_bias: transposed",
                f"Your bias is transposed {where}: your entry [h, q, k] holds the value for query cell k and key "
                "cell q.",
                "Entry [h, q, k] must be table[index[q, k], h], for query cell q and key cell k. Did you index with "
                "(key - query)?"))
        return verdict(False, f"The values differ from table[index[q, k], h] {where}. Gather the table with the "
                              "flattened index, reshape to (w^2, w^2, H), then permute to (H, w^2, w^2).")
    return verdict(True, "bias[h, q, k] = table[index[q, k], h], shape (H, w^2, w^2), as RelativePositionBias2D "
                         "computes it.")
