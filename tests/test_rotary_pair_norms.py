"""experiments.common.rotary_pair_norms: the one per-pair norm the tiny-model and real-model probes share."""

from __future__ import annotations

import pytest
import torch

from mlbook.experiments.common import rotary_pair_norms
from mlbook.transformer.positional import RotaryEmbedding, apply_rotary


def test_pair_norms_are_the_half_layout_pair_lengths_and_survive_rotation() -> None:
    x = torch.randn(2, 3, 5, 8, dtype=torch.float64)  # (B, H, T, d_head)
    r = 6
    want = torch.complex(x[..., :3], x[..., 3:6]).abs()  # (B, H, T, 3)
    torch.testing.assert_close(rotary_pair_norms(x, r), want)
    cos, sin = RotaryEmbedding(8).forward(5)
    rotated = apply_rotary(x, cos.double(), sin.double())
    torch.testing.assert_close(rotary_pair_norms(rotated, 8), rotary_pair_norms(x, 8))


@pytest.mark.parametrize("r", [0, 3, 10])
def test_bad_rotary_dim_is_named(r: int) -> None:
    with pytest.raises(ValueError, match="rotary_dim"):
        rotary_pair_norms(torch.zeros(4, 8), r)
