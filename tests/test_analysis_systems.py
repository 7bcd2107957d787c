"""Tests for mlbook.analysis.systems: cost counts, bias memory, the context-extension procedure.

Oracles: torch's FlopCounterMode on a real attention layer (the 8BTd^2 of the projections and
the 4BT^2d of scores and mixing), a dispatch-mode counter of the elementwise operations
apply_rotary really runs (the 6BTd of RoPE) and the nbytes of the bias tensors the library builds.
KV-cache sizes are tested in tests/test_analysis_production.py.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

import mlbook.transformer.positional as P
from mlbook.analysis import systems as S
from mlbook.transformer.attention import MultiHeadAttention


# ---------------------------------------------------------------------------
# FLOPs: attention against each scheme
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("B,T,d,H", [(1, 16, 32, 4), (2, 24, 64, 8)])
def test_attention_flops_match_torch_flop_counter(B: int, T: int, d: int, H: int) -> None:
    layer = MultiHeadAttention(d, H, causal=False)
    x = torch.randn(B, T, d)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        layer(x, return_weights=True)  # the readable path: q k^T and A v as batched matmuls torch can count
    counts = {str(k): v for k, v in counter.get_flop_counts()["Global"].items()}
    ours = S.attention_flops(B, T, d, H)
    assert ours.projections == 8 * B * T * d * d == counts["aten.mm"]  # W_q, W_k, W_v, W_o
    assert ours.scores + ours.mix == 4 * B * T * T * d == counts["aten.bmm"]  # q k^T and A v, every pair
    causal = S.attention_flops(B, T, d, H, causal=True)
    assert causal.scores == 2 * B * d * T * (T + 1) / 2


class _ElementwiseCounter(TorchDispatchMode):
    """Counts output elements of the arithmetic aten ops run inside the block, by op."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name in ("mul", "add", "sub", "neg") and isinstance(out, torch.Tensor):
            self.counts[name] = self.counts.get(name, 0) + out.numel()
        return out


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_rope_flops_are_three_per_element_of_q_and_k(pairing: str) -> None:
    B, H, T, d_head = 2, 4, 8, 16
    d = H * d_head
    q, k = torch.randn(B, H, T, d_head), torch.randn(B, H, T, d_head)
    cos, sin = P.RotaryEmbedding(d_head, pairing=pairing)(T)
    counter = _ElementwiseCounter()
    with counter:  # apply_rotary is the readable expression; the fused kernel is fused.apply_rotary_fused
        P.apply_rotary(q, cos, sin, pairing)
        P.apply_rotary(k, cos, sin, pairing)
    cost = S.position_cost("rope", B, T, d, H)
    assert counter.counts["mul"] + counter.counts["add"] == cost.flops == 6 * B * T * d
    assert counter.counts["neg"] == B * T * d  # plus a sign flip on half the elements of q and k, not counted
    gqa = S.position_cost("rope", B, T, d, H, n_kv_heads=1)
    assert gqa.flops == 3 * B * T * (d + d_head) and gqa.formula == "3 B T (d + d_kv)"


def test_bias_bytes_are_the_tensors_the_library_builds() -> None:
    B, H, T, d = 3, 4, 20, 32
    t5 = S.position_cost("t5", B, T, d, H)
    alibi = S.position_cost("alibi", B, T, d, H)
    assert t5.materialised_bytes == P.RelativePositionBias(H)(T, T).float().nbytes
    assert alibi.materialised_bytes == P.alibi_bias(H, T, T).nbytes
    assert t5.traffic_bytes == B * H * T * T * 4 and t5.flops == B * H * T * T
    fused = S.position_cost("alibi_fused", B, T, d, H)
    assert fused.materialised_bytes == fused.traffic_bytes == 0 and fused.flops == 3 * B * H * T * T
    absolute = S.position_cost("sinusoidal", B, T, d, H)
    assert absolute.per == "model" and absolute.flops == B * T * d
    # RoPE against the projections: 6BTd / 8BTd^2 = 3 / (4d)
    rope = S.position_cost("rope", B, T, d, H)
    assert rope.flops / S.attention_flops(B, T, d, H).projections == pytest.approx(3 / (4 * d))


