"""Numbers for section 5.2, probing a real model: what a shipped RoPE model does with position.

The probe loads a Hugging Face causal language model (any Llama-family attention: Llama, SmolLM2,
Qwen2, Qwen3, Mistral, ...) and reads, on one text:

    load_probe_model, probe_model_name   the model: a download (needs the network; a GPU, or device="cpu"), or
                                         "tiny-random", a randomly initialised tiny Llama built
                                         here from a config (nothing downloaded)
    positional_settings                  the positional fields of its config, and the wavelengths
                                         the library computes from them
    capture_rotary                       every layer's q and k before and after the model's own
                                         rotation, the cos/sin tables it used, and its attention
                                         weights on the first token (hooks on the attention modules)
    rotary_from_config, rotation_check, pairing_check
                                         the library's RotaryEmbedding built from the config, and
                                         how far its rotation is from the model's: within the float32
                                         bound (`rounding_bound`) with the checkpoint's own layout
                                         (`hf_rope_pairing`), O(1) with the other one (the porting
                                         bug), within it again once the channels are permuted
    sink_mass                            attention mass on the first token per layer and head, beside
                                         the mass uniform attention would give it over the keys each
                                         layer sees (a sliding layer's window) (Xiao et al., 2024)
    pair_norms                           the norm of each frequency pair of q and k, averaged over
                                         tokens (the probe of Barbero et al., 2025)
    rope_override, loss_by_position      the model's loss in windows of positions, with its own
                                         rotary embedding or with a rope_scaling override
    override_effect                      what an override changed on a text: the frequencies and cos/sin
                                         the pass used, and the largest logit change (zero: no effect,
                                         e.g. dynamic NTK on a pass within max_position_embeddings)

An override is checked as the library reads a config (`mlbook.transformer.hf`), and it replaces the
model's own scaling rather than composing with it: a model that ships one is refused unless
replace_shipped=True.

"Trained length" here (`trained_length`, `PositionalSettings.trained_len`, `PositionLoss.trained_len`) is the
length a config anchors its scaling at: original_max_position_embeddings where the config states it, else
max_position_embeddings. It is the pre-extension length, not always the length the model was last trained at:
Llama 3.1 anchors at 8,192 but was trained on to 128K tokens (Dubey et al., 2024), Qwen3 states 40,960 though
its long-context stage ran at 32,768 (Yang et al., 2025), and Gemma 3 4B, 12B and 27B rescale their global layers
by 8 from a 32K pretraining length (Gemma Team, 2025; the 1B model has 32K and no scaling), while their configs
state 131,072 and no anchor.

Models the probe refuses rather than misreads: layer types that rotate differently (Gemma 3) are checked layer
by layer in `pairing_check`, but `rope_override` refuses them (one rope_scaling cannot say which type it is for);
a latent-attention model (no q_proj) and a NoPE layer have nothing to compare.

`transformers` is imported inside the functions that need it, so importing this module (and
`mlbook.analysis`) does not. Nothing here draws; `mlbook.viz.probe` plots what these return.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.resources
import math
import os
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from mlbook.analysis.absolute import pair_wavelengths
from mlbook.analysis.model_config import context_lengths
from mlbook.analysis.rope import pairing_permutation
from mlbook.experiments.common import rotary_pair_norms
from mlbook.transformer.hf import (
    SU_FAMILIES,
    hf_get,
    hf_head_dim,
    hf_layer_types,
    hf_rope_base,
    hf_rope_parameters,
    hf_rope_pairing,
    hf_rope_parameters_for,
    hf_rope_type,
    hf_rotary_dim,
    hf_text_config,
    rope_options_from_hf,
    rope_scaling_from_hf,
)
from mlbook.transformer.positional import ROPE_PAIRINGS, RotaryEmbedding
from mlbook.transformer.rope_scaling import RopeScaling
from mlbook.transformer.validate import (
    check_bool,
    check_choice,
    check_device,
    check_int,
    check_positive_float,
    env_flag,
)

__all__ = [
    "TINY_RANDOM",
    "DEFAULT_MODEL",
    "PROBE_MODEL_ENV",
    "ProbeUnavailable",
    "ProbeModel",
    "probe_model_name",
    "tiny_random_config",
    "load_probe_model",
    "library_text",
    "encode_text",
    "trained_length",
    "PositionalSettings",
    "positional_settings",
    "RotaryCapture",
    "capture_rotary",
    "rotary_from_config",
    "override_refusal",
    "RotationCheck",
    "rounding_bound",
    "rotation_check",
    "PairingCheck",
    "pairing_check",
    "SinkMass",
    "sink_mass",
    "PairNorms",
    "pair_norms",
    "rope_override",
    "OverrideEffect",
    "override_effect",
    "PositionLoss",
    "loss_by_position",
]

TINY_RANDOM = "tiny-random"  # the model name that builds the tiny random Llama instead of downloading
DEFAULT_MODEL = "HuggingFaceTB/SmolLM2-135M"  # a LlamaForCausalLM with RoPE; its weights fit any Colab GPU
PROBE_MODEL_ENV = "MLBOOK_PROBE_MODEL"  # set to a model name (or "tiny-random") to override the notebook's choice


class ProbeUnavailable(RuntimeError):
    """A real model was asked for where this runtime cannot provide it (no GPU, no network)."""


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------


def probe_model_name(requested: str = DEFAULT_MODEL) -> str:
    """The model the probe runs on, in this order: $MLBOOK_PROBE_MODEL if set (it wins over MLBOOK_STATIC too),
    else "tiny-random" while the static site is built (MLBOOK_STATIC=1: nothing may be downloaded there), else
    `requested`."""
    if not isinstance(requested, str) or not requested.strip():
        raise ValueError(f"requested must be a model name such as {DEFAULT_MODEL!r} or {TINY_RANDOM!r}, got {requested!r}")
    chosen = os.environ.get(PROBE_MODEL_ENV, "").strip()
    if chosen:
        return chosen
    if env_flag("MLBOOK_STATIC"):
        return TINY_RANDOM
    return requested.strip()


def tiny_random_config() -> Any:
    """The tiny random model's `LlamaConfig`: 4 layers, 4 query heads sharing 2 key/value heads,
    d_head 16 (8 frequency pairs), base 10,000, a byte vocabulary (256), trained length 64."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=64, rope_theta=10000.0,
        tie_word_embeddings=False, attn_implementation="sdpa",
    )


@dataclass
class ProbeModel:
    """A loaded model with what the probe needs beside it. tokenizer is None for the tiny random
    model (its vocabulary is bytes); label names the model on figures."""

    name: str
    model: Any  # a transformers PreTrainedModel (causal LM) in eval mode
    tokenizer: Any | None
    device: torch.device
    label: str

    @property
    def config(self) -> Any:
        return self.model.config

    @property
    def is_tiny_random(self) -> bool:
        return self.name == TINY_RANDOM


def _cannot_run(name: str, missing: str, detail: str = "") -> ProbeUnavailable:
    return ProbeUnavailable(
        f"The probe was asked to run the real model {name!r}, but {missing}.{(' ' + detail) if detail else ''} "
        f"To run this page without a download or a GPU, set MODEL_NAME = {TINY_RANDOM!r} in the notebook "
        f"(or the environment variable {PROBE_MODEL_ENV}={TINY_RANDOM}): the same code then runs on a randomly "
        f"initialised tiny Llama built here, whose figures show the method, not a trained model's behaviour."
    )


ATTN_IMPLEMENTATIONS = ("sdpa", "eager")


