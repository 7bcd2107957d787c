"""The benchmark registry: each benchmark has a config per budget ("quick", "full") and a run
function; a run writes one record to the store the experiments share (`mlbook.records`) holding
the numbers, the config, the library and torch versions, the device and CPU, the thread count and
the elapsed time. Every ratio in a record compares timings measured in the same run.

Records live in `results/bench/<name>.json` (full budget, committed, shipped as package data)
and `results/quick/bench/<name>.json` (quick budget, git-ignored). A run on a device other than
the CPU adds the device type to the file name: `results/bench/<name>.cuda.json`.

BOOK_RECORDS names the records the package ships whose benchmark measures the book rather than
the library, so lives with the book's tools: `load_record` reads them (without a config to
compare, since the config lives with the tool) and `command_for` names the tool.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from mlbook.records import (
    BUDGETS,
    PACKAGED_RESULTS,
    Registered,
    Registry,
    check_budget,
    check_writable,
    find_record,
    machine_info,
    make_record,
    pick_device,
    results_dir,
    save_record,
)

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
    "BOOK_RECORDS",
]

Benchmark = Registered  # name, title, claim, configs (budget -> config), fn(config, device, progress)


def load_catalog() -> None:
    """Import the benchmark modules, each of which registers its benchmarks in BENCHMARKS."""
    from mlbook.benchmarks import attention, rope  # noqa: F401  (each registers itself)


BENCHMARKS: Registry = Registry("benchmark", load_catalog)
register = BENCHMARKS.register  # decorator: register(name, title, claim, {"quick": ..., "full": ...})(fn)

# Records shipped with the package whose benchmark measures the book, not the library: name -> the
# command (in the book's repository) that remakes the full-budget record.
BOOK_RECORDS: dict[str, str] = {"live_sliders": "python tools/bench_sliders.py"}

KIND = "benchmark record"  # how the store's warnings name a record it skips


def get_benchmark(name: str) -> Benchmark:
    """The registered benchmark `name`; ValueError naming the valid ones otherwise."""
    return BENCHMARKS.lookup(name)


def _file_name(name: str, device_type: str) -> str:
    return f"{name}.json" if device_type == "cpu" else f"{name}.{device_type}.json"


def record_path(name: str, budget: str = "full", device_type: str = "cpu", folder: Path | None = None) -> Path:
    """Where the record of benchmark `name` at `budget` on `device_type` is written (in `folder`,
    by default `mlbook.records.results_dir()`)."""
    check_budget(budget)
    base = results_dir() if folder is None else folder
    sub = Path("bench") if budget == "full" else Path("quick") / "bench"
    return base / sub / _file_name(name, device_type)


def command_for(name: str, budget: str = "full") -> str:
    """The command that remakes the record of `name` at `budget`."""
    quick = " --quick" if budget == "quick" else ""
    if name in BOOK_RECORDS:
        return BOOK_RECORDS[name] + quick
    return f"python -m mlbook.benchmarks run {name}{quick}"


def run_benchmark(
    name: str, budget: str = "quick", device: str | None = None, *, progress: bool = True, save: bool = True,
    threads: int | None = None, note: str | None = None,
) -> dict[str, Any]:
    """Run benchmark `name` and return its record; write it under results/ unless save=False.

    device: as `mlbook.records.pick_device` (None: $MLBOOK_DEVICE, else auto); the committed records
    are CPU records (`make bench` passes --device cpu). An unwritable record path is refused before
    the run starts.
    threads: torch's intra-op thread count for the run (default: torch's own choice).
    note: a sentence stored in the record as "note" (e.g. the machine was busy).
    """
    bench = get_benchmark(name)
    check_budget(budget)
    dev = pick_device(device)
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be an int >= 1, got {threads!r}")
    path = record_path(name, budget, dev.type)
    if save:
        check_writable(path)  # before the run: a finished measurement must have somewhere to go
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        info = machine_info(dev)
        start = time.perf_counter()
        results = bench.fn(bench.configs[budget], dev, progress)
        elapsed = time.perf_counter() - start
    finally:
        torch.set_num_threads(previous)
    record = make_record(name, budget, bench.configs[budget], results, info, elapsed, command_for(name, budget),
                         title=bench.title, claim=bench.claim)
    if note:
        record["note"] = note
    if save:
        save_record(record, path)
    return record


def load_record(name: str, budget: str = "full", device_type: str = "cpu") -> dict[str, Any] | None:
    """The saved record of `name` whose config matches the current one, else None.

    Looks where runs write first (MLBOOK_RESULTS, the clone, the user cache), then in the records
    shipped with the package; a record there that cannot be read is skipped with a warning
    (`mlbook.records.read_record`). A name in BOOK_RECORDS is read without a config to compare.
    """
    config = None if name in BOOK_RECORDS else get_benchmark(name).configs[budget]
    check_budget(budget)
    folders = dict.fromkeys((results_dir(), PACKAGED_RESULTS))
    return find_record([record_path(name, budget, device_type, folder) for folder in folders], KIND, config)


def describe_record(record: dict[str, Any]) -> str:
    """Where and how a record was measured, any note stored with it, and the command that remakes it."""
    import textwrap

    note = record.get("note")
    return (f"{record['name']}, {record['budget']} budget, measured {record['created'][:10]} in {record['elapsed_s']:.0f} s\n"
            f"on {record['device']} ({record.get('cpu', '?')}), {record['threads']} threads, torch {record['torch_version']}\n"
            + (textwrap.fill(f"note: {note}", 78, subsequent_indent="    ") + "\n" if note else "")
            + f"remake with: {command_for(record['name'], record['budget'])}")
