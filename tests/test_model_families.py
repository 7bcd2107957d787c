"""Tests for mlbook.data.model_families: rows against Hugging Face transformers 4.57.6, no download.

What is checked, per row (each row's `hf_check` says the same in words):
  GPT-2, BERT, T5, LLaMA 1, Mistral, Gemma, Swin   the config class's defaults ARE that checkpoint:
                     the row's positional parameters and attention shape equal the defaults
  MPT                MptConfig's defaults carry MPT-7B's ALiBi settings and length (not its width):
                     only those are compared; its 32 slopes equal HF's build_mpt_alibi_tensor
  BLOOM              BloomConfig's defaults are a test model: the 112 slopes are compared with
                     HF's build_alibi_tensor instead
  Llama 3.1, Qwen2   the row's scaling, turned into an HF rope_scaling dict, gives the same
                     frequencies (and attention factor) in HF's rope initialiser as in mlbook
  Llama 2, Llama 3, Qwen   no class carries their values by default: not checked against HF
  2024-2026 rows     Llama 4, Gemma 2, DeepSeek-V3, Phi-3, SmolLM3, ModernBERT, Mixtral, gpt-oss,
                     Gemma 3: the fields their config class carries as defaults (each row's
                     hf_check names them); Qwen2.5, Qwen3: YaRN through HF's rope initialiser
and for every row: its citation keys exist in book/references.bib, it names its sources, and its
per-layer fields are consistent. Where src/mlbook/data/configs/ ships a row's config.json, the
row must agree with it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from mlbook.data import model_families as MF
from mlbook.transformer.positional import alibi_slopes
from mlbook.transformer.rope_scaling import RopeScaling

transformers = pytest.importorskip("transformers")
from hf_versions import hf4_only  # noqa: E402

pytestmark = pytest.mark.oracle

BIB = Path(__file__).resolve().parents[1] / "book" / "references.bib"


def _d_head(cfg) -> int:
    return getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads


def test_gpt2_row() -> None:
    row, c = MF.family("GPT-2"), transformers.GPT2Config()
    assert (row.scheme, row.original_len, row.max_len) == ("learned", c.n_positions, c.n_positions)
    assert (row.n_layers, row.n_heads, row.n_kv_heads, row.d_head) == (c.n_layer, c.n_head, c.n_head, c.n_embd // c.n_head)


@hf4_only("BertConfig.position_embedding_type, which transformers 5 removed")
def test_bert_row() -> None:
    row, c = MF.family("BERT"), transformers.BertConfig()
    assert c.position_embedding_type == "absolute" and row.scheme == "learned"
    assert row.original_len == row.max_len == c.max_position_embeddings
    assert (row.n_layers, row.n_heads, row.d_head) == (c.num_hidden_layers, c.num_attention_heads,
                                                       c.hidden_size // c.num_attention_heads)


def test_t5_row() -> None:
    row, c = MF.family("T5"), transformers.T5Config()
    assert (row.num_buckets, row.max_distance) == (c.relative_attention_num_buckets, c.relative_attention_max_distance)
    assert (row.n_layers, row.n_heads, row.d_head) == (c.num_layers, c.num_heads, c.d_kv)


@pytest.mark.parametrize("name,cls", [("LLaMA 1", "LlamaConfig"), ("Mistral", "MistralConfig"), ("Gemma", "GemmaConfig")])
@hf4_only("the class defaults as 4.x's attributes; transformers 5 keeps the base in rope_parameters")
def test_rope_rows_whose_class_defaults_are_the_checkpoint(name: str, cls: str) -> None:
    row, c = MF.family(name), getattr(transformers, cls)()
    assert row.scheme == "rope" and row.rope_base == c.rope_theta
    assert (row.n_layers, row.n_heads, row.n_kv_heads, row.d_head) == (
        c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, _d_head(c))
    if name == "Mistral":
        assert row.window == c.sliding_window  # max_position_embeddings' default (131,072) is not the release's
    else:
        assert row.original_len == c.max_position_embeddings


def test_swin_row() -> None:
    row, c = MF.family("Swin"), transformers.SwinConfig()
    assert row.window == c.window_size and row.n_heads == c.num_heads[0]
    assert row.d_head == c.embed_dim // c.num_heads[0] and row.n_layers == sum(c.depths)
    assert "(169, H)" in row.notes and (2 * c.window_size - 1) ** 2 == 169


def test_mpt_row_and_slopes() -> None:
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    row, c = MF.family("MPT"), transformers.MptConfig()
    assert c.attn_config.alibi and row.scheme == "alibi"
    assert row.alibi_bias_max == c.attn_config.alibi_bias_max and row.original_len == c.max_seq_len
    assert row.max_len == c.max_seq_len  # mpt-7b's own length; 65,536 is mpt-7b-storywriter's
    hf = build_mpt_alibi_tensor(row.n_heads, 4, alibi_bias_max=int(row.alibi_bias_max))  # (H, 1, T): -m_h (T-1-j)
    hf_slopes = hf[:, 0, -1] - hf[:, 0, -2]
    torch.testing.assert_close(row.slopes, hf_slopes.float(), rtol=1e-6, atol=0)


def test_bloom_slopes_for_112_heads() -> None:
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    row = MF.family("BLOOM")
    assert row.n_heads == 112 and row.n_heads & (row.n_heads - 1) != 0  # not a power of two
    hf = build_alibi_tensor(torch.ones(1, 3), row.n_heads, torch.float32)  # (H, 1, T): m_h * j
    torch.testing.assert_close(row.slopes, hf[:, 0, 1], rtol=1e-6, atol=0)
    assert torch.equal(row.slopes, alibi_slopes(112))


def _hf_rope(config) -> tuple[torch.Tensor, float]:
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    kind = config.rope_scaling["rope_type"]
    return ROPE_INIT_FUNCTIONS[kind](config, "cpu")


def test_llama31_scaling_row_through_hf_rope_init() -> None:
    row = MF.family("Llama 3.1")
    p = row.scaling_params
    cfg = transformers.LlamaConfig(
        hidden_size=row.n_heads * row.d_head, num_attention_heads=row.n_heads, num_key_value_heads=row.n_kv_heads,
        rope_theta=row.rope_base, max_position_embeddings=row.max_len,
        rope_scaling={"rope_type": "llama3", "factor": row.scaling_factor, **p},
    )
    hf_inv, hf_af = _hf_rope(cfg)
    ours, af = RopeScaling("llama3", row.scaling_factor, original_max_len=p["original_max_position_embeddings"],
                           low_freq_factor=p["low_freq_factor"], high_freq_factor=p["high_freq_factor"]
                           ).frequencies(row.d_head, row.rope_base)
    torch.testing.assert_close(ours, hf_inv.float(), rtol=1e-6, atol=0)
    assert af == hf_af == 1.0
    # the factor is not the length ratio: 8 x 8,192 = 65,536, while the release serves 131,072 (16x)
    assert row.max_len == 2 * row.scaling_factor * p["original_max_position_embeddings"]


@pytest.mark.parametrize("name", ["Qwen2", "Qwen2.5", "Qwen3"])
def test_qwen_yarn_rows_through_hf_rope_init(name: str) -> None:
    row = MF.family(name)
    L = row.scaling_params["original_max_position_embeddings"]
    cfg = transformers.Qwen2Config(
        hidden_size=row.n_heads * row.d_head, num_attention_heads=row.n_heads, num_key_value_heads=row.n_kv_heads,
        rope_theta=row.rope_base, max_position_embeddings=row.max_len,
        rope_scaling={"rope_type": "yarn", "factor": row.scaling_factor, "original_max_position_embeddings": L},
    )
    hf_inv, hf_af = _hf_rope(cfg)
    ours, af = RopeScaling("yarn", row.scaling_factor, original_max_len=L).frequencies(row.d_head, row.rope_base)
    torch.testing.assert_close(ours, hf_inv.float(), rtol=1e-6, atol=0)
    assert math.isclose(af, hf_af, rel_tol=1e-12) and af > 1
    assert row.original_len == L and row.max_len == row.scaling_factor * L


def test_every_row_is_sourced_and_well_formed() -> None:
    keys = set(re.findall(r"@\w+\{([^,]+),", BIB.read_text()))
    names = [r.name for r in MF.MODEL_FAMILIES]
    assert len(names) == len(set(names))
    for row in MF.MODEL_FAMILIES:
        assert row.scheme in MF.SCHEMES
        assert row.sources and set(row.sources) <= keys, (row.name, set(row.sources) - keys)
        assert row.urls and all(u.startswith("https://") for u in row.urls)
        assert row.hf_check, row.name
        assert (row.rope_base is not None) == (row.scheme == "rope")
        assert (row.num_buckets is not None) == (row.scheme == "t5")
        assert row.n_heads % row.n_kv_heads == 0
        assert len(row.layer_kinds) == row.n_layers
        assert all(0 <= i < row.n_layers for i in row.nope_layers)
        if "sliding_attention" in row.layer_kinds:
            assert row.window is not None
        assert ("chunked_attention" in row.layer_kinds) == (row.chunk is not None)
        assert (row.kv_lora_rank is None) == (row.qk_rope_head_dim is None)
        assert row.partial_rotary is None or 0 < row.partial_rotary < 1
        for name in row.unverified:  # a field left unverified is empty, and said so in the notes
            assert getattr(row, name) is None and "not" in row.notes
        cells = MF.positional_summary(row)
        assert cells["family"] == row.name
    table = MF.family_table_markdown()
    assert table.count("\n") == len(MF.MODEL_FAMILIES) + 1
    for family in ("GPT-2", "BERT", "T5", "LLaMA 1", "Llama 2", "Llama 3", "Mistral", "Qwen", "Gemma", "BLOOM", "MPT",
                   "Swin", "Llama 4", "Gemma 2", "Gemma 3", "Qwen2.5", "Qwen3", "Mixtral", "DeepSeek-V3", "Phi-3",
                   "Phi-4-mini", "gpt-oss", "SmolLM3", "ModernBERT"):
        assert f"| {family} |" in table
    assert "{cite:p}`touvron2023llama`" in MF.family_table_markdown(cite=True)


def test_family_lookup() -> None:
    assert MF.family("mistral").checkpoint == "Mistral-7B-v0.1"
    with pytest.raises(ValueError, match="unknown model family 'Falcon'; valid names are GPT-2"):
        MF.family("Falcon")


# ---------------------------------------------------------------------------
# 2024-2026 rows against the config classes whose defaults carry their values
# ---------------------------------------------------------------------------


def _shape(c) -> tuple[int, int, int, int]:
    return c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, _d_head(c)


@hf4_only("the class defaults as 4.x's attributes; transformers 5 keeps the base in rope_parameters")
def test_llama4_row_is_scouts_config() -> None:
    row, c = MF.family("Llama 4"), transformers.Llama4TextConfig()
    assert (row.n_layers, row.n_heads, row.n_kv_heads, row.d_head) == _shape(c)
    assert (row.rope_base, row.chunk) == (c.rope_theta, c.attention_chunk_size)
    assert row.temperature_tuning == {"floor_scale": c.floor_scale, "attn_scale": c.attn_scale}
    assert row.nope_layers == tuple(i for i, r in enumerate(c.no_rope_layers) if r == 0)  # 0 = no rope
    assert row.layer_kinds == tuple(c.layer_types)
    assert row.rotary_layers == tuple(i for i, r in enumerate(c.no_rope_layers) if r == 1)


@hf4_only("the class defaults as 4.x's attributes; transformers 5 keeps the base in rope_parameters")
def test_gemma2_row_is_the_class_defaults() -> None:
    row, c = MF.family("Gemma 2"), transformers.Gemma2Config()
    assert (row.n_layers, row.n_heads, row.n_kv_heads, row.d_head) == _shape(c)
    assert (row.rope_base, row.window, row.max_len) == (c.rope_theta, c.sliding_window, c.max_position_embeddings)
    assert row.layer_kinds == tuple(c.layer_types)


@hf4_only("Gemma3TextConfig.rope_theta and rope_local_base_freq; transformers 5 keeps them per layer type in rope_parameters")
def test_gemma3_row_bases_and_pattern() -> None:
    row = MF.family("Gemma 3")
    c = transformers.Gemma3TextConfig(num_hidden_layers=row.n_layers, sliding_window=row.window)
    assert (row.rope_base, row.rope_local_base) == (c.rope_theta, c.rope_local_base_freq)
    assert row.layer_kinds == tuple(c.layer_types)


@hf4_only("the class defaults as 4.x's attributes; transformers 5 keeps the base in rope_parameters")
def test_deepseek_v3_row_is_the_class_defaults() -> None:
    row, c = MF.family("DeepSeek-V3"), transformers.DeepseekV3Config()
    assert (row.n_layers, row.n_heads, row.rope_base) == (c.num_hidden_layers, c.num_attention_heads, c.rope_theta)
    assert (row.kv_lora_rank, row.qk_rope_head_dim, row.qk_nope_head_dim) == (
        c.kv_lora_rank, c.qk_rope_head_dim, c.qk_nope_head_dim)
    assert row.d_head == c.qk_nope_head_dim + c.qk_rope_head_dim
    assert row.original_len == c.max_position_embeddings == row.scaling_params["original_max_position_embeddings"]


def test_deepseek_v3_yarn_row_through_hf_rope_init() -> None:
    row = MF.family("DeepSeek-V3")
    cfg = transformers.DeepseekV3Config(rope_scaling={"rope_type": "yarn", "factor": row.scaling_factor,
                                                      **row.scaling_params}, max_position_embeddings=row.max_len)
    hf_inv, hf_af = _hf_rope(cfg)
    assert hf_inv.numel() == row.qk_rope_head_dim // 2  # only the decoupled rotary part rotates
    assert hf_af == 1.0  # mscale == mscale_all_dim: the YaRN temperature cancels (DeepSeek applies it to the softmax)


@hf4_only("the class defaults as 4.x's attributes; transformers 5 keeps the base in rope_parameters")
def test_phi_rows() -> None:
    row, c = MF.family("Phi-3"), transformers.Phi3Config()
    assert (row.n_layers, row.n_heads, row.n_kv_heads, row.d_head) == _shape(c)
    assert (row.rope_base, row.original_len) == (c.rope_theta, c.original_max_position_embeddings)
    mini = MF.family("Phi-4-mini")
    assert round(mini.partial_rotary * mini.d_head) == 96


@hf4_only("the class defaults as 4.x's attributes; transformers 5 keeps the base in rope_parameters")
def test_smollm3_row_nope_layers() -> None:
    row, c = MF.family("SmolLM3"), transformers.SmolLM3Config()
    assert (row.n_layers, row.n_heads, row.n_kv_heads, row.d_head) == _shape(c)
    assert row.nope_layers == tuple(i for i, r in enumerate(c.no_rope_layers) if r == 0)
    assert row.rope_base != c.rope_theta  # the release's 5,000,000 is not the class default


@hf4_only("ModernBertConfig.global_rope_theta and local_rope_theta; transformers 5 keeps them per layer type in rope_parameters")
def test_modernbert_row_is_the_class_defaults() -> None:
    row, c = MF.family("ModernBERT"), transformers.ModernBertConfig()
    assert (row.n_layers, row.n_heads, row.d_head) == (c.num_hidden_layers, c.num_attention_heads,
                                                       c.hidden_size // c.num_attention_heads)
    assert (row.rope_base, row.rope_local_base, row.window) == (c.global_rope_theta, c.local_rope_theta,
                                                                c.local_attention)
    assert row.max_len == c.max_position_embeddings and row.encoder
    # transformers' ModernBERT: layer i is global when i % global_attn_every_n_layers == 0
    assert row.layer_kinds == tuple("full_attention" if i % c.global_attn_every_n_layers == 0
                                    else "sliding_attention" for i in range(c.num_hidden_layers))


@hf4_only("config.rope_theta and rope_scaling as 4.x keeps them")
def test_mixtral_and_gpt_oss_rows() -> None:
    row, c = MF.family("Mixtral"), transformers.MixtralConfig()
    assert (row.n_layers, row.n_heads, row.n_kv_heads, row.d_head) == _shape(c)
    assert row.rope_base == c.rope_theta and c.sliding_window is None and row.window is None
    row, c = MF.family("gpt-oss"), transformers.GptOssConfig(num_hidden_layers=24)
    assert (row.n_layers, row.n_heads, row.n_kv_heads, row.d_head) == _shape(c)
    assert (row.rope_base, row.window, row.max_len) == (c.rope_theta, c.sliding_window, c.max_position_embeddings)
    assert row.layer_kinds == tuple(c.layer_types)
    assert {"rope_type": "yarn", "factor": row.scaling_factor, **row.scaling_params} == c.rope_scaling


# ---------------------------------------------------------------------------
# Shipped config.json extracts (src/mlbook/data/configs/), where present
# ---------------------------------------------------------------------------

CONFIGS = Path(MF.__file__).resolve().parent / "configs"


def _shipped() -> list[Path]:
    return sorted(CONFIGS.glob("*.json")) if CONFIGS.is_dir() else []


def _row_for(path: Path) -> MF.ModelFamily | None:
    stem = path.stem.lower().replace("_", "-")
    for row in MF.MODEL_FAMILIES:
        if row.checkpoint.lower() in stem or row.checkpoint.lower().startswith(stem):
            return row
    return None


@pytest.mark.skipif(not _shipped(), reason="no config.json extracts shipped under src/mlbook/data/configs/")
@pytest.mark.parametrize("path", _shipped(), ids=lambda p: p.stem)
def test_rows_agree_with_the_shipped_configs(path: Path) -> None:
    import json

    from mlbook.analysis.production import config_kv_plan, config_layer_types, family_kv_plan

    raw = json.loads(path.read_text())
    row = _row_for(path)
    if row is None:
        pytest.skip(f"{path.name}: no row of MODEL_FAMILIES has this checkpoint")
    c = raw.get("text_config", raw)
    c = c.get("config", c) if "num_hidden_layers" not in c else c  # an extract may wrap the config
    assert c["num_hidden_layers"] == row.n_layers
    assert c["num_attention_heads"] == row.n_heads
    theta = c.get("rope_theta", (c.get("rope_parameters") or {}).get("rope_theta"))
    if row.scheme == "rope" and theta is not None:
        assert float(theta) == row.rope_base
    scaling = c.get("rope_scaling") or {}
    if scaling and row.scaling_in_config:  # every scaling key both give agrees
        kind = scaling.get("rope_type", scaling.get("type"))
        assert kind == row.scaling and float(scaling["factor"]) == row.scaling_factor
        for key in set(scaling) & set(row.scaling_params):
            assert scaling[key] == row.scaling_params[key], key
    if row.encoder:
        return
    assert config_layer_types(c) == row.layer_kinds
    assert config_kv_plan(c).bytes(131072) == family_kv_plan(row).bytes(131072)
