"""Tests for mlbook.analysis.rope (section 2.4): every number the RoPE notebook prints or draws.

Oracles: Hugging Face's own RoPE code (LLaMA's rotate_half for the half layout, GPT-J's
rotate_every_two for the interleaved one), float64 re-derivations with numpy, and the complex
form. No expected number is typed in except where it is a definition (2 pi, bfloat16's spacing).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from mlbook.analysis import rope as R

def _theta64(d: int, base: float) -> np.ndarray:
    """float64 oracle theta_i = base^(-2i/d)."""
    return base ** (-2.0 * np.arange(d // 2) / d)


def _rotate_oracle(x: np.ndarray, m: int, base: float, pairing: str) -> np.ndarray:
    """R_m x in float64 with numpy, pair by pair: (a, b) -> (a cos t - b sin t, b cos t + a sin t)."""
    d = x.shape[-1]
    t = m * _theta64(d, base).astype(np.float32).astype(np.float64)  # the library's float32 frequencies
    out = x.astype(np.float64).copy()
    for i in range(d // 2):
        ia, ib = (i, i + d // 2) if pairing == "half" else (2 * i, 2 * i + 1)
        a, b = x[..., ia], x[..., ib]
        out[..., ia] = a * math.cos(t[i]) - b * math.sin(t[i])
        out[..., ib] = b * math.cos(t[i]) + a * math.sin(t[i])
    return out


@pytest.fixture
def qk() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    return torch.randn(32, generator=gen, dtype=torch.float64), torch.randn(32, generator=gen, dtype=torch.float64)


# ---------------------------------------------------------------------------
# R_m x and the score
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
@pytest.mark.parametrize("m", [0, 1, 7, 250])
def test_rotate_at_matches_a_float64_pairwise_rotation(pairing, m):
    x = torch.randn(3, 16, generator=torch.Generator().manual_seed(m), dtype=torch.float64)
    got = R.rotate_at(x, m, base=500.0, pairing=pairing).numpy()
    np.testing.assert_allclose(got, _rotate_oracle(x.numpy(), m, 500.0, pairing), atol=1e-5 * max(m, 1))


@pytest.mark.oracle
def test_rotate_at_matches_hugging_face_llama_and_gptj():
    from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb as gptj_apply
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb as llama_apply

    d, m, base = 16, 13, 10000.0
    x = torch.randn(1, 1, 1, d, generator=torch.Generator().manual_seed(0), dtype=torch.float64)  # (B, H, T, d)
    angle = m * torch.from_numpy(_theta64(d, base))  # (d/2,) float64
    cos_h, sin_h = torch.cat([angle, angle]).cos()[None, None], torch.cat([angle, angle]).sin()[None, None]
    hf_half, _ = llama_apply(x, x, cos_h, sin_h)  # (1, 1, 1, d) rotate_half layout
    hf_inter = gptj_apply(x.transpose(1, 2), angle.sin()[None, None], angle.cos()[None, None]).transpose(1, 2)
    ours_half = R.rotate_at(x[0, 0, 0], m, base=base, pairing="half")
    ours_inter = R.rotate_at(x[0, 0, 0], m, base=base, pairing="interleaved")
    torch.testing.assert_close(ours_half, hf_half[0, 0, 0], atol=1e-5, rtol=0)
    torch.testing.assert_close(ours_inter, hf_inter[0, 0, 0], atol=1e-5, rtol=0)


def test_rotation_is_counter_clockwise_in_the_pair_plane():
    # pair 0 turns by exactly 1 rad per token; e_0 (a = 1, b = 0) at m = 1 lands at (cos 1, sin 1), b > 0
    x = torch.zeros(8, dtype=torch.float64)
    x[0] = 1.0
    y = R.rotate_at(x, 1)
    assert y[0].item() == pytest.approx(math.cos(1.0), abs=1e-7)
    assert y[4].item() == pytest.approx(math.sin(1.0), abs=1e-7)  # dim i + d/2 is the pair's b axis


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_rope_score_depends_only_on_the_offset(qk, pairing):
    q, k = qk
    ref = R.rope_score(q, k, 3, 1, pairing=pairing)
    for m, n in [(103, 101), (2, 0), (1000, 998)]:
        assert R.rope_score(q, k, m, n, pairing=pairing) == pytest.approx(ref, rel=1e-4, abs=1e-4)
    assert abs(R.rope_score(q, k, 3, 2, pairing=pairing) - ref) > 1e-2


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
@pytest.mark.parametrize("m, n", [(0, 0), (7, 30), (500, 3)])
def test_complex_score_equals_the_rotated_dot_product(qk, pairing, m, n):
    q, k = qk
    rotated = float(torch.from_numpy(_rotate_oracle(q.numpy(), m, 10000.0, pairing))
                    @ torch.from_numpy(_rotate_oracle(k.numpy(), n, 10000.0, pairing)))
    assert R.complex_score(q, k, m, n, pairing=pairing) == pytest.approx(rotated, abs=1e-4)
    assert R.rope_score(q, k, m, n, pairing=pairing) == pytest.approx(rotated, abs=1e-4)


def test_as_complex_reads_the_pairs_of_each_layout():
    x = torch.arange(8.0)
    np.testing.assert_array_equal(R.as_complex(x, "half").numpy(), np.array([0 + 4j, 1 + 5j, 2 + 6j, 3 + 7j]))
    np.testing.assert_array_equal(R.as_complex(x, "interleaved").numpy(), np.array([0 + 1j, 2 + 3j, 4 + 5j, 6 + 7j]))


# ---------------------------------------------------------------------------
# R_m as a matrix
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_rotation_matrix_is_the_block_rotation(pairing):
    d, m, base = 8, 5, 100.0
    R_m = R.rotation_matrix(m, d, base, pairing).numpy()
    want = _rotate_oracle(np.eye(d), m, base, pairing).T  # column j = R_m e_j
    np.testing.assert_allclose(R_m, want, atol=1e-6)
    np.testing.assert_allclose(R_m.T @ R_m, np.eye(d), atol=1e-6)


def test_rotation_checks_report_small_errors_and_the_structure():
    rep = R.rotation_checks(d_head=32, positions=[(0, 0), (2, 9), (30, 70)])
    assert rep.orthogonality_error < 1e-6
    assert rep.composition_error < 1e-4
    assert rep.outside_pairs == 0.0
    assert rep.score_error < 1e-6
    assert "R_m^T R_n" in repr(rep)


def test_rotation_checks_needs_n_at_least_m():
    with pytest.raises(ValueError, match=r"n >= m"):
        R.rotation_checks(positions=[(5, 2)])


# ---------------------------------------------------------------------------
# One pair in the plane
# ---------------------------------------------------------------------------


def test_pair_rotation_turns_each_vector_by_its_position():
    q, k, pair, d, base = (1.0, 0.27), (0.55, 0.65), 3, 64, 10000.0
    p = R.pair_rotation(q, k, 5, 9, pair=pair, d_head=d, base=base)
    theta = float(np.float32(_theta64(d, base)[pair]))
    assert p.theta == pytest.approx(theta, rel=1e-7)
    wrap = lambda a: math.remainder(a, 2 * math.pi)  # noqa: E731
    assert wrap(p.angle_q - (math.atan2(q[1], q[0]) + 5 * theta)) == pytest.approx(0, abs=1e-6)
    assert wrap(p.angle_k - (math.atan2(k[1], k[0]) + 9 * theta)) == pytest.approx(0, abs=1e-6)
    assert p.score == pytest.approx(math.hypot(*q) * math.hypot(*k) * math.cos(p.angle_between), abs=1e-6)


def test_common_shift_keeps_angle_and_score_offset_changes_them():
    a, b = R.pair_rotation((1, 0.27), (0.55, 0.65), 0, 1), R.pair_rotation((1, 0.27), (0.55, 0.65), 3, 4)
    assert a.angle_between == pytest.approx(b.angle_between, abs=1e-6)
    assert a.score == pytest.approx(b.score, abs=1e-6)
    assert math.remainder(b.angle_q - a.angle_q - 3.0, 2 * math.pi) == pytest.approx(0, abs=1e-6)  # theta_0 = 1
    c = R.pair_rotation((1, 0.27), (0.55, 0.65), 3, 6)
    assert math.remainder(c.angle_between - a.angle_between - 2.0, 2 * math.pi) == pytest.approx(0, abs=1e-6)


def test_pair_score_curve_matches_pair_rotation_at_other_positions():
    offsets = [-4, -1, 0, 2, 9]
    curve = R.pair_score_curve((0.3, -1.0), (0.8, 0.1), offsets, pair=2, d_head=16, base=50.0)
    for o, s in zip(offsets, curve):
        m = 20
        assert s == pytest.approx(R.pair_rotation((0.3, -1.0), (0.8, 0.1), m, m + o, pair=2, d_head=16,
                                                  base=50.0).score, abs=1e-5)


# ---------------------------------------------------------------------------
# Frequency bands
# ---------------------------------------------------------------------------


def test_frequency_bands_are_position_times_theta():
    bands = R.frequency_bands(d_head=16, T=40, base=300.0)
    theta = _theta64(16, 300.0)
    np.testing.assert_allclose(bands.angle.numpy(), np.outer(theta, np.arange(40)), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(bands.angle_mod.numpy(), np.mod(np.outer(theta, np.arange(40)), 2 * np.pi), atol=1e-4)
    assert bands.wavelength[0].item() == pytest.approx(2 * math.pi)
    np.testing.assert_allclose(bands.sin.numpy(), np.sin(np.outer(theta, np.arange(40))), atol=1e-5)


def test_turns_within_counts_full_turns_over_positions_0_to_T_minus_1():
    turns = R.turns_within(d_head=64, T=64, base=10000.0).numpy()
    np.testing.assert_allclose(turns, 63 * _theta64(64, 10000.0) / (2 * np.pi), rtol=1e-6)


# ---------------------------------------------------------------------------
# Pairings and the porting bug
# ---------------------------------------------------------------------------


def test_pairing_permutation_sends_half_dims_to_adjacent_slots():
    for d in (2, 8, 12):
        want = [j for i in range(d // 2) for j in (i, i + d // 2)]
        assert R.pairing_permutation(d).tolist() == want


@pytest.mark.oracle
def test_permutation_makes_hugging_face_layouts_agree():
    from transformers.models.gptj.modeling_gptj import rotate_every_two
    from transformers.models.llama.modeling_llama import rotate_half as hf_rotate_half

    d = 12
    x = torch.randn(1, 1, 1, d, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    perm = R.pairing_permutation(d)
    torch.testing.assert_close(hf_rotate_half(x)[..., perm], rotate_every_two(x[..., perm]))


def test_pairing_equivalence_error():
    permuted, unpermuted = R.pairing_equivalence_error(d_head=32, m=11)
    assert permuted < 1e-12
    assert unpermuted > 0.1


def test_porting_bug_converted_is_exact_unconverted_is_not():
    rep = R.porting_bug(d_model=32, n_heads=2, T=12)
    assert rep.error_converted < 1e-12
    assert rep.error_unconverted > 0.1 * rep.reference_scale
    assert rep.diagonal_error_unconverted < 1e-6  # R_m^T R_m = I in either layout
    torch.testing.assert_close(rep.curve_converted, rep.curve_reference, atol=1e-12, rtol=0)
    assert rep.scores_reference.shape == (2, 12, 12) and rep.curve_reference.shape == (2, 12)
    # the curve is the last query's row read backwards: distance 0 is the diagonal element
    torch.testing.assert_close(rep.curve_reference[:, 0], rep.curve_unconverted[:, 0], atol=1e-6, rtol=0)


def test_both_layouts_are_relative_so_a_relative_test_cannot_catch_the_port():
    # an unconverted port is a half-layout RoPE on some q and k: still relative, only the wrong scores
    q, k = torch.randn(2, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    perm = R.pairing_permutation(16)
    for pairing in ("half", "interleaved"):
        assert R.rope_score(q, k, 9, 4, pairing=pairing) == pytest.approx(R.rope_score(q, k, 5, 0, pairing=pairing),
                                                                          abs=1e-5)
    # the same weights read in the other layout give different scores; permuted, the same ones
    assert abs(R.rope_score(q, k, 9, 4, pairing="half") - R.rope_score(q, k, 9, 4, pairing="interleaved")) > 1e-3
    assert R.rope_score(q, k, 9, 4, pairing="half") == pytest.approx(
        R.rope_score(q[perm], k[perm], 9, 4, pairing="interleaved"), abs=1e-9)


# ---------------------------------------------------------------------------
# Relative check and decay
# ---------------------------------------------------------------------------


def test_relative_check_is_the_interview_check():
    chk = R.relative_check(d_head=64)
    s = chk.scores
    assert s[(3, 1)] == pytest.approx(s[(103, 101)], abs=1e-4)
    assert abs(s[(3, 1)] - s[(3, 2)]) > 1e-3
    assert "score(3, 1)" in repr(chk)


def test_decay_curve_matches_rotating_each_sample():
    D = [0, 1, 5, 40, 300]
    curve = R.decay_curve(d_head=16, base=1000.0, distances=D, n_samples=4, seed=2)
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(4, 16, generator=gen, dtype=torch.float64)  # the same draws as decay_curve
    direct = torch.tensor([[R.rope_score(q[s], q[s], 0, d, base=1000.0) / float(q[s] @ q[s]) for d in D]
                           for s in range(4)], dtype=torch.float64)
    torch.testing.assert_close(curve.mean, direct.mean(0), atol=1e-5, rtol=0)
    torch.testing.assert_close(curve.single, direct[0], atol=1e-5, rtol=0)
    assert curve.mean[0].item() == pytest.approx(1.0)


def test_decay_expectation_is_mean_cosine_and_sample_mean_approaches_it():
    D = np.array([1, 3, 10, 100, 1000])
    curve = R.decay_curve(d_head=32, base=10000.0, distances=D.tolist(), n_samples=4000)
    want = np.cos(np.outer(D, _theta64(32, 10000.0))).mean(1)
    np.testing.assert_allclose(curve.expected.numpy(), want, atol=1e-5)
    np.testing.assert_allclose(curve.mean.numpy(), want, atol=0.02)
    assert (curve.low <= curve.mean).all() and (curve.mean <= curve.high).all()


# ---------------------------------------------------------------------------
# Precision
# ---------------------------------------------------------------------------


def test_angle_error_float32_is_within_half_an_ulp_of_the_angle():
    m = torch.arange(0, 70000, 7)
    err = R.angle_error(m, 64, 10000.0, "float32").numpy()  # (T, 32)
    angle = np.outer(m.numpy(), _theta64(64, 10000.0).astype(np.float32).astype(np.float64))
    assert (err <= np.spacing(angle.astype(np.float32)).astype(np.float64) / 2 + 1e-12).all()


def test_angle_error_bfloat16_rounds_the_position():
    # pair 0 has theta = 1 exactly; bfloat16 spacing is 16 between 2048 and 4096, and 3000 rounds to 3008
    err = R.angle_error([3000], 64, 10000.0, "bfloat16", pair=0)
    assert err.item() == pytest.approx(abs(math.remainder(8.0, 2 * math.pi)), abs=1e-9)


def test_angle_error_is_wrapped_and_one_pair_matches_the_table():
    m = torch.arange(0, 65537, 13)
    full = R.angle_error(m, 32, 10000.0, "bfloat16_inv_freq")
    assert float(full.min()) >= 0 and float(full.max()) <= math.pi + 1e-12
    torch.testing.assert_close(R.angle_error(m, 32, 10000.0, "bfloat16_inv_freq", pair=5), full[:, 5])
    assert float(full[:, 1].max()) > 1.0  # bf16 frequencies are off by radians at these positions


# ---------------------------------------------------------------------------
# Fused attention and the KV cache
# ---------------------------------------------------------------------------


def test_cached_decode_equals_full_forward():
    assert R.cached_decode_error(T=10) < 1e-10


def test_fused_attention_equals_readable_path():
    assert R.fused_attention_error(T=12) < 1e-6


# ---------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, exc, pattern",
    [
        (lambda: R.rotate_at([1.0, 2.0], 0), TypeError, r"x must be a floating-point torch.Tensor"),
        (lambda: R.rotate_at(torch.zeros(5), 0), ValueError, r"d_head.*even"),
        (lambda: R.rotate_at(torch.zeros(4), -1), ValueError, r"m must be >= 0"),
        (lambda: R.rotate_at(torch.zeros(4), 1, pairing="adjacent"), ValueError, r"pairing"),
        (lambda: R.rope_score(torch.zeros(4), torch.zeros(6), 0, 1), ValueError, r"k has length 6"),
        (lambda: R.rope_score(torch.zeros(4, dtype=torch.long), torch.zeros(4), 0, 1), TypeError, r"floating"),
        (lambda: R.pair_rotation((1, 0), (0, 1), 0, 1, pair=32, d_head=64), ValueError, r"pair must be in 0..31"),
        (lambda: R.pair_rotation((1, 0, 2), (0, 1), 0, 1), TypeError, r"q must be a 2-vector"),
        (lambda: R.pair_score_curve((1, 0), (0, 1), []), ValueError, r"offsets must not be empty"),
        (lambda: R.frequency_bands(T=0), ValueError, r"T must be >= 1"),
        (lambda: R.porting_bug(d_model=30, n_heads=4), ValueError, r"n_heads"),
        (lambda: R.decay_curve(distances=[-1, 2]), ValueError, r"distances"),
        (lambda: R.decay_curve(distances=[0.5]), ValueError, r"distances"),
        (lambda: R.angle_error([1, 2], precision="fp8"), ValueError, r"precision"),
        (lambda: R.angle_error([1.5]), ValueError, r"positions"),
        (lambda: R.angle_error([1, 2], pair=40), ValueError, r"pair must be in 0..31"),
        (lambda: R.as_complex(torch.zeros(3)), ValueError, r"even"),
    ],
)
def test_bad_input_names_the_argument(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


def test_porting_layers_is_the_one_set_up_of_both_porting_checks():
    """porting_bug (scores) and failures.ported_q_check (q) build their layers and load weights here."""
    from mlbook.analysis import rope as R

    ref, port, x = R.porting_layers(32, 2, seed=1, T=5)
    assert ref.rotary.pairing == "interleaved" and port.rotary.pairing == "half"
    assert x.shape == (1, 5, 32) and x.dtype == torch.float64 and R.porting_layers(32, 2, seed=1)[2] is None
    R.load_port(ref, port, convert=False)
    assert torch.equal(port.q_proj.weight, ref.q_proj.weight) and torch.equal(port.o_proj.weight, ref.o_proj.weight)
    R.load_port(ref, port, convert=True)
    assert not torch.equal(port.k_proj.weight, ref.k_proj.weight)
    with pytest.raises(ValueError, match="even d_head"):
        R.porting_layers(30, 2)


# ---------------------------------------------------------------------------
# Which bfloat16 rounding breaks relativity; the bases released models ship
# ---------------------------------------------------------------------------


def test_a_bf16_ladder_used_everywhere_stays_relative_and_rounded_positions_do_not():
    rel = R.precision_relativity(d_head=64, base=10000.0, shift=3000, distance=1000)
    assert rel.shifted["bfloat16_inv_freq"] < 1e-12  # another ladder: (m - n) theta~ exactly
    assert rel.shifted["float32"] < 1e-5  # float32 rounding of m theta and n theta separately
    assert rel.shifted["bfloat16"] > 1e-3  # 3,000 -> 3,008: the distance itself changed
    assert all(e == 0.0 for e in rel.mismatch["float32"])
    assert rel.mismatch["bfloat16_inv_freq"][0] < rel.mismatch["bfloat16_inv_freq"][-1]


def test_over_many_pairs_all_bf16_is_worse_than_the_ladder_alone_and_bf16_activations_stay_flat():
    rel = R.precision_relativity(d_head=64, base=10000.0, distances=(16, 1000, 10000), samples=2000)
    ladder, everything, acts = (rel.mismatch[p] for p in ("bfloat16_inv_freq", "bfloat16", R.ACTIVATIONS_BF16))
    assert everything[1] > 2 * ladder[1]  # a one-sample difference can cancel and reverse this
    assert ladder[0] < acts[0] < ladder[1]  # below the bf16 activations' floor at 16, far above it at 1,000
    assert max(acts) < 1e-3 and max(acts) < 1.5 * min(acts)  # bounded, not growing with distance
    assert rel.shifted[R.ACTIVATIONS_BF16] < 1e-3
    assert rel.score_scale == pytest.approx(64 ** -0.5, rel=0.05)  # the RMS of the normalised score itself


def test_precision_relativity_at_no_shift_is_exact_and_samples_is_validated():
    rel = R.precision_relativity(d_head=16, base=10000.0, shift=0, distance=5, distances=(5,), samples=1)
    assert rel.shifted["float32"] == 0.0 and rel.samples == 1
    with pytest.raises(ValueError, match="samples"):
        R.precision_relativity(samples=0)


@pytest.mark.parametrize("pair", [1, 8, 20])
def test_a_mismatched_ladder_errs_by_distance_times_the_frequency_error(pair):
    theta = R._rope(64, 10000.0, "half").inv_freq[pair].double()
    step = abs(float(theta.float().bfloat16().double() - theta))  # |theta~ - theta|
    D = torch.tensor([1, 100, 1000, 3000])
    got = R.angle_error(D, 64, 10000.0, "bfloat16_inv_freq", pair=pair)
    want = np.remainder(D.double().numpy() * step + math.pi, 2 * math.pi) - math.pi
    np.testing.assert_allclose(got.numpy(), np.abs(want), rtol=1e-5, atol=1e-9)


REAL = Path(os.environ.get("MLBOOK_REALCONFIGS", Path(__file__).resolve().parents[2] / "shared" / "realconfigs"
                           / "configs"))
# family -> (published config in ../shared/realconfigs, base key path, local-base key path)
_PUBLISHED = {
    "Llama 2": ("llama-2-7b-hf.json", None, None),  # no rope_theta key: LlamaConfig's default 10,000
    "Llama 3": ("meta-llama-3-8b-instruct.json", ("rope_theta",), None),
    "Qwen2.5": ("qwen2.5-7b.json", ("rope_theta",), None),
    "Qwen3": ("qwen3-0.6b.json", ("rope_theta",), None),
    "Qwen3-Next": ("qwen3-next-80b-a3b-thinking.json", ("rope_theta",), None),
    "Qwen3.5": ("qwen3.5-27b.json", ("text_config", "rope_parameters", "rope_theta"), None),
    "Gemma 3": ("medgemma-27b-it.json", ("text_config", "rope_theta"), ("text_config", "rope_local_base_freq")),
    "gpt-oss": ("gpt-oss-120b.json", ("rope_theta",), None),
    "DeepSeek-V3": ("deepseek-r1.json", ("rope_theta",), None),  # DeepSeek-R1 is DeepSeek-V3's architecture
    "Llama 4": ("llama-4-scout-17b-16e-instruct.json", ("text_config", "rope_theta"), None),
    "Kimi K2": ("kimi-k2-instruct.json", ("rope_theta",), None),
    "GLM-5": ("glm-5.json", ("rope_parameters", "rope_theta"), None),
}


def _get(cfg: dict, path: tuple[str, ...]):
    for key in path:
        cfg = cfg[key]
    return cfg


@pytest.mark.parametrize("name", sorted(_PUBLISHED))
def test_shipped_bases_equal_the_published_configs(name):
    import json

    file, base_key, local_key = _PUBLISHED[name]
    if not (REAL / file).exists():
        pytest.skip(f"{REAL / file} not here (set MLBOOK_REALCONFIGS to ../shared/realconfigs/configs)")
    cfg = json.loads((REAL / file).read_text())
    row = next(r for r in R.shipped_bases() if r.name == name)
    want = 10000.0 if base_key is None else float(_get(cfg, base_key))
    assert row.base == want
    if local_key is not None:
        assert row.local_base == float(_get(cfg, local_key))
    if name == "DeepSeek-V3":
        assert row.rotated == cfg["qk_rope_head_dim"] == 64 and row.pairing == "interleaved"
    if name in ("Qwen3-Next",):
        assert row.rotated == round(cfg["partial_rotary_factor"] * cfg["head_dim"])
    if name in ("Kimi K2", "GLM-5"):
        assert row.rotated == cfg["qk_rope_head_dim"] == 64 and row.pairing == "interleaved"
    if name == "GLM-5":
        assert cfg["rope_interleave"] is True
    text = cfg.get("text_config", cfg)
    scaling = text.get("rope_scaling")
    if scaling is None:
        assert row.scaling == "none" or not row.scaling_in_config
    else:  # the config's own scaling and factor, which the table prints
        assert row.scaling == scaling.get("rope_type", scaling.get("type")) and row.scaling_in_config
        assert row.scaling_factor == float(scaling["factor"])
    assert row.max_len == text["max_position_embeddings"] or not row.scaling_in_config


def test_shipped_bases_scaled_wavelength_is_the_slowest_pair_divided_by_the_factor():
    # linear, YaRN below beta_slow turns and Llama 3's scaling past original / low_freq_factor all divide the
    # slowest frequency by the factor: Gemma 3 45.1 M, gpt-oss 20.8 M, DeepSeek-V3 1.88 M tokens
    rows = {r.name: r for r in R.shipped_bases()}
    for name, factor in (("Gemma 3", 8), ("gpt-oss", 32), ("DeepSeek-V3", 40), ("Llama 4", 16), ("Kimi K2", 32)):
        row = rows[name]
        assert row.scaled_wavelength == pytest.approx(factor * row.slowest_wavelength, rel=1e-5)
    assert round(rows["DeepSeek-V3"].scaled_wavelength, -4) == 1.88e6 > rows["DeepSeek-V3"].max_len
    for name in ("Qwen3", "Llama 3", "GLM-5", "Code Llama"):  # nothing in config.json (Qwen: the card's YaRN)
        assert rows[name].scaled_wavelength is None
    assert rows["Qwen3"].scaling_label == "(card: YaRN x4)" and rows["DeepSeek-V3"].scaling_label == "YaRN x40"


def test_shipped_bases_deepseek_v3_rotates_interleaved_in_transformers():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.DeepseekV3Config()
    assert getattr(cfg, "rope_interleave", None) is True
    assert cfg.qk_rope_head_dim == 64


def test_shipped_bases_wavelength_is_the_slowest_pair_of_the_rotated_channels():
    for row in R.shipped_bases():
        theta = R._rope(row.rotated, row.base, "half").inv_freq[-1].double()
        assert row.slowest_wavelength == pytest.approx(2 * math.pi / float(theta), rel=1e-6)


@pytest.mark.oracle
def test_transformers_casts_inv_freq_under_module_to_but_not_under_from_pretrained(tmp_path):
    # page 05 says so: Hugging Face's LlamaRotaryEmbedding does not guard its inv_freq buffer, so model.to(bf16)
    # gives the mismatched ladder (forward's .to(torch.float) cannot undo the rounding); from_pretrained(dtype=...)
    # keeps it float32; the library's RotaryEmbedding keeps float32 under .to(...)
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=32, hidden_size=64, intermediate_size=64, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=2)
    model = transformers.LlamaForCausalLM(cfg)
    model.save_pretrained(tmp_path)
    ladder = model.model.rotary_emb.inv_freq.clone()
    assert ladder.dtype == torch.float32
    model.to(torch.bfloat16)
    assert model.model.rotary_emb.inv_freq.dtype == torch.bfloat16
    assert not torch.equal(model.model.rotary_emb.inv_freq.float(), ladder)  # rounded for good
    assert transformers.LlamaForCausalLM(cfg).half().model.rotary_emb.inv_freq.dtype == torch.float16
    loaded = transformers.LlamaForCausalLM.from_pretrained(tmp_path, dtype=torch.bfloat16)
    assert loaded.model.rotary_emb.inv_freq.dtype == torch.float32
    assert R.RotaryEmbedding(64).to(torch.bfloat16).inv_freq.dtype == torch.float32


def test_shipped_bases_mark_llama4s_chunked_rotary_layers():
    # page 05: Llama 4's rotary layers attend within 8,192-token chunks (its NoPE layers carry the global reach),
    # so the table footnotes its scaling; no other row chunks every rotary layer
    rows = {row.name: row for row in R.shipped_bases()}
    assert rows["Llama 4"].chunk == 8192
    assert all(row.chunk is None for name, row in rows.items() if name != "Llama 4")


def test_hf_inv_freq_dtype_is_measured_or_none():
    got = R.hf_inv_freq_dtype()
    try:
        import transformers  # noqa: F401
    except ImportError:
        assert got is None
        return
    assert got is not None and got.dtype == torch.bfloat16 and got.version == transformers.__version__
    assert R.hf_inv_freq_dtype(torch.float16).dtype == torch.float16
    with pytest.raises(TypeError, match="dtype"):
        R.hf_inv_freq_dtype(torch.int64)
