"""From a Hugging Face config to the library's settings, and a Llama's weights into a GPT.

A `config.json` states a RoPE model's positions in one of two layouts:

    transformers 4.x   rope_theta, partial_rotary_factor, max_position_embeddings at the top level and
                       the scaling in the rope_scaling dict
    transformers 5     one rope_parameters dict: rope_type, rope_theta, partial_rotary_factor and the
                       scaling's keys, per layer type where the layer kinds rotate differently

How transformers reads them (`modeling_rope_utils.py`: 5.15's `standardize_rope_params` and
`ROPE_INIT_FUNCTIONS`, and 4.57's) is what this module reproduces, key by key, for both layouts; a
multimodal config is read through its text config. Where transformers would read a key and not
use it, or where the two layouts, the two versions or transformers and vLLM would give the same
config different values, this module refuses with a sentence saying which key and why; where
transformers only warns about a value it then uses as stated (Llama 4 Scout's llama3 scaling with
low_freq_factor = high_freq_factor: an empty blend band), the value is read as stated. Nothing is
dropped silently.

    hf_text_config(config)            -> a multimodal config's text config (the config itself otherwise)
    hf_rope_layout(config)            -> which layout the config uses
    hf_rope_parameters(config)        -> per layer type, its RoPE settings in transformers 5's form
    hf_rope_pairing(config)           -> which channels the checkpoint rotates together: "half" or "interleaved"
    rope_options_from_hf(config)      -> the `GPTConfig.rope` dict: base, pairing, scaling and its parameters
    rope_scaling_from_hf(config)      -> the `RopeScaling` alone (with the head's rotary width)
    gpt_config_from_hf(config)        -> a GPTConfig (Llama-layout decoders)
    gpt_from_hf_llama(hf_model)       -> a GPT holding a LlamaForCausalLM's weights, logits equal to its own
    every_nth(n_layers, n, kind, other) -> per layer, `kind` at every n-th layer: the interval rule configs use
    hf_rotating_layers(config)        -> per layer, whether it rotates (False: a NoPE layer)
    hf_layer_types(config)            -> per layer, its attention kind ("full_attention", "sliding_attention", ...):
                                         stated, else the pattern the family's config class builds (Gemma 3: 5
                                         sliding : 1 full; gpt-oss: alternating; Cohere 2: 3 : 1), else refused
    hf_sliding_window(config)         -> the sliding layers' window: stated, else the family's class default

A Hub config.json often states only what differs from its class (google/gemma-3-4b-it's text_config names no
layer pattern and no base): the class's layer pattern, window and RoPE defaults are applied as transformers 5.15's
config classes apply them (tests/test_hf_layer_patterns.py builds every family's class from the same minimal dicts),
or the config is refused by name where this module does not reproduce them. Heads and head_dim are not filled.

How the scaling keys map (the same names in rope_scaling and rope_parameters):

    rope_type ("type" in older configs)     "default" -> "none"; linear, dynamic, yarn, llama3, longrope,
                                            proportional (transformers 5, Gemma 4's global layers);
                                            "mrope" (Qwen2-VL) is default RoPE with M-RoPE sections,
                                            "su" (Phi-3) is longrope
    partial_rotary_factor                   the head's first int(p head_dim) channels rotate; for
                                            proportional, rotated_fraction: the whole head turns on its
                                            own ladder, the pairs past the first floor(p head_dim / 2) at 0
    factor                                  factor (longrope: max_position_embeddings /
                                            original_max_position_embeddings when the factor is absent)
    original_max_position_embeddings        original_max_len (yarn, llama3: falls back to max_position_embeddings;
                                            dynamic: transformers uses max_position_embeddings, always;
                                            longrope: the top-level field first, as Phi-3 writes it)
    beta_fast, beta_slow, truncate          yarn's ramp
    attention_factor, mscale, mscale_all_dim
                                            yarn's factor on cos and sin (longrope: attention_factor)
    low_freq_factor, high_freq_factor       llama3
    short_factor, long_factor               longrope
    mrope_section, mrope_interleaved        M-RoPE's split of the pairs over (time, height, width): for
                                            text tokens the three positions are equal, so they change nothing.
                                            transformers' model code fixes the order per family
                                            (MROPE_INTERLEAVED_FAMILIES interleave, Qwen2-VL's split in blocks)
                                            and never reads mrope_interleaved; vLLM reads it (false by default)

`config` may be a `transformers.PretrainedConfig` (4.x or 5) or a plain dict read from a config.json.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, fields, is_dataclass
from os import PathLike
from typing import Any, Mapping

import torch
from torch import nn

from mlbook.transformer.models import GPT, ROPE_OPTIONS, GPTConfig
from mlbook.transformer.positional import convert_rotary_weights
from mlbook.transformer.rope_scaling import RopeScaling
from mlbook.transformer.validate import check_bool, check_choice, check_int

__all__ = [
    "HF_ROPE_TYPES",
    "ROPE_KEYS_EVERY_FAMILY",
    "ROPE_KEYS_BY_FAMILY",
    "ROPE_KEYS_INERT_WHEN_FALSE",
    "ROPE_PAIRING_KEYS",
    "is_rope_key",
    "is_length_key",
    "LENGTH_KEYS_EVERY_FAMILY",
    "LENGTH_KEYS_BY_FAMILY",
    "check_rope_keys",
    "ATTRIBUTE_ALIASES",
    "hf_layer_overrides",
    "HF_SCALING_KEYS",
    "LEGACY_ROPE_TYPES",
    "MROPE_BLOCK_FAMILIES",
    "MROPE_INTERLEAVED_FAMILIES",
    "PER_LAYER_TYPE_ROPE_FAMILIES",
    "SLIDE_EVERY_LAYER",
    "EVERY_NTH_LAYER",
    "FIRST_OF_N_LAYER",
    "ONE_KIND_LAYERS",
    "LAST_LAYER_FULL",
    "WINDOW_SWITCH_FAMILIES",
    "WINDOW_FROM_LAYER",
    "HF_DEFAULT_SLIDING_WINDOW",
    "UNREAD_LAYER_PATTERNS",
    "hf_sliding_window",
    "TEXT_CONFIG_NAMES",
    "LEGACY_LAYER_TYPES",
    "DEFAULT_ROPE_THETA",
    "HF_DEFAULT_PARTIAL_ROTARY",
    "WHOLE_HEAD_ROTARY_FAMILIES",
    "HF_DEFAULT_THETA",
    "hf_get",
    "hf_text_config",
    "hf_rope_type",
    "hf_rope_layout",
    "hf_rope_parameters",
    "hf_rope_parameters_for",
    "hf_rope_layer_type",
    "hf_rope_base",
    "hf_rope_pairing",
    "hf_indexer_rope_pairing",
    "hf_rope_family",
    "HF_ROPE_PARAMETER_FAMILIES",
    "ROTARY_DIM_FAMILIES",
    "REMOTE_CODE_FAMILIES",
    "INTERLEAVED_PAIRING_FAMILIES",
    "ROPE_INTERLEAVE_FAMILIES",
    "hf_head_dim",
    "hf_rotary_dim",
    "rope_options_from_hf",
    "rope_scaling_from_hf",
    "gpt_config_from_hf",
    "gpt_from_hf_llama",
]

# transformers' rope_type -> the library's scaling name
HF_ROPE_TYPES: dict[str, str] = {
    "default": "none", "linear": "linear", "dynamic": "dynamic", "yarn": "yarn", "llama3": "llama3",
    "longrope": "longrope", "proportional": "proportional",
}

# The keys each rope_type reads (transformers 4.57.6 and 5.15, _validate_*_parameters and _compute_*_parameters),
# besides "rope_type" / "type", "rope_theta", "partial_rotary_factor" and the M-RoPE sections
HF_SCALING_KEYS: dict[str, frozenset[str]] = {
    "default": frozenset(),
    "linear": frozenset({"factor"}),
    "dynamic": frozenset({"factor", "original_max_position_embeddings"}),
    "yarn": frozenset({"factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "attention_factor",
                       "mscale", "mscale_all_dim", "truncate"}),
    "llama3": frozenset({"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"}),
    "longrope": frozenset({"factor", "original_max_position_embeddings", "short_factor", "long_factor",
                           "attention_factor"}),
    # transformers 5 only (Gemma 4's global layers); partial_rotary_factor is the share of pairs that turn
    "proportional": frozenset({"factor"}),
}

# Names other libraries or older configs use, and what to write instead
LEGACY_ROPE_TYPES: dict[str, str] = {
    "su": "'su' is what Phi-3's first configs called LongRoPE; transformers renames it only inside Phi3Config and "
          "Phi4MultimodalConfig (model_type 'phi3', 'phi4_multimodal'). Write rope_type='longrope'",
    "ntk": "transformers has no 'ntk' rope_type (5.15 warns, then raises KeyError when it builds the model); it is "
           "vLLM's NTKScalingRotaryEmbedding, whose fixed form multiplies the base by the factor s and divides every "
           "frequency by s ** (2 / d): in transformers that is rope_type='linear' with factor s ** (2 / d) at "
           "rope_theta base * s (with mixed_b it is 'mixed NTK', which transformers cannot express). It is not "
           "NTK-aware scaling (bloc97's larger base, base * s ** (d / (d - 2)): mlbook's ntk_base; static NTK-aware "
           "scaling is that base written as rope_theta, with no rope_scaling), and vLLM builds "
           "its table only up to max_position_embeddings (vllm#55910)",
    "default_rope": "write rope_type='default'",
}


# The attribute names GPT-J's and CodeGen's config classes map to their own keys (GPTJConfig.attribute_map,
# CodeGenConfig.attribute_map in transformers 5.15): their config.json writes n_embd, n_head, n_layer, n_positions
ATTRIBUTE_ALIASES: dict[str, dict[str, str]] = {
    family: {"hidden_size": "n_embd", "num_attention_heads": "n_head", "num_hidden_layers": "n_layer",
             "max_position_embeddings": "n_positions"} for family in ("gptj", "codegen")}


def hf_get(config: Any, key: str, default: Any = None) -> Any:
    """config[key] for a dict, getattr(config, key) for a config object; default when absent or None. For a
    GPT-J or CodeGen dict, a standard name (hidden_size, ...) is read under the family's own key (n_embd, ...),
    as its config class's attribute_map reads it."""
    if isinstance(config, Mapping):
        value = config.get(key)
        if value is None:
            alias = ATTRIBUTE_ALIASES.get(str(config.get("model_type", "")), {}).get(key)
            value = None if alias is None else config.get(alias)
    else:
        value = getattr(config, key, None)
    return default if value is None else value


def _check_config(config: Any) -> None:
    """Refuse what cannot be a config before anything reads it: a model name, a path, a number, a list."""
    if isinstance(config, (str, bytes, PathLike)):
        raise TypeError(f"config must be a transformers config or a dict read from config.json, got the string "
                        f"{config!r}: load it first (json.load(open(path)), or AutoConfig.from_pretrained(name) "
                        "where the hub is reachable)")
    if config is None or isinstance(config, (bool, int, float, list, tuple, set)) or not (
            isinstance(config, Mapping) or hasattr(config, "__dict__")):
        raise TypeError(f"config must be a transformers config or a dict read from config.json, got "
                        f"{type(config).__name__} ({config!r})")


# The names under which a composite (multimodal, encoder-decoder) config nests its text model, in the order
# transformers' PretrainedConfig.get_text_config() searches them
TEXT_CONFIG_NAMES: tuple[str, ...] = ("text_encoder", "decoder", "generator", "text_config")


def hf_text_config(config: Any) -> Any:
    """The config of the text model: a multimodal config's `text_config` (Llama 4, Gemma 3, Qwen3-VL, Qwen3.5),
    as transformers' `get_text_config()` finds it; the config itself when it nests none."""
    _check_config(config)
    if not isinstance(config, Mapping):
        get = getattr(config, "get_text_config", None)
        return get() if callable(get) else config
    found = [k for k in TEXT_CONFIG_NAMES if config.get(k) is not None]
    if len(found) > 1:
        raise ValueError(f"config nests several sub-configs {found}; pass the text model's one (e.g. config[{found[-1]!r}])")
    if not found:
        return config
    text = config[found[0]]
    if not isinstance(text, Mapping):
        raise TypeError(f"config[{found[0]!r}] must be a dict (the text model's config), got {type(text).__name__}")
    return text


def every_nth(n_layers: int, n: int, kind: Any, other: Any, *, first: bool = False) -> tuple[Any, ...]:
    """Per-layer values with `kind` at every n-th layer and `other` elsewhere, as configs state them:
    layers n-1, 2n-1, ... (first=False: Gemma 3's and Cohere 2's sliding_window_pattern, Gemma 2's and
    gpt-oss's alternation with n = 2, Llama 4's and SmolLM3's no_rope_layer_interval, Qwen3-Next's and
    Qwen3.5's full_attention_interval) or layers 0, n, 2n, ... (first=True: ModernBERT's
    global_attn_every_n_layers)."""
    check_int("n_layers", n_layers, 1)
    check_int("n", n, 1)
    return tuple(kind if (i % n == 0 if first else (i + 1) % n == 0) else other for i in range(n_layers))


# families whose configs state NoPE layers by no_rope_layer_interval, 4 by default (Llama4TextConfig, SmolLM3Config)
NOPE_INTERVAL_FAMILIES: tuple[str, ...] = ("llama4", "smollm3")


def _n_layers(config: Any) -> int:
    return check_int("num_hidden_layers", hf_get(config, "num_hidden_layers"), 1)


def hf_rotating_layers(config: Any) -> tuple[bool, ...]:
    """Per layer, whether it rotates its queries and keys, as transformers derives it.

    `mla_use_nope` (Kimi Linear, Kimi K3): no layer rotates; Cohere 2, Arcee's AFMoE and a windowed EXAONE 4 rotate
    only their sliding layers (global NoPE, in their model code); `no_rope_layers` when the config lists it
    (1 = the layer rotates, 0 = NoPE); otherwise, with
    `no_rope_layer_interval` (or a Llama 4 / SmolLM3 config, whose default interval is 4), layer i is
    NoPE when (i + 1) % interval == 0; otherwise every layer rotates. A multimodal config is read
    through its text config.
    """
    config = hf_text_config(config)
    n = _n_layers(config)
    if hf_get(config, "mla_use_nope") is not None and check_bool("mla_use_nope", hf_get(config, "mla_use_nope")):
        return (False,) * n  # Kimi Linear: its latent-attention layers rotate nothing (vLLM's kimi_linear.py)
    if hf_get(config, "model_type") == "olmo_hybrid" and _stated_null(config, "rope_theta"):
        return (False,) * n  # OlmoHybridModel builds no rotary module without a rope_theta
    model_type = str(hf_get(config, "model_type", ""))
    window = hf_get(config, "sliding_window")
    if model_type == "cohere2":  # Cohere2Attention rotates only where its layer has a window (modeling_cohere2.py)
        return tuple(t == "sliding_attention" and window is not None for t in hf_layer_types(config))
    if model_type == "afmoe":  # AfmoeAttention rotates only `if self.is_local_attention` (modeling_afmoe.py)
        return tuple(t == "sliding_attention" for t in hf_layer_types(config))
    if model_type == "exaone4" and window is not None:  # "global NoPE for hybrid attention" (modeling_exaone4.py)
        return tuple(t == "sliding_attention" for t in hf_layer_types(config))
    no_rope = hf_get(config, "no_rope_layers")
    if no_rope:
        if len(no_rope) != n:
            raise ValueError(f"no_rope_layers has {len(no_rope)} entries but num_hidden_layers is {n}")
        return tuple(bool(r) for r in no_rope)
    interval = hf_get(config, "no_rope_layer_interval")
    if interval is None and str(hf_get(config, "model_type", "")).startswith(NOPE_INTERVAL_FAMILIES):
        interval = 4
    if interval is None:
        return (True,) * n
    return every_nth(n, check_int("no_rope_layer_interval", interval, 1), False, True)


