"""What 2024-2026 models ship beside plain RoPE, in the tiny GPT: grouped-query attention, sliding-window
layers, partial rotation, p-RoPE (drop_lowest), NoPE layers in a RoPE stack, a local RoPE base.

Oracles: Hugging Face's Llama (GQA), Mistral (sliding window) and GPT-NeoX (partial rotation) on the
same weights or tables; the rest are properties that follow from the definitions."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from transformers import LlamaConfig, MistralConfig  # noqa: E402
from transformers.models.gpt_neox import modeling_gpt_neox  # noqa: E402

from mlbook.transformer.attention import MultiHeadAttention, causal_mask  # noqa: E402
from mlbook.transformer.models import GPT, GPTConfig  # noqa: E402
from mlbook.transformer.positional import RotaryEmbedding, frequency_ladder  # noqa: E402


def tiny(**changes) -> GPTConfig:
    base = dict(vocab_size=61, d_model=64, n_heads=4, n_layers=4, max_len=64, positional="rope")
    base.update(changes)
    return GPTConfig(**base)


def test_grouped_query_logits_match_hf_llama() -> None:
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=97, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                      num_hidden_layers=2, intermediate_size=96, max_position_embeddings=128,
                      tie_word_embeddings=False, initializer_range=0.1, attn_implementation="eager")
    hf = transformers.LlamaForCausalLM(cfg).eval()
    idx = torch.randint(0, 97, (2, 40))
    with torch.no_grad():
        ours = GPT.from_hf_llama(hf).eval()
        assert ours.blocks[0].attn.k_proj.weight.shape == (2 * 16, 64)  # two key/value heads of 16
        torch.testing.assert_close(ours(idx), hf(idx).logits, atol=2e-5, rtol=0)


def test_grouped_query_cache_holds_kv_heads_and_matches_full_forward() -> None:
    torch.manual_seed(1)
    model = GPT(tiny(n_kv_heads=1)).eval()
    idx = torch.randint(0, 61, (2, 20))
    with torch.no_grad():
        full = model(idx)
        caches = model.new_caches(capacity=20)
        step = torch.cat([model(idx[:, :12], caches), model(idx[:, 12:], caches)], dim=1)
    assert caches[0].k.shape[1] == 1  # multi-query: one key/value head is cached
    torch.testing.assert_close(step, full, atol=1e-5, rtol=0)


def test_sliding_window_logits_match_hf_mistral() -> None:
    torch.manual_seed(2)
    W = 8
    cfg = MistralConfig(vocab_size=97, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                        num_hidden_layers=2, intermediate_size=96, max_position_embeddings=128, sliding_window=W,
                        tie_word_embeddings=False, initializer_range=0.1, attn_implementation="eager")
    hf = transformers.MistralForCausalLM(cfg).eval()
    llama_cfg = LlamaConfig(**{k: v for k, v in cfg.to_dict().items() if k in LlamaConfig().to_dict() and k != "model_type"})
    shell = transformers.LlamaForCausalLM(llama_cfg)
    shell.load_state_dict(hf.state_dict())
    idx = torch.randint(0, 97, (1, 30))
    with torch.no_grad():
        ours = GPT.from_hf_llama(shell)
        c = ours.config.replace(layer_types=("sliding_attention",) * 2, sliding_window=W)
        windowed = GPT(c)
        windowed.load_state_dict(ours.state_dict())
        torch.testing.assert_close(windowed(idx), hf(idx).logits, atol=2e-5, rtol=0)
        assert (ours(idx) - hf(idx).logits).abs().max() > 1e-3  # the window matters at T = 30 > 8


def test_window_mask_keeps_self_and_previous_window_minus_one() -> None:
    m = causal_mask(6, 6, window=3)
    assert m[5].tolist() == [False, False, False, True, True, True]
    assert m.sum(-1).tolist() == [1, 2, 3, 3, 3, 3]
    with pytest.raises(ValueError, match="causal"):
        MultiHeadAttention(16, 2, causal=False, window=4)


@pytest.mark.parametrize("factor", [0.25, 0.5])
def test_partial_rotation_matches_gpt_neox(factor: float) -> None:
    d_head, T = 32, 12
    cfg = transformers.GPTNeoXConfig(hidden_size=4 * d_head, num_attention_heads=4, rotary_pct=factor,
                                     max_position_embeddings=64)
    hf_rope = modeling_gpt_neox.GPTNeoXRotaryEmbedding(cfg)
    q, k = torch.randn(2, 4, T, d_head), torch.randn(2, 4, T, d_head)
    pos = torch.arange(T)[None]
    cos, sin = hf_rope(q, pos)
    hf_q, hf_k = modeling_gpt_neox.apply_rotary_pos_emb(q, k, cos, sin)
    ours = RotaryEmbedding(d_head, partial_rotary_factor=factor)
    assert ours.rotary_dim == int(d_head * factor)
    torch.testing.assert_close(ours.rotate(q), hf_q, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(ours.rotate(k), hf_k, atol=1e-6, rtol=1e-6)
    assert torch.equal(ours.rotate(q)[..., ours.rotary_dim:], q[..., ours.rotary_dim:])


def test_drop_lowest_keeps_the_full_ladders_fast_pairs_and_freezes_the_slow_ones() -> None:
    d_head = 32
    full, p = RotaryEmbedding(d_head), RotaryEmbedding(d_head, drop_lowest=0.25)
    n_drop = 4  # a quarter of 16 pairs
    assert torch.equal(p.inv_freq[:-n_drop], frequency_ladder(d_head)[:-n_drop])
    assert torch.equal(p.inv_freq[-n_drop:], torch.zeros(n_drop))
    x = torch.randn(3, 20, d_head)
    turned = p.rotate(x, offset=7)
    slow = [i for i in range(16 - n_drop, 16)] + [16 + i for i in range(16 - n_drop, 16)]  # half layout
    assert torch.equal(turned[..., slow], x[..., slow])
    fast = [i for i in range(d_head) if i not in slow]
    torch.testing.assert_close(turned[..., fast], full.rotate(x, offset=7)[..., fast])


@pytest.mark.parametrize("bad, match", [
    (dict(partial_rotary_factor=0.03), "even and >= 2"), (dict(partial_rotary_factor=1.5), "partial_rotary_factor"),
    (dict(drop_lowest=1.0), "drop_lowest"), (dict(drop_lowest="a"), "drop_lowest"),
])
def test_bad_rotation_options_name_the_argument(bad: dict, match: str) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        RotaryEmbedding(32, **bad)


def test_all_nope_layers_equal_positional_none_on_the_same_weights() -> None:
    torch.manual_seed(3)
    hybrid = GPT(tiny(nope_layers=(0, 1, 2, 3))).eval()
    plain = GPT(tiny(positional="none")).eval()
    plain.load_state_dict(hybrid.state_dict())
    idx = torch.randint(0, 61, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(hybrid(idx), plain(idx), atol=0, rtol=0)
    assert [b.attn.rotary is None for b in GPT(tiny(nope_layers=(3,))).blocks] == [False, False, False, True]


def test_local_layers_take_the_local_base_and_no_scaling() -> None:
    c = tiny(layer_types=("sliding_attention", "full_attention") * 2, sliding_window=16, rope_local_base=10000.0,
             rope={"base": 1e6, "scaling": "linear", "factor": 8.0})
    model = GPT(c)
    local, glob = model.blocks[0].attn, model.blocks[1].attn
    assert local.window == 16 and glob.window is None
    torch.testing.assert_close(local.rotary.inv_freq, frequency_ladder(16, 10000.0))
    torch.testing.assert_close(glob.rotary.inv_freq, frequency_ladder(16, 1e6) / 8)


@pytest.mark.parametrize("bad, match", [
    (dict(n_kv_heads=3), "multiple of n_kv_heads"), (dict(nope_layers=(4,)), "layers are 0 .. 3"),
    (dict(nope_layers=(1,), positional="alibi"), "needs positional='rope'"),
    (dict(layer_types=("full_attention",)), "one of"), (dict(layer_types=("sliding_attention",) * 4), "sliding_window"),
    (dict(sliding_window=8), "ignored"), (dict(layer_types=("local",) * 4, sliding_window=8), "layer_types entry"),
    (dict(rope_local_base=1e4), "sliding"),
])
def test_bad_layer_settings_are_refused_with_the_argument(bad: dict, match: str) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        tiny(**bad)