def load_probe_model(
    name: str, *, device: str | torch.device | None = None, dtype: torch.dtype = torch.float32, seed: int = 0,
    attn_implementation: str = "sdpa",
) -> ProbeModel:
    """Load `name` with transformers, or build the tiny random Llama for name="tiny-random".

    device=None puts a real model on the CUDA GPU and refuses where there is none; pass device="cpu" to run
    it on the CPU anyway (slower: a pass costs seconds per thousand tokens for a 135M model), or any device
    `check_device` accepts ("auto", "cpu", "cuda", "cuda:N", "mps"; one this machine lacks is a ValueError).
    A real model needs the network, or the Hugging Face cache, to fetch its weights; without them this
    raises `ProbeUnavailable` saying what was asked, what is missing and how to run with the tiny model.

    dtype: float32 by default (4 bytes per parameter), so the rotation check compares rotations, not
    half-precision rounding. torch.float16 or torch.bfloat16 halve the memory, but the model then rotates q and
    k in that precision and the check's "model's layout" line reads its rounding, not float32's: about 1e-3 in
    float16 and 1e-2 in bfloat16 (9e-4 and 6e-3 measured at 512 tokens on a randomly initialised model of
    SmolLM2-135M's shape). A Colab T4 has no native bfloat16: float16 is its half precision.
    seed: the tiny random model's initialisation (an int >= 0). attn_implementation: "sdpa" (the default: the
    loss passes over 2L + 1 tokens need it) or "eager", for a model whose attention class is fixed when it is built
    and cannot switch for the capture (Falcon; `capture_rotary` says when). Every argument is checked before any
    work.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must be a model name such as {DEFAULT_MODEL!r} or {TINY_RANDOM!r}, got {name!r}")
    name = name.strip()
    if name != TINY_RANDOM and name.lower().replace("_", "-").replace(" ", "-") == TINY_RANDOM:
        raise ValueError(f"name {name!r} is not a model on the Hub; the tiny random model is spelled {TINY_RANDOM!r}")
    if device is not None:
        device = check_device("device", device)  # an unknown name ("gpu") or an absent CUDA refused here
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype (torch.float32, the default; torch.bfloat16 or "
                        f"torch.float16 to halve the memory), got {dtype!r}")
    check_int("seed", seed, 0)
    check_choice("attn_implementation", attn_implementation, ATTN_IMPLEMENTATIONS)
    if name == TINY_RANDOM:
        from transformers import LlamaForCausalLM

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            config = tiny_random_config()
            config._attn_implementation = attn_implementation
            model = LlamaForCausalLM(config)
        dev = torch.device(device or "cpu")
        # as from_pretrained(dtype=...) leaves them: the rotary frequencies stay float32 (.to(dtype) would round
        # inv_freq to 8 bits in bfloat16, an angle error of ~1 rad by position 500)
        frequencies = {n: b.clone() for n, b in model.named_buffers() if n.endswith("inv_freq")}
        model = model.to(device=dev, dtype=dtype).eval()
        for n, b in frequencies.items():
            owner, _, attr = n.rpartition(".")
            model.get_submodule(owner).register_buffer(attr, b.to(dev), persistent=False)
        return ProbeModel(name, model, None, dev, "tiny random Llama, untrained")

    if device is None:
        if not torch.cuda.is_available():
            raise _cannot_run(name, "this runtime has no CUDA GPU",
                              "In Colab: Runtime > Change runtime type > a GPU, then run the notebook again "
                              "(or pass device='cpu' to load_probe_model to wait for the CPU).")
        device = "cuda"
    dev = torch.device(device)
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        from transformers import AutoConfig

        AutoConfig.from_pretrained(name)  # the smallest file first: without a network, one round of retries, not two
        tokenizer = AutoTokenizer.from_pretrained(name)
        # transformers 4.56 renamed torch_dtype to dtype; Colab may have an older release
        key = "dtype" if _version_at_least(transformers.__version__, (4, 56)) else "torch_dtype"
        model = AutoModelForCausalLM.from_pretrained(name, attn_implementation=attn_implementation, **{key: dtype})
    except (OSError, ValueError) as exc:  # no connection and not cached; or a name the Hub does not have
        raise _cannot_run(name, "its files could not be fetched (no network, or no such model on the Hugging "
                          "Face Hub) and they are not in the local cache", f"transformers said: {exc}") from exc
    return ProbeModel(name, model.to(dev).eval(), tokenizer, dev, name)


def _version_at_least(version: str, least: tuple[int, ...]) -> bool:
    parts = []
    for piece in version.split(".")[: len(least)]:
        digits = "".join(ch for ch in piece if ch.isdigit()) or "0"
        parts.append(int(digits))
    return tuple(parts) >= least


def library_text() -> str:
    """A long text available offline: mlbook's own Python source, file by file in sorted order.
    The probe's default when the reader gives no text of their own (code and English prose)."""
    files = sorted((p for p in _walk(importlib.resources.files("mlbook")) if p.name.endswith(".py")),
                   key=lambda p: str(p))
    return "\n\n".join(p.read_text(encoding="utf-8") for p in files)


def _walk(root: Any) -> Iterator[Any]:
    for entry in root.iterdir():
        if entry.is_dir():
            yield from _walk(entry)
        else:
            yield entry


def encode_text(text: str, tokenizer: Any | None, *, vocab_size: int, max_tokens: int) -> torch.Tensor:
    """The first max_tokens token ids of `text`, (1, T) int64: the tokenizer's, or for the tiny random
    model (tokenizer None) the UTF-8 bytes taken modulo vocab_size."""
    if not isinstance(text, str) or not text:
        raise ValueError("text must be a non-empty string")
    check_int("max_tokens", max_tokens, 2)
    check_int("vocab_size", vocab_size, 2)
    if tokenizer is None:
        ids = torch.tensor(list(text.encode("utf-8")), dtype=torch.int64) % vocab_size  # (n,)
    else:
        ids = torch.as_tensor(tokenizer(text, add_special_tokens=True)["input_ids"], dtype=torch.int64)  # (n,)
    return ids[:max_tokens][None]  # (1, T)


# ---------------------------------------------------------------------------
# Positional settings from the config
# ---------------------------------------------------------------------------


def trained_length(config: Any) -> int:
    """The pre-extension length L: the length the config anchors its scaling at, read as
    `mlbook.analysis.model_config.context_lengths` reads it: rope_scaling's original_max_position_embeddings,
    else the top-level one (Phi-3's LongRoPE), else initial_context_length (gpt-oss), else
    max_position_embeddings. Not always the length the model was last trained at (the module docstring
    names Llama 3.x, Qwen3 and Gemma 3). config: a transformers config or a dict read from config.json.

    Warns where the anchor looks wrong: a top-level original_max_position_embeddings beside plain RoPE that
    differs from max_position_embeddings (a stale key), or L above max_position_embeddings. `positional_settings`
    warns the same way; `pair_norms` and `loss_by_position` read L without warning again."""
    return _anchor_length(config, warn=True)


def _anchor_length(config: Any, *, warn: bool, stacklevel: int = 3) -> int:
    """`trained_length`'s L; warn=False for the library's own later reads of a config already checked, so a page
    that prints the settings shows each warning once. stacklevel: the warning names the frame that many up."""
    hf_text_config(config)  # a model name, None or a number refused here, by type
    if not isinstance(config, Mapping):
        to_dict = getattr(config, "to_dict", None)
        if not callable(to_dict):
            raise TypeError(f"config must be a transformers config or a dict read from config.json, got "
                            f"{type(config).__name__}")
        config = to_dict()
    L = context_lengths(config).original
    text = hf_text_config(config)
    M, top = hf_get(text, "max_position_embeddings"), text.get("original_max_position_embeddings")
    if not warn:
        return L
    if top is not None and hf_rope_parameters_for(text)["rope_type"] in ("default", "proportional") and top != M:
        warnings.warn(f"original_max_position_embeddings={top:,} sits at the config's top level but no scaling reads "
                      f"it (rope_type 'default'): anchor length L = {L:,} against max_position_embeddings M = {M:,}. "
                      "A stale key (Phi3Config's class default is 4,096) makes the loss cells read 2L + 1 tokens; "
                      "pass encode_text a smaller max_tokens if L is not the length you mean", stacklevel=stacklevel)
    elif M is not None and L > M:
        warnings.warn(f"anchor length L = {L:,} exceeds max_position_embeddings M = {M:,}: the config anchors its "
                      "scaling past the length it states as its maximum (check the config)", stacklevel=stacklevel)
    return L


@dataclass(frozen=True)
class PositionalSettings:
    """What a config says about position, and what the library computes from it.

    wavelengths: (r/2,) 2 pi / theta_i in tokens for the rotated pairs before any rope_scaling (base
    rope_theta), from `mlbook.analysis.absolute.pair_wavelengths`. trained_len: the pre-extension length the
    scaling is anchored at (`trained_length`). per_layer_type: where layer types rotate differently (Gemma 3),
    each type's RoPE parameters and how many layers have it; the base, scaling and wavelengths above are then
    those of `layer_type`."""

    model_type: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    rope_theta: float
    partial_rotary_factor: float
    rope_scaling: Mapping[str, Any] | None
    max_position_embeddings: int
    trained_len: int
    sliding_window: int | None
    wavelengths: np.ndarray = field(repr=False)
    layer_type: str | None = None
    per_layer_type: Mapping[str, tuple[Mapping[str, Any], int]] = field(default_factory=dict)

    def lines(self) -> list[str]:
        """A short printable summary, one setting per line."""
        lam = self.wavelengths
        out = [
            f"model type               {self.model_type}",
            f"layers, heads (q / kv)   {self.n_layers}, {self.n_heads} / {self.n_kv_heads}",
            f"d_head                   {self.d_head} ({lam.size} frequency pairs turn)",
            f"rope_theta (base)        {self.rope_theta:,.0f}",
            f"partial_rotary_factor    {self.partial_rotary_factor:g} (channels that turn / d_head)",
            f"rope_scaling             {dict(self.rope_scaling) if self.rope_scaling else None}",
            f"max_position_embeddings  {self.max_position_embeddings:,}",
            f"anchor length L          {self.trained_len:,} (original_max_position_embeddings, else "
            "max_position_embeddings)",
            f"sliding_window           {self.sliding_window if self.sliding_window else 'none in use'}",
            f"wavelengths, unscaled    fastest pair {lam.min():,.1f}, slowest pair {lam.max():,.0f}",
            f"pairs slower than L      {(lam > self.trained_len).sum()} of {lam.size}",
        ]
        if self.trained_len > self.max_position_embeddings:
            out.append(f"note: L {self.trained_len:,} exceeds max_position_embeddings {self.max_position_embeddings:,} "
                       f"({'no scaling reads it: a stale key?' if self.rope_scaling is None else 'check the config'})")
        if self.per_layer_type:
            types = [f"  {kind:<22} {n} of {self.n_layers} layers: {dict(params)}"
                     for kind, (params, n) in sorted(self.per_layer_type.items())]
            out[4:4] = [f"layer types rotate differently; the lines below are for {self.layer_type}:", *types]
        return out


