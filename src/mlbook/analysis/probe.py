"""Numbers for section 5.2, probing a real model: what a shipped RoPE model does with position.

The probe loads a Hugging Face causal language model (any Llama-family attention: Llama, SmolLM2,
Qwen2, Qwen3, Mistral, ...) and reads, on one text:

    load_probe_model, probe_model_name   the model: a download (needs network and a GPU), or
                                         "tiny-random", a randomly initialised tiny Llama built
                                         here from a config (nothing downloaded)
    positional_settings                  the positional fields of its config, and the wavelengths
                                         the library computes from them
    capture_rotary                       every layer's q and k before and after the model's own
                                         rotation, the cos/sin tables it used, and its attention
                                         weights on the first token (hooks on the attention modules)
    rotary_from_config, rotation_check, pairing_check
                                         the library's RotaryEmbedding built from the config, and
                                         how far its rotation is from the model's: rounding with
                                         the model's layout, O(1) with the other one (the porting
                                         bug), rounding again once the channels are permuted
    sink_mass                            attention mass on the first token per layer and head, beside
                                         the mass uniform attention would give it (Xiao et al., 2024)
    pair_norms                           the norm of each frequency pair of q and k, averaged over
                                         tokens (the probe of Barbero et al., 2025)
    rope_override, loss_by_position      the model's loss in windows of positions, with its own
                                         rotary embedding or with a rope_scaling override
    override_effect                      what an override changed on a text: the frequencies and cos/sin
                                         the pass used, and the largest logit change (zero: no effect,
                                         e.g. dynamic NTK on a pass within max_position_embeddings)

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
from collections.abc import Iterator, Mapping
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
    hf_head_dim,
    hf_rope_base,
    hf_rope_parameters_for,
    hf_rotary_dim,
    hf_text_config,
    rope_options_from_hf,
)
from mlbook.transformer.positional import ROPE_PAIRINGS, RotaryEmbedding
from mlbook.transformer.rope_scaling import RopeScaling
from mlbook.transformer.validate import check_choice, check_int, env_flag

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
    "RotationCheck",
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
    """The model the probe runs on: $MLBOOK_PROBE_MODEL if set, else "tiny-random" while the static
    site is built (MLBOOK_STATIC=1: nothing may be downloaded there), else `requested`."""
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


def load_probe_model(
    name: str, *, device: str | torch.device | None = None, dtype: torch.dtype = torch.float32, seed: int = 0,
) -> ProbeModel:
    """Load `name` with transformers, or build the tiny random Llama for name="tiny-random".

    A real model needs a CUDA GPU (device=None; pass device="cpu" to run it on the CPU anyway,
    slowly) and the network, or the Hugging Face cache, to fetch its weights; without them this
    raises `ProbeUnavailable` saying what was asked, what is missing and how to run with the tiny
    model. float32 by default, so the rotation check compares rotations, not half-precision rounding.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must be a model name such as {DEFAULT_MODEL!r} or {TINY_RANDOM!r}, got {name!r}")
    name = name.strip()
    if name == TINY_RANDOM:
        from transformers import LlamaForCausalLM

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = LlamaForCausalLM(tiny_random_config())
        dev = torch.device(device or "cpu")
        model = model.to(device=dev, dtype=dtype).eval()
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
        tokenizer = AutoTokenizer.from_pretrained(name)
        # transformers 4.56 renamed torch_dtype to dtype; Colab may have an older release
        key = "dtype" if _version_at_least(transformers.__version__, (4, 56)) else "torch_dtype"
        model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="sdpa", **{key: dtype})
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
    """The context length the model was trained at, read as `mlbook.analysis.model_config.context_lengths`
    reads it: rope_scaling's original_max_position_embeddings, else the top-level one (Phi-3's LongRoPE),
    else initial_context_length (gpt-oss), else max_position_embeddings."""
    return context_lengths(config if isinstance(config, Mapping) else config.to_dict()).original