# Older layer-type names and the ones transformers 5 maps them to (configuration_utils._LEGACY_LAYER_TYPE_REMAP)
LEGACY_LAYER_TYPES: dict[str, str] = {"conv": "linear_attention", "mamba": "linear_attention",
                                      "attention": "full_attention"}
# families whose layer_types default to linear attention with every full_attention_interval-th layer full
# (Qwen3NextConfig, Qwen3_5TextConfig: interval 4 by default)
LINEAR_INTERVAL_FAMILIES: tuple[str, ...] = ("qwen3_next", "qwen3_5")

# --- The layer pattern a family's config class gives a config that lists no layer_types -------------------
#
# transformers 5.15 derives it per family, in each config class's __post_init__ (read, file by file:
# configuration_gemma2.py, configuration_gemma3.py, configuration_cohere2.py, configuration_gpt_oss.py, ...);
# tests/test_hf_layer_patterns.py builds every family's class from the same minimal dicts and compares.

# (n, key, nth, other): layer i is `nth` where (i + 1) % n == 0, `other` elsewhere; n is the config's `key` where the
# class reads one (Gemma3TextConfig and Cohere2Config: sliding_window_pattern; AfmoeConfig: global_attn_every_n_layers)
EVERY_NTH_LAYER: dict[str, tuple[int, str | None, str, str]] = {
    **{f: (2, None, "full_attention", "sliding_attention") for f in ("gemma2", "vaultgemma", "t5_gemma_module",
                                                                     "gpt_oss")},
    **{f: (6, "sliding_window_pattern", "full_attention", "sliding_attention") for f in ("gemma3_text", "t5gemma2_text",
                                                                                         "t5gemma2_decoder")},
    "gemma3n_text": (5, None, "full_attention", "sliding_attention"),
    **{f: (6, None, "full_attention", "sliding_attention") for f in ("gemma4_text", "gemma4_unified_text",
                                                                     "diffusion_gemma_text")},
    **{f: (4, "sliding_window_pattern", "full_attention", "sliding_attention") for f in ("cohere2", "exaone4",
                                                                                         "exaone_moe")},
    "olmo3": (4, None, "full_attention", "sliding_attention"),
    "afmoe": (4, "global_attn_every_n_layers", "full_attention", "sliding_attention"),
    "minimax": (2, None, "linear_attention", "full_attention"),
    "olmo_hybrid": (4, None, "full_attention", "linear_attention"),  # and the last layer full if none is
}
# (n, key): layer i is full where i % n == 0, sliding elsewhere (ModernBERT: global_attn_every_n_layers, 3)
FIRST_OF_N_LAYER: dict[str, tuple[int, str | None]] = {
    "cwm": (4, None), "granite_swa": (4, None), "granitemoe_swa": (4, None),
    "modernbert": (3, "global_attn_every_n_layers"), "modernbert-decoder": (3, "global_attn_every_n_layers"),
}
# every layer of one kind. (DeepSeek-V3.2's, GLM-5's and A.X K2's classes name every layer
# "deepseek_sparse_attention": the indexer picks keys from the whole cached context, one RoPE for every layer; this
# module reads those layers as full_attention, the kind its callers price and rotate)
ONE_KIND_LAYERS: dict[str, str] = {"muse_glimmer_assistant": "sliding_attention", "granitemoehybrid": "linear_attention"}
# the class's name for a layer kind -> the kind this module reads it as (see above)
SPARSE_AS_FULL: dict[str, str] = {"deepseek_sparse_attention": "full_attention"}
# families whose config class forces the last layer to full attention, stated pattern or default (Gemma4TextConfig
# warns "Last layer must use `full_attention`" and overwrites it)
LAST_LAYER_FULL: tuple[str, ...] = ("gemma4_text", "gemma4_unified_text", "diffusion_gemma_text")
# every layer slides when the config's window (stated, else the class default) is not null: the model code masks every
# layer with it (create_sliding_window_causal_mask; MinistralConfig writes it as layer_types)
SLIDE_EVERY_LAYER: tuple[str, ...] = ("mistral", "mixtral", "ministral", "ministral3", "starcoder2", "phi3", "phimoe",
                                      "doge", "phi4_multimodal", "voxtral_realtime_text")
# use_sliding_window (False by default) switches the window on, and then layer i slides from max_window_layers on (the
# class default given here; None: Qwen3MoeConfig, which has no max_window_layers and masks every layer)
WINDOW_SWITCH_FAMILIES: dict[str, int | None] = {
    "qwen2": 28, "qwen3": 28, "qwen2_vl_text": 80, "qwen2_5_vl_text": 80, "qwen2_5_omni_text": 28,
    "qwen2_5_omni_talker": 28, "deepseek_ocr2_encoder": 28, "qwen3_moe": None,
}
# layer i slides from max_window_layers on whenever the window is not null (no switch): Dots1Config
WINDOW_FROM_LAYER: dict[str, int] = {"dots1": 62, "qwen3_omni_moe_talker_code_predictor": 28}
# The window a config's sliding layers get when it states none: each class's sliding_window default (transformers
# 5.15), for the families above; tests/test_hf_layer_patterns.py reads every class's default again
HF_DEFAULT_SLIDING_WINDOW: dict[str, int | None] = {
    "gemma2": 4096, "vaultgemma": 4096, "t5_gemma_module": 4096, "gpt_oss": 128, "gemma3_text": 4096,
    "t5gemma2_text": 4096, "t5gemma2_decoder": 4096, "gemma3n_text": 512, "gemma4_text": 512, "gemma4_unified_text": 1024,
    "diffusion_gemma_text": 512, "cohere2": 4096, "exaone4": 4096, "exaone_moe": 4096, "olmo3": 4096, "afmoe": 1024,
    "cwm": 8192, "granite_swa": 128, "granitemoe_swa": 128, "modernbert": 64, "modernbert-decoder": 64,
    "muse_glimmer_assistant": 2048, "ministral": 4096, "mistral": 4096, "mixtral": None, "ministral3": None,
    "starcoder2": None, "phi3": None, "phimoe": None, "doge": None, "phi4_multimodal": None,
    "voxtral_realtime_text": 4096, "qwen2": 4096, "qwen3": 4096, "qwen2_vl_text": 4096, "qwen2_5_vl_text": 4096,
    "qwen2_5_omni_text": 32768, "qwen2_5_omni_talker": 32768, "deepseek_ocr2_encoder": 4096, "qwen3_moe": 4096,
    "dots1": 4096, "qwen3_omni_moe_talker_code_predictor": None, "qwen2_moe": 4096, "smollm3": None,
}
# families whose class builds its default pattern from keys this module does not reproduce: a config of theirs that
# lists no layer_types is refused by name
UNREAD_LAYER_PATTERNS: dict[str, str] = {
    "cohere2_moe": "Cohere2MoeConfig: first_k_dense_replace layers on prefix_dense_sliding_window_pattern, the rest "
                   "on sliding_window_pattern",
    "deepseek_v4": "DeepseekV4Config: compress_ratios, or heavily compressed and compressed sparse layers interleaved",
    "mimo_v2_flash": "MiMoV2FlashConfig: layer 0 and every sixth layer full",
    "falcon_h1": "FalconH1Config: hybrid layers (layers_block_type)", "zaya": "ZayaConfig: hybrid layers",
    "nemotron_h": "NemotronHConfig: hybrid_override_pattern", "zamba2": "Zamba2Config: hybrid layers",
    "muse_glimmer": "MuseGlimmerConfig: window layers with the last layer full",
    "muse_glimmer_text": "MuseGlimmerTextConfig: full layers counted from the last one",
    "muse_glimmer_vision": "MuseGlimmerVisionConfig: window layers with every fourth full",
}


def _stated(config: Any, key: str) -> bool:
    """Whether the config states key, null included (a config object: holds the attribute)."""
    return key in config if isinstance(config, Mapping) else hasattr(config, key)


def hf_sliding_window(config: Any) -> int | None:
    """The window transformers 5.15 gives the config's sliding layers: `sliding_window` as the config states it (null:
    none), else its family's class default (`HF_DEFAULT_SLIDING_WINDOW`: Gemma 2 and 3 4096, gpt-oss 128, ...); for the
    families whose use_sliding_window switch is off (Qwen2, Qwen3: off by default), None. A multimodal config: its
    text config's."""
    text = hf_text_config(config)
    family = str(hf_get(text, "model_type", ""))
    if _stated(text, "sliding_window"):
        window = text["sliding_window"] if isinstance(text, Mapping) else getattr(text, "sliding_window")
    else:
        window = HF_DEFAULT_SLIDING_WINDOW.get(family)
    if family in WINDOW_SWITCH_FAMILIES or family in ("qwen2_moe", "smollm3"):
        if not check_bool("use_sliding_window", hf_get(text, "use_sliding_window", False)):
            return None
    return None if window is None else check_int("sliding_window", window, 1)


def hf_layer_types(config: Any) -> tuple[str, ...]:
    """Each layer's attention kind, as transformers 5.15 derives it (a multimodal config: its text config's).

    `layer_types` when the config lists it (gpt-oss, recent Gemma and Qwen saves; older names mapped as
    transformers 5 maps them: "mamba" and "conv" -> "linear_attention", "attention" -> "full_attention");
    otherwise the pattern the family's config class builds (each class's __post_init__): Llama 4
    (`hf_rotating_layers`: rotating layers chunked, NoPE layers full); Qwen3-Next and Qwen3.5
    `full_attention_interval` (4 by default: every 4th layer full, the others linear attention); every n-th layer
    full (`EVERY_NTH_LAYER`: Gemma 2 and gpt-oss alternate, Gemma 3 5 sliding : 1 full by its
    `sliding_window_pattern`, 6 by default, Cohere 2 and OLMo 3 3 : 1); the first of every n (`FIRST_OF_N_LAYER`:
    ModernBERT); every layer sliding where the model code masks every layer with the window (`SLIDE_EVERY_LAYER`:
    Mistral, Mixtral, Phi-3, ...), the window being the stated one or the class default (`hf_sliding_window`);
    Qwen2/Qwen3's `use_sliding_window` (off by default) with `max_window_layers`; otherwise every layer full.

    Raises where a family's code builds no window from a sliding_window the config states (Llama, DeepSeek-V3, ...:
    every layer would attend to the whole context while the config says otherwise), and for the families whose
    default pattern this module does not reproduce (`UNREAD_LAYER_PATTERNS`). A config that names no model_type gives
    no family: a sliding_window there is read as Mistral's, every layer.
    """
    config = hf_text_config(config)
    n = _n_layers(config)
    model_type = str(hf_get(config, "model_type", ""))
    kinds = hf_get(config, "layer_types")
    if kinds is None and model_type == "granitemoehybrid":  # GraniteMoeHybridConfig.attribute_map
        kinds = hf_get(config, "layers_block_type")
    if kinds is not None:
        if isinstance(kinds, (str, bytes)) or not isinstance(kinds, (list, tuple)):
            raise TypeError(f"layer_types must be a list of layer kinds, got {type(kinds).__name__} ({kinds!r})")
        kinds = tuple(LEGACY_LAYER_TYPES.get(k, k) for k in kinds)
        if len(kinds) != n:
            raise ValueError(f"layer_types has {len(kinds)} entries but num_hidden_layers is {n}")
        if model_type in LAST_LAYER_FULL and kinds[-1] != "full_attention" and isinstance(config, Mapping):
            raise ValueError(f"layer_types ends with {kinds[-1]!r}, but transformers 5.15's config class for "
                             f"model_type={model_type!r} forces the last layer to full_attention (it warns and "
                             "overwrites the stated list): state full_attention for the last layer")
        return kinds
    if model_type in ("llama4", "llama4_text"):
        return tuple("chunked_attention" if r else "full_attention" for r in hf_rotating_layers(config))
    interval = hf_get(config, "full_attention_interval")
    if interval is not None or model_type.startswith(LINEAR_INTERVAL_FAMILIES):
        every = check_int("full_attention_interval", 4 if interval is None else interval, 1)
        return every_nth(n, every, "full_attention", "linear_attention")
    if model_type in UNREAD_LAYER_PATTERNS:
        raise ValueError(f"model_type={model_type!r} lists no layer_types, and its config class builds them from "
                         f"keys this library does not reproduce ({UNREAD_LAYER_PATTERNS[model_type]}): give layer_types")
    pattern_key = (EVERY_NTH_LAYER.get(model_type) or FIRST_OF_N_LAYER.get(model_type) or (None, None))[1]
    for key in ("sliding_window_pattern", "global_attn_every_n_layers"):
        if key != pattern_key and model_type and hf_get(config, key) is not None:
            raise ValueError(f"{key}={hf_get(config, key)!r} is stated, but transformers 5.15's config class for "
                             f"model_type={model_type!r} does not read it (its layer pattern is the class's own): "
                             "remove it, or give layer_types")
    if model_type in EVERY_NTH_LAYER or model_type in FIRST_OF_N_LAYER:
        every, key, nth, other = EVERY_NTH_LAYER.get(model_type) or (*FIRST_OF_N_LAYER[model_type],
                                                                     "full_attention", "sliding_attention")
        stated = None if key is None else hf_get(config, key, hf_get(config, "_" + key))
        if stated is not None and isinstance(stated, str):
            raise ValueError(f"{key}={stated!r}: a pattern written as letters is not one transformers 5.15's "
                             f"{model_type!r} class turns into layer types (it takes (i + 1) % pattern): give "
                             "layer_types")
        every = check_int(key or "pattern", every if stated is None else stated, 1)
        if model_type in ("exaone4", "exaone_moe") and hf_sliding_window(config) is None:
            raise ValueError(f"sliding_window is null for model_type={model_type!r}: its config class then sets "
                             "sliding_window_pattern 0 and fails building layer_types; give layer_types")
        out = list(every_nth(n, every, nth, other, first=model_type in FIRST_OF_N_LAYER))
        if model_type in LAST_LAYER_FULL or (model_type == "olmo_hybrid" and "full_attention" not in out):
            out[-1] = "full_attention"
        return tuple(out)
    if model_type in ONE_KIND_LAYERS:
        return (ONE_KIND_LAYERS[model_type],) * n
    if model_type == "lfm2":  # Lfm2Config: full at full_attn_idxs (every layer by default), convolutions elsewhere
        full = hf_get(config, "full_attn_idxs", list(range(n)))
        return tuple("full_attention" if i in full else "linear_attention" for i in range(n))
    if model_type == "bamba":  # BambaConfig.layers_block_type: attention at attn_layer_indices, Mamba elsewhere
        full = hf_get(config, "attn_layer_indices") or ()
        return tuple("full_attention" if i in full else "linear_attention" for i in range(n))
    if not model_type:  # no family named: the window every layer (Mistral's rule), or Qwen2's switch where stated
        window, use = hf_get(config, "sliding_window"), hf_get(config, "use_sliding_window")
        if window is None or (use is not None and not check_bool("use_sliding_window", use)):
            return ("full_attention",) * n
        first = 0 if use is None else check_int("max_window_layers", hf_get(config, "max_window_layers", n), 0)
        return tuple("sliding_attention" if i >= first else "full_attention" for i in range(n))
    window = hf_sliding_window(config)
    if model_type in SLIDE_EVERY_LAYER:
        return ("sliding_attention" if window is not None else "full_attention",) * n
    if model_type in WINDOW_SWITCH_FAMILIES or model_type in WINDOW_FROM_LAYER:
        default = WINDOW_SWITCH_FAMILIES.get(model_type, WINDOW_FROM_LAYER.get(model_type))
        first = 0 if default is None else check_int("max_window_layers", hf_get(config, "max_window_layers", default), 0)
        return tuple("sliding_attention" if window is not None and i >= first else "full_attention" for i in range(n))
    if model_type == "qwen2_moe":  # Qwen2MoeConfig: odd-numbered layers below max_window_layers slide
        first = check_int("max_window_layers", hf_get(config, "max_window_layers", 28), 0)
        return tuple("sliding_attention" if window is not None and (i + 1) % 2 and i < first else "full_attention"
                     for i in range(n))
    if model_type == "smollm3":  # SmolLM3Config: with use_sliding_window, the NoPE layers slide
        return tuple("sliding_attention" if window is not None and not r else "full_attention"
                     for r in hf_rotating_layers(config))
    stated = hf_get(config, "sliding_window")
    if stated is not None and (hf_get(config, "use_sliding_window") is None or hf_get(config, "use_sliding_window")):
        raise ValueError(f"sliding_window={stated!r} is stated, but transformers 5.15's code for model_type="
                         f"{model_type!r} builds no sliding layer from it (its config class has no layer pattern and "
                         "its model masks every layer causally): every layer attends to the whole context there. "
                         "Remove it, or give layer_types if the checkpoint was trained with a window")
    return ("full_attention",) * n


