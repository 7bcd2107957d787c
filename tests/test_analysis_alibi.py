"""Tests for mlbook.analysis.alibi: slope provenance, penalties, effective windows.

Oracles: exact fractions (slopes for powers of two are powers of two, so penalties are exact),
the paper's recipe written out independently in float64, Hugging Face's BLOOM ALiBi (slopes,
and the key-only form that the book says gives the same attention), brute-force search for
the effective window.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mlbook.analysis import alibi as A
from mlbook.transformer.positional import alibi_bias, alibi_slopes


def _recipe(H: int) -> list[float]:
    """The paper's recipe, independently: closest power of two n <= H, then every other of 2n."""
    def geo(n: int) -> list[float]:
        return [2.0 ** (-8.0 * (k + 1) / n) for k in range(n)]

    n = 1
    while 2 * n <= H:
        n *= 2
    return geo(n) + geo(2 * n)[0::2][: H - n]


@pytest.mark.parametrize("H", [1, 2, 3, 5, 6, 8, 12, 16, 20, 24, 32, 48, 112])
def test_slope_provenance_matches_the_recipe(H):
    origin = A.slope_provenance(H)
    n = origin.count("power of two")
    assert n == 2 ** math.floor(math.log2(H)) and len(origin) == H
    assert origin == ["power of two"] * n + ["interleaved"] * (H - n)
    assert torch.allclose(alibi_slopes(H).double(), torch.tensor(_recipe(H), dtype=torch.float64), rtol=1e-6)


@pytest.mark.parametrize("H", [1, 2, 4, 8, 16, 32, 64])
def test_naive_slopes_equal_library_for_powers_of_two(H):
    assert torch.allclose(A.naive_slopes(H), alibi_slopes(H).double(), rtol=1e-6)


@pytest.mark.parametrize("H", [3, 6, 12, 20])
def test_naive_slopes_differ_for_other_head_counts(H):
    assert not torch.allclose(A.naive_slopes(H), alibi_slopes(H).double(), rtol=1e-3)


def test_slopes_match_bloom():
    bloom = pytest.importorskip("transformers.models.bloom.modeling_bloom")
    for H in (8, 12, 112):
        alibi = bloom.build_alibi_tensor(torch.ones(1, 2), H, torch.float32)  # (H, 1, 2): slope * position
        assert torch.allclose(alibi[:, 0, 1], alibi_slopes(H), rtol=1e-6)