@dataclass(frozen=True)
class PositionalSettings:
    """What a config says about position, and what the library computes from it.

    wavelengths: (r/2,) 2 pi / theta_i in tokens for the rotated pairs as trained (base rope_theta,
    before any rope_scaling), from the library's `RotaryEmbedding`."""

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
            f"trained length           {self.trained_len:,}",
            f"sliding_window           {self.sliding_window if self.sliding_window else 'none in use'}",
            f"wavelengths as trained   fastest pair {lam.min():,.1f}, slowest pair {lam.max():,.0f}",
            f"pairs slower than the trained length: {(lam > self.trained_len).sum()} of {lam.size}",
        ]
        return out


def positional_settings(config: Any) -> PositionalSettings:
    """Read a Hugging Face config's positional fields (either RoPE layout, `transformer.hf.hf_rope_parameters`;
    a multimodal config's text config) and compute each pair's wavelength from them."""
    config = hf_text_config(config)
    wavelengths = _trained_wavelengths(config)  # (r/2,)
    uses_window = getattr(config, "use_sliding_window", True) and getattr(config, "sliding_window", None)
    params = hf_rope_parameters_for(config)
    scaling = {k: v for k, v in params.items() if k not in ("rope_theta", "partial_rotary_factor")}
    return PositionalSettings(
        model_type=str(getattr(config, "model_type", "?")), n_layers=int(config.num_hidden_layers),
        n_heads=int(config.num_attention_heads),
        n_kv_heads=int(getattr(config, "num_key_value_heads", None) or config.num_attention_heads),
        d_head=hf_head_dim(config), rope_theta=hf_rope_base(config),
        partial_rotary_factor=hf_rotary_dim(config) / hf_head_dim(config),
        rope_scaling=None if scaling.get("rope_type") == "default" and len(scaling) == 1 else scaling,
        max_position_embeddings=int(config.max_position_embeddings), trained_len=trained_length(config),
        sliding_window=int(config.sliding_window) if uses_window else None, wavelengths=wavelengths,
    )


def _trained_wavelengths(config: Any) -> np.ndarray:
    """(r/2,) 2 pi / theta_i in tokens of the rotated pairs, as trained: base rope_theta, no rope_scaling."""
    return pair_wavelengths(hf_rotary_dim(config), hf_rope_base(config))  # (r/2,) over the r turning channels


def rotary_from_config(config: Any, *, pairing: str = "half") -> RotaryEmbedding:
    """The library's `RotaryEmbedding` for a Hugging Face config: base rope_theta, d_head, the rotated
    fraction partial_rotary_factor and rope_scaling, read by `mlbook.transformer.hf.rope_options_from_hf`
    as transformers reads them, from either layout (a key transformers would not read is a ValueError, never dropped).
    pairing: "half" is the layout of Hugging Face's rotate_half; "interleaved" is the wrong one for
    its weights (the porting bug), kept for `pairing_check`."""
    check_choice("pairing", pairing, ROPE_PAIRINGS)
    options = rope_options_from_hf(config, pairing)  # base, pairing, scaling and its parameters, partial
    base, pairing = options.pop("base"), options.pop("pairing")
    partial = options.pop("partial_rotary_factor", 1.0)
    name = options.pop("scaling", "none")
    scaling = None if name == "none" else RopeScaling(name, **options)
    extra = {} if partial == 1.0 else {"partial_rotary_factor": partial}
    return RotaryEmbedding(hf_head_dim(config), base, scaling, pairing=pairing, **extra)


# ---------------------------------------------------------------------------
# Capturing q and k around the model's own rotation
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RotaryCapture:
    """One forward pass of a batch of one text, seen from inside every attention layer.

    q_pre, q_post: per layer (H, T, d_head) the query before and after the model's rotation;
    k_pre, k_post: per layer (H_kv, T, d_head) the same for the key; cos, sin: (T, d_rot) the tables
    the model passed to its rotation (first layer); first_key: per layer (H, T) the attention weight
    each query puts on key 0 (the model's own softmax, eager attention). float32, on the CPU.
    """

    q_pre: tuple[torch.Tensor, ...]
    k_pre: tuple[torch.Tensor, ...]
    q_post: tuple[torch.Tensor, ...]
    k_post: tuple[torch.Tensor, ...]
    cos: torch.Tensor
    sin: torch.Tensor
    first_key: tuple[torch.Tensor, ...]

    @property
    def n_layers(self) -> int:
        return len(self.q_pre)

    @property
    def T(self) -> int:
        return int(self.q_pre[0].shape[-2])


