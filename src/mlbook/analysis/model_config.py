"""Reading a model's config.json: the positional settings, on one screen.

The configs shipped with the book (`SHIPPED_CONFIGS`, package data under mlbook/data/configs,
each with a `_source` naming where its values were read) are real 2024-2026 models'. For any of
them, or any config.json dict, `summarize_config` computes what an engineer reads before
extending a context:

    wavelengths   lambda_i = 2 pi / theta_i in tokens, shortest and longest, unscaled and scaled, and how
                  many pairs never complete a turn within the scaling's anchor (pre-extension length)
    bands         per scaling method: YaRN's keep / blend / interpolate (`yarn_bands`, honouring
                  `truncate`), Llama 3.1's keep / blend / divide by wavelength, linear's all-divided,
                  LongRoPE's per-pair factors
    factors       the attention factor on cos and sin, the context ratio and whether
                  max_position_embeddings already includes it
    layers        which layers rotate (NoPE layers of hybrid stacks), each layer's window and base
    KV cache      bytes per token and at the longest context, with grouped-query heads, latent
                  attention and windowed layers (`mlbook.analysis.production.config_kv_plan`, the KV
                  calculator; this module only reads it)

Everything is computed by the library: the frequencies by `mlbook.transformer.hf.rope_scaling_from_hf`
(the same keys, read the same way, as transformers 4.57), the bands by `rope_scaling.yarn_bands`.

The pitfalls readers hit have their own functions: `read_rope_type` (legacy "type", names an
older or other library uses), `context_lengths` (max_position_embeddings already multiplied, or
not), `serving_override` (what a serving engine's --hf-overrides / --max-model-len override
changes, and that it applies at every length).
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass
from importlib import resources
from typing import Any, Mapping

import torch

from mlbook.analysis.absolute import pair_wavelengths
from mlbook.analysis.after_rope import llama4_attention_scale
from mlbook.analysis.systems import format_bytes
from mlbook.transformer.hf import (
    ATTRIBUTE_ALIASES,
    HF_ROPE_TYPES,
    LEGACY_ROPE_TYPES,
    MROPE_BLOCK_FAMILIES,
    MROPE_INTERLEAVED_FAMILIES,
    PER_LAYER_TYPE_ROPE_FAMILIES,
    TEXT_CONFIG_NAMES,
    hf_get,
    hf_head_dim,
    hf_layer_types,
    hf_rope_base,
    hf_rope_layout,
    hf_rope_parameters,
    hf_rope_parameters_for,
    hf_rope_type,
    hf_rotary_dim,
    hf_rotating_layers,
    hf_sliding_window,
    hf_text_config,
    rope_scaling_from_hf,
)
from mlbook.transformer.positional import frequency_ladder
from mlbook.transformer.rope_scaling import yarn_bands
from mlbook.transformer.validate import check_choice, check_int

__all__ = [
    "VLLM_LENGTH_KEYS",
    "VLLM_LENGTH_RULES",
    "vllm_max_model_len",
    "vllm_default_max_model_len",
    "SHIPPED_CONFIGS",
    "PUBLISHED_CONFIGS",
    "load_config",
    "config_source",
    "rotary_width",
    "read_rope_type",
    "ContextLengths",
    "context_lengths",
    "scaling_bands",
    "scaling_divisors",
    "LayerPlan",
    "layer_plan",
    "ConfigSummary",
    "summarize_config",
    "serving_override",
]

_CONFIG_DIR = resources.files("mlbook") / "data" / "configs"
_ALL_CONFIGS = {p.name[:-5]: json.loads(p.read_text()) for p in _CONFIG_DIR.iterdir() if p.name.endswith(".json")}
# the extracts: each model's positional fields, complete (what the published file leaves to its config class is
# written in, from the class, and its _source says so)
SHIPPED_CONFIGS: tuple[str, ...] = tuple(sorted(n for n, c in _ALL_CONFIGS.items() if not c.get("_published")))
# published files kept in their minimal form (`"_published": true`): only what the model's config.json states, the
# rest left to transformers' config class (Gemma 3 4B's Hub file names no heads, no base, no layer pattern)
PUBLISHED_CONFIGS: tuple[str, ...] = tuple(sorted(n for n, c in _ALL_CONFIGS.items() if c.get("_published")))


def load_config(name: str) -> dict[str, Any]:
    """A shipped config.json as a dict (`SHIPPED_CONFIGS` or `PUBLISHED_CONFIGS`; fields starting with "_" say where
    it was read and what it leaves out)."""
    check_choice("config", name, SHIPPED_CONFIGS + PUBLISHED_CONFIGS)
    return copy.deepcopy(_ALL_CONFIGS[name])


def config_source(config: Mapping[str, Any]) -> str:
    """The config's `_source` entries, one per line ("" for a config without one)."""
    src = config.get("_source", ())
    return "\n".join([src] if isinstance(src, str) else list(src))


def rotary_width(config: Mapping[str, Any]) -> int:
    """Channels per head that rotate, from either layout (`transformer.hf.hf_rotary_dim`): qk_rope_head_dim for
    latent attention (DeepSeek's decoupled RoPE key), else int(head_dim * partial_rotary_factor) as
    transformers computes it."""
    return hf_rotary_dim(config)


def _check_dict(config: Any) -> Mapping[str, Any]:
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a dict read from config.json, got {type(config).__name__} ({config!r})")
    return config


def read_rope_type(rope_scaling: Mapping[str, Any] | None, model_type: str | None = None) -> tuple[str, str]:
    """(type, note): the scaling type as transformers reads it from a rope_scaling or rope_parameters
    dict, and a sentence on how it was found.

    The legacy key "type" (configs written before transformers 4.43 renamed it rope_type) is
    read, and said so; "mrope" is read as default RoPE with M-RoPE sections, "su" as longrope for
    Phi-3 (model_type "phi3"); a name transformers does not compute ("su" elsewhere, vLLM's
    "ntk") raises with the fix (`LEGACY_ROPE_TYPES`).
    """
    kind = hf_rope_type(rope_scaling, model_type)
    if rope_scaling is None:
        return kind, "no rope_scaling: plain RoPE, unscaled"
    if "rope_type" in rope_scaling:
        return kind, f"rope_type={kind!r}"
    if "type" in rope_scaling:
        named = rope_scaling["type"]
        renamed = "" if named == kind else f" (transformers reads {named!r} as {kind!r})"
        return kind, (f"legacy key type={named!r}{renamed}: transformers reads it as rope_type, a library that reads "
                      "only rope_type sees no scaling")
    return kind, "rope_scaling without a type: default RoPE"