def _has(config: Any, key: str) -> bool:
    return hf_get(config, key) is not None


# families whose config class renames the legacy LongRoPE names "su" and "yarn" to "longrope" (Phi3Config,
# Phi4MultimodalConfig)
SU_FAMILIES: tuple[str, ...] = ("phi3", "phi4_multimodal")


def hf_rope_type(rope_scaling: Mapping[str, Any] | None, model_type: str | None = None, *,
                 field: str = "rope_scaling") -> str:
    """The RoPE type as transformers reads it from a rope_scaling / rope_parameters dict: rope_type,
    else the legacy "type", else "default".

    Names transformers renames are read as it reads them: "mrope" (Qwen2-VL's first configs) is
    default RoPE with M-RoPE sections; "su" (Phi-3's first name for LongRoPE) and "yarn" are
    "longrope" for the families whose config class renames them (`SU_FAMILIES`, given model_type). Raises for a type
    transformers does not compute, naming the fix where one is known (LEGACY_ROPE_TYPES), and when
    rope_type and type disagree. `field` is what the messages call the dict: the field the config states it in
    ("rope_scaling", "rope_parameters", "text_config.rope_parameters", ...).
    """
    if rope_scaling is None:
        return "default"
    if not isinstance(rope_scaling, Mapping):
        raise TypeError(f"{field} must be a dict (or None), got {type(rope_scaling).__name__} ({rope_scaling!r})")
    kinds = {rope_scaling[k] for k in ("rope_type", "type") if rope_scaling.get(k) is not None}
    if len(kinds) > 1:
        raise ValueError(f"{field} gives rope_type={rope_scaling['rope_type']!r} and type="
                         f"{rope_scaling['type']!r}; transformers reads rope_type. Keep one")
    kind = kinds.pop() if kinds else "default"
    if not isinstance(kind, str):
        raise TypeError(f"{field}'s rope_type must be a string, got {type(kind).__name__} ({kind!r})")
    if kind == "mrope":
        return "default"
    if kind in ("su", "yarn") and str(model_type or "").startswith(SU_FAMILIES):
        return "longrope"
    if kind in LEGACY_ROPE_TYPES:
        raise ValueError(f"{field} type {kind!r} is not one transformers computes: {LEGACY_ROPE_TYPES[kind]}")
    return check_choice(f"{field} type", kind, tuple(HF_ROPE_TYPES))


# --- Where a config keeps its RoPE settings: the two layouts -------------------------
#
#   transformers 4.x   rope_theta, partial_rotary_factor (GPT-NeoX: rotary_pct) and max_position_embeddings
#                      at the top level; the scaling in rope_scaling (None: no scaling)
#   transformers 5     one rope_parameters dict holding the type, the base (rope_theta), the partial
#                      rotary factor and the scaling's keys; a dict per layer type where the layer kinds
#                      rotate differently ({"full_attention": {...}, "sliding_attention": {...}});
#                      for llama3, yarn and longrope, original_max_position_embeddings moves inside
#                      (a top-level one first, as Phi-3 writes it)
#
# transformers 5 reads a 4.x config too (configuration_utils + modeling_rope_utils.convert_rope_params_to_dict
# and standardize_rope_params): rope_scaling, when given, becomes rope_parameters; rope_theta and
# partial_rotary_factor fill what the dict lacks (though a scaled type's init writes the config's
# partial_rotary_factor attribute over the dict's when the rotary module is built: _FILL_RULE). Where the two
# layouts, or the two versions, would give a config different values, this module refuses with both values named
# instead of choosing one.

# keys of a rope dict that are not the scaling's own
ROPE_BASE_KEYS: frozenset[str] = frozenset({"rope_type", "type", "rope_theta", "partial_rotary_factor"})
# M-RoPE (Qwen2-VL, Qwen3-VL, Qwen3.5): the rotary pairs split over (time, height, width) positions; for
# text tokens the three positions are equal, so each pair turns at its ordinary frequency
MROPE_KEYS: frozenset[str] = frozenset({"mrope_section", "mrope_interleaved"})
# The families whose transformers 5.15 rotary module interleaves the M-RoPE sections (apply_interleaved_mrope: pair i
# follows height where i % 3 == 1, width where i % 3 == 2, time elsewhere) whatever mrope_interleaved says: the model
# code never reads that key. Qwen2-VL, Qwen2.5-VL and Qwen2.5-Omni split the pairs in blocks (time, then height, then
# width). vLLM's get_rope reads mrope_interleaved instead, False when absent.
MROPE_INTERLEAVED_FAMILIES: tuple[str, ...] = ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "qwen3_omni_moe")
MROPE_BLOCK_FAMILIES: tuple[str, ...] = ("qwen2_vl", "qwen2_5_vl", "qwen2_5_omni")
# the types that move original_max_position_embeddings into the dict (standardize_rope_params)
_ORIGINAL_INSIDE = ("llama3", "yarn", "longrope")

# Which channels form a rotating pair in a checkpoint's q and k is fixed by the family's model code, not by a
# rope key (transformers 5.15, every modeling file that builds a text rotary embedding, scanned for
# view_as_complex, a rotate_half over x[..., 0::2] and x[..., 1::2] and interleaved apply functions, and each
# hit read): these rotate adjacent channels (x0, x1), (x2, x3), ... in their attention; every other family
# rotates channel i with channel i + d/2 (rotate_half), Llama's layout. One exception inside a family:
# DeepSeek-V3.2's lightning indexer rotates half pairs (DeepseekV32Indexer: "NON-interleaved (half-split)
# RoPE"), its latent attention interleaved ones; GLM-5's indexer is interleaved too
INTERLEAVED_PAIRING_FAMILIES: tuple[str, ...] = (
    "axk2", "cohere", "cohere2", "cohere2_moe", "deepseek_v2", "deepseek_v32", "deepseek_v4", "ernie4_5",
    "ernie4_5_moe", "ernie4_5_vl_moe", "ernie4_5_vl_moe_text", "glm", "glm4", "glm4v", "glm4v_text",
    "glm_moe_dsa", "glm_ocr", "glm_ocr_text", "helium", "llama4", "llama4_text", "longcat_flash",
)
# ... and these read the config's rope_interleave (default True): True rotates adjacent pairs
# (apply_rotary_pos_emb_interleave), False rotate_half's. Kimi K2's published config names model_type
# kimi_k2, which transformers does not know: its own code (auto_map, DeepseekV3ForCausalLM) is DeepSeek-V3's
ROPE_INTERLEAVE_FAMILIES: tuple[str, ...] = ("axk1", "deepseek_v3", "glm4_moe_lite", "kimi_k2", "mistral4",
                                             "youtu")
# Architectures whose family interleaves, for a config whose model_type transformers does not know (read from the
# config's top level: a multimodal wrapper keeps `architectures` there, not in its text config)
_INTERLEAVED_ARCHITECTURES: dict[str, str] = {"DeepseekV3ForCausalLM": "deepseek_v3",
                                              "DeepseekV2ForCausalLM": "deepseek_v2",
                                              "Llama4ForCausalLM": "llama4_text",
                                              "Llama4ForConditionalGeneration": "llama4_text"}

# Latent-attention families (transformers 5.15: their config classes, and only theirs, declare kv_lora_rank). Their
# attention caches a latent, not per-head keys and values, and multiplies the softmax scale by
# yarn_get_mscale(factor, mscale_all_dim) ** 2 when the RoPE dict is scaled and states mscale_all_dim
# (`yarn_apply_mscale` in each modeling file: DeepSeek-V3's (0.1 ln 40 + 1) ** 2 = 1.874; in 4.57 DeepseekV3Attention
# did so and DeepseekV2Attention did not), a factor no rotary embedding carries. A Llama-layout GPT reproduces
# neither: `gpt_config_from_hf` refuses them by name
LATENT_ATTENTION_FAMILIES: tuple[str, ...] = ("axk1", "axk2", "deepseek_v2", "deepseek_v3", "deepseek_v32",
                                              "glm4_moe_lite", "glm_moe_dsa", "kimi_k2", "longcat_flash", "minicpm3",
                                              "mistral4", "youtu")


# --- Which families this module reads -------------------------------------------------
#
# The model types whose transformers 5.15 config class declares rope_parameters: their model code builds its
# rotation from it (base, type, partial factor), as this module reads it. Scanned from 5.15's CONFIG_MAPPING (each
# class's annotations, through its bases); tests/test_hf_families.py scans it again. A multimodal wrapper (gemma3,
# qwen3_5, llama4, ...) is read through its text config, whose model type is here.
HF_ROPE_PARAMETER_FAMILIES: tuple[str, ...] = (
    'EvollaModel', 'afmoe', 'apertus', 'arcee', 'aria_text', 'axk1', 'axk2', 'bamba', 'bitnet', 'blt',
    'blt_global_transformer', 'blt_local_decoder', 'blt_local_encoder', 'blt_patcher', 'chameleon', 'cohere',
    'cohere2', 'cosmos3_edge_text', 'csm', 'csm_depth_decoder_model', 'cwm', 'dbrx', 'deepseek_ocr2_encoder',
    'deepseek_ocr2_text', 'deepseek_v2', 'deepseek_v3', 'deepseek_v32', 'deepseek_v4', 'dia_decoder', 'dia_encoder',
    'diffllama', 'diffusion_gemma_text', 'doge', 'dots1', 'efficientloftr', 'emu3_text_model', 'eomt_dinov3',
    'ernie4_5', 'ernie4_5_moe', 'ernie4_5_vl_moe_text', 'eurobert', 'evolla', 'exaone4', 'exaone_moe', 'falcon',
    'falcon_h1', 'flex_olmo', 'fuyu', 'gemma', 'gemma2', 'gemma3_text', 'gemma3n_text', 'gemma4_text',
    'gemma4_unified_text', 'gemma4_vision', 'glm', 'glm4', 'glm4_moe', 'glm4_moe_lite', 'glm4v_moe_text',
    'glm4v_text', 'glm_image_text', 'glm_moe_dsa', 'glm_ocr_text', 'glmasr_encoder', 'gpt_neox',
    'gpt_neox_japanese', 'gpt_oss', 'granite', 'granite4_vision_text', 'granite_swa', 'granitemoe',
    'granitemoe_swa', 'granitemoehybrid', 'granitemoeshared', 'helium', 'higgs_audio_v2', 'hrm_text',
    'hunyuan_v1_dense', 'hunyuan_v1_moe', 'hunyuan_vl_text', 'hy_v3', 'hyperclovax', 'jais2', 'jetmoe',
    'jina_embeddings_v3', 'kimi_k25_vision', 'kyutai_speech_to_text', 'laguna', 'lasr_encoder', 'lfm2', 'lfm2_moe',
    'llama', 'llama4_text', 'llama4_vision_model', 'longcat_flash', 'mellum', 'mimi', 'mimo_v2_flash', 'minicpm3',
    'minimax', 'minimax_m2', 'minimax_m3_vl_text', 'minimax_m3_vl_vision', 'ministral', 'ministral3', 'mistral',
    'mistral4', 'mixtral', 'mllama_text_model', 'modernbert', 'modernbert-decoder', 'moonshine',
    'moonshine_streaming', 'moshi', 'muse_glimmer_assistant', 'muse_glimmer_text', 'muse_glimmer_vision',
    'musicflamingo', 'nanochat', 'nemotron', 'nomic_bert', 'olmo', 'olmo2', 'olmo3', 'olmo_hybrid', 'olmoe',
    'openai_privacy_filter', 'paddleocr_vl_text', 'pe_audio_encoder', 'pe_audio_video_encoder', 'pe_video_encoder',
    'persimmon', 'phi', 'phi3', 'phi4_multimodal', 'phimoe', 'pixtral', 'qwen2', 'qwen2_5_omni_dit',
    'qwen2_5_omni_talker', 'qwen2_5_omni_text', 'qwen2_5_vl_text', 'qwen2_moe', 'qwen2_vl_text', 'qwen3',
    'qwen3_5_moe_text', 'qwen3_5_text', 'qwen3_moe', 'qwen3_next', 'qwen3_omni_moe_talker_code_predictor',
    'qwen3_omni_moe_talker_text', 'qwen3_omni_moe_text', 'qwen3_vl_moe_text', 'qwen3_vl_text', 'recurrent_gemma',
    'seed_oss', 'smollm3', 'solar_open', 'stablelm', 'starcoder2', 't5_gemma_module', 't5gemma2_decoder',
    't5gemma2_text', 'timesfm2_5', 'vaultgemma', 'voxtral_realtime_encoder', 'voxtral_realtime_text', 'xcodec2',
    'youtu', 'zamba2', 'zaya'
)
# Families whose rotation comes from other keys: GPT-J and CodeGen rotate the first `rotary_dim` channels of each
# head (64 by default, GPTJConfig and CodeGenConfig) in adjacent pairs (rotate_every_two) at a base fixed at 10,000
# in the model code (create_sinusoidal_positions); they read no rope_theta, rope_scaling or partial factor
ROTARY_DIM_FAMILIES: tuple[str, ...] = ("gptj", "codegen")
# Families whose published configs run remote code (auto_map), not transformers': how they rotate is in that code
REMOTE_CODE_FAMILIES: dict[str, str] = {
    "chatglm": "ChatGLM2, ChatGLM3 and GLM-4-9B's first release (model_type 'chatglm', "
               "ChatGLMForConditionalGeneration) run THUDM's modeling_chatglm.py from the Hub (auto_map), not "
               "transformers' code: its rotary width, pairing and base (and what its rope_ratio does to it) are that "
               "file's, which this library has not read. The GLM-4 checkpoints converted for transformers (model_type 'glm', 'glm4') are read as transformers "
               "reads them",
}
# model types that name families this module reads without a rope_parameters class: ones it resolves by name
# (Kimi K2's kimi_k2 is DeepSeek-V3's code)
_NAMED_FAMILIES: tuple[str, ...] = ("kimi_k2",)


def _known_families() -> frozenset[str]:
    return frozenset(HF_ROPE_PARAMETER_FAMILIES + ROTARY_DIM_FAMILIES + _NAMED_FAMILIES + WHOLE_HEAD_ROTARY_FAMILIES
                     + tuple(HF_DEFAULT_PARTIAL_ROTARY) + INTERLEAVED_PAIRING_FAMILIES + ROPE_INTERLEAVE_FAMILIES
                     + MROPE_INTERLEAVED_FAMILIES + MROPE_BLOCK_FAMILIES + PER_LAYER_TYPE_ROPE_FAMILIES)


