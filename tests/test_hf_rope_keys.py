"""Top-level keys that look like RoPE settings are read by the family's config class or refused by name.

transformers drops a key its config class does not read, and the model then rotates at the class default: a
`rope_thetta` typo beside a llama3 scaling gives base 10,000, a ChatGLM-style `rope_ratio` relabelled `llama` loses
its base multiplier. `check_rope_keys` (run by every reader of the RoPE fields) refuses such keys, naming them.
The table it checks against (`ROPE_KEYS_BY_FAMILY`) is compared with transformers' own config classes here, and
every published config that reads today (../shared/realconfigs, or $MLBOOK_REALCONFIGS) still reads.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import re
from pathlib import Path

import pytest

from mlbook.transformer.hf import (
    ROPE_KEYS_BY_FAMILY,
    ROPE_KEYS_EVERY_FAMILY,
    ROPE_PAIRING_KEYS,
    check_rope_keys,
    hf_rope_base,
    hf_rotary_dim,
    is_rope_key,
    rope_options_from_hf,
)

FOLDER = Path(os.environ.get("MLBOOK_REALCONFIGS", Path(__file__).resolve().parents[2] / "shared" / "realconfigs"
                             / "configs"))
SHIPPED = Path(__file__).resolve().parents[1] / "src" / "mlbook" / "data" / "configs"

# Llama 3.1's RoPE fields as published (meta-llama/Llama-3.1-8B config.json); the published 70B file when present
LLAMA31 = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
           "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32, "head_dim": 128,
           "max_position_embeddings": 131072, "rope_theta": 500000.0,
           "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                            "original_max_position_embeddings": 8192}}


def _llama() -> dict:
    path = FOLDER / "llama-3.1-70b.json"
    return json.loads(path.read_text()) if path.is_file() else dict(LLAMA31)


@pytest.mark.parametrize("key,value,drop_theta", [
    ("rope_ratio", 2.0, False),          # ChatGLM's base multiplier
    ("rotary_emb_base", 1e6, False),     # GPT-NeoX / StableLM's base, which LlamaConfig does not read
    ("rope_pct", 0.25, False),           # StableLM-epoch's name for partial_rotary_factor
    ("rotary_pct", 0.25, False),         # GPT-NeoX's name for it
    ("rope_thetta", 500000.0, True),     # a typo, with rope_theta gone: transformers would rotate at 10,000
    ("rope_theat", 500000.0, True),
    ("ropetheta", 500000.0, True),
    ("rotary_base", 500000.0, True),
    ("base_theta", 500000.0, True),
    ("rope_type", "llama3", False),      # a top-level rope_type: read only inside the dict
    ("mrope_section", [16, 24, 24], False),
    ("no_rope_layers", "one per layer", False),  # read by Llama 4 and SmolLM3 only; LlamaModel rotates every layer
])
def test_unread_rope_keys_are_refused_by_name(key, value, drop_theta):
    config = _llama()
    config[key] = [1] * config["num_hidden_layers"] if value == "one per layer" else value
    if drop_theta:
        del config["rope_theta"]
    for read in (rope_options_from_hf, hf_rope_base, hf_rotary_dim, check_rope_keys):
        with pytest.raises(ValueError, match=re.escape(repr([key])) + r".*model_type='llama'"):
            read(config)


def test_a_chatglm_config_relabelled_llama_is_refused():
    # THUDM/glm-4-9b-chat's RoPE fields (its config.json: rope_ratio 500, seq_length 131072), relabelled
    config = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 40,
              "kv_channels": 128, "rope_ratio": 500, "seq_length": 131072}
    with pytest.raises(ValueError, match=r"\['rope_ratio'\].*rope_ratio r multiplies the base by r"):
        rope_options_from_hf(config)


def test_the_message_names_the_families_that_read_the_key():
    config = _llama()
    config["rotary_emb_base"] = 1e6
    with pytest.raises(ValueError, match=r"rotary_emb_base is read only by \['gpt_neox', 'gpt_neox_japanese'\]"):
        check_rope_keys(config)


def test_a_multimodal_config_names_the_key_under_its_text_config():
    config = {"model_type": "llama4", "text_config": {**LLAMA31, "model_type": "llama4_text", "rope_ratio": 2.0}}
    with pytest.raises(ValueError, match=re.escape("['text_config.rope_ratio']")):
        check_rope_keys(config)


def test_keys_the_family_reads_are_accepted():
    neox = {"model_type": "gpt_neox", "hidden_size": 1024, "num_attention_heads": 16, "num_hidden_layers": 24,
            "max_position_embeddings": 2048, "rotary_emb_base": 10000, "rotary_pct": 0.25}
    check_rope_keys(neox)
    assert hf_rotary_dim(neox) == 16
    llama = _llama()
    llama["rope_ratio"] = None  # stated null: nothing to drop
    llama["use_mrope"] = False  # Qwen2's inert flag
    check_rope_keys(llama)
    llama["use_mrope"] = True
    with pytest.raises(ValueError, match=r"\['use_mrope'\]"):
        check_rope_keys(llama)


def test_a_config_with_no_model_type_is_checked_as_llama():
    with pytest.raises(ValueError, match=r"\['rope_thetta'\] for model_type='llama'"):
        check_rope_keys({"rope_thetta": 1e6, "hidden_size": 64, "num_attention_heads": 4})


@pytest.mark.parametrize("key", ["property_count", "qk_nope_head_dim", "europe", "max_position_embeddings",
                                 "sliding_window", "head_dim"])
def test_keys_that_are_not_rope_settings(key):
    assert not is_rope_key(key)


def test_a_config_object_carries_its_unread_keys():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4, num_hidden_layers=2, rope_thetta=1e6)
    with pytest.raises(ValueError, match=r"\['rope_thetta'\]"):
        check_rope_keys(config)


def _class_rope_keys(cls) -> set[str]:
    """The RoPE-like keys a transformers config class reads: its fields, its __init__'s parameters, its
    attribute_map, and the kwargs its module pops."""
    names = set(inspect.signature(cls.__init__).parameters) | set(getattr(cls, "attribute_map", {}) or {})
    if dataclasses.is_dataclass(cls):
        names |= {f.name for f in dataclasses.fields(cls)}
    source = inspect.getsource(inspect.getmodule(cls))
    names |= set(re.findall(r"kwargs\.(?:pop|get)\(\s*\"([A-Za-z0-9_]+)\"", source))
    return {n for n in names if is_rope_key(n) and n not in ("rope_parameters_key",)}


def test_the_table_matches_transformers_config_classes():
    """No key a family's class reads is refused (the table may name more, never fewer)."""
    pytest.importorskip("transformers", minversion="5")
    from transformers import CONFIG_MAPPING

    from mlbook.transformer.hf import _known_families

    missed = {}
    for family in sorted(_known_families()):
        if family not in CONFIG_MAPPING:
            continue
        read = _class_rope_keys(CONFIG_MAPPING[family])
        allowed = ROPE_KEYS_EVERY_FAMILY | ROPE_PAIRING_KEYS | {k for k, f in ROPE_KEYS_BY_FAMILY.items()
                                                               if family in f}
        # methods and class constants of PretrainedConfig, not config keys
        read -= {"convert_rope_params_to_dict", "standardize_rope_params", "validate_rope",
                 "ignore_keys_at_rope_validation", "default_theta", "default_partial_rotary_factor"}
        if read - allowed:
            missed[family] = sorted(read - allowed)
    assert not missed, f"keys these families' config classes read but check_rope_keys refuses: {missed}"


