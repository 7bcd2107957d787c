"""Which families the config readers read, and how: checked against transformers 5.15's own code.

A family whose rotation the library has not read is refused by name (ChatGLM's remote code, any model type
transformers does not know and no architecture names), never read with Llama's defaults; GPT-J and CodeGen read
rotary_dim; OLMo Hybrid rotates only where its config states a base; the DSA indexer's pairing is read against
vLLM's indexer_rope_interleave.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from mlbook.transformer.hf import (
    HF_ROPE_PARAMETER_FAMILIES,
    hf_indexer_rope_pairing,
    hf_rope_base,
    hf_rope_family,
    hf_rope_pairing,
    hf_rotating_layers,
    rope_options_from_hf,
)

REAL = Path(os.environ.get("MLBOOK_REALCONFIGS", Path(__file__).resolve().parents[2] / "shared" / "realconfigs"
                           / "configs"))


@pytest.mark.oracle
def test_the_rope_parameter_families_are_those_transformers_declares() -> None:
    transformers = pytest.importorskip("transformers")
    if transformers.__version__ != "5.15.0":
        pytest.skip(f"the table is transformers 5.15's; installed {transformers.__version__}")
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING, CONFIG_MAPPING_NAMES

    def fields(m: str) -> set:
        return {k for c in CONFIG_MAPPING[m].__mro__ for k in getattr(c, "__annotations__", {})}

    declared = {m for m in CONFIG_MAPPING_NAMES if "rope_parameters" in fields(m)}
    assert declared == set(HF_ROPE_PARAMETER_FAMILIES)


def test_chatglm_is_refused_by_name_not_read_with_llama_s_defaults() -> None:
    config = {"model_type": "chatglm", "num_layers": 40, "hidden_size": 4096, "num_attention_heads": 32,
              "rope_ratio": 500, "architectures": ["ChatGLMForConditionalGeneration"]}
    for read in (hf_rope_base, hf_rope_pairing, rope_options_from_hf):
        with pytest.raises(ValueError, match=r"model_type='chatglm'.*from the Hub \(auto_map\).*rope_ratio.*"
                                             r"model_type='llama'"):
            read(config)


def test_an_unknown_family_is_refused_naming_its_fields_and_the_override() -> None:
    config = {"model_type": "my_port", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2,
              "rope_theta": 50000.0}
    with pytest.raises(ValueError, match=r"model_type='my_port'.*it states rope_theta.*model_type='llama'"):
        hf_rope_base(config)
    assert hf_rope_base({**config, "model_type": "llama"}) == 50000.0  # the override the message names
    assert hf_rope_base({k: v for k, v in config.items() if k != "model_type"}) == 50000.0  # no family: Llama's layout
    assert hf_rope_family({**config, "architectures": ["DeepseekV3ForCausalLM"]}) == "deepseek_v3"


def test_the_architecture_is_read_from_a_multimodal_wrapper_s_top_level() -> None:
    """A wrapper keeps `architectures` at its top level; its text config has none."""
    config = {"model_type": "my_wrapper", "architectures": ["Llama4ForConditionalGeneration"],
              "text_config": {"model_type": "my_text", "num_hidden_layers": 4, "rope_theta": 500000.0,
                              "no_rope_layers": [1, 1, 1, 1]}}
    assert hf_rope_family(config) == "llama4_text" and hf_rope_pairing(config) == "interleaved"


def test_glm4_5_and_glm4_7_flash_pairing() -> None:
    """GLM-4.5/4.6 (glm4_moe) and GLM-4.5V (glm4v_moe_text) rotate halves; GLM-4.7-Flash (glm4_moe_lite) reads
    rope_interleave, True by default (the oracle test in test_hf_pairing.py runs their code)."""
    base = {"num_hidden_layers": 2, "rope_theta": 10000.0}
    assert hf_rope_pairing({**base, "model_type": "glm4_moe"}) == "half"
    assert hf_rope_pairing({**base, "model_type": "glm4v_moe_text"}) == "half"
    assert hf_rope_pairing({**base, "model_type": "glm4_moe_lite"}) == "interleaved"
    assert hf_rope_pairing({**base, "model_type": "glm4_moe_lite", "rope_interleave": False}) == "half"
    with pytest.raises(ValueError, match="does not read it"):
        hf_rope_pairing({**base, "model_type": "glm4_moe", "rope_interleave": True})


@pytest.mark.oracle
def test_olmo_hybrid_rotates_only_with_a_stated_base_as_its_model_code_does() -> None:
    transformers = pytest.importorskip("transformers")
    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip("OLMo Hybrid is transformers 5's")
    from transformers import OlmoHybridConfig
    from transformers.models.olmo_hybrid.modeling_olmo_hybrid import OlmoHybridModel

    base = {"model_type": "olmo_hybrid", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 2,
            "vocab_size": 10, "pad_token_id": 0, "max_position_embeddings": 64}

    def theirs(config: dict):
        with torch.device("meta"):
            return OlmoHybridModel(OlmoHybridConfig.from_dict({k: v for k, v in config.items() if k != "model_type"}))

    stated = {**base, "rope_parameters": {"rope_type": "default", "rope_theta": 50000.0}}
    assert hf_rope_base(stated) == 50000.0 == theirs(stated).rotary_emb.config.rope_parameters["rope_theta"]
    nope = {**base, "rope_theta": None}
    assert theirs(nope).rotary_emb is None and not any(hf_rotating_layers(nope))
    with pytest.raises(ValueError, match="no layer of this config rotates"):
        rope_options_from_hf(nope)
    unstated = {**base, "rope_parameters": None}  # the released checkpoints' layout
    assert theirs(unstated).rotary_emb is not None  # 5.15 fills 10,000 and rotates ...
    with pytest.raises(ValueError, match="olmo_hybrid.*fills the class default 10,000"):  # ... the library refuses
        hf_rope_base(unstated)


@pytest.mark.oracle
def test_the_dsa_indexer_pairing_is_transformers_and_the_key_vllm_reads_must_agree() -> None:
    import inspect

    transformers = pytest.importorskip("transformers")
    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip("the DSA indexers are transformers 5's")
    from transformers.models.deepseek_v32 import modeling_deepseek_v32 as v32
    from transformers.models.glm_moe_dsa import modeling_glm_moe_dsa as glm

    assert "apply_rotary_pos_emb_interleave" in inspect.getsource(glm.GlmMoeDsaIndexer.forward)
    assert "apply_rotary_pos_emb_interleave" not in inspect.getsource(v32.DeepseekV32Indexer.forward)
    glm5 = {"model_type": "glm_moe_dsa", "num_hidden_layers": 2, "rope_theta": 1e6, "indexer_rope_interleave": True}
    assert hf_indexer_rope_pairing(glm5) == "interleaved"
    with pytest.raises(ValueError, match=r"indexer_rope_interleave is absent.*vLLM.*half"):
        hf_indexer_rope_pairing({k: v for k, v in glm5.items() if k != "indexer_rope_interleave"})
    v32_config = {"model_type": "deepseek_v32", "num_hidden_layers": 2, "rope_theta": 1e4}
    assert hf_indexer_rope_pairing(v32_config) == "half"
    with pytest.raises(ValueError, match="indexer_rope_interleave is True"):
        hf_indexer_rope_pairing({**v32_config, "indexer_rope_interleave": True})
    with pytest.raises(ValueError, match="no DeepSeek Sparse Attention indexer"):
        hf_indexer_rope_pairing({"model_type": "llama", "num_hidden_layers": 2})
    path = REAL / "glm-5.json"
    if path.exists():
        assert hf_indexer_rope_pairing(json.load(open(path))) == "interleaved"
