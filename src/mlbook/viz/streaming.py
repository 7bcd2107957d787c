"""Figures for experiments 4-6: T5 length generalisation, attention sinks and streaming, passkey retrieval.

Each function takes the `results` dict of a saved experiment record (`load_or_run(...)["results"]`)
and returns a plotly Figure for `mlbook.viz.show`; nothing here trains or recomputes a number.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from mlbook.viz.core import LINE_COLORS, SEQUENTIAL

__all__ = [
    "fig_sink_mass_per_layer",
    "fig_sink_mass_vs_query",
    "fig_stream_loss",
    "fig_t5_per_position",
    "fig_passkey_heatmaps",
    "fig_passkey_vs_loss",
    "format_table",
    "sink_mass_table",
    "stream_table",
    "truncation_table",
    "t5_table",
    "bucket_table_text",
    "passkey_table",
]

_DASHES = ("solid", "dash", "dot", "dashdot")
_METHOD_NAMES = {"rope": "RoPE (no scaling)", "rope_pi": "RoPE + PI", "rope_yarn": "RoPE + YaRN", "alibi": "ALiBi"}
_CACHE_NAMES = {"full": "full KV cache (absolute positions)", "window": "sliding window, no sinks",
                "sink": "4 sinks + sliding window"}


def _layout(fig: go.Figure, height: int = 380, **kw: Any) -> go.Figure:
    fig.update_layout(height=height, margin=dict(l=60, r=20, t=40, b=50), template="plotly_white",
                      legend=dict(orientation="h", y=-0.25), **kw)
    return fig


def fig_sink_mass_per_layer(results: dict[str, Any]) -> go.Figure:
    """Mean attention mass on position 0 per layer, one bar group per positional scheme, and the
    mass a uniform causal head would put there (dashed)."""
    fig = go.Figure()
    baseline = None
    for i, (scheme, r) in enumerate(results["schemes"].items()):
        per_layer = r["mass"]["per_layer"]
        fig.add_bar(x=[f"layer {k + 1}" for k in range(len(per_layer))], y=per_layer, name=f"{scheme}: on token 0",
                    marker_color=LINE_COLORS[i])
        baseline = r["mass"]["uniform_baseline"]
    if baseline is not None:
        fig.add_hline(y=baseline, line_dash="dash", line_color="black",
                      annotation_text="uniform attention (mean 1/(q+1))", annotation_position="top left")
    fig.update_yaxes(title="attention mass on position 0 (fraction of 1)", rangemode="tozero")
    fig.update_xaxes(title="layer (1 = closest to the input)")
    return _layout(fig, barmode="group")


def fig_sink_mass_vs_query(results: dict[str, Any], scheme: str = "rope") -> go.Figure:
    """Mass on position 0 against query position, one line per layer, beside 1/(q+1)."""
    m = results["schemes"][scheme]["mass"]
    per_query = np.asarray(m["per_query"])  # (L, T)
    q = np.arange(per_query.shape[1])
    fig = go.Figure()
    for layer, row in enumerate(per_query):
        fig.add_scatter(x=q[1:], y=row[1:], mode="lines", name=f"layer {layer + 1}",
                        line=dict(color=LINE_COLORS[layer % len(LINE_COLORS)], dash=_DASHES[layer // 4 % 4]))
    fig.add_scatter(x=q[1:], y=np.asarray(m["uniform_per_query"])[1:], mode="lines", name="uniform 1/(q+1)",
                    line=dict(color="gray", dash="dot", width=3))
    fig.update_xaxes(title="query position q (tokens)")
    fig.update_yaxes(title="attention mass on position 0", type="log")
    return _layout(fig)


def fig_stream_loss(results: dict[str, Any], scheme: str = "rope") -> go.Figure:
    """Loss per stream segment for the three caches, with the trained length marked."""
    s = results["schemes"][scheme]["stream"]
    starts = np.asarray(s["segment_starts"])
    mid = starts + s["segment"] / 2
    fig = go.Figure()
    for i, (kind, losses) in enumerate(s["loss_per_segment"].items()):
        fig.add_scatter(x=mid, y=losses, mode="lines+markers", name=_CACHE_NAMES.get(kind, kind),
                        line=dict(color=LINE_COLORS[i], dash=_DASHES[i]), marker=dict(symbol=i))
    fig.add_vline(x=results["train_len"], line_dash="dot", line_color="gray",
                  annotation_text=f"trained length {results['train_len']}")
    fig.update_xaxes(title="position in the stream (tokens, segment centre)")
    fig.update_yaxes(title="loss (nats per character)")
    return _layout(fig)


def fig_t5_per_position(results: dict[str, Any], length: int = 16) -> go.Figure:
    """Token accuracy at each output position of the reversal at `length`, mean over seeds."""
    fig = go.Figure()
    n = None
    for i, (variant, r) in enumerate(results["variants"].items()):
        evals = [s["eval"][str(length)] for s in r["per_seed"]]
        if not evals[0]["runs"]:
            continue
        acc = np.mean([e["per_position"] for e in evals], axis=0)
        n = len(acc)
        fig.add_scatter(x=np.arange(n), y=acc, mode="lines+markers", name=variant,
                        line=dict(color=LINE_COLORS[i], dash=_DASHES[i % 4]), marker=dict(symbol=i))
    if n is not None:
        fig.add_hline(y=1 / results.get("n_symbols", 16), line_dash="dot", line_color="gray",
                      annotation_text="chance", annotation_position="bottom right")
    fig.add_vline(x=7.5, line_dash="dot", line_color="gray", annotation_text="trained length 8")
    fig.update_xaxes(title=f"output position (0 .. {length - 1})")
    fig.update_yaxes(title="token accuracy (fraction)", range=[0, 1.02])
    return _layout(fig)


def fig_passkey_heatmaps(results: dict[str, Any], methods: Sequence[str] | None = None) -> go.Figure:
    """All-digits passkey accuracy on a (context length x key depth) grid, one panel per method."""
    methods = list(methods or results["methods"])
    fig = make_subplots(rows=1, cols=len(methods), subplot_titles=[_METHOD_NAMES.get(m, m) for m in methods],
                        shared_yaxes=True, horizontal_spacing=0.03)
    depths = [f"{d:g}" for d in results["depths"]]
    lengths = [str(n) for n in results["lengths"]]
    for c, m in enumerate(methods, start=1):
        z = np.asarray(results["accuracy"][m])  # (lengths, depths)
        fig.add_heatmap(z=z, x=depths, y=lengths, zmin=0, zmax=1, colorscale=SEQUENTIAL, showscale=c == len(methods),
                        colorbar=dict(title="accuracy"), text=np.round(z, 2), texttemplate="%{text}",
                        hovertemplate="depth %{x}<br>length %{y}<br>accuracy %{z:.2f}<extra></extra>", row=1, col=c)
        fig.update_xaxes(title="key depth (0 = start)", row=1, col=c)
    fig.update_yaxes(title="context length (tokens)", row=1, col=1)
    return _layout(fig, height=360)


def fig_passkey_vs_loss(results: dict[str, Any]) -> go.Figure:
    """Left: corpus loss against context length. Right: passkey accuracy (mean over depths) against length."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("corpus loss (perplexity proxy)", "passkey accuracy, all digits"))
    for i, m in enumerate(results["methods"]):
        style = dict(color=LINE_COLORS[i], dash=_DASHES[i % 4])
        name = _METHOD_NAMES.get(m, m)
        fig.add_scatter(x=results["lengths"], y=results["loss"][m], mode="lines+markers", name=name, line=style,
                        marker=dict(symbol=i), legendgroup=m, row=1, col=1)
        acc = np.asarray(results["accuracy"][m]).mean(axis=1)
        fig.add_scatter(x=results["lengths"], y=acc, mode="lines+markers", name=name, line=style, marker=dict(symbol=i),
                        legendgroup=m, showlegend=False, row=1, col=2)
    for c in (1, 2):
        fig.update_xaxes(title="context length (tokens)", row=1, col=c)
    fig.update_yaxes(title="loss (nats per character)", row=1, col=1)
    fig.update_yaxes(title="accuracy (fraction)", range=[0, 1.02], row=1, col=2)
    return _layout(fig)



