"""Exercise checkers for section 2.2: learned absolute positions.

`check_expected_row_updates`: the expected number of training steps in which row p of a
learned table receives a gradient, given the distribution of sequence lengths and the batch
size. The usual mistakes are an off-by-one in "which lengths reach row p", forgetting that a
batch holds B sequences, and counting sequences instead of steps.
"""

from __future__ import annotations

from typing import Callable

import torch

from mlbook.analysis.learned import expected_row_examples, expected_row_updates, short_length_distribution
from mlbook.exercises.common import (call_answer, failure, fmt_pair, guarded, rtol_for, staged_hint, tensor_answer,
                                     verdict)

__all__ = ["check_expected_row_updates"]


def _cases() -> list[tuple[str, torch.Tensor, int, int]]:
    T_max = 12
    point = torch.zeros(T_max + 1, dtype=torch.float64)
    point[5] = 1.0  # every sequence has length 5: rows 0..4 always, rows 5.. never
    uniform = torch.zeros(T_max + 1, dtype=torch.float64)
    uniform[1:] = 1.0 / T_max
    return [
        ("every sequence of length 5", point, 10, 4),
        ("lengths uniform on 1..12", uniform, 7, 3),
        ("mostly short lengths", short_length_distribution(T_max, 3.0), 20, 8),
    ]


def _survival_ge(probs: torch.Tensor) -> torch.Tensor:
    """P(L >= p) for p = 0 .. T_max - 1 (the off-by-one: a length-p sequence stops at position p - 1)."""
    return probs.flip(0).cumsum(0).flip(0)[:-1]


@guarded
def check_expected_row_updates(fn: Callable[[torch.Tensor, int, int], object]) -> bool:
    """Check fn(length_probs, steps, batch_size) -> (T_max,) expected steps with a gradient at row p.

    length_probs has shape (T_max + 1,), entry l = P(L = l). A sequence of length L fills
    positions 0 .. L - 1; each batch holds batch_size independent lengths. Compared with
    `mlbook.analysis.learned.expected_row_updates`, on a point mass, a uniform and a short-biased
    distribution; names the usual mistakes, each with a two-stage hint (`staged_hint`): the row that
    is wrong and a question first, the fix when the same mistake is checked again.
    """
    for name, probs, steps, B in _cases():
        T_max = probs.numel() - 1
        value, err = call_answer(fn, probs.clone(), steps, B)
        where = f"for {name} (steps={steps}, batch_size={B})"
        if err is not None:
            return verdict(False, f"{failure('fn', err)} {where}.")
        value, problem = tensor_answer(value, f"fn(length_probs, {steps}, {B})", "a torch.Tensor of shape (T_max,)")
        if problem is not None:
            return verdict(False, f"{problem} (Seen {where}.)")
        if value.shape == (T_max + 1,):
            return verdict(False, f"Your result has {T_max + 1} entries {where}, one per length 0..T_max. The table "
                                  f"has T_max = {T_max} rows, positions 0..{T_max - 1}: return one entry per row.")
        if value.shape != (T_max,):
            return verdict(False, f"Your result has shape {tuple(value.shape)} {where}; it must be (T_max,) = ({T_max},).")
        got = value.double()
        if not torch.isfinite(got).all():
            return verdict(False, f"Your result contains NaN or inf {where}: every entry is a count between 0 and "
                                  "steps.")
        want = expected_row_updates(probs, steps, B)
        # a correct computation in float32 is right: float32 tolerance, relative to the counts' scale (steps)
        rtol, atol = rtol_for(torch.float32), rtol_for(torch.float32) * steps
        if torch.allclose(got, want, rtol=rtol, atol=atol):
            continue
        reach = expected_row_examples(probs, 1, 1)  # (T_max,) P(L > p)
        ge = _survival_ge(probs)
        worst = int((got - want).abs().argmax())
        shown, expected = fmt_pair(float(got[worst]), float(want[worst]))
        seen = f"Row {worst}: your count of steps with a gradient is {shown} {where}, expected {expected}."
        # (answer, key, symptom question, fix): each named mistake is a two-stage hint, the question first
        candidates = [
            (steps * (1 - (1 - ge) ** B), "L >= p",
             "A sequence of length L fills positions 0..L-1: which lengths reach row p?",
             "Off by one: you counted sequences with L >= p, but a length-L sequence reaches row p only if L > p "
             "(L >= p + 1), and P(L > p) = length_probs[p + 1:].sum()."),
            (steps * reach, "one sequence per step",
             "Your counts are what one sequence per step would give: how many sequences does one step see?",
             "You treated each step as one sequence. A batch holds B independent sequences, and the row gets a "
             "gradient if any one of them reaches it: the probability is 1 - (1 - P(L > p))^B."),
            (steps * B * reach, "sequences, not steps",
             f"A count of steps cannot exceed steps = {steps}: what does your product count?",
             "That is the expected number of sequences that reach row p (steps * B * P(L > p)), not the number of "
             "steps with a gradient: several sequences in one batch count as one step. Use "
             "steps * (1 - (1 - P(L > p))^B)."),
            (1 - (1 - reach) ** B, "one step",
             f"Your entries never exceed 1, yet there are {steps} steps.",
             "That is the probability for a single step; multiply by the number of steps."),
            (steps * reach ** B, "all B",
             "Your counts are too small: in them the row gets a gradient only when every sequence of the batch "
             "reaches it. How many must reach it?",
             "You computed the chance that all B sequences reach row p. One is enough: the complement of 'none "
             "reaches it', 1 - (1 - P(L > p))^B."),
            (steps * (1 - (1 - probs[1:]) ** B), "P(L = p + 1)",
             "Your count for a row depends only on the sequences of one length: which sequences does it leave out?",
             "You used P(L = p + 1), the chance of ending exactly at row p. Every longer sequence reaches row p too: "
             "sum the probabilities of all lengths above p."),
            (steps * B * ge, "two slips",
             f"Some of your counts exceed the number of steps ({steps}), and a row that no sequence reaches gets a "
             "count: two things are off.",
             "Two slips: sequences counted instead of steps, and L >= p instead of L > p."),
        ]
        for cand, key, symptom, fix in candidates:
            if torch.allclose(got, cand.double(), rtol=rtol, atol=atol):
                return verdict(False, staged_hint(f"expected_row_updates: {key}", f"{seen} {symptom}", fix))
        if (got < -1e-9).any() or (got > steps + 1e-9).any():
            return verdict(False, f"Some entries are outside [0, steps] {where}: a count of steps with a gradient "
                                  "cannot be negative or exceed the number of steps.")
        if (got[1:] > got[:-1] + 1e-9).any():
            return verdict(False, f"Your counts increase with p somewhere {where}. Every sequence that reaches row "
                                  "p + 1 also reaches row p, so the expected count cannot grow with p.")
        if value.dtype in (torch.float16, torch.bfloat16) and torch.allclose(got, want, rtol=2e-2, atol=2e-2 * steps):
            return verdict(False, f"Right up to rounding, but your counts are {value.dtype} {where}: low precision "
                                  f"moves them by up to {float((got - want).abs().max()):.2g}. Compute in float32 or "
                                  "float64 (length_probs is float64).")
        return verdict(False, f"Row {worst} gets {shown}, expected {expected} {where}. Row p is "
                              "updated at a step unless all B lengths are <= p.")
    return verdict(True, "steps * (1 - (1 - P(L > p))^B) for every row: a length-L sequence reaches rows "
                         "0..L-1, and one sequence in the batch is enough.")
