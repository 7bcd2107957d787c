"""Experiment 1 (permutation probe) at a tiny config: the probe runs and reports every model and seed,
the order-blind baselines are exact, the headline and verdict follow the rule, and the figures of
mlbook.viz.exp_permutation build from the record."""

from __future__ import annotations

import copy
import itertools
import math
from fractions import Fraction

import pytest
import torch

from experiment_fixtures import CPU, TINY_MODEL, TINY_TRAIN, exp_config, exp_record
from mlbook.experiments import common
from mlbook.experiments import exp_permutation as PE
from mlbook.viz import exp_permutation as V
from mlbook.viz import grid_slider


@pytest.fixture(scope="module")
def perm_record() -> dict:
    cfg = exp_config("permutation", seeds=[0, 1], n_eval=32, model=TINY_MODEL, train=TINY_TRAIN, seq_len=10, lag=2)
    return exp_record("permutation", cfg, PE.run(cfg, CPU, False))


# -- experiment 1 -----------------------------------------------------------------------------


def test_lag_batch_targets_are_the_symbol_k_places_back() -> None:
    x, y = PE.lag_batch(4, 10, 16, 3, torch.Generator().manual_seed(0))
    assert (y[:, :3] == -100).all()
    assert torch.equal(y[:, 3:], x[:, :-3])
    with pytest.raises(ValueError, match="lag must be in 1 .. seq_len - 1"):
        PE.lag_batch(1, 5, 16, 5, torch.Generator())


def test_probe_reports_every_model_and_seed_and_the_position_free_encoder_is_exactly_equivariant(perm_record) -> None:
    r = perm_record["results"]
    assert list(r["models"]) == list(PE.MODELS)
    for name, e in r["models"].items():
        assert [s["seed"] for s in e["per_seed"]] == [0, 1]
        for s in e["per_seed"]:
            assert 0.0 <= s["accuracy"] <= 1.0 and len(s["per_position"]) == r["seq_len"]
            assert s["per_position"][: r["lag"]] == [None] * r["lag"]  # nothing scored before the lag
    gaps = PE.summary(perm_record)
    assert gaps["encoder_none"]["gap_max"] < 1e-12  # float64 round-off, after training
    assert gaps["encoder_learned"]["gap_max"] > 1e-4  # positions break the symmetry
    for name in ("gpt_learned", "gpt_zeroed", "gpt_none"):  # the causal mask alone already breaks it
        assert gaps[name]["gap_max"] > 1e-4
    table = PE.format_table(perm_record)
    assert all(e["label"] in table for e in r["models"].values())


def test_permutation_headline_opens_with_the_verdict_line_and_gives_every_comparison_an_interval(perm_record) -> None:
    head = PE.headline(perm_record)
    flat = " ".join(head.split())
    assert flat.startswith("- " + PE.verdict_line(perm_record))  # the same sentence, wrapped as the first bullet
    assert head.count("\n- ") == 4
    for key, d in PE.comparisons(perm_record).items():  # each comparison printed as "mean [lo, hi]"
        assert d["ci95"] is not None and common.pm(d) in flat, key
    assert "indistinguishable" in common.VERDICT_RULE


def _with_accuracies(record: dict, accuracy: dict[str, list[float]]) -> dict:
    out = copy.deepcopy(record)
    for name, values in accuracy.items():
        for s, v in zip(out["results"]["models"][name]["per_seed"], values):
            s["accuracy"] = v
    return out


def test_permutation_verdict_line_follows_the_rule_for_each_comparison(perm_record) -> None:
    b = PE.order_blind_baselines(perm_record)["on_eval"]
    rec = _with_accuracies(perm_record, {
        "encoder_none": [b["bidirectional"] - 0.01, b["bidirectional"] + 0.01],  # spans the guesser
        "encoder_learned": [1.0, 0.99], "gpt_learned": [1.0, 0.99],
        "gpt_none": [b["causal"] + 0.10, b["causal"] + 0.11],  # clearly above
        "gpt_zeroed": [b["causal"] - 0.050, b["causal"] - 0.051],  # clearly below (t(0.975, 1) = 12.7)
    })
    line = PE.verdict_line(rec)
    assert "2 seeds" in line and line.endswith(".")
    assert "encoder is at a level we cannot tell at this scale from the bidirectional guesser" in line
    assert "trained without positions is above the causal guesser" in line
    assert ("zeroed is below the causal guesser (a measurement: zero-ablation cannot test whether position survives "
            "through the mask) and below the GPT trained without positions") in line
    table = PE.registered_claims_table(rec)
    zeroed = [r for r in table.splitlines() if r.startswith("| with the table zeroed")]
    assert len(zeroed) == 1 and "**not decided**: zero-ablation cannot test this (the measurement: " in zeroed[0]
    assert "contradicted" not in zeroed[0] and zeroed[0].endswith(") |")
    cmp = PE.comparisons(rec)
    assert [cmp[k]["verdict"] for k in ("encoder_none - guesser", "gpt_none - guesser", "gpt_zeroed - guesser")] == [
        "indistinguishable", "higher", "lower"]
    share = PE.share_of_the_way(rec, "gpt_none")
    assert share["mean"] == pytest.approx(sum(0.10 + i * 0.01 for i in range(2)) / 2 / (1 - b["causal"]))
    one = copy.deepcopy(perm_record)
    for e in one["results"]["models"].values():
        e["per_seed"] = e["per_seed"][:1]
    one["results"]["seeds"] = one["results"]["seeds"][:1]
    assert "no verdict" in PE.verdict_line(one)  # one seed: no interval
    assert "| a position table restores order |" in PE.claims_markdown(rec)


