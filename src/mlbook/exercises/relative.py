"""Exercise checkers for section 2.3: T5 buckets and the Swin 2-D bias index."""

from __future__ import annotations

__all__: list[str] = []
