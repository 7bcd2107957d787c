"""Reading a model's config.json: the positional settings, on one screen.

The configs shipped with the book (`SHIPPED_CONFIGS`, package data under mlbook/data/configs,
each with a `_source` naming where its values were read) are real 2024-2025 models'. For any of
them, or any config.json dict, `summarize_config` computes what an engineer reads before
extending a context:

    wavelengths   lambda_i = 2 pi / theta_i in tokens, shortest and longest, trained and scaled, and how
                  many pairs never complete a turn within the trained length
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
not), `serving_override` (what a serving engine's --rope-scaling / --max-model-len override
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
    HF_ROPE_TYPES,
    LEGACY_ROPE_TYPES,
    hf_head_dim,
    hf_layer_types,
    hf_rope_type,
    hf_rotary_dim,
    hf_rotating_layers,
    rope_scaling_from_hf,
)
from mlbook.transformer.positional import frequency_ladder
from mlbook.transformer.rope_scaling import yarn_bands
from mlbook.transformer.validate import check_choice

__all__ = [
    "SHIPPED_CONFIGS",
    "load_config",
    "config_source",
    "rotary_width",
    "read_rope_type",
    "ContextLengths",
    "context_lengths",
    "scaling_bands",
    "LayerPlan",
    "layer_plan",
    "ConfigSummary",
    "summarize_config",
    "serving_override",
]

_CONFIG_DIR = resources.files("mlbook") / "data" / "configs"
SHIPPED_CONFIGS: tuple[str, ...] = tuple(sorted(p.name[:-5] for p in _CONFIG_DIR.iterdir() if p.name.endswith(".json")))


def load_config(name: str) -> dict[str, Any]:
    """A shipped config.json as a dict (fields starting with "_" say where it was read and what it leaves out)."""
    check_choice("config", name, SHIPPED_CONFIGS)
    return json.loads((_CONFIG_DIR / f"{name}.json").read_text())


def config_source(config: Mapping[str, Any]) -> str:
    """The config's `_source` entries, one per line ("" for a config without one)."""
    src = config.get("_source", ())
    return "\n".join([src] if isinstance(src, str) else list(src))


def rotary_width(config: Mapping[str, Any]) -> int:
    """Channels per head that rotate: qk_rope_head_dim for latent attention (DeepSeek's decoupled RoPE
    key), else int(head_dim * partial_rotary_factor) as transformers computes it."""
    if config.get("qk_rope_head_dim") and config.get("kv_lora_rank"):
        return int(config["qk_rope_head_dim"])
    return hf_rotary_dim(config)


def _rope_view(config: Mapping[str, Any]) -> dict[str, Any]:
    """The fields `rope_scaling_from_hf` reads, with the rotary width as head_dim (MLA, partial rotary)."""
    return {"rope_scaling": config.get("rope_scaling"), "rope_theta": config.get("rope_theta", 10000.0),
            "max_position_embeddings": config.get("max_position_embeddings"),
            "original_max_position_embeddings": config.get("original_max_position_embeddings"),
            "head_dim": rotary_width(config), "hidden_size": config.get("hidden_size"),
            "num_attention_heads": config.get("num_attention_heads")}


def read_rope_type(rope_scaling: Mapping[str, Any] | None) -> tuple[str, str]:
    """(type, note): the scaling type as transformers 4.57 reads it and a sentence on how it was found.

    The legacy key "type" (configs written before transformers 4.43 renamed it rope_type) is
    read, and said so; a name transformers does not compute ("su", Phi-3's first name for LongRoPE;
    "mrope"; this library's "ntk") raises with the fix (`LEGACY_ROPE_TYPES`).
    """
    kind = hf_rope_type(rope_scaling)
    if rope_scaling is None:
        return kind, "no rope_scaling: RoPE as trained"
    if "rope_type" in rope_scaling:
        return kind, f"rope_type={kind!r}"
    if "type" in rope_scaling:
        return kind, (f"legacy key type={kind!r}: transformers reads it as rope_type, a library that reads only "
                      "rope_type sees no scaling")
    return kind, "rope_scaling without a type: default RoPE"


@dataclass(frozen=True)
class ContextLengths:
    """The trained context, the advertised one, the scaling's factor, and whether they agree."""

    original: int  # the context the model was (pre)trained at
    max_position_embeddings: int | None
    factor: float  # the scaling's factor (1 without scaling)
    note: str

    @property
    def ratio(self) -> float | None:
        """max_position_embeddings / original: the extension the config advertises."""
        return None if self.max_position_embeddings is None else self.max_position_embeddings / self.original


