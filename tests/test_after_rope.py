"""Tests for section 2.8's numbers (mlbook.analysis.after_rope) and figures (mlbook.viz.after_rope).

Numbers are checked against independent computations (the closed form, transformers' code, the
library's model), figures for distinct slider frames equal to the analysis and a live redraw.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from figure_checks import _assert_distinct_frames, _last_plot
from hf_versions import HF_MAJOR, TRANSFORMERS, rope_theta

from mlbook.analysis import after_rope as A
from mlbook.viz import after_rope as V

# ---------------------------------------------------------------------------
# NoPE and hybrids
# ---------------------------------------------------------------------------


def test_causal_nope_layer_outputs_its_position():
    sig = A.nope_position_signal(10)
    assert torch.allclose(sig.causal, 1.0 / torch.arange(1, 11, dtype=torch.float64))
    assert len(set(sig.causal.tolist())) == 10  # every position distinct: a later layer can read it
    assert torch.allclose(sig.bidirectional, torch.full((10,), 0.1, dtype=torch.float64))


def test_nope_layers_match_transformers_no_rope_layers():
    transformers = pytest.importorskip("transformers")
    for cls in (transformers.Llama4TextConfig, transformers.SmolLM3Config):
        cfg = cls()
        flags = cfg.no_rope_layers  # 1 = rotate, 0 = NoPE
        assert A.nope_layers_every(cfg.num_hidden_layers, 4) == tuple(i for i, f in enumerate(flags) if f == 0)


def test_llama4_scale_equals_transformers_formula():
    # the expression in Llama4TextAttention.forward, on cache positions
    p = torch.tensor([0, 1, 8190, 8191, 8192, 16383, 100_000, 1_000_000])
    ref = torch.log1p(torch.floor((p.float() + 1.0) / 8192)) * 0.1 + 1.0
    assert torch.allclose(A.llama4_attention_scale(p).float(), ref)
    assert A.llama4_attention_scale([8190]).item() == 1.0 and A.llama4_attention_scale([8191]).item() > 1.0


def test_llama4_rows_match_transformers_defaults():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.Llama4TextConfig()
    row = A.local_global("Llama 4")
    assert (row.n_layers, row.window, row.n_kv_heads, row.d_head) == (
        cfg.num_hidden_layers, cfg.attention_chunk_size, cfg.num_key_value_heads, cfg.head_dim)
    # the chunked (local) layers rotate, the full-attention ones are the NoPE ones
    assert all((t == "full_attention") == (f == 0) for t, f in zip(cfg.layer_types, cfg.no_rope_layers))
    assert row.global_base is None and row.kind == "chunked"  # the global layers are the NoPE ones
    row = A.local_global("gpt-oss")
    oss = transformers.GptOssConfig(num_hidden_layers=row.n_layers)  # gpt-oss-20b: 24 layers
    assert A.layer_types(row.n_layers, row.local_per_global) == tuple(oss.layer_types) == row.types
    assert (row.window, row.n_kv_heads, row.d_head, row.local_base) == (
        oss.sliding_window, oss.num_key_value_heads, oss.head_dim, rope_theta(oss))


def test_layer_types_patterns():
    transformers = pytest.importorskip("transformers")
    gemma3 = transformers.Gemma3TextConfig()  # sliding_window_pattern 6: five local, one global
    assert A.layer_types(gemma3.num_hidden_layers, 5) == tuple(gemma3.layer_types)
    gemma2 = transformers.Gemma2Config()
    assert A.layer_types(gemma2.num_hidden_layers, 1) == tuple(gemma2.layer_types)
    cohere = transformers.Cohere2Config()
    assert A.layer_types(cohere.num_hidden_layers, 3) == tuple(cohere.layer_types)


def test_windowed_cache_closed_form():
    types = A.layer_types(6, 2)  # 4 local, 2 global
    got = A.windowed_kv_bytes(types, 100, 1000, n_kv_heads=2, d_head=8, bytes_per_value=2.0)
    assert got == (2 * 1000 + 4 * 100) * 2 * 2 * 8 * 2
    assert A.windowed_kv_bytes(types, 100, 50, 2, 8) == 6 * 50 * 2 * 2 * 8 * 2  # shorter than the window
    g3 = A.local_global("Gemma 3")  # gemma-3-12b-pt: 48 layers, 8 KV heads of 256, window 1024, 5 local per global
    assert (g3.n_layers, g3.n_kv_heads, g3.d_head, g3.window, g3.local_per_global) == (48, 8, 256, 1024, 5)
    assert (g3.local_base, g3.global_base) == (10000.0, 1_000_000.0)
    full = A.model_kv_bytes("Gemma 3", 131072, all_global=True)
    assert full == 48 * 131072 * 2 * 8 * 256 * 2
    assert A.model_kv_bytes("Gemma 3", 131072) == (8 * 131072 + 40 * 1024) * 2 * 8 * 256 * 2
    llama4 = A.local_global("Llama 4")  # chunked layers count as local
    assert A.model_kv_bytes(llama4, 100_000) == (12 * 100_000 + 36 * 8192) * 2 * 8 * 128 * 2
    with pytest.raises(ValueError, match="window"):
        A.windowed_kv_bytes(types, None, 10, 1, 8)
    with pytest.raises(ValueError, match="no model"):
        A.local_global("Gemma 9")


def test_window_cache_matches_library_model():
    """A sliding layer of the library's GPT never needs more than W keys: the last token's logits from the
    last W tokens alone equal those from the whole text (RoPE is relative, so renumbering from 0 is harmless).
    This is the claim the cache sizes rest on. A global layer fails the same check."""
    from mlbook.transformer.models import GPT, GPTConfig

    idx = torch.randint(0, 32, (1, 12), generator=torch.Generator().manual_seed(0))
    for kind, same in (("sliding_attention", True), ("full_attention", False)):
        torch.manual_seed(0)
        cfg = GPTConfig(vocab_size=32, d_model=32, n_heads=4, n_layers=1, max_len=64, n_kv_heads=2,
                        layer_types=(kind,), sliding_window=4 if kind == "sliding_attention" else None)
        model = GPT(cfg).eval()
        with torch.no_grad():
            whole, tail = model(idx), model(idx[:, -4:])
        whole, tail = (whole[0], tail[0]) if isinstance(whole, tuple) else (whole, tail)
        assert torch.allclose(whole[:, -1], tail[:, -1], atol=1e-5) == same


# ---------------------------------------------------------------------------
# Partial rotary and p-RoPE
# ---------------------------------------------------------------------------


def test_partial_rotary_recomputes_ladder_p_rope_keeps_it():
    base, d = 10000.0, 64
    full = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (32,)
    partial = A.pair_frequencies(d, base, partial_rotary_factor=0.25)
    r = 16
    assert torch.allclose(partial[: r // 2], base ** (-torch.arange(0, r, 2, dtype=torch.float64) / r), rtol=1e-6)
    assert (partial[r // 2:] == 0).all()
    p = A.pair_frequencies(d, base, drop_lowest=0.25)
    assert torch.allclose(p[:24], full[:24], rtol=1e-6) and (p[24:] == 0).all()
    # both start at 1 rad/token; partial rotary still reaches the slowest decade, p-RoPE stops earlier
    s_partial, s_p = A.rotation_summary(d, base, partial_rotary_factor=0.25), A.rotation_summary(d, base, drop_lowest=0.25)
    assert (s_partial.turning, s_partial.still, s_p.turning, s_p.still) == (8, 24, 24, 8)
    assert s_partial.fastest_wavelength == pytest.approx(2 * math.pi) == s_p.fastest_wavelength
    assert s_partial.slowest_wavelength > s_p.slowest_wavelength


def test_partial_rotary_matches_gpt_neox_inv_freq():
    transformers = pytest.importorskip("transformers")
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding

    cfg = transformers.GPTNeoXConfig(hidden_size=256, num_attention_heads=4, rotary_pct=0.25)
    hf = GPTNeoXRotaryEmbedding(cfg).inv_freq.double()
    mine = A.pair_frequencies(64, 10000.0, partial_rotary_factor=0.25)
    assert torch.allclose(mine[: hf.shape[0]], hf, rtol=1e-6)


# ---------------------------------------------------------------------------
# Latent attention, M-RoPE, shipped scalings
# ---------------------------------------------------------------------------


def test_mla_cache_rows_deepseek_v3():
    rows = {r.design.split(",")[0].split(":")[0]: r for r in A.mla_cache_rows()}
    assert rows["MLA"].values == 61 * (512 + 64)
    assert rows["multi-head"].values == 61 * 128 * (192 + 128)
    assert rows["MLA"].bytes_bf16 == 2 * rows["MLA"].values
    with pytest.raises(ValueError, match="latent attention"):
        A.mla_cache_rows("Llama 3.1")


def test_mrope_score_map_relative_and_peaked():
    z = A.mrope_score_map(7, 7, row=3, col=3)
    assert z[3, 3] == pytest.approx(1.0)
    assert z.max() == pytest.approx(1.0)
    z2 = A.mrope_score_map(7, 7, row=1, col=2)
    assert torch.allclose(z[2:5, 3:6], z2[0:3, 2:5])  # the same offsets give the same scores
    with pytest.raises(ValueError, match="outside"):
        A.mrope_score_map(5, 5, row=5, col=0)


def test_shipped_scaling_bands():
    wl, ratio = A.scaled_frequency_ratio("Llama 3.1")
    # llama3: wavelengths below L / high_freq_factor kept, above L / low_freq_factor divided by the factor
    assert torch.all(ratio[wl < 8192 / 4] == 1.0)
    assert torch.allclose(ratio[wl > 8192], torch.full_like(ratio[wl > 8192], 1 / 8), rtol=1e-6)
    for row in A.SHIPPED_SCALINGS:
        _, r = A.scaled_frequency_ratio(row)
        s = row.rope_scaling().factor
        top = 1 / s if row.scaling == "linear" else 1.0  # linear interpolation divides every pair
        assert r.max() == pytest.approx(top, rel=1e-5) and r.min() == pytest.approx(1 / s, rel=1e-5)
    assert A.shipped_scaling("DeepSeek-V3").max_len == 163840 == 40 * 4096
    with pytest.raises(ValueError, match="no shipped scaling"):
        A.shipped_scaling("Mistral")


def test_gemma3_shipped_linear_matches_transformers():
    """Gemma 3's global layers: linear x8 on its 32k pretraining length, every pair divided by 8, as
    transformers' linear init computes it."""
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    row = A.shipped_scaling("Gemma 3")
    assert (row.scaling, row.factor, row.original_len, row.max_len, row.d_head) == ("linear", 8.0, 32768, 131072, 256)
    cfg = transformers.Gemma3TextConfig(head_dim=256, rope_parameters={
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}})
    hf, _ = ROPE_INIT_FUNCTIONS["linear"](cfg, "cpu", layer_type="full_attention")  # (d/2,)
    scaled, _ = row.rope_scaling().frequencies(row.d_head, row.base)
    assert torch.allclose(scaled.double(), hf.double(), rtol=1e-6)


