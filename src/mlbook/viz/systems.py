"""Figures and tables for section 4 (systems view): the cost of each scheme against attention's,
and the measured benchmarks (RoPE against a copy, attention with a materialised bias against
FlexAttention, live-slider redraw times).

Cost figure: one private build function behind `fig_position_cost` (a plotly slider over d_model,
static site) and `live_position_cost` (ipywidgets). Benchmark figures draw a saved record
(`mlbook.benchmarks.load_record`); their pickers are plotly buttons. Every number comes from
`mlbook.analysis.systems` or the record.
"""

from __future__ import annotations

import textwrap
from typing import Any, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from mlbook.analysis.systems import attention_flops, position_cost
from mlbook.benchmarks.registry import BOOK_RECORDS
from mlbook.viz.core import LINE_COLORS, choice_knob, int_knob, label_on_log_axis, light_figure, live_figure

__all__ = [
    "D_MODELS",
    "fig_position_cost",
    "live_position_cost",
    "VARIANT_LABELS",
    "fig_attention_benchmark",
    "attention_table",
    "attention_summary",
    "score_mod_overhead",
    "score_mod_summary",
    "ROPE_LABELS",
    "fig_rope_benchmark",
    "rope_table",
    "fig_slider_benchmark",
    "slider_table",
]

D_MODELS: tuple[int, ...] = (512, 1024, 2048, 4096, 8192)
_T_GRID = np.unique(np.round(np.logspace(np.log10(128), np.log10(131072), 33)).astype(int))


def _check_record(record: Any, name: str) -> dict[str, Any]:
    if not isinstance(record, dict) or record.get("name") != name or "results" not in record:
        made_by = f"; {BOOK_RECORDS[name]} makes it" if name in BOOK_RECORDS else ""
        raise ValueError(f"record must be a saved '{name}' benchmark record "
                         f"(mlbook.benchmarks.load_record('{name}'){made_by})")
    return record["results"]


# ---------------------------------------------------------------------------
# Cost of each scheme against attention's
# ---------------------------------------------------------------------------




def _two_panels(
    left: str, right: str, data: Sequence[dict[str, Any]], *, axes: tuple[dict[str, Any], ...] = ({}, {}, {}, {}),
    gap: float = 0.12, **layout: Any,
) -> go.Figure:
    """Two side-by-side panels (x/y and x2/y2) with titles, without make_subplots' cost.
    axes: extra properties of xaxis, yaxis, xaxis2, yaxis2."""
    w = (1 - gap) / 2
    title = dict(xref="paper", yref="paper", y=1.0, yanchor="bottom", showarrow=False, font=dict(size=13))
    return light_figure(
        data, xaxis=dict(domain=[0, w], anchor="y", **axes[0]), yaxis=dict(anchor="x", **axes[1]),
        xaxis2=dict(domain=[1 - w, 1], anchor="y2", **axes[2]), yaxis2=dict(anchor="x2", **axes[3]),
        annotations=[dict(text=left, x=w / 2, xanchor="center", **title),
                     dict(text=right, x=1 - w / 2, xanchor="center", **title)],
        **layout,
    )


