"""The committed notebook outputs: check they are what the code prints now, and refresh them.

The outputs stored in notebooks/*.ipynb are what a reader sees on the repository page and
in Colab before running anything, so they must be what the current code prints. They are
made the way the site build makes its pages, because that is the one run of every notebook
that `make test` can compare against without executing anything twice: static mode
(`MLBOOK_STATIC=1`: figures as self-contained HTML, a one-line note in place of live
sliders, no progress bars), each notebook executed by nbclient through jupyter-cache's
`single_nb_execution` with notebooks/ as working directory (as myst-nb does), one torch
thread, quick experiment records from this build's results folder and the full-budget
records from the package (src/mlbook/results/full/, which ships with mlbook).

    python tools/notebook_outputs.py check   [--cache _build/.jupyter_cache] [notebooks/NN_x.ipynb ...]
    python tools/notebook_outputs.py refresh [--results DIR] [notebooks/NN_x.ipynb ...]
    python tools/notebook_outputs.py execute --out DIR [notebooks/NN_x.ipynb ...]
    python tools/notebook_outputs.py check --executed DIR
    python tools/notebook_outputs.py spread [--executed DIR ...]

`execute` and `check --executed` are the portability check (`make outputs-portability`: the
notebooks executed under other CPUs' arithmetic, the committed outputs checked against each);
`spread` prints how far each cell's numbers moved. Cells whose numbers depend on the CPU are
listed in tools/colab/cpu_bounds.py and compared within their bounds (see there).

`check` (`make outputs-check`, part of `make test`, after the strict site build) executes
nothing: it takes each notebook's executed copy from the site build's jupyter-cache (the
record matching the notebook's current code and cell metadata, as myst-nb looks it up; the
Makefile empties that cache whenever src/ or the requirements change) and compares every
code cell's committed outputs with it:

* stream outputs (stdout, stderr) and text results (text/plain, text/html, text/markdown,
  ...) exactly, after the SANITISERS below (what legitimately varies between two runs) and
  after merging each cell's stream outputs per stream, as nbclient's `coalesce_streams`
  does (how a kernel splits printed text into messages depends on timing). Where a
  sanitiser rewrote a text, its line breaks may differ too (textwrap re-wraps a paragraph
  when a timing gets one digit longer), so such a text is compared with runs of whitespace
  collapsed;
* figures (`mlbook.viz.show`'s HTML, plotly's JSON) by their data: every trace of the
  figure and of its slider frames, floats rounded to 4 significant digits and those below
  1e-12 in magnitude (float64 round-off) taken as 0, without `uid`; the layout is ignored.
  The HTML around a figure (caption, alt text) is compared without its script and without
  id attributes;
* images (image/png, ...) and widgets by type and count only.

A committed error output fails too, and so does a committed "No saved full-budget record"
(the experiment records shipped in src/mlbook/results/full/ must match the experiments'
configs: the pages print them). Each failure names the notebook, the cell (0-based index
into the notebook's cells, and its id) and shows a short diff.

`refresh` (`make outputs`) executes the notebooks as above and writes their outputs back.
A cell whose new outputs equal the committed ones up to the sanitisers keeps the committed
ones, per-cell `execution` timing metadata is dropped and streams are merged, so refreshing
an unchanged notebook leaves its file byte-identical. It writes only outputs, execution
counts and that metadata, into the file as it is on disk when the notebook has finished
(prose edited meanwhile is kept; a notebook whose code changed meanwhile is left alone).
A notebook that prints "No saved full-budget record" is not written either.
"""

from __future__ import annotations

import argparse
import base64
import copy
import difflib
import json
import math
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "colab"))

import cpu_bounds  # noqa: E402  (the cells whose numbers depend on the CPU; the Colab check reads it too)
from nbval_colab import MISSING_RECORD  # noqa: E402  (the Colab check fails on the same phrase)
NOTEBOOKS = ROOT / "notebooks"
DEFAULT_CACHE = ROOT / "_build" / ".jupyter_cache"
REFRESH = "make outputs"
DIGITS = 4  # significant digits of figure data (mlbook.viz.show rounds to 4 already)
# Figure values below this in magnitude are float64 round-off (an equivariance error of
# 2.2e-16 or 4.4e-16): their digits change with the CPU's instruction set and the thread
# count, so they compare as 0. The pages print such numbers as "< 1e-12" for the same reason.
ROUNDOFF = 1e-12
DIFF_LINES = 24  # lines of diff shown per cell
LINE_WIDTH = 160  # characters shown per diff line


