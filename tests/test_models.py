"""Attention, caches and tiny models: cached decoding equals the full forward pass, the sink cache
reproduces a forward over sinks + window at slot positions, and the readable and fused paths agree."""

from __future__ import annotations

import pytest
import torch

from mlbook.transformer.attention import MultiHeadAttention
from mlbook.transformer.cache import KVCache, SinkCache
from mlbook.transformer.models import GPT, POSITIONAL_SCHEMES, GPTConfig, T5Config, TinyT5
from mlbook.transformer.positional import RotaryEmbedding

ROPE_VARIANTS = [
    {},
    {"pairing": "interleaved"},
    {"scaling": "linear", "factor": 2.0},
    {"scaling": "ntk", "factor": 4.0},
    {"scaling": "yarn", "factor": 4.0},
    {"scaling": "llama3", "factor": 8.0},
]


def _tiny(positional: str, **kw) -> GPT:
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=50, d_model=32, n_heads=4, n_layers=2, max_len=64, positional=positional, **kw)
    return GPT(cfg).eval()


def _cached_logits(model: GPT, idx: torch.Tensor, prefill: int) -> torch.Tensor:
    caches = model.new_caches("kv", capacity=idx.shape[1])
    steps = [model(idx[:, :prefill], caches)]
    for t in range(prefill, idx.shape[1]):
        steps.append(model(idx[:, t : t + 1], caches))  # (B, 1, V) one new token at a time
    return torch.cat(steps, dim=1)  # (B, T, V)


