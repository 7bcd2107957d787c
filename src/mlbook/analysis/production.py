"""KV-cache arithmetic for the production sections (07 context extension, 08 attention sinks,
12 in production, 15 interview): bytes per token and per sequence, what grouped-query heads,
latent attention and windowed layers change, the cache of a real model from its row in
`mlbook.data.model_families` or from its `config.json`, how vLLM lays out a hybrid's state (its blocks, the
attention block it picks and the padding it adds), and whether a budget fits a device, whole or within a serving
engine's share of it.

A layer's cache grows by the values one token adds to it, up to the most tokens the layer ever
attends to: every token for a full-attention layer, the window W for a sliding layer (a query at i
sees keys i - W < j <= i, Hugging Face's convention), the chunk C for Llama 4's chunked layers (a
query sees the keys of its own C-token chunk). What one token adds per layer:

    multi-head / grouped-query   2 * n_kv_heads * d_head   (a key and a value per KV head)
    multi-head latent attention  kv_lora_rank + qk_rope_head_dim   (DeepSeek-V2/V3: one latent c_KV,
                                 from which every head's key and value are up-projected, and one
                                 rotary key k_R shared by the heads; 512 + 64 for DeepSeek-V3)

Bytes are bytes; binary units through `mlbook.analysis.systems.format_bytes`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from mlbook.analysis.systems import format_bytes
from mlbook.data.model_families import ModelFamily
from mlbook.transformer.hf import (
    GLOBAL_HEAD_FAMILIES, hf_get, hf_head_dim, hf_layer_overrides, hf_layer_types, hf_text_config,
)
from mlbook.transformer.latent import mha_cache_values, mla_cache_values
from mlbook.transformer.validate import check_choice, check_int, check_positive_float

__all__ = [
    "MAMBA_CACHE_MODES",
    "vllm_linear_state_bytes",
    "VllmHybridPages",
    "vllm_hybrid_pages",
    "vllm_state_bytes_per_value",
    "ACCELERATOR_BYTES",
    "VLLM_GPU_MEMORY_UTILIZATION",
    "kv_cache_bytes",
    "KVCacheOption",
    "kv_cache_options",
    "LAYER_KINDS",
    "LayerCache",
    "KVCachePlan",
    "kv_cache_plan",
    "family_kv_plan",
    "config_layer_types",
    "config_kv_heads",
    "config_kv_plan",
    "DeviceFit",
    "device_fit",
]


def kv_cache_bytes(
    n_layers: int, n_kv_heads: int, d_head: int, bytes_per_value: float = 2.0, context_len: int = 1, batch: int = 1
) -> int:
    """Bytes held by a KV cache: 2 (keys and values) * n_layers * n_kv_heads * d_head * bytes_per_value
    per token, times context_len tokens and batch sequences.

    A 7B-class model (32 layers, 32 KV heads, d_head 128, fp16) holds 2 * 32 * 32 * 128 * 2 =
    524,288 bytes = 0.5 MiB per token. Grouped-query attention divides it by n_heads / n_kv_heads;
    an 8-bit cache (bytes_per_value = 1) halves it.
    """
    check_int("n_layers", n_layers, 1)
    check_int("n_kv_heads", n_kv_heads, 1)
    check_int("d_head", d_head, 1)
    bytes_per_value = check_positive_float("bytes_per_value", bytes_per_value)
    check_int("context_len", context_len, 0)
    check_int("batch", batch, 0)
    per_token = mha_cache_values(n_layers, n_kv_heads, d_head) * bytes_per_value  # K and V: 2 n_layers n_kv_heads d_head
    return int(round(per_token * context_len * batch))


# ---------------------------------------------------------------------------
# One layer kind: what grouped-query attention and cache quantisation change
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class KVCacheOption:
    """One cache layout: KV heads, bytes per value, its size, and its size relative to the first option."""

    label: str
    n_kv_heads: int
    bytes_per_value: float
    per_token: int
    total: int
    relative: float


def kv_cache_options(
    n_layers: int = 32, n_heads: int = 32, d_head: int = 128, context_len: int = 131072, batch: int = 1,
    kv_heads: tuple[int, ...] = (32, 8, 1), bytes_per_value: tuple[float, ...] = (2.0, 1.0, 0.5),
) -> list[KVCacheOption]:
    """`kv_cache_bytes` for every (KV heads, bytes per value) pair: n_kv_heads = n_heads is multi-head
    attention, 1 < n_kv_heads < n_heads grouped-query, 1 multi-query; 2 bytes is fp16/bf16, 1 an
    8-bit cache, 0.5 a 4-bit one (scales and zero points left out). relative = total / the first."""
    check_int("n_heads", n_heads, 1)
    if not kv_heads or not bytes_per_value:
        raise ValueError("kv_heads and bytes_per_value must each list at least one value")
    for h in kv_heads:
        check_int("kv_heads entry", h, 1)
        if n_heads % h:
            raise ValueError(f"each kv_heads entry must divide n_heads ({n_heads}), got {h}")
    out: list[KVCacheOption] = []
    for h in kv_heads:
        for b in bytes_per_value:
            kind = "MHA" if h == n_heads else ("MQA" if h == 1 else f"GQA-{h}")
            per_token = kv_cache_bytes(n_layers, h, d_head, b)
            total = kv_cache_bytes(n_layers, h, d_head, b, context_len, batch)
            bits = {2.0: "16-bit", 1.0: "8-bit", 0.5: "4-bit"}.get(float(b), f"{8 * b:g}-bit")
            out.append(KVCacheOption(f"{kind}, {bits}", h, float(b), per_token, total, 0.0))
    first = out[0].total
    return [KVCacheOption(o.label, o.n_kv_heads, o.bytes_per_value, o.per_token, o.total,
                          o.total / first if first else math.nan) for o in out]


# ---------------------------------------------------------------------------
# Per-layer caches: grouped-query heads, latent attention, windowed and chunked layers
# ---------------------------------------------------------------------------

LAYER_KINDS: tuple[str, ...] = ("full_attention", "sliding_attention", "chunked_attention")


@dataclass(frozen=True)
class LayerCache:
    """The layers of one kind: how many, the values one token adds to each, and the most tokens each holds."""

    kind: str  # "full_attention", "sliding_attention" or "chunked_attention" (Hugging Face's layer_types names),
    # or, from a config (`config_kv_plan`), "linear_attention" (a fixed-size state, no per-token growth)
    layers: int
    values_per_token: int  # 2 n_kv_heads d_head, or kv_lora_rank + qk_rope_head_dim for latent attention
    cap: int | None  # the window or chunk: most tokens one layer holds; None: every token
    fixed_values: int = 0  # values one layer holds whatever the length (linear attention's recurrent and conv state)
    recurrent_values: int = 0  # of fixed_values, the recurrent state's: counted at the plan's state_bytes_per_value

    def tokens(self, context_len: int) -> int:
        """Tokens one layer of this kind holds after context_len tokens: min(context_len, cap)."""
        return context_len if self.cap is None else min(context_len, self.cap)


@dataclass(frozen=True)
class KVCachePlan:
    """A model's cache as layer kinds (see `kv_cache_plan`); sizes at any context length and batch."""

    parts: tuple[LayerCache, ...]
    bytes_per_value: float
    latent: bool  # multi-head latent attention
    state_bytes_per_value: float = 4.0  # a linear-attention layer's recurrent state: float32 in transformers 5.15

    @property
    def n_layers(self) -> int:
        return sum(p.layers for p in self.parts)

    @property
    def per_token(self) -> int:
        """Bytes one token adds while every layer still grows (context shorter than every window)."""
        return int(round(sum(p.layers * p.values_per_token for p in self.parts) * self.bytes_per_value))

    def part_bytes(self, part: LayerCache, context_len: int, batch: int = 1) -> int:
        """Bytes held by the layers of `part` after context_len tokens, for batch sequences."""
        values = part.values_per_token * part.tokens(context_len) + part.fixed_values - part.recurrent_values
        held = values * self.bytes_per_value + part.recurrent_values * self.state_bytes_per_value
        return int(round(part.layers * held * batch))

    def bytes(self, context_len: int, batch: int = 1) -> int:
        """Bytes held after context_len tokens for batch sequences: the sum over layer kinds of
        layers * values_per_token * min(context_len, cap) * batch * bytes_per_value, plus each linear-attention
        layer's fixed state (its recurrent part at state_bytes_per_value) for each sequence."""
        check_int("context_len", context_len, 0)
        check_int("batch", batch, 0)
        return sum(self.part_bytes(p, context_len, batch) for p in self.parts)

    def breakdown(self, context_len: int, batch: int = 1) -> str:
        """One line per layer kind and the total, in binary units."""
        lines = []
        for p in self.parts:
            cap = "every token" if p.cap is None else f"at most {p.cap:,} tokens"
            what = ("latent + rotary key" if self.latent else "K and V") + f", {p.values_per_token:,} values per token"
            if p.kind == "linear_attention":
                cap, what = "whatever the length", (f"a fixed state of {p.fixed_values:,} values, "
                                                     f"{p.recurrent_values:,} of them at {self.state_bytes_per_value:g} "
                                                     "bytes")
            lines.append(f"{p.layers:>3} {p.kind:<17} ({what}, {cap}): "
                         f"{format_bytes(self.part_bytes(p, context_len, batch))}")
        lines.append(f"total at {context_len:,} tokens x batch {batch}: {format_bytes(self.bytes(context_len, batch))}")
        return "\n".join(lines)


