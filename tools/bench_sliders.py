"""Benchmark of the book, not of the library: how long a live figure takes to redraw when a
reader moves a slider.

    .venv/bin/python tools/bench_sliders.py           full budget (3 rounds), the committed record
    .venv/bin/python tools/bench_sliders.py --quick   1 round, a git-ignored quick record

It times the notebooks' live figures (mlbook.viz, ipywidgets, the kernel's JSON encoding), so it
lives with the book's tools (`make bench` runs it after the library's benchmarks), not in
`mlbook.benchmarks`, whose benchmarks measure the library below the figures. It writes through
the one record store (`mlbook.records`) to where the library's benchmark records go:
results/bench/live_sliders.json (in a clone: src/mlbook/results/bench/, shipped with the package
so that the systems page can print it through `mlbook.benchmarks.load_record("live_sliders")`),
or results/quick/bench/ for --quick. An unwritable results folder is refused before anything is
timed. Run it on a quiet machine.

The live figures are found, not listed: every public function named `live_*` defined in a
module of the `mlbook.viz` package (figure modules added later are picked up), called with its
defaults. Each returns the ipywidgets form built by `live_sliders`: a row of controls whose
change calls the figure's build function and `show`. The benchmark moves every control to its
extremes and back to its default, then all controls to their minimum and to their maximum
together, and times each redraw: the build function, `show`'s rounding and HTML, and the JSON
encoding a kernel does before it sends the figure (display is captured here, nothing is shown).
It does not include the browser drawing the figure.

A control's extremes: min and max of a slider (10**min and 10**max of a log slider), the first
and the last option of a selection slider or dropdown, True and False of a checkbox.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import json
import pkgutil
import statistics
import sys
import time
from typing import Any, Callable, Iterator

import torch

from mlbook.benchmarks.registry import command_for, record_path
from mlbook.records import check_writable, machine_info, make_record, save_record

__all__ = ["NAME", "TITLE", "CLAIM", "CONFIGS", "GOAL_P95_MS", "discover_live_figures", "widget_controls", "extremes",
           "capture_display", "time_live_figure", "run_sliders", "run", "main"]

NAME = "live_sliders"
TITLE = "Live-slider redraw time of every live figure"
CLAIM = "A live slider should feel immediate: p95 redraw under 100 ms"
CONFIGS: dict[str, dict[str, Any]] = {
    "quick": {"package": "mlbook.viz", "rounds": 1},
    "full": {"package": "mlbook.viz", "rounds": 3},
}

GOAL_P95_MS = 100.0  # a slider should redraw within 100 ms at the 95th percentile (a response under 0.1 s reads as instantaneous)


def discover_live_figures(package: str = "mlbook.viz") -> dict[str, Callable[..., Any]]:
    """Every public `live_*` function defined in a module of `package`, by 'module.function'.

    Only functions whose parameters all have defaults are returned (they are what a notebook
    calls); modules that fail to import are skipped and reported by `skipped_modules`.
    """
    found, _ = _discover(package)
    return found


def _discover(package: str) -> tuple[dict[str, Callable[..., Any]], dict[str, str]]:
    pkg = importlib.import_module(package)
    found: dict[str, Callable[..., Any]] = {}
    skipped: dict[str, str] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name == "core":
            continue
        mod_name = f"{package}.{info.name}"
        try:
            module = importlib.import_module(mod_name)
        except Exception as err:  # noqa: BLE001 - a module in progress elsewhere must not stop the benchmark
            skipped[mod_name] = f"{type(err).__name__}: {err}"
            continue
        for name, obj in inspect.getmembers(module, inspect.isfunction):
            if not name.startswith("live_") or obj.__module__ != mod_name:
                continue
            params = inspect.signature(obj).parameters.values()
            required = [p.name for p in params if p.default is inspect.Parameter.empty
                        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
            if required:
                skipped[f"{mod_name}.{name}"] = f"needs arguments {required}"
                continue
            found[f"{info.name}.{name}"] = obj
    return found, skipped


def widget_controls(widget: Any) -> list[Any]:
    """The value-carrying controls (sliders, dropdowns, checkboxes) inside a widget tree, in order."""
    import ipywidgets as widgets

    out: list[Any] = []

    def walk(w: Any) -> None:
        if isinstance(w, widgets.Output):
            return
        if isinstance(w, widgets.Box):
            for child in w.children:
                walk(child)
            return
        if isinstance(w, widgets.ValueWidget) and not isinstance(w, (widgets.Label, widgets.HTML, widgets.HTMLMath)):
            out.append(w)

    walk(widget)
    return out


def extremes(control: Any) -> list[Any]:
    """The values a control is pushed to: its minimum and maximum (see the module docstring)."""
    import ipywidgets as widgets

    if isinstance(control, widgets.FloatLogSlider):
        return [control.base ** control.min, control.base ** control.max]
    if hasattr(control, "min") and hasattr(control, "max"):
        return [control.min, control.max]
    if hasattr(control, "options"):
        options = list(control.options)
        if not options:
            return []
        values = [o[1] if isinstance(o, tuple) and len(o) == 2 else o for o in options]
        return [values[0], values[-1]]
    if isinstance(control.value, bool):
        return [not control.value, control.value]
    return []


@contextlib.contextmanager
def capture_display() -> Iterator[list[int]]:
    """Within the block IPython's display and clear_output do what a kernel does before sending:
    JSON-encode the bundle. Yields a list that collects each payload's size in bytes."""
    import IPython.display as ipd

    sizes: list[int] = []

    def display(*objs: Any, raw: bool = False, **kwargs: Any) -> None:
        for obj in objs:
            if raw and isinstance(obj, dict):
                payload = obj
            else:
                fmt = getattr(obj, "_repr_mimebundle_", None)
                payload = fmt() if callable(fmt) else {"text/plain": repr(obj)}
            sizes.append(len(json.dumps(payload, default=str)))

    def clear_output(wait: bool = False) -> None:
        return None

    modules: list[Any] = [ipd]
    for name in ("IPython.core.display_functions", "ipywidgets.widgets.interaction"):
        try:
            modules.append(importlib.import_module(name))  # the latter holds its own clear_output
        except ImportError:
            pass
    saved = [(m, name, getattr(m, name)) for m in modules for name in ("display", "clear_output") if hasattr(m, name)]
    try:
        for m, name, _ in saved:
            setattr(m, name, display if name == "display" else clear_output)
        yield sizes
    finally:
        for m, name, original in saved:
            setattr(m, name, original)