@pytest.mark.skipif(not FOLDER.is_dir(), reason=f"no published configs at {FOLDER} (set MLBOOK_REALCONFIGS)")
def test_published_and_shipped_configs_pass_the_key_check():
    refused_by_family = {"llama-3.3-nemotron-super-49b-v1", "phi-4-reasoning-vision-15b"}
    paths = sorted(FOLDER.glob("*.json")) + sorted(SHIPPED.glob("*.json"))
    for path in paths:
        config = json.loads(path.read_text())
        if path.stem in refused_by_family:
            with pytest.raises(ValueError, match="model_type="):
                check_rope_keys(config)
            continue
        check_rope_keys(config)


@pytest.mark.skipif(not FOLDER.is_dir(), reason=f"no published configs at {FOLDER} (set MLBOOK_REALCONFIGS)")
@pytest.mark.parametrize("name,key,value", [
    ("qwen2.5-7b", "rope_thetta", 1e6),
    ("mistral-nemo-base-2407", "rotary_emb_base", 1e6),
    ("qwen3-next-80b-a3b-thinking", "rope_pct", 0.5),
    ("gemma-2-9b-it", "rope_local_base_freq", 10000.0),  # Gemma 3's key; Gemma2Config does not read it
    ("deepseek-r1", "rope_ratio", 2.0),
])
def test_typos_and_foreign_keys_in_published_configs_are_refused(name, key, value):
    config = json.loads((FOLDER / f"{name}.json").read_text())
    text = config.get("text_config", config)
    text[key] = value
    with pytest.raises(ValueError, match=re.escape(key)):
        rope_options_from_hf(config)