def _position_cost(d_model: int, d_head: int = 128, B: int = 1, bytes_per_value: float = 2.0) -> go.Figure:
    if d_model % d_head:
        raise ValueError(f"d_model ({d_model}) must be a multiple of d_head ({d_head})")
    H = d_model // d_head
    T = [int(t) for t in _T_GRID]
    att = [attention_flops(B, t, d_model, H) for t in T]
    cost = {s: [position_cost(s, B, t, d_model, H, bytes_per_value=bytes_per_value) for t in T]
            for s in ("rope", "t5", "alibi_fused", "sinusoidal")}
    share = 6.0 / (8.0 * d_model)
    flops = [
        ("attention projections 8BTd²", [a.projections for a in att], LINE_COLORS[7], "solid"),
        ("attention scores + mixing 4BT²d", [a.scores + a.mix for a in att], LINE_COLORS[5], "solid"),
        ("RoPE 6BTd", [c.flops for c in cost["rope"]], LINE_COLORS[0], "solid"),
        ("bias add, T5 / ALiBi: BHT²", [c.flops for c in cost["t5"]], LINE_COLORS[1], "dash"),
        ("ALiBi in the kernel: 3BHT²", [c.flops for c in cost["alibi_fused"]], LINE_COLORS[2], "dot"),
        ("sinusoidal / learned: BTd once", [c.flops for c in cost["sinusoidal"]], LINE_COLORS[3], "dashdot"),
    ]
    traces = [dict(type="scatter", x=T, y=y, name=name, mode="lines", line=dict(color=color, dash=dash, width=2.5),
                   hovertemplate=f"{name}<br>T=%{{x:,}}<br>%{{y:.3g}} FLOPs<extra></extra>")
              for name, y, color, dash in flops]
    qkv = [4 * B * t * d_model * bytes_per_value for t in T]
    traffic = [c.traffic_bytes for c in cost["t5"]]
    traces.append(dict(type="scatter", x=T, y=qkv, name=f"q, k, v, output: 4BTd × {bytes_per_value:g} B",
                       mode="lines", line=dict(color=LINE_COLORS[4], width=2.5), xaxis="x2", yaxis="y2",
                       hovertemplate="q, k, v, out<br>T=%{x:,}<br>%{y:.3g} bytes<extra></extra>"))
    traces.append(dict(type="scatter", x=T, y=traffic, name=f"materialised bias read: BHT² × {bytes_per_value:g} B",
                       mode="lines", line=dict(color=LINE_COLORS[1], dash="dash", width=2.5), xaxis="x2", yaxis="y2",
                       hovertemplate="bias read<br>T=%{x:,}<br>%{y:.3g} bytes<extra></extra>"))
    x_axis = dict(type="log", title=dict(text="sequence length T (tokens)"), range=[np.log10(128), np.log10(131072)],
                  dtick=1)
    return _two_panels(
        "FLOPs per layer", "bytes per layer beyond q, k, v (and the output)", traces,
        axes=(x_axis, dict(type="log", title=dict(text="FLOPs per layer"), range=[3, 17]),
              x_axis, dict(type="log", title=dict(text="bytes per layer"), range=[4, 12])),
        title=dict(text=f"d = {d_model:,} ({H} heads of {d_head}), B = {B}<br>RoPE / projections = 6BTd / 8BTd² = "
                        f"3/(4d) = {share:.2g}", font=dict(size=14)),
        height=680, legend=dict(orientation="h", y=-0.42, yanchor="top", x=0, font=dict(size=11)),
        margin=dict(t=100, b=230),
    )


def fig_position_cost(d_model: int = 4096, *, d_head: int = 128, B: int = 1, bytes_per_value: float = 2.0,
                      d_models: Sequence[int] | None = D_MODELS) -> go.Figure:
    """FLOPs (left) and extra bytes (right) per layer against T, for each scheme and for attention.

    Slider over d_model (d_head fixed, so H = d_model / d_head); d_models=None gives one figure.
    """
    from mlbook.viz.core import grid_slider

    fixed = {"d_head": d_head, "B": B, "bytes_per_value": bytes_per_value}
    if d_models is None:
        return _position_cost(d_model, **fixed)
    values = sorted(set(d_models) | {d_model})
    return grid_slider(_position_cost, "d_model", values, active=values.index(d_model), label="d (model width)",
                       fixed=fixed)


_LIVE_D_MODELS: tuple[int, ...] = (512, 768, 1024, 2048, 4096, 5120, 8192, 16384)  # widths of common models
_LIVE_D_HEADS: tuple[int, ...] = (64, 128, 256)


