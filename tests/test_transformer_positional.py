"""Unit tests for mlbook.transformer.positional: the chapter's section 3 tests and exercise 5.

Each test asserts the property in its name against an independent reference: the complex
form, float64 arithmetic from the formula, or an explicit loop over the definition. The
chapter's named tests live in the package (`mlbook.chapter_tests`, so a notebook can run them
in Colab, where there is no tests/ folder); here pytest runs them with the same parameters.
"""

from __future__ import annotations

import pytest
import torch

import mlbook.chapter_tests as chapter
from mlbook.transformer.positional import (
    RelativePositionBias2D,
    RotaryEmbedding,
    apply_rotary,
    convert_rotary_weights,
)

PAIRINGS = ("half", "interleaved")


def theta64(d: int, base: float = 10000.0) -> torch.Tensor:
    """Reference frequencies base^(-2i/d) in float64, straight from the formula."""
    return torch.tensor([base ** (-2.0 * i / d) for i in range(d // 2)], dtype=torch.float64)  # (d/2,)


# ---------------------------------------------------------------------------
# RoPE
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("pairing", PAIRINGS)
def test_rope_relative_position_property(pairing: str) -> None:
    """<R_m q, R_n k> depends on m - n only: score(3,1) == score(103,101) != score(3,2); closed form in float64."""
    chapter.test_rope_relative_position_property(pairing)


@pytest.mark.parametrize("pairing", PAIRINGS)
@pytest.mark.parametrize("offset", [0, 37, 4000])
def test_rope_matches_complex_multiplication(pairing: str, offset: int) -> None:
    """x * cos + rot(x) * sin equals (pair as complex) * e^{i m theta_i} computed with torch.polar."""
    chapter.test_rope_matches_complex_multiplication(pairing, offset)


def test_rope_scaling_modes() -> None:
    """Linear, NTK, YaRN, Llama 3 and dynamic scaling each move theta_i as their formula says."""
    chapter.test_rope_scaling_modes()


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
    """[x1, x2] -> [-x2, x1] (and the interleaved form); applied twice each gives -x."""
    chapter.test_rotate_half()


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
    """sin at column 2i, cos at 2i + 1; one block rotation M(k) maps every row t to row t + k."""
    chapter.test_sinusoidal_values_and_linear_offset_property()


def test_learned_positional_embedding_offset() -> None:
    """emb(3, offset=5) equals rows 5..7 of the full table."""
    chapter.test_learned_positional_embedding_offset()


# ---------------------------------------------------------------------------
# Relative: T5 buckets and bias, Swin 2-D bias
# ---------------------------------------------------------------------------


def test_relative_position_bucket_properties() -> None:
    """Exact, then log-spaced and clamped buckets, mirrored for the future; the bias depends on j - i only."""
    chapter.test_relative_position_bucket_properties()


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
    """Slopes 1/2 .. 1/256 for 8 heads (the paper's rule for other counts); -m_h (i - j), 0 for future keys."""
    chapter.test_alibi_slopes_and_bias()


