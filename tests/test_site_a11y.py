"""The built site for readers who need accessible pages, and for readers on a phone.

Browser tests (`-m browser`, run by `make test-browser` beside tests/test_site.py, whose
server, Chromium and page fixtures they share):

* every page passes an axe-core audit (the WCAG 2 A and AA rules: tags wcag2a, wcag2aa,
  wcag21a, wcag21aa) with zero violations, in light mode and again after the theme switch
  has made it dark. axe-core is the npm package pinned in the Makefile (`make axe` installs
  it under _build/axe; `MLBOOK_AXE` overrides the path): nothing is fetched at run time.
* at a phone's width (390 px) every plotly figure is drawn without overlapping text: the
  bounding boxes of its title, axis titles, annotations (subplot titles), legend entries and
  slider or picker labels do not intersect, and none runs off the figure's sides. Each figure's screenshot is saved under _build/phone/ for a look.

`python tests/test_site_a11y.py audit [PAGE ...]` prints the violation counts per rule, light
and dark, without failing (for before/after comparisons).
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_site import SITE, Tab, _load, _site_pages, _switch_to_dark, browser, server  # noqa: E402,F401

ROOT = Path(__file__).resolve().parents[1]
AXE = Path(os.environ.get("MLBOOK_AXE", ROOT / "_build" / "axe" / "node_modules" / "axe-core" / "axe.min.js"))
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
PHONE = {"width": 390, "height": 844}
SHOTS = ROOT / "_build" / "phone"
OVERLAP_PX = 1.0  # boxes may touch; they may not overlap by more than this in both directions

JS_AXE = """(tags) => axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']})
  .then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
     nodes: v.nodes.map(n => ({target: n.target.join(' '), summary: (n.failureSummary || '').slice(0, 300)}))})))"""

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
          clipped: out.filter(b => b.x0 < svg.left - 1 || b.x1 > svg.right + 1).map(b => `${b.kind} ${JSON.stringify(b.text)}`)}; }"""


def _inject_axe(tab: Tab) -> None:
    if not AXE.is_file():
        pytest.fail(f"axe-core not found at {AXE}: run `make axe` (npm install of the pinned axe-core)")
    tab.page.add_script_tag(path=str(AXE))


def _settle(tab: Tab) -> None:
    """After the theme switch: the pointer and focus leave the switch, so its tooltip (half
    faded in, which axe would measure at half contrast) goes away, and the figures redraw."""
    tab.page.mouse.move(1, 1)
    tab.js("() => document.activeElement && document.activeElement.blur()")
    tab.page.wait_for_function("() => !document.querySelector('.tooltip.show')", timeout=5_000)
    tab.page.wait_for_timeout(300)


def audit(tab: Tab) -> list[dict[str, Any]]:
    """axe-core's violations on the loaded page (WCAG 2 A and AA rules)."""
    _inject_axe(tab)
    return tab.js(JS_AXE, AXE_TAGS)


def _describe(violations: list[dict[str, Any]]) -> str:
    lines = []
    for v in violations:
        lines.append(f"  {v['id']} ({v['impact']}, {len(v['nodes'])} element(s)): {v['help']}")
        for n in v["nodes"][:4]:
            lines.append(f"    {n['target']}: {n['summary'].splitlines()[-1] if n['summary'] else ''}")
    return "\n".join(lines)


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


@pytest.mark.browser
@pytest.mark.parametrize("page", _site_pages() or ["book/intro.html"])
def test_page_accessible(page: str, server: str, browser: Any) -> None:
    tab = Tab(browser)
    try:
        _load(tab, f"{server}/{page}")
        light = audit(tab)
        _switch_to_dark(tab, page)
        _settle(tab)
        dark = tab.js(JS_AXE, AXE_TAGS)
        msg = []
        if light:
            msg.append(f"{page}, light mode: axe-core violations\n{_describe(light)}")
        if dark:
            msg.append(f"{page}, dark mode: axe-core violations\n{_describe(dark)}")
        assert not msg, "\n".join(msg)
    finally:
        tab.close()


def _phone_pages() -> list[str]:
    return [p for p in _site_pages() if "mlbook-figure" in (SITE / p).read_text(errors="replace")] or ["book/intro.html"]


@pytest.mark.browser
@pytest.mark.phone
@pytest.mark.parametrize("page", _phone_pages())
def test_figures_on_a_phone(page: str, server: str, browser: Any) -> None:
    tab = Tab(browser, width=PHONE["width"], height=PHONE["height"])
    try:
        _load(tab, f"{server}/{page}")
        ids = tab.js("() => Array.from(document.querySelectorAll('figure.mlbook-figure .mlbook-plotly')).map(e => e.id)")
        tab.page.add_style_tag(content=".bd-header, .bd-header-article, .skip-link { visibility: hidden !important; }")  # screenshots only
        out = SHOTS / page.replace("/", "__").removesuffix(".html")
        out.mkdir(parents=True, exist_ok=True)
        problems = []
        for div_id in ids:
            tab.js("(id) => document.getElementById(id).scrollIntoView({block: 'center'})", div_id)
            tab.page.wait_for_timeout(100)
            r = tab.js(JS_TEXT_BOXES, div_id)
            tab.page.locator(f"#{div_id}-figure").screenshot(path=str(out / f"{div_id}.png"))
            if r["width"] > r["container"] + 1:
                problems.append(f"#{div_id}: the plot is {r['width']:.0f} px wide in a {r['container']:.0f} px column")
            for t in r["clipped"]:
                problems.append(f"#{div_id}: {t} runs off the figure")
            for a, b in overlaps(r["boxes"]):
                problems.append(f"#{div_id}: {a} overlaps {b}")
        assert not problems, f"{page} at {PHONE['width']} px:\n  " + "\n  ".join(problems)
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
                _settle(tab)
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
