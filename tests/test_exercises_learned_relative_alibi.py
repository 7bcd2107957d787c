"""Tests for the exercise checkers of sections 2.2, 2.3 and 2.5.

For each checker: a reference solution written here independently passes with "Correct.";
each planted mistake gets "Not yet." and the message that names it; broken answers (raising,
wrong type, wrong shape) are reported, never raised; every checker returns a bool.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from mlbook import exercises
from mlbook.exercises import check_alibi_key_bias, check_expected_row_updates, check_swin_bias, check_swin_index
from mlbook.transformer.positional import alibi_slopes


def _run(checker, fn, capsys) -> tuple[bool, str]:
    ok = checker(fn)
    out = capsys.readouterr().out.strip()
    assert isinstance(ok, bool)
    assert out.count("\n") == 0, "one verdict line"
    assert out.startswith("Correct. ") if ok else out.startswith("Not yet. ")
    return ok, out


def test_checkers_are_exported():
    for name in ("check_expected_row_updates", "check_swin_index", "check_swin_bias", "check_alibi_key_bias"):
        assert name in exercises.__all__


# ---------------------------------------------------------------------------
# Section 2.2: expected updates per row
# ---------------------------------------------------------------------------


def _reach(p: torch.Tensor, start: int) -> torch.Tensor:
    return torch.stack([p[q + start :].sum() for q in range(p.numel() - 1)])


def updates_ok(p, steps, B):
    return steps * (1 - (1 - _reach(p, 1)) ** B)


def test_expected_row_updates_reference_passes(capsys):
    ok, out = _run(check_expected_row_updates, updates_ok, capsys)
    assert ok, out


# each named mistake: (answer, its symptom, its fix, which only a second failure shows)
UPDATES_STAGED = [
    (lambda p, s, B: s * (1 - (1 - _reach(p, 0)) ** B), "which lengths reach row p", "Off by one"),
    (lambda p, s, B: s * _reach(p, 1), "one sequence per step", "A batch holds B independent sequences"),
    (lambda p, s, B: s * B * _reach(p, 1), "cannot exceed steps", "expected number of sequences"),
    (lambda p, s, B: 1 - (1 - _reach(p, 1)) ** B, "never exceed 1", "multiply by the number of steps"),
    (lambda p, s, B: s * _reach(p, 1) ** B, "every sequence of the batch", "One is enough"),
    (lambda p, s, B: s * (1 - (1 - p[1:]) ** B), "sequences of one length", "P(L = p + 1)"),
    (lambda p, s, B: s * B * _reach(p, 0), "two things are off", "Two slips"),
]


@pytest.mark.parametrize("fn, symptom, fix", UPDATES_STAGED)
def test_expected_row_updates_every_named_mistake_is_staged(capsys, fn, symptom, fix):
    """Symptom first (the row that is wrong and a question), the fix only when the same mistake comes back."""
    from mlbook.exercises.common import reset_hints

    reset_hints()
    try:
        ok, first = _run(check_expected_row_updates, fn, capsys)
        assert not ok and symptom in first and fix not in first, first
        ok, second = _run(check_expected_row_updates, fn, capsys)
        assert not ok and symptom in second and fix in second, second
    finally:
        reset_hints()


@pytest.mark.parametrize("fn, message", [
    (lambda p, s, B: s * (1 - (1 - _reach(p, 0)) ** B), "which lengths reach row p"),
    (lambda p, s, B: s * _reach(p, 1), "one sequence per step"),
    (lambda p, s, B: s * B * _reach(p, 1), "cannot exceed steps"),
    (lambda p, s, B: 1 - (1 - _reach(p, 1)) ** B, "never exceed 1"),
    (lambda p, s, B: s * _reach(p, 1) ** B, "every sequence of the batch"),
    (lambda p, s, B: s * (1 - (1 - p[1:]) ** B), "sequences of one length"),
    (lambda p, s, B: s * B * _reach(p, 0), "two things are off"),
    (lambda p, s, B: torch.cat([updates_ok(p, s, B), torch.zeros(1)]), "one entry per row"),
    (lambda p, s, B: updates_ok(p, s, B)[:-2], "shape"),
    (lambda p, s, B: updates_ok(p, s, B).tolist(), "torch.Tensor"),
    (lambda p, s, B: 1 / 0, "ZeroDivisionError"),
    (lambda p, s, B: updates_ok(p, s, B).flip(0), "increase with p"),
    (lambda p, s, B: updates_ok(p, s, B) * 0.9, "Row"),
])
def test_expected_row_updates_names_the_mistake(capsys, fn, message):
    ok, out = _run(check_expected_row_updates, fn, capsys)
    assert not ok and message in out, out


def test_expected_row_updates_off_by_one_shows_the_code_of_the_fix_only_the_second_time(capsys):
    from mlbook.exercises.common import reset_hints

    off_by_one = lambda p, s, B: s * (1 - (1 - _reach(p, 0)) ** B)  # noqa: E731
    reset_hints()
    try:
        ok, first = _run(check_expected_row_updates, off_by_one, capsys)
        # the first stage is the symptom (row 5 counted where no sequence reaches it), not the rule L > p
        assert not ok and "Row 5: your count of steps with a gradient is 10" in first and "expected 0" in first
        assert "L > p" not in first and "length_probs[p + 1:]" not in first
        ok, second = _run(check_expected_row_updates, off_by_one, capsys)
        assert not ok and "Off by one" in second and "length_probs[p + 1:].sum()" in second
    finally:
        reset_hints()


# ---------------------------------------------------------------------------
# Section 2.3, exercise 5: the Swin index and the gathered bias
# ---------------------------------------------------------------------------


def _index(w, *, sign=1, swap=False, shift=None, stride=None, col=False):
    ys, xs = torch.meshgrid(torch.arange(w), torch.arange(w), indexing="ij")
    cells = torch.stack([xs.flatten(), ys.flatten()]) if col else torch.stack([ys.flatten(), xs.flatten()])
    d = sign * (cells[:, :, None] - cells[:, None, :])
    dy, dx = (d[1], d[0]) if swap else (d[0], d[1])
    shift = w - 1 if shift is None else shift
    stride = 2 * w - 1 if stride is None else stride
    return (dy + shift) * stride + (dx + shift)


def test_swin_index_reference_passes(capsys):
    ok, out = _run(check_swin_index, _index, capsys)
    assert ok, out


def _scrambled(w):
    """Consistent (translation invariant, one row per offset) but a permuted labelling."""
    idx = _index(w)
    size = (2 * w - 1) ** 2
    perm = torch.roll(torch.arange(size), 1)
    return perm[idx]


def _not_invariant(w):
    idx = _index(w).clone()
    idx[0, 1], idx[1, 2] = idx[1, 2].item(), idx[0, 1].item() + 0
    idx[0, 1] = (idx[0, 1] + 1) % ((2 * w - 1) ** 2)
    return idx


@pytest.mark.parametrize("fn, message", [
    (lambda w: _index(w, swap=True), "Which part of your index did that step in x move?"),
    (lambda w: _index(w, sign=-1), "read mirrored"),
    (lambda w: _index(w, sign=-1, swap=True), "Two things are off"),
    (lambda w: _index(w, shift=w), "Your largest index is 182"),
    (lambda w: _index(w, shift=w - 2), "Your smallest index is -"),
    (lambda w: _index(w, stride=w), "share a row. How many values"),
    (lambda w: _index(w, stride=2 * w), "leave gaps"),
    (lambda w: _index(w, shift=0), "negative for half the pairs"),
    (lambda w: _index(w, col=True), "Which part of your index"),  # the same index as swapped axes
    (lambda w: _index(w).float(), "integer tensor"),
    (lambda w: _index(w)[:-1], "shape"),
    (lambda w: _index(w).tolist(), "torch.Tensor"),
    (lambda w: None.shape, "AttributeError"),
    (_scrambled, "consistent labelling"),
    (_not_invariant, "Not translation invariant"),
    (lambda w: _index(w) % ((2 * w - 1) ** 2 - 1), "share a row"),
])
def test_swin_index_names_the_mistake(capsys, fn, message):
    ok, out = _run(check_swin_index, fn, capsys)
    assert not ok and message in out, out


def _bias_ok(table, w):
    n = w * w
    return table[_index(w).reshape(-1)].reshape(n, n, -1).permute(2, 0, 1)


def test_swin_bias_reference_passes(capsys):
    ok, out = _run(check_swin_bias, _bias_ok, capsys)
    assert ok, out


@pytest.mark.parametrize("fn, message", [
    (lambda t, w: _bias_ok(t, w).permute(1, 2, 0), "wrong layout"),
    (lambda t, w: t[_index(w).reshape(-1)].reshape(t.shape[1], w * w, w * w), "another head's value"),
    (lambda t, w: _bias_ok(t, w).transpose(-1, -2), "transposed"),
    (lambda t, w: _bias_ok(t, w) * 2, "differ"),
    (lambda t, w: _bias_ok(t, w)[:, :-1], "Shape"),
    (lambda t, w: t[:, _index(w)], "raised"),
])
def test_swin_bias_names_the_mistake(capsys, fn, message):
    ok, out = _run(check_swin_bias, fn, capsys)
    assert not ok and message in out, out


SWIN_STAGED = [
    (check_swin_index, lambda w: _index(w, swap=True), "reads row 71 instead of row 83",
     "(dy + w - 1) * (2w - 1) + (dx + w - 1)"),
    (check_swin_index, lambda w: _index(w, sign=-1), "read mirrored", "query cell - key cell"),
    (check_swin_index, lambda w: _index(w, sign=-1, swap=True), "Two things are off", "Two slips"),
    (check_swin_index, lambda w: _index(w, col=True), "reads row 71 instead of row 83", "column-major"),
    (check_swin_index, lambda w: _index(w, shift=w), "largest index", "instead of w - 1"),
    (check_swin_index, lambda w: _index(w, shift=w - 2), "smallest index", "instead of w - 1"),
    (check_swin_index, lambda w: _index(w, stride=w), "share a row", "the stride must be 2w - 1"),
    (check_swin_index, lambda w: _index(w, stride=2 * w), "leave gaps", "instead of 2w - 1"),
    (check_swin_index, lambda w: _index(w, shift=0), "negative for half", "add w - 1"),
    (check_swin_bias, lambda t, w: _bias_ok(t, w).permute(1, 2, 0), "wrong layout", "permute(2, 0, 1)"),
    (check_swin_bias, lambda t, w: t[_index(w).reshape(-1)].reshape(t.shape[1], w * w, w * w),
     "another head's value", "permute(2, 0, 1)"),
    (check_swin_bias, lambda t, w: _bias_ok(t, w).transpose(-1, -2), "transposed", "table[index[q, k], h]"),
]


@pytest.mark.parametrize("checker, fn, symptom, fix", SWIN_STAGED)
def test_swin_hints_give_the_symptom_first_and_the_fix_on_a_second_failure(capsys, checker, fn, symptom, fix):
    from mlbook.exercises.common import reset_hints

    reset_hints()
    try:
        ok, first = _run(checker, fn, capsys)
        assert not ok and symptom in first and fix not in first, first
        ok, second = _run(checker, fn, capsys)
        assert not ok and symptom in second and fix in second, second
    finally:
        reset_hints()


@pytest.mark.parametrize("fn", [
    lambda w: _index(w, swap=True), lambda w: _index(w, sign=-1, swap=True), lambda w: _index(w, col=True),
])
def test_swin_swapped_axes_first_hint_is_a_symptom_not_a_choice_of_axis(capsys, fn):
    """The first stage shows the row that is wrong and asks a neutral question: it names neither dy nor dx
    (a choice between the two on the one wrong line would be the answer)."""
    from mlbook.exercises.common import reset_hints

    reset_hints()
    try:
        ok, first = _run(check_swin_index, fn, capsys)
        assert not ok and "from 84 to 83" in first, first
        for giveaway in ("dy", "dx", "slow", "column-major", "key minus query"):
            assert giveaway not in first, (giveaway, first)
    finally:
        reset_hints()


def test_swin_stride_w_hint_counts_the_distinct_rows(capsys):
    """Oracle: count by hand the distinct rows (dy + w - 1) * w + (dx + w - 1) takes over the (2w - 1)^2 offsets."""
    w = 7
    span = range(-(w - 1), w)
    rows = [(dy + w - 1) * w + (dx + w - 1) for dy in span for dx in span]
    distinct = len(set(rows))
    alone = sum(rows.count(r) == 1 for r in set(rows))
    assert (len(rows), distinct, alone) == (169, 97, 25)
    ok, out = _run(check_swin_index, lambda w: _index(w, stride=w), capsys)
    assert not ok and f"Your {len(rows)} offsets use only {distinct} distinct rows" in out, out
    assert "of their own" not in out, "97 rows are used, but only 25 offsets have a row to themselves"


# ---------------------------------------------------------------------------
# Section 2.5: ALiBi as a key-only bias
# ---------------------------------------------------------------------------


def _key(m: torch.Tensor, T: int) -> torch.Tensor:
    return (m[:, None] * torch.arange(T, dtype=torch.float32))[None, :, None, :]


@pytest.mark.parametrize("fn", [
    lambda H, T: _key(alibi_slopes(H), T),
    lambda H, T: _key(alibi_slopes(H), T) + 7.0,  # a constant per row changes nothing
    lambda H, T: _key(alibi_slopes(H), T)[0],  # (H, 1, T_k) broadcasts too
])
def test_alibi_key_bias_accepts_correct_forms(capsys, fn):
    ok, out = _run(check_alibi_key_bias, fn, capsys)
    assert ok, out


def _naive(H):
    return 2.0 ** (-8.0 * torch.arange(1, H + 1) / H)


def _pow2_only(H):
    if H & (H - 1):
        raise ValueError("this helper assumes n_heads is a power of two")
    return alibi_slopes(H)


@pytest.mark.parametrize("fn, message", [
    (lambda H, T: -_key(alibi_slopes(H), T), "Wrong sign"),
    (lambda H, T: _key(alibi_slopes(H), 1).expand(1, H, 1, T) * (T - 1), "changes nothing"),
    (lambda H, T: _key(torch.full((H,), 0.5), T), "same slope"),
    (lambda H, T: _key(_naive(H), T), "power-of-two formula"),
    (lambda H, T: _key(_pow2_only(H), T), "paper's recipe"),
    (lambda H, T: _key(alibi_slopes(H).flip(0), T), "reverse head order"),
    (lambda H, T: _key(alibi_slopes(H), T).expand(1, H, T, T), "query axis"),
    (lambda H, T: _key(alibi_slopes(H), T)[:, :-1], "broadcast"),
    (lambda H, T: _key(alibi_slopes(H) * 2, T), "Attention differs"),
    (lambda H, T: "bias", "torch.Tensor"),
])
def test_alibi_key_bias_names_the_mistake(capsys, fn, message):
    ok, out = _run(check_alibi_key_bias, fn, capsys)
    assert not ok and message in out, out


@pytest.mark.parametrize("checker, answer", [
    (check_expected_row_updates, lambda p, s, B: updates_ok(p, s, B).to(torch.complex64)),
    (check_expected_row_updates, lambda p, s, B: updates_ok(p, s, B).requires_grad_()),
    (check_swin_index, lambda w: _index(w).to(torch.complex64)),
    (check_swin_bias, lambda t, w: _bias_ok(t, w).to(torch.complex64)),
    (check_alibi_key_bias, lambda H, T: _key(alibi_slopes(H), T).to(torch.complex64)),
])
def test_checkers_never_raise_on_odd_dtypes(capsys, checker, answer):
    """Right values in an unusual dtype: a verdict either way, never an exception."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # casting complex to real warns
        ok = checker(answer)
    out = capsys.readouterr().out
    assert isinstance(ok, bool) and out.startswith("Correct. " if ok else "Not yet. ") and out.count("\n") == 1


@pytest.mark.parametrize("checker, answer", [
    (check_expected_row_updates, lambda p, s, B: torch.full((p.numel() - 1,), float("nan"))),
    (check_swin_bias, lambda t, w: torch.full((t.shape[1], w * w, w * w), float("nan"))),
    (check_alibi_key_bias, lambda H, T: torch.full((1, H, 1, T), float("nan"))),
])
def test_checkers_reject_nan_answers(capsys, checker, answer):
    assert checker(answer) is False
    assert capsys.readouterr().out.startswith("Not yet. ")
