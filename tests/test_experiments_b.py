"""Experiments 4-6 (t5_length, sinks, passkey): the measurements compute what they claim, at tiny
sizes; the records keep every seed; the figures of mlbook.viz.streaming build from them."""

from __future__ import annotations

import copy
import random

import pytest
import torch
import torch.nn.functional as F

from mlbook.experiments import exp_passkey, exp_sinks, exp_t5_length, registry
from mlbook.experiments.common import TUNED_BETAS, build_gpt, pm
from mlbook.experiments.data import TOKENIZER, PasskeyTask
from mlbook.transformer.models import GPT, GPTConfig
from mlbook.viz import grid_slider
from mlbook.viz import streaming as V

CPU = torch.device("cpu")
TINY_TRAIN = {"steps": 3, "batch_size": 2, "lr": 3e-3, "warmup_steps": 1}


def _gpt(n_layers: int = 1, positional: str = "rope", seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=TOKENIZER.vocab_size + 1, d_model=32, n_heads=2, n_layers=n_layers, max_len=16,
                         positional=positional)).eval()


def _cfg(name: str, budget: str = "quick", **changes: object) -> dict:
    registry.get_experiment(name)
    cfg = copy.deepcopy(registry.REGISTRY[name].configs[budget])
    cfg.update(changes)
    return cfg


def _record(name: str, cfg: dict, results: dict) -> dict:
    return {"name": name, "budget": "quick", "config": cfg, "results": results}


@pytest.fixture(scope="module")
def t5_record() -> dict:
    cfg = _cfg("t5_length", "full", seeds=[0, 1], n_eval=8, train=TINY_TRAIN,
               model={"d_model": 16, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1})
    return _record("t5_length", cfg, exp_t5_length.run(cfg, CPU, False))


@pytest.fixture(scope="module")
def sinks_record() -> dict:
    cfg = _cfg("sinks", "full", seeds=[0, 1], train_len=16, mass_windows=4, train=TINY_TRAIN,
               model={"d_model": 16, "n_heads": 2, "n_layers": 2},
               stream={"n_streams": 2, "length": 40, "window": 16, "segment": 8}, truncate={"n_windows": 4, "prefix": 6})
    return _record("sinks", cfg, exp_sinks.run(cfg, CPU, False))


@pytest.fixture(scope="module")
def passkey_record() -> dict:
    cfg = _cfg("passkey", "full", seeds=[0, 1], train_len=64, lengths=[64, 128, 256], depths=[0.0, 1.0], n_eval=2,
               loss_windows=2, train=TINY_TRAIN, finetune={"steps": 1, "batch_size": 1, "lr": 1e-3, "warmup_steps": 1},
               model={"d_model": 16, "n_heads": 2, "n_layers": 1})
    return _record("passkey", cfg, exp_passkey.run(cfg, CPU, False))


def test_the_three_experiments_are_registered_with_both_budgets_and_five_full_seeds() -> None:
    for name in ("t5_length", "sinks", "passkey"):
        registry.get_experiment(name)
        assert set(registry.REGISTRY[name].configs) == {"quick", "full"}
        assert len(registry.REGISTRY[name].configs["full"]["seeds"]) >= 5


# -- sinks -----------------------------------------------------------------------------------


