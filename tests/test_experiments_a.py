"""Experiments 1-3 (permutation probe, extrapolation, context extension) at tiny configs: each runs,
reports every model and length it promises, and the properties the pages rely on hold; and the
figures of mlbook.viz.extrapolation build from their records."""

from __future__ import annotations

import copy
import itertools
import math
from fractions import Fraction

import pytest
import torch

from mlbook.experiments import exp_context_extension as CE
from mlbook.experiments import exp_extrapolation as EX
from mlbook.experiments import exp_permutation as PE
from mlbook.experiments import common, registry
from mlbook.experiments.common import build_gpt, copy_with_rope, train_lm
from mlbook.experiments.data import TOKENIZER, corpus_tokens, split_tokens
from mlbook.experiments.train import TrainConfig
from mlbook.viz import grid_slider
from mlbook.viz import extrapolation as V

CPU = torch.device("cpu")
TINY_MODEL = {"d_model": 16, "n_heads": 2, "n_layers": 1}
TINY_TRAIN = {"steps": 4, "batch_size": 2, "lr": 3e-3, "warmup_steps": 1}


def _cfg(name: str, budget: str = "quick", **changes: object) -> dict:
    cfg = copy.deepcopy(registry.REGISTRY[name].configs[budget])
    cfg.update(changes)
    return cfg


def _record(name: str, cfg: dict, results: dict) -> dict:
    return {"name": name, "budget": "quick", "config": cfg, "results": results}


@pytest.fixture(scope="module", autouse=True)
def _registered() -> None:
    registry.get_experiment("permutation")  # imports the catalog


@pytest.fixture(scope="module")
def perm_record() -> dict:
    cfg = _cfg("permutation", seeds=[0, 1], n_eval=32, model=TINY_MODEL, train=TINY_TRAIN, seq_len=10, lag=2)
    return _record("permutation", cfg, PE.run(cfg, CPU, False))


@pytest.fixture(scope="module")
def ex_record() -> dict:
    # t5_fit needs max_distance = train_len past T5's exact range (16 for 32 causal buckets): not at L = 8
    schemes = [s for s in registry.REGISTRY["extrapolation"].configs["full"]["schemes"] if s != "t5_fit"]
    cfg = _cfg("extrapolation", "full", seeds=[0, 1], model=TINY_MODEL, train_len=8, eval_windows=3, train=TINY_TRAIN,
               schemes=schemes)
    return _record("extrapolation", cfg, EX.run(cfg, CPU, False))


@pytest.fixture(scope="module")
def ce_record() -> dict:
    cfg = _cfg("context_extension", "full", seeds=[0, 1], model={"d_model": 24, "n_heads": 2, "n_layers": 1},
               train_len=16, eval_lengths=[16, 32, 64], finetune_len=64, eval_windows=2, train=TINY_TRAIN,
               finetune={"steps": 2, "batch_size": 2, "lr": 1e-3, "warmup_steps": 1})
    return _record("context_extension", cfg, CE.run(cfg, CPU, False))


def test_the_experiments_are_registered_with_both_budgets_and_five_full_seeds() -> None:
    for name in ("permutation", "extrapolation", "context_extension"):
        exp = registry.REGISTRY[name]
        assert set(exp.configs) == set(registry.BUDGETS)
        assert len(exp.configs["full"]["seeds"]) >= 5


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
    assert "2 seeds" in line and line.count(".") == 1 and line.endswith(".")
    assert "encoder is indistinguishable from the bidirectional guesser" in line
    assert "trained without positions is above the causal guesser" in line
    assert "zeroed is below the causal guesser and below the GPT trained without positions" in line
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


# -- experiment 2 -----------------------------------------------------------------------------


