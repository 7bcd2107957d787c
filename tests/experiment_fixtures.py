"""What the tests of the six experiments (tests/test_exp_*.py) share: the CPU device, a tiny model
and training size, and a quick record built from a registered budget with some values changed."""

from __future__ import annotations

import copy

import torch

from mlbook.experiments import registry

CPU = torch.device("cpu")
TINY_MODEL = {"d_model": 16, "n_heads": 2, "n_layers": 1}
TINY_TRAIN = {"steps": 4, "batch_size": 2, "lr": 3e-3, "warmup_steps": 1}


def exp_config(name: str, budget: str = "quick", **changes: object) -> dict:
    """The registered config of experiment `name` at `budget`, a deep copy, with `changes` applied."""
    registry.get_experiment(name)  # imports the catalog
    cfg = copy.deepcopy(registry.REGISTRY[name].configs[budget])
    cfg.update(changes)
    return cfg


def exp_record(name: str, cfg: dict, results: dict) -> dict:
    """A record as the registry saves it, from a config and the results of the experiment's run."""
    return {"name": name, "budget": "quick", "config": cfg, "results": results}
