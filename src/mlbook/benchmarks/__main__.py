"""Command line: `python -m mlbook.benchmarks list` and
`python -m mlbook.benchmarks run NAME|all [--quick] [--device auto|cpu|cuda|mps] [--threads N] [--no-save] [--note TEXT]`."""

from __future__ import annotations

import argparse
import json
import sys
import time

from mlbook.benchmarks import names
from mlbook.benchmarks.registry import BENCHMARKS, get_benchmark, record_path, run_benchmark
from mlbook.experiments.summary_png import write_beside


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mlbook.benchmarks", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the benchmarks")
    run = sub.add_parser("run", help="run one benchmark (or all) and write its JSON record under results/")
    run.add_argument("name", help="a benchmark name, or 'all'")
    run.add_argument("--quick", action="store_true", help="the quick budget (small sizes, few rounds)")
    run.add_argument("--device", default=None,
                     help="auto (cuda, then mps, then cpu), cpu, cuda, cuda:N or mps; default: $MLBOOK_DEVICE, else auto "
                          "(the committed records are CPU records: make bench passes --device cpu)")
    run.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's choice)")
    run.add_argument("--no-save", action="store_true", help="print the results without writing a record")
    run.add_argument("--note", default=None, help="a sentence stored in the record (e.g. that the machine was busy)")
    args = parser.parse_args(argv)

    if args.command == "list":
        for name in names():
            b = BENCHMARKS[name]
            print(f"{name:20s} {b.title}")
        return 0
    budget = "quick" if args.quick else "full"
    todo = names() if args.name == "all" else [args.name]
    start = time.perf_counter()
    for name in todo:
        try:
            get_benchmark(name)
            record = run_benchmark(name, budget, args.device, save=not args.no_save, threads=args.threads,
                                   note=args.note)
        except (ValueError, OSError) as err:  # bad arguments, an unwritable results folder: refused before the run
            parser.error(str(err))
        if args.no_save:
            print(json.dumps(record["results"], indent=1))
        where = "" if args.no_save else f" -> {record_path(name, budget, record['device'].split(' ')[0].split(':')[0])}"
        if not args.no_save:  # its picture beside it: the medians with their spread
            where += f" and {write_beside(record, record_path(name, budget, record['device'].split(' ')[0].split(':')[0]))}"
        print(f"{name} ({budget}) on {record['device']}, {record['threads']} threads, in {record['elapsed_s']} s{where}",
              file=sys.stderr)
    if len(todo) > 1:
        print(f"all benchmarks in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
