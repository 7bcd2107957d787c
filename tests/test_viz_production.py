"""Tests for mlbook.viz.production (page 12): the KV-cache calculator and the cache of each model
family, with numbers from mlbook.analysis.production; the live forms carry every knob."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

from mlbook.analysis.production import kv_cache_bytes
from mlbook.data.model_families import MODEL_FAMILIES, family
from mlbook.viz import production as VP


def _frames_differ(fig: go.Figure) -> bool:
    ys = [tuple(tuple(t.y) if t.y is not None else tuple(t.x) for t in f.data) for f in fig.frames]
    return len(set(ys)) == len(ys)


def _controls(widget) -> dict[str, object]:
    return {c.description: c for c in widget.children[0].children}


# ---------------------------------------------------------------------------
# KV-cache calculator and families
# ---------------------------------------------------------------------------


def test_kv_cache_figure_numbers_and_layout_slider() -> None:
    fig = VP.fig_kv_cache()
    assert [f.name for f in fig.frames] == list(VP.KV_LAYOUTS)
    # MHA 4-bit and GQA-8 16-bit are the same size (16 GiB): their frames differ only in the legend
    drawn = [(f.data[1].name, tuple(f.data[1].y)) for f in fig.frames]
    assert len(set(drawn)) == len(drawn) and len({y for _, y in drawn}) == len(drawn) - 1
    assert "512 KiB per token" in fig.layout.title.text and "64 GiB for 131,072 tokens" in fig.layout.title.text
    assert fig.layout.shapes[0].y0 == pytest.approx(81_559 / 1024)  # an H100 80GB, 79.65 GiB
    assert fig.layout.annotations[0].text == "one 80 GB accelerator (H100: 79.65 GiB, A100: 80 GiB)"
    marker = fig.data[2]
    assert marker.x[0] == 131072 and marker.y[0] == pytest.approx(kv_cache_bytes(32, 32, 128, 2.0, 131072) / 2**30)
    gqa = VP.fig_kv_cache("GQA-8, 8-bit", layouts=None)
    assert gqa.data[2].y[0] == pytest.approx(64 / 8)  # a quarter of the heads, half the bytes
    assert gqa.data[1].name == "this cache: GQA-8, 8-bit"
    with pytest.raises(ValueError, match="unknown layout 'GQA-3, 16-bit'"):
        VP.fig_kv_cache("GQA-3, 16-bit", layouts=None)
    with pytest.raises(ValueError, match="must be one of the slider's layouts"):
        VP.fig_kv_cache("MQA, 4-bit", layouts=("MHA, 16-bit",))


def test_live_kv_cache_has_all_six_knobs_and_redraws() -> None:
    w = VP.live_kv_cache()
    c = _controls(w)
    assert set(c) == {"layers", "KV heads", "d_head", "bytes per value", "context (tokens)", "batch"}
    fig = VP._kv_cache(8, 2, 64, 1.0, 4096, 3)
    assert fig.data[2].y[0] == pytest.approx(kv_cache_bytes(8, 2, 64, 1.0, 4096, 3) / 2**30)
    assert fig.data[1].name == "this cache: 2 KV heads, 8-bit"


def test_family_kv_figure() -> None:
    fig = VP.fig_family_kv(131072, contexts=(4096, 131072))
    assert [f.name for f in fig.frames] == ["4096", "131072"]
    assert _frames_differ(fig)
    bar = fig.data[0]
    labels = list(bar.y)
    assert len(labels) == len(VP.CACHE_FAMILIES) and not any(
        n.startswith(("BERT", "ModernBERT", "Swin", "T5")) for n in labels)
    llama = labels.index("LLaMA 1 (LLaMA-7B)")
    assert bar.x[llama] == pytest.approx(64.0)
    mistral = family("Mistral")  # rolling cache: at most the 4,096-token window
    assert VP.family_cache_bytes(mistral, 131072) == kv_cache_bytes(32, 8, 128, 2.0, 4096)
    assert VP.family_cache_bytes(family("Llama 3"), 131072) == kv_cache_bytes(32, 8, 128, 2.0, 131072)
    assert set(_controls(VP.live_family_kv())) == {"context (tokens)", "bytes per value"}
    assert len(VP.CACHE_FAMILIES) == len(MODEL_FAMILIES) - 4  # BERT, ModernBERT, T5, Swin
    # windowed layers and latent attention, as mlbook.analysis.production sizes them
    gemma3 = labels.index("Gemma 3 (gemma-3-12b-pt)")
    assert bar.x[gemma3] == pytest.approx(2 * 8 * 256 * 2 * (8 * 131072 + 40 * 1024) / 2**30)
    assert "40 of 48 layers hold at most 1,024 tokens" in bar.customdata[gemma3][2]
    # the dotted line is an H100 80GB's 81,559 MiB (79.65 GiB), the smaller of the two "80 GB" devices
    assert fig.layout.shapes[0].x0 == pytest.approx(81_559 / 1024) and "79.65 GiB" in fig.layout.annotations[0].text
    v3 = labels.index("DeepSeek-V3 (DeepSeek-V3)")
    assert bar.x[v3] == pytest.approx(61 * (512 + 64) * 2 * 131072 / 2**30) and bar.customdata[v3][1] == "MLA"


@pytest.mark.parametrize("url, label", [
    ("https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json", "config"),
    ("https://github.com/ai-dynamo/aiconfigurator/blob/1b7c/src/Qwen--Qwen3-Next-80B-A3B-Thinking_config.json", "config"),
    ("https://huggingface.co/Qwen/Qwen3-Next-80B-A3B-Thinking#processing-ultra-long-texts", "model card"),
    ("https://huggingface.co/Qwen/Qwen-7B", "model card"),
    ("https://huggingface.co/blog/smollm3", "post"),
    ("https://huggingface.co/docs/transformers/model_doc/llama", "docs"),
    ("https://github.com/huggingface/transformers/blob/v5.15.0/src/transformers/models/qwen3_5/x.py", "code"),
    ("https://arxiv.org/abs/2505.09388", "paper"),
])
def test_a_source_link_is_labelled_by_what_it_opens(url: str, label: str) -> None:
    """The family table's link labels: a model page is a card, not a config; a blog is a post, not a paper."""
    import dataclasses
    import html

    row = dataclasses.replace(family("Qwen3"), urls=(url,))
    assert f'<a href="{html.escape(url)}">{label}</a>' in VP.family_table_html([row])
