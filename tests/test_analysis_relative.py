"""Tests for mlbook.analysis.relative: T5 bucket layouts, parameter and memory counts, Swin's index.

Oracles: Hugging Face's T5 bucketing (`T5Attention._relative_position_bucket`) and T5 model
(parameter counts on the meta device), Swin's official index construction (retyped below from
the reference implementation's recipe), brute-force searches, and tensor sizes measured on
the library's own modules.
"""

from __future__ import annotations

import math

import pytest
import torch

from mlbook.analysis import relative as R
from mlbook.transformer.positional import RelativePositionBias, RelativePositionBias2D

CONFIGS = [(32, 128, True), (32, 128, False), (8, 8, True), (16, 64, False), (64, 256, True), (10, 20, True)]


def _hf_bucket():
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    return t5.T5Attention._relative_position_bucket


# ---------------------------------------------------------------------------
# Bucket layout
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("num_buckets, max_distance, bidirectional", CONFIGS)
def test_bucket_layout_agrees_with_hugging_face(num_buckets, max_distance, bidirectional):
    hf = _hf_bucket()
    layout = R.bucket_layout(num_buckets, max_distance, bidirectional)
    for sign, table in ((-1, layout.past), (1, layout.future)):
        for bucket, (lo, hi) in table.items():
            top = hi if hi is not None else 4 * max_distance
            d = torch.arange(lo, top + 1)
            assert (hf(sign * d, bidirectional, num_buckets, max_distance) == bucket).all()
            if lo > (0 if sign < 0 else 1):
                assert hf(sign * torch.tensor([lo - 1]), bidirectional, num_buckets, max_distance).item() != bucket
    # every bucket HF reaches is listed, and none that it does not
    offsets = torch.arange(-4 * max_distance, 4 * max_distance + 1)
    reached = set(hf(offsets, bidirectional, num_buckets, max_distance).tolist())
    assert reached == set(layout.past) | (set(layout.future) if bidirectional else set())
    assert set(layout.unused_buckets) == set(range(num_buckets)) - reached


def test_bucket_layout_t5_defaults():
    layout = R.bucket_layout(32, 128, True)
    assert layout.buckets_per_direction == 16
    assert layout.exact_past == list(range(8)) and layout.exact_future == list(range(1, 8))
    assert layout.unused_buckets == [16]
    assert layout.last_bucket_from == 91
    assert layout.past[15] == (91, None) and layout.future[31] == (91, None)
    causal = R.bucket_layout(32, 128, False)
    assert causal.exact_past == list(range(16)) and causal.future == {} and causal.unused_buckets == []
    assert "open" in repr(layout) and "bidirectional" in repr(layout)


def test_bucket_layout_last_bucket_from_matches_brute_force():
    hf = _hf_bucket()
    for num_buckets, max_distance, bidirectional in CONFIGS:
        per = num_buckets // 2 if bidirectional else num_buckets
        n = torch.arange(0, 4 * max_distance)
        b = hf(-n, bidirectional, num_buckets, max_distance)
        first = int(n[b == per - 1].min())
        assert R.bucket_layout(num_buckets, max_distance, bidirectional).last_bucket_from == first


def test_bucket_layout_rejects_bad_settings():
    with pytest.raises(ValueError, match="max_distance"):
        R.bucket_layout(32, 8, True)
    with pytest.raises(ValueError, match="num_buckets"):
        R.bucket_layout(2, 8, True)


@pytest.mark.parametrize("train_len, eval_len, num_buckets, max_distance, bidirectional", [
    (8, 16, 32, 128, True), (8, 16, 32, 128, False), (8, 16, 8, 8, True), (512, 2048, 32, 128, True), (20, 60, 16, 32, False),
])
def test_untrained_offsets_brute_force(train_len, eval_len, num_buckets, max_distance, bidirectional):
    hf = _hf_bucket()

    def offsets(T):
        return torch.arange(-(T - 1), T) if bidirectional else torch.arange(-(T - 1), 1)

    trained = set(hf(offsets(train_len), bidirectional, num_buckets, max_distance).tolist())
    want = [int(o) for o in offsets(eval_len) if hf(o[None], bidirectional, num_buckets, max_distance).item() not in trained]
    assert R.untrained_offsets(train_len, eval_len, num_buckets, max_distance, bidirectional) == want


def test_untrained_offsets_vanish_once_training_reaches_the_last_bucket():
    last = R.bucket_layout(32, 128, True).last_bucket_from
    assert R.untrained_offsets(last + 1, 4096) == []
    assert R.untrained_offsets(last, 4096) != []


