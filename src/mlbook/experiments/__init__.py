"""Experiments on tiny models that test the chapter's claims. See `python -m mlbook.experiments list`."""

from mlbook.experiments.registry import (  # noqa: F401
    BUDGETS,
    REGISTRY,
    command_for,
    default_budget,
    headline,
    load_or_run,
    load_result,
    run_experiment,
)
from mlbook.experiments.train import TrainConfig, evaluate_loss, pick_device, train  # noqa: F401
