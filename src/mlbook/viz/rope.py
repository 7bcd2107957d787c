"""Figures for section 2.4 (RoPE): rotation diagram, frequency bands, pairings, porting bug,
decay with distance, angle precision.

One function per figure, in the pattern of `mlbook.viz.absolute`: a private build function
(one set of knob values, one figure) behind two public forms,

    fig_x(..., value, grid=...)   a plotly slider over a short precomputed grid (static site);
                                  grid=None gives the single figure at `value`
    live_x(...)                   ipywidgets sliders over the same build function, declared with
                                  `live_figure`; show with `show_live`

Every number comes from `mlbook.analysis.rope` (which calls `mlbook.transformer`); this module
only arranges, rounds and draws. Colours: Okabe-Ito lines (`LINE_COLORS`) and Viridis.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Sequence

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import torch

from mlbook.analysis.rope import (
    PRECISIONS,
    angle_error,
    decay_curve,
    frequency_bands,
    pair_rotation,
    pair_score_curve,
    pairing_permutation,
    porting_bug,
    PortingReport,
)
from mlbook.transformer.validate import check_even_d, check_int
from mlbook.viz.absolute import BASES
from mlbook.viz.core import (
    LINE_COLORS,
    SEQUENTIAL,
    format_base,
    int_knob,
    knob_figure,
    live_figure,
    log_knob,
    note_adjustment,
    round_array,
)

__all__ = [
    "Q_PAIR",
    "K_PAIR",
    "SHIFTS",
    "OFFSETS",
    "BAND_PAIRS",
    "PAIRING_D_HEADS",
    "ERROR_PAIRS",
    "band_pairs",
    "decay_distances",
    "fig_rotation_shift",
    "fig_rotation_offset",
    "live_rotation",
    "fig_frequency_bands",
    "live_frequency_bands",
    "fig_pairings",
    "live_pairings",
    "fig_porting_bug",
    "live_porting_bug",
    "fig_decay",
    "live_decay",
    "fig_angle_error",
    "live_angle_error",
]

# The 2-D content of pair i of q and k before any rotation: q at about 15 degrees, k at about 50.
Q_PAIR: tuple[float, float] = (1.0, 0.27)
K_PAIR: tuple[float, float] = (0.55, 0.65)
SHIFTS: tuple[int, ...] = (0, 1, 2, 3, 5, 10, 100)  # common shift c added to both positions
OFFSETS: tuple[int, ...] = (-3, -2, -1, 0, 1, 2, 3, 4, 6)  # n - m
BAND_PAIRS: tuple[int, ...] = (0, 8, 16, 24, 31)  # five pairs of d_head = 64
PAIRING_D_HEADS: tuple[int, ...] = (4, 8, 12, 16)
ERROR_PAIRS: tuple[int, ...] = (0, 1, 8, 16, 31)
_TEMPLATE = "plotly_white"
HEATMAP_MAX_COLUMNS = 512  # positions drawn in the live angle heatmap (T up to 1,024)


def band_pairs(d_head: int) -> tuple[int, ...]:
    """Five pairs spread over a head: 0, d/8, d/4, 3d/8 and the last, d/2 - 1 (0, 8, 16, 24, 31 at 64)."""
    check_even_d("d_head", d_head)
    half = d_head // 2
    return tuple(sorted({min(j * half // 4, half - 1) for j in range(5)}))


def _deg(rad: float) -> float:
    return math.degrees(rad)


def _figure(data: list[dict[str, Any]], layout: dict[str, Any]) -> go.Figure:
    """One Figure from trace dicts and a layout dict, without a template (see `_styled`).

    Building from dicts in one call is several times faster than adding traces one by one, which
    matters because a static slider builds one figure per grid value.
    """
    return go.Figure(data=data, layout={"title_font_size": 14, **layout})


def _styled(fig: go.Figure) -> go.Figure:
    """Apply the page template once, to the figure that is shown (slider frames carry only data and title).

    The template goes in as plain JSON without plotly's validation (`update_layout(template=...)`
    validates and deep-copies the whole template, about 35 ms of a live redraw); same figure.
    """
    d = fig.to_plotly_json()
    return go.Figure(data=d["data"], layout={**d["layout"], "template": _template_json()},
                     frames=d.get("frames") or None, _validate=False)


@functools.lru_cache(maxsize=1)
def _template_json() -> dict[str, Any]:
    return pio.templates[_TEMPLATE].to_plotly_json()


@functools.lru_cache(maxsize=8)
def _porting_report(base: float) -> PortingReport:
    """The porting experiment at one base, kept: moving the head slider only picks another head of it."""
    return porting_bug(d_model=128, n_heads=4, T=48, base=base)


def _title(text: str, **kw: Any) -> dict[str, Any]:
    return {"text": text, "x": 0.0, "xanchor": "left", "y": 1.0, "yanchor": "top", "yref": "container",
            "pad": {"t": 12}, **kw}


def _panel_title(text: str, x: float, y: float = 1.0) -> dict[str, Any]:
    return dict(text=text, x=x, y=y, xref="paper", yref="paper", xanchor="center", yanchor="bottom",
                showarrow=False, font=dict(size=13))


# ---------------------------------------------------------------------------
# Rotation diagram: one pair of q and k in the plane
# ---------------------------------------------------------------------------


def _rotation(
    m: int, n: int, pair: int = 0, d_head: int = 64, base: float = 10000.0, *,
    reference: tuple[int, int] | None = None, q: Sequence[float] = Q_PAIR, k: Sequence[float] = K_PAIR,
    curve_offsets: Sequence[int] | None = None,
) -> go.Figure:
    """Left: q at m and k at n as arrows in pair i's plane. Right: this pair's score against n - m."""
    check_int("m", m, 0)
    check_int("n", n, 0)
    now = pair_rotation(q, k, m, n, pair=pair, d_head=d_head, base=base)
    rm, rn = reference or (m, n)
    ref = pair_rotation(q, k, rm, rn, pair=pair, d_head=d_head, base=base)
    if curve_offsets is None:
        curve_offsets = range(min(-12, n - m - 2), max(12, n - m + 2) + 1)
    offsets = list(curve_offsets)
    scores = pair_score_curve(q, k, offsets, pair=pair, d_head=d_head, base=base)
    size = math.hypot(*q) * math.hypot(*k)
    between = now.angle_between
    t = np.linspace(0, 2 * math.pi, 73)
    arc = np.linspace(now.angle_q, now.angle_q + between, 40)
    mid = now.angle_q + between / 2
    data: list[dict[str, Any]] = [
        dict(type="scatter", x=round_array(np.cos(t)), y=round_array(np.sin(t)), mode="lines", hoverinfo="skip",
             line=dict(color="#bbbbbb", width=1), name="unit circle", showlegend=False),
    ]
    for vec, color, name in ((ref.q_m, LINE_COLORS[0], f"q at m = {rm}"), (ref.k_n, LINE_COLORS[1], f"k at n = {rn}")):
        xy = round_array(np.array(vec))
        data.append(dict(type="scatter", x=[0, xy[0]], y=[0, xy[1]], mode="lines", opacity=0.55, hoverinfo="skip",
                         line=dict(color=color, width=2, dash="dot"), name=f"{name} (dotted)"))
    for vec, color, name in ((now.q_m, LINE_COLORS[0], "q rotated to m"), (now.k_n, LINE_COLORS[1], "k rotated to n")):
        xy = round_array(np.array(vec))
        data.append(dict(
            type="scatter", x=[0, xy[0]], y=[0, xy[1]], mode="lines+markers", line=dict(color=color, width=4),
            marker=dict(symbol="arrow", angleref="previous", size=[0, 16], color=color), name=name,
            hovertemplate=f"{name}<br>(a, b) = (%{{x}}, %{{y}})<extra></extra>",
        ))
    data += [
        dict(type="scatter", x=round_array(0.25 * np.cos(arc)), y=round_array(0.25 * np.sin(arc)), mode="lines",
             line=dict(color=LINE_COLORS[2], width=3), name="angle from q to k", hoverinfo="skip"),
        dict(type="scatter", x=[round(0.45 * math.cos(mid), 3)], y=[round(0.45 * math.sin(mid), 3)], mode="text",
             text=[f"{_deg(between):+.0f}°"], textfont=dict(size=14, color=LINE_COLORS[2]), showlegend=False,
             hoverinfo="skip"),
        dict(type="scatter", x=offsets, y=round_array(np.array(scores)), mode="lines+markers", xaxis="x2", yaxis="y2",
             line=dict(color="#888888", width=1), marker=dict(size=5, color="#444444"),
             name="pair score at each offset", hovertemplate="n − m = %{x}<br>score %{y}<extra></extra>"),
        dict(type="scatter", x=[n - m], y=[round(now.score, 3)], mode="markers", xaxis="x2", yaxis="y2",
             marker=dict(size=15, color=LINE_COLORS[5], symbol="diamond"), name="this (m, n)",
             hovertemplate="n − m = %{x}<br>score %{y}<extra></extra>"),
    ]
    layout = dict(
        title=_title(f"q at m = {m}, k at n = {n} (n − m = {n - m:+d})<br>angle from q to k {_deg(between):+.1f}°, "
                     f"pair score {now.score:+.3f}"),
        height=640, margin=dict(t=170, b=60, l=60, r=20),
        legend=dict(orientation="h", x=0, y=1.1, yanchor="bottom", font_size=11),
        xaxis=dict(domain=[0, 0.46], range=[-1.25, 1.25], title="a = dim i of the pair", zeroline=True,
                   constrain="domain"),
        yaxis=dict(range=[-1.25, 1.25], title="b = dim i + d_head/2", scaleanchor="x", scaleratio=1, zeroline=True),
        xaxis2=dict(domain=[0.58, 1], title="offset n − m (tokens)", anchor="y2"),
        yaxis2=dict(anchor="x2", range=[-1.15 * size, 1.15 * size], title="pair score q_m·k_n"),
        annotations=[
            _panel_title(f"pair {pair} in its plane (θ_{pair} = {now.theta:.4g} rad per token)", 0.23),
            _panel_title(f"pair {pair}'s score against n − m", 0.79),
        ],
    )
    return _figure(data, layout)


def fig_rotation_shift(
    m: int = 0, n: int = 1, c: int = 3, *, pair: int = 0, d_head: int = 64, base: float = 10000.0,
    shifts: Sequence[int] | None = SHIFTS,
) -> go.Figure:
    """Slider over a common shift c: q at m + c, k at n + c. Both arrows turn, the angle and score do not.

    The dotted arrows are the unshifted case (m, n); with the defaults that is (0, 1) and the
    figure opens at c = 3, i.e. (3, 4).
    """
    def build(c: int) -> go.Figure:
        return _rotation(m + c, n + c, pair, d_head, base, reference=(m, n))

    return _styled(knob_figure(build, "c", c, shifts, "common shift c (tokens)", {}))


def fig_rotation_offset(
    m: int = 3, offset: int = 1, *, pair: int = 0, d_head: int = 64, base: float = 10000.0,
    offsets: Sequence[int] | None = OFFSETS,
) -> go.Figure:
    """Slider over n - m with q fixed at m: only k turns, and the angle and the score change.

    Offsets must keep n = m + offset >= 0. The dotted arrows show (m, m + 1).
    """
    check_int("m", m, 0)
    bad = [o for o in ([offset] + list(offsets or [])) if m + o < 0]
    if bad:
        raise ValueError(f"offsets {bad} put the key before position 0 (m = {m}); keep m + offset >= 0")
    lo = min([offset] + list(offsets or [])) - 2
    hi = max([offset] + list(offsets or [])) + 2
    curve = range(min(lo, -12), max(hi, 12) + 1)

    def build(offset: int) -> go.Figure:
        return _rotation(m, m + offset, pair, d_head, base, reference=(m, m + 1), curve_offsets=curve)

    return _styled(knob_figure(build, "offset", offset, offsets, "n − m (tokens)", {}))


@live_figure(
    int_knob("m", 3, 0, 200, label="m (query position)"), int_knob("n", 4, 0, 200, label="n (key position)"),
    int_knob("pair", 0, 0, lambda d_head: d_head // 2 - 1, label=lambda d_head: f"pair i (d_head = {d_head})"),
    log_knob("base", 10000.0, label="base"),
    caption="Pair i of q at position m and of k at position n, for any m, n, pair and base.",
    alt="Two arrows from the origin in a plane, the query and the key of one pair, with the angle between "
        "them marked, beside a curve of the pair's score against the offset n minus m.",
)
def live_rotation(m: int, n: int, pair: int, base: float, *, d_head: int = 64) -> go.Figure:
    """Live form of the rotation diagram: sliders for m, n, the pair index and the base."""
    return _styled(_rotation(m, n, pair, d_head, base))


# ---------------------------------------------------------------------------
# Frequency bands: sin(m theta_i) for five pairs, m theta_i mod 2 pi for all
# ---------------------------------------------------------------------------


def _bands(d_head: int, T: int, base: float, pairs: Sequence[int] | None = None) -> go.Figure:
    bands = frequency_bands(d_head, T, base)
    pairs = band_pairs(d_head) if pairs is None else tuple(pairs)
    bad = [i for i in pairs if not 0 <= i < d_head // 2]
    if bad:
        raise ValueError(f"pairs {bad} are out of range: d_head={d_head} has pairs 0..{d_head // 2 - 1}")
    wavelength = bands.wavelength.numpy()
    m = list(range(T))
    data: list[dict[str, Any]] = [
        dict(type="scatter", x=m, y=round_array(bands.sin[i]), mode="lines+markers" if T <= 32 else "lines",
             line=dict(color=LINE_COLORS[n % len(LINE_COLORS)], width=2), marker=dict(size=4),
             name=f"pair {i} (λ = {wavelength[i]:,.1f})",
             hovertemplate=f"pair {i}<br>m = %{{x}}<br>sin(m θ) = %{{y}}<extra></extra>")
        for n, i in enumerate(pairs)
    ]
    # past 512 positions the heatmap keeps every k-th one: a plot under 1,000 px wide cannot show more columns,
    # and the fast pairs' mod-2π pattern is aliased noise either way (the curves above keep every position)
    k = -(-T // HEATMAP_MAX_COLUMNS)
    data.append(dict(
        type="heatmap", z=round_array(bands.angle_mod[:, ::k], 2), x=m[::k], y=list(range(d_head // 2)),
        zmin=0, zmax=2 * math.pi,
        colorscale=SEQUENTIAL, xaxis="x2", yaxis="y2",
        colorbar=dict(title=dict(text="angle (rad)"), tickvals=[0, math.pi / 2, math.pi, 3 * math.pi / 2, 2 * math.pi],
                      ticktext=["0", "π/2", "π", "3π/2", "2π"], len=0.46, y=0.0, yanchor="bottom"),
        hovertemplate="position m = %{x}<br>pair i = %{y}<br>m θ_i mod 2π = %{z} rad<extra></extra>",
    ))
    last = d_head // 2 - 1
    layout = dict(
        title=_title(f"RoPE angles, d_head = {d_head}, base = {format_base(base)}<br>pair 0 turns every "
                     f"{wavelength[0]:.2f} tokens, pair {last} every {wavelength[last]:,.0f} "
                     "(λ: wavelength in tokens)"),
        height=860, margin=dict(t=160, b=60, l=60, r=20),
        legend=dict(orientation="h", x=0, y=1.06, yanchor="bottom", font_size=11),
        xaxis=dict(domain=[0, 1], range=[-0.5, T - 0.5], title="position m (tokens)", anchor="y"),
        yaxis=dict(domain=[0.64, 1], range=[-1.1, 1.1], title="sin(m θ_i)"),
        xaxis2=dict(domain=[0, 1], range=[-0.5, T - 0.5], title="position m (tokens)", anchor="y2"),
        yaxis2=dict(domain=[0, 0.46], anchor="x2", title="pair i", autorange="reversed"),
        annotations=[
            _panel_title(f"sin(m θ_i) for pairs {', '.join(map(str, pairs))}", 0.5, 1.0),
            _panel_title("m θ_i mod 2π for every pair: each colour cycle is one full turn", 0.5, 0.46),
        ],
    )
    return _figure(data, layout)


def fig_frequency_bands(
    d_head: int = 64, T: int = 64, base: float = 10000.0, *, pairs: Sequence[int] | None = BAND_PAIRS,
    bases: Sequence[float] | None = BASES,
) -> go.Figure:
    """sin(m theta_i) for a few pairs and a heatmap of m theta_i mod 2 pi; slider over the base."""
    fixed = {"d_head": d_head, "T": T, "pairs": None if pairs is None else tuple(pairs)}
    grid = None if bases is None else [float(b) for b in bases]
    return _styled(knob_figure(_bands, "base", float(base), grid, "base", fixed))


@live_figure(
    int_knob("d_head", 64, 8, 256, 8, "d_head"), int_knob("T", 64, 8, 1024, 8, "T (positions)"),
    log_knob("base", 10000.0, label="base"),
    caption="RoPE angles for the chosen d_head, number of positions T and base.",
    alt="Sine curves of five pairs over positions above a heatmap of every pair's angle modulo two pi.",
)
def live_frequency_bands(d_head: int, T: int, base: float) -> go.Figure:
    """Live form of `fig_frequency_bands`: any even d_head, T and base (five pairs spread over the head)."""
    return _styled(_bands(d_head, T, base))


# ---------------------------------------------------------------------------
# The two pairings
# ---------------------------------------------------------------------------


def _arc(x0: float, x1: float, y: float, height: float, n: int = 12) -> tuple[list[float], list[float]]:
    t = np.linspace(0, 1, n)
    return [round(v, 4) for v in x0 + (x1 - x0) * t], [round(v, 4) for v in y + height * 4 * t * (1 - t)]


def _pairings(d_head: int) -> go.Figure:
    check_even_d("d_head", d_head)
    half = d_head // 2
    perm = pairing_permutation(d_head).tolist()  # x_interleaved[s] = x_half[perm[s]]
    pos = lambda j: round((j + 0.5) / d_head, 4)  # noqa: E731  column j drawn at (j + 0.5) / d
    pair_half = [j % half for j in range(d_head)]  # half layout: dims i and i + d/2 are pair i
    pair_inter = [j // 2 for j in range(d_head)]  # interleaved: dims 2i and 2i + 1 are pair i
    y_half, y_inter = 1.0, 0.0
    data: list[dict[str, Any]] = []
    for y, sign, pair_of, name in ((y_half, 1, pair_half, "half"), (y_inter, -1, pair_inter, "interleaved")):
        xs: list[float | None] = []
        ys: list[float | None] = []
        for i in range(half):
            a, b = [j for j in range(d_head) if pair_of[j] == i]
            rise = 0.12 + 0.4 * i / max(half - 1, 1) if name == "half" else 0.14  # half: stagger the equal spans
            ax, ay = _arc(pos(a), pos(b), y + sign * 0.09, sign * rise)
            xs += ax + [None]
            ys += ay + [None]
        data.append(dict(type="scatter", x=xs, y=ys, mode="lines", line=dict(color="#777777", width=1.5),
                         name=f"{name}: arc joins the two dims of a pair", hoverinfo="skip"))
    xs, ys = [], []
    for s, j in enumerate(perm):
        xs += [pos(j), pos(s), None]
        ys += [y_half - 0.07, y_inter + 0.07, None]
    data.append(dict(type="scatter", x=xs, y=ys, mode="lines", line=dict(color=LINE_COLORS[4], width=1.2, dash="dot"),
                     name="same channel in the other layout (convert_rotary_weights)", hoverinfo="skip"))
    big = d_head <= 16
    for y, pair_of, label in ((y_half, pair_half, "half"), (y_inter, pair_inter, "interleaved")):
        data.append(dict(
            type="scatter", x=[pos(j) for j in range(d_head)], y=[y] * d_head, mode="markers+text",
            text=[str(j) for j in range(d_head)], textposition="middle center",
            textfont=dict(size=11 if big else 8, color=["white" if p < 0.6 * (half - 1) else "black" for p in pair_of]),
            marker=dict(size=24 if big else 14, color=pair_of, colorscale=SEQUENTIAL, cmin=0, cmax=max(half - 1, 1),
                        line=dict(color="white", width=1)),
            customdata=pair_of, name=f"{label}: dim j (label j, colour = pair i)",
            hovertemplate=f"{label} layout<br>dim %{{text}} belongs to pair %{{customdata}}<extra></extra>",
        ))
    layout = dict(
        title=_title(f"Which dims rotate together, d_head = {d_head}<br>the same {half} pairs and θ_i, "
                     "stored in different channels"),
        height=400, margin=dict(t=80, b=30, l=20, r=20), showlegend=False,
        xaxis=dict(range=[0, 1], showticklabels=False, showgrid=False, zeroline=False),
        yaxis=dict(range=[-0.6, 1.85], showticklabels=False, showgrid=False, zeroline=False),
        annotations=[
            dict(x=0, y=y_half + 0.72, xref="x", yref="y", xanchor="left", showarrow=False, font=dict(size=12),
                 text="<b>half</b> (GPT-NeoX, LLaMA): pair i = dims (i, i + d/2)"),
            dict(x=0, y=y_inter - 0.42, xref="x", yref="y", xanchor="left", showarrow=False, font=dict(size=12),
                 text="<b>interleaved</b> (RoFormer, GPT-J): pair i = dims (2i, 2i + 1)"),
        ],
    )
    return _figure(data, layout)


def fig_pairings(d_head: int = 8, *, d_heads: Sequence[int] | None = PAIRING_D_HEADS) -> go.Figure:
    """The two RoPE layouts as dims joined by arcs, and the permutation between them; slider over d_head."""
    return _styled(knob_figure(_pairings, "d_head", d_head, d_heads, "d_head", {}))


@live_figure(
    int_knob("d_head", 8, 2, 32, 2, "d_head"),
    caption="The two pairings for the chosen d_head.",
    alt="Two rows of numbered dimensions joined by arcs that show which dimensions rotate together.",
)
def live_pairings(d_head: int) -> go.Figure:
    """Live form of `fig_pairings`."""
    return _styled(_pairings(d_head))


# ---------------------------------------------------------------------------
# The porting bug
# ---------------------------------------------------------------------------


def _porting(head: int, report: PortingReport) -> go.Figure:
    check_int("head", head, 0)
    if head >= report.n_heads:
        raise ValueError(f"head must be in 0..{report.n_heads - 1}, got {head}")
    ref, raw, conv = report.curve_reference[head], report.curve_unconverted[head], report.curve_converted[head]
    dist = list(range(ref.numel()))
    err_raw = (report.scores_unconverted[head] - report.scores_reference[head]).abs().max().item()
    err_conv = (report.scores_converted[head] - report.scores_reference[head]).abs().max().item()
    scale = report.scores_reference[head].abs().max().item()
    lim = 1.1 * max(ref.abs().max().item(), raw.abs().max().item())
    data = [
        dict(type="scatter", x=dist, y=round_array(ref), mode="lines", line=dict(color=LINE_COLORS[0], width=3),
             name="reference: interleaved checkpoint, interleaved model"),
        dict(type="scatter", x=dist, y=round_array(conv), mode="markers",
             name="half model, q/k through convert_rotary_weights",
             marker=dict(color=LINE_COLORS[2], size=7, symbol="circle-open", line=dict(width=2))),
        dict(type="scatter", x=dist, y=round_array(raw), mode="lines",
             line=dict(color=LINE_COLORS[5], width=2, dash="dash"),
             name="half model, q/k loaded as they are"),
    ]
    layout = dict(
        title=_title(f"Head {head} of {report.n_heads} (d_head = {report.d_head}), random tokens: largest score "
                     f"{scale:.2f}<br>error unconverted up to {err_raw:.2f}, converted {err_conv:.0e}"),
        height=500, margin=dict(t=150, b=60, l=70, r=20),
        legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom", font_size=11),
        xaxis=dict(title="distance m − n from the query back to the key (tokens)"),
        yaxis=dict(title="score ⟨R_m q, R_n k⟩, one token repeated", range=[-lim, lim]),
    )
    return _figure(data, layout)


def fig_porting_bug(
    head: int = 0, *, report: PortingReport | None = None, heads: Sequence[int] | None = None
) -> go.Figure:
    """Score against distance for one head: reference, unconverted port, converted port; slider over the head.

    `report` defaults to `porting_bug(d_model=128, n_heads=4, T=48)`; heads defaults to all of them.
    """
    report = report or porting_bug(d_model=128, n_heads=4, T=48)
    grid = list(range(report.n_heads)) if heads is None else list(heads)
    return _styled(knob_figure(_porting, "head", head, grid, "head", {"report": report}))


@live_figure(
    int_knob("head", 0, 0, 3, label="head"), log_knob("base", 10000.0, 2.0, 7.0, "base"),
    caption="The porting bug for the chosen head and base.",
    alt="Line plot of attention score against distance for a reference model, a port without weight "
        "conversion (dashed) and a port with conversion (open circles on the reference line).",
)
def live_porting_bug(head: int, base: float) -> go.Figure:
    """Live form of `fig_porting_bug`: head and base (the layer is rebuilt for each base)."""
    return _styled(_porting(head, _porting_report(float(base))))


# ---------------------------------------------------------------------------
# Decay with distance
# ---------------------------------------------------------------------------


def decay_distances(max_distance: int = 16384, n: int = 240) -> np.ndarray:
    """Distances for the decay figure: every integer up to 64, then about n log-spaced ones up to max_distance."""
    check_int("max_distance", max_distance, 1)
    check_int("n", n, 2)
    dense = np.arange(0, min(64, max_distance) + 1)
    sparse = np.unique(np.round(np.geomspace(min(64, max_distance), max_distance, n)).astype(np.int64))
    return np.unique(np.concatenate([dense, sparse]))


def _decay(d_head: int, base: float, max_distance: int = 16384, n_samples: int = 256) -> go.Figure:
    D = decay_distances(max_distance)
    curve = decay_curve(d_head, base, torch.from_numpy(D), n_samples)
    x = D[1:].tolist()  # distance 0 (score 1) cannot sit on a log axis
    hover = "|m − n| = %{x}<br>%{y}<extra>%{fullData.name}</extra>"
    data = [
        dict(type="scatter", x=x, y=round_array(curve.high[1:]), mode="lines", line=dict(width=0), hoverinfo="skip",
             showlegend=False, name="90th percentile"),
        dict(type="scatter", x=x, y=round_array(curve.low[1:]), mode="lines", line=dict(width=0), fill="tonexty",
             fillcolor="rgba(0,114,178,0.18)", name=f"10th to 90th percentile over {n_samples} q", hoverinfo="skip"),
        dict(type="scatter", x=x, y=round_array(curve.single[1:]), mode="lines",
             line=dict(color=LINE_COLORS[1], width=1),
             name="one random q", hovertemplate=hover),
        dict(type="scatter", x=x, y=round_array(curve.mean[1:]), mode="lines", line=dict(color=LINE_COLORS[0], width=3),
             name=f"mean over {n_samples} random q", hovertemplate=hover),
        dict(type="scatter", x=x, y=round_array(curve.expected[1:]), mode="lines", hovertemplate=hover,
             line=dict(color="black", width=1.5, dash="dot"),
             name="expectation: mean over pairs of cos(|m − n| θ_i)"),
    ]
    layout = dict(
        title=_title(f"⟨R_m q, R_n q⟩ / |q|² against distance<br>d_head = {d_head}, base = {format_base(base)}"),
        height=540, margin=dict(t=160, b=60, l=70, r=20),
        legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom", font_size=11),
        xaxis=dict(title="distance |m − n| (tokens, log scale)", type="log", range=[0, math.log10(max_distance)]),
        yaxis=dict(title="normalised score ⟨R_m q, R_n q⟩ / |q|²", range=[-0.6, 1.05], zeroline=True,
                   zerolinecolor="#999999"),
    )
    return _figure(data, layout)


def fig_decay(
    d_head: int = 64, base: float = 10000.0, *, max_distance: int = 16384, n_samples: int = 256,
    bases: Sequence[float] | None = BASES,
) -> go.Figure:
    """Mean normalised score of q with itself against distance, with percentile band; slider over the base."""
    fixed = {"d_head": d_head, "max_distance": max_distance, "n_samples": n_samples}
    grid = None if bases is None else [float(b) for b in bases]
    return _styled(knob_figure(_decay, "base", float(base), grid, "base", fixed))


@live_figure(
    int_knob("d_head", 64, 8, 256, 8, "d_head"), log_knob("base", 10000.0, label="base"),
    int_knob("max_distance", 16384, 256, 131072, 256, "largest distance"),
    int_knob("n_samples", 256, 16, 1024, 16, "random q"),
    caption="Mean normalised score against distance for the chosen d_head, base and number of samples.",
    alt="Line plot on a log distance axis of the mean score of a random vector with its rotated self, "
        "with a shaded percentile band and one single sample.",
)
def live_decay(d_head: int, base: float, max_distance: int, n_samples: int) -> go.Figure:
    """Live form of `fig_decay`: d_head, base, largest distance and number of random q."""
    return _styled(_decay(d_head, base, max_distance, n_samples))


# ---------------------------------------------------------------------------
# Angle precision
# ---------------------------------------------------------------------------

_PRECISION_NAMES = {
    "float32": "float32 positions × float32 inv_freq (the library)",
    "bfloat16_inv_freq": "inv_freq in bf16 vs the float32 it was trained with (x = distance |n − m|)",
    "bfloat16": "positions, inv_freq and product in bfloat16",
}
_PRECISION_STYLES = {"float32": (LINE_COLORS[0], "solid"), "bfloat16_inv_freq": (LINE_COLORS[1], "dash"),
                     "bfloat16": (LINE_COLORS[5], "solid")}


def _running_max(error: np.ndarray, n_points: int) -> tuple[np.ndarray, np.ndarray]:
    """max(error[0..m]) at about n_points log-spaced positions m (exact: every position is scanned)."""
    worst = np.maximum.accumulate(error)  # (T,) largest error at any position <= m
    m = np.unique(np.round(np.geomspace(1, error.size - 1, n_points)).astype(np.int64))
    return m, worst[m]


def _angle_error(pair: int, d_head: int = 64, base: float = 10000.0, max_position: int = 65536,
                 n_points: int = 60, floor: float = 1e-9) -> go.Figure:
    check_even_d("d_head", d_head)
    check_int("max_position", max_position, 16)
    positions = torch.arange(max_position + 1)
    theta = float(frequency_bands(d_head, 1, base).theta[min(pair, d_head // 2 - 1)])
    data = []
    for precision in PRECISIONS:
        err = angle_error(positions, d_head, base, precision, pair=pair).numpy()  # (max_position + 1,)
        last, worst = _running_max(err, n_points)
        color, dash = _PRECISION_STYLES[precision]
        data.append(dict(
            type="scatter", x=last.tolist(), y=[float(f"{max(v, floor):.3g}") for v in worst], mode="lines+markers",
            line=dict(color=color, dash=dash, width=2), marker=dict(size=4), name=_PRECISION_NAMES[precision],
            hovertemplate=("distances 0..%{x:,}" if precision == "bfloat16_inv_freq" else "positions 0..%{x:,}")
            + "<br>largest angle error %{y:.2e} rad<extra></extra>",
        ))
    layout = dict(
        title=_title(f"Angle error of pair {pair} (θ = {theta:.3g} rad/token)<br>d_head = {d_head}, "
                     f"base = {format_base(base)}"),
        height=520, margin=dict(t=140, b=60, l=80, r=20),
        legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom", font_size=11),
        xaxis=dict(title="position m, or distance |n − m| for the mismatch curve (tokens, log scale)", type="log",
                   range=[0, math.log10(max_position)]),
        yaxis=dict(title="largest |angle error| at positions ≤ m (rad)", type="log", range=[math.log10(floor), 1],
                   exponentformat="power"),
        shapes=[dict(type="line", xref="paper", x0=0, x1=1, y0=math.pi, y1=math.pi,
                     line=dict(color="grey", dash="dot"))],
        annotations=[dict(xref="paper", x=1, y=math.log10(math.pi), yref="y", xanchor="right", yanchor="top",
                          showarrow=False, text="π: the angle is random", font=dict(size=11, color="grey"))],
    )
    return _figure(data, layout)


def fig_angle_error(
    pair: int = 8, *, d_head: int = 64, base: float = 10000.0, max_position: int = 65536,
    pairs: Sequence[int] | None = ERROR_PAIRS,
) -> go.Figure:
    """Largest angle error at positions 0..m against m (up to max_position), for float32 and two bfloat16 recipes.

    The error is measured against m times the library's float32 inv_freq in float64 and wrapped
    to [0, pi] (`mlbook.analysis.rope.angle_error`). The bf16-inv_freq curve is read against
    distance: a model trained with the float32 ladder and run with the rounded one errs in the
    phase of a query-key pair by |n - m| |theta~ - theta|, wherever the pair sits (a rounded ladder
    used everywhere is still relative); the all-bf16 curve errs at the position itself. Slider over
    the pair index.
    """
    fixed = {"d_head": d_head, "base": base, "max_position": max_position}
    return _styled(knob_figure(_angle_error, "pair", pair, pairs, "pair i", fixed))


@live_figure(
    int_knob("pair", 8, 0, 127, label="pair i"), int_knob("d_head", 64, 8, 256, 8, "d_head"),
    log_knob("base", 10000.0, label="base"),
    int_knob("max_position", 65536, 1024, 262144, 1024, "largest position"),
    caption="Angle error for the chosen pair, d_head, base and largest position.",
    alt="Log-log plot of the largest angle error against position for float32 and two bfloat16 recipes.",
)
def live_angle_error(pair: int, d_head: int, base: float, max_position: int) -> go.Figure:
    """Live form of `fig_angle_error`: pair, d_head, base and the largest position (a pair past the
    head's last is drawn as the last pair, and the figure says so)."""
    last = d_head // 2 - 1
    fig = _styled(_angle_error(min(pair, last), d_head, base, max_position))
    return fig if pair <= last else note_adjustment(
        fig, f"pair {pair} is past d_head = {d_head}'s last pair: drawn for pair {last}")
