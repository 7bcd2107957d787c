"""Display plumbing shared by every figure: one call works live and on the static site.

A figure function in `mlbook.viz` returns a `plotly.graph_objects.Figure`; the notebook
hands it to `show`. What `show` emits depends on where the notebook runs:

* live kernel (Jupyter, Colab, VS Code): a MIME bundle with plotly's own mimetype, which
  JupyterLab and VS Code render, and a `text/html` form, which Colab renders; the HTML
  form loads plotly.js from its CDN only if the page has no `Plotly` yet.
* static build (`MLBOOK_STATIC=1`, set by the site's Sphinx extension and by `make book`):
  only the `text/html` (and `text/plain`) forms, and the HTML never refers to a network
  address; plotly.js is served from the site's own `_static/` folder. (myst-nb renders
  `text/html` but warns on plotly's mimetype, so a bare `fig.show()` fails the strict
  build instead of silently vanishing from the page.)

Knobs come in two forms from one function `build(**knobs) -> Figure`:

* `grid_slider(build, name, values)`: a plotly figure whose slider steps through frames
  precomputed on a grid; works on the static site with no kernel.
* `live_sliders(build, caption=..., alt=..., **knobs)`: ipywidgets sliders that call
  `build` again on every change; only useful with a live kernel, so wrap it in
  `show_live(lambda: live_sliders(...))`, which on the static build prints a one-line note
  instead of a dead widget.

`show_knob` does both in one call, over lists of values (the experiment pages). A section
figure whose knobs are ranges is declared once with `live_figure`: the knobs (`int_knob`,
`float_knob`, `log_knob`, `choice_knob`, `toggle_knob`: name, default, range, step, label) and the
build function; it gives the public `live_*` function a notebook wraps in `show_live`.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import html
import importlib.util
import inspect
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import plotly
import plotly.graph_objects as go
import plotly.io as pio

__all__ = [
    "SEQUENTIAL",
    "SEQUENTIAL_ALT",
    "DIVERGING",
    "LINE_COLORS",
    "STATIC_ENV",
    "TYPED_ARRAY_MIN",
    "label_on_log_axis",
    "LIVE_NOTE",
    "diverging",
    "in_colab",
    "is_static",
    "compact",
    "figure_html",
    "show",
    "show_live",
    "live_sliders",
    "one_torch_thread",
    "grid_slider",
    "show_knob",
    "Knob",
    "int_knob",
    "float_knob",
    "log_knob",
    "choice_knob",
    "toggle_knob",
    "live_figure",
    "DIGITS",
    "round_array",
    "format_base",
    "knob_values",
    "knob_figure",
    "check_slider_value",
    "note_adjustment",
    "log_slider",
    "int_slider",
    "float_slider",
    "light_figure",
    "legend_below",
    "rgba",
]

# ---------------------------------------------------------------------------
# Colour-blind-safe colour maps
# ---------------------------------------------------------------------------

SEQUENTIAL = "Viridis"  # perceptually uniform, readable with every common colour-vision deficiency
SEQUENTIAL_ALT = "Cividis"  # designed for deuteranopia/protanopia; use beside Viridis for a second quantity
DIVERGING = "RdBu_r"  # ColorBrewer red-blue (colour-blind safe); centre it on zero with `diverging()`
# Okabe & Ito's eight-colour palette, for lines and markers.
LINE_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")

# Every figure of the book uses plotly's "plotly_white" look. It is set once, as plotly's default
# template, when `mlbook.viz` is imported: a `template="plotly_white"` argument per figure makes
# plotly re-validate the whole template on every call (about 35 ms, most of a live redraw).
pio.templates.default = "plotly_white"


def diverging(z: Any | None = None) -> dict[str, Any]:
    """Heatmap keyword arguments for a diverging map centred on zero.

    `go.Heatmap(z=z, **diverging(z))` puts white at 0 and makes the range symmetric,
    so equal colour distances mean equal magnitudes on both sides.
    """
    kw: dict[str, Any] = {"colorscale": DIVERGING, "zmid": 0.0}
    if z is not None:
        m = float(np.nanmax(np.abs(np.asarray(z, dtype=float))))
        if m > 0:
            kw.update(zmin=-m, zmax=m)
    return kw


# ---------------------------------------------------------------------------
# Where are we running?
# ---------------------------------------------------------------------------

STATIC_ENV = "MLBOOK_STATIC"
LIVE_NOTE = "Run this notebook (Colab button above) to get live sliders."
_PLOTLY_CDN = f"https://cdn.plot.ly/plotly-{plotly.offline.get_plotlyjs_version()}.min.js"


def in_colab() -> bool:
    """True inside Google Colab (the `google.colab` package is importable)."""
    if "google.colab" in sys.modules:
        return True
    try:
        return importlib.util.find_spec("google.colab") is not None
    except (ImportError, ValueError):  # `google` absent, or a namespace package without a spec
        return False


def is_static() -> bool:
    """True while the notebook is executed to build the static site (`MLBOOK_STATIC=1`)."""
    from mlbook.transformer.validate import env_flag

    return env_flag(STATIC_ENV)  # 1/true/yes/on or 0/false/no/off; anything else names the variable


# ---------------------------------------------------------------------------
# Small stored outputs
# ---------------------------------------------------------------------------


def _round_sig(a: np.ndarray, digits: int) -> np.ndarray:
    """Round a float array to `digits` significant digits (0, nan and inf pass through)."""
    a = np.asarray(a, dtype=np.float64)
    finite = np.isfinite(a) & (a != 0)
    out = a.copy()
    mag = np.floor(np.log10(np.abs(a[finite])))  # decimal exponent of each value
    scale = 10.0 ** (digits - 1 - mag)
    out[finite] = np.round(a[finite] * scale) / scale
    return out


# In a live kernel a float array of at least this many numbers travels as a typed array: plotly.js
# (2.28 and later; the book pins 2.35) decodes {"dtype": "f4", "bdata": <base64>, "shape": "rows,cols"}
# itself. Writing 256,000 floats as decimal text twice (the HTML and plotly's mimetype) was most
# of a 150 ms slider redraw; base64 float32 takes a few milliseconds, holds 7 significant digits
# and NaN (a heatmap's blank cell), and is about as large as 4-digit text (the largest live
# heatmap's redraw: 1.28 MB against 1.19 MB). The static site keeps the decimal text, rounded:
# its frames and the phone layout read the numbers.
TYPED_ARRAY_MIN = 4096


def _travels_typed(a: np.ndarray) -> bool:
    """A float array large enough to go to a live kernel as a typed array (1-D or 2-D)."""
    return a.dtype.kind == "f" and a.size >= TYPED_ARRAY_MIN and a.ndim <= 2


def _typed_array(a: np.ndarray) -> dict[str, str]:
    """A float array as plotly.js's base64 typed-array spec (float32, numpy's row-major shape)."""
    spec = {"dtype": "f4", "bdata": base64.b64encode(np.ascontiguousarray(a, dtype="<f4").tobytes()).decode("ascii")}
    if a.ndim > 1:
        spec["shape"] = ",".join(str(n) for n in a.shape)
    return spec


def _compact_obj(obj: Any, digits: int, typed: bool = False) -> Any:
    """Recursively round floats (and float arrays) in a plotly JSON-like structure; with `typed`,
    float arrays of TYPED_ARRAY_MIN numbers or more (1-D or 2-D) become typed-array specs instead."""
    if isinstance(obj, Mapping):
        return {k: _compact_obj(v, digits, typed) for k, v in obj.items()}
    if isinstance(obj, np.ndarray):
        if typed and _travels_typed(obj):
            return _typed_array(obj)
        if obj.dtype.kind == "f":
            out = _round_sig(obj, digits)
            finite = np.isfinite(out)
            if finite.all():
                return out
            # gaps (NaN, inf) as None now: the JSON is the same (null), but plotly's encoder, finding
            # "NaN" in its output, would decode and re-encode the whole figure (most of a redraw)
            return np.where(finite, out, None).tolist()
        if obj.dtype.kind in "iub":
            return obj
        return [_compact_obj(v, digits, typed) for v in obj.tolist()]
    if isinstance(obj, (list, tuple)):
        if obj and all(isinstance(v, float) for v in obj):
            return _round_sig(np.asarray(obj), digits)
        if obj and all(v is None or isinstance(v, float) for v in obj):  # a row with gaps: round in one go
            rounded = _round_sig(np.array([np.nan if v is None else v for v in obj]), digits).tolist()
            return [None if v is None else x for v, x in zip(obj, rounded)]
        return [_compact_obj(v, digits, typed) for v in obj]
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        if x == 0 or not math.isfinite(x):
            return x
        return float(_round_sig(np.asarray([x]), digits)[0])
    if hasattr(obj, "detach") and hasattr(obj, "numpy"):  # a torch tensor slipped into a trace
        return _compact_obj(obj.detach().cpu().numpy(), digits, typed)
    return obj


def _typed_arrays(obj: Any) -> Any:
    """`obj` with its large float arrays as typed-array specs and nothing else changed (digits=None)."""
    if isinstance(obj, Mapping):
        return {k: _typed_arrays(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_typed_arrays(v) for v in obj]
    if isinstance(obj, np.ndarray) and _travels_typed(obj):
        return _typed_array(obj)
    return obj


def _figure_dict(fig: go.Figure | Mapping[str, Any], digits: int | None, typed: bool = False) -> dict[str, Any]:
    d = fig.to_plotly_json() if isinstance(fig, go.Figure) else dict(fig)
    d = {k: d[k] for k in ("data", "layout", "frames") if k in d and d[k] is not None}
    if digits is not None:
        if isinstance(digits, bool) or not isinstance(digits, int) or digits < 1:
            raise ValueError(f"digits must be an int >= 1 (significant digits kept) or None, got {digits!r}")
        d = _compact_obj(d, digits, typed)
    elif typed:
        d = _typed_arrays(d)
    return d


def compact(fig: go.Figure, digits: int = 4) -> go.Figure:
    """A copy of `fig` with every float rounded to `digits` significant digits.

    Significant (not decimal) digits, so tiny values such as RoPE's lowest frequencies
    (about 1e-4) survive. Four digits is far below what a reader can see on screen and
    roughly halves the stored JSON.
    """
    if not isinstance(fig, go.Figure):
        raise TypeError(f"compact() expects a plotly.graph_objects.Figure, got {type(fig).__name__}")
    return go.Figure(_figure_dict(fig, digits), skip_invalid=False)


# ---------------------------------------------------------------------------
# show(): one figure, live or static
# ---------------------------------------------------------------------------

_MATH_DOLLARS = re.compile(r"(?<![\\$])\$(?!\$)(.+?)(?<![\\$])\$")
_ID_OK = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_CONFIG = {"responsive": True, "displaylogo": False, "displayModeBar": "hover"}


def _caption_html(caption: str) -> str:
    """Escape the caption and turn `$x$` into MathJax's inline delimiters `\\(x\\)`."""
    text = html.escape(caption, quote=False)
    return _MATH_DOLLARS.sub(lambda m: r"\(" + m.group(1) + r"\)", text)