def context_lengths(config: Mapping[str, Any]) -> ContextLengths:
    """Trained versus advertised context, and the pitfall each layout sets.

    gpt-oss writes max_position_embeddings = original * factor (131,072 = 4,096 * 32): already
    multiplied. Llama 3.2 1B writes 131,072 = 8,192 * 16 with factor 32: the two disagree, and the
    frequencies follow the factor. A config without original_max_position_embeddings leaves
    transformers to assume max_position_embeddings is the trained length (YaRN, dynamic).
    """
    rs = config.get("rope_scaling") or {}
    kind = hf_rope_type(rs or None)
    max_pos = config.get("max_position_embeddings")
    inner = rs.get("original_max_position_embeddings")
    outer = config.get("original_max_position_embeddings")
    found = inner or outer or config.get("initial_context_length") or max_pos
    if found is None:
        raise ValueError("the config gives neither max_position_embeddings nor an original length "
                         "(rope_scaling.original_max_position_embeddings, original_max_position_embeddings)")
    original = int(found)
    factor = float(rs.get("factor", 1.0)) if kind != "default" else 1.0
    if kind == "longrope" and outer:
        factor = max_pos / outer
    if max_pos is None:
        note = (f"no max_position_embeddings in this config: the scaling's own original length {original:,} and "
                f"factor {factor:g} are all it states")
    elif kind == "default":
        note = "no scaling: the model runs as trained up to max_position_embeddings"
    elif kind == "linear":
        note = (f"linear scaling divides every frequency by {factor:g} at every length; the config does not record "
                "the length it was trained at before the extension")
    elif kind == "dynamic":
        note = ("dynamic NTK grows the base only past max_position_embeddings, which transformers takes as the "
                "trained length")
    elif inner is None and outer is None:
        note = ("no original_max_position_embeddings: transformers assumes max_position_embeddings "
                f"({max_pos:,}) is the trained length")
    elif max_pos is not None and math.isclose(max_pos, original * factor):
        note = (f"max_position_embeddings {max_pos:,} = original {original:,} x factor {factor:g}: already "
                "multiplied; do not multiply it again")
    elif max_pos is not None and max_pos > original:
        note = (f"max_position_embeddings {max_pos:,} = original {original:,} x {max_pos / original:g}, not x factor "
                f"{factor:g}: the frequencies follow the factor; max_position_embeddings only bounds the positions the "
                "release supports")
    else:
        note = (f"max_position_embeddings {max_pos} is the trained length: the scaling is an opt-in for longer "
                "inputs")
    return ContextLengths(original, max_pos, factor, note)


def _inv_freq(config: Mapping[str, Any], seq_len: int | None) -> tuple[torch.Tensor, float]:
    view = _rope_view(config)
    return rope_scaling_from_hf(view).frequencies(view["head_dim"], float(view["rope_theta"]), seq_len)


def scaling_bands(config: Mapping[str, Any]) -> dict[str, Any]:
    """How the config's scaling treats each frequency pair (pairs counted over the rotary width).

    yarn: keep (r_i = 0), blend, interpolate (r_i = 1) from `yarn_bands` with the config's betas and
    truncate; llama3: keep (lambda_i < L / high_freq_factor), divide (lambda_i > L /
    low_freq_factor), blend between; linear: every pair divided; longrope: the short and long
    factors' ranges; dynamic and none: no fixed bands.
    """
    kind = hf_rope_type(config.get("rope_scaling"))
    d = rotary_width(config)
    base = float(config.get("rope_theta", 10000.0))
    scaling = rope_scaling_from_hf(_rope_view(config))
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
        out: dict[str, int] = {}
        for k, r in zip(self.kinds, self.rotates):
            key = f"{k}{'' if r else ' (NoPE)'}"
            out[key] = out.get(key, 0) + 1
        return out


def layer_plan(config: Mapping[str, Any]) -> LayerPlan:
    """Each layer's attention kind and window (`transformer.hf.hf_layer_types`), rotation and RoPE base.

    no_rope_layers (Llama 4, SmolLM3): 1 = the layer rotates, 0 = NoPE. Gemma 3's
    rope_local_base_freq is the sliding layers' base, and transformers 4.57 applies rope_scaling
    only to the full layers' rotation.
    """
    kinds = hf_layer_types(config)
    rotates = hf_rotating_layers(config)
    local = config.get("rope_local_base_freq")
    base = float(config.get("rope_theta", 10000.0))
    caps = {"full_attention": None, "sliding_attention": config.get("sliding_window"),
            "chunked_attention": config.get("attention_chunk_size")}
    bases = tuple((float(local) if local is not None and k == "sliding_attention" else base) if r else None
                  for k, r in zip(kinds, rotates))
    scaled = tuple(r and not (local is not None and k == "sliding_attention") for k, r in zip(kinds, rotates))
    return LayerPlan(kinds, tuple(caps[k] for k in kinds), rotates, bases, scaled)