def positional_settings(config: Any) -> PositionalSettings:
    """Read a Hugging Face config's positional fields (a config object or a dict read from config.json; either
    RoPE layout, `transformer.hf.hf_rope_parameters`; a multimodal config's text config) and compute each
    pair's wavelength from them. A "default" RoPE dict with only M-RoPE keys (Qwen3-VL's mrope_section) is no
    scaling. Where layer types rotate differently (Gemma 3), each type is listed and the rest is for the type
    `hf_rope_base` reads by default."""
    full = config
    config = hf_text_config(config)
    wavelengths = _trained_wavelengths(config)  # (r/2,)
    window = hf_get(config, "sliding_window")
    uses_window = window is not None and hf_get(config, "use_sliding_window", True)
    params = hf_rope_parameters_for(config)
    scaling = {k: v for k, v in params.items() if k not in ("rope_theta", "partial_rotary_factor")}
    per_type = hf_rope_parameters(config)
    types = hf_layer_types(config)
    differ = _rotates_differently(config)
    heads = check_int("num_attention_heads", hf_get(config, "num_attention_heads"), 1)
    return PositionalSettings(
        model_type=str(hf_get(config, "model_type", "?")),
        n_layers=check_int("num_hidden_layers", hf_get(config, "num_hidden_layers"), 1), n_heads=heads,
        n_kv_heads=int(hf_get(config, "num_key_value_heads", heads)),
        d_head=hf_head_dim(config), rope_theta=hf_rope_base(config),
        partial_rotary_factor=hf_rotary_dim(config) / hf_head_dim(config),
        rope_scaling=None if scaling.get("rope_type") == "default" else scaling,
        max_position_embeddings=check_int("max_position_embeddings", hf_get(config, "max_position_embeddings"), 1),
        trained_len=_anchor_length(full, warn=True), sliding_window=int(window) if uses_window else None,
        wavelengths=wavelengths, layer_type=_default_layer_type(config) if differ else None,
        per_layer_type={k: (p, types.count(k)) for k, p in per_type.items()} if differ else {},
    )


def _rotates_differently(config: Any) -> bool:
    """True if the config's layer types rotate with different RoPE parameters (Gemma 3: sliding layers at 10,000,
    global ones at 1,000,000 with linear 8), so no one RotaryEmbedding reproduces every layer."""
    return len({repr(sorted(p.items())) for p in hf_rope_parameters(config).values()}) > 1


def _default_layer_type(config: Any) -> str | None:
    """The layer type whose RoPE `hf_rope_base(config)` and `hf_rope_parameters_for(config)` read without one."""
    base = hf_rope_base(config)
    for kind, p in hf_rope_parameters(config).items():
        if float(p.get("rope_theta", float("nan"))) == base:
            return kind
    return None


def _trained_wavelengths(config: Any) -> np.ndarray:
    """(r/2,) 2 pi / theta_i in tokens of the rotated pairs before any scaling: base rope_theta, no rope_scaling."""
    return pair_wavelengths(hf_rotary_dim(config), hf_rope_base(config))  # (r/2,) over the r turning channels


def rotary_from_config(config: Any, *, pairing: str | None = None, layer_type: str | None = None) -> RotaryEmbedding:
    """The library's `RotaryEmbedding` for a Hugging Face config: base rope_theta, d_head, the rotated
    fraction partial_rotary_factor and rope_scaling, read by `mlbook.transformer.hf.rope_options_from_hf`
    as transformers reads them, from either layout (a key transformers would not read is a ValueError, never dropped).
    pairing: None is the checkpoint's own (`hf_rope_pairing`: "half", rotate_half's layout, for Llama and most
    families); the other one is the porting bug, kept for `pairing_check`. A config whose layer types rotate
    differently (Gemma 3: sliding layers at base 10,000, global ones at 1,000,000 scaled by 8) has no one rotation
    for every layer: without layer_type it is refused, naming each type's settings, rather than let a check
    report the model's own layout as a porting bug."""
    if pairing is not None:
        check_choice("pairing", pairing, ROPE_PAIRINGS)
    per_type = hf_rope_parameters(config)
    if layer_type is None and _rotates_differently(config):
        raise ValueError(f"this config's layer types rotate differently ({per_type}): one RotaryEmbedding cannot "
                         "reproduce every layer, so a check against it would report the model's own layout as wrong; "
                         f"pass layer_type (one of {sorted(per_type)}) and compare only that type's layers")
    options = rope_options_from_hf(config, pairing, layer_type)  # base, pairing, scaling and its parameters, partial
    base, pairing = options.pop("base"), options.pop("pairing")
    partial = options.pop("partial_rotary_factor", 1.0)
    name = options.pop("scaling", "none")
    scaling = None if name == "none" else RopeScaling(name, **options)
    extra = {} if partial == 1.0 else {"partial_rotary_factor": partial}
    return RotaryEmbedding(hf_head_dim(config, layer_type), base, scaling, pairing=pairing, **extra)


# ---------------------------------------------------------------------------
# Capturing q and k around the model's own rotation
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RotaryCapture:
    """One forward pass of a batch of one text, seen from inside every attention layer.

    q_pre, q_post: per layer (H, T, d_head) the query before and after the model's rotation;
    k_pre, k_post: per layer (H_kv, T, d_head) the same for the key; cos, sin: (T, d_rot) the tables
    the model passed to its rotation (first layer); first_key: per layer (H, T) the attention weight
    each query puts on key 0 (the model's own softmax, eager attention; a learned sink column such as
    gpt-oss's `sinks` is not a key and is not in it). float32, on the CPU. A model that passes only its
    rotated channels to apply_rotary_pos_emb (StableLM, Phi: partial rotary) gives q and k of those r
    channels. layers: each captured layer's index; windows: per layer, its sliding window (query i sees keys
    i - w + 1 .. i, transformers' sliding_window_overlay), None for full attention. nope_layers: the layers
    that did not rotate (SmolLM3's every fourth, Cohere 2's and EXAONE 4's global layers), left out of every
    tuple above: they have no rotation to compare; their attention on key 0 is kept in nope_first_key (and
    their windows in nope_windows), for `sink_mass`.
    """

    q_pre: tuple[torch.Tensor, ...]
    k_pre: tuple[torch.Tensor, ...]
    q_post: tuple[torch.Tensor, ...]
    k_post: tuple[torch.Tensor, ...]
    cos: torch.Tensor
    sin: torch.Tensor
    first_key: tuple[torch.Tensor, ...]
    layers: tuple[int, ...] = ()
    windows: tuple[int | None, ...] = ()
    nope_layers: tuple[int, ...] = ()
    nope_first_key: tuple[torch.Tensor, ...] = ()  # per NoPE layer, (H, T) attention on key 0
    nope_windows: tuple[int | None, ...] = ()

    @property
    def n_layers(self) -> int:
        return len(self.q_pre)

    @property
    def T(self) -> int:
        return int(self.q_pre[0].shape[-2])


def _attention_modules(model: Any) -> list[Any]:
    """The model's attention modules: transformers' *Attention classes that know their layer_idx, with separate
    q_proj and k_proj (Llama, Qwen, Gemma) or fused ones (Phi-3's qkv_proj, GPT-NeoX's query_key_value)."""
    mods = [m for m in model.modules() if type(m).__name__.endswith("Attention") and isinstance(
        getattr(m, "layer_idx", None), int)]
    if not mods:
        raise ValueError(f"{type(model).__name__} has no attention modules that know their layer (an *Attention "
                         "module with a layer_idx): the probe reads transformers' decoder attention")
    return sorted(mods, key=lambda m: m.layer_idx)


@contextlib.contextmanager
def _eager(model: Any) -> Iterator[None]:
    """Eager attention while inside (the fused kernels return no attention weights), then back."""
    before = model.config._attn_implementation

    def use(kind: str) -> None:
        if hasattr(model, "set_attn_implementation"):  # transformers >= 4.54
            model.set_attn_implementation(kind)
        else:
            model.config._attn_implementation = kind

    if before != "eager":
        use("eager")
    try:
        yield
    finally:
        if before != "eager":
            use(before)


