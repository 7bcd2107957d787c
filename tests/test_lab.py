"""Local Jupyter: `make lab` opens the notebooks in JupyterLab from .venv, and a figure shown
in a kernel keeps its caption.

JupyterLab, Notebook 7 and VS Code draw plotly's own mimetype, which has no caption, rather
than the HTML `<figure>` that Colab and the site draw; so outside Colab `show()` follows the
figure with its caption. One test runs `show()` in a real kernel (this Python, through
jupyter_client, as in tests/test_show_live.py) and reads what a front end receives.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import pytest

from mlbook.viz import core
from test_show_live import kernel, run  # noqa: F401 - a kernel of this Python, module-scoped

ROOT = Path(__file__).resolve().parents[1]
PLOTLY_MIME = "application/vnd.plotly.v1+json"
CAPTION = "Angles grow as $\\omega_i t$ for t < T"


@pytest.fixture
def static(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(core.STATIC_ENV, "1")


def _show(displayed: list) -> list[tuple[tuple, dict]]:
    core.show(go.Figure(go.Scatter(x=[0, 1], y=[0, 1])), caption=CAPTION, alt="A rising line.")
    return displayed


def test_live_outside_colab_the_caption_follows_the_figure(live, displayed, monkeypatch) -> None:
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    ((figure, caption), kw), = _show(displayed)  # one display call, two outputs
    assert kw.get("raw") and PLOTLY_MIME in figure
    assert 'class="mlbook-caption"' in caption["text/html"]
    assert "Angles grow as \\(\\omega_i t\\) for t &lt; T" in caption["text/html"]
    assert caption["text/plain"] == CAPTION


def test_in_colab_the_caption_is_not_shown_twice(live, displayed, monkeypatch) -> None:
    import types

    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    calls = _show(displayed)
    ((figure,), _), = calls
    assert "<figcaption" in figure["text/html"], "Colab draws the HTML, caption included"


def test_static_site_figure_is_one_output(static, displayed) -> None:
    ((figure,), _), = _show(displayed)
    assert "<figcaption" in figure["text/html"] and PLOTLY_MIME not in figure


def test_in_a_kernel_a_figure_keeps_its_caption(kernel: Any) -> None:
    outputs = run(kernel, f"from mlbook.viz import show\nshow(build(), caption={CAPTION!r}, alt='A line.')")
    kinds = [sorted(o["data"]) for o in outputs]
    assert len(outputs) == 2 and PLOTLY_MIME in outputs[0]["data"], kinds
    assert "Angles grow as" in outputs[1]["data"]["text/html"], "JupyterLab would draw the figure without its caption"


# ---------------------------------------------------------------------------
# `make lab`
# ---------------------------------------------------------------------------


def test_jupyterlab_is_an_optional_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(re.match(r"jupyterlab\b", d) for d in project["optional-dependencies"]["lab"])
    assert not any(d.startswith("jupyterlab") for d in project["dependencies"]), "a reader of the site does not need it"


def test_make_lab_installs_the_extra_and_opens_the_notebooks() -> None:
    dry = subprocess.run(["make", "-n", "-B", "lab"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert re.search(r"tools/install\.py \.venv -e '\.\[lab\]'", dry.stdout), dry.stdout
    assert re.search(r"\.venv/bin/jupyter lab --notebook-dir=notebooks", dry.stdout), dry.stdout
    assert "make lab" in (ROOT / "README.md").read_text(), "the README documents `make lab`"
