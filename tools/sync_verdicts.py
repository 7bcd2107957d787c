"""Rewrite the "**Verdict.** ..." paragraph under each experiment page's title from the committed
full-budget record (the experiment module's verdict_line), so the page's first line never
disagrees with its numbers. tests/test_experiment_pages.py fails while a page is out of date.

    .venv/bin/python tools/sync_verdicts.py          # rewrite the pages that differ
    .venv/bin/python tools/sync_verdicts.py --check  # only report them (exit 1 if any)
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
import textwrap
from pathlib import Path

import nbformat

from mlbook.experiments import catalog, registry  # noqa: F401  (catalog registers every experiment)

ROOT = Path(__file__).resolve().parents[1]
PAGES = {"20_exp_permutation": "permutation", "21_exp_extrapolation": "extrapolation",
         "22_exp_context_extension": "context_extension", "23_exp_t5_length": "t5_length",
         "24_exp_attention_sinks": "sinks", "25_exp_passkey": "passkey",
         "26_exp_after_rope": "after_rope"}
VERDICT = re.compile(r"\*\*Verdict\.\*\* .*?(?=\n\n|\Z)", re.S)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="report pages that differ, change nothing")
    args = parser.parse_args(argv)
    stale = []
    for stem, name in PAGES.items():
        path = ROOT / "notebooks" / f"{stem}.ipynb"
        record = registry.load_result(name, "full")
        if record is None:
            print(f"{stem}: no committed full-budget record of {name!r} matches its config; not changed")
            stale.append(stem)
            continue
        module = importlib.import_module(registry.REGISTRY[name].fn.__module__)
        line = "**Verdict.** " + module.verdict_line(record)
        wrapped = textwrap.fill(line, 116, break_on_hyphens=False)
        nb = nbformat.read(path, as_version=4)
        title = nb.cells[0].source
        if not VERDICT.search(title):
            print(f"{stem}: the title cell has no '**Verdict.**' paragraph")
            stale.append(stem)
            continue
        if " ".join(VERDICT.search(title).group(0).split()) == " ".join(line.split()):
            continue
        stale.append(stem)
        if args.check:
            print(f"{stem}: verdict differs from the record")
            continue
        nb.cells[0].source = VERDICT.sub(lambda _: wrapped, title, count=1)
        nbformat.write(nb, path)
        print(f"{stem}: verdict rewritten")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