def capture_rotary(model: Any, input_ids: torch.Tensor) -> RotaryCapture:
    """Run `model` on input_ids (1, T) and record q and k around its rotation in every layer.

    How: the attention modules of transformers' decoders (Llama, Qwen, Gemma, Phi-3, GPT-NeoX, Falcon, ...)
    call their modeling file's `apply_rotary_pos_emb(q, k, cos, sin)`; while this runs, that name points to a
    wrapper that records its inputs and outputs, and a forward hook on each attention module keeps its
    attention weights on key 0. A layer that does not call it (a NoPE layer: SmolLM3's every fourth, Cohere 2's
    global ones) is listed in `nope_layers` and left out. Everything is restored afterwards, also on error.
    """
    _check_ids(model, input_ids)
    mods = _attention_modules(model)
    code = sys.modules[type(mods[0]).__module__]
    original = getattr(code, "apply_rotary_pos_emb", None)
    if original is None:
        raise ValueError(f"{type(mods[0]).__name__} ({code.__name__}) does not rotate through apply_rotary_pos_emb: "
                         "the probe reads Llama-family attention (Llama, SmolLM2, Qwen2, Qwen3, Mistral, ...)")
    current: list[int] = [-1]
    rec: dict[int, tuple[torch.Tensor, ...]] = {}
    first_key: dict[int, torch.Tensor] = {}

    def wrapper(q, k, cos, sin, *args, **kwargs):  # type: ignore[no-untyped-def]
        q_out, k_out = original(q, k, cos, sin, *args, **kwargs)
        rec[current[0]] = tuple(t[0].detach().float().cpu() for t in (q, k, q_out, k_out, cos, sin))
        return q_out, k_out

    def pre_hook(module, args):  # type: ignore[no-untyped-def]
        current[0] = module.layer_idx

    future: dict[int, float] = {}

    def post_hook(module, args, output):  # type: ignore[no-untyped-def]
        weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
        if weights is not None:
            first_key[module.layer_idx] = weights[0, :, :, 0].detach().float().cpu()  # (H, T) mass on key 0
            future[module.layer_idx] = float(torch.triu(weights[0].detach().float(), diagonal=1).sum(-1).max())

    handles = [h for m in mods for h in (m.register_forward_pre_hook(pre_hook), m.register_forward_hook(post_hook))]
    code.apply_rotary_pos_emb = wrapper
    try:
        with torch.no_grad(), _eager(model):
            import transformers

            # 4.x's per-model attention classes (StableLM, Phi) return weights only when asked; 5's eager always does,
            # and asking would also keep every layer's (H, T, T) weights in the output
            ask = {} if _version_at_least(transformers.__version__, (5,)) else {"output_attentions": True}
            ids = input_ids.to(next(model.parameters()).device)
            model(input_ids=ids, **ask)
            if rec and not first_key and not ask:  # an attention class that returns weights only when asked (Falcon)
                rec.clear()
                model(input_ids=ids, output_attentions=True)
    finally:
        code.apply_rotary_pos_emb = original
        for h in handles:
            h.remove()
    layers = [m.layer_idx for m in mods]
    unrotated = [i for i in layers if i not in rec]
    if len(unrotated) == len(layers):
        raise ValueError(f"no layer of {type(model).__name__} rotated q and k through apply_rotary_pos_emb: "
                         "nothing to compare (a model without RoPE, or one that rotates elsewhere)")
    layers = [i for i in layers if i in rec]  # NoPE layers (SmolLM3's every fourth) have no rotation to compare
    leaky = sorted(i for i, mass in future.items() if mass > 1e-4)
    if leaky:  # Falcon loaded with sdpa: its eager branch adds sdpa's boolean mask (True = 1.0) and masks nothing
        raise ValueError(f"layers {leaky} of {type(model).__name__} put up to {max(future[i] for i in leaky):.2f} of a "
                         "query's attention on later keys when switched to eager attention: their eager path does "
                         "not mask the way this model was loaded. Load it with attn_implementation='eager' "
                         "(load_probe_model(name, attn_implementation='eager')) and capture again")
    silent = [i for i in layers if i not in first_key]
    if silent:
        kind = type({m.layer_idx: m for m in mods}[silent[0]]).__name__
        raise ValueError(f"layers {silent} ({kind}) returned no attention weights under eager attention: this "
                         "model's attention class is fixed when it is built; load it with attn_implementation='eager'")
    q_pre, k_pre, q_post, k_post = (tuple(rec[i][j] for i in layers) for j in range(4))
    # a NoPE layer's attention is still the model's own: kept for sink_mass (all of them, or none)
    nope = unrotated if all(i in first_key for i in unrotated) else []
    return RotaryCapture(q_pre, k_pre, q_post, k_post, rec[layers[0]][4], rec[layers[0]][5],
                         tuple(first_key[i] for i in layers), tuple(layers), _layer_windows(model.config, layers),
                         tuple(unrotated), tuple(first_key[i] for i in nope), _layer_windows(model.config, nope))


def _layer_windows(config: Any, layers: list[int]) -> tuple[int | None, ...]:
    """Per captured layer, its sliding window (`hf_layer_types`: a sliding_attention layer sees the last
    sliding_window keys), None for a layer that sees every earlier key."""
    config = hf_text_config(config)  # a multimodal wrapper (Gemma3ForConditionalGeneration) keeps it in text_config
    window = hf_get(config, "sliding_window")
    if window is None or not hf_get(config, "use_sliding_window", True):
        return (None,) * len(layers)
    types = hf_layer_types(config)
    return tuple(int(window) if types[i] == "sliding_attention" else None for i in layers)


# ---------------------------------------------------------------------------
# Does the library's rotation reproduce the model's?
# ---------------------------------------------------------------------------


def rounding_bound(T: int, max_inv_freq: float) -> float:
    """The largest max|library - model| / max|q|, |k| that float32 rounding explains for a rotation of T positions:

        2^-21 (1 + (T - 1) theta_max)

    The angle (T - 1) theta_max of the fastest pair is held in float32, whose spacing at that size is
    (T - 1) theta_max 2^-23; the model and the library may round it (and theta itself) to neighbouring floats,
    and each rotated entry moves by the entry times the angle's error. 2^-21 leaves a factor of 2 over two such
    steps; the 1 covers the rounding of cos, sin and the products at small angles. At 512 tokens and theta_max
    = 1 this is 2.4e-4 (a Qwen3-0.6B-shaped model, base 1e6, d_head 128, measures 2.5e-5 with its own layout);
    the other layout is O(1)."""
    check_int("T", T, 1)
    theta = check_positive_float("max_inv_freq", max_inv_freq)
    return 2.0**-21 * (1.0 + (T - 1) * theta)


@dataclass(frozen=True)
class RotationCheck:
    """max |library rotation of q_pre - model's q_post| per layer (and for k), and the scale to read it against.

    error_q, error_k: (L,) float; scale: max |q_post|, |k_post| over all layers. pairing: the
    layout the library rotated with; permuted: True if q/k channels were first moved to that layout.
    bound: `rounding_bound` for the captured length and the library's fastest frequency. layers: the model's
    index of each entry (NoPE layers are not captured)."""

    pairing: str
    permuted: bool
    error_q: np.ndarray
    error_k: np.ndarray
    scale: float
    bound: float = float("nan")
    layers: tuple[int, ...] = ()

    @property
    def max_error(self) -> float:
        return float(max(self.error_q.max(), self.error_k.max()))

    @property
    def relative_error(self) -> float:
        """max_error / scale: float32 rounding (below `bound`) when the rotation is the model's, O(1) when not."""
        return self.max_error / self.scale if self.scale > 0 else float("nan")

    @property
    def within_rounding(self) -> bool:
        """True if relative_error is no more than float32 rounding explains at this length (`rounding_bound`)."""
        return bool(self.relative_error <= self.bound)

    def reading(self) -> str:
        """The relative error as the page prints it: "rounding (below the float32 bound ...)", since rounding's
        own digits vary with the CPU, or its value."""
        if self.within_rounding:
            return f"rounding (below the float32 bound {self.bound:.1e})"
        return f"{self.relative_error:.2g}"


def _to_layout(d: int, r: int, pairing: str) -> torch.Tensor:
    """(d,) the channel order that moves the r rotated channels from the other layout into `pairing`'s
    (`pairing_permutation`: x_interleaved = x_half[perm]; its inverse for "half"); channels r.. stay."""
    to_interleaved = pairing_permutation(r)  # (r,)
    perm = to_interleaved if pairing == "interleaved" else torch.argsort(to_interleaved)  # (r,)
    return torch.cat([perm, torch.arange(r, d)])  # (d,)


def rotation_check(
    capture: RotaryCapture, rotary: RotaryEmbedding | Sequence[RotaryEmbedding], *, permute: bool = False,
) -> RotationCheck:
    """Rotate every captured pre-rotation q and k with `rotary` (positions 0..T-1) and compare with the
    model's own rotated q and k. rotary: one RotaryEmbedding for every layer, or one per captured layer
    (layer types that rotate differently, `pairing_check`). permute=True first moves every head's rotated
    channels from the other layout into rotary's (`pairing_permutation`, the row permutation that
    `convert_rotary_weights` applies to q_proj and k_proj) and compares in that layout.

    Partial rotary: a model that rotates its first r channels inside apply_rotary_pos_emb (GLM) gives the
    whole head, compared channel for channel; one that passes only the r rotated channels (StableLM, Phi)
    gives r, compared with the library's rotation of the first r channels of a head (the rest zero)."""
    rotaries = [rotary] * capture.n_layers if isinstance(rotary, RotaryEmbedding) else list(rotary)
    if not rotaries or not all(isinstance(r, RotaryEmbedding) for r in rotaries):
        raise TypeError("rotary must be a RotaryEmbedding or a sequence of them, one per captured layer, got "
                        f"{type(rotary).__name__}")
    if len(rotaries) != capture.n_layers:
        raise ValueError(f"rotary gives {len(rotaries)} RotaryEmbeddings for {capture.n_layers} captured layers")
    d = capture.q_pre[0].shape[-1]
    errors = {"q": [], "k": []}
    scale, fastest = 0.0, 0.0
    for rot, pre_q, pre_k, post_q, post_k in zip(rotaries, capture.q_pre, capture.k_pre, capture.q_post,
                                                 capture.k_post):
        r = rot.rotary_dim
        if d not in (rot.d_head, r):
            raise ValueError(f"rotary has d_head={rot.d_head} ({r} rotated channels), the captured heads have {d}")
        perm = _to_layout(d, r, rot.pairing) if permute else torch.arange(d)  # (d,)
        fastest = max(fastest, float(rot.inv_freq.max()))
        for name, pre, post in (("q", pre_q, post_q), ("k", pre_k, post_k)):
            x = pre[..., perm]  # (H, T, d)
            if d < rot.d_head:  # only the rotated slice was captured: rotate it as a head's first r channels
                x = F.pad(x, (0, rot.d_head - d))  # (H, T, d_head)
            ours = rot.rotate(x)[..., :d]  # (H, T, d) the library's rotation, positions 0..T-1
            errors[name].append((ours - post[..., perm]).abs().max().item())
            scale = max(scale, post.abs().max().item())
    return RotationCheck(rotaries[0].pairing, permute, np.array(errors["q"]), np.array(errors["k"]), scale,
                         rounding_bound(capture.T, fastest), _layer_ids(capture))


