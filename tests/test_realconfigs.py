"""Published config.json files of 33 decoder models (2023-2026, 22 families), read as transformers reads them.

The corpus lives outside the repository (`../shared/realconfigs/configs`, or the folder
$MLBOOK_REALCONFIGS names; each file's source is in its `sources.md`): it is test data, not
copied here, so in a reader's clone these tests skip with a message. For every config:

- the summary, the layer plan and the KV cache are computed without error, or refused with a
  sentence naming the field (`REFUSED`);
- the frequencies and the attention factor of every layer type equal those of transformers'
  own rotary module for the model (relative 1e-6), wherever the installed transformers can
  build the config (transformers 5 for the rope_parameters layout);
- the KV bytes per token equal the formula written out below from the config's fields.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
from pathlib import Path

import pytest
import torch

from mlbook.analysis.model_config import layer_plan, summarize_config
from mlbook.analysis.production import config_kv_plan
from mlbook.transformer.hf import (
    hf_rope_base,
    hf_rope_layout,
    hf_rope_pairing,
    hf_rope_parameters,
    hf_rotary_dim,
    hf_text_config,
    rope_scaling_from_hf,
)

FOLDER = Path(os.environ.get("MLBOOK_REALCONFIGS", Path(__file__).resolve().parents[2] / "shared" / "realconfigs"
                             / "configs"))
NAMES = sorted(p.stem for p in FOLDER.glob("*.json")) if FOLDER.is_dir() else []
pytestmark = pytest.mark.skipif(not NAMES, reason=f"no published configs at {FOLDER} (the corpus is outside the "
                                                  "repository; set MLBOOK_REALCONFIGS to its configs folder)")


def load(name: str) -> dict:
    return json.loads((FOLDER / f"{name}.json").read_text())


# Summaries the library refuses, and the field its sentence names
REFUSED = {
    # FalconConfig's max_position_embeddings defaults to 2048; the published file states none
    "falcon-180b-chat": "max_position_embeddings",
}
# Configs whose RoPE the library refuses to read, by family: model types transformers 5.15 does not know, whose
# remote code (auto_map) sets the rotation (DeciLM's modeling_decilm.py, Phi-4-reasoning-vision's own code). The
# layer plan reads the bases, so it is refused too; the KV cache needs no RoPE and is costed
REFUSED_FAMILY = {"llama-3.3-nemotron-super-49b-v1": "nemotron-nas", "phi-4-reasoning-vision-15b": "phi4-siglip"}

BF16 = 2
# KV bytes per token at bf16, written out from each config's fields: layers x values per layer and token x 2 bytes.
# Grouped-query: 2 (K and V) x KV heads x head_dim; latent attention: kv_lora_rank + qk_rope_head_dim;
# linear-attention layers add nothing per token (their state is fixed-size); windows do not change the per-token rate.
KV_PER_TOKEN = {
    "deepseek-r1": 61 * (512 + 64) * BF16,
    "exaone-4.0-1.2b": 30 * 2 * 8 * 64 * BF16,
    "falcon-180b-chat": 80 * 2 * 8 * (14848 // 232) * BF16,  # num_kv_heads 8 (new_decoder_architecture)
    "gemma-2-9b-it": 42 * 2 * 8 * 256 * BF16,
    "glm-5": 78 * (512 + 64) * BF16,
    "gpt-oss-120b": 36 * 2 * 8 * 64 * BF16,
    "granite-3.1-1b-a400m-instruct": 24 * 2 * 8 * (1024 // 16) * BF16,
    "granite-3b-code-instruct-128k": 32 * 2 * 32 * (2560 // 32) * BF16,
    "kimi-k2-instruct": 61 * (512 + 64) * BF16,
    "llama-2-7b-hf": 32 * 2 * 32 * 128 * BF16,
    "llama-3.1-70b": 80 * 2 * 8 * 128 * BF16,
    "llama-3.2-3b": 28 * 2 * 8 * 128 * BF16,
    "llama-3.3-70b-instruct": 80 * 2 * 8 * 128 * BF16,
    "llama-3.3-nemotron-super-49b-v1": 49 * 2 * (64 // 8) * 128 * BF16,  # 49 attention blocks, n_heads_in_group 8
    "llama-4-maverick-17b-128e-instruct": 48 * 2 * 8 * 128 * BF16,
    "llama-4-scout-17b-16e-instruct": 48 * 2 * 8 * 128 * BF16,
    "medgemma-27b-it": 62 * 2 * 16 * 128 * BF16,
    "meta-llama-3-8b-instruct": 32 * 2 * 8 * 128 * BF16,
    "mistral-nemo-base-2407": 40 * 2 * 8 * 128 * BF16,
    "mixtral-8x22b-v0.1": 56 * 2 * 8 * 128 * BF16,
    "mixtral-8x7b-v0.1": 32 * 2 * 8 * 128 * BF16,
    "phi-2": 32 * 2 * 32 * 80 * BF16,
    "phi-3-mini-128k-instruct-su": 32 * 2 * 32 * 96 * BF16,
    "phi-4-reasoning-vision-15b": 40 * 2 * 10 * 128 * BF16,
    "pythia-410m-chatbot": 24 * 2 * 16 * 64 * BF16,
    "qwen2.5-7b": 28 * 2 * 4 * 128 * BF16,
    "qwen3-0.6b": 28 * 2 * 8 * 128 * BF16,
    "qwen3-30b-a3b": 48 * 2 * 4 * 128 * BF16,
    "qwen3-coder-480b-a35b-instruct": 62 * 2 * 8 * 128 * BF16,
    "qwen3-next-80b-a3b-thinking": (48 // 4) * 2 * 2 * 256 * BF16,  # every 4th layer full attention
    "qwen3-vl-32b-instruct": 64 * 2 * 8 * 128 * BF16,
    "qwen3.5-27b": 16 * 2 * 4 * 256 * BF16,  # 16 of 64 layers full attention
    "yi-1.5-6b-slerp": 32 * 2 * 4 * 128 * BF16,
}

# Gated DeltaNet state per linear-attention layer: value heads x key dim x value dim, plus the convolution's last
# kernel inputs of q, k (key heads x key dim each) and v (value heads x value dim)
LINEAR_STATE = {
    "qwen3-next-80b-a3b-thinking": 32 * 128 * 128 + (2 * 16 * 128 + 32 * 128) * 4,
    "qwen3.5-27b": 48 * 128 * 128 + (2 * 16 * 128 + 48 * 128) * 4,
}


def test_corpus_is_the_one_described() -> None:
    assert len(NAMES) == 33 and set(NAMES) == set(KV_PER_TOKEN)


@pytest.mark.parametrize("name", NAMES)
def test_every_config_is_summarised_laid_out_and_costed(name: str) -> None:
    config = load(name)
    kv = config_kv_plan(config)
    assert kv.per_token == KV_PER_TOKEN[name]
    for part in kv.parts:
        assert part.fixed_values == (LINEAR_STATE[name] if part.kind == "linear_attention" else 0)
    if name in REFUSED_FAMILY:
        for read in (layer_plan, summarize_config, hf_rope_base, hf_rope_pairing):
            with pytest.raises(ValueError, match=rf"model_type='{REFUSED_FAMILY[name]}'.*model_type='llama'"):
                read(config)
        return
    plan = layer_plan(config)
    assert len(plan.kinds) == hf_text_config(config)["num_hidden_layers"]
    if name in REFUSED:
        with pytest.raises(ValueError, match=REFUSED[name]):
            summarize_config(config)
        return
    summary = summarize_config(config)
    assert summary.rotary_dim == hf_rotary_dim(config)
    assert summary.base == hf_rope_base(config)
    assert summary.kv_per_token == KV_PER_TOKEN[name]
    layout = hf_rope_layout(config)
    assert (layout.split()[1] if layout != "none" else "no RoPE field") in summary.type_note


def test_transformers_5_layout_configs_are_read_from_rope_parameters() -> None:
    """GLM-5 and Qwen3.5 publish rope_parameters: their base and partial factor come from it, not 10,000 and 1."""
    glm, qwen = load("glm-5"), load("qwen3.5-27b")
    assert hf_rope_layout(glm).startswith("transformers 5") and hf_rope_base(glm) == 1_000_000
    assert hf_rope_base(qwen) == 10_000_000 and hf_rotary_dim(qwen) == 64  # 0.25 of 256
    assert summarize_config(qwen).rotary_dim == 64


# ---------------------------------------------------------------------------
# Against transformers' own rotary modules
# ---------------------------------------------------------------------------

# The published model type transformers does not register, and the config class the model's own code is
# built on (its config.json's architectures say so): Kimi K2 is DeepSeek-V3's architecture
SAME_ARCHITECTURE = {"kimi_k2": "deepseek_v3"}


def _transformers_rotary(config: dict):
    """transformers' config for the text model, built the way from_pretrained builds it, and its rotary module."""
    transformers = pytest.importorskip("transformers")
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    logging.getLogger("transformers").setLevel(logging.ERROR)
    text = hf_text_config(config)
    model_type = SAME_ARCHITECTURE.get(text.get("model_type"), text.get("model_type"))
    if model_type not in CONFIG_MAPPING:
        pytest.skip(f"transformers {transformers.__version__} has no config class for model_type {model_type!r}")
    if "rope_parameters" in text and int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip(f"the rope_parameters layout is transformers 5's; installed {transformers.__version__}")
    fields = {k: v for k, v in text.items() if not k.startswith("_") and k != "model_type"}
    try:
        hf = AutoConfig.for_model(model_type, **fields)
    except KeyError as e:  # transformers 5.15 refuses Phi-3's first "su" config (see test below)
        pytest.skip(f"transformers {transformers.__version__} cannot build this config: {e}")
    package = type(hf).__module__.rsplit(".", 1)[0]
    modeling = importlib.import_module(f"{package}.modeling_{package.rsplit('.', 1)[1]}")
    rotary = [getattr(modeling, n) for n in dir(modeling) if n.endswith("RotaryEmbedding") and not n.startswith("_")]
    rotary = [r for r in rotary if "Vision" not in r.__name__]
    return hf, rotary[0](hf)