def test_full_cache_streaming_loss_equals_the_teacher_forced_loss() -> None:
    model = _gpt(n_layers=2)
    x = torch.randint(0, TOKENIZER.vocab_size, (3, 20))
    streamed = exp_sinks.stream_losses(model, x, "full", window=8)  # (3, 19)
    with torch.no_grad():
        logits = model(x[:, :-1])
    direct = F.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="none")  # (3, 19)
    torch.testing.assert_close(streamed, direct, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("kind, n_sink", [("sink4", 4), ("sink1", 1), ("window", 0)])
def test_windowed_streaming_keeps_the_sinks_and_uses_slot_positions(kind: str, n_sink: int) -> None:
    # One layer: the cached keys/values depend on their own token only, so the streamed loss at
    # step t must equal a fresh forward over the kept tokens, placed at positions 0, 1, 2, ... (slots).
    model = _gpt(n_layers=1)
    W = 8
    x = torch.randint(0, TOKENIZER.vocab_size, (2, 30))
    streamed = exp_sinks.stream_losses(model, x, kind, window=W)  # (2, 29)
    for t in (10, 20, 28):
        kept = list(range(n_sink)) + list(range(t - (W - n_sink) + 1, t + 1))
        assert len(kept) == W
        with torch.no_grad():
            last = model(x[:, kept])[:, -1]  # (2, V)
        expected = F.cross_entropy(last, x[:, t + 1], reduction="none")
        torch.testing.assert_close(streamed[:, t], expected, atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="kind must be one of"):
        exp_sinks.stream_losses(model, x, "sink", window=W)


def test_sink_mass_of_uniform_attention_is_the_uniform_baseline() -> None:
    model = _gpt(n_layers=2)
    with torch.no_grad():
        for block in model.blocks:  # q = 0 makes every score 0: uniform over the visible keys
            block.attn.q_proj.weight.zero_()
    mass = exp_sinks.sink_mass(model, torch.randint(0, TOKENIZER.vocab_size, (2, 12)))
    assert mass["per_layer"] == pytest.approx([mass["uniform"]] * 2, abs=1e-3)
    assert [max(h) for h in mass["per_head_late"]] == pytest.approx([mass["uniform_late"]] * 2, abs=1e-3)
    assert mass["per_query"][0][:3] == pytest.approx([1.0, 0.5, 1 / 3], abs=1e-3)
    maps = exp_sinks.sink_map(model, torch.randint(0, TOKENIZER.vocab_size, (2, 12)), mass["per_head"])
    assert len(maps) == 2 and len(maps[0]["map"]) == 12
    assert maps[0]["map"][3][:4] == pytest.approx([0.25] * 4, abs=1e-3)  # query 3 spreads over keys 0..3


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


def test_bos_helpers_and_the_repetitive_corpus() -> None:
    x = torch.tensor([[5, 6, 7]])
    y = torch.tensor([[6, 7, 8]])
    xb, yb = exp_sinks.with_bos(x, y)
    assert xb.tolist() == [[exp_sinks.BOS, 5, 6, 7]] and yb.tolist() == [[5, 6, 7, 8]]
    assert exp_sinks.first_token_bos(x).tolist() == [[exp_sinks.BOS, 5, 6]]
    assert exp_sinks.BOS == TOKENIZER.vocab_size  # one id past the characters
    rep = exp_sinks.repetitive_tokens(torch.arange(10), 4)  # chunks 0-3 and 4-7, each twice; 8, 9 dropped
    assert rep.tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7]
    with pytest.raises(ValueError, match="chunk"):
        exp_sinks.repetitive_tokens(torch.arange(10), 0)


def test_deleting_the_first_token_during_generation_matches_a_forward_without_it() -> None:
    # one layer: after deleting slot 0, the query at position p sees keys 1..p only, at their true positions
    model = _gpt(n_layers=1)
    x = torch.randint(0, TOKENIZER.vocab_size, (2, 12))
    intact = exp_sinks.truncation_curve(model, x, drop_first=False)
    dropped = exp_sinks.truncation_curve(model, x, drop_first=True)
    assert len(intact) == len(dropped) == 10
    with torch.no_grad():
        full = model(x[:, :-1])[:, 1:]  # predicts tokens 2..11 with the first token present
    ref = F.cross_entropy(full.transpose(1, 2), x[:, 2:], reduction="none").mean(0)
    assert intact == pytest.approx(ref.tolist(), abs=1e-4)
    # without the first token RoPE makes the scores depend on offsets only, so positions 1.. shifted to 0.. agree
    with torch.no_grad():
        shifted = model(x[:, 1:-1])  # the same tokens at positions 0..9 instead of 1..10
    ref2 = F.cross_entropy(shifted.transpose(1, 2), x[:, 2:], reduction="none").mean(0)
    assert dropped == pytest.approx(ref2.tolist(), abs=1e-4)


