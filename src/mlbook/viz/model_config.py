"""Figures for section 5.1 (reading a model's config): what each shipped config's scaling does to each pair.

The numbers come from `mlbook.analysis.model_config` (`scaling_divisors`, read from the configs shipped
with the book, `SHIPPED_CONFIGS`); nothing here computes frequencies itself.
"""

from __future__ import annotations

import plotly.graph_objects as go

from mlbook.analysis.model_config import load_config, scaling_divisors, serving_override
from mlbook.viz.core import LINE_COLORS, light_figure

__all__ = ["QWEN35_CARD_YARN", "SCALED_CONFIGS", "scaled_configs", "fig_config_scaling"]

# Qwen3.5's model card recipe past the native 262,144 tokens (page 13): YaRN x4, nested under text_config
QWEN35_CARD_YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 262144}
# (label, shipped config, override): the shipped configs whose full-attention layers are scaled, and Qwen3.5 with
# its card's recipe; one line each
SCALED_CONFIGS: tuple[tuple[str, str, dict | None], ...] = (
    ("Llama 3.1 8B: llama3, factor 8", "llama-3.1-8b", None),
    ("Llama 4 Scout: llama3, factor 16, low = high", "llama-4-scout", None),
    ("gpt-oss-20b: YaRN 32, truncate false", "gpt-oss-20b", None),
    ("DeepSeek-V3: YaRN 40", "deepseek-v3", None),
    ("Gemma 3 4B, global layers: linear 8", "gemma-3-4b", None),
    ("Qwen3.5 27B with the card's YaRN 4", "qwen3.5-27b", QWEN35_CARD_YARN),
)


def scaled_configs() -> list[tuple[str, dict]]:
    """(label, config as served) for each line of `fig_config_scaling`."""
    out = []
    for label, name, override in SCALED_CONFIGS:
        config = load_config(name)
        out.append((label, config if override is None else serving_override(config, override)[0]))
    return out


def fig_config_scaling() -> go.Figure:
    """Each scaled config's divisor theta_i / theta'_i against the pair's unscaled wavelength (both axes
    logarithmic): llama3's step (Scout's with no blend), YaRN's ramp, linear's flat line, and where each
    config's kept band ends. Markers are the pairs; no knob: every config is drawn."""
    data = []
    for (label, config), color in zip(scaled_configs(), LINE_COLORS):
        wavelengths, divisors = scaling_divisors(config)
        data.append(dict(type="scatter", mode="lines+markers", name=label, x=wavelengths, y=divisors,
                         line=dict(color=color, width=2), marker=dict(size=5, color=color),
                         hovertemplate="wavelength %{x:,.0f} tokens: frequency / %{y:.3g}<extra>" + label
                                       + "</extra>"))
    return light_figure(
        data,
        title=dict(text=("What each config's scaling does to each pair<br><sup>1: the pair is kept; the factor: "
                         "its frequency is divided by it (fully interpolated)</sup>"), x=0.0, xanchor="left",
                   font=dict(size=14)),
        height=560, margin=dict(t=90, b=210, l=70, r=20),
        xaxis=dict(title=dict(text="unscaled wavelength of the pair (tokens, log scale)"), type="log"),
        yaxis=dict(title=dict(text="frequency divided by (log scale)"), type="log"),
        legend=dict(orientation="h", x=0, xanchor="left", y=-0.25, yanchor="top", font=dict(size=11)),
    )
