"""The shipped Qwen3.5-27B config (src/mlbook/data/configs/qwen3.5-27b.json), the one shipped config in
transformers 5's layout: it is the published config's text part, and its M-RoPE, which the library reads as
plain RoPE over the rotated channels, is that on text in transformers' own Qwen3.5 rotary module
(`transformers/models/qwen3_5/modeling_qwen3_5.py`, 5.15: `Qwen3_5TextRotaryEmbedding`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from mlbook.analysis.model_config import load_config
from mlbook.transformer.hf import hf_rope_base, hf_rope_parameters_for, hf_rotary_dim, rope_scaling_from_hf
from mlbook.transformer.multimodal import section_axes

NAME = "qwen3.5-27b"
PUBLISHED = Path(os.environ.get("MLBOOK_REALCONFIGS", Path(__file__).resolve().parents[2] / "shared" / "realconfigs"
                                / "configs")) / f"{NAME}.json"


@pytest.mark.skipif(not PUBLISHED.is_file(), reason=f"no published copy at {PUBLISHED} (test data outside the "
                                                    "repository; set MLBOOK_REALCONFIGS to its configs folder)")
def test_the_extract_is_the_published_text_config() -> None:
    """Every key of the text config as published, the wrapper's model_type and architectures; nothing else but the
    provenance fields (the vision config and the multimodal token ids are left out, and _notes says so)."""
    ours, published = load_config(NAME), json.loads(PUBLISHED.read_text())
    assert ours["text_config"] == published["text_config"]
    assert {k: ours[k] for k in ("model_type", "architectures")} == {k: published[k] for k in
                                                                     ("model_type", "architectures")}
    left_out = sorted(set(published) - set(ours))
    assert left_out and all(k in ours["_notes"] for k in ("vision_config", "token ids"))
    assert {k for k in ours if not k.startswith("_")} <= set(published)


def _rotary():
    """transformers' Qwen3.5 text config, built from the shipped text_config as from_pretrained builds it, and its
    rotary module."""
    transformers = pytest.importorskip("transformers")
    modeling = pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5",
                                   reason="Qwen3.5 is in transformers 5 only")
    text = load_config(NAME)["text_config"]
    hf = transformers.AutoConfig.for_model(text["model_type"], **{k: v for k, v in text.items() if k != "model_type"})
    return hf, modeling.Qwen3_5TextRotaryEmbedding(hf)


def test_text_positions_make_m_rope_plain_rope_over_the_rotated_channels() -> None:
    """A text token's position ids are one row (Qwen3_5TextModel expands it to the three M-RoPE streams): cos and
    sin then equal 1-D RoPE over the 64 rotated channels at the library's frequencies, base 10,000,000."""
    config = load_config(NAME)
    hf, module = _rotary()
    d, base = hf_rotary_dim(config), hf_rope_base(config)
    assert (d, base) == (int(hf.head_dim * hf.rope_parameters["partial_rotary_factor"]),
                         hf.rope_parameters["rope_theta"])
    inv_freq, factor = rope_scaling_from_hf(config).frequencies(d, base, None)  # (d/2,)
    positions = torch.tensor([[0, 1, 7, 4096, 262143]])  # (1, T)
    x = torch.zeros(1, positions.shape[1], d)
    torch.testing.assert_close(inv_freq.double(), module.inv_freq.double(), rtol=1e-6, atol=0)
    cos, sin = module(x, positions)  # (1, T, d), transformers' half layout: [angles, angles]
    # 1-D RoPE at those frequencies, the angles formed in float32 as transformers forms them (a 1e-7 difference in
    # a frequency is already 0.03 rad at 262,143 tokens, so the rotation is compared at its own frequencies)
    angles = positions[0, :, None].float() * module.inv_freq  # (T, d/2)
    plain = torch.cat([angles, angles], dim=-1)  # (T, d)
    torch.testing.assert_close(cos[0], factor * plain.cos(), rtol=0, atol=1e-6)
    torch.testing.assert_close(sin[0], factor * plain.sin(), rtol=0, atol=1e-6)


