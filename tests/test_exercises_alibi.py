"""check_alibi_key_bias names page 06's tensor-parallel bug: every rank computing alibi_slopes(H / ranks)."""

from __future__ import annotations

import pytest
import torch

from mlbook.exercises.alibi import check_alibi_key_bias
from mlbook.transformer.positional import alibi_slopes


def _per_rank(ranks: int):
    def fn(H: int, T_k: int) -> torch.Tensor:
        slopes = alibi_slopes(H // ranks).repeat(ranks)  # (H,) each rank's heads counted from 0
        return (slopes[:, None] * torch.arange(T_k, dtype=torch.float32))[None, :, None, :]  # (1, H, 1, T_k)
    return fn


@pytest.mark.parametrize("ranks", [2, 4])
def test_per_rank_slopes_are_named_as_the_tensor_parallel_bug(ranks, capsys):
    ok = check_alibi_key_bias(_per_rank(ranks))
    out = capsys.readouterr().out.strip()
    assert not ok and out.startswith("Not yet.") and out.count("\n") == 0
    assert "tensor-parallel bug" in out and f"{ranks} copies" in out, out
    assert "alibi_slopes(8)[r * " in out, out  # the fix: a slice of the full model's slopes
