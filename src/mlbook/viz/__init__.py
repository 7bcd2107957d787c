"""Figures for the chapter: one function per figure, shown with `show` (live and static).

`mlbook.viz.core` holds the display plumbing (`show`, `show_live`, `live_sliders`,
`grid_slider`, `show_knob`, `compact`) and the colour maps; figure modules build on it.
"""

from mlbook.viz.core import (
    DIVERGING,
    LINE_COLORS,
    LIVE_NOTE,
    SEQUENTIAL,
    SEQUENTIAL_ALT,
    STATIC_ENV,
    compact,
    diverging,
    figure_html,
    grid_slider,
    in_colab,
    is_static,
    live_sliders,
    show,
    show_knob,
    show_live,
)

__all__ = [
    "DIVERGING",
    "LINE_COLORS",
    "LIVE_NOTE",
    "SEQUENTIAL",
    "SEQUENTIAL_ALT",
    "STATIC_ENV",
    "compact",
    "diverging",
    "figure_html",
    "grid_slider",
    "in_colab",
    "is_static",
    "live_sliders",
    "show",
    "show_knob",
    "show_live",
]
