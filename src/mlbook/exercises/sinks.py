"""Exercise checkers for section 2.6: attention sinks and streaming caches."""

from __future__ import annotations

__all__: list[str] = []
