"""Tests for the 2026 interview numbers in mlbook.analysis.interview.

Oracles: transformers' Llama4TextAttention (the query scale its NoPE layers apply, captured on a
tiny random layer), torch.softmax for the weight of the best key, and the sinusoidal and rotary
definitions for a document moved to later positions.
"""

from __future__ import annotations

import math

import pytest
import torch

from mlbook.analysis import interview as I

transformers = pytest.importorskip("transformers")


def test_nope_query_scale_matches_transformers_llama4() -> None:
    from transformers.models.llama4 import modeling_llama4 as M

    cfg = transformers.Llama4TextConfig(vocab_size=16, hidden_size=16, intermediate_size=32, intermediate_size_mlp=32,
                                        num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                                        no_rope_layers=[0], floor_scale=4, attn_scale=0.25,
                                        attn_temperature_tuning=True, num_local_experts=2)
    cfg._attn_implementation = "eager"
    attn = M.Llama4TextAttention(cfg, layer_idx=0).eval()
    assert not attn.use_rope
    T = 20
    h = torch.randn(1, T, 16)
    seen = {}

    def capture(module, query, key, value, *args, **kwargs):
        seen["q"] = query  # (1, H, T, d_head), after the temperature
        return torch.zeros(1, T, 2, 8), None

    original = M.eager_attention_forward
    M.eager_attention_forward = capture
    try:
        with torch.no_grad():
            attn(h, position_embeddings=None, attention_mask=None, cache_position=torch.arange(T))
    finally:
        M.eager_attention_forward = original
    raw = attn.q_proj(h).view(1, T, 2, 8).transpose(1, 2)  # (1, H, T, d_head) before the temperature
    hf_scale = (seen["q"] / raw)[0, 0, :, 0]  # (T,)
    ours = torch.tensor([I.nope_query_scale(p, floor_scale=4, attn_scale=0.25) for p in range(T)])
    torch.testing.assert_close(hf_scale, ours, rtol=1e-5, atol=0)


def test_nope_query_scale_scout_values() -> None:
    assert I.nope_query_scale(8190) == 1.0 and I.nope_query_scale(8191) == pytest.approx(1 + 0.1 * math.log(2))
    assert I.nope_query_scale(131071) == pytest.approx(1 + 0.1 * math.log(17))
    with pytest.raises(ValueError, match="floor_scale must be"):
        I.nope_query_scale(0, floor_scale=0)


def test_top_weight_against_softmax() -> None:
    for n in (1, 2, 1024, 131072):
        logits = torch.zeros(n, dtype=torch.float64)
        logits[0] = 5.0
        assert I.top_weight(5.0, n) == pytest.approx(float(torch.softmax(logits, 0)[0]), rel=1e-12)
        if n >= 1024:
            s = math.log(n) / math.log(1024)
            assert I.top_weight(5.0, n, log_scale_from=1024) == pytest.approx(
                float(torch.softmax(logits * s, 0)[0]), rel=1e-12)
    assert I.top_weight(5.0, 1024, log_scale_from=1024) == I.top_weight(5.0, 1024)
    # a gap of ln(n0) nats or more: bounded away from 0 as n grows; less: falls, but slower than 1/n
    big = [I.top_weight(math.log(1024) + 0.5, n, log_scale_from=1024) for n in (2**10, 2**17, 2**24)]
    assert big[0] < big[1] < big[2]
    with pytest.raises(ValueError, match="n \\(8\\) must be >= log_scale_from \\(1024\\)"):
        I.top_weight(5.0, 8, log_scale_from=1024)
    with pytest.raises(ValueError, match="gap must be a finite number of nats >= 0"):
        I.top_weight(-1.0, 8)


def test_document_shift_rope_is_relative_absolute_is_not() -> None:
    r = I.document_shift(3000)
    assert r.rope < 1e-4 * r.score_scale  # float32 angle rounding only
    assert r.absolute > 0.5 * r.score_scale  # added sinusoids change the scores outright
    assert I.document_shift(30).rope < r.rope  # smaller angles, smaller rounding
    assert "RoPE" in repr(r) and "3,000" in repr(r)


