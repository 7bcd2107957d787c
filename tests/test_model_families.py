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
and for every row: its citation keys exist in book/references.bib, it names its sources.
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
pytestmark = pytest.mark.oracle

BIB = Path(__file__).resolve().parents[1] / "book" / "references.bib"


def _d_head(cfg) -> int:
    return getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads


def test_gpt2_row() -> None:
    row, c = MF.family("GPT-2"), transformers.GPT2Config()
    assert (row.scheme, row.original_len, row.max_len) == ("learned", c.n_positions, c.n_positions)
    assert (row.n_layers, row.n_heads, row.n_kv_heads, row.d_head) == (c.n_layer, c.n_head, c.n_head, c.n_embd // c.n_head)


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


def test_qwen2_yarn_row_through_hf_rope_init() -> None:
    row = MF.family("Qwen2")
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
        cells = MF.positional_summary(row)
        assert cells["family"] == row.name
    table = MF.family_table_markdown()
    assert table.count("\n") == len(MF.MODEL_FAMILIES) + 1
    for family in ("GPT-2", "BERT", "T5", "LLaMA 1", "Llama 2", "Llama 3", "Mistral", "Qwen", "Gemma", "BLOOM", "MPT",
                   "Swin"):
        assert f"| {family} |" in table
    assert "{cite:p}`touvron2023llama`" in MF.family_table_markdown(cite=True)


def test_family_lookup() -> None:
    assert MF.family("mistral").checkpoint == "Mistral-7B-v0.1"
    with pytest.raises(ValueError, match="unknown model family 'Falcon'; valid names are GPT-2"):
        MF.family("Falcon")
