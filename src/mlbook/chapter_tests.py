"""The chapter's named tests (section 3), shipped with the package so a notebook can run them anywhere.

In Colab only the installed package exists (no tests/ folder), so the properties that define
each encoding live here, as plain functions that raise AssertionError when a property fails.
tests/test_transformer_positional.py calls them under pytest; `run_chapter_tests()` runs them
from a notebook and prints one line per test; the retype drills (`mlbook.exercises.drills`)
run the same functions against a reader's own code.

Most tests take the implementation under test as keyword arguments and default to the
library's. A reader's RoPE has the signatures of the drill:

    rotate_half(x) -> x rotated,    apply_rotary(x, cos, sin) -> x rotated,
    RotaryEmbedding(d_head, base=10000.0)(T, offset=0) -> (cos, sin), each (T, d_head)

Oracles are independent of the code under test: the complex form of the rotation, float64
arithmetic straight from the formula, or an explicit loop over the definition.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import partial
from typing import Callable, Sequence

import torch

from mlbook.transformer import positional as P
from mlbook.transformer.rope_scaling import RopeScaling

__all__ = [
    "test_rope_relative_position_property",
    "test_rope_matches_complex_multiplication",
    "test_rope_scaling_modes",
    "test_sinusoidal_values_and_linear_offset_property",
    "test_relative_position_bucket_properties",
    "test_alibi_slopes_and_bias",
    "test_rotate_half",
    "test_learned_positional_embedding_offset",
    "ChapterTest",
    "CHAPTER_TESTS",
    "ChapterTestResult",
    "ChapterTestReport",
    "run_chapter_tests",
    "theta64",
]

PAIRINGS = P.ROPE_PAIRINGS  # ("half", "interleaved")


# ---------------------------------------------------------------------------
# Oracles: float64 and complex arithmetic from the definitions
# ---------------------------------------------------------------------------


def theta64(d: int, base: float = 10000.0) -> torch.Tensor:
    """Reference frequencies base^(-2i/d) in float64, straight from the formula."""
    return torch.tensor([base ** (-2.0 * i / d) for i in range(d // 2)], dtype=torch.float64)  # (d/2,)


def _to_complex(x: torch.Tensor, pairing: str) -> torch.Tensor:
    """(..., d) real -> (..., d/2) complex128: pair i read as x_a + i x_b."""
    x = x.double()
    d = x.shape[-1]
    if pairing == "half":
        return torch.complex(x[..., : d // 2], x[..., d // 2 :])  # pairs (i, i + d/2)
    return torch.complex(x[..., 0::2], x[..., 1::2])  # pairs (2i, 2i + 1)


def _from_complex(z: torch.Tensor, pairing: str) -> torch.Tensor:
    """Inverse of _to_complex: (..., d/2) complex -> (..., d) real."""
    if pairing == "half":
        return torch.cat([z.real, z.imag], dim=-1)
    return torch.stack([z.real, z.imag], dim=-1).flatten(-2)


def _assert_close(actual: torch.Tensor, expected: torch.Tensor, *, atol: float, rtol: float) -> None:
    """|actual - expected| <= atol + rtol |expected| everywhere, shapes equal (torch.testing.assert_close's
    rule, without its first-call import cost, which is seconds on a small CPU)."""
    assert tuple(actual.shape) == tuple(expected.shape), f"shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    a, e = actual.double(), expected.double()
    excess = (a - e).abs() - (atol + rtol * e.abs())
    if bool((excess > 0).any()) or bool(torch.isnan(a).any()):
        idx = tuple(int(v) for v in torch.nonzero(excess > 0)[0]) if bool((excess > 0).any()) else ()
        raise AssertionError(
            f"not close: max |actual - expected| = {float((a - e).abs().max()):.3g} (atol {atol:g}, rtol {rtol:g})"
            + (f", first at index {idx}: {float(a[idx]):.6g} vs {float(e[idx]):.6g}" if idx else "")
        )


def _rope_impl(
    pairing: str, RotaryEmbedding: Callable | None, apply_rotary: Callable | None
) -> tuple[Callable[[int], object], Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor], bool]:
    """(make_rope(d_head), apply(x, cos, sin), is_library) for the library or a reader's pair."""
    if pairing not in PAIRINGS:
        raise ValueError(f"unknown pairing {pairing!r}; valid values are {', '.join(map(repr, PAIRINGS))}")
    if (RotaryEmbedding is None) != (apply_rotary is None):
        raise ValueError("pass both RotaryEmbedding and apply_rotary (a reader's implementation) or neither (the library)")
    if RotaryEmbedding is None:
        return partial(P.RotaryEmbedding, pairing=pairing), partial(P.apply_rotary, pairing=pairing), True
    return RotaryEmbedding, apply_rotary, False  # type: ignore[return-value]


