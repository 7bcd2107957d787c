"""Rows of mlbook.data.model_families for releases since mid-2025, against transformers 5.x and the published configs.

What is checked, per row (each row's `hf_check` says the same in words):
  DeepSeek-V3.2, GLM-5, Mistral 4   the transformers 5.15 config class whose docstring names the checkpoint:
                     its defaults are the row's attention shape, latent widths and length (and, for
                     Mistral 4, its YaRN and query scaling); these classes are new in transformers 5,
                     so the tests skip under 4.x
  DeepSeek-V3.2, Kimi K2, Mistral 4   the row's YaRN, given to transformers' yarn initialiser over the
                     64-wide rotary key, yields the same frequencies and attention factor as mlbook's
                     RopeScaling('yarn', ...)
  Llama 4, Kimi K2, GLM-5   the row equals the published config.json in ../shared/realconfigs (the
                     corpus outside the repository; skipped where it is absent)
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
import torch

from mlbook.data import model_families as MF
from mlbook.transformer.rope_scaling import RopeScaling

transformers = pytest.importorskip("transformers")
from hf_versions import HF_MAJOR, rope_init_function, rope_theta  # noqa: E402

pytestmark = pytest.mark.oracle

REAL = Path(os.environ.get("MLBOOK_REALCONFIGS", Path(__file__).resolve().parents[2] / "shared" / "realconfigs"
                           / "configs"))


def _class(name: str):
    cls = getattr(transformers, name, None)
    if cls is None:
        pytest.skip(f"transformers {transformers.__version__} has no {name} (added in transformers 5)")
    return cls


def _published(stem: str) -> dict:
    path = REAL / f"{stem}.json"
    if not path.is_file():
        pytest.skip(f"no published config at {path}")
    raw = json.loads(path.read_text())
    return raw.get("text_config", raw)


def _latent(row: MF.ModelFamily) -> tuple[int, int, int, int, int | None, int | None, int | None]:
    return (row.n_layers, row.n_heads, row.n_kv_heads, row.max_len, row.kv_lora_rank, row.qk_rope_head_dim,
            row.qk_nope_head_dim)


def _class_latent(c) -> tuple:
    return (c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, c.max_position_embeddings,
            c.kv_lora_rank, c.qk_rope_head_dim, c.qk_nope_head_dim)


def test_deepseek_v32_row_is_the_class_defaults() -> None:
    row, c = MF.family("DeepSeek-V3.2"), _class("DeepseekV32Config")()
    assert _latent(row) == _class_latent(c)
    assert row.d_head == c.qk_nope_head_dim + c.qk_rope_head_dim == c.qk_head_dim
    assert row.rope_base == rope_theta(c)
    # every layer is sparse attention over the full cache: the row's layers keep every token
    assert set(c.layer_types) == {"deepseek_sparse_attention"} and set(row.layer_kinds) == {"full_attention"}
    assert "2,048" in row.notes and c.index_topk == 2048 and c.index_head_dim == 128 and c.index_n_heads == 64


def test_glm5_row_is_the_class_defaults_but_its_base() -> None:
    row, c = MF.family("GLM-5"), _class("GlmMoeDsaConfig")()
    assert _latent(row) == _class_latent(c)
    assert row.d_head == c.qk_head_dim
    assert set(c.layer_types) == {"deepseek_sparse_attention"}
    assert rope_theta(c) == 10000.0 != row.rope_base  # the release's 1,000,000 is not the class default


def test_mistral4_row_is_the_class_defaults() -> None:
    row, c = MF.family("Mistral 4"), _class("Mistral4Config")()
    assert _latent(row) == _class_latent(c)
    assert row.d_head == c.qk_head_dim and (row.rope_pairing == "interleaved") == c.rope_interleave
    p = c.rope_parameters
    assert p["rope_type"] == row.scaling and p["factor"] == row.scaling_factor and p["rope_theta"] == row.rope_base
    for key, value in row.scaling_params.items():
        assert p[key] == value, key
    assert row.original_len == p["original_max_position_embeddings"]
    assert row.temperature_tuning == {"floor_scale": float(p["original_max_position_embeddings"]),
                                      "attn_scale": p["llama_4_scaling_beta"]}


@pytest.mark.parametrize("name", ["DeepSeek-V3.2", "Kimi K2", "Mistral 4"])
def test_latent_yarn_rows_through_hf_rope_init(name: str) -> None:
    row = MF.family(name)
    p = row.scaling_params
    cfg = transformers.DeepseekV3Config(
        num_attention_heads=row.n_heads, num_key_value_heads=row.n_kv_heads, kv_lora_rank=row.kv_lora_rank,
        qk_rope_head_dim=row.qk_rope_head_dim, qk_nope_head_dim=row.qk_nope_head_dim, rope_theta=row.rope_base,
        max_position_embeddings=row.max_len, rope_scaling={"rope_type": "yarn", "factor": row.scaling_factor, **p})
    hf_inv, hf_af = rope_init_function("yarn")(cfg, "cpu")
    ours, af = RopeScaling("yarn", row.scaling_factor, original_max_len=p["original_max_position_embeddings"],
                           beta_fast=p.get("beta_fast"), beta_slow=p.get("beta_slow"), mscale=p.get("mscale"),
                           mscale_all_dim=p.get("mscale_all_dim")).frequencies(row.qk_rope_head_dim, row.rope_base)
    assert hf_inv.numel() == row.qk_rope_head_dim // 2  # only the decoupled rotary key rotates
    torch.testing.assert_close(ours, hf_inv.float(), rtol=1e-6, atol=0)
    assert math.isclose(af, hf_af, rel_tol=1e-12)
    if "mscale_all_dim" in p:
        assert af == 1.0  # mscale == mscale_all_dim: no factor on cos and sin


def test_kimi_k2_row_is_the_published_config() -> None:
    row, c = MF.family("Kimi K2"), _published("kimi-k2-instruct")
    assert c["model_type"] == "kimi_k2" and c["architectures"] == ["DeepseekV3ForCausalLM"]
    assert (row.n_layers, row.n_heads, row.n_kv_heads, row.max_len) == (
        c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"], c["max_position_embeddings"])
    assert (row.kv_lora_rank, row.qk_rope_head_dim, row.qk_nope_head_dim) == (
        c["kv_lora_rank"], c["qk_rope_head_dim"], c["qk_nope_head_dim"])
    assert row.rope_base == c["rope_theta"]
    s = c["rope_scaling"]
    assert s["type"] == row.scaling and s["factor"] == row.scaling_factor
    assert {k: s[k] for k in row.scaling_params} == row.scaling_params
    assert row.original_len == s["original_max_position_embeddings"]


def test_glm5_row_is_the_published_config() -> None:
    row, c = MF.family("GLM-5"), _published("glm-5")
    assert c["model_type"] == "glm_moe_dsa" and "rope_scaling" not in c
    assert (row.n_layers, row.n_heads, row.n_kv_heads, row.max_len) == (
        c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"], c["max_position_embeddings"])
    assert (row.kv_lora_rank, row.qk_rope_head_dim, row.qk_nope_head_dim, row.d_head) == (
        c["kv_lora_rank"], c["qk_rope_head_dim"], c["qk_nope_head_dim"], c["qk_head_dim"])
    assert c["rope_parameters"] == {"rope_theta": row.rope_base, "rope_type": "default"} and row.scaling == "none"
    assert c["rope_interleave"] and row.rope_pairing == "interleaved"


def test_llama4_row_scaling_and_instruct_length_are_the_published_instruct_config() -> None:
    row, c = MF.family("Llama 4"), _published("llama-4-scout-17b-16e-instruct")
    assert (row.n_layers, row.n_heads, row.n_kv_heads, row.d_head, row.chunk) == (
        c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"],
        c["attention_chunk_size"])
    assert row.rope_base == c["rope_theta"]
    s = c["rope_scaling"]
    assert s["rope_type"] == row.scaling and s["factor"] == row.scaling_factor
    assert {k: s[k] for k in row.scaling_params} == row.scaling_params
    assert f"{c['max_position_embeddings']:,}" == "10,485,760" and "10,485,760" in row.notes
    # the row is the Instruct checkpoint whose scaling it gives: its name and length are that config's too
    assert row.checkpoint == "Llama-4-Scout-17B-16E-Instruct" and row.max_len == c["max_position_embeddings"]


# ---------------------------------------------------------------------------
# Hybrid stacks: linear attention (Qwen3-Next, Qwen3.5), a wider global head (Gemma 4), YaRN on the full
# layers only (OLMo 3), partial rotation in every layer (GLM-4.5)
# ---------------------------------------------------------------------------

# these read transformers 5's rope_parameters and per-layer-type config classes (Gemma 4 is new in 5)
v5_only = pytest.mark.skipif(HF_MAJOR < 5, reason=f"reads transformers 5's rope_parameters; transformers "
                                                  f"{transformers.__version__} keeps 4.x's layout")


def _linear_state(c: dict) -> int:
    """One Gated DeltaNet layer's fixed state, written out: the recurrent state (value heads x key width x
    value width) and the causal convolution's kernel-long window of its q, k and v channels."""
    conv_channels = 2 * c["linear_num_key_heads"] * c["linear_key_head_dim"] + (
        c["linear_num_value_heads"] * c["linear_value_head_dim"])
    return (c["linear_num_value_heads"] * c["linear_key_head_dim"] * c["linear_value_head_dim"]
            + conv_channels * c["linear_conv_kernel_dim"])