@live_figure(
    choice_knob("d_model", 4096, _LIVE_D_MODELS, "d (width)"), choice_knob("d_head", 128, _LIVE_D_HEADS, "d_head"),
    int_knob("B", 1, 1, 64, label="batch B"),
    caption="FLOPs and extra bytes per layer for the chosen width, head size and batch.",
    alt="Two log-log panels against sequence length: FLOPs per layer per scheme, and extra bytes per layer.",
)
def live_position_cost(d_model: int, d_head: int, B: int) -> go.Figure:
    """Live form of `fig_position_cost`: d_model, d_head and batch. Wrap in `show_live`."""
    return _position_cost(d_model, d_head, B)


# ---------------------------------------------------------------------------
# Attention benchmark
# ---------------------------------------------------------------------------

VARIANT_LABELS: dict[str, str] = {
    "sdpa": "SDPA, no position",
    "rope_sdpa": "RoPE + SDPA",
    "t5_bias": "T5, materialised bias",
    "alibi_bias": "ALiBi, materialised bias",
    "flex": "FlexAttention, no position",
    "t5_flex": "T5, FlexAttention score_mod",
    "alibi_flex": "ALiBi, FlexAttention score_mod",
}
_SHORT_LABELS: dict[str, str] = {
    "sdpa": "SDPA", "rope_sdpa": "RoPE + SDPA", "t5_bias": "T5 bias tensor", "alibi_bias": "ALiBi bias tensor",
    "flex": "Flex", "t5_flex": "T5 Flex score_mod", "alibi_flex": "ALiBi Flex score_mod",
}
_VARIANT_STYLE = {
    "sdpa": (LINE_COLORS[7], "solid", "circle"),
    "rope_sdpa": (LINE_COLORS[0], "solid", "diamond"),
    "t5_bias": (LINE_COLORS[1], "dash", "square"),
    "alibi_bias": (LINE_COLORS[2], "dash", "triangle-up"),
    "flex": (LINE_COLORS[4], "dot", "circle-open"),
    "t5_flex": (LINE_COLORS[5], "solid", "square-open"),
    "alibi_flex": (LINE_COLORS[3], "solid", "triangle-up-open"),
}


def _attention_series(res: dict[str, Any]) -> tuple[list[int], dict[str, dict[str, list[float | None]]]]:
    Ts = sorted({r["T"] for r in res["rows"]})
    out: dict[str, dict[str, list[float | None]]] = {}
    for v in res["variants"]:
        rows = {r["T"]: r for r in res["rows"] if r["variant"] == v}
        out[v] = {
            "ms": [rows[T]["times"]["median_ms"] for T in Ts],
            "mib": [None if rows[T]["peak_bytes"] is None else rows[T]["peak_bytes"] / 2**20 for T in Ts],
        }
    return Ts, out