def test_sinks_record_keeps_every_seed_and_summarises_with_paired_differences(sinks_record) -> None:
    r = sinks_record["results"]
    assert list(r["settings"]) == sinks_record["config"]["settings"]
    for name, st in r["settings"].items():
        assert [s["seed"] for s in st["per_seed"]] == [0, 1]
        assert "maps" in st["per_seed"][0] and "maps" not in st["per_seed"][1]  # heatmap for the first seed only
        s = exp_sinks.summary(sinks_record, name)
        assert set(s["past_window"]) == set(exp_sinks.CACHE_KINDS)
        d = s["window_minus_sink4"]
        per = [p["stream"]["loss_past_window"]["window"] - p["stream"]["loss_past_window"]["sink4"] for p in st["per_seed"]]
        assert d["per_seed"] == pytest.approx(per)
    assert "window minus 4 sinks" in exp_sinks.format_tables(sinks_record)


def test_sinks_headline_opens_with_the_verdict_line_and_gives_every_comparison_an_interval(sinks_record) -> None:
    head = exp_sinks.headline(sinks_record)
    flat = " ".join(head.split())
    assert flat.startswith("- " + exp_sinks.verdict_line(sinks_record))  # the same sentence, wrapped
    assert head.count("\n- ") == 3
    for name in sinks_record["results"]["settings"]:
        s = exp_sinks.summary(sinks_record, name)
        for key in ("window_minus_sink4", "window_minus_sink1", "drop_first_early", "drop_first_late"):
            assert s[key]["ci95"] is not None and pm(s[key], 3) in flat, (name, key)


def _shifted(record: dict, deltas: dict[str, list[float]]) -> dict:
    """A copy in which, per setting, the sliding window's loss past the window is the 4-sink cache's plus
    deltas[setting][seed], and deleting the first token adds the same delta at every position."""
    out = copy.deepcopy(record)
    for name, ds in deltas.items():
        for s, d in zip(out["results"]["settings"][name]["per_seed"], ds):
            past = s["stream"]["loss_past_window"]
            past["window"] = past["sink4"] + d
            s["truncate_curve"]["first_dropped"] = [v + d for v in s["truncate_curve"]["intact"]]
    return out


def test_sinks_verdict_line_names_each_setting_by_its_paired_interval(sinks_record) -> None:
    rec = _shifted(sinks_record, {"text": [0.010, 0.0101],  # the window loses more: sinks lower the loss
                                  "text_bos": [-0.01, 0.01],  # spans 0
                                  "repetitive": [-0.010, -0.0101]})  # the window loses less (t(0.975, 1) = 12.7)
    line = exp_sinks.verdict_line(rec)
    assert [exp_sinks.summary(rec, n)["window_minus_sink4"]["verdict"] for n in ("text", "text_bos", "repetitive")] \
        == ["higher", "indistinguishable", "lower"]
    assert line.startswith("Over 2 seeds") and line.count(";") == 1 and line.endswith(".")
    assert "lowers the loss past the window for text, raises it for the repetitive corpus and leaves it " \
           "indistinguishable for text with a fixed first token;" in line
    early = exp_sinks.summary(rec, "text")["early_queries"]
    assert (f"raises the loss of queries {early} for text, lowers it for the repetitive corpus and leaves it "
            "indistinguishable for text with a fixed first token") in line  # deletion adds the same deltas
    late = exp_sinks.summary(rec, "text")["late_queries"]
    assert (f"for queries {late} the change is an increase for text, a decrease for the repetitive corpus and "
            "indistinguishable from zero for text with a fixed first token.") in line
    one = copy.deepcopy(sinks_record)
    for st in one["results"]["settings"].values():
        st["per_seed"] = st["per_seed"][:1]
    one["results"]["seeds"] = one["results"]["seeds"][:1]
    assert "no verdict" in exp_sinks.verdict_line(one)


