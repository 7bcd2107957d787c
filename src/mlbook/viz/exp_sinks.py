"""Figures of Experiment 5 (notebooks/24_exp_attention_sinks): attention sinks and streaming caches."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from mlbook.experiments import exp_sinks
from mlbook.experiments.common import mean_sd
from mlbook.viz.core import LINE_COLORS, SEQUENTIAL, label_on_log_axis
from mlbook.viz.exp_common import DASHES, band, finish_layout, record_results, seeds_text

__all__ = [
    "fig_sink_mass_per_head",
    "fig_sink_mass_vs_query",
    "fig_truncation_curve",
    "fig_sink_heatmap",
    "fig_stream_loss",
]


_CACHE_NAMES = {"full": "full KV cache (absolute positions)", "window": "sliding window, no sinks",
                "sink1": "1 sink + sliding window", "sink4": "4 sinks + sliding window"}


def fig_sink_mass_per_head(record: dict[str, Any], setting: str = "text_bos", queries: str = "late") -> go.Figure:
    """Attention mass on position 0 per layer and head. Heads are ranked within each layer (head
    identities differ between seeds), and each bar is the mean ± sd over seeds of the k-th largest;
    the dashed line is what uniform causal attention puts on position 0 for the same queries.

    queries: "early" (1..chunk-1, which have nothing to copy yet in the repetitive corpus), "late"
    (T/2..T-1, with plenty of local context) or "all" (1..T-1)."""
    r = record_results(record, "sinks")
    if setting not in r["settings"]:
        raise ValueError(f"setting must be one of {', '.join(r['settings'])}, got {setting!r}")
    if queries not in ("early", "late", "all"):
        raise ValueError(f"queries must be 'early', 'late' or 'all', got {queries!r}")
    seeds = r["settings"][setting]["per_seed"]
    chunk = r["chunk"]

    def per_head(s: dict[str, Any]) -> list[list[float]]:
        if queries == "early":  # queries 1 .. chunk-1: nothing to copy yet in the repetitive corpus
            return [[sum(h[1:chunk]) / (chunk - 1) for h in layer] for layer in s["mass"]["per_head_query"]]
        return s["mass"]["per_head_late" if queries == "late" else "per_head"]

    ranked = np.array([[sorted(layer, reverse=True) for layer in per_head(s)] for s in seeds])  # (S, L, H)
    n_layers, n_heads = ranked.shape[1:]
    fig = go.Figure()
    for k in range(n_heads):
        stats = [mean_sd(ranked[:, layer, k].tolist()) for layer in range(n_layers)]
        fig.add_bar(x=[f"layer {i + 1}" for i in range(n_layers)], y=[s["mean"] for s in stats],
                    error_y={"type": "data", "array": [s["sd"] or 0.0 for s in stats], "visible": True},
                    name=f"{'largest' if k == 0 else f'#{k + 1}'} head", marker_color=LINE_COLORS[k % 8])
    if queries == "early":
        uniform = sum(1.0 / (q + 1) for q in range(1, chunk)) / (chunk - 1)
    else:
        uniform = seeds[0]["mass"]["uniform_late" if queries == "late" else "uniform"]
    fig.add_hline(y=uniform, line_dash="dash", line_color="black", annotation_text=f"uniform attention ({uniform:.3f})",
                  annotation_position="top left")
    fig.update_yaxes(title="attention mass on position 0 (fraction)", range=[0, 1.0])
    fig.update_xaxes(title="layer (1 = closest to the input)")
    T = len(seeds[0]["mass"]["uniform_per_query"])
    which = {"early": f"queries 1..{chunk - 1}", "late": f"queries {T // 2}..{T - 1}", "all": f"queries 1..{T - 1}"}[queries]
    return finish_layout(fig, height=420, barmode="group", title=f"Mass on position 0 per layer and head, {which}",
                         subtitle=f"{r['settings'][setting]['label']}; mean ± sd over {seeds_text(r)}")


def fig_sink_mass_vs_query(record: dict[str, Any], setting: str = "repetitive", layer: int = 1) -> go.Figure:
    """Mass on position 0 against query position for the strongest head of one layer (per seed),
    mean ± sd over seeds, beside uniform causal attention 1/(q + 1); the chunk length is marked."""
    r = record_results(record, "sinks")
    if setting not in r["settings"]:
        raise ValueError(f"setting must be one of {', '.join(r['settings'])}, got {setting!r}")
    n_layers = len(r["settings"][setting]["per_seed"][0]["mass"]["per_layer"])
    if isinstance(layer, bool) or not isinstance(layer, int) or not 1 <= layer <= n_layers:
        raise ValueError(f"layer must be an int in 1..{n_layers}, got {layer!r}")
    curve = exp_sinks.strongest_head_per_query(record, setting, layer - 1)
    q = list(range(1, len(curve["mean"])))
    fig = go.Figure()
    band(fig, q, curve["mean"][1:], curve["sd"][1:], LINE_COLORS[5], f"strongest head of layer {layer}",
         mode="lines+markers")
    fig.add_trace(go.Scatter(x=q, y=[1.0 / (k + 1) for k in q], mode="lines", name="uniform 1/(q+1)",
                             line=dict(color="gray", dash="dot", width=3)))
    fig.add_vline(x=r["chunk"], line_dash="dot", line_color="gray", annotation_text=f"chunk = {r['chunk']}")
    fig.update_xaxes(title="query position q (tokens)")
    fig.update_yaxes(title="attention mass on position 0", type="log", range=[-3, 0.05])
    return finish_layout(fig, height=420, title=f"Mass on position 0 by query, strongest head of layer {layer}",
                         subtitle=f"{r['settings'][setting]['label']}; mean ± sd over {seeds_text(r)}")


def fig_truncation_curve(record: dict[str, Any], setting: str = "repetitive") -> go.Figure:
    """Change in loss at each position when the first token is deleted from the cache right after it
    was written (deleted minus intact), mean ± sd over seeds."""
    r = record_results(record, "sinks")
    if setting not in r["settings"]:
        raise ValueError(f"setting must be one of {', '.join(r['settings'])}, got {setting!r}")
    seeds = r["settings"][setting]["per_seed"]
    diffs = [[a - b for a, b in zip(s["truncate_curve"]["first_dropped"], s["truncate_curve"]["intact"])] for s in seeds]
    stats = [mean_sd(v) for v in zip(*diffs)]
    q = list(range(1, len(stats) + 1))  # entry j is predicted by the query at position j + 1
    fig = go.Figure()
    band(fig, q, [s["mean"] for s in stats], [s["sd"] for s in stats], LINE_COLORS[0], "first token deleted − intact",
         mode="lines+markers")
    fig.add_hline(y=0.0, line_dash="dot", line_color="gray")
    fig.add_vline(x=r["chunk"], line_dash="dot", line_color="gray", annotation_text=f"chunk = {r['chunk']}")
    fig.update_xaxes(title="query position (tokens)")
    fig.update_yaxes(title="change in loss (nats per character)")
    return finish_layout(fig, height=400, title="Deleting the first token from the cache: change in loss",
                         subtitle=f"{r['settings'][setting]['label']}; mean ± sd over {seeds_text(r)}")


def fig_sink_heatmap(record: dict[str, Any], setting: str = "text_bos", layer: int = 1, step: int = 2) -> go.Figure:
    """The mean attention map of one layer's strongest sink head (first seed), queries down, keys
    across, subsampled every `step` positions; a sink is a bright first column."""
    r = record_results(record, "sinks")
    if setting not in r["settings"]:
        raise ValueError(f"setting must be one of {', '.join(r['settings'])}, got {setting!r}")
    maps = r["settings"][setting]["per_seed"][0]["maps"]
    if isinstance(layer, bool) or not isinstance(layer, int) or not 1 <= layer <= len(maps):
        raise ValueError(f"layer must be an int in 1..{len(maps)}, got {layer!r}")
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise ValueError(f"step must be a positive int, got {step!r}")
    m = maps[layer - 1]
    z = np.asarray(m["map"])  # (T, T)
    T = z.shape[0]
    keep = np.unique(np.r_[0, np.arange(0, T, step)])
    zs = np.sqrt(z[np.ix_(keep, keep)])  # square root: the first column and the diagonal both stay visible
    fig = go.Figure(go.Heatmap(z=np.round(zs, 3), x=keep.tolist(), y=keep.tolist(), colorscale=SEQUENTIAL, zmin=0,
                               zmax=1, colorbar={"title": "√ weight"},
                               customdata=np.round(z[np.ix_(keep, keep)], 3),
                               hovertemplate="query %{y}<br>key %{x}<br>weight %{customdata}<extra></extra>"))
    fig.update_yaxes(title="query position", autorange="reversed")
    fig.update_xaxes(title="key position (0 = first token)")
    return finish_layout(fig, height=480, title=f"Mean attention of layer {layer}, head {m['head'] + 1}",
                         subtitle=f"{r['settings'][setting]['label']}; seed {r['seeds'][0]}")


def fig_stream_loss(record: dict[str, Any], setting: str = "text_bos") -> go.Figure:
    """Loss per stream segment for each cache, mean ± sd over seeds, with the cache size marked."""
    r = record_results(record, "sinks")
    if setting not in r["settings"]:
        raise ValueError(f"setting must be one of {', '.join(r['settings'])}, got {setting!r}")
    seeds = r["settings"][setting]["per_seed"]
    seg = r["segment"]
    fig = go.Figure()
    for i, kind in enumerate(r["cache_kinds"]):
        rows = [s["stream"]["loss_per_segment"][kind] for s in seeds]
        stats = [mean_sd(v) for v in zip(*rows)]
        x = [j * seg + seg / 2 for j in range(len(stats))]
        band(fig, x, [s["mean"] for s in stats], [s["sd"] for s in stats], LINE_COLORS[i], _CACHE_NAMES.get(kind, kind),
             DASHES[i % 4], mode="lines+markers")
    fig.add_vline(x=r["window"], line_dash="dot", line_color="gray", annotation_text=f"cache size = L = {r['window']}")
    label_on_log_axis(fig, "x")
    fig.update_xaxes(title="position in the stream (tokens, segment centre)", type="log")
    fig.update_yaxes(title="loss (nats per character)")
    return finish_layout(fig, height=440, title="Streaming loss per segment, four caches",
                         subtitle=f"{r['settings'][setting]['label']}; mean ± sd over {seeds_text(r)}")