def _set(control: Any, value: Any) -> float:
    """Set the control (which redraws synchronously) and return the seconds it took."""
    start = time.perf_counter()
    control.value = value
    return time.perf_counter() - start


def time_live_figure(make: Callable[[], Any], rounds: int = 1) -> dict[str, Any]:
    """Redraw times (ms) of one live figure at default and extreme knob values; see the module docstring."""
    samples: list[dict[str, Any]] = []
    errors: list[str] = []
    with capture_display() as sizes:
        start = time.perf_counter()
        widget = make()
        first_ms = (time.perf_counter() - start) * 1e3
        controls = widget_controls(widget)
        defaults = [c.value for c in controls]

        def push(label: str, control: Any, value: Any) -> None:
            if control.value == value:
                return
            try:
                samples.append({"knobs": label, "ms": _set(control, value) * 1e3})
            except Exception as err:  # noqa: BLE001 - a figure that fails at an extreme is reported, not fatal
                errors.append(f"{label}: {type(err).__name__}: {err}"[:300])
                with contextlib.suppress(Exception):
                    control.value = value  # keep the control where it was asked to be

        for _ in range(rounds):
            for i, (c, d) in enumerate(zip(controls, defaults)):
                name = c.description or f"control {i}"
                for x in extremes(c):
                    push(f"{name}={x}", c, x)
                push(f"{name}={d} (default)", c, d)
            for end in (0, -1):
                for c in controls:
                    ex = extremes(c)
                    if ex:
                        push(f"all {'min' if end == 0 else 'max'} ({c.description}={ex[end]})", c, ex[end])
            for c, d in zip(controls, defaults):
                push(f"back to default ({c.description}={d})", c, d)
    ms = sorted(s["ms"] for s in samples)
    p95 = ms[min(len(ms) - 1, max(0, round(0.95 * (len(ms) - 1))))] if ms else None
    slowest = max(samples, key=lambda s: s["ms"]) if samples else None
    defaults_ms = [s["ms"] for s in samples if "(default)" in s["knobs"]]
    return {
        "controls": [c.description or f"control {i}" for i, c in enumerate(controls)],
        "n_redraws": len(samples),
        "first_draw_ms": round(first_ms, 2),
        "default_median_ms": round(statistics.median(defaults_ms), 2) if defaults_ms else None,
        "median_ms": round(statistics.median(ms), 2) if ms else None,
        "p95_ms": round(p95, 2) if p95 is not None else None,
        "max_ms": round(ms[-1], 2) if ms else None,
        "slowest_knobs": slowest["knobs"] if slowest else None,
        "max_payload_kb": round(max(sizes) / 1024, 1) if sizes else None,
        "errors": errors,
    }