def _layer_ids(capture: RotaryCapture) -> tuple[int, ...]:
    """The model's index of each captured layer (0..n-1 for a capture made without them)."""
    return capture.layers or tuple(range(capture.n_layers))


@dataclass(frozen=True)
class PairingCheck:
    """The pairing check on the model's own q and k (section 2.4's porting bug, on real weights):

    right: the library with the checkpoint's own layout (`hf_rope_pairing`: "half" for Llama and most
    families, "interleaved" for Cohere, GLM, Helium, ERNIE 4.5, ...) rotates q, k as the model does;
    wrong: the library told the other layout, channels left where they are;
    converted: the other layout, after moving every head's channels into it."""

    right: RotationCheck
    wrong: RotationCheck
    converted: RotationCheck

    @property
    def model_pairing(self) -> str:
        return self.right.pairing

    @property
    def other_pairing(self) -> str:
        return self.wrong.pairing


def _rotaries(capture: RotaryCapture, config: Any, pairing: str) -> RotaryEmbedding | list[RotaryEmbedding]:
    """The library's rotation for every captured layer: one RotaryEmbedding, or one per layer where layer types
    rotate differently (Gemma 3), each built from its own type's parameters."""
    if not _rotates_differently(config):
        return rotary_from_config(config, pairing=pairing)
    types = hf_layer_types(config)
    layers = capture.layers or tuple(range(capture.n_layers))
    built = {kind: rotary_from_config(config, pairing=pairing, layer_type=kind) for kind in sorted(set(types))
             if kind in hf_rope_parameters(config)}
    missing = sorted({types[i] for i in layers} - set(built))
    if missing:
        raise ValueError(f"layer types {missing} have no RoPE parameters in this config: nothing to compare")
    return [built[types[i]] for i in layers]


def pairing_check(capture: RotaryCapture, config: Any) -> PairingCheck:
    """`rotation_check` three ways: the checkpoint's own layout (`hf_rope_pairing(config)`); the other layout on
    the unmoved channels (the porting bug); the other layout on channels moved into it by `pairing_permutation`.
    Where layer types rotate differently (Gemma 3), each layer is compared with its own type's rotation."""
    own = hf_rope_pairing(config)
    other = "interleaved" if own == "half" else "half"
    mine, theirs = _rotaries(capture, config, own), _rotaries(capture, config, other)
    return PairingCheck(rotation_check(capture, mine), rotation_check(capture, theirs),
                        rotation_check(capture, theirs, permute=True))


# ---------------------------------------------------------------------------
# Attention sinks and the frequency-pair norms
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SinkMass:
    """mass[l, h]: mean over queries i = q_start..T-1 of the attention weight on key 0;
    uniform: that mean if every query spread its weight evenly over its i + 1 keys, mean 1/(i + 1) (a layer that
    sees every earlier key); uniform_per_layer: (L,) the same for each layer's own keys: a sliding layer of
    window w sees min(i + 1, w) keys, and key 0 only while i < w, so its share is 1/(i + 1) for i < w, else 0.
    windows: per layer, its window (None: full attention); layers: the model's index of each row."""

    mass: np.ndarray  # (L, H)
    uniform: float
    q_start: int
    T: int
    uniform_per_layer: np.ndarray | None = None  # (L,)
    windows: tuple[int | None, ...] = ()
    layers: tuple[int, ...] = ()

    @property
    def baseline(self) -> np.ndarray:
        """(L,) the uniform share of key 0 for each layer's own keys."""
        if self.uniform_per_layer is None:
            return np.full(self.mass.shape[0], self.uniform)
        return self.uniform_per_layer

    @property
    def ratio(self) -> np.ndarray:
        """(L, H) mass / the layer's uniform share: 1 for a head that treats the first token like any other;
        NaN on a sliding layer none of whose queries q_start.. can see key 0."""
        base = self.baseline[:, None]  # (L, 1)
        return np.divide(self.mass, base, out=np.full(self.mass.shape, np.nan), where=base > 0)

    def summary(self) -> str:
        """The printable reading: the uniform share, the heads' range, how many heads exceed 5x their layer's
        uniform share, and each sliding window's own uniform share."""
        line = (f"queries {self.q_start}..{self.T - 1}: uniform attention gives key 0 {self.uniform:.3f}; "
                f"the heads give it {self.mass.min():.3f} to {self.mass.max():.3f} "
                f"({int((self.ratio > 5).sum())} of {self.mass.size} heads above 5x uniform)")
        ids = self.layers or tuple(range(self.mass.shape[0]))
        for w in sorted({w for w in self.windows if w is not None and w < self.T}):
            rows = [j for j, x in enumerate(self.windows) if x == w]
            layers = [ids[j] for j in rows]
            share = float(self.baseline[rows[0]])
            line += (f"\nlayers {layers} slide a window of {w} keys: uniform attention there gives key 0 "
                     f"{share:.3f}" + (" (no query from q_start on sees it)" if share == 0 else ""))
        return line


def _uniform_share(q_start: int, T: int, window: int | None) -> float:
    """Mean over queries i = q_start..T-1 of the share of key 0 under uniform attention over the keys query i
    sees: 1/(i + 1) with every earlier key; with a window of w keys, 1/(i + 1) while i < w, else 0."""
    i = np.arange(q_start, T)  # (n,) query positions
    share = 1.0 / (i + 1)  # (n,)
    if window is not None:
        share = np.where(i < window, share, 0.0)  # key 0 has left the window of queries i >= w
    return float(share.mean())


