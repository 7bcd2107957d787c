"""Benchmark: applying RoPE to q and k, against copying the same bytes.

RoPE reads each element of q and k once and writes it once, like a copy, with 3 FLOPs per
element in between: a kernel that runs at memory speed takes about the time of the copy. Each
kind of kernel has its own floor (the goal is 1.2x of it):

    out-of-place (returns new tensors)       against copy = q.clone(), k.clone(): fresh tensors
                                             holding the same bytes, allocation included
    in-place (writes into existing buffers)  against copy_into = q_out.copy_(q), k_out.copy_(k)
                                             into buffers allocated beforehand

The variants, all on the same q and k of shape (B, H, T, d_head):

    copy, copy_into  the two floors above
    readable    apply_rotary in eager mode (the upcast, x * cos, the halves, the cat, the sum)
    fused       fused.apply_rotary_fused, the same rotation through torch.compile in one kernel
                (out-of-place: its floor is copy)
    fused_into  the same per-pair arithmetic compiled into a kernel that writes into a
                preallocated output (`rotary_pairs_into`; in-place: its floor is copy_into)
    hf          Hugging Face transformers' `apply_rotary_pos_emb` (Llama), when installed; it
                computes in the input dtype (no float32 upcast) and exists for the half pairing only

and, to find what keeps `fused` above its floor, three compiled out-of-place kernels that each
add one part of its work (the "ladder", config "ladder": true):

    upcast      (x.float() * 2).to(x.dtype): inductor's own loop over x, converted to float32
                and back, with no table (for float32 the conversions are no-ops)
    one_table   (x.float() * cos).to(x.dtype): adds the read of one float32 (T, d_head) table,
                broadcast over the heads
    fused       adds the second table and the pairing (each output from two inputs)

Each variant's time is the median over interleaved rounds; every ratio divides medians from the
same run: `ratio_to_copy` and `ratio_to_copy_into` by each floor, `ratio_to_floor` each fused
kernel by its own floor. The fused kernel's compile time is measured separately, on a cold
compile (inductor's caches disabled) where torch allows it.
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

__all__ = ["GOAL", "FLOORS", "LADDER", "hf_apply_rotary", "rotary_pairs_into", "rope_variants", "run_rope", "floor_ratios",
           "floor_report"]

GOAL = 1.2  # a fused kernel should take at most 1.2x the time of its copy floor
FLOORS: dict[str, str] = {"fused": "copy", "fused_into": "copy_into"}  # each fused kernel -> its floor

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def hf_apply_rotary() -> Callable[..., Any] | None:
    """Hugging Face's `apply_rotary_pos_emb(q, k, cos, sin)` for Llama, or None if not installed."""
    try:
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    except Exception:  # noqa: BLE001 - transformers absent or broken: the variant is skipped
        return None
    return apply_rotary_pos_emb


