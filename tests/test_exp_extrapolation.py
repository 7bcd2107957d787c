"""Experiment 2 (extrapolation) at a tiny config: every scheme is scored on the same windows, the
verdict follows the paired intervals, and the figures of mlbook.viz.exp_extrapolation build from the
quick record and from the committed full records (of experiments 2 and 3)."""

from __future__ import annotations

import math

import pytest
import torch

from experiment_fixtures import CPU, TINY_MODEL, TINY_TRAIN, exp_config, exp_record
from mlbook.experiments import exp_extrapolation as EX
from mlbook.experiments import registry
from mlbook.experiments.common import build_gpt
from mlbook.viz import exp_extrapolation as V
from mlbook.viz import grid_slider


@pytest.fixture(scope="module")
def ex_record() -> dict:
    # t5_fit needs max_distance = train_len past T5's exact range (16 for 32 causal buckets): not at L = 8
    schemes = [s for s in registry.REGISTRY["extrapolation"].configs["full"]["schemes"] if s != "t5_fit"]
    cfg = exp_config("extrapolation", "full", seeds=[0, 1], model=TINY_MODEL, train_len=8, eval_windows=3, train=TINY_TRAIN,
               schemes=schemes)
    return exp_record("extrapolation", cfg, EX.run(cfg, CPU, False))


# -- experiment 2 -----------------------------------------------------------------------------


def test_extrapolation_scores_every_scheme_on_the_same_windows_and_learned_refuses(ex_record) -> None:
    r = ex_record["results"]
    assert r["eval_lengths"] == [8, 12, 16, 32]
    assert list(r["schemes"]) == list(ex_record["config"]["schemes"]) + ["reference"]
    for name, e in r["schemes"].items():
        for s in e["per_seed"]:
            if name == "learned":
                assert len(s["curve"]) == 8 and "cannot extrapolate" in s["reason"]
            else:
                assert len(s["curve"]) == 32 and s["reason"] is None
    assert r["schemes"]["reference"]["train_len"] == 32
    assert r["schemes"]["reference"]["train_steps"] == 4 and r["schemes"]["reference"]["train_batch"] == 1  # B L / 4L
    m = EX.scheme_metrics(ex_record, "rope")
    curve = torch.tensor(r["schemes"]["rope"]["per_seed"][0]["curve"], dtype=torch.float64)
    assert m["mean"]["16"][0] == pytest.approx(curve[:16].mean().item())  # a length is a prefix of the window
    assert m["tail"]["16"][0] == pytest.approx(curve[8:16].mean().item())
    assert m["head"]["16"][0] == m["head"]["32"][0]  # the same text before L at every length
    assert m["tail_minus_head"]["32"][0] == pytest.approx(m["tail"]["32"][0] - m["head"]["32"][0])
    assert EX.scheme_metrics(ex_record, "learned")["tail"]["32"] == [None, None]
    table = EX.format_table(ex_record)
    assert "n/a (learned)" in table and "±" in table
    # the 1-head RoPE has the same parameter count as the 4-head one
    assert r["schemes"]["rope_1head"]["params"] == r["schemes"]["rope"]["params"]
    comp = EX.comparisons(ex_record)
    assert set(comp) == set(r["schemes"]) - {"alibi"} and comp["learned"]["n"] == 0
    assert EX.headline(ex_record).count("\n- ") == 3  # verdict, per scheme, the reference, learned


def test_extrapolation_t5_fit_sets_max_distance_to_the_training_length(monkeypatch) -> None:
    seen = []
    real = EX.build_gpt
    monkeypatch.setattr(EX, "build_gpt", lambda *a, **k: seen.append(k) or real(*a, **k))
    cfg = exp_config("extrapolation", "full", seeds=[0], model=TINY_MODEL, train_len=20, eval_windows=1, reference=False,
               train={**TINY_TRAIN, "steps": 1}, schemes=["t5", "t5_fit", "rope_1head"])
    EX.run(cfg, CPU, False)
    assert seen[0] == {} and seen[1] == {"t5_max_distance": 20}


def test_extrapolation_verdict_names_each_scheme_by_its_paired_interval(ex_record) -> None:
    # the verdict comes from the registered claims: a scheme is named among those that lose more past L exactly
    # when its claim against the model trained at 4L holds after Holm; ALiBi is then given length by length
    line = EX.verdict_line(ex_record)
    body = line.split("about this budget. ")[-1]  # after the count 4-gram sentence, when it comes first
    rows = EX.decided_claims(ex_record)
    lose_part = body.split("lose more")[0] if "lose more" in body else ""
    for r in rows:
        c = r["claim"]
        if c["b"] == "reference" and c["expect"] == "higher":
            assert (EX.SHORT[c["a"]] in lose_part) == r["survives"], (c["id"], line)
    for r in rows:
        if r["claim"]["id"].startswith("alibi_flat_"):
            assert f"at {r['claim']['factor']:g}L ({EX.pm(r['diff'], 3)})" in body
    assert body.startswith("Trained at L = 8") and EX.headline(ex_record).startswith("- " + line[:40])
    table = EX.claims_markdown(ex_record)
    assert table.count("\n") >= 3 and "[" in table  # a row per claim, each with its interval


def test_sinusoidal_is_the_original_transformer_s_with_sqrt_d_scale() -> None:
    assert EX.SCHEMES["sinusoidal"] == {"positional": "sinusoidal", "scale_embeddings": True}
    model = build_gpt("sinusoidal", TINY_MODEL, 8, 0, scale_embeddings=True)
    assert model.emb_scale == pytest.approx(math.sqrt(16))


def test_extrapolation_figures_have_one_series_per_scheme_and_the_metric_knob_changes_them(ex_record) -> None:
    for metric in ("tail", "mean", "tail_minus_head"):
        fig = V.fig_extrapolation(ex_record, metric)
        assert [t.name for t in fig.data] == [e["label"] for e in ex_record["results"]["schemes"].values()]
        assert fig.layout.xaxis.title.text == V.LENGTH_AXIS
    slider = grid_slider(lambda metric: V.fig_extrapolation(ex_record, metric), "metric", ["tail", "tail_minus_head"])
    assert slider.frames[0].data[0].y != slider.frames[1].data[0].y
    with pytest.raises(ValueError, match="metric"):
        V.fig_extrapolation(ex_record, "median")
    fig = V.fig_extrapolation_curves(ex_record, 4)
    assert len(fig.data) == 2 * len(ex_record["results"]["schemes"])  # a band and a line per scheme
    with pytest.raises(ValueError, match="bin_width"):
        V.fig_extrapolation_curves(ex_record, 0)


def test_every_experiment_figure_draws_from_the_committed_full_records() -> None:
    """The pages draw the committed 5-seed records: every figure builder must take them as they are
    (a record with more schemes than colours once raised IndexError)."""
    from mlbook.viz import exp_context_extension as VC

    for name, builders in {
        "extrapolation": [lambda r: V.fig_extrapolation(r, m) for m in ("tail", "tail_minus_head", "mean")]
        + [lambda r: V.fig_extrapolation_curves(r, w) for w in (4, 8, 16)],
        "context_extension": [lambda r: VC.fig_context_extension(r, m) for m in ("mean", "tail", "tail_minus_head")],
    }.items():
        record = registry.load_result(name, "full")
        assert record is not None, name
        for build in builders:
            fig = build(record)
            assert len(fig.data) >= len(record["results"].get("schemes", record["results"].get("variants", {})))