# ---------------------------------------------------------------------------
# Parameter counts and memory
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("num_buckets, H", [(32, 8), (8, 3), (64, 16)])
def test_relative_bias_params_is_the_table(num_buckets, H):
    table = RelativePositionBias(H, num_buckets, max(num_buckets, 128)).table.weight
    assert R.relative_bias_params(num_buckets, H, n_stacks=1) == table.numel()
    assert R.relative_bias_params(num_buckets, H, n_stacks=2) == 2 * table.numel()


@pytest.mark.parametrize("cfg", [{}, {"d_model": 64, "d_kv": 16, "num_heads": 4, "d_ff": 128, "num_layers": 2,
                                      "vocab_size": 100, "relative_attention_num_buckets": 16},
                                 {"d_model": 48, "d_kv": 8, "num_heads": 3, "d_ff": 96, "num_layers": 3, "vocab_size": 10}])
def test_t5_param_count_matches_hugging_face(cfg):
    transformers = pytest.importorskip("transformers")
    hc = transformers.T5Config(**cfg)
    with torch.device("meta"):
        model = transformers.T5ForConditionalGeneration(hc)
    assert R.t5_param_count(hc.vocab_size, hc.d_model, hc.d_kv, hc.num_heads, hc.d_ff, hc.num_layers,
                            hc.relative_attention_num_buckets) == sum(p.numel() for p in model.parameters())
    bias = sum(p.numel() for n, p in model.named_parameters() if "relative_attention_bias" in n)
    assert bias == R.relative_bias_params(hc.relative_attention_num_buckets, hc.num_heads, n_stacks=2)


def test_hugging_face_t5_adds_the_bias_to_unscaled_scores():
    """Section 2.3's boxed formula: T5 computes q.k + b with no 1/sqrt(d_kv) (the scale is folded into
    the query projection's initialisation), which is what Hugging Face's T5Attention returns."""
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    H, d_kv, T = 2, 16, 6
    attn = t5.T5Attention(transformers.T5Config(d_model=32, d_kv=d_kv, num_heads=H), has_relative_attention_bias=True)
    attn.eval()
    x = torch.randn(1, T, 32)
    with torch.no_grad():
        weights = attn(x, query_length=T, output_attentions=True)[-1]  # (1, H, T, T)
        q = attn.q(x).view(1, T, H, d_kv).transpose(1, 2)  # (1, H, T, d_kv)
        k = attn.k(x).view(1, T, H, d_kv).transpose(1, 2)  # (1, H, T, d_kv)
        bias = attn.compute_bias(T, T)  # (1, H, T, T)
        scores = q @ k.transpose(-2, -1)  # (1, H, T, T)
    torch.testing.assert_close(weights, (scores + bias).softmax(-1))
    assert not torch.allclose(weights, (scores / d_kv**0.5 + bias).softmax(-1), atol=1e-3)
    if hasattr(attn, "scaling"):  # transformers 5 passes this factor to its attention function (page 04 quotes it)
        assert attn.scaling == 1.0
    # the initialisation that stands in for the scale: std (d_model * d_kv)^-0.5 for the query projection
    model = transformers.T5EncoderModel(transformers.T5Config(d_model=256, d_kv=64, num_heads=4, num_layers=1,
                                                              vocab_size=8, initializer_factor=1.0))
    wq = model.encoder.block[0].layer[0].SelfAttention.q.weight
    assert float(wq.detach().std()) == pytest.approx((256 * 64) ** -0.5, rel=0.05)


def test_t5_small_numbers():
    assert R.t5_param_count() == 60_506_624
    assert R.relative_bias_params(32, 8, 2) == 512


@pytest.mark.parametrize("T, H", [(1, 1), (5, 2), (512, 8)])
def test_per_distance_params_counts_distinct_offsets(T, H):
    pos = torch.arange(T)
    assert R.per_distance_params(T, H) == torch.unique(pos[None, :] - pos[:, None]).numel() * H


@pytest.mark.parametrize("H, T_q, T_k, dtype", [(4, 7, 7, torch.float32), (3, 2, 9, torch.bfloat16), (8, 16, 16, torch.float64)])
def test_bias_bytes_is_the_tensor_size(H, T_q, T_k, dtype):
    bias = RelativePositionBias(H)(T_q, T_k, query_offset=0).to(dtype)
    assert R.bias_bytes(H, T_q, T_k, bytes_per_value=bias.element_size()) == bias.numel() * bias.element_size()
    assert R.bias_bytes(H, T_q, T_k, 2, batch=3) == 3 * H * T_q * T_k * 2