def _attention_modules(model: Any) -> list[Any]:
    mods = [m for m in model.modules() if hasattr(m, "q_proj") and hasattr(m, "k_proj") and hasattr(m, "layer_idx")]
    if not mods:
        raise ValueError(f"{type(model).__name__} has no Llama-family attention modules (q_proj, k_proj, layer_idx)")
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

    How: the attention modules of Llama-family models call their modeling file's
    `apply_rotary_pos_emb(q, k, cos, sin)`; while this runs, that name points to a wrapper that
    records its inputs and outputs, and a forward hook on each attention module keeps its attention
    weights on key 0. Everything is restored afterwards, also on error.
    """
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.shape[0] != 1:
        raise ValueError(f"input_ids must be a (1, T) tensor of token ids, got {getattr(input_ids, 'shape', input_ids)!r}")
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

    def post_hook(module, args, output):  # type: ignore[no-untyped-def]
        weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
        if weights is not None:
            first_key[module.layer_idx] = weights[0, :, :, 0].detach().float().cpu()  # (H, T) mass on key 0

    handles = [h for m in mods for h in (m.register_forward_pre_hook(pre_hook), m.register_forward_hook(post_hook))]
    code.apply_rotary_pos_emb = wrapper
    try:
        with torch.no_grad(), _eager(model):
            model(input_ids=input_ids.to(next(model.parameters()).device))
    finally:
        code.apply_rotary_pos_emb = original
        for h in handles:
            h.remove()
    layers = [m.layer_idx for m in mods]
    missing = [i for i in layers if i not in rec or i not in first_key]
    if missing:
        raise ValueError(f"layers {missing} did not rotate q and k or return attention weights: the probe needs "
                         "every layer to use RoPE (a NoPE layer has nothing to compare)")
    q_pre, k_pre, q_post, k_post = (tuple(rec[i][j] for i in layers) for j in range(4))
    return RotaryCapture(q_pre, k_pre, q_post, k_post, rec[layers[0]][4], rec[layers[0]][5],
                         tuple(first_key[i] for i in layers))


# ---------------------------------------------------------------------------
# Does the library's rotation reproduce the model's?
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RotationCheck:
    """max |library rotation of q_pre - model's q_post| per layer (and for k), and the scale to read it against.

    error_q, error_k: (L,) float; scale: max |q_post|, |k_post| over all layers. pairing: the
    layout the library rotated with; permuted: True if q/k channels were first moved to that layout."""

    pairing: str
    permuted: bool
    error_q: np.ndarray
    error_k: np.ndarray
    scale: float

    @property
    def max_error(self) -> float:
        return float(max(self.error_q.max(), self.error_k.max()))

    @property
    def relative_error(self) -> float:
        """max_error / scale: rounding (~1e-6 in float32) when the rotation is the model's, O(1) when not."""
        return self.max_error / self.scale if self.scale > 0 else float("nan")


