"""Bad input fails early at the public entry point with a ValueError/TypeError that names the
argument and says what is allowed, never with a shape error deep inside torch."""

from __future__ import annotations

import importlib.util
import json
import math
import re

import pytest
import torch

from mlbook.transformer.models import GPTConfig
from mlbook.transformer.positional import (
    ROPE_PAIRINGS,
    LearnedPositionalEmbedding,
    RelativePositionBias,
    RelativePositionBias2D,
    RotaryEmbedding,
    alibi_bias,
    alibi_slopes,
    apply_rotary,
    convert_rotary_weights,
    relative_position_bucket,
    sinusoidal_positional_encoding,
)
from mlbook.transformer.rope_scaling import ROPE_SCALINGS, RopeScaling


# --- odd or non-integer dimensions -------------------------------------------------------


@pytest.mark.parametrize("d_head", [3, 63])
def test_odd_d_head(d_head: int) -> None:
    with pytest.raises(ValueError, match=rf"d_head must be even .*got {d_head}"):
        RotaryEmbedding(d_head)
    with pytest.raises(ValueError, match=rf"d_head must be even .*got {d_head}"):
        RopeScaling().frequencies(d_head)


@pytest.mark.parametrize("d_head", [0, 1])
def test_d_head_below_one_pair(d_head: int) -> None:
    with pytest.raises(ValueError, match=rf"d_head must be >= 2, got {d_head}"):
        RotaryEmbedding(d_head)


@pytest.mark.parametrize("d_model", [3, 17])
def test_odd_sinusoidal_d_model(d_model: int) -> None:
    with pytest.raises(ValueError, match=rf"d_model must be even .*got {d_model}"):
        sinusoidal_positional_encoding(8, d_model)


def test_non_integer_d_head() -> None:
    with pytest.raises(TypeError, match=r"d_head must be an int, got float"):
        RotaryEmbedding(64.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"d_model must be an int, got bool"):
        sinusoidal_positional_encoding(8, True)  # type: ignore[arg-type]


# --- RoPE scaling options ----------------------------------------------------------------


@pytest.mark.parametrize("scaling", [s for s in ROPE_SCALINGS if s != "none"])
def test_factor_below_one_with_a_scaling(scaling: str) -> None:
    with pytest.raises(ValueError, match=rf"factor must be >= 1 with scaling='{scaling}'.*got 0.5"):
        RopeScaling(scaling, factor=0.5, original_max_len=2048)


@pytest.mark.parametrize("factor", [0.0, -2.0, float("nan"), float("inf")])
def test_factor_not_positive_finite(factor: float) -> None:
    with pytest.raises(ValueError, match=r"factor must be a finite number > 0"):
        RopeScaling("linear", factor=factor)


def test_unknown_scaling_lists_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown scaling 'ntk-aware'; valid values are") as info:
        RopeScaling("ntk-aware")
    for name in ROPE_SCALINGS:
        assert repr(name) in str(info.value)
    with pytest.raises(ValueError, match=r"unknown scaling 'su'"):  # Phi-3's old name for longrope
        GPTConfig(rope={"scaling": "su"})


def test_scaling_parameters_without_their_scaling_are_errors() -> None:
    with pytest.raises(ValueError, match=r"factor=4 was given with scaling='none', which scales nothing"):
        RopeScaling(factor=4.0)
    with pytest.raises(ValueError, match=r"factor=4 was given with scaling='none'"):
        GPTConfig(rope={"factor": 4.0})
    with pytest.raises(ValueError, match=r"original_max_len=2048 was given, but scaling='linear' does not use it "
                                         r"\(it takes factor\)"):
        RopeScaling("linear", factor=2.0, original_max_len=2048)
    with pytest.raises(ValueError, match=r"beta_fast=4.0 was given, but scaling='llama3' does not use it"):
        RopeScaling("llama3", factor=8.0, original_max_len=8192, beta_fast=4.0)
    with pytest.raises(ValueError, match=r"unknown rope option 'theta'; valid values are 'base', 'pairing', 'partial_rotary_factor', 'drop_lowest', 'scaling'"):
        GPTConfig(rope={"theta": 500000.0})


def test_scaling_must_be_a_rope_scaling_object() -> None:
    with pytest.raises(TypeError, match=r"rope_scaling must be a RopeScaling .*got str \('yarn'\)"):
        RotaryEmbedding(64, 10000.0, "yarn")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"original_max_len must be an int, got float"):
        RopeScaling("yarn", 4.0, original_max_len=2048.0)  # type: ignore[arg-type]


def test_unknown_pairing_lists_valid_ones() -> None:
    for call in (
        lambda: RotaryEmbedding(64, pairing="adjacent"),
        lambda: apply_rotary(torch.zeros(4, 8), torch.zeros(4, 8), torch.zeros(4, 8), pairing="adjacent"),
    ):
        with pytest.raises(ValueError, match=r"unknown pairing 'adjacent'; valid values are") as info:
            call()
        for name in ROPE_PAIRINGS:
            assert repr(name) in str(info.value)
    with pytest.raises(ValueError, match=r"unknown to 'neox'; valid values are 'half', 'interleaved'"):
        convert_rotary_weights(torch.zeros(8, 4), 1, "neox")


@pytest.mark.parametrize("scaling", ["yarn", "dynamic", "llama3"])
def test_scaling_needs_original_max_len(scaling: str) -> None:
    with pytest.raises(ValueError, match=rf"scaling='{scaling}' needs original_max_len"):
        RopeScaling(scaling, factor=4.0)
    with pytest.raises(ValueError, match=r"original_max_len must be >= 1, got 0"):
        RopeScaling(scaling, factor=4.0, original_max_len=0)


def test_yarn_and_llama3_band_order() -> None:
    with pytest.raises(ValueError, match=r"beta_fast \(1.0\) must be at least beta_slow \(32.0\)"):
        RopeScaling("yarn", factor=4.0, original_max_len=2048, beta_fast=1.0, beta_slow=32.0)
    with pytest.raises(ValueError, match=r"high_freq_factor \(1.0\) must be at least low_freq_factor \(4.0\)"):
        RopeScaling("llama3", factor=8.0, original_max_len=2048, low_freq_factor=4.0, high_freq_factor=1.0)
    # equal factors are allowed: a sharp switch, as Llama 4 Scout ships
    RopeScaling("llama3", factor=16.0, original_max_len=8192, low_freq_factor=1.0, high_freq_factor=1.0)


def test_base_must_exceed_one() -> None:
    with pytest.raises(ValueError, match=r"base must be a finite number > 1.0, got 1.0"):
        RotaryEmbedding(64, base=1.0)


def test_rotate_shape_mismatch_is_reported_early() -> None:
    rope = RotaryEmbedding(16)
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., T, d_head=16\), got \(2, 5, 8\)"):
        rope.rotate(torch.zeros(2, 5, 8))
    cos, sin = rope(5)
    with pytest.raises(ValueError, match=r"x must end in \(T, d_head\) = \(5, 16\)"):
        apply_rotary(torch.zeros(2, 6, 16), cos, sin)


def test_convert_rotary_weights_rows() -> None:
    with pytest.raises(ValueError, match=r"weight has 12 output rows, which is not n_heads \(8\) times an even d_head"):
        convert_rotary_weights(torch.zeros(12, 4), 8, "interleaved")
    with pytest.raises(TypeError, match=r"weight must be a torch.Tensor"):
        convert_rotary_weights([[0.0]], 1, "half")  # type: ignore[arg-type]


# --- learned table past T_max ------------------------------------------------------------


def test_learned_positions_cannot_extrapolate() -> None:
    emb = LearnedPositionalEmbedding(16, 8)
    emb(16)  # exactly T_max is fine
    emb(1, offset=15)
    with pytest.raises(ValueError, match=r"learned positions cannot extrapolate.*T_max = 16"):
        emb(17)
    with pytest.raises(ValueError, match=r"learned positions cannot extrapolate: positions 14\.\.16.*T_max = 16"):
        emb(3, offset=14)
    with pytest.raises(ValueError, match=r"offset must be >= 0, got -1"):
        emb(2, offset=-1)


# --- ALiBi ---------------------------------------------------------------------------------


def test_alibi_t_q_greater_than_t_k() -> None:
    with pytest.raises(ValueError, match=r"T_q \(5\) must be <= T_k \(3\)"):
        alibi_bias(8, 5, 3)


@pytest.mark.parametrize("n_heads", [0, -4])
def test_n_heads_below_one(n_heads: int) -> None:
    for call in (
        lambda: alibi_slopes(n_heads),
        lambda: alibi_bias(n_heads, 2, 2),
        lambda: RelativePositionBias(n_heads),
        lambda: RelativePositionBias2D(7, n_heads),
    ):
        with pytest.raises(ValueError, match=rf"n_heads must be >= 1, got {n_heads}"):
            call()
    with pytest.raises(TypeError, match=r"n_heads must be an int, got float"):
        alibi_slopes(8.0)  # type: ignore[arg-type]


# --- T5 buckets ------------------------------------------------------------------------------


@pytest.mark.parametrize("num_buckets,bidirectional", [(1, True), (2, True), (3, True), (1, False)])
def test_too_few_buckets(num_buckets: int, bidirectional: bool) -> None:
    need = 4 if bidirectional else 2
    with pytest.raises(ValueError, match=rf"num_buckets={num_buckets} is too few: need at least {need}"):
        relative_position_bucket(torch.arange(-3, 4), bidirectional, num_buckets, 128)
    with pytest.raises(ValueError, match=rf"num_buckets={num_buckets} is too few"):
        RelativePositionBias(4, num_buckets=num_buckets, bidirectional=bidirectional)