def fig_attention_benchmark(record: dict[str, Any]) -> go.Figure:
    """Median time (left) and peak memory (right) against T for every variant of a saved
    'attention_position' record; buttons switch between measured values and ratios to SDPA."""
    res = _check_record(record, "attention_position")
    Ts, series = _attention_series(res)
    base = series["sdpa"]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("time per call (median)", "peak memory added by one call"))
    absolute: list[list[Any]] = []
    relative: list[list[Any]] = []
    for v, s in series.items():
        color, dash, symbol = _VARIANT_STYLE.get(v, (LINE_COLORS[6], "solid", "x"))
        label = VARIANT_LABELS.get(v, v)
        for col, key, unit in ((1, "ms", "ms"), (2, "mib", "MiB")):
            y = s[key]
            fig.add_scatter(x=Ts, y=y, name=label, legendgroup=v, showlegend=col == 1, mode="lines+markers",
                            line=dict(color=color, dash=dash, width=2.5), marker=dict(symbol=symbol, size=9),
                            row=1, col=col,
                            hovertemplate=f"{label}<br>T=%{{x:,}}<br>%{{y:.4g}}<extra></extra>")
            absolute.append(list(y))
            relative.append([None if a is None or b in (None, 0) else a / b for a, b in zip(y, base[key])])
    bias = [res["bias_bytes_analytic"][str(T)] / 2**20 for T in Ts]
    fig.add_scatter(x=Ts, y=bias, name="bias tensor H·T²·4 B (analytic)", mode="lines",
                    line=dict(color="grey", dash="dot", width=1.5), row=1, col=2,
                    hovertemplate="analytic bias size<br>T=%{x:,}<br>%{y:.4g} MiB<extra></extra>")
    absolute.append(bias)
    relative.append([None] * len(Ts))
    n = len(absolute)
    titles_abs = {"yaxis.title.text": "milliseconds", "yaxis2.title.text": "MiB", "yaxis.type": "log",
                  "yaxis2.type": "log"}
    titles_rel = {"yaxis.title.text": "time / SDPA no position", "yaxis2.title.text": "memory / SDPA no position",
                  "yaxis.type": "log", "yaxis2.type": "log"}
    fig.update_layout(
        title=(f"Causal attention, B={record['config']['B']}, H={record['config']['H']}, "
               f"d_head={record['config']['d_head']}<br>{record['config']['dtype']}, {record['device']}, "
               f"{record['threads']} threads"),
        height=540, title_font_size=14,
        legend=dict(orientation="h", y=-0.2, x=0, font_size=11),
        updatemenus=[dict(
            type="buttons", direction="right", x=1.0, xanchor="right", y=1.16, yanchor="bottom", showactive=True,
            buttons=[
                dict(label="measured", method="update", args=[{"y": absolute, "visible": [True] * n}, titles_abs]),
                dict(label="relative to SDPA", method="update",
                     args=[{"y": relative, "visible": [True] * (n - 1) + [False]}, titles_rel]),
            ],
        )],
        margin=dict(t=140),
    )
    fig.update_xaxes(type="log", title_text="sequence length T (tokens)", tickvals=Ts, ticktext=[f"{T:,}" for T in Ts])
    fig.update_yaxes(type="log", title_text="milliseconds", row=1, col=1)
    fig.update_yaxes(type="log", title_text="MiB", row=1, col=2)
    return fig


def _ms(ms: float) -> str:
    return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:.3g} ms"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
    return "\n".join([line(headers), "  ".join("-" * w for w in widths)] + [line(r) for r in rows])


def attention_table(record: dict[str, Any]) -> str:
    """Two tables from a saved record: median time per variant and T (with the ratio to SDPA with
    no position), and peak memory added by one call; then the agreement and compile notes."""
    res = _check_record(record, "attention_position")
    Ts, series = _attention_series(res)
    time_rows, ratio_rows, mem_rows = [], [], []
    for v, s in series.items():
        label = _SHORT_LABELS.get(v, v)
        time_rows.append([label] + [f"{ms:,.0f}" if ms >= 100 else f"{ms:.3g}" for ms in s["ms"]])
        ratio_rows.append([label] + [f"{res['ratio_to_sdpa'][str(T)][v]:.2f}" for T in Ts])
        mem_rows.append([label] + ["n/a" if mib is None else f"{mib:,.0f}" for mib in s["mib"]])
    mem_rows.append(["(H, T, T) bias, analytic"]
                    + [f"{res['bias_bytes_analytic'][str(T)] / 2**20:,.0f}" for T in Ts])
    head = [f"T = {T:,}" for T in Ts]
    blocks = [
        "median time per call, ms (SDPA = no position; Flex = FlexAttention, compiled)",
        _table(["variant"] + head, time_rows),
        "",
        "time / time of SDPA at the same T",
        _table(["variant"] + head, ratio_rows),
        "",
        f"peak memory added by one call, MiB ({res['memory_method']}; output included)",
        _table(["variant"] + head, mem_rows),
        "",
    ]
    notes: list[str] = []
    diffs = max(d for per_T in res["max_abs_diff"].values() for d in per_T.values())
    notes.append(f"materialised and FlexAttention forms agree to {diffs:.1e} (max abs difference of outputs; "
                 f"tolerance {res['tolerance']:.0e})")
    compile_s = [max(r["first_call_s"] - r["times"]["min_ms"] * 1e-3, 0.0) for r in res["rows"]
                 if r["variant"].endswith("flex")]
    if compile_s:
        notes.append(f"FlexAttention compile time per (score_mod, T), the first call's excess over the fastest: "
                     f"{min(compile_s):.1f} to {max(compile_s):.1f} s, not included above")
    return "\n".join(blocks + [w for n in notes for w in textwrap.wrap(n, 88, subsequent_indent="    ")])


