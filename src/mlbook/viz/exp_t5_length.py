"""Figures of Experiment 4 (notebooks/23_exp_t5_length): T5 relative bias past the training length."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from mlbook.experiments import exp_t5_length
from mlbook.viz.core import LINE_COLORS
from mlbook.viz.exp_common import DASHES, band, finish_layout, record_results, seeds_text

__all__ = [
    "fig_t5_per_position",
    "bucket_table_text",
]


def fig_t5_per_position(record: dict[str, Any], length: int = 16) -> go.Figure:
    """Token accuracy at each output position of the reversal at `length`: mean ± sd over seeds per
    variant; a variant that cannot run at that length has no line (the subtitle names it)."""
    r = record_results(record, "t5_length")
    if length not in r["eval_lens"]:
        raise ValueError(f"length must be one of the evaluated lengths {r['eval_lens']}, got {length!r}")
    fig = go.Figure()
    idle = []
    for i, variant in enumerate(r["variants"]):
        pp = exp_t5_length.per_position(record, variant, length)
        x = list(range(length))
        # a variant that cannot run keeps its two traces, style and legend entry, empty (the subtitle
        # says so): a slider step then only moves points, and the legend keeps its size (a quick step
        # on the site; a legend that changes size has plotly lay out and draw the whole figure again)
        mean, sd = (pp["mean"], pp["sd"]) if pp is not None else ([None] * length, [None] * length)
        if pp is None:
            idle.append(variant)
        band(fig, x, mean, sd, LINE_COLORS[i], variant, DASHES[i % 4], mode="lines+markers")
    fig.add_hline(y=r["chance"], line_dash="dot", line_color="gray", annotation_text=f"chance 1/{r['n_symbols']}",
                  annotation_position="bottom right")
    fig.add_vline(x=r["train_len"] - 0.5, line_dash="dot", line_color="gray",
                  annotation_text=f"trained length {r['train_len']}")
    fig.update_xaxes(title=f"output position (0 .. {length - 1})", range=[-0.5, max(r["eval_lens"]) - 0.5])
    fig.update_yaxes(title="token accuracy (fraction)", range=[0, 1.05])
    cannot = f"; cannot run at {length}: {', '.join(idle)}" if idle else ""
    return finish_layout(fig, title=f"Reversal at length {length}: accuracy per output position",
                         subtitle=f"mean ± sd over {seeds_text(r)}{cannot}")


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
