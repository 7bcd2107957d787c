"""Positional encodings, RoPE scaling, the fused RoPE kernel, attention with KV and sink caches, tiny Transformers."""

from mlbook.transformer import fused, positional, rope_scaling
from mlbook.transformer.fused import *  # noqa: F401,F403
from mlbook.transformer.positional import *  # noqa: F401,F403
from mlbook.transformer.rope_scaling import *  # noqa: F401,F403

__all__ = [*positional.__all__, *rope_scaling.__all__, *fused.__all__]