def attention_summary(record: dict[str, Any]) -> str:
    """At the largest T of a saved record: time and peak memory of each position variant against
    SDPA with no position, and what materialising the bias adds over the FlexAttention form."""
    res = _check_record(record, "attention_position")
    Ts, series = _attention_series(res)
    T, i = Ts[-1], len(Ts) - 1
    base_ms, base_mib = series["sdpa"]["ms"][i], series["sdpa"]["mib"][i]
    lines = [f"at T = {T:,} (SDPA with no position: {_ms(base_ms)}"
             + (f", {base_mib:,.0f} MiB)" if base_mib is not None else ")")]
    for v in res["variants"]:
        if v == "sdpa":
            continue
        ms, mib = series[v]["ms"][i], series[v]["mib"][i]
        mem = "" if mib is None else f", {mib:,.0f} MiB"
        lines.append(f"  {_SHORT_LABELS.get(v, v):22s} {ms / base_ms:6.2f}x the time{mem}")
    bias = res["bias_bytes_analytic"][str(T)] / 2**20
    lines.append(f"  one (H, T, T) float32 bias tensor at this T: {bias:,.0f} MiB (analytic)")
    return "\n".join(lines)


def score_mod_overhead(record: dict[str, Any]) -> dict[str, dict[int, float]]:
    """What computing each bias inside FlexAttention costs, from a saved 'attention_position' record:
    median time of the `t5_flex` and `alibi_flex` variants over FlexAttention with no score_mod
    (`flex`), per T. The same compiled kernel runs in all three, so the ratio isolates the score_mod
    (the bucket arithmetic and table lookup for T5, a subtract and a multiply for ALiBi)."""
    res = _check_record(record, "attention_position")
    if "flex" not in res["variants"]:
        raise ValueError("this record has no FlexAttention variants (torch without flex_attention when it was made)")
    med = {(r["T"], r["variant"]): r["times"]["median_ms"] for r in res["rows"]}
    Ts = sorted({r["T"] for r in res["rows"]})
    return {v: {T: med[(T, v)] / med[(T, "flex")] for T in Ts} for v in ("t5_flex", "alibi_flex") if v in res["variants"]}


def score_mod_summary(record: dict[str, Any]) -> str:
    """`score_mod_overhead` as a small table, one row per T, with the record's device and threads."""
    over = score_mod_overhead(record)
    Ts = sorted(next(iter(over.values())))
    head = ["T"] + [_SHORT_LABELS[v] for v in over]
    rows = [[f"{T:,}"] + [f"{over[v][T]:.2f}x" for v in over] for T in Ts]
    return "\n".join([f"time / time of FlexAttention without a score_mod (medians; forward only, "
                      f"{record['device']}, {record['threads']} threads)", _table(head, rows)])


# ---------------------------------------------------------------------------
# RoPE benchmark
# ---------------------------------------------------------------------------

ROPE_LABELS: dict[str, str] = {
    "copy_into": "copy into a preallocated buffer",
    "readable": "apply_rotary, readable (eager)",
    "fused": "apply_rotary, fused (compiled)",
    "fused_into": "fused, into preallocated buffers (compiled)",
    "hf": "Hugging Face apply_rotary_pos_emb",
}
_ROPE_COLORS: dict[str, str] = {"copy_into": LINE_COLORS[4], "readable": LINE_COLORS[1], "fused": LINE_COLORS[0],
                                "fused_into": LINE_COLORS[3], "hf": LINE_COLORS[5]}