# --- sanitisers ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Sanitiser:
    """A regex for text that legitimately differs between two runs, and what replaces it."""

    name: str
    pattern: re.Pattern[str]
    replacement: str
    covers: str  # what varies, in words
    example: str  # a text it rewrites (tests/test_committed_outputs.py checks that it does)


SANITISERS: tuple[Sanitiser, ...] = (
    # Date-times: when an experiment record was made (describe_record: "created
    # 2026-11-30T05:16:41+00:00"; a quick run is made afresh by each build), log lines.
    Sanitiser("iso_datetime",
              re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?\b"),
              "<datetime>", "ISO 8601 date-times (when a record was created)",
              "created 2026-11-30T05:16:41+00:00; mlbook 0.1.0"),
    # Elapsed seconds of an experiment run, as describe_record prints them: "88.0 s in all
    # (per seed: 87.5 s)"; textwrap may break the per-seed list over lines.
    Sanitiser("run_seconds",
              re.compile(r"\b\d+(?:\.\d+)?\s+s\s+in\s+all(?:\s+\(per\s+seed:\s+[\d.,\s]+?\s+s\))?"),
              "<seconds> s in all", "the elapsed seconds of an experiment run (in all and per seed)",
              "cpu, 1 thread; 88.0 s in all (per seed: 87.5,\n86 s); created"),
    # Wall-clock timings of IPython's %time / %%time.
    Sanitiser("ipython_time", re.compile(r"^(?:CPU times|Wall time): [^\n]*$", re.MULTILINE),
              "<timing>", "the wall-clock and CPU times of %time",
              "CPU times: user 5 ms, sys: 0 ns\nWall time: 5.1 ms"),
    # Progress bars (tqdm): "train rope:  42%|####2     | 50/120 [00:03<00:04, 15.2it/s, loss=2.31]",
    # one per line once carriage returns are resolved. The static build shows none
    # (mlbook.experiments.train turns them off); this keeps a stray one from failing the check.
    Sanitiser("progress_bar", re.compile(r"^[^\n]*\d+%\|[^\n]*\|[^\n]*\d+/\d+[^\n]*(?:\n|$)", re.MULTILINE),
              "", "tqdm progress bars (rates, elapsed and remaining time)",
              "train:  42%|####2     | 50/120 [00:03<00:04, 15.2it/s]\ndone\n"),
    # Memory addresses in object reprs: "<function f at 0x7f3a2c1d0e50>".
    Sanitiser("memory_address", re.compile(r"\b0x[0-9a-fA-F]{6,16}\b"), "0x<address>",
              "memory addresses in object reprs", "<function f at 0x7f3a2c1d0e50>"),
    # Temporary files and folders (tempfile's names are random): /tmp/tmpk2j3/x.json,
    # macOS's /var/folders/.../T/...
    Sanitiser("temp_path",
              re.compile(r"(?<![\w.])(?:/private)?(?:/tmp|/var/tmp|/var/folders)/[^\s'\"<>(),;]*"),
              "<tmp>", "temporary paths", "saved to /tmp/tmpk2j3ab/record.json"),
    # Where this machine keeps Python packages (warnings and tracebacks name files in them):
    # /home/me/.venv/lib/python3.11/site-packages/torch/nn/modules/module.py.
    Sanitiser("site_packages",
              re.compile(r"(?:[A-Za-z]:)?[/\\][^\s'\"<>()]*?[/\\](?:site|dist)-packages(?=[/\\])"),
              "<site-packages>", "the installation folder of Python packages",
              "/home/me/.venv/lib/python3.11/site-packages/torch/nn/functional.py:12: UserWarning"),
)


def sanitise(text: str) -> str:
    """`text` with every sanitiser applied, in order."""
    for s in SANITISERS:
        text = s.pattern.sub(s.replacement, text)
    return text


