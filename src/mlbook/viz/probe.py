"""Figures for section 5.2, probing a real model.

    fig_rotation_check    per layer, how far the library's rotation of the model's q is from the
                          model's own: the checkpoint's layout, the other one, converted channels (log
                          scale), with the float32 rounding bound for the captured length
    fig_sink_mass         attention mass on the first token, layer by head
    fig_pair_norms        mean norm of each frequency pair of q and k; slider over the layer
    fig_position_loss     next-token loss in windows of positions, as shipped and with a scaling override

Numbers come from `mlbook.analysis.probe`; this module only arranges and draws them. Every title
carries the model's label, so a figure of the tiny random model says so.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from mlbook.analysis.probe import PairingCheck, PairNorms, PositionLoss, SinkMass
from mlbook.viz.core import LINE_COLORS, SEQUENTIAL, grid_slider, legend_below, round_array

__all__ = [
    "ERROR_FLOOR",
    "fig_rotation_check",
    "fig_sink_mass",
    "fig_pair_norms",
    "fig_position_loss",
]

ERROR_FLOOR = 1e-6  # errors below this (float32 rounding, ~1e-7, which varies by CPU) are drawn at it


def _check_label(label: object) -> str:
    if not isinstance(label, str) or not label.strip():
        raise ValueError("label must name the model (e.g. ProbeModel.label), so the figure says what it shows")
    return label


def fig_rotation_check(check: PairingCheck, label: str) -> go.Figure:
    """Bars per layer: max |library rotation - model's rotation| of q and k, relative to max |q|, |k|, for
    the checkpoint's own layout (`hf_rope_pairing`, labelled "the model's"), the other layout (the porting
    bug), and the other layout after moving the channels; a dotted line at the float32 rounding bound."""
    if not isinstance(check, PairingCheck):
        raise TypeError(f"check must be a PairingCheck (mlbook.analysis.probe.pairing_check), got {type(check).__name__}")
    label = _check_label(label)
    cases = ((check.right, f"{check.right.pairing} layout (the model's)", LINE_COLORS[0], ""),
             (check.wrong, f"{check.wrong.pairing}, channels as they are (porting bug)", LINE_COLORS[5], "/"),
             (check.converted, f"{check.converted.pairing}, channels converted", LINE_COLORS[2], "."))
    layers = np.array(check.right.layers or range(len(check.right.error_q)))  # the model's indices (NoPE ones absent)
    fig = go.Figure()
    for c, name, color, pattern in cases:
        err = np.maximum(c.error_q, c.error_k) / c.scale  # (L,) relative
        fig.add_bar(x=layers, y=np.maximum(err, ERROR_FLOOR), name=name,
                    marker=dict(color=color, pattern_shape=pattern),
                    hovertemplate="layer %{x}: relative error %{y:.2e}<extra>" + name + "</extra>")
    bound = check.right.bound
    if np.isfinite(bound):  # what float32 rounding explains at the captured length (analysis.probe.rounding_bound)
        fig.add_hline(y=max(bound, ERROR_FLOOR), line=dict(color="gray", dash="dot"),
                      annotation_text=f"float32 rounding bound {bound:.1e}", annotation_position="top left",
                      annotation_font_size=11)
    fig.update_layout(
        title=f"The library's rotation against the model's<br><sup>{label}</sup>", title_font_size=14, height=480,
        barmode="group", xaxis_title="layer", yaxis_title="max |ours - model's| / max |q|, |k|",
        yaxis_type="log", yaxis_exponentformat="power", xaxis=dict(tickmode="linear", dtick=1 if len(layers) <= 12 else 4),
    )
    return legend_below(fig, height=480, rows=3, gap=70)


def fig_sink_mass(sink: SinkMass, label: str) -> go.Figure:
    """Heatmap, layer by head, of the mean attention weight on the first token (0..1)."""
    if not isinstance(sink, SinkMass):
        raise TypeError(f"sink must be a SinkMass (mlbook.analysis.probe.sink_mass), got {type(sink).__name__}")
    label = _check_label(label)
    L, H = sink.mass.shape
    ids = list(sink.layers or range(L))  # the model's index of each row (NoPE layers are not captured)
    windowed = sorted({w for w in sink.windows if w is not None and w < sink.T})
    slides = "".join(f"; window {w} (layers {[ids[j] for j, x in enumerate(sink.windows) if x == w]}): "
                     f"{float(sink.baseline[sink.windows.index(w)]):.3f}" for w in windowed)
    fig = go.Figure(go.Heatmap(
        z=round_array(sink.mass), x=np.arange(H), y=np.array(ids), zmin=0.0, zmax=1.0, colorscale=SEQUENTIAL,
        customdata=round_array(sink.ratio, 1),
        colorbar=dict(title=dict(text="weight on token 0", side="right")),
        hovertemplate="layer %{y}, head %{x}: %{z:.3f} on the first token (%{customdata}× uniform)<extra></extra>",
    ))
    fig.update_layout(
        title=(f"Attention on the first token, queries {sink.q_start}..{sink.T - 1}"
               f"<br><sup>{label}; uniform attention: {sink.uniform:.3f}{slides}</sup>"),
        title_font_size=14, height=max(320, 60 + 18 * L), xaxis_title="head", yaxis_title="layer",
        xaxis=dict(tickmode="linear", dtick=1 if H <= 16 else 4), yaxis=dict(autorange="reversed"),
    )
    return fig


def _pair_norms(norms: PairNorms, label: str, layer: int | str) -> go.Figure:
    if layer == "all":
        q, k, which = norms.mean_q, norms.mean_k, "all layers"
    else:
        row = list(norms.layers or range(norms.q.shape[0])).index(int(layer))  # the model's layer index -> row
        q, k, which = norms.q[row].mean(0), norms.k[row].mean(0), f"layer {layer}"
    P = q.shape[0]
    pairs = np.arange(P)
    lam = norms.wavelengths
    hover = [f"{w:,.1f}" for w in lam]
    fig = go.Figure()
    for y, name, color, dash in ((q, "query", LINE_COLORS[0], "solid"), (k, "key", LINE_COLORS[1], "dash")):
        fig.add_scatter(x=pairs, y=round_array(y, 4), name=name, mode="lines+markers",
                        line=dict(color=color, dash=dash), customdata=hover,
                        hovertemplate="pair %{x} (wavelength %{customdata} tokens): %{y:.3f}<extra>" + name + "</extra>")
    slow = np.flatnonzero(lam > norms.trained_len)
    if slow.size:  # the pairs that do not complete one turn within the trained length
        fig.add_vrect(x0=slow[0] - 0.5, x1=P - 0.5, fillcolor="rgba(128,128,128,0.15)", line_width=0)
        fig.add_annotation(x=(slow[0] + P - 1) / 2, y=1.0, yref="paper", yanchor="bottom", showarrow=False,
                           text=f"wavelength > anchor length {norms.trained_len:,}", font_size=11)
    top = float(max(norms.q.mean(1).max(), norms.k.mean(1).max(), norms.mean_q.max(), norms.mean_k.max()))
    fig.update_layout(
        title=f"Mean norm of each frequency pair, {which}<br><sup>{label}</sup>", title_font_size=14, height=500,
        xaxis_title="frequency pair (0 = fastest)", xaxis=dict(range=[-0.5, P - 0.5]),
        yaxis_title="mean pair norm √(a² + b²)", yaxis_range=[0, 1.1 * top],
    )
    return legend_below(fig, height=500, rows=1)


def fig_pair_norms(norms: PairNorms, label: str, *, layer: int | str = "all") -> go.Figure:
    """Lines over the frequency pairs: q's and k's pair norms averaged over heads, for all layers
    together or one layer; a slider steps through "all" and each layer."""
    if not isinstance(norms, PairNorms):
        raise TypeError(f"norms must be a PairNorms (mlbook.analysis.probe.pair_norms), got {type(norms).__name__}")
    label = _check_label(label)
    ids = list(norms.layers or range(norms.q.shape[0]))  # the model's layer indices (NoPE layers are not captured)
    values: list[int | str] = ["all", *ids]
    if layer not in values:
        raise ValueError(f"layer must be 'all' or one of the captured layers {ids}, got {layer!r}")
    fig = grid_slider(_pair_norms, "layer", values, active=values.index(layer), label="layer",
                      fixed={"norms": norms, "label": label})
    fig.layout.sliders[0].update(pad=dict(t=60))
    return fig


def fig_position_loss(losses: Sequence[PositionLoss], label: str) -> go.Figure:
    """Lines of the windowed next-token loss against position, one per setting, and the anchor length L (the
    pre-extension length the config anchors its scaling at, `analysis.probe.trained_length`)."""
    label = _check_label(label)
    losses = list(losses)
    if not losses or not all(isinstance(x, PositionLoss) for x in losses):
        raise TypeError("losses must be a non-empty sequence of PositionLoss (mlbook.analysis.probe.loss_by_position)")
    fig = go.Figure()
    for j, pl in enumerate(losses):
        centre = pl.starts + (pl.window - 1) / 2
        fig.add_scatter(x=centre, y=round_array(pl.loss, 4), name=pl.label, mode="lines+markers",
                        line=dict(color=LINE_COLORS[j % len(LINE_COLORS)], dash=("solid", "dash", "dot")[j % 3]),
                        hovertemplate="positions %{x:,.0f} ± " + f"{pl.window // 2}" + ": %{y:.3f} nats<extra>"
                        + pl.label + "</extra>")
    L = losses[0].trained_len
    fig.add_vline(x=L, line=dict(color="gray", dash="dot"))
    fig.add_annotation(x=L, y=1.0, yref="paper", yanchor="bottom", showarrow=False,
                       text=f"anchor length L = {L:,}", font_size=11)
    fig.update_layout(
        title=f"Next-token loss by position, window {losses[0].window:,}<br><sup>{label}</sup>", title_font_size=14,
        height=440, xaxis_title="position in the text (tokens)", yaxis_title="mean loss (nats)",
    )
    return legend_below(fig, height=440, rows=len(losses), gap=70)
