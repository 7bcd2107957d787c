"""Experiments 4-6 (t5_length, sinks, passkey): the measurements compute what they claim, at tiny sizes."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

from mlbook.experiments import exp_passkey, exp_sinks, exp_t5_length
from mlbook.experiments.data import TOKENIZER, PasskeyTask
from mlbook.experiments.registry import REGISTRY
from mlbook.transformer.models import GPT, GPTConfig


def _gpt(n_layers: int = 1, positional: str = "rope", seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=TOKENIZER.vocab_size, d_model=32, n_heads=2, n_layers=n_layers, max_len=16,
                         positional=positional)).eval()


def test_the_three_experiments_are_registered_with_both_budgets() -> None:
    for name in ("t5_length", "sinks", "passkey"):
        assert set(REGISTRY[name].configs) == {"quick", "full"}


# -- sinks -----------------------------------------------------------------------------------


def test_full_cache_streaming_loss_equals_the_teacher_forced_loss() -> None:
    model = _gpt(n_layers=2)
    x = torch.randint(0, TOKENIZER.vocab_size, (3, 20))
    streamed = exp_sinks.stream_losses(model, x, "full", window=6, n_sink=2)  # (3, 19)
    with torch.no_grad():
        logits = model(x[:, :-1])
    direct = F.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="none")  # (3, 19)
    torch.testing.assert_close(streamed, direct, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("kind, n_sink", [("sink", 2), ("window", 0)])
def test_windowed_streaming_keeps_the_sinks_and_uses_slot_positions(kind: str, n_sink: int) -> None:
    # One layer: the cached keys/values depend on their own token only, so the streamed loss at
    # step t must equal a fresh forward over the kept tokens, placed at positions 0, 1, 2, ... (slots).
    model = _gpt(n_layers=1)
    window, sinks = 6, 2  # SinkCache(2, 6) for "sink"; SinkCache(0, 8) for "window": both hold 8
    x = torch.randint(0, TOKENIZER.vocab_size, (2, 30))
    streamed = exp_sinks.stream_losses(model, x, kind, window=window, n_sink=sinks)  # (2, 29)
    keep_recent = window + sinks - n_sink
    for t in (10, 20, 28):
        kept = list(range(n_sink)) + list(range(t - keep_recent + 1, t + 1))
        assert len(kept) == window + sinks
        with torch.no_grad():
            last = model(x[:, kept])[:, -1]  # (2, V)
        expected = F.cross_entropy(last, x[:, t + 1], reduction="none")
        torch.testing.assert_close(streamed[:, t], expected, atol=1e-4, rtol=1e-4)
    # and past the window the two kinds really differ (the sinks are what is kept)
    other = exp_sinks.stream_losses(model, x, "window" if kind == "sink" else "sink", window=window, n_sink=sinks)
    assert not torch.allclose(streamed[:, 10:], other[:, 10:])


def test_sink_mass_of_uniform_attention_is_the_uniform_baseline() -> None:
    model = _gpt(n_layers=2)
    with torch.no_grad():
        for block in model.blocks:  # q = 0 makes every score 0: uniform over the visible keys
            block.attn.q_proj.weight.zero_()
    mass = exp_sinks.sink_mass(model, torch.randint(0, TOKENIZER.vocab_size, (2, 12)))
    assert mass["per_layer"] == pytest.approx([mass["uniform_baseline"]] * 2, abs=1e-5)
    assert mass["per_query"][0][:3] == pytest.approx([1.0, 0.5, 1 / 3], abs=1e-5)


def test_truncated_cache_keeps_absolute_positions_and_drops_only_the_asked_slots() -> None:
    model = _gpt(n_layers=2)
    x = torch.randint(0, TOKENIZER.vocab_size, (2, 14))
    intact = exp_sinks.truncation_losses(model, x, prefix=6, drop=[])
    with torch.no_grad():
        logits = model(x[:, :-1])[:, 6:]  # predicts tokens 7..13, as the intact cached run does
    assert intact == pytest.approx(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 7:].reshape(-1)).item(), abs=1e-5)
    cache = exp_sinks.TruncatedKVCache(20)
    k = torch.randn(1, 2, 6, 16)
    cache.update(k, k)
    cache.drop([0])
    assert cache.length == 6 and cache.k.shape[2] == 5 and torch.equal(cache.k, k[:, :, 1:])
    assert exp_sinks.truncation_losses(model, x, prefix=6, drop=[0]) != pytest.approx(intact, abs=1e-6)


# -- t5_length -------------------------------------------------------------------------------


_T5 = {**exp_t5_length._QUICK, "model": {"d_model": 16, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1},
       "n_eval": 4}


def test_learned_positions_report_that_they_cannot_run_at_16_instead_of_crashing() -> None:
    gen = torch.Generator().manual_seed(0)
    cpu = torch.device("cpu")
    short = exp_t5_length.evaluate(exp_t5_length.build_model("learned", _T5), 16, _T5, gen, cpu)
    assert short["runs"] is False and "cannot extrapolate" in short["reason"]
    assert exp_t5_length.evaluate(exp_t5_length.build_model("learned", _T5), 8, _T5, gen, cpu)["runs"] is True
    wide = exp_t5_length.evaluate(exp_t5_length.build_model("learned16", _T5), 16, _T5, gen, cpu)
    assert wide["runs"] is True and len(wide["per_position"]) == 16
    assert wide["exact_match"] <= wide["token_accuracy"] <= 1.0


def test_reverse_task_and_bucket_table() -> None:
    src, tgt = exp_t5_length.reverse_batch(5, 8, 16, torch.Generator().manual_seed(0))
    assert torch.equal(tgt, src.flip(1)) and int(src.min()) >= 1 and int(src.max()) <= 16  # 0 is BOS
    default = exp_t5_length.bucket_table(32, 128)
    assert default["decoder"]["past"]["bucket"][:16] == list(range(16))  # causal: 16 exact buckets
    assert default["decoder"]["past"]["trained"] == [True] * 8 + [False] * 8  # offsets 8..15 never trained
    assert not any(default["encoder"]["past"]["trained"][8:])
    tail = exp_t5_length.bucket_table(8, 8)
    for rows in (tail["encoder"]["past"], tail["encoder"]["future"], tail["decoder"]["past"]):
        assert all(rows["trained"])  # every offset up to 15 shares a bucket trained at length 8


# -- passkey ---------------------------------------------------------------------------------


def test_passkey_accuracy_is_computed_on_exactly_the_key_digits() -> None:
    task = PasskeyTask()
    x, y = task.batch(3, 96, random.Random(0))  # (3, 95)
    V = TOKENIZER.vocab_size
    logits = torch.zeros(*y.shape, V)
    wrong = (x + 1) % V  # wrong everywhere else: must not matter
    logits.scatter_(2, wrong[..., None], 1.0)
    scored = y != -100
    logits[scored] = F.one_hot(y[scored], V).float() * 5
    all_right, per_digit = exp_passkey.digit_accuracy(logits, y)
    assert all_right.tolist() == [1.0, 1.0, 1.0] and per_digit.shape == (3, task.n_digits)
    rows, cols = scored.nonzero(as_tuple=True)
    last_digit_of_row1 = (rows == 1).nonzero()[-1].item()
    logits[1, cols[last_digit_of_row1]] = 0.0  # row 1 now gets its last digit wrong (argmax 0)
    all_right, per_digit = exp_passkey.digit_accuracy(logits, y)
    assert all_right.tolist() == [1.0, 0.0, 1.0]
    assert per_digit[1].mean().item() == pytest.approx((task.n_digits - 1) / task.n_digits)


def test_scaled_rope_models_share_the_trained_weights() -> None:
    cfg = {**exp_passkey._QUICK, "model": {"d_model": 16, "n_heads": 2, "n_layers": 1}, "train_len": 32}
    trained = {"rope": exp_passkey.build_model("rope", cfg), "alibi": exp_passkey.build_model("alibi", cfg)}
    x = torch.randint(0, TOKENIZER.vocab_size, (1, 32))
    pi = exp_passkey.method_model("rope_pi", trained, 32, cfg)  # s = 1 at the trained length: identical
    with torch.no_grad():
        torch.testing.assert_close(pi(x), trained["rope"](x))
    pi4 = exp_passkey.method_model("rope_pi", trained, 128, cfg)
    assert pi4.rotary.factor == 4.0 and pi4.rotary.scaling == "linear"
    assert torch.equal(pi4.lm_head.weight, trained["rope"].lm_head.weight)
