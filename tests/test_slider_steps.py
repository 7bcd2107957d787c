"""On the site, a static slider step leaves the figure exactly as plotly's own step (Plotly.animate
to a precomputed frame) leaves it (book/_static/mlbook.js): one Plotly.update, or, where the frames
only move and restyle scatter points and bars, a "quick" step (animate without the closing redraw,
given the traces that change, a restyle that styles bars and error bars again, the frame's title
written into the drawn title where only its words change, and a relayout of the rest of the title
and, where names or styles change, the legend).

For figures chosen for what can go wrong (heatmaps in subplots, horizontal bars re-sorted on a
category axis under a fixed log range, autoranged axes, lines with markers, a frame title; for the
quick steps: a trace that stays while others move, names and colours that change, text points,
bars, error bars, points parked out of sight, heatmaps with and without scatter traces),
two copies of the figure are drawn on one page with the site's plotly.js and mlbook.js; for every
step, one copy takes plotly's animate step and the other the site's step, and then both hold the
same traces, title (its drawn SVG too), axis ranges and categories, drawn text, path sizes, images,
and the colours, widths and opacities of what is drawn (legend included).
Headless Chromium as in tests/test_site.py (`-m browser`, part of `make test-browser`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_site import ROOT, Tab, browser  # noqa: E402,F401

MLBOOK_JS = ROOT / "book" / "_static" / "mlbook.js"

# figure -> the kind of step the site gives it
CASES = {
    "production.fig_family_kv": "update",  # horizontal bars re-sorted per step, category axis, log x range
    "relative.fig_swin_bias": "update",  # heatmaps in subplots
    "rope.fig_frequency_bands": "quick",  # lines and a heatmap in two subplots, names in the legend, a frame title
    "extension.fig_score_fit": "quick",  # three subplots, autoranged axes, a trace that never moves
    "extension.fig_context_scaling": "quick",  # names in the legend that change, text points
    "sinks.fig_cache_diagram": "quick",  # labelled points, spare ones parked left of the axis
    "sinks.fig_cache_diagram(vary='n_sink')": "quick",  # rows whose labels change colour and number
    "rope.fig_rotation_offset": "quick",  # points, arrows and text labels that move
    "absolute.fig_offset_rotation": "quick",  # markers that come and go, legend names
    "relative.fig_buckets(vary='max_distance')": "quick",  # lines whose length and names change
    # experiment figures from the committed full-budget records, over the knob their page slides
    "exp_extrapolation.fig_extrapolation_curves(extrapolation, bin_width=[8, 4, 16])": "quick",  # bands filled to the next trace, lines of changing length
    "exp_context_extension.fig_context_extension(context_extension, metric=['mean', 'tail'])": "quick",  # error bars restyled
    "exp_extrapolation.fig_extrapolation(extrapolation, metric=['tail', 'tail_minus_head', 'mean'])": "quick",  # error bars that move
    "exp_passkey.fig_passkey_vs_loss(passkey, phase=['zero_shot', 'finetuned'])": "quick",  # error bars, two subplots
    "exp_passkey.fig_passkey_heatmaps(passkey, phase=['zero_shot', 'finetuned'])": "quick",  # heatmaps only, texts in the cells
    "exp_t5_length.fig_t5_per_position(t5_length, length=[16, 12, 8])": "quick",  # bands filled to themselves, lines emptied
    # a figure of a short training run: bars (some missing on a log axis) and lines in two subplots
    "learned.fig_tail_rows(tail_rows)": "quick",
}


def _tail_rows() -> Any:
    from mlbook.analysis.learned import train_tail_rows

    return train_tail_rows(T_max=64, mean_len=10.0, steps=30, batch_size=8, d_model=16, n_layers=1, seed=0)


# the objects a figure of an analysis (not an experiment record) is drawn from: small, quick runs
RUNS = {"tail_rows": _tail_rows}


def _figure(key: str) -> Any:
    """The figure a CASES key names: `module.builder(keyword=value, ...)` from mlbook.viz, or
    `module.builder(record, knob=[values])`, a builder of a committed full-budget record with a
    slider over one knob, as the experiment pages show it (grid_slider, as show_knob does), or
    `module.builder(run)`, a builder given one of the RUNS (its own slider)."""
    import ast
    import importlib

    from mlbook.experiments import catalog  # noqa: F401  (registers every experiment)
    from mlbook.experiments.registry import load_result
    from mlbook.viz.core import grid_slider

    call = ast.parse(key if "(" in key else key + "()", mode="eval").body
    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute), key
    build = getattr(importlib.import_module(f"mlbook.viz.{call.func.value.id}"), call.func.attr)  # type: ignore[attr-defined]
    kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    if not call.args:
        return build(**kwargs)
    name = call.args[0].id  # type: ignore[attr-defined]
    if name in RUNS:
        return build(RUNS[name](), **kwargs)
    record = load_result(name, "full")
    assert record is not None, f"{key}: no committed full-budget record {name!r}"
    (knob, values), = kwargs.items()
    return grid_slider(lambda **kw: build(record, **kw), knob, values)


# For each step of the first slider: copy "a" takes plotly's step (kept in _mlbookSpec), copy "b"
# the site's; the state after both, minus the flags plotly writes when an attribute is set
# explicitly (zauto for zmin, xtype for x ...), which animate's merge does not write.
JS_COMPARE = """async ([ida, idb]) => {
  const a = document.getElementById(ida), b = document.getElementById(idb);
  const frame = () => new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
  const flags = ['uid', 'zauto', 'cauto', 'autocolorscale', 'xtype', 'ytype'];
  // (a colour plotly rewrites in its own spelling, 'rgba(0,0,0,0)' as 'rgba(0, 0, 0, 0)', is the same colour)
  const same = v => (typeof v === 'string' && /^rgba?\\(/.test(v) ? v.replace(/\\s+/g, '') : v);
  const strip = o => JSON.parse(JSON.stringify(o === undefined ? null : o, (k, v) => (flags.includes(k) ? undefined : same(v))));
  const state = gd => JSON.stringify({
    data: strip(gd.data), title: strip(gd.layout.title),
    axes: Object.keys(gd._fullLayout).filter(k => /^[xy]axis\\d*$/.test(k)).map(k =>
      [k, gd._fullLayout[k].range, (gd._fullLayout[k]._categories || []).slice()]),
    text: Array.from(gd.querySelectorAll('text')).map(t => t.textContent),
    paths: Array.from(gd.querySelectorAll('.trace path')).map(p => (p.getAttribute('d') || '').length),
    styles: Array.from(gd.querySelectorAll('.trace path, .trace text, .legend .traces path, .legend .traces text, .legendtext'))
      .map(e => ['fill', 'stroke', 'stroke-width', 'stroke-dasharray', 'opacity', 'fill-opacity', 'font-size']
        .map(k => e.style.getPropertyValue(k) || e.getAttribute(k) || '').join(' ')),
    legend: Array.from(gd.querySelectorAll('.legendtext')).map(t => t.textContent),
    titleDom: (gd.querySelector('.g-gtitle') || {}).outerHTML || '',
    images: Array.from(gd.querySelectorAll('image')).map(p => ['href', 'x', 'y', 'width', 'height'].map(k => p.getAttribute(k) || '').join(' '))});
  const plotly = a._mlbookSpec.layout.sliders[0].steps, site = b.layout.sliders[0].steps, out = [];
  const active = b.layout.sliders[0].active || 0;
  const order = site.map((_, i) => i).filter(i => i !== active).concat([active]);
  for (const i of order) {
    await Plotly[plotly[i].method](a, ...plotly[i].args);
    await window.mlbookStep(b, i);
    await frame();
    const kind = site[i].method === 'skip' && site[i].args[0] === 'mlbook-quick' ? 'quick' : site[i].method;
    out.push({step: i, plotly: plotly[i].method, site: kind, a: state(a), b: state(b)});
  }
  return out;
}"""


# Hover over a heatmap's cell after each step: the label shows the step's value on both copies
# (a quick step draws heatmaps itself, so hover must read what it drew). [] for no heatmap.
JS_HOVER = """async ([ida, idb]) => {
  const a = document.getElementById(ida), b = document.getElementById(idb), out = [];
  const h = a.data.findIndex(t => t.type === 'heatmap');
  if (h < 0) return out;
  const label = async gd => {
    await new Promise(r => setTimeout(r, 60));  // plotly takes one hover per 50 ms
    Plotly.Fx.hover(gd, [{curveNumber: h, pointNumber: [1, 1]}], gd._fullData[h].xaxis + gd._fullData[h].yaxis);
    const text = Array.from(gd.querySelectorAll('.hoverlayer text')).map(t => t.textContent).join(' / ');
    Plotly.Fx.unhover(gd);
    return text;
  };
  const plotly = a._mlbookSpec.layout.sliders[0].steps;
  for (let i = 0; i < plotly.length; i++) {
    await Plotly[plotly[i].method](a, ...plotly[i].args);
    await window.mlbookStep(b, i);
    out.push({step: i, a: await label(a), b: await label(b)});
  }
  return out;
}"""


BASE = "http://127.0.0.1/slider-steps/"  # answered by the page's route below, no server


def _files() -> dict[str, tuple[bytes, str]]:
    """The test page (two copies of each figure, rounded as the static site writes them: f0a, f0b,
    f1a ...), plotly.js and the book's mlbook.js, by path under BASE."""
    import plotly

    from mlbook.viz.core import compact, figure_html

    body = ""
    for n, key in enumerate(CASES):
        data = compact(_figure(key)).to_plotly_json()
        body += "".join(figure_html(data, caption=key, alt=key, div_id=f"f{n}{c}", static=True) for c in "ab")
    page = ('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>steps</title>'
            '<script src="plotly.min.js"></script><script src="mlbook.js"></script></head>'
            f'<body style="width:900px">{body}</body></html>')
    plotly_js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    return {"page.html": (page.encode(), "text/html"),
            "plotly.min.js": (plotly_js.read_bytes(), "text/javascript"),
            "mlbook.js": (MLBOOK_JS.read_bytes(), "text/javascript")}


@pytest.mark.browser
def test_site_slider_step_leaves_the_figure_as_plotlys_animate_does(browser: Any) -> None:
    files = _files()
    tab = Tab(browser)
    try:
        tab.page.route(f"{BASE}**", lambda route: route.fulfill(
            body=files[route.request.url[len(BASE):]][0], content_type=files[route.request.url[len(BASE):]][1]))
        tab.page.goto(f"{BASE}page.html", wait_until="load")
        tab.page.wait_for_function(
            "(n) => Array.from({length: n}, (_, i) => i).every(i => ['a', 'b'].every(c => "
            "(document.getElementById(`f${i}${c}`) || {})._fullLayout))", arg=len(CASES))
        for n, key in enumerate(CASES):
            steps = tab.js(JS_COMPARE, [f"f{n}a", f"f{n}b"])
            assert steps and all(s["plotly"] == "animate" and s["site"] == CASES[key] for s in steps), (
                f"{key}: expected plotly's animate steps turned into {CASES[key]} steps, "
                f"got {[(s['plotly'], s['site']) for s in steps]}")
            for s in steps:
                a, b = json.loads(s["a"]), json.loads(s["b"])
                differ = [part for part in a if a[part] != b[part]]
                assert not differ, f"{key}, step {s['step']}: the site's {s['site']} step differs from animate in {differ}"
            for h in tab.js(JS_HOVER, [f"f{n}a", f"f{n}b"]):
                assert h["a"] and h["a"] == h["b"], f"{key}, step {h['step']}: hover on the heatmap reads {h['b']!r}, not {h['a']!r}"
        assert not tab.console_errors, "\n".join(tab.console_errors)
    finally:
        tab.close()
