"""Tests for mlbook.transformer.multimodal: M-RoPE position ids and rotation against Hugging Face's
Qwen2-VL (`Qwen2VLModel.get_rope_index`, `apply_multimodal_rotary_pos_emb`), and the 2-D relative
property that ties it to Swin's bias table."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from mlbook.transformer.multimodal import (
    QWEN2_VL_SECTION,
    apply_mrope,
    check_section,
    mrope_angles,
    mrope_position_ids,
    rope_2d_position_ids,
    section_axes,
)
from mlbook.transformer.positional import RotaryEmbedding

transformers = pytest.importorskip("transformers")
from hf_versions import hf4_only  # noqa: E402
from transformers.models.qwen2_vl.modeling_qwen2_vl import (  # noqa: E402
    Qwen2VLModel,
    Qwen2VLRotaryEmbedding,
    apply_multimodal_rotary_pos_emb,
)

IMAGE, VIDEO, START = 151, 152, 150


def _config(section=(4, 6, 6)):
    return transformers.Qwen2VLConfig(
        vision_config={"spatial_merge_size": 2},
        text_config=dict(hidden_size=64, num_attention_heads=2, num_key_value_heads=2, rope_theta=10000.0,
                         rope_scaling={"type": "mrope", "mrope_section": list(section)}),
        image_token_id=IMAGE, video_token_id=VIDEO, vision_start_token_id=START,
    )


# text (with the vision-start token), an image of 4 x 6 patches merged to 2 x 3, text, a video of
# 2 frames of 2 x 2 patches merged to 1 x 1, text
IDS = [5, 6, 7, START] + [IMAGE] * 6 + [8, 9, START] + [VIDEO] * 2 + [1, 2, 3, 4]
LAYOUT = [4, (1, 2, 3), 3, (2, 1, 1), 4]


@hf4_only("Qwen2VLModel.get_rope_index without the mm_token_type_ids that transformers 5 requires")
def test_position_ids_equal_qwen2_vl_get_rope_index():
    cfg = _config()
    ref, delta = Qwen2VLModel.get_rope_index(SimpleNamespace(config=cfg), torch.tensor([IDS]),
                                             image_grid_thw=torch.tensor([[1, 4, 6]]),
                                             video_grid_thw=torch.tensor([[2, 2, 2]]))
    mine = mrope_position_ids(LAYOUT)
    assert torch.equal(mine, ref[:, 0])
    # the image of 6 tokens advances the text by max(t, h, w) = 3, not 6: Hugging Face's rope delta
    assert int(mine.max()) + 1 - len(IDS) == int(delta)


def test_rotation_equals_apply_multimodal_rotary_pos_emb():
    cfg = _config()
    ids = mrope_position_ids(LAYOUT)  # (3, T)
    x = torch.randn(1, 2, ids.shape[1], 32, generator=torch.Generator().manual_seed(0))
    cos, sin = Qwen2VLRotaryEmbedding(cfg.text_config)(x, ids[:, None, :])
    q, _ = apply_multimodal_rotary_pos_emb(x, x, cos, sin, [4, 6, 6])
    assert torch.allclose(apply_mrope(x, ids, (4, 6, 6)), q, atol=1e-5)
    # a different split rotates differently: the check can fail
    assert (apply_mrope(x, ids, (6, 6, 4)) - q).abs().max() > 1e-2


def test_text_only_is_plain_rope():
    ids = mrope_position_ids([9])
    assert torch.equal(ids, torch.arange(9).expand(3, 9))
    x = torch.randn(3, 9, 32, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(apply_mrope(x, ids, (4, 6, 6)), RotaryEmbedding(32).rotate(x), atol=1e-6)


def test_sections_and_axes():
    assert sum(QWEN2_VL_SECTION) == 64
    assert section_axes(QWEN2_VL_SECTION, 128).tolist() == [0] * 16 + [1] * 24 + [2] * 24
    with pytest.raises(ValueError, match="sums to"):
        check_section((16, 24, 23), 128)
    with pytest.raises(ValueError, match="three non-negative ints"):
        check_section((32, 32), 128)
    with pytest.raises(ValueError, match=r"\(3, T\)"):
        mrope_angles(torch.zeros(2, 4), 128)
    with pytest.raises(ValueError, match="layout\\[1\\]"):
        mrope_position_ids([3, (1, 0, 2)])


def test_2d_scores_depend_on_offset_only():
    """Within an image the score of two patches depends on (dh, dw) alone: Swin's table, by rotation."""
    ids = rope_2d_position_ids(6, 6)
    q, k = torch.randn(2, 64, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    sec = (0, 16, 16)
    Q = apply_mrope(q.expand(36, 64), ids, sec, 100.0)  # (36, 64) q at every patch
    K = apply_mrope(k.expand(36, 64), ids, sec, 100.0)
    s = (Q @ K.T).reshape(6, 6, 6, 6)  # s[r1, c1, r2, c2]
    assert torch.allclose(s[0, 0, 2, 3], s[3, 1, 5, 4], atol=1e-5)  # both offset (2, 3)
    assert torch.allclose(s[1, 4, 0, 2], s[4, 5, 3, 3], atol=1e-5)  # both offset (-1, -2)
    assert (s[0, 0, 2, 3] - s[0, 0, 3, 2]).abs() > 1e-3  # (2, 3) and (3, 2) differ: rows and columns are told apart