@dataclass(frozen=True)
class ContextLengths:
    """The scaling's anchor, max_position_embeddings, the scaling's factor, and whether they agree.

    original is the pre-extension length the scaling formula is anchored at (original_max_position_embeddings),
    not the length the release was trained at: Llama 3.1, DeepSeek-V3 and Llama 4 trained past it (their reports
    say how far), and gpt-oss's card gives 131,072 for its YaRN-extended layers. max_position_embeddings is what
    an engine builds its tables and default serving length for. Neither is the length a model was trained or is
    supported at: that is in the card or report. A linear scaling reads no anchor: original is then
    max_position_embeddings, the extended length (stated False).
    """

    original: int  # the scaling's anchor, or max_position_embeddings where none is stated
    max_position_embeddings: int | None
    factor: float  # the scaling's factor (1 without scaling)
    note: str
    stated: bool = True  # False: the config states no anchor; original is max_position_embeddings in its
    #                      place (transformers' yarn, llama3, longrope and dynamic take it so; Qwen3 writes 40,960
    #                      though its long-context pretraining ran at 32,768)

    @property
    def ratio(self) -> float | None:
        """max_position_embeddings / original: the extension the config advertises."""
        return None if self.max_position_embeddings is None else self.max_position_embeddings / self.original


def context_lengths(config: Mapping[str, Any]) -> ContextLengths:
    """The scaling's anchor versus max_position_embeddings, and the pitfall each layout sets (either RoPE
    layout; a multimodal config's text config).

    gpt-oss writes max_position_embeddings = original * factor (131,072 = 4,096 * 32): already
    multiplied. Llama 3.2 1B writes 131,072 = 8,192 * 16 with factor 32: the two disagree, and the
    frequencies follow the factor. A config without original_max_position_embeddings leaves
    transformers to anchor the scaling at max_position_embeddings (YaRN, dynamic).
    """
    text = hf_text_config(_check_dict(config))
    p = hf_rope_parameters_for(text)
    kind = p["rope_type"]
    max_pos = hf_get(text, "max_position_embeddings")  # GPT-J, CodeGen: n_positions (their attribute_map)
    inner = p.get("original_max_position_embeddings") if kind in ("llama3", "yarn", "longrope") else None
    outer = text.get("original_max_position_embeddings")
    for name, value in (("max_position_embeddings", max_pos), ("original_max_position_embeddings", outer),
                        ("initial_context_length", text.get("initial_context_length")),
                        ("rope_scaling['original_max_position_embeddings']", inner)):
        if value is not None:  # 0, True or "4096" would otherwise be read as a length
            check_int(name, value, 1)
    found = inner or outer or text.get("initial_context_length") or max_pos
    stated = bool(inner or outer or text.get("initial_context_length"))
    if found is None:
        raise _unstated(text, "max_position_embeddings", "nor an original length (rope_scaling's or the top level's "
                        "original_max_position_embeddings)")
    if kind not in ("default", "proportional"):
        scaling = rope_scaling_from_hf(text)
        original = int(scaling.original_max_len or found)
        factor = float(scaling.factor)
    else:
        original, factor = int(found), 1.0
    if max_pos is None:
        note = (f"no max_position_embeddings in this config: the scaling's own original length {original:,} and "
                f"factor {factor:g} are all it states")
    elif kind in ("default", "proportional"):
        note = "no scaling: every position up to max_position_embeddings turns at the plain base"
    elif kind == "linear":
        note = (f"linear scaling divides every frequency by {factor:g} at every length; the config does not record "
                "the length before the extension")
    elif kind == "dynamic":
        note = ("dynamic NTK grows the base only past max_position_embeddings, where transformers anchors it")
    elif inner is None and outer is None:
        note = ("no original_max_position_embeddings: transformers anchors the scaling at max_position_embeddings "
                f"({max_pos:,})")
    elif math.isclose(max_pos, original * factor):
        note = (f"max_position_embeddings {max_pos:,} = original {original:,} x factor {factor:g}: already "
                "multiplied; do not multiply it again")
    elif max_pos > original:
        note = (f"max_position_embeddings {max_pos:,} = original {original:,} x {max_pos / original:g}, not x factor "
                f"{factor:g}: the frequencies follow the factor; max_position_embeddings only bounds the positions an "
                "engine builds tables for")
    else:
        note = (f"max_position_embeddings {max_pos:,} is not past the anchor: the scaling is an opt-in for longer "
                "inputs")
    return ContextLengths(original, max_pos, factor, note, stated)


def _class_default(text: Mapping[str, Any], key: str) -> Any:
    """The value transformers' config class for text's model_type gives key when a config leaves it out (for a
    message only; None where transformers or the class is not at hand)."""
    try:
        import transformers

        return getattr(transformers.AutoConfig.for_model(str(text.get("model_type"))), key, None)
    except Exception:  # no transformers, an unknown model type, a class that needs more arguments
        return None


def _unstated(text: Mapping[str, Any], key: str, alternative: str = "") -> ValueError:
    """The refusal for a field the summary needs and the config leaves to its class: named, with the class default."""
    model_type = text.get("model_type")
    default = _class_default(text, key)
    filled = (f"transformers' config class for model_type {model_type!r} fills its default ({default!r}) when it "
              "loads the file" if default is not None else "transformers fills a class default, if it has one")
    return ValueError(f"the config states no {key}{' ' + alternative if alternative else ''}: {filled}, and this "
                      "summary reads only what the file states (plus the RoPE and layer-pattern defaults "
                      "transformer.hf reproduces). State it, or load the file through the class first "
                      "(transformers.AutoConfig.for_model(**text_config).to_dict())")