def rotary_pairs_into(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, out: torch.Tensor,
                      pairing: str = "half") -> torch.Tensor:
    """`fused.rotary_pairs` written into `out` (x's shape and dtype), one half (or even/odd lane) at a time.

    What torch.compile makes of it on a CPU (inductor, seen with TORCH_LOGS=output_code): one loop over
    every lane of `out` that also loads out's old contents and blends the two halves under masks, no
    temporary. (`out.copy_(rotary_pairs(...))` compiles to a kernel that first writes the joined result
    to a fresh tensor and then copies it into `out`.)
    """
    first, second = (slice(None, x.shape[-1] // 2), slice(x.shape[-1] // 2, None)) if pairing == "half" \
        else (slice(0, None, 2), slice(1, None, 2))
    xf = x.float()  # (..., T, d_head)
    a, b = xf[..., first], xf[..., second]  # (..., T, d/2) the two members of every pair
    out[..., first] = a * cos[:, first] - b * sin[:, first]  # cast to out.dtype on the store
    out[..., second] = b * cos[:, second] + a * sin[:, second]
    return out


def _upcast(x: torch.Tensor) -> torch.Tensor:
    return (x.float() * 2.0).to(x.dtype)  # (..., T, d_head)


def _one_table(x: torch.Tensor, cos: torch.Tensor) -> torch.Tensor:
    return (x.float() * cos).to(x.dtype)  # (..., T, d_head)


_COMPILED: dict[str, Callable[..., Any]] = {}  # the benchmark's own compiled kernels, made on first use


def _compiled(name: str) -> Callable[..., Any]:
    if name not in _COMPILED:
        _COMPILED[name] = torch.compile({"into": rotary_pairs_into, "upcast": _upcast, "one_table": _one_table}[name])
    return _COMPILED[name]


def rope_variants(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairing: str,
    *, hf: Callable[..., Any] | None = None, fused: bool = True, ladder: bool = False,
) -> dict[str, Callable[[], Any]]:
    """The zero-argument calls the benchmark times, by variant name (see the module docstring).
    fused=False leaves out every compiled variant (fused, fused_into and the ladder)."""
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
        into, q_rot, k_rot = _compiled("into"), torch.empty_like(q), torch.empty_like(k)
        fns["fused"] = fused_call
        fns["fused_into"] = lambda: (into(q, cos, sin, q_rot, pairing), into(k, cos, sin, k_rot, pairing))
        if ladder:
            upcast, one_table = _compiled("upcast"), _compiled("one_table")
            fns["upcast"] = lambda: (upcast(q), upcast(k))
            fns["one_table"] = lambda: (one_table(q, cos), one_table(k, cos))
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
    _COMPILED.clear()
    try:
        torch._dynamo.reset()  # a compiled kernel from earlier in this process would hide the compile time
    except Exception:  # noqa: BLE001
        pass
    with contextlib.ExitStack() as stack:
        # 4 dtype/pairing combinations, each compiled static then dynamic, per compiled function: more than
        # dynamo's default limit of 8 graphs per function would fall back to eager without a word
        for option in ("recompile_limit", "cache_size_limit"):
            if hasattr(torch._dynamo.config, option):
                stack.enter_context(torch._dynamo.config.patch(**{option: 64}))
                break
        return _run_rope(config, device, progress, gen, hf)


def _run_rope(config: dict[str, Any], device: torch.device, progress: bool, gen: torch.Generator,
              hf: Callable[..., Any] | None) -> dict[str, Any]:
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
                diff = diff_into = None
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
                        diff_into = _max_diff(_compiled("into")(q, cos, sin, torch.empty_like(q), pairing), ref)
                fns = rope_variants(q, k, cos, sin, pairing, hf=hf, fused=fused_ok, ladder=bool(config.get("ladder")))
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
                    "ratio_to_floor": {n: round(med[n] / med[floor], 3) for n, floor in FLOORS.items() if n in med},
                    "copy_gb_per_s": round(4 * q.numel() * q.element_size() / (med["copy_into"] * 1e-3) / 1e9, 2),
                    "max_abs_diff_fused_vs_readable": diff,
                    "max_abs_diff_fused_into_vs_readable": diff_into,
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
    largest = {}  # dtype/pairing -> its largest tensor size
    for c in cases:
        key = f"{c['dtype']}/{c['pairing']}"
        largest[key] = max(largest.get(key, 0.0), c["mb_per_tensor"])
    at_largest = [c for c in cases if c["mb_per_tensor"] == largest[f"{c['dtype']}/{c['pairing']}"]]
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
        "floors": dict(FLOORS),
    }


LADDER: tuple[tuple[str, str], ...] = (
    ("upcast", "inductor's loop with the float32 round trip"),
    ("one_table", "the first float32 table"),
    ("fused", "the second table and the pairing"),
)


def floor_ratios(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Per case of a saved 'rope_apply' record: each fused kernel's time over its own floor (FLOORS),
    whether that meets the goal, and the ladder's ratios to the copy where measured.

    Each item: dtype, pairing, mb_per_tensor, fused_over_copy, fused_into_over_copy_into (None when
    the record lacks the variant), meets_goal ({"fused": bool, "fused_into": bool}), ladder
    ({variant: time / copy} for copy, copy_into and, where measured, upcast, one_table, fused), spread
    ({variant: half its interquartile range over its median}, the relative noise of each time)."""
    res = record.get("results") if isinstance(record, dict) else None
    if not isinstance(res, dict) or record.get("name") != "rope_apply" or "cases" not in res:
        raise ValueError("record must be a saved 'rope_apply' benchmark record (mlbook.benchmarks.load_record('rope_apply'))")
    goal = res.get("goal_ratio", GOAL)
    out = []
    for c in res["cases"]:
        to_floor = c.get("ratio_to_floor") or {n: c[f"ratio_to_{f}"][n] for n, f in FLOORS.items()
                                               if n in c.get(f"ratio_to_{f}", {})}
        ladder = {v: c["ratio_to_copy"][v] for v in ("copy", "copy_into") + tuple(n for n, _ in LADDER)
                  if v in c["ratio_to_copy"]}
        spread = {v: (t["p75_ms"] - t["p25_ms"]) / (2 * t["median_ms"]) for v, t in c.get("times", {}).items()
                  if v in ladder and t["median_ms"] > 0}
        out.append({"dtype": c["dtype"], "pairing": c["pairing"], "mb_per_tensor": c["mb_per_tensor"],
                    "fused_over_copy": to_floor.get("fused"), "fused_into_over_copy_into": to_floor.get("fused_into"),
                    "meets_goal": {n: r <= goal for n, r in to_floor.items()}, "ladder": ladder, "spread": spread})
    return out


def floor_report(record: dict[str, Any]) -> str:
    """Per dtype and pairing of a saved 'rope_apply' record, a table over the tensor sizes: each fused
    kernel over its own floor (FLOORS) and how many sizes meet the goal; clone over copy_into (what
    a fresh allocation adds); and the ladder (`LADDER`, each as a multiple of clone). Then the
    ladder's steps at the largest size where the two floors agree within 10%, where the kernels' own
    passes are not hidden behind the allocation every out-of-place kernel pays, each with its
    spread (the two timings' half interquartile ranges, as multiples of clone, added), and the
    largest step that exceeds its spread, if any."""
    floors = floor_ratios(record)
    goal = record["results"].get("goal_ratio", GOAL)
    lines = []
    for combo in dict.fromkeys((f["dtype"], f["pairing"]) for f in floors):
        mine = [f for f in floors if (f["dtype"], f["pairing"]) == combo]
        rows: list[tuple[str, list[float | None], str]] = []
        for label, key in (("fused / clone", "fused_over_copy"), ("fused_into / copy_into", "fused_into_over_copy_into")):
            vals = [f[key] for f in mine]
            met = sum(v is not None and v <= goal for v in vals)
            rows.append((label, vals, f"{goal:g}x met {met} of {len(vals)}"))
        rows.append(("clone / copy_into", [1.0 / f["ladder"]["copy_into"] if "copy_into" in f["ladder"] else None
                                           for f in mine], "(the allocation)"))
        for v, what in LADDER:
            rows.append((f"ladder: {v} / clone", [f["ladder"].get(v) for f in mine], ""))
        width = max(len(r[0]) for r in rows) + 2
        lines.append(f"{combo[0]}/{combo[1]}".ljust(width) + "".join(f"{f['mb_per_tensor']:>8g} MB" for f in mine))
        for label, vals, note in rows:
            cells = "".join(f"{v:>10.2f}x" if v is not None else f"{'-':>11}" for v in vals)
            lines.append(f"  {label}".ljust(width) + cells + (f"  {note}" if note else ""))
        agree = [f for f in mine if "upcast" in f["ladder"] and abs(1.0 / f["ladder"]["copy_into"] - 1.0) <= 0.1]
        if agree:
            top = max(agree, key=lambda f: f["mb_per_tensor"])
            ladder, spread = top["ladder"], top["spread"]
            steps, previous = [], "copy"
            for v, what in LADDER:
                noise = ladder[v] * spread.get(v, 0.0) + ladder[previous] * spread.get(previous, 0.0)
                steps.append((ladder[v] - ladder[previous], noise, what))
                previous = v
            resolved = [st for st in steps if abs(st[0]) > st[1]]
            verdict = (f"largest: {max(resolved)[2]}" if resolved and max(resolved)[0] > 0
                       else "no step is larger than the spread of its timings")
            lines.append(f"  at {top['mb_per_tensor']:g} MB (the floors agree), fused - clone = {ladder['fused'] - 1.0:+.2f}x:")
            lines += [f"    {what} {d:+.2f}x (spread ±{n:.2f})" for d, n, what in steps] + [f"    {verdict}"]
    return "\n".join(lines)


register(
    "rope_apply",
    "RoPE on q and k against a copy of the same bytes",
    "RoPE is about 6BTd FLOPs per layer, negligible: a good kernel runs at memory speed, like a copy",
    {
        "quick": {"shapes": [[1, 32, 512, 128], [1, 32, 2048, 128]], "dtypes": ["float32"],
                  "pairings": ["half"], "rounds": 7, "base": 10000.0, "seed": 0, "hf": True, "cold_compile": False,
                  "ladder": False},
        "full": {"shapes": [[1, 32, 512, 128], [1, 32, 2048, 128], [1, 32, 6144, 128]],
                 "dtypes": ["float32", "bfloat16"], "pairings": ["half", "interleaved"], "rounds": 15,
                 "base": 10000.0, "seed": 0, "hf": True, "cold_compile": True, "ladder": True},
    },
)(run_rope)