def test_unequal_streams_turn_the_pairs_interleaved() -> None:
    """An image patch's three position ids differ: then pair i turns with time, height or width in the interleaved
    order T H W T H W ... T H of mrope_section [11, 11, 10], not in Qwen2-VL's blocks, which
    `mlbook.transformer.multimodal` builds; on text the two orders give the same rotation (test above)."""
    config = load_config(NAME)
    section = hf_rope_parameters_for(config)["mrope_section"]
    _, module = _rotary()
    pairs = sum(section)
    # time, height, width: one position each; every pair's three angles differ modulo 2 pi (pair 0 turns 3, 5 and 7
    # rad, 7 being 0.72 past a turn), so the angle the module returns names its stream (the comparison below wraps)
    streams = torch.tensor([3, 5, 7])  # (3,)
    cos, sin = module(torch.zeros(1, 1, 2 * pairs), streams[:, None, None].expand(3, 1, 1))  # (1, 1, 2 pairs)
    angle = torch.atan2(sin[0, 0, :pairs].double(), cos[0, 0, :pairs].double())  # (pairs,) in (-pi, pi]
    candidates = streams.double()[:, None] * module.inv_freq.double()  # (3, pairs): each stream's angle
    axis = torch.remainder(candidates - angle + torch.pi, 2 * torch.pi).sub(torch.pi).abs().argmin(0)  # (pairs,)
    expected = [1 if i % 3 == 1 and i < 3 * section[1] else 2 if i % 3 == 2 and i < 3 * section[2] else 0
                for i in range(pairs)]
    assert axis.tolist() == expected
    assert torch.bincount(axis, minlength=3).tolist() == list(section)
    assert axis.tolist() != section_axes(section, 2 * pairs).tolist()  # the blocked order differs


def _model():
    """A one-layer Qwen3_5Model on the meta device: get_rope_index reads only its config (the vision config's
    spatial_merge_size, 2 by default), so no weights are made."""
    transformers = pytest.importorskip("transformers")
    modeling = pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5",
                                   reason="Qwen3.5 is in transformers 5 only")
    with torch.device("meta"):
        return modeling.Qwen3_5Model(transformers.Qwen3_5Config(text_config={"num_hidden_layers": 1,
                                                                             "layer_types": ["full_attention"]}))


def test_the_models_own_text_positions_through_the_three_stream_path_are_plain_rope() -> None:
    """Qwen3_5Model.get_rope_index gives text (3, B, T) position ids, one row per stream, all equal: through the
    module's three-stream path, cos and sin are 1-D RoPE, at frequencies equal to the library's."""
    config = load_config(NAME)
    _, module = _rotary()
    ids = torch.zeros(1, 4097, dtype=torch.long)
    positions, delta = _model().get_rope_index(ids, torch.zeros_like(ids))  # (3, 1, T)
    assert positions.shape == (3, 1, 4097) and int(delta) == 0
    assert torch.equal(positions[0], positions[1]) and torch.equal(positions[0], positions[2])
    d = hf_rotary_dim(config)
    inv_freq, _ = rope_scaling_from_hf(config).frequencies(d, hf_rope_base(config), None)
    torch.testing.assert_close(inv_freq.double(), module.inv_freq.double(), rtol=1e-6, atol=0)
    cos, sin = module(torch.zeros(1, 1, d), positions)  # (1, T, d)
    # 1-D RoPE, each pair at position p on any stream, the angles formed at the module's own float32 frequencies
    angles = positions[0, 0, :, None].float() * module.inv_freq  # (T, d/2)
    torch.testing.assert_close(cos[0], torch.cat([angles, angles], -1).cos(), rtol=0, atol=1e-6)
    torch.testing.assert_close(sin[0], torch.cat([angles, angles], -1).sin(), rtol=0, atol=1e-6)