def _top_architectures(config: Any) -> tuple[str, ...]:
    """The config's `architectures`, from its top level (a multimodal wrapper keeps them there), else its text
    config's."""
    found = hf_get(config, "architectures") or hf_get(hf_text_config(config), "architectures") or ()
    return tuple(found) if isinstance(found, (list, tuple)) else ()


def _rope_fields(text: Any) -> list[str]:
    keys = ("rope_theta", "rope_parameters", "rope_scaling", "partial_rotary_factor", "rotary_pct", "rotary_dim",
            "rotary_emb_base", "rope_ratio", "head_dim")
    return [k for k in keys if hf_get(text, k) is not None]


def hf_rope_family(config: Any) -> str | None:
    """The family whose transformers 5.15 model code this module reads config's RoPE as: the text config's
    model_type when transformers reads its RoPE from rope_parameters (`HF_ROPE_PARAMETER_FAMILIES`) or rotary_dim
    (`ROTARY_DIM_FAMILIES`: GPT-J, CodeGen); for a model type transformers does not know, the family its
    `architectures` (read at the config's top level) name (Kimi K2: DeepSeek-V3); None for a config that names no
    model_type (read in Llama's layout: rope_theta, rotate_half over int(head_dim * partial_rotary_factor)).

    Raises for any other model type, naming the fields it holds and how to read it anyway: a family whose code this
    module has not read would otherwise get half pairs over the whole head at base 10,000, silently wrong for
    ChatGLM (`REMOTE_CODE_FAMILIES`) and every family that rotates another way."""
    text = hf_text_config(config)
    model_type = hf_get(text, "model_type")
    if model_type is None:
        return None
    model_type = str(model_type)
    if model_type in _known_families():
        return model_type
    named = [_INTERLEAVED_ARCHITECTURES[a] for a in _top_architectures(config) if a in _INTERLEAVED_ARCHITECTURES]
    if named:
        return named[0]
    fields = _rope_fields(text)
    read = (f"it states {', '.join(fields)}" if fields else "it states no RoPE field")
    why = REMOTE_CODE_FAMILIES.get(model_type, (
        f"transformers 5.15 has no family {model_type!r} whose rotation this library has read (its families that read "
        "rope_parameters are HF_ROPE_PARAMETER_FAMILIES; GPT-J and CodeGen read rotary_dim)"))
    raise ValueError(f"model_type={model_type!r}: {why}. Of the RoPE fields {read}, but the base, the rotary width "
                     "and the pairing are the model code's, and reading them with Llama's defaults (half pairs over "
                     "the whole head, base 10,000) would be a guess. If you have checked that its code rotates as "
                     "Llama's does (rotate_half over int(head_dim * partial_rotary_factor) channels at rope_theta), "
                     "pass the config with model_type='llama'; or with the model_type of the transformers family "
                     "whose code it copies")


def hf_rope_pairing(config: Any) -> str:
    """"interleaved" or "half": which channels of the checkpoint's q and k the family's model code rotates
    together (transformers 5.15; `INTERLEAVED_PAIRING_FAMILIES`, `ROPE_INTERLEAVE_FAMILIES`). A
    rope_interleave the family's code does not read is refused where it says the other pairing."""
    text = hf_text_config(config)
    model_type = hf_rope_family(config)
    if model_type not in ROPE_INTERLEAVE_FAMILIES + INTERLEAVED_PAIRING_FAMILIES:
        named = [_INTERLEAVED_ARCHITECTURES[a] for a in _top_architectures(config) if a in _INTERLEAVED_ARCHITECTURES]
        model_type = named[0] if named else model_type
    stated = hf_get(text, "rope_interleave")
    where = f"{_text_prefix(config)}rope_interleave"
    if stated is not None:
        check_bool(where, stated)
    if model_type in ROPE_INTERLEAVE_FAMILIES:
        return "interleaved" if stated is None or stated else "half"
    pairing = "interleaved" if model_type in INTERLEAVED_PAIRING_FAMILIES + ROTARY_DIM_FAMILIES else "half"
    if stated is not None and stated != (pairing == "interleaved"):
        raise ValueError(f"{where}={stated} says {'interleaved' if stated else 'half'} pairs, but transformers' "
                         f"model code for model_type={model_type!r} does not read it and rotates {pairing} pairs; "
                         f"only {', '.join(ROPE_INTERLEAVE_FAMILIES)} read rope_interleave")
    return pairing


# The DeepSeek Sparse Attention indexer's own rotation (transformers 5.15): DeepseekV32Indexer rotates halves
# ("NON-interleaved (half-split) RoPE"), GlmMoeDsaIndexer adjacent pairs (apply_rotary_pos_emb_interleave); neither
# reads indexer_rope_interleave. vLLM's DeepseekV2MLAAttention does: is_neox_style = not indexer_rope_interleave,
# False when absent (vllm/model_executor/models/deepseek_v2.py)
DSA_INDEXER_PAIRING: dict[str, str] = {"deepseek_v32": "half", "glm_moe_dsa": "interleaved"}


def hf_indexer_rope_pairing(config: Any) -> str:
    """"half" or "interleaved": the pairing of a DeepSeek Sparse Attention indexer's RoPE (DeepSeek-V3.2's
    lightning indexer, GLM-5's), as transformers 5.15's model code fixes it (`DSA_INDEXER_PAIRING`).

    The config's `indexer_rope_interleave` (GLM-5 writes true) is read by vLLM (false when absent) and by no
    transformers code: where it, or its absence, makes vLLM rotate the indexer another way than transformers, this
    raises with both named. Raises for a family without a DSA indexer."""
    text = hf_text_config(config)
    family = hf_rope_family(config)
    if family not in DSA_INDEXER_PAIRING:
        raise ValueError(f"model_type={family!r} has no DeepSeek Sparse Attention indexer (families with one: "
                         f"{', '.join(DSA_INDEXER_PAIRING)})")
    pairing = DSA_INDEXER_PAIRING[family]
    where = f"{_text_prefix(config)}indexer_rope_interleave"
    stated = hf_get(text, "indexer_rope_interleave")
    if stated is not None:
        check_bool(where, stated)
    vllm = "interleaved" if stated else "half"
    if vllm != pairing:
        said = "absent (vLLM reads it as false)" if stated is None else f"{stated}"
        raise ValueError(f"{where} is {said}: vLLM then rotates the indexer's queries and keys in {vllm} pairs, but "
                         f"transformers 5.15's {family} indexer always rotates {pairing} pairs and never reads the "
                         f"key; the engines differ, so this library does not pick one (set it to "
                         f"{pairing == 'interleaved'} to make them agree)")
    return pairing



