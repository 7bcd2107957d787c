"""Tests for mlbook.analysis.sinks: the softmax example, cache contents per scheme, and the
rotary-position check on a real model.

Oracles: numpy's softmax for the hand-built row, and an independent pure-Python model of a
StreamingLLM cache (first n_sink tokens plus the last `window`) for the library's SinkCache.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mlbook.analysis import sinks as S
from mlbook.transformer.models import GPT, GPTConfig


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


# ---------------------------------------------------------------------------
# The hand-built attention row
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("relevance,sink", [(0.0, 3.0), (4.0, 3.0), (2.5, -1.0)])
def test_softmax_parking_rows_are_softmaxes_that_sum_to_one(relevance, sink):
    ex = S.softmax_parking(relevance, sink)
    np.testing.assert_allclose(ex.weights, softmax(ex.scores), rtol=1e-12)
    assert ex.weights_evicted[0] == 0.0
    np.testing.assert_allclose(ex.weights_evicted[1:], softmax(ex.scores[1:]), rtol=1e-12)
    assert ex.weights.sum() == pytest.approx(1.0) and ex.weights_evicted.sum() == pytest.approx(1.0)
    assert ex.scores[0] == sink
    np.testing.assert_allclose(ex.output, ex.weights @ ex.values)


def test_sink_makes_an_idle_head_a_near_no_op():
    ex = S.softmax_parking(0.0, 3.0)
    assert ex.weights[0] > 0.5  # nothing relevant: most mass parked on the sink
    assert np.linalg.norm(ex.output) < 0.5 * np.linalg.norm(ex.output_evicted)
    assert "row sums: 1.000 and 1.000" in repr(ex)


def test_relevance_moves_mass_from_the_sink_to_the_relevant_token():
    cat = S.PARKING_TOKENS.index("cat")
    rows = [S.softmax_parking(r, 3.0) for r in (0.0, 2.0, 4.0, 6.0)]
    assert all(a.weights[0] > b.weights[0] for a, b in zip(rows, rows[1:]))
    assert all(a.weights[cat] < b.weights[cat] for a, b in zip(rows, rows[1:]))


def test_softmax_parking_rejects_non_numbers():
    with pytest.raises(ValueError, match="relevance"):
        S.softmax_parking(float("nan"))
    with pytest.raises(ValueError, match="sink_score"):
        S.softmax_parking(0.0, "3")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Cache contents: against an independent model of each scheme
# ---------------------------------------------------------------------------


def oracle_kept(scheme: str, t: int, n_sink: int, window: int) -> list[int]:
    if scheme == "full":
        return list(range(t))
    if scheme == "window":
        return list(range(max(0, t - n_sink - window), t))
    sinks = list(range(min(n_sink, t)))
    return sinks + list(range(max(len(sinks), t - window), t))


@pytest.mark.parametrize("scheme", S.SCHEMES)
@pytest.mark.parametrize("t,n_sink,window", [(1, 4, 8), (3, 4, 8), (12, 4, 8), (13, 4, 8), (40, 4, 12),
                                             (100, 0, 10), (257, 1, 63), (50, 6, 1)])
def test_cache_contents_match_an_independent_streamingllm_model(scheme, t, n_sink, window):
    v = S.cache_contents(scheme, t, n_sink, window)
    kept = oracle_kept(scheme, t, n_sink, window)
    assert list(v.kept) == kept
    want_given = list(range(len(kept))) if scheme == "sink_slot" else kept
    assert list(v.given) == want_given
    assert sorted(v.kept + v.evicted) == list(range(t))
    assert v.max_offset == want_given[-1] - min(want_given)
    assert v.largest_angle(0.5) == pytest.approx(0.5 * v.max_offset)


@pytest.mark.parametrize("t", [1, 15, 16, 17, 100, 1000])
def test_slot_positions_never_exceed_the_cache(t):
    """However long the stream, the slot-positioned sink cache needs offsets <= n_sink + window - 1."""
    v = S.cache_contents("sink_slot", t, 4, 12)
    assert v.max_offset <= 15 and v.max_position <= 15
    assert S.cache_contents("sink_text", t, 4, 12).max_offset == t - 1  # text positions: the whole stream
    assert S.cache_contents("full", t, 4, 12).max_offset == t - 1


def test_cache_report_flags_out_of_range_schemes():
    rep = S.cache_report(40, 4, 12)
    assert rep.trained_len == 16
    verdicts = {v.scheme: rep.in_range(v) for v in rep.views}
    assert verdicts == {"full": False, "window": True, "sink_text": False, "sink_slot": True}
    text = repr(rep)
    assert "sink cache, slot positions" in text and "NO" in text
    assert S.cache_report(40, 4, 12, trained_len=64).in_range(rep.views[0])


def test_cache_contents_rejects_bad_input():
    with pytest.raises(ValueError, match="unknown scheme 'lru'"):
        S.cache_contents("lru", 10)
    with pytest.raises(ValueError, match="t must be >= 1"):
        S.cache_contents("full", 0)
    with pytest.raises(ValueError, match="window must be >= 1"):
        S.cache_contents("sink_slot", 10, 4, 0)
    with pytest.raises(ValueError, match="trained_len"):
        S.cache_report(10, 0, 1)


# ---------------------------------------------------------------------------
# The model check: what the rotary embedding is really asked for
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_gpt():
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=32, d_model=16, n_heads=2, n_layers=2, max_len=8)).eval()


def test_rotary_positions_used_sink_cache_stays_in_range(tiny_gpt):
    stream = torch.randint(0, 32, (1, 40))
    assert S.rotary_positions_used(tiny_gpt, stream, tiny_gpt.new_caches("sink", n_sink=2, window=6)) == 7
    assert S.rotary_positions_used(tiny_gpt, stream, tiny_gpt.new_caches("sink", n_sink=0, window=8)) == 7
    assert S.rotary_positions_used(tiny_gpt, stream, tiny_gpt.new_caches("kv", capacity=40)) == 39


def test_rotary_positions_used_rejects_models_without_rope():
    model = GPT(GPTConfig(vocab_size=8, d_model=8, n_heads=2, n_layers=1, max_len=8, positional="alibi"))
    with pytest.raises(ValueError, match="rotary"):
        S.rotary_positions_used(model, torch.zeros(1, 3, dtype=torch.long), model.new_caches("kv"))
