"""Benchmark: applying RoPE to q and k, against copying the same bytes.

RoPE reads each element of q and k once and writes it once, like a copy, with 3 FLOPs per
element in between: a kernel that runs at memory speed takes about the time of the copy. The
variants, all on the same q and k of shape (B, H, T, d_head):

    copy        q.clone(), k.clone(): a fresh output tensor with the same bytes, which is what
                an out-of-place RoPE also has to produce (allocation included)
    copy_into   q_out.copy_(q), k_out.copy_(k) into buffers allocated beforehand: the floor
    readable    apply_rotary in eager mode (the upcast, x * cos, the halves, the cat, the sum)
    fused       fused.apply_rotary_fused, the same rotation through torch.compile in one kernel
    hf          Hugging Face transformers' `apply_rotary_pos_emb` (Llama), when installed; it
                computes in the input dtype (no float32 upcast) and exists for the half pairing only

Each variant's time is the median over interleaved rounds; ratios divide by `copy` (and by
`copy_into`) from the same run. The fused kernel's compile time is measured separately, on a
cold compile (inductor's caches disabled) where torch allows it.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable

import torch

from mlbook.benchmarks.measure import summarize, sync, time_interleaved
from mlbook.benchmarks.registry import register
from mlbook.transformer import fused as F
from mlbook.transformer import positional as P

__all__ = ["GOAL", "hf_apply_rotary", "rope_variants", "run_rope"]

GOAL = 1.2  # the fused kernel should take at most 1.2x the time of the copy

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def hf_apply_rotary() -> Callable[..., Any] | None:
    """Hugging Face's `apply_rotary_pos_emb(q, k, cos, sin)` for Llama, or None if not installed."""
    try:
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    except Exception:  # noqa: BLE001 - transformers absent or broken: the variant is skipped
        return None
    return apply_rotary_pos_emb


def rope_variants(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairing: str,
    *, hf: Callable[..., Any] | None = None, fused: bool = True,
) -> dict[str, Callable[[], Any]]:
    """The zero-argument calls the benchmark times, by variant name (see the module docstring)."""
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)

    def readable() -> Any:
        return P.apply_rotary(q, cos, sin, pairing), P.apply_rotary(k, cos, sin, pairing)

    def fused_call() -> Any:
        return F.apply_rotary_fused(q, cos, sin, pairing), F.apply_rotary_fused(k, cos, sin, pairing)

    fns: dict[str, Callable[[], Any]] = {
        "copy": lambda: (q.clone(), k.clone()),
        "copy_into": lambda: (q_out.copy_(q), k_out.copy_(k)),
        "readable": readable,
    }
    if fused:
        fns["fused"] = fused_call
    if hf is not None and pairing == "half":
        cos_hf, sin_hf = cos.to(q.dtype)[None], sin.to(q.dtype)[None]  # (1, T, d_head) as HF's rotary returns them
        fns["hf"] = lambda: hf(q, k, cos_hf, sin_hf)
    return fns


@contextlib.contextmanager
def _cold_compile(cold: bool) -> Any:
    """With cold=True, disable inductor's on-disk caches so the first call measures a full compile."""
    if not cold:
        yield False
        return
    try:
        import torch._inductor.config as inductor_config

        if hasattr(inductor_config, "force_disable_caches"):
            with inductor_config.patch(force_disable_caches=True):
                yield True
            return
    except Exception:  # noqa: BLE001
        pass
    yield False


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max())


