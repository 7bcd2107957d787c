"""Figures for section 5 (in production): the KV-cache calculator and the cache of real model families.

Each figure has one private build function behind two forms: `fig_*` (a plotly slider over a
short grid, static site) and `live_*` (ipywidgets sliders over every knob, live kernel, declared
with `core.live_figure`). Sizes
come from `mlbook.analysis.production`; the families from `mlbook.data.model_families`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from mlbook.analysis.interview import format_bytes
from mlbook.analysis.production import ACCELERATOR_BYTES, family_kv_plan, kv_cache_bytes, kv_cache_options
from mlbook.data.model_families import MODEL_FAMILIES, ModelFamily, positional_summary
from mlbook.transformer.validate import check_choice
from mlbook.viz.core import LINE_COLORS, choice_knob, grid_slider, int_knob, light_figure, live_figure

__all__ = [
    "ACCELERATOR_BYTES",
    "GPU_LINE_GIB",
    "GPU_LINE_LABEL",
    "KV_LAYOUTS",
    "kv_layout",
    "fig_kv_cache",
    "CONTEXTS",
    "live_kv_cache",
    "CACHE_FAMILIES",
    "family_cache_bytes",
    "fig_family_kv",
    "live_family_kv",
    "family_table_html",
    "kv_options_table",
]

# the dotted line, for scale: the smaller of the two "80 GB" accelerators (`ACCELERATOR_BYTES`), an H100 80GB's
# 79.65 GiB; an A100 80GB's 80 GiB is 0.4% above it, the same line at this scale
GPU_LINE_GIB = min(ACCELERATOR_BYTES.values()) / 2**30
GPU_LINE_LABEL = (f"one 80 GB accelerator (H100: {ACCELERATOR_BYTES['H100 80GB'] / 2**30:.2f} GiB, "
                  f"A100: {ACCELERATOR_BYTES['A100 80GB'] / 2**30:g} GiB)")
_CONTEXTS = 2 ** np.arange(10, 21)  # 1,024 .. 1,048,576 tokens
CONTEXTS: tuple[int, ...] = tuple(int(c) for c in _CONTEXTS)  # the live sliders' context lengths


# The static slider's steps: the options of a 32-head, d_head 128 model (`kv_cache_options`), largest first.
KV_LAYOUTS: dict[str, tuple[int, float]] = {
    o.label: (o.n_kv_heads, o.bytes_per_value)
    for o in sorted(kv_cache_options(kv_heads=(32, 8, 1), bytes_per_value=(2.0, 1.0, 0.5)), key=lambda o: -o.total)
}


def kv_layout(label: str) -> tuple[int, float]:
    """(n_kv_heads, bytes_per_value) of a KV_LAYOUTS label such as 'GQA-8, 8-bit'."""
    check_choice("layout", label, tuple(KV_LAYOUTS))
    return KV_LAYOUTS[label]


def _kv_cache(n_layers: int = 32, n_kv_heads: int = 32, d_head: int = 128, bytes_per_value: float = 2.0,
              context_len: int = 131072, batch: int = 1, label: str | None = None) -> go.Figure:
    per_token = kv_cache_bytes(n_layers, n_kv_heads, d_head, bytes_per_value)
    total = kv_cache_bytes(n_layers, n_kv_heads, d_head, bytes_per_value, context_len, batch)
    x = [int(c) for c in _CONTEXTS]
    ref = [kv_cache_bytes(32, 32, 128, 2.0, c, batch) / 2**30 for c in x]
    ys = [kv_cache_bytes(n_layers, n_kv_heads, d_head, bytes_per_value, c, batch) / 2**30 for c in x]
    if label is None:
        bits = {2.0: "16-bit", 1.0: "8-bit", 0.5: "4-bit"}.get(float(bytes_per_value), f"{8 * bytes_per_value:g}-bit")
        label = f"{n_kv_heads} KV heads, {bits}"
    gpu = GPU_LINE_GIB
    traces = [
        dict(type="scatter", x=x, y=ref, mode="lines", name="7B-class reference: 32 layers, MHA 32 x 128, 16-bit",
             line=dict(color="grey", dash="dash", width=2),
             hovertemplate="reference<br>%{x:,} tokens<br>%{y:.3g} GiB<extra></extra>"),
        dict(type="scatter", x=x, y=ys, mode="lines", name=f"this cache: {label}",
             line=dict(color=LINE_COLORS[0], width=3),
             hovertemplate="this cache<br>%{x:,} tokens<br>%{y:.3g} GiB<extra></extra>"),
        dict(type="scatter", x=[context_len], y=[total / 2**30], mode="markers+text", name="chosen context",
             marker=dict(color=LINE_COLORS[5], size=13, symbol="diamond"),
             text=[format_bytes(total).split(" (")[0]], textposition="top left", textfont=dict(size=13),
             hovertemplate="%{x:,} tokens<br>%{y:.4g} GiB<extra></extra>"),
    ]
    return light_figure(
        traces,
        title=dict(text=(f"{n_layers} layers x {n_kv_heads} KV heads x d_head {d_head} x {bytes_per_value:g} B x 2 "
                         f"(K, V) = {format_bytes(per_token)} per token<br>{format_bytes(total).split(' (')[0]} for "
                         f"{context_len:,} tokens x batch {batch}"), font=dict(size=14)),
        height=520,
        xaxis=dict(type="log", title=dict(text="context length (tokens)"), tickvals=x[::2],
                   ticktext=[f"{c // 1024:,}k" if c < 2**20 else f"{c // 2**20}M" for c in x[::2]]),
        yaxis=dict(type="log", title=dict(text="KV cache (GiB)"), range=[-3, 4.5]),
        shapes=[dict(type="line", xref="paper", x0=0, x1=1, y0=gpu, y1=gpu,
                     line=dict(color=LINE_COLORS[2], dash="dot", width=2))],
        annotations=[dict(text=GPU_LINE_LABEL, xref="paper", x=0.01, xanchor="left", y=np.log10(gpu),
                          yanchor="bottom", showarrow=False, font=dict(color=LINE_COLORS[2], size=12))],
        legend=dict(x=0.01, y=0.99, xanchor="left", yanchor="top", bgcolor="rgba(255,255,255,0.85)", font=dict(size=12)),
        margin=dict(t=90),
    )


def _kv_for_layout(layout: str, n_layers: int, d_head: int, context_len: int, batch: int) -> go.Figure:
    n_kv_heads, bytes_per_value = kv_layout(layout)
    return _kv_cache(n_layers, n_kv_heads, d_head, bytes_per_value, context_len, batch, label=layout)


def fig_kv_cache(
    layout: str = "MHA, 16-bit", *, n_layers: int = 32, d_head: int = 128, context_len: int = 131072, batch: int = 1,
    layouts: Sequence[str] | None = tuple(KV_LAYOUTS),
) -> go.Figure:
    """KV cache against context length for a 32-head model; slider over the cache layout (KV heads
    and bytes per value, `KV_LAYOUTS`). layouts=None gives the single figure for `layout`."""
    fixed = {"n_layers": n_layers, "d_head": d_head, "context_len": context_len, "batch": batch}
    if layouts is None:
        return _kv_for_layout(layout, **fixed)
    values = list(layouts)
    for v in values:
        kv_layout(v)
    if layout not in values:
        raise ValueError(f"layout {layout!r} must be one of the slider's layouts {values}")
    return grid_slider(_kv_for_layout, "layout", values, active=values.index(layout), label="cache layout", fixed=fixed)


@live_figure(int_knob("n_layers", 32, 1, 128, 1, "layers"),
             choice_knob("n_kv_heads", 32, (1, 2, 4, 8, 16, 32, 64, 128), "KV heads"),
             choice_knob("d_head", 128, (64, 80, 96, 128, 256), "d_head"),
             choice_knob("bytes_per_value", 2.0, (0.25, 0.5, 1.0, 2.0, 4.0), "bytes per value"),
             choice_knob("context_len", 131072, CONTEXTS, "context (tokens)"),
             int_knob("batch", 1, 1, 256, 1, "batch"),
             caption="KV cache for the chosen layers, KV heads, d_head, bytes per value, context and batch.",
             alt="Log-log line of KV-cache size against context length, with a dashed 7B-class reference and a marker.")
def live_kv_cache(n_layers: int, n_kv_heads: int, d_head: int, bytes_per_value: float, context_len: int,
                  batch: int) -> go.Figure:
    """Live KV-cache calculator: all six knobs."""
    return _kv_cache(n_layers, n_kv_heads, d_head, bytes_per_value, context_len, batch)


# ---------------------------------------------------------------------------
# Real model families
# ---------------------------------------------------------------------------

# Decoder-only families (they keep a KV cache); encoders (BERT, ModernBERT, Swin) and T5 are left out.
CACHE_FAMILIES: tuple[ModelFamily, ...] = tuple(
    r for r in MODEL_FAMILIES if not r.encoder and r.scheme != "t5")


def family_cache_bytes(row: ModelFamily, context_len: int, bytes_per_value: float = 2.0, batch: int = 1) -> int:
    """KV-cache bytes of a family's checkpoint at context_len (`mlbook.analysis.production.family_kv_plan`):
    grouped-query heads, latent attention, and sliding or chunked layers that hold at most their window."""
    return family_kv_plan(row, bytes_per_value).bytes(context_len, batch)


def _cache_note(row: ModelFamily) -> str:
    kinds = row.layer_kinds
    n_slide, n_chunk = kinds.count("sliding_attention"), kinds.count("chunked_attention")
    notes = []
    if n_slide:
        notes.append(f"{n_slide} of {row.n_layers} layers hold at most {row.window:,} tokens")
    if n_chunk:
        notes.append(f"{n_chunk} of {row.n_layers} layers hold at most {row.chunk:,} tokens")
    n_linear = kinds.count("linear_attention")
    if n_linear:
        notes.append(f"{n_linear} of {row.n_layers} layers hold a fixed linear-attention state")
    if row.global_kv_heads is not None or row.global_d_head is not None:
        notes.append(f"full layers: {row.global_kv_heads or row.n_kv_heads} KV heads of width "
                     f"{row.global_d_head or row.d_head}")
    if row.kv_lora_rank is not None:
        notes.append(f"latent {row.kv_lora_rank} + rotary key {row.qk_rope_head_dim} per layer")
    return (" (" + "; ".join(notes) + ")") if notes else ""


def _family_kv(context_len: int = 131072, bytes_per_value: float = 2.0) -> go.Figure:
    rows = sorted(CACHE_FAMILIES, key=lambda r: family_cache_bytes(r, context_len, bytes_per_value))
    gib = [family_cache_bytes(r, context_len, bytes_per_value) / 2**30 for r in rows]
    per_token = [format_bytes(family_kv_plan(r, bytes_per_value).per_token) for r in rows]
    kind = ["MLA" if r.kv_lora_rank is not None else
            ("MHA" if r.n_kv_heads == r.n_heads else ("MQA" if r.n_kv_heads == 1 else f"GQA, {r.n_kv_heads} KV heads"))
            for r in rows]
    windowed = [r.layer_kinds.count("full_attention") < r.n_layers for r in rows]
    # a window (or a linear-attention layer) first: OLMo 3 keeps a key and value for every head but stops 24 of its
    # 32 layers at 4,096 tokens, and the bar's growth is what the colour tells
    colors = [LINE_COLORS[3] if w else LINE_COLORS[1] if r.n_kv_heads == r.n_heads and r.kv_lora_rank is None else
              LINE_COLORS[0] for r, w in zip(rows, windowed)]
    # family (checkpoint); a longer label shows the checkpoint alone, which names the family: at a phone's width
    # a longer one narrows the plot until the slider's label runs off the figure
    labels = [f"{r.name} ({r.checkpoint})" if len(r.name) + len(r.checkpoint) <= 29 else r.checkpoint for r in rows]
    notes = [_cache_note(r) for r in rows]
    beyond = ["" if r.max_len is None or context_len <= r.max_len else f"; past its {r.max_len:,}-token limit"
              for r in rows]
    gpu = GPU_LINE_GIB
    bar = dict(
        type="bar", y=labels, x=gib, orientation="h", marker=dict(color=colors),
        text=[f"{g:,.3g} GiB" for g in gib], textposition="outside", cliponaxis=False,
        customdata=[list(c) for c in zip(per_token, kind, [n + b for n, b in zip(notes, beyond)])],
        hovertemplate="%{y}<br>%{customdata[1]}<br>%{customdata[0]} per token%{customdata[2]}<br>%{x:.3g} GiB<extra></extra>",
    )
    return light_figure(
        [bar],
        title=dict(text=(f"KV cache of one sequence at {context_len:,} tokens, {bytes_per_value:g} bytes per value<br>"
                         "<sup>pink: windowed or linear-attention layers cap part of it; otherwise<br>"
                         "orange: a key and value for every head; blue: grouped-query or latent</sup>"),
                   font=dict(size=14)),
        height=860,
        xaxis=dict(type="log", title=dict(text="KV cache per sequence (GiB, log scale)"), range=[-2, 3.6]),
        shapes=[dict(type="line", yref="paper", y0=0, y1=1, x0=gpu, x1=gpu,
                     line=dict(color=LINE_COLORS[2], dash="dot", width=2))],
        annotations=[dict(text=f"H100 80GB: {gpu:.2f} GiB", yref="paper", y=1.0, yanchor="bottom", x=np.log10(gpu),
                          showarrow=False,
                          font=dict(color=LINE_COLORS[2], size=12))],
        margin=dict(l=230, r=40, t=120),
    )


def fig_family_kv(context_len: int = 131072, *, bytes_per_value: float = 2.0,
                  contexts: Sequence[int] | None = (4096, 8192, 32768, 131072)) -> go.Figure:
    """One sequence's KV cache for each decoder family's checkpoint; slider over the context length."""
    if contexts is None:
        return _family_kv(context_len, bytes_per_value)
    values = sorted(set(contexts) | {context_len})
    return grid_slider(_family_kv, "context_len", values, active=values.index(context_len), label="context (tokens)",
                       fixed={"bytes_per_value": bytes_per_value})


@live_figure(choice_knob("context_len", 131072, CONTEXTS, "context (tokens)"),
             choice_knob("bytes_per_value", 2.0, (0.25, 0.5, 1.0, 2.0), "bytes per value"),
             caption="KV cache of each family's checkpoint for the chosen context and bytes per value.",
             alt=("Horizontal bars of KV-cache size per model family, log scale: multi-head in orange, grouped-query "
                  "or latent in blue, models with windowed or linear-attention layers in pink."))
def live_family_kv(context_len: int, bytes_per_value: float) -> go.Figure:
    """Live form of `fig_family_kv`: context length and bytes per value."""
    return _family_kv(context_len, bytes_per_value)


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------


def _link_label(url: str) -> str:
    """What a row's source link opens: documentation, a released config (a config.json on the Hugging Face hub,
    or a copy of one), a model card (a hub model page), a release post (a blog), code (a GitHub source file), or
    a paper."""
    if "/docs/" in url:
        return "docs"
    if "/blog/" in url or "/blog" == url[-5:]:
        return "post"
    if url.split("#")[0].endswith(".json"):
        return "config"
    if "huggingface.co" in url and "/papers/" not in url:
        return "model card"
    if "github.com" in url:
        return "code"
    return "paper"


def family_table_html(rows: Sequence[ModelFamily] = MODEL_FAMILIES) -> str:
    """The model-family table as HTML: `positional_summary` per row (the checkpoint under the family,
    trained and maximum length in one cell), with links to its sources and its notes on hover."""
    import html

    heads = ("family", "scheme", "base", "scaling", "trained / max length", "buckets, slopes, layers", "attention",
             "sources")
    body = []
    for row in rows:
        c = {k: html.escape(v) for k, v in positional_summary(row).items()}
        links = ", ".join(
            f'<a href="{html.escape(u)}">{_link_label(u)}</a>' for u in row.urls)
        cells = (f"<b>{c['family']}</b><br><small>{c['checkpoint']}</small>", c["scheme"], c["base"], c["scaling"],
                 f"{c['original length']} / {c['max length']}", c["buckets / slopes / layers"], c["attention"], links)
        body.append(f'<tr title="{html.escape(row.notes)}">' + "".join(f"<td>{x}</td>" for x in cells) + "</tr>")
    return ('<div style="overflow-x:auto"><table class="mlbook-table" style="font-size:0.8em">'
            "<thead><tr>" + "".join(f"<th>{h}</th>" for h in heads) + "</tr></thead><tbody>" + "".join(body)
            + "</tbody></table></div>")


def kv_options_table(n_layers: int = 32, n_heads: int = 32, d_head: int = 128, context_len: int = 131072,
                     batch: int = 1) -> str:
    """`kv_cache_options` as text: layout, bytes per token, per sequence, and the fraction of multi-head 16-bit."""
    opts = kv_cache_options(n_layers, n_heads, d_head, context_len, batch)
    width = max(len(o.label) for o in opts)
    lines = [f"{n_layers} layers, {n_heads} query heads of {d_head}, {context_len:,} tokens, batch {batch}",
             f"{'layout':<{width}}  {'per token':>10}  {'per sequence':>22}  {'of MHA 16-bit':>13}"]
    for o in opts:
        lines.append(f"{o.label:<{width}}  {format_bytes(o.per_token):>10}  {format_bytes(o.total):>22}  "
                     f"{o.relative:>13.4g}")
    return "\n".join(lines)