# Each fused kernel's ratio to its own floor (out-of-place against the clone, in place against copy_into)
# is `mlbook.benchmarks.rope.floor_ratios` / `floor_report`; the figure and table here show every
# implementation against the clone, copy_into among them.


def fig_rope_benchmark(record: dict[str, Any]) -> go.Figure:
    """Ratio to the copy of the same bytes, per implementation and tensor size, from a saved
    'rope_apply' record; a dropdown picks the dtype and pairing."""
    res = _check_record(record, "rope_apply")
    combos = list(dict.fromkeys(f"{c['dtype']}/{c['pairing']}" for c in res["cases"]))
    fig = go.Figure()
    owners: list[str] = []
    for k, combo in enumerate(combos):
        cases = [c for c in res["cases"] if f"{c['dtype']}/{c['pairing']}" == combo]
        x = [f"{c['mb_per_tensor']:g} MB" for c in cases]
        for v in ROPE_LABELS:
            if v not in cases[0]["ratio_to_copy"]:
                continue
            y = [c["ratio_to_copy"][v] for c in cases]
            fig.add_bar(x=x, y=y, name=ROPE_LABELS[v], marker_color=_ROPE_COLORS[v],
                        visible=k == 0, text=[f"{r:.2f}x" for r in y], textposition="outside",
                        hovertemplate=f"{ROPE_LABELS[v]}<br>%{{x}} per tensor<br>%{{y:.3f}} × the copy<extra></extra>")
            owners.append(combo)
    fig.add_hline(y=1.0, line_color="black", line_width=1.5)
    fig.add_hline(y=res["goal_ratio"], line_color=LINE_COLORS[2], line_dash="dash")
    ratios = [c["ratio_to_copy"][v] for c in res["cases"] for v in ("copy", *ROPE_LABELS) if v in c["ratio_to_copy"]]
    buttons = [dict(label=combo, method="update", args=[{"visible": [o == combo for o in owners]},
                                                        {"title.text": _rope_title(record, combo)}])
               for combo in combos]
    fig.update_layout(
        title=_rope_title(record, combos[0]), height=500, title_font_size=14,
        barmode="group", xaxis_title="size of q (and of k)",
        yaxis=dict(type="log", title="time / time of q.clone(), k.clone() (log)",
                   range=[np.log10(min(ratios) / 1.5), np.log10(max(ratios) * 2)]),
        annotations=[dict(text=(f"solid: the copy (1x); dashed: the goal ({res['goal_ratio']:g}x)<br>in place, "
                                "the floor is the copy into a buffer"), xref="paper", align="left",
                          yref="paper", x=0, y=1.02, xanchor="left", yanchor="bottom", showarrow=False,
                          font=dict(size=12))],
        legend=dict(orientation="h", y=-0.2, x=0),
        updatemenus=[dict(type="dropdown", x=1.0, xanchor="right", y=1.02, yanchor="bottom", buttons=buttons)],
        margin=dict(t=130),
    )
    return fig


def _rope_title(record: dict[str, Any], combo: str) -> str:
    shape = record["config"]["shapes"][0]
    return (f"RoPE on q and k (B={shape[0]}, H={shape[1]}, d_head={shape[3]}, T varies)<br>{combo}, "
            f"{record['device']} ({record['threads']} threads)")


