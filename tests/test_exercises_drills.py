"""Tests for the section 3 retype-drill checkers (mlbook.exercises.drills).

For each checker: a correct reader's solution passes (written here from the definitions, plus
independent ones: the chapter's own listing, Hugging Face's T5 bucketing); an untouched stub
prints "not implemented yet" and reports no failure; and every planted mistake, written as a
reader would write it, is diagnosed by name. The notebook's hidden reference solutions are run
through the checkers too.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Callable

import pytest
import torch
from torch import nn

import mlbook.chapter_tests as chapter
from mlbook import exercises
from mlbook.exercises import drills
from mlbook.transformer import positional as P

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "10_implementation.ipynb"


def _stub(*args, **kwargs):
    raise NotImplementedError("your code here")


class _StubRope(nn.Module):
    def __init__(self, d_head, base=10000.0):
        super().__init__()
        raise NotImplementedError("your code here")


def _expect(out: str, ok: bool, pattern: str | None = None) -> None:
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, f"a checker prints exactly one verdict line, got:\n{out}"
    assert out.startswith("Correct." if ok else "Not yet."), out
    if pattern is not None:
        assert re.search(pattern, out), f"message does not name the mistake ({pattern!r}):\n{out}"


def _expect_stub(out: str) -> None:
    assert "not implemented yet" in out.lower(), out
    assert "Not yet." not in out and "Correct." not in out, f"an untouched stub must not fail anything:\n{out}"
    assert len(out.strip().splitlines()) == 1


def test_checkers_are_exported():
    for name in ("check_rope_property_test", "check_rope_drill", "check_sinusoidal_drill", "check_alibi_drill",
                 "check_bucket_drill"):
        assert name in drills.__all__ and getattr(exercises, name) is getattr(drills, name)


# ---------------------------------------------------------------------------
# Drill (a): RoPE. A reader's correct solution, then one mistake at a time.
# ---------------------------------------------------------------------------


def rotate_half_ok(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat([-x2, x1], dim=-1)


def apply_rotary_ok(x, cos, sin):
    return x * cos + rotate_half_ok(x) * sin


class RopeOk(nn.Module):
    """Float32 frequencies that stay float32 under .to(torch.bfloat16) (the _apply override)."""

    def __init__(self, d_head, base=10000.0):
        super().__init__()
        two_i = torch.arange(0, d_head, 2, dtype=torch.float32)
        self.register_buffer("inv_freq", 1.0 / base ** (two_i / d_head), persistent=False)

    def _apply(self, fn, recurse=True):
        freq = self.inv_freq
        super()._apply(fn, recurse)
        self.inv_freq = freq.to(device=self.inv_freq.device, dtype=torch.float32)
        return self

    def angles(self, T, offset):
        pos = torch.arange(offset, offset + T, dtype=torch.float32)
        return torch.outer(pos, self.inv_freq)  # (T, d/2)

    def forward(self, T, offset=0):
        ang = self.angles(T, offset)
        ang = torch.cat([ang, ang], dim=-1)
        return ang.cos(), ang.sin()


class RopeRecompute(nn.Module):
    """Another correct design: no buffer, the frequencies are recomputed in float64 at each call."""

    def __init__(self, d_head, base=10000.0):
        super().__init__()
        self.d_head, self.base = d_head, base

    def forward(self, T, offset=0):
        i = torch.arange(self.d_head // 2, dtype=torch.float64)
        theta = self.base ** (-2 * i / self.d_head)
        ang = (torch.arange(offset, offset + T, dtype=torch.float64)[:, None] * theta).float()
        ang = torch.cat([ang, ang], -1)
        return ang.cos(), ang.sin()


def _rope_class(angles: Callable | None = None, *, layout: str = "half", out: Callable | None = None,
                keep_float32: bool = True, cast_angles: torch.dtype | None = None):
    """A RopeOk with one piece replaced: angles(self, T, offset), the layout, or the returned pair."""

    class Rope(RopeOk):
        def _apply(self, fn, recurse=True):
            return RopeOk._apply(self, fn, recurse) if keep_float32 else nn.Module._apply(self, fn, recurse)

        def forward(self, T, offset=0):
            ang = (angles or RopeOk.angles)(self, T, offset)
            if cast_angles is not None:
                ang = ang.to(cast_angles)
            if layout == "half":
                ang = torch.cat([ang, ang], dim=-1)
            elif layout == "interleaved":
                ang = ang.repeat_interleave(2, dim=-1)
            return out(ang) if out else (ang.cos(), ang.sin())

    return Rope


class RopeBase(RopeOk):
    def __init__(self, d_head, base=10000.0):
        nn.Module.__init__(self)
        self.d_head, self.base = d_head, base


def _freqs(exponent: Callable[[int], torch.Tensor], shared: bool = True):
    """A Rope whose inv_freq is base ** exponent(d_head); shared=False returns the (T, d) table uncat'ed."""

    class Rope(RopeBase):
        def forward(self, T, offset=0):
            pos = torch.arange(offset, offset + T, dtype=torch.float32)
            ang = torch.outer(pos, self.base ** exponent(self.d_head))
            if shared:
                ang = torch.cat([ang, ang], dim=-1)
            return ang.cos(), ang.sin()

    return Rope