def test_bias_memory_is_held_once_and_read_by_every_layer() -> None:
    H, T, n_layers, B = 4, 20, 6, 3
    mem = S.bias_memory(H, T, n_layers, B=B, bytes_per_value=2.0)
    # held: the bf16 tensor the library builds, once; traffic: the per-layer reads of position_cost, every layer
    assert mem.held == P.RelativePositionBias(H)(T, T).to(torch.bfloat16).nbytes == H * T * T * 2
    per_layer = S.position_cost("t5", B, T, 8 * H, H, bytes_per_value=2.0).traffic_bytes
    assert mem.traffic == n_layers * per_layer == n_layers * B * H * T * T * 2
    big = S.bias_memory(32, 8192, 32)  # the 7B-class prefill both section 4 and section 6 quote
    assert big.held == 4 * 2**30 and big.traffic == 128 * 2**30
    assert "4 GiB (4.29 GB) held once per forward pass" in repr(big) and "each of 32 layers: 128 GiB" in repr(big)
    with pytest.raises(ValueError, match="n_layers must be >= 1"):
        S.bias_memory(32, 8192, 0)


def test_cost_bad_input() -> None:
    with pytest.raises(ValueError, match="unknown scheme 'rotary'; valid values are 'sinusoidal'"):
        S.position_cost("rotary", 1, 8, 32, 4)
    with pytest.raises(ValueError, match=r"d_model \(30\) must be divisible by n_heads \(4\)"):
        S.attention_flops(1, 8, 30, 4)
    with pytest.raises(ValueError, match=r"n_heads \(4\) must be divisible by n_kv_heads \(3\)"):
        S.position_cost("rope", 1, 8, 32, 4, n_kv_heads=3)


# ---------------------------------------------------------------------------
# The context-extension decision procedure
# ---------------------------------------------------------------------------


def test_extension_plan_follows_the_procedure() -> None:
    assert S.extension_plan(8192, 4096, can_finetune=False).method == "no change"
    ntk = S.extension_plan(4096, 8192, can_finetune=False)
    assert ntk.factor == 2 and ntk.method.startswith("static NTK-aware scaling")
    stop = S.extension_plan(4096, 16384, can_finetune=False)
    assert stop.method.startswith("no reliable zero-shot option")
    yarn = S.extension_plan(4096, 32768, can_finetune=True, local_resolution_matters=True)
    assert yarn.method == "YaRN plus fine-tuning" and not any("long" in r for r in yarn.reasons)
    pi = S.extension_plan(4096, 32768, can_finetune=True, local_resolution_matters=False)
    assert pi.method.startswith("position interpolation")
    assert any("ABF" in r for r in yarn.reasons + pi.reasons)  # base raising, the other route with a budget
    far = S.extension_plan(4096, 131072, can_finetune=True)
    assert far.factor == 32 and any("documents close to 131,072 tokens" in r for r in far.reasons)
    assert far.method.startswith("raise the RoPE base (ABF)") and "continue pretraining" in far.method
    assert any("Llama 3.1" in r and "Qwen2" in r for r in far.reasons)
    for plan in (ntk, stop, yarn, pi, far):
        assert "retrieval probes" in plan.evaluate and "not perplexity" in plan.evaluate
        assert "short-context benchmarks" in plan.evaluate
    assert "s = 32" in repr(far)
    assert any("about 2x" in r and "raised base" in r and "4x" in r for r in stop.reasons)  # 2x and 4x reconciled
    qwen = S.extension_plan(32768, 131072, can_finetune=False, base_raised_in_pretraining=True)
    assert qwen.factor == 4 and qwen.method.startswith("static YaRN") and "without fine-tuning" in qwen.method
    assert any("Qwen2.5 and Qwen3" in r for r in qwen.reasons)
    beyond = S.extension_plan(32768, 262144, can_finetune=False, base_raised_in_pretraining=True)
    assert beyond.method.startswith("no reliable zero-shot option")
    assert S.extension_plan(32768, 131072, can_finetune=False).method.startswith("no reliable zero-shot option")
    # the dynamic form is never recommended: it leaves cached keys stale
    assert "dynamic" not in ntk.method and any("not the dynamic form" in r for r in ntk.reasons)
    # a model pretrained long with a raised base gets static YaRN at any factor up to 4, budget or not
    small = S.extension_plan(32768, 65536, can_finetune=False, base_raised_in_pretraining=True)
    assert small.method.startswith("static YaRN")
    tuned = S.extension_plan(32768, 131072, can_finetune=True, base_raised_in_pretraining=True)
    assert tuned.method.startswith("static YaRN") and any("fine-tune is optional" in r for r in tuned.reasons)
    with pytest.raises(TypeError, match="can_finetune and local_resolution_matters must be True or False"):
        S.extension_plan(4096, 8192, can_finetune="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="base_raised_in_pretraining must be True or False"):
        S.extension_plan(4096, 8192, can_finetune=False, base_raised_in_pretraining=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="target_len must be >= 1"):
        S.extension_plan(4096, 0, can_finetune=True)


# ---------------------------------------------------------------------------
# RoPE in a serving engine
# ---------------------------------------------------------------------------


def test_cos_sin_cache_bytes_counts_one_row_per_position() -> None:
    # the oracle: the table itself, built as vLLM lays it out (cos then sin, rotary_dim / 2 each)
    T, r = 37, 16
    inv_freq = 10000.0 ** (-torch.arange(0, r, 2, dtype=torch.float64) / r)
    angles = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)  # (T, r/2)
    table = torch.cat([angles.cos(), angles.sin()], dim=-1).to(torch.bfloat16)  # (T, r)
    assert S.cos_sin_cache_bytes(T, r, 2) == table.numel() * table.element_size()
    assert S.cos_sin_cache_bytes(T, r, 4) == 2 * S.cos_sin_cache_bytes(T, r, 2)
    with pytest.raises(ValueError, match="rotary_dim must be even"):
        S.cos_sin_cache_bytes(8, 7)
    with pytest.raises(ValueError, match="max_positions must be >= 1"):
        S.cos_sin_cache_bytes(0, 8)


