"""Exercise checkers for section 2.6: context extension (PI, NTK, YaRN)."""

from __future__ import annotations

__all__: list[str] = []
