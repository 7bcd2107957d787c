"""Tests for mlbook.transformer.latent: multi-head latent attention with decoupled RoPE.

The oracle is Hugging Face's DeepseekV3Attention (transformers, models/deepseek_v3) on a tiny random
config: same weights (loaded by name), same inputs, the same output. The absorbed form must equal the
readable one, also when decoding against a cache, and absorbing the key up-projection must be exact
without RoPE and wrong with it.
"""

from __future__ import annotations

import pytest
import torch

from hf_versions import rope_theta
from mlbook.transformer.latent import (
    LatentCache,
    MLAConfig,
    MultiHeadLatentAttention,
    absorption_error,
    mha_cache_values,
    mla_cache_values,
)

TINY = dict(d_model=64, n_heads=4, kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16)


def _hf_attention(q_lora_rank, rope_interleave):
    transformers = pytest.importorskip("transformers")
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention, DeepseekV3RotaryEmbedding

    cfg = transformers.DeepseekV3Config(
        hidden_size=64, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=q_lora_rank,
        qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, rope_theta=10000.0, rope_interleave=rope_interleave,
        num_hidden_layers=1, vocab_size=10,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    attn = DeepseekV3Attention(cfg, 0).double().eval()
    with torch.no_grad():
        for p in attn.parameters():
            p.normal_(0.0, 0.2)  # every weight random, the norms' gains too
    return attn, DeepseekV3RotaryEmbedding(cfg)


@pytest.mark.parametrize("q_lora_rank", [None, 12])
@pytest.mark.parametrize("rope_interleave", [False, True])
def test_equals_hf_deepseek_v3_attention(q_lora_rank, rope_interleave):
    hf, rotary = _hf_attention(q_lora_rank, rope_interleave)
    pairing = "interleaved" if rope_interleave else "half"
    mine = MultiHeadLatentAttention(MLAConfig(**TINY, q_lora_rank=q_lora_rank, pairing=pairing)).double()
    mine.load_state_dict(hf.state_dict())  # strict: every weight has the same name and shape
    x = torch.randn(2, 10, 64, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    cos, sin = rotary(x, torch.arange(10)[None].expand(2, -1))
    mask = torch.full((10, 10), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    with torch.no_grad():
        ref, _ = hf(x, (cos.double(), sin.double()), mask)
        assert torch.allclose(mine(x), ref, atol=1e-12)
        assert torch.allclose(mine.forward_absorbed(x), ref, atol=1e-12)


def test_wrong_pairing_differs_from_hf():
    """The oracle can fail: loading an interleaved model into the half layout changes the output."""
    hf, rotary = _hf_attention(None, True)
    mine = MultiHeadLatentAttention(MLAConfig(**TINY, pairing="half")).double()
    mine.load_state_dict(hf.state_dict())
    x = torch.randn(1, 10, 64, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    cos, sin = rotary(x, torch.arange(10)[None])
    mask = torch.full((10, 10), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    with torch.no_grad():
        ref, _ = hf(x, (cos.double(), sin.double()), mask)
        assert (mine(x) - ref).abs().max() > 1e-3


def test_absorbed_decode_against_cache_equals_full_pass():
    torch.manual_seed(0)
    mla = MultiHeadLatentAttention(MLAConfig(**TINY, q_lora_rank=12)).double()
    x = torch.randn(2, 12, 64, dtype=torch.float64)
    with torch.no_grad():
        full = mla(x)
        cache = mla.latent(x[:, :7])
        assert isinstance(cache, LatentCache)
        assert cache.c_kv.shape == (2, 7, 16) and cache.k_rope.shape == (2, 7, 8)
        step = mla.forward_absorbed(x[:, 7:], cache, offset=7)
    assert torch.allclose(step, full[:, 7:], atol=1e-12)


def test_cache_holds_rank_plus_rope_values_per_token():
    c = MLAConfig(**TINY)
    mla = MultiHeadLatentAttention(c)
    cache = mla.latent(torch.randn(1, 5, 64))
    assert cache.c_kv.shape[-1] + cache.k_rope.shape[-1] == c.cache_values_per_token == 16 + 8
    v3 = MLAConfig.deepseek_v3()
    assert v3.cache_values_per_token == 576 and v3.qk_head_dim == 192


def test_cache_value_counts():
    assert mla_cache_values(61, 512, 64) == 61 * 576 == 35_136
    assert mha_cache_values(61, 128, 192, 128) == 61 * 128 * 320
    assert mha_cache_values(2, 4, 8) == 2 * 4 * 16
    # DeepSeek-V2's comparison: (d_c + d_R) = 4.5 d_h, what GQA with 2.25 groups of d_h keys and values holds
    assert mla_cache_values(1, 512, 64) == 4.5 * 128 == mha_cache_values(1, 1, 128) * 2.25


def test_absorption_exact_without_rope_wrong_with_it():
    plain = absorption_error(False)
    assert plain.max_error < 1e-12
    rotated = absorption_error(True)
    assert rotated.max_error > 0.1
    # absorption is right only where the rotations cancel: n = m, R_0 = I (to float32 angle rounding)
    diag = torch.diagonal(rotated.materialised - rotated.absorbed).abs().max()
    off = (rotated.materialised - rotated.absorbed).abs().max()
    assert diag < 1e-5 * off


def test_bad_input_named():
    with pytest.raises(ValueError, match="qk_rope_head_dim"):
        MLAConfig(**{**TINY, "qk_rope_head_dim": 7})
    with pytest.raises(ValueError, match="pairing"):
        MLAConfig(**TINY, pairing="adjacent")
    with pytest.raises(TypeError, match="MLAConfig"):
        MultiHeadLatentAttention(dict(TINY))
    with pytest.raises(ValueError, match="d_model=64"):
        MultiHeadLatentAttention(MLAConfig(**TINY))(torch.randn(1, 5, 32))


def test_deepseek_v3_shape_equals_transformers_config():
    transformers = pytest.importorskip("transformers")
    hf = transformers.DeepseekV3Config()
    c = MLAConfig.deepseek_v3()
    assert (c.d_model, c.n_heads, c.kv_lora_rank, c.q_lora_rank, c.qk_nope_head_dim, c.qk_rope_head_dim,
            c.v_head_dim, c.rope_base) == (hf.hidden_size, hf.num_attention_heads, hf.kv_lora_rank, hf.q_lora_rank,
                                           hf.qk_nope_head_dim, hf.qk_rope_head_dim, hf.v_head_dim, rope_theta(hf))
    assert (c.pairing == "interleaved") == hf.rope_interleave
