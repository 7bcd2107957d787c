"""The built site for readers on a phone, and the accessibility audit as a report.

The axe-core audit of every page (zero violations, light and dark) is part of
tests/test_site.py's page test, which loads each page once for all its checks. Here, with
its server, Chromium and page fixtures:

* (`-m phone`, `make test-phone`) at a phone's width (390 px) every plotly figure is drawn
  without overlapping text: the bounding boxes of its title, axis titles, annotations
  (subplot titles), legend entries and slider or picker labels do not intersect, and none
  runs off the figure's sides, top or bottom. Each figure's screenshot is saved under _build/phone/.
* at the narrowest desktop column (a 960 px window: figures 632 px wide) the same check holds for
  every figure as drawn and after every step of its slider.
* a window that changes width (a phone turned, a desktop window narrowed): one page loaded at
  a desktop's width and narrowed to 390 px passes the same check, and widened again draws
  every panel back where its figure puts it. mlbook.js redraws a figure for a new width
  afresh, not with Plotly.react: react puts back the domain an axis with constrain: "domain"
  had in the last drawing, and the panels stacked for the phone then overlapped.

`python tests/test_site_a11y.py audit [PAGE ...]` prints the violation counts per rule, light
and dark, without failing (for before/after comparisons).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_site import (  # noqa: E402,F401
    AXE_TAGS, JS_AXE, JS_SCROLL_TO, SITE, Tab, _load, _site_pages, _switch_to_dark, audit, browser, server, settle,
)

ROOT = Path(__file__).resolve().parents[1]
PHONE = {"width": 390, "height": 844}
SHOTS = ROOT / "_build" / "phone"
OVERLAP_PX = 1.0  # boxes may touch; they may not overlap by more than this in both directions

# The text of a drawn plotly figure a reader must be able to read: its title, axis titles,
# annotations (subplot titles are annotations) and legend entries, as page-coordinate boxes.
JS_TEXT_BOXES = """(id) => { const gd = document.getElementById(id), out = [];
  const kinds = [['title', '.g-gtitle text, text.gtitle'], ['xtitle', '[class*="g-x"][class$="title"] text, text[class^="x"][class$="title"]'],
                 ['ytitle', '[class*="g-y"][class$="title"] text, text[class^="y"][class$="title"]'],
                 ['annotation', '.annotation-text'], ['legend', '.legendtext'],
                 ['control', '.slider-label, .slider-current-value, .updatemenu-item-text']];
  const seen = new Set();
  for (const [kind, sel] of kinds) for (const t of gd.querySelectorAll(sel)) {
    if (seen.has(t) || !t.textContent.trim()) continue; seen.add(t);
    const r = t.getBoundingClientRect(); if (r.width < 1 || r.height < 1) continue;
    out.push({kind, text: t.textContent.trim().slice(0, 60), x0: r.left, y0: r.top, x1: r.right, y1: r.bottom});
  }
  const svg = gd.querySelector('.main-svg').getBoundingClientRect();
  return {boxes: out, width: svg.width, container: gd.getBoundingClientRect().width,
          clipped: out.filter(b => b.x0 < svg.left - 1 || b.x1 > svg.right + 1 || b.y0 < svg.top - 1 || b.y1 > svg.bottom + 1)
            .map(b => `${b.kind} ${JSON.stringify(b.text)}`)}; }"""


def overlaps(boxes: list[dict[str, Any]], tol: float = OVERLAP_PX) -> list[tuple[str, str]]:
    """Pairs of text boxes that intersect by more than `tol` pixels in both directions."""
    bad = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            dx = min(a["x1"], b["x1"]) - max(a["x0"], b["x0"])
            dy = min(a["y1"], b["y1"]) - max(a["y0"], b["y0"])
            if dx > tol and dy > tol:
                bad.append((f"{a['kind']} {a['text']!r}", f"{b['kind']} {b['text']!r}"))
    return bad


# every figure redrawn by mlbook.js for the width class ("|true" narrow, "|false" wide), none still redrawing
JS_REDRAWN_FOR = """(narrow) => Array.from(document.querySelectorAll('.mlbook-plotly'))
    .every(gd => (gd._mlbookState || '').endsWith(narrow ? '|true' : '|false'))
  && (!window.mlbookRedrawing || window.mlbookRedrawing() === 0)"""

# axes drawn outside the domain their figure gives them (where it gives one): the drawn domain is
# that domain, or inside it for an axis with constrain: "domain" (plotly narrows such an axis
# to keep its aspect ratio)
JS_DOMAINS_MOVED = """() => { const out = [], eps = 1e-6;
  for (const gd of document.querySelectorAll('.mlbook-plotly')) {
    const L = (gd._mlbookSpec || {}).layout || {};
    for (const [k, ax] of Object.entries(L)) {
      if (!/^[xy]axis\\d*$/.test(k) || !ax || !Array.isArray(ax.domain)) continue;
      const d = (gd._fullLayout[k] || {}).domain || [NaN, NaN], [a, b] = ax.domain;
      const ok = ax.constrain === 'domain' ? d[0] >= a - eps && d[1] <= b + eps && d[1] > d[0]
                                           : Math.abs(d[0] - a) <= eps && Math.abs(d[1] - b) <= eps;
      if (!ok) out.push(`#${gd.id} ${k}: drawn over ${JSON.stringify(d)}, given ${JSON.stringify(ax.domain)}`);
    }
  }
  return out; }"""

# the page whose width changes in `test_a_page_narrowed_and_widened`: seven figures, two of
# them with side-by-side panels on an axis of fixed aspect (constrain: "domain")
RESIZED_PAGE = "notebooks/05_rope.html"


def _phone_pages() -> list[str]:
    return [p for p in _site_pages() if "mlbook-figure" in (SITE / p).read_text(errors="replace")] or ["book/intro.html"]


def _phone_problems(tab: Tab, page: str, shots: bool = True) -> list[str]:
    """Every figure of the page, at the tab's (phone) width: the plot fits its column, and the
    boxes of its text neither overlap nor run off the figure's sides. Screenshots to _build/phone/."""
    ids = tab.js("() => Array.from(document.querySelectorAll('figure.mlbook-figure .mlbook-plotly')).map(e => e.id)")
    out = SHOTS / page.replace("/", "__").removesuffix(".html")
    if shots:
        tab.page.add_style_tag(content=".bd-header, .bd-header-article, .skip-link { visibility: hidden !important; }")
        out.mkdir(parents=True, exist_ok=True)
    problems = []
    for div_id in ids:
        tab.js(JS_SCROLL_TO, div_id)
        r = tab.js(JS_TEXT_BOXES, div_id)
        if shots:
            tab.page.locator(f"#{div_id}-figure").screenshot(path=str(out / f"{div_id}.png"))
        if r["width"] > r["container"] + 1:
            problems.append(f"#{div_id}: the plot is {r['width']:.0f} px wide in a {r['container']:.0f} px column")
        for t in r["clipped"]:
            problems.append(f"#{div_id}: {t} runs off the figure")
        for a, b in overlaps(r["boxes"]):
            problems.append(f"#{div_id}: {a} overlaps {b}")
    return problems


