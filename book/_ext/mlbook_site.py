"""Sphinx extension for the book: a self-contained static site.

* Sets MLBOOK_STATIC=1 before myst-nb starts kernels, so `mlbook.viz` emits figures that
  need no network and replaces live widgets by a one-line note (kernels inherit the
  environment of the build process).
* Serves plotly.js from the site: copies the copy bundled in the installed `plotly`
  package to `_static/plotly/plotly.min.js` and loads it on every page, before any
  figure script runs. Nothing 3 MB large is committed to the repository.
* Fails the strict build (a warning) when a page would need what the static site cannot
  give: ipywidgets output (needs a kernel and a CDN), or a missing local MathJax.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

PLOTLY_JS = "plotly/plotly.min.js"  # relative to _static/
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _plotly_js_source() -> Path:
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise FileNotFoundError(f"plotly.js is missing from the installed plotly package: {path}")
    return path


def _add_plotly(app: Sphinx) -> None:
    _plotly_js_source()  # fail early, not after executing every notebook
    # priority < 500: before Sphinx's and myst-nb's scripts (and any require.js, which
    # would otherwise capture plotly as an AMD module and leave window.Plotly undefined).
    app.add_js_file(PLOTLY_JS, priority=200, loading_method="defer")


def _check_page(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    body = context.get("body") or ""
    if WIDGET_MIME in body or "jupyter-widgets" in body:
        logger.warning(
            "%s: ipywidgets output on the static site (it needs a live kernel); "
            "wrap it in mlbook.viz.show_live(...)",
            pagename,
            type="mlbook",
            subtype="widget",
        )


def _dedupe_scripts(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Drop inline scripts that appear twice on a page.

    Sphinx 7.4 keeps an extension's inline script (e.g. sphinx-thebe's `const THEBE_JS_URL`)
    once with filename None and once with '' when the builder re-reads its registry, and
    the second `const` declaration is a SyntaxError in the browser console.
    """
    seen: set = set()
    unique = []
    for js in context.get("script_files", []):
        key = (str(getattr(js, "filename", js) or ""), getattr(js, "priority", 500),
               tuple(sorted(getattr(js, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(js)
    context["script_files"] = unique


def _copy_assets(app: Sphinx, exc: Exception | None) -> None:
    if exc is not None or app.builder.format != "html":
        return
    dest = Path(app.outdir) / "_static" / PLOTLY_JS
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_plotly_js_source(), dest)
    mathjax = app.config.mathjax_path
    if "://" not in mathjax and not (Path(app.outdir) / "_static" / mathjax).is_file():
        logger.warning(
            "MathJax is not served locally: _static/%s is missing (is sphinx-mathjax-offline installed?)",
            mathjax,
            type="mlbook",
            subtype="mathjax",
        )


def setup(app: Sphinx) -> dict:
    os.environ["MLBOOK_STATIC"] = "1"
    app.connect("builder-inited", _add_plotly)
    app.connect("html-page-context", _check_page)
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    # after sphinx-mathjax-offline's own build-finished handler (priority 500) copied MathJax
    app.connect("build-finished", _copy_assets, priority=900)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
