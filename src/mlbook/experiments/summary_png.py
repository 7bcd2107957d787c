"""A PNG summary of an experiment or benchmark record, written beside its JSON.

The command line (`python -m mlbook.experiments run ...`, `python -m mlbook.benchmarks run ...`)
ends with a record; on a machine without a browser this is its picture. matplotlib draws it
with the Agg canvas (no display, no pyplot state, no plotly):

* an experiment: its headline comparisons, one row each, as the pages report them under
  the verdict rule (`common.VERDICT_RULE`): the mean paired difference a - b over seeds
  (`common.paired`) with its 95% t-interval, each seed's difference as a dot, 0 marked; a
  comparison whose interval spans 0 is drawn grey ("indistinguishable at this scale"),
  and each row prints `common.pm` (mean [low, high]);
* a benchmark: the medians it measured with their interquartile range (p25 to p75).

    from mlbook.experiments.summary_png import write_png
    write_png(record, "results/full/extrapolation.png")
"""

from __future__ import annotations

import importlib
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from mlbook.experiments.common import pm

Row = tuple[str, dict[str, Any]]  # (label, a `common.paired` dict)
Panel = tuple[str, list[Row]]  # (what is compared, in which unit; rows)

_LOWER, _HIGHER, _SAME = "#1f5fa8", "#b2432f", "#8a8a8a"  # verdict colours: lower, higher, indistinguishable


# ---------------------------------------------------------------------------
# Experiments: the headline comparisons of each record
# ---------------------------------------------------------------------------


def _module(record: dict[str, Any]) -> Any:
    from mlbook.experiments import catalog  # noqa: F401 - registers every experiment
    from mlbook.experiments.registry import get_experiment

    return importlib.import_module(get_experiment(record["name"]).fn.__module__)


def _is_paired(x: Any) -> bool:
    return isinstance(x, dict) and "ci95" in x and "mean" in x


def _label(names: dict[str, str], key: str) -> str:
    return names.get(key, key.replace("_", " "))


def _permutation(mod: Any, record: dict[str, Any]) -> list[Panel]:
    labels = getattr(mod, "LABELS", {})

    def name(key: str) -> str:
        a, _, b = key.partition(" - ")
        return f"{_label(labels, a)} − {'order-blind guesser' if b == 'guesser' else _label(labels, b)}"

    return [("Probe accuracy, paired difference", [(name(k), c) for k, c in mod.comparisons(record).items()])]


def _extrapolation(mod: Any, record: dict[str, Any]) -> list[Panel]:
    r = record["results"]
    T = r["eval_lengths"][-1]
    against = "reference" if "reference" in r["schemes"] else "alibi"
    labels = getattr(mod, "LABELS", {})
    rows = [(f"{_label(labels, k)} − {'RoPE trained at ' + str(T) if against == 'reference' else _label(labels, against)}", c)
            for k, c in mod.comparisons(record, against=against).items() if c.get("n")]
    return [(f"Loss past L minus before L at {T} (nats/char), paired difference", rows)]


def _context_extension(mod: Any, record: dict[str, Any]) -> list[Panel]:
    r = record["results"]
    T = r["eval_lengths"][-1]
    short = getattr(mod, "SHORT", {})
    names = [n for n in r["variants"] if n != "dynamic"]
    after = mod.summary(record, "after")
    best = min(names, key=lambda n: after[n][-1]["mean"])
    rows = [(f"{_label(short, n)} − {_label(short, best)}", mod.paired_at(record, n, best, "after", "mean"))
            for n in names if n != best]
    before = [(f"{_label(short, n)} − {_label(short, 'none')}", mod.paired_at(record, n, "none", "before", "mean"))
              for n in names if n != "none"]
    return [(f"After the fine-tune: loss at {T} (nats/char), paired difference", rows),
            (f"Without fine-tuning: loss at {T} (nats/char), paired difference", before)]


def _sinks(mod: Any, record: dict[str, Any]) -> list[Panel]:
    settings = list(record["results"]["settings"])
    s = {name: mod.summary(record, name) for name in settings}
    evict = [(f"{name}: window − window with {k} sink{'s' if k > 1 else ''}", s[name][f"window_minus_sink{k}"])
             for name in settings for k in (4, 1)]
    drop = [(f"{name}: without − with the first token, {when} queries", s[name][f"drop_first_{when}"])
            for name in settings for when in ("early", "late")]
    return [("Streaming past the window: loss (nats/char), paired difference", evict),
            ("Deleting the first token from the cache: loss (nats/char), paired difference", drop)]


def _passkey(mod: Any, record: dict[str, Any]) -> list[Panel]:
    cmp = mod.comparisons(record)
    titles = {"length": "Accuracy, longest minus trained length", "methods": "Accuracy at the longest length, method against method"}
    return [(f"{title}, paired difference", [(f"{c['a']} − {c['b']}", c) for c in cmp
                                             if c["group"] == group and c["measure"] == "accuracy"])
            for group, title in titles.items()]


