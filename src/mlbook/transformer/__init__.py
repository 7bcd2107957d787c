"""Positional encodings, attention with KV and sink caches, and tiny Transformer models."""

from mlbook.transformer.positional import *  # noqa: F401,F403
from mlbook.transformer.positional import __all__ as _positional_all

__all__ = list(_positional_all)
