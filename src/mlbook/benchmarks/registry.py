"""The benchmark registry: each benchmark has a config per budget ("quick", "full") and a run
function; a run writes one JSON record (the experiments' record format) holding the numbers,
the config, the library and torch versions, the device and CPU, the thread count and the
elapsed time. Every ratio in a record compares timings measured in the same run.

Records live in `results/bench/<name>.json` (full budget, committed, shipped as package data)
and `results/quick/bench/<name>.json` (quick budget, git-ignored). A run on a device other than
the CPU adds the device type to the file name: `results/bench/<name>.cuda.json`.
"""

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
from mlbook.transformer.validate import check_device, env_folder

__all__ = [
    "BUDGETS",
    "Benchmark",
    "BENCHMARKS",
    "register",
    "get_benchmark",
    "load_catalog",
    "record_path",
    "run_benchmark",
    "load_record",
    "command_for",
    "machine_info",
    "describe_record",
    "PACKAGED_RESULTS",
]

BUDGETS: tuple[str, ...] = ("quick", "full")

# (config, device, progress) -> results
BenchFn = Callable[[dict[str, Any], torch.device, bool], dict[str, Any]]


@dataclass
class Benchmark:
    name: str
    title: str
    claim: str  # what the book states, which the benchmark measures
    configs: dict[str, dict[str, Any]]  # budget -> JSON-able config
    fn: BenchFn


BENCHMARKS: dict[str, Benchmark] = {}


def _jsonable(obj: Any) -> Any:
    return json.loads(json.dumps(obj))


def register(name: str, title: str, claim: str, configs: dict[str, dict[str, Any]]) -> Callable[[BenchFn], BenchFn]:
    """Decorator adding `fn(config, device, progress) -> results` to the registry under `name`."""
    missing = set(BUDGETS) - set(configs)
    if missing:
        raise ValueError(f"benchmark {name!r} needs a config for every budget; missing {sorted(missing)}")

    def wrap(fn: BenchFn) -> BenchFn:
        BENCHMARKS[name] = Benchmark(name, title, claim, {b: _jsonable(c) for b, c in configs.items()}, fn)
        return fn

    return wrap


def load_catalog() -> None:
    """Import the benchmark modules, each of which registers its benchmarks in BENCHMARKS."""
    from mlbook.benchmarks import attention, rope, sliders  # noqa: F401  (each registers itself)


def get_benchmark(name: str) -> Benchmark:
    """The registered benchmark `name`; ValueError naming the valid ones otherwise."""
    load_catalog()
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; valid names are {', '.join(sorted(BENCHMARKS))}")
    return BENCHMARKS[name]


def _check_budget(budget: str) -> str:
    if budget not in BUDGETS:
        raise ValueError(f"unknown budget {budget!r}; valid values are {', '.join(BUDGETS)}")
    return budget


# Committed records ship inside the package, next to the experiments' results/full/.
PACKAGED_RESULTS = Path(__file__).resolve().parents[1] / "results"  # src/mlbook/results


def _source_checkout() -> bool:
    root = PACKAGED_RESULTS.parents[2]
    return (root / "_config.yml").is_file() and (root / "src" / "mlbook").is_dir()


def _results_dir() -> Path:
    """MLBOOK_RESULTS if set; in a clone the package's own results/ (so a full run updates the
    committed record); otherwise a user cache folder."""
    env = env_folder("MLBOOK_RESULTS")  # a blank value or a file there is an error naming the variable
    if env is not None:
        return env
    if _source_checkout():
        return PACKAGED_RESULTS
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "mlbook" / "results"


def _file_name(name: str, device_type: str) -> str:
    return f"{name}.json" if device_type == "cpu" else f"{name}.{device_type}.json"


def record_path(name: str, budget: str = "full", device_type: str = "cpu", folder: Path | None = None) -> Path:
    """Where the record of benchmark `name` at `budget` on `device_type` is written."""
    _check_budget(budget)
    base = _results_dir() if folder is None else folder
    sub = Path("bench") if budget == "full" else Path("quick") / "bench"
    return base / sub / _file_name(name, device_type)


def command_for(name: str, budget: str = "full") -> str:
    quick = " --quick" if budget == "quick" else ""
    return f"python -m mlbook.benchmarks run {name}{quick}"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(device: torch.device) -> dict[str, Any]:
    """Device, CPU model, core and thread counts, library versions: stored in every record."""
    return {
        "device": str(device) if device.type != "cuda" else f"cuda ({torch.cuda.get_device_name(device)})",
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "mlbook_version": mlbook.__version__,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
    }


def _pick_device(device: str | None) -> torch.device:
    # None means cpu here (benchmark records are per device type; the committed ones are CPU records)
    return check_device("device", "cpu" if device is None else device)


def run_benchmark(
    name: str, budget: str = "quick", device: str | None = None, *, progress: bool = True, save: bool = True,
    threads: int | None = None,
) -> dict[str, Any]:
    """Run benchmark `name` and return its record; write it under results/ unless save=False.

    threads: torch's intra-op thread count for the run (default: torch's own choice).
    """
    bench = get_benchmark(name)
    _check_budget(budget)
    dev = _pick_device(device)
    previous = torch.get_num_threads()
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be an int >= 1, got {threads!r}")
        torch.set_num_threads(threads)
    try:
        info = machine_info(dev)
        start = time.perf_counter()
        results = bench.fn(bench.configs[budget], dev, progress)
        elapsed = time.perf_counter() - start
    finally:
        torch.set_num_threads(previous)
    record = {
        "name": name,
        "title": bench.title,
        "claim": bench.claim,
        "budget": budget,
        "config": bench.configs[budget],
        "results": _jsonable(results),
        **info,
        "elapsed_s": round(elapsed, 1),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command_for(name, budget),
    }
    if save:
        path = record_path(name, budget, dev.type)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        tmp.replace(path)
    return record


def load_record(name: str, budget: str = "full", device_type: str = "cpu") -> dict[str, Any] | None:
    """The saved record of `name` whose config matches the current one, else None.

    Looks where runs write first (MLBOOK_RESULTS, the clone, the user cache), then in the records
    shipped with the package.
    """
    bench = get_benchmark(name)
    _check_budget(budget)
    for folder in dict.fromkeys((_results_dir(), PACKAGED_RESULTS)):
        path = record_path(name, budget, device_type, folder)
        if not path.is_file():
            continue
        try:
            record = json.loads(path.read_text())
        except json.JSONDecodeError:
            continue
        if record.get("config") == bench.configs[budget]:
            return record
    return None


def describe_record(record: dict[str, Any]) -> str:
    """Where and how a record was measured, and the command that remakes it (three lines)."""
    return (f"{record['name']}, {record['budget']} budget, measured {record['created'][:10]} in {record['elapsed_s']:.0f} s\n"
            f"on {record['device']} ({record.get('cpu', '?')}), {record['threads']} threads, torch {record['torch_version']}\n"
            f"remake with: {record['command']}")
