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
    # time, height, width: one position each, so far apart that no pair's three angles (all under 2 pi) coincide
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
