"""Tests for the benchmarks package and the fused RoPE kernel (mlbook.transformer.fused).

Tiny sizes only; no test asserts a speed. What is asserted: the fused RoPE kernel gives the
readable path's numbers (fp32 and bf16, both pairings) and falls back cleanly when compiling
fails; the attention variants compute the same attention as a float64 reference; the registry
writes records with the agreed fields through the one record store; the memory probe sees torch
allocations. (The live-slider benchmark measures the book: tools/bench_sliders.py,
tests/test_bench_sliders.py.)
"""

from __future__ import annotations

import json
import math
import warnings

import pytest
import torch

import mlbook.transformer.fused as F
import mlbook.transformer.positional as P
from mlbook.benchmarks import attention as BA
from mlbook.benchmarks import measure as M
from mlbook.benchmarks import registry as R
from mlbook.benchmarks import rope as BR
from mlbook.benchmarks.__main__ import main as cli


@pytest.fixture
def fresh_fused():
    """A clean fused-kernel state before and after the test."""
    F.reset_fused_rotary()
    yield
    F.reset_fused_rotary()


def _compiles() -> bool:
    """True if torch.compile works here (a C++ compiler and inductor); computed once."""
    if not hasattr(_compiles, "ok"):
        F.reset_fused_rotary()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cos, sin = P.RotaryEmbedding(4)(2)
            F.apply_rotary_fused(torch.ones(1, 2, 4), cos, sin)
        _compiles.ok = "cpu" not in F.fused_rotary_failures()  # type: ignore[attr-defined]
    return _compiles.ok  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------
# The fused RoPE kernel equals the readable apply_rotary
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_fused_rotary_equals_readable(dtype: torch.dtype, pairing: str) -> None:
    if not _compiles():
        pytest.skip(f"torch.compile unavailable here: {F.fused_rotary_failures().get('cpu')}")
    gen = torch.Generator().manual_seed(0)
    rope = P.RotaryEmbedding(16, pairing=pairing)
    for shape in [(2, 3, 7, 16), (5, 16), (1, 1, 1, 33, 16)]:  # several ranks and lengths
        x = (torch.randn(*shape, generator=gen) * 3).to(dtype)
        cos, sin = rope(shape[-2], offset=5)
        ref = P.apply_rotary(x, cos, sin, pairing)
        out = F.apply_rotary_fused(x, cos, sin, pairing)
        assert "cpu" not in F.fused_rotary_failures()
        assert out.dtype == x.dtype and out.shape == x.shape
        # the same float32 expression, rounded once to the output dtype: equal up to one rounding step
        # (a kernel may contract a multiply and an add into one FMA)
        eps = torch.finfo(dtype).eps
        torch.testing.assert_close(out.float(), ref.float(), rtol=eps, atol=1e-6)
        frac_differ = (out != ref).float().mean().item()
        assert frac_differ <= 0.01, f"{frac_differ:.1%} of the elements differ from the readable path"