def rope_table(record: dict[str, Any]) -> str:
    """Per case of a saved record: the copy's median time and every implementation's time as a
    multiple of it; then compile times and the fused kernel's agreement with the readable path."""
    res = _check_record(record, "rope_apply")
    variants = [v for v in ROPE_LABELS if any(v in c["ratio_to_copy"] for c in res["cases"])]
    rows = []
    for c in res["cases"]:
        cells = [f"{c['dtype']}/{c['pairing']}", f"{c['mb_per_tensor']:g} MB", _ms(c["times"]["copy"]["median_ms"])]
        cells += [f"{c['ratio_to_copy'][v]:.2f}x" if v in c["ratio_to_copy"] else "-" for v in variants]
        rows.append(cells)
    lines = ["time of each implementation / time of the copy (q.clone(), k.clone()), medians",
             _table(["dtype/pairing", "q size", "copy"] + variants, rows)]
    for key, comp in res["compile"].items():
        if "error" in comp:
            lines.append(f"fused kernel unavailable for {key}: {comp['error']}")
        else:
            lines.append(f"compile {key}: {comp['compile_s']:.1f} s ({'cold' if res['compile_cold'] else 'warm'} cache)")
    for v in ("fused", "fused_into"):
        diffs = [c[f"max_abs_diff_{v}_vs_readable"] for c in res["cases"]
                 if c.get(f"max_abs_diff_{v}_vs_readable") is not None]
        if diffs:
            lines.append(f"{v} vs readable: max abs difference {max(diffs):.1e}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Live-slider benchmark
# ---------------------------------------------------------------------------


def fig_slider_benchmark(record: dict[str, Any]) -> go.Figure:
    """p95 and worst redraw time of every live figure in a saved 'live_sliders' record, against the goal."""
    res = _check_record(record, "live_sliders")
    timed = {n: f for n, f in res["figures"].items() if f.get("p95_ms") is not None}
    names = sorted(timed, key=lambda n: timed[n]["p95_ms"])
    xs = [timed[n]["p95_ms"] for n in names] + [timed[n]["max_ms"] for n in names]
    fig = go.Figure()
    fig.add_bar(y=names, x=[timed[n]["p95_ms"] for n in names], orientation="h", name="p95 redraw",
                marker_color=LINE_COLORS[0], hovertemplate="%{y}<br>p95 %{x:.1f} ms<extra></extra>")
    fig.add_scatter(y=names, x=[timed[n]["max_ms"] for n in names], mode="markers", name="slowest redraw",
                    marker=dict(color=LINE_COLORS[5], symbol="x", size=9),
                    hovertemplate="%{y}<br>max %{x:.1f} ms<extra></extra>")
    fig.add_vline(x=res["goal_p95_ms"], line_dash="dash", line_color=LINE_COLORS[2],
                  annotation_text=f"goal {res['goal_p95_ms']:g} ms", annotation_position="top")
    label_on_log_axis(fig, "x")
    fig.update_layout(
        title=f"Live-figure redraw time on {record['device']} ({record['threads']} threads), kernel side",
        height=max(360, 26 * len(names) + 160), title_font_size=14,
        xaxis=dict(type="log", title="milliseconds per redraw",
                   range=[np.log10(min(min(xs), res["goal_p95_ms"]) / 2), np.log10(max(max(xs), res["goal_p95_ms"]) * 2)]),
        legend=dict(orientation="h", y=-0.15, x=0),
        margin=dict(l=260),
    )
    return fig


def slider_table(record: dict[str, Any], n: int = 5) -> str:
    """The n slowest live figures (by worst redraw), their p95, and the knobs of the worst redraw."""
    res = _check_record(record, "live_sliders")
    timed = {k: f for k, f in res["figures"].items() if f.get("max_ms") is not None}
    worst = sorted(timed, key=lambda k: -timed[k]["max_ms"])[:n]
    rows = [[k, f"{timed[k]['p95_ms']:,.0f}", f"{timed[k]['max_ms']:,.0f}", str(timed[k]["slowest_knobs"])[:34]]
            for k in worst]
    lines = [_table(["live figure", "p95 ms", "max ms", "slowest at"], rows)]
    lines.append(f"{len(timed)} live figures timed; {len(res['over_goal'])} over the {res['goal_p95_ms']:g} ms p95 goal")
    broken = {k: f for k, f in res["figures"].items() if f.get("errors") or f.get("error")}
    for k, f in broken.items():
        lines += textwrap.wrap(f"{k}: fails at {len(f.get('errors', [])) or 1} setting(s): "
                               f"{(f.get('errors') or [f.get('error')])[0]}", 88, subsequent_indent="    ")
    return "\n".join(lines)
