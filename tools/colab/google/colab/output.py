"""Stand-in for `google.colab.output`: the widget-manager switches are no-ops here."""


def enable_custom_widget_manager() -> None:
    """Colab needs this for third-party widgets; the book uses core ipywidgets only."""


def disable_custom_widget_manager() -> None:
    """See `enable_custom_widget_manager`."""