def rotation_check(capture: RotaryCapture, rotary: RotaryEmbedding, *, permute: bool = False) -> RotationCheck:
    """Rotate every captured pre-rotation q and k with `rotary` (positions 0..T-1) and compare with the
    model's own rotated q and k. permute=True first moves every head's channels from the model's
    half layout to the interleaved one (`pairing_permutation`, the row permutation that
    `convert_rotary_weights` applies to q_proj and k_proj) and compares in that layout."""
    if not isinstance(rotary, RotaryEmbedding):
        raise TypeError(f"rotary must be a RotaryEmbedding, got {type(rotary).__name__}")
    d_head = capture.q_pre[0].shape[-1]
    if rotary.d_head != d_head:
        raise ValueError(f"rotary has d_head={rotary.d_head}, the captured heads have {d_head}")
    perm = pairing_permutation(d_head) if permute else torch.arange(d_head)  # (d_head,)
    errors = {"q": [], "k": []}
    scale = 0.0
    for pre_q, pre_k, post_q, post_k in zip(capture.q_pre, capture.k_pre, capture.q_post, capture.k_post):
        for name, pre, post in (("q", pre_q, post_q), ("k", pre_k, post_k)):
            ours = rotary.rotate(pre[..., perm])  # (H, T, d_head) the library's rotation, positions 0..T-1
            errors[name].append((ours - post[..., perm]).abs().max().item())
            scale = max(scale, post.abs().max().item())
    return RotationCheck(rotary.pairing, permute, np.array(errors["q"]), np.array(errors["k"]), scale)


@dataclass(frozen=True)
class PairingCheck:
    """The pairing check on the model's own q and k (section 2.4's porting bug, on real weights):

    right: the library with the model's layout (half) rotates q, k as the model does;
    wrong: the library told the other layout (interleaved), channels left where they are;
    converted: interleaved, after moving every head's channels to the interleaved layout."""

    right: RotationCheck
    wrong: RotationCheck
    converted: RotationCheck


def pairing_check(capture: RotaryCapture, config: Any) -> PairingCheck:
    """`rotation_check` three ways: half layout; interleaved on the unmoved channels; interleaved on
    channels moved by `pairing_permutation`."""
    half = rotary_from_config(config, pairing="half")
    inter = rotary_from_config(config, pairing="interleaved")
    return PairingCheck(rotation_check(capture, half), rotation_check(capture, inter),
                        rotation_check(capture, inter, permute=True))


# ---------------------------------------------------------------------------
# Attention sinks and the frequency-pair norms
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SinkMass:
    """mass[l, h]: mean over queries i = q_start..T-1 of the attention weight on key 0;
    uniform: that mean if every query spread its weight evenly over its i + 1 keys, mean 1/(i + 1)."""

    mass: np.ndarray  # (L, H)
    uniform: float
    q_start: int
    T: int

    @property
    def ratio(self) -> np.ndarray:
        """(L, H) mass / uniform: 1 for a head that treats the first token like any other."""
        return self.mass / self.uniform


