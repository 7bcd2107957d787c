"""pytest plugin for `make colab-check`: what a Colab reader would see, on top of nbval.

nbval runs each notebook top to bottom in one kernel and fails on any error (and compares
`# NBVAL_CHECK_OUTPUT` cells). This plugin reads the outputs nbval collected for each cell
and also fails a cell that
* shows the same widget twice (a helper that displays a widget and returns it too);
* says "No saved full-budget record" (the saved results did not travel with the package);
* is a notebook's first code cell and did not install mlbook from the expected URL
  (`MLBOOK_COLAB_EXPECT_URL`), nor find it installed from there by an earlier notebook:
  the setup cell must take its Colab branch here.
A `# NBVAL_CHECK_OUTPUT` cell listed in cpu_bounds.py (its numbers depend on the CPU's
arithmetic) that nbval finds different passes where its texts agree as that bound allows,
as the committed-outputs check does (tools/notebook_outputs.py). It also times each notebook (kernel start to shutdown) and writes the times as JSON to
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

import cpu_bounds

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


def _texts_by_key(outputs: list[dict[str, Any]]) -> dict[str, str]:
    """Each stream's text and each mime type's value of a cell's outputs, joined in order."""
    texts: dict[str, str] = defaultdict(str)
    for out in outputs:
        if out.get("output_type") == "stream":
            texts[f"stream {out.get('name', 'stdout')}"] += str(out.get("text", ""))
        for mime, value in (out.get("data") or {}).items():
            if isinstance(value, list):
                value = "".join(value)
            elif not isinstance(value, str):
                value = json.dumps(value, sort_keys=True)
            texts[mime] += value
    return dict(texts)


def outputs_within(test: list[dict[str, Any]], ref: list[dict[str, Any]], bound: cpu_bounds.CpuBound) -> bool:
    """Whether a cell's outputs (`test`, as run) agree with the committed ones (`ref`) as `bound`
    allows: the same streams and mime types, each text within the bound."""
    got, want = _texts_by_key(test), _texts_by_key(ref)
    return got.keys() == want.keys() and all(
        got[k] == want[k] or cpu_bounds.within(want[k], got[k], bound) for k in want)


def pytest_configure(config: pytest.Config) -> None:
    """nbval's comparison of `# NBVAL_CHECK_OUTPUT` cells, with cpu_bounds.py's bounds applied."""
    try:
        from nbval.plugin import IPyNbCell
    except ImportError:  # nbval not installed: nothing to compare
        return
    if getattr(IPyNbCell.compare_outputs, "cpu_bounds", False):
        return
    exact = IPyNbCell.compare_outputs

    def compare_outputs(self: Any, test: Any, ref: Any, skip_compare: Any = None) -> bool:
        if exact(self, test, ref, skip_compare):
            return True
        bound = cpu_bounds.bound_for(Path(str(self.fspath)).name, self.cell.get("id"))
        if bound is not None and outputs_within(test, ref, bound):
            self.comparison_traceback = []
            return True
        if bound is not None:
            self.comparison_traceback.append(
                f"(outside the CPU bound of this cell in cpu_bounds.py: {bound.describe()})")
        return False

    compare_outputs.cpu_bounds = True  # type: ignore[attr-defined]
    IPyNbCell.compare_outputs = compare_outputs


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