def test_bias_bytes_spec_numbers():
    assert R.bias_bytes(8, 4096, 4096, 4) == 512 * 2**20
    assert R.bias_bytes(32, 32768, 32768, 2) == 64 * 2**30
    with pytest.raises(ValueError, match="bytes_per_value"):
        R.bias_bytes(8, 4, 4, 0)


def test_diagonal_spread_zero_for_t5_bias_positive_otherwise():
    torch.manual_seed(0)
    bias = RelativePositionBias(4, 16, 32)(20, 20)[0].detach()  # (H, T, T)
    assert R.diagonal_spread(bias) == 0.0
    bias[2, 3, 5] += 0.25  # break one entry on diagonal +2
    assert R.diagonal_spread(bias) == pytest.approx(0.25, abs=1e-6)
    rect = RelativePositionBias(2, 16, 32)(3, 9).detach()
    assert R.diagonal_spread(rect) == 0.0
    with pytest.raises(TypeError):
        R.diagonal_spread(torch.zeros(3))


def test_bias_translation_invariance_spec_pairs():
    torch.manual_seed(1)
    bias = RelativePositionBias(8)(16, 16)[0]
    assert torch.equal(bias[:, 2, 5], bias[:, 6, 9])


# ---------------------------------------------------------------------------
# Swin
# ---------------------------------------------------------------------------


def _swin_official(w: int) -> torch.Tensor:
    """The index as Swin's reference code builds it (coords, flatten, broadcast difference,
    permute, shift by w - 1, scale the first coordinate by 2w - 1, sum)."""
    coords = torch.stack(torch.meshgrid(torch.arange(w), torch.arange(w), indexing="ij"))  # (2, w, w)
    flat = torch.flatten(coords, 1)  # (2, w^2)
    rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0).contiguous()  # (w^2, w^2, 2)
    rel[:, :, 0] += w - 1
    rel[:, :, 1] += w - 1
    rel[:, :, 0] *= 2 * w - 1
    return rel.sum(-1)  # (w^2, w^2)


@pytest.mark.parametrize("w", [1, 2, 3, 7, 8])
def test_swin_index_matches_the_reference_recipe(w):
    assert torch.equal(R.swin_index(w), _swin_official(w))


@pytest.mark.parametrize("w", [1, 2, 5, 7])
def test_swin_table_entries_and_pairs_match_the_module(w):
    module = RelativePositionBias2D(w, 3)
    assert R.swin_table_entries(w) == module.table.shape[0]
    assert R.window_pairs(w) == module.index.numel()
    assert torch.unique(module.index).numel() == R.swin_table_entries(w), "every offset is used"


def test_swin_spec_numbers_and_translation_invariance():
    assert R.swin_table_entries(7) == 169 and R.swin_table_entries(224) == 199_809
    index = R.swin_index(7)
    q1, k1 = R.swin_pair(7, (2, 3), (4, 5))
    q2, k2 = R.swin_pair(7, (0, 1), (2, 3))
    assert (q1, k1, q2, k2) == (17, 33, 1, 17)
    assert int(index[q1, k1]) == int(index[q2, k2]) == (-2 + 6) * 13 + (-2 + 6)


def test_swin_index_leaves_the_global_rng_alone():
    torch.manual_seed(7)
    a = torch.rand(3)
    torch.manual_seed(7)
    R.swin_index(5)
    assert torch.equal(torch.rand(3), a)


# ---------------------------------------------------------------------------
# The patch grid, and Swin V2's log-spaced offsets
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("image_size, patch_size", [(224, 4), (384, 4), (192, 4), (224, 16)])
def test_patch_grid_matches_hugging_face_swin(image_size, patch_size):
    swin = pytest.importorskip("transformers.models.swin.modeling_swin")
    transformers = pytest.importorskip("transformers")
    config = transformers.SwinConfig(image_size=image_size, patch_size=patch_size)
    grid = swin.SwinPatchEmbeddings(config).grid_size
    assert grid == (R.patch_grid(image_size, patch_size),) * 2


def test_stage1_grid_numbers():
    grid = R.patch_grid(224, 4)
    assert grid == 56
    assert R.swin_table_entries(grid) == 111**2 == 12_321
    assert R.window_pairs(grid) == (56 * 56) ** 2
    # one table over the grid has a row per distinct (dy, dx): count them per axis, the set is their product
    axis = torch.arange(grid)
    assert torch.unique(axis[:, None] - axis[None, :]).numel() ** 2 == R.swin_table_entries(grid)