def sink_mass(capture: RotaryCapture, q_start: int | None = None) -> SinkMass:
    """Attention mass on the first token per layer and head (the sink of Xiao et al., 2024), averaged over
    queries q_start..T-1 (default T // 8: the first queries have few keys, so any head weights key 0 there)."""
    T = capture.T
    q_start = max(1, T // 8) if q_start is None else check_int("q_start", q_start, 0)
    if q_start >= T:
        raise ValueError(f"q_start ({q_start}) must be below the captured length T = {T}")
    mass = np.stack([fk[:, q_start:].mean(-1).numpy() for fk in capture.first_key])  # (L, H)
    uniform = float((1.0 / np.arange(q_start + 1, T + 1)).mean())  # mean over i of 1 / (i + 1)
    return SinkMass(mass.astype(np.float64), uniform, q_start, T)


@dataclass(frozen=True)
class PairNorms:
    """q[l, h, i], k[l, h, i]: the norm of frequency pair i, sqrt(x_a^2 + x_b^2), averaged over the T tokens
    (Barbero et al., 2025). A rotation keeps a pair's norm, so this reads what the weights put in each
    pair, whatever the position. wavelengths: (P,) 2 pi / theta_i in tokens as trained (pair 0 the fastest)."""

    q: np.ndarray  # (L, H, P)
    k: np.ndarray  # (L, H_kv, P)
    wavelengths: np.ndarray  # (P,)
    trained_len: int

    @property
    def mean_q(self) -> np.ndarray:
        """(P,) q's pair norms averaged over layers and heads."""
        return self.q.mean(axis=(0, 1))

    @property
    def mean_k(self) -> np.ndarray:
        return self.k.mean(axis=(0, 1))


def pair_norms(capture: RotaryCapture, config: Any) -> PairNorms:
    """Per-pair norms of the captured q and k (before rotation; after it they are the same up to rounding),
    pairs in the model's half layout: pair i is channels (i, i + r/2) of the r rotated channels;
    wavelengths as trained (before any rope_scaling)."""
    wavelengths = _trained_wavelengths(config)  # (r/2,)
    r = 2 * wavelengths.shape[0]  # rotated channels

    def norms(x: torch.Tensor) -> np.ndarray:  # (H, T, d_head) -> (H, P)
        return rotary_pair_norms(x.double(), r).mean(dim=-2).numpy()  # (H, P)

    return PairNorms(np.stack([norms(q) for q in capture.q_pre]), np.stack([norms(k) for k in capture.k_pre]),
                     wavelengths, trained_length(config))


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
    dynamic NTK grows the base past max_position_embeddings, LongRoPE swaps to its long factors."""
    return "dynamic" in rope_type or rope_type == "longrope"


@contextlib.contextmanager
def rope_override(model: Any, rope_scaling: Mapping[str, Any] | None) -> Iterator[Any]:
    """Inside, the model rotates with `rope_scaling` set on (a copy of) its config, as a serving engine's
    override does (e.g. {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 8192});
    None leaves it as shipped. The model's rotary embedding module is rebuilt by its own class from
    that config and put back on exit. Yields the config in use.

    An override whose rebuilt module has exactly the shipped inverse frequencies and attention factor
    (linear or YaRN with factor 1, the shipped scaling again) is a ValueError: it would change nothing.
    Dynamic NTK and LongRoPE are built with the shipped frequencies and change them only in a pass
    longer than a threshold (`dynamic_rope_update` in transformers' modeling_rope_utils.py), which no
    check at entry can see: `override_effect` measures what an override changed on a given input."""
    if rope_scaling is None:
        yield model.config
        return
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    scaling = dict(rope_scaling)
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind not in ROPE_INIT_FUNCTIONS:
        raise ValueError(f"rope_scaling needs a rope_type among {', '.join(sorted(ROPE_INIT_FUNCTIONS))}, got {kind!r}")
    owner = _rotary_owner(model)
    old = owner.rotary_emb
    config = copy.deepcopy(model.config)
    if getattr(config, "rope_parameters", None) is not None:
        # transformers 5: rope_scaling is rope_parameters, which holds the base; an override keeps the
        # config's base and partial rotary factor unless it gives its own (a per-layer-type dict is refused)
        current = config.rope_parameters
        if all(isinstance(v, Mapping) for v in current.values()):
            raise ValueError(f"{type(config).__name__} keeps its RoPE per layer type ({sorted(current)}); "
                             "rope_override changes a single rope_parameters dict")
        keep = {k: current[k] for k in ("rope_theta", "partial_rotary_factor") if k in current}
        config.rope_parameters = {**keep, **scaling}
    else:
        config.rope_scaling = scaling
    device = next(model.parameters()).device
    new = type(old)(config=config).to(device)  # transformers 5 deprecates the device argument
    shipped = getattr(old, "original_inv_freq", old.inv_freq).to(device)  # as built, before any dynamic rescale
    if (not _length_dependent(str(kind)) and torch.equal(new.inv_freq.float(), shipped.float())
            and float(new.attention_scaling) == float(old.attention_scaling)):
        raise ValueError(f"rope_scaling {scaling} gives the model exactly the inverse frequencies and attention factor "
                         "it ships with: the override would change nothing (pass None for the model as shipped)")
    owner.rotary_emb = new
    try:
        yield config
    finally:
        owner.rotary_emb = old


@dataclass(frozen=True)
class _Pass:
    """One pass of the decoder: its last hidden states and what its rotary module used."""

    hidden: torch.Tensor  # (T, d_model)
    inv_freq: torch.Tensor  # (r/2,) float32 on the CPU: the inverse frequencies in force during the pass
    cos: torch.Tensor  # (T, r) float32 on the CPU, attention factor included
    sin: torch.Tensor  # (T, r)
    attention_scaling: float


def _decoder_pass(model: Any, ids: torch.Tensor) -> _Pass:
    """model.get_decoder() on ids (1, T), no cache, recording the rotary module's tables (a forward hook
    runs after transformers' `dynamic_rope_update` has rescaled inv_freq for this pass's length)."""
    rotary = _rotary_owner(model).rotary_emb
    seen: dict[str, Any] = {}

    def record(module, args, output):  # type: ignore[no-untyped-def]
        if not seen:  # the decoder calls it once per pass; keep the first call if a model calls it again
            seen.update(inv_freq=module.inv_freq.detach().float().cpu().clone(),
                        cos=output[0][0].detach().float().cpu(), sin=output[1][0].detach().float().cpu(),
                        attention_scaling=float(module.attention_scaling))

    handle = rotary.register_forward_hook(record)
    try:
        with torch.no_grad():
            hidden = model.get_decoder()(input_ids=ids, use_cache=False).last_hidden_state[0]  # (T, d_model)
    finally:
        handle.remove()
    if not seen:
        raise ValueError(f"{type(rotary).__name__} was not called in the forward pass: nothing to compare")
    return _Pass(hidden, **seen)


def _logits(model: Any, hidden: torch.Tensor) -> torch.Tensor:
    """(n, vocab) float32 logits from (n, d_model) last hidden states: the output head, then any final soft cap."""
    logits = model.get_output_embeddings()(hidden).float()  # (n, vocab)
    cap = getattr(model.config, "final_logit_softcapping", None)
    return torch.tanh(logits / cap) * cap if cap else logits


def _check_ids(input_ids: Any) -> None:
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.shape[0] != 1:
        raise ValueError("input_ids must be a (1, T) tensor of token ids, "
                         f"got {getattr(input_ids, 'shape', input_ids)!r}")


@dataclass(frozen=True)
class OverrideEffect:
    """What a rope_scaling override changed in one pass over a text, against the model as shipped.

    divisor: (r/2,) shipped inverse frequency / the override's, per pair, as used in the pass (1: the pair
    left alone; 2: turned half as fast); attention_scaling: the override's factor on cos and sin (the
    shipped one is shipped_attention_scaling); max_cos_sin_change: max |cos' - cos|, |sin' - sin| over
    positions and channels; max_logit_change: max |logit' - logit| over every position and vocabulary
    entry, beside logit_scale, the largest |logit| as shipped. rescale_above: for dynamic NTK, the length a
    pass must exceed before transformers rescales anything (the rotary module's original_max_seq_len,
    config.max_position_embeddings); None for a scaling that does not follow the length. All zeros
    (divisor all 1) mean the override did not take effect on this input: dynamic NTK on a pass no longer
    than rescale_above, for one."""

    label: str
    T: int
    divisor: np.ndarray  # (r/2,)
    attention_scaling: float
    shipped_attention_scaling: float
    max_cos_sin_change: float
    max_logit_change: float
    logit_scale: float
    rescale_above: int | None

    @property
    def took_effect(self) -> bool:
        """True if the pass rotated with other cos and sin tables than the shipped model's."""
        return self.max_cos_sin_change > 0.0

    def line(self) -> str:
        """One printable line: the frequencies' divisors, the attention factor, the largest logit change, and for
        dynamic NTK whether the pass was long enough to rescale."""
        if self.rescale_above is None:
            where = ""
        elif self.T > self.rescale_above:
            where = f"; rescaled: {self.T:,} tokens > max_position_embeddings {self.rescale_above:,}"
        else:
            where = f": {self.T:,} tokens, not above max_position_embeddings {self.rescale_above:,}"
        if not self.took_effect:
            return (f"{self.label:<22} changed nothing: cos and sin as shipped, "
                    f"largest logit change {self.max_logit_change:.2g}{where}")
        factor = ("" if self.attention_scaling == self.shipped_attention_scaling
                  else f", cos and sin x {self.attention_scaling:.3f}")
        return (f"{self.label:<22} frequencies divided by {self.divisor.min():.2f} to {self.divisor.max():.2f}"
                f"{factor}; logits moved by up to {self.max_logit_change:.2g} (largest logit {self.logit_scale:.2g})"
                f"{where}")