def test_sinks_mass_above_uniform_is_the_largest_head_minus_uniform_attention(sinks_record) -> None:
    for name in sinks_record["results"]["settings"]:
        s = exp_sinks.summary(sinks_record, name)
        for queries, uniform in (("early", s["uniform_early"]), ("late", s["uniform_late"])):
            rows = exp_sinks.mass_above_uniform(sinks_record, name, queries)
            assert [d["mean"] for d in rows] == pytest.approx([t["mean"] - uniform for t in s[f"top_head_{queries}"]])
    with pytest.raises(ValueError, match="queries must be"):
        exp_sinks.mass_above_uniform(sinks_record, "text", "middle")
    scale = exp_sinks.training_scale(sinks_record)
    cfg = sinks_record["config"]
    assert scale["characters"] == cfg["train"]["steps"] * cfg["train"]["batch_size"] * cfg["train_len"]
    assert scale["params"] == sinks_record["results"]["settings"]["text"]["per_seed"][0]["params"] > 0


# -- t5_length -------------------------------------------------------------------------------


_T5 = {**exp_t5_length._QUICK, "model": {"d_model": 16, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1},
       "n_eval": 4}


def test_learned_positions_report_that_they_cannot_run_at_16_instead_of_crashing() -> None:
    gen = torch.Generator().manual_seed(0)
    short = exp_t5_length.evaluate(exp_t5_length.build_model("learned", _T5), 16, _T5, gen, CPU)
    assert short["runs"] is False and "cannot extrapolate" in short["reason"]
    assert exp_t5_length.evaluate(exp_t5_length.build_model("learned", _T5), 8, _T5, gen, CPU)["runs"] is True
    wide = exp_t5_length.evaluate(exp_t5_length.build_model("learned16", _T5), 16, _T5, gen, CPU)
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


def test_t5_record_keeps_every_seed_on_the_same_test_sequences(t5_record) -> None:
    r = t5_record["results"]
    for v, e in r["variants"].items():
        assert [s["seed"] for s in e["per_seed"]] == [0, 1]
    assert exp_t5_length.metric(t5_record, "learned", 16) == [None, None]
    em = exp_t5_length.metric(t5_record, "t5", 8)
    assert len(em) == 2 and all(0.0 <= v <= 1.0 for v in em)
    assert exp_t5_length.per_position(t5_record, "learned", 16) is None
    assert len(exp_t5_length.per_position(t5_record, "t5", 16)["mean"]) == 16
    assert "cannot run" in exp_t5_length.format_table(t5_record)
    text = exp_t5_length.headline(t5_record)
    assert " ".join(text.split()).startswith("- " + exp_t5_length.verdict_line(t5_record))  # the same sentence, wrapped
    assert text.count("\n- ") == 1 + len(exp_t5_length.comparisons(t5_record))  # the means, then one per comparison
    with pytest.raises(ValueError, match="exact_match"):
        exp_t5_length.metric(t5_record, "t5", 8, "bleu")