def test_extrapolation_scores_every_scheme_on_the_same_windows_and_learned_refuses(ex_record) -> None:
    r = ex_record["results"]
    assert r["eval_lengths"] == [8, 12, 16, 32]
    assert list(r["schemes"]) == list(ex_record["config"]["schemes"]) + ["reference"]
    for name, e in r["schemes"].items():
        for s in e["per_seed"]:
            if name == "learned":
                assert len(s["curve"]) == 8 and "cannot extrapolate" in s["reason"]
            else:
                assert len(s["curve"]) == 32 and s["reason"] is None
    assert r["schemes"]["reference"]["train_len"] == 32
    assert r["schemes"]["reference"]["train_steps"] == 4 and r["schemes"]["reference"]["train_batch"] == 1  # B L / 4L
    m = EX.scheme_metrics(ex_record, "rope")
    curve = torch.tensor(r["schemes"]["rope"]["per_seed"][0]["curve"], dtype=torch.float64)
    assert m["mean"]["16"][0] == pytest.approx(curve[:16].mean().item())  # a length is a prefix of the window
    assert m["tail"]["16"][0] == pytest.approx(curve[8:16].mean().item())
    assert m["head"]["16"][0] == m["head"]["32"][0]  # the same text before L at every length
    assert m["tail_minus_head"]["32"][0] == pytest.approx(m["tail"]["32"][0] - m["head"]["32"][0])
    assert EX.scheme_metrics(ex_record, "learned")["tail"]["32"] == [None, None]
    table = EX.format_table(ex_record)
    assert "n/a (learned)" in table and "±" in table
    # the 1-head RoPE has the same parameter count as the 4-head one
    assert r["schemes"]["rope_1head"]["params"] == r["schemes"]["rope"]["params"]
    comp = EX.comparisons(ex_record)
    assert set(comp) == set(r["schemes"]) - {"alibi"} and comp["learned"]["n"] == 0
    assert EX.headline(ex_record).count("\n- ") == 3  # verdict, per scheme, the reference, learned


def test_extrapolation_t5_fit_sets_max_distance_to_the_training_length(monkeypatch) -> None:
    seen = []
    real = EX.build_gpt
    monkeypatch.setattr(EX, "build_gpt", lambda *a, **k: seen.append(k) or real(*a, **k))
    cfg = _cfg("extrapolation", "full", seeds=[0], model=TINY_MODEL, train_len=20, eval_windows=1, reference=False,
               train={**TINY_TRAIN, "steps": 1}, schemes=["t5", "t5_fit", "rope_1head"])
    EX.run(cfg, CPU, False)
    assert seen[0] == {} and seen[1] == {"t5_max_distance": 20}


def test_extrapolation_verdict_names_each_scheme_by_its_paired_interval(ex_record) -> None:
    line = EX.verdict_line(ex_record)
    cmp = {n: d for n, d in EX.comparisons(ex_record, against="reference").items() if d["n"]}
    flat_part, _, worse_part = line.partition("lose more")
    for name, d in cmp.items():
        short = EX.SHORT[name]
        if d["verdict"] == "higher":  # the interval excludes 0: named among those that lose more
            assert short in line.split("(paired 95% intervals span 0)")[-1], (name, line)
        else:
            assert short in flat_part, (name, line)
    assert line.startswith("Trained at L = 8") and EX.headline(ex_record).startswith("- " + line[:40])
    table = EX.claims_markdown(ex_record)
    assert table.count("\n") >= 3 and "[" in table  # a row per claim, each with its interval


def test_sinusoidal_is_the_original_transformer_s_with_sqrt_d_scale() -> None:
    assert EX.SCHEMES["sinusoidal"] == {"positional": "sinusoidal", "scale_embeddings": True}
    model = build_gpt("sinusoidal", TINY_MODEL, 8, 0, scale_embeddings=True)
    assert model.emb_scale == pytest.approx(math.sqrt(16))


# -- experiment 3 -----------------------------------------------------------------------------


def test_copy_with_rope_copies_weights_and_changes_only_rope() -> None:
    base = build_gpt("rope", {"d_model": 24, "n_heads": 2, "n_layers": 1}, 16, 0)
    x = torch.randint(0, TOKENIZER.vocab_size, (2, 16))
    torch.testing.assert_close(CE.variant_model(base, "none")(x), base(x))
    yarn = CE.variant_model(base, "yarn_tuned")
    assert yarn.config.rope == {"scaling": "yarn", "factor": 4.0, "beta_fast": 4.0, "beta_slow": 1.0,
                                "original_max_len": 16}
    assert not torch.allclose(yarn(x), base(x))
    torch.testing.assert_close(CE.variant_model(base, "dynamic")(x), base(x))  # plain RoPE up to L
    with pytest.raises(ValueError, match="unknown variant"):
        CE.variant_model(base, "ntk-by-parts")
    with pytest.raises(ValueError, match="needs a RoPE model"):
        copy_with_rope(build_gpt("alibi", TINY_MODEL, 8, 0), {})