@pytest.mark.browser
@pytest.mark.phone
@pytest.mark.parametrize("page", _phone_pages())
def test_figures_on_a_phone(page: str, server: str, browser: Any) -> None:
    tab = Tab(browser, width=PHONE["width"], height=PHONE["height"])
    try:
        _load(tab, f"{server}/{page}")
        # mlbook.js fits each figure to the narrow screen after drawing it: wait for all of them
        tab.page.wait_for_function("() => window.mlbookRedrawing && window.mlbookRedrawing() === 0", timeout=20_000)
        problems = _phone_problems(tab, page)
        assert not problems, f"{page} at {PHONE['width']} px:\n  " + "\n  ".join(problems)
    finally:
        tab.close()


@pytest.mark.browser
def test_a_page_narrowed_and_widened(server: str, browser: Any) -> None:
    assert (SITE / RESIZED_PAGE).is_file(), f"{RESIZED_PAGE} is not in the built site {SITE}: build it, or name another page"
    tab = Tab(browser)
    try:
        _load(tab, f"{server}/{RESIZED_PAGE}")
        tab.page.set_viewport_size(PHONE)  # mlbook.js redraws each figure after a 200 ms pause
        tab.page.wait_for_function(JS_REDRAWN_FOR, arg=True, timeout=20_000)
        problems = _phone_problems(tab, RESIZED_PAGE, shots=False)  # the phone test took them
        assert not problems, f"{RESIZED_PAGE} narrowed to {PHONE['width']} px:\n  " + "\n  ".join(problems)
        tab.page.set_viewport_size({"width": 1280, "height": 900})
        tab.page.wait_for_function(JS_REDRAWN_FOR, arg=False, timeout=20_000)
        moved = tab.js(JS_DOMAINS_MOVED)
        assert not moved, f"{RESIZED_PAGE} widened again: panels not where their figure puts them:\n  " + "\n  ".join(moved)
        assert not tab.console_errors, f"{RESIZED_PAGE}: console errors:\n" + "\n".join(tab.console_errors)
    finally:
        tab.close()