def _head_dim(config: Mapping[str, Any]) -> int:
    """The query/key head width: qk_nope_head_dim + qk_rope_head_dim under latent attention, else `hf_head_dim`."""
    if config.get("kv_lora_rank") and config.get("qk_rope_head_dim") is not None:
        return int(config.get("qk_nope_head_dim", 0)) + int(config["qk_rope_head_dim"])
    return hf_head_dim(config)


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
    pairs_without_a_turn: tuple[int, int]  # (trained, scaled): pairs whose lambda_i > the trained length
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
            f"  context: trained {L.original:,}, max_position_embeddings "
            f"{'-' if L.max_position_embeddings is None else format(L.max_position_embeddings, ',')}, factor "
            f"{L.factor:g}: {L.note}",
            f"  wavelengths (tokens): trained {self.wavelength_trained[0]:.2f} .. {self.wavelength_trained[1]:,.0f}; "
            f"scaled {self.wavelength_scaled[0]:.2f} .. {self.wavelength_scaled[1]:,.0f}",
            f"  pairs that never turn once within {L.original:,} tokens: {self.pairs_without_a_turn[0]} trained, "
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


def summarize_config(config: Mapping[str, Any], name: str | None = None) -> ConfigSummary:
    """The positional settings of a config.json dict (see the module docstring), computed by the library."""
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a dict read from config.json, got {type(config).__name__}")
    name = name or str(config.get("_model", config.get("model_type", "config")))
    kind, note = read_rope_type(config.get("rope_scaling"))
    d = rotary_width(config)
    base = float(config.get("rope_theta", 10000.0))
    lengths = context_lengths(config)
    trained = frequency_ladder(d, base)
    longest = int(config.get("max_position_embeddings") or lengths.original)
    scaled, attention = _inv_freq(config, longest)
    wl_t = (2 * math.pi / trained.double())
    wl_s = (2 * math.pi / scaled.double())
    from mlbook.analysis.production import config_kv_plan  # the KV calculator's module (its owner's)

    plan = config_kv_plan(dict(config))
    latent = plan.latent
    kv_note = ("latent attention: kv_lora_rank + qk_rope_head_dim values per layer" if latent else
               f"{config.get('num_key_value_heads') or config.get('num_attention_heads')} KV heads x "
               f"{hf_head_dim(config)} channels, keys and values")
    if any(p.cap is not None for p in plan.parts):
        kv_note += "; windowed layers stop growing at their window"
    temperature: tuple[tuple[int, float], ...] = ()
    if config.get("attn_temperature_tuning"):
        floor_scale, attn_scale = float(config.get("floor_scale", 8192)), float(config.get("attn_scale", 0.1))
        positions = [int(floor_scale) - 1, 16 * int(floor_scale), 128 * int(floor_scale)]
        scales = llama4_attention_scale(positions, floor_scale, attn_scale).tolist()
        temperature = tuple(zip(positions, scales))
    return ConfigSummary(
        name=name, rope_type=kind, type_note=note, base=base, rotary_dim=d, head_dim=_head_dim(config),
        lengths=lengths, wavelength_trained=(float(wl_t.min()), float(wl_t.max())),
        wavelength_scaled=(float(wl_s.min()), float(wl_s.max())),
        pairs_without_a_turn=(_turns_short(trained, lengths.original), _turns_short(scaled, lengths.original)),
        attention_factor=float(attention), bands=scaling_bands(config), layers=layer_plan(config),
        kv_per_token=plan.per_token, kv_at_max=plan.bytes(longest) if config.get("max_position_embeddings") else None,
        kv_note=kv_note, temperature=temperature,
    )


def serving_override(
    config: Mapping[str, Any], rope_scaling: Mapping[str, Any] | None = None, max_model_len: int | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The config a serving engine runs after a --rope-scaling / --max-model-len style override, and what changed.

    Engines (vLLM's --rope-scaling and --hf-overrides, SGLang's --json-model-override-args) replace
    the config's rope_scaling before the model is built, so a static scaling (YaRN, linear) then
    changes every position, short prompts included; Qwen's deployment guide says so and advises
    adding it only for long inputs. Returns (new config, one sentence per change).
    """
    new = copy.deepcopy(dict(config))
    changes: list[str] = []
    if rope_scaling is not None:
        read_rope_type(rope_scaling)  # refuses an unknown type before anything is reported
        old = config.get("rope_scaling")
        new["rope_scaling"] = dict(rope_scaling)
        before = _inv_freq(config, None)
        after = _inv_freq(new, None)
        moved = int((~torch.isclose(before[0], after[0], rtol=1e-6, atol=0)).sum())
        changes.append(f"rope_scaling {old!r} -> {dict(rope_scaling)!r}: {moved} of {len(after[0])} pairs change "
                       f"frequency at every length; attention factor {before[1]:.4f} -> {after[1]:.4f}")
    if max_model_len is not None:
        old_len = config.get("max_position_embeddings")
        changes.append(f"serving length {old_len} -> {max_model_len} (max_position_embeddings in the config is "
                       "unchanged; the engine caps requests at max_model_len)")
        new["_max_model_len"] = int(max_model_len)
    return new, changes