def _json_for_script(obj: Any) -> str:
    """JSON safe to inline in a <script> element (no `</script>` or `<!--` inside)."""
    s = pio.to_json(obj, validate=False, pretty=False, engine="json")
    return s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


class _NotPlain(Exception):
    pass


def _plain(obj: Any) -> Any:
    """`obj` as the plain JSON values `json.loads(plotly's JSON of obj)` gives, without the text
    round trip; raises _NotPlain on anything it does not know (then the caller decodes the text)."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind in "iub" or (obj.dtype.kind == "f" and np.isfinite(obj).all()):
            return obj.tolist()
        if obj.dtype.kind == "f":
            return np.where(np.isfinite(obj), obj, None).tolist()
        raise _NotPlain(obj.dtype)
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    raise _NotPlain(type(obj))


def _plain_json(fig_json: Mapping[str, Any], data: str) -> dict[str, Any]:
    """The figure as plain JSON values for plotly's mimetype: `json.loads(data)`, built from `fig_json`
    directly where it can be (decoding half a megabyte of heatmap text is a fifth of a live redraw)."""
    try:
        return _plain(fig_json)
    except _NotPlain:
        return json.loads(data)


def figure_html(fig_json: Mapping[str, Any], *, caption: str, alt: str, div_id: str, static: bool,
                data: str | None = None) -> str:
    """The `text/html` form of a figure: <figure> + caption + a script that draws it.

    The script calls `Plotly.newPlot` once the DOM is ready, in a task of its own (not inside the
    DOMContentLoaded handler, so a page with many figures is readable before they are all drawn). On the static site the
    page's mlbook.js loads `_static/plotly/plotly.min.js` once the page is parsed, and the figure
    draws on its load event (or at once if it has run); live (Colab) it falls back to the
    CDN, through require.js where a classic notebook front-end has it. `data` is
    `_json_for_script(fig_json)` when the caller already has it (encoding is most of a redraw).
    """
    if data is None:
        data = _json_for_script(fig_json)
    cfg = json.dumps(_CONFIG)
    if static:
        # the site's mlbook.js inserts the plotly.js script after the page is parsed: draw on its load
        loader = (
            "else{var s=document.querySelector('script[src*=\"plotly.min.js\"]');"
            "if(s){s.addEventListener('load',function(){draw(window.Plotly);});}"
            "else{console.error('mlbook: plotly.js is not loaded on this page; "
            f"figure {div_id} cannot be drawn');}}}}}}"
        )
    else:
        loader = (
            "else if(typeof window.requirejs==='function'){"
            f"window.requirejs.config({{paths:{{plotly:'{_PLOTLY_CDN[:-3]}'}}}});"
            "window.requirejs(['plotly'],draw);}"
            "else{var s=document.createElement('script');"
            f"s.src='{_PLOTLY_CDN}';s.onload=function(){{draw(window.Plotly);}};"
            "document.head.appendChild(s);}}"
        )
    script = (
        "(function(){"
        f"var fig={data};"
        f"function draw(P){{var el=document.getElementById('{div_id}');"
        f"if(!el||el.dataset.drawn)return;el.dataset.drawn='1';"
        "P.newPlot(el,{data:fig.data,layout:fig.layout||{},frames:fig.frames||[],"
        f"config:{cfg}}});}}"
        "function go(){if(window.Plotly){draw(window.Plotly);}"
        f"{loader}"
        # each figure draws in a task of its own after DOMContentLoaded, so the page's text is ready
        # (and DOMContentLoaded ends) before the figures are drawn one by one
        "if(document.readyState==='loading'){document.addEventListener('DOMContentLoaded',"
        "function(){setTimeout(go,0);});}"
        "else{go();}})();"
    )
    return (
        f'<figure class="mlbook-figure" id="{div_id}-figure">'
        f'<div id="{div_id}" class="mlbook-plotly" role="img" aria-label="{html.escape(alt)}"></div>'
        f'<figcaption class="mlbook-caption mathjax_process">{_caption_html(caption)}</figcaption>'
        f"</figure><script>{script}</script>"
    )


def show(
    fig: go.Figure,
    *,
    caption: str,
    alt: str,
    id: str | None = None,  # noqa: A002 - the figure's HTML id, as in the HTML attribute
    digits: int | None = 4,
) -> None:
    """Display `fig` with a caption and alt text, live or on the static site.

    Args:
        fig: the figure. Floats are rounded to `digits` significant digits first
            (`None` keeps full precision), which keeps each page well under 2 MB. In a
            live kernel a float array of TYPED_ARRAY_MIN numbers or more is sent as a
            float32 typed array instead (see `TYPED_ARRAY_MIN`).
        caption: what the reader should notice; `$...$` becomes inline maths.
        alt: a text description for screen readers (`aria-label` on the plot).
        id: HTML id of the figure (letters, digits, `-`, `_`); derived from the
            figure's content when omitted.
    """
    if not isinstance(fig, go.Figure):
        raise TypeError(f"show() expects a plotly.graph_objects.Figure, got {type(fig).__name__}")
    if not isinstance(caption, str) or not caption.strip():
        raise ValueError("show() needs a non-empty caption saying what the reader should notice")
    if not isinstance(alt, str) or not alt.strip():
        raise ValueError("show() needs non-empty alt text describing the figure for screen readers")
    if id is not None and not _ID_OK.match(id):
        raise ValueError(f"id={id!r} must start with a letter and use only letters, digits, '-' and '_'")

    static = is_static()
    fig_json = _figure_dict(fig, digits, typed=not static)
    data = _json_for_script(fig_json)  # encoded once: for the id, the HTML and plotly's own mimetype
    if id is None:
        digest = hashlib.sha1(data.encode() + caption.encode()).hexdigest()[:10]
        id = f"mlbook-fig-{digest}"  # noqa: A001
    bundle: dict[str, Any] = {
        "text/html": figure_html(fig_json, caption=caption, alt=alt, div_id=id, static=static, data=data),
        "text/plain": f"Figure: {caption}",
    }
    if not static:
        # JupyterLab and VS Code render this one (they would not run the HTML's script).
        # Left out of the static build: myst-nb warns on every mimetype it cannot render,
        # which under `-W` must stay reserved for outputs that really get dropped.
        # Plain JSON through plotly's encoder: numpy arrays become lists and NaN (a gap in a
        # line) becomes null, which the kernel's strict JSON would otherwise refuse.
        bundle["application/vnd.plotly.v1+json"] = {**_plain_json(fig_json, data), "config": dict(_CONFIG)}
    from IPython.display import display

    outputs = [bundle]
    if not static and "google.colab" not in sys.modules:
        # JupyterLab, Notebook 7 and VS Code draw plotly's mimetype, which has no caption;
        # Colab draws the HTML, caption included. So outside Colab the caption follows.
        outputs.append({"text/html": f'<p class="mlbook-caption">{_caption_html(caption)}</p>',
                        "text/plain": caption})
    display(*outputs, raw=True)


# ---------------------------------------------------------------------------
# Knobs: static plotly slider and live ipywidgets sliders from one build function
# ---------------------------------------------------------------------------


def _name(value: Any) -> str:
    """A frame name: machine-readable, float(name) or int(name) gives the value back."""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _fmt(value: Any) -> str:
    """A slider label: 10000.0 -> "10,000", 1e6 -> "1,000,000" (never "1e+06"), 0.25 -> "0.25"."""
    if isinstance(value, float):
        if value.is_integer() and 1000 <= abs(value) < 1e15:
            return f"{value:,.0f}"
        return f"{value:g}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 1000:
        return f"{value:,}"
    return str(value)


def grid_slider(
    build: Callable[..., go.Figure],
    name: str,
    values: Sequence[Any],
    *,
    active: int = 0,
    label: str | None = None,
    fixed: Mapping[str, Any] | None = None,
) -> go.Figure:
    """A figure with a plotly slider over `build(**{name: v})` for each v in `values`.

    Works on the static site: every grid point is precomputed as a frame and the slider
    swaps frames (`Plotly.animate`, no transition). `build` must return figures with the
    same traces in the same order; fix the axis ranges in `build` so they do not jump.

    Args:
        build: the figure function; called once per value.
        name: the keyword argument the slider sets.
        values: the grid (keep it short: each value stores a full copy of the data).
        active: index of the value shown first.
        label: slider prefix; defaults to `name`.
        fixed: other keyword arguments passed to every call.
    """
    values = list(values)
    if not values:
        raise ValueError(f"grid_slider({name!r}): values is empty; give at least one value for the slider")
    if not 0 <= active < len(values):
        raise ValueError(f"active={active} is out of range for {len(values)} values")
    fixed = dict(fixed or {})
    figs = [build(**{**fixed, name: v}) for v in values]
    for v, f in zip(values, figs):
        if not isinstance(f, go.Figure):
            raise TypeError(f"build({name}={v!r}) returned {type(f).__name__}, expected a plotly Figure")
    n_traces = len(figs[0].data)
    for v, f in zip(values, figs):
        if len(f.data) != n_traces:
            raise ValueError(
                f"build({name}={v!r}) returned {len(f.data)} traces but build({name}={values[0]!r}) "
                f"returned {n_traces}; a slider needs the same traces for every value"
            )
    out = go.Figure(data=figs[active].data, layout=figs[active].layout)
    out.frames = [
        go.Frame(data=f.data, name=_name(v), layout={"title": f.layout.title} if f.layout.title.text else None)
        for v, f in zip(values, figs)
    ]
    steps = [
        {
            "method": "animate",
            "label": _fmt(v),
            "args": [[_name(v)], {"mode": "immediate", "frame": {"duration": 0, "redraw": True}, "transition": {"duration": 0}}],
        }
        for v in values
    ]
    out.update_layout(
        sliders=[
            {
                "active": active,
                "currentvalue": {"prefix": f"{label or name} = "},
                "pad": {"t": 40},
                "steps": steps,
            }
        ]
    )
    return out


def _slider_widget(spec: Any, description: str) -> Any:
    """An ipywidgets control from a widget, a `Knob`, or an abbreviation: (min, max[, step]) or a list."""
    import ipywidgets as widgets

    if isinstance(spec, widgets.Widget):
        return spec
    if isinstance(spec, Knob):
        return spec.widget()
    if isinstance(spec, list):  # a grid of values: a slider that snaps to them
        if not spec:
            raise ValueError(f"slider {description!r}: the list of values is empty")
        return widgets.SelectionSlider(
            options=[(_fmt(v), v) for v in spec], value=spec[0], description=description, continuous_update=False
        )
    w = widgets.interactive.widget_from_abbrev(spec, None)
    if w is None:
        raise ValueError(
            f"slider {description!r}: cannot make a control from {spec!r}; give (min, max), "
            "(min, max, step), a list of values, a Knob, or an ipywidgets widget"
        )
    w.description = description
    if hasattr(w, "continuous_update"):
        w.continuous_update = False  # redraw on release: each redraw recomputes the figure
    return w


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Within the block torch (if a figure module imported it) runs its ops on one thread.

    A live figure's tensors are small (a few hundred thousand elements at most), so intra-op threads
    gain nothing; on a busy CPU they cost a lot: an op waits for a worker thread the scheduler has
    parked (measured on this book's 2-core machine under load: 50-300 ms per redraw on two threads,
    4-20 ms on one). The previous thread count is restored afterwards.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def live_sliders(build: Callable[..., go.Figure], *, caption: str, alt: str, **sliders: Any) -> Any:
    """ipywidgets sliders that redraw `build(**values)` through `show` on every change.

    Each keyword is a knob: a `Knob`, an ipywidgets widget, `(min, max)`, `(min, max, step)`
    or a list of values (a selection slider). Returns the widget (a VBox of controls and output)
    without displaying it; pass it to `show_live`.
    """
    import ipywidgets as widgets
    from IPython.display import clear_output

    if not sliders:
        raise ValueError("live_sliders() needs at least one knob, e.g. base=(100, 100000, 100)")
    controls = {k: _slider_widget(v, k) for k, v in sliders.items()}
    out = widgets.Output()

    def redraw(**kw: Any) -> None:
        with out:
            clear_output(wait=True)
            with one_torch_thread():
                fig = build(**kw)
            show(fig, caption=caption, alt=alt)

    widgets.interactive_output(redraw, controls)
    return widgets.VBox([widgets.HBox(list(controls.values())), out])


def show_live(widget_or_callable: Any) -> None:
    """Display ipywidgets controls once, only where a live kernel can drive them.

    Pass a widget, or better a zero-argument callable returning one (so nothing is
    computed on the static build). With `MLBOOK_STATIC=1` this displays a one-line note
    pointing to Colab instead, so the static site has no dead widgets and no widget
    JavaScript from a CDN. Returns None, so `show_live(lambda: ...)` as a cell's last
    line shows the widget exactly once (a returned widget would be shown again as the
    cell's value, under ipywidgets 7 and 8 alike).
    """
    from IPython.display import display

    if is_static():
        display(
            {
                "text/html": f'<p class="mlbook-live-note">{html.escape(LIVE_NOTE)}</p>',
                "text/plain": LIVE_NOTE,
            },
            raw=True,
        )
        return None
    import ipywidgets as widgets

    widget = widget_or_callable
    if callable(widget_or_callable) and not isinstance(widget_or_callable, widgets.Widget):
        widget = widget_or_callable()
    display(widget)
    return None


def show_knob(
    build: Callable[..., go.Figure],
    knobs: Mapping[str, Sequence[Any]],
    *,
    caption: str,
    alt: str,
    static_knob: str | None = None,
    defaults: Mapping[str, Any] | None = None,
    id: str | None = None,  # noqa: A002
) -> None:
    """Both forms of a figure with knobs, from one function `build(**knobs) -> Figure`.

    Shows a plotly figure with a slider over `knobs[static_knob]` (the other knobs held
    at `defaults`, else their first value), which works on the static site; then, with
    a live kernel, ipywidgets sliders over every knob (each a list of values).
    """
    if not knobs:
        raise ValueError("show_knob() needs at least one knob, e.g. {'base': [100, 1000, 10000]}")
    static_knob = static_knob or next(iter(knobs))
    if static_knob not in knobs:
        raise ValueError(f"static_knob={static_knob!r} is not one of the knobs {sorted(knobs)}")
    defaults = dict(defaults or {})
    fixed = {k: defaults.get(k, list(v)[0]) for k, v in knobs.items() if k != static_knob}
    values = list(knobs[static_knob])
    for name, value in defaults.items():
        if name not in knobs:
            raise ValueError(f"defaults names {name!r}, which is not one of the knobs {sorted(knobs)}")
        if value not in list(knobs[name]):
            raise ValueError(f"defaults[{name!r}]={value!r} is not one of that knob's values {list(knobs[name])}")
    active = values.index(defaults[static_knob]) if static_knob in defaults else 0
    show(grid_slider(build, static_knob, values, active=active, fixed=fixed), caption=caption, alt=alt, id=id)
    live = {k: list(v) for k, v in knobs.items()}

    def make() -> Any:
        w = live_sliders(build, caption=caption, alt=alt, **live)
        for k, v in {**fixed, static_knob: values[active]}.items():
            w.children[0].children[list(live).index(k)].value = v
        return w

    show_live(make)


# ---------------------------------------------------------------------------
# Live figures declared as data: knobs (name, default, range, step, label) and a build function
# ---------------------------------------------------------------------------

_KINDS = ("int", "float", "log", "choice", "toggle")
_STYLE = {"description_width": "initial"}


@dataclass(frozen=True)
class Knob:
    """One slider of a live figure: the build function's keyword `name`, where the slider starts
    (`default`), what it allows and the label a reader sees. Make one with `int_knob`,
    `float_knob`, `log_knob`, `choice_knob` or `toggle_knob`.

    kind "int" and "float" run from lo to hi in steps of step; "log" from 10**lo to 10**hi in
    steps of 10**step; "choice" steps through `values`; "toggle" offers `values`, a sequence of
    (label, value) pairs. `default`, `lo`, `hi`, `values` and `label` may each be a function of
    the live figure's other arguments, called with those it names: `hi=lambda d: d // 2 - 1`.
    """

    name: str
    kind: str
    default: Any
    lo: Any = None
    hi: Any = None
    step: Any = None
    values: Any = None
    label: Any = None
    fmt: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"Knob {self.name!r}: kind must be one of {list(_KINDS)}, got {self.kind!r}")

    def resolve(self, args: Mapping[str, Any]) -> Knob:
        """This knob with each field that is a function of the figure's arguments evaluated on `args`."""
        fields = {}
        for field in ("default", "lo", "hi", "values", "label"):
            spec = getattr(self, field)
            if callable(spec):
                names = list(inspect.signature(spec).parameters)
                missing = [n for n in names if n not in args]
                if missing:
                    raise TypeError(f"knob {self.name!r}: its {field} needs the arguments {missing}, which the "
                                    f"live figure does not have (it has {sorted(args)})")
                fields[field] = spec(**{n: args[n] for n in names})
        return replace(self, **fields) if fields else self

    def allowed(self) -> list[Any]:
        """The values of a choice or toggle knob."""
        if self.kind == "toggle":
            return [v for _, v in self.values]
        return list(self.values)

    def check(self, value: Any, name: str | None = None) -> None:
        """Refuse a starting value the slider does not allow (ipywidgets would move it silently to the
        nearest end): TypeError or ValueError naming the knob, the value and the allowed range."""
        name = name or self.name
        if self.kind in ("choice", "toggle"):
            allowed = self.allowed()
            if value not in allowed:
                raise ValueError(f"{name}={value!r} is not one of the slider's values {allowed}; pick one of them")
            return
        lo, hi = (10.0 ** self.lo, 10.0 ** self.hi) if self.kind == "log" else (self.lo, self.hi)
        check_slider_value(name, value, lo, hi)
        if self.kind == "int" and not float(value).is_integer():
            raise TypeError(f"{name} must be a whole number (an integer slider), got {value!r}")

    def widget(self, value: Any = None) -> Any:
        """The ipywidgets control, starting at `value` (the default when None), redrawn on release."""
        import ipywidgets as widgets

        value = self.default if value is None else value
        self.check(value, self.label or self.name)
        label = self.label or self.name
        if self.kind == "int":
            return widgets.IntSlider(value=int(value), min=self.lo, max=self.hi, step=self.step or 1,
                                     description=label, continuous_update=False, style=_STYLE)
        if self.kind == "float":
            return widgets.FloatSlider(value=value, min=self.lo, max=self.hi, step=self.step, description=label,
                                       continuous_update=False, style=_STYLE)
        if self.kind == "log":
            return widgets.FloatLogSlider(value=value, base=10, min=self.lo, max=self.hi, step=self.step or 0.05,
                                          description=label, readout_format=self.fmt or ",.0f",
                                          continuous_update=False, style=_STYLE)
        if self.kind == "choice":
            return widgets.SelectionSlider(options=[(_fmt(v), v) for v in self.values], value=value,
                                           description=label, continuous_update=False, style=_STYLE)
        return widgets.ToggleButtons(options=list(self.values), value=value, description=label, style=_STYLE)

    def describe(self) -> str:
        """One line for a docstring: label, range and start."""
        if callable(self.lo) or callable(self.hi) or callable(self.values):
            where = "range set by the other arguments"
        elif self.kind in ("choice", "toggle"):
            where = "one of " + ", ".join(_fmt(v) for v in self.allowed())
        elif self.kind == "log":
            where = f"{_fmt(10.0 ** self.lo)} .. {_fmt(10.0 ** self.hi)}, log scale"
        else:
            where = f"{self.lo:g} .. {self.hi:g} in steps of {self.step or 1:g}"
        start = "set by the other arguments" if callable(self.default) else f"{self.default!r}"
        label = "" if callable(self.label) or not self.label or self.label == self.name else f" ({self.label})"
        return f"{self.name}{label}: {where}; starts at {start}"


def int_knob(name: str, default: Any, lo: Any, hi: Any, step: int = 1, label: Any = None) -> Knob:
    """An integer slider over lo .. hi in steps of `step`."""
    return Knob(name, "int", default, lo, hi, step, label=label)


def float_knob(name: str, default: Any, lo: float, hi: float, step: float, label: Any = None) -> Knob:
    """A float slider over lo .. hi in steps of `step`."""
    return Knob(name, "float", default, lo, hi, step, label=label)


def log_knob(name: str, default: Any, lo: float = 1.0, hi: float = 7.0, label: Any = None,
             fmt: str = ",.0f") -> Knob:
    """A log slider over 10**lo .. 10**hi in steps of 10**0.05 (a base, a ridge)."""
    return Knob(name, "log", default, lo, hi, 0.05, label=label, fmt=fmt)


def choice_knob(name: str, default: Any, values: Any, label: Any = None) -> Knob:
    """A slider that steps through `values` (a sequence, or a function of the figure's arguments)."""
    return Knob(name, "choice", default, values=values, label=label)


def toggle_knob(name: str, default: Any, options: Sequence[tuple[str, Any]], label: Any = None) -> Knob:
    """Buttons for a few named settings: options are (label, value) pairs."""
    return Knob(name, "toggle", default, values=tuple(options), label=label)


def live_figure(*knobs: Knob, caption: str, alt: str) -> Callable[[Callable[..., go.Figure]], Callable[..., Any]]:
    """Declare a live figure: its knobs and, decorated, the function that builds one figure.

        @live_figure(int_knob("T", 100, 10, 400, 10, "T (positions)"), log_knob("base", 10000.0),
                     caption="...", alt="...")
        def live_heatmap(T: int, base: float, *, d: int = 64) -> go.Figure:
            return _heatmap(T, d, base)

    makes `live_heatmap(*, T=100, base=10000.0, d=64, caption=..., alt=...)`. Each knob is a
    keyword argument giving the slider's starting value (its default when omitted); a starting
    value the slider does not allow is refused with an error naming it, its value and the range,
    never moved to the nearest end. The build function's other parameters are passed through
    unchanged on every redraw (those without a default come first and are required). The call
    returns the ipywidgets form (`live_sliders`); wrap it in `show_live`. `.build` is the
    undecorated build function and `.knobs` the knobs, for tests and benchmarks.
    """
    if not knobs or not all(isinstance(k, Knob) for k in knobs):
        raise TypeError("live_figure() needs one or more Knob (int_knob, float_knob, log_knob, choice_knob, toggle_knob)")
    names = [k.name for k in knobs]
    if len(set(names)) != len(names):
        raise ValueError(f"live_figure(): knob names repeat: {names}")
    if not isinstance(caption, str) or not caption.strip() or not isinstance(alt, str) or not alt.strip():
        raise ValueError("live_figure() needs a non-empty caption and alt text")

    def declare(build: Callable[..., go.Figure]) -> Callable[..., Any]:
        params = inspect.signature(build).parameters
        missing = [n for n in names if n not in params]
        if missing:
            raise TypeError(f"{build.__name__}: the knobs {missing} are not parameters of the build function")
        P = inspect.Parameter
        fixed = [p for p in params.values() if p.name not in names]
        required = [p.replace(kind=P.POSITIONAL_OR_KEYWORD) for p in fixed if p.default is P.empty]
        optional = [p.replace(kind=P.KEYWORD_ONLY) for p in fixed if p.default is not P.empty]
        sliders = [P(k.name, P.KEYWORD_ONLY, default=None if callable(k.default) else k.default,
                     annotation=params[k.name].annotation) for k in knobs]
        text = [P("caption", P.KEYWORD_ONLY, default=caption, annotation="str"),
                P("alt", P.KEYWORD_ONLY, default=alt, annotation="str")]
        signature = inspect.Signature(required + sliders + optional + text, return_annotation="Any")

        def make(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            given = dict(bound.arguments)
            cap, alt_text = given.pop("caption"), given.pop("alt")
            passed = {n: v for n, v in given.items() if n not in names}
            context = {**passed, **{n: given[n] for n in names if given[n] is not None}}
            controls = {}
            for knob in knobs:
                k = knob.resolve(context)
                value = k.default if given[k.name] is None else given[k.name]
                k.check(value, f"{build.__name__}: {k.name}")
                controls[k.name] = k.widget(value)
            return live_sliders(functools.partial(build, **passed), caption=cap, alt=alt_text, **controls)

        make.__name__, make.__qualname__, make.__module__ = build.__name__, build.__qualname__, build.__module__
        make.__doc__ = (inspect.cleandoc(build.__doc__ or "") + "\n\nSliders (wrap the result in `show_live`):\n"
                        + "\n".join(f"    {k.describe()}" for k in knobs))
        make.__signature__ = signature  # type: ignore[attr-defined]
        make.build, make.knobs = build, knobs  # type: ignore[attr-defined]
        return make

    return declare


# ---------------------------------------------------------------------------
# Helpers the section modules share: rounding, labels, knob grids, sliders, layouts
# ---------------------------------------------------------------------------

DIGITS = 3  # decimals kept in static heatmaps and curves
_TEMPLATE: dict[str, Any] | None = None  # plotly_white as plain JSON, built once by `light_figure`


def round_array(a: np.ndarray | Any, digits: int = DIGITS) -> np.ndarray:
    """`a` (array or tensor) as float64 numpy rounded to `digits` decimals (float32 values would
    serialise with spurious digits)."""
    if hasattr(a, "detach"):  # a torch tensor, without importing torch here
        a = a.detach().double().numpy()
    return np.round(np.asarray(a, dtype=np.float64), digits)


def format_base(base: float) -> str:
    """A RoPE or sinusoidal base for a title: 10000.0 -> "10,000", 0.5 -> "0.5"."""
    return f"{base:,.0f}" if float(base).is_integer() else f"{base:,g}"


def knob_values(value: Any, grid: Sequence[Any] | None) -> list[Any] | None:
    """The grid of a static slider with `value` added (sorted in) if missing; None stays None."""
    if grid is None:
        return None
    values = list(grid)
    if value not in values:
        values = sorted(values + [value])
    return values


def knob_figure(
    build: Callable[..., go.Figure], name: str, value: Any, grid: Sequence[Any] | None, label: str,
    fixed: dict[str, Any],
) -> go.Figure:
    """build(**fixed, name=value), or a `grid_slider` over `grid` (value added if missing) starting at value."""
    values = knob_values(value, grid)
    if values is None:
        return build(**fixed, **{name: value})
    return grid_slider(build, name, values, active=values.index(value), label=label, fixed=fixed)


def check_slider_value(description: str, value: object, lo: float, hi: float) -> None:
    """A slider's starting value must lie in its range: ipywidgets would silently clamp it to lo or hi,
    and the figure would show another setting than the one asked for. ValueError naming the knob."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{description} must be a number, got {type(value).__name__} ({value!r})")
    if not lo <= value <= hi:  # also refuses NaN
        raise ValueError(f"{description}={value!r} is outside the slider's range {lo:g} .. {hi:g}; pick a value "
                         f"in it (the slider would otherwise move it to the nearest end without saying so)")


def note_adjustment(fig: go.Figure, text: str) -> go.Figure:
    """Say on a live figure that a slider combination was adjusted to one the formula accepts (a live
    builder never changes a setting silently): an orange line of text above the plot."""
    fig.add_annotation(text=text, xref="paper", yref="paper", x=0.0, xanchor="left", y=1.0, yanchor="bottom",
                       yshift=28, showarrow=False, font=dict(size=12, color="#D55E00"))
    return fig


def log_slider(value: float, description: str, lo: float = 1.0, hi: float = 7.0, fmt: str = ",.0f") -> Any:
    """An ipywidgets slider over 10^lo .. 10^hi in steps of 10^0.05, redrawn on release."""
    return log_knob(description, value, lo, hi, fmt=fmt).widget()


def int_slider(value: int, description: str, lo: int, hi: int, step: int = 1) -> Any:
    """An ipywidgets integer slider over lo .. hi, redrawn on release."""
    return int_knob(description, value, lo, hi, step).widget()


def float_slider(value: float, description: str, lo: float, hi: float, step: float) -> Any:
    """An ipywidgets float slider over lo .. hi, redrawn on release."""
    return float_knob(description, value, lo, hi, step).widget()


def label_on_log_axis(fig: go.Figure, axis: str) -> go.Figure:
    """Put the label of the line just drawn with `add_hline` (axis="y") or `add_vline` (axis="x")
    where a log axis shows it. plotly gives the value to both the line (a shape, placed by value)
    and its label (an annotation, which a log axis places by log10 of its coordinate), so on a log
    axis the label of a line at 64 lands at 10**64 and autorange stretches to reach it."""
    if axis not in ("x", "y"):
        raise ValueError(f"axis must be 'x' or 'y', got {axis!r}")
    if not fig.layout.annotations:
        raise ValueError("the figure has no annotation: draw the line with annotation_text first")
    label = fig.layout.annotations[-1]
    value = getattr(label, axis)
    if value is None or value <= 0:
        raise ValueError(f"a log axis cannot place a label at {axis} = {value!r}")
    setattr(label, axis, math.log10(value))
    return fig


def light_figure(data: Sequence[dict[str, Any]] = (), **layout: Any) -> go.Figure:
    """A figure in the plotly_white template from plain trace dicts, built without plotly's
    property validation, which costs tens of milliseconds per figure (the template alone about
    35 ms, each trace about 5 ms), so a live slider can redraw within its 100 ms budget. Callers
    pass valid properties; the tests check the traces."""
    global _TEMPLATE
    if _TEMPLATE is None:
        _TEMPLATE = pio.templates["plotly_white"].to_plotly_json()
    return go.Figure(data=list(data), layout={"template": _TEMPLATE, **layout}, _validate=False)


def legend_below(fig: go.Figure, *, height: int, rows: int, gap: int = 150, top: int = 80) -> go.Figure:
    """Put a horizontal legend `gap` pixels under the plot area, clear of the x title and of a
    static slider (which hangs below the plot), and make room for `rows` legend rows."""
    bottom = gap + 22 * rows + 16
    plot_px = height - top - bottom
    fig.update_layout(height=height, margin=dict(t=top, b=bottom),
                      legend=dict(orientation="h", x=0, xanchor="left", y=-gap / plot_px, yanchor="top", font_size=11))
    return fig


def rgba(hex_color: str, alpha: float) -> str:
    """A palette colour made translucent for a band: rgba("#0072B2", 0.18) -> "rgba(0, 114, 178, 0.18)"."""
    h = hex_color.lstrip("#")
    return f"rgba({int(h[0:2], 16)}, {int(h[2:4], 16)}, {int(h[4:6], 16)}, {alpha})"
