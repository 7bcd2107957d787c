"""Section 5.1 (reading a model's config): what a config class fills into a minimal file.

The exercise's file is shaped like Gemma 3 1B's text config (26 layers, a 512-token window) and, like
the published Gemma 3 files, states no layer pattern, no base and no scaling: transformers'
Gemma3TextConfig fills them. The reader writes down the full-attention layers, their base and scaling,
and the sliding layers' base; the checker compares with the library's readers of the class defaults
(`transformer.hf.hf_layer_types`, `hf_rope_parameters`, which the test suite checks against transformers
5.15's Gemma3TextConfig) and names the usual mistake without printing the answer.
"""

from __future__ import annotations

import copy
import numbers
from typing import Any

from mlbook.exercises.common import as_float, describe, guarded, verdict
from mlbook.transformer.hf import hf_layer_types, hf_rope_parameters

__all__ = ["GEMMA3_MINIMAL_FILE", "ANSWER_KEYS", "check_gemma3_minimal_file"]

# Made up for the exercise: Gemma 3 1B's layer count and window, everything else left to the class
GEMMA3_MINIMAL_FILE: dict[str, Any] = {
    "architectures": ["Gemma3ForCausalLM"],
    "model_type": "gemma3_text",
    "hidden_size": 1152,
    "intermediate_size": 6912,
    "num_hidden_layers": 26,
    "sliding_window": 512,
}

ANSWER_KEYS: tuple[str, ...] = ("full_layers", "full_base", "full_scaling", "sliding_base")


def _truth() -> dict[str, Any]:
    kinds = hf_layer_types(GEMMA3_MINIMAL_FILE)
    rope = hf_rope_parameters(GEMMA3_MINIMAL_FILE)
    full, sliding = rope["full_attention"], rope["sliding_attention"]
    return {"full_layers": [i for i, k in enumerate(kinds) if k == "full_attention"],
            "full_base": float(full["rope_theta"]),
            "full_scaling": (full["rope_type"], full.get("factor")),
            "sliding_base": float(sliding["rope_theta"])}


def _layers_mistake(got: list[int], want: list[int], n: int) -> str:
    if not got:
        return ("full_layers is empty: every layer sliding is Mistral's rule, not Gemma 3's; its class makes every "
                "sixth layer full.")
    if got == [i + 1 for i in want]:
        return "full_layers is counted from 1: layer indices start at 0."
    if got == list(range(0, n, 6)):
        return ("full_layers starts the pattern at layer 0: the full layer closes each group of six, it does not "
                "open it.")
    if any(i >= n or i < 0 for i in got):
        return f"full_layers names a layer this file does not have: it has {n} layers, indices 0 to {n - 1}."
    if len(got) != len(want):
        return f"full_layers has {len(got)} layers: count the groups of six that fit in {n} layers."
    return "full_layers is not the class's pattern: read how Gemma3TextConfig builds layer_types."


@guarded
def check_gemma3_minimal_file(answer: object) -> bool:
    """Check the reader's dict for `GEMMA3_MINIMAL_FILE`: full_layers (the full-attention layer indices), full_base
    and sliding_base (rope_theta of each kind), full_scaling ((rope_type, factor) of the full layers; factor None
    where there is none). None, or a value left at None, means not answered yet. The first wrong entry is named with
    its likely mistake; the right values are not printed."""
    if answer is None:
        print(f"Not answered yet: fill in the dict with {', '.join(ANSWER_KEYS)}, then run this cell again.")
        return False
    if not isinstance(answer, dict):
        return verdict(False, f"Give a dict with the keys {', '.join(ANSWER_KEYS)}; got {describe(answer)}.")
    missing = [k for k in ANSWER_KEYS if answer.get(k) is None]  # [] is an answer: no full layers
    if missing:
        print(f"Not answered yet: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} still empty.")
        return False
    answer = copy.deepcopy(answer)
    want = _truth()
    n = GEMMA3_MINIMAL_FILE["num_hidden_layers"]
    got_layers = answer.get("full_layers")
    if hasattr(got_layers, "tolist") and getattr(got_layers, "ndim", 0) == 1:  # a numpy array or a tensor of indices
        got_layers = got_layers.tolist()
    if not isinstance(got_layers, (list, tuple)) or not all(
            isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in got_layers):
        return verdict(False, f"full_layers should be a list of layer indices (ints); got {describe(got_layers)}.")
    got_layers = [int(i) for i in got_layers]  # numpy integers too
    if len(set(got_layers)) != len(got_layers):
        return verdict(False, "full_layers lists a layer twice: give each full-attention layer's index once.")
    if sorted(got_layers) != want["full_layers"]:
        return verdict(False, _layers_mistake(sorted(got_layers), want["full_layers"], n))
    full_base, sliding_base = as_float(answer.get("full_base")), as_float(answer.get("sliding_base"))
    if full_base is None or sliding_base is None:
        return verdict(False, "full_base and sliding_base should be numbers (rope_theta of each kind of layer).")
    if (full_base, sliding_base) == (want["sliding_base"], want["full_base"]):
        return verdict(False, "full_base and sliding_base are swapped: the global (full) layers take the larger base.")
    if full_base != want["full_base"]:
        hint = (" 10,000 is RoPE's generic base; the class gives its global layers a base of their own."
                if full_base == 10_000.0 else "")
        return verdict(False, f"full_base is not the base Gemma3TextConfig gives the full layers.{hint}")
    if sliding_base != want["sliding_base"]:
        return verdict(False, "sliding_base is not the class's local base for the sliding layers.")
    scaling = answer.get("full_scaling")
    if not isinstance(scaling, (list, tuple)) or len(scaling) != 2 or not isinstance(scaling[0], str):
        return verdict(False, "full_scaling should be (rope_type, factor), e.g. ('yarn', 4.0); got "
                              f"{describe(scaling)}.")
    kind, factor = scaling[0], scaling[1]
    if kind != want["full_scaling"][0]:
        hint = (" The linear factor 8 belongs to the 4B file above, which states rope_scaling; this file states none."
                if kind == "linear" else "")
        return verdict(False, f"full_scaling's rope_type {kind!r} is not what the class builds.{hint}")
    if (as_float(factor) if factor is not None else None) != want["full_scaling"][1]:
        return verdict(False, "full_scaling's factor: a type without scaling has no factor (write None).")
    return verdict(True, f"{len(want['full_layers'])} full layers of {n}, unscaled at the class's global base; the "
                         "sliding layers at its local base.")