def kv_cache_plan(
    n_layers: int, n_kv_heads: int, d_head: int, *, layer_types: tuple[str, ...] | list[str] | None = None,
    sliding_window: int | None = None, chunk_size: int | None = None, kv_lora_rank: int | None = None,
    qk_rope_head_dim: int | None = None, full_kv_heads: int | None = None, full_d_head: int | None = None,
    linear_state_values: int | None = None, linear_recurrent_values: int = 0, bytes_per_value: float = 2.0,
    state_bytes_per_value: float = 4.0,
) -> KVCachePlan:
    """The cache of a decoder whose layers may differ, grouped by layer kind.

    Per token and layer: 2 * n_kv_heads * d_head values (keys and values of the KV heads: n_kv_heads
    = n_heads is multi-head, fewer grouped-query, 1 multi-query), or, with kv_lora_rank set,
    kv_lora_rank + qk_rope_head_dim values (multi-head latent attention, DeepSeek-V2 arXiv
    2405.04434 section 2.1: the compressed c_KV and the decoupled rotary key k_R; n_kv_heads and
    d_head are then unused). A "sliding_attention" layer holds at most sliding_window tokens, a
    "chunked_attention" layer at most chunk_size (Llama 4: a query attends within its chunk), a
    "full_attention" layer every token. layer_types=None: every layer full.

    full_kv_heads and full_d_head: the full layers' own KV heads and head width where they differ from
    the others' (Gemma 4: num_global_key_value_heads and global_head_dim). A "linear_attention" layer
    (Qwen3-Next's and Qwen3.5's Gated DeltaNet) holds linear_state_values values whatever the length
    and nothing per token; give linear_state_values when layer_types has such layers, and of them
    linear_recurrent_values, the recurrent state's, counted at state_bytes_per_value (4: transformers 5.15
    keeps it in float32 whatever the model's dtype; a serving engine has its own setting, vLLM's
    mamba_ssm_cache_dtype, which follows a config's mamba_ssm_dtype) where the rest is at bytes_per_value.
    """
    check_int("n_layers", n_layers, 1)
    bytes_per_value = check_positive_float("bytes_per_value", bytes_per_value)
    state_bytes_per_value = check_positive_float("state_bytes_per_value", state_bytes_per_value)
    kinds = ("full_attention",) * n_layers if layer_types is None else tuple(layer_types)
    if len(kinds) != n_layers:
        raise ValueError(f"layer_types has {len(kinds)} entries but the model has n_layers={n_layers}")
    for k in set(kinds):
        check_choice("layer_types entry", k, LAYER_KINDS + ("linear_attention",))
    caps: dict[str, int | None] = {"full_attention": None, "linear_attention": None}
    if "sliding_attention" in kinds:
        if sliding_window is None:
            raise ValueError("layer_types has sliding_attention layers: give their sliding_window (tokens)")
        caps["sliding_attention"] = check_int("sliding_window", sliding_window, 1)
    if "chunked_attention" in kinds:
        if chunk_size is None:
            raise ValueError("layer_types has chunked_attention layers: give their chunk_size (tokens)")
        caps["chunked_attention"] = check_int("chunk_size", chunk_size, 1)
    state = 0
    if "linear_attention" in kinds:
        if linear_state_values is None:
            raise ValueError("layer_types has linear_attention layers: give linear_state_values, the values one "
                             "such layer keeps whatever the length")
        state = check_int("linear_state_values", linear_state_values, 1)
        check_int("linear_recurrent_values", linear_recurrent_values, 0)
        if linear_recurrent_values > state:
            raise ValueError(f"linear_recurrent_values={linear_recurrent_values} is part of linear_state_values="
                             f"{state} and cannot exceed it")
    elif linear_state_values is not None:
        raise ValueError(f"linear_state_values={linear_state_values!r} is given but layer_types has no "
                         "linear_attention layer")
    if kv_lora_rank is not None:
        check_int("kv_lora_rank", kv_lora_rank, 1)
        if qk_rope_head_dim is None:
            raise ValueError("latent attention caches the rotary key too: give qk_rope_head_dim with kv_lora_rank")
        if full_kv_heads is not None or full_d_head is not None:
            raise ValueError("full_kv_heads and full_d_head are head shapes: latent attention (kv_lora_rank) has "
                             "none to change")
        values = mla_cache_values(1, kv_lora_rank, qk_rope_head_dim)  # one layer: latent + shared rotary key
        full_values = values
    else:
        if qk_rope_head_dim is not None:
            raise ValueError("qk_rope_head_dim is a latent-attention width: give kv_lora_rank as well, or neither")
        check_int("n_kv_heads", n_kv_heads, 1)
        check_int("d_head", d_head, 1)
        values = mha_cache_values(1, n_kv_heads, d_head)  # one layer: 2 n_kv_heads d_head
        full_values = mha_cache_values(
            1, n_kv_heads if full_kv_heads is None else check_int("full_kv_heads", full_kv_heads, 1),
            d_head if full_d_head is None else check_int("full_d_head", full_d_head, 1))
    per_kind = {"full_attention": full_values, "sliding_attention": values, "chunked_attention": values,
                "linear_attention": 0}
    parts = tuple(LayerCache(k, kinds.count(k), per_kind[k], caps[k], *((state, linear_recurrent_values)
                             if k == "linear_attention" else (0, 0)))
                  for k in LAYER_KINDS + ("linear_attention",) if k in kinds)
    return KVCachePlan(parts, bytes_per_value, kv_lora_rank is not None, state_bytes_per_value)