@pytest.mark.parametrize("name, stem", [("Qwen3-Next", "qwen3-next-80b-a3b-thinking"), ("Qwen3.5", "qwen3.5-27b")])
def test_linear_attention_rows_are_the_published_configs(name: str, stem: str) -> None:
    from mlbook.analysis.production import config_kv_plan, family_kv_plan

    row, c = MF.family(name), _published(stem)
    assert (row.n_layers, row.n_heads, row.n_kv_heads, row.d_head, row.original_len) == (
        c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"],
        c["max_position_embeddings"])
    # the card's YaRN is not in the config: it is added from the native length the config ships
    assert not row.scaling_in_config and c.get("rope_scaling") is None and (c.get("rope_parameters") or {}).get(
        "rope_type", "default") == "default"
    assert row.scaling_params == {"original_max_position_embeddings": c["max_position_embeddings"]}
    p = c.get("rope_parameters") or {"rope_theta": c["rope_theta"], "partial_rotary_factor": c["partial_rotary_factor"]}
    assert row.rope_base == p["rope_theta"] and row.partial_rotary == p["partial_rotary_factor"]
    assert tuple(p.get("mrope_section", ())) == row.mrope_section
    assert bool(p.get("mrope_interleaved", False)) == row.mrope_interleaved
    assert sum(row.mrope_section) in (0, round(row.partial_rotary * row.d_head) // 2)  # M-RoPE splits the turning pairs
    full = [i for i in range(row.n_layers) if (i + 1) % c["full_attention_interval"] == 0]
    assert [i for i, k in enumerate(row.layer_kinds) if k == "full_attention"] == full
    assert set(row.layer_kinds) == {"full_attention", "linear_attention"} and row.rotary_layers == tuple(full)
    assert row.linear_attention == {k: c[k] for k in row.linear_attention}
    # bytes: the full layers' keys and values per token at 2 bytes, plus each linear layer's fixed state: its
    # convolution window at 2 bytes and its recurrent state (value heads x key width x value width) at 4 (float32)
    T = 131072
    recurrent = c["linear_num_value_heads"] * c["linear_key_head_dim"] * c["linear_value_head_dim"]
    expected = 2 * len(full) * 2 * row.n_kv_heads * row.d_head * T + (row.n_layers - len(full)) * (
        2 * (_linear_state(c) - recurrent) + 4 * recurrent)
    assert family_kv_plan(row).bytes(T) == config_kv_plan(c).bytes(T) == expected


@v5_only
@pytest.mark.parametrize("name", ["Qwen3-Next", "Qwen3.5"])
def test_the_cards_yarn_on_the_linear_attention_rows_through_transformers(name: str) -> None:
    """The model card's YaRN (factor 4 from 262,144), as the row records it, built by transformers 5.15's Qwen3-Next
    rotary module over the 64 rotating channels: the library's frequencies and attention factor are its; the
    card's 1,010,000 tokens lie inside factor x original = 1,048,576."""
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextRotaryEmbedding

    row = MF.family(name)
    L = row.scaling_params["original_max_position_embeddings"]
    c = _class("Qwen3NextConfig")(num_hidden_layers=4, head_dim=row.d_head, max_position_embeddings=L, rope_parameters={
        "rope_type": "yarn", "rope_theta": row.rope_base, "partial_rotary_factor": row.partial_rotary,
        "factor": row.scaling_factor, "original_max_position_embeddings": L})
    module = Qwen3NextRotaryEmbedding(c)
    rotated = int(row.d_head * row.partial_rotary)
    ours, af = RopeScaling("yarn", row.scaling_factor, original_max_len=L).frequencies(rotated, row.rope_base)
    torch.testing.assert_close(ours.double(), module.inv_freq.double(), rtol=1e-6, atol=0)
    assert math.isclose(af, module.attention_scaling, rel_tol=1e-12) and af > 1
    assert row.original_len == L < row.max_len <= row.scaling_factor * L


@v5_only
def test_qwen3_next_row_is_the_class_defaults_but_its_base_and_length() -> None:
    row, c = MF.family("Qwen3-Next"), _class("Qwen3NextConfig")()
    assert (row.n_layers, row.n_heads, row.n_kv_heads, row.d_head) == (
        c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, c.head_dim)
    assert row.layer_kinds == tuple(c.layer_types)
    assert row.linear_attention == {k: getattr(c, k) for k in row.linear_attention}
    assert c.rope_parameters["partial_rotary_factor"] == row.partial_rotary
    assert (rope_theta(c), c.max_position_embeddings) == (10000.0, 32768) != (row.rope_base, row.max_len)


def _gemma4_config(row: MF.ModelFamily):
    return _class("Gemma4TextConfig")(
        num_hidden_layers=row.n_layers, num_attention_heads=row.n_heads, num_key_value_heads=row.n_kv_heads,
        head_dim=row.d_head, global_head_dim=row.global_d_head, num_global_key_value_heads=row.global_kv_heads,
        attention_k_eq_v=True, sliding_window=row.window, max_position_embeddings=row.max_len)


@v5_only
def test_gemma4_row_through_transformers_config() -> None:
    from mlbook.analysis.production import config_kv_plan, family_kv_plan

    row = MF.family("Gemma 4")
    c = _gemma4_config(row)
    assert row.layer_kinds == tuple(c.layer_types)
    full = [i for i, k in enumerate(c.layer_types) if k == "full_attention"]
    per_layer = {int(i): v for i, v in c.to_dict()["per_layer_config"].items()}
    assert sorted(per_layer) == full
    assert all(v == {"head_dim": row.global_d_head, "num_key_value_heads": row.global_kv_heads}
               for v in per_layer.values())
    p = c.rope_parameters
    assert p["full_attention"] == {"rope_type": row.scaling, "rope_theta": row.rope_base, **row.scaling_params}
    assert p["sliding_attention"] == {"rope_type": "default", "rope_theta": row.rope_local_base}
    assert row.global_rotation == (round(row.scaling_params["partial_rotary_factor"] * row.global_d_head),
                                   row.global_d_head)
    # bytes: the sliding layers hold at most the window of 16 x 256 keys and values, the full ones every token of 4 x 512
    T = 131072
    n_full = len(full)
    expected = 2 * ((row.n_layers - n_full) * 2 * row.n_kv_heads * row.d_head * min(T, row.window)
                    + n_full * 2 * row.global_kv_heads * row.global_d_head * T)
    assert family_kv_plan(row).bytes(T) == config_kv_plan(c.to_dict()).bytes(T) == expected


@v5_only
def test_gemma4_row_proportional_frequencies_equal_transformers() -> None:
    from transformers.models.gemma4.modeling_gemma4 import Gemma4TextRotaryEmbedding

    row = MF.family("Gemma 4")
    module = Gemma4TextRotaryEmbedding(_gemma4_config(row))
    ours, af = RopeScaling("proportional", rotated_fraction=row.scaling_params["partial_rotary_factor"]).frequencies(
        row.global_d_head, row.rope_base)
    torch.testing.assert_close(ours.double(), module.full_attention_inv_freq.double(), rtol=1e-6, atol=0)
    assert af == float(module.full_attention_attention_scaling) == 1.0
    assert int((ours > 0).sum()) == row.global_rotation[0] // 2  # the turning pairs


@v5_only
def test_olmo3_row_yarn_on_the_full_layers_only() -> None:
    row = MF.family("OLMo 3")
    p = dict(row.scaling_params)
    c = _class("Olmo3Config")(
        num_hidden_layers=row.n_layers, num_attention_heads=row.n_heads, num_key_value_heads=row.n_kv_heads,
        hidden_size=row.n_heads * row.d_head, sliding_window=row.window, max_position_embeddings=row.max_len,
        rope_theta=row.rope_base, rope_scaling={"rope_type": "yarn", "factor": row.scaling_factor, **p})
    assert row.layer_kinds == tuple(c.layer_types)
    assert c.rope_parameters["sliding_attention"] == {"rope_type": "default", "rope_theta": row.rope_local_base}
    full = c.rope_parameters["full_attention"]
    assert full["rope_type"] == row.scaling and full["factor"] == row.scaling_factor
    assert {k: full[k] for k in p} == p
    hf_inv, hf_af = rope_init_function("yarn")(c, "cpu", layer_type="full_attention")
    ours, af = RopeScaling("yarn", row.scaling_factor, original_max_len=p["original_max_position_embeddings"],
                           beta_fast=p["beta_fast"], beta_slow=p["beta_slow"],
                           attention_factor=p["attention_factor"]).frequencies(row.d_head, row.rope_base)
    torch.testing.assert_close(ours, hf_inv.float(), rtol=1e-6, atol=0)
    assert math.isclose(af, hf_af, rel_tol=1e-12) and math.isclose(af, 0.1 * math.log(8) + 1, rel_tol=1e-12)


@v5_only
def test_glm45_row_is_the_class_defaults_but_its_base() -> None:
    row, c = MF.family("GLM-4.5"), _class("Glm4MoeConfig")()
    assert (row.n_layers, row.n_heads, row.n_kv_heads, row.max_len) == (
        c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, c.max_position_embeddings)
    # the class has no head_dim: its rotary module takes hidden_size // heads = 42, not the release's 128
    assert "head_dim" not in c.to_dict() and c.hidden_size // c.num_attention_heads == 42 != row.d_head
    assert c.rope_parameters["partial_rotary_factor"] == row.partial_rotary
    assert rope_theta(c) == 10000.0 != row.rope_base  # the release's 1,000,000 is not the class default


@v5_only
def test_full_layer_frequencies_are_transformers_rotary_modules() -> None:
    """A row's full layers' frequencies (the wavelengths page 12 prints) against transformers' own rotary modules,
    built from the row's values: Qwen3-Next's ladder over its 64 rotated channels, Gemma 4's proportional one."""
    from transformers.models.gemma4.modeling_gemma4 import Gemma4TextRotaryEmbedding
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextRotaryEmbedding

    row = MF.family("Qwen3-Next")
    c = _class("Qwen3NextConfig")(num_hidden_layers=4, head_dim=row.d_head, rope_parameters={
        "rope_type": "default", "rope_theta": row.rope_base, "partial_rotary_factor": row.partial_rotary})
    torch.testing.assert_close(row.full_layer_frequencies().double(), Qwen3NextRotaryEmbedding(c).inv_freq.double(),
                               rtol=1e-6, atol=0)
    gemma = MF.family("Gemma 4")
    module = Gemma4TextRotaryEmbedding(_gemma4_config(gemma))
    torch.testing.assert_close(gemma.full_layer_frequencies().double(), module.full_attention_inv_freq.double(),
                               rtol=1e-6, atol=0)