# ---------------------------------------------------------------------------
# Printed tables of the measured numbers (plain text, so nbval can show them)
# ---------------------------------------------------------------------------


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 3) -> str:
    """A fixed-width text table; floats rounded to `digits` decimals."""
    cells = [[f"{v:.{digits}f}" if isinstance(v, float) else str(v) for v in row] for row in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    line = lambda vals: "  ".join(str(v).rjust(w) for v, w in zip(vals, widths))  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def sink_mass_table(results: dict[str, Any]) -> str:
    """Per scheme and layer: mass on position 0, on positions 0-3, and the ratio to uniform attention."""
    rows = []
    for scheme, r in results["schemes"].items():
        m = r["mass"]
        for layer, (on0, on4) in enumerate(zip(m["per_layer"], m["per_layer_first4"])):
            rows.append([scheme, layer + 1, on0, on4, on0 / m["uniform_baseline"]])
    return format_table(["scheme", "layer", "mass on 0", "mass on 0-3", "x uniform"], rows)


def stream_table(results: dict[str, Any]) -> str:
    """Per scheme and cache: loss within the trained length and past it, over the whole stream."""
    rows = []
    for scheme, r in results["schemes"].items():
        s = r["stream"]
        for kind in s["loss_past_train_len"]:
            rows.append([scheme, _CACHE_NAMES.get(kind, kind), s["loss_within_train_len"][kind],
                         s["loss_past_train_len"][kind]])
    return format_table(["scheme", "cache", "loss, first L tokens", f"loss, tokens L..{results['stream_length']}"], rows)


def truncation_table(results: dict[str, Any]) -> str:
    """Per scheme: loss after the prefix with the cache intact and with slots deleted."""
    rows = []
    for scheme, r in results["schemes"].items():
        t = r["truncate"]
        base = t["loss"]["none"]
        for name, loss in t["loss"].items():
            rows.append([scheme, name, str(t["dropped_slots"][name]), loss, loss - base])
    return format_table(["scheme", "deleted", "slots", "loss", "change"], rows, digits=4)


def t5_table(results: dict[str, Any]) -> str:
    """Per variant and evaluation length: exact match and token accuracy (mean over seeds), or why not."""
    rows = []
    for variant, r in results["variants"].items():
        for length in r["per_seed"][0]["eval"]:
            evals = [s["eval"][length] for s in r["per_seed"]]
            if evals[0]["runs"]:
                rows.append([variant, length, float(np.mean([e["exact_match"] for e in evals])),
                             float(np.mean([e["token_accuracy"] for e in evals]))])
            else:
                rows.append([variant, length, "cannot run", "no rows for positions >= max_len"])
    return format_table(["variant", "length", "exact match", "token accuracy"], rows)


def bucket_table_text(table: dict[str, Any]) -> str:
    """Which bucket each offset 0..15 uses per stack and direction; '*' marks a bucket no offset of
    the training length ever used (its bias is still at initialisation)."""
    headers = ["offset"] + [str(o) for o in table["offsets"]]
    rows = []
    for stack in ("encoder", "decoder"):
        for sign, r in table[stack].items():
            rows.append([f"{stack} {sign}"] + [f"{b}{'' if ok else '*'}" for b, ok in zip(r["bucket"], r["trained"])])
    return f"num_buckets={table['num_buckets']}, max_distance={table['max_distance']}\n" + format_table(headers, rows)


def passkey_table(results: dict[str, Any]) -> str:
    """Per method and length: corpus loss, accuracy (all digits; mean over depths), per-digit accuracy,
    and the accuracy at depth 0 (key farthest from the question)."""
    rows = []
    for m in results["methods"]:
        for i, length in enumerate(results["lengths"]):
            acc = results["accuracy"][m][i]
            rows.append([_METHOD_NAMES.get(m, m), length, results["loss"][m][i], float(np.mean(acc)),
                         float(np.mean(results["per_digit"][m][i])), acc[0]])
    return format_table(["method", "length", "corpus loss", "acc (all digits)", "acc per digit", "acc @ depth 0"], rows)