# The narrowest desktop column: at this window width the theme's sidebars leave the article about
# 632 px, the narrowest a figure is drawn at without mlbook.js's narrow layout (under 600 px);
# wider windows give 664 to 792 px.
DESKTOP = {"width": 960, "height": 900}

# Step `i` of a figure's first slider as a click applies it, then a frame drawn.
JS_STEP_DRAWN = """async ([id, i]) => { await window.mlbookStep(document.getElementById(id), i);
  await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0))); return true; }"""


@pytest.mark.browser
@pytest.mark.parametrize("page", _phone_pages())
def test_figures_on_a_desktop_column(page: str, server: str, browser: Any) -> None:
    """At the narrowest desktop column, every figure's title, axis titles, annotations, legend and
    control labels stay inside the figure and clear of each other, as drawn and after every step
    of its slider (a frame's title is written for its own values: 's = 16' is longer than 's = 4')."""
    tab = Tab(browser, width=DESKTOP["width"], height=DESKTOP["height"])
    try:
        _load(tab, f"{server}/{page}")
        ids = tab.js("() => Array.from(document.querySelectorAll('figure.mlbook-figure .mlbook-plotly')).map(e => e.id)")
        problems = []

        def check(div_id: str, when: str) -> dict[str, Any]:
            r = tab.js(JS_TEXT_BOXES, div_id)
            problems.extend(f"#{div_id}{when}: {t} runs off the figure" for t in r["clipped"])
            problems.extend(f"#{div_id}{when}: {a} overlaps {b}" for a, b in overlaps(r["boxes"]))
            return r

        for div_id in ids:
            r = check(div_id, "")
            assert r["container"] >= 600, f"#{div_id} is {r['container']:.0f} px wide: not a desktop column (narrow under 600 px)"
            steps = tab.js("(id) => ((document.getElementById(id).layout.sliders || [])[0] || {steps: []}).steps.length", div_id)
            for i in range(steps):
                tab.js(JS_STEP_DRAWN, [div_id, i])
                check(div_id, f" at slider step {i}")
        problems = list(dict.fromkeys(problems))
        assert not problems, f"{page} at {DESKTOP['width']} px:\n  " + "\n  ".join(problems)
    finally:
        tab.close()


# ---------------------------------------------------------------------------
# `python tests/test_site_a11y.py audit [PAGE ...]`: counts per rule, light and dark
# ---------------------------------------------------------------------------


def _report(pages: list[str]) -> None:
    import contextlib

    totals = {"light": Counter(), "dark": Counter()}
    pages_hit = {"light": Counter(), "dark": Counter()}
    overlap_total = 0
    with contextlib.contextmanager(server.__wrapped__)() as base, \
         contextlib.contextmanager(browser.__wrapped__)() as b:  # type: ignore[attr-defined]
        for page in pages:
            tab = Tab(b)
            try:
                _load(tab, f"{base}/{page}")
                res = {"light": audit(tab)}
                _switch_to_dark(tab, page)
                settle(tab)
                res["dark"] = tab.js(JS_AXE, AXE_TAGS)
            finally:
                tab.close()
            for mode, vs in res.items():
                for v in vs:
                    totals[mode][v["id"]] += len(v["nodes"])
                    pages_hit[mode][v["id"]] += 1
                print(f"{page} {mode}: " + (", ".join(f"{v['id']}={len(v['nodes'])}" for v in vs) or "0"), flush=True)
            tab = Tab(b, width=PHONE["width"], height=PHONE["height"])
            try:
                _load(tab, f"{base}/{page}")
                ids = tab.js("() => Array.from(document.querySelectorAll('figure.mlbook-figure .mlbook-plotly')).map(e => e.id)")
                rs = [tab.js(JS_TEXT_BOXES, i) for i in ids]
                n = sum(len(overlaps(r["boxes"])) + len(r["clipped"]) for r in rs)
                overlap_total += n
                if n:
                    print(f"{page} phone: {n} overlapping text pair(s) or clipped text(s) in {len(ids)} figure(s)", flush=True)
            finally:
                tab.close()
    for mode in ("light", "dark"):
        print(f"{mode}: {sum(totals[mode].values())} violating elements: " +
              ", ".join(f"{k} {n} on {pages_hit[mode][k]} page(s)" for k, n in totals[mode].most_common()))
    print(f"phone ({PHONE['width']} px): {overlap_total} overlapping text pairs or clipped texts")


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] != "audit":
        sys.exit("usage: python tests/test_site_a11y.py audit [PAGE ...]")
    _report(sys.argv[2:] or _site_pages())
