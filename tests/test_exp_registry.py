"""The six experiments are registered with both budgets, and their full budgets have five seeds."""

from __future__ import annotations

from mlbook.experiments import registry


def test_experiments_1_to_3_are_registered_with_both_budgets_and_five_full_seeds() -> None:
    registry.get_experiment("permutation")  # imports the catalog
    for name in ("permutation", "extrapolation", "context_extension"):
        exp = registry.REGISTRY[name]
        assert set(exp.configs) == set(registry.BUDGETS)
        assert len(exp.configs["full"]["seeds"]) >= 5


def test_experiments_4_to_6_are_registered_with_both_budgets_and_five_full_seeds() -> None:
    for name in ("t5_length", "sinks", "passkey"):
        registry.get_experiment(name)
        assert set(registry.REGISTRY[name].configs) == {"quick", "full"}
        assert len(registry.REGISTRY[name].configs["full"]["seeds"]) >= 5