def _number(where: str, value: Any, *, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{where} must be a number, got {type(value).__name__} ({value!r})")
    if not math.isfinite(value) or (positive and value <= 0):
        raise ValueError(f"{where} must be a finite number > 0, got {value!r}")
    return float(value)


def _length(where: str, value: Any) -> int:
    """A length in tokens: a whole positive number (512.0 is 512; 512.5 is refused, not truncated)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value != int(value):
        raise TypeError(f"{where} must be a whole number of tokens, got {type(value).__name__} ({value!r})")
    if value < 1:
        raise ValueError(f"{where} must be >= 1, got {value!r}")
    return int(value)


def _prf(where: str, value: Any) -> float:
    prf = _number(where, value)
    if prf > 1:
        raise ValueError(f"{where} must be in (0, 1] (the fraction of each head's channels that rotate), got {value!r}")
    return prf


@dataclass(frozen=True)
class _RopeRead:
    layout: str  # "transformers 5 (rope_parameters)", "transformers 4 (rope_theta, rope_scaling)" or "none"
    per_type: dict[str, dict[str, Any]]  # layer type -> that layer type's rope dict, standardized
    top_original: int | None  # the top-level original_max_position_embeddings, when the config states one
    inner_original_v4: bool  # a 4.x rope_scaling stated original_max_position_embeddings itself


def _v4_dict(text: Any, model_type: str, prefix: str = "") -> dict[str, Any] | None:
    """The 4.x layout as transformers 5 converts it: rope_scaling (or {}), with rope_theta and the partial factor.
    prefix: where the text config sits in a multimodal config ("text_config."), for the messages."""
    rs = hf_get(text, "rope_scaling")
    if rs is not None and not isinstance(rs, Mapping):
        raise TypeError(f"{prefix}rope_scaling must be a dict (or null), got {type(rs).__name__} ({rs!r})")
    theta = hf_get(text, "rope_theta", hf_get(text, "rotary_emb_base"))
    prf = hf_get(text, "partial_rotary_factor", hf_get(text, "rotary_pct"))
    if rs is None and theta is None and prf is None:
        return None
    d = dict(rs or {})
    if "rope_theta" in d and theta is None:
        raise ValueError(f"{prefix}rope_scaling holds rope_theta={d['rope_theta']!r} but the config has no top-level "
                         "rope_theta: "
                         "transformers 5 reads the one inside, 4.57 ignores it and uses its default 10,000. Move it "
                         "to the top level (4.x's layout) or rename rope_scaling to rope_parameters (5's)")
    if theta is not None:
        _fill(d, "rope_theta", _number("rope_theta", theta), f"{prefix}rope_scaling")
    if prf is not None:
        _fill(d, "partial_rotary_factor", _prf("partial_rotary_factor", prf), f"{prefix}rope_scaling")
    return d


def _standard(d: Mapping[str, Any], where: str, model_type: str) -> dict[str, Any]:
    """One rope dict with rope_type set (legacy names read as transformers reads them) and its numbers checked."""
    out = dict(d)
    kind = hf_rope_type(out, model_type, field=where)
    out.pop("type", None)
    out["rope_type"] = kind
    if "rope_theta" in out:
        out["rope_theta"] = _number(f"{where}['rope_theta']", out["rope_theta"])
    if "partial_rotary_factor" in out:
        out["partial_rotary_factor"] = _prf(f"{where}['partial_rotary_factor']", out["partial_rotary_factor"])
    if "original_max_position_embeddings" in out and out["original_max_position_embeddings"] is not None:
        out["original_max_position_embeddings"] = _length(f"{where}['original_max_position_embeddings']",
                                                          out["original_max_position_embeddings"])
    return out


# which value each version reads when a rope dict and the top level both state a key. transformers 5.15:
# PreTrainedConfig.convert_rope_params_to_dict setdefaults rope_theta and partial_rotary_factor into the dict when it
# loads the config (the top level only fills a key the dict lacks; the models read config.rope_parameters), but the
# scaled types' init functions (linear, dynamic, yarn, llama3, longrope in modeling_rope_utils.py) re-run
# standardize_rope_params when the rotary module is built, and that writes the config's partial_rotary_factor
# attribute over the dict's (rope_theta it setdefaults again); standardize_rope_params also writes a top-level
# original_max_position_embeddings over the dict's. 4.57 reads rope_theta and partial_rotary_factor from the top
# level only (_compute_default_rope_parameters: getattr(config, ...)), never a dict's (a partial_rotary_factor
# inside rope_scaling draws its "Unrecognized keys" warning)
_FILL_RULE = {
    "rope_theta": "transformers 5 keeps the dict's (setdefault), 4.x reads only the top level's",
    "partial_rotary_factor": "transformers 5.15 loads the dict's (setdefault: the top level only fills a missing key) "
                             "and default RoPE rotates with it, but a scaled rope_type's init re-runs "
                             "standardize_rope_params and builds the rotation at the top level's (a model that split "
                             "its heads at the dict's then fails on the shapes); 4.57 reads only the top level's",
    "original_max_position_embeddings": "transformers 5 overwrites the dict's with the top level's (Phi-3's layout)",
}


def _fill(d: dict[str, Any], key: str, value: Any, where: str) -> None:
    """d[key] = value unless d states another value, which is refused with both named (where: the dict's field,
    "text_config." first for a multimodal config)."""
    if value is None:
        return
    if key in d and d[key] != value:
        top = "the text config's top level" if "." in where.split("[")[0] else "the config's top level"
        raise ValueError(f"{where} gives {key}={d[key]!r} but {top} gives {key}={value!r}; "
                         f"{_FILL_RULE[key]}: make them agree")
    d[key] = value


# The families whose transformers 5.15 model code rotates each layer type with its own entry of a per-layer-type
# rope_parameters dict (their modeling_*.py reads config.rope_parameters[layer_type]). Every other config class
# takes such a dict for one global dict: PreTrainedConfig.convert_rope_params_to_dict setdefaults a top-level
# rope_theta (the class default) and rope_type "default" beside the nested entries, and the model rotates at those,
# never reading the entries (Qwen3.5, Llama, Qwen3, gpt-oss, ... checked with from_dict)
PER_LAYER_TYPE_ROPE_FAMILIES: tuple[str, ...] = (
    "deepseek_v4", "diffusion_gemma_text", "gemma3_text", "gemma3n_text", "gemma4_text", "gemma4_unified_text",
    "laguna", "mellum", "mimo_v2_flash", "modernbert", "modernbert-decoder", "olmo3", "t5gemma2_decoder",
    "t5gemma2_text", "zaya",
)


def _text_prefix(config: Any) -> str:
    """"text_config." (or the key it sits under) for a multimodal config, "" otherwise: how messages name a field."""
    if isinstance(config, Mapping):
        found = [k for k in TEXT_CONFIG_NAMES if config.get(k) is not None]
        return f"{found[0]}." if len(found) == 1 else ""
    text = hf_text_config(config)
    return next((f"{k}." for k in TEXT_CONFIG_NAMES if getattr(config, k, None) is text and text is not config), "")


def _rope_field(config: Any, layer_type: str | None = None) -> str:
    """The field a config states a layer type's RoPE dict in, as an error message should name it: rope_parameters
    (with ['full_attention'] etc. where the dict is per layer type) or rope_scaling, after "text_config." for a
    multimodal config."""
    prefix = _text_prefix(config)
    if not _read_rope(config).layout.startswith("transformers 5"):
        return f"{prefix}rope_scaling"
    raw = hf_get(hf_text_config(config), "rope_parameters")
    if isinstance(raw, Mapping) and raw and all(isinstance(v, Mapping) for v in raw.values()):
        return f"{prefix}rope_parameters[{hf_rope_layer_type(config, layer_type)!r}]"
    return f"{prefix}rope_parameters"


def _stated_null(text: Any, key: str) -> bool:
    """Whether a config dict states key as null (at its top level or inside rope_parameters), or a config object
    holds None for it in its rope_parameters."""
    if isinstance(text, Mapping):
        inner = text.get("rope_parameters")
        return (key in text and text[key] is None) or (isinstance(inner, Mapping) and key in inner
                                                        and inner[key] is None)
    inner = getattr(text, "rope_parameters", None)
    return inner is None or (isinstance(inner, Mapping) and inner.get(key) is None)


def _olmo_hybrid_check(text: Any, prefix: str) -> None:
    """OLMo Hybrid (transformers 5.15, OlmoHybridModel): the model builds its rotary module only when
    rope_parameters holds a rope_theta ("Released ckpt don't use any ROPE"); a config dict that states no base is
    given the class default 10,000 when it loads, and then rotates at it."""
    if not isinstance(text, Mapping) or _stated_null(text, "rope_theta"):
        return
    inner = text.get("rope_parameters") if isinstance(text.get("rope_parameters"), Mapping) else {}
    scaling = text.get("rope_scaling") if isinstance(text.get("rope_scaling"), Mapping) else {}
    if text.get("rope_theta") is None and inner.get("rope_theta") is None and scaling.get("rope_theta") is None:
        raise ValueError(f"model_type='olmo_hybrid' with no {prefix}rope_theta: OlmoHybridModel rotates only when "
                         "rope_parameters holds a rope_theta (its code: the released checkpoints use no RoPE), but "
                         "transformers 5.15 fills the class default 10,000 into a config that states none, and then "
                         "rotates the full-attention layers at it. State rope_theta: null for NoPE, or the base the "
                         "checkpoint was trained with")


def _rotary_dim_read(text: Any, family: str, prefix: str) -> _RopeRead:
    """GPT-J and CodeGen (transformers 5.15 modeling_gptj.py, modeling_codegen.py): the first rotary_dim channels
    of each head (64 by default) turn in adjacent pairs at base 10,000, fixed in create_sinusoidal_positions; the
    models read no other RoPE key."""
    ignored = [k for k in ("rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor", "rotary_pct")
               if hf_get(text, k) is not None and not (k == "rope_parameters" and not isinstance(text, Mapping))]
    if ignored:
        raise ValueError(f"model_type={family!r} states {[prefix + k for k in ignored]}, which transformers' {family} "
                         "code never reads: it rotates the first rotary_dim channels of each head at base 10,000, "
                         "fixed in its create_sinusoidal_positions. Remove them (or use a family whose code reads "
                         "them)")
    if isinstance(text, Mapping) and "rotary_dim" in text and text["rotary_dim"] is None:
        raise ValueError(f"{prefix}rotary_dim is null: transformers' {family} code then builds its table over the "
                         "whole hidden size (embed_dim), not one head, and fails on any model with more than one head; "
                         "give the rotary width per head")
    rotary = check_int(f"{prefix}rotary_dim", hf_get(text, "rotary_dim", 64), 2)
    head = hf_head_dim(text)
    if rotary % 2 or rotary > head:
        raise ValueError(f"{prefix}rotary_dim={rotary} must be even and at most the head width {head} "
                         "(hidden_size // num_attention_heads)")
    p = {"rope_type": "default", "rope_theta": DEFAULT_ROPE_THETA}
    if rotary != head:
        p["partial_rotary_factor"] = rotary / head
    return _RopeRead(f"none", {"full_attention": p}, None, False)


# The RoPE a family's config class builds for a config.json that states no rope dict (no rope_scaling, no
# rope_parameters), when it is not plain RoPE at the class's base (transformers 5.15, each class's __post_init__;
# tests/test_hf_layer_patterns.py builds each class from minimal dicts and compares). gpt-oss's is filled: 4.57's
# GptOssConfig has the same dict as its rope_scaling default. The others are refused by name.
HF_CLASS_ROPE_DEFAULTS: dict[str, dict[str, Any]] = {
    "gpt_oss": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                "original_max_position_embeddings": 4096},
}
UNFILLED_CLASS_ROPE: dict[str, str] = {
    **{f: "llama3 scaling" for f in ("apertus", "cwm", "higgs_audio_v2")},
    **{f: "YaRN (factor, mscale pair and llama_4_scaling_beta)" for f in ("ministral3", "mistral4")},
    "openai_privacy_filter": "YaRN factor 32",
    **{f: "default RoPE at 10,000 on the sliding layers and proportional RoPE (a quarter of the pairs) at 1,000,000 "
          "on the full ones" for f in ("gemma4_text", "gemma4_unified_text", "diffusion_gemma_text")},
    **{f: "a dict per layer type with its own bases" for f in ("laguna", "mellum")},
    "cosmos3_edge_text": "a dict with its M-RoPE sections at base 1e8",
    "moonshine_streaming": "default RoPE with partial_rotary_factor 0.8, a factor it adds to no stated dict",
}
# families whose config class reads the RoPE keys in a way of its own, whatever the config states: refused outright
UNREAD_ROPE_FAMILIES: dict[str, str] = {
    "efficientloftr": "EfficientLoFTRConfig sets partial_rotary_factor 4 in every rope dict (a vision model's own use "
                      "of the key, not a share of the head)",
}
# families whose config class does not read a top-level rope_theta (the 4.x layout's base): it builds its own dict, or
# reads the base under another name (GPTNeoXConfig: rotary_emb_base; ModernBertConfig: global_rope_theta and
# local_rope_theta), so the stated base is not the one the model rotates at
STATED_THETA_UNREAD: dict[str, str] = {
    "gpt_neox": "GPTNeoXConfig reads rotary_emb_base", "gpt_neox_japanese": "GPTNeoXJapaneseConfig reads rotary_emb_base",
    "modernbert": "ModernBertConfig reads global_rope_theta and "
    "local_rope_theta", "modernbert-decoder": "its config class reads global_rope_theta and local_rope_theta",
    "moonshine_streaming": "its config class builds its own rope_parameters", "pe_audio_encoder": "its config class "
    "builds its own rope_parameters", "gemma4_vision": "its config class builds its own rope_parameters", **{f: "its config class builds its own rope_parameters per layer type" for f in (
        "cosmos3_edge_text", "gemma4_text", "gemma4_unified_text", "diffusion_gemma_text")},
}
# families whose config class, given a 4.x rope_scaling, keeps no base beside it (the model then has no rope_theta to
# rotate at) or lays it over every layer type: transformers 5.15 does not read such a config as 4.57 did
V4_SCALING_UNREAD: tuple[str, ...] = ("gemma4_text", "gemma4_unified_text", "diffusion_gemma_text", "laguna", "mellum",
                                      "esm", "moshi_depth", "modernbert", "modernbert-decoder", "pe_audio_encoder")


def _class_rope_check(text: Any, family: str, prefix: str) -> Any:
    """Refuse, or fill, what a family's config class does to the RoPE of a config dict (`HF_CLASS_ROPE_DEFAULTS`,
    `UNFILLED_CLASS_ROPE`, `STATED_THETA_UNREAD`, `V4_SCALING_UNREAD`); returns the config to read."""
    if family in UNREAD_ROPE_FAMILIES:
        raise ValueError(f"model_type={family!r}: {UNREAD_ROPE_FAMILIES[family]}; this library does not read its RoPE")
    if not isinstance(text, Mapping):
        return text  # a config object: its class has run
    has_v5 = text.get("rope_parameters") is not None
    has_v4 = text.get("rope_scaling") is not None
    neox_base = text.get("rotary_emb_base", DEFAULT_ROPE_THETA) if family in ("gpt_neox", "gpt_neox_japanese") else None
    if (family in STATED_THETA_UNREAD and text.get("rope_theta") is not None and not has_v5
            and (neox_base is None or float(text["rope_theta"]) != float(neox_base))):
        raise ValueError(f"{prefix}rope_theta={text['rope_theta']!r} for model_type={family!r}: transformers 5.15 "
                         f"does not rotate at it ({STATED_THETA_UNREAD[family]}); give rope_parameters with the base")
    if family in V4_SCALING_UNREAD and has_v4 and not has_v5:
        raise ValueError(f"{prefix}rope_scaling for model_type={family!r}: transformers 5.15's config class does not "
                         "read a 4.x rope_scaling as 4.57 did (it keeps no base beside it, or lays it over every layer "
                         "type); give rope_parameters in transformers 5's layout")
    if has_v5 or has_v4:
        if family == "mistral4" and has_v5 and "partial_rotary_factor" not in text["rope_parameters"]:
            raise ValueError(f"{prefix}rope_parameters for model_type='mistral4' states no partial_rotary_factor: "
                             "Mistral4Config adds its default 0.5, over a latent-attention head this library has not "
                             "checked; state it")
        return text
    if family in UNFILLED_CLASS_ROPE:
        raise ValueError(f"model_type={family!r} states no rope_scaling or rope_parameters: transformers 5.15's config "
                         f"class then builds its own ({UNFILLED_CLASS_ROPE[family]}), which this library does not fill "
                         "in; state the RoPE dict the checkpoint was trained with")
    if family in HF_CLASS_ROPE_DEFAULTS:
        if "rope_scaling" in text or "rope_parameters" in text:  # stated null
            raise ValueError(f"{prefix}rope_scaling is null for model_type={family!r}: transformers 4.57 then runs "
                             f"unscaled, 5.15's config class fills its default {HF_CLASS_ROPE_DEFAULTS[family]}; the "
                             "versions disagree, so this library does not pick one: state the dict, or "
                             "{'rope_type': 'default'}")
        return {**text, "rope_scaling": dict(HF_CLASS_ROPE_DEFAULTS[family])}
    return text


# Top-level RoPE keys, by the families whose transformers 5.15 config class reads them (a dataclass field, or a
# kwarg its __post_init__ / convert_rope_params_to_dict pops); tests/test_hf_rope_keys.py rebuilds this from
# transformers. Every family's class reads the first four (standardize_rope_params); any other key that looks like a
# RoPE setting (`is_rope_key`) is refused by name for a family whose class does not read it: rope_ratio (ChatGLM's
# base multiplier), rope_pct (StableLM's share), a typo such as rope_thetta, each would be dropped by transformers,
# and the model would rotate at the class default (base 10,000 for a missing rope_theta).
ROPE_KEYS_EVERY_FAMILY: frozenset[str] = frozenset({"rope_theta", "rope_parameters", "rope_scaling",
                                                     "partial_rotary_factor"})
ROPE_KEYS_BY_FAMILY: dict[str, frozenset[str]] = {
    "rotary_emb_base": frozenset({"gpt_neox", "gpt_neox_japanese"}),
    "rotary_pct": frozenset({"gpt_neox", "gpt_neox_japanese"}),
    "rotary_dim": frozenset({"gptj", "codegen", "minimax_m3_vl_text"}),
    "rope_local_base_freq": frozenset({"gemma3", "gemma3_text", "gemma3n", "gemma3n_text", "t5gemma2",
                                       "t5gemma2_text", "t5gemma2_encoder", "t5gemma2_decoder"}),
    "global_rope_theta": frozenset({"modernbert", "modernbert-decoder"}),
    "local_rope_theta": frozenset({"modernbert", "modernbert-decoder"}),
    "qk_rope_head_dim": frozenset({"axk1", "axk2", "deepseek_v2", "deepseek_v3", "deepseek_v32", "glm4_moe_lite",
                                   "glm_moe_dsa", "longcat_flash", "minicpm3", "mistral4", "youtu", "kimi_k2",
                                   "deepseek_v4"}),
    # read by vLLM's DeepSeek-V2 indexer, by no transformers class; checked by hf_indexer_rope_pairing
    "indexer_rope_interleave": frozenset(DSA_INDEXER_PAIRING),
    "no_rope_layers": frozenset({"llama4_text", "smollm3"}),
    "no_rope_layer_interval": frozenset({"llama4_text", "smollm3"}),
    "compress_rope_theta": frozenset({"deepseek_v4"}),
    "layer_rope_theta": frozenset({"granite_swa", "granitemoe_swa", "muse_glimmer_text"}),
    "use_mem_rope": frozenset({"zamba2"}),
}
# the pairing flag checked against the family's code for every family by hf_rope_pairing (rope_interleave: refused
# where it says a pairing the code does not rotate)
ROPE_PAIRING_KEYS: frozenset[str] = frozenset({"rope_interleave"})
# keys read by no engine, whatever their value: Qwen2's use_mrope (M-RoPE is stated by rope_scaling's mrope_section,
# which is what transformers and vLLM read), refused only when it says true
ROPE_KEYS_INERT_WHEN_FALSE: frozenset[str] = frozenset({"use_mrope"})


# Near-misses of the length keys that anchor the RoPE scaling: a key whose lower-cased name (with '-' read as '_')
# contains "max_pos" is refused by name unless it is one of these two (read at the top level for every family: the
# context length, and the scaling's anchor that transformers 5 folds into the RoPE dict) or a length key the family's
# transformers 5.15 config class reads (LENGTH_KEYS_BY_FAMILY). A typo such as original_max_position_embedding or
# original_max_positions_embeddings would be kept unread, and the scaling anchored at max_position_embeddings.
LENGTH_KEYS_EVERY_FAMILY: frozenset[str] = frozenset({"max_position_embeddings", "original_max_position_embeddings"})
LENGTH_KEYS_BY_FAMILY: dict[str, frozenset[str]] = {
    "left_max_position_embeddings": frozenset({"seamless_m4t_v2", "wav2vec2-bert"}),
    "right_max_position_embeddings": frozenset({"seamless_m4t_v2", "wav2vec2-bert"}),
    "t2u_max_position_embeddings": frozenset({"seamless_m4t", "seamless_m4t_v2"}),
    "max_encoder_position_embeddings": frozenset({"led"}),
    "max_decoder_position_embeddings": frozenset({"led"}),
    "max_grid_row_position_embeddings": frozenset({"tvp"}),
    "max_grid_col_position_embeddings": frozenset({"tvp"}),
    "max_pos_emb": frozenset({"granite_speech", "granite_speech_encoder", "granite_speech_plus",
                              "granite_speech_plus_encoder"}),
}


def is_length_key(key: str) -> bool:
    """True for a config key that looks like a maximum-position (length) key: its lower-cased name, '-' read as '_',
    contains max_pos (max_position_embeddings, original_max_position_embedding, orig_max_pos_embeddings)."""
    return "max_pos" in key.lower().replace("-", "_")


def is_rope_key(key: str) -> bool:
    """True for a config key that looks like a RoPE setting: a word (split at '_' or '-') starting with rope,
    rotary or mrope, or any key containing theta (rope_ratio, rotary_emb_base, qk_rope_head_dim, rope_thetta).
    A name outside this pattern and `is_length_key`'s (a bare base, pos_base) is not checked by check_rope_keys."""
    words = key.lower().replace("-", "_").split("_")
    return any(w.startswith(("rope", "rotary", "mrope")) for w in words) or "theta" in key.lower()


def _config_keys(text: Any) -> list[str]:
    """A dict's keys; a config object's attributes other than those its class defines (its class has read them):
    what remains are the kwargs it kept without reading, a typo among them."""
    if isinstance(text, Mapping):
        return [str(k) for k in text]
    cls = type(text)
    own = set(inspect.signature(cls.__init__).parameters) | {"ignore_keys_at_rope_validation"}
    if is_dataclass(cls):
        own |= {f.name for f in fields(cls)}
    return [k for k in vars(text) if not k.startswith("_") and k not in own and not hasattr(cls, k)]


def check_rope_keys(config: Any) -> None:
    """Refuse every top-level key of the text config that looks like a RoPE setting (`is_rope_key`) and that the
    family's transformers 5.15 config class does not read (`ROPE_KEYS_EVERY_FAMILY`, `ROPE_KEYS_BY_FAMILY`) and no
    pairing check of this module reads (`ROPE_PAIRING_KEYS`), and every key that looks like a length key
    (`is_length_key`: its name contains max_pos) other than max_position_embeddings, original_max_position_embeddings
    and the family's own (`LENGTH_KEYS_BY_FAMILY`), naming it: transformers would drop it and rotate at its class default, so reading the config without it would be
    silently wrong (rope_ratio 2 halves ChatGLM's rotation speed; a rope_thetta typo leaves base 10,000). Keys
    stated null are ignored. A config with no model_type is checked as Llama's."""
    text = hf_text_config(config)
    family = hf_rope_family(config) or "llama"
    unread = []
    for key in _config_keys(text):
        value = hf_get(text, key)
        if value is not None and is_length_key(key) and not is_rope_key(key):
            if key not in LENGTH_KEYS_EVERY_FAMILY and family not in LENGTH_KEYS_BY_FAMILY.get(key, ()):
                unread.append(key)
            continue
        if value is None or not is_rope_key(key) or key in ROPE_KEYS_EVERY_FAMILY | ROPE_PAIRING_KEYS:
            continue
        if family in ROPE_KEYS_BY_FAMILY.get(key, ()):
            continue
        if key in ROPE_KEYS_INERT_WHEN_FALSE and value is False:
            continue
        unread.append(key)
    if unread:
        readers = {k: sorted(ROPE_KEYS_BY_FAMILY[k]) for k in unread if k in ROPE_KEYS_BY_FAMILY}
        readers |= {k: sorted(LENGTH_KEYS_BY_FAMILY[k]) for k in unread if k in LENGTH_KEYS_BY_FAMILY}
        lengths = [k for k in unread if is_length_key(k) and not is_rope_key(k)]
        where = "; ".join([f"{k} is read only by {v}" for k, v in readers.items()]
                          + [f"{lengths} look like length keys but are neither max_position_embeddings nor "
                             "original_max_position_embeddings"] * bool(lengths))
        named = [f"{_text_prefix(config)}{k}" for k in unread]
        raise ValueError(f"config states {named} for model_type={family!r}, which its "
                         f"transformers 5.15 config class does not read{' (' + where + ')' if where else ''}: "
                         "transformers would drop them and rotate at the class defaults, so this library refuses "
                         "rather than guess. Fold each into the keys the family reads (the base into rope_theta, a "
                         "share of the head into partial_rotary_factor; rope_ratio r multiplies the base by r), or "
                         "delete it if it is a typo or has no effect")


