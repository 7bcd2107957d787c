"""Model families and their positional schemes, one row per family, each with its sources.

Every number is the released model's (the paper or the model's published config), for the
representative checkpoint named in the row. Where Hugging Face transformers' config class
carries the value as its default, tests/test_model_families.py checks the row against it; the
row's `hf_check` says what is checked and how, or why nothing is.

The attention shape (layers, query heads, KV heads, d_head) feeds the KV-cache calculator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from mlbook.transformer.positional import alibi_slopes

__all__ = ["SCHEMES", "ModelFamily", "MODEL_FAMILIES", "family", "positional_summary", "family_table_markdown"]

SCHEMES: tuple[str, ...] = ("learned", "t5", "rope", "alibi", "swin")


@dataclass(frozen=True)
class ModelFamily:
    """One family's positional scheme and parameters, for one representative checkpoint."""

    name: str  # the family as the book's table names it
    checkpoint: str  # the checkpoint whose numbers the row gives
    year: int
    scheme: str  # one of SCHEMES
    original_len: int | None  # context length the model was (pre)trained at, tokens
    max_len: int | None  # longest context the release supports (after any extension), tokens
    n_layers: int
    n_heads: int  # query heads
    n_kv_heads: int  # key/value heads (= n_heads: multi-head; fewer: grouped-query; 1: multi-query)
    d_head: int
    rope_base: float | None = None
    rope_pairing: str | None = None  # "half" (rotate_half layout) or "interleaved", as released on the HF hub
    scaling: str = "none"  # context extension: "none", "llama3", "yarn", "dynamic" (NTK at inference)
    scaling_factor: float | None = None
    scaling_params: dict[str, Any] = field(default_factory=dict)
    num_buckets: int | None = None  # T5
    max_distance: int | None = None  # T5
    alibi_bias_max: float | None = None  # ALiBi: slopes 2^(-alibi_bias_max * h / H) for power-of-two H
    window: int | None = None  # Swin: attention window (w x w patches); Mistral: sliding-window length
    sources: tuple[str, ...] = ()  # citation keys in book/references.bib
    urls: tuple[str, ...] = ()  # the paper and the released config
    hf_check: str = ""  # what tests/test_model_families.py checks against transformers, or why nothing
    notes: str = ""

    @property
    def slopes(self) -> torch.Tensor | None:
        """ALiBi slopes (H,) from `alibi_slopes` (the paper's rule; MPT's alibi_bias_max=8 gives the same)."""
        return alibi_slopes(self.n_heads) if self.scheme == "alibi" else None