# ---------------------------------------------------------------------------
# RoPE
# ---------------------------------------------------------------------------


def test_rope_relative_position_property(
    pairing: str = "half", *, RotaryEmbedding: Callable | None = None, apply_rotary: Callable | None = None
) -> None:
    """<R_m q, R_n k> depends on m - n only: score(3,1) == score(103,101) != score(3,2).

    Also: the rotated score equals the float64 closed form Re sum_i q_i conj(k_i) e^{i (m - n) theta_i}.
    """
    make_rope, apply, _ = _rope_impl(pairing, RotaryEmbedding, apply_rotary)
    g = torch.Generator().manual_seed(0)
    d_head = 64
    rope = make_rope(d_head)
    q = torch.randn(1, 1, 1, d_head, generator=g)  # (B, H, 1, d_head)
    k = torch.randn(1, 1, 1, d_head, generator=g)  # (B, H, 1, d_head)

    def score(m: int, n: int) -> float:
        cos_m, sin_m = rope(1, offset=m)  # (1, d_head) each
        cos_n, sin_n = rope(1, offset=n)
        qm = apply(q, cos_m, sin_m)  # (B, H, 1, d_head)
        kn = apply(k, cos_n, sin_n)
        return (qm * kn).sum().item()

    assert math.isclose(score(3, 1), score(103, 101), rel_tol=1e-4), (
        f"same offset 2, different scores: score(3, 1) = {score(3, 1):.6f}, score(103, 101) = {score(103, 101):.6f}"
    )
    assert math.isclose(score(7, 0), score(1007, 1000), rel_tol=1e-4), (
        f"same offset 7, different scores: score(7, 0) = {score(7, 0):.6f}, score(1007, 1000) = {score(1007, 1000):.6f}"
    )
    assert not math.isclose(score(3, 1), score(3, 2), rel_tol=1e-3), (
        f"offsets 2 and 1 give the same score {score(3, 1):.6f}: the rotation does not depend on position"
    )
    zq, zk = _to_complex(q.flatten(), pairing), _to_complex(k.flatten(), pairing)  # (d/2,) complex
    turn = torch.polar(torch.ones(d_head // 2, dtype=torch.float64), 2.0 * theta64(d_head))  # e^{i (3 - 1) theta}
    ref = float((zq * zk.conj() * turn).sum().real)
    assert math.isclose(score(3, 1), ref, rel_tol=1e-5, abs_tol=1e-5), (
        f"score(3, 1) = {score(3, 1):.6f}, but the closed form Re sum q conj(k) e^(2 i theta) gives {ref:.6f}"
    )


def test_rope_matches_complex_multiplication(
    pairing: str = "half", offset: int = 0, *, RotaryEmbedding: Callable | None = None,
    apply_rotary: Callable | None = None,
) -> None:
    """x * cos + rot(x) * sin equals (pair as complex) * e^{i m theta_i}, m = offset .. offset + T - 1.

    For the library also: RotaryEmbedding.rotate is apply_rotary on its own tables, and its float32
    angles are m * theta_i to float32 rounding. A reader's code is compared with the exact float64
    angles, with a tolerance for float32 rounding of m * theta_i (it grows with the position).
    """
    make_rope, apply, is_library = _rope_impl(pairing, RotaryEmbedding, apply_rotary)
    g = torch.Generator().manual_seed(1)
    d_head, T = 32, 9
    rope = make_rope(d_head)
    x = torch.randn(2, 3, T, d_head, generator=g)  # (B, H, T, d_head)
    cos, sin = rope(T, offset=offset)  # (T, d_head) each
    ours = apply(x, cos, sin)  # (B, H, T, d_head) real arithmetic
    assert tuple(ours.shape) == tuple(x.shape), f"rotated shape {tuple(ours.shape)} != input shape {tuple(x.shape)}"
    exact = torch.arange(offset, offset + T, dtype=torch.float64)[:, None] * theta64(d_head)[None, :]  # (T, d/2)
    if is_library:
        assert torch.equal(rope.rotate(x, offset=offset), ours), "RotaryEmbedding.rotate differs from apply_rotary"
        angles = rope.angles(torch.arange(offset, offset + T)).double()  # (T, d_head/2) the float32 angles
        z = _to_complex(x, pairing) * torch.polar(torch.ones_like(angles), angles)  # (B, H, T, d_head/2)
        _assert_close(ours.double(), _from_complex(z, pairing), atol=2e-6, rtol=0)
        # and the angles are m * theta_i (float32 rounding of the product only)
        _assert_close(angles, exact, atol=(offset + T) * 2.0**-22 + 1e-9, rtol=0)
    else:
        z = _to_complex(x, pairing) * torch.polar(torch.ones_like(exact), exact)  # (B, H, T, d_head/2)
        scale = float(_to_complex(x, pairing).abs().max())  # rounding an angle by e moves a pair by |pair| * e
        tol = 2e-6 + (offset + T) * 2.0**-22 * scale
        _assert_close(ours.double(), _from_complex(z, pairing), atol=tol, rtol=0)


def test_rope_scaling_modes() -> None:
    """Linear, NTK, YaRN, Llama 3 and dynamic scaling each change the frequencies as their formula says."""
    d, base = 64, 10000.0
    none = P.RotaryEmbedding(d, base)
    th = theta64(d, base)

    # linear s=2: position 8 under interpolation is position 4 unscaled
    lin = P.RotaryEmbedding(d, base, RopeScaling("linear", 2.0))
    for a, b in zip(lin(1, offset=8), none(1, offset=4)):
        _assert_close(a, b, atol=1e-6, rtol=0)
    _assert_close(lin(16, offset=0)[0][::2], none(8, offset=0)[0], atol=1e-6, rtol=0)

    # NTK: theta_0 fixed, theta_last shrunk by s, pair i by s^(2i/(d-2)) in between
    for s in (2.0, 4.0, 8.0):
        ntk = P.RotaryEmbedding(d, base, RopeScaling("ntk", s))
        assert ntk.inv_freq[0].item() == 1.0 == none.inv_freq[0].item()
        assert math.isclose(none.inv_freq[-1].item() / ntk.inv_freq[-1].item(), s, rel_tol=1e-5)
        expect = th / torch.tensor([s ** (2 * i / (d - 2)) for i in range(d // 2)], dtype=torch.float64)
        _assert_close(ntk.inv_freq.double(), expect, rtol=1e-6, atol=0)

    # YaRN: pairs that turn more than beta_fast times within L keep theta, fewer than beta_slow get theta / s
    L, s = 2048, 4.0
    yarn = P.RotaryEmbedding(d, base, RopeScaling("yarn", s, original_max_len=L))
    turns = L * th / (2 * math.pi)  # (d/2,) full rotations of pair i within L
    fast, slow = turns > 32.0, turns < 1.0
    assert fast.any() and slow.any() and (~fast & ~slow).any()  # all three bands present at this d, L
    assert torch.equal(yarn.inv_freq[fast], none.inv_freq[fast])  # high frequencies unchanged
    _assert_close(yarn.inv_freq[slow].double(), th[slow] / s, rtol=1e-6, atol=0)
    _assert_close(yarn.inv_freq[-1].double(), th[-1] / s, rtol=1e-6, atol=0)  # lowest / s
    mid = ~fast & ~slow
    ratio = th[mid] / yarn.inv_freq[mid].double()  # in [1, s], non-decreasing with i
    assert (ratio >= 1 - 1e-6).all() and (ratio <= s + 1e-5).all() and (ratio.diff() >= -1e-6).all()
    assert math.isclose(yarn.attention_factor, 0.1 * math.log(s) + 1.0, rel_tol=1e-12)
    cos, sin = yarn(3)
    _assert_close(cos[0], torch.full((d,), yarn.attention_factor), atol=1e-6, rtol=0)  # cos 0 = 1
    assert none.attention_factor == 1.0
    assert P.RotaryEmbedding(d, base, RopeScaling("yarn", 1.0, original_max_len=L)).attention_factor == 1.0

    # Llama 3: wavelength < L / high_freq_factor unchanged, > L / low_freq_factor divided by s, blend between
    L, s = 512, 8.0
    ll3 = P.RotaryEmbedding(d, base, RopeScaling("llama3", s, original_max_len=L, low_freq_factor=1.0,
                                                 high_freq_factor=4.0))
    wavelength = 2 * math.pi / th
    short, long_ = wavelength < L / 4.0, wavelength > L / 1.0
    assert short.any() and long_.any() and (~short & ~long_).any()
    assert torch.equal(ll3.inv_freq[short], none.inv_freq[short])
    _assert_close(ll3.inv_freq[long_].double(), th[long_] / s, rtol=1e-6, atol=0)
    mid = ~short & ~long_
    smooth = (L / wavelength[mid] - 1.0) / (4.0 - 1.0)
    _assert_close(ll3.inv_freq[mid].double(), (1 - smooth) * th[mid] / s + smooth * th[mid], rtol=1e-6, atol=0)
    assert ll3.attention_factor == 1.0

    # dynamic NTK: plain RoPE within original_max_len, a larger base past it
    L, s = 256, 2.0
    dyn = P.RotaryEmbedding(d, base, RopeScaling("dynamic", s, original_max_len=L))
    for a, b in zip(dyn(L), none(L)):
        assert torch.equal(a, b)
    for a, b in zip(dyn(8, offset=L - 8), none(8, offset=L - 8)):
        assert torch.equal(a, b)
    n = 4 * L
    grown = dyn.inv_freq_at(n)
    assert grown[0].item() == 1.0 and (grown[1:] < none.inv_freq[1:]).all()  # base grew
    base_n = base * (s * n / L - (s - 1)) ** (d / (d - 2))
    _assert_close(grown.double(), theta64(d, base_n), rtol=1e-6, atol=0)
    assert torch.equal(dyn.inv_freq_at(L), none.inv_freq)
    # forward past L uses the grown frequencies for the total length offset + T
    cos, _ = dyn(1, offset=n - 1)
    ref = torch.cos((n - 1) * theta64(d, base_n))
    _assert_close(cos[0, : d // 2].double(), ref, atol=(n - 1) * 2.0**-21 + 1e-6, rtol=0)
    assert not torch.allclose(cos, none(1, offset=n - 1)[0], atol=1e-3)


def test_rotate_half(rotate_half: Callable | None = None, rotate_interleaved: Callable | None = None) -> None:
    """rotate_half: [x1, x2] -> [-x2, x1]; applied twice it is -x (a quarter turn of every pair).

    With no arguments both library rotations are tested; pass a reader's rotate_half alone to
    test only that one.
    """
    if rotate_half is None:
        rotate_half, rotate_interleaved = P.rotate_half, P.rotate_interleaved
    x = torch.arange(8.0)
    got = rotate_half(x)
    assert got.tolist() == [-4.0, -5.0, -6.0, -7.0, 0.0, 1.0, 2.0, 3.0], f"rotate_half(arange(8)) = {got.tolist()}"
    y = torch.randn(2, 3, 5, 16, generator=torch.Generator().manual_seed(4))  # (B, H, T, d_head)
    assert torch.equal(rotate_half(rotate_half(y)), -y), "rotate_half applied twice is not -x"
    if rotate_interleaved is not None:
        assert rotate_interleaved(x).tolist() == [-1.0, 0.0, -3.0, 2.0, -5.0, 4.0, -7.0, 6.0]
        assert torch.equal(rotate_interleaved(rotate_interleaved(y)), -y)


# ---------------------------------------------------------------------------
# Absolute: sinusoidal and learned
# ---------------------------------------------------------------------------


def test_sinusoidal_values_and_linear_offset_property(sinusoidal_positional_encoding: Callable | None = None) -> None:
    """PE[t, 2i] = sin(t w_i), PE[t, 2i+1] = cos(t w_i); one rotation M(k) maps every row t to row t + k."""
    fn = P.sinusoidal_positional_encoding if sinusoidal_positional_encoding is None else sinusoidal_positional_encoding
    T, d = 64, 16
    pe = fn(T, d)  # (T, d) float32
    assert tuple(pe.shape) == (T, d) and pe.dtype == torch.float32, f"got shape {tuple(pe.shape)}, dtype {pe.dtype}"
    for t in (0, 1, 7, 50, 63):
        for i in (0, 1, 3, d // 2 - 1):
            w = 10000.0 ** (-2 * i / d)
            assert abs(pe[t, 2 * i].item() - math.sin(t * w)) < 1e-6 + t * 2.0**-22, f"PE[{t}, {2 * i}] != sin"
            assert abs(pe[t, 2 * i + 1].item() - math.cos(t * w)) < 1e-6 + t * 2.0**-22, f"PE[{t}, {2 * i + 1}] != cos"

    omega = theta64(d)  # (d/2,)
    pe64 = pe.double()
    for k in (1, 5, 17):
        # M(k) = blockdiag R(omega_i k), R(phi) = [[cos, sin], [-sin, cos]] acting on (sin, cos)
        M = torch.zeros(d, d, dtype=torch.float64)
        for i, w in enumerate(omega.tolist()):
            c, s = math.cos(w * k), math.sin(w * k)
            M[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
        # one matrix maps every row t to row t + k
        _assert_close(pe64[:-k] @ M.T, pe64[k:], atol=2e-5, rtol=0)
        assert torch.allclose(M @ M.T, torch.eye(d, dtype=torch.float64))  # a rotation
    # the matrix for a different k would not do
    assert not torch.allclose(pe64[:-1] @ M.T, pe64[1:], atol=1e-2)


def test_learned_positional_embedding_offset() -> None:
    """emb(3, offset=5) is rows 5..7 of the table: cached decoding asks for absolute positions."""
    with torch.random.fork_rng(devices=[]):  # leave the caller's random stream alone
        torch.manual_seed(0)
        emb = P.LearnedPositionalEmbedding(16, 8)
    full = emb(16)  # (1, 16, 8)
    part = emb(3, offset=5)  # (1, 3, 8)
    assert full.shape == (1, 16, 8) and part.shape == (1, 3, 8)
    assert torch.equal(part[0], full[0, 5:8])
    assert torch.equal(part[0], emb.table.weight[5:8])
    assert not torch.equal(part[0], full[0, 0:3])


# ---------------------------------------------------------------------------
# Relative: T5 buckets and bias
# ---------------------------------------------------------------------------


def test_relative_position_bucket_properties(relative_position_bucket: Callable | None = None) -> None:
    """Exact buckets below num_buckets // 2 (per direction), log-spaced and monotone above, one last
    bucket from max_distance on; bidirectional: future keys mirror the past in the upper half;
    causal: future keys in bucket 0. The T5 bias built on it is (1, H, T_q, T_k) and depends on j - i only.
    """
    fn = P.relative_position_bucket if relative_position_bucket is None else relative_position_bucket
    n = torch.arange(0, 3001)  # |query - key|
    for bidirectional in (True, False):
        nb, md = 32, 128
        per_dir = nb // 2 if bidirectional else nb
        max_exact = per_dir // 2
        past = fn(-n, bidirectional, nb, md)  # keys behind the query
        assert past.dtype == torch.long, f"bucket ids must be int64, got {past.dtype}"
        assert torch.equal(past[:max_exact], n[:max_exact])  # exact small distances
        assert (past.diff() >= 0).all()  # monotone non-decreasing in |n|
        assert (past[md:] == per_dir - 1).all()  # everything at or past max_distance shares the last bucket
        assert (past[max_exact:] >= max_exact).all()  # log buckets start where the exact ones end
        assert set(past.tolist()) == set(range(per_dir))  # every bucket of the direction is used
        future = fn(n[1:], bidirectional, nb, md)  # keys ahead of the query
        if bidirectional:
            assert (future >= per_dir).all() and (future < nb).all()  # future keys in the upper half
            assert (past < per_dir).all()
            assert torch.equal(future - per_dir, past[1:])  # mirror image of the past
        else:
            assert (future == 0).all()  # causal: future keys share bucket 0

    # T5 bias: depends on key - query only; (2, 5) and (6, 9) both have offset +3
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        rpb = P.RelativePositionBias(n_heads=4)
    bias = rpb(16, 16)  # (1, H, T_q, T_k)
    assert bias.shape == (1, 4, 16, 16)
    assert torch.equal(bias[0, :, 2, 5], bias[0, :, 6, 9])
    assert torch.equal(bias[0, :, 2, 5], rpb.table.weight[fn(torch.tensor(3), True, 32, 128)])
    assert not torch.equal(bias[0, :, 2, 5], bias[0, :, 5, 2])  # +3 and -3 are different buckets


# ---------------------------------------------------------------------------
# ALiBi
# ---------------------------------------------------------------------------


def _paper_slopes(n_heads: int) -> list[float]:
    """Press et al.'s rule in float64: 2^(-8h/n) for the largest power of two n <= H, then every other
    slope of the 2n-head sequence until there are H."""
    n = 1 << (n_heads.bit_length() - 1)
    slopes = [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]
    extra = [2.0 ** (-8.0 * h / (2 * n)) for h in range(1, 2 * n + 1)][0::2]
    return slopes + extra[: n_heads - n]


def test_alibi_slopes_and_bias(alibi_slopes: Callable | None = None, alibi_bias: Callable | None = None) -> None:
    """Slopes 1/2 .. 1/256 for 8 heads (the paper's interleaving for other head counts); the bias is
    -m_h (i - j) for keys j <= i, 0 for future keys, with the queries the last T_q of T_k positions."""
    if (alibi_slopes is None) != (alibi_bias is None):
        raise ValueError("pass both alibi_slopes and alibi_bias (a reader's implementation) or neither (the library)")
    slopes_fn = P.alibi_slopes if alibi_slopes is None else alibi_slopes
    bias_fn = P.alibi_bias if alibi_bias is None else alibi_bias
    slopes = slopes_fn(8)
    assert slopes.dtype == torch.float32, f"slopes must be float32, got {slopes.dtype}"
    assert slopes.tolist() == [1 / 2**h for h in range(1, 9)], f"alibi_slopes(8) = {slopes.tolist()}"  # exact
    for H in (1, 2, 6, 12, 24):  # head counts that are not a power of two follow the paper's interleaving
        got = slopes_fn(H).double()
        want = torch.tensor(_paper_slopes(H), dtype=torch.float64)
        assert got.shape == want.shape, f"alibi_slopes({H}) has shape {tuple(got.shape)}, expected ({H},)"
        _assert_close(got, want, rtol=1e-6, atol=0)

    H, T_q, T_k = 8, 3, 10
    bias = bias_fn(H, T_q, T_k)
    assert bias.shape == (1, H, T_q, T_k), f"bias shape {tuple(bias.shape)}, expected (1, H, T_q, T_k)"
    expect = torch.zeros(1, H, T_q, T_k, dtype=torch.float64)
    for h in range(H):
        for i in range(T_q):
            qpos = T_k - T_q + i  # queries are the last T_q of the T_k positions
            for j in range(T_k):
                expect[0, h, i, j] = -(2.0 ** -(h + 1)) * (qpos - j) if j <= qpos else 0.0
    assert torch.equal(bias.double(), expect)
    assert torch.equal(bias, bias_fn(H, T_k, T_k)[:, :, T_k - T_q :])
    assert (bias_fn(H, T_k, T_k).triu(1) == 0).all()  # future keys get no bonus


# ---------------------------------------------------------------------------
# The registry and the runner
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ChapterTest:
    """One named test, the cases it runs with, and the property it asserts (one line)."""

    name: str
    fn: Callable[..., None]
    cases: tuple[dict, ...]
    asserts: str


CHAPTER_TESTS: tuple[ChapterTest, ...] = (
    ChapterTest(
        "test_rope_relative_position_property", test_rope_relative_position_property,
        tuple({"pairing": p} for p in PAIRINGS),
        "score(3,1) == score(103,101) != score(3,2), and equals the complex closed form",
    ),
    ChapterTest(
        "test_rope_matches_complex_multiplication", test_rope_matches_complex_multiplication,
        tuple({"pairing": p, "offset": o} for p in PAIRINGS for o in (0, 37, 4000)),
        "x*cos + rot(x)*sin == (pair as complex) * e^(i m theta_i)",
    ),
    ChapterTest(
        "test_rope_scaling_modes", test_rope_scaling_modes, ({},),
        "linear, ntk, yarn, llama3, dynamic move theta_i as their formulas say",
    ),
    ChapterTest(
        "test_sinusoidal_values_and_linear_offset_property", test_sinusoidal_values_and_linear_offset_property, ({},),
        "sin at 2i, cos at 2i+1; PE[t+k] = M(k) PE[t] for every t",
    ),
    ChapterTest(
        "test_relative_position_bucket_properties", test_relative_position_bucket_properties, ({},),
        "exact then log buckets, clamped, mirrored; bias depends on j - i",
    ),
    ChapterTest(
        "test_alibi_slopes_and_bias", test_alibi_slopes_and_bias, ({},),
        "slopes 1/2..1/256 (paper's rule for any H); -m_h (i-j), 0 for future keys",
    ),
    ChapterTest("test_rotate_half", test_rotate_half, ({},), "[x1, x2] -> [-x2, x1]; twice gives -x"),
    ChapterTest(
        "test_learned_positional_embedding_offset", test_learned_positional_embedding_offset, ({},),
        "emb(3, offset=5) == rows 5..7 of the table",
    ),
)


@dataclass(frozen=True)
class ChapterTestResult:
    name: str
    case: str  # pytest-style id, e.g. "half-37"; "" for a test without parameters
    passed: bool
    error: str  # "" when passed
    seconds: float


@dataclass(frozen=True)
class ChapterTestReport:
    results: tuple[ChapterTestResult, ...]

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def failed(self) -> int:
        return len(self.results) - self.passed

    @property
    def all_passed(self) -> bool:
        return self.failed == 0

    def __repr__(self) -> str:
        lines = []
        for r in self.results:
            label = r.name + (f"[{r.case}]" if r.case else "")
            lines.append(f"{'PASS' if r.passed else 'FAIL'}  {label}" + ("" if r.passed else f"\n      {r.error}"))
        lines.append(f"{self.passed} passed, {self.failed} failed")
        return "\n".join(lines)


def run_chapter_tests(names: Sequence[str] | None = None, *, verbose: bool = True) -> ChapterTestReport:
    """Run the chapter's named tests (all, or those in `names`) and report pass or fail per case.

    Never raises for a failing test: the failure (its assertion message) is recorded instead.
    Prints the report when verbose; returns it either way.
    """
    known = [t.name for t in CHAPTER_TESTS]
    if names is not None:
        if isinstance(names, str):
            raise TypeError("names must be a sequence of test names, e.g. ['test_rotate_half'], not a string")
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"unknown test name(s) {unknown}; the chapter's tests are {', '.join(known)}")
    results = []
    for test in CHAPTER_TESTS:
        if names is not None and test.name not in names:
            continue
        for case in test.cases:
            start = time.perf_counter()
            try:
                test.fn(**case)
                ok, err = True, ""
            except Exception as exc:  # a failing property is a result, not a crash
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                ok, err = False, f"{type(exc).__name__}: {first}" if first else type(exc).__name__
            results.append(ChapterTestResult(
                test.name, "-".join(str(v) for v in case.values()), ok, err, time.perf_counter() - start
            ))
    report = ChapterTestReport(tuple(results))
    if verbose:
        print(report)
    return report