@pytest.mark.oracle
@pytest.mark.parametrize("name", NAMES)
def test_frequencies_and_attention_factor_equal_transformers(name: str) -> None:
    config = load(name)
    _, module = _transformers_rotary(config)
    per = hf_rope_parameters(config)
    compared = 0
    for layer_type in per:
        theirs = getattr(module, f"{layer_type}_inv_freq", None)
        factor = getattr(module, f"{layer_type}_attention_scaling", None)
        if theirs is None:
            # one module for every layer (4.x's Gemma 3 builds its sliding layers' module apart: not this one)
            if per[layer_type] != per.get("full_attention", per[layer_type]):
                continue
            theirs, factor = module.inv_freq, module.attention_scaling
        compared += 1
        ours, ours_factor = rope_scaling_from_hf(config, layer_type).frequencies(
            hf_rotary_dim(config, layer_type), hf_rope_base(config, layer_type), None)
        assert ours.shape == theirs.shape, (layer_type, ours.shape, theirs.shape)
        torch.testing.assert_close(ours.double(), theirs.double(), rtol=1e-6, atol=0)
        assert ours_factor == pytest.approx(float(factor), rel=1e-6)
    assert compared


@pytest.mark.oracle
def test_phi3_su_config_is_read_as_4_57_reads_it() -> None:
    """Phi-3-mini-128k's first config names LongRoPE "su". transformers 4.57 reads it (Phi3Config renames it);
    transformers 5.15 raises KeyError on it (it renames "su" only after original_max_position_embeddings would
    have moved into the dict). The library reads it as 4.57 does and says so."""
    config = load("phi-3-mini-128k-instruct-su")
    scaling = rope_scaling_from_hf(config)
    assert scaling.name == "longrope" and scaling.original_max_len == 4096
    assert "5.15 refuses this spelling" in summarize_config(config).type_note
    transformers = pytest.importorskip("transformers")
    from transformers import Phi3Config

    fields = {k: v for k, v in config.items() if not k.startswith("_") and k != "model_type"}
    if int(transformers.__version__.split(".")[0]) >= 5:
        with pytest.raises(KeyError, match="original_max_position_embeddings"):
            Phi3Config(**fields)
    else:
        assert Phi3Config(**fields).rope_scaling["type"] == "longrope"


def test_qwen3_next_vllm_state_in_bf16_from_its_published_config() -> None:
    """Qwen3-Next's published config sets no mamba_ssm_dtype: vLLM pads its bf16 state into 544-token blocks,
    76.50 MiB a sequence in align mode (75.38 MiB before padding)."""
    import json

    from mlbook.analysis.production import vllm_hybrid_pages

    folder = os.environ.get("MLBOOK_REALCONFIGS")
    path = Path(folder or "/nonexistent") / "qwen3-next-80b-a3b-thinking.json"
    if not path.exists():
        pytest.skip("MLBOOK_REALCONFIGS does not hold qwen3-next-80b-a3b-thinking.json")
    pages = vllm_hybrid_pages(json.loads(path.read_text()))
    assert pages.block_size == 544
    assert pages.state_bytes() == pytest.approx(76.5 * 2**20)
    assert pages.unpadded_state_bytes() == pytest.approx(75.375 * 2**20)