def sink_mass(capture: RotaryCapture, q_start: int | None = None) -> SinkMass:
    """Attention mass on the first token per layer and head (the sink of Xiao et al., 2024), averaged over
    queries q_start..T-1 (default T // 8: the first queries have few keys, so any head weights key 0 there),
    beside the share uniform attention over each layer's own keys would give it (a sliding layer's window).
    Every layer whose weights were captured, NoPE layers included (the global layers of Cohere 2, where a sink
    is most often looked for), in the model's order."""
    T = capture.T
    q_start = max(1, T // 8) if q_start is None else check_int("q_start", q_start, 0)
    if q_start >= T:
        raise ValueError(f"q_start ({q_start}) must be below the captured length T = {T}")
    rows = sorted(zip(_layer_ids(capture) + capture.nope_layers[: len(capture.nope_first_key)],
                      capture.first_key + capture.nope_first_key,
                      (capture.windows or (None,) * capture.n_layers) + (capture.nope_windows or
                                                                        (None,) * len(capture.nope_first_key))),
                  key=lambda row: row[0])
    mass = np.stack([fk[:, q_start:].mean(-1).numpy() for _, fk, _ in rows])  # (L, H)
    windows = tuple(w for _, _, w in rows)
    per_layer = np.array([_uniform_share(q_start, T, w) for w in windows])  # (L,)
    return SinkMass(mass.astype(np.float64), _uniform_share(q_start, T, None), q_start, T, per_layer, windows,
                    tuple(i for i, _, _ in rows))


@dataclass(frozen=True)
class PairNorms:
    """q[l, h, i], k[l, h, i]: the norm of frequency pair i, sqrt(x_a^2 + x_b^2), averaged over the T tokens
    (Barbero et al., 2025). A rotation keeps a pair's norm, so this reads what the weights put in each
    pair, whatever the position. wavelengths: (P,) 2 pi / theta_i in tokens as trained (pair 0 the fastest)."""

    q: np.ndarray  # (L, H, P)
    k: np.ndarray  # (L, H_kv, P)
    wavelengths: np.ndarray  # (P,)
    trained_len: int
    layers: tuple[int, ...] = ()  # the model's index of each row (NoPE layers are not captured)

    @property
    def mean_q(self) -> np.ndarray:
        """(P,) q's pair norms averaged over layers and heads."""
        return self.q.mean(axis=(0, 1))

    @property
    def mean_k(self) -> np.ndarray:
        return self.k.mean(axis=(0, 1))


def pair_norms(capture: RotaryCapture, config: Any) -> PairNorms:
    """Per-pair norms of the captured q and k (before rotation; after it they are the same up to rounding),
    pairs in the checkpoint's own layout (`hf_rope_pairing`): "half", pair i is channels (i, i + r/2) of the r
    rotated channels; "interleaved", channels (2i, 2i + 1). Wavelengths before any rope_scaling (where layer
    types rotate differently, those of the type `hf_rope_base` reads by default)."""
    wavelengths = _trained_wavelengths(config)  # (r/2,)
    r = 2 * wavelengths.shape[0]  # rotated channels
    d = capture.q_pre[0].shape[-1]
    if d < r:
        raise ValueError(f"the config rotates {r} channels, the captured heads have {d}")
    # interleaved checkpoints: move channels (2i, 2i + 1) to (i, i + r/2), the layout rotary_pair_norms reads
    perm = torch.arange(d) if hf_rope_pairing(config) == "half" else _to_layout(d, r, "half")  # (d,)

    def norms(x: torch.Tensor) -> np.ndarray:  # (H, T, d_head) -> (H, P)
        return rotary_pair_norms(x[..., perm].double(), r).mean(dim=-2).numpy()  # (H, P)

    return PairNorms(np.stack([norms(q) for q in capture.q_pre]), np.stack([norms(k) for k in capture.k_pre]),
                     wavelengths, _anchor_length(config, warn=False), _layer_ids(capture))


# ---------------------------------------------------------------------------
# Loss past the trained length
# ---------------------------------------------------------------------------


def _rotary_owner(model: Any) -> Any:
    decoder = model.get_decoder()
    if not hasattr(decoder, "rotary_emb"):
        raise ValueError(f"{type(decoder).__name__} has no rotary_emb module to override")
    return decoder


def _length_dependent(rope_type: str) -> bool:
    """Scalings whose frequencies transformers changes with the length of the pass (`dynamic_rope_update`):
    dynamic NTK grows the base past max_position_embeddings, LongRoPE swaps to its long factors past
    original_max_position_embeddings."""
    return "dynamic" in rope_type or rope_type == "longrope"


def _shipped_scaling(config: Any) -> dict[str, Any] | None:
    """The scaling the model ships (its rope_type and that scaling's keys), None for plain RoPE."""
    params = hf_rope_parameters_for(config)
    if params["rope_type"] == "default":
        return None
    return {k: v for k, v in params.items() if k not in ("rope_theta", "partial_rotary_factor")}


def _override_parameters(config: Any, rope_scaling: Any) -> dict[str, Any]:
    """`rope_scaling` as the rotary module gets it: rope_type set (the legacy "type" read as transformers
    reads it), checked by the library's config reader (`transformer.hf.rope_scaling_from_hf`) laid out both
    as transformers 4.x (rope_theta + rope_scaling) and as 5 (rope_parameters) would hold it. A key either
    version would not read, a missing factor, a setting the two versions would read differently, and a base
    or rotated fraction other than the model's are refused by name."""
    if not isinstance(rope_scaling, Mapping):
        raise TypeError(f"rope_scaling must be a dict such as {{'rope_type': 'yarn', 'factor': 2.0}} (or None for the "
                        f"model as shipped), got {type(rope_scaling).__name__} ({rope_scaling!r})")
    for key in ("short_factor", "long_factor"):  # LongRoPE's per-pair lists; a dict would be read by its keys
        value = rope_scaling.get(key)
        if value is not None and (not isinstance(value, (list, tuple)) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
                for v in value)):
            raise TypeError(f"rope_scaling[{key!r}] must be a list of positive numbers, one per rotated frequency "
                            f"pair, got {type(value).__name__} ({value!r})")
    model_type = str(getattr(config, "model_type", ""))
    family = _family_refusal(config, rope_scaling)
    if family is not None:  # before hf_rope_type, which would read it as LongRoPE and ask for short_factor
        raise ValueError(family)
    kind = hf_rope_type(rope_scaling, model_type)  # "type" read as transformers reads it; unknown names refused
    base, M = hf_rope_base(config), int(config.max_position_embeddings)
    head = hf_head_dim(config)
    shipped_fraction = hf_rotary_dim(config) / head
    if "rope_theta" in rope_scaling and rope_scaling["rope_theta"] != base:
        raise ValueError(f"rope_scaling['rope_theta']={rope_scaling['rope_theta']!r} differs from the model's base "
                         f"{base:g}: an override changes the scaling, not the base (transformers 5 would rotate at the "
                         "override's base, 4.x ignores the key and keeps the config's rope_theta). Remove it")
    if "partial_rotary_factor" in rope_scaling and rope_scaling["partial_rotary_factor"] != shipped_fraction:
        raise ValueError(f"rope_scaling['partial_rotary_factor']={rope_scaling['partial_rotary_factor']!r} differs "
                         f"from the model's {shipped_fraction:g}: how many channels turn is the model's, not the "
                         "scaling's (transformers 5 would build frequencies for fewer channels than its attention "
                         "rotates and fail on the shapes, 4.x ignores the key). Remove it")
    scaling = {"rope_type": kind, **{k: v for k, v in rope_scaling.items()
                                     if k not in ("type", "rope_type", "rope_theta", "partial_rotary_factor")}}
    if kind == "longrope":  # one factor per rotated pair; transformers would fail on the shapes mid-pass
        pairs = hf_rotary_dim(config) // 2
        for key in ("short_factor", "long_factor"):
            value = scaling.get(key)
            if isinstance(value, (list, tuple)) and len(value) != pairs:
                raise ValueError(f"rope_scaling[{key!r}] has {len(value)} entries; LongRoPE needs one per rotated "
                                 f"frequency pair, r/2 = {pairs} for this model ({2 * pairs} rotated channels)")
    top_original = getattr(config, "original_max_position_embeddings", None)  # Phi-3 states it at the top level
    if kind == "llama3":  # 4.57 reads it from rope_scaling only; 5's standardize_rope_params fills it so
        scaling.setdefault("original_max_position_embeddings", top_original or M)
    common: dict[str, Any] = {"model_type": model_type, "max_position_embeddings": M, "head_dim": head,
                              "hidden_size": config.hidden_size, "num_attention_heads": config.num_attention_heads}
    if top_original is not None:
        common["original_max_position_embeddings"] = top_original
    fraction = {} if shipped_fraction == 1.0 else {"partial_rotary_factor": shipped_fraction}
    layouts = {"transformers 4.x": {**common, "rope_theta": base, **fraction, "rope_scaling": dict(scaling)},
               "transformers 5": {**common, "rope_parameters": {"rope_theta": base, **fraction, **scaling}}}
    read = {version: rope_scaling_from_hf(layout) for version, layout in layouts.items()}
    if read["transformers 4.x"] != read["transformers 5"]:
        raise ValueError(f"rope_scaling={dict(rope_scaling)!r} is read differently by transformers 4.x "
                         f"({read['transformers 4.x']}) and 5 ({read['transformers 5']}): write it so both agree")
    return scaling


def _family_refusal(config: Any, rope_scaling: Mapping[str, Any]) -> str | None:
    """Why this family's config class cannot express `rope_scaling`, or None: Phi-3's (and Phi-4-multimodal's)
    reads a "yarn" rope_type as LongRoPE (`Phi3Config.convert_rope_params_to_dict`, "for backward
    compatibility if previous version used 'su' or 'yarn'"; 4.57's `_rope_scaling_adjustment` alike), so a
    YaRN override on Phi-3, Phi-3.5 or Phi-4-mini would be built as LongRoPE, which needs per-pair factors."""
    written = rope_scaling.get("rope_type", rope_scaling.get("type"))
    model_type = str(getattr(config, "model_type", "") or "")
    if written == "yarn" and model_type.startswith(SU_FAMILIES):
        return (f"rope_scaling={dict(rope_scaling)!r} asks for YaRN, but {type(config).__name__} (model_type "
                f"{model_type!r}) reads rope_type 'yarn' as 'longrope', as transformers' own config class does for "
                "backward compatibility: a YaRN override cannot be expressed for this family (Phi-3, Phi-3.5, "
                "Phi-4-mini). Use {'rope_type': 'dynamic', 'factor': ...}, or a 'longrope' dict with "
                "short_factor and long_factor")
    return None


def override_refusal(config: Any, rope_scaling: Mapping[str, Any] | None = None) -> str | None:
    """Why `rope_override` refuses every override on a model with this config, or None where it takes one:
    layer types that rotate differently (Gemma 3: one rope_scaling cannot say which type it is for); RoPE kept
    per layer type even where the types agree (OLMo 3 under transformers 5: the override changes one
    rope_parameters dict); M-RoPE keys (Qwen3-VL, Qwen3.5: mrope_section, mrope_interleaved), which an
    override would drop rather than carry over. Given `rope_scaling`, also why this family cannot take that
    override: YaRN on Phi-3, whose config class reads "yarn" as LongRoPE (`_family_refusal`). Other faults of
    the override itself (an unknown key, a missing factor) are not refusals: `rope_override` raises for them."""
    if rope_scaling is not None:
        if not isinstance(rope_scaling, Mapping):
            raise TypeError(f"rope_scaling must be a dict such as {{'rope_type': 'yarn', 'factor': 2.0}} (or None), "
                            f"got {type(rope_scaling).__name__} ({rope_scaling!r})")
        family = _family_refusal(config, rope_scaling)
        if family is not None:
            return family
    if _rotates_differently(config):
        return (f"{type(config).__name__}'s layer types rotate differently ({hf_rope_parameters(config)}): one "
                "rope_scaling override cannot say which type it is for")
    current = getattr(config, "rope_parameters", None)
    if isinstance(current, Mapping) and current and all(isinstance(v, Mapping) for v in current.values()):
        return (f"{type(config).__name__} keeps its RoPE per layer type ({sorted(current)}); rope_override changes "
                "a single rope_parameters dict")
    params = current if isinstance(current, Mapping) else (getattr(config, "rope_scaling", None) or {})
    mrope = sorted(k for k in params if str(k).startswith("mrope"))
    if mrope:
        return (f"{type(config).__name__}'s RoPE carries M-RoPE keys {mrope}: an override would drop them, and "
                "with them the position ids' split into time, height and width")
    return None