MODEL_FAMILIES: tuple[ModelFamily, ...] = (
    ModelFamily(
        "GPT-2", "gpt2 (124M)", 2019, "learned", 1024, 1024, 12, 12, 12, 64,
        sources=("radford2019gpt2",),
        urls=("https://cdn.openai.com/better-language-models/language_models_are_unsupervised_multitask_learners.pdf",
              "https://huggingface.co/openai-community/gpt2/blob/main/config.json"),
        hf_check="GPT2Config() defaults are GPT-2 small: n_positions, n_layer, n_head, n_embd / n_head",
        notes="a (1024, d) table added to the token embeddings; no row past 1023",
    ),
    ModelFamily(
        "BERT", "bert-base-uncased", 2019, "learned", 512, 512, 12, 12, 12, 64,
        sources=("devlin2019bert",),
        urls=("https://arxiv.org/abs/1810.04805", "https://huggingface.co/google-bert/bert-base-uncased/blob/main/config.json"),
        hf_check="BertConfig() defaults are BERT-base: max_position_embeddings, position_embedding_type='absolute', "
                 "layers, heads, hidden / heads",
        notes="learned positions plus a learned segment embedding; pretrained mostly at 128 tokens, the last 10% at 512",
    ),
    ModelFamily(
        "T5", "t5-small", 2020, "t5", 512, None, 6, 8, 8, 64, num_buckets=32, max_distance=128,
        sources=("raffel2020t5",),
        urls=("https://arxiv.org/abs/1910.10683", "https://huggingface.co/google-t5/t5-small/blob/main/config.json"),
        hf_check="T5Config() defaults are t5-small: relative_attention_num_buckets, relative_attention_max_distance, "
                 "num_layers, num_heads, d_kv",
        notes="one (32, H) table per stack shared by its layers; the encoder splits the buckets 16 + 16 by direction, "
              "the decoder uses all 32 for past keys; no hard length limit (pretrained on 512-token inputs)",
    ),
    ModelFamily(
        "LLaMA 1", "LLaMA-7B", 2023, "rope", 2048, 2048, 32, 32, 32, 128, rope_base=10000.0, rope_pairing="half",
        sources=("touvron2023llama", "su2021roformer"),
        urls=("https://arxiv.org/abs/2302.13971", "https://huggingface.co/docs/transformers/model_doc/llama"),
        hf_check="LlamaConfig() defaults are LLaMA-7B: rope_theta, max_position_embeddings, layers, heads, KV heads, "
                 "hidden / heads",
        notes="Meta's reference code rotates interleaved pairs as complex numbers; the Hugging Face conversion permutes "
              "W_q and W_k to the half layout",
    ),
    ModelFamily(
        "Llama 2", "Llama-2-7b", 2023, "rope", 4096, 4096, 32, 32, 32, 128, rope_base=10000.0, rope_pairing="half",
        sources=("touvron2023llama2",),
        urls=("https://arxiv.org/abs/2307.09288", "https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json"),
        hf_check="not checked: no transformers config class defaults to Llama 2 (LlamaConfig's are LLaMA-7B's, 2048)",
        notes="context doubled to 4096 with the same base; the 34B and 70B models use grouped-query attention (8 KV heads)",
    ),
    ModelFamily(
        "Llama 3", "Meta-Llama-3-8B", 2024, "rope", 8192, 8192, 32, 32, 8, 128, rope_base=500000.0,
        rope_pairing="half",
        sources=("dubey2024llama3",),
        urls=("https://arxiv.org/abs/2407.21783", "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json"),
        hf_check="not checked against class defaults (none carries base 500,000)",
        notes="base raised from 10,000 to 500,000 at pretraining; grouped-query attention with 8 KV heads at every size",
    ),
    ModelFamily(
        "Llama 3.1", "Llama-3.1-8B", 2024, "rope", 8192, 131072, 32, 32, 8, 128, rope_base=500000.0,
        rope_pairing="half", scaling="llama3", scaling_factor=8.0,
        scaling_params={"low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        sources=("dubey2024llama3",),
        urls=("https://arxiv.org/abs/2407.21783", "https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json"),
        hf_check="the row's rope_scaling, given to transformers' 'llama3' rope initialiser, yields the same frequencies "
                 "as mlbook's RopeScaling('llama3', ...)",
        notes="128k context by continued pretraining on long documents, with the 'llama3' frequency-band scaling; "
              "its factor (8) divides the slow frequencies and is not the length ratio (131,072 / 8,192 = 16)",
    ),
    ModelFamily(
        "Mistral", "Mistral-7B-v0.1", 2023, "rope", 8192, 8192, 32, 32, 8, 128, rope_base=10000.0,
        rope_pairing="half", window=4096,
        sources=("jiang2023mistral",),
        urls=("https://arxiv.org/abs/2310.06825", "https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json"),
        hf_check="MistralConfig() defaults are Mistral-7B: rope_theta, sliding_window, layers, heads, KV heads, "
                 "hidden / heads (not max_position_embeddings: the class default 131,072 is not the release's)",
        notes="sliding-window attention over 4096 tokens with a rolling cache; later versions (v0.2) raised the base "
              "to 1,000,000 and dropped the window",
    ),
    ModelFamily(
        "Qwen", "Qwen-7B", 2023, "rope", 2048, None, 32, 32, 32, 128, rope_base=10000.0, rope_pairing="half",
        scaling="dynamic",
        sources=("bai2023qwen",),
        urls=("https://arxiv.org/abs/2309.16609", "https://huggingface.co/Qwen/Qwen-7B"),
        hf_check="not checked: Qwen (1) has no config class in transformers (it ships its own code)",
        notes="trained at 2048; longer inputs at inference with dynamic NTK-aware scaling plus LogN attention scaling "
              "and layer-wise window attention, without fine-tuning",
    ),
    ModelFamily(
        "Qwen2", "Qwen2-7B", 2024, "rope", 32768, 131072, 28, 28, 4, 128, rope_base=1000000.0, rope_pairing="half",
        scaling="yarn", scaling_factor=4.0, scaling_params={"original_max_position_embeddings": 32768},
        sources=("yang2024qwen2",),
        urls=("https://arxiv.org/abs/2407.10671", "https://huggingface.co/Qwen/Qwen2-7B-Instruct"),
        hf_check="the row's YaRN scaling, given to transformers' 'yarn' rope initialiser, yields the same frequencies "
                 "and attention factor as mlbook's RopeScaling('yarn', ...); Qwen2Config()'s defaults are not a "
                 "released Qwen2 model, so they are not used",
        notes="base raised from 10,000 to 1,000,000 while the context went from 4,096 to 32,768 late in pretraining; "
              "YaRN (factor 4) with Dual Chunk Attention reaches 131,072",
    ),
    ModelFamily(
        "Gemma", "gemma-7b", 2024, "rope", 8192, 8192, 28, 16, 16, 256, rope_base=10000.0, rope_pairing="half",
        sources=("gemmateam2024gemma",),
        urls=("https://arxiv.org/abs/2403.08295", "https://huggingface.co/google/gemma-7b/blob/main/config.json"),
        hf_check="GemmaConfig() defaults are Gemma 7B: rope_theta, max_position_embeddings, layers, heads, KV heads, "
                 "head_dim",
        notes="multi-head attention at 7B, multi-query (1 KV head) at 2B; d_head 256",
    ),
    ModelFamily(
        "BLOOM", "bloom (176B)", 2022, "alibi", 2048, 2048, 70, 112, 112, 128, alibi_bias_max=8.0,
        sources=("bigscience2022bloom", "press2022alibi"),
        urls=("https://arxiv.org/abs/2211.05100", "https://huggingface.co/bigscience/bloom/blob/main/config.json"),
        hf_check="the 112 slopes equal transformers' BLOOM build_alibi_tensor (112 is not a power of two: 64 slopes "
                 "2^(-h/8) plus 48 interleaved ones); BloomConfig()'s defaults are a tiny test model, not used",
        notes="ALiBi in every layer, no position embedding; an embedding LayerNorm after the token table",
    ),
    ModelFamily(
        "MPT", "mpt-7b", 2023, "alibi", 2048, 65536, 32, 32, 32, 128, alibi_bias_max=8.0,
        sources=("mosaicml2023mpt", "press2022alibi"),
        urls=("https://www.databricks.com/blog/mpt-7b", "https://huggingface.co/mosaicml/mpt-7b/blob/main/config.json"),
        hf_check="MptConfig() defaults carry alibi=True, alibi_bias_max=8 and max_seq_len=2048 as MPT-7B does; the 32 "
                 "slopes equal transformers' build_mpt_alibi_tensor (its other defaults, d_model 2048, are not MPT-7B)",
        notes="the StoryWriter variant was fine-tuned at 65k tokens and generated past 80k, which ALiBi allows",
    ),
    ModelFamily(
        "Swin", "swin-tiny-patch4-window7-224", 2021, "swin", None, None, 12, 3, 3, 32, window=7,
        sources=("liu2021swin",),
        urls=("https://arxiv.org/abs/2103.14030",
              "https://huggingface.co/microsoft/swin-tiny-patch4-window7-224/blob/main/config.json"),
        hf_check="SwinConfig() defaults are Swin-T: window_size, num_heads (3, 6, 12, 24), embed_dim, depths, image_size",
        notes="2-D relative bias: a ((2w-1)^2, H) = (169, H) table per block indexed by (dy, dx) inside a 7 x 7 window; "
              "heads 3, 6, 12, 24 by stage (the row gives stage 1), d_head 32",
    ),
)


def family(name: str) -> ModelFamily:
    """The row named `name` (case-insensitive)."""
    for row in MODEL_FAMILIES:
        if row.name.lower() == str(name).lower():
            return row
    raise ValueError(f"unknown model family {name!r}; valid names are {', '.join(r.name for r in MODEL_FAMILIES)}")


def _fmt_len(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def positional_summary(row: ModelFamily) -> dict[str, str]:
    """The table's cells for one row: scheme, base, scaling, original length, buckets or slopes."""
    scheme = {"learned": "learned absolute", "t5": "T5 relative bias", "rope": "RoPE", "alibi": "ALiBi",
              "swin": "2-D relative bias"}[row.scheme]
    base = f"{row.rope_base:,.0f}" if row.rope_base is not None else "-"
    if row.scaling == "none":
        scaling = "none"
    elif row.scaling_factor is None:
        scaling = {"dynamic": "dynamic NTK (inference)"}.get(row.scaling, row.scaling)
    else:
        scaling = f"{row.scaling}, factor {row.scaling_factor:g}"
        if row.scaling == "llama3":
            scaling += (f" (low {row.scaling_params['low_freq_factor']:g}, "
                        f"high {row.scaling_params['high_freq_factor']:g})")
    if row.scheme == "t5":
        detail = f"{row.num_buckets} buckets, max distance {row.max_distance}"
    elif row.scheme == "alibi":
        s = row.slopes
        assert s is not None
        detail = f"{row.n_heads} slopes, {float(s[0]):.4g} down to {float(s[-1]):.4g}"
    elif row.scheme == "swin":
        detail = f"window {row.window} x {row.window}: {(2 * row.window - 1) ** 2} offsets per head"
    elif row.window is not None:
        detail = f"sliding window {row.window:,}"
    else:
        detail = "-"
    kv = "MHA" if row.n_kv_heads == row.n_heads else ("MQA" if row.n_kv_heads == 1 else f"GQA ({row.n_kv_heads} KV)")
    return {
        "family": row.name, "checkpoint": row.checkpoint, "scheme": scheme, "base": base, "scaling": scaling,
        "original length": _fmt_len(row.original_len), "max length": _fmt_len(row.max_len),
        "buckets / slopes / window": detail, "attention": kv,
        "sources": ", ".join(f"{{cite:p}}`{k}`" for k in row.sources),
    }


def family_table_markdown(rows: tuple[ModelFamily, ...] = MODEL_FAMILIES, *, cite: bool = False) -> str:
    """A Markdown table of `positional_summary` for each row (citations as MyST roles if cite=True)."""
    cells = [positional_summary(r) for r in rows]
    keys = [k for k in cells[0] if cite or k != "sources"]
    lines = ["| " + " | ".join(keys) + " |", "|" + "|".join("---" for _ in keys) + "|"]
    lines += ["| " + " | ".join(c[k] for k in keys) + " |" for c in cells]
    return "\n".join(lines)