def run_sliders(config: dict[str, Any], device: torch.device, progress: bool = True) -> dict[str, Any]:
    """Time every discovered live figure; report each one's p95 and the slowest overall."""
    found, skipped = _discover(config.get("package", "mlbook.viz"))
    figures: dict[str, Any] = {}
    for name, fn in found.items():
        try:
            figures[name] = time_live_figure(fn, rounds=config["rounds"])
        except Exception as err:  # noqa: BLE001
            figures[name] = {"error": f"{type(err).__name__}: {err}"[:300]}
        if progress:
            f = figures[name]
            print(f"sliders {name}: p95 {f.get('p95_ms')} ms, max {f.get('max_ms')} ms ({f.get('slowest_knobs')})"
                  + (f", {len(f['errors'])} errors" if f.get("errors") else ""), flush=True)
    timed = {n: f for n, f in figures.items() if f.get("max_ms") is not None}
    all_ms = sorted(f["p95_ms"] for f in timed.values())
    slowest = max(timed, key=lambda n: timed[n]["max_ms"]) if timed else None
    return {
        "figures": figures,
        "skipped": skipped,
        "goal_p95_ms": GOAL_P95_MS,
        "over_goal": sorted(n for n, f in timed.items() if f["p95_ms"] > GOAL_P95_MS),
        "slowest_figure": slowest,
        "slowest_ms": timed[slowest]["max_ms"] if slowest else None,
        "slowest_knobs": timed[slowest]["slowest_knobs"] if slowest else None,
        "worst_p95_ms": all_ms[-1] if all_ms else None,
    }


def run(budget: str = "full", *, progress: bool = True, save: bool = True, note: str | None = None) -> dict[str, Any]:
    """Time every live figure at `budget` ("quick" or "full") on the CPU and return the record; unless
    save=False, write it where `mlbook.benchmarks.record_path(NAME, budget)` says, refusing an
    unwritable path before anything is timed."""
    if budget not in CONFIGS:
        raise ValueError(f"budget must be one of {sorted(CONFIGS)}, got {budget!r}")
    path = record_path(NAME, budget)
    if save:
        check_writable(path)
    device = torch.device("cpu")
    info = machine_info(device)
    start = time.perf_counter()
    results = run_sliders(CONFIGS[budget], device, progress)
    record = make_record(NAME, budget, CONFIGS[budget], results, info, time.perf_counter() - start,
                         command_for(NAME, budget), title=TITLE, claim=CLAIM)
    if note:
        record["note"] = note
    if save:
        where = save_record(record, path)
        if progress:
            print(f"wrote {where}", flush=True)
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/bench_sliders.py", description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--quick", action="store_true", help="1 round, a git-ignored quick record")
    parser.add_argument("--no-save", action="store_true", help="print the results instead of writing the record")
    parser.add_argument("--note", default=None, help="a sentence stored in the record (e.g. that the machine was busy)")
    args = parser.parse_args(argv)
    try:
        record = run("quick" if args.quick else "full", save=not args.no_save, note=args.note)
    except (ValueError, OSError) as err:  # an unwritable results folder: refused before anything is timed
        parser.error(str(err))
    if args.no_save:
        print(json.dumps(record["results"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
