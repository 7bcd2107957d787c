"""Command line: `python -m mlbook.experiments list` and
`python -m mlbook.experiments run NAME [--budget quick|full] [--device auto|cpu|cuda|mps] [--extend]`."""

from __future__ import annotations

import argparse
import json
import sys

from mlbook.experiments.registry import (
    BUDGETS,
    REGISTRY,
    extend_experiment,
    get_experiment,
    result_path,
    run_experiment,
)
from mlbook.experiments.summary_png import write_beside


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mlbook.experiments", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the experiments")
    run = sub.add_parser("run", help="run one experiment and write its JSON result under results/")
    run.add_argument("name")
    run.add_argument("--budget", choices=BUDGETS, default="quick")
    run.add_argument("--device", default=None,
                     help="auto (cuda, then mps, then cpu), cpu, cuda, cuda:N or mps; default: $MLBOOK_DEVICE, else auto")
    run.add_argument("--no-save", action="store_true", help="print the result without writing it")
    run.add_argument("--extend", action="store_true",
                     help="run only the seeds the saved record lacks (same config otherwise) and merge them in")
    args = parser.parse_args(argv)

    if args.command == "list":
        from mlbook.experiments import catalog  # noqa: F401

        for name in sorted(REGISTRY):
            print(f"{name:24s} {REGISTRY[name].title}")
        return 0
    try:
        get_experiment(args.name)
        # read once, before training, as run_experiment does: a results folder that breaks during the run must
        # not turn the report of a record save_record rescued (its warning says where) into a traceback
        path = None if args.no_save else result_path(args.name, args.budget)
        if args.extend:
            record = extend_experiment(args.name, args.budget, args.device, save=not args.no_save)
        else:
            record = run_experiment(args.name, args.budget, args.device, save=not args.no_save)
    except (ValueError, OSError) as err:  # bad arguments, an unwritable results folder: refused before training
        parser.error(str(err))
    print(json.dumps(record["results"], indent=1))
    where = "" if path is None else f" -> {path}"
    if path is not None:  # its picture beside it: the headline comparisons with their 95% intervals
        try:
            where += f" and {write_beside(record, path)}"
        except (ValueError, OSError) as err:  # the record is saved already: say why there is no picture
            print(f"warning: no PNG summary for {args.name}: {err}", file=sys.stderr)
    print(f"{args.name} ({args.budget}) on {record['device']} in {record['elapsed_s']} s{where}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