# -- order-blind baselines --------------------------------------------------------------------


@pytest.mark.parametrize("n_symbols, bag_size", [(1, 3), (2, 1), (2, 5), (3, 4), (4, 6), (5, 3)])
def test_expected_max_count_is_exact_against_enumerating_every_bag(n_symbols: int, bag_size: int) -> None:
    total = 0
    for bag in itertools.product(range(n_symbols), repeat=bag_size):
        total += max(bag.count(s) for s in range(n_symbols))
    assert PE.expected_max_count(n_symbols, bag_size) == Fraction(total, n_symbols**bag_size)


@pytest.mark.parametrize("bag_size", [3, 10, 23])
def test_bag_accuracy_matches_a_monte_carlo_simulation(bag_size: int) -> None:
    n, V = 200_000, 16
    draws = torch.randint(0, V, (n, bag_size), generator=torch.Generator().manual_seed(bag_size))
    counts = torch.zeros(n, V, dtype=torch.float64).scatter_add_(1, draws, torch.ones(draws.shape, dtype=torch.float64))
    acc = counts.max(1).values / bag_size  # (n,) P(correct) of the most-frequent guess, one bag each
    se = acc.std().item() / math.sqrt(n)
    assert PE.bag_accuracy(V, bag_size) == pytest.approx(acc.mean().item(), abs=4 * se)


def test_causal_curve_falls_with_the_bag_and_ends_at_the_bidirectional_level() -> None:
    curve = PE.causal_bag_curve(16, 24, 3)
    assert curve[:3] == [None] * 3 and len(curve) == 24
    assert curve[3] == pytest.approx(303 / 256 / 3)  # 3 draws of 16: E[max] = (210 + 2*45 + 3) / 256
    assert all(a > b for a, b in zip(curve[3:], curve[4:]))
    assert curve[23] == PE.bag_accuracy(16, 23)  # position 23 sees the same 23 other symbols as the encoder
    assert PE.bag_accuracy(16, 1) == 1.0 and PE.bag_accuracy(1, 7) == 1.0
    with pytest.raises(ValueError, match="lag must be"):
        PE.causal_bag_curve(16, 24, 24)
    with pytest.raises(ValueError, match="bag_size must be >= 1"):
        PE.bag_accuracy(16, 0)
    with pytest.raises(TypeError, match="n_symbols must be an int"):
        PE.expected_max_count(16.0, 3)


def test_the_guesser_on_sampled_sequences_estimates_its_exact_accuracy() -> None:
    x, _ = PE.lag_batch(4096, 12, 8, 2, torch.Generator().manual_seed(3))
    for causal in (True, False):
        got = PE.bag_guesser_accuracy(x, 8, 2, causal)
        assert got[:2] == [None, None]
        for i in range(2, 12):
            p = PE.bag_accuracy(8, i if causal else 11)
            assert got[i] == pytest.approx(p, abs=4 * math.sqrt(p * (1 - p) / 4096))


def test_equivariance_gap_is_zero_for_a_rowwise_function_and_not_for_a_cumulative_one() -> None:
    x = torch.randn(2, 7, 3, dtype=torch.float64)
    perm = torch.randperm(7)
    assert PE.equivariance_gap(lambda t: t * 2 + 1, x, perm)["max_abs"] == 0.0
    assert PE.equivariance_gap(lambda t: t.cumsum(1), x, perm)["max_abs"] > 0.1


def test_probe_accuracy_scores_only_the_targets_after_the_lag() -> None:
    class Oracle(torch.nn.Module):  # predicts x[i - 2] exactly
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            shifted = torch.roll(x, 2, dims=1)
            return torch.nn.functional.one_hot(shifted, 16).float()

    x, y = PE.lag_batch(8, 12, 16, 2, torch.Generator().manual_seed(1))
    out = PE.probe_accuracy(Oracle(), x, y, CPU)
    assert out["accuracy"] == 1.0 and out["per_position"][:2] == [None, None]


def test_permutation_figures_show_every_model_with_error_bars(perm_record) -> None:
    fig = V.fig_permutation_accuracy(perm_record)
    assert len(fig.data[0].x) == len(PE.MODELS) and fig.data[0].error_y.array is not None
    guess = fig.data[1]  # one dash per bar: the guesser that sees what that model sees
    b = PE.order_blind_baselines(perm_record)
    assert list(guess.y) == [b["bidirectional"] if m.startswith("encoder") else b["causal_mean"] for m in PE.MODELS]
    fig = V.fig_permutation_position(perm_record)
    names = [t.name for t in fig.data if not t.name.endswith("± sd")]
    assert names[:-2] == [PE.LABELS[m] for m in PE.MODELS]
    assert "causal" in names[-2] and "bidirectional" in names[-1]
    lag = perm_record["results"]["lag"]
    assert list(fig.data[-2].y) == [round(v, 4) for v in PE.causal_bag_curve(16, perm_record["results"]["seq_len"], lag)[lag:]]
    slider = grid_slider(lambda seed: V.fig_permutation_position(perm_record, seed), "seed", ["mean", "0"])
    assert slider.frames[0].data[1].y != slider.frames[1].data[1].y  # the knob changes the data
    with pytest.raises(ValueError, match="seed must be"):
        V.fig_permutation_position(perm_record, "7")
    with pytest.raises(TypeError, match="permutation"):
        V.fig_permutation_accuracy({"name": "sinks", "results": {}})