def _t5_synthetic(tail_minus_t5_em: list[float], tail_minus_t5_tok: list[float]) -> dict:
    """A t5_length record with chosen per-seed differences t5_tail - t5 at 16 (T5 defaults fixed)."""
    def ev(em: float, tok: float) -> dict:
        return {"runs": True, "exact_match": em, "token_accuracy": tok, "per_position": [tok] * 16}

    seeds = list(range(len(tail_minus_t5_em)))
    t5 = [{"seed": s, "eval": {"8": ev(0.95, 0.99), "12": ev(0.2, 0.4), "16": ev(0.05, 0.2 + 0.01 * s)}} for s in seeds]
    tail = [{"seed": s, "eval": {"8": ev(0.99, 0.99), "12": ev(0.8, 0.9),
                                 "16": ev(0.05 + e, 0.2 + 0.01 * s + t)}} for s, e, t in
            zip(seeds, tail_minus_t5_em, tail_minus_t5_tok)]
    l16 = [{"seed": s, "eval": {"8": ev(1.0, 1.0), "12": ev(0.0, 0.15), "16": ev(0.0, 0.1 + 0.02 * (s % 2))}}
           for s in seeds]
    no = {"runs": False, "reason": "cannot extrapolate"}
    learned = [{"seed": s, "eval": {"8": ev(1.0, 1.0), "12": no, "16": no}} for s in seeds]
    results = {"seeds": seeds, "n_symbols": 16, "chance": 1 / 16, "train_len": 8, "eval_lens": [8, 12, 16],
               "n_eval": 4, "variants": {"t5": {"per_seed": t5}, "t5_tail": {"per_seed": tail},
                                         "learned": {"per_seed": learned}, "learned16": {"per_seed": l16}}}
    return {"name": "t5_length", "budget": "full", "config": {}, "results": results}


def test_t5_verdict_line_follows_the_paired_interval_not_the_means() -> None:
    # token accuracy higher on every seed; exact match differences of both signs with a positive
    # mean: the interval spans 0, so "indistinguishable" although the mean favours t5_tail
    rec = _t5_synthetic([0.6, -0.3, 0.7, -0.2, 0.5], [0.50, 0.55, 0.60, 0.52, 0.58])
    c = exp_t5_length.comparisons(rec)
    assert c["tail_vs_t5_em"]["mean"] > 0 and c["tail_vs_t5_em"]["verdict"] == "indistinguishable"
    assert c["tail_vs_t5_tok"]["ci95"][0] > 0 and c["tail_vs_t5_tok"]["verdict"] == "higher"
    line = exp_t5_length.verdict_line(rec)
    assert "a higher token accuracy than the defaults" in line
    assert "an exact match indistinguishable from the defaults" in line
    assert "a lower exact match than at 8" in line  # 0.05 against 0.95 on every seed
    assert "(5 seeds, paired 95% intervals)" in line and line.count(".") == 1 + line.count("0.")
    # the same means from consistent differences: now an ordering
    rec = _t5_synthetic([0.26, 0.25, 0.27, 0.26, 0.26], [0.50, 0.55, 0.60, 0.52, 0.58])
    assert "a higher exact match than the defaults" in exp_t5_length.verdict_line(rec)
    table = exp_t5_length.comparison_table(rec)
    assert table.count("\n") == len(exp_t5_length.comparisons(rec)) + 1 and "[" in table.splitlines()[2]
    claims = exp_t5_length.claims_table(rec)
    assert "**agrees** once that condition holds" in claims and "cannot run at 16 on any seed" in claims
    one = _t5_synthetic([0.3], [0.5])
    assert "supports no verdict" in exp_t5_length.verdict_line(one)


# -- passkey ---------------------------------------------------------------------------------


def test_passkey_accuracy_is_computed_on_exactly_the_key_digits() -> None:
    task = PasskeyTask()
    x, y = task.batch(3, 96, random.Random(0))  # (3, 95)
    V_ = TOKENIZER.vocab_size
    logits = torch.zeros(*y.shape, V_)
    wrong = (x + 1) % V_  # wrong everywhere else: must not matter
    logits.scatter_(2, wrong[..., None], 1.0)
    scored = y != -100
    logits[scored] = F.one_hot(y[scored], V_).float() * 5
    all_right, per_digit = exp_passkey.digit_accuracy(logits, y)
    assert all_right.tolist() == [1.0, 1.0, 1.0] and per_digit.shape == (3, task.n_digits)
    rows, cols = scored.nonzero(as_tuple=True)
    last_digit_of_row1 = (rows == 1).nonzero()[-1].item()
    logits[1, cols[last_digit_of_row1]] = 0.0  # row 1 now gets its last digit wrong (argmax 0)
    all_right, per_digit = exp_passkey.digit_accuracy(logits, y)
    assert all_right.tolist() == [1.0, 0.0, 1.0]
    assert per_digit[1].mean().item() == pytest.approx((task.n_digits - 1) / task.n_digits)


