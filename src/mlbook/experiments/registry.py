"""The experiment registry: each experiment has a config per budget and a run function; results are
JSON files under results/<budget>/<name>.json holding the numbers, the config, the library
version, the device and the elapsed time. Notebooks call `load_or_run`, which reuses a saved
result only when its config matches the current one exactly."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

import mlbook
from mlbook.experiments.train import cpu_threads, pick_device

__all__ = ["BUDGETS", "Experiment", "REGISTRY", "register", "default_budget", "results_dir", "result_path",
           "run_experiment", "load_result", "load_or_run", "command_for", "PACKAGED_RESULTS", "headline"]

BUDGETS: tuple[str, ...] = ("quick", "full")


@dataclass
class Experiment:
    name: str
    title: str
    claim: str  # what the chapter says, which the experiment tests
    configs: dict[str, dict[str, Any]]  # budget -> JSON-able config
    fn: Callable[[dict[str, Any], torch.device, bool], dict[str, Any]]  # (config, device, progress) -> numbers


REGISTRY: dict[str, Experiment] = {}


def register(name: str, title: str, claim: str, configs: dict[str, dict[str, Any]]):  # type: ignore[no-untyped-def]
    """Decorator adding `fn(config, device, progress) -> results` to the registry under `name`."""
    missing = set(BUDGETS) - set(configs)
    if missing:
        raise ValueError(f"experiment {name!r} needs a config for every budget; missing {sorted(missing)}")

    def wrap(fn: Callable[[dict[str, Any], torch.device, bool], dict[str, Any]]):  # type: ignore[no-untyped-def]
        REGISTRY[name] = Experiment(name, title, claim, {b: _jsonable(c) for b, c in configs.items()}, fn)
        return fn

    return wrap


def _jsonable(obj: Any) -> Any:
    return json.loads(json.dumps(obj))


def _get(name: str) -> Experiment:
    from mlbook.experiments import catalog  # noqa: F401  (registers every experiment)

    if name not in REGISTRY:
        raise ValueError(f"unknown experiment {name!r}; valid names are {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]


def default_budget() -> str:
    """MLBOOK_BUDGET if set, else 'full' when a CUDA GPU is present, else 'quick'."""
    env = os.environ.get("MLBOOK_BUDGET")
    if env:
        if env not in BUDGETS:
            raise ValueError(f"MLBOOK_BUDGET must be one of {', '.join(BUDGETS)}, got {env!r}")
        return env
    return "full" if torch.cuda.is_available() else "quick"


# The committed full-budget records ship inside the package (package data), so a reader sees
# them wherever `mlbook` is installed: a clone, `pip install git+...` in Colab, a wheel.
PACKAGED_RESULTS = Path(__file__).resolve().parents[1] / "results"  # src/mlbook/results


def _source_checkout() -> Path | None:
    """The repository root when mlbook is imported from a clone (src layout), else None."""
    root = PACKAGED_RESULTS.parents[2]
    return root if (root / "_config.yml").is_file() and (root / "src" / "mlbook").is_dir() else None


def results_dir() -> Path:
    """Where records are written: MLBOOK_RESULTS if set; in a clone, the package's own
    `results/` (so a full-budget run updates the committed record; quick runs go to the
    git-ignored `results/quick/`); otherwise a user cache folder (~/.cache/mlbook/results)."""
    env = os.environ.get("MLBOOK_RESULTS")
    if env:
        return Path(env)
    if _source_checkout() is not None:
        return PACKAGED_RESULTS
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "mlbook" / "results"


def result_path(name: str, budget: str) -> Path:
    return results_dir() / budget / f"{name}.json"


def command_for(name: str, budget: str) -> str:
    return f"python -m mlbook.experiments run {name} --budget {budget}"


def _check_budget(budget: str) -> str:
    if budget not in BUDGETS:
        raise ValueError(f"unknown budget {budget!r}; valid values are {', '.join(BUDGETS)}")
    return budget


def run_experiment(name: str, budget: str = "quick", device: str | None = None, *, progress: bool = True,
                   save: bool = True) -> dict[str, Any]:
    """Run one experiment and return its record; save it under results/ unless save=False."""
    exp = _get(name)
    _check_budget(budget)
    dev = pick_device(device)
    start = time.perf_counter()
    with cpu_threads(dev):  # one intra-op thread on CPU: tiny models run faster without oversubscription
        results = exp.fn(exp.configs[budget], dev, progress)
    record = {
        "name": name,
        "title": exp.title,
        "budget": budget,
        "config": exp.configs[budget],
        "results": _jsonable(results),
        "mlbook_version": mlbook.__version__,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "device": str(dev) if dev.type != "cuda" else f"cuda ({torch.cuda.get_device_name(dev)})",
        "threads": torch.get_num_threads(),
        "elapsed_s": round(time.perf_counter() - start, 1),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command_for(name, budget),
    }
    if save:
        path = result_path(name, budget)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        tmp.replace(path)
    return record


def _read_matching(path: Path, config: dict[str, Any]) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError:
        return None
    return record if record.get("config") == config else None


def load_result(name: str, budget: str) -> dict[str, Any] | None:
    """The saved record for (name, budget) if its config matches the current one, else None.

    Looks in `results_dir()` first, then in the records shipped with the package."""
    exp = _get(name)
    _check_budget(budget)
    for folder in dict.fromkeys((results_dir(), PACKAGED_RESULTS)):
        record = _read_matching(folder / budget / f"{name}.json", exp.configs[budget])
        if record is not None:
            return record
    return None


def load_or_run(name: str, budget: str | None = None, device: str | None = None, *, progress: bool = True) -> dict[str, Any]:
    """Reuse a saved result whose config matches; otherwise run the experiment (and save it)."""
    budget = default_budget() if budget is None else _check_budget(budget)
    return load_result(name, budget) or run_experiment(name, budget, device, progress=progress)


def headline(name: str, budget: str = "full") -> str:
    """What experiment `name` found, in a few lines with its numbers, from the saved record.

    Section pages print this where they cite an experiment. The text comes from the
    experiment module's own `headline(record)` when it defines one; otherwise it names the
    record and says where to read it. Without a saved record it says how to make one.
    """
    import importlib

    exp = _get(name)
    record = load_result(name, budget)
    if record is None:
        return f"No saved {budget}-budget record for {name!r}; make one with: {command_for(name, budget)}"
    module = importlib.import_module(exp.fn.__module__)
    fn = getattr(module, "headline", None)
    if callable(fn):
        return str(fn(record))
    return f"{exp.title} ({budget} budget, {record.get('device', '?')}, {record.get('elapsed_s', '?')} s)"

