"""The experiment registry: each experiment has a config per budget and a run function; results are
records (`mlbook.records`, the store the benchmarks share) under results/<budget>/<name>.json holding
the numbers, the config, the machine, the versions and the elapsed time. Notebooks call
`load_or_run`, which reuses a saved result only when its config matches the current one exactly."""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import time
from pathlib import Path
from typing import Any, Iterator

import torch

import mlbook
from mlbook.experiments.train import cpu_threads
from mlbook.records import (
    BUDGETS,
    PACKAGED_RESULTS,
    RECORD_KEYS,
    Registered,
    Registry,
    check_budget,
    check_writable,
    device_label,
    find_record,
    jsonable,
    machine_info,
    make_record,
    pick_device,
    read_record,
    record_text,
    results_dir,
    rounded,
    save_record,
)

__all__ = ["BUDGETS", "Experiment", "REGISTRY", "register", "default_budget", "results_dir", "result_path",
           "run_experiment", "load_result", "load_or_run", "command_for", "PACKAGED_RESULTS", "headline",
           "describe_record", "rerun_estimate", "NO_RECORD", "merge_seed_results", "extend_experiment",
           "get_experiment", "read_record", "check_writable", "RECORD_KEYS"]

Experiment = Registered  # name, title, claim, configs (budget -> config), fn(config, device, progress)


def _load_catalog() -> None:
    from mlbook.experiments import catalog  # noqa: F401  (registers every experiment)


REGISTRY: Registry = Registry("experiment", _load_catalog)
register = REGISTRY.register  # decorator: @register(name, title=..., claim=..., configs={"quick": ..., "full": ...})


def get_experiment(name: str) -> Experiment:
    """The registered experiment `name`; ValueError naming the valid ones otherwise."""
    return REGISTRY.lookup(name)


def default_budget() -> str:
    """MLBOOK_BUDGET if set, else 'quick'.

    A GPU does not change this: the committed full-budget records are what a reader sees first,
    and re-running the full budget is a deliberate choice (set MLBOOK_BUDGET=full, or pass
    budget="full"), not something that happens because a GPU is present."""
    env = os.environ.get("MLBOOK_BUDGET")
    if env:
        if env not in BUDGETS:
            raise ValueError(f"MLBOOK_BUDGET must be one of {', '.join(BUDGETS)}, got {env!r}")
        return env
    return "quick"


KIND = "experiment record"  # how the store's warnings name a record it skips


def _folders() -> tuple[Path, ...]:
    """Where saved records are looked for, in order: the results folder, then the packaged records
    (this module's PACKAGED_RESULTS, which tests point elsewhere)."""
    return tuple(dict.fromkeys((results_dir(), PACKAGED_RESULTS)))


def result_path(name: str, budget: str) -> Path:
    return results_dir() / budget / f"{name}.json"


def command_for(name: str, budget: str) -> str:
    return f"python -m mlbook.experiments run {name} --budget {budget}"


def run_experiment(name: str, budget: str = "quick", device: str | None = None, *, progress: bool = True,
                   save: bool = True) -> dict[str, Any]:
    """Run one experiment and return its record; save it under results/ unless save=False."""
    exp = get_experiment(name)
    check_budget(budget)
    dev = pick_device(device)
    # the path is read once, before training: a results folder that breaks during the run (MLBOOK_RESULTS
    # replaced by a file) must not stop a finished run from reaching save_record, which rescues it
    path = result_path(name, budget) if save else None
    if path is not None:
        check_writable(path)  # before training: a finished run must have somewhere to go
    start = time.perf_counter()
    with cpu_threads(dev):  # one intra-op thread on CPU: tiny models run faster without oversubscription
        machine = machine_info(dev)  # inside: the thread count actually used, not the one restored afterwards
        results = exp.fn(exp.configs[budget], dev, progress)
    record = make_record(name, budget, exp.configs[budget], results, machine, time.perf_counter() - start,
                         command_for(name, budget), title=exp.title)
    if path is not None:
        save_record(record, path)
    return record


# -- adding seeds to a record -------------------------------------------------------------------
# Every experiment loops over seeds independently (each seed builds, trains and scores its own
# models from its own seed; the held-out text is fixed by eval_seed), and its results keep one
# entry per seed. So a record for seeds [0, 1, 2] plus a run of seeds [3, 4] equals a run of
# [0, ..., 4]: `merge_seed_results` concatenates what is per seed and checks that everything else
# is identical. tests/test_experiments_core.py checks the equality on a quick run.