# the fields the summary and its KV cache read, where a config may leave them to its class (Gemma 3's Hub file states
# no heads); GPT-J's and CodeGen's own names are read through hf_get
_SUMMARY_FIELDS: tuple[str, ...] = ("num_hidden_layers", "num_attention_heads")


def _standard_names(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of config whose text config also states, under the standard names, what GPT-J and CodeGen state under
    their own (`transformer.hf.ATTRIBUTE_ALIASES`: n_head is num_attention_heads, ...), for readers that use the
    standard names only."""
    out = copy.deepcopy(dict(config))
    text = hf_text_config(out)
    for key in ATTRIBUTE_ALIASES.get(str(text.get("model_type", "")), {}):
        if text.get(key) is None and hf_get(text, key) is not None:
            text[key] = hf_get(text, key)
    return out


def _inv_freq(config: Mapping[str, Any], seq_len: int | None) -> tuple[torch.Tensor, float]:
    return rope_scaling_from_hf(config).frequencies(hf_rotary_dim(config), hf_rope_base(config), seq_len)


def scaling_divisors(config: Mapping[str, Any], layer_type: str | None = None) -> tuple[list[float], list[float]]:
    """Per rotating pair of a layer type (default: the full-attention layers), its unscaled wavelength
    2 pi / theta_i in tokens and the factor the config's scaling divides its frequency by, theta_i / theta'_i
    (1: kept; the scaling's factor: fully interpolated), from either layout, at the scaling's own length
    (a dynamic scaling's frequencies at max_position_embeddings are the plain ones). Pairs a proportional
    layer holds still are left out (theta = 0 has no wavelength)."""
    _check_dict(config)
    d = hf_rotary_dim(config, layer_type)
    base = hf_rope_base(config, layer_type)
    plain = frequency_ladder(d, base).double()
    scaled = rope_scaling_from_hf(config, layer_type).frequencies(d, base, None)[0].double()
    keep = (plain > 0) & (scaled > 0)
    return ((2 * math.pi / plain[keep]).tolist(), (plain[keep] / scaled[keep]).tolist())


def scaling_bands(config: Mapping[str, Any]) -> dict[str, Any]:
    """How the config's scaling treats each frequency pair (pairs counted over the rotary width; either layout).

    yarn: keep (r_i = 0), blend, interpolate (r_i = 1) from `yarn_bands` with the config's betas and
    truncate; llama3: keep (lambda_i < L / high_freq_factor), divide (lambda_i > L /
    low_freq_factor), blend between; linear: every pair divided; longrope: the short and long
    factors' ranges; proportional: the pairs that turn and the pairs held at frequency 0; dynamic
    and none: no fixed bands.
    """
    _check_dict(config)
    kind = hf_rope_parameters_for(config)["rope_type"]
    d = rotary_width(config)
    base = hf_rope_base(config)
    scaling = rope_scaling_from_hf(config)
    n = d // 2
    if kind == "yarn":
        bands = yarn_bands(d, base, scaling.original_max_len, scaling.beta_fast, scaling.beta_slow,
                           truncate=scaling.truncate)
        return {"method": "yarn", "pairs": n, "keep": len(bands.keep), "blend": len(bands.blend),
                "interpolate": len(bands.interpolate)}
    if kind == "llama3":
        wavelength = pair_wavelengths(d, base).tolist()
        L = scaling.original_max_len
        keep = sum(w < L / scaling.high_freq_factor for w in wavelength)
        divide = sum(w > L / scaling.low_freq_factor for w in wavelength)
        return {"method": "llama3", "pairs": n, "keep": keep, "blend": n - keep - divide, "interpolate": divide}
    if kind == "linear":
        return {"method": "linear", "pairs": n, "keep": 0, "blend": 0, "interpolate": n}
    if kind == "longrope":
        return {"method": "longrope", "pairs": n, "short_factor": (min(scaling.short_factor), max(scaling.short_factor)),
                "long_factor": (min(scaling.long_factor), max(scaling.long_factor))}
    if kind == "proportional":
        turning = int((scaling.frequencies(d, base, None)[0] > 0).sum())
        return {"method": "proportional", "pairs": n, "turning": turning, "frequency 0": n - turning}
    return {"method": HF_ROPE_TYPES[kind], "pairs": n}


@dataclass(frozen=True)
class LayerPlan:
    """Per layer: attention kind, the window (None: every token), whether q and k rotate, and the base."""

    kinds: tuple[str, ...]
    windows: tuple[int | None, ...]
    rotates: tuple[bool, ...]
    bases: tuple[float | None, ...]  # None where the layer does not rotate
    scaled: tuple[bool, ...]  # whether rope_scaling applies to the layer's rotation

    def counts(self) -> dict[str, int]:
        """Layers per kind; an attention layer that does not rotate is "(NoPE)", a linear-attention layer (Gated
        DeltaNet: no attention scores to rotate, a recurrent state) "(no RoPE)"."""
        out: dict[str, int] = {}
        for k, r in zip(self.kinds, self.rotates):
            key = k if r else f"{k} (no RoPE)" if k == "linear_attention" else f"{k} (NoPE)"
            out[key] = out.get(key, 0) + 1
        return out


def layer_plan(config: Mapping[str, Any]) -> LayerPlan:
    """Each layer's attention kind and window (`transformer.hf.hf_layer_types`), rotation and RoPE base,
    from either layout (`transformer.hf.hf_rope_parameters`: per layer type where the config gives one).

    no_rope_layers (Llama 4, SmolLM3): 1 = the layer rotates, 0 = NoPE; linear-attention layers (Qwen3-Next,
    Qwen3.5) do not rotate. Gemma 3's sliding layers rotate at their own base (rope_local_base_freq in
    the 4.x layout, rope_parameters["sliding_attention"] in 5's), unscaled.
    """
    text = hf_text_config(_check_dict(config))
    kinds = hf_layer_types(text)
    per = hf_rope_parameters(text)
    rotates = tuple(r and k in per for k, r in zip(kinds, hf_rotating_layers(text)))
    caps = {"sliding_attention": hf_sliding_window(text), "chunked_attention": text.get("attention_chunk_size")}
    bases = tuple(float(per[k]["rope_theta"]) if r else None for k, r in zip(kinds, rotates))
    scaled = tuple(r and per[k]["rope_type"] != "default" for k, r in zip(kinds, rotates))
    return LayerPlan(kinds, tuple(caps.get(k) for k in kinds), rotates, bases, scaled)


def _head_dim(config: Mapping[str, Any]) -> int:
    """The query/key head width: qk_nope_head_dim + qk_rope_head_dim under latent attention, else `hf_head_dim`."""
    text = hf_text_config(config)
    if text.get("kv_lora_rank") and text.get("qk_rope_head_dim") is not None:
        return int(text.get("qk_nope_head_dim", 0)) + int(text["qk_rope_head_dim"])
    per = hf_rope_parameters(text)
    return hf_head_dim(text, "full_attention" if "full_attention" in per else None)


def _turns_short(inv_freq: torch.Tensor, length: int) -> int:
    """Pairs whose wavelength 2 pi / theta_i exceeds length: they never complete a turn within it."""
    return int((2 * math.pi / inv_freq.double() > length).sum())


@dataclass(frozen=True)
class ConfigSummary:
    """What `summarize_config` found; `text()` is the one-screen version."""

    name: str
    rope_type: str
    type_note: str
    base: float
    rotary_dim: int
    head_dim: int
    lengths: ContextLengths
    wavelength_trained: tuple[float, float]  # (shortest, longest) lambda_i in tokens, unscaled
    wavelength_scaled: tuple[float, float]  # the same under the scaling, at the longest context
    pairs_without_a_turn: tuple[int, int]  # (unscaled, scaled): pairs whose lambda_i > the anchor
    attention_factor: float
    bands: dict[str, Any]
    layers: LayerPlan
    kv_per_token: int  # bytes per token while every layer grows (bf16)
    kv_at_max: int | None  # bytes at max_position_embeddings, windows capped (bf16), batch 1
    kv_note: str
    temperature: tuple[tuple[int, float], ...] = ()  # Llama 4: (position, query scale on NoPE layers)

    def text(self) -> str:
        L = self.lengths
        lines = [
            f"{self.name}: RoPE base {self.base:,g}, rotating {self.rotary_dim} of {self.head_dim} channels per head "
            f"({self.rotary_dim // 2} pairs)",
            f"  scaling: {self.type_note}; attention factor on cos/sin {self.attention_factor:.4f}",
            (f"  context: pre-extension {L.original:,} (the scaling's anchor)" if L.stated else
             "  context: no anchor (linear scaling reads none; pairs are counted within max_position_embeddings)"
             if self.rope_type == "linear" else
             f"  context: no pre-extension length stated ({L.original:,}, max_position_embeddings, used in its place)")
            + ", max_position_embeddings "
            f"{'-' if L.max_position_embeddings is None else format(L.max_position_embeddings, ',')}, factor "
            f"{L.factor:g}: {L.note}",
            f"  wavelengths (tokens): unscaled {self.wavelength_trained[0]:.2f} .. {self.wavelength_trained[1]:,.0f}; "
            f"scaled {self.wavelength_scaled[0]:.2f} .. {self.wavelength_scaled[1]:,.0f}",
            f"  pairs that never turn once within {L.original:,} tokens: {self.pairs_without_a_turn[0]} unscaled, "
            f"{self.pairs_without_a_turn[1]} scaled",
            f"  bands: " + ", ".join(f"{k} {v}" for k, v in self.bands.items()),
        ]
        counts = ", ".join(f"{n} {k}" for k, n in self.layers.counts().items())
        windows = sorted({w for w in self.layers.windows if w is not None})
        bases = sorted({b for b in self.layers.bases if b is not None})
        lines.append(f"  layers: {counts}" + (f"; windows {windows}" if windows else "")
                     + f"; RoPE bases {', '.join(f'{b:,g}' for b in bases)}")
        if self.temperature:
            lines.append("  NoPE layers scale queries (attn_temperature_tuning): "
                         + ", ".join(f"x{scale:.3f} at position {p:,}" for p, scale in self.temperature))
        at_max = "" if self.kv_at_max is None else f", {format_bytes(self.kv_at_max)} at max_position_embeddings"
        lines.append(f"  KV cache (bf16): {format_bytes(self.kv_per_token)} per token{at_max} ({self.kv_note})")
        return "\n".join(lines)


def _type_note(text: Mapping[str, Any]) -> tuple[str, str]:
    """(type, note) for the headline layer type: where the settings were read and how the type was found."""
    layout = hf_rope_layout(text)
    p = hf_rope_parameters_for(text)
    model_type = str(text.get("model_type", ""))
    if layout.startswith("transformers 5"):
        raw = text["rope_parameters"]
        per_type = bool(raw) and all(isinstance(v, Mapping) for v in raw.values())
        where = "rope_parameters" + (f"[{_headline(text)!r}]" if per_type else "") + " (transformers 5's layout)"
        kind, note = read_rope_type(raw[_headline(text)] if per_type else raw, model_type)
    elif layout.startswith("transformers 4"):
        where = "rope_theta + rope_scaling (transformers 4's layout)"
        kind, note = read_rope_type(text.get("rope_scaling"), model_type)
    else:
        where = "no RoPE field: transformers' defaults"
        kind, note = p["rope_type"], "plain RoPE, unscaled"
    if p.get("mrope_section") is not None:
        note += f"; M-RoPE sections {list(p['mrope_section'])} over time, height, width, {_mrope_order(model_type, p)}"
        note += ": a text token's three positions are equal, so each pair turns at its plain frequency"
    if kind == "longrope" and str(text.get("rope_scaling", {}) and text["rope_scaling"].get("type")) == "su":
        note += ("; transformers 5.15 refuses this spelling (KeyError: original_max_position_embeddings: Phi3Config "
                 "renames 'su' after the anchor (the pre-extension length L) would have moved into the dict), 4.57 "
                 "reads it")
    return kind, f"{where}: {note}"


def _mrope_order(model_type: str, p: Mapping[str, Any]) -> str:
    """How the M-RoPE sections are laid over the pairs: transformers 5.15 by the family's model code (it never reads
    mrope_interleaved: `MROPE_INTERLEAVED_FAMILIES` interleave, `MROPE_BLOCK_FAMILIES` split in blocks), vLLM by
    mrope_interleaved (get_rope: False when absent). Both named where they differ."""
    flag = p.get("mrope_interleaved")
    vllm = "interleaved" if flag else "in blocks"
    hf = ("interleaved" if model_type.startswith(MROPE_INTERLEAVED_FAMILIES) else
          "in blocks" if model_type.startswith(MROPE_BLOCK_FAMILIES) else None)
    stated = "absent, so false" if flag is None else f"{bool(flag)}"
    if hf == vllm:
        return f"{hf} (transformers 5.15: its {model_type} code always; vLLM: mrope_interleaved={stated})"
    if hf is None:
        return f"{vllm} in vLLM (mrope_interleaved={stated}), in transformers as its {model_type} code lays them"
    return (f"{hf} in transformers 5.15 (its {model_type} code ignores mrope_interleaved), {vllm} in vLLM "
            f"(mrope_interleaved={stated})")


def _headline(text: Mapping[str, Any]) -> str:
    from mlbook.transformer.hf import hf_rope_layer_type  # the layer type the summary is about

    return hf_rope_layer_type(text)


def summarize_config(config: Mapping[str, Any], name: str | None = None) -> ConfigSummary:
    """The positional settings of a config.json dict (see the module docstring), computed by the library.

    Either RoPE layout is read (`transformer.hf.hf_rope_parameters`); a multimodal config through its
    text config; where the layer types rotate differently (Gemma 3 and 4), the headline is the
    full-attention layers' and the layer plan gives each layer's base."""
    _check_dict(config)
    name = name or str(config.get("_model", hf_text_config(config).get("model_type", config.get("model_type",
                                                                                                  "config"))))
    text = hf_text_config(config)
    for key in _SUMMARY_FIELDS:
        if hf_get(text, key) is None:
            raise _unstated(text, key)
    if hf_get(text, "head_dim") is None and hf_get(text, "hidden_size") is None and not text.get("kv_lora_rank"):
        raise _unstated(text, "head_dim", "nor hidden_size")
    kind, note = _type_note(text)
    d = rotary_width(text)
    base = hf_rope_base(text)
    lengths = context_lengths(text)
    trained = frequency_ladder(d, base)
    longest = int(hf_get(text, "max_position_embeddings") or lengths.original)
    scaled, attention = _inv_freq(text, longest)
    turning = scaled > 0  # a proportional layer holds its last pairs at frequency 0
    wl_t = (2 * math.pi / trained.double())
    wl_s = (2 * math.pi / scaled.double()[turning])
    from mlbook.analysis.production import config_kv_heads, config_kv_plan  # the KV calculator's module

    plan = config_kv_plan(_standard_names(config))
    latent = plan.latent
    heads = {p.values_per_token for p in plan.parts if p.kind != "linear_attention"}
    kv_note = ("latent attention: kv_lora_rank + qk_rope_head_dim values per layer" if latent else
               f"{config_kv_heads(text)} KV heads x {hf_head_dim(text)} channels, keys and values"
               if len(heads) == 1 else "per layer kind: " + ", ".join(
                   f"{p.kind} {p.values_per_token // 2:,} channels" for p in plan.parts if p.kind != "linear_attention"))
    if any(p.cap is not None for p in plan.parts):
        kv_note += "; windowed layers stop growing at their window"
    linear = [p for p in plan.parts if p.kind == "linear_attention"]
    if linear:
        kv_note += (f"; {linear[0].layers} linear-attention layers hold a fixed state of "
                    f"{format_bytes(plan.part_bytes(linear[0], 0) // linear[0].layers)} each, whatever the length, its "
                    f"recurrent part at {plan.state_bytes_per_value:g} bytes a value as transformers 5.15 holds it")
    temperature: tuple[tuple[int, float], ...] = ()
    if text.get("attn_temperature_tuning"):
        floor_scale, attn_scale = float(text.get("floor_scale", 8192)), float(text.get("attn_scale", 0.1))
        positions = [int(floor_scale) - 1, 16 * int(floor_scale), 128 * int(floor_scale)]
        scales = llama4_attention_scale(positions, floor_scale, attn_scale).tolist()
        temperature = tuple(zip(positions, scales))
    return ConfigSummary(
        name=name, rope_type=kind, type_note=note, base=base, rotary_dim=d, head_dim=_head_dim(text),
        lengths=lengths, wavelength_trained=(float(wl_t.min()), float(wl_t.max())),
        wavelength_scaled=(float(wl_s.min()), float(wl_s.max())),
        pairs_without_a_turn=(_turns_short(trained, lengths.original), _turns_short(scaled, lengths.original)),
        attention_factor=float(attention), bands=scaling_bands(text), layers=layer_plan(text),
        kv_per_token=plan.per_token, kv_at_max=plan.bytes(longest) if hf_get(text, "max_position_embeddings") else None,
        kv_note=kv_note, temperature=temperature,
    )


# The keys vLLM reads for its serving length, smallest first wins (vllm/config/model.py, _get_and_verify_max_len)
VLLM_LENGTH_KEYS: tuple[str, ...] = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                                     "model_max_length", "max_target_positions", "max_sequence_length",
                                     "max_seq_length", "seq_len")
# the two rules vLLM has derived its length by: "current" since vllm#56446 (merged 2026-09-11, commit c191787), and
# "before-56446", the code of the stored vllm/config/model.py (0052a5b, 18ec662)
VLLM_LENGTH_RULES: tuple[str, ...] = ("current", "before-56446")
# the rope types whose factor vLLM does not multiply the derived length by, per rule (transformers' names; vLLM's
# own "su", "deepseek_yarn" and "deepseek_llama_scaling" are not types transformers or this library reads)
_VLLM_UNSCALED_TYPES = {"current": ("longrope", "llama3", "yarn"), "before-56446": ("longrope", "llama3")}
# the scalings vLLM reads by key in get_rope, where transformers would fill original_max_position_embeddings
# from max_position_embeddings (standardize_rope_params)
_VLLM_NEEDS_ORIGINAL = ("yarn", "llama3", "longrope")


def vllm_max_model_len(config: Mapping[str, Any], *, rule: str = "current",
                       tokenizer_model_max_length: int | None = None) -> tuple[int, str]:
    """The longest --max-model-len vLLM accepts for config without VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, and why.

    vLLM's rule (vllm/config/model.py, _get_and_verify_max_len): a top-level model_max_length, where the config
    states one, is taken outright, for every model type; otherwise the smallest of the length keys it states.
    "Every model type" is what vllm-project/vllm's code does in each stored copy read: model.py at 18ec662 and,
    after the ModelArchConfigConvertor refactor, ModelArchConfigConvertorBase.derive_max_model_len_and_key in
    vllm/transformers_utils/model_arch_config_convertor.py at ee92a6f and at 00bb6f5; the comment there says
    "For Command-R / Cohere, Cohere2 / Aya Vision models", but the base class applies it to all. Copies whose
    repository is not named (drafts of that refactor) move it into a CohereModelArchConfigConvertor for
    commandr and aya_vision only; no vllm-project/vllm copy read does. The model_max_length of
    the checkpoint's tokenizer_config.json, a second file (`tokenizer_model_max_length`), caps that, before the
    factor. Then, unless the model type is a Gemma 3 one, it is multiplied by the RoPE factor of the types it
    scales by. Without --max-model-len vLLM runs at this limit, except for LongRoPE
    (`vllm_default_max_model_len`). `rule` picks which vLLM:

        "current"       since vllm#56446 (merged 2026-09-11): linear and dynamic multiply by the factor;
                        yarn, llama3 and longrope do not (a YaRN config's max_position_embeddings is taken as
                        already scaled, as transformers takes it)
        "before-56446"  the code before it: every type but llama3 and longrope multiplies, and for the exact
                        string "yarn" the length is original_max_position_embeddings x factor

    The current rule is the one #56446's description states (its TeleChat3 and Sarvam rows: 32,768 and 131,072,
    their max_position_embeddings); the stored model.py is the older code. A request past the limit is refused
    at start-up.
    """
    check_choice("rule", rule, VLLM_LENGTH_RULES)
    text = hf_text_config(_check_dict(config))
    found = {k: text[k] for k in VLLM_LENGTH_KEYS if text.get(k) is not None}
    if not found:
        raise ValueError("the config states none of vLLM's length keys "
                         f"({', '.join(VLLM_LENGTH_KEYS)}): vLLM then assumes 2,048")
    key = "model_max_length" if "model_max_length" in found else min(found, key=lambda k: found[k])
    derived = float(found[key])
    why = f"{key} {int(derived):,}"
    if tokenizer_model_max_length is not None:
        cap = check_int("tokenizer_model_max_length", tokenizer_model_max_length, 1)
        if cap < derived:
            derived, why = float(cap), f"tokenizer_config.json's model_max_length {cap:,} (under {why})"
    per = hf_rope_parameters(text)
    if "gemma3" not in str(text.get("model_type", "")):
        factor = 1.0
        for p in per.values():
            if p["rope_type"] not in _VLLM_UNSCALED_TYPES[rule] and p.get("factor") is not None:
                factor = float(p["factor"])
                if p["rope_type"] == "yarn":  # before-56446 only: the reset to the anchor
                    derived = float(p.get("original_max_position_embeddings", found.get(
                        "max_position_embeddings", derived)))  # transformers fills it so before vLLM reads it
                    why = f"original_max_position_embeddings {int(derived):,}"
        if factor != 1.0:
            derived *= factor
            why += f" x factor {factor:g}"
        elif rule == "current" and any(p["rope_type"] == "yarn" for p in per.values()):
            why += ", not multiplied by the YaRN factor since vllm#56446"
    return int(derived), why


def vllm_default_max_model_len(config: Mapping[str, Any], *, rule: str = "current",
                               tokenizer_model_max_length: int | None = None) -> tuple[int, str]:
    """The max_model_len vLLM runs config at when no --max-model-len is given, and why: the derived limit
    (`vllm_max_model_len`), except that a config with a `longrope` layer defaults to its top-level
    original_max_position_embeddings, "to avoid performance degradation for shorter sequences"
    (vllm/config/model.py, _get_and_verify_max_len). vLLM's LongRoPE module uses the long factors only when
    max_model_len exceeds that length, so Phi-3-mini-128k and Phi-4-mini serve at 4,096 tokens with the short
    factors unless --max-model-len asks for more (up to the limit)."""
    limit, why = vllm_max_model_len(config, rule=rule, tokenizer_model_max_length=tokenizer_model_max_length)
    text = hf_text_config(_check_dict(config))
    if any(p["rope_type"] == "longrope" for p in hf_rope_parameters(text).values()):
        orig = text.get("original_max_position_embeddings")  # vLLM: getattr(hf_config, ..., the derived length)
        if orig is not None:
            orig = check_int("original_max_position_embeddings", orig, 1)
            return orig, (f"LongRoPE: original_max_position_embeddings {orig:,}, with the short factors; a "
                          f"--max-model-len above it, up to {limit:,} ({why}), switches to the long ones")
    return limit, why


def serving_override(
    config: Mapping[str, Any], rope_scaling: Mapping[str, Any] | None = None, max_model_len: int | None = None,
    *, allow_long_max_model_len: bool = False, max_position_embeddings: int | None = None, vllm_rule: str = "current",
) -> tuple[dict[str, Any], list[str]]:
    """The config a serving engine runs after a RoPE / max-model-len override, and what changed.

    A static scaling (YaRN, linear) set by an override (vLLM's --hf-overrides, SGLang's
    --json-model-override-args) changes every position, short prompts included; Qwen's deployment guide
    says so and advises adding it only for long inputs. The override goes where the config keeps its RoPE
    settings: rope_scaling in transformers 4's layout, rope_parameters in 5's, as vLLM applies it
    (`ModelConfig._apply_dict_overrides`): on a config that nests no text config, a top-level override
    replaces that dict whole, base included (vLLM now runs on transformers 5, which loads either file into
    rope_parameters, and a rope_scaling override is written there), so it must give rope_theta: what a
    missing base becomes depends on vLLM's model file (a KeyError where it reads rope_theta by key, as
    gpt_oss.py does; the family's default where the layer fills one, 1,000,000 in qwen2.py; get_rope's
    10,000 otherwise); in a multimodal config (Qwen3.5, Llama 4) the override belongs under its text config
    ({"text_config": {"rope_parameters": {...}}}), where vLLM merges it into the dict key by key
    (`_update_nested`), so the keys it leaves out stay (a rope_parameters at the wrapper's top level would be
    read by nothing). This function changes a multimodal config in its text config, merged.

    max_position_embeddings sets that key in the same override (in the text config of a multimodal one, as
    {"text_config": {"max_position_embeddings": ...}} does in --hf-overrides): since vllm#56446 vLLM's limit for a
    YaRN config is max_position_embeddings itself, so a YaRN override that serves past the shipped length raises
    it too (or sets VLLM_ALLOW_LONG_MAX_MODEL_LEN=1). vllm_rule picks the vLLM whose limit is checked
    (`vllm_max_model_len`'s rule: "current" or "before-56446").

    Refused, as vLLM refuses or fails: a yarn, llama3 or longrope dict without original_max_position_embeddings
    (get_rope reads it by key; transformers would fill it), and a max_model_len past `vllm_max_model_len`
    unless allow_long_max_model_len (vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN=1). Returns (new config, one
    sentence per change).
    """
    _check_dict(config)
    if rope_scaling is not None and not isinstance(rope_scaling, Mapping):
        raise TypeError(f"rope_scaling must be a dict (the override), got {type(rope_scaling).__name__} "
                        f"({rope_scaling!r})")
    if max_model_len is not None:
        check_int("max_model_len", max_model_len, 1)
    if not isinstance(allow_long_max_model_len, bool):
        raise TypeError(f"allow_long_max_model_len must be True or False, got {allow_long_max_model_len!r}")
    if max_position_embeddings is not None:
        check_int("max_position_embeddings", max_position_embeddings, 1)
    check_choice("vllm_rule", vllm_rule, VLLM_LENGTH_RULES)
    new = copy.deepcopy(dict(config))
    text = hf_text_config(config)
    nested = next((k for k in TEXT_CONFIG_NAMES if config.get(k) is not None and config.get(k) is text), None)
    new_text = new[nested] if nested else new
    changes: list[str] = []
    if max_position_embeddings is not None:
        # GPT-J and CodeGen keep it as n_positions (their attribute_map): set the key the config states
        length_key = ATTRIBUTE_ALIASES.get(str(text.get("model_type", "")), {}).get(
            "max_position_embeddings", "max_position_embeddings")
        old_max = text.get(length_key)
        new_text[length_key] = max_position_embeddings
        changes.append(f"{nested + '.' if nested else ''}{length_key} {old_max} -> {max_position_embeddings} (set by "
                       "the same override: the length vLLM builds its limit from)")
    if rope_scaling is not None:
        kind = read_rope_type(rope_scaling, str(text.get("model_type", "")))[0]  # refuses an unknown type first
        v5 = hf_rope_layout(text).startswith("transformers 5")
        key = "rope_parameters" if v5 else "rope_scaling"
        old = text.get(key)
        per_type = hf_rope_parameters(text)
        # a 4.x file of a family whose transformers 5 code keeps one dict per layer type (Gemma 3): vLLM, on
        # transformers 5, holds the per-layer-type rope_parameters that 5 builds from it, and the override replaces
        # those; the 4.x fields are gone from the loaded config
        converted = (not v5 and str(text.get("model_type", "")) in PER_LAYER_TYPE_ROPE_FAMILIES
                     and len({json.dumps(p, sort_keys=True) for p in per_type.values()}) > 1)
        if converted:
            key, old, v5 = "rope_parameters", per_type, True
            for legacy in ("rope_scaling", "rope_theta", "rope_local_base_freq", "partial_rotary_factor"):
                new_text.pop(legacy, None)
        if v5:
            if isinstance(old, Mapping) and old and all(isinstance(v, Mapping) for v in old.values()) and not all(
                    isinstance(v, Mapping) for v in rope_scaling.values()):
                raise ValueError(f"this config's rope_parameters is per layer type ({sorted(old)})"
                                 + (" as transformers 5 loads it (vLLM runs on 5)" if converted else "")
                                 + ": the override must give a dict per layer type too, or the layers' own bases "
                                 "are lost")
        if nested:  # vLLM's _update_nested: the override's keys are set in the text config's dict, the rest stay
            value = _merged(old if isinstance(old, Mapping) else {}, rope_scaling)
        else:
            per_layer = bool(rope_scaling) and all(isinstance(v, Mapping) for v in rope_scaling.values())
            lacking = [t for t, v in rope_scaling.items() if "rope_theta" not in v] if per_layer else (
                [] if "rope_theta" in rope_scaling else [None])
            if lacking:  # one rule for the flat and the per-layer-type form: every dict the override sets has a base
                where_missing = "" if lacking == [None] else f" (the entries for {lacking} have none)"
                raise ValueError(f"the override replaces rope_parameters whole, base included: give rope_theta (this "
                                 f"config's is {hf_rope_base(text):g}) inside it"
                                 + where_missing
                                 + ("" if v5 else "; vLLM on transformers 5 writes a rope_scaling override into "
                                    "rope_parameters")
                                 + "; what a missing base becomes depends on vLLM's model file (a KeyError where it "
                                 "reads rope_theta by key, as gpt_oss.py does; the family's default where the layer "
                                 "fills one, as qwen2.py's 1,000,000; get_rope's 10,000 otherwise)")
            value = copy.deepcopy(dict(rope_scaling))
        dicts = [v for v in value.values() if isinstance(v, Mapping)] if all(
            isinstance(v, Mapping) for v in value.values()) else [value]
        for d in dicts:
            t = d.get("rope_type", d.get("type"))
            # (a longrope config's top-level original_max_position_embeddings does not help: vLLM moves it into the
            # dict when it loads the config, before the override replaces the dict)
            if t in _VLLM_NEEDS_ORIGINAL and d.get("original_max_position_embeddings") is None:
                raise ValueError(f"the override's {t} dict has no original_max_position_embeddings: transformers "
                                 "fills it from max_position_embeddings, but vLLM's get_rope reads it by key and "
                                 f"fails; give it (this config's max_position_embeddings is "
                                 f"{text.get('max_position_embeddings')})")
        new_text[key] = value
        dynamic = [d for d in dicts if d.get("rope_type", d.get("type")) == "dynamic"]
        before = _inv_freq(text, None)
        after = _inv_freq(new_text, None)
        # every layer type the override reaches, compared on its own (Gemma 3: the sliding layers too)
        kinds = [t for t in hf_rope_parameters(new_text) if t in hf_rope_parameters(text)]
        moved_by_type = {}
        for t in kinds:
            old_f = rope_scaling_from_hf(text, t).frequencies(hf_rotary_dim(text, t), hf_rope_base(text, t), None)[0]
            new_f = rope_scaling_from_hf(new_text, t).frequencies(hf_rotary_dim(new_text, t), hf_rope_base(new_text, t),
                                                                  None)[0]
            moved_by_type[t] = (int((~torch.isclose(old_f, new_f, rtol=1e-6, atol=0)).sum()) if old_f.shape ==
                                new_f.shape else len(new_f), len(new_f))
        moved = int((~torch.isclose(before[0], after[0], rtol=1e-6, atol=0)).sum())
        # a top-level override replaces the dict whole: a key of the config's that it leaves out is gone in the engine
        # (vLLM's gpt-oss reads beta_fast and beta_slow by key, and truncate defaults to true)
        dropped = sorted(set(old) - set(rope_scaling)) if isinstance(old, Mapping) and not nested else []
        where = f"{nested}.{key}" if nested else key
        if kind == "dynamic":
            # no fixed frequencies: what the engines do differs (page 13; vLLM #41277, #55910)
            freq = (f"{moved} of {len(after[0])} pairs differ from the config's up to max_position_embeddings, "
                    "where dynamic NTK is the plain base; past it transformers grows the base with each input's "
                    "length, and vLLM gives a decoder the plain base at every length")
        elif len({p for p in moved_by_type.values()}) > 1 or len(moved_by_type) > 1 and len(
                {json.dumps(p, sort_keys=True) for p in hf_rope_parameters(new_text).values()}) > 1:
            freq = "per layer type, " + ", ".join(f"{t} {m} of {n} pairs" for t, (m, n) in moved_by_type.items()) + (
                " change frequency at every length")
        else:
            freq = f"{moved} of {len(after[0])} pairs change frequency at every length"
        changes.append(f"{where} {old!r} -> {value!r}" + (" (merged, as vLLM merges an override nested under "
                                                          f"{nested})" if nested else "")
                       + f": {freq}; attention factor {before[1]:.4f} -> {after[1]:.4f} (transformers' factor on cos "
                       "and sin)"
                       + (f"; the override drops {dropped}, which the engine then takes at its defaults or misses"
                          if dropped else ""))
    if max_model_len is not None:
        limit, why = vllm_max_model_len(new, rule=vllm_rule)
        old_len = hf_get(text, "max_position_embeddings")
        table_len = hf_get(hf_text_config(new), "max_position_embeddings")  # the override's, where it sets one
        if (rope_scaling is not None and dynamic and table_len is not None and max_model_len > table_len
                and not allow_long_max_model_len):
            raise ValueError(f"max_model_len={max_model_len:,} with a dynamic override: vLLM accepts up to {limit:,} "
                             f"at start-up ({why}), but its dynamic NTK table stops at max_position_embeddings "
                             f"({table_len:,}), and a longer request fails (vllm#55910, open); serve at most "
                             f"{table_len:,} or use a static scaling (allow_long_max_model_len=True to model it "
                             "anyway)")
        yarn = any(p["rope_type"] == "yarn" for p in hf_rope_parameters(hf_text_config(new)).values())
        if max_model_len > limit and not allow_long_max_model_len:
            fix = (f"raise max_position_embeddings to {max_model_len:,} or more in the same override "
                   "(max_position_embeddings= here; since vllm#56446 vLLM's limit for YaRN is max_position_embeddings "
                   "itself), or serve less" if yarn and vllm_rule == "current"
                   else "add the scaling that reaches it, or serve less")
            raise ValueError(f"max_model_len={max_model_len:,} is past what vLLM derives from this config, {limit:,} "
                             f"({why}), and vLLM refuses it at start-up unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 "
                             f"(allow_long_max_model_len=True here); {fix}")
        unchanged = "unchanged" if max_position_embeddings is None else f"{max_position_embeddings}, as overridden"
        changes.append(f"serving length {old_len} -> {max_model_len} (max_position_embeddings in the config is "
                       f"{unchanged}; the engine caps requests at max_model_len; vLLM's own limit here is {limit:,}, "
                       f"{why}" + (", passed with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)" if max_model_len > limit else ")"))
        new["_max_model_len"] = max_model_len
    return new, changes


def _merged(old: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """old with override's keys set, dict values merged the same way (vLLM's ModelConfig._update_nested)."""
    out = copy.deepcopy(dict(old))
    for k, v in override.items():
        out[k] = _merged(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else copy.deepcopy(v)
    return out
