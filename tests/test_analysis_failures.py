"""Tests for mlbook.analysis.failures: each check separates the planted cause from the correct setting.

Oracles: float64 frequencies computed here for the angle count, the complex-number form of the
interleaved rotation for the ported layer's reference, and exact permutation algebra for the
shuffle check.
"""

from __future__ import annotations

import math

import pytest
import torch

from mlbook.analysis import failures as F


@pytest.mark.parametrize("scheme", ["learned", "rope", "sinusoidal"])
def test_decode_reset_check_separates_bug_from_correct(scheme: str) -> None:
    r = F.decode_reset_check(scheme, T=12)
    assert r.correct.shape == r.reset.shape == (12,)
    assert r.correct.max() < 1e-5  # a correct cache reproduces the full forward pass
    assert r.reset[0] < 1e-5  # the prefill starts at position 0 anyway
    assert r.reset[1:].min() > 1e-4  # from the first cached token on, every step is off
    assert r.first_bad_step == 1
    assert f"{scheme}: max |cached - full-forward logits|" in repr(r)


def test_decode_reset_check_bad_scheme() -> None:
    with pytest.raises(ValueError, match="unknown scheme 't5'"):
        F.decode_reset_check("t5")


def test_extrapolation_check_counts_missing_rows_and_new_angles() -> None:
    L, d_head, base = 512, 64, 10000.0
    report = F.extrapolation_check(L, (1.0, 1.5, 2.0, 4.0), d_head, base)
    theta = [base ** (-2 * i / d_head) for i in range(d_head // 2)]  # float64 oracle
    never_turned = sum(1 for t in theta if L * t < 2 * math.pi)
    for row in report.rows:
        assert row.T == round(row.factor * L)
        assert row.learned_missing_rows == max(row.T - L, 0)
        assert (row.learned_error is None) == (row.T <= L)
        assert row.rope_new_angle_pairs == (never_turned if row.T > L else 0)
        assert row.largest_angle_ratio == pytest.approx((row.T - 1) / L)
    assert 0 < never_turned < d_head // 2
    assert "cannot extrapolate" in report.rows[-1].learned_error
    assert f"{never_turned} of {d_head // 2}" in repr(report)


def test_ported_q_check_finds_the_pairing_mismatch() -> None:
    r = F.ported_q_check(d_model=32, n_heads=2, T=10)
    assert r.before_rotation == 0.0  # the weights load exactly; the rotation is what differs
    assert r.raw > 0.1 * r.scale  # garbage: comparable to q itself
    assert r.converted < 1e-12  # convert_rotary_weights makes the rotated q match channel for channel


def test_ported_q_reference_is_the_complex_rotation() -> None:
    """The reference layer's rotated q equals (q_2i + i q_2i+1) e^{i m theta_i}, computed here."""
    from mlbook.transformer.attention import MultiHeadAttention
    from mlbook.transformer.positional import RotaryEmbedding

    torch.manual_seed(0)
    d_model, H, T = 32, 2, 9
    d_head = d_model // H
    layer = MultiHeadAttention(d_model, H, rotary=RotaryEmbedding(d_head, pairing="interleaved")).double()
    x = torch.randn(1, T, d_model, dtype=torch.float64)
    with torch.no_grad():
        q_rot = F._rotated_q(layer, x)  # (1, H, T, d_head)
        q = F._rotated_q(layer, x, rotate=False)
    theta = 10000.0 ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)  # (d_head/2,)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * theta  # (T, d_head/2)
    z = torch.view_as_complex(q.reshape(1, H, T, d_head // 2, 2).contiguous()) * torch.polar(torch.ones_like(angle), angle)
    expected = torch.view_as_real(z).reshape(1, H, T, d_head)
    torch.testing.assert_close(q_rot, expected, rtol=1e-6, atol=1e-6)  # float32 angles in the library


def test_shuffle_check_flags_the_layers_that_ignore_position() -> None:
    r = F.shuffle_check(T=10, d_model=16, n_heads=2)
    assert r.uses_position("input") and r.uses_position("rope")
    for placement in ("after_projection", "norm_zeroed", "none"):
        assert not r.uses_position(placement), (placement, r.sensitivity[placement])
    assert min(r.sensitivity["input"], r.sensitivity["rope"]) > 1e3 * r.tolerance  # far from the threshold
    assert "IGNORES position" in repr(r)


def test_shuffle_probe_norm_really_removes_the_scalar_encoding() -> None:
    """LayerNorm of x + c_t * 1 equals LayerNorm of x: the planted encoding is exactly centred away."""
    probe = F._ShuffleProbe("norm_zeroed", 16, 2, 6).double()
    x = torch.randn(1, 6, 16, dtype=torch.float64)
    torch.testing.assert_close(probe.norm(x + probe.scalar_pe), probe.norm(x), rtol=0, atol=1e-12)
    assert probe.scalar_pe.abs().max() > 0.5


def test_failure_checks_bad_input() -> None:
    with pytest.raises(ValueError, match=r"d_model \(30\) must be n_heads \(4\) times an even d_head"):
        F.shuffle_check(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match=r"d_model \(30\) must be n_heads \(2\) times an even d_head"):
        F.ported_q_check(d_model=30, n_heads=2)
    with pytest.raises(ValueError, match="factor must be a finite number > 0"):
        F.extrapolation_check(512, (0.0,))


# ---------------------------------------------------------------------------
# A scaling that follows the length invalidates the cache
# ---------------------------------------------------------------------------


def test_cache_rescaling_check_flags_length_dependent_scalings_only() -> None:
    report = F.cache_rescaling_check(trained_len=8, T=20, factor=4.0)
    for name in F.CACHE_SCALINGS:
        assert report.within[name] < 1e-12, name  # inside L every scaling uses fixed frequencies
    assert {n for n in F.CACHE_SCALINGS if report.stale(n)} == {"dynamic", "longrope"}
    assert report.beyond["dynamic"] > 1e-4 and report.beyond["longrope"] > 1e-4
    assert "STALE past L" in repr(report) and "< 1e-09" in repr(report)


def test_cache_rescaling_check_sees_a_frequency_change_at_the_switch() -> None:
    # the oracle: the dynamic frequencies really differ between the first and the last step
    from mlbook.transformer.rope_scaling import RopeScaling

    s = RopeScaling("dynamic", factor=4.0, original_max_len=8)
    early, _ = s.frequencies(16, 10000.0, seq_len=8)
    late, _ = s.frequencies(16, 10000.0, seq_len=20)
    assert not torch.allclose(early, late)
    with pytest.raises(ValueError, match="T must be >= 9"):
        F.cache_rescaling_check(trained_len=8, T=8)
    with pytest.raises(ValueError, match="factor must be a finite number > 1.0"):
        F.cache_rescaling_check(factor=1.0)
    with pytest.raises(ValueError, match="d_head divisible by 4"):
        F.cache_rescaling_check(d_model=12, n_heads=2)