def test_fused_rotary_falls_back_when_compile_fails(monkeypatch, fresh_fused) -> None:
    calls = []

    def broken_compile(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("no C++ compiler found\nsecond line")

    monkeypatch.setattr(torch, "compile", broken_compile)
    x = torch.randn(2, 6, 8)
    cos, sin = P.RotaryEmbedding(8)(6)
    ref = P.apply_rotary(x, cos, sin)
    with pytest.warns(RuntimeWarning, match=r"compiled RoPE kernel is unavailable on cpu \(RuntimeError: no C\+\+ compiler found\)"):
        out = F.apply_rotary_fused(x, cos, sin)
    assert torch.equal(out, ref)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning, no second attempt
        assert torch.equal(F.apply_rotary_fused(x, cos, sin), ref)
        with F.rotary_kernel("fused"):
            assert not F.wants_fused(x)  # a device where compiling failed is never asked again
    assert len(calls) == 1
    assert F.fused_rotary_failures()["cpu"].startswith("RuntimeError: no C++ compiler found")


def test_rotary_kernel_selection(monkeypatch, fresh_fused) -> None:
    monkeypatch.setattr(F, "FUSED_MIN_NUMEL", 100)
    small, large = torch.randn(1, 5, 4), torch.randn(6, 5, 4)  # 20 and 120 elements
    monkeypatch.delenv(F.ROTARY_KERNEL_ENV, raising=False)
    assert not F.wants_fused(small) and F.wants_fused(large)  # auto: only at or above the threshold
    assert not F.wants_fused(large.clone().requires_grad_())  # auto: not under autograd
    with torch.no_grad():
        assert F.wants_fused(large.clone().requires_grad_())  # ... which no_grad switches off
    monkeypatch.setenv(F.ROTARY_KERNEL_ENV, "readable")
    assert not F.wants_fused(large)
    monkeypatch.setenv(F.ROTARY_KERNEL_ENV, " Fused ")
    assert F.wants_fused(small)
    with F.rotary_kernel("readable"):  # the context manager overrides the environment
        assert not F.wants_fused(small)
    assert F.wants_fused(small)  # and is undone on exit
    monkeypatch.setenv(F.ROTARY_KERNEL_ENV, "turbo")
    with pytest.raises(ValueError, match=r"MLBOOK_ROPE_KERNEL='turbo' is not a RoPE kernel; valid values are 'auto'"):
        F.wants_fused(small)
    with pytest.raises(ValueError, match="unknown mode 'fast'"):
        with F.rotary_kernel("fast"):
            pass


def test_attention_takes_the_fused_kernel_where_wants_fused_says(monkeypatch, fresh_fused) -> None:
    from mlbook.transformer import attention

    used = []  # shapes the (stand-in) fused kernel was called with
    monkeypatch.setattr(attention, "apply_rotary_fused",
                        lambda x, c, s, p: used.append(tuple(x.shape)) or P.apply_rotary(x, c, s, p))
    layer = attention.MultiHeadAttention(8, 2, rotary=P.RotaryEmbedding(4)).eval()
    x = torch.randn(1, 3, 8)
    with torch.no_grad():
        with F.rotary_kernel("readable"):
            ref = layer(x)
        assert used == []
        with F.rotary_kernel("fused"):
            out = layer(x)
    assert used == [(1, 2, 3, 4), (1, 2, 3, 4)]  # q and k
    assert torch.equal(out, ref)


def test_apply_rotary_rejects_non_tensors_and_integer_tensors() -> None:
    cos, sin = P.RotaryEmbedding(4)(3)
    for fn in (P.apply_rotary, F.apply_rotary_fused):
        with pytest.raises(TypeError, match="x, cos and sin must be torch.Tensors"):
            fn([[0.0] * 4] * 3, cos, sin)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"x must be a floating-point tensor .*got dtype torch.int64"):
            fn(torch.ones(3, 4, dtype=torch.long), cos, sin)
        with pytest.raises(ValueError, match=r"d_head must be even .*width 3"):
            fn(torch.ones(3, 3), cos[:, :3], sin[:, :3])


# ---------------------------------------------------------------------------
# Attention variants: the same attention as a float64 reference
# ---------------------------------------------------------------------------


def _reference(q, k, v, bias=None):
    """Naive causal attention in float64: softmax(q k^T / sqrt(d) + bias, masked) v."""
    q, k, v = q.double(), k.double(), v.double()
    T = q.shape[-2]
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T, T)
    if bias is not None:
        s = s + bias.double()
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    return s.softmax(-1) @ v


