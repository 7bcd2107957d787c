"""Benchmarks behind the book's systems claims (section 4), run like the experiments.

    python -m mlbook.benchmarks list
    python -m mlbook.benchmarks run rope_apply [--quick]      RoPE against a copy of the same bytes
    python -m mlbook.benchmarks run attention_position        materialised bias against FlexAttention
    python -m mlbook.benchmarks run all                       every benchmark (the committed records)

Each run writes a record to the store the experiments share (`mlbook.records`: device, CPU, torch
version, thread count, elapsed time, config, results) under results/bench/ (full) or
results/quick/bench/ (quick); notebooks read them with `load_record`. The live-figure redraw times
measure the book, not the library: tools/bench_sliders.py in the book's repository makes that record
(`live_sliders`, shipped here so that the systems page can print it).
"""

from mlbook.benchmarks.registry import (  # noqa: F401
    BENCHMARKS,
    BUDGETS,
    command_for,
    describe_record,
    get_benchmark,
    load_record,
    machine_info,
    record_path,
    run_benchmark,
)

__all__ = ["BENCHMARKS", "BUDGETS", "command_for", "describe_record", "get_benchmark", "load_record", "machine_info",
           "record_path", "run_benchmark", "names"]


def names() -> list[str]:
    """The registered benchmarks, sorted."""
    from mlbook.benchmarks.registry import load_catalog

    load_catalog()
    return sorted(BENCHMARKS)
