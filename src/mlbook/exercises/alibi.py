"""Exercise checkers for section 2.5: ALiBi."""

from __future__ import annotations

__all__: list[str] = []
