"""Tests for mlbook.exercises.rope: the reference solutions pass, every planted mistake is named.

The planted mistakes are written the way a reader would write them (from scratch, not with the
library), so the checker's diagnosis is tested against independent code.
"""

from __future__ import annotations

import torch
import pytest

import mlbook.exercises as exercises
from mlbook.exercises import rope as ex


def _rotate(kind: str = "ok"):
    """A reader's my_rope_rotate(x, m, base) in the half layout, with one mistake planted."""

    def fn(x: torch.Tensor, m: int, base: float = 10000.0) -> torch.Tensor:
        d = x.shape[-1]
        two_i = torch.arange(0, d, 2, dtype=torch.float32)  # (d/2,) 2i
        theta = base ** (-(two_i / 2) / d) if kind == "exponent_i" else base ** (-two_i / d)
        if kind == "bf16":
            angle = (torch.tensor(float(m), dtype=torch.bfloat16) * theta.bfloat16()).float()
        elif kind == "bf16_freq":
            angle = m * theta.bfloat16().float()
        elif kind == "bf16_product":  # theta = theta.bfloat16(): m * theta is then a bfloat16 product, m exact
            angle = (m * theta.bfloat16()).float()
        elif kind == "bf16_angle":  # float32 ladder and product, then the angle table cast (emb.to(dtype))
            angle = (m * theta).bfloat16().float()
        elif kind == "fp16_freq":
            angle = m * theta.half().float()
        elif kind == "float64":
            angle = (m * base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d))
        else:
            angle = m * theta  # (d/2,)
        if kind == "one_angle_per_dim":
            table = m * base ** (-torch.arange(d, dtype=torch.float32) / d)  # (d,) d frequencies
        elif kind == "repeat_interleave":
            table = angle.repeat_interleave(2)
        elif kind == "first_half_only":
            table = torch.cat([angle, torch.zeros_like(angle)])
        else:
            table = torch.cat([angle, angle])  # (d,) dims i and i + d/2 share the angle
        x1, x2 = x[..., : d // 2], x[..., d // 2 :]
        if kind == "interleaved":
            even, odd = x[..., 0::2], x[..., 1::2]
            rot = torch.stack([-odd, even], dim=-1).flatten(-2)
            return x * angle.repeat_interleave(2).cos() + rot * angle.repeat_interleave(2).sin()
        rot = torch.cat([-x2, x1], dim=-1)
        sign = -1.0 if kind == "sign" else 1.0
        out = x.double() * table.cos().double() + sign * rot.double() * table.sin().double()
        if kind == "returns_bf16":
            return out.bfloat16()
        return out.to(x.dtype)

    return fn


def _run(checker, fn, capsys) -> tuple[bool, str]:
    ok = checker(fn)
    out = capsys.readouterr().out.strip()
    assert out.count("\n") == 0, "a checker prints exactly one verdict line"
    assert isinstance(ok, bool)
    return ok, out


def test_checkers_are_exported():
    assert {"check_rope_rotation", "check_pairing_permutation"} <= set(exercises.__all__)
    assert exercises.check_rope_rotation is ex.check_rope_rotation


@pytest.mark.parametrize("kind", ["ok", "float64"])
def test_rotation_reference_solutions_pass(kind, capsys):
    ok, out = _run(ex.check_rope_rotation, _rotate(kind), capsys)
    assert ok and out.startswith("Correct.")


@pytest.mark.parametrize(
    "kind, phrase",
    [
        ("sign", "Wrong sign of the sine term"),
        ("interleaved", "Wrong pairing"),
        ("repeat_interleave", "repeats each angle in adjacent columns"),
        ("one_angle_per_dim", "you give each of the d dims its own angle"),
        ("first_half_only", "only the first half of the cos/sin table"),
        ("exponent_i", "theta_i = base^(-i/d)"),
        ("bf16", "Angles computed in bfloat16"),
        ("bf16_freq", "frequency ladder is rounded to bfloat16"),
        ("bf16_product", "product m * theta_i in bfloat16"),
        ("bf16_angle", "angles are rounded to bfloat16 after a float32 product"),
        ("fp16_freq", "frequency ladder is rounded to float16"),
        ("returns_bf16", "you return torch.bfloat16"),
    ],
)
def test_rotation_mistakes_are_named(kind, phrase, capsys):
    ok, out = _run(ex.check_rope_rotation, _rotate(kind), capsys)
    assert not ok and out.startswith("Not yet.")
    assert phrase in out, out


@pytest.mark.parametrize("kind, says, never", [
    ("bf16_freq", "grows with the distance", ("3000 becomes 3008", "m itself is rounded", "product m * theta_i in")),
    ("bf16_product", "m itself is exact", ("3000 becomes 3008", "m itself is rounded")),
    ("bf16", "3000 becomes 3008", ("m itself is exact", "frequency ladder is rounded")),
    ("bf16_angle", "emb.to(x.dtype)", ("3000 becomes 3008", "m itself is", "frequency ladder is rounded")),
])
def test_bf16_recipes_are_told_apart(kind, says, never, capsys):
    # at m = 5 and 37 a bfloat16 position is exact, so the three recipes agree there: the diagnosis must come
    # from m = 3000, where a rounded ladder, a rounded product and a rounded position differ
    ok, out = _run(ex.check_rope_rotation, _rotate(kind), capsys)
    assert not ok and says in out and "m = 3000" in out, out
    for phrase in never:
        assert phrase not in out, out


def test_a_flipped_sign_passes_a_relative_test_unshared_angles_do_not():
    # why the checker compares with the library and not only the relative property
    q, k = torch.randn(2, 16, generator=torch.Generator().manual_seed(0))

    def score(fn, m, n):
        return float((fn(q, m) * fn(k, n)).sum())

    for kind in ("sign", "interleaved"):  # still a rotation per pair: relative, but not the library's model
        assert score(_rotate(kind), 3, 1) == pytest.approx(score(_rotate(kind), 103, 101), abs=1e-3)
    fn = _rotate("repeat_interleave")  # the two halves of a pair turn differently: no longer a rotation
    assert abs(score(fn, 3, 1) - score(fn, 103, 101)) > 1e-2


@pytest.mark.parametrize(
    "fn, phrase",
    [
        (lambda x, m, base: x, "returns x unchanged"),
        (lambda x, m, base: 1 / 0, "raised ZeroDivisionError"),
        (lambda x, m, base: x[..., :2], "has shape"),
        (lambda x, m, base: x.tolist(), "Return a torch.Tensor"),
        (lambda x, m, base: x * float("nan"), "NaN"),
        (lambda x, m, base: 2 * x, "not a rotation"),
        (lambda x, m, base: (x * 3).long(), "floating-point"),
    ],
)
def test_rotation_other_failures(fn, phrase, capsys):
    ok, out = _run(ex.check_rope_rotation, fn, capsys)
    assert not ok and phrase in out, out


def _perm(d: int) -> torch.Tensor:
    i = torch.arange(d // 2)
    return torch.stack([i, i + d // 2], dim=-1).flatten()


def test_permutation_reference_solution_passes(capsys):
    ok, out = _run(ex.check_pairing_permutation, _perm, capsys)
    assert ok and out.startswith("Correct.")
    ok, _ = _run(ex.check_pairing_permutation, lambda d: _perm(d).tolist(), capsys)
    assert ok, "a list of ints is accepted"


@pytest.mark.parametrize(
    "fn, phrase",
    [
        (lambda d: torch.argsort(_perm(d)), "inverse permutation"),
        (lambda d: torch.arange(d), "identity"),
        # page 05's attempt: torch.stack without dim=-1, so flatten reads the halves back in order
        (lambda d: torch.stack([torch.arange(d // 2), torch.arange(d // 2) + d // 2]).flatten(), "identity"),
        (lambda d: torch.zeros(d, dtype=torch.long), "not a permutation"),
        (lambda d: _perm(d).float(), "integer indices"),
        (lambda d: _perm(d)[:-1], "entries"),
        (lambda d: 1 / 0, "raised ZeroDivisionError"),
        (lambda d: torch.roll(_perm(d), 2), "split across two pairs"),
        (lambda d: "abc", "Return a tensor"),
    ],
)
def test_permutation_mistakes_are_named(fn, phrase, capsys):
    ok, out = _run(ex.check_pairing_permutation, fn, capsys)
    assert not ok and out.startswith("Not yet.") and phrase in out, out


def test_a_float16_ladder_is_told_it_stays_relative_when_used_everywhere(capsys):
    # like the bfloat16 ladder: a consistent ladder is another ladder; only a train/inference mismatch hurts
    ok, out = _run(ex.check_rope_rotation, _rotate("fp16_freq"), capsys)
    assert not ok and "score stays relative" in out and "|n - m| * |theta~_i - theta_i|" in out, out


def test_a_bf16_angle_and_a_bf16_product_are_told_apart_where_they_differ():
    # at d_head = 8 (m = 3000, base 10,000) the two recipes give the same angles; at d_head = 64 they do not
    theta = 10000.0 ** (-torch.arange(0, 64, 2, dtype=torch.float32) / 64)
    assert not torch.equal((3000 * theta).bfloat16(), 3000 * theta.bfloat16())
    theta8 = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float32) / 8)
    assert torch.equal((3000 * theta8).bfloat16(), 3000 * theta8.bfloat16())