def test_sink_correction_error_is_the_cast_not_the_formula() -> None:
    # in float64 the factor exp(lse - logsumexp(lse, s)) is sigma(lse - s): the identity is exact
    assert I.sink_correction_error(3.0, dtype=torch.float64).worst_relative < 1e-12
    low = I.sink_correction_error(3.0, dtype=torch.bfloat16)
    assert low.float32_relative < 1e-5
    # bf16 keeps 8 significant bits: the rounding of lse (up to 2^-8 relative) shows up in the factor
    assert 100 * low.float32_relative < low.worst_relative < 0.05
    assert I.sink_correction_error(3.0, dtype=torch.float16).worst_relative < low.worst_relative
    with pytest.raises(ValueError, match="sink must be a finite logit"):
        I.sink_correction_error(float("nan"))
    with pytest.raises(TypeError, match="dtype must be a floating torch.dtype"):
        I.sink_correction_error(3.0, dtype=torch.int32)


def test_sink_factor_matches_softmax_with_a_sink_column() -> None:
    # oracle: the softmax over [scores, s] against the softmax over the scores times sigma(lse - s)
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(12, generator=g, dtype=torch.float64) * 3
    s = 2.5
    with_sink = torch.softmax(torch.cat([scores, torch.tensor([s], dtype=torch.float64)]), 0)[:-1]
    rescaled = torch.softmax(scores, 0) * torch.sigmoid(torch.logsumexp(scores, 0) - s)
    torch.testing.assert_close(rescaled, with_sink, rtol=1e-12, atol=0)


def test_context_parallel_needs_global_positions() -> None:
    r = I.context_parallel_check(T=32, n_ranks=4, d_head=16)
    assert r.global_error < 1e-12
    assert r.local_error > 0.1 * r.score_scale
    total = 32 * 33 // 2
    assert sum(r.pairs_contiguous) == sum(r.pairs_balanced) == total
    assert len(set(r.pairs_balanced)) == 1 and max(r.pairs_contiguous) > 3 * min(r.pairs_contiguous)
    one_rank = I.context_parallel_check(T=8, n_ranks=1, d_head=16)  # a single rank: local == global
    assert one_rank.local_error < 1e-12


def test_context_parallel_positions_cover_the_sequence_once() -> None:
    for balanced in (True, False):
        shards = I.context_parallel_positions(48, 3, balanced)
        assert torch.equal(torch.sort(torch.cat(shards)).values, torch.arange(48))
    assert I.context_parallel_positions(16, 2)[0].tolist() == [0, 1, 2, 3, 12, 13, 14, 15]
    with pytest.raises(ValueError, match="T \\(10\\) must be divisible by 8"):
        I.context_parallel_positions(10, 4)


def test_stale_rotation_error_grows_with_the_rescale() -> None:
    near, far = I.stale_rotation_error(4097), I.stale_rotation_error(8192)
    assert 0 < near.score_error < far.score_error
    assert near.pairs_off <= far.pairs_off <= far.n_pairs == 64
    # Hugging Face's dynamic base: base * (s n / L - (s - 1)) ** (d / (d - 2))
    assert far.new_base == pytest.approx(10000.0 * (4 * 8192 / 4096 - 3) ** (128 / 126), rel=1e-9)
    with pytest.raises(ValueError, match="seq_len"):
        I.stale_rotation_error(4096)


def test_fp8_key_error_rounds_once_then_twice() -> None:
    r = I.fp8_key_error(n_keys=512, d_head=64, shift=100)
    # e4m3 has 3 mantissa bits: a relative rounding error of at most 2^-4 for values in its normal range
    assert 0.005 < r.fresh < 2**-4
    assert r.moved > 1.2 * r.fresh  # a second quantisation after the re-rotation
    assert abs(r.score_fresh - r.fresh) < 0.5 * r.fresh  # random queries: the score error tracks the key error
    with pytest.raises(ValueError, match="shift"):
        I.fp8_key_error(shift=0)


