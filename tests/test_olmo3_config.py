"""OLMo 3's 4.x-layout config: its YaRN belongs to the full-attention layers only.

Olmo3Config (transformers 5.15) moves a config.json's rope_scaling into rope_parameters["full_attention"]
and rotates the sliding layers at rope_theta without it. The values are Olmo-3-7B-Think's published
ones (YaRN factor 8 from 8,192, attention factor 0.1 ln 8 + 1); the layer count is cut to 8.
"""

from __future__ import annotations

import pytest
import torch

from mlbook.transformer.hf import hf_rope_base, hf_rotary_dim, rope_scaling_from_hf

transformers = pytest.importorskip("transformers")
from hf_versions import HF_MAJOR  # noqa: E402

OLMO3 = {"model_type": "olmo3", "num_hidden_layers": 8, "hidden_size": 4096, "num_attention_heads": 32,
         "num_key_value_heads": 32, "max_position_embeddings": 65536, "sliding_window": 4096,
         "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 2, "rope_theta": 500000.0,
         "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 8192,
                          "beta_fast": 32.0, "beta_slow": 1.0, "attention_factor": 1.2079441541679836}}


def test_the_sliding_layers_are_not_scaled() -> None:
    assert rope_scaling_from_hf(OLMO3, "full_attention").name == "yarn"
    assert rope_scaling_from_hf(OLMO3, "sliding_attention").name == "none"
    assert hf_rope_base(OLMO3, "sliding_attention") == hf_rope_base(OLMO3, "full_attention") == 500000.0


@pytest.mark.oracle
@pytest.mark.skipif(HF_MAJOR < 5, reason="reads transformers 5's per-layer-type buffers (full_attention_inv_freq)")
def test_frequencies_per_layer_type_equal_transformers() -> None:
    from transformers.models.olmo3.modeling_olmo3 import Olmo3RotaryEmbedding

    config = transformers.Olmo3Config(**{k: v for k, v in OLMO3.items() if k != "model_type"})
    module = Olmo3RotaryEmbedding(config)
    for layer_type in ("sliding_attention", "full_attention"):
        ours, factor = rope_scaling_from_hf(OLMO3, layer_type).frequencies(
            hf_rotary_dim(OLMO3, layer_type), hf_rope_base(OLMO3, layer_type), None)
        theirs = getattr(module, f"{layer_type}_inv_freq")
        torch.testing.assert_close(ours.double(), theirs.double(), rtol=1e-6, atol=0)
        assert factor == pytest.approx(float(getattr(module, f"{layer_type}_attention_scaling")), rel=1e-12)