_PER_SEED_LISTS = ("seeds", "seconds_per_seed")


def merge_seed_results(old: Any, new: Any, path: str = "results") -> Any:
    """Merge the results of two runs on disjoint seeds: per-seed lists (`seeds`, `seconds_per_seed`,
    and any list whose items are dicts with a "seed" key) are concatenated; every other value must
    be the same in both, else ValueError naming where they differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        if set(old) != set(new):
            raise ValueError(f"cannot merge: {path} has keys {sorted(old)} in one run and {sorted(new)} in the other")
        out = {}
        for k in old:
            if k in _PER_SEED_LISTS and isinstance(old[k], list) and isinstance(new[k], list):
                out[k] = old[k] + new[k]
            else:
                out[k] = merge_seed_results(old[k], new[k], f"{path}.{k}")
        return out
    if (isinstance(old, list) and isinstance(new, list) and old and new
            and all(isinstance(v, dict) and "seed" in v for v in old + new)):
        seen = {v["seed"] for v in old}
        clash = sorted(seen & {v["seed"] for v in new})
        if clash:
            raise ValueError(f"cannot merge: {path} has seeds {clash} in both runs")
        return old + new
    if old != new:
        raise ValueError(f"cannot merge: {path} differs between the runs ({str(old)[:60]!r} vs {str(new)[:60]!r}); "
                         "the records were not made by the same code and settings")
    return old


def extend_experiment(name: str, budget: str = "full", device: str | None = None, *, progress: bool = True,
                      save: bool = True) -> dict[str, Any]:
    """Bring a saved record up to the seeds the current config asks for by running only the missing seeds.

    The saved record (results folder first, then the packaged one) must have the current config in
    every key but "seeds", its seeds a subset of the config's, and the same torch version; anything
    else is refused before any training. The merged record keeps the config's seed order."""
    exp = get_experiment(name)
    check_budget(budget)
    config = exp.configs[budget]
    want = list(config["seeds"])
    old = None
    for folder in _folders():
        record = read_record(folder / budget / f"{name}.json", KIND)
        if record is None:
            continue
        cfg = record.get("config")
        if isinstance(cfg, dict) and {k: v for k, v in cfg.items() if k != "seeds"} == \
                {k: v for k, v in config.items() if k != "seeds"}:
            old = record
            break
    if old is None:
        raise ValueError(f"no saved {budget}-budget record of {name!r} matches the current config apart from its "
                         f"seeds; run it whole instead: {command_for(name, budget)}")
    have = list(old["config"]["seeds"])
    if not set(have) <= set(want):
        raise ValueError(f"the saved record of {name!r} has seeds {have}, not a subset of the config's {want}")
    if old.get("torch_version") != torch.__version__:
        raise ValueError(f"the saved record of {name!r} was made with torch {old.get('torch_version')}, this is "
                         f"torch {torch.__version__}; seeds from two versions may not mix: run it whole instead")
    missing = [s for s in want if s not in have]
    if not missing:
        return old
    dev = pick_device(device)
    path = result_path(name, budget) if save else None  # once, before training, as in run_experiment
    if path is not None:
        check_writable(path)  # before training the missing seeds
    if old.get("device") != device_label(dev):
        raise ValueError(f"the saved record of {name!r} ran on {old.get('device')}, this run would use {dev}; "
                         "pass the same device or run it whole")
    start = time.perf_counter()
    with cpu_threads(dev):
        results = exp.fn({**config, "seeds": missing}, dev, progress)
    merged = merge_seed_results(old["results"], rounded(jsonable(results)))
    order = {s: i for i, s in enumerate(want)}
    if [s for s in merged.get("seeds", want)] != sorted(merged.get("seeds", want), key=order.__getitem__):
        raise ValueError(f"the merged seeds {merged.get('seeds')} are not in the config's order {want}")
    record = {**old, "config": config, "results": merged,
              "elapsed_s": round(float(old.get("elapsed_s", 0.0)) + time.perf_counter() - start, 1),
              "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
              "mlbook_version": mlbook.__version__,
              "command": command_for(name, budget) + " --extend",
              "extended_from": {"seeds": have, "created": old.get("created"), "elapsed_s": old.get("elapsed_s")}}
    if path is not None:
        save_record(record, path)
    return record