# --- outputs to comparable items ------------------------------------------------------------
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
PLOTLY_MIME = "application/vnd.plotly.v1+json"
_BACKSPACE = re.compile("[^\n]\x08")  # a character, then a backspace
_CARRIAGE_RETURN = re.compile(r".*\r(?=[^\n])")
_SCRIPT = re.compile(r"<script\b[^>]*>.*?</script>", re.DOTALL | re.IGNORECASE)
_ID_ATTR = re.compile(r"\s(?:id|aria-labelledby|aria-describedby)=\"[^\"]*\"")
_FIG_START = re.compile(r"\bvar fig=")


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _resolve_returns(text: str) -> str:
    """What a terminal shows: backspaces and carriage returns applied (as nbclient does)."""
    old = None
    while old != text:
        old, text = text, _BACKSPACE.sub("", text)
    return _CARRIAGE_RETURN.sub("", text)


def coalesce_streams(outputs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each stream's outputs merged into its first one, carriage returns resolved, stdout
    before an adjacent stderr: nbclient's `coalesce_streams`. How printed text is split into
    messages, and the order of stdout and stderr, depend on timing; the text does not."""
    merged: list[dict[str, Any]] = []
    streams: dict[str, dict[str, Any]] = {}
    for out in outputs:
        if out.get("output_type") == "stream":
            name = out.get("name", "stdout")
            if name in streams:
                streams[name]["text"] += _text(out.get("text", ""))
                continue
            streams[name] = {"output_type": "stream", "name": name, "text": _text(out.get("text", ""))}
            merged.append(streams[name])
        else:
            merged.append(out)
    for s in streams.values():
        s["text"] = _resolve_returns(s["text"])
    for i in range(len(merged) - 1):
        a, b = merged[i], merged[i + 1]
        if a.get("output_type") == b.get("output_type") == "stream" and a["name"] == "stderr" and b["name"] == "stdout":
            merged[i], merged[i + 1] = b, a
    return merged


def _round(value: Any) -> Any:
    """Floats to DIGITS significant digits and round-off to 0, recursively; plotly's typed
    arrays decoded."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return value
        return 0.0 if abs(value) < ROUNDOFF else float(f"{value:.{DIGITS}g}")
    if isinstance(value, list):
        return [_round(v) for v in value]
    if isinstance(value, dict):
        if set(value) >= {"dtype", "bdata"}:  # plotly >= 6 encodes arrays as base64
            import numpy as np

            arr = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
            if "shape" in value:
                arr = arr.reshape([int(n) for n in str(value["shape"]).split(",")])
            return _round(arr.tolist())
        return {k: _round(v) for k, v in value.items() if k != "uid"}
    return value


def figure_data(fig: dict[str, Any]) -> list[str]:
    """A plotly figure's data, one line per trace attribute: the traces and each slider
    frame's traces, rounded (layout, ids and uids left out)."""
    lines = []
    for i, trace in enumerate(fig.get("data") or []):
        for key, value in sorted(_round(trace).items()):
            lines.append(f"data[{i}].{key} = {json.dumps(value, sort_keys=True, ensure_ascii=False)}")
    for j, frame in enumerate(fig.get("frames") or []):
        for i, trace in enumerate(frame.get("data") or []):
            for key, value in sorted(_round(trace).items()):
                lines.append(f"frames[{j}].data[{i}].{key} = {json.dumps(value, sort_keys=True, ensure_ascii=False)}")
    return lines


def html_figures(html: str) -> list[dict[str, Any]]:
    """The plotly figures inlined in mlbook.viz's HTML (`var fig={...};` in its script)."""
    figs = []
    decoder = json.JSONDecoder()
    for m in _FIG_START.finditer(html):
        try:
            fig, _ = decoder.raw_decode(html, m.end())
        except json.JSONDecodeError:
            continue
        if isinstance(fig, dict) and "data" in fig:
            figs.append(fig)
    return figs


@dataclass(frozen=True)
class Item:
    """One comparable piece of a cell's outputs."""

    label: str  # e.g. "stdout", "display_data text/plain", "display_data text/html: figure data"
    text: str  # sanitised
    masked: bool = False  # a sanitiser rewrote it: its line breaks may differ (re-wrapped)


def _text_item(label: str, raw: str) -> Item:
    clean = sanitise(raw)
    return Item(label, clean, clean != raw)


def output_items(outputs: Sequence[dict[str, Any]]) -> list[Item]:
    """A cell's outputs as the check compares them (see the module docstring)."""
    items: list[Item] = []
    for out in coalesce_streams(outputs):
        kind = out.get("output_type")
        if kind == "stream":
            items.append(_text_item(out["name"], out["text"]))
        elif kind == "error":
            items.append(Item("error", f"{out.get('ename')}: {sanitise(str(out.get('evalue')))}"))
        elif kind in ("display_data", "execute_result"):
            data = out.get("data") or {}
            for mime in sorted(data):
                value = data[mime]
                label = f"{kind} {mime}"
                figs = html_figures(_text(value)) if mime == "text/html" else []
                if figs:
                    for fig in figs:
                        items.append(Item(f"{label}: figure data", "\n".join(figure_data(fig))))
                    items.append(_text_item(f"{label}: without script and ids",
                                            _ID_ATTR.sub("", _SCRIPT.sub("", _text(value)))))
                elif mime == PLOTLY_MIME:
                    fig = value if isinstance(value, dict) else json.loads(_text(value))
                    items.append(Item(f"{label}: figure data", "\n".join(figure_data(fig))))
                elif mime.startswith("image/") or mime == WIDGET_MIME:
                    items.append(Item(label, f"<{mime}>"))  # type and count only
                elif mime.startswith("text/") or isinstance(value, (str, list)):
                    items.append(_text_item(label, _text(value)))
                else:
                    items.append(_text_item(label, json.dumps(value, sort_keys=True, ensure_ascii=False)))
        else:
            items.append(Item(str(kind), ""))
    return items


def _collapse(text: str) -> str:
    return " ".join(text.split())


def items_match(committed: Sequence[Item], fresh: Sequence[Item]) -> bool:
    if len(committed) != len(fresh):
        return False
    for a, b in zip(committed, fresh):
        if a.label != b.label:
            return False
        if a.text != b.text and not ((a.masked or b.masked) and _collapse(a.text) == _collapse(b.text)):
            return False
    return True


def items_within(committed: Sequence[Item], fresh: Sequence[Item], bound: cpu_bounds.CpuBound) -> bool:
    """`items_match`, except that decimal numbers may differ within `bound` (a cell whose numbers
    depend on the CPU's arithmetic; tools/colab/cpu_bounds.py): the same items, the same text
    between the numbers, the same integers."""
    if len(committed) != len(fresh):
        return False
    return all(a.label == b.label and (a.text == b.text or cpu_bounds.within(a.text, b.text, bound))
               for a, b in zip(committed, fresh))


def _render(items: Sequence[Item]) -> list[str]:
    lines = []
    for it in items:
        lines.append(f"[{it.label}]")
        lines.extend(it.text.splitlines() or [""])
    return lines


def short_diff(committed: Sequence[Item], fresh: Sequence[Item]) -> str:
    diff = list(difflib.unified_diff(_render(committed), _render(fresh), "committed", "current code", n=1,
                                     lineterm=""))
    shown = [ln if len(ln) <= LINE_WIDTH else ln[: LINE_WIDTH - 3] + "..." for ln in diff[:DIFF_LINES]]
    if len(diff) > DIFF_LINES:
        shown.append(f"... ({len(diff) - DIFF_LINES} more diff lines)")
    return "\n".join("    " + ln for ln in shown)


# --- comparing notebooks ----------------------------------------------------------------------
def _code_cells(nb: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    return [(i, c) for i, c in enumerate(nb.get("cells", [])) if c.get("cell_type") == "code"]


def _source(cell: dict[str, Any]) -> str:
    return _text(cell.get("source", ""))


def committed_errors(nb: dict[str, Any], name: str) -> list[str]:
    """One message per code cell whose committed outputs hold an error."""
    found = []
    for i, cell in _code_cells(nb):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                found.append(f"{name}, cell {i} (id {cell.get('id', '?')}): the committed outputs hold an error, "
                             f"{out.get('ename')}: {str(out.get('evalue'))[:200]}")
                break
    return found


def missing_records(nb: dict[str, Any], name: str) -> list[str]:
    """One message per code cell whose outputs say a full-budget record is missing."""
    found = []
    for i, cell in _code_cells(nb):
        for out in cell.get("outputs", []):
            texts = [_text(out.get("text", ""))] + [_text(v) for m, v in (out.get("data") or {}).items()
                                                    if m.startswith("text/")]
            line = next((ln.strip() for t in texts for ln in t.splitlines() if MISSING_RECORD.search(ln)), None)
            if line:
                found.append(f"{name}, cell {i} (id {cell.get('id', '?')}): the outputs say {line[:160]!r}; the "
                             "full-budget records in src/mlbook/results/full/ must match the experiments' configs "
                             "(python -m mlbook.experiments run NAME --budget full remakes one)")
                break
    return found


def compare_notebooks(committed: dict[str, Any], fresh: dict[str, Any], name: str) -> list[str]:
    """What differs between the committed outputs and those of `fresh`, the same notebook
    executed by the current code; one message per cell ([] when they agree)."""
    problems = committed_errors(committed, name) + missing_records(committed, name)
    ours, theirs = _code_cells(committed), _code_cells(fresh)
    if [_source(c) for _, c in ours] != [_source(c) for _, c in theirs]:
        return problems + [f"{name}: the executed copy is not of this notebook's current code "
                           f"({len(theirs)} code cells against {len(ours)} here, or their sources differ)"]
    for (i, cell), (_, run) in zip(ours, theirs):
        old, new = cell.get("outputs", []), run.get("outputs", [])
        if _strict_key(old, sanitised=False) == _strict_key(new, sanitised=False) or _strict_key(old) == _strict_key(new):
            continue  # the same (up to the sanitisers): no need to look closer
        a, b = output_items(old), output_items(new)
        if items_match(a, b):
            continue
        bound = cpu_bounds.bound_for(name, cell.get("id"))
        if bound is not None and items_within(a, b, bound):
            continue  # the CPU's arithmetic moved its numbers, within their bound
        where = (f" (its numbers may move with the CPU by {bound.describe()}: tools/colab/cpu_bounds.py)"
                 if bound else "")
        problems.append(f"{name}, cell {i} (id {cell.get('id', '?')}): the committed outputs are not what the "
                        f"code prints now{where}:\n{short_diff(a, b)}")
    return problems


def refresh_hint(names: Iterable[str]) -> str:
    names = sorted(set(names))
    return (f"Refresh the committed outputs with `{REFRESH} NOTEBOOKS=\"{' '.join(names)}\"` "
            f"(or `{REFRESH}` for every notebook), check the diff, and commit the notebooks.")


def executed_copy(cache_dir: Path, nb: Any) -> Any | None:
    """The notebook as the site build executed it, from its jupyter-cache (the record
    matching the notebook's current code and metadata), or None when there is none."""
    from jupyter_cache import get_cache

    cache = get_cache(str(cache_dir))
    try:
        _, merged = cache.merge_match_into_notebook(nb)
    except KeyError:
        return None
    return merged


def check(paths: Sequence[Path], cache_dir: Path, executed: Path | None = None) -> int:
    import nbformat

    if executed is not None:
        if not executed.is_dir():
            print(f"[outputs] --executed: no folder {executed}: `notebook_outputs.py execute --out {executed}` "
                  "makes one", file=sys.stderr)
            return 2
    elif not (cache_dir / "global.db").is_file():
        print(f"[outputs] no jupyter-cache at {cache_dir}: the site build (`make site-strict` or `make book`) "
              "executes the notebooks into it; run it first", file=sys.stderr)
        return 2
    start = time.perf_counter()
    failures: list[str] = []
    stale: list[str] = []
    for path in paths:
        name = _display_name(path)
        nb = nbformat.read(path, as_version=4)
        if executed is None:
            fresh = executed_copy(cache_dir, nb)
        else:
            copy_path = executed / path.name
            fresh = nbformat.read(copy_path, as_version=4) if copy_path.is_file() else None
        if fresh is None:
            missing = (f"the site build has no executed copy of this notebook's current code in {cache_dir} "
                       "(not in _toc.yml, or edited after the build): run the site build again" if executed is None
                       else f"no executed copy in {executed}: `notebook_outputs.py execute --out {executed}` makes it")
            problems = committed_errors(nb, name) + missing_records(nb, name) + [f"{name}: {missing}"]
        else:
            problems = compare_notebooks(nb, fresh, name)
        if problems:
            stale.append(name)
            failures.extend(problems)
    for msg in failures:
        print(f"[outputs] FAILED: {msg}", file=sys.stderr)
    secs = time.perf_counter() - start
    if failures:
        print(f"[outputs] {len(stale)} of {len(paths)} notebooks have stale committed outputs. "
              + refresh_hint(stale), file=sys.stderr)
        return 1
    against = "the site build's executions" if executed is None else f"the executions in {_display_name(executed)}"
    print(f"[outputs] the committed outputs of {len(paths)} notebooks are what the code prints now "
          f"(compared with {against} in {secs:.1f} s; numbers within their CPU bounds where "
          "tools/colab/cpu_bounds.py lists the cell)")
    return 0


# --- refreshing ---------------------------------------------------------------------------------
class ChangedMeanwhile(ValueError):
    pass


def _strict_key(outputs: Sequence[dict[str, Any]], sanitised: bool = True) -> str:
    """The outputs with streams merged and every string sanitised: equal keys mean the
    committed outputs can stay as they are."""
    fix = sanitise if sanitised else str

    def clean(v: Any) -> Any:
        if isinstance(v, str):
            return fix(v)
        if isinstance(v, list):
            if all(isinstance(s, str) for s in v):
                return fix("".join(v))
            return [clean(x) for x in v]
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items() if k != "execution_count"}
        return v

    return json.dumps([clean(o) for o in coalesce_streams(outputs)], sort_keys=True, ensure_ascii=False)


def merge_outputs(current: Any, executed: Any) -> tuple[Any, list[int]]:
    """`current` (the notebook as it is on disk) with the outputs of `executed` (a run of the
    same code): per code cell, the executed outputs unless they equal the current ones up to
    the sanitisers; execution counts from the run; no per-cell `execution` timing metadata,
    no widget state. Returns the notebook and the indices of the cells whose outputs changed."""
    import nbformat

    nb = copy.deepcopy(current)
    ours, theirs = _code_cells(nb), _code_cells(executed)
    if [_source(c) for _, c in ours] != [_source(c) for _, c in theirs]:
        raise ChangedMeanwhile("its code cells changed while it ran: run it again")
    changed = []
    for (i, cell), (_, run) in zip(ours, theirs):
        new = [nbformat.from_dict(o) for o in coalesce_streams(run.get("outputs", []))]
        if _strict_key(cell.get("outputs", [])) != _strict_key(new):
            cell["outputs"] = new
            changed.append(i)
        cell["execution_count"] = run.get("execution_count")
        cell.get("metadata", {}).pop("execution", None)
    if "language_info" in executed.get("metadata", {}):
        nb["metadata"]["language_info"] = executed["metadata"]["language_info"]
    nb["metadata"].pop("widgets", None)
    return nb, changed


def _display_name(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _config_timeout() -> int:
    import yaml

    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    return int((cfg.get("execute") or {}).get("timeout", 300))


def kernel_env(results: Path) -> dict[str, str]:
    """The environment the site build's kernels get in `make test`: static mode, this
    build's results folder, one thread; no budget or progress override."""
    env = {k: v for k, v in os.environ.items() if k not in {"MLBOOK_BUDGET", "MLBOOK_NO_PROGRESS"}}
    env.update(MLBOOK_STATIC="1", MLBOOK_RESULTS=str(results), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


def _use_kernel_env(results: Path) -> None:
    """This process's environment made the site build's kernels' (they inherit it)."""
    results.mkdir(parents=True, exist_ok=True)
    env = kernel_env(results.resolve())
    for key in set(os.environ) - set(env):
        del os.environ[key]
    os.environ.update(env)


def _execute(path: Path, timeout: int) -> Any:
    """`path` executed as the site build executes it (nbclient through jupyter-cache)."""
    import nbformat
    from jupyter_cache.executors.utils import single_nb_execution

    run = nbformat.read(path, as_version=4)
    return single_nb_execution(run, cwd=str(path.parent), timeout=timeout, allow_errors=False,
                               meta_override=True, record_timing=False)


def refresh(paths: Sequence[Path], results: Path | None, timeout: int | None = None) -> int:
    import nbformat

    timeout = timeout or _config_timeout()
    tmp = None
    if results is None:
        tmp = tempfile.TemporaryDirectory(prefix="mlbook-results-")
        results = Path(tmp.name)
        print(f"[outputs] quick experiment records: a fresh folder ({results}); pass --results to reuse some")
    _use_kernel_env(results)
    failed = []
    try:
        for path in paths:
            name = _display_name(path)
            start = time.perf_counter()
            res = _execute(path, timeout)
            secs = time.perf_counter() - start
            if res.err is not None:
                failed.append(name)
                print(f"[outputs] {name}: FAILED after {secs:.0f} s, nothing written:\n{res.exc_string[-3000:]}",
                      file=sys.stderr)
                continue
            missing = missing_records(res.nb, name)
            if missing:
                failed.append(name)
                print("[outputs] " + "\n[outputs] ".join(missing) + "\n[outputs] nothing written", file=sys.stderr)
                continue
            raw = path.read_text(encoding="utf-8")  # as it is now: others may have edited the prose
            try:
                nb, changed = merge_outputs(nbformat.reads(raw, as_version=4), res.nb)
            except ChangedMeanwhile as exc:
                failed.append(name)
                print(f"[outputs] {name}: {exc}; nothing written", file=sys.stderr)
                continue
            text = nbformat.writes(nb) + "\n"
            if text == raw:
                print(f"[outputs] {name}: unchanged ({secs:.0f} s)")
            else:
                path.write_text(text, encoding="utf-8")
                cells = f"outputs of cells {', '.join(map(str, changed))}" if changed else "metadata only"
                print(f"[outputs] {name}: rewritten, {cells} ({secs:.0f} s)")
    finally:
        if tmp is not None:
            tmp.cleanup()
    if failed:
        print(f"[outputs] FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def execute(paths: Sequence[Path], out_dir: Path, timeout: int | None = None) -> int:
    """Execute the notebooks as `refresh` does, each with a fresh folder of quick records
    (`out_dir`/results: nothing trained under another CPU arithmetic is reused), and write the
    executed copies to `out_dir` (NN_x.ipynb) for `check --executed out_dir`: the committed
    notebooks are left alone. `make outputs-portability` runs it under other
    ATEN_CPU_CAPABILITY settings."""
    import nbformat

    timeout = timeout or _config_timeout()
    out_dir.mkdir(parents=True, exist_ok=True)
    _use_kernel_env(out_dir / "results")
    from_env = os.environ.get("ATEN_CPU_CAPABILITY", "(native)")
    failed = []
    for path in paths:
        name = _display_name(path)
        start = time.perf_counter()
        res = _execute(path, timeout)
        secs = time.perf_counter() - start
        nbformat.write(res.nb, out_dir / path.name)  # with its error outputs, if any: the check reports them
        if res.err is not None:
            failed.append(name)
            print(f"[outputs] {name}: FAILED after {secs:.0f} s (ATEN_CPU_CAPABILITY={from_env}):\n"
                  f"{res.exc_string[-3000:]}", file=sys.stderr)
        else:
            print(f"[outputs] {name}: executed in {secs:.0f} s (ATEN_CPU_CAPABILITY={from_env})")
    if failed:
        print(f"[outputs] FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def spread(paths: Sequence[Path], cache_dir: Path | None, folders: Sequence[Path]) -> int:
    """Per code cell whose outputs differ between the committed notebook and its executions
    (the site build's cache, and each folder made by `execute`), the largest absolute and
    relative difference of its decimal numbers against the committed outputs, or where the
    shape differs: what tools/colab/cpu_bounds.py's bounds are measured from."""
    import nbformat

    sources: list[tuple[str, Any]] = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        runs: list[tuple[str, Any]] = []
        if cache_dir is not None and (cache_dir / "global.db").is_file():
            runs.append(("site build", executed_copy(cache_dir, nb)))
        for folder in folders:
            copy_path = folder / path.name
            runs.append((folder.name, nbformat.read(copy_path, as_version=4) if copy_path.is_file() else None))
        sources.append((_display_name(path), (nb, runs)))
    varied = 0
    for name, (nb, runs) in sources:
        for i, cell in _code_cells(nb):
            committed = output_items(cell.get("outputs", []))
            b_ = cpu_bounds.bound_for(name, cell.get("id"))
            report = []
            for label, run in runs:
                if run is None:
                    report.append(f"    {label}: no executed copy")
                    continue
                other = next((c for c in run.get("cells", []) if c.get("id") == cell.get("id")), None)
                if other is None or _source(other) != _source(cell):
                    report.append(f"    {label}: the executed copy has other code in this cell")
                    continue
                fresh = output_items(other.get("outputs", []))
                if items_match(committed, fresh):
                    continue
                if len(committed) != len(fresh) or any(a.label != b.label for a, b in zip(committed, fresh)):
                    report.append(f"    {label}: other outputs ({len(fresh)} against {len(committed)} committed)")
                    continue
                parts = []
                for a, b in zip(committed, fresh):
                    if a.text == b.text:
                        continue
                    d = cpu_bounds.largest_difference(a.text, b.text, b_)
                    parts.append(f"[{a.label}] " + ("shape differs" if d is None else
                                                    f"abs {d[0]:.3g}, rel {d[1]:.3g}, line-rel {d[2]:.3g}"))
                    if d is not None and b_ is not None and not cpu_bounds.within(a.text, b.text, b_):
                        parts[-1] += " (OUTSIDE its bound)"
                report.append(f"    {label}: " + "; ".join(parts))
            if report:
                varied += 1
                bound = f"bound {b_.describe()}" if b_ else "no bound: compared exactly"
                print(f"{name}, cell {i} (id {cell.get('id', '?')}), {bound}:")
                print("\n".join(report))
    print(f"[outputs] {varied} cells whose outputs differ between the committed notebooks and "
          f"{1 + len(folders) if cache_dir else len(folders)} executions")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="compare the committed outputs with the site build's executions")
    c.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    c.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="the site build's jupyter-cache folder")
    c.add_argument("--executed", type=Path,
                   help="compare with the executed copies in this folder (made by `execute`) instead of the cache")
    r = sub.add_parser("refresh", help="execute the notebooks as the site build does; write their outputs back")
    r.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    r.add_argument("--results", type=Path,
                   help="MLBOOK_RESULTS for the run (quick records); default: a fresh temporary folder")
    r.add_argument("--timeout", type=int, help="seconds per cell (default: execute.timeout in _config.yml)")
    e = sub.add_parser("execute", help="execute the notebooks as the site build does into a folder of copies "
                                       "(for check --executed)")
    e.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    e.add_argument("--out", type=Path, required=True, help="folder for the executed copies (and their quick records)")
    e.add_argument("--timeout", type=int, help="seconds per cell (default: execute.timeout in _config.yml)")
    sp = sub.add_parser("spread", help="how each cell's outputs differ between the committed notebooks and "
                                       "executions (the site build's cache and folders made by execute)")
    sp.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    sp.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="the site build's jupyter-cache folder")
    sp.add_argument("--executed", type=Path, action="append", default=[], help="a folder made by execute (repeat)")
    args = ap.parse_args(argv)
    paths = [p.resolve() for p in args.notebooks] or sorted(NOTEBOOKS.glob("*.ipynb"))
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        sys.exit(f"no such notebook: {', '.join(missing)}")
    if args.command == "check":
        return check(paths, args.cache.resolve(), args.executed.resolve() if args.executed else None)
    if args.command == "spread":
        return spread(paths, args.cache.resolve(), [f.resolve() for f in args.executed])
    if args.command == "execute":
        return execute(paths, args.out.resolve(), args.timeout)
    return refresh(paths, args.results.resolve() if args.results else None, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
