"""Tests for mlbook.analysis.extension: the numbers of section 2.6 (context extension).

Oracles: float64 re-derivations of each formula from its definition, Hugging Face's
ROPE_INIT_FUNCTIONS (test-only dependency) for every scaling, the RoPE score computed by
rotating q and k with the library's RotaryEmbedding, and numpy's least squares.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from hf_versions import rope_init_function
from mlbook.analysis import extension as E
from mlbook.transformer.positional import RotaryEmbedding
from mlbook.transformer.rope_scaling import ROPE_SCALINGS


def theta64(d: int, base: float) -> np.ndarray:
    return base ** (-2.0 * np.arange(d // 2) / d)


def turns64(d: int, base: float, L: int) -> np.ndarray:
    return L * theta64(d, base) / (2 * math.pi)


# ---------------------------------------------------------------------------
# Angle coverage
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("d,base,L,s", [(128, 10000.0, 8192, 4.0), (64, 500000.0, 4096, 16.0), (32, 100.0, 256, 2.0)])
def test_angle_coverage_matches_float64_definition(d, base, L, s):
    cov = E.angle_coverage(d, base, L, factor=s)
    th = theta64(d, base)
    np.testing.assert_allclose(cov.seen, L * th, rtol=1e-6)
    np.testing.assert_allclose(cov.needed, (round(s * L) - 1) * th, rtol=1e-6)
    assert cov.target_len == round(s * L)
    assert cov.ratio == pytest.approx((s * L - 1) / L, rel=1e-9)
    never = [i for i in range(d // 2) if L * th[i] < 2 * math.pi]  # independent: less than a turn in training
    assert list(cov.unwrapped) == never


def test_angle_coverage_chapter_case_pairs_50_to_63_never_wrap():
    cov = E.angle_coverage(128, 10000.0, 8192, target_len=131072)
    assert cov.unwrapped == tuple(range(50, 64))
    assert cov.ratio == pytest.approx(131071 / 8192)
    assert "pair i" in repr(cov)


def test_angle_coverage_rejects_bad_lengths():
    with pytest.raises(ValueError, match="original_max_len"):
        E.angle_coverage(128, 10000.0, 0)
    with pytest.raises(TypeError, match="target_len"):
        E.angle_coverage(128, 10000.0, 8192, target_len=1.5)


# ---------------------------------------------------------------------------
# Frequencies per method: against Hugging Face and closed forms
# ---------------------------------------------------------------------------


def test_methods_are_the_library_registry():
    # every context extension one factor sets; LongRoPE (per-pair factors searched per model) and proportional
    # (p-RoPE: pairs held still, no context extension) are the registry's others
    assert E.METHODS + ("longrope", "proportional") == ROPE_SCALINGS
    assert set(E.METHOD_LABELS) == set(E.METHODS)


def _hf_inv_freq(name: str, d: int, base: float, L: int, s: float, seq_len: int | None = None) -> torch.Tensor:
    transformers = pytest.importorskip("transformers")
    from transformers import LlamaConfig

    scaling, max_pos = {
        "none": (None, L),
        "linear": ({"rope_type": "linear", "factor": s}, L),
        "ntk": (None, L),
        "dynamic": ({"rope_type": "dynamic", "factor": s}, L),
        "yarn": ({"rope_type": "yarn", "factor": s, "original_max_position_embeddings": L, "beta_fast": 32.0,
                  "beta_slow": 1.0}, int(s * L)),
        "llama3": ({"rope_type": "llama3", "factor": s, "original_max_position_embeddings": L, "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0}, int(s * L)),
    }[name]
    theta = base * s ** (d / (d - 2)) if name == "ntk" else base  # HF has no static NTK type: raise the base
    cfg = LlamaConfig(vocab_size=8, hidden_size=2 * d, num_attention_heads=2, num_key_value_heads=2, head_dim=d,
                      num_hidden_layers=1, intermediate_size=8, rope_theta=theta, rope_scaling=scaling,
                      max_position_embeddings=max_pos)
    kind = "default" if name in ("none", "ntk") else name
    kw = {"seq_len": seq_len} if name == "dynamic" else {}
    assert transformers
    return rope_init_function(kind)(cfg, "cpu", **kw)[0]


@pytest.mark.parametrize("method", E.METHODS)
@pytest.mark.parametrize("d,base,L,s", [(128, 10000.0, 8192, 4.0), (64, 500000.0, 2048, 8.0)])
def test_scaled_inv_freq_matches_hugging_face(method, d, base, L, s):
    seq_len = 3 * L if method == "dynamic" else None
    ours, _ = E.scaled_inv_freq(method, d, base, s, original_max_len=L, seq_len=seq_len, dynamic_factor=s)
    hf = _hf_inv_freq(method, d, base, L, s, seq_len)
    torch.testing.assert_close(ours.double(), hf.double(), rtol=2e-6, atol=0)


def test_frequency_ratios_closed_forms():
    d, base, L, s = 128, 10000.0, 8192, 4.0
    r = E.frequency_ratios(d, base, s, original_max_len=L, seq_len=2 * L)
    i = np.arange(d // 2)
    np.testing.assert_allclose(r["none"], 1.0, rtol=1e-7)
    np.testing.assert_allclose(r["linear"], 1 / s, rtol=1e-6)
    np.testing.assert_allclose(r["ntk"], s ** (-2 * i / (d - 2)), rtol=1e-5)
    np.testing.assert_allclose(r["dynamic"], 2.0 ** (-2 * i / (d - 2)), rtol=1e-5)  # alpha = 1 at n = 2L: NTK, s = 2
    # YaRN and Llama 3: 1 on the fast pairs, 1/s on the never-wrapped ones, in between otherwise
    tr = turns64(d, base, L)
    for m in ("yarn", "llama3"):
        assert np.all((r[m] <= 1 + 1e-6) & (r[m] >= 1 / s - 1e-6))
        np.testing.assert_allclose(r[m][tr >= 32], 1.0, rtol=1e-6)
        np.testing.assert_allclose(r[m][tr <= 1], 1 / s, rtol=1e-6)


def test_scaled_inv_freq_rejects_unknown_method_and_bad_length():
    with pytest.raises(ValueError, match="unknown method 'pi'"):
        E.scaled_inv_freq("pi")
    with pytest.raises(ValueError, match="seq_len"):
        E.scaled_inv_freq("dynamic", seq_len=0)
    with pytest.raises(ValueError, match="factor"):
        E.scaled_inv_freq("linear", factor=0.5)


def test_angle_overshoot_pi_stays_in_range_ntk_does_not():
    d, base, L = 128, 10000.0, 8192
    for s in (2.0, 4.0, 16.0):
        i = np.arange(d // 2)
        want_none = (s * L - 1) / L * np.ones(d // 2)
        np.testing.assert_allclose(E.angle_overshoot("none", d, base, s, original_max_len=L), want_none, rtol=1e-6)
        assert E.angle_overshoot("linear", d, base, s, original_max_len=L).max() < 1.0
        ntk = E.angle_overshoot("ntk", d, base, s, original_max_len=L)
        np.testing.assert_allclose(ntk, (s * L - 1) / L * s ** (-2 * i / (d - 2)), rtol=1e-5)
        assert ntk[-1] < 1.0 < ntk[-2]  # only the slowest pair is slowed by the full s
        for m in ("yarn", "llama3"):
            over = E.angle_overshoot(m, d, base, s, original_max_len=L)
            assert over[turns64(d, base, L) < 1].max() < 1.0  # every never-wrapped pair interpolated fully


def test_ntk_stretch_keeps_theta0_and_slows_slowest_pair_by_exactly_s():
    for d, base, s in ((128, 10000.0, 4.0), (64, 500000.0, 8.0), (8, 10000.0, 2.0)):
        st = E.ntk_stretch(d, base, s)
        assert st.new_base == pytest.approx(base * s ** (d / (d - 2)), rel=1e-12)
        assert st.fastest == pytest.approx(1.0, abs=1e-7)
        assert st.slowest == pytest.approx(s, rel=1e-6)
        assert st.limit == pytest.approx(s ** (d / (d - 2)), rel=1e-12)
        np.testing.assert_allclose(st.stretch, s ** (2 * np.arange(d // 2) / (d - 2)), rtol=1e-5)
    assert "base'" in repr(E.ntk_stretch())


@pytest.mark.parametrize("d,base,L", [(128, 10000.0, 8192), (128, 10000.0, 2048), (64, 500000.0, 4096)])
def test_ntk_factor_needed_is_the_smallest_s_without_new_angles(d, base, L):
    # oracle: the library's float32 NTK frequencies at factor s, read at L' = r L, over the never-wrapped pairs
    unwrapped = list(E.angle_coverage(d, base, L, factor=2.0).unwrapped)

    def worst(s: float, r: float) -> float:
        ratio = E.frequency_ratios(d, base, s, original_max_len=L, methods=("ntk",))["ntk"]
        return float(((round(r * L) - 1) * ratio / L)[unwrapped].max())

    need = E.ntk_factor_needed((2.0, 4.0, 8.0), d, base, L)
    assert need.first_unwrapped == unwrapped[0]
    for r, s in zip(need.targets, need.factors):
        assert s > r, "a never-wrapped pair before the last needs more than the target ratio"
        assert worst(s, r) <= 1 + 1e-5  # at s no never-wrapped pair needs a new angle
        assert worst(0.99 * s, r) > 1.0  # and 1 % less is not enough
        assert worst(r, r) > 1.0  # s = r, the naive setting, overshoots
    assert "smallest s" in repr(need)


def test_ntk_factor_needed_edge_cases_and_bad_input():
    assert E.ntk_factor_needed(1.0).factors == (1.0,)  # no extension, no scaling
    assert E.ntk_factor_needed(4.0, 8, 10.0, 8192).factors == (1.0,)  # every pair wrapped: nothing to protect
    assert E.ntk_factor_needed(4.0, 128, 10000.0, 4).factors == (math.inf,)  # pair 0 never wrapped: NTK cannot help
    with pytest.raises(ValueError, match=">= 1"):
        E.ntk_factor_needed(0.5)
    with pytest.raises(ValueError, match="empty"):
        E.ntk_factor_needed(())
    with pytest.raises(TypeError, match="number"):
        E.ntk_factor_needed("4")


# ---------------------------------------------------------------------------
# YaRN
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("d,base,L,bf,bs", [(128, 10000.0, 8192, 32.0, 1.0), (64, 500000.0, 4096, 32.0, 1.0),
                                            (128, 10000.0, 2048, 16.0, 2.0), (256, 1e6, 32768, 64.0, 0.5)])
def test_yarn_bands_follow_the_turns_rule(d, base, L, bf, bs):
    """Keep pairs with >= beta_fast turns in L, interpolate those with <= beta_slow, blend between."""
    b = E.yarn_bands(d, base, L, bf, bs)
    tr = turns64(d, base, L)
    want = ["keep" if r >= bf else ("interpolate" if r <= bs else "blend") for r in tr]
    assert [b.band_of(i) for i in range(d // 2)] == want
    assert sorted(b.keep + b.blend + b.interpolate) == list(range(d // 2))
    np.testing.assert_allclose(b.turns, tr, rtol=1e-6)


def test_yarn_bands_chapter_case_and_bad_pair():
    b = E.yarn_bands()
    assert (b.keep[-1], b.blend[0], b.blend[-1], b.interpolate[0]) == (25, 26, 49, 50)
    with pytest.raises(ValueError, match="pair 64"):
        b.band_of(64)
    assert "interpolate" in E.yarn_bands_text(b)


def test_yarn_temperature_is_point_one_log_s_plus_one():
    t = E.yarn_temperature((1.0, 2.0, 4.0, 16.0, 32.0))
    for s, a, g in zip(t.factors, t.attention_factor, t.logit_scale):
        want = 0.1 * math.log(s) + 1.0
        assert a == pytest.approx(want, rel=1e-12)
        assert g == pytest.approx(want**2, rel=1e-12)
    assert "1/t" in repr(t)


# ---------------------------------------------------------------------------
# Wavelength table per method
# ---------------------------------------------------------------------------


def test_method_wavelength_table_values():
    d, base, L, s = 128, 10000.0, 8192, 16.0
    pairs = (0, 16, 32, 48, 63)
    tab = E.method_wavelength_table(d, base, s, original_max_len=L, pairs=pairs)
    lam = 2 * math.pi / theta64(d, base)
    for n, i in enumerate(pairs):
        assert tab.wavelengths["none"][n] == pytest.approx(lam[i], rel=1e-6)
        assert tab.wavelengths["linear"][n] == pytest.approx(s * lam[i], rel=1e-6)
        assert tab.wavelengths["ntk"][n] == pytest.approx(lam[i] * s ** (2 * i / (d - 2)), rel=1e-5)
    for m in E.METHODS[1:]:
        assert tab.wavelengths[m][-1] == pytest.approx(s * lam[63], rel=1e-5)  # every method slows the slowest by s
    assert tab.target_len == 131072 and "YaRN" in repr(tab) and "<table>" in tab._repr_html_()


def test_method_wavelength_table_rejects_bad_input():
    with pytest.raises(ValueError, match="pairs \\[64\\]"):
        E.method_wavelength_table(pairs=(0, 64))
    with pytest.raises(ValueError, match="unknown method"):
        E.method_wavelength_table(methods=("none", "rope"))


# ---------------------------------------------------------------------------
# Chen et al.: score, fit, bounds
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("d,base", [(8, 10000.0), (64, 500.0)])
def test_attention_score_equals_rotated_dot_product(d, base):
    """a(m - n) with h_j = q_j conj(k_j) is <R_m q, R_n k> from the library (half pairing, float64)."""
    gen = torch.Generator().manual_seed(1)
    q, k = torch.randn(d, generator=gen, dtype=torch.float64), torch.randn(d, generator=gen, dtype=torch.float64)
    rope = RotaryEmbedding(d, base)
    half = d // 2
    h = (q[:half] + 1j * q[half:]).numpy() * np.conj((k[:half] + 1j * k[half:]).numpy())
    for m, n in ((5, 2), (2, 5), (40, 0), (7, 7)):
        qm = rope.rotate(q[None], offset=m)[0]
        kn = rope.rotate(k[None], offset=n)[0]
        assert E.attention_score(h, m - n, d, base) == pytest.approx(float(qm @ kn), abs=2e-5)  # float32 angles


def test_attention_score_rejects_wrong_h_shape():
    with pytest.raises(ValueError, match="h must have shape"):
        E.attention_score(np.zeros(3, dtype=complex), 1.0, 8)


def test_fit_attention_score_is_ridge_least_squares():
    fit = E.fit_attention_score(16, 10000.0, 128, 64, ridge=1e-3, seed=3)
    th = theta64(16, 10000.0)
    X = np.concatenate([np.cos(np.outer(fit.positions, th)), -np.sin(np.outer(fit.positions, th))], 1)
    # ridge least squares through an augmented system, solved by numpy's lstsq (an independent route)
    A = np.vstack([X, math.sqrt(1e-3) * np.eye(16)])
    y = np.concatenate([fit.targets, np.zeros(16)])
    coef = np.linalg.lstsq(A, y, rcond=None)[0]
    np.testing.assert_allclose(fit.h, coef[:8] + 1j * coef[8:], rtol=1e-3, atol=1e-6)
    assert len(set(fit.positions.tolist())) == 64 and fit.positions.max() < 128
    again = E.fit_attention_score(16, 10000.0, 128, 64, ridge=1e-3, seed=3)
    np.testing.assert_array_equal(fit.h, again.h)


def test_fit_attention_score_rejects_bad_input():
    with pytest.raises(ValueError, match="n_points"):
        E.fit_attention_score(original_max_len=100, n_points=200)
    with pytest.raises(ValueError, match="ridge"):
        E.fit_attention_score(ridge=-1.0)


@pytest.mark.parametrize("seed,ridge", [(0, 1e-8), (1, 1e-6), (2, 1e-3)])
def test_interpolation_stays_within_theorem_bound(seed, ridge):
    """Chen et al.'s Theorem 2.1: |a(s) - a_linear(s)| <= d max|h| / (32 ln c) between integers."""
    fit = E.fit_attention_score(64, 10000.0, 512, 256, ridge=ridge, seed=seed)
    cmp = E.compare_fit(fit, factor=4.0)
    assert cmp.interpolation_error <= cmp.theorem_bound
    assert cmp.theorem_bound == pytest.approx(64 * np.abs(fit.h).max() / (32 * math.log(10000.0)))


