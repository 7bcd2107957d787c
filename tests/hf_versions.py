"""The transformers the tests compare with, in either major version.

.venv has the test extra's transformers; `make test-hf4` runs the oracle tests (`-m oracle`)
against transformers 4.57.6, the last 4.x release, in a second environment. Where transformers 5
moved a piece of its own code that a test calls, the helpers below find it in either version, so
the same test is an oracle in both. A test written against attributes that only 4.x has is marked
`@hf4_only(why)`: skipped under transformers 5 with that reason, run by `make test-hf4`.
"""

from __future__ import annotations

import copy
from importlib import metadata
from typing import Any, Callable

import pytest

try:
    TRANSFORMERS: str | None = metadata.version("transformers")
except metadata.PackageNotFoundError:
    TRANSFORMERS = None
HF_MAJOR = int(TRANSFORMERS.split(".")[0]) if TRANSFORMERS else 0


def hf4_only(why: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a test that reads transformers 4.x's API (`why`): an oracle, skipped under transformers 5."""
    skip = pytest.mark.skipif(HF_MAJOR >= 5, reason=f"written against transformers 4.x ({why}); transformers "
                                                     f"{TRANSFORMERS} is installed: `make test-hf4` runs it")

    def mark(test: Callable[..., Any]) -> Callable[..., Any]:
        return pytest.mark.oracle(skip(test))

    return mark


def rope_init_function(rope_type: str) -> Callable[..., tuple[Any, float]]:
    """transformers' function giving (inv_freq, attention_factor) for `rope_type` from a config object.

    ROPE_INIT_FUNCTIONS holds them all in 4.x. transformers 5 dropped its "default" entry (each model's
    rotary class computes plain RoPE); GPT-NeoX's is the one that, as 4.x's did, honours a
    partial_rotary_factor."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    if rope_type == "default" and rope_type not in ROPE_INIT_FUNCTIONS:
        from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding

        return GPTNeoXRotaryEmbedding.compute_default_rope_parameters
    return ROPE_INIT_FUNCTIONS[rope_type]


def rope_theta(config: Any) -> float:
    """A transformers config object's RoPE base: 5's rope_parameters, or 4.x's attribute."""
    params = getattr(config, "rope_parameters", None)
    if isinstance(params, dict) and "rope_theta" in params:
        return float(params["rope_theta"])
    return float(config.rope_theta)


def with_rope_theta(config: Any, base: float) -> Any:
    """A copy of a transformers config object with another RoPE base, in whichever layout it keeps it."""
    values = copy.deepcopy(config.to_dict())
    values["rope_theta"] = base
    if isinstance(values.get("rope_parameters"), dict):
        values["rope_parameters"]["rope_theta"] = base
    return config.__class__(**values)


def rope_fields(c: dict) -> tuple[dict, float, dict | None]:
    """(text config, base, scaling) as a shipped config file writes them, read here without the library: 4.x's
    top-level rope_theta and rope_scaling, or 5's rope_parameters (Qwen3.5: the base inside, type 'default' is
    no scaling, and the M-RoPE sections, equal positions for a text token, are not a scaling key)."""
    text = c.get("text_config", c)
    if "rope_parameters" not in text:
        return text, float(text["rope_theta"]), text.get("rope_scaling")
    p = {k: v for k, v in text["rope_parameters"].items()
         if k not in ("partial_rotary_factor", "mrope_section", "mrope_interleaved")}
    base = float(p.pop("rope_theta"))
    return text, base, None if p == {"rope_type": "default"} else p