def test_extended_rope_methods_share_the_trained_weights_and_use_the_context_extension_settings() -> None:
    cfg = {**exp_passkey._QUICK, "model": {"d_model": 16, "n_heads": 2, "n_layers": 1}, "train_len": 32}
    trained = {"rope": build_gpt("rope", cfg["model"], 32, 0),
               "alibi": build_gpt("alibi", cfg["model"], 32, 0)}
    pi = exp_passkey.method_model("rope_pi", trained, 4)
    assert pi.rotary.scaling == "linear" and pi.rotary.factor == 4.0
    assert torch.equal(pi.lm_head.weight, trained["rope"].lm_head.weight)
    yarn = exp_passkey.method_model("rope_yarn", trained, 4)
    assert yarn.config.rope["beta_fast"] == TUNED_BETAS["beta_fast"] and yarn.config.rope["factor"] == 4.0
    x = torch.randint(0, TOKENIZER.vocab_size, (1, 32))
    with torch.no_grad():
        torch.testing.assert_close(exp_passkey.method_model("rope", trained, 4)(x), trained["rope"](x))
    assert exp_passkey.method_model("alibi", trained, 4) is trained["alibi"]
    with pytest.raises(ValueError, match="unknown method"):
        exp_passkey.method_model("rope_ntk", trained, 4)


def test_passkey_record_has_both_phases_for_every_method_and_seed(passkey_record) -> None:
    r = passkey_record["results"]
    for phase in ("zero_shot", "finetuned"):
        for m in r["methods"]:
            seeds = r["results"][phase][m]
            assert [s["seed"] for s in seeds] == [0, 1]
            assert len(seeds[0]["accuracy"]) == 3 and len(seeds[0]["accuracy"][0]) == 2
            assert len(seeds[0]["loss"]) == 3
        g = exp_passkey.grid(passkey_record, phase, "rope")
        assert len(g["mean"]) == 3 and len(g["sd"][0]) == 2
    assert r["finetune"] == passkey_record["config"]["finetune"]
    assert r["finetune_data"] == exp_passkey.finetune_mix(passkey_record) == "passkey and text, as in training"
    assert "passkey and text" in exp_passkey.format_table(passkey_record, "finetuned")
    assert "@ depth 1" in exp_passkey.format_table(passkey_record, "finetuned")
    text = exp_passkey.headline(passkey_record)
    assert " ".join(text.split()).startswith("- " + exp_passkey.verdict_line(passkey_record))  # wrapped, not split
    assert text.count("\n- ") == 6  # set-up and retrieval at L, two length changes, two method lines, fine-tune
    groups = {c["group"] for c in exp_passkey.comparisons(passkey_record)}
    assert groups == {"length", "methods", "finetune", "depth"}
    with pytest.raises(ValueError, match="phase"):
        exp_passkey.grid(passkey_record, "later", "rope")
    with pytest.raises(ValueError, match="group"):
        exp_passkey.comparison_table(passkey_record, "seeds")


