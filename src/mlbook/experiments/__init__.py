"""Experiments on tiny models that test the chapter's claims. See `python -m mlbook.experiments list`."""

from mlbook.experiments.registry import (  # noqa: F401
    BUDGETS,
    REGISTRY,
    command_for,
    default_budget,
    describe_record,
    headline,
    load_or_run,
    load_result,
    rerun_estimate,
    run_experiment,
)
from mlbook.experiments.train import TrainConfig, evaluate_loss, pick_device, train  # noqa: F401
