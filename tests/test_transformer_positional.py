"""Unit tests for mlbook.transformer.positional: the chapter's section 3 tests and exercise 5.

Each test asserts the property in its name against an independent reference: the complex
form, float64 arithmetic from the formula, or an explicit loop over the definition.
"""

from __future__ import annotations

import math

import pytest
import torch

from mlbook.transformer.positional import (
    LearnedPositionalEmbedding,
    RelativePositionBias,
    RelativePositionBias2D,
    RotaryEmbedding,
    alibi_bias,
    alibi_slopes,
    apply_rotary,
    convert_rotary_weights,
    relative_position_bucket,
    rotate_half,
    rotate_interleaved,
    sinusoidal_positional_encoding,
)

PAIRINGS = ("half", "interleaved")


def theta64(d: int, base: float = 10000.0) -> torch.Tensor:
    """Reference frequencies base^(-2i/d) in float64, straight from the formula."""
    return torch.tensor([base ** (-2.0 * i / d) for i in range(d // 2)], dtype=torch.float64)  # (d/2,)


def to_complex(x: torch.Tensor, pairing: str) -> torch.Tensor:
    """(..., d) real -> (..., d/2) complex128: pair i read as x_a + i x_b."""
    x = x.double()
    d = x.shape[-1]
    if pairing == "half":
        return torch.complex(x[..., : d // 2], x[..., d // 2 :])  # pairs (i, i + d/2)
    return torch.complex(x[..., 0::2], x[..., 1::2])  # pairs (2i, 2i + 1)


def from_complex(z: torch.Tensor, pairing: str) -> torch.Tensor:
    """Inverse of to_complex: (..., d/2) complex -> (..., d) real."""
    if pairing == "half":
        return torch.cat([z.real, z.imag], dim=-1)
    return torch.stack([z.real, z.imag], dim=-1).flatten(-2)


# ---------------------------------------------------------------------------
# RoPE
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("pairing", PAIRINGS)
def test_rope_relative_position_property(pairing: str) -> None:
    """<R_m q, R_n k> depends on m - n only: score(3,1) == score(103,101) != score(3,2)."""
    g = torch.Generator().manual_seed(0)
    d_head = 64
    rope = RotaryEmbedding(d_head, pairing=pairing)
    q = torch.randn(1, 1, 1, d_head, generator=g)  # (B, H, 1, d_head)
    k = torch.randn(1, 1, 1, d_head, generator=g)  # (B, H, 1, d_head)

    def score(m: int, n: int) -> float:
        cos_m, sin_m = rope(1, offset=m)  # (1, d_head) each
        cos_n, sin_n = rope(1, offset=n)
        qm = apply_rotary(q, cos_m, sin_m, pairing)
        kn = apply_rotary(k, cos_n, sin_n, pairing)
        return (qm * kn).sum().item()

    assert math.isclose(score(3, 1), score(103, 101), rel_tol=1e-4)
    assert math.isclose(score(7, 0), score(1007, 1000), rel_tol=1e-4)
    assert not math.isclose(score(3, 1), score(3, 2), rel_tol=1e-3)
    # the rotated score equals the float64 closed form Re sum q_i conj(k_i) e^{i (m - n) theta_i}
    zq, zk = to_complex(q.flatten(), pairing), to_complex(k.flatten(), pairing)
    ref = (zq * zk.conj() * torch.polar(torch.ones(d_head // 2, dtype=torch.float64), 2.0 * theta64(d_head))).sum().real
    assert math.isclose(score(3, 1), ref.item(), rel_tol=1e-5, abs_tol=1e-5)


@pytest.mark.parametrize("pairing", PAIRINGS)
@pytest.mark.parametrize("offset", [0, 37, 4000])
def test_rope_matches_complex_multiplication(pairing: str, offset: int) -> None:
    """x * cos + rot(x) * sin equals (pair as complex) * e^{i m theta_i} computed with torch.polar."""
    g = torch.Generator().manual_seed(1)
    d_head, T = 32, 9
    rope = RotaryEmbedding(d_head, pairing=pairing)
    x = torch.randn(2, 3, T, d_head, generator=g)  # (B, H, T, d_head)
    ours = rope.rotate(x, offset=offset)  # (B, H, T, d_head) real arithmetic
    cos, sin = rope(T, offset=offset)
    assert torch.equal(ours, apply_rotary(x, cos, sin, pairing))

    # the same float32 angles, rotated in complex128
    angles = rope.angles(torch.arange(offset, offset + T)).double()  # (T, d_head/2)
    z = to_complex(x, pairing) * torch.polar(torch.ones_like(angles), angles)  # (B, H, T, d_head/2)
    ref = from_complex(z, pairing)  # (B, H, T, d_head)
    torch.testing.assert_close(ours.double(), ref, atol=2e-6, rtol=0)
    # and the angles are m * theta_i (float32 rounding of the product only)
    exact = torch.arange(offset, offset + T, dtype=torch.float64)[:, None] * theta64(d_head)[None, :]
    torch.testing.assert_close(angles, exact, atol=(offset + T) * 2.0**-22 + 1e-9, rtol=0)


def test_rope_scaling_modes() -> None:
    d, base = 64, 10000.0
    none = RotaryEmbedding(d, base)
    th = theta64(d, base)

    # linear s=2: position 8 under interpolation is position 4 unscaled
    lin = RotaryEmbedding(d, base, "linear", 2.0)
    for a, b in zip(lin(1, offset=8), none(1, offset=4)):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    torch.testing.assert_close(lin(16, offset=0)[0][::2], none(8, offset=0)[0], atol=1e-6, rtol=0)

    # NTK: theta_0 fixed, theta_last shrunk by s, pair i by s^(2i/(d-2)) in between
    for s in (2.0, 4.0, 8.0):
        ntk = RotaryEmbedding(d, base, "ntk", s)
        assert ntk.inv_freq[0].item() == 1.0 == none.inv_freq[0].item()
        assert math.isclose(none.inv_freq[-1].item() / ntk.inv_freq[-1].item(), s, rel_tol=1e-5)
        expect = th / torch.tensor([s ** (2 * i / (d - 2)) for i in range(d // 2)], dtype=torch.float64)
        torch.testing.assert_close(ntk.inv_freq.double(), expect, rtol=1e-6, atol=0)

    # YaRN: pairs that turn more than beta_fast times within L keep theta, fewer than beta_slow get theta / s
    L, s = 2048, 4.0
    yarn = RotaryEmbedding(d, base, "yarn", s, original_max_len=L)
    turns = L * th / (2 * math.pi)  # (d/2,) full rotations of pair i within L
    fast, slow = turns > 32.0, turns < 1.0
    assert fast.any() and slow.any() and (~fast & ~slow).any()  # all three bands present at this d, L
    assert torch.equal(yarn.inv_freq[fast], none.inv_freq[fast])  # high frequencies unchanged
    torch.testing.assert_close(yarn.inv_freq[slow].double(), th[slow] / s, rtol=1e-6, atol=0)
    torch.testing.assert_close(yarn.inv_freq[-1].double(), th[-1] / s, rtol=1e-6, atol=0)  # lowest / s
    mid = ~fast & ~slow
    ratio = th[mid] / yarn.inv_freq[mid].double()  # in [1, s], non-decreasing with i
    assert (ratio >= 1 - 1e-6).all() and (ratio <= s + 1e-5).all() and (ratio.diff() >= -1e-6).all()
    assert math.isclose(yarn.attention_factor, 0.1 * math.log(s) + 1.0, rel_tol=1e-12)
    cos, sin = yarn(3)
    torch.testing.assert_close(cos[0], torch.full((d,), yarn.attention_factor), atol=1e-6, rtol=0)  # cos 0 = 1
    assert none.attention_factor == 1.0 and RotaryEmbedding(d, base, "yarn", 1.0, original_max_len=L).attention_factor == 1.0

    # Llama 3: wavelength < L / high_freq_factor unchanged, > L / low_freq_factor divided by s, blend between
    L, s = 512, 8.0
    ll3 = RotaryEmbedding(d, base, "llama3", s, original_max_len=L, low_freq_factor=1.0, high_freq_factor=4.0)
    wavelength = 2 * math.pi / th
    short, long_ = wavelength < L / 4.0, wavelength > L / 1.0
    assert short.any() and long_.any() and (~short & ~long_).any()
    assert torch.equal(ll3.inv_freq[short], none.inv_freq[short])
    torch.testing.assert_close(ll3.inv_freq[long_].double(), th[long_] / s, rtol=1e-6, atol=0)
    mid = ~short & ~long_
    smooth = (L / wavelength[mid] - 1.0) / (4.0 - 1.0)
    torch.testing.assert_close(ll3.inv_freq[mid].double(), (1 - smooth) * th[mid] / s + smooth * th[mid], rtol=1e-6, atol=0)
    assert ll3.attention_factor == 1.0

    # dynamic NTK: plain RoPE within original_max_len, a larger base past it
    L, s = 256, 2.0
    dyn = RotaryEmbedding(d, base, "dynamic", s, original_max_len=L)
    for a, b in zip(dyn(L), none(L)):
        assert torch.equal(a, b)
    for a, b in zip(dyn(8, offset=L - 8), none(8, offset=L - 8)):
        assert torch.equal(a, b)
    n = 4 * L
    grown = dyn.inv_freq_at(n)
    assert grown[0].item() == 1.0 and (grown[1:] < none.inv_freq[1:]).all()  # base grew
    base_n = base * (s * n / L - (s - 1)) ** (d / (d - 2))
    torch.testing.assert_close(grown.double(), theta64(d, base_n), rtol=1e-6, atol=0)
    assert torch.equal(dyn.inv_freq_at(L), none.inv_freq)
    # forward past L uses the grown frequencies for the total length offset + T
    cos, _ = dyn(1, offset=n - 1)
    ref = torch.cos((n - 1) * theta64(d, base_n))
    torch.testing.assert_close(cos[0, : d // 2].double(), ref, atol=(n - 1) * 2.0**-21 + 1e-6, rtol=0)
    assert not torch.allclose(cos, none(1, offset=n - 1)[0], atol=1e-3)


def test_rope_bf16_keeps_float32_frequencies_and_accuracy() -> None:
    """Cast to bf16, inv_freq stays float32; cos/sin at long positions, rounded to bf16, match float64."""
    d = 128
    rope = RotaryEmbedding(d).to(torch.bfloat16)
    assert rope.inv_freq.dtype == torch.float32
    torch.testing.assert_close(rope.inv_freq.double(), theta64(d), rtol=2**-23, atol=0)
    for p in (4095, 16000, 65000):
        cos, sin = rope(1, offset=p)  # float32 tables
        assert cos.dtype == torch.float32 and sin.dtype == torch.float32
        ref = p * theta64(d)
        ref = torch.cat([ref, ref])  # (d,) half layout
        for got, want in ((cos, ref.cos()), (sin, ref.sin())):
            err = (got.to(torch.bfloat16).double()[0] - want).abs().max().item()
            assert err < 1e-2, f"position {p}: bf16 cos/sin off by {err}"


def test_rotate_half() -> None:
    x = torch.arange(8.0)
    assert rotate_half(x).tolist() == [-4.0, -5.0, -6.0, -7.0, 0.0, 1.0, 2.0, 3.0]
    y = torch.randn(2, 3, 5, 16)
    assert torch.equal(rotate_half(rotate_half(y)), -y)
    assert rotate_interleaved(x).tolist() == [-1.0, 0.0, -3.0, 2.0, -5.0, 4.0, -7.0, 6.0]
    assert torch.equal(rotate_interleaved(rotate_interleaved(y)), -y)


@pytest.mark.parametrize("d_head", [2, 8, 64])
def test_convert_rotary_weights_round_trip(d_head: int) -> None:
    g = torch.Generator().manual_seed(2)
    H, d_in = 3, 10
    w = torch.randn(H * d_head, d_in, generator=g)
    inter = convert_rotary_weights(w, H, "interleaved")
    assert torch.equal(convert_rotary_weights(inter, H, "half"), w)
    # row 2i of each head's interleaved block is row i of the half block, row 2i+1 is row i + d/2
    wh, wi = w.view(H, d_head, d_in), inter.view(H, d_head, d_in)
    assert torch.equal(wi[:, 0::2], wh[:, : d_head // 2]) and torch.equal(wi[:, 1::2], wh[:, d_head // 2 :])
    b = torch.randn(H * d_head, generator=g)  # a bias converts the same way
    assert torch.equal(convert_rotary_weights(convert_rotary_weights(b, H, "interleaved"), H, "half"), b)
    if d_head > 2:
        assert not torch.equal(inter, w)


def test_convert_rotary_weights_preserves_rotated_scores() -> None:
    """q.k after RoPE is identical for half-layout weights and their interleaved conversion."""
    g = torch.Generator().manual_seed(3)
    H, d_head, d_in, T = 4, 16, 24, 12
    wq, wk = torch.randn(H * d_head, d_in, generator=g), torch.randn(H * d_head, d_in, generator=g)
    x = torch.randn(T, d_in, generator=g)  # (T, d_in)
    pos = torch.randint(0, 5000, (T,), generator=g)  # random absolute positions, not contiguous

    def scores(wq_: torch.Tensor, wk_: torch.Tensor, pairing: str) -> torch.Tensor:
        rope = RotaryEmbedding(d_head, pairing=pairing)
        ang = rope.angles(pos)  # (T, d_head/2)
        ang = torch.cat([ang, ang], -1) if pairing == "half" else ang.repeat_interleave(2, -1)  # (T, d_head)
        q = (x @ wq_.T).view(T, H, d_head).transpose(0, 1)  # (H, T, d_head)
        k = (x @ wk_.T).view(T, H, d_head).transpose(0, 1)
        q, k = apply_rotary(q, ang.cos(), ang.sin(), pairing), apply_rotary(k, ang.cos(), ang.sin(), pairing)
        return q @ k.transpose(-1, -2)  # (H, T, T)

    s_half = scores(wq, wk, "half")
    s_inter = scores(convert_rotary_weights(wq, H, "interleaved"), convert_rotary_weights(wk, H, "interleaved"), "interleaved")
    torch.testing.assert_close(s_inter, s_half, atol=1e-4, rtol=1e-5)
    # without the conversion the interleaved model computes different scores
    s_wrong = scores(wq, wk, "interleaved")
    assert (s_wrong - s_half).abs().max() > 1.0


# ---------------------------------------------------------------------------
# Absolute: sinusoidal and learned
# ---------------------------------------------------------------------------


def test_sinusoidal_values_and_linear_offset_property() -> None:
    T, d = 64, 16
    pe = sinusoidal_positional_encoding(T, d)  # (T, d) float32
    assert pe.shape == (T, d) and pe.dtype == torch.float32
    for t in (0, 1, 7, 50, 63):
        for i in (0, 1, 3, d // 2 - 1):
            w = 10000.0 ** (-2 * i / d)
            assert abs(pe[t, 2 * i].item() - math.sin(t * w)) < 1e-6 + t * 2.0**-22
            assert abs(pe[t, 2 * i + 1].item() - math.cos(t * w)) < 1e-6 + t * 2.0**-22

    omega = theta64(d)  # (d/2,)
    pe64 = pe.double()
    for k in (1, 5, 17):
        # M(k) = blockdiag R(omega_i k), R(phi) = [[cos, sin], [-sin, cos]] acting on (sin, cos)
        M = torch.zeros(d, d, dtype=torch.float64)
        for i, w in enumerate(omega.tolist()):
            c, s = math.cos(w * k), math.sin(w * k)
            M[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]], dtype=torch.float64)
        # one matrix maps every row t to row t + k
        torch.testing.assert_close(pe64[:-k] @ M.T, pe64[k:], atol=2e-5, rtol=0)
        assert torch.allclose(M @ M.T, torch.eye(d, dtype=torch.float64))  # a rotation
    # the matrix for a different k would not do
    assert not torch.allclose(pe64[:-1] @ M.T, pe64[1:], atol=1e-2)


def test_learned_positional_embedding_offset() -> None:
    torch.manual_seed(0)
    emb = LearnedPositionalEmbedding(16, 8)
    full = emb(16)  # (1, 16, 8)
    part = emb(3, offset=5)  # (1, 3, 8)
    assert full.shape == (1, 16, 8) and part.shape == (1, 3, 8)
    assert torch.equal(part[0], full[0, 5:8])
    assert torch.equal(part[0], emb.table.weight[5:8])
    assert not torch.equal(part[0], full[0, 0:3])


# ---------------------------------------------------------------------------
# Relative: T5 buckets and bias, Swin 2-D bias
# ---------------------------------------------------------------------------


def test_relative_position_bucket_properties() -> None:
    n = torch.arange(0, 3001)  # |query - key|
    for bidirectional in (True, False):
        nb, md = 32, 128
        per_dir = nb // 2 if bidirectional else nb
        max_exact = per_dir // 2
        past = relative_position_bucket(-n, bidirectional, nb, md)  # keys behind the query
        assert past.dtype == torch.long
        assert torch.equal(past[:max_exact], n[:max_exact])  # exact small distances
        assert (past.diff() >= 0).all()  # monotone non-decreasing in |n|
        assert (past[md:] == per_dir - 1).all()  # everything at or past max_distance shares the last bucket
        assert (past[max_exact:] >= max_exact).all()  # log buckets start where the exact ones end
        assert set(past.tolist()) == set(range(per_dir))  # every bucket of the direction is used
        future = relative_position_bucket(n[1:], bidirectional, nb, md)  # keys ahead of the query
        if bidirectional:
            assert (future >= per_dir).all() and (future < nb).all()  # future keys in the upper half
            assert (past < per_dir).all()
            assert torch.equal(future - per_dir, past[1:])  # mirror image of the past
        else:
            assert (future == 0).all()  # causal: future keys share bucket 0

    # T5 bias: depends on key - query only; (2, 5) and (6, 9) both have offset +3
    torch.manual_seed(0)
    rpb = RelativePositionBias(n_heads=4)
    bias = rpb(16, 16)  # (1, H, T_q, T_k)
    assert bias.shape == (1, 4, 16, 16)
    assert torch.equal(bias[0, :, 2, 5], bias[0, :, 6, 9])
    assert torch.equal(bias[0, :, 2, 5], rpb.table.weight[relative_position_bucket(torch.tensor(3))])
    assert not torch.equal(bias[0, :, 2, 5], bias[0, :, 5, 2])  # +3 and -3 are different buckets


WINDOW = 7


def test_relative_position_bias_2d_shapes_and_index() -> None:
    torch.manual_seed(0)
    H, w = 3, WINDOW
    rpb = RelativePositionBias2D(w, H)
    assert rpb.table.shape == ((2 * w - 1) ** 2, H) == (169, H)
    with torch.no_grad():  # distinct values so that any mis-indexing shows
        rpb.table.copy_(torch.arange(169 * H, dtype=torch.float32).view(169, H))
    bias = rpb()  # (H, w*w, w*w)
    assert bias.shape == (H, 49, 49)
    for p in range(w * w):
        for q in range(w * w):
            dy, dx = p // w - q // w, p % w - q % w  # query minus key
            assert torch.equal(bias[:, p, q], rpb.table[(dy + 6) * 13 + (dx + 6)])


def test_relative_position_bias_2d_translation_invariance() -> None:
    torch.manual_seed(1)
    w = WINDOW
    rpb = RelativePositionBias2D(w, 4)
    bias = rpb()

    def idx(y: int, x: int) -> int:
        return y * w + x  # row-major window position

    assert torch.equal(bias[:, idx(2, 3), idx(4, 5)], bias[:, idx(0, 1), idx(2, 3)])
    assert torch.equal(bias[:, idx(6, 6), idx(0, 0)], bias[:, idx(6, 6) - idx(0, 0), idx(0, 0)])
    assert not torch.equal(bias[:, idx(2, 3), idx(4, 5)], bias[:, idx(4, 5), idx(2, 3)])  # (2,2) vs (-2,-2)


# ---------------------------------------------------------------------------
# ALiBi
# ---------------------------------------------------------------------------


def test_alibi_slopes_and_bias() -> None:
    slopes = alibi_slopes(8)
    assert slopes.dtype == torch.float32
    assert slopes.tolist() == [1 / 2**h for h in range(1, 9)]  # exactly 1/2 .. 1/256

    H, T_q, T_k = 8, 3, 10
    bias = alibi_bias(H, T_q, T_k)
    assert bias.shape == (1, H, T_q, T_k)
    expect = torch.zeros(1, H, T_q, T_k, dtype=torch.float64)
    for h in range(H):
        for i in range(T_q):
            qpos = T_k - T_q + i  # queries are the last T_q of the T_k positions
            for j in range(T_k):
                expect[0, h, i, j] = -(2.0 ** -(h + 1)) * (qpos - j) if j <= qpos else 0.0
    assert torch.equal(bias.double(), expect)
    assert torch.equal(bias, alibi_bias(H, T_k, T_k)[:, :, T_k - T_q :])
    assert (alibi_bias(H, T_k, T_k).triu(1) == 0).all()  # future keys get no bonus