@pytest.mark.parametrize("key", ["original_max_position_embedding", "original_max_positions_embeddings",
                                 "orig_max_position_embeddings", "original-max-position-embeddings",
                                 "Original_Max_Position_Embeddings", "max_position_embedding",
                                 "max_postion_embeddings_original", "max_pos_embeddings"])
def test_near_misses_of_the_length_keys_are_refused_by_name(key):
    """A misspelt anchor would be kept unread: llama3 scaling would anchor at max_position_embeddings."""
    config = _llama()
    config["rope_scaling"] = {k: v for k, v in config["rope_scaling"].items()
                              if k != "original_max_position_embeddings"}
    config[key] = 8192
    with pytest.raises(ValueError, match=re.escape(f"['{key}']") + r".*model_type='llama'.*length keys"):
        check_rope_keys(config)


def test_the_length_keys_and_a_familys_own_are_accepted():
    from mlbook.transformer.hf import LENGTH_KEYS_BY_FAMILY, is_length_key
    config = _llama()
    config["original_max_position_embeddings"] = 8192
    check_rope_keys({**config, "max_position_embeddings": 131072})
    assert not is_length_key("n_positions") and not is_length_key("num_position_embeddings")
    assert "llama" not in LENGTH_KEYS_BY_FAMILY.get("max_encoder_position_embeddings", ())


def test_the_length_key_table_matches_transformers_config_classes():
    """Every max_pos-like name a family's 5.15 class reads is accepted for that family."""
    pytest.importorskip("transformers", minversion="5")
    from transformers import CONFIG_MAPPING

    from mlbook.transformer.hf import LENGTH_KEYS_BY_FAMILY, LENGTH_KEYS_EVERY_FAMILY, is_length_key

    missed = {}
    for family, cls in CONFIG_MAPPING.items():
        names = set(inspect.signature(cls.__init__).parameters) | set(getattr(cls, "attribute_map", {}) or {})
        if dataclasses.is_dataclass(cls):
            names |= {f.name for f in dataclasses.fields(cls)}
        read = {n for n in names if is_length_key(n) and not is_rope_key(n)}
        allowed = LENGTH_KEYS_EVERY_FAMILY | {k for k, f in LENGTH_KEYS_BY_FAMILY.items() if family in f}
        if read - allowed:
            missed[family] = sorted(read - allowed)
    assert not missed, f"length keys these families' config classes read but check_rope_keys refuses: {missed}"