def _read_rope(config: Any) -> _RopeRead:
    text = hf_text_config(config)
    prefix = _text_prefix(config)
    family = hf_rope_family(config)  # refuses a family whose code this module has not read
    model_type = family or ""
    check_rope_keys(config)
    if family in ROTARY_DIM_FAMILIES:
        return _rotary_dim_read(text, family, prefix)
    text = _class_rope_check(text, model_type, prefix)
    if family == "olmo_hybrid":
        _olmo_hybrid_check(text, prefix)
        if _stated_null(text, "rope_theta"):
            raise ValueError(f"{prefix}rope_theta is null for model_type='olmo_hybrid': OlmoHybridModel builds no "
                             "rotary module, so no layer rotates (NoPE attention between its Gated DeltaNet layers); "
                             "there is no RoPE to read")
    if hf_get(text, "dual_chunk_attention_config") is not None:
        raise ValueError(f"{prefix}dual_chunk_attention_config is set (Qwen2.5-1M): vLLM's get_rope builds its "
                         "DualChunkRotaryEmbedding from it before any rope_type, re-indexing positions within and "
                         "across chunks, while transformers' model code never reads it and rotates with plain "
                         "positions; the engines differ, so this library does not pick one (drop the key to read "
                         "the config as transformers does)")
    if _has(text, "num_hidden_layers"):
        kinds = hf_layer_types(text)
    else:  # a config holding only its RoPE fields: one layer type unless it lists its own
        kinds = tuple(LEGACY_LAYER_TYPES.get(k, k) for k in (hf_get(text, "layer_types") or ("full_attention",)))
    v5 = hf_get(text, "rope_parameters")
    is_object = not isinstance(text, Mapping)
    # a v5 object's rope_scaling is v5's
    v4 = None if (is_object and v5 is not None) else _v4_dict(text, model_type, prefix)
    top_orig = hf_get(text, "original_max_position_embeddings")
    top_orig = None if top_orig is None else _length("original_max_position_embeddings", top_orig)
    types = tuple(dict.fromkeys(kinds))
    if v5 is not None and not isinstance(v5, Mapping):
        raise TypeError(f"{prefix}rope_parameters must be a dict, got {type(v5).__name__} ({v5!r})")

    def per_layer(d: Mapping[str, Any], where: str) -> dict[str, dict[str, Any]]:
        nested = [isinstance(v, Mapping) for v in d.values()]
        if d and all(nested):
            unknown = sorted(set(d) - set(types))
            if unknown:
                raise ValueError(f"{where} has entries for layer types {unknown}, which no layer of this config has "
                                 f"(its layer types: {list(types)})")
            missing = [t for t in types if t not in d and t != "linear_attention"]
            if missing:
                raise ValueError(f"{where} gives per-layer-type dicts for {sorted(d)} but none for {missing}")
            if model_type and model_type not in PER_LAYER_TYPE_ROPE_FAMILIES:
                default = HF_DEFAULT_THETA.get(model_type, DEFAULT_ROPE_THETA)
                default = default["global"] if isinstance(default, dict) else default
                raise ValueError(
                    f"{where} gives a dict per layer type ({sorted(d)}), but transformers 5.15 rotates each layer type "
                    f"with its own dict only in the families whose model code reads one (Gemma 3 and 4, OLMo 3, "
                    f"ModernBERT, ...): for model_type {model_type!r} its config class adds a global rope_type "
                    f"'default' and the class's rope_theta ({default:g}) beside these entries and rotates at those, "
                    "never reading the entries (4.57 reads no rope_parameters at all). Write one dict, as "
                    f"{where}={dict(next(iter(d.values())))!r}")
            return {t: _standard(d[t], f"{where}[{t!r}]", model_type) for t in d}
        if any(nested):
            raise ValueError(f"{where} mixes per-layer-type dicts and plain keys: {sorted(d)}; give one dict, or one "
                             "per layer type")
        rotating = [t for t in types if t != "linear_attention"]
        if where.endswith("rope_parameters") and model_type in PER_LAYER_TYPE_ROPE_FAMILIES and len(rotating) > 1:
            raise ValueError(f"{where} is one dict, but model_type={model_type!r} rotates each layer type with its "
                             f"own entry: transformers 5.15's config class keeps the flat keys and adds its default "
                             f"entries for {rotating}, and the model reads those. Give one dict per layer type")
        one = _standard(d, where, model_type)
        return {t: dict(one) for t in types if t != "linear_attention"} or {"full_attention": one}

    def merged(d: Mapping[str, Any], where: str, theta: Any, prf: Any) -> dict[str, dict[str, Any]]:
        out = per_layer(d, where)
        for t, p in out.items():
            _fill(p, "rope_theta", theta, f"{where}[{t!r}]" if len(out) > 1 else where)
            _fill(p, "partial_rotary_factor", prf, f"{where}[{t!r}]" if len(out) > 1 else where)
            if p["rope_type"] in _ORIGINAL_INSIDE and top_orig is not None:
                _fill(p, "original_max_position_embeddings", top_orig, where)
            if "rope_theta" not in p:
                p["rope_theta"] = _default_theta(model_type, t)
            default = HF_DEFAULT_PARTIAL_ROTARY.get(model_type)
            from_class = "partial_rotary_factor" not in p and default is not None
            if from_class:
                p["partial_rotary_factor"] = default
            if (model_type in WHOLE_HEAD_ROTARY_FAMILIES and p.get("partial_rotary_factor", 1.0) != 1.0
                    and p["rope_type"] != "proportional"):  # Gemma 4's proportional type reads it as a share of pairs
                if default is not None:  # RecurrentGemma: stated or from the class, one refusal and one way out
                    given = "its config class defaults it to" if from_class else "the config states"
                    raise ValueError(
                        f"partial_rotary_factor={p['partial_rotary_factor']:g} for model_type={model_type!r} ({given} "
                        f"{p['partial_rotary_factor']:g}): transformers 4.57's attention rotated that share of each "
                        "head, and 5.15's default RoPE turns the whole head whatever the factor says: the versions "
                        "disagree on these checkpoints, and this library does not pick one. Only "
                        "partial_rotary_factor 1.0, stated, reads the config as 5.15 runs it")
                raise ValueError(
                    f"partial_rotary_factor={p['partial_rotary_factor']!r} for model_type={model_type!r}: "
                    "transformers 5.15's model code for this family turns the whole head under default RoPE (its "
                    "compute_default_rope_parameters never reads the factor) and under a scaled type builds "
                    "frequencies narrower than the head its attention rotates; 4.57 rotated part of the head or "
                    "failed. The versions disagree, so this library does not pick one: drop the factor, or use a "
                    "family whose code rotates part of the head (gpt_neox, phi, glm, qwen3_next, ...)")
            elif (default is not None and top_prf is None and p["partial_rotary_factor"] != default
                  and object_prf != p["partial_rotary_factor"]):  # a config object's own attribute agrees: stated
                raise ValueError(
                    f"{where} gives partial_rotary_factor={p['partial_rotary_factor']!r} and the config states none at "
                    f"its top level, where transformers' {model_type!r} config class defaults it to {default:g}: 4.57 "
                    "rotates the class default and never reads the dict's; 5.15 reads the dict's for default RoPE, "
                    "but where its config class keeps the default as an attribute (Qwen3.5, Qwen3-Next, GLM-4, ...) "
                    "a scaled rope_type's init re-runs standardize_rope_params and writes the class default over it. "
                    f"State partial_rotary_factor={p['partial_rotary_factor']!r} at the top level too, where every "
                    "version reads it")
        return out

    theta = hf_get(text, "rope_theta", hf_get(text, "rotary_emb_base"))
    theta = None if theta is None else _number("rope_theta", theta)
    prf = hf_get(text, "partial_rotary_factor", hf_get(text, "rotary_pct"))
    prf = None if prf is None else _prf("partial_rotary_factor", prf)
    top_prf = None if is_object else prf  # a config object's attribute is the class default, not a stated factor
    object_prf = prf if is_object else None  # ... or the factor it was built with, which its dict then repeats
    rs = None if is_object and v5 is not None else hf_get(text, "rope_scaling")
    if v5 is not None:
        per5 = merged(v5, f"{prefix}rope_parameters", None if is_object else theta, None if is_object else prf)
        if rs is not None:
            per4 = merged(v4 or {}, f"{prefix}rope_scaling", None, None)
            if per4 != per5:
                raise ValueError(f"config gives rope_parameters={dict(v5)!r} (transformers 5's layout) and "
                                 f"rope_scaling={dict(rs)!r} with rope_theta={theta!r} (4.x's), and they differ: "
                                 "transformers 5 takes rope_scaling, 4.x ignores rope_parameters. Keep one")
        return _RopeRead("transformers 5 (rope_parameters)", per5, top_orig, False)
    if v4 is None:
        return _RopeRead("none", merged({}, f"{prefix}rope_scaling", None, None), top_orig, False)
    d = dict(v4)
    inner = "original_max_position_embeddings" in (rs or {})
    # Gemma 3's 4.x layout: sliding layers rotate at rope_local_base_freq, without the scaling
    local = hf_get(text, "rope_local_base_freq")
    if local is None and isinstance(HF_DEFAULT_THETA.get(model_type), dict) and "sliding_attention" in types:
        local = HF_DEFAULT_THETA[model_type]["local"]  # Gemma 3's class default for its sliding layers
    if local is None and model_type in FULL_LAYER_SCALING_FAMILIES and "sliding_attention" in types:
        # OLMo 3: Olmo3Config puts a 4.x rope_scaling in rope_parameters["full_attention"] only; the sliding
        # layers rotate at the same rope_theta, unscaled
        local = theta if theta is not None else _default_theta(model_type, "sliding_attention")
    if local is not None and "sliding_attention" in types:
        glob = per_layer(d, f"{prefix}rope_scaling")
        per = {t: p for t, p in glob.items()}
        per["sliding_attention"] = {"rope_type": "default", "rope_theta": _number("rope_local_base_freq", local)}
        if "partial_rotary_factor" in d:
            per["sliding_attention"]["partial_rotary_factor"] = d["partial_rotary_factor"]
        for t, p in per.items():
            if p["rope_type"] in _ORIGINAL_INSIDE and top_orig is not None:
                _fill(p, "original_max_position_embeddings", top_orig, f"{prefix}rope_scaling")
            if "rope_theta" not in p:
                p["rope_theta"] = _default_theta(model_type, t)
        return _RopeRead("transformers 4 (rope_theta, rope_scaling)", per, top_orig, inner)
    return _RopeRead("transformers 4 (rope_theta, rope_scaling)", merged(d, f"{prefix}rope_scaling", None, None),
                     top_orig, inner)


# families whose config class applies a 4.x rope_scaling to the full-attention layers only and rotates the
# sliding ones at rope_theta unscaled (transformers 5.15's Olmo3Config.convert_rope_params_to_dict)
FULL_LAYER_SCALING_FAMILIES: tuple[str, ...] = ("olmo3",)

# The families whose config class rotates only part of each head when the config states no
# partial_rotary_factor (GPT-NeoX: rotary_pct): transformers 5.15's and 4.57's class defaults, which agree
# (`kwargs.setdefault("partial_rotary_factor", ...)` in each configuration_*.py); every other decoder family
# rotates the whole head (scanning every 5.15 config class: the others below 1 are speech and vision models,
# and DeepSeek-V4 and Mistral 4, whose latent attention rotates qk_rope_head_dim)
HF_DEFAULT_PARTIAL_ROTARY: dict[str, float] = {
    "bamba": 0.5, "glm": 0.5, "glm4": 0.5, "glm4_moe": 0.5, "glm4v_moe_text": 0.5, "gpt_neox": 0.25, "nemotron": 0.5,
    "persimmon": 0.5, "phi": 0.5, "qwen3_5_moe_text": 0.25, "qwen3_5_text": 0.25, "qwen3_next": 0.25,
    "recurrent_gemma": 0.5, "stablelm": 0.25,
    # speech encoders (MoonshineConfig, MoonshineStreamingEncoderConfig, GlmAsrEncoderConfig)
    "glmasr_encoder": 0.5, "moonshine": 0.9,
}

# The families whose model code, in transformers 5.15, turns the whole head under default RoPE whatever
# partial_rotary_factor says: their compute_default_rope_parameters never reads it (every modeling file that
# defines one, read by its configuration file's model types). 4.57 built the partial frequencies and then
# rotated part of the head (RecurrentGemma, whose class default is 0.5) or failed on the width (Llama), so the
# two versions disagree and a partial factor stated for one of these families is refused
WHOLE_HEAD_ROTARY_FAMILIES: tuple[str, ...] = (
    "afmoe", "apertus", "arcee", "aria", "aria_text", "axk1", "axk2", "bitnet", "blt", "blt_global_transformer",
    "blt_local_decoder", "blt_patcher", "chameleon", "cohere", "cohere2", "cohere2_moe", "cosmos3_edge",
    "cosmos3_edge_text", "csm", "csm_depth_decoder_model", "cwm", "dbrx", "deepseek_ocr2", "deepseek_ocr2_text",
    "deepseek_v2", "deepseek_v3", "deepseek_v32", "dia", "dia_decoder", "diffllama", "doge", "dots1", "emu3",
    "emu3_text_model", "ernie4_5", "ernie4_5_moe", "ernie4_5_vl_moe", "ernie4_5_vl_moe_text", "esm", "eurobert",
    "evolla", "exaone4", "exaone_moe", "falcon", "falcon_h1", "flex_olmo", "gemma", "gemma2", "gemma3",
    "gemma3_text", "gemma3n", "gemma3n_text", "gemma4", "gemma4_text", "gemma4_unified", "gemma4_unified_text",
    "glm_moe_dsa", "gpt_neox_japanese", "gpt_oss", "granite", "granite4_vision_text", "granite_swa", "granitemoe",
    "granitemoe_swa", "granitemoehybrid", "granitemoeshared", "helium", "hrm_text", "hunyuan_v1_dense",
    "hunyuan_v1_moe", "hunyuan_vl", "hunyuan_vl_text", "hy_v3", "hyperclovax", "jais2", "jetmoe",
    "jina_embeddings_v3", "kimi_k25", "lfm2", "lfm2_moe", "llama", "llama4", "llama4_text", "longcat_flash",
    "minicpm3", "minimax", "ministral", "ministral3", "mistral", "mistral4", "mixtral", "mllama",
    "mllama_text_model", "modernbert", "modernbert-decoder", "moshi", "moshi_depth", "muse_glimmer",
    "muse_glimmer_assistant", "muse_glimmer_text", "nanochat", "nomic_bert", "olmo", "olmo2", "olmo3", "olmo_hybrid",
    "olmoe", "openai_privacy_filter", "paddleocr_vl", "paddleocr_vl_text", "phimoe", "pixtral", "qwen2",
    "qwen2_5_omni", "qwen2_5_omni_talker", "qwen2_5_omni_text", "qwen2_5_omni_thinker", "qwen2_5_vl",
    "qwen2_5_vl_text", "qwen2_moe", "qwen2_vl", "qwen2_vl_text", "qwen3", "qwen3_moe", "qwen3_omni_moe",
    "qwen3_omni_moe_talker_code_predictor", "qwen3_omni_moe_talker_text", "qwen3_omni_moe_text",
    "qwen3_omni_moe_thinker", "qwen3_vl", "qwen3_vl_moe", "qwen3_vl_moe_text", "qwen3_vl_text", "recurrent_gemma",
    "seed_oss", "smollm3", "starcoder2", "t5_gemma_module", "t5gemma", "t5gemma2", "t5gemma2_decoder",
    "t5gemma2_text", "vaultgemma", "voxtral_realtime", "voxtral_realtime_text", "youtu", "zamba2",
)

