"""The experiment pages agree with the committed records: each opens with the verdict that its
module computes from the committed full-budget record, states the verdict rule, and the book uses
one experiment numbering (pages titled "Experiment 1".."Experiment 7", never "experiment 21")."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest

from mlbook.experiments import registry

ROOT = Path(__file__).resolve().parents[1]
PAGES = {  # notebook -> (experiment name, number in the book)
    "20_exp_permutation": ("permutation", 1),
    "21_exp_extrapolation": ("extrapolation", 2),
    "22_exp_context_extension": ("context_extension", 3),
    "23_exp_t5_length": ("t5_length", 4),
    "24_exp_attention_sinks": ("sinks", 5),
    "25_exp_passkey": ("passkey", 6),
    "26_exp_after_rope": ("after_rope", 7),
}


def _cells(stem: str) -> list[dict]:
    return json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]


def _text(cell: dict) -> str:
    return "".join(cell["source"])


@pytest.mark.parametrize("stem", sorted(PAGES))
def test_experiment_page_opens_with_the_verdict_computed_from_the_committed_record(stem: str) -> None:
    name, number = PAGES[stem]
    exp = registry.get_experiment(name)
    record = registry.load_result(name, "full")
    assert record is not None, f"no committed full-budget record of {name} matches its config"
    verdict_line = getattr(importlib.import_module(exp.fn.__module__), "verdict_line")
    title = _text(_cells(stem)[0])
    assert title.startswith(f"# Experiment {number}:"), title.splitlines()[0]
    expected = f"**Verdict.** {verdict_line(record)}"
    # markdown may wrap the sentence: compare with white space folded
    assert " ".join(expected.split()) in " ".join(title.split()), (
        f"{stem}: the verdict line differs from what the record gives; put this under the title:\n{expected}")


@pytest.mark.parametrize("stem", sorted(PAGES))
def test_experiment_page_prints_the_verdict_rule(stem: str) -> None:
    code = "\n".join(_text(c) for c in _cells(stem) if c["cell_type"] == "code")
    assert "VERDICT_RULE" in code or "EXTENDED_RULE" in code  # the rule, or the extended rule (claims.py)


def test_the_book_refers_to_experiments_by_one_numbering() -> None:
    bad = re.compile(r"\b[Ee]xperiment (?:2[0-6])\b")
    found = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "book").glob("*.md")):
        cells = json.loads(path.read_text())["cells"] if path.suffix == ".ipynb" else [{"source": path.read_text()}]
        for i, cell in enumerate(cells):
            found += [f"{path.name} cell {i}: {m.group(0)}" for m in bad.finditer(_text(cell))]
    assert not found, "experiments are numbered 1-6 in the book: " + "; ".join(found)
