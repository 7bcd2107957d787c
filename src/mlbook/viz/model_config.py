"""Figures for section 5.1 (reading a model's config): what each shipped config's scaling does to each pair.

The numbers come from `mlbook.analysis.model_config` (`scaling_divisors` and `context_lengths`, read from the
configs shipped with the book, `SHIPPED_CONFIGS`); nothing here computes frequencies itself.
"""

from __future__ import annotations

import copy

import plotly.graph_objects as go

from mlbook.analysis.model_config import context_lengths, load_config, scaling_divisors, serving_override
from mlbook.viz.core import LINE_COLORS, light_figure

__all__ = ["QWEN35_CARD_YARN", "SCALED_CONFIGS", "scaled_configs", "fig_config_scaling", "SCALING_CAPTION",
           "SCALING_ALT"]

# Qwen3.5's model card recipe past the native 262,144 tokens (page 13): YaRN x4, nested under text_config
QWEN35_CARD_YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 262144}


def _gpt_oss_truncated() -> dict:
    """gpt-oss-20b with truncate true: the ramp's ends rounded to whole pairs, as engines did before they read the
    key (the comparison line for truncate false)."""
    config = copy.deepcopy(load_config("gpt-oss-20b"))
    config["rope_scaling"]["truncate"] = True
    return config


# (label, config as served, dashed): the shipped configs whose full-attention layers a scaling with an anchor
# (original_max_position_embeddings) changes, Qwen3.5 with its card's recipe, and gpt-oss with truncate true
SCALED_CONFIGS: tuple[tuple[str, object, bool], ...] = (
    ("Llama 3.1 8B: llama3 8 (low 1, high 4)", lambda: load_config("llama-3.1-8b"), False),
    ("Llama 4 Scout: llama3 16 (low = high = 1)", lambda: load_config("llama-4-scout"), False),
    ("gpt-oss-20b: YaRN 32, truncate false", lambda: load_config("gpt-oss-20b"), False),
    ("gpt-oss-20b if truncate were true", _gpt_oss_truncated, True),
    ("DeepSeek-V3: YaRN 40", lambda: load_config("deepseek-v3"), False),
    ("Qwen3.5 27B with its card's YaRN 4", lambda: serving_override(load_config("qwen3.5-27b"), QWEN35_CARD_YARN)[0],
     False),
)

SCALING_CAPTION = (
    "What each config's scaling divides each pair's frequency by, against the pair's unscaled wavelength as a "
    "multiple of the scaling's anchor L (original_max_position_embeddings), both axes logarithmic. Llama 3.1's llama3 "
    "(factor 8, low_freq_factor 1, high_freq_factor 4, L = 8,192) keeps the pairs whose wavelength is under "
    "L / high_freq_factor = 2,048 tokens (a quarter of the anchor), divides those over L / low_freq_factor = 8,192 "
    "tokens (the anchor) by 8, and interpolates smoothly between. Llama 4 Scout's (factor 16, low_freq_factor = "
    "high_freq_factor = 1, L = 8,192) keeps every pair under the anchor and divides every pair over it by 16: a step "
    "with no blend. YaRN (gpt-oss-20b: factor 32, L = 4,096; DeepSeek-V3: factor 40, L = 4,096; Qwen3.5 with its "
    "card's factor 4, L = 262,144; beta_fast 32 and beta_slow 1 in all three) keeps the pairs that turn more than "
    "beta_fast times within L (wavelength under about L / 32), divides those that turn less than beta_slow times "
    "(wavelength over about L) by the factor, and ramps between, its ends rounded to whole pairs unless truncate is "
    "false: gpt-oss's is, and the dashed line is the same config with truncate true. Gemma 3's linear 8, which reads "
    "no anchor, would be a flat line at 8."
)
SCALING_ALT = (
    "Log-log line plot, one line per config: Llama 3.1 8B, Llama 4 Scout, gpt-oss-20b (and dashed, the same with "
    "truncate true), DeepSeek-V3, and Qwen3.5 27B with YaRN 4. The x axis is the pair's wavelength divided by the "
    "config's anchor length. Llama 3.1's line is flat at 1 below a quarter of the anchor and at 8 above it, rising "
    "between; Scout's steps from 1 to 16 at the anchor; the YaRN lines are flat at 1 below about a thirty-second of "
    "the anchor and at their factor (32, 40, 4) from about the anchor on, rising between."
)


def scaled_configs() -> list[tuple[str, dict, bool]]:
    """(label, config as served, dashed) for each line of `fig_config_scaling`."""
    return [(label, make(), dashed) for label, make, dashed in SCALED_CONFIGS]


def fig_config_scaling() -> go.Figure:
    """Each scaled config's divisor theta_i / theta'_i against the pair's unscaled wavelength over the scaling's
    anchor (both axes logarithmic): llama3's step (Scout's with no blend), YaRN's ramp and its truncate, all
    between a thirtieth of the anchor and about the anchor. Markers are the pairs; no knob: every config is drawn."""
    data = []
    colors = iter(LINE_COLORS)
    color = LINE_COLORS[0]
    for label, config, dashed in scaled_configs():
        color = color if dashed else next(colors)  # the comparison line shares its config's colour
        anchor = context_lengths(config).original
        wavelengths, divisors = scaling_divisors(config)
        data.append(dict(type="scatter", mode="lines+markers", name=label, x=[w / anchor for w in wavelengths],
                         y=divisors, line=dict(color=color, width=2, dash="dot" if dashed else "solid"),
                         marker=dict(size=4 if dashed else 5, color=color),
                         hovertemplate="wavelength %{x:.3g} x the anchor: frequency / %{y:.3g}<extra>" + label
                                       + f" (anchor {anchor:,})</extra>"))
    return light_figure(
        data,
        title=dict(text=("What each config's scaling does to each pair<br><sup>1: the pair is kept; the factor: "
                         "its frequency is divided by it</sup>"), x=0.0, xanchor="left", font=dict(size=14)),
        height=580, margin=dict(t=90, b=230, l=70, r=20),
        xaxis=dict(title=dict(text="unscaled wavelength / the scaling's anchor (log scale)"), type="log"),
        yaxis=dict(title=dict(text="frequency divided by (log scale)"), type="log"),
        legend=dict(orientation="h", x=0, xanchor="left", y=-0.25, yanchor="top", font=dict(size=11)),
    )