@pytest.mark.parametrize("positional", POSITIONAL_SCHEMES)
def test_cached_generation_matches_full_forward(positional: str) -> None:
    model = _tiny(positional)
    idx = torch.randint(0, 50, (2, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(idx)  # (B, T, V)
        cached = _cached_logits(model, idx, prefill=7)
    assert cached.shape == full.shape
    torch.testing.assert_close(cached, full, atol=1e-4, rtol=0)


@pytest.mark.parametrize("rope", ROPE_VARIANTS, ids=lambda r: "-".join(f"{k}={v}" for k, v in r.items()) or "plain")
def test_cached_generation_matches_full_forward_rope_variants(rope: dict) -> None:
    model = _tiny("rope", rope=rope)
    idx = torch.randint(0, 50, (1, 33), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(_cached_logits(model, idx, prefill=1), model(idx), atol=1e-4, rtol=0)


def test_cache_positions_do_not_reset_during_decode() -> None:
    """The chapter's silent bug: restarting positions at 0 for each decoded token changes the logits."""
    model = _tiny("learned")
    idx = torch.randint(0, 50, (1, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full = model(idx)
        caches = model.new_caches("kv", capacity=12)
        model(idx[:, :11], caches)
        right = model(idx[:, 11:], caches)[:, -1]
        wrong = model(idx[:, 11:])[:, -1]  # no cache: the token is treated as position 0
    torch.testing.assert_close(right, full[:, -1], atol=1e-4, rtol=0)
    assert (wrong - full[:, -1]).abs().max() > 1e-3


def test_generate_greedy_equals_argmax_of_full_forward() -> None:
    model = _tiny("rope")
    prompt = torch.randint(0, 50, (2, 5), generator=torch.Generator().manual_seed(4))
    out = model.generate(prompt, 10, temperature=0)
    assert out.shape == (2, 15)
    with torch.no_grad():
        logits = model(out[:, :-1])  # the token at t+1 must be the argmax given tokens 0..t
    assert torch.equal(logits[:, 4:].argmax(-1), out[:, 5:])


@pytest.mark.parametrize("positional", ["rope", "alibi", "t5", "none"])
def test_attention_weights_path_matches_fused_path(positional: str) -> None:
    model = _tiny(positional)
    idx = torch.randint(0, 50, (2, 20), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        fused = model(idx)
        readable, weights = model(idx, return_attention=True)
    torch.testing.assert_close(readable, fused, atol=1e-5, rtol=0)
    assert len(weights) == 2 and weights[0].shape == (2, 4, 20, 20)
    torch.testing.assert_close(weights[0].sum(-1), torch.ones(2, 4, 20))
    assert torch.all(weights[0].triu(diagonal=1) == 0)  # causal: nothing above the diagonal


@pytest.mark.parametrize("use_rope", [True, False])
@pytest.mark.parametrize("n_sink", [0, 4])
def test_sink_cache_matches_full_forward_over_kept_tokens(use_rope: bool, n_sink: int) -> None:
    """Each streamed step equals a plain causal forward over (sinks + window) at slot positions 0..n-1."""
    torch.manual_seed(0)
    d_model, H, window = 32, 4, 6
    rotary = RotaryEmbedding(d_model // H) if use_rope else None
    attn = MultiHeadAttention(d_model, H, causal=True, rotary=rotary).eval()
    x = torch.randn(1, 30, d_model)
    cache = SinkCache(n_sink, window)
    with torch.no_grad():
        for t in range(30):
            step = attn(x[:, t : t + 1], cache=cache)  # (1, 1, d_model)
            kept = cache.kept_positions()
            assert len(kept) == min(t + 1, n_sink + window)
            assert kept[-1] == t and kept[: min(n_sink, t + 1)] == list(range(min(n_sink, t + 1)))
            reference = attn(x[:, kept])[:, -1:]  # full forward, positions 0..len-1
            torch.testing.assert_close(step, reference, atol=1e-5, rtol=0)


@pytest.mark.parametrize("positional", ["rope", "alibi", "t5"])
def test_sink_cache_one_layer_gpt_matches_forward_over_kept_tokens(positional: str) -> None:
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=40, d_model=32, n_heads=4, n_layers=1, max_len=16, positional=positional)).eval()
    idx = torch.randint(0, 40, (1, 50), generator=torch.Generator().manual_seed(6))
    caches = model.new_caches("sink", n_sink=4, window=8)
    with torch.no_grad():
        for t in range(50):
            step = model(idx[:, t : t + 1], caches)[:, -1]
            kept = caches[0].kept_positions()
            assert len(kept) <= 12  # slot positions 0..len-1 never leave the trained range (max_len 16)
            torch.testing.assert_close(step, model(idx[:, kept])[:, -1], atol=1e-4, rtol=0)


def test_sink_cache_refuses_absolute_encodings() -> None:
    model = _tiny("learned")
    with pytest.raises(ValueError, match="SinkCache assigns positions by cache slot"):
        model(torch.zeros(1, 1, dtype=torch.long), model.new_caches("sink", n_sink=2, window=4))


def test_kv_cache_capacity_error() -> None:
    cache = KVCache(capacity=4)
    cache.update(torch.zeros(1, 2, 3, 8), torch.zeros(1, 2, 3, 8))
    with pytest.raises(ValueError, match="capacity=4"):
        cache.update(torch.zeros(1, 2, 2, 8), torch.zeros(1, 2, 2, 8))


def test_learned_model_refuses_positions_past_max_len() -> None:
    model = _tiny("learned")
    with pytest.raises(ValueError, match="cannot extrapolate.*T_max = 64"):
        model(torch.zeros(1, 65, dtype=torch.long))


def test_t5_bias_is_shared_across_layers_of_each_stack() -> None:
    model = TinyT5(T5Config(vocab_size=20, d_model=32, n_heads=4))
    bias_tables = [n for n, _ in model.named_parameters() if "bias.table" in n]
    assert sorted(bias_tables) == ["dec_bias.table.weight", "enc_bias.table.weight"]
    src = torch.randint(0, 20, (2, 8))
    tgt = torch.randint(0, 20, (2, 5))
    assert model(src, tgt).shape == (2, 5, 20)
    # the decoder is causal: changing a later target token leaves earlier logits unchanged
    tgt2 = tgt.clone()
    tgt2[:, -1] = (tgt2[:, -1] + 1) % 20
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt)[:, :-1], model(src, tgt2)[:, :-1])
    assert model.generate(src, 6).shape == (2, 6)


def test_t5_relative_bias_runs_past_training_length_learned_does_not() -> None:
    t5 = TinyT5(T5Config(vocab_size=20, d_model=32, n_heads=4, max_len=8, positional="t5"))
    learned = TinyT5(T5Config(vocab_size=20, d_model=32, n_heads=4, max_len=8, positional="learned"))
    src = torch.randint(0, 20, (1, 16))
    assert t5(src, src).shape == (1, 16, 20)
    with pytest.raises(ValueError, match="cannot extrapolate"):
        learned(src, src)


def test_bf16_model_keeps_float32_angles() -> None:
    model = _tiny("rope").to(torch.bfloat16)
    assert model.rotary.inv_freq.dtype == torch.float32
    out = model(torch.randint(0, 50, (1, 8)))
    assert out.dtype == torch.bfloat16 and torch.isfinite(out.float()).all()