def test_pairs_slower_than_closed_form_and_shipped_windows():
    # pair i is slower than L tokens when 2i/d > ln(L / 2 pi) / ln(base): count the i that pass
    for d, base, L in ((256, 1e4, 1024), (64, 1e4, 128), (64, 1e4, 64), (128, 5e5, 8192)):
        want = sum(2 * i / d > math.log(L / (2 * math.pi)) / math.log(base) for i in range(d // 2))
        assert A.pairs_slower_than(d, base, L) == want
    g3, mb = A.local_window_fit("Gemma 3"), A.local_window_fit("ModernBERT")
    assert (g3.slower_than_window, g3.pairs, g3.longest_offset) == (57, 128, 1023)
    assert (mb.slower_than_window, mb.slower_than_offset, mb.pairs, mb.longest_offset) == (21, 23, 32, 64)
    # the fitted base is fitted to the longest offset the layer compares, not to the window's span
    assert mb.fitted_base == pytest.approx(A.window_fitted_base(64, 64)) and round(mb.fitted_base) == 11
    assert g3.fitted_base == pytest.approx(A.window_fitted_base(1023, 256)) and round(g3.fitted_base) == 169
    assert g3.checkpoint == "gemma-3-12b-pt"  # the 12B geometry (d_head 256); Gemma 3 27B has d_head 128
    assert A.pairs_slower_than(128, 1e4, 1024) == 28
    # the fitted base's slowest pair turns exactly once over the window
    b = A.window_fitted_base(1024, 256)
    assert 2 * math.pi * b ** (254 / 256) == pytest.approx(1024, rel=1e-9)
    assert A.pairs_slower_than(256, b, 1024 * (1 + 1e-9)) == 0
    with pytest.raises(ValueError, match="no sliding window"):
        A.local_window_fit("Llama 3.1")
    with pytest.raises(ValueError, match="length"):
        A.pairs_slower_than(64, 1e4, 0)


def test_mla_softmax_scale_matches_deepseek_v3_attention():
    transformers = pytest.importorskip("transformers")
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention
    row = A.shipped_scaling("DeepSeek-V3")
    rope_scaling = {"type": "yarn", "factor": row.factor, **{k: v for k, v in row.params if k != "factor"}}
    rope_scaling["original_max_position_embeddings"] = rope_scaling.pop("original_max_len")
    cfg = transformers.DeepseekV3Config(hidden_size=64, num_attention_heads=2, num_key_value_heads=2,
                                        q_lora_rank=None, kv_lora_rank=16, qk_rope_head_dim=64, qk_nope_head_dim=128,
                                        v_head_dim=16, num_hidden_layers=1, rope_scaling=rope_scaling,
                                        max_position_embeddings=row.max_len)
    got = A.mla_softmax_scale("DeepSeek-V3")
    assert got.d_qk == 192 and got.plain == pytest.approx(192 ** -0.5)
    assert got.released == pytest.approx(DeepseekV3Attention(cfg, 0).scaling, rel=1e-12)
    assert got.temperature == pytest.approx((0.1 * math.log(40) + 1) ** 2, rel=1e-12)
    assert got.cos_sin_factor == 1.0  # mscale = mscale_all_dim: nothing on cos and sin
    with pytest.raises(ValueError, match="latent attention"):
        A.mla_softmax_scale("Llama 3.1")


def test_mla_softmax_scale_other_mla_releases():
    """Kimi K2 (DeepseekV3 architecture, YaRN 32, mscale = mscale_all_dim = 1) and GLM-5 (no scaling, 192 + 64)."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention
    from transformers.models.glm_moe_dsa.modeling_glm_moe_dsa import GlmMoeDsaAttention
    kimi = A.mla_softmax_scale("Kimi K2")
    from mlbook.data.model_families import family
    row = family("Kimi K2")
    rope_scaling = {"type": "yarn", "factor": row.scaling_factor, **row.scaling_params}
    cfg = transformers.DeepseekV3Config(hidden_size=64, num_attention_heads=2, num_key_value_heads=2,
                                        q_lora_rank=None, kv_lora_rank=16, qk_rope_head_dim=64, qk_nope_head_dim=128,
                                        v_head_dim=16, num_hidden_layers=1, rope_scaling=rope_scaling,
                                        max_position_embeddings=row.max_len)
    assert kimi.factor == 32.0 and kimi.released == pytest.approx(DeepseekV3Attention(cfg, 0).scaling, rel=1e-12)
    assert kimi.temperature == pytest.approx((0.1 * math.log(32) + 1) ** 2, rel=1e-12) and kimi.cos_sin_factor == 1
    glm = A.mla_softmax_scale("GLM-5")
    cfg = transformers.GlmMoeDsaConfig(hidden_size=64, num_attention_heads=2, num_key_value_heads=2, q_lora_rank=16,
                                       kv_lora_rank=16, qk_rope_head_dim=64, qk_nope_head_dim=192, v_head_dim=16,
                                       num_hidden_layers=1, rope_parameters={"rope_type": "default",
                                                                              "rope_theta": 1e6})
    assert (glm.d_qk, glm.temperature) == (256, 1.0)
    assert glm.released == pytest.approx(GlmMoeDsaAttention(cfg, 0).scaling, rel=1e-12)
    assert set(A.MLA_FAMILIES) == {"DeepSeek-V3", "Kimi K2", "GLM-5"}


def test_interleaved_axes_match_qwen3_vl():
    pytest.importorskip("transformers")
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRotaryEmbedding
    axes = A.interleaved_section_axes(A.QWEN3_VL_SECTION, 128)
    assert torch.bincount(axes).tolist() == list(A.QWEN3_VL_SECTION)
    assert axes[-4:].tolist() == [0, 0, 0, 0]  # the four slowest pairs turn with time
    freqs = torch.stack([torch.full((1, 1, 64), float(a)) for a in range(3)])  # (3, bs, T, d/2): axis a holds a
    got = Qwen3VLTextRotaryEmbedding.apply_interleaved_mrope(None, freqs.clone(), list(A.QWEN3_VL_SECTION))
    assert got[0, 0].long().tolist() == axes.tolist()
    with pytest.raises(ValueError, match="sum to"):
        A.interleaved_section_axes((24, 20, 20), 64)


def test_xpos_zeta_matches_reference_and_damps_fast_pairs():
    d = 64
    ref = (torch.arange(0, d, 2).double() + 0.4 * d) / (1.4 * d)  # torchscale's XPOS scale buffer
    z = A.xpos_zeta(d)
    assert torch.allclose(z, ref)
    assert z[0] == pytest.approx(0.4 / 1.4) and z[-1] > 0.97  # fastest pair decays most, slowest barely
    assert torch.all(z[1:] > z[:-1])
    with pytest.raises(ValueError, match="even"):
        A.xpos_zeta(63)


@pytest.mark.skipif(HF_MAJOR < 5, reason="the claim is about transformers 5's get_rope_index")
def test_transformers5_get_rope_index_resumes_at_spatial_extent():
    """Page 09 (and its exercise) say transformers 5's `Qwen2VLModel.get_rope_index` numbers patches as
    `mrope_position_ids` does but resumes after a grid at s + max(h, w) (merged), not one past the largest id:
    equal for images and short videos, its text reusing the last frames' time ids after a video with t > max(h, w).
    If this fails, transformers changed the rule: update the page's sentence in cell ar23c and the solution."""
    import transformers
    from types import SimpleNamespace

    from mlbook.transformer.multimodal import mrope_position_ids
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel
    IMAGE, VIDEO, START = 151, 152, 150
    cfg = transformers.Qwen2VLConfig(vision_config={"spatial_merge_size": 2}, image_token_id=IMAGE,
                                     video_token_id=VIDEO, vision_start_token_id=START,
                                     text_config=dict(hidden_size=64, num_attention_heads=2, num_key_value_heads=2,
                                                      rope_scaling={"type": "mrope", "mrope_section": [4, 6, 6]}))
    model = SimpleNamespace(config=cfg)
    model.get_vision_position_ids = lambda *a, **k: Qwen2VLModel.get_vision_position_ids(model, *a, **k)

    def hf(layout):  # the layout as token ids: text (the last one before a grid is the vision start), grids
        ids, kinds, images, videos = [], [], [], []
        for item in layout:
            if isinstance(item, tuple):
                t, h, w = item
                ids += [VIDEO if t > 1 else IMAGE] * (t * h * w)
                kinds += [2 if t > 1 else 1] * (t * h * w)
                (videos if t > 1 else images).append([t, 2 * h, 2 * w])
            else:
                ids += [5] * (item - 1) + [START]
                kinds += [0] * item
        out, _ = Qwen2VLModel.get_rope_index(model, torch.tensor([ids]), torch.tensor([kinds]),
                                             image_grid_thw=torch.tensor(images) if images else None,
                                             video_grid_thw=torch.tensor(videos) if videos else None)
        return out[:, 0]

    def spatial_resume(layout):  # the library's ids with the text after each grid resuming at s + max(h, w)
        parts, start = [], 0
        for item in layout:
            if isinstance(item, tuple):
                parts.append(mrope_position_ids([item]) + start)
                start += max(item[1], item[2])
            else:
                parts.append(torch.arange(start, start + item).expand(3, item))
                start += item
        return torch.cat(parts, dim=1)

    for layout in ([4, (1, 2, 3), 3], [4, (2, 2, 2), 3], [3, (1, 3, 2), 2, (1, 2, 2), 2]):
        assert torch.equal(hf(layout), mrope_position_ids(layout)), (TRANSFORMERS, layout)
    long_video = [4, (1, 2, 3), 3, (2, 1, 1), 4]  # the M-RoPE test's layout: a 2-frame video of 1 x 1 merged patches
    got, ours = hf(long_video), mrope_position_ids(long_video)
    assert not torch.equal(got, ours) and torch.equal(got, spatial_resume(long_video)), TRANSFORMERS
    assert got[0, 14].item() == got[0, 15].item() == 11 and ours[0, 15].item() == 12  # last frame's time id reused


def test_xpos_overflow_matches_reference_scale():
    """torchscale's XPOS builds scale = zeta ** (positions / gamma), keys get 1 / scale: the factor on the fastest
    pair reaches the dtype's largest value at xpos_overflow_length, and centring the positions doubles it."""
    z0 = float(A.xpos_zeta(64)[0])
    assert A.xpos_largest_scale(8192) == pytest.approx(z0 ** (-8191 / 512), rel=1e-12)
    assert A.xpos_largest_scale(8193, centred=True) == pytest.approx(z0 ** (-4097 / 512), rel=1e-12)
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        big = torch.finfo(dtype).max
        for centred in (False, True):
            L = A.xpos_overflow_length(dtype, centred=centred)
            assert A.xpos_largest_scale(L - 1, centred=centred) <= big < A.xpos_largest_scale(L, centred=centred)
        # torchscale's own arithmetic in that dtype: the uncentred key factor turns inf within a token or two of L
        L = A.xpos_overflow_length(dtype)
        n = torch.arange(L - 3, L + 3, dtype=torch.float64)
        key = (torch.tensor(z0, dtype=torch.float64) ** (-n / 512)).to(dtype)
        assert torch.isfinite(key[0]) and torch.isinf(key[-1])
    assert 4000 < A.xpos_overflow_length(torch.float16) < 5000
    assert 30000 < A.xpos_overflow_length(torch.float32) < 40000
    with pytest.raises(TypeError, match="dtype"):
        A.xpos_overflow_length(torch.int32)


def test_deepseek_row_matches_transformers_defaults():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.DeepseekV3Config()
    assert (cfg.kv_lora_rank, cfg.qk_rope_head_dim, cfg.num_hidden_layers, cfg.num_attention_heads) == (512, 64, 61, 128)
    assert A.shipped_scaling("DeepSeek-V3").d_head == cfg.qk_rope_head_dim
    oss, row = transformers.GptOssConfig(), A.shipped_scaling("gpt-oss")  # the config class: 120b; same rope
    assert (row.base, row.factor, row.original_len, row.max_len) == (
        rope_theta(oss), oss.rope_scaling["factor"], oss.rope_scaling["original_max_position_embeddings"],
        oss.max_position_embeddings)


# ---------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------

STATIC = [V.fig_nope_signal, V.fig_attention_temperature, V.fig_windowed_kv, V.fig_rotated_pairs,
          V.fig_absorption, V.fig_mrope_scores, V.fig_shipped_scaling]
LIVE = [V.live_nope_signal, V.live_attention_temperature, V.live_windowed_kv, V.live_rotated_pairs,
        V.live_absorption, V.live_mrope_scores, V.live_shipped_scaling]


@pytest.mark.parametrize("fig_fn", STATIC, ids=[f.__name__ for f in STATIC])
def test_static_slider_frames_differ(fig_fn):
    fig = fig_fn()
    _assert_distinct_frames(fig, len(fig.frames))
    assert len(fig.frames) >= 2 and fig.layout.xaxis.title.text and fig.layout.title.text
    single = fig_fn(grid=None)
    assert not single.frames and len(single.data) == len(fig.data)


def test_figures_show_the_analysis():
    fig = V.fig_nope_signal(T=8, grid=None)
    np.testing.assert_allclose(np.asarray(fig.data[0].y, dtype=float), 1 / np.arange(1, 9), atol=1e-4)
    fig = V.fig_windowed_kv("Gemma 3", grid=None)
    x = np.asarray(fig.data[1].x)
    i = int(np.flatnonzero(x == 131072)[0])
    assert float(fig.data[1].y[i]) == pytest.approx(A.model_kv_bytes("Gemma 3", 131072) / 2**30, rel=1e-3)
    fig = V.fig_rotated_pairs(still=0.5, grid=None)
    floor = min(float(v) for v in fig.data[1].y)
    assert sum(float(v) == floor for v in fig.data[1].y) == 16 and sum(float(v) == floor for v in fig.data[2].y) == 16
    fig = V.fig_absorption("off", grid=None)
    assert np.abs(np.asarray(fig.data[0].z, dtype=float)).max() < 1e-3
    # every frame of the temperature slider fits under the shared y range
    fig = V.fig_attention_temperature()
    top = fig.layout.yaxis.range[1]
    assert all(max(float(v) for v in f.data[1].y) < top for f in fig.frames)


def _different(a, b) -> bool:
    return json.dumps(a["data"], sort_keys=True, default=str) != json.dumps(b["data"], sort_keys=True, default=str)


@pytest.mark.parametrize("live_fn", LIVE, ids=[f.__name__ for f in LIVE])
def test_live_figures_redraw_when_a_control_changes(live, displayed, live_fn):
    w = live_fn()
    for ctrl in w.children[0].children:
        before = _last_plot(displayed)
        if hasattr(ctrl, "options"):  # a choice: step to the next option
            values = [o[1] if isinstance(o, tuple) else o for o in ctrl.options]
            ctrl.value = values[(values.index(ctrl.value) + 1) % len(values)]
        else:
            ctrl.value = ctrl.max
        assert _different(before, _last_plot(displayed)), f"{live_fn.__name__}: moving {ctrl.description} changed nothing"


def test_figure_bad_input():
    with pytest.raises(ValueError, match="rope must be"):
        V.fig_absorption("maybe")
    with pytest.raises(ValueError, match="split must be"):
        V.fig_mrope_scores("rows")
    with pytest.raises(ValueError, match="model must be"):
        V.fig_windowed_kv("Gemma 9")
    with pytest.raises(ValueError, match="outside the slider's range"):
        V.live_rotated_pairs(still=0.99)