def _after_rope(mod: Any, record: dict[str, Any]) -> list[Panel]:
    if "rope" not in record["results"]["methods"]:
        return []  # a record without the RoPE baseline has nothing to compare against
    L = record["results"]["train_len"]
    return [(title, [(f"{mod.LABELS[m]} − RoPE", c) for m, c in mod.comparisons(record, metric).items()])
            for metric, title in (("in_range", f"Loss below L = {L} (nats/char), paired difference"),
                                  ("rise", "Rise of the loss past L (nats/char), paired difference"))]


def _generic(mod: Any, record: dict[str, Any]) -> list[Panel]:
    """Any experiment module with a public `comparisons(record)`: a dict or a list of paired dicts,
    one panel per measure when they name one."""
    cmp = mod.comparisons(record)
    items: Iterable[tuple[str, Any]] = cmp.items() if isinstance(cmp, dict) else ((str(i), c) for i, c in enumerate(cmp))
    panels: dict[str, list[Row]] = {}
    for key, c in items:
        if not _is_paired(c):
            continue
        label = f"{c['a']} − {c['b']}" if "a" in c and "b" in c else key.replace("_", " ")
        panels.setdefault(str(c.get("measure", "paired difference")), []).append((label, c))
    return [(f"{measure}, paired difference" if measure != "paired difference" else measure, rows)
            for measure, rows in panels.items()]


_HEADLINES: dict[str, Callable[[Any, dict[str, Any]], list[Panel]]] = {
    "permutation": _permutation,
    "extrapolation": _extrapolation,
    "context_extension": _context_extension,
    "sinks": _sinks,
    "passkey": _passkey,
    "after_rope": _after_rope,
}


def headline_comparisons(record: dict[str, Any]) -> list[Panel]:
    """The comparisons an experiment's page leads with, as (panel title, [(label, paired dict)]).

    Each paired dict is `common.paired(a, b)`: per-seed differences a - b, their mean, 95%
    t-interval ("ci95", None with one seed) and verdict. An experiment without its own
    selection here falls back to its module's public `comparisons(record)`."""
    mod = _module(record)
    pick = _HEADLINES.get(record["name"])
    if pick is None and not callable(getattr(mod, "comparisons", None)):
        raise ValueError(f"experiment {record['name']!r} has no headline comparisons to draw: give its module a "
                         "public comparisons(record) returning paired dicts (mlbook.experiments.common.paired)")
    panels = (pick or _generic)(mod, record)
    return [(title, rows) for title, rows in panels if rows]


def _colour(c: dict[str, Any]) -> str:
    return {"lower": _LOWER, "higher": _HIGHER}.get(c.get("verdict", ""), _SAME)


def _draw_panel(ax: Any, title: str, rows: list[Row]) -> None:
    ys = list(range(len(rows)))[::-1]
    for y, (_, c) in zip(ys, rows):
        colour = _colour(c)
        seeds = [d for d in c.get("per_seed", []) if d is not None]
        ax.scatter(seeds, [y] * len(seeds), s=12, color=colour, alpha=0.45, linewidths=0, zorder=2)
        if c.get("mean") is None:
            continue
        if c.get("ci95"):
            lo, hi = c["ci95"]
            ax.plot([lo, hi], [y, y], color=colour, lw=2.2, solid_capstyle="butt", zorder=3)
        ax.plot([c["mean"]], [y], "o", color=colour, ms=6, zorder=4)
    ax.axvline(0.0, color="#333333", lw=0.8, zorder=1)
    ax.set_yticks(ys, [textwrap.shorten(label, 60, placeholder="…") for label, _ in rows], fontsize=8)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    right = ax.twinx()  # the numbers, as tick labels on the right (the layout makes room for them)
    right.set_ylim(ax.get_ylim())
    right.set_yticks(ys, [f"{pm(c, 3)}  {c.get('verdict', '')}" for _, c in rows], fontsize=8)
    for tick, (_, c) in zip(right.get_yticklabels(), rows):
        tick.set_color(_colour(c))
    right.tick_params(axis="y", length=0)
    ax.set_title(title, fontsize=9, loc="left")
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(axis="x", color="#dddddd", lw=0.6)


def experiment_figure(record: dict[str, Any]) -> Any:
    """A matplotlib Figure (Agg canvas) of the record's headline comparisons (see the module docstring)."""
    from matplotlib.figure import Figure

    panels = headline_comparisons(record)
    if not panels:
        raise ValueError(f"record {record.get('name')!r} holds no comparison to draw")
    from mlbook.experiments.registry import get_experiment

    exp = get_experiment(record["name"])
    n_rows = sum(len(rows) for _, rows in panels)
    fig = Figure(figsize=(11.0, 1.6 + 0.32 * n_rows + 0.55 * len(panels)), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False,
                        gridspec_kw={"height_ratios": [len(rows) + 1.2 for _, rows in panels]})[:, 0]
    for ax, (title, rows) in zip(axes, panels):
        _draw_panel(ax, title, rows)
    verdict = getattr(_module(record), "verdict_line", None)
    head = textwrap.fill(exp.title, 120)
    if callable(verdict):
        head += "\n" + textwrap.fill(str(verdict(record)), 150)
    fig.suptitle(head, fontsize=9.5, x=0.01, ha="left")
    r = record.get("results", {})
    n = len(r.get("seeds", [])) or "?"
    fig.supxlabel(f"Mean paired difference a − b with its 95% t-interval over {n} seeds (dots: each seed); grey: the "
                  f"interval spans 0, indistinguishable at this scale.\n{record.get('budget', '?')} budget, "
                  f"{record.get('device', '?')}, {record.get('created', '?')}.", fontsize=7.5, color="#555555",
                  x=0.01, ha="left")
    return fig


