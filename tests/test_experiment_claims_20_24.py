"""Experiments 1-5 (pages 20-24) under the extended verdict rule: each experiment's registered claims are valid
claim dicts in both budgets, its value_of reads every claim of the committed full record (one number per seed),
the committed record carries exactly the registered claims (so load_result still finds it) and says when they were
attached, and the count baselines the pages print behave as their definitions say."""

from __future__ import annotations

import copy
import importlib

import pytest

from mlbook.experiments import catalog, registry  # noqa: F401  (catalog registers every experiment)
from mlbook.experiments.claims import check_claims, decide

MODULES = {"permutation": "exp_permutation", "extrapolation": "exp_extrapolation",
           "context_extension": "exp_context_extension", "t5_length": "exp_t5_length", "sinks": "exp_sinks"}


def _module(name: str):  # type: ignore[no-untyped-def]
    return importlib.import_module(f"mlbook.experiments.{MODULES[name]}")


@pytest.mark.parametrize("name", sorted(MODULES))
def test_claims_are_valid_in_both_budgets_and_the_full_budget_has_all_of_them(name: str) -> None:
    configs = registry.REGISTRY[name].configs
    for budget in ("quick", "full"):
        assert "claims" in configs[budget], f"{name} {budget} config has no claims"
        check_claims(configs[budget]["claims"])
    full_ids = [c["id"] for c in configs["full"]["claims"]]
    assert full_ids and set(c["id"] for c in configs["quick"]["claims"]) <= set(full_ids)
    assert full_ids == [c["id"] for c in _module(name).CLAIMS]  # the full budget tests the whole family


@pytest.mark.parametrize("name", sorted(MODULES))
def test_the_committed_full_record_is_found_and_carries_the_registered_claims(name: str) -> None:
    record = registry.load_result(name, "full")
    assert record is not None, f"load_result finds no committed full record of {name} for the current config"
    assert record["config"]["claims"] == registry.REGISTRY[name].configs["full"]["claims"]
    note = record["claims_registered"]
    assert note.startswith("after the run: attached on 2026-12-04") and "not registered before the data" in note


@pytest.mark.parametrize("name", sorted(MODULES))
def test_value_of_reads_every_claim_on_the_full_record(name: str) -> None:
    mod = _module(name)
    record = registry.load_result(name, "full")
    n = len(record["results"]["seeds"])
    for claim in record["config"]["claims"]:
        for side in ("a", "b"):
            if claim[side] is None:
                continue
            values = mod.claim_values(record, claim, side)
            assert len(values) == n and all(isinstance(v, float) for v in values), (claim["id"], side, values)
    rows = mod.decided_claims(record)
    assert [r["claim"]["id"] for r in rows] == [c["id"] for c in record["config"]["claims"]]
    assert all(r["p_holm"] is not None and r["diff"]["ci95"] is not None for r in rows)
    table = mod.registered_claims_table(record)
    assert table.count("\n") == len(rows) + 1 and "indistinguishable" not in table


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_claim_naming_something_the_record_lacks_is_refused_by_name(name: str) -> None:
    mod = _module(name)
    record = registry.load_result(name, "full")
    bad = copy.deepcopy(record["config"]["claims"][0])
    bad["a"] = "no_such_thing" if name != "context_extension" else "no_such_thing/before@1L"
    if name == "t5_length":
        bad["a"] = "no_such_thing@16"
    with pytest.raises(ValueError, match=bad["id"]):
        decide([bad], lambda c, side: mod.claim_values(record, c, side))


def test_the_equivalence_claims_say_their_margin_was_chosen_after_the_data() -> None:
    for name in MODULES:
        record = registry.load_result(name, "full")
        eq = [c for c in record["config"]["claims"] if c["expect"] == "equivalent"]
        if eq:  # an after-data margin is declared in the record's note
            assert "after the data" in record["claims_registered"].split("Changed:")[-1], name


def test_language_model_baselines_order_the_count_models_and_none_of_experiments_2_3_beats_the_4gram() -> None:
    for name in ("extrapolation", "context_extension"):
        mod = _module(name)
        record = registry.load_result(name, "full")
        levels = mod.ngram_levels(record)
        ins = [levels[str(n)]["in_range"] for n in (1, 2, 3, 4)]
        assert ins == sorted(ins, reverse=True), (name, ins)  # more history, lower loss on this text
        assert not any(mod.beats_4gram(record, levels).values())
        assert mod.verdict_line(record).startswith("No ")  # the verdict says so first
        assert "gain on 2-gram" in mod.baseline_table(record, levels)


def test_sinks_models_beat_the_4gram_inside_the_window_and_the_verdict_says_so() -> None:
    mod = _module("sinks")
    record = registry.load_result("sinks", "full")
    levels = mod.ngram_levels(record)
    for data, lv in levels.items():
        assert lv["4"]["within"] < lv["2"]["within"] < lv["1"]["within"], data
    assert all(len(v) == len(record["results"]["seeds"]) for v in mod.beats_4gram(record, levels).values())
    assert mod.verdict_line(record).endswith("Every model beats an add-0.1 count 4-gram inside the first window "
                                             "of the same streams.")


def test_synthetic_task_count_baselines_sit_at_chance_until_their_history_reaches_the_target() -> None:
    perm = registry.load_result("permutation", "full")
    acc = _module("permutation").ngram_probe(perm)
    chance = perm["results"]["chance"]
    for n in ("1", "2", "3", "4"):  # histories of 0..3 symbols stop short of the target 3 back
        assert abs(acc[n] - chance) < 0.02, (n, acc[n])
    assert acc["5"] > 0.95  # a history of 4 reaches it: a fixed-offset lookup solves the probe
    t5 = registry.load_result("t5_length", "full")
    out = _module("t5_length").ngram_outputs(t5)
    for n, per_len in out.items():  # the outputs alone carry no information about the next output
        for length, m in per_len.items():
            assert abs(m["token_accuracy"] - t5["results"]["chance"]) < 0.02 and m["exact_match"] == 0.0, (n, length)