def test_fp8_key_error_fixed_scale_rounds_alike_and_refuses_saturation() -> None:
    # e4m3 is a float format: any scale that keeps the keys in range rounds by the same relative step
    auto, unit = I.fp8_key_error(n_keys=512, d_head=64, shift=100), I.fp8_key_error(n_keys=512, d_head=64, shift=100,
                                                                                     scale=1.0)
    assert abs(unit.fresh - auto.fresh) < 0.2 * auto.fresh and unit.scale == 1.0 and auto.scale is None
    assert "fixed scale 1" in repr(unit) and "amax / 448" in repr(auto)
    with pytest.raises(ValueError, match="past e4m3's largest value, 448"):
        I.fp8_key_error(n_keys=512, d_head=64, shift=100, scale=1e-3)  # unit-variance keys / 1e-3 > 448
    with pytest.raises(ValueError, match="scale must be a finite number > 0"):
        I.fp8_key_error(scale=0.0)


def test_rope_tables_match_rotary_embedding_and_the_complex_rotation() -> None:
    from mlbook.transformer import positional as P

    pos = torch.arange(37)
    cos, sin = I.rope_tables(pos, 64)
    ref_cos, ref_sin = P.RotaryEmbedding(64)(37)  # the library's float32 tables from position 0
    torch.testing.assert_close(cos.float(), ref_cos, rtol=0, atol=2e-5)
    torch.testing.assert_close(sin.float(), ref_sin, rtol=0, atol=2e-5)
    # oracle: pair i of a key, read as x_i + i x_{i+32}, is multiplied by e^{i n theta_i}
    k = torch.randn(37, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    rotated = P.apply_rotary(k, cos, sin)
    theta = P.frequency_ladder(64).double()
    z = torch.complex(k[:, :32], k[:, 32:]) * torch.exp(1j * pos.double()[:, None] * theta)
    torch.testing.assert_close(rotated, torch.cat([z.real, z.imag], dim=-1), rtol=0, atol=1e-12)
    # a shift is one more rotation: R_delta R_n = R_{n + delta}, to float64 rounding
    moved = P.apply_rotary(rotated, *I.rope_tables(torch.full((37,), 2900), 64))
    torch.testing.assert_close(moved, P.apply_rotary(k, *I.rope_tables(pos + 2900, 64)), rtol=0, atol=1e-12)
    with pytest.raises(TypeError, match="positions must be a 1-D integer tensor"):
        I.rope_tables(torch.arange(4.0), 64)
    with pytest.raises(ValueError, match="d_head"):
        I.rope_tables(pos, 63)


def test_interleaved_axes_match_transformers_apply_interleaved_mrope() -> None:
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5TextRotaryEmbedding
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRotaryEmbedding

    for cls, section, pairs in ((Qwen3VLTextRotaryEmbedding, [24, 20, 20], 64),
                                (Qwen3_5TextRotaryEmbedding, [11, 11, 10], 32)):
        freqs = torch.arange(3.0)[:, None, None, None].expand(3, 1, 2, pairs).clone()  # axis a's angles = a
        hf = cls.apply_interleaved_mrope(None, freqs, section)[0, 0]  # (pairs,) the axis each slot took
        assert torch.equal(I.interleaved_axes(section, pairs), hf.long()), cls.__name__
    axes = I.interleaved_axes((24, 20, 20), 64)
    assert [int((axes == a).sum()) for a in range(3)] == [24, 20, 20]
    assert torch.nonzero(axes == 2).flatten().tolist() == list(range(2, 60, 3))
    with pytest.raises(ValueError, match="must add up to pairs"):
        I.interleaved_axes((24, 20, 20), 32)
    with pytest.raises(ValueError, match="section must be three pair counts"):
        I.interleaved_axes((24, 20), 44)


def test_fp8_key_error_with_the_query_rounded_too() -> None:
    # vLLM's query_quant: the query rounded to e4m3 as well. Two independent roundings of about the same
    # relative size add in quadrature, so the score error grows by about sqrt(2); the keys are unchanged.
    for scale in (None, 1.0):
        keys = I.fp8_key_error(n_keys=512, d_head=64, shift=100, scale=scale)
        both = I.fp8_key_error(n_keys=512, d_head=64, shift=100, scale=scale, quantise_query=True)
        assert both.fresh == keys.fresh and both.moved == keys.moved and both.query and not keys.query
        assert both.score_fresh == pytest.approx(math.hypot(keys.score_fresh, keys.fresh), rel=0.15)
        assert both.score_fresh > 1.2 * keys.score_fresh
        assert "query and keys" in repr(both) and "keys only" in repr(keys)
    with pytest.raises(TypeError, match="quantise_query must be True or False"):
        I.fp8_key_error(quantise_query="yes")


def test_fp8_key_error_query_path_matches_a_direct_e4m3_product() -> None:
    # Oracle: with a fixed scale of 1 the kernel's inputs are q.to(e4m3) and k.to(e4m3); the score error
    # is that product against the exact one, for any queries and keys in e4m3's range.
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(64, 32, generator=g, dtype=torch.float64), torch.randn(256, 32, generator=g, dtype=torch.float64)
    want = q @ k.T
    got = q.to(torch.float8_e4m3fn).double() @ k.to(torch.float8_e4m3fn).double().T
    direct = float((got - want).pow(2).mean().sqrt() / want.pow(2).mean().sqrt())
    ours = I.fp8_key_error(n_keys=256, d_head=32, shift=7, scale=1.0, quantise_query=True)
    assert ours.score_fresh == pytest.approx(direct, rel=0.2)  # same statistics, other random vectors


def test_draft_rollback_check_llama_crop_restores_the_cache() -> None:
    r = I.draft_rollback_check(I.tiny_causal_lm("llama"))
    assert r.cache_layers == ("DynamicLayer", "DynamicLayer") and r.crop_refused is None
    assert r.cropped < 1e-5 and r.never_fed < 1e-5  # cropping is the same as never having fed the drafts
    assert r.not_cropped > 1e-2  # the next token lands after the rejected drafts and attends to them
    with pytest.raises(ValueError, match="accepted \\(4\\) must be below n_draft \\(4\\)"):
        I.draft_rollback_check(I.tiny_causal_lm("llama"), accepted=4)
    with pytest.raises(ValueError, match="kind must be one of"):
        I.tiny_causal_lm("mamba")


@pytest.mark.skipif(int(transformers.__version__.split(".")[0]) < 5, reason="the linear-attention cache of 5.x")
def test_draft_rollback_check_hybrid_crop_leaves_the_recurrent_state() -> None:
    model = I.tiny_causal_lm("qwen3_next")
    r = I.draft_rollback_check(model)
    assert "LinearAttentionLayer" in r.cache_layers and "DynamicLayer" in r.cache_layers
    assert r.never_fed < 1e-5  # the cache itself is exact when nothing is rejected
    assert r.cropped > 1e-3  # crop trims the convolution window; the state still holds the rejected drafts
    assert r.crop_refused is not None and "past states" in r.crop_refused
    # The cause, read off the cache: after the crop the convolution window equals that of a cache that never
    # saw the rejected drafts, and the recurrent state does not.
    g = torch.Generator().manual_seed(1)
    prompt, draft = torch.randint(0, 97, (1, 6), generator=g), torch.randint(0, 97, (1, 4), generator=g)
    caches = []
    with torch.no_grad():
        for feed in (draft, draft[:, :2]):
            cache = transformers.DynamicCache(config=model.config)
            cache.activate_past_recording()
            model(prompt, past_key_values=cache)
            model(feed, past_key_values=cache)
            cache.crop(-(feed.shape[1] - 2))
            caches.append(cache.layers[0])
    cropped, fresh = caches
    torch.testing.assert_close(cropped.conv_states[0], fresh.conv_states[0])
    assert (cropped.recurrent_states[0] - fresh.recurrent_states[0]).abs().max() > 1e-4


def test_check_report_plain_text_and_collapsed_html(capsys: pytest.CaptureFixture[str]) -> None:
    with I.check_report("Check: a < b"):
        print("x = 1 < 2")
        print("y = 3")
    assert capsys.readouterr().out == "x = 1 < 2\ny = 3\n"  # outside IPython: the text itself
    report = I.CheckReport("x = 1 < 2", "Check")
    assert repr(report) == "x = 1 < 2"
    assert report._repr_html_() == "<details><summary>Check</summary><pre>x = 1 &lt; 2</pre></details>"
    with pytest.raises(ZeroDivisionError):
        with I.check_report():
            print("before the error")
            1 / 0
    assert capsys.readouterr().out == "before the error\n"  # what was printed is not lost
    with pytest.raises(TypeError, match="summary"):
        I.CheckReport("x", "")


def _passkey_record(zero_far: list[float], tuned_far: list[float]) -> dict:
    """A two-length, two-depth passkey record: accuracy[length][depth] per seed; depth 0 varies, depth 1 is 1."""
    def seeds(far: list[float]) -> list[dict]:
        return [{"seed": s, "accuracy": [[1.0, 1.0], [a, 1.0]], "loss": [1.0, 1.1]} for s, a in enumerate(far)]
    return {"results": {"methods": ["alibi"], "phases": ["zero_shot", "finetuned"], "lengths": [128, 512],
                        "depths": [0.0, 1.0], "labels": {"alibi": "ALiBi"},
                        "results": {"zero_shot": {"alibi": seeds(zero_far)}, "finetuned": {"alibi": seeds(tuned_far)}}}}


def test_passkey_reading_names_the_seeds_whose_farthest_key_is_lost() -> None:
    record = _passkey_record([1.0, 0.0, 1.0, 0.25, 1.0], [1.0] * 5)
    reading = I.passkey_reading(record, "alibi")
    assert reading.per_seed["zero_shot"] == [1.0, 0.5, 1.0, 0.625, 1.0]  # the mean of the two depths
    assert reading.far_lost("zero_shot") == [1, 3] and reading.far_lost("finetuned") == []
    assert reading.change["zero_shot"]["mean"] == pytest.approx((0.0 - 0.5 + 0.0 - 0.375 + 0.0) / 5)
    verdict = reading.verdict()
    assert verdict.startswith("ALiBi at 4x its training length")
    d = reading.change["zero_shot"]
    assert d["verdict"] == "indistinguishable"
    ci = f"[{d['ci95'][0]:.2f}, {d['ci95'][1]:.2f}]"
    assert (f"zero-shot: cannot tell the average's change from zero at 5 seeds ({d['mean']:+.2f} {ci}), "
            "the farthest key lost on seeds 1 and 3") in verdict
    assert "after the fine-tune: the average the same on every seed, the farthest key kept on every seed" in verdict
    assert "not lower" not in verdict  # the rule's words: an interval that spans 0 is "cannot tell", not "no drop"
    assert "-0.00" not in repr(reading) and "+0.00" not in repr(reading)


def test_passkey_reading_says_lower_when_every_seed_drops() -> None:
    reading = I.passkey_reading(_passkey_record([0.0, 0.1, 0.0, 0.2, 0.05], [1.0] * 5))
    assert reading.change["zero_shot"]["verdict"] == "lower"
    assert "zero-shot: lower on average (" in reading.verdict()
    assert "the farthest key lost on seeds 0, 1, 2, 3 and 4" in reading.verdict()


def test_passkey_reading_refuses_an_unknown_method_and_a_non_record() -> None:
    with pytest.raises(ValueError, match="method must be one of"):
        I.passkey_reading(_passkey_record([1.0] * 5, [1.0] * 5), "t5")
    with pytest.raises(ValueError, match="record must be a passkey record"):
        I.passkey_reading({"name": "passkey"})


def test_rotation_precision_bf16_angles_match_the_angle_error_they_imply() -> None:
    from mlbook.analysis.rope import angle_error

    p = I.rotation_precision(n_keys=2048, d_head=64)
    # a pair turned by a wrong angle e moves by 2 sin(e / 2) of its length: the rms over pairs and positions
    err = angle_error(torch.arange(2048), 64, 10000.0, "bfloat16")  # (T, d/2), wrapped to [0, pi]
    implied = float((4 * torch.sin(err / 2) ** 2).mean().sqrt())
    assert p.angles_bf16 == pytest.approx(implied, rel=0.05)
    # a bf16 table rounds cos and sin by at most 2^-9 relative: well under a percent, far under the angle error
    assert 0 < p.table_bf16 < 2 ** -8 < p.angles_bf16 / 10
    assert p.table_bf16 < p.output_bf16 < 2 ** -7


@pytest.mark.parametrize("kwargs, name", [({"n_keys": 1}, "n_keys"), ({"d_head": 7}, "d_head"), ({"base": 0.0}, "base")])
def test_rotation_precision_refuses_bad_input_by_name(kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        I.rotation_precision(**kwargs)