def family_kv_plan(row: ModelFamily, bytes_per_value: float = 2.0, state_bytes_per_value: float = 4.0) -> KVCachePlan:
    """`kv_cache_plan` for a row of MODEL_FAMILIES: its layer kinds, window, chunk and latent width, the full
    layers' own heads (Gemma 4) and the linear-attention layers' fixed state (Qwen3-Next, Qwen3.5).
    Encoders (BERT, ModernBERT, Swin: `row.encoder`) and T5 (relative bias, encoder-decoder) are refused."""
    if row.encoder or row.scheme == "t5":
        raise ValueError(f"{row.name} is not a decoder-only model: it keeps no KV cache of this kind")
    state, recurrent = _linear_state_values(row.linear_attention) if row.linear_attention else (None, 0)
    return kv_cache_plan(row.n_layers, row.n_kv_heads, row.d_head, layer_types=row.layer_kinds,
                         sliding_window=row.window, chunk_size=row.chunk, kv_lora_rank=row.kv_lora_rank,
                         qk_rope_head_dim=row.qk_rope_head_dim, full_kv_heads=row.global_kv_heads,
                         full_d_head=row.global_d_head, linear_state_values=state, linear_recurrent_values=recurrent,
                         bytes_per_value=bytes_per_value, state_bytes_per_value=state_bytes_per_value)


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a dict read from config.json, got {type(config).__name__} ({config!r})")
    return hf_text_config(config)


def config_layer_types(config: Mapping[str, Any]) -> tuple[str, ...]:
    """Each layer's kind from a `config.json` dict (a multimodal config's text_config is used), as
    transformers derives it: `mlbook.transformer.hf.hf_layer_types`, which holds the rules."""
    return hf_layer_types(_text_config(config))


def _stated(c: Mapping[str, Any], key: str) -> int:
    """A positive int the config must state (under its family's own spelling too: GPT-J's n_head, `hf_get`);
    a missing one is refused by name, never read as a bare None: a file that leaves it to its config class's
    default (Google's Gemma 3 files) has to be loaded by that class, or the field written in."""
    value = hf_get(c, key)
    if value is None:
        raise ValueError(f"the config states no {key} ({c.get('model_type', 'no model_type')}): this calculator "
                         "does not fill transformers' class defaults for it; load the config with its transformers "
                         f"config class (AutoConfig) and pass config.to_dict(), or write {key} into the dict")
    return check_int(key, value, 1)


def config_kv_heads(config: Mapping[str, Any]) -> int:
    """The KV heads a config states, under every spelling transformers reads: num_key_value_heads;
    Falcon's num_kv_heads with new_decoder_architecture, else 1 under multi_query (FalconConfig's default)
    or every head; GPT-BigCode's multi_query (1); otherwise num_attention_heads (multi-head)."""
    c = _text_config(config)
    n_heads = _stated(c, "num_attention_heads")
    model_type = str(c.get("model_type", ""))
    if model_type == "falcon":
        if c.get("new_decoder_architecture"):
            n_kv = c.get("num_kv_heads")
            return n_heads if n_kv is None else check_int("num_kv_heads", n_kv, 1)
        return 1 if c.get("multi_query", True) else n_heads
    if model_type == "gpt_bigcode":
        return 1 if c.get("multi_query", True) else n_heads
    for key in ("num_key_value_heads", "num_kv_heads", "n_head_kv"):
        if c.get(key) is not None:
            n_kv = check_int(key, c[key], 1)
            if n_heads % n_kv:
                raise ValueError(f"{key}={n_kv} must divide num_attention_heads={n_heads} (each KV head serves a "
                                 "whole group of query heads)")
            return n_kv
    return n_heads


# model_types whose linear-attention layers are Gated DeltaNet (transformers 5.15)
_GDN_FAMILIES: tuple[str, ...] = ("qwen3_next", "qwen3_5", "olmo_hybrid")


def _linear_state_values(c: Mapping[str, Any]) -> tuple[int, int]:
    """(all, recurrent): the values one linear-attention layer keeps (Qwen3-Next's and Qwen3.5's Gated DeltaNet, as
    transformers 5.15's cache holds them), and of them the recurrent state's, linear_num_value_heads x
    linear_key_head_dim x linear_value_head_dim; the rest is the causal convolution's last linear_conv_kernel_dim
    inputs of its q, k, v channels (vLLM keeps kernel - 1 of them)."""
    need = ("linear_num_value_heads", "linear_num_key_heads", "linear_key_head_dim", "linear_value_head_dim",
            "linear_conv_kernel_dim")
    missing = [k for k in need if c.get(k) is None]
    if missing and str(c.get("model_type", "")).startswith(_GDN_FAMILIES):
        raise ValueError(f"model_type={c.get('model_type')!r} has Gated DeltaNet layers, and the config lacks their "
                         f"widths {missing}: give them as the published config.json states them")
    if missing:
        raise ValueError(f"layer_types has linear_attention layers; this calculator counts the fixed-size state of "
                         f"Gated DeltaNet (Qwen3-Next, Qwen3.5, OLMo Hybrid) from {list(need)}, and the config lacks "
                         f"{missing}: its linear layers are another kind (MiniMax's lightning attention, a Mamba or "
                         "convolution block), whose state is not modelled here")
    v_heads, k_heads, dk, dv, kernel = (check_int(k, c[k], 1) for k in need)
    conv_channels = 2 * k_heads * dk + v_heads * dv
    return v_heads * dk * dv + conv_channels * kernel, v_heads * dk * dv


# vLLM's cache modes for Mamba-like layers (`MambaCacheMode` in vllm/config/cache.py): "none" without prefix caching;
# "align" or "all" with it, which vLLM turns on by default (`CacheConfig.enable_prefix_caching = True`)
MAMBA_CACHE_MODES: tuple[str, ...] = ("align", "none", "all")