def override_effect(
    model: Any, input_ids: torch.Tensor, rope_scaling: Mapping[str, Any], *, label: str | None = None,
    chunk: int = 1024,
) -> OverrideEffect:
    """Run `model` on input_ids (1, T) as shipped and under `rope_override(model, rope_scaling)`, one pass
    each without a cache, and compare: the inverse frequencies and cos/sin tables its rotary module used
    (recorded after transformers' dynamic update for the pass's length) and the logits, `chunk` positions
    at a time. A zero change is the override not taking effect on this input, not a model that ignores it."""
    if rope_scaling is None:
        raise ValueError("rope_scaling must be an override to compare with the shipped model, got None")
    _check_ids(input_ids)
    check_int("chunk", chunk, 1)
    ids = input_ids.to(next(model.parameters()).device)
    shipped = _decoder_pass(model, ids)
    with rope_override(model, rope_scaling):
        rotary = _rotary_owner(model).rotary_emb
        scaled = _decoder_pass(model, ids)
        rescale_above = int(rotary.original_max_seq_len) if "dynamic" in str(rotary.rope_type) else None
    T = ids.shape[1]
    change, scale = 0.0, 0.0
    with torch.no_grad():
        for a in range(0, T, chunk):
            before = _logits(model, shipped.hidden[a : a + chunk])  # (n, vocab)
            after = _logits(model, scaled.hidden[a : a + chunk])  # (n, vocab)
            change = max(change, (after - before).abs().max().item())
            scale = max(scale, before.abs().max().item())
    cos_sin = max((scaled.cos - shipped.cos).abs().max().item(), (scaled.sin - shipped.sin).abs().max().item())
    if not (math.isfinite(cos_sin) and math.isfinite(change)):  # NaN compares False: it would read "no change"
        raise ValueError(f"rope_scaling={dict(rope_scaling)!r} gives non-finite cos and sin or logits (a factor "
                         "of 0 or below, or a NaN?): the override is not a scaling this model can run")
    name = label if label is not None else str(dict(rope_scaling).get("rope_type", rope_scaling.get("type")))
    return OverrideEffect(name, T, (shipped.inv_freq / scaled.inv_freq).double().numpy(), scaled.attention_scaling,
                          shipped.attention_scaling, cos_sin, change, scale, rescale_above)


