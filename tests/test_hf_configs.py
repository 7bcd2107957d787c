"""Shipped model configs against Hugging Face transformers: every config's RoPE, read by
mlbook.transformer.hf, gives a GPT whose logits equal a randomly initialised tiny LlamaForCausalLM's
carrying that config's base and scaling (rope_theta and rope_scaling, or transformers 5's rope_parameters);
every key is honoured or refused.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math

import pytest
import torch

transformers = pytest.importorskip("transformers")
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from hf_versions import rope_fields, rope_init_function  # noqa: E402
from mlbook.analysis.model_config import SHIPPED_CONFIGS, load_config, rotary_width  # noqa: E402
from mlbook.transformer.hf import (  # noqa: E402
    gpt_config_from_hf, gpt_from_hf_llama, hf_rope_type, rope_options_from_hf, rope_scaling_from_hf,
)
from mlbook.transformer.models import GPT, GPTConfig  # noqa: E402

logging.getLogger("transformers.modeling_rope_utils").setLevel(logging.ERROR)

VOCAB = 97


def tiny_llama(rope_theta: float, rope_scaling: dict | None, max_pos: int, head_dim: int = 16,
               n_kv: int = 2, **extra) -> LlamaForCausalLM:
    """A random 2-layer Llama, 4 query heads and n_kv KV heads of head_dim channels, float32, eager attention."""
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=4 * head_dim, intermediate_size=96, num_attention_heads=4,
                      num_key_value_heads=n_kv, num_hidden_layers=2, head_dim=head_dim, max_position_embeddings=max_pos,
                      rope_theta=rope_theta, rope_scaling=copy.deepcopy(rope_scaling), tie_word_embeddings=False,
                      attn_implementation="eager", **extra)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # norms away from 1 so a wrong copy shows
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    return model


def max_logit_gap(hf: LlamaForCausalLM, T: int, pairing: str = "half") -> float:
    ours = gpt_from_hf_llama(hf, pairing).eval()
    idx = torch.randint(0, VOCAB, (2, T), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return (hf(idx).logits - ours(idx)).abs().max().item()


def longest(c: dict) -> int:
    """max_position_embeddings, or for a config that does not give it the original length times the factor."""
    text, _, rs = rope_fields(c)
    rs = rs or {}
    return text.get("max_position_embeddings") or int(rs["original_max_position_embeddings"] * rs["factor"])


def shipped_llama_copy(name: str, shrink: bool) -> tuple[LlamaForCausalLM, int]:
    """(a tiny Llama with the shipped config's RoPE, the test length). shrink: the trained length becomes 32
    (max_position_embeddings keeping its ratio to it) so that 80 tokens run past it."""
    c = load_config(name)
    _, base, rs = rope_fields(c)
    rs = copy.deepcopy(rs)
    max_pos = longest(c)
    T = 64
    if shrink:
        orig = (rs or {}).get("original_max_position_embeddings") or max_pos
        ratio = max_pos / orig
        if rs and "original_max_position_embeddings" in rs:
            rs["original_max_position_embeddings"] = 32
        max_pos = int(32 * ratio)
        T = 80
    return tiny_llama(base, rs, max_pos, head_dim=rotary_width(c)), T


@pytest.mark.parametrize("name", SHIPPED_CONFIGS)
def test_shipped_config_names_its_source(name: str) -> None:
    c = load_config(name)
    assert c["_source"] and all(isinstance(s, str) and s for s in c["_source"])
    text = c.get("text_config", c)  # a multimodal config: its text model's
    for key in ("model_type", "num_attention_heads", "num_hidden_layers"):
        assert key in text, f"{name} lacks {key}"
    assert "rope_theta" in text or "rope_theta" in text.get("rope_parameters", {}), f"{name} states no RoPE base"
    assert "max_position_embeddings" in text or "max_position_embeddings is left out" in c["_notes"]


@pytest.mark.parametrize("shrink", [False, True], ids=["as-shipped", "past-original"])
@pytest.mark.parametrize("name", SHIPPED_CONFIGS)
def test_shipped_config_logits_equal_hf(name: str, shrink: bool) -> None:
    hf, T = shipped_llama_copy(name, shrink)
    assert max_logit_gap(hf, T) < 1e-5


def test_gemma3_local_layers_base_and_scaling() -> None:
    """Gemma 3's sliding layers rotate with rope_local_base_freq and no scaling (transformers builds their
    rotary embedding from a copy of the config with rope_scaling default): the local half of the config."""
    c = load_config("gemma-3-4b")
    hf = tiny_llama(float(c["rope_local_base_freq"]), None, c["max_position_embeddings"], head_dim=rotary_width(c))
    assert max_logit_gap(hf, 64) < 1e-5
    layer_types = transformers.Gemma3TextConfig(num_hidden_layers=c["num_hidden_layers"],
                                                sliding_window=c["sliding_window"]).layer_types
    assert tuple(layer_types) == tuple(c["layer_types"])


@pytest.mark.parametrize("name", SHIPPED_CONFIGS)
def test_shipped_config_frequencies_equal_rope_init_functions(name: str) -> None:
    """The frequency table and attention factor over the rotary width, short and past the longest context."""
    c = load_config(name)
    d = rotary_width(c)
    _, base, rs = rope_fields(c)
    kind = hf_rope_type(rs)
    cfg = LlamaConfig(hidden_size=4 * d, num_attention_heads=4, head_dim=d, rope_theta=base,
                      max_position_embeddings=longest(c), rope_scaling=copy.deepcopy(rs))
    view = {"rope_theta": base, "rope_scaling": rs, "max_position_embeddings": longest(c),
            "head_dim": d, "hidden_size": 4 * d, "num_attention_heads": 4}
    scaling = rope_scaling_from_hf(view)
    for seq_len in (None, longest(c) + 1):
        theirs, theirs_factor = rope_init_function(kind)(cfg, "cpu", seq_len=seq_len)
        ours, ours_factor = scaling.frequencies(d, base, seq_len)
        torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-9)
        assert math.isclose(ours_factor, theirs_factor, rel_tol=1e-12)


# ---------------------------------------------------------------------------
# Scalings no shipped config uses, and every key each one reads
# ---------------------------------------------------------------------------

SHORT = [1.0 + 0.05 * i for i in range(8)]
LONG = [1.0 + 1.5 * i for i in range(8)]

CASES = {
    "yarn-attention_factor": (10000.0, {"rope_type": "yarn", "factor": 4.0, "attention_factor": 0.8,
                                        "original_max_position_embeddings": 32}, 128, {}),
    "yarn-mscale-pair": (10000.0, {"rope_type": "yarn", "factor": 40.0, "mscale": 0.707, "mscale_all_dim": 1.0,
                                   "original_max_position_embeddings": 32, "beta_fast": 32, "beta_slow": 1}, 1280, {}),
    "yarn-no-original": (10000.0, {"rope_type": "yarn", "factor": 4.0}, 32, {}),
    "yarn-truncate-false": (150000.0, {"rope_type": "yarn", "factor": 32.0, "truncate": False,
                                       "original_max_position_embeddings": 32}, 1024, {}),
    "legacy-type-key": (10000.0, {"type": "linear", "factor": 2.0}, 64, {}),
    "dynamic": (10000.0, {"rope_type": "dynamic", "factor": 4.0}, 32, {}),
    "longrope-phi3-layout": (10000.0, {"rope_type": "longrope", "short_factor": SHORT, "long_factor": LONG},
                             256, {"original_max_position_embeddings": 32}),
    "longrope-factor-key": (10000.0, {"rope_type": "longrope", "short_factor": SHORT, "long_factor": LONG,
                                      "factor": 8.0}, 32, {}),
    "longrope-attention_factor": (10000.0, {"rope_type": "longrope", "short_factor": SHORT, "long_factor": LONG,
                                            "factor": 8.0, "attention_factor": 1.3}, 32, {}),
}


@pytest.mark.parametrize("T", [24, 80], ids=["inside", "past"])
@pytest.mark.parametrize("case", list(CASES))
def test_scaling_key_logits_equal_hf(case: str, T: int) -> None:
    base, rs, max_pos, extra = CASES[case]
    hf = tiny_llama(base, rs, max_pos, **extra)
    assert max_logit_gap(hf, T) < 1e-5


@pytest.mark.parametrize("n_kv", [4, 2, 1], ids=["mha", "gqa", "mqa"])
def test_interleaved_port_keeps_logits(n_kv: int) -> None:
    hf = tiny_llama(500000.0, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 32}, 256, n_kv=n_kv)
    assert max_logit_gap(hf, 48, pairing="interleaved") < 1e-5


def test_attention_factor_changes_logits() -> None:
    """The setting the old converter dropped: with attention_factor honoured the logits follow it."""
    rs = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}
    plain = gpt_from_hf_llama(tiny_llama(10000.0, rs, 128)).eval()
    tuned = gpt_from_hf_llama(tiny_llama(10000.0, {**rs, "attention_factor": 2.0}, 128)).eval()
    idx = torch.randint(0, VOCAB, (1, 40), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert (plain(idx) - tuned(idx)).abs().max() > 1e-3


# ---------------------------------------------------------------------------
# Refusals: every key is used or named
# ---------------------------------------------------------------------------

BASE = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": VOCAB,
        "intermediate_size": 96, "max_position_embeddings": 256, "rope_theta": 10000.0}


@pytest.mark.parametrize("extra, match", [
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fst": 16}}, r"'beta_fst'.*not read"),
    ({"rope_scaling": {"rope_type": "linear", "factor": 2.0, "original_max_position_embeddings": 128}},
     r"not read by transformers' 'linear'"),
    ({"rope_scaling": {"rope_type": "su", "short_factor": SHORT, "long_factor": LONG}}, r"'su'.*longrope"),
    ({"rope_scaling": {"rope_type": "mrope", "mrope_section": [2, 3, 4]}}, r"covers 9 pairs but the head rotates 8"),
    ({"rope_scaling": {"rope_type": "yarn", "type": "linear", "factor": 2.0}}, r"rope_type='yarn' and type='linear'"),
    ({"rope_scaling": {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 64}},
     r"uses max_position_embeddings and ignores the key"),
    ({"rope_scaling": {"rope_type": "longrope", "short_factor": SHORT, "long_factor": LONG, "factor": 4.0},
      "original_max_position_embeddings": 32}, r"differs from max_position_embeddings / original"),
    ({"rope_scaling": {"rope_type": "longrope", "short_factor": SHORT, "long_factor": LONG, "factor": 4.0,
                       "original_max_position_embeddings": 64}}, r"4.57's longrope switches factors at .*move it to the top level"),
    ({"rope_scaling": {"rope_type": "longrope", "short_factor": SHORT, "long_factor": LONG}}, r"needs 'factor'"),
    ({"rope_scaling": {"rope_type": "default", "factor": 2.0}}, r"default RoPE does not read"),
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, r"needs \['high_freq_factor'"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "truncate": "no"}}, r"truncate.*true or false"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": "4"}}, r"must be a number"),
    ({"partial_rotary_factor": 0.3}, r"not a whole number of channels"),
    ({"attention_chunk_size": 8192}, r"attention_chunk_size"),
    ({"attn_temperature_tuning": True}, r"attn_temperature_tuning"),
    ({"head_dim": 8}, r"head_dim=8 times num_attention_heads"),
    ({"model_type": "llama", "sliding_window": 16}, r"builds no sliding layer from it"),
    ({"model_type": "cohere2_moe", "sliding_window": 16}, r"give layer_types"),
])
def test_unread_or_unsupported_keys_are_refused(extra: dict, match: str) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        gpt_config_from_hf({**BASE, **extra})


def test_longrope_factor_lists_must_fit_the_head() -> None:
    config = {**BASE, "rope_scaling": {"rope_type": "longrope", "short_factor": SHORT[:5], "long_factor": LONG,
                                       "factor": 4.0}}
    with pytest.raises(ValueError, match=r"short_factor has 5 entries, but d_head=16 has 8 pairs"):
        gpt_config_from_hf(config)


def test_layer_settings_map_to_gpt_config() -> None:
    """Windows, NoPE layers, local base and GQA reach GPTConfig; partial rotation becomes a rope option. Each key
    is given to a family whose config class reads it (Gemma 3: rope_local_base_freq; SmolLM3: no_rope_layers)."""
    c = {**BASE, "model_type": "gemma3_text", "num_key_value_heads": 2,
         "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 8, "rope_local_base_freq": 10.0,
         "partial_rotary_factor": 0.5}
    g = gpt_config_from_hf(c)
    assert isinstance(g, GPTConfig)
    assert (g.n_kv_heads, g.layer_types, g.sliding_window, g.rope_local_base, g.nope_layers) == (
        2, ("sliding_attention", "full_attention"), 8, 10.0, ())
    assert rope_options_from_hf(c)["partial_rotary_factor"] == 0.5
    nope = gpt_config_from_hf({**BASE, "model_type": "smollm3", "no_rope_layers": [1, 0]})
    assert nope.nope_layers == (1,)
    mistral = gpt_config_from_hf({**BASE, "model_type": "mistral", "sliding_window": 16})
    assert mistral.layer_types == ("sliding_attention",) * 2 and mistral.sliding_window == 16
    gemma2 = gpt_config_from_hf({**BASE, "model_type": "gemma2", "sliding_window": 16})  # Gemma2Config alternates
    assert gemma2.layer_types == ("sliding_attention", "full_attention") and gemma2.sliding_window == 16
    qwen = gpt_config_from_hf({**BASE, "sliding_window": 16, "use_sliding_window": False})
    assert qwen.layer_types is None
    hybrid = gpt_config_from_hf({**BASE, "model_type": "smollm3", "num_hidden_layers": 8,
                                 "no_rope_layer_interval": 4})
    assert hybrid.nope_layers == (3, 7)  # transformers: layer i is NoPE when (i + 1) % interval == 0


@pytest.mark.parametrize("rope_scaling", [
    None,
    {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 64, "beta_fast": 16.0},
    {"rope_type": "longrope", "short_factor": [1.0 + 0.1 * i for i in range(4)],
     "long_factor": [2.0 + i for i in range(4)], "factor": 4.0},
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 64},
], ids=["default", "yarn", "longrope", "llama3"])
def test_partial_rotary_tables_equal_transformers(rope_scaling) -> None:
    """partial_rotary_factor 0.5 of a 16-channel head: the GPT's rotary embedding holds transformers'
    frequencies over the 8 rotating channels, and the same factor on cos and sin."""
    c = {**BASE, "partial_rotary_factor": 0.5, "rope_scaling": copy.deepcopy(rope_scaling)}
    rotary = gpt_config_from_hf(c).rotary_embedding()
    hf_config = LlamaConfig(hidden_size=64, num_attention_heads=4, rope_theta=10000.0, max_position_embeddings=256,
                            rope_scaling=copy.deepcopy(rope_scaling), partial_rotary_factor=0.5)
    kind = hf_rope_type(rope_scaling)
    for seq_len in (None, 300):
        theirs, factor = rope_init_function(kind)(hf_config, "cpu", seq_len=seq_len)
        torch.testing.assert_close(rotary.inv_freq_at(seq_len or 1), theirs, rtol=1e-6, atol=1e-9)
        assert math.isclose(rotary.attention_factor, factor, rel_tol=1e-12)


@pytest.mark.parametrize("model_type", ["deepseek_v3", "deepseek_v2"])
def test_latent_attention_is_refused_with_the_softmax_factor_transformers_applies(model_type: str) -> None:
    """A latent-attention config (DeepSeek's) must not become a Llama-layout GPT: the refusal names latent attention,
    also where the file leaves kv_lora_rank to its class, and the mscale_all_dim factor on the softmax scale, equal to
    the one transformers' attention multiplies its scaling by."""
    rope = {"type": "yarn", "factor": 40.0, "mscale": 1.0, "mscale_all_dim": 1.0, "original_max_position_embeddings": 64,
            "beta_fast": 32.0, "beta_slow": 1.0}
    shape = {"qk_rope_head_dim": 16, "qk_nope_head_dim": 32, "v_head_dim": 32, "kv_lora_rank": 32, "q_lora_rank": None}
    config = {**BASE, "model_type": model_type, "rope_scaling": rope, **shape}
    cls = transformers.AutoConfig.for_model(model_type, **{**BASE, **shape, "rope_scaling": copy.deepcopy(rope),
                                                           "n_routed_experts": 2, "num_experts_per_tok": 1})
    attn = transformers.AutoModelForCausalLM.from_config(cls).model.layers[0].self_attn
    expected = (0.1 * math.log(40.0) + 1) ** 2  # the factor the refusal names, transformers 5.15's
    if model_type == "deepseek_v3" or int(transformers.__version__.split(".")[0]) >= 5:  # 4.57's V2 left it out
        factor = attn.scaling / (shape["qk_rope_head_dim"] + shape["qk_nope_head_dim"]) ** -0.5
        assert factor == pytest.approx(expected, rel=1e-6)
    with pytest.raises(ValueError, match=rf"latent attention.*softmax scale.*= {expected:.4f}"):
        gpt_config_from_hf(config)
    unstated = {k: v for k, v in config.items() if k != "kv_lora_rank"}  # the class's 512 applies
    with pytest.raises(ValueError, match=rf"model_type='{model_type}' is latent attention"):
        gpt_config_from_hf(unstated)
    with pytest.raises(ValueError, match=r"latent attention"):  # unscaled: no softmax factor, still latent
        gpt_config_from_hf({**config, "rope_scaling": None})


def test_nope_layers_give_smollm3s_logits() -> None:
    """SmolLM3 rotates nothing in every fourth layer: a GPT copied from a tiny SmolLM3ForCausalLM must give its
    logits, and the same GPT with those layers rotating must not (the NoPE layers are what the check sees)."""
    torch.manual_seed(0)
    cfg = transformers.SmolLM3Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_attention_heads=4,
                                     num_key_value_heads=2, num_hidden_layers=8, head_dim=16,
                                     max_position_embeddings=256, rope_theta=10000.0, no_rope_layer_interval=4,
                                     tie_word_embeddings=False, attn_implementation="eager", pad_token_id=0,
                                     bos_token_id=1, eos_token_id=2)
    hf = transformers.SmolLM3ForCausalLM(cfg).eval()
    ours = gpt_from_hf_llama(hf).eval()
    assert ours.config.nope_layers == (3, 7)  # transformers: layer i is NoPE when (i + 1) % interval == 0
    rotating = GPT(dataclasses.replace(ours.config, nope_layers=())).eval()
    rotating.load_state_dict(ours.state_dict())
    idx = torch.randint(0, VOCAB, (2, 64), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        theirs = hf(idx).logits
        assert (theirs - ours(idx)).abs().max().item() < 1e-5
        assert (theirs - rotating(idx)).abs().max().item() > 1e-3
