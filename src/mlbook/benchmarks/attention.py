"""Benchmark: causal attention with position, a materialised score bias against FlexAttention.

One attention call (B, H, T, d_head) per variant, everything a layer does given q, k and v and
the position parameters:

    sdpa            scaled_dot_product_attention(is_causal=True), no position
    rope_sdpa       RoPE tables, q and k rotated (readable apply_rotary), then the same SDPA
    t5_bias         T5's bias built as an (1, H, T, T) tensor (RelativePositionBias), masked
                    causally and passed to SDPA as attn_mask, as MultiHeadAttention does
    alibi_bias      the same with ALiBi's bias (alibi_bias)
    flex            FlexAttention (torch.compile'd) with a causal BlockMask, no score_mod
    t5_flex         FlexAttention with a score_mod that computes the bucket of q_idx - kv_idx and
                    looks up the learned (num_buckets, H) table inside the kernel
    alibi_flex      FlexAttention with a score_mod subtracting slope[h] * (q_idx - kv_idx)

The causal BlockMask is built once per T (it is shared by every layer), outside the timing; its
build time is recorded. Times are medians over interleaved rounds; peak memory is what one call
adds at its peak (see `mlbook.benchmarks.measure`); the bias tensor's size is also given
analytically (H * T^2 * 4 bytes). Outputs of the two forms of each scheme are compared at every T.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable

import torch
import torch.nn.functional as F

from mlbook.benchmarks.measure import memory_method, peak_memory, summarize, sync, time_interleaved
from mlbook.benchmarks.registry import register
from mlbook.transformer import positional as P
from mlbook.transformer.attention import causal_mask

__all__ = [
    "VARIANTS",
    "TOLERANCE",
    "flex_available",
    "alibi_score_mod",
    "t5_score_mod",
    "causal_block_mask",
    "attention_variants",
    "run_attention",
]

VARIANTS: tuple[str, ...] = ("sdpa", "rope_sdpa", "t5_bias", "alibi_bias", "flex", "t5_flex", "alibi_flex")
TOLERANCE = 1e-4  # float32: the two forms of a scheme agree to this (max abs difference of outputs)


def flex_available() -> bool:
    """True if torch has FlexAttention (torch >= 2.5)."""
    try:
        from torch.nn.attention import flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


def alibi_score_mod(slopes: torch.Tensor) -> Callable[..., torch.Tensor]:
    """FlexAttention score_mod for ALiBi: s -> s - m_h (i - j), i = q_idx, j = kv_idx.

    For the causal keys j <= i this is exactly `alibi_bias`; future keys are left to the mask.
    slopes: (H,) from `alibi_slopes`.
    """
    if not isinstance(slopes, torch.Tensor) or slopes.dim() != 1:
        raise ValueError("slopes must be a 1-D tensor (H,), e.g. alibi_slopes(H)")

    def score_mod(score: torch.Tensor, b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor,
                  kv_idx: torch.Tensor) -> torch.Tensor:
        return score - slopes[h] * (q_idx - kv_idx)

    return score_mod


def t5_score_mod(
    table: torch.Tensor, *, bidirectional: bool = False, num_buckets: int = 32, max_distance: int = 128
) -> Callable[..., torch.Tensor]:
    """FlexAttention score_mod for T5: s -> s + b[bucket(j - i), h], looked up inside the kernel.

    table: the learned (num_buckets, H) bias (RelativePositionBias.table.weight). The bucket comes
    from `relative_position_bucket` on the index difference, so the (H, T, T) bias never exists.
    """
    if not isinstance(table, torch.Tensor) or table.dim() != 2 or table.shape[0] != num_buckets:
        raise ValueError(f"table must be (num_buckets={num_buckets}, H), got "
                         f"{tuple(table.shape) if isinstance(table, torch.Tensor) else type(table).__name__}")
    # validates num_buckets and max_distance here, not inside the compiled kernel
    P.relative_position_bucket(torch.zeros(1, dtype=torch.long), bidirectional, num_buckets, max_distance)

    def score_mod(score: torch.Tensor, b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor,
                  kv_idx: torch.Tensor) -> torch.Tensor:
        bucket = P.relative_position_bucket(kv_idx - q_idx, bidirectional, num_buckets, max_distance)
        return score + table[bucket, h]

    return score_mod


def causal_block_mask(T: int, device: torch.device | str) -> Any:
    """FlexAttention's BlockMask for causal attention over T queries and T keys."""
    from torch.nn.attention.flex_attention import create_block_mask

    def causal(b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        return q_idx >= kv_idx

    return create_block_mask(causal, None, None, T, T, device=str(device))


_compiled_flex: Callable[..., torch.Tensor] | None = None


def _flex() -> Callable[..., torch.Tensor]:
    global _compiled_flex
    if _compiled_flex is None:
        from torch.nn.attention.flex_attention import flex_attention

        _compiled_flex = torch.compile(flex_attention, dynamic=False)
    return _compiled_flex


def attention_variants(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, slopes: torch.Tensor, t5_bias: P.RelativePositionBias,
    rope: P.RotaryEmbedding, block_mask: Any | None = None, variants: tuple[str, ...] = VARIANTS,
) -> dict[str, Callable[[], torch.Tensor]]:
    """The zero-argument attention calls the benchmark times, by name (see the module docstring).

    q, k, v: (B, H, T, d_head). block_mask is needed for the flex variants.
    """
    bad = [v_ for v_ in variants if v_ not in VARIANTS]
    if bad:
        raise ValueError(f"unknown variants {bad}; valid names are {', '.join(VARIANTS)}")
    T = q.shape[-2]
    device = q.device

    def with_bias(make_bias: Callable[[], torch.Tensor]) -> torch.Tensor:
        # MultiHeadAttention's path for a score bias: cast, fill future keys with -inf, SDPA
        mask = causal_mask(T, T, device)  # (T, T) bool
        attn_mask = make_bias().to(q.dtype).masked_fill(~mask, float("-inf"))  # (1, H, T, T)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)  # (B, H, T, d_head)

    def rope_sdpa() -> torch.Tensor:
        cos, sin = rope(T)  # (T, d_head) each
        q_r = P.apply_rotary(q, cos, sin, rope.pairing)  # (B, H, T, d_head) the readable rotation
        k_r = P.apply_rotary(k, cos, sin, rope.pairing)  # (B, H, T, d_head)
        return F.scaled_dot_product_attention(q_r, k_r, v, is_causal=True)

    H = q.shape[1]
    calls: dict[str, Callable[[], torch.Tensor]] = {
        "sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        "rope_sdpa": rope_sdpa,
        "t5_bias": lambda: with_bias(lambda: t5_bias(T, T)),
        "alibi_bias": lambda: with_bias(lambda: P.alibi_bias(H, T, T, device)),
    }
    if any(v_.endswith("flex") for v_ in variants):
        if block_mask is None:
            raise ValueError("the flex variants need block_mask=causal_block_mask(T, device)")
        flex = _flex()
        alibi_mod = alibi_score_mod(slopes.to(device))
        t5_mod = t5_score_mod(t5_bias.table.weight.detach(), bidirectional=t5_bias.bidirectional,
                              num_buckets=t5_bias.num_buckets, max_distance=t5_bias.max_distance)
        calls["flex"] = lambda: flex(q, k, v, block_mask=block_mask)
        calls["t5_flex"] = lambda: flex(q, k, v, score_mod=t5_mod, block_mask=block_mask)
        calls["alibi_flex"] = lambda: flex(q, k, v, score_mod=alibi_mod, block_mask=block_mask)
    return {name: calls[name] for name in variants}


@contextlib.contextmanager
def _compile_settings(cold: bool) -> Any:
    """Room for one compiled kernel per (score_mod, T); optionally inductor's caches off."""
    import torch._dynamo.config as dynamo_config

    patches: dict[str, Any] = {}
    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(dynamo_config, name):
            patches[name] = 256
    with contextlib.ExitStack() as stack:
        stack.enter_context(dynamo_config.patch(**patches))
        if cold:
            import torch._inductor.config as inductor_config

            if hasattr(inductor_config, "force_disable_caches"):
                stack.enter_context(inductor_config.patch(force_disable_caches=True))
        yield


def run_attention(config: dict[str, Any], device: torch.device, progress: bool = True) -> dict[str, Any]:
    """Time and peak memory of every variant at every T of `config`; see the module docstring."""
    gen = torch.Generator().manual_seed(config.get("seed", 0))
    B, H, d_head = config["B"], config["H"], config["d_head"]
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[config.get("dtype", "float32")]
    variants = tuple(v for v in VARIANTS if flex_available() or not v.endswith("flex"))
    slopes = P.alibi_slopes(H)
    t5 = P.RelativePositionBias(H, config["num_buckets"], config["max_distance"], bidirectional=False)
    with torch.no_grad():
        t5.table.weight.copy_(torch.randn(config["num_buckets"], H, generator=gen))
    t5 = t5.to(device)
    rope = P.RotaryEmbedding(d_head).to(device)
    rows: list[dict[str, Any]] = []
    diffs: dict[str, dict[str, float]] = {}
    mask_build: dict[str, float] = {}
    with torch.no_grad(), _compile_settings(bool(config.get("cold_compile", False))):
        for T in config["Ts"]:
            q, k, v = (torch.randn(B, H, T, d_head, generator=gen).to(device=device, dtype=dtype) for _ in range(3))
            block_mask = None
            if any(v_.endswith("flex") for v_ in variants):
                sync(device)
                t0 = time.perf_counter()
                block_mask = causal_block_mask(T, device)
                sync(device)
                mask_build[str(T)] = round((time.perf_counter() - t0) * 1e3, 2)
            fns = attention_variants(q, k, v, slopes=slopes, t5_bias=t5, rope=rope, block_mask=block_mask,
                                     variants=variants)
            first: dict[str, float] = {}
            outs: dict[str, torch.Tensor] = {}
            for name, fn in fns.items():  # first call: compiles the flex kernels for this T
                sync(device)
                t0 = time.perf_counter()
                outs[name] = fn()
                sync(device)
                first[name] = time.perf_counter() - t0
            diffs[str(T)] = {
                scheme: float((outs[f"{scheme}_bias"] - outs[f"{scheme}_flex"]).abs().max())
                for scheme in ("t5", "alibi") if f"{scheme}_flex" in outs
            }
            if "flex" in outs:
                diffs[str(T)]["none"] = float((outs["sdpa"] - outs["flex"]).abs().max())
            del outs
            peaks = {name: peak_memory(fn, device) for name, fn in fns.items()}
            times = time_interleaved(fns, config["rounds"], device)
            for name in fns:
                stats = summarize(times[name])
                rows.append({
                    "T": T,
                    "variant": name,
                    "times": stats,
                    "peak_bytes": peaks[name],
                    "first_call_s": round(first[name], 3),
                    # the first call compiles; its excess over the fastest call is the compile time
                    "compile_s": (round(max(first[name] - stats["min_ms"] * 1e-3, 0.0), 2)
                                  if name.endswith("flex") else None),
                })
            if progress:
                line = ", ".join(
                    f"{r['variant']} {r['times']['median_ms']:.4g} ms"
                    + (f"/{r['peak_bytes'] / 2**20:.0f} MiB" if r["peak_bytes"] is not None else "")
                    for r in rows if r["T"] == T
                )
                print(f"attention T={T}: {line}", flush=True)
            del q, k, v, fns, block_mask
    med = {(r["T"], r["variant"]): r["times"]["median_ms"] for r in rows}
    return {
        "variants": list(variants),
        "rows": rows,
        "ratio_to_sdpa": {str(T): {v_: round(med[(T, v_)] / med[(T, "sdpa")], 3) for v_ in variants}
                          for T in config["Ts"]},
        "max_abs_diff": diffs,
        "tolerance": TOLERANCE,
        "within_tolerance": all(d <= TOLERANCE for per_T in diffs.values() for d in per_T.values()),
        "bias_bytes_analytic": {str(T): H * T * T * torch.finfo(dtype).bits // 8 for T in config["Ts"]},
        "qkv_out_bytes_analytic": {str(T): 4 * B * H * T * d_head * torch.finfo(dtype).bits // 8 for T in config["Ts"]},
        "block_mask_build_ms": mask_build,
        "memory_method": memory_method(device),
        "flex_available": flex_available(),
    }


register(
    "attention_position",
    "Causal attention with position: materialised bias against FlexAttention",
    "T5's bias costs B*H*T^2 memory traffic and blocks fused kernels; ALiBi folds into the kernel",
    {
        "quick": {"B": 1, "H": 8, "d_head": 64, "Ts": [512, 1024, 2048], "dtype": "float32", "rounds": 3,
                  "num_buckets": 32, "max_distance": 128, "seed": 0, "cold_compile": False},
        "full": {"B": 1, "H": 8, "d_head": 64, "Ts": [512, 1024, 2048, 4096, 8192], "dtype": "float32",
                 "rounds": 5, "num_buckets": 32, "max_distance": 128, "seed": 0, "cold_compile": True},
    },
)(run_attention)