def test_image_tokens_turn_interleaved_and_the_text_after_them_sits_at_compressed_positions() -> None:
    """At an image's tokens the three streams differ and the module follows T H W T H W ... T H, not Qwen2-VL's
    blocks; the text after an 8 x 8-patch image (16 tokens after the 2 x 2 merge) resumes 4 positions on, not 16."""
    config = load_config(NAME)
    section = hf_rope_parameters_for(config)["mrope_section"]
    _, module = _rotary()
    kinds = torch.tensor([[0] * 4 + [1] * 16 + [0] * 3])  # text, image, text
    positions, _ = _model().get_rope_index(torch.zeros_like(kinds), kinds, image_grid_thw=torch.tensor([[1, 8, 8]]))
    assert positions[:, 0, 20:].tolist() == [[8, 9, 10]] * 3  # 4 + max(8, 8) / 2, not 4 + 16
    assert not torch.equal(positions[1, 0, 4:20], positions[2, 0, 4:20])  # height and width differ on the image
    d = hf_rotary_dim(config)
    cos, sin = module(torch.zeros(1, 1, d), positions)  # (1, T, d)
    interleaved = torch.tensor([1 if i % 3 == 1 and i < 3 * section[1] else 2 if i % 3 == 2 and i < 3 * section[2]
                                else 0 for i in range(d // 2)])

    def expected(axes: torch.Tensor) -> torch.Tensor:
        angles = positions[axes, 0, :].T.float() * module.inv_freq  # (T, d/2): pair i at its stream's position
        return torch.cat([angles, angles], -1)

    torch.testing.assert_close(cos[0], expected(interleaved).cos(), rtol=0, atol=1e-6)
    torch.testing.assert_close(sin[0], expected(interleaved).sin(), rtol=0, atol=1e-6)
    assert (cos[0] - expected(section_axes(section, d)).cos()).abs().max() > 0.1  # the blocked order differs


RECIPE = {"mrope_interleaved": True, "mrope_section": [11, 11, 10], "rope_type": "yarn", "rope_theta": 10000000,
          "partial_rotary_factor": 0.25, "factor": 4.0, "original_max_position_embeddings": 262144}  # Qwen's card


def test_the_cards_yarn_recipe_reads_as_transformers_builds_it_and_scales_only_the_rotated_channels() -> None:
    """Qwen's long-context recipe (YaRN factor 4 from 262,144, every shipped key kept) nested under text_config:
    serving_override merges it into the text config, and the library's frequencies and attention factor equal
    transformers' Qwen3.5 rotary module's; apply_rotary_pos_emb puts that factor on the 64 rotated channels of each
    256-channel query and key only."""
    transformers = pytest.importorskip("transformers")
    modeling = pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5",
                                   reason="Qwen3.5 is in transformers 5 only")
    from mlbook.analysis.model_config import serving_override
    from mlbook.transformer.rope_scaling import yarn_attention_factor

    served, changes = serving_override(load_config(NAME), rope_scaling=RECIPE, max_model_len=1010000,
                                       allow_long_max_model_len=True)  # the card's VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
    assert "rope_parameters" not in served and served["text_config"]["rope_parameters"] == RECIPE
    assert changes[0].startswith("text_config.rope_parameters")
    text = served["text_config"]
    hf = transformers.AutoConfig.for_model(text["model_type"], **{k: v for k, v in text.items() if k != "model_type"})
    module = modeling.Qwen3_5TextRotaryEmbedding(hf)
    d, head = hf_rotary_dim(served), text["head_dim"]
    inv_freq, factor = rope_scaling_from_hf(served).frequencies(d, hf_rope_base(served), None)
    torch.testing.assert_close(inv_freq.double(), module.inv_freq.double(), rtol=1e-6, atol=0)
    assert factor == pytest.approx(module.attention_scaling) == pytest.approx(yarn_attention_factor(4.0))
    positions = torch.tensor([[0]])  # angle 0: cos = the factor, sin = 0
    cos, sin = module(torch.zeros(1, 1, d), positions)
    q = torch.ones(1, 1, 1, head)  # (B, H, T, head_dim)
    q_rot, _ = modeling.apply_rotary_pos_emb(q, q, cos, sin)
    torch.testing.assert_close(q_rot[..., :d], torch.full((1, 1, 1, d), factor), rtol=1e-6, atol=0)
    torch.testing.assert_close(q_rot[..., d:], torch.ones(1, 1, 1, head - d))  # the other 192 pass unscaled


@pytest.mark.parametrize("flag", [False, None])
def test_transformers_interleaves_whatever_mrope_interleaved_says(flag: bool | None) -> None:
    """The Qwen3.5 model code never reads mrope_interleaved: with it false, or absent, the module's cos and sin at
    unequal streams are those of the shipped config (interleaved). vLLM's get_rope reads it (False when absent), which
    is why the summary names both orders."""
    transformers = pytest.importorskip("transformers")
    modeling = pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5",
                                   reason="Qwen3.5 is in transformers 5 only")
    text = load_config(NAME)["text_config"]
    rope = {k: v for k, v in text["rope_parameters"].items() if k != "mrope_interleaved"}
    if flag is not None:
        rope["mrope_interleaved"] = flag
    hf = transformers.AutoConfig.for_model(text["model_type"], **{k: v for k, v in text.items()
                                                                  if k not in ("model_type", "rope_parameters")},
                                           rope_parameters=rope)
    _, shipped = _rotary()
    positions = torch.tensor([3, 5, 7])[:, None, None]  # (3, 1, 1): time, height, width differ
    x = torch.zeros(1, 1, hf_rotary_dim(load_config(NAME)))
    torch.testing.assert_close(modeling.Qwen3_5TextRotaryEmbedding(hf)(x, positions), shipped(x, positions), rtol=0,
                               atol=0)