def test_attention_variants_match_a_float64_reference() -> None:
    if not BA.flex_available():
        pytest.skip("FlexAttention needs torch >= 2.5")
    if not _compiles():
        pytest.skip("torch.compile unavailable here")
    gen = torch.Generator().manual_seed(0)
    B, H, T, d = 1, 2, 160, 16  # T > 128 reaches T5's last bucket and spans two flex blocks
    q, k, v = (torch.randn(B, H, T, d, generator=gen) for _ in range(3))
    t5 = P.RelativePositionBias(H, 32, 128, bidirectional=False)
    with torch.no_grad():
        t5.table.weight.copy_(torch.randn(32, H, generator=gen) * 2)
    rope = P.RotaryEmbedding(d)
    fns = BA.attention_variants(q, k, v, slopes=P.alibi_slopes(H), t5_bias=t5, rope=rope,
                                block_mask=BA.causal_block_mask(T, "cpu"))
    assert set(fns) == set(BA.VARIANTS)
    with torch.no_grad():
        out = {name: fn() for name, fn in fns.items()}
        cos, sin = rope(T)
        expected = {
            "sdpa": _reference(q, k, v),
            "flex": _reference(q, k, v),
            "rope_sdpa": _reference(P.apply_rotary(q, cos, sin), P.apply_rotary(k, cos, sin), v),
            "t5_bias": _reference(q, k, v, t5(T, T)),
            "t5_flex": _reference(q, k, v, t5(T, T)),
            "alibi_bias": _reference(q, k, v, P.alibi_bias(H, T, T)),
            "alibi_flex": _reference(q, k, v, P.alibi_bias(H, T, T)),
        }
    for name in BA.VARIANTS:
        err = (out[name].double() - expected[name]).abs().max().item()
        assert err < BA.TOLERANCE / 10, f"{name}: max abs difference {err:.2e} from the float64 reference"
    # the position terms matter: without them the outputs would differ from these references
    assert (out["t5_flex"] - out["sdpa"]).abs().max() > 1e-2
    assert (out["alibi_flex"] - out["sdpa"]).abs().max() > 1e-2


def test_score_mods_and_variants_reject_bad_input() -> None:
    with pytest.raises(ValueError, match=r"table must be \(num_buckets=32, H\)"):
        BA.t5_score_mod(torch.zeros(16, 2))
    with pytest.raises(ValueError, match="slopes must be a 1-D tensor"):
        BA.alibi_score_mod(torch.zeros(2, 2))
    q = torch.zeros(1, 1, 4, 4)
    kw = dict(slopes=P.alibi_slopes(1), t5_bias=P.RelativePositionBias(1, bidirectional=False), rope=P.RotaryEmbedding(4))
    with pytest.raises(ValueError, match=r"unknown variants \['sdpa2'\]"):
        BA.attention_variants(q, q, q, variants=("sdpa2",), **kw)
    if BA.flex_available():
        with pytest.raises(ValueError, match="the flex variants need block_mask"):
            BA.attention_variants(q, q, q, variants=("t5_flex",), **kw)


# ---------------------------------------------------------------------------
# Measurement helpers
# ---------------------------------------------------------------------------


def test_time_interleaved_rotates_the_order() -> None:
    order: list[str] = []
    fns = {n: (lambda n=n: order.append(n)) for n in "abc"}
    times = M.time_interleaved(fns, 3, torch.device("cpu"))
    assert order == list("abc" "bca" "cab")
    assert all(len(t) == 3 and all(x >= 0 for x in t) for t in times.values())
    s = M.summarize([0.001, 0.003, 0.002, 0.004])
    assert s["median_ms"] == 2.5 and s["min_ms"] == 1.0 and s["p25_ms"] <= s["median_ms"] <= s["p75_ms"]
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        M.time_interleaved(fns, 0, torch.device("cpu"))


@pytest.mark.skipif(M.memory_method(torch.device("cpu")) != "rss-hwm", reason="needs Linux /proc peak-RSS reset")
def test_peak_memory_sees_torch_allocations() -> None:
    n = 64 * 2**20 // 4  # 64 MiB of float32
    peak = M.peak_memory(lambda: torch.ones(n), torch.device("cpu"))
    assert peak is not None and 60 * 2**20 <= peak <= 200 * 2**20
    transient = M.peak_memory(lambda: torch.ones(n).sum(), torch.device("cpu"))  # freed before the call returns
    assert transient is not None and transient >= 60 * 2**20
    small = M.peak_memory(lambda: torch.ones(8), torch.device("cpu"))
    assert small is not None and small < 16 * 2**20


# ---------------------------------------------------------------------------
# Registry, records and the command line
# ---------------------------------------------------------------------------


@pytest.fixture
def dummy_bench(monkeypatch, tmp_path):
    monkeypatch.setenv("MLBOOK_RESULTS", str(tmp_path))

    def fn(config, device, progress):
        return {"value": config["n"] * 2, "device_type": device.type}

    R.register("dummy_test", "A dummy", "nothing", {"quick": {"n": 1}, "full": {"n": 2}})(fn)
    yield tmp_path
    R.BENCHMARKS.pop("dummy_test", None)