@pytest.mark.parametrize("num_buckets,bidirectional,max_distance", [(32, True, 8), (32, True, 2), (32, False, 16)])
def test_max_distance_not_above_exact_range(num_buckets: int, bidirectional: bool, max_distance: int) -> None:
    exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
    pattern = rf"max_distance must be greater than the exact range \({exact} = .*got {max_distance}"
    with pytest.raises(ValueError, match=pattern):
        relative_position_bucket(torch.arange(-3, 4), bidirectional, num_buckets, max_distance)
    with pytest.raises(ValueError, match=pattern):
        RelativePositionBias(4, num_buckets, max_distance, bidirectional)
    relative_position_bucket(torch.arange(-3, 4), bidirectional, num_buckets, exact + 1)  # the smallest allowed


def test_relative_position_must_be_an_integer_tensor() -> None:
    with pytest.raises(TypeError, match=r"relative_position must hold integers, got dtype torch.float32"):
        relative_position_bucket(torch.arange(-3.0, 4.0))
    with pytest.raises(TypeError, match=r"relative_position must be a torch.Tensor, got list"):
        relative_position_bucket([-1, 0, 1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"relative_position must hold integers, got dtype torch.bool"):
        relative_position_bucket(torch.tensor([True, False]))  # would silently be offsets 1 and 0


def test_relative_bias_t_q_greater_than_t_k() -> None:
    rpb = RelativePositionBias(2)
    with pytest.raises(ValueError, match=r"T_q \(6\) > T_k \(4\): pass query_offset"):
        rpb(6, 4)


def test_window_below_one() -> None:
    with pytest.raises(ValueError, match=r"window must be >= 1, got 0"):
        RelativePositionBias2D(0, 4)


# --- KV cache past its capacity (needs cache.py) ---------------------------------------------


@pytest.mark.skipif(importlib.util.find_spec("mlbook.transformer.cache") is None, reason="mlbook.transformer.cache not written yet")
def test_kv_cache_cannot_grow_past_capacity() -> None:
    from mlbook.transformer.cache import KVCache

    cache = KVCache(8)
    k = torch.zeros(1, 2, 6, 4)  # (B, H, T, d_head)
    cache.update(k, k)
    cache.update(k[:, :, :2], k[:, :, :2])  # exactly at capacity is fine
    with pytest.raises(ValueError, match=r"capacity") as info:
        cache.update(k[:, :, :1], k[:, :, :1])
    assert re.search(r"\b8\b", str(info.value)), f"the message should give the capacity (8): {info.value}"
    with pytest.raises(ValueError, match=r"capacity"):
        KVCache(4).update(torch.zeros(1, 2, 5, 4), torch.zeros(1, 2, 5, 4))


# --- rotation inputs: integer, bool and odd-width tensors, on both paths ----------------------


@pytest.mark.parametrize("dtype", [torch.long, torch.int32, torch.bool])
def test_rotation_refuses_non_float_tensors(dtype: torch.dtype) -> None:
    from mlbook.transformer.fused import apply_rotary_fused

    rope = RotaryEmbedding(8)
    cos, sin = rope(4)
    x = torch.zeros(4, 8, dtype=dtype)
    for call in (lambda: apply_rotary(x, cos, sin), lambda: apply_rotary_fused(x, cos, sin), lambda: rope.rotate(x)):
        with pytest.raises(TypeError, match=rf"x must be a floating-point tensor .*got dtype {dtype}"):
            call()


def test_rotation_refuses_odd_width_tables() -> None:
    from mlbook.transformer.fused import apply_rotary_fused

    odd = torch.zeros(4, 7)
    for fn in (apply_rotary, apply_rotary_fused):
        with pytest.raises(ValueError, match=r"d_head must be even .*got cos and sin of width 7"):
            fn(odd, odd, odd)


# --- strings where bools are expected ---------------------------------------------------------


def test_strings_are_not_bools() -> None:
    from mlbook.transformer.attention import MultiHeadAttention
    from mlbook.transformer.models import GPT

    with pytest.raises(TypeError, match=r"bidirectional must be True or False, got str \('no'\)"):
        relative_position_bucket(torch.arange(-3, 4), "no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"bidirectional must be True or False, got str \('no'\)"):
        RelativePositionBias(2, bidirectional="no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"causal must be True or False, got str \('yes'\)"):
        MultiHeadAttention(8, 2, causal="yes")  # type: ignore[arg-type]
    for name in ("bias", "tie_embeddings", "scale_embeddings"):
        with pytest.raises(TypeError, match=rf"{name} must be True or False, got str \('no'\)"):
            GPTConfig(**{name: "no"})
    model = GPT(GPTConfig(vocab_size=16, d_model=16, n_heads=2, n_layers=1, max_len=16))
    with pytest.raises(TypeError, match=r"return_attention must be True or False"):
        model(torch.tensor([[1, 2]]), return_attention="no")  # type: ignore[arg-type]


# --- GPT and TinyT5: token ids, prompts and sampling options ----------------------------------


def _tiny_gpt(**changes: object):  # type: ignore[no-untyped-def]
    from mlbook.transformer.models import GPT

    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=16, d_model=16, n_heads=2, n_layers=1, max_len=16).replace(**changes))


@pytest.mark.parametrize("bad_id", [16, 99, -1])
def test_token_ids_outside_the_vocabulary(bad_id: int) -> None:
    model = _tiny_gpt()
    idx = torch.tensor([[1, bad_id]])
    for call in (lambda: model(idx), lambda: model.generate(idx, 2)):
        with pytest.raises(ValueError, match=rf"idx holds token id {bad_id}, outside the vocabulary: ids must be in "
                                             r"0 \.\. 15 \(vocab_size=16\)"):
            call()


def test_empty_and_misshapen_prompts() -> None:
    model = _tiny_gpt()
    for call in (lambda: model(torch.zeros(1, 0, dtype=torch.long)),
                 lambda: model.generate(torch.zeros(1, 0, dtype=torch.long), 2)):
        with pytest.raises(ValueError, match=r"idx must hold at least one token .*got shape \(1, 0\)"):
            call()
    with pytest.raises(ValueError, match=r"idx must have shape \(B, T\), got \(2,\); add a batch dimension"):
        model.generate(torch.tensor([1, 2]), 2)
    with pytest.raises(TypeError, match=r"idx must be a torch.Tensor of token ids .*got list"):
        model.generate([[1, 2]], 2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"idx must hold integer token ids .*got dtype torch.float32"):
        model(torch.zeros(1, 3))


@pytest.mark.parametrize("temperature,error,pattern", [
    (float("nan"), ValueError, r"temperature must be a finite number, got nan"),
    (float("inf"), ValueError, r"temperature must be a finite number, got inf"),
    (-1.0, ValueError, r"temperature must be >= 0.0, got -1.0"),
    ("0.5", TypeError, r"temperature must be a number, got str"),
])
def test_bad_temperature(temperature: object, error: type, pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        _tiny_gpt().generate(torch.tensor([[1, 2]]), 2, temperature=temperature)  # type: ignore[arg-type]


@pytest.mark.parametrize("top_k,error,pattern", [
    (0, ValueError, r"top_k must be >= 1, got 0"),
    (-3, ValueError, r"top_k must be >= 1, got -3"),
    (1.5, TypeError, r"top_k must be an int, got float"),
])
def test_bad_top_k(top_k: object, error: type, pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        _tiny_gpt().generate(torch.tensor([[1, 2]]), 2, top_k=top_k)  # type: ignore[arg-type]


def test_bad_generation_lengths_and_cache_kind() -> None:
    model = _tiny_gpt()
    idx = torch.tensor([[1, 2]])
    with pytest.raises(ValueError, match=r"max_new_tokens must be >= 0, got -1"):
        model.generate(idx, -1)
    with pytest.raises(TypeError, match=r"max_new_tokens must be an int, got float"):
        model.generate(idx, 2.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"unknown cache 'lru'; valid values are 'kv', 'sink'"):
        model.generate(idx, 2, cache="lru")
    learned = _tiny_gpt(positional="learned")
    with pytest.raises(ValueError, match=r"cannot go past max_len=16: the prompt \(2 tokens\) plus max_new_tokens=20"):
        learned.generate(idx, 20)


def test_model_configs_refuse_bad_values() -> None:
    from mlbook.transformer.models import T5Config

    with pytest.raises(ValueError, match=r"dropout must be < 1.0, got 2.0"):
        GPTConfig(dropout=2.0)
    with pytest.raises(ValueError, match=r"d_ff must be >= 1, got 0"):
        GPTConfig(d_ff=0)
    with pytest.raises(ValueError, match=r"norm_eps must be a finite number > 0"):
        GPTConfig(norm_eps=-1.0)
    with pytest.raises(ValueError, match=r"num_buckets=1 is too few"):
        GPTConfig(positional="t5", t5_num_buckets=1)
    with pytest.raises(ValueError, match=r"d_model \(10\) must be divisible by n_heads \(4\)"):
        T5Config(d_model=10, n_heads=4)
    with pytest.raises(ValueError, match=r"dropout must be >= 0.0"):
        T5Config(dropout=-0.1)


def test_tiny_t5_token_ids() -> None:
    from mlbook.transformer.models import T5Config, TinyT5

    t5 = TinyT5(T5Config(vocab_size=16, d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1))
    with pytest.raises(ValueError, match=r"src holds token id 16, outside the vocabulary"):
        t5(torch.tensor([[16]]), torch.tensor([[1]]))
    with pytest.raises(ValueError, match=r"tgt holds token id -2"):
        t5(torch.tensor([[1]]), torch.tensor([[-2]]))
    with pytest.raises(ValueError, match=r"bos_id must be a token id in 0 \.\. 15, got 99"):
        t5.generate(torch.tensor([[1]]), 2, bos_id=99)
    with pytest.raises(ValueError, match=r"src must hold at least one token"):
        t5.generate(torch.zeros(1, 0, dtype=torch.long), 2)


# --- attention: dtypes, head counts, bias shapes ------------------------------------------------


def test_attention_dtype_and_shape_mismatches() -> None:
    from mlbook.transformer.attention import MultiHeadAttention

    with pytest.raises(ValueError, match=r"d_model \(8\) must be divisible by n_heads \(3\)"):
        MultiHeadAttention(8, 3)
    with pytest.raises(ValueError, match=r"rotary.d_head \(8\) must equal d_model / n_heads \(4\)"):
        MultiHeadAttention(8, 2, rotary=RotaryEmbedding(8))
    with pytest.raises(ValueError, match=r"dropout must be < 1.0"):
        MultiHeadAttention(8, 2, dropout=1.0)
    mha = MultiHeadAttention(8, 2)
    x = torch.zeros(1, 3, 8)
    with pytest.raises(TypeError, match=r"x has dtype torch.float64 but the attention weights are torch.float32"):
        mha(x.double())
    with pytest.raises(TypeError, match=r"x must be a floating-point tensor .*got dtype torch.int64"):
        mha(torch.zeros(1, 3, 8, dtype=torch.long))
    with pytest.raises(TypeError, match=r"context has dtype torch.float64"):
        mha(x, context=torch.zeros(1, 3, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"context has batch size 2, x has 1"):
        mha(x, context=torch.zeros(2, 3, 8))
    with pytest.raises(ValueError, match=r"context must be \(B, T, d_model=8\), got \(1, 3, 4\)"):
        mha(x, context=torch.zeros(1, 3, 4))
    with pytest.raises(TypeError, match=r"x must be a torch.Tensor"):
        mha([[0.0] * 8])  # type: ignore[arg-type]
    with torch.autocast("cpu", dtype=torch.bfloat16):  # mixed dtypes are what autocast is for
        mha(x.bfloat16())


@pytest.mark.parametrize("bias,error,pattern", [
    (torch.zeros(1, 3, 3, 3), ValueError, r"position_bias must have shape \(1 or B=1, 1 or H=2, T_q=3, T_k=3\), got \(1, 3, 3, 3\)"),
    (torch.zeros(1, 2, 4, 4), ValueError, r"got \(1, 2, 4, 4\)"),
    (lambda T_q, T_k: torch.zeros(5), ValueError, r"got \(5,\)"),
    (torch.zeros(1, 2, 3, 3, dtype=torch.bool), TypeError, r"position_bias must be a floating-point tensor .*torch.bool"),
    (torch.zeros(1, 2, 3, 3, dtype=torch.long), TypeError, r"torch.int64"),
    ([[0.0]], TypeError, r"position_bias must be a tensor .*got list"),
])
@pytest.mark.parametrize("return_weights", [False, True])
def test_attention_bias_mismatches(bias: object, error: type, pattern: str, return_weights: bool) -> None:
    from mlbook.transformer.attention import MultiHeadAttention

    with pytest.raises(error, match=pattern):
        MultiHeadAttention(8, 2)(torch.zeros(1, 3, 8), position_bias=bias, return_weights=return_weights)


# --- caches: a stream keeps its batch, heads, dtype and device -----------------------------------


@pytest.mark.parametrize("kind", ["kv", "sink"])
def test_cache_refuses_a_changed_stream(kind: str) -> None:
    from mlbook.transformer.cache import KVCache, SinkCache

    def fresh():  # type: ignore[no-untyped-def]
        cache = KVCache(10) if kind == "kv" else SinkCache(1, 3)
        k = torch.zeros(1, 2, 2, 4)  # (B, H, T, d_head)
        cache.update(k, k)
        return cache

    name = "KVCache" if kind == "kv" else "SinkCache"
    with pytest.raises(ValueError, match=rf"{name} holds a batch of 1 sequences but got k, v with batch size 2"):
        fresh().update(torch.zeros(2, 2, 1, 4), torch.zeros(2, 2, 1, 4))
    with pytest.raises(ValueError, match=r"the heads and head widths must match"):
        fresh().update(torch.zeros(1, 3, 1, 4), torch.zeros(1, 3, 1, 4))
    with pytest.raises(TypeError, match=rf"{name} holds torch.float32 tensors on cpu, got torch.float64 on cpu"):
        fresh().update(torch.zeros(1, 2, 1, 4, dtype=torch.float64), torch.zeros(1, 2, 1, 4, dtype=torch.float64))
    with pytest.raises(TypeError, match=rf"{name} holds torch.float32 tensors on cpu, got torch.float32 on meta"):
        fresh().update(torch.zeros(1, 2, 1, 4, device="meta"), torch.zeros(1, 2, 1, 4, device="meta"))
    with pytest.raises(TypeError, match=r"k and v must share dtype and device"):
        fresh().update(torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1, 4, dtype=torch.float64))
    cache = fresh()
    cache.reset()  # a new stream may have another batch size
    cache.update(torch.zeros(3, 2, 1, 4), torch.zeros(3, 2, 1, 4))


def test_gpt_caches_refuse_a_new_batch_mid_stream() -> None:
    model = _tiny_gpt()
    caches = model.new_caches()
    model(torch.tensor([[1, 2]]), caches)
    with pytest.raises(ValueError, match=r"KVCache holds a batch of 1 sequences but got k, v with batch size 2"):
        model(torch.tensor([[1], [2]]), caches)
    with pytest.raises(TypeError, match=r"caches must be a list of KVCache or SinkCache"):
        model(torch.tensor([[1]]), [1])  # type: ignore[list-item]


# --- devices and MLBOOK_* environment variables ------------------------------------------------


@pytest.mark.parametrize("device,error,pattern", [
    ("tpu", ValueError, r"unknown device 'tpu'; valid values are 'auto', 'cpu', 'cuda', 'cuda:N', 'mps'"),
    ("cudax", ValueError, r"unknown device 'cudax'"),
    ("", ValueError, r"unknown device ''"),
    (5, TypeError, r"device must be a string such as 'cpu' or a torch.device, got int"),
])
def test_unknown_devices(device: object, error: type, pattern: str) -> None:
    from mlbook.benchmarks.registry import run_benchmark
    from mlbook.experiments.train import pick_device

    with pytest.raises(error, match=pattern):
        pick_device(device)  # type: ignore[arg-type]
    with pytest.raises(error, match=pattern):
        run_benchmark("rope_apply", "quick", device, save=False)  # type: ignore[arg-type]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message for an absent GPU")
def test_absent_cuda_is_named() -> None:
    from mlbook.experiments.train import pick_device

    for device in ("cuda", "cuda:1"):
        with pytest.raises(ValueError, match=rf"device '{device}' was asked for but torch.cuda.is_available\(\) is False"):
            pick_device(device)


@pytest.mark.parametrize("variable,value,call,pattern", [
    ("MLBOOK_DEVICE", "tpu", "device", r"unknown device in environment variable MLBOOK_DEVICE 'tpu'"),
    ("MLBOOK_CPU_THREADS", "two", "threads", r"environment variable MLBOOK_CPU_THREADS must be an integer >= 1, got 'two'"),
    ("MLBOOK_CPU_THREADS", "0", "threads", r"MLBOOK_CPU_THREADS must be an integer >= 1, got '0'"),
    ("MLBOOK_BUDGET", "Full", "budget", r"MLBOOK_BUDGET must be one of quick, full, got 'Full'"),
    ("MLBOOK_ROPE_KERNEL", "fast", "kernel", r"MLBOOK_ROPE_KERNEL='fast' is not a RoPE kernel"),
    ("MLBOOK_RESULTS", "   ", "results", r"environment variable MLBOOK_RESULTS is blank"),
    ("MLBOOK_STATIC", "maybe", "static", r"environment variable MLBOOK_STATIC must be one of 1, true, .* got 'maybe'"),
    ("MLBOOK_NO_PROGRESS", "sure", "progress", r"environment variable MLBOOK_NO_PROGRESS must be one of"),
])
def test_bad_environment_variables_are_named(monkeypatch: pytest.MonkeyPatch, variable: str, value: str, call: str,
                                             pattern: str) -> None:
    import importlib

    from mlbook.benchmarks import registry as bench_registry
    from mlbook.experiments import registry
    from mlbook.transformer import fused

    train = importlib.import_module("mlbook.experiments.train")  # the module: the package exports a function `train`

    monkeypatch.setenv(variable, value)

    def threads() -> None:
        with train.cpu_threads(torch.device("cpu")):
            pass

    def static() -> None:
        from mlbook.viz.core import is_static

        is_static()

    calls = {
        "device": lambda: train.pick_device(),
        "threads": threads,
        "budget": registry.default_budget,
        "kernel": fused.rotary_kernel_mode,
        "results": lambda: (registry.results_dir(), bench_registry.record_path("x")),
        "static": static,
        "progress": lambda: train._progress(range(2), "x", True),
    }
    with pytest.raises(ValueError, match=pattern):
        calls[call]()


def test_results_variable_naming_a_file(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from mlbook.benchmarks.registry import record_path
    from mlbook.experiments.registry import results_dir

    file = tmp_path / "results.txt"
    file.write_text("")
    monkeypatch.setenv("MLBOOK_RESULTS", str(file))
    for call in (results_dir, lambda: record_path("x")):
        with pytest.raises(ValueError, match=r"environment variable MLBOOK_RESULTS=.* names a file, not a folder"):
            call()


@pytest.mark.parametrize("value,expected", [("1", True), ("TRUE", True), ("yes", True), ("0", False), ("", False),
                                            ("off", False)])
def test_static_flag_values(monkeypatch: pytest.MonkeyPatch, value: str, expected: bool) -> None:
    from mlbook.viz.core import is_static

    monkeypatch.setenv("MLBOOK_STATIC", value)
    assert is_static() is expected


# --- experiment records: unreadable ones are skipped, an unwritable folder is refused first ------


@pytest.fixture
def toy_records(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """A toy experiment whose results folder is tmp/results and whose 'packaged' records are in tmp/pkg."""
    from mlbook.experiments import registry

    monkeypatch.setenv("MLBOOK_RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr(registry, "PACKAGED_RESULTS", tmp_path / "pkg")
    calls: list[int] = []

    @registry.register("toy_bad", "A toy", "nothing", {"quick": {"n": 2, "seeds": [0]}, "full": {"n": 3, "seeds": [0]}})
    def toy(config, device, progress):  # type: ignore[no-untyped-def]
        calls.append(config["n"])
        return {"square": config["n"] ** 2, "seeds": list(config["seeds"])}

    yield calls
    registry.REGISTRY.pop("toy_bad", None)


_BAD_RECORDS = {
    "not JSON": (b"{\"name\": ", r"it is not JSON"),
    "not an object": (b"[1, 2]", r"it holds a JSON list, not an object"),
    "missing keys": (b"{\"config\": {\"n\": 2, \"seeds\": [0]}}", r"it lacks the keys \['name', 'budget', 'results'\]"),
    "bad encoding": (b"\xff\xfe{\x00}\x00", r"it is not UTF-8 text"),
    "a directory": (None, r"it is not a file"),
}


@pytest.mark.parametrize("kind", list(_BAD_RECORDS))
def test_unreadable_record_is_skipped_with_a_warning_for_the_packaged_one(toy_records, tmp_path, kind: str) -> None:
    from mlbook.experiments import registry

    good = registry.run_experiment("toy_bad", "quick", "cpu", save=False)
    packaged = tmp_path / "pkg" / "quick" / "toy_bad.json"
    packaged.parent.mkdir(parents=True)
    packaged.write_text(registry.record_text(good))
    broken = tmp_path / "results" / "quick" / "toy_bad.json"
    broken.parent.mkdir(parents=True)
    content, fault = _BAD_RECORDS[kind]
    if content is None:
        broken.mkdir()
    else:
        broken.write_bytes(content)
    for call in (lambda: registry.load_result("toy_bad", "quick"),
                 lambda: registry.load_or_run("toy_bad", "quick", "cpu"),
                 lambda: registry.extend_experiment("toy_bad", "quick", "cpu")):
        with pytest.warns(RuntimeWarning, match=rf"skipping the experiment record {re.escape(str(broken))}: {fault}"):
            record = call()
        assert record is not None and record["results"] == good["results"]  # the packaged record
    assert toy_records == [2]  # only the run that made the packaged record


def test_a_folder_where_the_record_goes_is_refused_before_training(toy_records, tmp_path) -> None:
    from mlbook.experiments import registry

    (tmp_path / "results" / "quick" / "toy_bad.json").mkdir(parents=True)
    with pytest.warns(RuntimeWarning, match=r"it is not a file"):
        with pytest.raises(ValueError, match=r"cannot save the record: .*toy_bad.json is a folder, not a file"):
            registry.load_or_run("toy_bad", "quick", "cpu")
    assert toy_records == []


def test_unwritable_results_folder_is_refused_before_training(toy_records, tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from mlbook.experiments import registry
    from mlbook.experiments.__main__ import main

    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a folder must go")  # unwritable for root too, unlike chmod
    monkeypatch.setenv("MLBOOK_RESULTS", str(blocker / "results"))
    pattern = r"cannot save the record in .*blocker/results/quick .*set MLBOOK_RESULTS to a writable folder"
    for call in (lambda: registry.run_experiment("toy_bad", "quick", "cpu"),
                 lambda: registry.load_or_run("toy_bad", "quick", "cpu")):
        with pytest.raises(ValueError, match=pattern):
            call()
    with pytest.raises(SystemExit) as info:
        main(["run", "toy_bad", "--budget", "quick", "--device", "cpu"])
    assert info.value.code == 2 and re.search(pattern, capsys.readouterr().err.replace("\n", " "))
    assert toy_records == []  # nothing trained, so nothing lost
    registry.run_experiment("toy_bad", "quick", "cpu", save=False)  # --no-save still runs


def test_a_folder_that_breaks_during_the_run_does_not_lose_it(toy_records, tmp_path) -> None:
    import shutil

    from mlbook.experiments import registry

    folder = tmp_path / "results" / "quick"

    def breaks(config, device, progress):  # type: ignore[no-untyped-def]
        shutil.rmtree(folder)
        folder.write_text("now a file")  # the folder vanished while training
        return {"square": 4}

    registry.REGISTRY["toy_bad"].fn = breaks
    with pytest.warns(RuntimeWarning, match=r"could not write the record to .*; it was saved to (\S+) instead") as rec:
        record = registry.run_experiment("toy_bad", "quick", "cpu")
    rescue = re.search(r"saved to (\S+) instead", str(rec[0].message)).group(1)  # type: ignore[union-attr]
    assert json.loads(open(rescue).read())["results"] == record["results"] == {"square": 4}


# --- benchmark records: the same store, the same skip-and-warn, the same refusal before the run ------


@pytest.fixture
def toy_bench(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """A toy benchmark whose results folder is tmp/results and whose 'packaged' records are in tmp/pkg."""
    from mlbook.benchmarks import registry as bench

    monkeypatch.setenv("MLBOOK_RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr(bench, "PACKAGED_RESULTS", tmp_path / "pkg")
    calls: list[int] = []

    def toy(config, device, progress):  # type: ignore[no-untyped-def]
        calls.append(config["n"])
        return {"double": 2 * config["n"]}

    bench.register("toy_bench", "A toy", "nothing", {"quick": {"n": 2}, "full": {"n": 3}})(toy)
    yield calls
    bench.BENCHMARKS.pop("toy_bench", None)


@pytest.mark.parametrize("kind", list(_BAD_RECORDS))
def test_unreadable_benchmark_record_is_skipped_with_a_warning_for_the_packaged_one(toy_bench, tmp_path,
                                                                                    kind: str) -> None:
    from mlbook import records
    from mlbook.benchmarks import registry as bench

    good = bench.run_benchmark("toy_bench", "quick", "cpu", save=False)
    packaged = bench.record_path("toy_bench", "quick", folder=tmp_path / "pkg")
    packaged.parent.mkdir(parents=True)
    packaged.write_text(records.record_text(good))
    broken = bench.record_path("toy_bench", "quick")
    broken.parent.mkdir(parents=True)
    content, fault = _BAD_RECORDS[kind]
    if content is None:
        broken.mkdir()
    else:
        broken.write_bytes(content)
    with pytest.warns(RuntimeWarning, match=rf"skipping the benchmark record {re.escape(str(broken))}: {fault}"):
        record = bench.load_record("toy_bench", "quick")
    assert record is not None and record["results"] == good["results"]  # the packaged record


def test_unwritable_benchmark_folder_is_refused_before_the_run(toy_bench, tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from mlbook.benchmarks import registry as bench
    from mlbook.benchmarks.__main__ import main

    (tmp_path / "results" / "quick" / "bench" / "toy_bench.json").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"cannot save the record: .*toy_bench.json is a folder, not a file"):
        bench.run_benchmark("toy_bench", "quick", "cpu")
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a folder must go")  # unwritable for root too, unlike chmod
    monkeypatch.setenv("MLBOOK_RESULTS", str(blocker / "results"))
    pattern = r"cannot save the record in .*blocker/results/bench .*set MLBOOK_RESULTS to a writable folder"
    with pytest.raises(ValueError, match=pattern):
        bench.run_benchmark("toy_bench", "full", "cpu")
    with pytest.raises(SystemExit) as info:
        main(["run", "toy_bench", "--device", "cpu"])
    assert info.value.code == 2 and re.search(pattern, capsys.readouterr().err.replace("\n", " "))
    assert toy_bench == []  # nothing measured, so nothing lost
    assert bench.run_benchmark("toy_bench", "full", "cpu", save=False)["results"] == {"double": 6}  # --no-save runs


# --- exercise checkers: copies in, a time limit, and a word when the input changed ----------------


def test_call_answer_passes_copies_and_names_a_modified_input() -> None:
    from mlbook.exercises.common import call_answer

    x = torch.arange(4.0)
    value, err = call_answer(lambda t: t.mul_(2), x)
    assert value is None and err is not None and err.startswith("InputModified: you modified the input: argument 1 "
                                                                "(a tensor of shape (4,)) was changed in place")
    assert torch.equal(x, torch.arange(4.0))  # the checker's own tensor is untouched
    value, err = call_answer(lambda t: t * 2, x)
    assert err is None and torch.equal(value, x * 2)  # type: ignore[arg-type]
    values = [1, 2]
    _, err = call_answer(lambda v: v.append(3), values)
    assert err is not None and "you modified the input: argument 1 (list)" in err and values == [1, 2]


def test_call_answer_stops_a_function_that_hangs(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from mlbook.exercises import common

    monkeypatch.setattr(common, "TIME_LIMIT_S", 0.3)

    def hang(x: torch.Tensor) -> torch.Tensor:  # runs 3 s (ends on its own: an abandoned thread must not spin)
        import time

        end = time.monotonic() + 3.0
        while time.monotonic() < end:
            time.sleep(0.01)
        return x

    value, err = common.call_answer(hang, torch.zeros(2))  # main thread: a SIGALRM timer
    assert value is None and err is not None and err.startswith("AnswerTimedOut: your function did not return within 0.3 s")
    box: dict[str, object] = {}
    worker = threading.Thread(target=lambda: box.update(result=common.call_answer(hang, torch.zeros(2))))
    worker.start()  # off the main thread: a watchdog thread instead
    worker.join(5)
    assert not worker.is_alive() and box["result"][1].startswith("AnswerTimedOut")  # type: ignore[index]


def test_a_checker_reports_a_hanging_or_mutating_answer(monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from mlbook.exercises import common
    from mlbook.exercises.rope import check_rope_rotation

    monkeypatch.setattr(common, "TIME_LIMIT_S", 0.3)

    def hang(x, m, base):  # type: ignore[no-untyped-def]
        while True:
            pass

    assert check_rope_rotation(hang) is False
    assert "AnswerTimedOut" in capsys.readouterr().out
    assert check_rope_rotation(lambda x, m, base: x.zero_()) is False
    assert "you modified the input" in capsys.readouterr().out


# --- sliders: a starting value outside the range is refused, not moved to the nearest end ----------


def test_slider_values_out_of_range_are_refused() -> None:
    from mlbook.viz.core import float_slider, int_slider, log_slider, show_knob
    from mlbook.viz.relative import live_t5_bias_map

    with pytest.raises(ValueError, match=r"head=10 is outside the slider's range 0 \.\. 7; pick a value in it"):
        int_slider(10, "head", 0, 7)
    with pytest.raises(ValueError, match=r"s=0.5 is outside the slider's range 1 \.\. 8"):
        float_slider(0.5, "s", 1.0, 8.0, 0.5)
    with pytest.raises(ValueError, match=r"base=5 is outside the slider's range 10 \.\. 1e\+07"):
        log_slider(5, "base", 1.0, 7.0)
    with pytest.raises(ValueError, match=r"T=nan is outside"):
        float_slider(float("nan"), "T", 0.0, 1.0, 0.1)
    with pytest.raises(TypeError, match=r"head must be a number, got str"):
        int_slider("3", "head", 0, 7)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"head=10 is outside the slider's range 0 \.\. 7"):
        live_t5_bias_map(head=10, n_heads=8)
    with pytest.raises(ValueError, match=r"defaults\['base'\]=3 is not one of that knob's values \[10, 100\]"):
        show_knob(lambda base: None, {"base": [10, 100]}, caption="c", alt="a", defaults={"base": 3})
    with pytest.raises(ValueError, match=r"defaults names 'bse', which is not one of the knobs \['base'\]"):
        show_knob(lambda base: None, {"base": [10, 100]}, caption="c", alt="a", defaults={"bse": 10})


def test_live_figures_say_when_they_adjust_a_slider_combination(monkeypatch: pytest.MonkeyPatch) -> None:
    from mlbook.viz import core
    from mlbook.viz.extension import live_context_scaling
    from mlbook.viz.relative import live_buckets, live_t5_bias_map

    drawn: list = []
    monkeypatch.setattr(core, "show", lambda fig, **kw: drawn.append(fig))

    def notes() -> str:
        return " | ".join(a.text for a in drawn[-1].layout.annotations if a.text)

    live_context_scaling(beta_fast=2.0, beta_slow=4.0)  # the first draw uses the starting values
    assert "beta_fast (2) must be at least beta_slow (4): YaRN is drawn with beta_fast = 5" in notes()
    live_buckets(num_buckets=64, max_distance=8)
    assert "max_distance=8 is inside the exact range: drawn with max_distance=33" in notes()
    live_t5_bias_map(T=64)
    assert "inside the exact range" not in notes()  # a valid combination carries no note


# ---------------------------------------------------------------------------
# Config readers: both RoPE layouts, wrong types, conflicting values (issue 31)
# ---------------------------------------------------------------------------

# Llama 3.1 8B's RoPE as transformers 5 saves it, and as 4.x saved it
LLAMA31_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
LLAMA31_V5 = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
              "num_hidden_layers": 2, "vocab_size": 97, "intermediate_size": 96, "max_position_embeddings": 131072,
              "rope_parameters": LLAMA31_ROPE}
LLAMA31_V4 = {**{k: v for k, v in LLAMA31_V5.items() if k != "rope_parameters"}, "rope_theta": 500000.0,
              "rope_scaling": {k: v for k, v in LLAMA31_ROPE.items() if k != "rope_theta"}}


def _v5_entry_points():
    from mlbook.analysis.model_config import context_lengths, serving_override, summarize_config
    from mlbook.analysis.probe import rotary_from_config
    from mlbook.transformer.hf import gpt_config_from_hf, rope_options_from_hf, rope_scaling_from_hf

    return {
        "rope_scaling_from_hf": lambda c: (rope_scaling_from_hf(c).name, rope_scaling_from_hf(c).factor),
        "rope_options_from_hf": lambda c: rope_options_from_hf(c),
        "gpt_config_from_hf": lambda c: gpt_config_from_hf(c).rope,
        "summarize_config": lambda c: (summarize_config(c).base, summarize_config(c).bands),
        "context_lengths": lambda c: context_lengths(c),
        "serving_override": lambda c: serving_override(c, max_model_len=4096)[1],
        "rotary_from_config": lambda c: rotary_from_config(c).inv_freq.tolist(),
    }


@pytest.mark.parametrize("entry", sorted(_v5_entry_points()))
def test_v5_layout_reads_as_the_v4_layout_at_every_entry_point(entry: str) -> None:
    """Each reader gives a transformers-5 config (rope_parameters) what it gives the same model in 4.x's layout:
    base 500,000 and Llama 3's scaling, not base 10,000 and none."""
    read = _v5_entry_points()[entry]
    assert read(LLAMA31_V5) == read(LLAMA31_V4)
    if entry == "rope_options_from_hf":
        assert read(LLAMA31_V5)["base"] == 500000.0 and read(LLAMA31_V5)["scaling"] == "llama3"


def test_serving_override_of_a_v5_config_keeps_its_base_or_refuses() -> None:
    from mlbook.analysis.model_config import serving_override

    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192}
    with pytest.raises(ValueError, match=r"replaces rope_parameters whole, base included: give rope_theta \(this "
                                         r"config's is 500000\)"):
        serving_override(LLAMA31_V5, yarn)
    new, changes = serving_override(LLAMA31_V5, {**yarn, "rope_theta": 500000.0})
    assert new["rope_parameters"]["rope_type"] == "yarn" and "rope_parameters" in changes[0]


def test_serving_override_of_a_v4_config_without_its_base_is_refused() -> None:
    """vLLM on transformers 5 writes a rope_scaling override into rope_parameters: the base would be lost."""
    from mlbook.analysis.model_config import serving_override

    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192}
    with pytest.raises(ValueError, match=r"give rope_theta \(this config's is 500000\) inside it; vLLM on "
                                         r"transformers 5 writes a rope_scaling override into rope_parameters"):
        serving_override(LLAMA31_V4, yarn)
    new, _ = serving_override(LLAMA31_V4, {**yarn, "rope_theta": 500000.0})
    assert new["rope_scaling"]["rope_type"] == "yarn"


@pytest.mark.parametrize("change, match", [
    ({"rope_theta": 10000.0}, r"rope_theta=500000.0 but the config's top level gives rope_theta=10000.0"),
    ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}, "rope_theta": 500000.0},
     r"gives rope_parameters=.*and rope_scaling=.*they differ"),
    ({"partial_rotary_factor": 0.5, "rope_parameters": {**LLAMA31_ROPE, "partial_rotary_factor": 1.0}},
     r"partial_rotary_factor=1.0 but the config's top level gives partial_rotary_factor=0.5"),
])
def test_a_config_stating_both_layouts_differently_is_refused(change: dict, match: str) -> None:
    from mlbook.transformer.hf import rope_options_from_hf

    with pytest.raises(ValueError, match=match):
        rope_options_from_hf({**LLAMA31_V5, **change})


def test_both_layouts_agreeing_are_read() -> None:
    from mlbook.transformer.hf import rope_options_from_hf

    both = {**LLAMA31_V5, "rope_theta": 500000.0, "rope_scaling": dict(LLAMA31_ROPE)}
    assert rope_options_from_hf(both) == rope_options_from_hf(LLAMA31_V4)


@pytest.mark.parametrize("config, exc, match", [
    (8, TypeError, r"config must be a transformers config or a dict read from config.json, got int \(8\)"),
    ("meta-llama/Llama-3.1-8B", TypeError, r"got the string 'meta-llama/Llama-3.1-8B': load it first"),
    ([("num_hidden_layers", 2)], TypeError, r"got list"),
    ({**LLAMA31_V4, "tie_word_embeddings": "false"}, TypeError, r"tie_word_embeddings must be True or False"),
    ({**LLAMA31_V4, "attention_bias": "no"}, TypeError, r"attention_bias must be True or False"),
    ({**LLAMA31_V4, "rope_theta": 0}, ValueError, r"rope_theta must be a finite number > 0, got 0"),
    ({**LLAMA31_V4, "rope_theta": "1e6"}, TypeError, r"rope_theta must be a number, got str"),
    ({**LLAMA31_V4, "rope_scaling": {**LLAMA31_V4["rope_scaling"], "original_max_position_embeddings": 512.5}},
     TypeError, r"original_max_position_embeddings'\] must be a whole number of tokens, got float \(512.5\)"),
    ({**LLAMA31_V4, "max_position_embeddings": 131072.5}, TypeError, r"max_position_embeddings must be a whole"),
    ({**LLAMA31_V4, "num_key_value_heads": 0}, ValueError, r"num_key_value_heads must be >= 1, got 0"),
    ({**LLAMA31_V4, "partial_rotary_factor": 1.5}, ValueError, r"partial_rotary_factor must be in \(0, 1\]"),
    ({**LLAMA31_V5, "rope_parameters": [1, 2]}, TypeError, r"rope_parameters must be a dict, got list"),
    ({**LLAMA31_V5, "rope_parameters": {"full_attention": dict(LLAMA31_ROPE), "factor": 2.0}}, ValueError,
     r"mixes per-layer-type dicts and plain keys"),
    ({**LLAMA31_V5, "rope_parameters": {"sliding_attention": dict(LLAMA31_ROPE)}}, ValueError,
     r"entries for layer types \['sliding_attention'\], which no layer of this config has"),
    ({**LLAMA31_V4, "rope_scaling": {"rope_type": "linear"}}, ValueError, r"'linear' needs 'factor'"),
    ({**LLAMA31_V4, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}, "original_max_position_embeddings": 4096},
     ValueError, r"transformers 5 reads it as YaRN's anchor, 4.57 ignores it"),
    ({**LLAMA31_V4, "rope_scaling": {"rope_type": "default", "rope_theta": 1e6}, "rope_theta": None}, ValueError,
     r"rope_scaling holds rope_theta=1000000.0 but the config has no top-level rope_theta"),
    ({**LLAMA31_V4, "rope_scaling": {"rope_type": "su", "short_factor": [1.0] * 8, "long_factor": [1.0] * 8}},
     ValueError, r"'su' is what Phi-3's first configs called LongRoPE"),
])
def test_config_readers_refuse_before_any_work(config, exc, match) -> None:
    from mlbook.transformer.hf import gpt_config_from_hf

    with pytest.raises(exc, match=match):
        gpt_config_from_hf(config)


# a multimodal config in transformers 5's layout: Qwen3.5's text config, shrunk, under text_config
_QWEN35_TEXT = {"model_type": "qwen3_5_text", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 2,
                "head_dim": 32, "max_position_embeddings": 64,
                "layer_types": ["linear_attention"] * 3 + ["full_attention"],
                "rope_parameters": {"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                                    "mrope_section": [2, 1, 1], "mrope_interleaved": True}}


def _qwen35(**rope: object) -> dict:
    return {"model_type": "qwen3_5", "text_config": {**_QWEN35_TEXT, "rope_parameters": {
        **_QWEN35_TEXT["rope_parameters"], **rope}}}


@pytest.mark.parametrize("config, exc, match", [
    ({**LLAMA31_V5, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "factor": 2.0}}, ValueError,
     r"^rope_parameters has rope_type 'default' but also \['factor'\]"),
    ({**LLAMA31_V5, "rope_parameters": {"rope_type": "defualt", "rope_theta": 1e4}}, ValueError,
     r"^unknown rope_parameters type 'defualt'"),
    ({**LLAMA31_V5, "rope_parameters": {**LLAMA31_ROPE, "factr": 8.0}}, ValueError,
     r"^rope_parameters key\(s\) \['factr'\]"),
    ({**LLAMA31_V5, "rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4}}, ValueError,
     r"^rope_parameters of type 'yarn' needs 'factor'"),
    (_qwen35(factor=2.0), ValueError, r"^text_config.rope_parameters has rope_type 'default' but also \['factor'\]"),
    (_qwen35(rope_type="defualt"), ValueError, r"^unknown text_config.rope_parameters type 'defualt'"),
    (_qwen35(rope_type="yarn", factor="4"), TypeError, r"^text_config.rope_parameters\['factor'\] must be a number"),
    ({**LLAMA31_V4, "rope_scaling": {"rope_type": "defualt"}}, ValueError, r"^unknown rope_scaling type 'defualt'"),
    ({**LLAMA31_V4, "rope_scaling": {"rope_type": "default", "factor": 2.0}}, ValueError,
     r"^rope_scaling has rope_type 'default' but also \['factor'\]"),
])
def test_a_config_error_names_the_field_the_config_used(config: dict, exc: type, match: str) -> None:
    """The messages call the RoPE dict what the config calls it: rope_parameters in transformers 5's layout,
    text_config.rope_parameters in a multimodal config, rope_scaling in 4.x's."""
    from mlbook.transformer.hf import rope_options_from_hf

    with pytest.raises(exc, match=match):
        rope_options_from_hf(config)


def test_a_partial_factor_stated_twice_names_what_each_version_reads() -> None:
    """transformers 5.15 loads the dict's partial_rotary_factor (setdefault) but builds a scaled type at the top
    level's, 4.57 reads the top level's: refused, with both values and each rule."""
    from mlbook.transformer.hf import rope_options_from_hf

    config = {**_qwen35(), "text_config": {**_qwen35()["text_config"], "partial_rotary_factor": 0.5}}
    with pytest.raises(ValueError, match=r"text_config.rope_parameters gives partial_rotary_factor=0.25 but the text "
                                         r"config's top level gives partial_rotary_factor=0.5; transformers 5.15 loads "
                                         r"the dict's \(setdefault: the top level only fills a missing key\) and "
                                         r"default RoPE rotates with it, but a scaled rope_type's init re-runs "
                                         r"standardize_rope_params .*; 4.57 reads only the top level's"):
        rope_options_from_hf(config)


def test_a_per_layer_type_dict_where_transformers_reads_one_global_dict_is_refused() -> None:
    """Qwen3.5's config class takes {"full_attention": {...}} for a global dict at its default base 10,000: refused,
    naming the family and the one dict to write."""
    from mlbook.transformer.hf import hf_rope_base

    config = _qwen35()
    config["text_config"]["rope_parameters"] = {"full_attention": dict(_QWEN35_TEXT["rope_parameters"])}
    with pytest.raises(ValueError, match=r"text_config.rope_parameters gives a dict per layer type "
                                         r"\(\['full_attention'\]\), but transformers 5.15 .*model_type 'qwen3_5_text'"
                                         r".*rope_theta \(10000\).*Write one dict"):
        hf_rope_base(config)


@pytest.mark.parametrize("bad, exc, match", [
    (-1, ValueError, r"max_model_len must be >= 1, got -1"),
    (4096.5, TypeError, r"max_model_len must be an int, got float"),
    (True, TypeError, r"max_model_len must be an int, got bool"),
])
def test_serving_override_length_is_checked(bad, exc, match) -> None:
    from mlbook.analysis.model_config import serving_override

    with pytest.raises(exc, match=match):
        serving_override(LLAMA31_V4, max_model_len=bad)


def test_summarize_config_of_a_non_dict_names_what_it_got() -> None:
    from mlbook.analysis.model_config import summarize_config

    with pytest.raises(TypeError, match=r"config must be a dict read from config.json, got str \('llama'\)"):
        summarize_config("llama")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Inputs that used to be taken silently: a missing factor, a lone mscale, p-RoPE shares that round to
# nothing or everything, LongRoPE lists that do not fit, bad Llama 4 positions, a results folder lost mid-run
# ---------------------------------------------------------------------------

# the arguments besides factor each scaling needs, so that only the factor is missing
_NEEDS = {"dynamic": {"original_max_len": 2048}, "yarn": {"original_max_len": 2048},
          "llama3": {"original_max_len": 2048},
          "longrope": {"original_max_len": 2048, "short_factor": [1.0] * 4, "long_factor": [2.0] * 4}}


@pytest.mark.parametrize("scaling", [s for s in ROPE_SCALINGS if s not in ("none", "proportional")])
def test_a_scaling_without_its_factor_is_refused_not_plain_rope(scaling: str) -> None:
    from mlbook.transformer.rope_scaling import FACTOR_DEFAULTS_TO_ONE

    assert scaling not in FACTOR_DEFAULTS_TO_ONE
    with pytest.raises(ValueError, match=rf"scaling='{scaling}' needs factor, .* got none: left at 1 it would be "
                                         r"plain RoPE; give it explicitly \(factor=1.0 to scale nothing\)"):
        RopeScaling(scaling, **_NEEDS.get(scaling, {}))
    with pytest.raises(ValueError, match=rf"scaling='{scaling}' needs factor"):
        GPTConfig(rope={"scaling": scaling, **_NEEDS.get(scaling, {})})
    assert RopeScaling(scaling, factor=1.0, **_NEEDS.get(scaling, {})).factor == 1.0  # stated, 1 stays legal


def test_the_plain_scaling_still_defaults_its_factor_to_one() -> None:
    assert RopeScaling().factor == 1.0 and RopeScaling("none").factor == 1.0
    torch.testing.assert_close(RotaryEmbedding(8, rope_scaling=RopeScaling()).inv_freq, RotaryEmbedding(8).inv_freq)


_MSCALE_CASES = {"neither": {}, "only mscale_all_dim": {"mscale_all_dim": 0.5},
                 "both": {"mscale": 0.707, "mscale_all_dim": 1.0}, "both equal": {"mscale": 1.0, "mscale_all_dim": 1.0}}


@pytest.mark.oracle
@pytest.mark.parametrize("case", list(_MSCALE_CASES) + ["only mscale"])
def test_yarn_mscale_pair_is_read_as_transformers_reads_it(case: str) -> None:
    """The factor on cos and sin equals transformers' `_compute_yarn_parameters` for neither, mscale_all_dim
    alone, and both; mscale alone, which transformers ignores (0.1 ln s + 1), is refused by name instead."""
    pytest.importorskip("transformers")
    from transformers import LlamaConfig

    from hf_versions import rope_init_function

    keys = _MSCALE_CASES.get(case, {"mscale": 0.707})
    rs = {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 64, **keys}
    cfg = LlamaConfig(hidden_size=64, num_attention_heads=4, head_dim=16, rope_theta=10000.0,
                      max_position_embeddings=2560, rope_scaling=dict(rs))
    theirs_inv, theirs_factor = rope_init_function("yarn")(cfg, "cpu")
    if case == "only mscale":
        assert math.isclose(theirs_factor, 0.1 * math.log(40.0) + 1.0)  # transformers drops the lone mscale
        with pytest.raises(ValueError, match=r"mscale=0.707 was given without mscale_all_dim: transformers .* "
                                             r"ignores it alone"):
            RopeScaling("yarn", factor=40.0, original_max_len=64, **keys)
        return
    ours_inv, ours_factor = RopeScaling("yarn", factor=40.0, original_max_len=64, **keys).frequencies(16, 10000.0)
    torch.testing.assert_close(ours_inv, theirs_inv, rtol=1e-6, atol=0)
    assert math.isclose(ours_factor, theirs_factor, rel_tol=1e-12)


def test_a_lone_mscale_is_refused_at_every_entry_point() -> None:
    from mlbook.transformer.hf import rope_scaling_from_hf

    pattern = r"mscale=0.707 was given without mscale_all_dim: .*give mscale_all_dim too .*or leave mscale out"
    with pytest.raises(ValueError, match=pattern):
        RopeScaling("yarn", factor=4.0, original_max_len=2048, mscale=0.707)
    with pytest.raises(ValueError, match=pattern):
        GPTConfig(rope={"scaling": "yarn", "factor": 4.0, "mscale": 0.707})
    with pytest.raises(ValueError, match=pattern):
        rope_scaling_from_hf({**LLAMA31_V4, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "mscale": 0.707,
                                                             "original_max_position_embeddings": 8192}})
    # mscale_all_dim alone is legal: the factor on cos and sin stays 0.1 ln s + 1, as in transformers
    alone = RopeScaling("yarn", factor=4.0, original_max_len=2048, mscale_all_dim=0.707)
    assert alone.frequencies(16)[1] == pytest.approx(0.1 * math.log(4.0) + 1.0)


def _longrope(**lists: object) -> RopeScaling:
    return RopeScaling("longrope", factor=2.0, original_max_len=32, **{"short_factor": [1.0] * 8,
                                                                       "long_factor": [2.0] * 8, **lists})


@pytest.mark.parametrize("which", ["short_factor", "long_factor"])
@pytest.mark.parametrize("bad", [{1.0: 2.0, 3.0: 4.0}, "1234", 2.0], ids=["dict", "str", "float"])
def test_longrope_factor_lists_must_be_lists(which: str, bad: object) -> None:
    """A dict would have given its keys as the factors, a string its characters: a TypeError naming the list."""
    with pytest.raises(TypeError, match=rf"{which} must be a list of positive numbers, one per frequency pair, "
                                        rf"got {type(bad).__name__} "):
        _longrope(**{which: bad})
    assert _longrope(**{which: tuple([1.5] * 8)}).frequencies(16)[0].shape == (8,)  # a tuple is a list here


@pytest.mark.parametrize("which", ["short_factor", "long_factor"])
def test_longrope_factor_lists_of_the_wrong_length_are_refused_before_any_work(which: str) -> None:
    """Either list, whichever the sequence length would use, as soon as d_head is known: at RotaryEmbedding
    and GPTConfig construction, not at the first sequence past the trained length."""
    scaling = _longrope(**{which: [1.0] * 5})
    pattern = rf"{which} has 5 entries, but d_head=16 has 8 pairs: longrope needs one factor per pair"
    for call in (lambda: scaling.frequencies(16), lambda: scaling.frequencies(16, seq_len=8),
                 lambda: RotaryEmbedding(16, rope_scaling=scaling),
                 lambda: GPTConfig(d_model=64, n_heads=4, max_len=32,
                                   rope={"scaling": "longrope", "factor": 2.0, "short_factor": [1.0] * 8,
                                         "long_factor": [2.0] * 8, which: [1.0] * 5})):
        with pytest.raises(ValueError, match=pattern):
            call()


@pytest.mark.parametrize("d_head, partial, p, dropped", [
    (64, 1.0, 0.01, 0), (64, 1.0, 0.99, 32), (64, 1.0, 0.985, 32), (8, 1.0, 0.1, 0), (64, 0.5, 0.02, 0),
    (64, 0.5, 0.98, 16),
], ids=["none-of-32", "all-of-32", "all-of-32-edge", "none-of-4", "none-of-16-partial", "all-of-16-partial"])
def test_drop_lowest_that_rounds_to_no_pair_or_every_pair_is_refused(d_head: int, partial: float, p: float,
                                                                      dropped: int) -> None:
    """The message names drop_lowest, its value, the pair count it rounds to and the range that drops some."""
    from mlbook.analysis.after_rope import pair_frequencies

    pairs = int(d_head * partial) // 2
    pattern = (rf"drop_lowest={p:g} drops round\({p:g} \* {pairs}\) = {dropped} of the {pairs} rotating pairs, so "
               + ("nothing would change" if dropped == 0 else "no pair would turn")
               + rf"; drop_lowest must be 0 \(keep every pair\) or between about .* \(drop 1 to {pairs - 1} of them\)")
    for call in (lambda: RotaryEmbedding(d_head, partial_rotary_factor=partial, drop_lowest=p),
                 lambda: pair_frequencies(d_head, partial_rotary_factor=partial, drop_lowest=p),
                 lambda: GPTConfig(d_model=4 * d_head, n_heads=4,
                                   rope={"partial_rotary_factor": partial, "drop_lowest": p})):
        with pytest.raises(ValueError, match=pattern):
            call()


def test_drop_lowest_inside_its_range_drops_what_it_rounds_to() -> None:
    for d_head, p in ((64, 0.016), (64, 0.25), (64, 0.984), (4, 0.5)):
        still = int((RotaryEmbedding(d_head, drop_lowest=p).inv_freq == 0).sum())
        assert still == round(p * (d_head // 2)) and 1 <= still <= d_head // 2 - 1
    assert not (RotaryEmbedding(64, drop_lowest=0.0).inv_freq == 0).any()  # 0: every pair turns
    with pytest.raises(ValueError, match=r"drop_lowest=0.5 drops round\(0.5 \* 1\) = 0 of the 1 rotating pairs.*"
                                         r"must be 0: a head with one rotating pair cannot drop part of it"):
        RotaryEmbedding(2, drop_lowest=0.5)


@pytest.mark.parametrize("position", [-1, -8193, float("nan"), float("inf"), 1.5])
def test_llama4_attention_scale_refuses_positions_that_are_not_cache_positions(position: float) -> None:
    """A negative position gave -inf (log1p of -1) or a silent 1, NaN gave NaN: refused by name instead."""
    from mlbook.analysis.after_rope import llama4_attention_scale

    with pytest.raises(ValueError, match=rf"positions must be whole numbers >= 0 \(cache positions 0, 1, \.\.\.\), "
                                         rf"got {position:g} at index 2"):
        llama4_attention_scale([0, 8191, position])
    assert llama4_attention_scale([0, 8191]).tolist() == [1.0, 1.0 + 0.1 * math.log(2.0)]  # the legal ones


def _zero_kv_heads_calls():
    from mlbook.analysis import interview, production, systems
    from mlbook.analysis.after_rope import windowed_kv_bytes

    return {
        "kv_cache_bytes": (lambda: production.kv_cache_bytes(2, 0, 64), "n_kv_heads"),
        "kv_cache_plan": (lambda: production.kv_cache_plan(2, 0, 64), "n_kv_heads"),
        "kv_cache_options": (lambda: production.kv_cache_options(kv_heads=(32, 0)), "kv_heads entry"),
        "windowed_kv_bytes": (lambda: windowed_kv_bytes(("full_attention",) * 2, None, 100, 0, 64), "n_kv_heads"),
        "config_kv_heads": (lambda: production.config_kv_heads({"num_attention_heads": 8, "num_key_value_heads": 0}),
                            "num_key_value_heads"),
        "config_kv_heads n_head_kv": (lambda: production.config_kv_heads({"num_attention_heads": 8, "n_head_kv": 0}),
                                      "n_head_kv"),
        "config_kv_heads falcon": (lambda: production.config_kv_heads(
            {"model_type": "falcon", "new_decoder_architecture": True, "num_attention_heads": 8, "num_kv_heads": 0}),
            "num_kv_heads"),
        "attention_flops": (lambda: systems.attention_flops(1, 8, 64, 4, 0), "n_kv_heads"),
        "kv_cache_case": (lambda: interview.kv_cache_case(n_kv_heads=0), "n_kv_heads"),
        "decoder_param_count": (lambda: interview.decoder_param_count(n_kv_heads=0), "n_kv_heads"),
        "GPTConfig": (lambda: GPTConfig(d_model=64, n_heads=4, n_kv_heads=0), "n_kv_heads"),
    }


@pytest.mark.parametrize("entry", sorted(_zero_kv_heads_calls()))
def test_zero_kv_heads_are_refused_by_name(entry: str) -> None:
    call, name = _zero_kv_heads_calls()[entry]
    with pytest.raises(ValueError, match=rf"^{name} must be >= 1, got 0$"):
        call()


def _replace_with_a_file(folder) -> None:  # type: ignore[no-untyped-def]
    import shutil

    shutil.rmtree(folder)
    folder.write_text("now a file")


def _rescued(rec) -> str:  # type: ignore[no-untyped-def]
    """The rescue path the save warning names."""
    (warning,) = [w for w in rec if "could not write the record" in str(w.message)]
    return re.search(r"it was saved to (\S+) instead", str(warning.message)).group(1)  # type: ignore[union-attr]


@pytest.mark.parametrize("call", ["run_experiment", "load_or_run"])
def test_a_results_folder_replaced_by_a_file_mid_run_still_saves_the_run(toy_records, tmp_path, call: str) -> None:
    """MLBOOK_RESULTS itself becomes a file while training: the path read before the run is the one saved
    to, so save_record's rescue runs and the warning names the file that holds the record."""
    import tempfile

    from mlbook.experiments import registry

    def breaks(config, device, progress):  # type: ignore[no-untyped-def]
        _replace_with_a_file(tmp_path / "results")
        return {"square": 4, "seeds": [0]}

    (tmp_path / "results").mkdir()
    registry.REGISTRY["toy_bad"].fn = breaks
    with pytest.warns(RuntimeWarning, match=r"could not write the record to .*results/quick/toy_bad.json") as rec:
        record = getattr(registry, call)("toy_bad", "quick", "cpu")
    rescue = _rescued(rec)
    assert rescue.startswith(tempfile.gettempdir()) and rescue.endswith("toy_bad.json")
    assert json.loads(open(rescue).read())["results"] == record["results"] == {"square": 4, "seeds": [0]}


def test_the_cli_reports_a_rescued_run_without_a_traceback(toy_records, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """`python -m mlbook.experiments run` after the results folder broke mid-run: the rescue's warning names the
    file, the PNG is skipped with a warning, and the command exits 0 (it used to end in a ValueError)."""
    from mlbook.experiments import registry
    from mlbook.experiments.__main__ import main

    def breaks(config, device, progress):  # type: ignore[no-untyped-def]
        _replace_with_a_file(tmp_path / "results")
        return {"square": 4, "seeds": [0]}

    (tmp_path / "results").mkdir()
    registry.REGISTRY["toy_bad"].fn = breaks
    with pytest.warns(RuntimeWarning, match=r"could not write the record to") as rec:
        assert main(["run", "toy_bad", "--budget", "quick", "--device", "cpu"]) == 0
    assert json.loads(open(_rescued(rec)).read())["results"] == {"square": 4, "seeds": [0]}
    assert "warning: no PNG summary for toy_bad" in capsys.readouterr().err


def test_an_extended_run_whose_results_folder_breaks_is_still_saved(toy_records, tmp_path) -> None:
    from mlbook.experiments import registry
    from mlbook.records import machine_info

    @registry.register("toy_extend", "A toy", "nothing", {"quick": {"n": 2, "seeds": [0, 1]},
                                                          "full": {"n": 2, "seeds": [0, 1]}})
    def grows(config, device, progress):  # type: ignore[no-untyped-def]
        _replace_with_a_file(tmp_path / "results")
        return {"square": 4, "seeds": list(config["seeds"])}

    try:
        old = registry.make_record("toy_extend", "quick", {"n": 2, "seeds": [0]}, {"square": 4, "seeds": [0]},
                                   machine_info(torch.device("cpu")), 1.0, "made by hand", title="A toy")
        (tmp_path / "pkg" / "quick").mkdir(parents=True)
        (tmp_path / "pkg" / "quick" / "toy_extend.json").write_text(registry.record_text(old))
        (tmp_path / "results").mkdir()
        with pytest.warns(RuntimeWarning, match=r"could not write the record to .*toy_extend.json") as rec:
            record = registry.extend_experiment("toy_extend", "quick", "cpu")
        assert json.loads(open(_rescued(rec)).read())["results"] == record["results"] == {"square": 4, "seeds": [0, 1]}
    finally:
        registry.REGISTRY.pop("toy_extend", None)


def test_save_record_falls_back_to_the_working_folder_then_names_every_place_tried(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from mlbook import records

    blocked = tmp_path / "blocker"
    blocked.write_text("a file where a folder must go")
    record = {"name": "toy", "results": {"square": 4}}
    real_mkdtemp = records.tempfile.mkdtemp

    def no_system_temp(prefix=None, dir=None):  # type: ignore[no-untyped-def]
        if dir is None:
            raise PermissionError(13, "Permission denied", "/tmp")
        return real_mkdtemp(prefix=prefix, dir=dir)

    monkeypatch.setattr(records.tempfile, "mkdtemp", no_system_temp)
    monkeypatch.chdir(tmp_path)
    with pytest.warns(RuntimeWarning, match=rf"it was saved to {re.escape(str(tmp_path))}/mlbook-record-\S+/toy.json"):
        saved = records.save_record(record, blocked / "quick" / "toy.json")
    assert saved.parent.parent == tmp_path and json.loads(saved.read_text())["results"] == {"square": 4}

    monkeypatch.setattr(records.tempfile, "mkdtemp", lambda prefix=None, dir=None: (_ for _ in ()).throw(
        PermissionError(13, "Permission denied")))
    with pytest.raises(OSError, match=r"could not be saved anywhere; tried .*blocker/quick/toy.json \(NotADirectoryError"
                                      r".*; a new folder in .*PermissionError.*; a new folder in "
                                      rf"{re.escape(str(tmp_path))} \(PermissionError"):
        records.save_record(record, blocked / "quick" / "toy.json")


_BAD_CONFIG_VALUES = {
    "base 0, transformers 5 layout": ({**LLAMA31_V5, "rope_parameters": {**LLAMA31_ROPE, "rope_theta": 0}},
                                      ValueError, r"rope_parameters\['rope_theta'\] must be a finite number > 0, got 0"),
    "base 0 as rotary_emb_base": ({**{k: v for k, v in LLAMA31_V4.items() if k not in ("rope_theta", "rope_scaling")},
                                   "model_type": "gpt_neox", "rotary_emb_base": 0},
                                  ValueError, r"rope_theta must be a finite number > 0, got 0"),
    "rotary_emb_base on a Llama config": ({**LLAMA31_V4, "rotary_emb_base": 1e6}, ValueError,
                                          r"\['rotary_emb_base'\] for model_type='llama'.*does not read"),
    "trained length 512.5, transformers 5 layout": (
        {**LLAMA31_V5, "rope_parameters": {**LLAMA31_ROPE, "original_max_position_embeddings": 512.5}}, TypeError,
        r"rope_parameters\['original_max_position_embeddings'\] must be a whole number of tokens, got float \(512.5\)"),
    "trained length 512.5 at the top level": ({**LLAMA31_V4, "original_max_position_embeddings": 512.5}, TypeError,
                                              r"original_max_position_embeddings must be a whole number of tokens"),
    "a model name": ("meta-llama/Llama-3.1-8B", TypeError, r"got the string 'meta-llama/Llama-3.1-8B'"),
    "an int": (8, TypeError, r"got int \(8\)"),
}


@pytest.mark.parametrize("entry", ["rope_scaling_from_hf", "rope_options_from_hf", "rotary_from_config",
                                   "summarize_config"])
@pytest.mark.parametrize("case", list(_BAD_CONFIG_VALUES))
def test_every_config_reader_refuses_a_bad_value_by_its_key(case: str, entry: str) -> None:
    """The config-reader refusals above are checked at gpt_config_from_hf in 4.x's layout; these are the same
    values in 5's layout and at the top level, at each reader that reads them."""
    from mlbook.analysis.model_config import summarize_config
    from mlbook.analysis.probe import rotary_from_config
    from mlbook.transformer.hf import rope_options_from_hf, rope_scaling_from_hf

    reader = {"rope_scaling_from_hf": rope_scaling_from_hf, "rope_options_from_hf": rope_options_from_hf,
              "rotary_from_config": rotary_from_config, "summarize_config": summarize_config}[entry]
    config, exc, match = _BAD_CONFIG_VALUES[case]
    if entry == "summarize_config" and not isinstance(config, dict):
        match = rf"config must be a dict read from config.json, got {type(config).__name__}"
    with pytest.raises(exc, match=match):
        reader(config)


# ---------------------------------------------------------------------------
# Page 13's config readers (model-config helper): families and keys refused by name
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("config, match", [
    ({"model_type": "chatglm", "num_layers": 2, "rope_ratio": 50}, "model_type='chatglm'"),
    ({"model_type": "no_such_family", "num_hidden_layers": 2, "rope_theta": 1e4}, "model_type='no_such_family'"),
    ({"model_type": "gptj", "n_embd": 64, "n_head": 2, "n_layer": 2, "rotary_dim": 48}, "rotary_dim=48"),
    ({"model_type": "gptj", "n_embd": 64, "n_head": 2, "n_layer": 2, "rotary_dim": None}, "rotary_dim is null"),
    ({"model_type": "gptj", "n_embd": 64, "n_head": 2, "n_layer": 2, "rope_theta": 5e5}, "never reads"),
])
def test_page13_config_readers_refuse_by_name(config, match) -> None:
    from mlbook.transformer.hf import hf_rope_base

    with pytest.raises(ValueError, match=match):
        hf_rope_base(config)


def test_page13_indexer_rope_interleave_must_be_a_bool() -> None:
    from mlbook.transformer.hf import hf_indexer_rope_pairing

    with pytest.raises((TypeError, ValueError), match="indexer_rope_interleave"):
        hf_indexer_rope_pairing({"model_type": "glm_moe_dsa", "num_hidden_layers": 2, "indexer_rope_interleave": "yes"})


# ---------------------------------------------------------------------------
# Page 13, third review: layer patterns and class defaults refused by name
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("config, match", [
    ({"model_type": "llama", "num_hidden_layers": 2, "sliding_window": 128}, "builds no sliding layer from it"),
    ({"model_type": "cohere2_moe", "num_hidden_layers": 2}, "lists no layer_types"),
    ({"model_type": "gemma2", "num_hidden_layers": 2, "sliding_window_pattern": 3}, "does not read it"),
    ({"model_type": "exaone4", "num_hidden_layers": 2, "sliding_window_pattern": "LLLG"}, "written as letters"),
    ({"model_type": "exaone4", "num_hidden_layers": 2, "sliding_window": None}, "sliding_window is null"),
    ({"model_type": "gemma4_text", "num_hidden_layers": 2, "layer_types": ["full_attention", "sliding_attention"]},
     "forces the last layer"),
])
def test_page13_layer_patterns_refused_by_name(config, match) -> None:
    from mlbook.transformer.hf import hf_layer_types

    with pytest.raises(ValueError, match=match):
        hf_layer_types(config)


@pytest.mark.parametrize("config, match", [
    ({"model_type": "ministral3", "num_hidden_layers": 2}, "builds its own"),
    ({"model_type": "gpt_neox", "num_hidden_layers": 2, "rope_theta": 5e5}, "rotary_emb_base"),
    ({"model_type": "gemma3_text", "num_hidden_layers": 6, "rope_parameters": {"rope_type": "default",
                                                                                "rope_theta": 1e4}}, "one dict"),
    ({"model_type": "gemma3_text", "num_hidden_layers": 2}, "no head_dim and no hidden_size and no num_attention"),
])
def test_page13_class_rope_defaults_refused_by_name(config, match) -> None:
    from mlbook.transformer.hf import hf_rotary_dim

    with pytest.raises(ValueError, match=match):
        hf_rotary_dim(config)