def test_dynamic_ntk_fine_tuned_at_4L_is_the_ntk_fine_tune() -> None:
    # the record reuses the NTK fine-tune for dynamic NTK; check that training it separately gives the same weights
    train_part, _ = split_tokens(corpus_tokens())
    base = build_gpt("rope", {"d_model": 24, "n_heads": 2, "n_layers": 1}, 16, 0)
    tuned = {}
    for name in ("ntk", "dynamic"):
        model = CE.variant_model(base, name)
        train_lm(model, train_part, 64, TrainConfig(steps=3, batch_size=2, warmup_steps=1, seed=5), CPU, name, False)
        tuned[name] = model.state_dict()
    for key in tuned["ntk"]:
        torch.testing.assert_close(tuned["dynamic"][key], tuned["ntk"][key], rtol=0, atol=0)


def test_context_extension_reports_every_variant_before_and_after_on_the_same_windows(ce_record) -> None:
    r = ce_record["results"]
    assert list(r["variants"]) == list(CE.VARIANTS)
    for name, v in r["variants"].items():
        for s in v["per_seed"]:
            for phase in ("before", "after"):
                assert len(s[phase]["mean"]) == 3 and all(math.isfinite(m) for m in s[phase]["mean"])
                assert s[phase]["tail"][0] is None and all(math.isfinite(t) for t in s[phase]["tail"][1:])
            assert s["finetune_shared_with"] == ("ntk" if name == "dynamic" else None)
    none0 = r["variants"]["none"]["per_seed"][0]["before"]
    dyn0 = r["variants"]["dynamic"]["per_seed"][0]["before"]
    assert none0["mean"][0] == pytest.approx(dyn0["mean"][0])  # identical below L
    assert none0["head"][0] == pytest.approx(none0["mean"][0])  # at L the head is the whole window
    assert len(r["reference"]["per_seed"]) == 2 and r["reference"]["train_len"] == 64
    assert r["bands"]["yarn_tuned"]["beta_fast"] == 4.0
    for metric in ("mean", "tail", "tail_minus_head"):
        table = CE.format_table(ce_record, metric)
        assert all(label in table for label in (v["label"] for v in r["variants"].values()))
    assert "keep" in CE.band_table(ce_record)
    assert CE.headline(ce_record).count("\n- ") == 3  # verdict, after, paired against the best, before
    p = CE.paired_at(ce_record, "linear", "none", "before", "mean", 0)
    assert p["n"] == 2 and p["verdict"] in ("lower", "higher", "indistinguishable")


# -- figures ----------------------------------------------------------------------------------


def test_permutation_figures_show_every_model_with_error_bars(perm_record) -> None:
    fig = V.permutation_accuracy_figure(perm_record)
    assert len(fig.data[0].x) == len(PE.MODELS) and fig.data[0].error_y.array is not None
    guess = fig.data[1]  # one dash per bar: the guesser that sees what that model sees
    b = PE.order_blind_baselines(perm_record)
    assert list(guess.y) == [b["bidirectional"] if m.startswith("encoder") else b["causal_mean"] for m in PE.MODELS]
    fig = V.permutation_position_figure(perm_record)
    names = [t.name for t in fig.data if not t.name.endswith("± sd")]
    assert names[:-2] == [PE.LABELS[m] for m in PE.MODELS]
    assert "causal" in names[-2] and "bidirectional" in names[-1]
    lag = perm_record["results"]["lag"]
    assert list(fig.data[-2].y) == [round(v, 4) for v in PE.causal_bag_curve(16, perm_record["results"]["seq_len"], lag)[lag:]]
    slider = grid_slider(lambda seed: V.permutation_position_figure(perm_record, seed), "seed", ["mean", "0"])
    assert slider.frames[0].data[1].y != slider.frames[1].data[1].y  # the knob changes the data
    with pytest.raises(ValueError, match="seed must be"):
        V.permutation_position_figure(perm_record, "7")
    with pytest.raises(TypeError, match="permutation"):
        V.permutation_accuracy_figure({"name": "sinks", "results": {}})