def test_registry_record_fields_and_round_trip(dummy_bench) -> None:
    record = R.run_benchmark("dummy_test", "quick", "cpu", progress=False, threads=1)
    for key in ("name", "budget", "config", "results", "device", "cpu", "threads", "torch_version", "mlbook_version",
                "python_version", "elapsed_s", "created", "command"):
        assert key in record, key
    assert record["threads"] == 1 and record["device"] == "cpu" and record["torch_version"] == torch.__version__
    assert record["results"] == {"value": 2, "device_type": "cpu"}
    path = dummy_bench / "quick" / "bench" / "dummy_test.json"
    assert json.loads(path.read_text()) == record
    assert R.load_record("dummy_test", "quick") == record
    assert R.load_record("dummy_test", "full") is None
    R.BENCHMARKS["dummy_test"].configs["quick"] = {"n": 3}  # a changed config does not reuse the old record
    assert R.load_record("dummy_test", "quick") is None
    full = R.run_benchmark("dummy_test", "full", progress=False)
    assert (dummy_bench / "bench" / "dummy_test.json").is_file() and full["results"]["value"] == 4


def test_registry_rejects_bad_names_budgets_and_configs(dummy_bench) -> None:
    with pytest.raises(ValueError, match="unknown benchmark 'nope'; valid names are .*rope_apply"):
        R.run_benchmark("nope")
    with pytest.raises(ValueError, match="unknown budget 'medium'"):
        R.run_benchmark("dummy_test", "medium")
    with pytest.raises(ValueError, match=r"needs a config for every budget; missing \['full'\]"):
        R.register("x", "x", "x", {"quick": {}})
    with pytest.raises(ValueError, match="threads must be an int >= 1"):
        R.run_benchmark("dummy_test", threads=0)
    with pytest.raises(ValueError, match="unknown device 'tpu!'; valid values are 'auto', 'cpu'"):
        R.run_benchmark("dummy_test", device="tpu!")


