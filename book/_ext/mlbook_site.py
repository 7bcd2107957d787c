"""Sphinx extension for the book: a self-contained static site.

* Sets MLBOOK_STATIC=1 before myst-nb starts kernels, so `mlbook.viz` emits figures that
  need no network and replaces live widgets by a one-line note (kernels inherit the
  environment of the build process).
* Serves plotly.js from the site: copies the copy bundled in the installed `plotly`
  package to `_static/plotly/plotly.min.js`, which `_static/mlbook.js` loads on the pages
  that have figures (and only there) once the page is parsed, so the 3.6 MB script never
  holds up DOMContentLoaded; the figure scripts wait for its load event. Nothing 3 MB large
  is committed to the repository.
* Loads MathJax once the page is parsed: the page's MathJax script is `_static/mlbook-mathjax.js`,
  which adds the local bundle (sphinx-mathjax-offline's `mathjax/tex-chtml.js`) as an async
  script at DOMContentLoaded instead of evaluating it, deferred, before that event.
* Fails the strict build (a warning) when a page would need what the static site cannot
  give: ipywidgets output (needs a kernel and a CDN), or a missing local MathJax.
* Collapses the generated setup block at the top of each notebook's first code cell
  (tools/setup_cells.py writes it; it only does something in Colab) behind a "Show the
  setup cell" toggle; the notebook's imports below it stay visible.
* Two directives for the execution-status page (book/execution_status.md):
  `mlbook-execution-status`, a table of every executed notebook (last execution, duration,
  pass or fail, read from myst-nb's execution records, i.e. the jupyter-cache of the build),
  and `mlbook-environment`, the Python, torch, mlbook and device the build ran with.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

PLOTLY_JS = "plotly/plotly.min.js"  # relative to _static/
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _plotly_js_source() -> Path:
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise FileNotFoundError(f"plotly.js is missing from the installed plotly package: {path}")
    return path


def _check_plotly(app: Sphinx) -> None:
    _plotly_js_source()  # fail early, not after executing every notebook


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


MATHJAX_BUNDLE = "mathjax/tex-chtml.js"  # where sphinx-mathjax-offline serves MathJax 3 (_static/)
MATHJAX_LOADER = "mlbook-mathjax.js"  # book/_static: adds the bundle once the page is parsed


def _load_mathjax_late(app: Sphinx, config: Any) -> None:
    """The page's MathJax script becomes the loader (sphinx-mathjax-offline sets mathjax_path to
    its bundle in its setup, so this runs at config-inited, after every extension's setup)."""
    if config.mathjax_path == MATHJAX_BUNDLE:
        config.mathjax_path = MATHJAX_LOADER


def _copy_assets(app: Sphinx, exc: Exception | None) -> None:
    if exc is not None or app.builder.format != "html":
        return
    dest = Path(app.outdir) / "_static" / PLOTLY_JS
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_plotly_js_source(), dest)
    mathjax = MATHJAX_BUNDLE if app.config.mathjax_path == MATHJAX_LOADER else app.config.mathjax_path
    if "://" not in mathjax and not (Path(app.outdir) / "_static" / mathjax).is_file():
        logger.warning(
            "MathJax is not served locally: _static/%s is missing (is sphinx-mathjax-offline installed?)",
            mathjax,
            type="mlbook",
            subtype="mathjax",
        )


