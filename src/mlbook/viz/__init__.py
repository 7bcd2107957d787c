"""Figures for the chapter: one function per figure, shown with `show` (live and static).

`mlbook.viz.core` holds the display plumbing (`show`, `show_live`, `live_sliders`,
`grid_slider`, `show_knob`, `compact`), `live_figure` with its knobs (`int_knob`, `float_knob`,
`log_knob`, `choice_knob`, `toggle_knob`), which declares a section's live figure, and the colour
maps; figure modules build on it.
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
    Knob,
    choice_knob,
    float_knob,
    in_colab,
    int_knob,
    is_static,
    live_figure,
    live_sliders,
    log_knob,
    show,
    show_knob,
    show_live,
    toggle_knob,
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
    "Knob",
    "choice_knob",
    "float_knob",
    "in_colab",
    "int_knob",
    "is_static",
    "live_figure",
    "live_sliders",
    "log_knob",
    "show",
    "show_knob",
    "show_live",
    "toggle_knob",
]
