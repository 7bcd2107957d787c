"""Experiment 7 (after_rope) at a tiny config: each method builds the model it names, the probe reads
the pairs of the rotated width, the record has every method and seed, comparisons are paired against
RoPE under the verdict rule, and the figures build from the record."""

from __future__ import annotations

import pytest
import torch

from experiment_fixtures import CPU, TINY_TRAIN, exp_config, exp_record
from mlbook.experiments import exp_after_rope as E
from mlbook.experiments.common import build_gpt
from mlbook.viz import exp_after_rope as V


@pytest.fixture(scope="module")
def record() -> dict:
    cfg = exp_config("after_rope", "full", methods=list(E.METHODS), seeds=[0, 1], lengths=[64, 256],
                     passkey_cells=[[64, 29], [64, 43], [256, 96]], n_eval=2, loss_windows=2,
                     train={**TINY_TRAIN, "steps": 2}, model={"d_model": 32, "n_heads": 2, "n_layers": 4})
    return exp_record("after_rope", cfg, E.run(cfg, CPU, False))


def test_each_method_builds_the_model_it_names() -> None:
    model_cfg = {"d_model": 32, "n_heads": 2, "n_layers": 4}
    built = {}
    for m in E.METHODS:
        positional, extra = E.method_settings(m, 4, 32)
        built[m] = build_gpt(positional, model_cfg, 64, 0, **extra)
    rotates = {m: [b.attn.rotary is not None for b in g.blocks] for m, g in built.items()}
    assert rotates["rope"] == [True] * 4 and rotates["nope"] == [False] * 4
    assert rotates["hybrid"] == rotates["local_global"] == [True, True, True, False]
    assert rotates["all_local"] == [True] * 4
    assert [b.attn.window for b in built["local_global"].blocks] == [32, 32, 32, None]
    assert [b.attn.window for b in built["all_local"].blocks] == [32] * 4
    assert [b.attn.window for b in built["hybrid"].blocks] == [None] * 4
    assert built["partial_25"].rotary.rotary_dim == 4  # a quarter of d_head 16
    assert built["partial_75"].rotary.rotary_dim == 12
    assert (built["prope"].rotary.inv_freq == 0).sum().item() == 2  # the slowest 2 of 8 pairs
    assert built["rope_b100"].rotary.inv_freq[1].item() == pytest.approx(100 ** (-2 / 16))
    assert (built["prope_b100"].rotary.inv_freq == 0).sum().item() == 2
    with pytest.raises(ValueError, match="method must be one of"):
        E.method_settings("alibi", 4, 64)


def test_probe_gives_one_norm_per_pair_and_layer_and_sees_a_planted_pair() -> None:
    torch.manual_seed(0)
    model = build_gpt("rope", {"d_model": 32, "n_heads": 2, "n_layers": 2}, 64, 0)
    with torch.no_grad():
        w = model.blocks[1].attn.q_proj.weight
        w.zero_()
        w[3].fill_(1.0)  # head 0, channel 3: the first member of pair 3 (half pairing, d_head 16)
    x = torch.randint(0, model.config.vocab_size, (2, 20))
    norms = E.pair_norms(model, x, CPU)
    assert len(norms["q"]) == 2 and len(norms["q"][0]) == 8
    layer1 = norms["q"][1]
    assert layer1[3] > 0 and all(v == 0 for i, v in enumerate(layer1) if i != 3)


def test_record_holds_every_method_and_seed_and_compares_paired_against_rope(record: dict) -> None:
    r = record["results"]
    assert r["methods"] == list(E.METHODS) and r["seeds"] == [0, 1]
    for m in E.METHODS:
        rows = r["results"][m]
        assert [row["seed"] for row in rows] == [0, 1]
        assert all(len(row["passkey"]) == 3 and len(row["loss_by_quarter_L"]) == 16 for row in rows)
        assert all(row["lm_loss_last50"] > 0 and len(row["lm_loss_per_100_steps"]) == 1 for row in rows)
        assert all(("pair_norms" in row) == (m in E.PROBED) for row in rows)
    assert r["passkey_distances"][2]["min"] >= 93 and r["passkey_distances"][0] == {"min": 29, "mean": 29.0, "max": 29}
    assert set(r["baselines"]["ngram"]) == {"1", "2", "3", "4"}
    cmp = E.comparisons(record, "past_L")
    assert set(cmp) == set(E.METHODS) - {"rope"}
    a, b = E.metric_per_seed(record, "nope", "past_L"), E.metric_per_seed(record, "rope", "past_L")
    assert cmp["nope"]["per_seed"] == pytest.approx([x - y for x, y in zip(a, b)])
    assert "4-gram" in E.verdict_line(record) and "registered claims" in E.verdict_line(record)
    for text in (E.format_table(record), E.comparison_table(record), E.claims_table(record), E.headline(record),
                 E.usage_table(record, "prope", "k"), E.baseline_table(record)):
        assert text
    rows = E.decided_claims(record)
    assert [row["claim"]["id"] for row in rows] == [c["id"] for c in E.CLAIMS]
    gain = E.metric_per_seed(record, "nope", "gain")
    assert gain == pytest.approx([E.bigram(record) - row["in_range"] for row in r["results"]["nope"]], abs=1e-4)
    assert [a["pair"] for a in E.dropped_angles(record, "prope_b100")] == [6, 7]
    with pytest.raises(ValueError, match="drops no frequencies"):
        E.dropped_angles(record, "rope")
    rise = E.metric_per_seed(record, "hybrid", "rise")
    assert rise == pytest.approx([row["past_L"] - row["in_range"] for row in r["results"]["hybrid"]], abs=1e-4)
    assert len(E.slow_share(record, "rope", "k")) == 4 and all(v > 0 for v in E.slow_share(record))
    with pytest.raises(ValueError, match="metric must be"):
        E.metric_per_seed(record, "rope", "accuracy")
    with pytest.raises(ValueError, match="passkey cell must be one of"):
        E.metric_per_seed(record, "rope", "passkey@999:1")
    with pytest.raises(ValueError, match="LENGTH:DISTANCE"):
        E.metric_per_seed(record, "rope", "passkey@64")


def test_figures_build_from_the_record(record: dict) -> None:
    fig = V.fig_after_rope_lengths(record)
    assert len(fig.data) == 2 * len(E.METHODS)
    hybrid = V.fig_after_rope_lengths(record, "hybrid")
    assert len(hybrid.data) == 2 * len(E.METHODS) and sum(bool(t.visible) for t in hybrid.data) == 4
    assert V.fig_pair_usage(record, "prope", "q").data[0].z is not None
    with pytest.raises(ValueError, match="method must be"):
        V.fig_pair_usage(record, "nope")
