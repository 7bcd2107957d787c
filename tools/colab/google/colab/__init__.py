"""Stand-in for Google Colab's `google.colab` package, for `make colab-check`.

Colab's kernel imports `google.colab` at start-up, so notebooks detect Colab with
`"google.colab" in sys.modules`. The check installs this package into its Colab-like
virtual environment and imports it from an IPython start-up file, the same way.
Only what the book's notebooks could touch is here.
"""

__version__ = "0.0.1a2"
__all__ = ["output"]

from google.colab import output  # noqa: E402  (Colab's package exposes it as an attribute too)
