"""Exercise checkers for section 3: the retype drills (rotate_half/apply_rotary/RotaryEmbedding, sinusoidal, ALiBi, buckets)."""

from __future__ import annotations

__all__: list[str] = []
