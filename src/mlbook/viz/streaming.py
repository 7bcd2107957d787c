"""Figures for experiments 4-6: T5 length generalisation, attention sinks and streaming, passkey retrieval.

Each function takes a saved experiment record (`load_result(...)` / `load_or_run(...)`) and returns
a plotly Figure for `mlbook.viz.show` (or `show_knob`, whose knobs are the keyword arguments);
nothing here trains or recomputes a measurement. Error bars and bands are one standard deviation
across seeds.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from mlbook.experiments import exp_passkey, exp_sinks, exp_t5_length
from mlbook.experiments.common import mean_sd
from mlbook.viz.core import LINE_COLORS, SEQUENTIAL, rgba

__all__ = [
    "fig_t5_per_position",
    "fig_sink_mass_per_head",
    "fig_sink_mass_vs_query",
    "fig_sink_heatmap",
    "fig_truncation_curve",
    "fig_stream_loss",
    "fig_passkey_heatmaps",
    "fig_passkey_vs_loss",
    "bucket_table_text",
]

_DASHES = ("solid", "dash", "dot", "dashdot", "longdash")
_CACHE_NAMES = {"full": "full KV cache (absolute positions)", "window": "sliding window, no sinks",
                "sink1": "1 sink + sliding window", "sink4": "4 sinks + sliding window"}


def _band(fig: go.Figure, x: Sequence[float], mean: Sequence[float | None], sd: Sequence[float | None], color: str,
          name: str, dash: str = "solid", row: int | None = None, col: int | None = None) -> None:
    """A line at the mean and a shaded band of ± one sd (two traces: band, then line)."""
    lo = [None if m is None or s is None else m - s for m, s in zip(mean, sd)]
    hi = [None if m is None or s is None else m + s for m, s in zip(mean, sd)]
    kw = {} if row is None else {"row": row, "col": col}
    fig.add_trace(go.Scatter(x=list(x) + list(x)[::-1], y=hi + lo[::-1], fill="toself", fillcolor=rgba(color, 0.18),
                             line={"width": 0}, hoverinfo="skip", showlegend=False, legendgroup=name,
                             name=f"{name} ± sd"), **kw)
    fig.add_trace(go.Scatter(x=list(x), y=list(mean), mode="lines+markers", name=name, legendgroup=name,
                             line={"color": color, "dash": dash}), **kw)


def _layout(fig: go.Figure, height: int = 400, title: str = "", subtitle: str = "", **kw: Any) -> go.Figure:
    """White template, a two-line title (the second smaller), the legend to the right of the plot
    (a slider sits below it), margins that keep both visible."""
    text = title if not subtitle else f"{title}<br><sup>{subtitle}</sup>"
    fig.update_layout(height=height, margin=dict(l=60, r=20, t=80, b=50), template="plotly_white",
                      title={"text": text, "font": {"size": 15}}, legend=dict(x=1.02, y=1.0, xanchor="left",
                                                                           font={"size": 11}), **kw)
    return fig


def _results(record: Any, name: str) -> dict[str, Any]:
    if not isinstance(record, dict) or "results" not in record or record.get("name", name) != name:
        raise TypeError(f"expected a saved {name!r} experiment record (a dict from load_result), got {type(record).__name__}")
    return record["results"]


def _n_seeds(r: dict[str, Any]) -> str:
    n = len(r["seeds"])
    return f"{n} seed{'s' if n != 1 else ''}"


# -- experiment 4: T5 relative bias -----------------------------------------------------------


def fig_t5_per_position(record: dict[str, Any], length: int = 16) -> go.Figure:
    """Token accuracy at each output position of the reversal at `length`: mean ± sd over seeds per
    variant; a variant that cannot run at that length has no line."""
    r = _results(record, "t5_length")
    if length not in r["eval_lens"]:
        raise ValueError(f"length must be one of the evaluated lengths {r['eval_lens']}, got {length!r}")
    fig = go.Figure()
    for i, variant in enumerate(r["variants"]):
        pp = exp_t5_length.per_position(record, variant, length)
        x = list(range(length))
        if pp is None:  # keep the trace count fixed for sliders: an empty line in the legend
            fig.add_trace(go.Scatter(x=x, y=[None] * length, fill="toself", showlegend=False, name=f"{variant} ± sd",
                                     line={"width": 0}))
            fig.add_trace(go.Scatter(x=x, y=[None] * length, mode="lines", name=f"{variant} (cannot run)",
                                     line={"color": LINE_COLORS[i]}))
            continue
        _band(fig, x, pp["mean"], pp["sd"], LINE_COLORS[i], variant, _DASHES[i % 4])
    fig.add_hline(y=r["chance"], line_dash="dot", line_color="gray", annotation_text=f"chance 1/{r['n_symbols']}",
                  annotation_position="bottom right")
    fig.add_vline(x=r["train_len"] - 0.5, line_dash="dot", line_color="gray",
                  annotation_text=f"trained length {r['train_len']}")
    fig.update_xaxes(title=f"output position (0 .. {length - 1})", range=[-0.5, max(r["eval_lens"]) - 0.5])
    fig.update_yaxes(title="token accuracy (fraction)", range=[0, 1.05])
    return _layout(fig, title=f"Reversal at length {length}: accuracy per output position",
                   subtitle=f"mean ± sd over {_n_seeds(r)}")


def bucket_table_text(table: dict[str, Any]) -> str:
    """Which bucket each offset 0..15 uses per stack and direction; '*' marks a bucket no offset of
    the training length ever used (its bias is still at initialisation)."""
    offsets = table["offsets"]
    rows = []
    for stack in ("encoder", "decoder"):
        for sign, r in table[stack].items():
            rows.append([f"{stack} {sign}"] + [f"{b}{'' if ok else '*'}" for b, ok in zip(r["bucket"], r["trained"])])
    headers = ["offset"] + [str(o) for o in offsets]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    line = lambda vals: "  ".join(str(v).rjust(w) for v, w in zip(vals, widths))  # noqa: E731
    body = [line(headers), line(["-" * w for w in widths])] + [line(row) for row in rows]
    return f"num_buckets={table['num_buckets']}, max_distance={table['max_distance']}\n" + "\n".join(body)


# -- experiment 5: attention sinks ------------------------------------------------------------


def fig_sink_mass_per_head(record: dict[str, Any], setting: str = "text_bos", queries: str = "late") -> go.Figure:
    """Attention mass on position 0 per layer and head. Heads are ranked within each layer (head
    identities differ between seeds), and each bar is the mean ± sd over seeds of the k-th largest;
    the dashed line is what uniform causal attention puts on position 0 for the same queries.

    queries: "early" (1..chunk-1, which have nothing to copy yet in the repetitive corpus), "late"
    (T/2..T-1, with plenty of local context) or "all" (1..T-1)."""
    r = _results(record, "sinks")
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
    return _layout(fig, height=420, barmode="group", title=f"Mass on position 0 per layer and head, {which}",
                   subtitle=f"{r['settings'][setting]['label']}; mean ± sd over {_n_seeds(r)}")


def fig_sink_mass_vs_query(record: dict[str, Any], setting: str = "repetitive", layer: int = 1) -> go.Figure:
    """Mass on position 0 against query position for the strongest head of one layer (per seed),
    mean ± sd over seeds, beside uniform causal attention 1/(q + 1); the chunk length is marked."""
    r = _results(record, "sinks")
    if setting not in r["settings"]:
        raise ValueError(f"setting must be one of {', '.join(r['settings'])}, got {setting!r}")
    n_layers = len(r["settings"][setting]["per_seed"][0]["mass"]["per_layer"])
    if isinstance(layer, bool) or not isinstance(layer, int) or not 1 <= layer <= n_layers:
        raise ValueError(f"layer must be an int in 1..{n_layers}, got {layer!r}")
    curve = exp_sinks.strongest_head_per_query(record, setting, layer - 1)
    q = list(range(1, len(curve["mean"])))
    fig = go.Figure()
    _band(fig, q, curve["mean"][1:], curve["sd"][1:], LINE_COLORS[5], f"strongest head of layer {layer}")
    fig.add_trace(go.Scatter(x=q, y=[1.0 / (k + 1) for k in q], mode="lines", name="uniform 1/(q+1)",
                             line=dict(color="gray", dash="dot", width=3)))
    fig.add_vline(x=r["chunk"], line_dash="dot", line_color="gray", annotation_text=f"chunk = {r['chunk']}")
    fig.update_xaxes(title="query position q (tokens)")
    fig.update_yaxes(title="attention mass on position 0", type="log", range=[-3, 0.05])
    return _layout(fig, height=420, title=f"Mass on position 0 by query, strongest head of layer {layer}",
                   subtitle=f"{r['settings'][setting]['label']}; mean ± sd over {_n_seeds(r)}")


def fig_truncation_curve(record: dict[str, Any], setting: str = "repetitive") -> go.Figure:
    """Change in loss at each position when the first token is deleted from the cache right after it
    was written (deleted minus intact), mean ± sd over seeds."""
    r = _results(record, "sinks")
    if setting not in r["settings"]:
        raise ValueError(f"setting must be one of {', '.join(r['settings'])}, got {setting!r}")
    seeds = r["settings"][setting]["per_seed"]
    diffs = [[a - b for a, b in zip(s["truncate_curve"]["first_dropped"], s["truncate_curve"]["intact"])] for s in seeds]
    stats = [mean_sd(v) for v in zip(*diffs)]
    q = list(range(1, len(stats) + 1))  # entry j is predicted by the query at position j + 1
    fig = go.Figure()
    _band(fig, q, [s["mean"] for s in stats], [s["sd"] for s in stats], LINE_COLORS[0], "first token deleted − intact")
    fig.add_hline(y=0.0, line_dash="dot", line_color="gray")
    fig.add_vline(x=r["chunk"], line_dash="dot", line_color="gray", annotation_text=f"chunk = {r['chunk']}")
    fig.update_xaxes(title="query position (tokens)")
    fig.update_yaxes(title="change in loss (nats per character)")
    return _layout(fig, height=400, title="Deleting the first token from the cache: change in loss",
                   subtitle=f"{r['settings'][setting]['label']}; mean ± sd over {_n_seeds(r)}")


def fig_sink_heatmap(record: dict[str, Any], setting: str = "text_bos", layer: int = 1, step: int = 2) -> go.Figure:
    """The mean attention map of one layer's strongest sink head (first seed), queries down, keys
    across, subsampled every `step` positions; a sink is a bright first column."""
    r = _results(record, "sinks")
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
    return _layout(fig, height=480, title=f"Mean attention of layer {layer}, head {m['head'] + 1}",
                   subtitle=f"{r['settings'][setting]['label']}; seed {r['seeds'][0]}")


def fig_stream_loss(record: dict[str, Any], setting: str = "text_bos") -> go.Figure:
    """Loss per stream segment for each cache, mean ± sd over seeds, with the cache size marked."""
    r = _results(record, "sinks")
    if setting not in r["settings"]:
        raise ValueError(f"setting must be one of {', '.join(r['settings'])}, got {setting!r}")
    seeds = r["settings"][setting]["per_seed"]
    seg = r["segment"]
    fig = go.Figure()
    for i, kind in enumerate(r["cache_kinds"]):
        rows = [s["stream"]["loss_per_segment"][kind] for s in seeds]
        stats = [mean_sd(v) for v in zip(*rows)]
        x = [j * seg + seg / 2 for j in range(len(stats))]
        _band(fig, x, [s["mean"] for s in stats], [s["sd"] for s in stats], LINE_COLORS[i], _CACHE_NAMES.get(kind, kind),
              _DASHES[i % 4])
    fig.add_vline(x=r["window"], line_dash="dot", line_color="gray", annotation_text=f"cache size = L = {r['window']}")
    fig.update_xaxes(title="position in the stream (tokens, segment centre)", type="log")
    fig.update_yaxes(title="loss (nats per character)")
    return _layout(fig, height=440, title="Streaming loss per segment, four caches",
                   subtitle=f"{r['settings'][setting]['label']}; mean ± sd over {_n_seeds(r)}")


# -- experiment 6: passkey --------------------------------------------------------------------


def _passkey_finetune(record: dict[str, Any]) -> str:
    """'after 30 steps at 512 on passkey and text' (or 'on text only', the earlier design)."""
    r = record["results"]
    mix = "passkey and text" if "passkey" in exp_passkey.finetune_mix(record) else "text only"
    return f"after {r['finetune']['steps']} steps at {r['finetune_len']} on {mix}"


def fig_passkey_heatmaps(record: dict[str, Any], phase: str = "zero_shot") -> go.Figure:
    """All-digits passkey accuracy on the (context length x key depth) grid, one panel per method,
    mean over seeds (hover: ± sd)."""
    r = _results(record, "passkey")
    if phase not in r["phases"]:
        raise ValueError(f"phase must be one of {', '.join(r['phases'])}, got {phase!r}")
    methods = r["methods"]
    fig = make_subplots(rows=1, cols=len(methods), subplot_titles=[r["labels"][m] for m in methods],
                        shared_yaxes=True, horizontal_spacing=0.03)
    depths = [f"{d:g}" for d in r["depths"]]
    lengths = [str(n) for n in r["lengths"]]
    for c, m in enumerate(methods, start=1):
        g = exp_passkey.grid(record, phase, m)
        z = np.asarray(g["mean"])  # (lengths, depths)
        sd = np.nan_to_num(np.asarray(g["sd"]))
        fig.add_trace(go.Heatmap(z=np.round(z, 3), x=depths, y=lengths, zmin=0, zmax=1, colorscale=SEQUENTIAL,
                                 showscale=c == len(methods), colorbar=dict(title="accuracy"),
                                 text=np.round(z, 2), texttemplate="%{text}", customdata=np.round(sd, 2),
                                 hovertemplate="depth %{x}<br>length %{y}<br>accuracy %{z:.2f} ± %{customdata}"
                                               "<extra></extra>"), row=1, col=c)
        fig.update_xaxes(title="key depth", tickangle=0, row=1, col=c)
    fig.update_yaxes(title="context length (tokens)", row=1, col=1)
    what = "no fine-tuning" if phase == "zero_shot" else _passkey_finetune(record)
    return _layout(fig, height=420, title="Passkey accuracy, all five digits right",
                   subtitle=f"{what}; mean over {_n_seeds(r)}; key depth 0 = start of the context, 1 = next to the question")


def fig_passkey_vs_loss(record: dict[str, Any], phase: str = "zero_shot") -> go.Figure:
    """Left: corpus loss against context length. Right: passkey accuracy (mean over depths) against
    length. Both mean ± sd over seeds (error bars)."""
    r = _results(record, "passkey")
    if phase not in r["phases"]:
        raise ValueError(f"phase must be one of {', '.join(r['phases'])}, got {phase!r}")
    fig = make_subplots(rows=1, cols=2, subplot_titles=("corpus loss (perplexity proxy)", "passkey accuracy, all digits"))
    for i, m in enumerate(r["methods"]):
        s = exp_passkey.summary(record, phase, m)
        style = dict(color=LINE_COLORS[i], dash=_DASHES[i % 4])
        for col, key in ((1, "loss"), (2, "accuracy")):
            fig.add_trace(go.Scatter(
                x=r["lengths"], y=[v["mean"] for v in s[key]], mode="lines+markers", name=r["labels"][m],
                legendgroup=m, showlegend=col == 1, line=style, marker=dict(symbol=i),
                error_y={"type": "data", "array": [v["sd"] or 0.0 for v in s[key]], "visible": True},
            ), row=1, col=col)
    for c in (1, 2):
        fig.update_xaxes(title="context length (tokens)", tickvals=r["lengths"], row=1, col=c)
    fig.update_yaxes(title="loss (nats per character)", row=1, col=1)
    fig.update_yaxes(title="accuracy (fraction)", range=[0, 1.05], row=1, col=2)
    what = "no fine-tuning" if phase == "zero_shot" else _passkey_finetune(record)
    return _layout(fig, height=440, title="Corpus loss and passkey retrieval against length",
                   subtitle=f"{what}; mean ± sd over {_n_seeds(r)}")