# transformers' RotaryEmbeddingConfigMixin.default_theta: the base of a config that states none
DEFAULT_ROPE_THETA = 10000.0
# The families whose config class gives another default base (transformers 5.15, each class's default_theta;
# {"global": ..., "local": ...}: full-attention and sliding layers), for a config.json that states no base
HF_DEFAULT_THETA: dict[str, float | dict[str, float]] = {
    'EvollaModel': 500000.0,
    'apertus': 12000000.0,
    'bitnet': 500000.0,
    'blt': 500000.0,
    'blt_global_transformer': 500000.0,
    'blt_local_decoder': 500000.0,
    'blt_local_encoder': 500000.0,
    'cohere': 500000.0,
    'cosmos3_edge_text': 100000000.0,
    'csm': 500000.0,
    'csm_depth_decoder_model': 500000.0,
    'cwm': 1000000.0,
    'emu3_text_model': 1000000.0,
    'eomt_dinov3': 100.0,
    'ernie4_5': 500000.0,
    'ernie4_5_moe': 500000.0,
    'ernie4_5_vl_moe_text': 500000.0,
    'evolla': 500000.0,
    'flex_olmo': 500000.0,
    'fuyu': 25000.0,
    'gemma3_text': {'global': 1000000.0, 'local': 10000.0},
    'gemma3n_text': {'global': 1000000.0, 'local': 10000.0},
    'gemma4_vision': 100.0,
    'gpt_oss': 150000.0,
    'helium': 100000.0,
    'hy_v3': 11158840.0,
    'jina_embeddings_v3': 20000.0,
    'lfm2': 1000000.0,
    'lfm2_moe': 1000000.0,
    'llama4_text': 500000.0,
    'longcat_flash': 10000000.0,
    'minimax': 1000000.0,
    'minimax_m2': 5000000.0,
    'minimax_m3_vl_text': 5000000.0,
    'mixtral': 1000000.0,
    'mllama_text_model': 500000.0,
    'modernbert': {'global': 160000.0, 'local': 10000.0},
    'modernbert-decoder': {'global': 160000.0, 'local': 10000.0},
    'muse_glimmer_assistant': 500000.0,
    'nomic_bert': 1000.0,
    'olmo3': 500000.0,
    'openai_privacy_filter': 150000.0,
    'paddleocr_vl_text': 500000.0,
    'phimoe': 1000000.0,
    'pe_audio_encoder': 20000.0,
    'qwen2_5_omni_talker': 1000000.0,
    'qwen2_5_omni_text': 1000000.0,
    'qwen2_5_vl_text': 1000000.0,
    'qwen2_vl_text': 1000000.0,
    'qwen3_omni_moe_text': 1000000.0,
    'qwen3_vl_moe_text': 500000.0,
    'qwen3_vl_text': 500000.0,
    'smollm3': 2000000.0,
    'solar_open': 1000000.0,
    't5gemma2_decoder': {'global': 1000000.0, 'local': 10000.0},
    't5gemma2_text': {'global': 1000000.0, 'local': 10000.0},
}
# where transformers 4.57's default (the config class's rope_theta argument) differs from 5.15's: a config
# stating no base is read differently by the two versions, so it is refused
HF_DEFAULT_THETA_4_57: dict[str, float] = {"cohere": 10000.0, "olmo3": 10000.0, "qwen3_vl_text": 5000000.0,
                                            "qwen3_vl_moe_text": 5000000.0}


def _default_theta(model_type: str, layer_type: str) -> float:
    """The base transformers gives a layer type of a config that states none (HF_DEFAULT_THETA)."""
    if model_type in HF_DEFAULT_THETA_4_57:
        raise ValueError(f"the config states no rope_theta, and transformers' default for model_type {model_type!r} "
                         f"changed: {HF_DEFAULT_THETA_4_57[model_type]:g} in 4.57, {HF_DEFAULT_THETA[model_type]:g} in "
                         "5.15. Write the model's base into the config")
    theta = HF_DEFAULT_THETA.get(model_type, DEFAULT_ROPE_THETA)
    if isinstance(theta, dict):
        return float(theta["local" if layer_type == "sliding_attention" else "global"])
    return float(theta)


def hf_rope_layout(config: Any) -> str:
    """Where the config keeps its RoPE settings: "transformers 5 (rope_parameters)", "transformers 4
    (rope_theta, rope_scaling)", or "none" (no RoPE field at all: base 10,000, no scaling)."""
    return _read_rope(config).layout


def hf_rope_parameters(config: Any) -> dict[str, dict[str, Any]]:
    """Each attention layer type's RoPE settings, in transformers 5's form, whichever layout the config uses.

    Keys: the config's layer types (`hf_layer_types`; linear-attention layers do not rotate and are
    left out). Values: {"rope_type", "rope_theta", the scaling's keys, and partial_rotary_factor,
    original_max_position_embeddings or the M-RoPE sections where the config states them}. A config
    with one set of settings gives every layer type the same dict.
    """
    return {t: dict(p) for t, p in _read_rope(config).per_type.items()}


def hf_rope_layer_type(config: Any, layer_type: str | None = None) -> str:
    """The layer type whose RoPE settings `hf_rope_parameters_for` reads: layer_type itself (checked), else
    the first layer type when every type shares its settings, else "full_attention" (the layers a context
    extension is about)."""
    per = _read_rope(config).per_type
    if layer_type is not None:
        return check_choice("layer_type", layer_type, tuple(per))
    first = next(iter(per))
    if all(p == per[first] for p in per.values()):
        return "full_attention" if "full_attention" in per else first
    if "full_attention" in per:
        return "full_attention"
    raise ValueError(f"the config's layer types {sorted(per)} rotate differently and none is full_attention: "
                     "pass layer_type")


def hf_rope_parameters_for(config: Any, layer_type: str | None = None) -> dict[str, Any]:
    """One layer type's RoPE settings (`hf_rope_parameters`). layer_type=None: the settings every layer
    type shares, else the full-attention layers' (`hf_rope_layer_type`)."""
    return dict(_read_rope(config).per_type[hf_rope_layer_type(config, layer_type)])


def hf_rope_base(config: Any, layer_type: str | None = None) -> float:
    """The RoPE base (rope_theta) of a layer type, read from either layout (`hf_rope_parameters_for`)."""
    return float(hf_rope_parameters_for(config, layer_type)["rope_theta"])


# families whose full-attention layers have their own, wider head (Gemma4TextConfig: global_head_dim, 512 by default)
GLOBAL_HEAD_FAMILIES: tuple[str, ...] = ("gemma4",)


def hf_layer_overrides(config: Any) -> dict[int, Mapping[str, Any]]:
    """transformers 5's per_layer_config: layer index -> the attributes that layer sets for itself (Gemma 4's
    full layers: head_dim and num_key_value_heads). Gemma4TextConfig builds it from global_head_dim and
    num_global_key_value_heads and `save_pretrained` writes it in their place (keys such as "05"); where a
    config holds it, transformers reads it and not those two. {} where the config has none."""
    text = hf_text_config(config)
    raw = text.get("per_layer_config") if isinstance(text, Mapping) else None
    if raw is None and not isinstance(text, Mapping):  # a config object keeps it as a view: read its dict
        to_dict = getattr(text, "to_dict", None)
        raw = to_dict().get("per_layer_config") if callable(to_dict) else None
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise TypeError(f"per_layer_config must map layer indices to dicts, got {type(raw).__name__} ({raw!r})")
    out: dict[int, Mapping[str, Any]] = {}
    for key, value in raw.items():
        try:
            index = int(key)
        except (TypeError, ValueError):
            raise ValueError(f"per_layer_config key {key!r} is not a layer index") from None
        if not isinstance(value, Mapping):
            raise TypeError(f"per_layer_config[{key!r}] must be a dict, got {type(value).__name__} ({value!r})")
        out[index] = value
    return out


def hf_head_dim(config: Any, layer_type: str | None = None) -> int:
    """The head width transformers' rotary embedding reads: head_dim if the config gives it, else
    hidden_size // num_attention_heads; under latent attention (kv_lora_rank with qk_rope_head_dim:
    DeepSeek-V2/V3, Kimi K2, GLM-5) qk_rope_head_dim, which DeepseekV3Config copies into head_dim; for
    Gemma 4's full-attention layers (layer_type="full_attention") the head_dim its per_layer_config gives
    them (`hf_layer_overrides`, as a saved config states it), else its global_head_dim (512 by default)."""
    text = hf_text_config(config)
    model_type = str(hf_get(text, "model_type", ""))
    if _has(text, "kv_lora_rank") and _has(text, "qk_rope_head_dim"):
        return check_int("qk_rope_head_dim", hf_get(text, "qk_rope_head_dim"), 2)
    if layer_type == "full_attention" and model_type.startswith(GLOBAL_HEAD_FAMILIES):
        kinds = hf_layer_types(text)
        overrides = hf_layer_overrides(text)
        widths = {overrides[i]["head_dim"] for i, k in enumerate(kinds)
                  if k == "full_attention" and i in overrides and overrides[i].get("head_dim") is not None}
        if len(widths) > 1:
            raise ValueError(f"per_layer_config gives the full_attention layers head_dim {sorted(widths)}: one "
                             "rotary module per layer type needs one width")
        if widths:
            return check_int("per_layer_config head_dim", widths.pop(), 2)
        return check_int("global_head_dim", hf_get(text, "global_head_dim", 512), 2)
    if _has(text, "head_dim"):
        return check_int("head_dim", hf_get(text, "head_dim"), 1)
    missing = [k for k in ("hidden_size", "num_attention_heads") if hf_get(text, k) is None]
    if missing:
        raise ValueError(f"the config states no head_dim and no {' and no '.join(missing)}: the head width is "
                         "hidden_size // num_attention_heads, and transformers' config class for model_type "
                         f"{model_type!r} fills what the file leaves out with its own defaults, which this library "
                         "does not guess; state them (or load the file through the class first)")
    hidden = check_int("hidden_size", hf_get(text, "hidden_size"), 1)
    heads = check_int("num_attention_heads", hf_get(text, "num_attention_heads"), 1)
    return hidden // heads


def _partial_rotary_factor(config: Any, layer_type: str | None = None) -> float:
    # GPT-NeoX configs call it rotary_pct; both layouts are read by hf_rope_parameters_for
    return float(hf_rope_parameters_for(config, layer_type).get("partial_rotary_factor", 1.0))


def hf_rotary_dim(config: Any, layer_type: str | None = None) -> int:
    """The channels per head that rotate, as transformers computes them: int(head_dim * partial_rotary_factor)
    (both from either layout; a "proportional" layer rotates its whole head, its last pairs at frequency 0)."""
    layer_type = hf_rope_layer_type(config, layer_type)
    p = hf_rope_parameters_for(config, layer_type)
    head = hf_head_dim(config, layer_type)
    if hf_rope_family(config) in ROTARY_DIM_FAMILIES:  # GPT-J, CodeGen: the config's own width, exactly
        return int(hf_get(hf_text_config(config), "rotary_dim", 64))
    if p["rope_type"] == "proportional":
        return head
    return int(head * float(p.get("partial_rotary_factor", 1.0)))


def _float(name: str, value: Any, field: str = "rope_scaling") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{field}[{name!r}] must be a number, got {type(value).__name__} ({value!r})")
    return float(value)


def _check_mrope(p: Mapping[str, Any], rotary_pairs: int) -> None:
    section = p.get("mrope_section")
    if section is None:
        return
    if not isinstance(section, (list, tuple)) or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                                        for s in section):
        raise TypeError(f"mrope_section must be a list of pair counts (ints), got {section!r}")
    if sum(section) != rotary_pairs:
        raise ValueError(f"mrope_section {list(section)} covers {sum(section)} pairs but the head rotates "
                         f"{rotary_pairs}: the sections must add up to the rotary pairs")


