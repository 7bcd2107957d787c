"""pytest plugin for `make colab-check`: what a Colab reader would see, on top of nbval.

nbval runs each notebook top to bottom in one kernel and fails on any error (and compares
`# NBVAL_CHECK_OUTPUT` cells). This plugin reads the outputs nbval collected for each cell
and also fails a cell that
* shows the same widget twice (a helper that displays a widget and returns it too);
* says "No saved full-budget record" (the saved results did not travel with the package);
* is a notebook's first code cell and did not install mlbook from the expected URL
  (`MLBOOK_COLAB_EXPECT_URL`), nor find it installed from there by an earlier notebook:
  the setup cell must take its Colab branch here.
It also times each notebook (kernel start to shutdown) and writes the times as JSON to
`MLBOOK_COLAB_TIMES` when set.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
MISSING_RECORD = re.compile(r"No saved full-budget (record|result)", re.IGNORECASE)

_times: dict[str, float] = defaultdict(float)
_cells: dict[str, int] = defaultdict(int)
_first_seen: set[str] = set()


def _texts(out: dict[str, Any]) -> list[str]:
    texts = [str(out.get("text", ""))]
    for mime, value in (out.get("data") or {}).items():
        if mime.startswith("text/"):
            texts.append("".join(value) if isinstance(value, list) else str(value))
    return texts


def problems_in(outputs: list[dict[str, Any]]) -> list[str]:
    """What a reader should not see in one cell's outputs."""
    found = []
    views = [o["data"][WIDGET_MIME].get("model_id") for o in outputs if WIDGET_MIME in (o.get("data") or {})]
    twice = sorted({m for m in views if views.count(m) > 1})
    if twice:
        found.append(f"widget displayed {max(views.count(m) for m in twice)} times (model {', '.join(twice)}); "
                     "show_live must display it once and return None")
    for out in outputs:
        for text in _texts(out):
            m = MISSING_RECORD.search(text)
            if m:
                line = next(ln for ln in text.splitlines() if MISSING_RECORD.search(ln))
                found.append(f"the page says {m.group(0)!r} ({line.strip()[:200]}): the committed full-budget "
                             "records must ship with the package and be found outside the repository")
                break
    return found


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    notebook = Path(str(item.fspath)).name
    first = notebook not in _first_seen  # nbval collects code cells only: the first is the setup cell
    _first_seen.add(notebook)
    result = yield  # a cell that raised has failed already; nothing more to say about it
    outputs = getattr(item, "test_outputs", None)
    if outputs is None:  # not an nbval cell
        return result
    problems = problems_in(outputs)
    expect = os.environ.get("MLBOOK_COLAB_EXPECT_URL")
    if expect and first:
        said = "".join(t for o in outputs for t in _texts(o))
        if f"mlbook installed from {expect}" not in said and f"mlbook already installed from {expect}" not in said:
            problems.append(f"the setup cell did not install mlbook from {expect} (it printed: {said.strip()[:300]!r})")
    if problems:
        raise AssertionError(f"{notebook}: " + "; ".join(problems))
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    start = time.perf_counter()
    try:
        return (yield)
    finally:
        name = Path(str(item.fspath)).name
        _times[name] += time.perf_counter() - start
        _cells[name] += 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _times:
        return
    tr = terminalreporter
    tr.section("time per notebook in the Colab-like environment (kernel start to shutdown)")
    for name, secs in sorted(_times.items()):
        tr.write_line(f"{secs:7.1f} s  {name}  ({_cells[name]} code cells)")
    tr.write_line(f"{sum(_times.values()):7.1f} s  in all")
    path = os.environ.get("MLBOOK_COLAB_TIMES")
    if path:
        Path(path).write_text(json.dumps({k: round(v, 1) for k, v in sorted(_times.items())}, indent=1) + "\n")
