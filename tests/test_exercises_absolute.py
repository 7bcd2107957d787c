"""Tests for mlbook.exercises.absolute: check_equivariance_error and check_offset_matrix accept a
correct answer and name each typical mistake."""

from __future__ import annotations

import math
import re

import pytest
import torch

import mlbook.analysis.absolute as AM
from mlbook import exercises
from mlbook.transformer.positional import sinusoidal_positional_encoding


# ---------------------------------------------------------------------------
# exercises.check_equivariance_error
# ---------------------------------------------------------------------------


def _eq_correct(f, x, perm):
    return (f(x[:, perm]) - f(x)[:, perm]).abs().max()


EQ_WRONG = {
    "forgot to permute the output": (
        lambda f, x, p: (f(x[:, p]) - f(x)).abs().max(), r"Which side of the difference did you permute"),
    "inverse permutation": (
        lambda f, x, p: (f(x[:, p]) - f(x)[:, torch.argsort(p)]).abs().max(), r"its own inverse"),
    # the signed max is right whenever the largest deviation is positive: the negated case refuses it
    "signed max, no absolute value": (lambda f, x, p: (f(x[:, p]) - f(x)[:, p]).max(), r"same function negated"),
    "no absolute value": (lambda f, x, p: (f(x[:, p]) - f(x)[:, p]).min(), r"absolute value"),
    "same tensor both sides": (lambda f, x, p: (f(x)[:, p] - f(x)[:, p]).abs().max(), r"report 0 for a causal"),
    "first batch row only": (lambda f, x, p: (f(x[:, p]) - f(x)[:, p])[0].abs().max(), r"every batch row"),
    "permuted the batch axis": (lambda f, x, p: (f(x[p]) - f(x)[p]).abs().max(), r"dimension 1 of x"),
    "returns a tensor, not a number": (lambda f, x, p: (f(x[:, p]) - f(x)[:, p]).abs(), r"Return one number"),
}


def test_check_equivariance_error_accepts_correct(capsys):
    assert exercises.check_equivariance_error(_eq_correct) is True
    assert capsys.readouterr().out.startswith("Correct.")
    # a plain float works as well as a 1-element tensor
    assert exercises.check_equivariance_error(lambda f, x, p: _eq_correct(f, x, p).item()) is True


@pytest.mark.parametrize("mistake", sorted(EQ_WRONG))
def test_check_equivariance_error_names_the_mistake(capsys, mistake):
    fn, pattern = EQ_WRONG[mistake]
    assert exercises.check_equivariance_error(fn) is False
    out = capsys.readouterr().out
    assert out.startswith("Not yet.")
    assert re.search(pattern, out), f"{mistake}: message does not name it:\n{out}"


# each staged mistake: (answer, text only the second failure shows)
EQ_STAGED = {
    "forgot to permute the output": (EQ_WRONG["forgot to permute the output"][0], "f(x)[:, perm], before subtracting"),
    "inverse permutation": (EQ_WRONG["inverse permutation"][0], "not f(x)[:, argsort(perm)]"),
    "signed max": (EQ_WRONG["signed max, no absolute value"][0], "Take the absolute value before the max"),
    "first batch row only": (EQ_WRONG["first batch row only"][0], "|f(x[:, perm]) - f(x)[:, perm]|"),
    "permuted the batch axis": (EQ_WRONG["permuted the batch axis"][0], "Permute with x[:, perm] and f(x)[:, perm]"),
}


def test_signed_max_is_refused_though_it_equals_the_absolute_max_on_the_running_mean(capsys):
    """The reviewer's case: (f(Px) - P f(x)).max() without .abs() is right for the running mean, so only the
    negated running mean can refuse it; the checker must print "Not yet."."""
    signed = lambda f, x, p: (f(x[:, p]) - f(x)[:, p]).max().item()  # noqa: E731
    assert exercises.check_equivariance_error(signed) is False
    assert capsys.readouterr().out.startswith("Not yet.")


@pytest.mark.parametrize("mistake", sorted(EQ_STAGED))
def test_equivariance_hints_give_the_symptom_first_and_the_fix_on_a_second_failure(capsys, mistake):
    from mlbook.exercises.common import reset_hints

    fn, fix = EQ_STAGED[mistake]
    reset_hints()
    try:
        assert exercises.check_equivariance_error(fn) is False
        first = capsys.readouterr().out
        assert fix not in first and "sees this same mistake again" in first, first
        assert exercises.check_equivariance_error(fn) is False
        assert fix in capsys.readouterr().out
    finally:
        reset_hints()


# ---------------------------------------------------------------------------
# exercises.check_offset_matrix
# ---------------------------------------------------------------------------