def run_rope(config: dict[str, Any], device: torch.device, progress: bool = True) -> dict[str, Any]:
    """Time every variant at every (dtype, pairing, shape) of `config`; see the module docstring."""
    gen = torch.Generator().manual_seed(config.get("seed", 0))
    hf = hf_apply_rotary() if config.get("hf", True) else None
    F.reset_fused_rotary()
    try:
        torch._dynamo.reset()  # a compiled kernel from earlier in this process would hide the compile time
    except Exception:  # noqa: BLE001
        pass
    cases: list[dict[str, Any]] = []
    compile_s: dict[str, Any] = {}
    cold = None
    for dtype_name in config["dtypes"]:
        dtype = _DTYPES[dtype_name]
        for pairing in config["pairings"]:
            key = f"{dtype_name}/{pairing}"
            fused_ok = True
            first_call_s = None
            for shape in config["shapes"]:
                B, H, T, d_head = shape
                q = torch.randn(B, H, T, d_head, generator=gen).to(device=device, dtype=dtype)  # (B, H, T, d_head)
                k = torch.randn(B, H, T, d_head, generator=gen).to(device=device, dtype=dtype)  # (B, H, T, d_head)
                rope = P.RotaryEmbedding(d_head, config.get("base", 10000.0), pairing=pairing).to(device)
                cos, sin = rope(T)  # (T, d_head) float32 each
                ref = P.apply_rotary(q, cos, sin, pairing)  # (B, H, T, d_head)
                diff = None
                if fused_ok:
                    if first_call_s is None:
                        with _cold_compile(bool(config.get("cold_compile", False))) as cold_flag:
                            cold = cold_flag if cold is None else cold
                            sync(device)
                            t0 = time.perf_counter()
                            out = F.apply_rotary_fused(q, cos, sin, pairing)
                            sync(device)
                            first_call_s = time.perf_counter() - t0
                    else:
                        out = F.apply_rotary_fused(q, cos, sin, pairing)
                    failures = F.fused_rotary_failures()
                    if device.type in failures:
                        fused_ok = False
                        compile_s[key] = {"error": failures[device.type]}
                    else:
                        diff = _max_diff(out, ref)
                fns = rope_variants(q, k, cos, sin, pairing, hf=hf, fused=fused_ok)
                for fn in fns.values():  # warm-up: first-touch page faults, any remaining compile
                    fn()
                times = time_interleaved(fns, config["rounds"], device)
                stats = {n: summarize(t) for n, t in times.items()}
                med = {n: s["median_ms"] for n, s in stats.items()}
                case = {
                    "dtype": dtype_name,
                    "pairing": pairing,
                    "shape": shape,
                    "mb_per_tensor": round(q.numel() * q.element_size() / 2**20, 1),
                    "times": stats,
                    "ratio_to_copy": {n: round(m / med["copy"], 3) for n, m in med.items()},
                    "ratio_to_copy_into": {n: round(m / med["copy_into"], 3) for n, m in med.items()},
                    "copy_gb_per_s": round(4 * q.numel() * q.element_size() / (med["copy_into"] * 1e-3) / 1e9, 2),
                    "max_abs_diff_fused_vs_readable": diff,
                }
                if hf is not None and pairing == "half":
                    hf_q, _ = hf(q, k, cos.to(dtype)[None], sin.to(dtype)[None])
                    case["max_abs_diff_hf_vs_readable"] = _max_diff(hf_q, ref)
                cases.append(case)
                if progress:
                    ratios = ", ".join(f"{n} {r:.2f}x" for n, r in case["ratio_to_copy"].items() if n != "copy")
                    print(f"rope {key} {tuple(shape)} ({case['mb_per_tensor']} MB/tensor): {ratios} of the copy",
                          flush=True)
                del q, k, ref, fns
            if fused_ok and first_call_s is not None:
                steady = next(c["times"]["fused"]["median_ms"] for c in cases
                              if c["dtype"] == dtype_name and c["pairing"] == pairing) * 1e-3 / 2  # one tensor
                compile_s[key] = {"first_call_s": round(first_call_s, 2), "compile_s": round(first_call_s - steady, 2)}
    largest = max(c["mb_per_tensor"] for c in cases)
    at_largest = [c for c in cases if c["mb_per_tensor"] == largest]
    return {
        "cases": cases,
        "compile": compile_s,
        "compile_cold": bool(cold),
        "hf_available": hf is not None,
        "goal_ratio": GOAL,
        "fused_min_numel_auto": F.FUSED_MIN_NUMEL,
        "summary": {
            f"{c['dtype']}/{c['pairing']}": {n: r for n, r in c["ratio_to_copy"].items() if n != "copy"}
            for c in at_largest
        },
    }


register(
    "rope_apply",
    "RoPE on q and k against a copy of the same bytes",
    "RoPE is about 6BTd FLOPs per layer, negligible: a good kernel runs at memory speed, like a copy",
    {
        "quick": {"shapes": [[1, 32, 512, 128], [1, 32, 2048, 128]], "dtypes": ["float32"],
                  "pairings": ["half"], "rounds": 7, "base": 10000.0, "seed": 0, "hf": True, "cold_compile": False},
        "full": {"shapes": [[1, 32, 512, 128], [1, 32, 2048, 128], [1, 32, 6144, 128]],
                 "dtypes": ["float32", "bfloat16"], "pairings": ["half", "interleaved"], "rounds": 15,
                 "base": 10000.0, "seed": 0, "hf": True, "cold_compile": True},
    },
)(run_rope)
