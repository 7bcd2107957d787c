"""Positional encodings, RoPE scaling, the fused RoPE kernel, attention with KV and sink caches, tiny Transformers."""

from mlbook.transformer.fused import *  # noqa: F401,F403
from mlbook.transformer.fused import __all__ as _fused_all
from mlbook.transformer.positional import *  # noqa: F401,F403
from mlbook.transformer.positional import __all__ as _positional_all
from mlbook.transformer.rope_scaling import *  # noqa: F401,F403
from mlbook.transformer.rope_scaling import __all__ as _rope_scaling_all

__all__ = [*_positional_all, *_rope_scaling_all, *_fused_all]