def _rot_blocks(k: int, d: int, base: float, *, layout: str = "interleaved", sign: int = 1, exp: float = 2.0):
    """Independent float64 block rotation: pair i turns by k * base^(-exp*i/d); sign=-1 is the transpose."""
    M = torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        phi = k * base ** (-exp * i / d)
        c, s = math.cos(phi), sign * math.sin(phi)
        a, b = (2 * i, 2 * i + 1) if layout == "interleaved" else (i, i + d // 2)
        M[a, a], M[a, b], M[b, a], M[b, b] = c, s, -s, c
    return M


def test_offset_matrix_oracle_is_right():
    """The test's own correct answer really maps PE[t] to PE[t + k] (so the checker is judged fairly)."""
    pe = sinusoidal_positional_encoding(30, 16, 100.0).double()
    M = _rot_blocks(5, 16, 100.0)
    assert (pe[5:] - pe[:-5] @ M.T).abs().max() < 1e-5
    assert torch.allclose(M, AM.offset_matrix(5, 16, 100.0), atol=1e-6)


def _dense_wrong(k, d, base):
    M = _rot_blocks(k, d, base)
    M[0, d - 1] = 0.5
    return M


OFFSET_WRONG = {
    "transposed rotation": (lambda k, d, b: _rot_blocks(k, d, b, sign=-1), r"wrong way"),
    "half layout": (lambda k, d, b: _rot_blocks(k, d, b, layout="half"), r"rotate-half layout"),
    "half layout, transposed": (lambda k, d, b: _rot_blocks(k, d, b, layout="half", sign=-1), r"rotate-half layout"),
    "base^(-i/d)": (lambda k, d, b: _rot_blocks(k, d, b, exp=1.0), r"base\^\(-i/d\)"),
    "identity": (lambda k, d, b: torch.eye(d), r"identity"),
    "entries outside the blocks": (_dense_wrong, r"outside the 2x2 blocks"),
    "wrong angle": (lambda k, d, b: _rot_blocks(k + 1, d, b), r"misses PE\[t\+k\]"),
    "wrong shape": (lambda k, d, b: torch.eye(d // 2), r"shape \(\d+, \d+\).*\(d_model, d_model\)"),
    "not a tensor": (lambda k, d, b: _rot_blocks(k, d, b).numpy(), r"Return a torch\.Tensor.*(ndarray|numpy array)"),
    "raises": (lambda k, d, b: 1 / 0, r"raised ZeroDivisionError"),
}


def test_check_offset_matrix_accepts_correct(capsys):
    assert exercises.check_offset_matrix(_rot_blocks) is True
    assert capsys.readouterr().out.startswith("Correct.")
    # float32 answers are fine too
    assert exercises.check_offset_matrix(lambda k, d, b: _rot_blocks(k, d, b).float()) is True


@pytest.mark.parametrize("mistake", sorted(OFFSET_WRONG))
def test_check_offset_matrix_names_the_mistake(capsys, mistake):
    fn, pattern = OFFSET_WRONG[mistake]
    assert exercises.check_offset_matrix(fn) is False
    out = capsys.readouterr().out
    assert out.startswith("Not yet.")
    assert re.search(pattern, out), f"{mistake}: message does not name it:\n{out}"


def test_wrong_way_rotation_gets_the_symptom_first_and_the_fix_on_a_second_failure(capsys):
    """The two-stage hint: the first wrong-way answer hears what is wrong, not the answer; the same mistake
    checked again gets the correct block."""
    from mlbook.exercises.common import reset_hints

    wrong = lambda k, d, b: _rot_blocks(k, d, b, sign=-1)  # noqa: E731
    reset_hints()
    try:
        assert exercises.check_offset_matrix(wrong) is False
        first = capsys.readouterr().out
        assert "wrong way" in first and "PE[t-k]" in first
        assert "[-sin phi, cos phi]" not in first and "sees this same mistake again" in first
        assert exercises.check_offset_matrix(wrong) is False
        second = capsys.readouterr().out
        assert "wrong way" in second and "R(phi) = [[cos phi, sin phi], [-sin phi, cos phi]]" in second
        # another mistake does not use up the stage, and a correct answer still passes
        reset_hints()
        assert exercises.check_offset_matrix(lambda k, d, b: _rot_blocks(k, d, b, layout="half")) is False
        capsys.readouterr()
        assert exercises.check_offset_matrix(wrong) is False
        assert "[-sin phi, cos phi]" not in capsys.readouterr().out
        assert exercises.check_offset_matrix(_rot_blocks) is True
    finally:
        reset_hints()


OFFSET_STAGED = {
    "half layout": (OFFSET_WRONG["half layout"][0], "sin at column 2i, cos at column 2i + 1"),
    "base^(-i/d)": (OFFSET_WRONG["base^(-i/d)"][0], "omega_i = base^(-2i/d)"),
    "partial rotation": (lambda k, d, b: torch.block_diag(_rot_blocks(k, d, b)[:2, :2], torch.eye(d - 2)),
                         "range(d_model // 2)"),
}


@pytest.mark.parametrize("mistake", sorted(OFFSET_STAGED))
def test_offset_matrix_other_mistakes_are_staged_too(capsys, mistake):
    """Not only the planted wrong-way rotation: every named mistake hears its symptom before its fix."""
    from mlbook.exercises.common import reset_hints

    fn, fix = OFFSET_STAGED[mistake]
    reset_hints()
    try:
        assert exercises.check_offset_matrix(fn) is False
        first = capsys.readouterr().out
        assert first.startswith("Not yet.") and fix not in first and "sees this same mistake again" in first, first
        assert exercises.check_offset_matrix(fn) is False
        assert fix in capsys.readouterr().out
    finally:
        reset_hints()


def test_staged_hint_refuses_empty_text_and_counts_per_key():
    from mlbook.exercises.common import reset_hints, staged_hint

    reset_hints()
    try:
        assert staged_hint("a", "Symptom.", "Fix.").startswith("Symptom. Try a fix")
        assert staged_hint("b", "Other.", "Fix b.").startswith("Other. Try a fix")
        assert staged_hint("a", "Symptom.", "Fix.") == "Symptom. Fix."
        reset_hints("a")
        assert "Fix." not in staged_hint("a", "Symptom.", "Fix.")
        for bad in (("", "s", "f"), ("k", "", "f"), ("k", "s", None)):
            with pytest.raises(TypeError, match="must be a non-empty string"):
                staged_hint(*bad)
    finally:
        reset_hints()