def test_rope_serving_cost_counts_the_bytes_it_names() -> None:
    B, T_ctx, H, H_kv, d = 3, 50, 8, 2, 16
    cost = S.rope_serving_cost(B, T_ctx, H, H_kv, d, bytes_per_value=2.0, table_bytes_per_value=4.0, bandwidth=1e9)
    q = torch.zeros(B, H, d, dtype=torch.bfloat16)  # the new tokens' q, k, read and written back
    k = torch.zeros(B, H_kv, d, dtype=torch.bfloat16)
    rows = torch.zeros(B, d, dtype=torch.float32)  # one float32 cos/sin row per token
    cache = torch.zeros(2, T_ctx, H_kv, d, dtype=torch.bfloat16)  # keys and values each new token reads
    qk = (q.numel() + k.numel()) * q.element_size()
    assert cost.rope_bytes == 2 * qk + rows.numel() * rows.element_size()
    assert cost.kv_read_bytes == B * cache.numel() * cache.element_size()
    assert cost.rope_seconds == pytest.approx(cost.rope_bytes / 1e9)
    partial = S.rope_serving_cost(B, T_ctx, H, H_kv, d, rotary_dim=4)  # only the rotated channels move
    assert partial.rope_bytes < cost.rope_bytes and partial.kv_read_bytes == cost.kv_read_bytes
    # at long context the cache read dwarfs RoPE by about context * H_kv / (H + H_kv)
    long = S.rope_serving_cost(1, 131072, 32, 8, 128)
    assert long.rope_bytes / long.kv_read_bytes < 1e-4
    assert "RoPE / KV read" in repr(long)
    assert long.rope_seconds < S.LAUNCH_SECONDS and "launch-bound" in repr(long)  # decode: under one launch
    assert "launch-bound" not in repr(S.rope_serving_cost(8192, 1024, 32, 8, 128))  # a large prefill batch
    with pytest.raises(ValueError, match=r"n_heads \(8\) must be divisible by n_kv_heads \(3\)"):
        S.rope_serving_cost(1, 8, 8, 3, 16)
    with pytest.raises(ValueError, match="rotary_dim must be even and at most head_dim"):
        S.rope_serving_cost(1, 8, 8, 2, 16, rotary_dim=32)
