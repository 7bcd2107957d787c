"""Imports every experiment module so that each registers itself."""

from mlbook.experiments import (  # noqa: F401
    exp_context_extension,
    exp_after_rope,
    exp_extrapolation,
    exp_passkey,
    exp_permutation,
    exp_sinks,
    exp_t5_length,
)