@contextlib.contextmanager
def rope_override(
    model: Any, rope_scaling: Mapping[str, Any] | None, *, replace_shipped: bool = False,
) -> Iterator[Any]:
    """Inside, the model rotates with `rope_scaling` set on (a copy of) its config, as transformers does with
    a config's rope_scaling (e.g. {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 8192});
    None leaves it as shipped. The model's rotary embedding module is rebuilt by its own class from that
    config and put back on exit. Yields the config in use.

    The override is checked before anything is built, as the library reads a config
    (`transformer.hf.rope_scaling_from_hf`, in both transformers layouts): a key transformers would not
    read, a missing factor, a setting 4.x and 5 would read differently, a base or rotated fraction other
    than the model's and an unknown scaling name are refused by name; the legacy {"type": ...} is read as
    transformers reads it and passed on as rope_type.

    An override replaces the model's own scaling, it does not compose with it: YaRN factor 2 on a Llama
    3.1 (llama3, factor 8) is YaRN factor 2 alone, undoing the shipped bands. A model that ships a scaling
    is therefore refused, naming it, unless replace_shipped=True. A model whose layer types rotate
    differently (Gemma 3: sliding layers at 10,000, global ones at 1,000,000 with linear 8) is refused:
    one rope_scaling cannot say which type it is for.

    An override whose rebuilt module has exactly the shipped inverse frequencies and attention factor
    (linear or YaRN with factor 1, the shipped scaling again, "default" on plain RoPE) is a ValueError: it
    would change nothing. Dynamic NTK and LongRoPE are exempt, because transformers changes their
    frequencies with the pass's length (`dynamic_rope_update` in modeling_rope_utils.py): dynamic NTK is
    built with the plain frequencies and grows its base once a pass exceeds max_position_embeddings;
    LongRoPE is built with its short factors and its attention factor, and swaps to its long factors once a
    pass exceeds original_max_position_embeddings. `override_effect` measures what an override changed on
    a given input."""
    check_bool("replace_shipped", replace_shipped)
    if rope_scaling is None:
        yield model.config
        return
    scaling = _override_parameters(model.config, rope_scaling)
    kind = scaling["rope_type"]
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    if kind != "default" and kind not in ROPE_INIT_FUNCTIONS:  # "proportional" is transformers 5's
        raise ValueError(f"rope_scaling type {kind!r} is not one this transformers computes (it has "
                         f"{', '.join(sorted(ROPE_INIT_FUNCTIONS))})")
    refused = override_refusal(model.config)
    if refused is not None:
        raise ValueError(f"{refused}; the probe does not override this model (measure it as shipped)")
    shipped_scaling = _shipped_scaling(model.config)
    if shipped_scaling is not None and not replace_shipped:
        raise ValueError(f"the model ships the scaling {shipped_scaling}; rope_scaling={dict(rope_scaling)!r} would "
                         f"replace it, not compose with it (the pass would rotate with {kind} alone, the shipped "
                         f"{shipped_scaling['rope_type']} undone). Pass replace_shipped=True to measure that "
                         "replacement, or write the whole scaling you mean in rope_scaling")
    owner = _rotary_owner(model)
    old = owner.rotary_emb
    config = copy.deepcopy(model.config)
    if getattr(config, "rope_parameters", None) is not None:
        # transformers 5: rope_scaling is rope_parameters, which holds the base; an override keeps the
        # config's base and partial rotary factor (a per-layer-type dict is refused)
        current = config.rope_parameters
        if all(isinstance(v, Mapping) for v in current.values()):
            raise ValueError(f"{type(config).__name__} keeps its RoPE per layer type ({sorted(current)}); "
                             "rope_override changes a single rope_parameters dict")
        keep = {k: current[k] for k in ("rope_theta", "partial_rotary_factor") if k in current}
        config.rope_parameters = {**keep, **scaling}
        config.standardize_rope_params()  # as the config class does when it is made: the trained length filled in
    else:
        config.rope_scaling = scaling
    device = next(model.parameters()).device
    new = type(old)(config=config).to(device)  # transformers 5 deprecates the device argument
    shipped = getattr(old, "original_inv_freq", old.inv_freq).to(device)  # as built, before any dynamic rescale
    if (not _length_dependent(kind) and torch.equal(new.inv_freq.float(), shipped.float())
            and float(new.attention_scaling) == float(old.attention_scaling)):
        raise ValueError(f"rope_scaling {dict(rope_scaling)!r} gives the model exactly the inverse frequencies and "
                         "attention factor it ships with: the override would change nothing (pass None for the model "
                         "as shipped)")
    owner.rotary_emb = new
    try:
        yield config
    finally:
        owner.rotary_emb = old


@contextlib.contextmanager
def _as_found(module: torch.nn.Module) -> Iterator[None]:
    """Inside, `module` may change its own buffers and attributes (transformers' `dynamic_rope_update` grows
    inv_freq and max_seq_len_cached, LongRoPE caches its long frequencies); on exit they are as found."""
    persistent = set(module.state_dict(keep_vars=True))
    # every name, aliases included: after a short pass LongRoPE's inv_freq is its original_inv_freq, one tensor
    # under two names, and named_buffers would list it once (the other name then deleted on exit)
    buffers = {name: None if b is None else b.clone()
               for name, b in module.named_buffers(recurse=False, remove_duplicate=False)}
    attributes = {k: v for k, v in vars(module).items() if not k.startswith("_")}
    try:
        yield
    finally:
        for name in [n for n, _ in module.named_buffers(recurse=False, remove_duplicate=False) if n not in buffers]:
            delattr(module, name)
        for name, b in buffers.items():
            module.register_buffer(name, b, persistent=name in persistent)
        for key in [k for k in vars(module) if not k.startswith("_") and k not in attributes]:
            delattr(module, key)
        for key, value in attributes.items():
            setattr(module, key, value)


@dataclass(frozen=True)
class _Pass:
    """One pass of the decoder: its last hidden states and what its rotary module used."""

    hidden: torch.Tensor  # (T, d_model)
    inv_freq: torch.Tensor  # (r/2,) float32 on the CPU: the inverse frequencies in force during the pass
    cos: torch.Tensor  # (T, r) float32 on the CPU, attention factor included
    sin: torch.Tensor  # (T, r)
    attention_scaling: float


def _decoder_pass(model: Any, ids: torch.Tensor, *, record: bool = True) -> _Pass | torch.Tensor:
    """model.get_decoder() on ids (1, T), no cache. record=True: also the rotary module's tables (a forward hook
    runs after transformers' `dynamic_rope_update` has rescaled inv_freq for this pass's length), as a _Pass;
    record=False: the last hidden states (T, d_model) alone, for any rotary module (Gemma 3's in transformers 5
    keeps one inv_freq per layer type). The rotary module is left as it was found: a dynamic base grown by this
    pass does not carry over to the next."""
    rotary = _rotary_owner(model).rotary_emb
    if record and not isinstance(getattr(rotary, "inv_freq", None), torch.Tensor):
        raise ValueError(f"{type(rotary).__name__} keeps no single inv_freq (one per layer type, "
                         f"{sorted(hf_rope_parameters(model.config))}): the probe cannot say which frequencies a pass "
                         "used")
    seen: dict[str, Any] = {}

    def keep(module, args, output):  # type: ignore[no-untyped-def]
        if not seen:  # the decoder calls it once per pass; keep the first call if a model calls it again
            seen.update(inv_freq=module.inv_freq.detach().float().cpu().clone(),
                        cos=output[0][0].detach().float().cpu(), sin=output[1][0].detach().float().cpu(),
                        attention_scaling=float(module.attention_scaling))

    handle = rotary.register_forward_hook(keep) if record else None
    try:
        with torch.no_grad(), _as_found(rotary):
            hidden = model.get_decoder()(input_ids=ids, use_cache=False).last_hidden_state[0]  # (T, d_model)
    finally:
        if handle is not None:
            handle.remove()
    if not record:
        return hidden
    if not seen:
        raise ValueError(f"{type(rotary).__name__} was not called in the forward pass: nothing to compare")
    return _Pass(hidden, **seen)


def _logits(model: Any, hidden: torch.Tensor) -> torch.Tensor:
    """(n, vocab) float32 logits from (n, d_model) last hidden states: the output head, then any final soft cap."""
    logits = model.get_output_embeddings()(hidden).float()  # (n, vocab)
    cap = hf_get(hf_text_config(model.config), "final_logit_softcapping")
    return torch.tanh(logits / cap) * cap if cap else logits


def _check_ids(model: Any, input_ids: Any, at_least: int = 1, needs: str = "this") -> None:
    """input_ids must be a (1, T) integer tensor of at least `at_least` ids, each a row of the model's embedding."""
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.shape[0] != 1:
        raise ValueError("input_ids must be a (1, T) tensor of token ids, "
                         f"got {getattr(input_ids, 'shape', input_ids)!r}")
    if input_ids.dtype == torch.bool or input_ids.dtype.is_floating_point or input_ids.dtype.is_complex:
        raise TypeError(f"input_ids must hold integer token ids (torch.int64, as encode_text gives), got dtype "
                        f"{input_ids.dtype}")
    T = input_ids.shape[1]
    if T < at_least:
        raise ValueError(f"input_ids has {T} tokens; {needs} needs at least {at_least}")
    vocab = int(model.get_input_embeddings().num_embeddings)
    lo, hi = int(input_ids.min()), int(input_ids.max())
    if lo < 0 or hi >= vocab:
        raise ValueError(f"input_ids holds token ids from {lo} to {hi}; the model's vocabulary is 0 to {vocab - 1}")