def test_extrapolation_of_a_fitted_score_dwarfs_the_trained_range():
    cmp = E.compare_fit(E.fit_attention_score(), factor=4.0)
    assert cmp.extrapolated_max > 100 * cmp.in_range_max
    assert cmp.interpolated_max < 2 * cmp.in_range_max


def test_extrapolation_sum_at_zero_and_as_a_bound():
    d = 32
    assert E.extrapolation_sum(0.0, d) == pytest.approx(sum(range(1, d // 2 + 1)))
    gen = np.random.default_rng(0)
    h = gen.normal(size=d // 2) + 1j * gen.normal(size=d // 2)
    step = np.abs(np.diff(np.append(h, 0))).max()  # max |h_{j+1} - h_j| with h_{d/2} = 0
    s = np.arange(0, 5000, 7.3)
    assert np.all(np.abs(E.attention_score(h, s, d)) <= step * E.extrapolation_sum(s, d) + 1e-9)


def test_bound_ratio_estimate_and_range():
    br = E.bound_ratio(128, 10000.0, 2048, 4.0)
    assert br.estimate == pytest.approx(64 * math.log(10000.0))
    assert br.b_over_d.shape == (3 * 2048,)
    np.testing.assert_allclose(br.ratio, br.estimate * br.b_over_d)
    assert 0 < br.b_over_d.min() < 1.5 < br.b_over_d.max()
    assert "64 ln(base)" in repr(br) and "B/d" in repr(br)


def test_bound_ratio_count_below_counts_distances():
    br = E.bound_ratio(128, 10000.0, 2048, 4.0)
    ratio = 64 * math.log(10000.0) * E.extrapolation_sum(np.arange(2048, 8192), 128) / 128  # independent recompute
    assert br.count_below(600.0) == int((ratio < 600.0).sum())
    assert 0 < br.count_below(600.0) < br.ratio.size  # the computed minimum dips below Chen et al.'s ~600
    assert br.count_below(br.ratio.min()) == 0 and br.count_below(br.ratio.max() + 1) == br.ratio.size
    with pytest.raises(ValueError, match="value"):
        br.count_below(0.0)


# ---------------------------------------------------------------------------
# YaRN bands: what truncate and the clamp do, and bands read from a config
# ---------------------------------------------------------------------------


def test_truncate_never_changes_band_membership():
    """Integer pair i <= low iff i <= floor(low), and i >= high iff i >= ceil(high): `truncate` moves only the
    blend weights, never which band a pair is in (the section states it in general, for gpt-oss's false),
    unless even index d_head - 1 turns beta_fast times in L (Hugging Face clamps the slow edge at the head width
    minus one, an index past the last pair d_head/2 - 1): then the fast edge passes the clamped slow edge, the
    ramp runs backwards and the two settings can differ. Sampled here: every setting short of that, including
    ones whose slowest pair turns more than beta_slow times; and pair 0 stays in the keep band throughout."""
    rng = np.random.default_rng(0)
    moved = tried = past_slow = 0
    while tried < 300:
        d = int(rng.choice([8, 12, 32, 64, 128, 256]))
        base = float(10 ** rng.uniform(2, 7))
        L = int(2 ** rng.uniform(5, 18))
        bs = float(rng.uniform(0.25, 4))
        bf = float(bs * rng.uniform(1, 64))
        if L * base ** (-2 * (d - 1) / d) / (2 * math.pi) >= bf:  # index d - 1 turns beta_fast times: the regime
            continue
        tried += 1
        past_slow += turns64(d, base, L)[-1] > bs
        a, b = E.yarn_bands(d, base, L, bf, bs), E.yarn_bands(d, base, L, bf, bs, truncate=False)
        assert (a.keep, a.blend, a.interpolate) == (b.keep, b.blend, b.interpolate), (d, base, L, bf, bs)
        assert 0 in a.keep, (d, base, L, bf, bs)
        moved += any(abs(x - y) > 1e-6 for x, y in zip(a.ramp, b.ramp))
    assert moved > 100  # the weights do move: the comparison above is not between two equal ramps
    assert past_slow > 20  # and the sample reaches past "the slowest pair turns at most beta_slow times"


def test_pair_0_is_kept_even_below_beta_fast_and_the_text_says_so():
    """Experiment 3's head (d_head 12, L 128): pair 0 turns 20.4 times < 32, the ramp's start is clamped to pair 0
    (Hugging Face's find_correction_range: max(low, 0)), so it is kept; the turns rule alone would blend it."""
    b = E.yarn_bands(12, 10000.0, 128, 32.0, 1.0)
    assert b.turns[0] < 32.0 and b.keep == (0,)
    text = E.yarn_bands_text(b)
    assert "fewer than beta_fast" in text and "kept" in text
    assert "fewer than beta_fast" not in E.yarn_bands_text(E.yarn_bands())  # no note where the rule already keeps
    inv = _hf_inv_freq("yarn", 12, 10000.0, 128, 4.0)
    plain = theta64(12, 10000.0)
    assert abs(inv[0].item() / plain[0] - 1.0) < 1e-6  # Hugging Face keeps pair 0 too


@pytest.mark.parametrize("anchor", [True, False])
def test_config_yarn_bands_match_hugging_face_on_gpt_oss(anchor):
    """gpt-oss-20b's published config, with and without its anchor: the bands from every input read off the
    config equal those transformers' YaRN frequencies imply (ratio 1: keep, 1/factor: interpolate)."""
    transformers = pytest.importorskip("transformers")
    from mlbook.analysis.model_config import load_config

    config = load_config("gpt-oss-20b")
    if not anchor:
        del config["rope_scaling"]["original_max_position_embeddings"]
    bands = E.config_yarn_bands(config)
    hf = transformers.GptOssConfig(**{k: v for k, v in config.items() if k not in ("architectures",)})
    inv = rope_init_function("yarn")(hf, "cpu")[0].double().numpy()
    ratio = inv / theta64(64, 150000.0)
    factor = config["rope_scaling"]["factor"]
    assert bands.keep == tuple(int(i) for i in np.flatnonzero(abs(ratio - 1) < 1e-5))
    assert bands.interpolate == tuple(int(i) for i in np.flatnonzero(abs(ratio - 1 / factor) < 1e-5))
    assert bands.original_max_len == (4096 if anchor else config["max_position_embeddings"])


def test_config_yarn_bands_refuses_another_scaling():
    from mlbook.analysis.model_config import load_config

    with pytest.raises(ValueError, match="not 'yarn'"):
        E.config_yarn_bands(load_config("llama-3.1-8b"))


def test_experiment_readings_print_the_record_s_paired_differences():
    from mlbook.experiments import exp_context_extension as X
    from mlbook.experiments.registry import load_result

    record = load_result("context_extension", "full")
    if record is None:
        pytest.skip("no full record")
    text = " ".join(E.experiment_readings(record).split())
    assert X.pm(X.paired_at(record, "none", "reference", "before", "tail_minus_head", 1), 3) in text
    for a, b, phase, metric, i in (("linear", "none", "after", "mean", -1),
                                   ("ntk", "reference", "before", "mean", -1)):
        assert X.pm(X.paired_at(record, a, b, phase, metric, i), 2) in text
    after = X.summary(record, "after")
    names = [v for v in record["results"]["variants"] if v != "dynamic"]
    order = sorted(names, key=lambda v: after[v][-1]["mean"])
    pos = [text.index(f"{X.SHORT[v]} {X.pm(after[v][-1], 2)}") for v in order]
    assert pos == sorted(pos)  # best first
    assert "keep [0]" in text  # the band table: YaRN (32/1) keeps only the clamped pair 0
    assert "ramp w_i" in text and "ramp r_i" not in text  # w_i is the ramp weight, r_i the turns (section 2.6)
    first = text.split("- ")[1]
    assert X.pm(X.paired(X.variant_metrics(record, "none", "before", "tail_minus_head")[1], [0.0] * 5), 3) in first
    for v in ("ntk", "dynamic"):  # the shortfall to the model trained at 4L is shared by settings in range
        assert X.pm(X.paired_at(record, v, "reference", "before", "tail_minus_head", 1), 3) in text
        assert X.pm(X.paired_at(record, "none", v, "before", "tail_minus_head", 1), 3) in text
    assert X.pm(X.paired_at(record, "none", "reference", "after", "tail_minus_head", 1), 3) in text
    for phase in ("before", "after"):  # the two YaRN settings against each other at every length
        for i in range(3):
            assert X.pm(X.paired_at(record, "yarn_tuned", "yarn", phase, "mean", i), 3) in text
    for v in ("yarn", "yarn_tuned"):
        assert X.pm(X.paired_at(record, v, "linear", "before", "mean", 0), 3) in text
    gap_b = X.paired_at(record, "linear", "ntk", "before", "mean")
    gap_a = X.paired_at(record, "linear", "ntk", "after", "mean")
    shrink = X.paired([a - b for a, b in zip(gap_a["per_seed"], gap_b["per_seed"])], [0.0] * 5)
    assert f"the gap changes by {X.pm(shrink, 2)}" in text  # the gap to the best, not PI's own gain