def test_log_spaced_offset_against_math_and_hugging_face_swinv2():
    values = [-15.0, -7.0, -1.0, -0.5, 0.0, 0.25, 1.0, 3.0, 23.0]
    got = R.log_spaced_offset(values, 8)
    assert got.dtype == torch.float64
    want = [math.copysign(math.log2(1 + 8 * abs(v) / 7) / 3, v) for v in values]
    assert got.tolist() == pytest.approx(want, abs=1e-15)
    assert torch.equal(R.log_spaced_offset(torch.tensor(values), 8), -R.log_spaced_offset(torch.tensor(values).neg(), 8))
    # Hugging Face's Swin V2 builds the same table, for a window trained at its own size and for a larger
    # window fine-tuned from a smaller pre-training window (the offsets rescaled by the pre-training one)
    swinv2 = pytest.importorskip("transformers.models.swinv2.modeling_swinv2")
    transformers = pytest.importorskip("transformers")
    for w, w_pre in ((8, 0), (16, 8), (12, 7), (24, 12)):
        attn = swinv2.Swinv2SelfAttention(transformers.Swinv2Config(), dim=32, num_heads=2, window_size=w,
                                          pretrained_window_size=[w_pre, w_pre])
        table = attn.relative_coords_table[0].double()  # (2w - 1, 2w - 1, 2)
        offsets = torch.arange(-(w - 1), w, dtype=torch.float64)  # dy (axis 0) and dx (axis 1)
        ours = R.log_spaced_offset(offsets, w_pre or w)
        torch.testing.assert_close(table[:, 0, 0], ours, rtol=0, atol=1e-6)
        torch.testing.assert_close(table[0, :, 1], ours, rtol=0, atol=1e-6)
        if w_pre:  # the growth the page prints is the table's own largest value over the trained window's
            trained = float(R.log_spaced_offset(w_pre - 1, w_pre))
            assert R.offset_range_growth(w_pre, w) == pytest.approx(float(table.max()) / trained - 1, abs=1e-6)


@pytest.mark.parametrize("old, new", [(7, 12), (8, 16), (12, 24), (8, 8)])
def test_offset_range_growth_brute_force(old, new):
    for log_spaced in (False, True):
        f = (lambda d: R.log_spaced_offset(d, old)) if log_spaced else (lambda d: torch.as_tensor(d, dtype=torch.float64))
        top_old = float(f(torch.arange(-(old - 1), old)).max())
        top_new = float(f(torch.arange(-(new - 1), new)).max())
        assert R.offset_range_growth(old, new, log_spaced) == pytest.approx(top_new / top_old - 1, rel=1e-12)
    assert R.offset_range_growth(8, 16, log_spaced=False) == pytest.approx(8 / 7)
    assert R.offset_range_growth(8, 16) == pytest.approx(math.log2(1 + 8 * 15 / 7) / math.log2(9) - 1)
    if new > old:
        assert R.offset_range_growth(old, new) < R.offset_range_growth(old, new, log_spaced=False)


@pytest.mark.parametrize("call, exc, pattern", [
    (lambda: R.patch_grid(225, 4), ValueError, "multiple"),
    (lambda: R.patch_grid(224, 0), ValueError, "patch_size"),
    (lambda: R.offset_range_growth(1, 8), ValueError, "old_window"),
    (lambda: R.offset_range_growth(8, 7.5), TypeError, "new_window"),
    (lambda: R.log_spaced_offset(3.0, 1), ValueError, "pretrained_window"),
    (lambda: R.swin_pair(7, (7, 0), (0, 0)), ValueError, "query"),
    (lambda: R.swin_pair(7, (0, 0), (0, -1)), ValueError, "key"),
    (lambda: R.swin_index(0), ValueError, "window"),
    (lambda: R.swin_index(64), ValueError, "window"),
    (lambda: R.swin_table_entries(2.5), TypeError, "window"),
    (lambda: R.per_distance_params(0), ValueError, "T"),
    (lambda: R.relative_bias_params(32, 0), ValueError, "n_heads"),
])
def test_relative_analysis_rejects_bad_input(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


def test_t5_length_summary_prints_the_records_comparisons():
    from mlbook.experiments.common import pm
    from mlbook.experiments.exp_t5_length import comparisons
    from mlbook.experiments.registry import load_result

    record = load_result("t5_length", "full")
    text = R.t5_length_summary()
    if record is None:
        assert text.startswith("No saved full-budget record")
        return
    c = comparisons(record)
    for key in ("t5_long_vs_train_em", "tail_vs_t5_em", "tail_vs_t5_tok", "tail_long_vs_train_em"):
        assert f"{c[key]['measure']} {pm(c[key], 2)} ({c[key]['verdict']})" in text
    assert "cannot run at 16" in text
    with pytest.raises(ValueError, match="budget"):
        R.t5_length_summary("huge")