def test_bloom_key_only_form_gives_the_same_attention():
    """The book's claim: BLOOM's +m_h j bias equals -m_h (i - j) after the causal softmax."""
    bloom = pytest.importorskip("transformers.models.bloom.modeling_bloom")
    H, T = 12, 9
    key_bias = bloom.build_alibi_tensor(torch.ones(1, T), H, torch.float64).reshape(1, H, 1, T)  # (1, H, 1, T)
    scores = torch.randn(2, H, T, T, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    ours = (scores + alibi_bias(H, T, T).double()).masked_fill(future, float("-inf")).softmax(-1)
    theirs = (scores + key_bias).masked_fill(future, float("-inf")).softmax(-1)
    assert torch.allclose(ours, theirs, atol=1e-12)
    assert not torch.allclose(alibi_bias(H, T, T).double(), key_bias.expand(1, H, T, T))


def test_penalty_spec_statements():
    pen10, pen1000 = A.alibi_penalty(8, 10), A.alibi_penalty(8, 1000)
    assert float(pen10[0]) == 5.0  # slope 1/2 at distance 10: exactly 5 nats
    assert float(pen1000[7]) == 1000 / 256  # 3.90625 nats: not "barely affected"
    assert float(A.weight_ratio(8, 1000)[7]) == pytest.approx(math.exp(-1000 / 256))
    assert float(A.weight_ratio(8, 1000)[7]) < 0.021


@pytest.mark.parametrize("H", [4, 8, 12])
def test_penalty_equals_slope_times_distance(H):
    m = alibi_slopes(H).double()
    for k in (0, 1, 7, 300):
        assert torch.allclose(A.alibi_penalty(H, k), m * k, rtol=1e-6)
        assert (A.alibi_penalty(H, k) >= 0).all()


@settings(max_examples=60, deadline=None)
@given(H=st.integers(1, 40), nats=st.floats(0.05, 20.0, allow_nan=False))
def test_effective_window_is_the_first_distance_reaching_the_threshold(H, nats):
    window = A.effective_window(H, nats)
    m = alibi_slopes(H).double()
    for h in range(H):
        k = int(window[h])
        assert float(m[h]) * k >= nats - 1e-9
        assert float(m[h]) * (k - 1) < nats + 1e-9
        assert k >= 1


def test_effective_window_spec_values():
    assert A.effective_window(8, 3.0).tolist() == [6, 12, 24, 48, 96, 192, 384, 768]
    assert A.effective_window(8, 1.0).tolist() == [2, 4, 8, 16, 32, 64, 128, 256]
    assert int(A.effective_window(8, 0.1)[7]) == 26
    # the window is the first distance at or past the threshold: 26 / 256 = 0.1016, 25 / 256 = 0.0977
    assert float(A.alibi_penalty(8, 25)[7]) < 0.1 <= float(A.alibi_penalty(8, 26)[7])
    assert float(A.alibi_penalty(8, 255)[7]) < 1.0 <= float(A.alibi_penalty(8, 256)[7])


def _llm_foundry_gen_slopes(n_heads: int, alibi_bias_max: float) -> list[float]:
    """MPT's gen_slopes retyped in plain Python: n = next power of two, 1 / 2^(h * max / n), strided pick."""
    n = 2 ** math.ceil(math.log2(n_heads))
    full = [1.0 / 2.0 ** ((k + 1) * alibi_bias_max / n) for k in range(n)]
    return full if n == n_heads else (full[1::2] + full[0::2])[:n_heads]


@pytest.mark.parametrize("H, bias_max", [(1, 8), (4, 8), (8, 8), (32, 8), (32, 16), (12, 8), (20, 16), (3, 8)])
def test_mpt_slopes_match_mpt_code(H, bias_max):
    got = A.mpt_slopes(H, bias_max)
    assert got.dtype == torch.float64 and got.shape == (H,)
    assert got.tolist() == pytest.approx(_llm_foundry_gen_slopes(H, bias_max), rel=1e-12)


@pytest.mark.parametrize("H", [1, 2, 4, 8, 16, 32, 64])
def test_mpt_slopes_with_max_8_are_the_papers_for_powers_of_two(H):
    torch.testing.assert_close(A.mpt_slopes(H, 8), alibi_slopes(H).double(), rtol=1e-6, atol=0)


def test_mpt_storywriter_slopes():
    story = A.mpt_slopes(32, alibi_bias_max=16)  # mosaicml/mpt-7b-storywriter config: 32 heads, alibi_bias_max 16
    assert float(story.max()) == pytest.approx(2 ** -0.5) and float(story.min()) == 2.0 ** -16
    assert float(story.min()) * 65_536 == 1.0


@pytest.mark.parametrize("call, exc, pattern", [
    (lambda: A.mpt_slopes(0), ValueError, "n_heads"),
    (lambda: A.mpt_slopes(8, 0.0), ValueError, "alibi_bias_max"),
    (lambda: A.alibi_penalty(0, 3), ValueError, "n_heads"),
    (lambda: A.alibi_penalty(8, -1), ValueError, "distance"),
    (lambda: A.effective_window(8, 0.0), ValueError, "nats"),
    (lambda: A.effective_window(8, float("nan")), ValueError, "nats"),
    (lambda: A.naive_slopes(2.0), TypeError, "n_heads"),
    (lambda: A.slope_provenance(0), ValueError, "n_heads"),
])
def test_alibi_analysis_rejects_bad_input(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


def test_passkey_alibi_lines_read_the_record():
    from mlbook.analysis import alibi as A
    from mlbook.experiments import catalog  # noqa: F401
    from mlbook.experiments import exp_passkey as P
    from mlbook.experiments.registry import load_result

    record = load_result("passkey", "full")
    text = A.passkey_alibi_lines()
    if record is None:
        assert "passkey" in text
        return
    lines = text.splitlines()
    assert len(lines) == 2 * len(record["results"]["phases"])
    for k, phase in enumerate(record["results"]["phases"]):
        line, far = lines[2 * k], lines[2 * k + 1]
        s = P.summary(record, phase, "alibi")
        assert P.pm(s["accuracy"][0], 2) in line and P.pm(s["accuracy"][-1], 2) in line
        assert P.pm(P.length_change(record, phase, "alibi")["accuracy"], 2) in line
        assert far.startswith("  key at depth 0")
    # oracle: exp_passkey.seed_splits, the experiment's own list of split seeds, written independently
    for split in P.seed_splits(record):
        if split.startswith(P.SHORT["alibi"] + " ") and "key at depth 0" in split and "check" not in split:
            phase = record["results"]["phases"][0 if "zero-shot" in split else 1]
            far = lines[2 * record["results"]["phases"].index(phase) + 1]
            n = split.split(" at ", 1)[1].split(",", 1)[0]
            assert f"at {n} on seed" in far
            for low in split.split("seeds ", 1)[1].split(" below")[0].split(", "):
                assert low in far  # "2 (0.00)": the seed and its accuracy at depth 0


def _passkey_record(far_zero_shot, far_finetuned):
    """Two lengths, two depths, accuracy[length][depth] per seed: depth 0 at the longest length varies."""
    def seeds(far):
        return [{"seed": s, "accuracy": [[1.0, 1.0], [a, 1.0]], "per_digit": [[1.0, 1.0], [1.0, 1.0]],
                 "loss": [1.0, 1.1]} for s, a in enumerate(far)]
    return {"results": {"methods": ["alibi"], "phases": ["zero_shot", "finetuned"], "lengths": [128, 512],
                        "depths": [0.0, 1.0], "seeds": list(range(len(far_zero_shot))),
                        "finetune": {"steps": 90}, "finetune_len": 512,
                        "results": {"zero_shot": {"alibi": seeds(far_zero_shot)},
                                    "finetuned": {"alibi": seeds(far_finetuned)}}}}


def test_passkey_alibi_lines_name_the_seeds_that_lose_the_farthest_key(monkeypatch):
    from mlbook.experiments import registry

    record = _passkey_record([1.0, 0.0, 1.0, 0.25, 0.5], [1.0, 1.0, 0.49, 1.0, 1.0])
    monkeypatch.setattr(registry, "load_result", lambda name, budget: record)
    lines = A.passkey_alibi_lines().splitlines()
    assert len(lines) == 4
    assert lines[1] == ("  key at depth 0, the farthest from the question, not retrieved (below 0.5): "
                        "at 512 on seeds 1 (0.00) and 3 (0.25); every other seed and length at or above")
    assert lines[3].endswith("at 512 on seed 2 (0.49); every other seed and length at or above")
    record = _passkey_record([1.0] * 5, [1.0] * 5)
    assert A.passkey_alibi_lines().splitlines()[1].endswith(": retrieved (0.5 or above) on every seed at every length")
    record["results"]["depths"] = [0.5, 1.0]
    with pytest.raises(ValueError, match="first key depth must be 0"):
        A.passkey_alibi_lines()


def test_no_2025_or_2026_family_in_the_model_table_uses_alibi():
    # page 06 says so, of the library's model table
    from mlbook.data.model_families import MODEL_FAMILIES

    recent = [row for row in MODEL_FAMILIES if row.year >= 2025]
    assert recent and all(row.scheme != "alibi" for row in recent)