def test_cli_list_and_run(dummy_bench, capsys) -> None:
    assert cli(["list"]) == 0
    listed = capsys.readouterr().out
    for name in ("rope_apply", "attention_position", "dummy_test"):
        assert name in listed
    assert "live_sliders" not in listed  # the book's benchmark (tools/bench_sliders.py), not the library's
    assert cli(["run", "dummy_test", "--quick", "--no-save"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out) == {"value": 2, "device_type": "cpu"}
    assert not (dummy_bench / "quick" / "bench" / "dummy_test.json").exists()
    with pytest.raises(SystemExit):
        cli(["run", "nope"])


def test_rope_benchmark_record_on_tiny_tensors(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("MLBOOK_RESULTS", str(tmp_path))
    config = {"shapes": [[1, 2, 8, 8]], "dtypes": ["float32"], "pairings": ["half"], "rounds": 2, "base": 10000.0,
              "seed": 0, "hf": True, "cold_compile": False}
    res = BR.run_rope(config, torch.device("cpu"), progress=False)
    (case,) = res["cases"]
    assert case["ratio_to_copy"]["copy"] == 1.0
    expected = {"copy", "copy_into", "readable"} | ({"fused", "fused_into"} if _compiles() else set())
    expected |= {"hf"} if BR.hf_apply_rotary() is not None else set()
    assert set(case["ratio_to_copy"]) == expected
    if _compiles():
        assert case["max_abs_diff_fused_vs_readable"] <= 1e-6
        assert res["compile"]["float32/half"]["first_call_s"] >= 0
    if "hf" in expected:  # Hugging Face's rotation is the same maths (float32 here)
        assert case["max_abs_diff_hf_vs_readable"] < 1e-5
    assert res["summary"]["float32/half"]["readable"] > 0


def test_attention_benchmark_record_on_a_tiny_config() -> None:
    if BA.flex_available() and not _compiles():
        pytest.skip("torch.compile unavailable here")
    # the shapes of test_attention_variants_match_a_float64_reference: the kernels it compiled are reused
    config = {"B": 1, "H": 2, "d_head": 16, "Ts": [160], "dtype": "float32", "rounds": 1, "num_buckets": 32,
              "max_distance": 128, "seed": 0, "cold_compile": False}
    res = BA.run_attention(config, torch.device("cpu"), progress=False)
    assert {r["variant"] for r in res["rows"]} == set(res["variants"])
    assert res["within_tolerance"]
    assert res["ratio_to_sdpa"]["160"]["sdpa"] == 1.0
    assert res["bias_bytes_analytic"]["160"] == 2 * 160 * 160 * 4
    method = M.memory_method(torch.device("cpu"))
    assert res["memory_method"] == method
    assert all((r["peak_bytes"] is None) == (method == "unavailable") for r in res["rows"])


def test_rope_record_gives_each_fused_kernel_its_own_floor(monkeypatch, tmp_path) -> None:
    """fused (out-of-place) is divided by copy (clone), fused_into (in-place) by copy_into, from the same
    run's medians; fused_into computes the readable path's numbers; the ladder and the report read them."""
    if not _compiles():
        pytest.skip("torch.compile unavailable here")
    config = {"shapes": [[1, 2, 8, 8]], "dtypes": ["float32", "bfloat16"], "pairings": ["half", "interleaved"],
              "rounds": 2, "base": 10000.0, "seed": 0, "hf": False, "cold_compile": False, "ladder": True}
    res = BR.run_rope(config, torch.device("cpu"), progress=False)
    assert {(c["dtype"], c["pairing"]) for c in res["cases"]} == {(d, p) for d in config["dtypes"]
                                                                  for p in config["pairings"]}
    for c in res["cases"]:
        med = {n: t["median_ms"] for n, t in c["times"].items()}
        assert set(c["ratio_to_floor"]) == {"fused", "fused_into"}
        assert c["ratio_to_floor"]["fused"] == pytest.approx(med["fused"] / med["copy"], rel=1e-2)
        assert c["ratio_to_floor"]["fused_into"] == pytest.approx(med["fused_into"] / med["copy_into"], rel=1e-2)
        assert {"upcast", "one_table"} <= set(c["ratio_to_copy"])
        assert c["max_abs_diff_fused_into_vs_readable"] == 0.0 or c["max_abs_diff_fused_into_vs_readable"] <= (
            1e-6 if c["dtype"] == "float32" else 1e-2)
    assert set(res["summary"]) == {"float32/half", "float32/interleaved", "bfloat16/half", "bfloat16/interleaved"}
    record = {"name": "rope_apply", "results": res}
    floors = BR.floor_ratios(record)
    assert all(f["ladder"]["copy"] == 1.0 and set(f["meets_goal"]) == {"fused", "fused_into"} for f in floors)
    report = BR.floor_report(record)
    for combo in res["summary"]:
        assert combo in report
    assert report.count("\n  fused / clone ") == report.count("\n  fused_into / copy_into ") == 4
    with pytest.raises(ValueError, match="record must be a saved 'rope_apply' benchmark record"):
        BR.floor_report({"name": "attention_position", "results": {}})


def _case(mb: float, medians: dict[str, float], spread: float) -> dict:
    times = {v: {"median_ms": m, "p25_ms": m * (1 - spread), "p75_ms": m * (1 + spread)} for v, m in medians.items()}
    return {"dtype": "bfloat16", "pairing": "half", "mb_per_tensor": mb, "times": times,
            "ratio_to_copy": {v: m / medians["copy"] for v, m in medians.items()},
            "ratio_to_copy_into": {v: m / medians["copy_into"] for v, m in medians.items()}}


def test_floor_report_reads_the_ladder_where_the_floors_agree_and_only_past_the_noise() -> None:
    """At 64 MB the allocation makes clone 5x copy_into (floors disagree): the ladder is read at 16 MB,
    where the upcast step (+0.5x) exceeds its spread and the others do not; with wide spreads, no step."""
    big = {"copy": 10.0, "copy_into": 2.0, "fused": 11.0, "fused_into": 5.0, "upcast": 10.5, "one_table": 10.8}
    small = {"copy": 1.0, "copy_into": 1.0, "fused": 1.52, "fused_into": 2.0, "upcast": 1.5, "one_table": 1.51}
    record = {"name": "rope_apply", "results": {"goal_ratio": 1.2, "cases": [_case(16, small, 0.02), _case(64, big, 0.02)]}}
    floors = BR.floor_ratios(record)
    assert [f["fused_over_copy"] for f in floors] == pytest.approx([1.52, 1.1])
    assert [f["fused_into_over_copy_into"] for f in floors] == pytest.approx([2.0, 2.5])
    assert [f["meets_goal"]["fused"] for f in floors] == [False, True]
    report = BR.floor_report(record)
    assert "1.2x met 1 of 2" in report and "1.2x met 0 of 2" in report
    assert "at 16 MB (the floors agree), fused - clone = +0.52x:" in report
    assert "inductor's loop with the float32 round trip +0.50x" in report
    assert report.endswith("largest: inductor's loop with the float32 round trip")
    noisy = {"name": "rope_apply", "results": {"goal_ratio": 1.2, "cases": [_case(16, small, 0.5)]}}
    assert BR.floor_report(noisy).endswith("no step is larger than the spread of its timings")


def test_rotary_pairs_into_writes_the_readable_result_into_the_buffer() -> None:
    for dtype in (torch.float32, torch.bfloat16):
        for pairing in P.ROPE_PAIRINGS:
            x = torch.randn(2, 3, 5, 8).to(dtype)  # (B, H, T, d_head)
            cos, sin = P.RotaryEmbedding(8, pairing=pairing)(5)  # (T, d_head) each
            out = torch.full_like(x, float("nan"))
            assert BR.rotary_pairs_into(x, cos, sin, out, pairing) is out
            torch.testing.assert_close(out, P.apply_rotary(x, cos, sin, pairing), rtol=0, atol=0)


def test_committed_rope_record_has_each_fused_kernel_against_its_floor_for_both_dtypes_and_pairings() -> None:
    """The issue's bar: the committed record shows fused / clone and fused_into / copy_into for float32 and
    bfloat16, half and interleaved pairing, all from one run (and the ladder that says what stops 1.2x)."""
    record = R.load_record("rope_apply", "full")
    if record is None:
        pytest.skip("no committed rope_apply record for the current config")
    floors = BR.floor_ratios(record)
    combos = {(f["dtype"], f["pairing"]) for f in floors}
    assert combos == {(d, p) for d in ("float32", "bfloat16") for p in ("half", "interleaved")}
    for f in floors:
        assert f["fused_over_copy"] is not None and f["fused_into_over_copy_into"] is not None, f
        assert f["ladder"], f
    assert "largest:" in BR.floor_report(record)


def test_benchmarks_and_experiments_pick_devices_with_one_default(monkeypatch, dummy_bench) -> None:
    import importlib

    from mlbook import records
    from mlbook.experiments import registry as experiments

    train = importlib.import_module("mlbook.experiments.train")  # the module: the package exports a function `train`
    assert R.pick_device is records.pick_device is train.pick_device is experiments.pick_device
    monkeypatch.setenv("MLBOOK_DEVICE", "cpu")
    assert R.run_benchmark("dummy_test", "quick", save=False)["results"]["device_type"] == "cpu"
    monkeypatch.setenv("MLBOOK_DEVICE", "tpu")
    with pytest.raises(ValueError, match="unknown device in environment variable MLBOOK_DEVICE 'tpu'"):
        R.run_benchmark("dummy_test", "quick", save=False)
    with pytest.raises(ValueError, match="unknown device in environment variable MLBOOK_DEVICE 'tpu'"):
        train.pick_device()


def test_benchmark_records_are_written_by_the_store(dummy_bench) -> None:
    from mlbook import records

    record = R.run_benchmark("dummy_test", "quick", "cpu", progress=False, note="a busy machine")
    path = dummy_bench / "quick" / "bench" / "dummy_test.json"
    assert path.read_text() == records.record_text(record)
    assert record["note"] == "a busy machine" and "note: a busy machine" in R.describe_record(record)
    assert R.describe_record(record).endswith("remake with: python -m mlbook.benchmarks run dummy_test --quick")