# ---------------------------------------------------------------------------
# The setup cell, collapsed on the static site
# ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _setup_markers() -> tuple[str, str]:
    """BEGIN/END lines of the generated setup block, from the tool that writes it."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "tools" / "setup_cells.py"
    spec = importlib.util.spec_from_file_location("mlbook_setup_cells", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"the setup-cell tool is missing: {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.BEGIN, module.END


class CollapseSetupBlock(SphinxPostTransform):
    """Put the setup block of a first code cell behind a toggle; keep the rest of the cell."""

    default_priority = 150  # before myst-nb's HideInputCells (199), which renders the toggle
    formats = ("html",)

    def run(self, **kwargs: Any) -> None:
        from myst_nb.sphinx_ import HideCodeCellNode

        begin, end = _setup_markers()
        for cell in list(self.document.findall(nodes.container)):
            if cell.get("nb_element") != "cell_code" or not cell.children:
                continue
            source = cell.children[0]
            blocks = list(source.findall(nodes.literal_block)) if source.get("nb_element") == "cell_code_source" else []
            text = blocks[0].astext() if blocks else ""
            if not text.startswith(begin) or end not in text:
                continue
            cut = text.index(end) + len(end)
            setup, rest = text[:cut], text[cut:].lstrip("\n")
            hidden = source.deepcopy()
            literal = next(iter(hidden.findall(nodes.literal_block)))
            literal.children = [nodes.Text(setup)]
            literal.rawsource = setup
            toggle = HideCodeCellNode(prompt_show="Show the setup cell (it installs mlbook in Colab)",
                                      prompt_hide="Hide the setup cell")
            toggle["classes"].append("above-input")
            toggle += hidden
            if rest:
                blocks[0].children = [nodes.Text(rest)]
                blocks[0].rawsource = rest
                cell.insert(0, toggle)
            else:
                cell.replace(source, toggle)
            break  # only a notebook's first code cell holds the setup block


# ---------------------------------------------------------------------------
# The execution-status page
# ---------------------------------------------------------------------------


class execution_status(nodes.General, nodes.Element):
    """Placeholder, replaced by the table once every notebook has been executed."""


def _table(header: list[str], rows: list[list[nodes.Node | str]], classes: list[str]) -> nodes.table:
    table = nodes.table(classes=["colwidths-auto", *classes])
    group = nodes.tgroup(cols=len(header))
    table += group
    group += [nodes.colspec(colwidth=1) for _ in header]
    head = nodes.thead()
    group += head
    head += nodes.row("", *[nodes.entry("", nodes.paragraph(text=h)) for h in header])
    body = nodes.tbody()
    group += body
    for cells in rows:
        body += nodes.row("", *[
            nodes.entry("", c if isinstance(c, nodes.Node) else nodes.paragraph(text=c)) for c in cells
        ])
    return table


class ExecutionStatusDirective(SphinxDirective):
    """`mlbook-execution-status`: one row per executed notebook, filled in after execution."""

    def run(self) -> list[nodes.Node]:
        from myst_nb.ext.execution_tables import METADATA_KEY
        from myst_nb.sphinx_ import NbMetadataCollector

        # myst-nb re-renders pages carrying this key whenever a notebook is re-executed
        NbMetadataCollector.set_doc_data(self.env, self.env.docname, METADATA_KEY, True)
        return [execution_status()]


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


class ExecutionStatusTransform(SphinxPostTransform):
    default_priority = 8  # before the reference resolvers, so the page links resolve

    def run(self, **kwargs: Any) -> None:
        from myst_nb.sphinx_ import NbMetadataCollector

        data = NbMetadataCollector.get_doc_data(self.env)
        for node in list(self.document.findall(execution_status)):
            rows = []
            for docname in sorted(data):
                ex = data[docname].get("exec_data")
                if not ex:
                    continue
                link = addnodes.pending_xref("", refdoc=self.env.docname, reftarget="/" + docname, reftype="doc",
                                             refdomain="std", refexplicit=False, refwarn=True)
                link += nodes.inline(text=docname)
                when = dt.datetime.fromtimestamp(ex["mtime"], dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC") \
                    if ex.get("mtime") else "-"
                ok = ex.get("succeeded") is True
                verdict = nodes.paragraph(text="passed" if ok else "failed",
                                          classes=["mlbook-pass" if ok else "mlbook-fail"])
                if not ok and ex.get("error"):
                    verdict += nodes.Text(f": {str(ex['error']).strip().splitlines()[-1][:200]}")
                rows.append([nodes.paragraph("", "", link), when, _duration(ex.get("runtime")), verdict])
            if rows:
                node.replace_self(_table(["Page", "Last executed", "Duration", "Result"], rows,
                                         ["mlbook-exec-status"]))
            else:
                node.replace_self(nodes.paragraph(text="No notebook was executed in this build."))


def _git_commit(root: Path) -> str:
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    return head + (" with uncommitted changes" if dirty else "")


def build_environment(root: Path) -> list[tuple[str, str]]:
    """What the notebooks ran with: the build's own Python, as myst-nb's kernels are."""
    import plotly
    import torch

    import mlbook
    from mlbook.experiments.train import pick_device

    try:
        dev = pick_device(None)
        device = f"cuda ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else dev.type
    except ValueError as exc:
        device = f"unavailable ({exc})"
    if device == "cpu":
        n = torch.get_num_threads()
        device = f"cpu ({os.cpu_count()} cores; torch uses {n} thread{'s' if n != 1 else ''})"
    return [
        ("Python", platform.python_version()),
        ("torch", torch.__version__),
        ("mlbook", f"{mlbook.__version__}, commit {_git_commit(root)}"),
        ("plotly", plotly.__version__),
        ("Device", device),
        ("Platform", platform.platform(terse=True)),
        ("Build started", dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
    ]


class EnvironmentDirective(SphinxDirective):
    """`mlbook-environment`: the build's Python, torch, mlbook, device."""

    def run(self) -> list[nodes.Node]:
        # re-read on every build: the values change without the page's source changing
        self.env.note_dependency(__file__)
        rows = [[k, v] for k, v in build_environment(Path(self.env.srcdir))]
        return [_table(["What", "Value"], rows, ["mlbook-environment"])]


def _always_reread_status(app: Sphinx, env: Any, added: set, changed: set, removed: set) -> list[str]:
    return [d for d in env.found_docs if d.endswith("execution_status")]


def setup(app: Sphinx) -> dict:
    os.environ["MLBOOK_STATIC"] = "1"
    app.connect("config-inited", _load_mathjax_late)
    app.connect("builder-inited", _check_plotly)
    app.connect("html-page-context", _check_page)
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    # after sphinx-mathjax-offline's own build-finished handler (priority 500) copied MathJax
    app.connect("build-finished", _copy_assets, priority=900)
    app.add_node(execution_status)
    app.add_directive("mlbook-execution-status", ExecutionStatusDirective)
    app.add_directive("mlbook-environment", EnvironmentDirective)
    app.add_post_transform(ExecutionStatusTransform)
    app.add_post_transform(CollapseSetupBlock)
    app.connect("env-get-outdated", _always_reread_status)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
