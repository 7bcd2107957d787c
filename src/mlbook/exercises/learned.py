"""Exercise checkers for section 2.2: learned absolute positions."""

from __future__ import annotations

__all__: list[str] = []
