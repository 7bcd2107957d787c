"""Model families and their positional schemes, one row per family, each with its sources.

Every number is the released model's (the paper or the model's published `config.json`), for the
representative checkpoint named in the row. Where Hugging Face transformers' config class
carries the value as its default, tests/test_model_families.py checks the row against it; the
row's `hf_check` says what is checked and how, or why nothing is.

The 2024-2026 rows (Llama 4, Gemma 2 and 3, Qwen2.5, Qwen3, Mixtral, DeepSeek-V3, Phi-3, Phi-4,
gpt-oss, SmolLM3, ModernBERT) give, besides the base and the scaling, what a config says about
each layer: its kind (`layer_types`, Hugging Face's names "full_attention", "sliding_attention",
"chunked_attention"), the layers that do not rotate (`nope_layers`), the local layers' base,
partial rotation and, for multi-head latent attention, the latent width. The Hugging Face hub is
out of reach from the machine this table was written on: every value was read from a copy of the
checkpoint's `config.json` found in public repositories (the row's `urls` name the original on the
hub), cross-checked against the paper, Hugging Face's modelling code or, where it is the same
checkpoint, the config class's defaults. A value that could not be read is None and the row's
`unverified` names it.

The attention shape (layers, query heads, KV heads, d_head) and the per-layer kinds feed the
KV-cache calculator in `mlbook.analysis.production`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from mlbook.transformer.hf import every_nth
from mlbook.transformer.positional import alibi_slopes, frequency_ladder
from mlbook.transformer.rope_scaling import RopeScaling

__all__ = [
    "SCHEMES", "ModelFamily", "MODEL_FAMILIES", "every_nth", "family", "positional_summary", "family_table_markdown",
]

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
    window: int | None = None  # Swin: attention window (w x w patches); RoPE models: the sliding layers' window
    layer_types: tuple[str, ...] | None = None  # per layer, HF names; None: every layer full (or sliding if window)
    chunk: int | None = None  # chunked local attention (Llama 4 attention_chunk_size): a query sees its own chunk
    rope_local_base: float | None = None  # base of the sliding layers (Gemma 3 rope_local_base_freq, ModernBERT)
    partial_rotary: float | None = None  # fraction of d_head rotated (HF partial_rotary_factor); None: all of it
    nope_layers: tuple[int, ...] = ()  # layers that rotate nothing (HF no_rope_layers == 0; Llama 4, SmolLM3)
    temperature_tuning: dict[str, float] = field(default_factory=dict)  # Llama 4's NoPE-layer query scaling
    kv_lora_rank: int | None = None  # multi-head latent attention: the cached latent's width per token
    qk_rope_head_dim: int | None = None  # MLA: width of the decoupled rotary key, shared by the heads, cached
    qk_nope_head_dim: int | None = None  # MLA: per-head query/key width without rotation
    global_d_head: int | None = None  # the full layers' own head width where it differs (Gemma 4 global_head_dim)
    global_kv_heads: int | None = None  # the full layers' own KV heads (Gemma 4 num_global_key_value_heads)
    linear_attention: dict[str, int] = field(default_factory=dict)  # Gated DeltaNet widths of "linear_attention"
    # layers (HF names: linear_num_value_heads, linear_num_key_heads, linear_key_head_dim, linear_value_head_dim,
    # linear_conv_kernel_dim); they hold a fixed-size state and rotate nothing
    mrope_section: tuple[int, ...] = ()  # multimodal RoPE: rotated pairs given to time, height, width (Qwen3.5)
    mrope_interleaved: bool = False  # M-RoPE's axes take pairs in turn (Qwen3-VL, Qwen3.5) rather than in blocks
    encoder: bool = False  # bidirectional encoder (BERT, ModernBERT, Swin): no KV cache at inference
    scaling_in_config: bool = True  # False: the model card has the user add the scaling (Qwen's YaRN)
    unverified: tuple[str, ...] = ()  # fields left None because no source could be read
    sources: tuple[str, ...] = ()  # citation keys in book/references.bib
    urls: tuple[str, ...] = ()  # the paper and the released config
    hf_check: str = ""  # what tests/test_model_families.py checks against transformers, or why nothing
    notes: str = ""

    @property
    def layer_kinds(self) -> tuple[str, ...]:
        """Each layer's attention kind, Hugging Face's names: `layer_types` when the row gives them;
        otherwise "sliding_attention" everywhere for a RoPE row with a window (Mistral-7B-v0.1) and
        "full_attention" everywhere else."""
        if self.layer_types is not None:
            return self.layer_types
        kind = "sliding_attention" if self.window is not None and self.scheme == "rope" else "full_attention"
        return (kind,) * self.n_layers

    @property
    def rotary_layers(self) -> tuple[int, ...]:
        """The layers that rotate q and k: every attention layer of a RoPE row but its `nope_layers`
        (linear-attention layers have no q.k score to rotate)."""
        if self.scheme != "rope":
            return ()
        kinds = self.layer_kinds
        return tuple(i for i in range(self.n_layers) if i not in set(self.nope_layers)
                     and kinds[i] != "linear_attention")

    @property
    def global_rotation(self) -> tuple[int, int]:
        """(channels rotated, head width) of the full-attention layers' query and key: the decoupled rotary
        key of latent attention, `partial_rotary` of d_head, or Gemma 4's proportional quarter of its
        512-wide global head."""
        width = self.global_d_head or self.d_head
        if self.qk_rope_head_dim is not None:
            return self.qk_rope_head_dim, self.d_head
        fraction = self.scaling_params.get("partial_rotary_factor") if self.scaling == "proportional" else None
        fraction = fraction if fraction is not None else (self.partial_rotary or 1.0)
        return round(fraction * width), width

    def full_layer_frequencies(self) -> torch.Tensor:
        """The full-attention layers' frequencies per rotary pair before any context scaling, as the release
        rotates them: a ladder over the rotated channels (base^(-2i/r), r = `global_rotation`'s), or for
        Gemma 4's proportional layers the whole head's ladder with the pairs past the rotated share at 0."""
        if self.scheme != "rope" or self.rope_base is None:
            raise ValueError(f"{self.name} rotates nothing: its scheme is {self.scheme!r}")
        rotated, width = self.global_rotation
        if self.scaling == "proportional":
            fraction = self.scaling_params["partial_rotary_factor"]
            return RopeScaling("proportional", rotated_fraction=fraction).frequencies(width, self.rope_base)[0]
        return frequency_ladder(rotated, self.rope_base)

    @property
    def slopes(self) -> torch.Tensor | None:
        """ALiBi slopes (H,) from `alibi_slopes` (the paper's rule; MPT's alibi_bias_max=8 gives the same)."""
        return alibi_slopes(self.n_heads) if self.scheme == "alibi" else None


def _every_nth_index(n_layers: int, n: int) -> tuple[int, ...]:
    """Indices of layers n-1, 2n-1, ... (`every_nth`'s rule): the NoPE layers of an interval-n hybrid."""
    return tuple(i for i, hit in enumerate(every_nth(n_layers, n, True, False)) if hit)


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
        "BERT", "bert-base-uncased", 2019, "learned", 512, 512, 12, 12, 12, 64, encoder=True,
        sources=("devlin2019bert",),
        urls=("https://arxiv.org/abs/1810.04805", "https://huggingface.co/google-bert/bert-base-uncased/blob/main/config.json"),
        hf_check="BertConfig() defaults are BERT-base: max_position_embeddings, position_embedding_type='absolute', "
                 "layers, heads, hidden / heads",
        notes="learned positions plus a learned segment embedding; pretrained mostly at 128 tokens, the last 10% at 512",
    ),
    ModelFamily(
        "ModernBERT", "ModernBERT-base", 2024, "rope", 1024, 8192, 22, 12, 12, 64, rope_base=160000.0,
        rope_pairing="half", window=128, layer_types=every_nth(22, 3, "full_attention", "sliding_attention", first=True),
        rope_local_base=10000.0, encoder=True,
        sources=("warner2024modernbert",),
        urls=("https://arxiv.org/abs/2412.13663", "https://huggingface.co/answerdotai/ModernBERT-base/blob/main/config.json"),
        hf_check="ModernBertConfig() defaults are ModernBERT-base: global_rope_theta, local_rope_theta, "
                 "local_attention, global_attn_every_n_layers, max_position_embeddings, layers, heads, hidden / heads",
        notes="an encoder: every third layer (0, 3, ..., 21) is global with base 160,000, the others see 64 tokens "
              "on each side (window 128) with base 10,000; pretrained at 1,024 tokens, extended to 8,192",
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
        notes="trained with base 500,000 from the start (Llama 2: 10,000); grouped-query attention with 8 KV heads at "
              "every size",
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
        "Llama 4", "Llama-4-Scout-17B-16E-Instruct", 2025, "rope", 262144, 10485760, 48, 40, 8, 128,
        rope_base=500000.0,
        rope_pairing="interleaved", scaling="llama3", scaling_factor=16.0,
        scaling_params={"low_freq_factor": 1.0, "high_freq_factor": 1.0, "original_max_position_embeddings": 8192},
        layer_types=every_nth(48, 4, "full_attention", "chunked_attention"), chunk=8192,
        nope_layers=_every_nth_index(48, 4), temperature_tuning={"floor_scale": 8192.0, "attn_scale": 0.1},
        sources=("meta2025llama4",),
        urls=("https://ai.meta.com/blog/llama-4-multimodal-intelligence/",
              "https://huggingface.co/meta-llama/Llama-4-Scout-17B-16E-Instruct/blob/main/config.json",
              "https://github.com/meta-llama/llama-models/blob/main/models/llama4/args.py",
              "https://github.com/huggingface/transformers/blob/main/src/transformers/models/llama4/"
              "convert_llama4_weights_to_hf.py"),
        hf_check="Llama4TextConfig() defaults are Scout's shape: layers, heads, KV heads, head_dim, rope_theta, "
                 "attention_chunk_size, floor_scale, attn_scale, and its no_rope_layers and layer_types equal the row's",
        notes="iRoPE: every 4th layer (3, 7, ..., 47) is a NoPE layer with global attention and temperature-scaled "
              "queries; the other 36 rotate and attend within 8,192-token chunks; the conversion script gives the "
              "base model 262,144 positions and the 16-expert instruct model 10,485,760, which the instruct "
              "checkpoint's published config.json states (max_position_embeddings 10,485,760, with the llama3 "
              "scaling below: factor 16, low and high frequency factors 1, original 8,192); Hugging Face's Llama 4 "
              "rotates interleaved pairs (complex multiplication); Meta's release post gives Scout's pre- and "
              "post-training length, 256K (262,144), which is not in the config: the scaling's original 8,192 is the "
              "length its "
              "frequencies are anchored at, not the length it was trained at. "
              "The scaling is Meta's reference code's ('only Llama-4-Scout uses scaled rope': factor 16, high "
              "frequency factor 1); a copy of the base checkpoint's Hub config read elsewhere shows factor 8 and "
              "high frequency factor 4, the Hugging Face converter's defaults: check the config you load",
    ),
    ModelFamily(
        "Mistral", "Mistral-7B-v0.1", 2023, "rope", 8192, 32768, 32, 32, 8, 128, rope_base=10000.0,
        rope_pairing="half", window=4096,
        sources=("jiang2023mistral",),
        urls=("https://arxiv.org/abs/2310.06825", "https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json"),
        hf_check="MistralConfig() defaults are Mistral-7B: rope_theta, sliding_window, layers, heads, KV heads, "
                 "hidden / heads (not max_position_embeddings: the class default 131,072 is not the release's)",
        notes="sliding-window attention over 4096 tokens with a rolling cache; a context of 8,192 in the paper, while "
              "the published config.json allows 32,768 (max_position_embeddings; an engine's default max_model_len), "
              "which the rolling 4,096-token cache keeps cheap; later versions (v0.2) raised the base to 1,000,000 and "
              "dropped the window",
    ),
    ModelFamily(
        "Mixtral", "Mixtral-8x7B-v0.1", 2024, "rope", 32768, 32768, 32, 32, 8, 128, rope_base=1000000.0,
        rope_pairing="half",
        sources=("jiang2024mixtral",),
        urls=("https://arxiv.org/abs/2401.04088", "https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json"),
        hf_check="MixtralConfig() defaults are Mixtral-8x7B's shape and base: layers, heads, KV heads, hidden / heads, "
                 "rope_theta, and no sliding window (not max_position_embeddings: the class default is 131,072)",
        notes="a 32k context from pretraining, base 1,000,000, no sliding window (Mistral-7B-v0.1 had one)",
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
        scaling_in_config=False,
        sources=("yang2024qwen2",),
        urls=("https://arxiv.org/abs/2407.10671", "https://huggingface.co/Qwen/Qwen2-7B-Instruct"),
        hf_check="the row's YaRN scaling, given to transformers' 'yarn' rope initialiser, yields the same frequencies "
                 "and attention factor as mlbook's RopeScaling('yarn', ...); Qwen2Config()'s defaults are not a "
                 "released Qwen2 model, so they are not used",
        notes="base raised from 10,000 to 1,000,000 while the context went from 4,096 to 32,768 late in pretraining; "
              "YaRN (factor 4) with Dual Chunk Attention reaches 131,072. The model card linked is the instruct "
              "checkpoint's (Qwen2-7B-Instruct), which gives the long-text YaRN recipe",
    ),
    ModelFamily(
        "Qwen2.5", "Qwen2.5-7B-Instruct", 2024, "rope", 32768, 131072, 28, 28, 4, 128, rope_base=1000000.0,
        rope_pairing="half", scaling="yarn", scaling_factor=4.0,
        scaling_params={"original_max_position_embeddings": 32768}, scaling_in_config=False,
        sources=("qwen2025qwen25",),
        urls=("https://arxiv.org/abs/2412.15115", "https://huggingface.co/Qwen/Qwen2.5-7B-Instruct/blob/main/config.json"),
        hf_check="the row's YaRN scaling, given to transformers' 'yarn' rope initialiser, yields the same frequencies "
                 "as mlbook's RopeScaling('yarn', ...); no config class defaults to this checkpoint",
        notes="config.json ships base 1,000,000 and 32,768 positions with no rope_scaling; the model card has the "
              "user add YaRN (factor 4, original 32,768) for inputs up to 131,072",
    ),
    ModelFamily(
        "Qwen3", "Qwen3-8B", 2025, "rope", 32768, 131072, 36, 32, 8, 128, rope_base=1000000.0, rope_pairing="half",
        scaling="yarn", scaling_factor=4.0, scaling_params={"original_max_position_embeddings": 32768},
        scaling_in_config=False,
        sources=("yang2025qwen3",),
        urls=("https://arxiv.org/abs/2505.09388", "https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json"),
        hf_check="Qwen3Config()'s docstring names Qwen3-8B but its defaults are not it (32 KV heads, base 10,000): "
                 "the YaRN scaling is checked through transformers' rope initialiser instead",
        notes="config.json: base 1,000,000, max_position_embeddings 40,960, no rope_scaling; the long-context stage "
              "of pretraining ran at 32,768 tokens with the base raised from 10,000 (ABF), and the model card adds "
              "YaRN (factor 4) for 131,072",
    ),
    ModelFamily(
        "Qwen3-Next", "Qwen3-Next-80B-A3B-Thinking", 2025, "rope", 262144, 1010000, 48, 16, 2, 256,
        rope_base=10000000.0, rope_pairing="half", partial_rotary=0.25, scaling="yarn", scaling_factor=4.0,
        scaling_params={"original_max_position_embeddings": 262144}, scaling_in_config=False,
        layer_types=every_nth(48, 4, "full_attention", "linear_attention"),
        linear_attention={"linear_num_value_heads": 32, "linear_num_key_heads": 16, "linear_key_head_dim": 128,
                          "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4},
        sources=("yang2025gated", "wolf2020transformers"),
        urls=("https://huggingface.co/Qwen/Qwen3-Next-80B-A3B-Thinking#processing-ultra-long-texts",
              "https://huggingface.co/Qwen/Qwen3-Next-80B-A3B-Thinking/blob/main/config.json",
              "https://github.com/ai-dynamo/aiconfigurator/blob/1b7cfb10a6fa06880ad7911db5ddb949882ff76a/src/"
              "aiconfigurator/model_configs/Qwen--Qwen3-Next-80B-A3B-Thinking_config.json",
              "https://github.com/huggingface/transformers/blob/v5.15.0/src/transformers/models/qwen3_next/"
              "configuration_qwen3_next.py"),
        hf_check="Qwen3NextConfig() (transformers 5.15, docstring checkpoint Qwen3-Next-80B-A3B-Instruct) defaults "
                 "are the row's attention shape, linear-attention widths, partial factor and layer plan; its base "
                 "(10,000) and length (32,768) are not the release's: those are compared with the published config "
                 "where ../shared/realconfigs holds it",
        notes="a hybrid: three Gated DeltaNet (linear attention) layers for each full-attention one "
              "(full_attention_interval 4: layers 3, 7, ..., 47); the linear layers rotate nothing and keep a "
              "fixed-size state (recurrent 32 x 128 x 128 values plus a 4-step convolution window), so only the 12 "
              "full layers' cache grows with the context; those rotate 64 of each 256-wide head (partial rotary "
              "0.25) at base 10,000,000; config.json: 262,144 positions, no rope_scaling; the model card gives 262,144 as "
              "the native length and has the user add YaRN (factor 4, original 262,144) for up to 1,010,000 tokens",
    ),
    ModelFamily(
        "Qwen3.5", "Qwen3.5-27B", 2026, "rope", 262144, 1010000, 64, 24, 4, 256, rope_base=10000000.0,
        rope_pairing="half", partial_rotary=0.25, mrope_section=(11, 11, 10), mrope_interleaved=True,
        scaling="yarn", scaling_factor=4.0, scaling_params={"original_max_position_embeddings": 262144},
        scaling_in_config=False,
        layer_types=every_nth(64, 4, "full_attention", "linear_attention"),
        linear_attention={"linear_num_value_heads": 48, "linear_num_key_heads": 16, "linear_key_head_dim": 128,
                          "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4},
        sources=("bai2025qwen3vl", "yang2025gated", "wolf2020transformers"),
        urls=("https://huggingface.co/Qwen/Qwen3.5-397B-A17B#processing-ultra-long-texts",
              "https://huggingface.co/Qwen/Qwen3.5-27B/blob/main/config.json",
              "https://github.com/huggingface/transformers/blob/v5.15.0/src/transformers/models/qwen3_5/"
              "configuration_qwen3_5.py"),
        hf_check="the row equals the published config.json's text_config where ../shared/realconfigs holds it (its "
                 "rope_parameters, transformers 5's layout); Qwen3_5TextConfig()'s defaults are a smaller model",
        notes="Qwen3-Next's hybrid (three Gated DeltaNet layers per full-attention one) in a vision-language "
              "model: the text config writes its RoPE in transformers 5's rope_parameters dict (base 10,000,000, "
              "partial_rotary_factor 0.25: 64 of 256 channels turn) with multimodal RoPE, its 32 rotated pairs "
              "split 11 / 11 / 10 among time, height and width and interleaved; for text every token's three "
              "position ids are equal, so the rotation is plain RoPE over the rotated channels; config.json: 262,144 "
              "positions, no scaling; the model card gives 262,144 as the native length and has the user add YaRN "
              "(factor 4, original 262,144, nested under text_config) for up to 1,010,000 tokens. The card linked "
              "first is the family's flagship's (Qwen3.5-397B-A17B), whose section on ultra-long texts gives that "
              "recipe for the Qwen3.5 models; the 27B checkpoint's own values are its config.json, the second link",
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
        "Gemma 2", "gemma-2-2b", 2024, "rope", 8192, 8192, 26, 8, 4, 256, rope_base=10000.0, rope_pairing="half",
        window=4096, layer_types=every_nth(26, 2, "full_attention", "sliding_attention"),
        sources=("gemmateam2024gemma2",),
        urls=("https://arxiv.org/abs/2408.00118", "https://huggingface.co/google/gemma-2-2b/blob/main/config.json"),
        hf_check="Gemma2Config() defaults are gemma-2-2b: rope_theta, max_position_embeddings, sliding_window, "
                 "layer_types, layers, heads, KV heads, head_dim",
        notes="local (4,096-token sliding window) and global layers alternate, local first, one base for both",
    ),
    ModelFamily(
        "Gemma 3", "gemma-3-12b-pt", 2025, "rope", 32768, 131072, 48, 16, 8, 256, rope_base=1000000.0,
        rope_pairing="half", scaling="linear", scaling_factor=8.0, window=1024,
        layer_types=every_nth(48, 6, "full_attention", "sliding_attention"), rope_local_base=10000.0,
        sources=("gemmateam2025gemma3",),
        urls=("https://arxiv.org/abs/2503.19786", "https://huggingface.co/google/gemma-3-12b-pt/blob/main/config.json"),
        hf_check="Gemma3TextConfig() carries the same bases (1,000,000 global, 10,000 local) and 5:1 pattern as the "
                 "row; its shape is not this checkpoint's, so only those are compared",
        notes="five local layers (window 1,024, base 10,000) for each global one (base 1,000,000); pretrained at "
              "32k, then the global layers' positions are scaled by 8 ('linear') for 128k; the local layers are "
              "not scaled",
    ),
    ModelFamily(
        "Gemma 4", "gemma-4-31B-it", 2026, "rope", None, 262144, 60, 32, 16, 256, rope_base=1000000.0,
        rope_pairing="half", scaling="proportional", scaling_params={"partial_rotary_factor": 0.25}, window=1024,
        layer_types=every_nth(60, 6, "full_attention", "sliding_attention"), rope_local_base=10000.0,
        global_d_head=512, global_kv_heads=4,
        unverified=("original_len",),
        sources=("barbero2025round", "wolf2020transformers"),
        urls=("https://huggingface.co/google/gemma-4-31B-it/blob/main/config.json",
              "https://github.com/huggingface/transformers/blob/v5.15.0/src/transformers/models/gemma4/"
              "configuration_gemma4.py",
              "https://github.com/huggingface/transformers/blob/v5.15.0/src/transformers/models/gemma4/"
              "modeling_gemma4.py"),
        hf_check="Gemma4TextConfig built with the row's shape (transformers 5.15) lays out the same 5:1 pattern and "
                 "gives its full layers head_dim 512 and 4 KV heads; its default rope_parameters are the row's "
                 "(proportional, partial 0.25, base 1,000,000 on full layers; default, base 10,000 on sliding "
                 "ones), and the proportional frequencies equal mlbook's; the class defaults' own shape "
                 "(30 layers) is no released checkpoint's",
        notes="five sliding layers (window 1,024, base 10,000, all 256 channels turn) for each full one; the full "
              "layers have their own shape (global_head_dim 512, num_global_key_value_heads 4, and no v_proj: "
              "attention_k_eq_v, the value is the key projection's output normed without RoPE; transformers' "
              "cache holds keys and values apart, so they are counted twice) and 'proportional' RoPE: "
              "the first quarter of the 256 pairs turn at base^(-2i/512), the rest not at all (a p-RoPE), at base "
              "1,000,000; the row's values are those of copies of the checkpoint's config.json in public "
              "repositories, which agree on the shape; two of them give 262,144 positions, one 131,072; the "
              "pretraining length is not in the config",
    ),
    ModelFamily(
        "DeepSeek-V3", "DeepSeek-V3", 2024, "rope", 4096, 163840, 61, 128, 128, 192, rope_base=10000.0,
        rope_pairing="interleaved", scaling="yarn", scaling_factor=40.0,
        scaling_params={"original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0,
                        "mscale": 1.0, "mscale_all_dim": 1.0},
        kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
        sources=("deepseekai2024v3", "deepseekai2024v2"),
        urls=("https://arxiv.org/abs/2412.19437", "https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json"),
        hf_check="DeepseekV3Config() defaults are DeepSeek-V3's attention: layers, heads, kv_lora_rank, "
                 "qk_rope_head_dim, qk_nope_head_dim, rope_theta (its max_position_embeddings, 4,096, is the "
                 "original length)",
        notes="multi-head latent attention: the cache holds a 512-wide latent and one 64-wide rotary key per token "
              "and layer, shared by the 128 heads; d_head 192 = 128 without rotation + 64 rotated (values 128); "
              "YaRN (factor 40, mscale and mscale_all_dim 1) from 4k to 128k in two stages",
    ),
    ModelFamily(
        "DeepSeek-V3.2", "DeepSeek-V3.2-Exp", 2025, "rope", 4096, 163840, 61, 128, 128, 192, rope_base=10000.0,
        rope_pairing="interleaved", scaling="yarn", scaling_factor=40.0,
        scaling_params={"original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0,
                        "mscale": 1.0, "mscale_all_dim": 1.0},
        kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
        sources=("deepseekai2024v3", "deepseekai2024v2", "wolf2020transformers"),
        urls=("https://huggingface.co/deepseek-ai/DeepSeek-V3.2-Exp/blob/main/config.json",
              "https://github.com/deepseek-ai/DeepSeek-V3.2-Exp/blob/6d8cb70dfdd6f37c83c5208105a3e2c8da117485/"
              "inference/model.py",
              "https://github.com/huggingface/transformers/blob/v5.15.0/src/transformers/models/deepseek_v32/configuration_deepseek_v32.py"),
        hf_check="DeepseekV32Config() (transformers 5.15, docstring checkpoint DeepSeek-V3.2-Exp) defaults are the "
                 "row's attention: layers, heads, kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, "
                 "max_position_embeddings, base; every layer_types entry 'deepseek_sparse_attention'; the YaRN "
                 "parameters are DeepSeek's reference ModelArgs', checked through transformers' yarn initialiser",
        notes="DeepSeek-V3's multi-head latent attention and YaRN (factor 40 from 4,096; the values are the "
              "reference code's ModelArgs defaults, the Hub config was not read: its one mscale multiplies the "
              "softmax scale by (0.1 ln 40 + 1)^2 = 1.874 and leaves cos and sin alone, which transformers' keys "
              "write as mscale = mscale_all_dim = 1) plus DeepSeek Sparse Attention: a lightning indexer (64 heads "
              "of 128) picks the top 2,048 cached tokens for each query; the cache still holds every token, and "
              "the indexer's own 128-wide key per token and layer, which this row's cache size does not count. "
              "The indexer rotates its 64 channels in the half layout, unlike the main attention's interleaved "
              "pairs (transformers 5.15's modeling_deepseek_v32.py says so at the call)",
    ),
    ModelFamily(
        "Kimi K2", "Kimi-K2-Instruct", 2025, "rope", 4096, 131072, 61, 64, 64, 192, rope_base=50000.0,
        rope_pairing="interleaved", scaling="yarn", scaling_factor=32.0,
        scaling_params={"original_max_position_embeddings": 4096, "beta_fast": 1.0, "beta_slow": 1.0,
                        "mscale": 1.0, "mscale_all_dim": 1.0},
        kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
        sources=("kimiteam2025k2", "deepseekai2024v3", "peng2023yarn"),
        urls=("https://huggingface.co/moonshotai/Kimi-K2-Instruct/blob/main/config.json",
              "https://github.com/ai-dynamo/aiconfigurator/blob/095f58a51c4ca8e61b66ec108d86f223f8d559ce/aic-core/src/"
              "aiconfigurator_core/model_configs/moonshotai--Kimi-K2-Instruct_config.json"),
        hf_check="values from the published config.json (model_type kimi_k2, served by DeepseekV3ForCausalLM); no "
                 "transformers 5.15 class defaults to it: its YaRN, given to transformers' yarn initialiser through "
                 "DeepseekV3Config, yields the same frequencies as mlbook's RopeScaling('yarn', ...), and the row "
                 "equals the published config where ../shared/realconfigs holds it",
        notes="DeepSeek-V3's architecture with half the heads (64) and base 50,000; YaRN factor 32 from 4,096 with "
              "beta_fast = beta_slow = 1 (no blend: pairs 0-19, wavelength under 4,096 tokens, keep their "
              "frequency, pairs 20-31 are divided by 32) and mscale = mscale_all_dim = 1 (no factor on cos and "
              "sin; the softmax scale is multiplied by (0.1 ln 32 + 1)^2 = 1.813, as in DeepSeek-V3). Kimi K2.5 "
              "and K2.6 (transformers' kimi_k25) wrap a deepseek_v3 text config whose released values were not "
              "read here",
    ),
    ModelFamily(
        "GLM-4.5", "GLM-4.5-Air", 2025, "rope", None, 131072, 46, 96, 8, 128, rope_base=1000000.0,
        rope_pairing="half", partial_rotary=0.5,
        unverified=("original_len",),
        sources=("glm2025glm45",),
        urls=("https://arxiv.org/abs/2508.06471", "https://huggingface.co/zai-org/GLM-4.5-Air/blob/main/config.json",
              "https://github.com/huggingface/transformers/blob/v5.15.0/src/transformers/models/glm4_moe/"
              "configuration_glm4_moe.py"),
        hf_check="Glm4MoeConfig() (transformers 5.15, docstring checkpoint GLM-4.5) defaults are GLM-4.5-Air's "
                 "layers, heads, KV heads, partial_rotary_factor and max_position_embeddings; not its head width "
                 "(the class has no head_dim, so hidden_size // heads = 42 where the release writes 128) nor its "
                 "base (10,000, the release's 1,000,000)",
        notes="grouped-query attention (96 query heads, 8 KV heads of 128) in every layer, half of each head "
              "rotated (partial_rotary_factor 0.5: 64 of 128 channels) at base 1,000,000, no scaling, 131,072 "
              "positions; GLM-4.5 itself has 92 layers of the same heads; the values are a copy of the Air "
              "checkpoint's config.json printed in a public training log; the pretraining length is not in it",
    ),
    ModelFamily(
        "GLM-5", "GLM-5", 2026, "rope", None, 202752, 78, 64, 64, 256, rope_base=1000000.0,
        rope_pairing="interleaved", kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=192,
        unverified=("original_len",),
        sources=("deepseekai2024v2", "wolf2020transformers"),
        urls=("https://huggingface.co/zai-org/GLM-5/blob/main/config.json",
              "https://github.com/ai-dynamo/aiconfigurator/blob/095f58a51c4ca8e61b66ec108d86f223f8d559ce/aic-core/src/"
              "aiconfigurator_core/model_configs/zai-org--GLM-5_config.json",
              "https://github.com/huggingface/transformers/blob/v5.15.0/src/transformers/models/glm_moe_dsa/configuration_glm_moe_dsa.py"),
        hf_check="GlmMoeDsaConfig() (transformers 5.15, docstring checkpoint GLM-5) defaults are the row's "
                 "attention: layers, heads, kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, "
                 "max_position_embeddings, every layer 'deepseek_sparse_attention'; the base (1,000,000) is the "
                 "published config's rope_parameters (the class default is 10,000), compared where "
                 "../shared/realconfigs holds it",
        notes="multi-head latent attention with a 192-wide unrotated and 64-wide rotated query/key part (values "
              "256), adjacent pairs rotated (rope_interleave), base 1,000,000 in the transformers-5 "
              "rope_parameters layout, no scaling; DeepSeek Sparse Attention's indexer (32 heads of 128) picks "
              "2,048 tokens per query, its key cache not counted here, and rotates interleaved too "
              "(indexer_rope_interleave); the pretraining length is not in the config",
    ),
    ModelFamily(
        "Mistral 4", "Mistral-Small-4-119B-2603", 2026, "rope", 8192, 1048576, 36, 32, 32, 128, rope_base=10000.0,
        rope_pairing="interleaved", scaling="yarn", scaling_factor=128.0,
        scaling_params={"original_max_position_embeddings": 8192, "beta_fast": 32.0, "beta_slow": 1.0,
                        "mscale": 1.0, "mscale_all_dim": 1.0},
        temperature_tuning={"floor_scale": 8192.0, "attn_scale": 0.1},
        kv_lora_rank=256, qk_rope_head_dim=64, qk_nope_head_dim=64,
        sources=("wolf2020transformers", "deepseekai2024v2", "peng2023yarn"),
        urls=("https://huggingface.co/mistralai/Mistral-Small-4-119B-2603/blob/main/config.json",
              "https://github.com/huggingface/transformers/blob/v5.15.0/src/transformers/models/mistral4/configuration_mistral4.py",
              "https://github.com/huggingface/transformers/blob/v5.15.0/src/transformers/models/mistral4/modeling_mistral4.py"),
        hf_check="Mistral4Config() (transformers 5.15, docstring checkpoint Mistral-Small-4-119B-2603) defaults: "
                 "layers, heads, kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, max_position_embeddings, "
                 "rope_interleave, and rope_parameters' YaRN and llama_4_scaling_beta equal the row's; the published "
                 "config.json was not read",
        notes="multi-head latent attention (latent 256, 64 of each 128-wide query/key rotated); YaRN factor 128 from "
              "8,192 to 1,048,576; every layer's queries are scaled by 1 + 0.1 ln(1 + floor(position / 8,192)) "
              "(llama_4_scaling_beta, Llama 4's temperature tuning, here on rotating layers; floor(p / 8,192), not "
              "Llama 4's floor((p + 1) / 8,192)), and the softmax scale by (0.1 ln 128 + 1)^2 = 2.206 (mscale_all_dim); "
              "the values, lengths included, are the transformers class defaults, not read from the checkpoint's "
              "own config",
    ),
    ModelFamily(
        "Phi-3", "Phi-3-mini-128k-instruct", 2024, "rope", 4096, 131072, 32, 32, 32, 96, rope_base=10000.0,
        rope_pairing="half", scaling="longrope", scaling_params={"original_max_position_embeddings": 4096},
        sources=("abdin2024phi3", "ding2024longrope"),
        urls=("https://arxiv.org/abs/2404.14219",
              "https://huggingface.co/microsoft/Phi-3-mini-128k-instruct/blob/main/config.json"),
        hf_check="Phi3Config() defaults are Phi-3-mini's shape and base: layers, heads, KV heads, hidden / heads, "
                 "rope_theta, original_max_position_embeddings",
        notes="LongRoPE: searched per-frequency factors, one list below 4,096 tokens (short_factor) and one above "
              "(long_factor); the 48 factors of each list are in the config and not copied here; vLLM started "
              "without --max-model-len serves LongRoPE at original_max_position_embeddings, 4,096, with the short "
              "factors (vllm/config/model.py), so the 131,072 needs --max-model-len 131072",
    ),
    ModelFamily(
        "Phi-4-mini", "Phi-4-mini-instruct", 2025, "rope", 4096, 131072, 32, 24, 8, 128, rope_base=10000.0,
        rope_pairing="half", scaling="longrope", scaling_params={"original_max_position_embeddings": 4096},
        partial_rotary=0.75,
        sources=("microsoft2025phi4mini", "ding2024longrope"),
        urls=("https://arxiv.org/abs/2503.01743", "https://huggingface.co/microsoft/Phi-4-mini-instruct/blob/main/config.json"),
        hf_check="not checked against class defaults (Phi3Config's are Phi-3-mini's); partial_rotary_factor 0.75 "
                 "rotates 96 of 128 channels",
        notes="partial rotary: the first 96 channels of each 128-wide head rotate, 32 carry no position; LongRoPE "
              "over the rotated 48 pairs; as for Phi-3, vLLM's default length is 4,096 unless --max-model-len asks "
              "for more",
    ),
    ModelFamily(
        "gpt-oss", "gpt-oss-20b", 2025, "rope", 4096, 131072, 24, 64, 8, 64, rope_base=150000.0, rope_pairing="half",
        scaling="yarn", scaling_factor=32.0,
        scaling_params={"original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0,
                        "truncate": False},
        window=128, layer_types=every_nth(24, 2, "full_attention", "sliding_attention"),
        sources=("openai2025gptoss",),
        urls=("https://arxiv.org/abs/2508.10925", "https://huggingface.co/openai/gpt-oss-20b/blob/main/config.json"),
        hf_check="GptOssConfig() defaults carry the row's base, YaRN scaling, window and alternation (its 36 layers "
                 "are gpt-oss-120b's)",
        notes="banded (128-token sliding) and dense layers alternate; YaRN factor 32 from 4,096 (truncate false: "
              "the band edges are not rounded); a learned sink logit per head in the softmax's denominator",
    ),
    ModelFamily(
        "SmolLM3", "SmolLM3-3B", 2025, "rope", 65536, 131072, 36, 16, 4, 128, rope_base=5000000.0,
        rope_pairing="half", scaling="yarn", scaling_factor=2.0,
        scaling_params={"original_max_position_embeddings": 65536}, scaling_in_config=False,
        nope_layers=_every_nth_index(36, 4),
        sources=("huggingface2025smollm3",),
        urls=("https://huggingface.co/blog/smollm3", "https://huggingface.co/HuggingFaceTB/SmolLM3-3B/blob/main/config.json"),
        hf_check="SmolLM3Config() defaults are SmolLM3-3B's shape and NoPE interval (4), but not its base: the row's "
                 "no_rope_layers pattern is compared with the class's",
        notes="every 4th layer (3, 7, ..., 35) rotates nothing, the NoPE/RoPE hybrid of Yang et al. 2025; every "
              "layer attends globally; context extended 4k -> 32k (base 1.5M) -> 64k (base 5M) by continued "
              "training, and YaRN (factor 2) at inference for 128k, per the release post",
    ),
    ModelFamily(
        "OLMo 3", "Olmo-3-7B-Think", 2025, "rope", 8192, 65536, 32, 32, 32, 128, rope_base=500000.0,
        rope_pairing="half", scaling="yarn", scaling_factor=8.0,
        scaling_params={"original_max_position_embeddings": 8192, "beta_fast": 32.0, "beta_slow": 1.0,
                        "attention_factor": 1.2079441541679836},
        window=4096, layer_types=every_nth(32, 4, "full_attention", "sliding_attention"), rope_local_base=500000.0,
        sources=("olmo2025olmo3", "peng2023yarn"),
        urls=("https://arxiv.org/abs/2512.13961", "https://huggingface.co/allenai/Olmo-3-7B-Think/blob/main/config.json",
              "https://github.com/huggingface/transformers/blob/v5.15.0/src/transformers/models/olmo3/"
              "configuration_olmo3.py"),
        hf_check="Olmo3Config built with the row's shape and its 4.x rope_scaling (transformers 5.15) lays out the "
                 "same 3:1 pattern and puts the YaRN on the full layers' rope_parameters only; its YaRN frequencies "
                 "and attention factor equal mlbook's; the class defaults' length (2,048) is no release's",
        notes="three sliding layers (window 4,096) for each full one, the last layer full; pretrained at 8,192 "
              "tokens and extended to 65,536 with YaRN (factor 8, attention factor 0.1 ln 8 + 1 = 1.208) on the "
              "full layers only: the sliding layers keep base 500,000 unscaled (transformers' Olmo3Config puts a "
              "4.x rope_scaling in rope_parameters['full_attention']); multi-head attention (32 KV heads)",
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
        "MPT", "mpt-7b", 2023, "alibi", 2048, 2048, 32, 32, 32, 128, alibi_bias_max=8.0,
        sources=("mosaicml2023mpt", "press2022alibi"),
        urls=("https://www.databricks.com/blog/mpt-7b", "https://huggingface.co/mosaicml/mpt-7b/blob/main/config.json"),
        hf_check="MptConfig() defaults carry alibi=True, alibi_bias_max=8 and max_seq_len=2048 as MPT-7B does (both "
                 "of the row's lengths); the 32 slopes equal transformers' build_mpt_alibi_tensor (its other "
                 "defaults, d_model 2048, are not MPT-7B)",
        notes="mpt-7b's config sets max_seq_len 2,048, its pretraining length; the StoryWriter variant "
              "(mpt-7b-storywriter, another checkpoint: max_seq_len 65,536, alibi_bias_max 16) was fine-tuned at 65k "
              "tokens and generated past 80k, which ALiBi allows",
    ),
    ModelFamily(
        "Swin", "swin-tiny-patch4-window7-224", 2021, "swin", None, None, 12, 3, 3, 32, window=7, encoder=True,
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


def _layer_detail(row: ModelFamily) -> list[str]:
    """What a RoPE row's layers do differently: windows, chunks, NoPE layers, local base, partial rotation."""
    kinds = row.layer_kinds
    out = []
    n_sliding, n_chunked = kinds.count("sliding_attention"), kinds.count("chunked_attention")
    if n_sliding == row.n_layers:
        out.append(f"sliding window {row.window:,}")
    elif n_sliding:
        out.append(f"{n_sliding} of {row.n_layers} layers sliding ({row.window:,})")
    if n_chunked:
        out.append(f"{n_chunked} of {row.n_layers} layers chunked ({row.chunk:,})")
    n_linear = kinds.count("linear_attention")
    if n_linear:
        out.append(f"{n_linear} of {row.n_layers} layers linear attention (a fixed state, no RoPE)")
    if row.global_d_head is not None or row.global_kv_heads is not None:
        out.append(f"full layers: {row.global_kv_heads or row.n_kv_heads} KV heads of width "
                   f"{row.global_d_head or row.d_head}")
    if row.rope_local_base is not None and row.rope_local_base == row.rope_base and row.scaling != "none":
        out.append("local layers not scaled")
    elif row.rope_local_base is not None:
        out.append(f"local base {row.rope_local_base:,.0f}")
    if row.nope_layers:
        out.append(f"{len(row.nope_layers)} NoPE layers (every {row.nope_layers[0] + 1}th)")
    if row.partial_rotary is not None:
        out.append(f"rotates {round(row.partial_rotary * row.d_head)} of {row.d_head} channels")
    if row.mrope_section:
        out.append(f"M-RoPE, pairs {' / '.join(map(str, row.mrope_section))} to time / height / width"
                   + (", interleaved" if row.mrope_interleaved else ""))
    if row.qk_rope_head_dim is not None:
        out.append(f"decoupled RoPE key of {row.qk_rope_head_dim}")
    return out


def positional_summary(row: ModelFamily) -> dict[str, str]:
    """The table's cells for one row: scheme, base, scaling, original length, buckets, slopes or layers."""
    scheme = {"learned": "learned absolute", "t5": "T5 relative bias", "rope": "RoPE", "alibi": "ALiBi",
              "swin": "2-D relative bias"}[row.scheme]
    if row.scheme == "rope" and row.nope_layers:
        scheme = "RoPE + NoPE layers"
    base = f"{row.rope_base:,.0f}" if row.rope_base is not None else "-"
    if row.scaling == "none":
        scaling = "none"
    elif row.scaling_factor is None:
        rotated, width = row.global_rotation
        scaling = {"dynamic": "dynamic NTK (inference)", "longrope": "longrope (searched per-pair factors)",
                   "proportional": f"proportional (full layers: {rotated} of {width} channels turn)"}.get(
            row.scaling, row.scaling)
    else:
        scaling = f"{row.scaling}, factor {row.scaling_factor:g}"
        if row.scaling == "llama3":
            scaling += (f" (low {row.scaling_params['low_freq_factor']:g}, "
                        f"high {row.scaling_params['high_freq_factor']:g})")
    if not row.scaling_in_config:
        scaling += " (model card, not in config)"
    if row.scheme == "t5":
        detail = f"{row.num_buckets} buckets, max distance {row.max_distance}"
    elif row.scheme == "alibi":
        s = row.slopes
        assert s is not None
        detail = f"{row.n_heads} slopes, {float(s[0]):.4g} down to {float(s[-1]):.4g}"
    elif row.scheme == "swin":
        detail = f"window {row.window} x {row.window}: {(2 * row.window - 1) ** 2} offsets per head"
    else:
        detail = "; ".join(_layer_detail(row)) or "-" if row.scheme == "rope" else "-"
    if row.kv_lora_rank is not None:
        kv = f"MLA (latent {row.kv_lora_rank})"
    elif row.encoder:
        kv = "encoder (no cache)"
    else:
        kv = ("MHA" if row.n_kv_heads == row.n_heads else
              ("MQA" if row.n_kv_heads == 1 else f"GQA ({row.n_kv_heads} KV)"))
    return {
        "family": row.name, "checkpoint": row.checkpoint, "scheme": scheme, "base": base, "scaling": scaling,
        "original length": _fmt_len(row.original_len), "max length": _fmt_len(row.max_len),
        "buckets / slopes / layers": detail, "attention": kv,
        "sources": ", ".join(f"{{cite:p}}`{k}`" for k in row.sources),
    }


def family_table_markdown(rows: tuple[ModelFamily, ...] = MODEL_FAMILIES, *, cite: bool = False) -> str:
    """A Markdown table of `positional_summary` for each row (citations as MyST roles if cite=True)."""
    cells = [positional_summary(r) for r in rows]
    keys = [k for k in cells[0] if cite or k != "sources"]
    lines = ["| " + " | ".join(keys) + " |", "|" + "|".join("---" for _ in keys) + "|"]
    lines += ["| " + " | ".join(c[k] for k in keys) + " |" for c in cells]
    return "\n".join(lines)
