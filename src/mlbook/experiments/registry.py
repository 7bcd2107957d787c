"""The experiment registry: each experiment has a config per budget and a run function; results are
JSON files under results/<budget>/<name>.json holding the numbers, the config, the library
version, the device and the elapsed time. Notebooks call `load_or_run`, which reuses a saved
result only when its config matches the current one exactly."""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import platform
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

import mlbook
from mlbook.experiments.train import cpu_threads, pick_device
from mlbook.transformer.validate import env_folder

__all__ = ["BUDGETS", "Experiment", "REGISTRY", "register", "default_budget", "results_dir", "result_path",
           "run_experiment", "load_result", "load_or_run", "command_for", "PACKAGED_RESULTS", "headline",
           "describe_record", "rerun_estimate", "NO_RECORD", "merge_seed_results", "extend_experiment",
           "get_experiment", "read_record", "check_writable", "RECORD_KEYS"]

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


# Saved numbers keep 6 significant digits: every figure and table shows 2 to 4, and full
# float64 reprs made the per-position records several times larger for nothing.
SAVED_DIGITS = 6


def _rounded(obj: Any) -> Any:
    if isinstance(obj, float):
        return float(f"{obj:.{SAVED_DIGITS}g}")
    if isinstance(obj, dict):
        return {k: _rounded(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rounded(v) for v in obj]
    return obj


def record_text(record: dict[str, Any]) -> str:
    """A record as written to disk (its results already rounded to SAVED_DIGITS by run_experiment)."""
    return _dump({**record, "results": _rounded(record["results"])}, "") + "\n"


def _dump(obj: Any, indent: str) -> str:
    """JSON with one item per line, except that a list of numbers or strings stays on one line
    (per-position curves would otherwise take a line per number)."""
    inner = indent + " "
    if isinstance(obj, dict) and obj:
        items = [f"{inner}{json.dumps(k)}: {_dump(v, inner)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(obj, list) and obj and any(isinstance(v, (dict, list)) for v in obj):
        return "[\n" + ",\n".join(inner + _dump(v, inner) for v in obj) + "\n" + indent + "]"
    return json.dumps(obj)


def get_experiment(name: str) -> Experiment:
    """The registered experiment `name`; ValueError naming the valid ones otherwise."""
    from mlbook.experiments import catalog  # noqa: F401  (registers every experiment)

    if name not in REGISTRY:
        raise ValueError(f"unknown experiment {name!r}; valid names are {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]


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
    env = env_folder("MLBOOK_RESULTS")  # a blank value or a file there is an error naming the variable
    if env is not None:
        return env
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
    exp = get_experiment(name)
    _check_budget(budget)
    dev = pick_device(device)
    if save:
        check_writable(result_path(name, budget))  # before training: a finished run must have somewhere to go
    start = time.perf_counter()
    with cpu_threads(dev):  # one intra-op thread on CPU: tiny models run faster without oversubscription
        threads = torch.get_num_threads()  # the count actually used, not the one restored afterwards
        results = exp.fn(exp.configs[budget], dev, progress)
    record = {
        "name": name,
        "title": exp.title,
        "budget": budget,
        "config": exp.configs[budget],
        "results": _rounded(_jsonable(results)),
        "mlbook_version": mlbook.__version__,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "device": str(dev) if dev.type != "cuda" else f"cuda ({torch.cuda.get_device_name(dev)})",
        "threads": threads,
        "elapsed_s": round(time.perf_counter() - start, 1),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command_for(name, budget),
    }
    if save:
        _save_record(record, result_path(name, budget))
    return record


def check_writable(path: Path) -> None:
    """Refuse, before any training, a record path that cannot be written: its folder cannot be made or
    written to (tried by creating and removing a temporary file there), or a folder stands where the
    record goes. ValueError naming the path and what to do."""
    hint = "set MLBOOK_RESULTS to a writable folder, or pass save=False (--no-save)"
    folder = path.parent
    if path.is_dir():
        raise ValueError(f"cannot save the record: {path} is a folder, not a file; remove it or {hint}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as err:
        raise ValueError(f"cannot save the record in {folder} ({type(err).__name__}: {err.strerror or err}); "
                         f"{hint}") from None


def _save_record(record: dict[str, Any], path: Path) -> Path:
    """Write the record to path (through a temporary file); if that fails after all (the folder changed
    during the run), write it to a fresh temporary folder instead and warn where: never lose a run."""
    text = record_text(record)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(text)
        tmp.replace(path)
        return path
    except OSError as err:
        rescue = Path(tempfile.mkdtemp(prefix="mlbook-record-")) / path.name
        rescue.write_text(text)
        warnings.warn(f"could not write the record to {path} ({type(err).__name__}: {err}); it was saved to "
                      f"{rescue} instead: copy it to {path} once that is writable", RuntimeWarning, stacklevel=3)
        return rescue


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
    _check_budget(budget)
    config = exp.configs[budget]
    want = list(config["seeds"])
    old = None
    for folder in dict.fromkeys((results_dir(), PACKAGED_RESULTS)):
        record = read_record(folder / budget / f"{name}.json")
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
    if save:
        check_writable(result_path(name, budget))  # before training the missing seeds
    if old.get("device") != (str(dev) if dev.type != "cuda" else f"cuda ({torch.cuda.get_device_name(dev)})"):
        raise ValueError(f"the saved record of {name!r} ran on {old.get('device')}, this run would use {dev}; "
                         "pass the same device or run it whole")
    start = time.perf_counter()
    with cpu_threads(dev):
        results = exp.fn({**config, "seeds": missing}, dev, progress)
    merged = merge_seed_results(old["results"], _rounded(_jsonable(results)))
    order = {s: i for i, s in enumerate(want)}
    if [s for s in merged.get("seeds", want)] != sorted(merged.get("seeds", want), key=order.__getitem__):
        raise ValueError(f"the merged seeds {merged.get('seeds')} are not in the config's order {want}")
    record = {**old, "config": config, "results": merged,
              "elapsed_s": round(float(old.get("elapsed_s", 0.0)) + time.perf_counter() - start, 1),
              "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
              "mlbook_version": mlbook.__version__,
              "command": command_for(name, budget) + " --extend",
              "extended_from": {"seeds": have, "created": old.get("created"), "elapsed_s": old.get("elapsed_s")}}
    if save:
        _save_record(record, result_path(name, budget))
    return record


RECORD_KEYS: tuple[str, ...] = ("name", "budget", "config", "results")


def read_record(path: Path) -> dict[str, Any] | None:
    """The record saved at path, or None: None quietly when there is none, and with a warning naming
    the path and the fault when it cannot be used (a folder in its place, unreadable, not UTF-8, not
    JSON, not a JSON object, or without the keys RECORD_KEYS), so that the caller falls back."""
    if not path.exists():
        return None
    fault = None
    record: Any = None
    if not path.is_file():
        fault = "it is not a file"
    else:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError as err:
            fault = f"it is not UTF-8 text ({err.reason} at byte {err.start})"
        except json.JSONDecodeError as err:
            fault = f"it is not JSON ({err.msg} at line {err.lineno}, column {err.colno})"
        except OSError as err:
            fault = f"it cannot be read ({type(err).__name__}: {err.strerror or err})"
    if fault is None and not isinstance(record, dict):
        fault = f"it holds a JSON {type(record).__name__}, not an object"
    if fault is None:
        lacking = [k for k in RECORD_KEYS if k not in record]
        if lacking:
            fault = f"it lacks the keys {lacking}"
        elif not isinstance(record["config"], dict) or not isinstance(record["results"], dict):
            fault = "its config and results are not both JSON objects"
    if fault is not None:
        warnings.warn(f"skipping the experiment record {path}: {fault}; using the next one (the packaged record, "
                      f"if any)", RuntimeWarning, stacklevel=3)
        return None
    return record


def _read_matching(path: Path, config: dict[str, Any]) -> dict[str, Any] | None:
    record = read_record(path)
    return record if record is not None and record.get("config") == config else None


def load_result(name: str, budget: str) -> dict[str, Any] | None:
    """The saved record for (name, budget) if its config matches the current one, else None.

    Looks in `results_dir()` first, then in the records shipped with the package."""
    exp = get_experiment(name)
    _check_budget(budget)
    for folder in dict.fromkeys((results_dir(), PACKAGED_RESULTS)):
        record = _read_matching(folder / budget / f"{name}.json", exp.configs[budget])
        if record is not None:
            return record
    return None


def load_or_run(name: str, budget: str | None = None, device: str | None = None, *, progress: bool = True) -> dict[str, Any]:
    """Reuse a saved result whose config matches; otherwise run the experiment (and save it)."""
    budget = default_budget() if budget is None else _check_budget(budget)
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
        f"torch {record.get('torch_version', '?')}", 78)


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