def _length_threshold(rotary: Any) -> tuple[str, int] | None:
    """(the config key, its value): the length a pass must exceed before transformers changes a rotary module's
    frequencies (`dynamic_rope_update`), None for a scaling that does not follow the length.

    dynamic NTK: max_position_embeddings (the module's original_max_seq_len), 4.57 and 5 alike. LongRoPE: 5 reads
    rope_parameters['original_max_position_embeddings']; 4.57 the config's top-level
    original_max_position_embeddings, else max_position_embeddings."""
    kind = str(rotary.rope_type)
    if "dynamic" in kind:
        return "max_position_embeddings", int(rotary.original_max_seq_len)
    if kind != "longrope":
        return None
    config = rotary.config
    params = getattr(config, "rope_parameters", None)
    if isinstance(params, Mapping) and params.get("original_max_position_embeddings") is not None:
        return "original_max_position_embeddings", int(params["original_max_position_embeddings"])
    top = getattr(config, "original_max_position_embeddings", None)
    if top is not None:
        return "original_max_position_embeddings", int(top)
    return "max_position_embeddings", int(config.max_position_embeddings)


@dataclass(frozen=True)
class OverrideEffect:
    """What a rope_scaling override changed in one pass over a text, against the model as shipped.

    divisor: (r/2,) shipped inverse frequency / the override's, per pair, as used in the pass (1: the pair
    left alone; 2: turned half as fast; below 1: turned faster, as when an override undoes a shipped
    scaling); attention_scaling: the override's factor on cos and sin (the shipped one is
    shipped_attention_scaling); max_cos_sin_change: max |cos' - cos|, |sin' - sin| over positions and
    channels; max_logit_change: max |logit' - logit| over every position and vocabulary entry, beside
    logit_scale, the largest |logit| as shipped. rescale_above, rescale_key: for a scaling that follows the
    length, the length a pass must exceed before transformers changes its frequencies and the config key it
    comes from (dynamic NTK: max_position_embeddings, past which the base grows; LongRoPE:
    original_max_position_embeddings, past which the long factors replace the short ones); None for the
    others. All zeros (divisor all 1) mean the override did not take effect on this input: dynamic NTK on a
    pass no longer than rescale_above, for one."""

    label: str
    T: int
    divisor: np.ndarray  # (r/2,)
    attention_scaling: float
    shipped_attention_scaling: float
    max_cos_sin_change: float
    max_logit_change: float
    logit_scale: float
    rescale_above: int | None
    rescale_key: str | None = None
    kind: str = ""

    @property
    def took_effect(self) -> bool:
        """True if the pass rotated with other cos and sin tables than the shipped model's."""
        return self.max_cos_sin_change > 0.0

    def _where(self) -> str:
        if self.rescale_above is None:
            return ""
        above = self.T > self.rescale_above
        if self.kind == "longrope":
            regime = "long factors" if above else "short factors"
        else:
            regime = "rescaled" if above else "not rescaled"
        relation = " >" if above else ", not above"
        return f"; {regime}: {self.T:,} tokens{relation} {self.rescale_key} {self.rescale_above:,}"

    def line(self) -> str:
        """One printable line: the frequencies' divisors, the attention factor on cos and sin where the override
        changed it (shipped -> override: a dynamic override on a YaRN- or LongRoPE-shipped model removes the
        shipped factor, "x 1.139 -> x 1.000"), the largest logit change, and for a scaling that follows the length
        whether the pass was long enough to change it."""
        if not self.took_effect:
            return (f"{self.label:<22} changed nothing: cos and sin as shipped, "
                    f"largest logit change {self.max_logit_change:.2g}{self._where()}")
        factor = ("" if self.attention_scaling == self.shipped_attention_scaling
                  else f", cos and sin x {self.shipped_attention_scaling:.3f} -> x {self.attention_scaling:.3f}")
        return (f"{self.label:<22} frequencies divided by {self.divisor.min():.2f} to {self.divisor.max():.2f}"
                f"{factor}; logits moved by up to {self.max_logit_change:.2g} (largest logit {self.logit_scale:.2g})"
                f"{self._where()}")


def override_effect(
    model: Any, input_ids: torch.Tensor, rope_scaling: Mapping[str, Any], *, label: str | None = None,
    chunk: int = 1024, replace_shipped: bool = False,
) -> OverrideEffect:
    """Run `model` on input_ids (1, T) as shipped and under `rope_override(model, rope_scaling,
    replace_shipped=replace_shipped)`, one pass each without a cache, and compare: the inverse frequencies
    and cos/sin tables its rotary module used (recorded after transformers' dynamic update for the pass's
    length) and the logits, `chunk` positions at a time. A zero change is the override not taking effect on
    this input, not a model that ignores it. Both passes leave the rotary modules as found (a shipped
    dynamic module's base grown by the first pass is put back), and the override is checked before either
    pass runs."""
    if rope_scaling is None:
        raise ValueError("rope_scaling must be an override to compare with the shipped model, got None")
    _check_ids(model, input_ids)
    check_int("chunk", chunk, 1)
    check_bool("replace_shipped", replace_shipped)
    if label is not None and (not isinstance(label, str) or not label.strip()):
        raise ValueError(f"label must be a non-empty string (or None for the scaling's name), got {label!r}")
    kind = _override_parameters(model.config, rope_scaling)["rope_type"]
    ids = input_ids.to(next(model.parameters()).device)
    with rope_override(model, rope_scaling, replace_shipped=replace_shipped):  # checked (and refused) before any pass
        rotary = _rotary_owner(model).rotary_emb
        threshold = _length_threshold(rotary)
        scaled = _decoder_pass(model, ids)
    shipped = _decoder_pass(model, ids)
    T = ids.shape[1]
    changes, scales = [], []
    with torch.no_grad():
        for a in range(0, T, chunk):
            before = _logits(model, shipped.hidden[a : a + chunk])  # (n, vocab)
            after = _logits(model, scaled.hidden[a : a + chunk])  # (n, vocab)
            changes.append((after - before).abs().max().item())
            scales.append(before.abs().max().item())
    cos_sin = [(scaled.cos - shipped.cos).abs().max().item(), (scaled.sin - shipped.sin).abs().max().item()]
    # checked before any max(): NaN compares False, so max(0.0, nan) is 0.0 and would read "no change"
    if not all(math.isfinite(v) for v in changes + scales + cos_sin):
        raise ValueError(f"the passes with and without rope_scaling={dict(rope_scaling)!r} gave non-finite cos and "
                         "sin or logits (non-finite weights?): there is no change to report")
    key, above = threshold if threshold is not None else (None, None)
    return OverrideEffect(label if label is not None else kind, T,
                          (shipped.inv_freq / scaled.inv_freq).double().numpy(), scaled.attention_scaling,
                          shipped.attention_scaling, max(cos_sin), max(changes), max(scales), above, key, kind)


@dataclass(frozen=True)
class PositionLoss:
    """Mean next-token loss (nats) in windows of positions: loss[j] over predictions made at positions
    starts[j] .. starts[j] + window - 1 (the prediction at position t is of token t + 1). trained_len: the
    pre-extension length the config anchors its scaling at (`trained_length`)."""

    starts: np.ndarray  # (W,)
    loss: np.ndarray  # (W,)
    window: int
    trained_len: int
    label: str


def loss_by_position(
    model: Any, input_ids: torch.Tensor, window: int, *, label: str = "as shipped", chunk: int = 1024,
) -> PositionLoss:
    """Next-token loss of `model` on input_ids (1, T), averaged in windows of `window` positions.

    One forward pass over the whole text without a KV cache (the model's own attention kernel), so every
    query and key in it is rotated with the same frequencies: under dynamic NTK, the base for the whole
    length T at every position, below max_position_embeddings too. The logits are made `chunk` positions at
    a time, so a long text does not need a (T, vocab) logits tensor at once. The rotary module is left as
    found (a dynamic base grown by this pass does not carry over).
    """
    check_int("window", window, 1)
    check_int("chunk", chunk, 1)
    if not isinstance(label, str) or not label.strip():
        raise ValueError(f"label must be a non-empty string, got {label!r}")
    _check_ids(model, input_ids, window + 1, f"one window of {window} predictions")
    T = input_ids.shape[1]
    ids = input_ids.to(next(model.parameters()).device)
    hidden = _decoder_pass(model, ids, record=False)  # (T, d_model)
    nll = []
    with torch.no_grad():
        for a in range(0, T - 1, chunk):
            b = min(a + chunk, T - 1)
            logits = _logits(model, hidden[a:b])  # (b - a, vocab)
            nll.append(F.cross_entropy(logits, ids[0, a + 1 : b + 1], reduction="none").cpu())  # (b - a,)
    per_token = torch.cat(nll).double().numpy()  # (T - 1,) loss of the prediction made at position t
    n = (T - 1) // window
    loss = per_token[: n * window].reshape(n, window).mean(axis=1)  # (n,)
    return PositionLoss(np.arange(n) * window, loss, window, _anchor_length(model.config, warn=False), label)
