"""Tests for the 2026 interview numbers in mlbook.analysis.interview.

Oracles: transformers' Llama4TextAttention (the query scale its NoPE layers apply, captured on a
tiny random layer), torch.softmax for the weight of the best key, and the sinusoidal and rotary
definitions for a document moved to later positions.
"""

from __future__ import annotations

import math

import pytest
import torch

from mlbook.analysis import interview as I

transformers = pytest.importorskip("transformers")


def test_nope_query_scale_matches_transformers_llama4() -> None:
    from transformers.models.llama4 import modeling_llama4 as M

    cfg = transformers.Llama4TextConfig(vocab_size=16, hidden_size=16, intermediate_size=32, intermediate_size_mlp=32,
                                        num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                                        no_rope_layers=[0], floor_scale=4, attn_scale=0.25,
                                        attn_temperature_tuning=True, num_local_experts=2)
    cfg._attn_implementation = "eager"
    attn = M.Llama4TextAttention(cfg, layer_idx=0).eval()
    assert not attn.use_rope
    T = 20
    h = torch.randn(1, T, 16)
    seen = {}

    def capture(module, query, key, value, *args, **kwargs):
        seen["q"] = query  # (1, H, T, d_head), after the temperature
        return torch.zeros(1, T, 2, 8), None

    original = M.eager_attention_forward
    M.eager_attention_forward = capture
    try:
        with torch.no_grad():
            attn(h, position_embeddings=None, attention_mask=None, cache_position=torch.arange(T))
    finally:
        M.eager_attention_forward = original
    raw = attn.q_proj(h).view(1, T, 2, 8).transpose(1, 2)  # (1, H, T, d_head) before the temperature
    hf_scale = (seen["q"] / raw)[0, 0, :, 0]  # (T,)
    ours = torch.tensor([I.nope_query_scale(p, floor_scale=4, attn_scale=0.25) for p in range(T)])
    torch.testing.assert_close(hf_scale, ours, rtol=1e-5, atol=0)


def test_nope_query_scale_scout_values() -> None:
    assert I.nope_query_scale(8190) == 1.0 and I.nope_query_scale(8191) == pytest.approx(1 + 0.1 * math.log(2))
    assert I.nope_query_scale(131071) == pytest.approx(1 + 0.1 * math.log(17))
    with pytest.raises(ValueError, match="floor_scale must be"):
        I.nope_query_scale(0, floor_scale=0)


def test_top_weight_against_softmax() -> None:
    for n in (1, 2, 1024, 131072):
        logits = torch.zeros(n, dtype=torch.float64)
        logits[0] = 5.0
        assert I.top_weight(5.0, n) == pytest.approx(float(torch.softmax(logits, 0)[0]), rel=1e-12)
        if n >= 1024:
            s = math.log(n) / math.log(1024)
            assert I.top_weight(5.0, n, log_scale_from=1024) == pytest.approx(
                float(torch.softmax(logits * s, 0)[0]), rel=1e-12)
    assert I.top_weight(5.0, 1024, log_scale_from=1024) == I.top_weight(5.0, 1024)
    # a gap of ln(n0) nats or more: bounded away from 0 as n grows; less: falls, but slower than 1/n
    big = [I.top_weight(math.log(1024) + 0.5, n, log_scale_from=1024) for n in (2**10, 2**17, 2**24)]
    assert big[0] < big[1] < big[2]
    with pytest.raises(ValueError, match="n \\(8\\) must be >= log_scale_from \\(1024\\)"):
        I.top_weight(5.0, 8, log_scale_from=1024)
    with pytest.raises(ValueError, match="gap must be a finite number of nats >= 0"):
        I.top_weight(-1.0, 8)


def test_document_shift_rope_is_relative_absolute_is_not() -> None:
    r = I.document_shift(3000)
    assert r.rope < 1e-4 * r.score_scale  # float32 angle rounding only
    assert r.absolute > 0.5 * r.score_scale  # added sinusoids change the scores outright
    assert I.document_shift(30).rope < r.rope  # smaller angles, smaller rounding
    assert "RoPE" in repr(r) and "3,000" in repr(r)