def load_result(name: str, budget: str) -> dict[str, Any] | None:
    """The saved record for (name, budget) if its config matches the current one, else None.

    Looks in `results_dir()` first, then in the records shipped with the package; a record there
    that cannot be read is skipped with a warning (`mlbook.records.read_record`)."""
    exp = get_experiment(name)
    check_budget(budget)
    return find_record([folder / budget / f"{name}.json" for folder in _folders()], KIND, exp.configs[budget])
def load_or_run(name: str, budget: str | None = None, device: str | None = None, *, progress: bool = True) -> dict[str, Any]:
    """Reuse a saved result whose config matches; otherwise run the experiment (and save it)."""
    budget = default_budget() if budget is None else check_budget(budget)
    record = load_result(name, budget)
    if record is not None:
        return record
    check_writable(result_path(name, budget))  # before the lock and the training: never lose a finished run
    # Two processes sharing one results folder (the Colab check and the site build, run side by
    # side by `make test`) must not both train the same experiment: the first takes a lock on
    # the record, the second waits for it and then loads what the first saved.
    with _record_lock(result_path(name, budget)):
        return load_result(name, budget) or run_experiment(name, budget, device, progress=progress)


@contextlib.contextmanager
def _record_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on `path`.lock for the duration of the block (POSIX only;
    elsewhere, where fcntl is missing, no lock)."""
    try:
        import fcntl
    except ImportError:  # Windows: no cross-process lock, a duplicate run is merely slower
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# The exact marker printed wherever a page would show a saved record that does not exist (a check
# greps for it); never printed otherwise.
NO_RECORD = "No saved full-budget record"


def describe_record(record: dict[str, Any]) -> str:
    """One line saying where a record comes from: budget, seeds, device, threads, time (per seed)."""
    r = record.get("results", {})
    seeds = r.get("seeds")
    per_seed = r.get("seconds_per_seed")
    seed_part = f", seeds {seeds}" if seeds is not None else ""
    time_part = f"{record.get('elapsed_s', '?')} s in all"
    if per_seed:
        time_part += " (per seed: " + ", ".join(f"{t:g}" for t in per_seed) + " s)"
    import textwrap

    return textwrap.fill(
        f"{record.get('budget', '?')} budget{seed_part}; {record.get('device', '?')}, "
        f"{record.get('threads', '?')} thread{'s' if record.get('threads') != 1 else ''}; {time_part}; "
        f"created {record.get('created', '?')}; mlbook {record.get('mlbook_version', '?')}, "
        f"torch {record.get('torch_version', '?')}, Python {record.get('python_version', '?')} (its pydoc_data "
        "is the corpus)", 78)


def rerun_estimate(name: str, budget: str = "full") -> str:
    """What re-running (name, budget) costs, from the saved record's own measured time, or the
    NO_RECORD marker when there is none."""
    record = load_result(name, budget)
    if record is None:
        return f"{NO_RECORD} for {name!r}, so no measured time to go by; make one with:\n  {command_for(name, budget)}"
    import textwrap

    secs = float(record.get("elapsed_s", 0.0))
    return textwrap.fill(
        f"The saved {budget}-budget run of {name!r} took {secs:.0f} s (about {secs / 60:.0f} min) on "
        f"{record.get('device', '?')} with {record.get('threads', '?')} thread(s); a GPU is usually faster, a busy "
        f"CPU slower. Command line: {command_for(name, budget)}", 78)


def headline(name: str, budget: str = "full") -> str:
    """What experiment `name` found, in a few lines with its numbers, from the saved record.

    Section pages print this where they cite an experiment. The text comes from the
    experiment module's own `headline(record)` when it defines one; otherwise it names the
    record and says where to read it. Without a saved record it says how to make one.
    """
    import importlib

    exp = get_experiment(name)
    record = load_result(name, budget)
    if record is None:
        marker = NO_RECORD if budget == "full" else f"No saved {budget}-budget record"
        return f"{marker} for {name!r}; make one with:\n  {command_for(name, budget)}"
    module = importlib.import_module(exp.fn.__module__)
    fn = getattr(module, "headline", None)
    if callable(fn):
        return str(fn(record))
    return f"{exp.title} ({budget} budget, {record.get('device', '?')}, {record.get('elapsed_s', '?')} s)"