@dataclass(frozen=True)
class PositionLoss:
    """Mean next-token loss (nats) in windows of positions: loss[j] over predictions made at positions
    starts[j] .. starts[j] + window - 1 (the prediction at position t is of token t + 1)."""

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
    query and key in it is rotated with the same frequencies; the logits are made `chunk` positions at a
    time, so a long text does not need a (T, vocab) logits tensor at once.
    """
    check_int("window", window, 1)
    check_int("chunk", chunk, 1)
    _check_ids(input_ids)
    T = input_ids.shape[1]
    if T < window + 1:
        raise ValueError(f"the text has {T} tokens; one window of {window} predictions needs at least {window + 1}")
    ids = input_ids.to(next(model.parameters()).device)
    hidden = _decoder_pass(model, ids).hidden  # (T, d_model)
    nll = []
    with torch.no_grad():
        for a in range(0, T - 1, chunk):
            b = min(a + chunk, T - 1)
            logits = _logits(model, hidden[a:b])  # (b - a, vocab)
            nll.append(F.cross_entropy(logits, ids[0, a + 1 : b + 1], reduction="none").cpu())  # (b - a,)
    per_token = torch.cat(nll).double().numpy()  # (T - 1,) loss of the prediction made at position t
    n = (T - 1) // window
    loss = per_token[: n * window].reshape(n, window).mean(axis=1)  # (n,)
    return PositionLoss(np.arange(n) * window, loss, window, trained_length(model.config), label)
