"""Exercise checkers for sections 4 and 5: systems view and production."""

from __future__ import annotations

__all__: list[str] = []