def _gdn_page(linear: Mapping[str, Any], n: int, tensor_parallel: int, state_bytes_per_value: float,
              conv_bytes_per_value: float) -> int:
    """Bytes of one Gated DeltaNet layer's state block on one tensor-parallel rank, at the shapes of
    `MambaStateShapeCalculator.gated_delta_net_state_shape` (vllm/model_executor/layers/mamba/mamba_utils.py): the
    temporal state (value heads / TP, value width, key width) and the convolution's kernel - 1 + n inputs of its
    (2 key heads' width + the value heads' width) / TP channels; vLLM's `divide` requires both to split evenly."""
    total, recurrent = _linear_state_values(linear)
    kernel = check_int("linear_conv_kernel_dim", linear["linear_conv_kernel_dim"], 1)
    channels = (total - recurrent) // kernel  # the convolution's q, k and v inputs
    v_heads = check_int("linear_num_value_heads", linear["linear_num_value_heads"], 1)
    for what, size in (("linear_num_value_heads", v_heads), ("the convolution's channels", channels)):
        if size % tensor_parallel:
            raise ValueError(f"tensor_parallel={tensor_parallel} must divide {what} ({size}): vLLM splits them evenly "
                             "across the ranks")
    per_rank = recurrent // tensor_parallel * state_bytes_per_value
    return int(round(per_rank + channels // tensor_parallel * (kernel - 1 + n) * conv_bytes_per_value))


def _state_blocks(mode: str, n: int, max_model_len: int | None, block_size: int | None,
                  prefill_checkpoint_blocks: int = 0) -> int:
    """Blocks `MambaSpec.max_memory_usage_bytes` (vllm/v1/kv_cache_interface.py) charges one layer of a sequence."""
    if mode == "all":
        return math.ceil(max_model_len / block_size) + n  # type: ignore[operator]
    return (2 + n + prefill_checkpoint_blocks) if mode == "align" else 1 + n


def _check_cache_mode_lengths(mode: str, max_model_len: int | None, mamba_block_size: int | None) -> None:
    """max_model_len and mamba_block_size: both required by mamba_cache_mode 'all' (a state at every block
    boundary of the longest sequence), refused by the other modes, whose block count does not depend on them."""
    if mode == "all":
        if max_model_len is None or mamba_block_size is None:
            raise ValueError("mamba_cache_mode='all' keeps a state per block of the longest sequence: give "
                             f"max_model_len and mamba_block_size (got {max_model_len!r} and {mamba_block_size!r})")
        check_int("max_model_len", max_model_len, 1)
        check_int("mamba_block_size", mamba_block_size, 1)
    elif max_model_len is not None or mamba_block_size is not None:
        raise ValueError(f"max_model_len and mamba_block_size size the 'all' mode only; mamba_cache_mode={mode!r} "
                         f"keeps {'2' if mode == 'align' else '1'} + n blocks whatever the length")


def vllm_linear_state_bytes(linear: Mapping[str, Any], layers: int, num_speculative_tokens: int = 0, *,
                            mamba_cache_mode: str = "align", max_model_len: int | None = None,
                            mamba_block_size: int | None = None, state_bytes_per_value: float | None = None,
                            conv_bytes_per_value: float = 2.0) -> int:
    """Bytes of the state vLLM keeps per sequence for `layers` Gated DeltaNet layers whose shape `linear` gives (the
    config's linear_* fields), under its `mamba_cache_mode`, before vLLM pads each block to the attention page
    (`vllm_hybrid_pages` adds the padding, the attention block and tensor parallelism).

    One block of one layer (`MambaStateShapeCalculator.gated_delta_net_state_shape`,
    vllm/model_executor/layers/mamba/mamba_utils.py) holds the recurrent state, linear_num_value_heads x
    linear_key_head_dim x linear_value_head_dim values at state_bytes_per_value (None: vLLM's default for the
    config, `vllm_state_bytes_per_value`: float32 for Qwen3.5, bf16 for Qwen3-Next), and kernel - 1 + n of the convolution's inputs at conv_bytes_per_value, n the speculative
    tokens. `MambaSpec.max_memory_usage_bytes` (vllm/v1/kv_cache_interface.py) charges a sequence, per layer:

        "none"   1 + n blocks                                      (prefix caching off)
        "align"  2 + n blocks                                      (prefix caching on: vLLM's default for a model
                                                                    that does not declare SupportsMambaPrefixCaching,
                                                                    Qwen3.5 among them)
        "all"    ceil(max_model_len / mamba_block_size) + n blocks  (a state at every block boundary; earlier vLLM
                                                                    releases charged the ceiling alone)

    Newer vLLM trees add num_prefill_checkpoint_blocks to "align", set by a layer's prefill backend (Kimi K3's
    FlashKDA: 1) and 0 for Gated DeltaNet by default. The default is "align": vLLM enables prefix caching by default
    and `MambaModelConfig.verify_and_update_config` (vllm/model_executor/models/config.py) then picks "align" for
    Qwen3.5. The cache the calculator prices (`config_kv_plan`) is transformers 5.15's instead: kernel columns,
    one block."""
    layers = check_int("layers", layers, 1)
    n = check_int("num_speculative_tokens", num_speculative_tokens, 0)
    check_choice("mamba_cache_mode", mamba_cache_mode, MAMBA_CACHE_MODES)
    _check_cache_mode_lengths(mamba_cache_mode, max_model_len, mamba_block_size)
    if state_bytes_per_value is None:  # vLLM's default for this model (Qwen3.5: float32, Qwen3-Next: bf16)
        _linear_state_values(linear)  # the layer's shape first: a missing width is the error to report
        state_bytes_per_value = vllm_state_bytes_per_value(linear)
    state_bytes_per_value = check_positive_float("state_bytes_per_value", state_bytes_per_value)
    conv_bytes_per_value = check_positive_float("conv_bytes_per_value", conv_bytes_per_value)
    block = _gdn_page(linear, n, 1, state_bytes_per_value, conv_bytes_per_value)
    return layers * _state_blocks(mamba_cache_mode, n, max_model_len, mamba_block_size) * block


@dataclass(frozen=True)
class VllmHybridPages:
    """How vLLM lays out the cache of a model with full-attention and Gated DeltaNet layers (see `vllm_hybrid_pages`):
    per tensor-parallel rank, one attention block of block_size tokens and one padded state block are the same page;
    the byte counts sum over the ranks."""

    tensor_parallel: int
    attention_layers: int
    linear_layers: int
    attention_bytes_per_token: int  # one attention layer on one rank: 2 x its KV heads x head_dim x kv bytes
    state_page: int  # one linear layer's state block on one rank, before padding
    block_size: int  # tokens per attention block, raised until block_size x attention_bytes_per_token >= state_page
    state_blocks: int  # state blocks a sequence holds per linear layer (the cache mode's count)

    @property
    def page(self) -> int:
        """Bytes of one page: block_size x attention_bytes_per_token, which every state block is padded to."""
        return self.block_size * self.attention_bytes_per_token

    @property
    def padding(self) -> float:
        """page / state_page - 1: the share vLLM's log reports as "Padding mamba page size by X%"."""
        return self.page / self.state_page - 1

    def state_bytes(self, batch: int = 1) -> int:
        """The linear layers' state for batch sequences, padded, over all ranks."""
        check_int("batch", batch, 0)
        return batch * self.tensor_parallel * self.linear_layers * self.state_blocks * self.page

    def unpadded_state_bytes(self, batch: int = 1) -> int:
        """The same state before padding: what the tensors themselves hold."""
        check_int("batch", batch, 0)
        return batch * self.tensor_parallel * self.linear_layers * self.state_blocks * self.state_page

    def kv_bytes(self, context_len: int, batch: int = 1) -> int:
        """The full-attention layers' keys and values after context_len tokens, in whole blocks, over all ranks."""
        check_int("context_len", context_len, 0)
        check_int("batch", batch, 0)
        blocks = math.ceil(context_len / self.block_size)
        return batch * self.tensor_parallel * self.attention_layers * blocks * self.page


# model types whose vLLM config class copies the checkpoint's mamba_ssm_dtype into mamba_ssm_cache_dtype
# (Qwen3_5ForConditionalGenerationConfig in vllm/model_executor/models/config.py's MODELS_CONFIG_MAP)
_VLLM_COPIES_SSM_DTYPE = ("qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text")
_DTYPE_BYTES = {"float32": 4.0, "float16": 2.0, "bfloat16": 2.0}


def vllm_state_bytes_per_value(config: Mapping[str, Any]) -> float:
    """Bytes per value of a Gated DeltaNet state as vLLM keeps it by default (mamba_ssm_cache_dtype "auto",
    `MambaStateDtypeCalculator.gated_delta_net_state_dtype`): the checkpoint's mamba_ssm_dtype where vLLM's config
    class for the model copies it (Qwen3.5: float32), else the model's dtype (Qwen3-Next: bfloat16, its config sets
    no mamba_ssm_dtype). A config that states neither is refused: pass state_bytes_per_value yourself."""
    c = _text_config(config)
    outer = config if isinstance(config, Mapping) else {}
    if str(c.get("model_type", "")) in _VLLM_COPIES_SSM_DTYPE and c.get("mamba_ssm_dtype") is not None:
        name = c["mamba_ssm_dtype"]
    else:
        name = c.get("dtype") or c.get("torch_dtype") or outer.get("dtype") or outer.get("torch_dtype")
    if name is None:
        raise ValueError("the config states no dtype (nor a mamba_ssm_dtype vLLM copies): vLLM would keep the state in "
                         "the dtype the model is served in; pass state_bytes_per_value (2 for bf16, 4 for float32)")
    if str(name) not in _DTYPE_BYTES:
        raise ValueError(f"the state's dtype {name!r} is not one of {sorted(_DTYPE_BYTES)}")
    return _DTYPE_BYTES[str(name)]


def vllm_hybrid_pages(config: Mapping[str, Any], num_speculative_tokens: int = 0, *, tensor_parallel: int = 1,
                      mamba_cache_mode: str = "align", kv_bytes_per_value: float = 2.0,
                      state_bytes_per_value: float | None = None, conv_bytes_per_value: float = 2.0,
                      kernel_block_alignment: int = 16, max_model_len: int | None = None,
                      mamba_block_size: int | None = None, prefill_checkpoint_blocks: int = 0) -> VllmHybridPages:
    """The blocks and pages vLLM gives a model whose layers are full attention and Gated DeltaNet (Qwen3-Next,
    Qwen3.5), from its `config.json`, as `Platform._align_hybrid_block_size` (vllm/platforms/interface.py; earlier
    `HybridAttentionMambaModelConfig.verify_and_update_config` in vllm/model_executor/models/config.py) sets them.

    Per rank, an attention layer's page for one token is a = 2 x max(1, KV heads // TP) x head_dim x kv bytes, and a
    state block is s bytes (`vllm_linear_state_bytes`' block, its heads and channels divided by TP). vLLM makes the
    two pages equal: in "none" and "align" the attention block becomes A x ceil(s / (A a)) tokens, A the kernel block
    alignment (the larger of the attention backend's smallest kernel block, 16 for FlashAttention, and --block-size,
    16 by default); in "all", L x ceil(ceil(s / a) / L) with L = lcm(mamba_block_size, A), which also becomes the
    state's block. Every state block is then padded to that page (`mamba_page_size_padded`), and a sequence's
    full-attention tokens are held in whole blocks of it. Qwen3.5-27B at TP 1: a = 4,096 bytes, s = 3,207,168, a
    784-token block, 0.13% padding. prefill_checkpoint_blocks: newer vLLM's extra "align" blocks (0 for Gated
    DeltaNet by default). state_bytes_per_value: None reads vLLM's default from the config
    (`vllm_state_bytes_per_value`: Qwen3.5 float32, Qwen3-Next bf16)."""
    c = _text_config(config)
    tp = check_int("tensor_parallel", tensor_parallel, 1)
    n = check_int("num_speculative_tokens", num_speculative_tokens, 0)
    check_choice("mamba_cache_mode", mamba_cache_mode, MAMBA_CACHE_MODES)
    align = check_int("kernel_block_alignment", kernel_block_alignment, 1)
    check_int("prefill_checkpoint_blocks", prefill_checkpoint_blocks, 0)
    if prefill_checkpoint_blocks and mamba_cache_mode != "align":
        raise ValueError(f"prefill_checkpoint_blocks={prefill_checkpoint_blocks} counts in mamba_cache_mode 'align' "
                         f"only, got {mamba_cache_mode!r}")
    _check_cache_mode_lengths(mamba_cache_mode, max_model_len, mamba_block_size)
    kv_bytes_per_value = check_positive_float("kv_bytes_per_value", kv_bytes_per_value)
    if state_bytes_per_value is not None:
        state_bytes_per_value = check_positive_float("state_bytes_per_value", state_bytes_per_value)
    conv_bytes_per_value = check_positive_float("conv_bytes_per_value", conv_bytes_per_value)
    plan = config_kv_plan(c)  # refuses what the calculator does not model, before anything below
    kinds = {p.kind for p in plan.parts}
    if plan.latent or kinds != {"full_attention", "linear_attention"}:
        raise ValueError(f"vllm_hybrid_pages lays out full-attention and Gated DeltaNet layers only; this config has "
                         f"{sorted(kinds)}{' with latent attention' if plan.latent else ''}")
    full = next(p for p in plan.parts if p.kind == "full_attention")
    linear = next(p for p in plan.parts if p.kind == "linear_attention")
    n_kv, d_head = config_kv_heads(c), hf_head_dim(c)
    if full.values_per_token != 2 * n_kv * d_head:
        raise ValueError("the full-attention layers' heads differ from num_key_value_heads x head_dim: not laid out")
    per_token = int(round(2 * max(1, n_kv // tp) * d_head * kv_bytes_per_value))  # vLLM's get_num_kv_heads
    if state_bytes_per_value is None:  # vLLM's default for this model (Qwen3.5: float32, Qwen3-Next: bf16)
        state_bytes_per_value = vllm_state_bytes_per_value(config)
    state = _gdn_page(c, n, tp, state_bytes_per_value, conv_bytes_per_value)
    if mamba_cache_mode == "all":
        unit = math.lcm(mamba_block_size, align)  # type: ignore[arg-type]
        block = unit * math.ceil(math.ceil(state / per_token) / unit)
    else:
        block = align * math.ceil(state / (align * per_token))
    blocks = _state_blocks(mamba_cache_mode, n, max_model_len, block, prefill_checkpoint_blocks)
    return VllmHybridPages(tp, full.layers, linear.layers, per_token, state, block, blocks)


# what a config's per-block attention settings (Nemotron's DeciLM block_configs) may hold, and what is refused
_BLOCK_REFUSED = ("num_sink_tokens", "sparsify", "unshifted_sink", "use_prefill_window_in_sink_attention")


def _block_layers(c: Mapping[str, Any], n_heads: int) -> list[tuple[str, int, int | None]]:
    """(kind, KV heads, window) per layer from block_configs: a no_op or replace_with_linear attention holds no
    cache; n_heads_in_group query heads share a KV head; window_length makes the layer slide."""
    blocks = c["block_configs"]
    n = _stated(c, "num_hidden_layers")
    if not isinstance(blocks, list) or len(blocks) != n:
        raise ValueError(f"block_configs must list one block per layer ({n}), got "
                         f"{len(blocks) if isinstance(blocks, list) else type(blocks).__name__}")
    out: list[tuple[str, int, int | None]] = []
    for i, b in enumerate(blocks):
        a = b.get("attention") if isinstance(b, Mapping) else None
        if not isinstance(a, Mapping):
            raise ValueError(f"block_configs[{i}] has no 'attention' dict")
        used = [k for k in _BLOCK_REFUSED if a.get(k)]
        if used:
            raise ValueError(f"block_configs[{i}]['attention'] sets {used}, which this calculator does not model")
        if a.get("no_op") or a.get("replace_with_linear"):
            out.append(("no_attention", 0, None))
            continue
        group = check_int(f"block_configs[{i}]['attention']['n_heads_in_group']", a.get("n_heads_in_group"), 1)
        if n_heads % group:
            raise ValueError(f"block_configs[{i}]: n_heads_in_group={group} must divide num_attention_heads={n_heads}")
        window = a.get("window_length")
        out.append(("sliding_attention" if window else "full_attention", n_heads // group,
                    None if not window else check_int(f"block_configs[{i}]['attention']['window_length']", window, 1)))
    return out


# Keys by which a hybrid config places its attention layers among Mamba layers (transformers 5.15's config
# classes): config_kv_plan refuses them by name rather than count every layer as attention
_MAMBA_LAYOUT_KEYS: dict[str, str] = {
    "hybrid_override_pattern": "Nemotron-H: a letter per block, attention, Mamba or MLP",
    "layers_block_type": "Nemotron-H, Zamba, Zamba2: a kind per block",
    "attn_layer_period": "Jamba: one attention layer in every attn_layer_period, the rest Mamba",
    "attn_layer_offset": "Jamba: where in each period the attention layer sits, the rest Mamba",
    "attn_layer_indices": "Bamba: the attention layers' indices, the rest Mamba",
    "hybrid_layer_ids": "Zamba2: the layers that add the shared attention block to their Mamba mixer",
    "linear_attn_config": "Kimi Linear, Kimi K3: kda_layers and full_attn_layers (from 1) place Kimi Delta "
                          "Attention layers, each with a fixed-size state, among NoPE latent-attention layers",
    "full_attn_idxs": "LFM2: the attention layers' indices, the rest short-convolution blocks",
}
# Layer kinds transformers 5 reads as linear attention whose state is not Gated DeltaNet's (configuration_utils'
# legacy remap): refused by the kind the config names
_UNMODELLED_LAYER_KINDS: dict[str, str] = {
    "mamba": "Mamba-2 mixers, as in Granite 4.0-H: a convolution window and an SSM state per layer",
    "conv": "short-convolution blocks, as in LFM2: a convolution window per layer",
}
# Keys of a Mamba mixer's shape: a config with them but no layer_types (Falcon-H1, whose every layer runs attention
# and Mamba side by side) holds a state the calculator does not count
_MAMBA_STATE_KEYS: tuple[str, ...] = ("mamba_d_state", "mamba_n_heads", "ssm_state_size")
# DeepSeek-V4's compressed attention, in the published config.json's legacy form (compress_ratios per layer: 0 a
# window only, 4 compressed sparse attention, 128 heavily compressed) or as transformers 5.15's DeepseekV4Config
# saves it (compress_rates): refused by these fields or by model_type, before layer_types is read, because the legacy
# form has no layer_types and would otherwise be read as sliding layers alone
_COMPRESSED_ATTENTION_KEYS: tuple[str, ...] = ("compress_ratios", "compress_rates", "compress_rate_csa",
                                               "compress_rate_hca", "compress_rope_theta")
_INDEXER_KEYS: tuple[str, ...] = ("index_topk", "index_n_heads", "index_head_dim")


def _refuse_compressed_attention(c: Mapping[str, Any]) -> None:
    """Raise for a DeepSeek-V4 config (model_type deepseek_v4, or any of _COMPRESSED_ATTENTION_KEYS), naming the
    fields it carries and the three things this calculator does not model."""
    keys = [k for k in _COMPRESSED_ATTENTION_KEYS if c.get(k) is not None]
    if c.get("model_type") != "deepseek_v4" and not keys:
        return
    def stated(key: str) -> str:
        value = c[key]
        if key == "compress_ratios" and isinstance(value, list):
            ratios = sorted({r for r in value if isinstance(r, int)})
            return f"compress_ratios ({len(value)} entries, each of {ratios})"
        return f"{key}={value!r}"

    seen = ", ".join([f"model_type={c.get('model_type')!r}"] + [stated(k) for k in keys]
                     + [stated(k) for k in _INDEXER_KEYS if c.get(k) is not None])
    raise ValueError(
        f"the config describes DeepSeek-V4's compressed attention ({seen}): besides its sliding_window of recent "
        "tokens a layer with a compressor caches compressed entries (one for every 4 tokens in compressed sparse "
        "attention, every 128 in heavily compressed attention), its one shared KV head is a single tensor read as "
        "both key and value (512 values a token, not a K and a V), and the indexer keeps keys of its own; this "
        "calculator models none of the three, so it refuses the config rather than price the windows alone")


def _olmo_hybrid_linear_fields(c: Mapping[str, Any]) -> Mapping[str, Any]:
    """An OLMo Hybrid config with its Gated DeltaNet widths filled in as OlmoHybridConfig.__post_init__ fills them
    (transformers 5.15): key and value heads num_attention_heads, key width int(0.75 hidden_size / key heads), value
    width twice that, kernel 4. Other configs are returned as they are."""
    if c.get("model_type") != "olmo_hybrid":
        return c
    filled = dict(c)
    heads = _stated(c, "num_attention_heads")
    if filled.get("linear_num_key_heads") is None:
        filled["linear_num_key_heads"] = heads
    if filled.get("linear_num_value_heads") is None:
        filled["linear_num_value_heads"] = heads
    if filled.get("linear_key_head_dim") is None:
        hidden = _stated(c, "hidden_size")
        filled["linear_key_head_dim"] = int(0.75 * hidden / check_int("linear_num_key_heads",
                                                                      filled["linear_num_key_heads"], 1))
    if filled.get("linear_value_head_dim") is None:
        filled["linear_value_head_dim"] = 2 * check_int("linear_key_head_dim", filled["linear_key_head_dim"], 1)
    if filled.get("linear_conv_kernel_dim") is None:
        filled["linear_conv_kernel_dim"] = 4
    return filled


def config_kv_plan(config: Mapping[str, Any], bytes_per_value: float = 2.0,
                   state_bytes_per_value: float = 4.0) -> KVCachePlan:
    """The KV cache a model's `config.json` implies (a dict; a multimodal config's text_config is used).

    Read as the configs state it: `config_kv_heads` (every spelling of the KV heads), head_dim (default
    hidden_size / num_attention_heads; Gemma 4's full layers: the heads and width its per_layer_config gives
    them, as a config saved by transformers 5 states them, else global_head_dim, 512 by default, with
    num_global_key_value_heads where attention_k_eq_v is set), `config_layer_types` (layer_types,
    full_attention_interval, ...), sliding_window, attention_chunk_size, kv_lora_rank with qk_rope_head_dim for latent attention (the
    latent and the rotary key, `transformer.latent.mla_cache_values`), Nemotron's per-layer block_configs,
    Gemma 4's num_kv_shared_layers (the last layers reuse an earlier layer's cache and hold none).
    Linear-attention layers (Qwen3-Next, Qwen3.5) hold a fixed-size state, counted apart
    (`LayerCache.fixed_values`, its recurrent part at state_bytes_per_value: 4, float32, as transformers 5.15
    holds it; vLLM follows the config's mamba_ssm_dtype, else the model's dtype); kinds this calculator does not
    model are refused by name: DeepSeek-V4's compressed attention (by model_type or its compress_* fields, in the
    published form with compress_ratios and no layer_types as in the one transformers 5.15 saves), and attention
    placed among Mamba layers
    (Nemotron-H, Jamba, Bamba, Zamba, Zamba2: `_MAMBA_LAYOUT_KEYS`) or beside a Mamba mixer in every layer
    (Falcon-H1)."""
    c = _text_config(config)
    model_type = str(c.get("model_type", ""))
    if model_type in ("modernbert", "bert", "t5"):
        raise ValueError(f"model_type {c.get('model_type')!r} is not a decoder-only model: it keeps no KV cache")
    _refuse_compressed_attention(c)
    if c.get("sparse_attention_config") is not None:  # MiniMax-M3's published form
        raise ValueError("the config has a sparse_attention_config (MiniMax-M3's Lightning Indexer): its sparse layers "
                         "also cache an indexer key per token (MiniMaxM3VLSparseCacheLayer.idx_keys), which this "
                         "calculator does not model, so it refuses the config rather than price it as full attention")
    if model_type == "olmo_hybrid" and c.get("layer_types") is None:
        raise ValueError("model_type='olmo_hybrid' with no layer_types: OlmoHybridConfig fills them in itself (every "
                         "4th layer full attention, the last one where none is), a rule this calculator does not "
                         "apply; give layer_types as a config saved by transformers states them")
    c = _olmo_hybrid_linear_fields(c)
    bytes_per_value = check_positive_float("bytes_per_value", bytes_per_value)
    for key in _MAMBA_LAYOUT_KEYS:  # attention beside Mamba layers: a layout this calculator does not read
        if c.get(key) is not None:
            raise ValueError(f"the config lays out its layers by {key}={c[key]!r} ({_MAMBA_LAYOUT_KEYS[key]}), "
                             "which this calculator does not read: it would count every layer as attention and "
                             "miss the other layers' state")
    raw_kinds = c.get("layer_types")
    other = sorted({t for t in raw_kinds if t in _UNMODELLED_LAYER_KINDS}) if isinstance(raw_kinds, list) else []
    if other:
        raise ValueError(f"layer_types has {other} layers ({'; '.join(_UNMODELLED_LAYER_KINDS[t] for t in other)}): "
                         "their state is not the Gated DeltaNet state this calculator counts, so it does not price "
                         "this model (the config is not at fault)")
    mamba = sorted(k for k in _MAMBA_STATE_KEYS if c.get(k) is not None)
    if mamba and c.get("layer_types") is None:
        raise ValueError(f"the config has Mamba mixers ({', '.join(f'{k}={c[k]!r}' for k in mamba)}) and no "
                         "layer_types to say where they are (Falcon-H1 runs one beside the attention in every layer; "
                         "Bamba without attn_layer_indices makes every layer Mamba): this calculator counts attention "
                         "caches and Gated DeltaNet states only, so it would miss their state")
    n_heads = _stated(c, "num_attention_heads")
    latent = c.get("kv_lora_rank")
    if latent is not None:
        check_int("kv_lora_rank", latent, 1)
        rope = check_int("qk_rope_head_dim", c.get("qk_rope_head_dim"), 1)
        per_layer_values = {"*": mla_cache_values(1, latent, rope)}
    if c.get("block_configs") is not None:
        if latent is not None:
            raise ValueError("block_configs with kv_lora_rank: this calculator reads one or the other")
        d_head = hf_head_dim(c)
        layers = [(k, 2 * h * d_head, w) for k, h, w in _block_layers(c, n_heads)]
    else:
        kinds = config_layer_types(c)
        unknown = sorted(set(kinds) - set(LAYER_KINDS) - {"linear_attention"})
        if unknown:
            raise ValueError(f"layer_types has {unknown} layers, whose cache this calculator does not model (it "
                             f"counts {', '.join(LAYER_KINDS)} and linear_attention)")
        n_kv = config_kv_heads(c)
        v_width = c.get("v_head_dim")
        if latent is None and v_width is not None and v_width != hf_head_dim(c):
            raise ValueError(f"the config gives values their own width (v_head_dim={v_width!r}, head_dim="
                             f"{hf_head_dim(c)}; MiMo-V2-Flash caches 192-wide keys and 128-wide values): this "
                             "calculator counts a key and a value of one width, so it refuses rather than overcount")
        caps = {"full_attention": None, "sliding_attention": c.get("sliding_window"),
                "chunked_attention": c.get("attention_chunk_size"), "linear_attention": None}
        for kind, key in (("sliding_attention", "sliding_window"), ("chunked_attention", "attention_chunk_size")):
            if kind in kinds:
                if caps[kind] is None:
                    raise ValueError(f"layer_types has {kind} layers but the config gives no {key}")
                caps[kind] = check_int(key, caps[kind], 1)
        overrides = hf_layer_overrides(c)
        layers = []
        for i, kind in enumerate(kinds):
            if kind == "linear_attention":
                layers.append((kind, 0, None))
            elif latent is not None:
                layers.append((kind, per_layer_values["*"], caps[kind]))
            elif i in overrides:  # transformers 5's per_layer_config: this layer's own heads and width
                o = overrides[i]
                heads = check_int(f"per_layer_config[{i}] num_key_value_heads", o.get("num_key_value_heads", n_kv), 1)
                width = check_int(f"per_layer_config[{i}] head_dim", o.get("head_dim", hf_head_dim(c)), 1)
                layers.append((kind, 2 * heads * width, caps[kind]))
            elif kind == "full_attention" and model_type.startswith(GLOBAL_HEAD_FAMILIES):
                # Gemma4TextConfig gives the full layers num_global_key_value_heads only under attention_k_eq_v
                # (a field whose default is False)
                heads = c.get("num_global_key_value_heads") if c.get("attention_k_eq_v", False) else None
                heads = n_kv if heads is None else check_int("num_global_key_value_heads", heads, 1)
                layers.append((kind, 2 * heads * hf_head_dim(c, "full_attention"), None))
            else:
                layers.append((kind, 2 * n_kv * hf_head_dim(c), caps[kind]))
        shared = c.get("num_kv_shared_layers") or 0
        if shared:
            check_int("num_kv_shared_layers", shared, 0)
            layers = layers[:len(layers) - shared] + [("no_attention", 0, None)] * shared
    state, recurrent = _linear_state_values(c) if any(k == "linear_attention" for k, _, _ in layers) else (0, 0)
    state_bytes_per_value = check_positive_float("state_bytes_per_value", state_bytes_per_value)
    groups: dict[tuple[str, int, int | None], int] = {}
    for key in layers:
        groups[key] = groups.get(key, 0) + 1
    order = LAYER_KINDS + ("linear_attention",)
    parts = tuple(LayerCache(kind, count, values, cap, *((state, recurrent) if kind == "linear_attention" else (0, 0)))
                  for (kind, values, cap), count in sorted(groups.items(), key=lambda kv: (order.index(kv[0][0])
                  if kv[0][0] in order else len(order), -kv[0][1])) if kind != "no_attention")
    if not parts:
        raise ValueError("the config has no layer that keeps a cache")
    return KVCachePlan(parts, bytes_per_value, latent is not None, state_bytes_per_value)


# ---------------------------------------------------------------------------
# Whether a budget fits a device
# ---------------------------------------------------------------------------


# What two "80 GB" accelerators hold, in bytes, as nvidia-smi reports memory.total (MiB): an A100-SXM4-80GB 81,920 MiB
# = 80 GiB, an H100 80GB HBM3 81,559 MiB = 85,520,809,984 bytes = 79.65 GiB. What a process can use is less: the total
# CUDA reports (torch.cuda.mem_get_info, the "total capacity" of PyTorch's out-of-memory message) is smaller still,
# about 79.1-79.3 GiB on either card, and the CUDA context takes a few hundred MiB of it
ACCELERATOR_BYTES: dict[str, int] = {"A100 80GB": 81_920 * 2**20, "H100 80GB": 81_559 * 2**20}

# The share of a device's memory vLLM plans its weights, activations and cache within by default
# (`CacheConfig.gpu_memory_utilization` in vllm/config/cache.py: 0.92 on current main, 0.9 in earlier releases)
VLLM_GPU_MEMORY_UTILIZATION: float = 0.92


@dataclass(frozen=True)
class DeviceFit:
    """Named byte counts against a device whose label says `label` (e.g. "80 GB"), read both ways, and against
    the bytes real devices hold (`devices`, e.g. ACCELERATOR_BYTES)."""

    parts: tuple[tuple[str, int], ...]
    label: float
    devices: tuple[tuple[str, int], ...] = ()
    utilization: float | None = None  # a serving engine's share of each device (vLLM's gpu_memory_utilization)

    @property
    def total(self) -> int:
        return sum(n for _, n in self.parts)

    @property
    def headroom_decimal(self) -> float:
        """label * 10^9 - total: bytes left if the label counts gigabytes (GB)."""
        return self.label * 1e9 - self.total

    @property
    def headroom_binary(self) -> float:
        """label * 2^30 - total: bytes left if the label counts gibibytes (GiB)."""
        return self.label * 2**30 - self.total

    def headroom_on(self, name: str) -> int:
        """Bytes left on the device `name` of `devices` (its total memory - total)."""
        sizes = dict(self.devices)
        check_choice("device", name, tuple(sizes))
        return sizes[name] - self.total

    def headroom_within(self, name: str) -> float:
        """Bytes left within `utilization` of the device `name`: utilization x its memory - total. An upper bound on
        what the engine has left: the memory CUDA reports is smaller than nvidia-smi's total."""
        if self.utilization is None:
            raise ValueError("headroom_within needs the fit's utilization: give device_fit(..., utilization=0.92)")
        sizes = dict(self.devices)
        check_choice("device", name, tuple(sizes))
        return self.utilization * sizes[name] - self.total

    def __repr__(self) -> str:
        total = self.total
        terms = " + ".join(f"{name} {format_bytes(n).split(' (')[0]}" for name, n in self.parts)
        lines = [f"{terms} = {format_bytes(total)}"]

        def verdict(room: float) -> str:
            return (f"{room / 2**30:,.2f} GiB left for everything else" if room >= 0
                    else f"over by {-room / 2**30:,.2f} GiB ({-room / 1e9:,.2f} GB)")

        for unit, room, size in (("GB", self.headroom_decimal, self.label * 1e9),
                                 ("GiB", self.headroom_binary, self.label * 2**30)):
            other = f"{size / 2**30:,.2f} GiB" if unit == "GB" else f"{size / 1e9:,.2f} GB"
            lines.append(f"  against {self.label:g} {unit} ({other}): {verdict(room)}")
        for name, size in self.devices:
            lines.append(f"  on an {name} ({size / 2**30:,.2f} GiB): {verdict(size - total)}")
        if self.utilization is not None:
            for name, size in self.devices:
                lines.append(f"  within {self.utilization:g} of an {name} (at most {self.utilization * size / 2**30:,.2f}"
                             f" GiB): {verdict(self.utilization * size - total)}")
        return "\n".join(lines)


def device_fit(parts: dict[str, float], label: float = 80.0, devices: Mapping[str, int] | None = None,
               utilization: float | None = None) -> DeviceFit:
    """Sum named byte counts (a cache, the weights, ...) and compare them with a device labelled
    `label`, read as label * 10^9 bytes (GB) and as label * 2^30 bytes (GiB), with each of `devices`
    (name -> the bytes it holds, e.g. ACCELERATOR_BYTES: an H100 80GB holds 79.65 GiB, an A100 80GB 80 GiB), and,
    given utilization (e.g. VLLM_GPU_MEMORY_UTILIZATION, 0.92), with that share of each device: what a serving
    engine plans within, at most (it takes the share of the smaller total CUDA reports).

    The two readings of the label differ by 7.4%; a sum between them "fits" or not depending on the unit.
    What the sum leaves out (activations, quantisation scales and outliers, the runtime's own
    memory) has to fit in the headroom.
    """
    if not isinstance(parts, dict) or not parts:
        raise ValueError("parts must be a non-empty dict of name -> bytes, e.g. {'cache': 2**36}")
    checked = []
    for name, n in parts.items():
        if not isinstance(n, (int, float)) or isinstance(n, bool):
            raise TypeError(f"parts[{name!r}] must be a number of bytes, got {type(n).__name__} ({n!r})")
        if not math.isfinite(n) or n < 0:
            raise ValueError(f"parts[{name!r}] must be a finite number of bytes >= 0, got {n!r}")
        checked.append((str(name), int(round(n))))
    label = check_positive_float("label", label)
    sized: list[tuple[str, int]] = []
    if devices is not None:
        if not isinstance(devices, Mapping):
            raise TypeError(f"devices must be a dict of name -> bytes (e.g. ACCELERATOR_BYTES), got "
                            f"{type(devices).__name__} ({devices!r})")
        sized = [(str(k), check_int(f"devices[{k!r}]", v, 1)) for k, v in devices.items()]
    if utilization is not None:
        utilization = check_positive_float("utilization", utilization)
        if utilization > 1 or not sized:
            raise ValueError(f"utilization must be a share of the devices, 0 < utilization <= 1, given with devices; got "
                             f"{utilization!r} with {len(sized)} devices")
    return DeviceFit(tuple(checked), label, tuple(sized), utilization)