def _passkey_synthetic(acc: dict[str, list[list[float]]], loss: dict[str, list[list[float]]]) -> dict:
    """A passkey record (both phases alike) from per-method, per-seed accuracy and loss at lengths
    [128, 512]; the accuracy is the same at both depths."""
    methods = list(acc)
    n = len(next(iter(acc.values())))
    cells = {m: [{"seed": s, "accuracy": [[a, a] for a in acc[m][s]], "per_digit": [[a, a] for a in acc[m][s]],
                  "loss": loss[m][s]} for s in range(n)] for m in methods}
    results = {"train_len": 128, "lengths": [128, 512], "depths": [0.0, 1.0], "methods": methods,
               "phases": ["zero_shot", "finetuned"], "seeds": list(range(n)), "n_eval": 2, "finetune_len": 512,
               "finetune": {"steps": 3}, "labels": exp_passkey.LABELS,
               "results": {p: copy.deepcopy(cells) for p in ("zero_shot", "finetuned")}}
    return {"name": "passkey", "budget": "full", "config": {}, "results": results}


def test_passkey_verdict_line_names_each_pattern_by_the_rule() -> None:
    k = 5
    rec = _passkey_synthetic(
        acc={"rope": [[1.0, 0.0]] * k,                                          # retrieval falls ...
             "rope_pi": [[0.0, 0.0]] * k,                                       # fails at L on every seed
             "rope_yarn": [[1.0, 0.9], [1.0, 1.0], [0.0, 0.1], [1.0, 0.9], [1.0, 1.0]],  # seed 2 fails at L
             "alibi": [[1.0, 0.2 + 0.1 * s] for s in range(k)]},               # falls with a flat loss
        loss={"rope": [[1.4, 2.4 + 0.01 * s] for s in range(k)],               # ... as the loss rises
              "rope_pi": [[3.0, 3.0]] * k,
              "rope_yarn": [[1.5, 1.45 + 0.01 * s] for s in range(k)],
              "alibi": [[1.4, 1.4 + (0.02 if s % 2 else -0.02)] for s in range(k)]})
    assert exp_passkey.pattern(rec, "zero_shot", "rope") == "lower retrieval, higher loss"
    assert exp_passkey.pattern(rec, "zero_shot", "rope_pi") == "fails at L"
    assert exp_passkey.pattern(rec, "zero_shot", "rope_yarn") == "retrieval not lower"
    assert exp_passkey.pattern(rec, "zero_shot", "alibi") == "flat loss, lower retrieval"
    assert exp_passkey.failures_at_train_len(rec)["zero_shot"]["rope_yarn"] == [2]
    line = exp_passkey.verdict_line(rec)
    without, after = line.split("; after the fine-tune")
    for part in (without, after):  # the synthetic record has the same numbers in both phases
        assert "unscaled RoPE loses retrieval as its loss rises" in part
        assert "ALiBi loses retrieval while its loss stays flat" in part
        assert "RoPE + YaRN shows no drop the rule can detect" in part
        assert "RoPE + PI retrieves on no seed even at 128" in part
    assert "in no case" not in line and line.endswith(".")  # ALiBi's flat-loss case is named, not denied
    assert exp_passkey.finetune_mix(rec) == "corpus text only"  # a record from before the passkey fine-tune
    claims = exp_passkey.claims_table(rec)
    assert "**agrees** for ALiBi" in claims and "here the loss warns too" in claims
    one = _passkey_synthetic({"rope": [[1.0, 0.0]]}, {"rope": [[1.4, 2.4]]})
    assert "supports no verdict" in exp_passkey.verdict_line(one)


# -- figures ----------------------------------------------------------------------------------


def test_t5_figure_has_a_band_and_a_line_per_variant_and_the_length_knob_changes_it(t5_record) -> None:
    fig = V.fig_t5_per_position(t5_record, 16)
    assert len(fig.data) == 2 * len(t5_record["results"]["variants"])
    slider = grid_slider(lambda length: V.fig_t5_per_position(t5_record, length), "length", [12, 16])
    assert len(slider.frames[0].data[1].x) != len(slider.frames[1].data[1].x)
    with pytest.raises(ValueError, match="length must be one of"):
        V.fig_t5_per_position(t5_record, 32)