# ---------------------------------------------------------------------------
# Benchmarks: medians with their interquartile range
# ---------------------------------------------------------------------------


def _timings(results: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """(label, {median_ms, p25_ms, p75_ms, ...}) for every timing in a benchmark's results."""
    out: list[tuple[str, dict[str, Any]]] = []
    if isinstance(results, dict):
        if "median_ms" in results:
            return [(path, results)]
        for k, v in results.items():
            out += _timings(v, f"{path} · {k}" if path else str(k))
    elif isinstance(results, list):
        for i, v in enumerate(results):
            if isinstance(v, dict):
                name = " ".join(str(v[k]) for k in ("variant", "T", "dtype", "pairing", "shape") if k in v) or str(i)
                out += _timings({k: x for k, x in v.items() if k not in ("variant", "T", "dtype", "pairing", "shape")},
                                f"{path} · {name}" if path else name)
    return out


_CONTAINERS = {"rows", "cases", "times", "results"}  # keys that hold timings but name none


def _slider_rows(results: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Live sliders: each figure's median and 95th percentile redraw time."""
    return [(name, {"median_ms": f["median_ms"], "p25_ms": f["median_ms"], "p75_ms": f["p95_ms"]})
            for name, f in results["figures"].items() if f.get("median_ms") is not None]


def benchmark_figure(record: dict[str, Any]) -> Any:
    """A matplotlib Figure (Agg canvas): every median time in the record, with p25-p75 (live
    sliders: median to 95th percentile, against the 100 ms budget), on a log axis."""
    from matplotlib.figure import Figure

    results = record.get("results", {})
    sliders = isinstance(results, dict) and "figures" in results
    rows = _slider_rows(results) if sliders else [
        (" · ".join(part for part in label.split(" · ") if part not in _CONTAINERS), t) for label, t in _timings(results)]
    if not rows:
        raise ValueError(f"benchmark record {record.get('name')!r} holds no timing to draw")
    fig = Figure(figsize=(11.0, 1.4 + 0.22 * len(rows)), layout="constrained")
    ax = fig.subplots()
    ys = list(range(len(rows)))[::-1]
    for y, (_, t) in zip(ys, rows):
        lo, hi = t.get("p25_ms", t["median_ms"]), t.get("p75_ms", t["median_ms"])
        slow = sliders and hi > 100.0
        colour = _HIGHER if slow else _LOWER
        ax.plot([lo, hi], [y, y], color=colour, lw=2.0, solid_capstyle="butt")
        ax.plot([t["median_ms"]], [y], "o", color=colour, ms=4)
    if sliders:
        ax.axvline(100.0, color="#333333", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_yticks(ys, [textwrap.shorten(label, 70, placeholder="…") for label, _ in rows], fontsize=7)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel("ms per call (median; bar: " + ("median to 95th percentile, dashed: 100 ms)" if sliders
                                                 else "25th to 75th percentile)"), fontsize=8)
    ax.grid(axis="x", which="both", color="#e4e4e4", lw=0.5)
    ax.tick_params(axis="x", labelsize=8)
    fig.suptitle(textwrap.fill(str(record.get("title", record.get("name", "benchmark"))), 120)
                 + f"\n{record.get('budget', '?')} budget, {record.get('device', '?')}, "
                   f"{record.get('threads', '?')} threads, {record.get('created', '?')}",
                 fontsize=9, x=0.01, ha="left")
    return fig


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------


def is_benchmark(record: dict[str, Any]) -> bool:
    """True for a benchmark record (mlbook.benchmarks, the live-slider timings), False for an experiment's."""
    from mlbook.experiments import catalog  # noqa: F401 - registers every experiment
    from mlbook.experiments.registry import REGISTRY

    return record.get("name") not in REGISTRY


def write_png(record: dict[str, Any], path: str | Path, dpi: int = 110) -> Path:
    """Draw the record (experiment or benchmark) and write it to `path` as PNG; return the path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = benchmark_figure(record) if is_benchmark(record) else experiment_figure(record)
    FigureCanvasAgg(fig)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=dpi, metadata={"Software": "mlbook"})
    return path


def write_beside(record: dict[str, Any], json_path: str | Path) -> Path:
    """Write the record's PNG summary beside its JSON file (same name, .png); return its path."""
    return write_png(record, Path(json_path).with_suffix(".png"))