def test_extrapolation_figures_have_one_series_per_scheme_and_the_metric_knob_changes_them(ex_record) -> None:
    for metric in ("tail", "mean", "tail_minus_head"):
        fig = V.extrapolation_figure(ex_record, metric)
        assert [t.name for t in fig.data] == [e["label"] for e in ex_record["results"]["schemes"].values()]
        assert fig.layout.xaxis.title.text == V.LENGTH_AXIS
    slider = grid_slider(lambda metric: V.extrapolation_figure(ex_record, metric), "metric", ["tail", "tail_minus_head"])
    assert slider.frames[0].data[0].y != slider.frames[1].data[0].y
    with pytest.raises(ValueError, match="metric"):
        V.extrapolation_figure(ex_record, "median")
    fig = V.extrapolation_curves_figure(ex_record, 4)
    assert len(fig.data) == 2 * len(ex_record["results"]["schemes"])  # a band and a line per scheme
    with pytest.raises(ValueError, match="bin_width"):
        V.extrapolation_curves_figure(ex_record, 0)


def test_context_extension_figures_and_the_yarn_band_knob(ce_record) -> None:
    fig = V.context_extension_figure(ce_record, "mean")
    n_var = len(ce_record["results"]["variants"])
    assert len(fig.data) == 2 * n_var + 1  # before and after per variant, and the model trained at the target
    slider = grid_slider(lambda metric: V.context_extension_figure(ce_record, metric), "metric", ["tail", "tail_minus_head"])
    assert slider.frames[0].data[0].y != slider.frames[1].data[0].y
    with pytest.raises(ValueError, match="metric"):
        V.context_extension_figure(ce_record, "median")
    a, b = V.yarn_bands_figure(32.0, 12, 128), V.yarn_bands_figure(4.0, 12, 128)
    assert list(a.data[1].y) != list(b.data[1].y) and list(a.data[0].y) == list(b.data[0].y)
    assert list(b.data[1].y) == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]  # keep 0-1, interpolate 2-5
    with pytest.raises(ValueError, match="beta_fast"):
        V.yarn_bands_figure(0.5, 12, 128)


def test_context_extension_verdict_follows_the_paired_intervals(ce_record) -> None:
    line = CE.verdict_line(ce_record)
    best, tied, diffs = CE._ranked_after(ce_record)
    assert line.startswith(f"After 2 fine-tuning steps at 64, the way position interpolation is used, {CE.SHORT[best]}")
    means = {n: CE.summary(ce_record, "after")[n][-1]["mean"] for n in ce_record["results"]["variants"] if n != "dynamic"}
    assert means[best] == min(means.values())
    for name, d in diffs.items():  # a variant is called tied with the best exactly when its interval spans 0
        assert (name in tied) == (d["verdict"] == "indistinguishable")
    assert CE.headline(ce_record).startswith("- " + line[:40])
    table = CE.claims_markdown(ce_record)
    assert table.splitlines()[0].startswith("| claim |") and "[" in table


def test_every_experiment_figure_draws_from_the_committed_full_records() -> None:
    """The pages draw the committed 5-seed records: every figure builder must take them as they are
    (a record with more schemes than colours once raised IndexError)."""
    for name, builders in {
        "extrapolation": [lambda r: V.extrapolation_figure(r, m) for m in ("tail", "tail_minus_head", "mean")]
        + [lambda r: V.extrapolation_curves_figure(r, w) for w in (4, 8, 16)],
        "context_extension": [lambda r: V.context_extension_figure(r, m) for m in ("mean", "tail", "tail_minus_head")],
    }.items():
        record = registry.load_result(name, "full")
        assert record is not None, name
        for build in builders:
            fig = build(record)
            assert len(fig.data) >= len(record["results"].get("schemes", record["results"].get("variants", {})))