def _interleaved_rotate(x):
    return torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)


def _rotate_1d_only(x):
    half = len(x) // 2  # the first dimension, not the last
    return torch.cat([-x[half:], x[:half]])


ROPE_WRONG = {
    # rotate_half
    "rotate_half sign": (lambda x: torch.cat([x[..., 4:], -x[..., :4]] if x.shape[-1] == 8 else
                                              [x[..., x.shape[-1] // 2 :], -x[..., : x.shape[-1] // 2]], -1),
                         apply_rotary_ok, RopeOk, r"Sign of the sine term.*\[x2, -x1\]"),
    "rotate_half interleaved": (_interleaved_rotate, apply_rotary_ok, RopeOk, r"Pairing mixed up.*adjacent"),
    "consistent interleaved RoPE": (_interleaved_rotate, lambda x, c, s: x * c + _interleaved_rotate(x) * s,
                                    _rope_class(layout="interleaved"), r"Pairing mixed up.*GPT-J-style"),
    "rotate_half without minus": (lambda x: torch.cat([x[..., x.shape[-1] // 2 :], x[..., : x.shape[-1] // 2]], -1),
                                  apply_rotary_ok, RopeOk, r"Missing minus"),
    "rotate_half splits the first dimension": (_rotate_1d_only, apply_rotary_ok, RopeOk, r"LAST dimension"),
    # RotaryEmbedding
    "angles not concatenated": (rotate_half_ok, apply_rotary_ok, _rope_class(layout="none"),
                                r"not shared across the two halves"),
    "angles interleaved": (rotate_half_ok, apply_rotary_ok, _rope_class(layout="interleaved"),
                           r"interleaved \(repeat_interleave"),
    "sine negated in the table": (rotate_half_ok, apply_rotary_ok, _rope_class(out=lambda a: (a.cos(), -a.sin())),
                                  r"sin table is -sin"),
    "exponent i instead of 2i": (rotate_half_ok, apply_rotary_ok,
                                 _freqs(lambda d: -torch.arange(d // 2, dtype=torch.float32) / d),
                                 r"Base exponent off by a factor of two"),
    "exponent 2 * 2i": (rotate_half_ok, apply_rotary_ok,
                        _freqs(lambda d: -2 * torch.arange(0, d, 2, dtype=torch.float32) / d), r"Base exponent doubled"),
    "positive exponent": (rotate_half_ok, apply_rotary_ok,
                          _freqs(lambda d: torch.arange(0, d, 2, dtype=torch.float32) / d), r"grow with i"),
    "one frequency per column, arange(0, d)": (rotate_half_ok, apply_rotary_ok,
                                               _freqs(lambda d: -torch.arange(0, d, dtype=torch.float32) / d, False),
                                               r"Angles not shared across halves"),
    "one frequency per column, 2j": (rotate_half_ok, apply_rotary_ok,
                                     _freqs(lambda d: -2 * torch.arange(0, d, dtype=torch.float32) / d, False),
                                     r"columns i and i \+ d/2 hold different angles"),
    "offset ignored": (rotate_half_ok, apply_rotary_ok,
                       _rope_class(lambda self, T, offset: RopeOk.angles(self, T, 0)), r"ignores offset"),
    "positions start at offset + 1": (rotate_half_ok, apply_rotary_ok,
                                      _rope_class(lambda self, T, offset: RopeOk.angles(self, T, offset + 1)),
                                      r"Positions off by one"),
    "returns (sin, cos)": (rotate_half_ok, apply_rotary_ok, _rope_class(out=lambda a: (a.sin(), a.cos())),
                           r"returns \(sin, cos\)"),
    "returns the angles": (rotate_half_ok, apply_rotary_ok, _rope_class(out=lambda a: (a, a)), r"cos\^2 \+ sin\^2"),
    "returns one tensor": (rotate_half_ok, apply_rotary_ok, _rope_class(out=lambda a: a.cos()), r"must return a pair"),
    "positions in bf16": (rotate_half_ok, apply_rotary_ok, _rope_class(
        lambda self, T, offset: torch.outer(torch.arange(offset, offset + T).to(torch.bfloat16), self.inv_freq)),
        r"Angles in bfloat16 \(positions in bfloat16\).*off by up to"),
    "angles cast to bf16": (rotate_half_ok, apply_rotary_ok, _rope_class(cast_angles=torch.bfloat16),
                            r"Angles in low precision.*bfloat16"),
    "inv_freq follows .to(bf16)": (rotate_half_ok, apply_rotary_ok, _rope_class(keep_float32=False),
                                   r"once the model is cast.*inv_freq buffer is now torch\.bfloat16"),
    "base ignored": (rotate_half_ok, apply_rotary_ok,
                     type("Rope", (RopeOk,), {"__init__": lambda self, d_head, base=10000.0: RopeOk.__init__(self, d_head)}),
                     r"base 10000: use the base argument"),
    "constructor without base": (rotate_half_ok, apply_rotary_ok,
                                 type("Rope", (RopeOk,), {"__init__": lambda self, d_head: RopeOk.__init__(self, d_head)}),
                                 r"RotaryEmbedding\(d_head, base=10000\.0\)"),
    # apply_rotary
    "apply_rotary subtracts": (rotate_half_ok, lambda x, c, s: x * c - rotate_half_ok(x) * s, RopeOk,
                               r"Sign of the sine term: you compute x \* cos - rotate_half"),
    "apply_rotary swaps cos and sin": (rotate_half_ok, lambda x, c, s: x * s + rotate_half_ok(x) * c, RopeOk,
                                       r"cos and sin swapped"),
    "apply_rotary forgets rotate_half": (rotate_half_ok, lambda x, c, s: x * c + x * s, RopeOk, r"rotate_half is missing"),
    "apply_rotary rotates adjacent pairs": (rotate_half_ok, lambda x, c, s: x * c + _interleaved_rotate(x) * s, RopeOk,
                                            r"Pairing mixed up: you rotate adjacent"),
    "apply_rotary drops the sine term": (rotate_half_ok, lambda x, c, s: x * c, RopeOk, r"sine term is missing"),
    "apply_rotary breaks on (B, H, T, d)": (rotate_half_ok, lambda x, c, s: x * c.T + rotate_half_ok(x) * s.T, RopeOk,
                                            r"raised"),
}


def test_rope_reader_solutions_pass(capsys):
    for cls in (RopeOk, RopeRecompute):
        assert drills.check_rope_drill(rotate_half_ok, apply_rotary_ok, cls) is True
        _expect(capsys.readouterr().out, True, r"test_rope_relative_position_property")


def test_rope_library_passes(capsys):
    def lib_rope(d_head, base=10000.0):
        return P.RotaryEmbedding(d_head, base)

    assert drills.check_rope_drill(P.rotate_half, lambda x, c, s: P.apply_rotary(x, c, s), lib_rope) is True
    _expect(capsys.readouterr().out, True)


def test_rope_untouched_stub(capsys):
    assert drills.check_rope_drill(_stub, _stub, _StubRope) is False
    out = capsys.readouterr().out
    _expect_stub(out)
    assert "rotate_half, RotaryEmbedding and apply_rotary" in out


def test_rope_partial_stub_reports_progress(capsys):
    assert drills.check_rope_drill(rotate_half_ok, _stub, RopeOk) is False
    out = capsys.readouterr().out
    _expect_stub(out)
    assert "apply_rotary still raises" in out and "(rotate_half and RotaryEmbedding) passes its checks" in out


def test_rope_partial_stub_with_a_mistake_is_diagnosed(capsys):
    """A written piece that is wrong is reported even while another is still a stub."""
    assert drills.check_rope_drill(lambda x: -rotate_half_ok(x), _stub, _StubRope) is False
    _expect(capsys.readouterr().out, False, r"Sign of the sine term")


@pytest.mark.parametrize("mistake", sorted(ROPE_WRONG))
def test_rope_names_the_mistake(capsys, mistake):
    rh, ar, cls, pattern = ROPE_WRONG[mistake]
    assert drills.check_rope_drill(rh, ar, cls) is False
    _expect(capsys.readouterr().out, False, pattern)


def test_rope_mistakes_that_keep_the_property_are_invisible_to_it():
    """Why the drill needs an oracle: a flipped sign and base^(-i/d) pass a pure relative-position test;
    the closed form in test_rope_relative_position_property and the complex rotation catch them."""
    for rh, ar, cls in (
        (lambda x: -rotate_half_ok(x), lambda x, c, s: x * c - rotate_half_ok(x) * s, RopeOk),
        (rotate_half_ok, apply_rotary_ok, _freqs(lambda d: -torch.arange(d // 2, dtype=torch.float32) / d)),
    ):
        _score_test(far=True)(rh, ar, cls)  # offsets only: passes
        with pytest.raises(AssertionError):
            chapter.test_rope_relative_position_property(RotaryEmbedding=cls, apply_rotary=ar)
        with pytest.raises(AssertionError):
            chapter.test_rope_matches_complex_multiplication(offset=37, RotaryEmbedding=cls, apply_rotary=ar)


# ---------------------------------------------------------------------------
# Drill (a), first step: the reader's property test
# ---------------------------------------------------------------------------


def _score_test(*, same_offset: bool = True, different_offset: bool = True, far: bool = False, rel_tol: float = 1e-4):
    def test(rotate_half, apply_rotary, RotaryEmbedding):
        rope = RotaryEmbedding(64)
        g = torch.Generator().manual_seed(0)
        q, k = torch.randn(1, 1, 1, 64, generator=g), torch.randn(1, 1, 1, 64, generator=g)

        def score(m, n):
            cm, sm = rope(1, offset=m)
            cn, sn = rope(1, offset=n)
            return (apply_rotary(q, cm, sm) * apply_rotary(k, cn, sn)).sum().item()

        if same_offset:
            assert math.isclose(score(3, 1), score(103, 101), rel_tol=rel_tol)
        if far:
            assert math.isclose(score(3, 1), score(4003, 4001), rel_tol=1e-3)
        if different_offset:
            assert not math.isclose(score(3, 1), score(3, 2), rel_tol=1e-3)

    return test


def _oracle_test(rotate_half, apply_rotary, RotaryEmbedding):
    """Property plus the exact rotation: catches everything, the sign and the frequencies too."""
    _score_test(far=True)(rotate_half, apply_rotary, RotaryEmbedding)
    chapter.test_rope_matches_complex_multiplication(offset=37, RotaryEmbedding=RotaryEmbedding, apply_rotary=apply_rotary)


def test_property_test_offsets_only_passes_and_names_its_blind_spot(capsys):
    """The section's own test (same offset, same score; different offset, different score)."""
    assert drills.check_rope_property_test(_score_test()) is True
    _expect(capsys.readouterr().out, True, r"cannot see a flipped sine sign")


@pytest.mark.parametrize("test", [
    lambda rh, ar, cls: chapter.test_rope_relative_position_property(RotaryEmbedding=cls, apply_rotary=ar),
    _oracle_test,
], ids=["chapter test (closed form)", "property plus complex oracle"])
def test_property_test_with_an_oracle_catches_everything(capsys, test):
    assert drills.check_rope_property_test(test) is True
    out = capsys.readouterr().out
    _expect(out, True, r"sine sign flipped")
    assert "cannot see" not in out


def test_property_test_untouched_stub(capsys):
    assert drills.check_rope_property_test(_stub) is False
    _expect_stub(capsys.readouterr().out)


PROPERTY_TEST_WRONG = {
    "no inequality": (_score_test(different_offset=False), r"does not rotate at all.*different offsets"),
    "asserts nothing": (lambda rh, ar, cls: None, r"does not rotate at all"),
    "only the inequality": (_score_test(same_offset=False), r"adjacent pairs|different angles"),
    "exact equality": (_score_test(rel_tol=0.0), r"fails on a correct RoPE.*rel_tol"),
    "wrong call": (lambda rh, ar, cls: cls(64)(1, 2, 3), r"fails on a correct RoPE.*TypeError"),
}


@pytest.mark.parametrize("mistake", sorted(PROPERTY_TEST_WRONG))
def test_property_test_names_the_gap(capsys, mistake):
    test, pattern = PROPERTY_TEST_WRONG[mistake]
    assert drills.check_rope_property_test(test) is False
    _expect(capsys.readouterr().out, False, pattern)


# ---------------------------------------------------------------------------
# Drill (b): sinusoidal table
# ---------------------------------------------------------------------------


def sinusoidal_ok(T, d_model, base=10000.0):
    pos = torch.arange(T, dtype=torch.float32)[:, None]  # (T, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (d/2,)
    ang = pos * base ** (-two_i / d_model)  # (T, d/2)
    pe = torch.zeros(T, d_model)
    pe[:, 0::2], pe[:, 1::2] = ang.sin(), ang.cos()
    return pe


def _sin_variant(*, exponent=lambda d: -torch.arange(0, d, 2, dtype=torch.float32) / d, start=0, swap=False,
                 halves=False, base_fixed=None, dtype=torch.float32, transpose=False):
    def fn(T, d_model, base=10000.0):
        b = base_fixed or base
        pos = torch.arange(start, start + T, dtype=torch.float64)[:, None]
        ang = pos * (b ** exponent(d_model)).double()
        s, c = (ang.cos(), ang.sin()) if swap else (ang.sin(), ang.cos())
        pe = torch.cat([s, c], -1) if halves else torch.stack([s, c], -1).reshape(T, d_model)
        pe = pe.to(dtype)
        return pe.T if transpose else pe

    return fn


SIN_WRONG = {
    "sin and cos swapped": (_sin_variant(swap=True), r"sin and cos swapped"),
    "halves layout": (_sin_variant(halves=True), r"all the sines in the first half"),
    "halves, cos first": (_sin_variant(halves=True, swap=True), r"cosines first"),
    "exponent i/d": (_sin_variant(exponent=lambda d: -torch.arange(d // 2, dtype=torch.float32) / d),
                     r"Base exponent off by a factor of two"),
    "exponent 2 * 2i / d": (_sin_variant(exponent=lambda d: -2 * torch.arange(0, d, 2, dtype=torch.float32) / d),
                            r"Base exponent doubled"),
    "positive exponent": (_sin_variant(exponent=lambda d: torch.arange(0, d, 2, dtype=torch.float32) / d),
                          r"grow with i"),
    "positions from 1": (_sin_variant(start=1), r"Positions off by one"),
    "base ignored": (_sin_variant(base_fixed=10000.0), r"base-10000 table"),
    "transposed": (_sin_variant(transpose=True), r"\(d_model, T\)"),
    "float64": (_sin_variant(dtype=torch.float64), r"Values right, dtype torch\.float64"),
    "swapped and exponent i/d": (_sin_variant(swap=True, exponent=lambda d: -torch.arange(d // 2, dtype=torch.float32) / d),
                                 r"Two things"),
    "cos at the wrong frequency": (
        lambda T, d, base=10000.0: torch.stack([sinusoidal_ok(T, d, base)[:, 0::2],
                                                sinusoidal_ok(T, d, base * 2)[:, 1::2]], -1).reshape(T, d),
        r"PE\[\d+, \d+\] = .*expected cos"),
    "returns a list": (lambda T, d, base=10000.0: sinusoidal_ok(T, d, base).tolist(), r"Return a torch\.Tensor"),
    "raises": (lambda T, d, base=10000.0: torch.zeros(T, d)[:, :: 0], r"raised ValueError"),
}


def _spec_listing(T: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The section's own listing: inv_freq over even indices in float32."""
    pos = torch.arange(T, dtype=torch.float32)[:, None]
    i = torch.arange(0, d_model, 2, dtype=torch.float32)
    inv_freq = base ** (-i / d_model)
    angles = pos * inv_freq
    pe = torch.zeros(T, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe


@pytest.mark.parametrize("fn", [sinusoidal_ok, _spec_listing, P.sinusoidal_positional_encoding])
def test_sinusoidal_correct_passes(capsys, fn):
    assert drills.check_sinusoidal_drill(fn) is True
    _expect(capsys.readouterr().out, True, r"test_sinusoidal_values_and_linear_offset_property passes")


def test_sinusoidal_untouched_stub(capsys):
    assert drills.check_sinusoidal_drill(_stub) is False
    _expect_stub(capsys.readouterr().out)


@pytest.mark.parametrize("mistake", sorted(SIN_WRONG))
def test_sinusoidal_names_the_mistake(capsys, mistake):
    fn, pattern = SIN_WRONG[mistake]
    assert drills.check_sinusoidal_drill(fn) is False
    _expect(capsys.readouterr().out, False, pattern)


# ---------------------------------------------------------------------------
# Drill (c): ALiBi
# ---------------------------------------------------------------------------


def _pow2_slopes(n):
    start = 2.0 ** (-8.0 / n)
    return [start ** (h + 1) for h in range(n)]


def slopes_ok(n_heads):
    n = 2 ** math.floor(math.log2(n_heads))
    slopes = _pow2_slopes(n) + _pow2_slopes(2 * n)[0::2][: n_heads - n]
    return torch.tensor(slopes, dtype=torch.float32)


def bias_with(slopes_fn=slopes_ok, *, sign=-1.0, clamp="past", queries_last=True, batch_axis=True):
    def alibi_bias(n_heads, T_q, T_k):
        q_pos = torch.arange(T_k - T_q, T_k)[:, None] if queries_last else torch.arange(T_q)[:, None]
        k_pos = torch.arange(T_k)[None, :]
        dist = (q_pos - k_pos).float()
        if clamp == "past":
            dist = dist.clamp(min=0)
        elif clamp == "abs":
            dist = dist.abs()
        elif clamp == "future":
            dist = (-dist).clamp(min=0)
        out = sign * slopes_fn(n_heads)[:, None, None] * dist[None]  # (H, T_q, T_k)
        return out[None] if batch_axis else out

    return alibi_bias


bias_ok = bias_with()


def _slopes_pow2_only(n_heads):
    if n_heads & (n_heads - 1):
        raise ValueError("this helper assumes n_heads is a power of two")
    start = 2.0 ** (-(2.0 ** -(math.log2(n_heads) - 3)))
    return torch.tensor([start ** (i + 1) for i in range(n_heads)])


def _slopes_extras_odd(n_heads):
    n = 2 ** math.floor(math.log2(n_heads))
    return torch.tensor(_pow2_slopes(n) + _pow2_slopes(2 * n)[1::2][: n_heads - n])


ALIBI_WRONG = {
    "power-of-two only (raises)": (_slopes_pow2_only, bias_with(_slopes_pow2_only), r"Power-of-two-only slopes.*raised"),
    "power-of-two only (geometric for every H)": (
        lambda H: torch.tensor(_pow2_slopes(H)), bias_with(lambda H: torch.tensor(_pow2_slopes(H))),
        r"Power-of-two-only slopes.*2\^\(-8h/H\) holds for H a power of two"),
    "exponent from 0": (lambda H: torch.tensor([2.0 ** (-8.0 * h / H) for h in range(H)]), bias_ok,
                        r"Off by one in the exponent"),
    "slopes ignore H": (lambda H: torch.tensor([2.0 ** -(h + 1) for h in range(H)]), bias_ok, r"ignore H"),
    "negative slopes": (lambda H: -slopes_ok(H), bias_ok, r"Slopes are positive"),
    "reversed slopes": (lambda H: slopes_ok(H).flip(0), bias_ok, r"reversed order"),
    "sorted slopes": (lambda H: slopes_ok(H).sort(descending=True).values, bias_ok, r"wrong order"),
    "extras from the odd indices": (_slopes_extras_odd, bias_ok, r"started at the second"),
    "bias sign": (slopes_ok, bias_with(sign=1.0), r"Sign: your bias is \+m_h"),
    "missing clamp of future keys": (slopes_ok, bias_with(clamp=None), r"Missing clamp of future keys"),
    "sign and no clamp": (slopes_ok, bias_with(sign=1.0, clamp=None), r"Sign and clamp"),
    "absolute distance": (slopes_ok, bias_with(clamp="abs"), r"\|i - j\|"),
    "distance reversed": (slopes_ok, bias_with(clamp="future"), r"Distance reversed"),
    "queries first": (slopes_ok, bias_with(queries_last=False), r"Query positions: with T_q < T_k"),
    "no batch axis": (slopes_ok, bias_with(batch_axis=False), r"leading batch axis"),
}


@pytest.mark.parametrize("pair", [(slopes_ok, bias_ok), (P.alibi_slopes, P.alibi_bias)], ids=["reader", "library"])
def test_alibi_correct_passes(capsys, pair):
    assert drills.check_alibi_drill(*pair) is True
    _expect(capsys.readouterr().out, True, r"test_alibi_slopes_and_bias passes")


def test_alibi_untouched_stub(capsys):
    assert drills.check_alibi_drill(_stub, _stub) is False
    _expect_stub(capsys.readouterr().out)


def test_alibi_partial_stub(capsys):
    assert drills.check_alibi_drill(slopes_ok, _stub) is False
    out = capsys.readouterr().out
    _expect_stub(out)
    assert "alibi_bias still raises" in out and "alibi_slopes passes its checks" in out


@pytest.mark.parametrize("mistake", sorted(ALIBI_WRONG))
def test_alibi_names_the_mistake(capsys, mistake):
    slopes, bias, pattern = ALIBI_WRONG[mistake]
    assert drills.check_alibi_drill(slopes, bias) is False
    _expect(capsys.readouterr().out, False, pattern)


# ---------------------------------------------------------------------------
# Drill (d): T5 buckets
# ---------------------------------------------------------------------------


def bucket_with(*, halve=True, offset_future=True, sign=-1, take_abs=True, exact_fn=lambda nb: nb // 2, log_start=0,
                clamp=True, causal_clamp=True, rounding=False, before_halving=False, to_float=False, eps=0.0):
    """A reader's relative_position_bucket with one choice changed (defaults: correct)."""

    def relative_position_bucket(relative_position, bidirectional, num_buckets, max_distance):
        ret = torch.zeros_like(relative_position)
        n = sign * relative_position
        max_exact = exact_fn(num_buckets) if before_halving else None
        if bidirectional:
            if halve:
                num_buckets //= 2
            if offset_future:
                ret = ret + (n < 0).long() * num_buckets
            if take_abs:
                n = n.abs()
        elif causal_clamp:
            n = torch.clamp(n, min=0)
        if max_exact is None:
            max_exact = exact_fn(num_buckets)
        is_small = n < max_exact
        pos = torch.log(n.float() / max_exact + eps) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
        val = max_exact + log_start + (pos.round() if rounding else pos).long()
        if clamp:
            val = torch.clamp(val, max=num_buckets - 1)
        out = ret + torch.where(is_small, n, val)
        return out.float() if to_float else out

    return relative_position_bucket


BUCKET_WRONG = {
    "bidirectional: not halved": (bucket_with(halve=False), r"Bidirectional split: .*halve"),
    "bidirectional: no offset for future keys": (bucket_with(offset_future=False), r"upper half"),
    "bidirectional: no abs": (bucket_with(take_abs=False), r"Negative bucket ids in bidirectional mode"),
    "max_exact before halving": (bucket_with(before_halving=True), r"Bidirectional split, in the wrong order"),
    "sign of the offset": (bucket_with(sign=1), r"Direction: relative_position is key - query"),
    "off by one: log range from max_exact + 1": (bucket_with(log_start=1), r"Off by one at the exact/log boundary"),
    "off by one: max_exact - 1": (bucket_with(exact_fn=lambda nb: nb // 2 - 1), r"Off by one at the exact/log boundary"),
    "off by one: max_exact + 1": (bucket_with(exact_fn=lambda nb: nb // 2 + 1), r"Off by one at the exact/log boundary"),
    "missing clamp at the last bucket": (bucket_with(clamp=False), r"Missing clamp at the last bucket"),
    "causal: future keys not clamped": (bucket_with(causal_clamp=False), r"Causal mode"),
    "rounding": (bucket_with(rounding=True), r"Rounding"),
    "float ids": (bucket_with(to_float=True), r"returns torch\.float32"),
    "wrong scale": (bucket_with(exact_fn=lambda nb: nb // 4), r"at relative_position = -?\d+ .*you give bucket"),
    "loops over a flat tensor": (
        lambda rel, bid, nb, md: torch.stack([P.relative_position_bucket(r, bid, nb, md) for r in rel])
        if rel.dim() == 1 else P.relative_position_bucket(rel.flatten()[:-1], bid, nb, md), r"\(T_q, T_k\) grid"),
}


def _hf_bucket(relative_position, bidirectional, num_buckets, max_distance):
    from transformers.models.t5.modeling_t5 import T5Attention

    return T5Attention._relative_position_bucket(relative_position, bidirectional=bidirectional,
                                                 num_buckets=num_buckets, max_distance=max_distance)


def test_bucket_variant_default_is_the_library():
    """The checker's mistake generator, with no mistake planted, is exactly the library's bucketing."""
    rel = torch.arange(-3000, 3001)
    for config in ((True, 32, 128), (False, 32, 128), (True, 16, 64), (False, 8, 20), (True, 64, 256)):
        assert torch.equal(drills._bucket_variant(rel, *config), P.relative_position_bucket(rel, *config))


@pytest.mark.parametrize("fn", [bucket_with(), bucket_with(eps=1e-6), P.relative_position_bucket, _hf_bucket],
                         ids=["reader", "listing with +1e-6", "library", "hugging face"])
def test_bucket_correct_passes(capsys, fn):
    if fn is _hf_bucket:
        pytest.importorskip("transformers")
    assert drills.check_bucket_drill(fn) is True
    _expect(capsys.readouterr().out, True, r"test_relative_position_bucket_properties passes")


def test_bucket_untouched_stub(capsys):
    assert drills.check_bucket_drill(_stub) is False
    _expect_stub(capsys.readouterr().out)


@pytest.mark.parametrize("mistake", sorted(BUCKET_WRONG))
def test_bucket_names_the_mistake(capsys, mistake):
    fn, pattern = BUCKET_WRONG[mistake]
    assert drills.check_bucket_drill(fn) is False
    _expect(capsys.readouterr().out, False, pattern)


# ---------------------------------------------------------------------------
# Checkers never raise, whatever the reader hands them
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("checker, args", [
    (drills.check_rope_drill, (None, None, None)),
    (drills.check_rope_drill, (lambda x: 1 / 0, lambda x, c, s: 1 / 0, lambda d, base=1.0: 1 / 0)),
    (drills.check_rope_property_test, (None,)),
    (drills.check_sinusoidal_drill, (None,)),
    (drills.check_alibi_drill, (None, None)),
    (drills.check_bucket_drill, (None,)),
])
def test_checkers_never_raise(capsys, checker, args):
    assert checker(*args) is False
    assert capsys.readouterr().out.startswith("Not yet.")


# ---------------------------------------------------------------------------
# The notebook: its hidden reference solutions pass, its stubs are stubs
# ---------------------------------------------------------------------------


def _notebook_cells() -> list[dict]:
    if not NOTEBOOK.exists():
        pytest.skip("notebooks/10_implementation.ipynb not present")
    return json.loads(NOTEBOOK.read_text())["cells"]


def _solutions() -> dict[str, str]:
    """The python blocks of each '<details><summary>Solution: drill (x)</summary> ... </details>' in the
    notebook, by drill letter."""
    out = {}
    for cell in _notebook_cells():
        src = "".join(cell["source"])
        for m in re.finditer(r"<summary>Solution: drill \((\w)\)</summary>(.*?)</details>", src, flags=re.S):
            blocks = re.findall(r"```python\n(.*?)```", m.group(2), flags=re.S)
            out[m.group(1)] = "\n".join(blocks)
    return out


def test_every_solution_is_hidden_in_a_cell_of_its_own():
    """A solution is a collapsed HTML <details> block (Jupyter, Colab and the site all render it
    closed), alone in its cell, so reading the next drill never shows the previous answer."""
    for path in sorted(NOTEBOOK.parent.glob("*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            src = "".join(cell["source"])
            if cell["cell_type"] != "markdown":
                continue
            assert "{dropdown}" not in src, f"{path.name} cell {i}: a MyST dropdown shows in plain view in Jupyter/Colab"
            if "<details>" in src:
                assert src.startswith("<details>") and src.rstrip().endswith("</details>"), (
                    f"{path.name} cell {i}: the solution shares its cell with other text")


def test_notebook_solutions_pass_their_checkers(capsys):
    sols = _solutions()
    assert set(sols) == {"a", "b", "c", "d"}, f"solutions found for drills {sorted(sols)}"
    runs = {
        "a": lambda ns: drills.check_rope_drill(ns["rotate_half"], ns["apply_rotary"], ns["RotaryEmbedding"])
        and drills.check_rope_property_test(ns["test_rope_property"]),
        "b": lambda ns: drills.check_sinusoidal_drill(ns["sinusoidal_positional_encoding"]),
        "c": lambda ns: drills.check_alibi_drill(ns["alibi_slopes"], ns["alibi_bias"]),
        "d": lambda ns: drills.check_bucket_drill(ns["relative_position_bucket"]),
    }
    for letter, code in sorted(sols.items()):
        ns: dict = {}
        exec("import math\nimport torch\nfrom torch import nn\n" + code, ns)  # noqa: S102 (our own notebook)
        assert runs[letter](ns) is True, f"drill ({letter}) solution fails:\n{capsys.readouterr().out}"


def test_notebook_stub_cells_are_untouched_stubs(capsys):
    """Every checker cell, run on the notebook's stub cells as shipped, says 'not implemented yet'."""
    cells = [c for c in _notebook_cells() if c["cell_type"] == "code"]
    stub_cells = ["".join(c["source"]) for c in cells if "NotImplementedError" in "".join(c["source"])]
    assert len(stub_cells) >= 5, "expected stub cells for the property test and the four drills"
    ns: dict = {}
    exec("import math\nimport torch\nfrom torch import nn\n" + "\n\n".join(stub_cells), ns)  # noqa: S102
    assert drills.check_rope_property_test(ns["test_rope_property"]) is False
    assert drills.check_rope_drill(ns["rotate_half"], ns["apply_rotary"], ns["RotaryEmbedding"]) is False
    assert drills.check_sinusoidal_drill(ns["sinusoidal_positional_encoding"]) is False
    assert drills.check_alibi_drill(ns["alibi_slopes"], ns["alibi_bias"]) is False
    assert drills.check_bucket_drill(ns["relative_position_bucket"]) is False
    out = capsys.readouterr().out
    assert out.count("Not implemented yet.") == 5 and "Not yet." not in out, out
