"""Experiment 5 (attention sinks) at a tiny config: streaming with a full cache equals teacher forcing,
windowed streaming keeps the sinks, the sink mass and truncated cache measure what they claim, the
record keeps every seed, the verdict follows the paired intervals, and the figures of
mlbook.viz.exp_sinks build from the record."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from experiment_fixtures import CPU, TINY_TRAIN, exp_config, exp_record
from mlbook.experiments import exp_sinks
from mlbook.experiments.common import pm
from mlbook.experiments.data import TOKENIZER
from mlbook.transformer.models import GPT, GPTConfig
from mlbook.viz import exp_sinks as V


def _gpt(n_layers: int = 1, positional: str = "rope", seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=TOKENIZER.vocab_size + 1, d_model=32, n_heads=2, n_layers=n_layers, max_len=16,
                         positional=positional)).eval()


@pytest.fixture(scope="module")
def sinks_record() -> dict:
    cfg = exp_config("sinks", "full", seeds=[0, 1], train_len=16, mass_windows=4, train={**TINY_TRAIN, "steps": 3},
               model={"d_model": 16, "n_heads": 2, "n_layers": 2},
               stream={"n_streams": 2, "length": 40, "window": 16, "segment": 8}, truncate={"n_windows": 4, "prefix": 6})
    return exp_record("sinks", cfg, exp_sinks.run(cfg, CPU, False))


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
    # the sentence after the count 4-gram one (which comes first when a model does not beat the 4-gram)
    line = exp_sinks.verdict_line(rec).split("about this budget. ")[-1]
    assert [exp_sinks.summary(rec, n)["window_minus_sink4"]["verdict"] for n in ("text", "text_bos", "repetitive")] \
        == ["higher", "indistinguishable", "lower"]
    assert line.startswith("Over 2 seeds") and line.count(";") == 1 and line.endswith(".")
    # a direction whose claim does not survive Holm's correction is said to hold before the correction only
    failing = {x["claim"]["id"] for x in exp_sinks.decided_claims(rec) if not x["survives"]}

    def said(claim: str, phrase: str) -> str:
        return phrase + (" before Holm's correction only" if claim in failing else "")

    assert (f"{said('sinks_restore_text', 'lowers the loss past the window')} for text, "
            f"{said('sinks_restore_repetitive', 'raises it')} for the repetitive corpus and changes it by an "
            "amount we cannot tell from zero for text with a fixed first token;") in line
    early = exp_sinks.summary(rec, "text")["early_queries"]
    assert (f"{said('drop_early_text', f'raises the loss of queries {early}')} for text, "
            f"{said('drop_early_repetitive', 'lowers it')} for the repetitive corpus and changes it by an "
            "amount we cannot tell from zero for text with a fixed first token") in line  # deletion adds the same deltas
    late = exp_sinks.summary(rec, "text")["late_queries"]
    assert (f"for queries {late} the change is {said('drop_late_text', 'an increase')} for text, "
            f"{said('drop_late_repetitive', 'a decrease')} for the repetitive corpus and "
            "too small to tell from zero for text with a fixed first token.") in line
    assert "drop_late_repetitive" in failing  # contradicted before the correction only, at two seeds
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
