"""`show_live` displays its widget exactly once, in a real IPython kernel.

A cell's last expression is displayed by the kernel as the cell's value, so a helper that
displays a widget and also returns it shows it twice. These tests run cells in a real
kernel (this Python, through jupyter_client) and count the widget views the kernel sends,
as a front end such as Colab or JupyterLab receives them. `make test-lib` runs them with the
local ipywidgets 8; `make colab-check` runs this file again in its Colab-like environment
with ipywidgets 7.7.1 and IPython 7.34.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
KERNEL_NAME = "mlbook-show-live-test"

BUILD = """
import plotly.graph_objects as go
import ipywidgets as widgets
from mlbook.viz import live_sliders, show_knob, show_live

def build(scale=1.0, n=4):
    return go.Figure(go.Scatter(x=list(range(n)), y=[scale * i for i in range(n)]))
"""


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A kernel of this very Python (not whatever `python3` kernelspec is installed)."""
    from jupyter_client.manager import KernelManager

    spec_root = tmp_path_factory.mktemp("jupyter")
    spec_dir = spec_root / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "this Python", "language": "python",
    }))
    env = {k: v for k, v in os.environ.items() if k != "MLBOOK_STATIC"}
    env["JUPYTER_PATH"] = str(spec_root) + os.pathsep + env.get("JUPYTER_PATH", "")
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = env["JUPYTER_PATH"]  # the kernelspec lookup happens in this process
    km = KernelManager(kernel_name=KERNEL_NAME)
    try:
        km.start_kernel(env=env)
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=120)
        run(kc, BUILD)
        yield kc
        kc.stop_channels()
    finally:
        km.shutdown_kernel(now=True)
        if old is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = old


def run(kc: Any, code: str) -> list[dict[str, Any]]:
    """Execute `code` as one cell; return its display_data/execute_result messages' contents."""
    outputs: list[dict[str, Any]] = []
    errors: list[str] = []

    def hook(msg: dict[str, Any]) -> None:
        kind = msg["msg_type"]
        if kind in ("display_data", "execute_result"):
            outputs.append({"type": kind, **msg["content"]})
        elif kind == "error":
            errors.append("\n".join(msg["content"]["traceback"]))

    reply = kc.execute_interactive(code, output_hook=hook, timeout=120)
    assert reply["content"]["status"] == "ok" and not errors, f"cell failed:\n{code}\n" + "\n".join(errors)
    return outputs


def widget_views(outputs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(message type, model id) of every output that shows a widget."""
    return [(o["type"], o["data"][WIDGET_MIME]["model_id"]) for o in outputs if WIDGET_MIME in o.get("data", {})]


def ipywidgets_major(kc: Any) -> int:
    out = run(kc, "import ipywidgets; ipywidgets.__version__")
    return int(out[-1]["data"]["text/plain"].strip("'\"").split(".")[0])


def test_kernel_runs_a_supported_ipywidgets(kernel: Any) -> None:
    assert ipywidgets_major(kernel) in (7, 8)


@pytest.mark.parametrize(
    "cell",
    [
        "show_live(lambda: widgets.IntSlider(value=3))",
        "w = widgets.IntSlider(value=3)\nshow_live(w)",
        "show_live(lambda: live_sliders(build, caption='c', alt='a', scale=[1.0, 2.0, 3.0], n=(2, 8, 1)))",
        "show_knob(build, {'scale': [1.0, 2.0], 'n': [4, 6]}, caption='c', alt='a')",
        "show_live(lambda: widgets.IntSlider())\nx = 1",
    ],
    ids=["callable-last-line", "widget-last-line", "live_sliders", "show_knob", "not-last-line"],
)
def test_show_live_displays_the_widget_exactly_once(kernel: Any, cell: str) -> None:
    views = widget_views(run(kernel, cell))
    assert len(views) == 1, (
        f"ipywidgets {ipywidgets_major(kernel)}: the cell showed {len(views)} widget views {views}, expected 1:\n{cell}"
    )
    assert views[0][0] == "display_data", "the widget must come from show_live's display, not the cell's value"


def test_show_live_on_the_static_build_shows_the_note_and_no_widget(kernel: Any) -> None:
    outputs = run(kernel, "import os\nos.environ['MLBOOK_STATIC'] = '1'\n"
                          "try:\n    show_live(lambda: widgets.IntSlider())\n"
                          "finally:\n    del os.environ['MLBOOK_STATIC']")
    assert not widget_views(outputs)
    from mlbook.viz.core import LIVE_NOTE

    assert [o["data"]["text/plain"] for o in outputs] == [LIVE_NOTE]

