"""From a Hugging Face config to the library's settings, and a Llama's weights into a GPT.

A `config.json` states a RoPE model's positions in a handful of fields: `rope_theta`,
`partial_rotary_factor`, `max_position_embeddings` and the `rope_scaling` dict. How
`transformers` 4.57 reads them (`modeling_rope_utils.py`) is what this module reproduces, key by
key; where transformers would only warn, or would read a key and not use it, this module refuses
with a sentence saying which key and why. Nothing is dropped silently.

    rope_options_from_hf(config)      -> the `GPTConfig.rope` dict: base, pairing, scaling and its parameters
    rope_scaling_from_hf(config)      -> the `RopeScaling` alone (with the head's rotary width)
    gpt_config_from_hf(config)        -> a GPTConfig (Llama-layout decoders)
    gpt_from_hf_llama(hf_model)       -> a GPT holding a LlamaForCausalLM's weights, logits equal to its own
    every_nth(n_layers, n, kind, other) -> per layer, `kind` at every n-th layer: the interval rule configs use
    hf_rotating_layers(config)        -> per layer, whether it rotates (False: a NoPE layer)
    hf_layer_types(config)            -> per layer, its attention kind ("full_attention", "sliding_attention", ...)

How the `rope_scaling` keys map (transformers 4.57.6, ROPE_INIT_FUNCTIONS):

    rope_type ("type" in older configs)     "default" -> "none"; linear, dynamic, yarn, llama3, longrope
    factor                                  factor (longrope: replaced by max_position_embeddings /
                                            original_max_position_embeddings when the config has the latter)
    original_max_position_embeddings        original_max_len (yarn: falls back to max_position_embeddings;
                                            dynamic: transformers uses max_position_embeddings, always;
                                            longrope: the top-level config field, not this key)
    beta_fast, beta_slow, truncate          yarn's ramp
    attention_factor, mscale, mscale_all_dim
                                            yarn's factor on cos and sin (longrope: attention_factor)
    low_freq_factor, high_freq_factor       llama3
    short_factor, long_factor               longrope

`config` may be a `transformers.PretrainedConfig` or a plain dict read from a config.json.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Mapping

import torch
from torch import nn

from mlbook.transformer.models import GPT, ROPE_OPTIONS, GPTConfig
from mlbook.transformer.positional import convert_rotary_weights
from mlbook.transformer.rope_scaling import RopeScaling
from mlbook.transformer.validate import check_choice, check_int

__all__ = [
    "HF_ROPE_TYPES",
    "HF_SCALING_KEYS",
    "LEGACY_ROPE_TYPES",
    "SLIDE_EVERY_LAYER",
    "hf_get",
    "hf_rope_type",
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
    "longrope": "longrope",
}

# The keys each rope_type reads (transformers 4.57.6, _validate_*_parameters and _compute_*_parameters),
# besides "rope_type" / "type"
HF_SCALING_KEYS: dict[str, frozenset[str]] = {
    "default": frozenset(),
    "linear": frozenset({"factor"}),
    "dynamic": frozenset({"factor", "original_max_position_embeddings"}),
    "yarn": frozenset({"factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "attention_factor",
                       "mscale", "mscale_all_dim", "truncate"}),
    "llama3": frozenset({"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"}),
    "longrope": frozenset({"factor", "original_max_position_embeddings", "short_factor", "long_factor",
                           "attention_factor"}),
}

# Names other libraries or older configs use, and what to write instead
LEGACY_ROPE_TYPES: dict[str, str] = {
    "su": "'su' is what Phi-3's first configs called LongRoPE; transformers 4.57 renames it only inside "
          "Phi3Config. Write rope_type='longrope'",
    "ntk": "transformers has no static NTK scaling ('ntk' is this library's name); a config meaning NTK-aware "
           "scaling at inference uses rope_type='dynamic'",
    "mrope": "'mrope' (Qwen2-VL's multimodal RoPE) splits the pairs over time, height and width; a text-only "
             "GPT has one position per token and cannot reproduce it",
    "default_rope": "write rope_type='default'",
}


def hf_get(config: Any, key: str, default: Any = None) -> Any:
    """config[key] for a dict, getattr(config, key) for a config object; default when absent or None."""
    value = config.get(key) if isinstance(config, Mapping) else getattr(config, key, None)
    return default if value is None else value


def every_nth(n_layers: int, n: int, kind: Any, other: Any, *, first: bool = False) -> tuple[Any, ...]:
    """Per-layer values with `kind` at every n-th layer and `other` elsewhere, as configs state them:
    layers n-1, 2n-1, ... (first=False: Gemma 3's and Cohere 2's sliding_window_pattern, Gemma 2's and
    gpt-oss's alternation with n = 2, Llama 4's and SmolLM3's no_rope_layer_interval) or layers 0, n,
    2n, ... (first=True: ModernBERT's global_attn_every_n_layers)."""
    check_int("n_layers", n_layers, 1)
    check_int("n", n, 1)
    return tuple(kind if (i % n == 0 if first else (i + 1) % n == 0) else other for i in range(n_layers))


# families whose configs state NoPE layers by no_rope_layer_interval, 4 by default (Llama4TextConfig, SmolLM3Config)
NOPE_INTERVAL_FAMILIES: tuple[str, ...] = ("llama4", "smollm3")


def hf_rotating_layers(config: Any) -> tuple[bool, ...]:
    """Per layer, whether it rotates its queries and keys, as transformers 4.57 derives it.

    `no_rope_layers` when the config lists it (1 = the layer rotates, 0 = NoPE); otherwise, with
    `no_rope_layer_interval` (or a Llama 4 / SmolLM3 config, whose default interval is 4), layer i is
    NoPE when (i + 1) % interval == 0; otherwise every layer rotates.
    """
    n = check_int("num_hidden_layers", hf_get(config, "num_hidden_layers"), 1)
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


def hf_layer_types(config: Any) -> tuple[str, ...]:
    """Each layer's attention kind, as transformers 4.57 derives it.

    `layer_types` when the config lists it (gpt-oss, recent Gemma and Qwen saves); otherwise, by
    the key the family uses: Llama 4 (`hf_rotating_layers`: rotating layers chunked, NoPE layers
    full); Gemma 3 and Cohere 2 `sliding_window_pattern` (layer i full when (i + 1) % pattern == 0);
    Gemma 2 (sliding, full, alternating); Qwen2/Qwen3 `use_sliding_window` with `max_window_layers`;
    a bare `sliding_window` (Mistral): every layer.
    """
    n = check_int("num_hidden_layers", hf_get(config, "num_hidden_layers"), 1)
    model_type = str(hf_get(config, "model_type", ""))
    kinds = hf_get(config, "layer_types")
    if kinds is not None:
        kinds = tuple(kinds)
        if len(kinds) != n:
            raise ValueError(f"layer_types has {len(kinds)} entries but num_hidden_layers is {n}")
        return kinds
    if model_type.startswith("llama4"):
        return tuple("chunked_attention" if r else "full_attention" for r in hf_rotating_layers(config))
    pattern = hf_get(config, "sliding_window_pattern", hf_get(config, "_sliding_window_pattern"))
    if hf_get(config, "sliding_window") is None:
        return ("full_attention",) * n
    if pattern is not None:
        return every_nth(n, int(pattern), "full_attention", "sliding_attention")
    if model_type == "gemma2":
        return every_nth(n, 2, "full_attention", "sliding_attention")
    use = config.get("use_sliding_window") if isinstance(config, Mapping) else getattr(config, "use_sliding_window", None)
    if use is not None:
        if not use:
            return ("full_attention",) * n
        first = int(hf_get(config, "max_window_layers", n))
        return tuple("sliding_attention" if i >= first else "full_attention" for i in range(n))
    return ("sliding_attention",) * n


def _has(config: Any, key: str) -> bool:
    return (key in config and config[key] is not None) if isinstance(config, Mapping) else (
        getattr(config, key, None) is not None)


def hf_rope_type(rope_scaling: Mapping[str, Any] | None) -> str:
    """The scaling's type as transformers reads it: rope_type, else the legacy "type", else "default".

    Raises for a type transformers 4.57 does not compute, naming the fix where one is known
    (LEGACY_ROPE_TYPES), and when rope_type and type disagree.
    """
    if rope_scaling is None:
        return "default"
    if not isinstance(rope_scaling, Mapping):
        raise TypeError(f"rope_scaling must be a dict (or None), got {type(rope_scaling).__name__}")
    kinds = {rope_scaling[k] for k in ("rope_type", "type") if rope_scaling.get(k) is not None}
    if len(kinds) > 1:
        raise ValueError(f"rope_scaling gives rope_type={rope_scaling['rope_type']!r} and type="
                         f"{rope_scaling['type']!r}; transformers reads rope_type. Keep one")
    kind = kinds.pop() if kinds else "default"
    if kind in LEGACY_ROPE_TYPES:
        raise ValueError(f"rope_scaling type {kind!r} is not one transformers 4.57 computes: {LEGACY_ROPE_TYPES[kind]}")
    return check_choice("rope_scaling type", kind, tuple(HF_ROPE_TYPES))


def hf_head_dim(config: Any) -> int:
    """The attention head width: head_dim if the config gives it, else hidden_size // num_attention_heads."""
    return int(hf_get(config, "head_dim") or hf_get(config, "hidden_size") // hf_get(config, "num_attention_heads"))


def _partial_rotary_factor(config: Any) -> float:
    # GPT-NeoX configs call it rotary_pct; transformers' GPTNeoXConfig copies it to partial_rotary_factor
    return float(hf_get(config, "partial_rotary_factor", hf_get(config, "rotary_pct", 1.0)))


def hf_rotary_dim(config: Any) -> int:
    """The channels per head that rotate, as transformers computes them: int(head_dim * partial_rotary_factor)."""
    return int(hf_head_dim(config) * _partial_rotary_factor(config))


def _float(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"rope_scaling[{name!r}] must be a number, got {type(value).__name__} ({value!r})")
    return float(value)


def _scaling_parameters(config: Any) -> tuple[str, dict[str, Any]]:
    """(library scaling name, RopeScaling keyword arguments) for config's rope_scaling, as transformers reads it."""
    rs = hf_get(config, "rope_scaling")
    kind = hf_rope_type(rs)
    if kind == "default":
        extra = sorted(set(rs or {}) - {"rope_type", "type"})
        if extra:
            raise ValueError(f"rope_scaling has rope_type 'default' but also {extra}, which default RoPE does not "
                             "read; remove them or name the scaling they belong to")
        return "none", {}
    given = {k: v for k, v in rs.items() if k not in ("rope_type", "type")}
    unknown = sorted(set(given) - HF_SCALING_KEYS[kind])
    if unknown:
        raise ValueError(f"rope_scaling key(s) {unknown} are not read by transformers' {kind!r} scaling (it reads "
                         f"{sorted(HF_SCALING_KEYS[kind])}); a key it ignores is a setting the model would not "
                         "get: remove it or fix its name")
    max_pos = hf_get(config, "max_position_embeddings")
    args: dict[str, Any] = {}
    if kind in ("linear", "dynamic", "yarn", "llama3"):
        if "factor" not in given:
            raise ValueError(f"rope_scaling of type {kind!r} needs 'factor'")
        args["factor"] = _float("factor", given["factor"])
    if kind == "dynamic":
        # transformers' dynamic NTK grows past max_position_embeddings, whatever rope_scaling says
        orig = given.get("original_max_position_embeddings")
        if orig is not None and orig != max_pos:
            raise ValueError(f"rope_scaling['original_max_position_embeddings']={orig} differs from "
                             f"max_position_embeddings={max_pos}: transformers 4.57's dynamic scaling uses "
                             "max_position_embeddings and ignores the key; make them equal")
        args["original_max_len"] = int(max_pos)
    elif kind == "yarn":
        args["original_max_len"] = int(given.get("original_max_position_embeddings") or max_pos)
        for key in ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim"):
            if given.get(key) is not None:
                args[key] = _float(key, given[key])
        if "truncate" in given:
            if not isinstance(given["truncate"], bool):
                raise TypeError(f"rope_scaling['truncate'] must be true or false, got {given['truncate']!r}")
            args["truncate"] = given["truncate"]
    elif kind == "llama3":
        missing = sorted({"original_max_position_embeddings", "low_freq_factor", "high_freq_factor"} - set(given))
        if missing:
            raise ValueError(f"rope_scaling of type 'llama3' needs {missing}")
        args["original_max_len"] = int(given["original_max_position_embeddings"])
        args["low_freq_factor"] = _float("low_freq_factor", given["low_freq_factor"])
        args["high_freq_factor"] = _float("high_freq_factor", given["high_freq_factor"])
    elif kind == "longrope":
        for key in ("short_factor", "long_factor"):
            if key not in given:
                raise ValueError(f"rope_scaling of type 'longrope' needs {key!r}, one factor per frequency pair")
            args[key] = tuple(given[key])
        # transformers reads the trained length from the config's own original_max_position_embeddings
        # (Phi-3's layout) and then takes factor = max_position_embeddings / that length
        inner = given.get("original_max_position_embeddings")
        if _has(config, "original_max_position_embeddings"):
            L = int(hf_get(config, "original_max_position_embeddings"))
            factor = max_pos / L
            if "factor" in given and _float("factor", given["factor"]) != factor:
                raise ValueError(f"rope_scaling['factor']={given['factor']} differs from max_position_embeddings / "
                                 f"original_max_position_embeddings = {max_pos} / {L} = {factor:g}, which "
                                 "transformers 4.57 uses instead for longrope; make them agree")
        else:
            L = int(max_pos)
            if "factor" not in given and "attention_factor" not in given:
                raise ValueError("rope_scaling of type 'longrope' needs 'factor' (or 'attention_factor', or a "
                                 "top-level original_max_position_embeddings) to set its attention factor")
            factor = _float("factor", given.get("factor", 1.0))
        if inner is not None and inner != L:
            raise ValueError(f"rope_scaling['original_max_position_embeddings']={inner}, but transformers 4.57's "
                             f"longrope switches factors at {L} (the config's top-level "
                             "original_max_position_embeddings, else max_position_embeddings) and ignores the key; "
                             "move it to the top level")
        args["original_max_len"] = L
        # factor only sets the attention factor, and transformers gives 1 for any factor <= 1, as 1 does
        args["factor"] = max(factor, 1.0)
        if given.get("attention_factor") is not None:
            args["attention_factor"] = _float("attention_factor", given["attention_factor"])
    return HF_ROPE_TYPES[kind], args


def rope_scaling_from_hf(config: Any) -> RopeScaling:
    """The `RopeScaling` transformers 4.57 applies for config (frequencies over the rotary width `hf_rotary_dim`)."""
    name, args = _scaling_parameters(config)
    return RopeScaling(name, **args)


def rope_options_from_hf(config: Any, pairing: str = "half") -> dict[str, Any]:
    """The `GPTConfig.rope` options that reproduce config's RoPE: base, pairing, scaling and its parameters.

    partial_rotary_factor != 1 becomes the "partial_rotary_factor" option where GPTConfig has it,
    else an error (it is never dropped).
    """
    check_choice("pairing", pairing, ("half", "interleaved"))
    base = hf_get(config, "rope_theta", hf_get(config, "rotary_emb_base", 10000.0))
    rope: dict[str, Any] = {"base": float(base), "pairing": pairing}
    name, args = _scaling_parameters(config)
    RopeScaling(name, **args)  # validate here, with the library's messages
    if name != "none":
        rope.update(scaling=name, **args)
    prf = _partial_rotary_factor(config)
    if prf != 1.0:
        if "partial_rotary_factor" not in ROPE_OPTIONS:
            raise ValueError(f"partial_rotary_factor={prf:g} (only the first {hf_rotary_dim(config)} of "
                             f"{hf_head_dim(config)} channels rotate) is not supported by this GPT build")
        if round(prf * hf_head_dim(config)) != hf_rotary_dim(config):
            raise ValueError(f"partial_rotary_factor={prf:g} of head_dim={hf_head_dim(config)} is not a whole "
                             f"number of channels; transformers truncates it to {hf_rotary_dim(config)}")
        rope["partial_rotary_factor"] = prf
    return rope


_GPT_FIELDS = {f.name for f in fields(GPTConfig)}
# families whose sliding_window, without layer_types, applies to every layer (transformers' Mistral and Mixtral)
SLIDE_EVERY_LAYER: tuple[str, ...] = ("mistral", "mixtral")


def _architecture_options(config: Any) -> dict[str, Any]:
    """GQA and per-layer attention settings, where GPTConfig has the field; an error where it does not."""
    out: dict[str, Any] = {}
    n_heads = int(hf_get(config, "num_attention_heads"))
    n_kv = int(hf_get(config, "num_key_value_heads", n_heads))
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
    layer_types = hf_get(config, "layer_types")
    window = hf_get(config, "sliding_window")
    uses_window = window is not None and hf_get(config, "use_sliding_window", True)
    if layer_types and any(t != "full_attention" for t in layer_types):
        if "layer_types" not in _GPT_FIELDS:
            refuse.append("layer_types")
        else:
            out["layer_types"] = tuple(layer_types)
            out["sliding_window"] = int(window)
    elif uses_window and not layer_types:
        if hf_get(config, "model_type") not in SLIDE_EVERY_LAYER:
            raise ValueError(f"config sets sliding_window={window} but no layer_types, and model_type="
                             f"{hf_get(config, 'model_type')!r} is not one whose every layer slides "
                             f"({', '.join(SLIDE_EVERY_LAYER)}); transformers derives other families' patterns "
                             "per family (Gemma 2 alternates, Gemma 3 uses sliding_window_pattern): give layer_types")
        if "layer_types" not in _GPT_FIELDS:
            refuse.append("sliding_window")
        else:  # Mistral's layout: every layer slides
            out["layer_types"] = hf_layer_types(config)
            out["sliding_window"] = int(window)
    local_base = hf_get(config, "rope_local_base_freq")
    if local_base is not None and "sliding_attention" in out.get("layer_types", ()):
        if "rope_local_base" not in _GPT_FIELDS:
            refuse.append("rope_local_base_freq")
        else:
            out["rope_local_base"] = float(local_base)
    if refuse:
        raise ValueError(f"config sets {refuse}, which this GPT cannot reproduce; converting without them would "
                         "change the model's attention")
    return out


def gpt_config_from_hf(config: Any, pairing: str = "half") -> GPTConfig:
    """A GPTConfig (RMSNorm, SwiGLU, no biases unless attention_bias) for a Llama-layout config.

    Raises where the config asks for something the GPT would not do (head_dim other than
    hidden_size / num_attention_heads, chunked attention, temperature tuning, ...).
    """
    d_model, n_heads = int(hf_get(config, "hidden_size")), int(hf_get(config, "num_attention_heads"))
    if hf_head_dim(config) * n_heads != d_model:
        raise ValueError(f"head_dim={hf_head_dim(config)} times num_attention_heads={n_heads} must equal "
                         f"hidden_size={d_model} for this GPT (its heads split d_model)")
    if hf_get(config, "mlp_bias", False):
        raise ValueError("mlp_bias=True is not supported: GPTConfig.bias covers attention and MLP together")
    return GPTConfig(
        vocab_size=int(hf_get(config, "vocab_size")), d_model=d_model, n_heads=n_heads,
        n_layers=int(hf_get(config, "num_hidden_layers")), max_len=int(hf_get(config, "max_position_embeddings")),
        positional="rope", d_ff=int(hf_get(config, "intermediate_size")), rope=rope_options_from_hf(config, pairing),
        norm="rms", mlp="swiglu", bias=bool(hf_get(config, "attention_bias", False)),
        tie_embeddings=bool(hf_get(config, "tie_word_embeddings", False)),
        norm_eps=float(hf_get(config, "rms_norm_eps", 1e-6)), **_architecture_options(config),
    )


def gpt_from_hf_llama(hf_model: nn.Module, pairing: str = "half") -> GPT:
    """Copy a Hugging Face LlamaForCausalLM's weights into a GPT whose logits equal the Llama's.

    Every RoPE setting of its config is honoured (`rope_options_from_hf`) or refused. With
    pairing="interleaved" the q and k projections are permuted by `convert_rotary_weights` (per
    query head for q, per KV head for k), which leaves every attention score unchanged.
    """
    hc = hf_model.config
    model_type = getattr(hc, "model_type", "llama")
    if model_type != "llama":
        raise ValueError(f"gpt_from_hf_llama copies LlamaForCausalLM weights; got model_type={model_type!r}")
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

