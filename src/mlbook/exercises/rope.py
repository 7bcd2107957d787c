"""Exercise checkers for section 2.4: RoPE."""

from __future__ import annotations

__all__: list[str] = []