def test_sink_figures_build_and_their_knobs_change_the_data(sinks_record) -> None:
    fig = V.fig_sink_mass_per_head(sinks_record, "text_bos", "late")
    assert len(fig.data) == 2  # one bar series per head rank (2 heads)
    a, b = V.fig_sink_mass_per_head(sinks_record, "text_bos", "all"), V.fig_sink_mass_per_head(sinks_record, "text_bos", "late")
    assert list(a.data[0].y) != list(b.data[0].y)
    early = V.fig_sink_mass_per_head(sinks_record, "repetitive", "early")  # queries 1 .. chunk - 1, from per_head_query
    seeds = sinks_record["results"]["settings"]["repetitive"]["per_seed"]
    chunk = sinks_record["results"]["chunk"]
    top = [max(sum(h[1:chunk]) / (chunk - 1) for h in s["mass"]["per_head_query"][0]) for s in seeds]
    assert early.data[0].y[0] == pytest.approx(sum(top) / len(top))
    h1, h2 = V.fig_sink_heatmap(sinks_record, "text_bos", 1), V.fig_sink_heatmap(sinks_record, "text_bos", 2)
    assert h1.data[0].z.tolist() != h2.data[0].z.tolist()
    fig = V.fig_stream_loss(sinks_record, "text")
    assert len(fig.data) == 2 * len(exp_sinks.CACHE_KINDS)
    q1, q2 = V.fig_sink_mass_vs_query(sinks_record, "repetitive", 1), V.fig_sink_mass_vs_query(sinks_record, "repetitive", 2)
    assert len(q1.data) == 3 and list(q1.data[1].y) != list(q2.data[1].y)  # band, strongest head, uniform
    assert list(q1.data[2].y)[:2] == pytest.approx([1 / 2, 1 / 3])  # uniform attention 1/(q+1) from q = 1
    t = V.fig_truncation_curve(sinks_record, "text_bos")
    per_seed = sinks_record["results"]["settings"]["text_bos"]["per_seed"]
    first = [a - b for a, b in zip(per_seed[0]["truncate_curve"]["first_dropped"], per_seed[0]["truncate_curve"]["intact"])]
    second = [a - b for a, b in zip(per_seed[1]["truncate_curve"]["first_dropped"], per_seed[1]["truncate_curve"]["intact"])]
    assert list(t.data[1].y) == pytest.approx([(a + b) / 2 for a, b in zip(first, second)])
    with pytest.raises(ValueError, match="layer must be an int"):
        V.fig_sink_mass_vs_query(sinks_record, "repetitive", 0)
    with pytest.raises(ValueError, match="setting must be one of"):
        V.fig_stream_loss(sinks_record, "music")
    with pytest.raises(ValueError, match="layer must be an int"):
        V.fig_sink_heatmap(sinks_record, "text_bos", 9)
    with pytest.raises(ValueError, match="queries"):
        V.fig_sink_mass_per_head(sinks_record, "text_bos", "middle")


def test_passkey_figures_have_a_panel_per_method_and_the_phase_knob_changes_them(passkey_record) -> None:
    fig = V.fig_passkey_heatmaps(passkey_record, "zero_shot")
    assert len(fig.data) == len(passkey_record["results"]["methods"])
    fig = V.fig_passkey_vs_loss(passkey_record, "finetuned")
    assert len(fig.data) == 2 * len(passkey_record["results"]["methods"])
    slider = grid_slider(lambda phase: V.fig_passkey_vs_loss(passkey_record, phase), "phase", ["zero_shot", "finetuned"])
    assert slider.frames[0].data[0].y != slider.frames[1].data[0].y
    with pytest.raises(ValueError, match="phase must be one of"):
        V.fig_passkey_heatmaps(passkey_record, "later")
    with pytest.raises(TypeError, match="passkey"):
        V.fig_passkey_vs_loss({"name": "sinks", "results": {}})
