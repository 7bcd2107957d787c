"""Tests for mlbook.chapter_tests (the named tests shipped in the package and their runner) and for
the small modules behind sections 3 and 6: viz.source, analysis.implementation, analysis.interview.

A named test is only worth running if it can fail: each one is run against a planted broken
implementation and must raise. The numbers of section 6 are checked against independent
arithmetic and, where one exists, Hugging Face's configuration of the model they describe.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest
import torch

import mlbook.chapter_tests as chapter
from mlbook.analysis import implementation, interview
from mlbook.analysis.production import kv_cache_bytes
from mlbook.transformer import positional as P
from mlbook.viz import source

CONTRACT = (
    "test_rope_relative_position_property",
    "test_rope_matches_complex_multiplication",
    "test_rope_scaling_modes",
    "test_sinusoidal_values_and_linear_offset_property",
    "test_relative_position_bucket_properties",
    "test_alibi_slopes_and_bias",
    "test_rotate_half",
    "test_learned_positional_embedding_offset",
)


# ---------------------------------------------------------------------------
# The contract: the eight names, in the package and in tests/test_transformer_positional.py
# ---------------------------------------------------------------------------


def test_registry_holds_exactly_the_named_tests():
    assert tuple(t.name for t in chapter.CHAPTER_TESTS) == CONTRACT
    for t in chapter.CHAPTER_TESTS:
        assert t.fn is getattr(chapter, t.name) and t.name in chapter.__all__


def test_pytest_file_defines_and_delegates_every_named_test():
    tree = ast.parse((Path(__file__).parent / "test_transformer_positional.py").read_text())
    funcs = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    for name in CONTRACT:
        assert name in funcs, f"{name} missing from tests/test_transformer_positional.py"
        calls = {ast.unparse(c.func) for c in ast.walk(funcs[name]) if isinstance(c, ast.Call)}
        assert f"chapter.{name}" in calls, f"{name} does not call the package's version"


def test_run_chapter_tests_all_pass_with_pytest_ids(capsys):
    report = chapter.run_chapter_tests()
    out = capsys.readouterr().out
    assert report.all_passed and report.failed == 0 and report.passed == len(report.results) == 14
    assert "PASS  test_rope_matches_complex_multiplication[interleaved-4000]" in out
    assert out.strip().endswith("14 passed, 0 failed")


def test_run_chapter_tests_selects_by_name_and_validates(capsys):
    report = chapter.run_chapter_tests(["test_rotate_half"], verbose=False)
    assert [r.name for r in report.results] == ["test_rotate_half"] and capsys.readouterr().out == ""
    with pytest.raises(ValueError, match="unknown test name.*test_nope"):
        chapter.run_chapter_tests(["test_nope"])
    with pytest.raises(TypeError, match="not a string"):
        chapter.run_chapter_tests("test_rotate_half")


def test_run_chapter_tests_records_a_failure_instead_of_raising(monkeypatch, capsys):
    def broken():
        raise AssertionError("planted failure\nsecond line")

    monkeypatch.setattr(chapter, "CHAPTER_TESTS", (chapter.ChapterTest("test_broken", broken, ({},), "fails"),))
    report = chapter.run_chapter_tests()
    assert not report.all_passed and report.failed == 1
    assert report.results[0].error == "AssertionError: planted failure"
    assert "FAIL  test_broken" in capsys.readouterr().out


def test_named_tests_leave_the_global_rng_alone():
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    chapter.run_chapter_tests(verbose=False)
    assert torch.equal(torch.rand(3), before)


def test_assert_close_follows_torch_testing_rule():
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        a = torch.randn(7, generator=g, dtype=torch.float64)
        b = a + 1e-3 * torch.randn(7, generator=g, dtype=torch.float64)
        atol, rtol = 1e-3 * float(torch.rand(1, generator=g)), 1e-3 * float(torch.rand(1, generator=g))
        try:
            torch.testing.assert_close(a, b, atol=atol, rtol=rtol)
            want = True
        except AssertionError:
            want = False
        try:
            chapter._assert_close(a, b, atol=atol, rtol=rtol)
            got = True
        except AssertionError:
            got = False
        assert got == want
    with pytest.raises(AssertionError, match="shape"):
        chapter._assert_close(torch.zeros(2), torch.zeros(3), atol=1, rtol=0)
    with pytest.raises(AssertionError):
        chapter._assert_close(torch.tensor([float("nan")]), torch.zeros(1), atol=1, rtol=0)


# ---------------------------------------------------------------------------
# Each named test fails on a planted broken implementation
# ---------------------------------------------------------------------------


class _NoRotation:
    def __init__(self, d_head, base=10000.0):
        self.d = d_head

    def __call__(self, T, offset=0):
        return torch.ones(T, self.d), torch.zeros(T, self.d)


class _MirroredRope:
    def __init__(self, d_head, base=10000.0):
        self.rope = P.RotaryEmbedding(d_head, base)

    def __call__(self, T, offset=0):
        cos, sin = self.rope(T, offset)
        return cos, -sin


def _apply(x, cos, sin):
    return x * cos + P.rotate_half(x) * sin


@pytest.mark.parametrize("rope", [_NoRotation, _MirroredRope])
def test_relative_position_property_fails_on_broken_rope(rope):
    with pytest.raises(AssertionError):
        chapter.test_rope_relative_position_property(RotaryEmbedding=rope, apply_rotary=_apply)


def test_relative_position_property_passes_a_correct_reader_rope():
    chapter.test_rope_relative_position_property(RotaryEmbedding=lambda d, base=10000.0: P.RotaryEmbedding(d, base),
                                                 apply_rotary=_apply)


@pytest.mark.parametrize("offset", [0, 37, 4000])
def test_complex_multiplication_fails_on_mirrored_rope(offset):
    with pytest.raises(AssertionError):
        chapter.test_rope_matches_complex_multiplication(offset=offset, RotaryEmbedding=_MirroredRope, apply_rotary=_apply)
    if offset:  # offset 0: row 0 has angle 0, where a mirrored rotation is the identity too
        with pytest.raises(AssertionError):
            chapter.test_rope_matches_complex_multiplication(offset=offset, RotaryEmbedding=_NoRotation,
                                                             apply_rotary=_apply)


def test_rope_impl_arguments_are_validated():
    with pytest.raises(ValueError, match="both RotaryEmbedding and apply_rotary"):
        chapter.test_rope_relative_position_property(RotaryEmbedding=_MirroredRope)
    with pytest.raises(ValueError, match="unknown pairing"):
        chapter.test_rope_relative_position_property("adjacent")


def test_rotate_half_test_fails_on_sign_error():
    with pytest.raises(AssertionError):
        chapter.test_rotate_half(lambda x: -P.rotate_half(x))


def test_sinusoidal_test_fails_on_swapped_table():
    def swapped(T, d, base=10000.0):
        pe = P.sinusoidal_positional_encoding(T, d, base)
        return pe.view(T, d // 2, 2).flip(-1).reshape(T, d)

    with pytest.raises(AssertionError):
        chapter.test_sinusoidal_values_and_linear_offset_property(swapped)


def test_bucket_test_fails_without_the_clamp():
    def no_clamp(rel, bidirectional, nb, md):
        b = P.relative_position_bucket(rel, bidirectional, nb, 100_000)  # as if max_distance never came
        return b

    with pytest.raises(AssertionError):
        chapter.test_relative_position_bucket_properties(no_clamp)


def test_alibi_test_fails_on_power_of_two_only_slopes():
    def geometric(H):
        return torch.tensor([2.0 ** (-8.0 * h / H) for h in range(1, H + 1)])

    with pytest.raises(AssertionError):
        chapter.test_alibi_slopes_and_bias(geometric, lambda H, T_q, T_k: P.alibi_bias(H, T_q, T_k))


def test_paper_slopes_oracle_matches_bloom():
    transformers = pytest.importorskip("transformers")
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    assert transformers is not None
    for H in (1, 2, 6, 12, 24, 40):
        hf = build_alibi_tensor(torch.ones(1, 2), H, torch.float32)[:, 0, 1].double()  # (H,) slope * position 1
        torch.testing.assert_close(hf, torch.tensor(chapter._paper_slopes(H), dtype=torch.float64), rtol=1e-6, atol=0)


# ---------------------------------------------------------------------------
# viz.source
# ---------------------------------------------------------------------------


def test_source_listing_is_the_real_source():
    listing = source.source_listing(P.rotate_half, P.RotaryEmbedding.forward)
    assert [b[0] for b in listing.blocks] == ["rotate_half", "RotaryEmbedding.forward"]
    assert all(b[1] == "mlbook/transformer/positional.py" for b in listing.blocks)
    text = Path(P.__file__).read_text().splitlines()
    name, _, first, last, code = listing.blocks[0]
    assert text[first - 1].startswith("def rotate_half(") and code.splitlines()[-1].strip() == text[last - 1].strip()
    assert listing.blocks[1][4].startswith("def forward(")  # a method is dedented
    md = listing._repr_markdown_()
    assert md.count("```python") == 1 and "`rotate_half` (lines" in md and "return torch.cat([-x2, x1]" in md
    assert repr(listing).startswith("# mlbook/transformer/positional.py: rotate_half (lines")


def test_source_listing_rejects_objects_without_source():
    with pytest.raises(TypeError, match="at least one"):
        source.source_listing()
    with pytest.raises(TypeError, match="no Python source"):
        source.source_listing(len)


# ---------------------------------------------------------------------------
# analysis.implementation
# ---------------------------------------------------------------------------


def test_cached_keys_check_measures_rotated_cache():
    report = implementation.cached_keys_check()
    assert report.cache_vs_rotated < 1e-12 and report.cached_vs_full < 1e-12
    assert report.cache_vs_unrotated > 0.1  # the check can tell a rotated cache from an unrotated one
    assert "cache holds R_m k_m (rotated at position m):  yes" in repr(report)
    with pytest.raises(ValueError, match="T must be >= 1"):
        implementation.cached_keys_check(T=0)


# ---------------------------------------------------------------------------
# analysis.interview
# ---------------------------------------------------------------------------


def test_wavelength_span_against_float64():
    span = interview.rope_wavelength_span(128, 10000.0)
    assert math.isclose(span.shortest, 2 * math.pi, rel_tol=1e-6)
    assert math.isclose(span.longest, 2 * math.pi * 10000.0 ** (126 / 128), rel_tol=1e-6)
    assert round(span.longest) == 54410 and round(span.limit) == 62832
    assert math.isclose(span.shortfall, 1 - 10000.0 ** (-2 / 128), rel_tol=1e-6)
    with pytest.raises(ValueError, match="d_head must be even"):
        interview.rope_wavelength_span(127)
    with pytest.raises(ValueError, match="base must be a finite number > 1"):
        interview.rope_wavelength_span(128, 1.0)


def test_format_bytes_units():
    assert interview.format_bytes(2**36) == "64 GiB (68.72 GB)"
    assert interview.format_bytes(524288) == "512 KiB"
    assert interview.format_bytes(3 * 2**20) == "3 MiB"
    assert interview.format_bytes(1.5 * 2**40) == "1.50 TiB (1,649.27 GB)"
    assert interview.format_bytes(12) == "12 B"
    for bad in (-1, float("nan"), "1", True):
        with pytest.raises(ValueError):
            interview.format_bytes(bad)


def test_kv_cache_case_7b_at_128k():
    case = interview.kv_cache_case()
    assert case.per_token == 2 * 32 * 32 * 128 * 2 == 2**19 == kv_cache_bytes(32, 32, 128, 2.0)
    assert case.per_sequence == 131072 * 2**19 == 64 * 2**30
    assert "512 KiB per token, 64 GiB (68.72 GB) for 131,072 tokens" in repr(case)
    assert "54,410 tokens" in repr(interview.rope_wavelength_span()) and "62,830" in repr(interview.rope_wavelength_span())
    assert interview.kv_cache_case(n_kv_heads=8).per_sequence == 16 * 2**30


def test_decoder_param_count_matches_llama_7b_config():
    assert interview.decoder_param_count() == 6_738_415_616  # LLaMA-7B
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(hidden_size=256, intermediate_size=688, num_hidden_layers=2, num_attention_heads=8,
                                   num_key_value_heads=2, vocab_size=1000, tie_word_embeddings=False)
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(cfg)
    want = sum(p.numel() for p in model.parameters())
    assert interview.decoder_param_count(256, 2, 688, 1000, 8, 2) == want
    with pytest.raises(ValueError, match="divisible"):
        interview.decoder_param_count(100, 1, 10, 10, 3)


def test_prefill_flops_against_explicit_sums():
    T, d, L, ff, V = 16, 64, 2, 128, 100
    f = interview.prefill_flops(T, d, L, ff, V, n_heads=4)
    matmul = L * (4 * d * d + 3 * d * ff) + V * d
    assert f.weights == 2 * T * matmul
    pairs = sum(i + 1 for i in range(T))  # query i scores keys 0..i
    assert f.attention == L * 2 * (2 * d * pairs)
    full = interview.prefill_flops(T, d, L, ff, V, n_heads=4, causal=False)
    assert full.attention == L * 2 * 2 * d * T * T
    big = interview.prefill_flops(131072)
    assert 2.5 < big.ratio < 2.7 and 0.15 < interview.prefill_flops(8192).ratio < 0.17


def test_sequences_that_fit():
    w = 2 * interview.decoder_param_count()
    per = interview.kv_cache_case().per_sequence
    assert interview.sequences_that_fit(80 * 2**30, w, per) == 1
    assert interview.sequences_that_fit(80 * 2**30, w, interview.kv_cache_case(n_kv_heads=8).per_sequence) == 4
    assert interview.sequences_that_fit(10 * 2**30, w, per) == 0
    with pytest.raises(ValueError, match="memory_bytes"):
        interview.sequences_that_fit(0, w, per)
