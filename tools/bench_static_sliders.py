"""How long one step of a static figure's plotly slider takes in a browser, from the figure builders.

    .venv/bin/python tools/bench_static_sliders.py [NAME ...]    NAME: e.g. rope.fig_frequency_bands

Every public `fig_*` function of a module of `mlbook.viz` that can be called without arguments and
returns a figure with a plotly slider is written, as the static site writes it
(`mlbook.viz.core.figure_html` in static mode, floats rounded by `compact`), into one small HTML
page with plotly.js and the site's `book/_static/mlbook.js`, served on 127.0.0.1 and opened in
headless Chromium (the browser the site's tests use, `MLBOOK_CHROMIUM`, default /usr/bin/chromium).
Each slider step is applied as a click applies it (`window.mlbookStep(gd, i)` for the site's step) and
timed up to the next frame drawn, twice in the same page: plotly's own step (`Plotly.animate` to the
frame, kept by mlbook.js) and the site's (one `Plotly.update`, or a quick step, mlbook.js). The median and slowest
site step are printed per figure, with the ratio of the two medians measured in that run. It needs
no built site, so a figure can be measured while it is being made faster; the browser test
(`make test-speed`) measures the built pages. Goal: median step under 100 ms on the book's 2-core
machine.
"""

from __future__ import annotations

import functools
import http.server
import importlib
import inspect
import json
import os
import pkgutil
import statistics
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import plotly

CHROMIUM = os.environ.get("MLBOOK_CHROMIUM", "/usr/bin/chromium")
GOAL_MEDIAN_MS = 100.0

# Apply every step of the first slider as a click on it does, each timed to the next animation
# frame: `which` is "site" (the steps mlbook.js gives the figure) or "plotly" (the figure's own).
JS_TIME_STEPS = """async ([id, which]) => {
  const gd = document.getElementById(id), sl = gd.layout.sliders[0], ms = [];
  const steps = which === "plotly" ? gd._mlbookSpec.layout.sliders[0].steps : sl.steps;
  const frame = () => new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
  const order = steps.map((_, i) => i).filter(i => i !== (sl.active || 0));
  order.push(sl.active || 0);
  for (const i of order) {
    const st = steps[i], t0 = performance.now();
    await (which === "plotly" ? Plotly[st.method](gd, ...st.args) : window.mlbookStep(gd, i));
    await frame();
    ms.push(performance.now() - t0);
  }
  return ms;
}"""
MLBOOK_JS = Path(__file__).resolve().parents[1] / "book" / "_static" / "mlbook.js"


def slider_figures(names: list[str] | None = None) -> dict[str, Any]:
    """'module.fig_name' -> figure, for every argument-free fig_* of mlbook.viz with a slider."""
    import mlbook.viz as pkg

    out: dict[str, Any] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name == "core":
            continue
        try:
            module = importlib.import_module(f"mlbook.viz.{info.name}")
        except Exception as err:  # noqa: BLE001 - a module in progress elsewhere is reported, not fatal
            print(f"skipped mlbook.viz.{info.name}: {type(err).__name__}: {err}", file=sys.stderr)
            continue
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            key = f"{info.name}.{name}"
            if not name.startswith("fig_") or fn.__module__ != module.__name__ or (names and key not in names):
                continue
            try:
                inspect.signature(fn).bind()
                fig = fn()
            except Exception:  # noqa: BLE001 - needs arguments (a record) or data: not measured here
                continue
            if getattr(fig.layout, "sliders", None):
                out[key] = fig
    return out


def write_page(folder: Path, key: str, fig: Any) -> str:
    """One HTML page holding the figure as the static site writes it; returns the file name."""
    from mlbook.viz.core import compact, figure_html

    body = figure_html(compact(fig).to_plotly_json(), caption=key, alt=key, div_id="fig", static=True)
    name = key.replace(".", "_") + ".html"
    (folder / name).write_text(
        '<!doctype html><html><head><meta charset="utf-8"><script src="plotly.min.js"></script>'
        '<script src="mlbook.js"></script></head>'
        f'<body style="width:900px">{body}</body></html>', encoding="utf-8")
    return name


def measure(figures: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Median and slowest site step (ms) per figure, and plotly's own median, in headless Chromium."""
    from playwright.sync_api import sync_playwright

    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "plotly.min.js").write_bytes(
            (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_bytes())
        (folder / "mlbook.js").write_bytes(MLBOOK_JS.read_bytes())
        pages = {key: write_page(folder, key, fig) for key, fig in figures.items()}
        handler = functools.partial(_Quiet, directory=str(folder))
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--no-sandbox", "--disable-gpu"])
                for key, name in pages.items():
                    page = browser.new_page(viewport={"width": 1000, "height": 900})
                    page.goto(f"http://127.0.0.1:{httpd.server_address[1]}/{name}", wait_until="load")
                    page.wait_for_function("() => !!document.getElementById('fig')._fullLayout", timeout=30_000)
                    plotly_ms = page.evaluate(JS_TIME_STEPS, ["fig", "plotly"])
                    ms = page.evaluate(JS_TIME_STEPS, ["fig", "site"])
                    results[key] = {"steps": len(ms), "median_ms": round(statistics.median(ms), 1),
                                    "max_ms": round(max(ms), 1),
                                    "plotly_median_ms": round(statistics.median(plotly_ms), 1),
                                    "kb": round((Path(tmp) / name).stat().st_size / 1024, 1)}
                    page.close()
                browser.close()
        finally:
            httpd.shutdown()
            httpd.server_close()
    return results


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


def main(argv: list[str] | None = None) -> int:
    names = list(sys.argv[1:] if argv is None else argv)
    results = measure(slider_figures(names or None))
    for key, r in results.items():
        flag = "  OVER" if r["median_ms"] > GOAL_MEDIAN_MS else ""
        print(f"{key:40s} {r['steps']:3d} steps  median {r['median_ms']:6.1f} ms  max {r['max_ms']:6.1f} ms  "
              f"(plotly's animate {r['plotly_median_ms']:6.1f} ms, x{r['plotly_median_ms'] / r['median_ms']:4.2f})  "
              f"{r['kb']:7.1f} KiB{flag}", flush=True)
    print(json.dumps({"over_goal": sorted(k for k, r in results.items() if r["median_ms"] > GOAL_MEDIAN_MS)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