def _scaling_parameters(config: Any, layer_type: str | None = None) -> tuple[str, dict[str, Any]]:
    """(library scaling name, RopeScaling keyword arguments) for a layer type's RoPE, as transformers reads it."""
    read = _read_rope(config)
    text = hf_text_config(config)
    p = hf_rope_parameters_for(config, layer_type)
    kind = p["rope_type"]
    v5 = read.layout.startswith("transformers 5")
    field = _rope_field(config, layer_type)  # what the messages call the dict: the field the config used
    if p.get("mrope_section") is not None:
        _check_mrope(p, hf_rotary_dim(config, layer_type) // 2)
    given = {k: v for k, v in p.items() if k not in ROPE_BASE_KEYS | MROPE_KEYS}
    if kind == "default":
        extra = sorted(given)
        if extra:
            raise ValueError(f"{field} has rope_type 'default' but also {extra}, which default RoPE does not "
                             "read; remove them or name the scaling they belong to")
        return "none", {}
    unknown = sorted(set(given) - HF_SCALING_KEYS[kind])
    if unknown:
        raise ValueError(f"{field} key(s) {unknown} are not read by transformers' {kind!r} scaling (it reads "
                         f"{sorted(HF_SCALING_KEYS[kind])}); a key it ignores is a setting the model would not "
                         "get: remove it or fix its name")
    max_pos = hf_get(text, "max_position_embeddings")
    max_pos = None if max_pos is None else _length("max_position_embeddings", max_pos)
    args: dict[str, Any] = {}
    if kind in ("linear", "dynamic", "yarn", "llama3"):
        if given.get("factor") is None:
            raise ValueError(f"{field} of type {kind!r} needs 'factor' (transformers raises KeyError without it)")
        args["factor"] = _float("factor", given["factor"], field)
    if kind in ("dynamic", "yarn", "llama3", "longrope") and max_pos is None and given.get(
            "original_max_position_embeddings") is None:
        raise ValueError(f"{field} of type {kind!r} needs max_position_embeddings (or "
                         "original_max_position_embeddings) to anchor the scaling at")
    orig = given.get("original_max_position_embeddings")
    if kind == "dynamic":
        # transformers' dynamic NTK grows past max_position_embeddings, whatever rope_scaling says
        if max_pos is None:
            raise ValueError(f"{field} of type 'dynamic' needs max_position_embeddings: transformers grows the "
                             "base past it")
        if orig is not None and orig != max_pos:
            raise ValueError(f"{field}['original_max_position_embeddings']={orig} differs from "
                             f"max_position_embeddings={max_pos}: transformers' dynamic scaling (4.57 and 5) uses "
                             "max_position_embeddings and ignores the key; make them equal")
        args["original_max_len"] = max_pos
    elif kind in ("yarn", "llama3"):
        if (not v5 and read.top_original is not None and not read.inner_original_v4
                and read.top_original != max_pos and kind == "yarn"):
            raise ValueError(f"original_max_position_embeddings={read.top_original} is at the config's top level, "
                             f"outside {field}: transformers 5 reads it as YaRN's anchor, 4.57 ignores it "
                             f"and uses max_position_embeddings={max_pos}. Move it into {field}")
        args["original_max_len"] = int(orig if orig is not None else max_pos)
        if kind == "yarn":
            for key in ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim"):
                if given.get(key) is not None:
                    args[key] = _float(key, given[key], field)
            if "truncate" in given:
                if not isinstance(given["truncate"], bool):
                    raise TypeError(f"{field}['truncate'] must be true or false, got {given['truncate']!r}")
                args["truncate"] = given["truncate"]
        else:
            missing = sorted({"low_freq_factor", "high_freq_factor"} - set(given))
            if missing:
                raise ValueError(f"{field} of type 'llama3' needs {missing}")
            args["low_freq_factor"] = _float("low_freq_factor", given["low_freq_factor"], field)
            args["high_freq_factor"] = _float("high_freq_factor", given["high_freq_factor"], field)
    elif kind == "proportional":
        # transformers 5.15 (_compute_proportional_rope_parameters): factor and partial_rotary_factor default to 1
        if given.get("factor") is not None:
            args["factor"] = _float("factor", given["factor"], field)
        args["rotated_fraction"] = _partial_rotary_factor(config, layer_type)
    elif kind == "longrope":
        for key in ("short_factor", "long_factor"):
            if key not in given:
                raise ValueError(f"{field} of type 'longrope' needs {key!r}, one factor per frequency pair")
            if not isinstance(given[key], (list, tuple)):
                raise TypeError(f"{field}[{key!r}] must be a list of numbers, one per frequency pair, got "
                                f"{type(given[key]).__name__}")
            args[key] = tuple(given[key])
        if read.top_original is not None:
            L = read.top_original
        elif orig is not None and v5:
            L = orig  # transformers 5's own layout keeps the anchor (pre-extension length L) inside
        else:
            if orig is not None and orig != max_pos:
                raise ValueError(f"{field}['original_max_position_embeddings']={orig}, but transformers 4.57's "
                                 f"longrope switches factors at max_position_embeddings={max_pos} (it reads only the "
                                 "top-level original_max_position_embeddings) while transformers 5 switches at the "
                                 "key's value; move it to the top level")
            L = int(max_pos)
        if given.get("factor") is not None:
            factor = _float("factor", given["factor"], field)
            if read.top_original is not None and max_pos is not None and factor != max_pos / L:
                raise ValueError(f"{field}['factor']={given['factor']} differs from max_position_embeddings / "
                                 f"original_max_position_embeddings = {max_pos} / {L} = {max_pos / L:g}: transformers "
                                 "4.57 uses the ratio for longrope, transformers 5 the factor; make them agree")
        elif L != max_pos and max_pos is not None:
            factor = max_pos / L
        elif given.get("attention_factor") is None:
            raise ValueError(f"{field} of type 'longrope' needs 'factor' (or 'attention_factor', or an "
                             "original_max_position_embeddings) to set its attention factor")
        else:
            factor = 1.0
        args["original_max_len"] = L
        # factor only sets the attention factor, and transformers gives 1 for any factor <= 1, as 1 does
        args["factor"] = max(factor, 1.0)
        if given.get("attention_factor") is not None:
            args["attention_factor"] = _float("attention_factor", given["attention_factor"], field)
    return HF_ROPE_TYPES[kind], args


def rope_scaling_from_hf(config: Any, layer_type: str | None = None) -> RopeScaling:
    """The `RopeScaling` transformers applies for a layer type of config (frequencies over the rotary
    width `hf_rotary_dim`, at the base `hf_rope_base`), from either layout."""
    name, args = _scaling_parameters(config, layer_type)
    return RopeScaling(name, **args)


def rope_options_from_hf(config: Any, pairing: str | None = None, layer_type: str | None = None) -> dict[str, Any]:
    """The `GPTConfig.rope` options that reproduce config's RoPE: base, pairing, scaling and its parameters.

    pairing: None gives the checkpoint's own (`hf_rope_pairing`: "interleaved" for DeepSeek-V3, Kimi K2, GLM-5,
    Llama 4, ...; "half" for Llama's layout); "half" or "interleaved" asks for that one, for a model whose q and k
    weights are permuted to it (`convert_rotary_weights`, as `gpt_from_hf_llama` does).
    partial_rotary_factor != 1 becomes the "partial_rotary_factor" option where GPTConfig has it,
    else an error (it is never dropped).
    """
    # a config with no rotating layer (Kimi Linear's mla_use_nope) has no RoPE to read, whatever its family; any other
    # family whose code this module has not read is refused by name before its layers are read
    if not _has(hf_text_config(config), "num_hidden_layers") or any(hf_rotating_layers(config)):
        hf_rope_family(config)
    if not any(hf_rotating_layers(config)):
        text = hf_text_config(config)
        why = ("mla_use_nope=True: Kimi Linear's latent attention is NoPE, and its Kimi Delta Attention layers carry "
               "order in their recurrence" if hf_get(text, "mla_use_nope") else
               "rope_theta is null: OlmoHybridModel builds no rotary module" if hf_get(text, "model_type") ==
               "olmo_hybrid" else "no_rope_layers marks every layer NoPE")
        raise ValueError(f"no layer of this config rotates ({why}): there is no RoPE to read, and its rope_theta is "
                         "read by nothing")
    own = hf_rope_pairing(config)
    if pairing is not None:
        check_choice("pairing", pairing, ("half", "interleaved"))
    rope: dict[str, Any] = {"base": hf_rope_base(config, layer_type), "pairing": own if pairing is None else pairing}
    name, args = _scaling_parameters(config, layer_type)
    RopeScaling(name, **args)  # validate here, with the library's messages
    if name != "none":
        rope.update(scaling=name, **args)
    prf = _partial_rotary_factor(config, layer_type)
    if prf != 1.0 and name != "proportional":
        head, rot = hf_head_dim(config, layer_type), hf_rotary_dim(config, layer_type)
        if "partial_rotary_factor" not in ROPE_OPTIONS:
            raise ValueError(f"partial_rotary_factor={prf:g} (only the first {rot} of {head} channels rotate) is not "
                             "supported by this GPT build")
        if round(prf * head) != rot:
            raise ValueError(f"partial_rotary_factor={prf:g} of head_dim={head} is not a whole number of channels; "
                             f"transformers truncates it to {rot}")
        rope["partial_rotary_factor"] = prf
    return rope


_GPT_FIELDS = {f.name for f in fields(GPTConfig)}


def _architecture_options(config: Any) -> dict[str, Any]:
    """GQA and per-layer attention settings, where GPTConfig has the field; an error where it does not."""
    out: dict[str, Any] = {}
    n_heads = check_int("num_attention_heads", hf_get(config, "num_attention_heads"), 1)
    n_kv = check_int("num_key_value_heads", hf_get(config, "num_key_value_heads", n_heads), 1)
    if n_kv != n_heads:
        if "n_kv_heads" not in _GPT_FIELDS:
            raise ValueError(f"grouped-query attention (num_key_value_heads={n_kv} < num_attention_heads={n_heads}) "
                             "needs GPTConfig.n_kv_heads, which this build lacks")
        out["n_kv_heads"] = n_kv
    refuse = []
    for key in ("attention_chunk_size", "attn_temperature_tuning", "sliding_window_pattern"):
        if hf_get(config, key):
            refuse.append(key)
    rotates = hf_rotating_layers(config)
    if not all(rotates):
        if "nope_layers" not in _GPT_FIELDS:
            refuse.append("no_rope_layers")
        else:
            out["nope_layers"] = tuple(i for i, r in enumerate(rotates) if not r)
    kinds = hf_layer_types(config)  # stated, else the family's class pattern; refused where it cannot be read
    if any(t != "full_attention" for t in kinds):
        if "layer_types" not in _GPT_FIELDS:
            refuse.append("layer_types")
        else:
            out["layer_types"] = kinds
            if "sliding_attention" in kinds:
                out["sliding_window"] = hf_sliding_window(config)
    per = hf_rope_parameters(config)
    if ("sliding_attention" in out.get("layer_types", ()) and "full_attention" in per
            and per.get("sliding_attention") != per["full_attention"]):
        local, full = per["sliding_attention"], per.get("full_attention", {})
        same_rest = {k: v for k, v in local.items() if k != "rope_theta"} == {
            "rope_type": "default", **({"partial_rotary_factor": full["partial_rotary_factor"]}
                                       if "partial_rotary_factor" in full else {})}
        if "rope_local_base" not in _GPT_FIELDS or not same_rest:
            refuse.append(f"sliding layers' own RoPE {local}")
        else:  # Gemma 3's layout: sliding layers at their own base, unscaled
            out["rope_local_base"] = float(local["rope_theta"])
    if refuse:
        raise ValueError(f"config sets {refuse}, which this GPT cannot reproduce; converting without them would "
                         "change the model's attention")
    return out


def _refuse_latent_attention(config: Any) -> None:
    """Raise for a latent-attention config (`LATENT_ATTENTION_FAMILIES`, or one stating kv_lora_rank), naming the
    softmax factor its attention would add: a Llama-layout GPT reproduces neither."""
    family = hf_rope_family(config)
    rank = hf_get(config, "kv_lora_rank")
    if family not in LATENT_ATTENTION_FAMILIES and rank is None:
        return
    why = (f"model_type={family!r}" + (f" with kv_lora_rank={rank}" if rank is not None else "")
           + " is latent attention: it caches a latent and rebuilds each head's key and value from it, where this "
           "GPT's heads keep their own")
    rope = hf_rope_parameters_for(config)
    factor, all_dim = rope.get("factor"), rope.get("mscale_all_dim")
    if rope.get("rope_type", "default") != "default" and all_dim and factor and float(factor) > 1:
        m = 0.1 * float(all_dim) * math.log(float(factor)) + 1.0  # yarn_get_mscale(factor, mscale_all_dim)
        why += (f"; transformers 5.15's attention for it also multiplies the softmax scale by (0.1 * mscale_all_dim * "
                f"ln(factor) + 1) ** 2 = {m * m:.4f} (mscale_all_dim={all_dim}, factor={factor}), a factor no rotary "
                "embedding carries")
    raise ValueError(why + ". Converting it would change the model's attention without an error")


def gpt_config_from_hf(config: Any, pairing: str | None = None) -> GPTConfig:
    """A GPTConfig (RMSNorm, SwiGLU, no biases unless attention_bias) for a Llama-layout config (either
    layout of its RoPE settings; a multimodal config's text config).

    Raises where the config asks for something the GPT would not do (head_dim other than
    hidden_size / num_attention_heads, chunked attention, temperature tuning, latent attention and its
    mscale_all_dim softmax factor, ...).
    """
    config = hf_text_config(config)
    _refuse_latent_attention(config)
    d_model = check_int("hidden_size", hf_get(config, "hidden_size"), 1)
    n_heads = check_int("num_attention_heads", hf_get(config, "num_attention_heads"), 1)
    if hf_head_dim(config) * n_heads != d_model:
        raise ValueError(f"head_dim={hf_head_dim(config)} times num_attention_heads={n_heads} must equal "
                         f"hidden_size={d_model} for this GPT (its heads split d_model)")
    if check_bool("mlp_bias", hf_get(config, "mlp_bias", False)):
        raise ValueError("mlp_bias=True is not supported: GPTConfig.bias covers attention and MLP together")
    return GPTConfig(
        vocab_size=check_int("vocab_size", hf_get(config, "vocab_size"), 1), d_model=d_model, n_heads=n_heads,
        n_layers=_n_layers(config),
        max_len=_length("max_position_embeddings", hf_get(config, "max_position_embeddings")),
        positional="rope", d_ff=check_int("intermediate_size", hf_get(config, "intermediate_size"), 1),
        rope=rope_options_from_hf(config, pairing),
        norm="rms", mlp="swiglu", bias=check_bool("attention_bias", hf_get(config, "attention_bias", False)),
        tie_embeddings=check_bool("tie_word_embeddings", hf_get(config, "tie_word_embeddings", False)),
        norm_eps=_number("rms_norm_eps", hf_get(config, "rms_norm_eps", 1e-6)), **_architecture_options(config),
    )


# Families whose transformers model is a Llama's module for module, so `gpt_from_hf_llama` copies it: SmolLM3 adds
# only NoPE layers (SmolLM3Attention skips apply_rotary_pos_emb where no_rope_layers[i] is 0) and, with
# use_sliding_window, windows, both of which `gpt_config_from_hf` reads
LLAMA_LAYOUT_FAMILIES: tuple[str, ...] = ("llama", "smollm3")


def gpt_from_hf_llama(hf_model: nn.Module, pairing: str = "half") -> GPT:
    """Copy a Hugging Face LlamaForCausalLM's weights (or a SmolLM3ForCausalLM's: `LLAMA_LAYOUT_FAMILIES`) into a
    GPT whose logits equal the model's.

    Every RoPE setting of its config is honoured (`rope_options_from_hf`) or refused, NoPE layers included. With
    pairing="interleaved" the q and k projections are permuted by `convert_rotary_weights` (per
    query head for q, per KV head for k), which leaves every attention score unchanged.
    """
    hc = hf_model.config
    model_type = getattr(hc, "model_type", "llama")
    if model_type not in LLAMA_LAYOUT_FAMILIES:
        raise ValueError(f"gpt_from_hf_llama copies the weights of Llama-layout models (model_type in "
                         f"{LLAMA_LAYOUT_FAMILIES}); got model_type={model_type!r}")
    config = gpt_config_from_hf(hc, pairing)
    model = GPT(config)
    src = hf_model.model
    n_kv = getattr(config, "n_kv_heads", None) or config.n_heads

    def perm(w: torch.Tensor, heads: int) -> torch.Tensor:
        return convert_rotary_weights(w, heads, "interleaved") if pairing == "interleaved" else w

    with torch.no_grad():
        model.tok_emb.weight.copy_(src.embed_tokens.weight)
        for ours, theirs in zip(model.blocks, src.layers):
            a, t = ours.attn, theirs.self_attn
            a.q_proj.weight.copy_(perm(t.q_proj.weight, config.n_heads))
            a.k_proj.weight.copy_(perm(t.k_proj.weight, n_kv))
            a.v_proj.weight.copy_(t.v_proj.weight)
            a.o_proj.weight.copy_(t.o_proj.weight)
            if config.bias:
                a.q_proj.bias.copy_(perm(t.q_proj.bias, config.n_heads))
                a.k_proj.bias.copy_(perm(t.k_proj.bias, n_kv))
                a.v_proj.bias.copy_(t.v_proj.bias)
                a.o_proj.bias.copy_(t.o_proj.bias)
            ours.norm1.weight.copy_(theirs.input_layernorm.weight)
            ours.norm2.weight.copy_(theirs.post_attention_layernorm.weight)
            ours.mlp.gate.weight.copy_(theirs.mlp.gate_proj.weight)
            ours.mlp.up.weight.copy_(theirs.mlp.up_proj.weight)
            ours.mlp.down.weight.copy_(theirs.mlp.down_proj.weight)
        model.norm_f.weight.copy_(src.norm.weight)
        if not config.tie_embeddings:
            model.lm_head.weight.copy_(hf_model.lm_head.weight)
    return model

