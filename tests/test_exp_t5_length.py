"""Experiment 4 (T5 length) at a tiny config: the reverse task and bucket table, the record keeps every
seed on the same test sequences, the verdict follows the paired interval, and the figure of
mlbook.viz.exp_t5_length builds from the record."""

from __future__ import annotations

import pytest
import torch

from experiment_fixtures import CPU, TINY_TRAIN, exp_config, exp_record
from mlbook.experiments import exp_t5_length
from mlbook.viz import grid_slider
from mlbook.viz import exp_t5_length as V


@pytest.fixture(scope="module")
def t5_record() -> dict:
    cfg = exp_config("t5_length", "full", seeds=[0, 1], n_eval=8, train={**TINY_TRAIN, "steps": 3},
               model={"d_model": 16, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1})
    return exp_record("t5_length", cfg, exp_t5_length.run(cfg, CPU, False))


# -- t5_length -------------------------------------------------------------------------------


_T5 = {**exp_t5_length._QUICK, "model": {"d_model": 16, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1},
       "n_eval": 4}


def test_learned_positions_report_that_they_cannot_run_at_16_instead_of_crashing() -> None:
    gen = torch.Generator().manual_seed(0)
    short = exp_t5_length.evaluate(exp_t5_length.build_model("learned", _T5), 16, _T5, gen, CPU)
    assert short["runs"] is False and "cannot extrapolate" in short["reason"]
    assert exp_t5_length.evaluate(exp_t5_length.build_model("learned", _T5), 8, _T5, gen, CPU)["runs"] is True
    wide = exp_t5_length.evaluate(exp_t5_length.build_model("learned16", _T5), 16, _T5, gen, CPU)
    assert wide["runs"] is True and len(wide["per_position"]) == 16
    assert wide["exact_match"] <= wide["token_accuracy"] <= 1.0


def test_reverse_task_and_bucket_table() -> None:
    src, tgt = exp_t5_length.reverse_batch(5, 8, 16, torch.Generator().manual_seed(0))
    assert torch.equal(tgt, src.flip(1)) and int(src.min()) >= 1 and int(src.max()) <= 16  # 0 is BOS
    default = exp_t5_length.bucket_table(32, 128)
    assert default["decoder"]["past"]["bucket"][:16] == list(range(16))  # causal: 16 exact buckets
    assert default["decoder"]["past"]["trained"] == [True] * 8 + [False] * 8  # offsets 8..15 never trained
    assert not any(default["encoder"]["past"]["trained"][8:])
    tail = exp_t5_length.bucket_table(8, 8)
    for rows in (tail["encoder"]["past"], tail["encoder"]["future"], tail["decoder"]["past"]):
        assert all(rows["trained"])  # every offset up to 15 shares a bucket trained at length 8


def test_t5_record_keeps_every_seed_on_the_same_test_sequences(t5_record) -> None:
    r = t5_record["results"]
    for v, e in r["variants"].items():
        assert [s["seed"] for s in e["per_seed"]] == [0, 1]
    assert exp_t5_length.metric(t5_record, "learned", 16) == [None, None]
    em = exp_t5_length.metric(t5_record, "t5", 8)
    assert len(em) == 2 and all(0.0 <= v <= 1.0 for v in em)
    assert exp_t5_length.per_position(t5_record, "learned", 16) is None
    assert len(exp_t5_length.per_position(t5_record, "t5", 16)["mean"]) == 16
    assert "cannot run" in exp_t5_length.format_table(t5_record)
    text = exp_t5_length.headline(t5_record)
    assert " ".join(text.split()).startswith("- " + exp_t5_length.verdict_line(t5_record))  # the same sentence, wrapped
    assert text.count("\n- ") == 1 + len(exp_t5_length.comparisons(t5_record))  # the means, then one per comparison
    with pytest.raises(ValueError, match="exact_match"):
        exp_t5_length.metric(t5_record, "t5", 8, "bleu")


def _t5_synthetic(tail_minus_t5_em: list[float], tail_minus_t5_tok: list[float]) -> dict:
    """A t5_length record with chosen per-seed differences t5_tail - t5 at 16 (T5 defaults fixed)."""
    def ev(em: float, tok: float) -> dict:
        return {"runs": True, "exact_match": em, "token_accuracy": tok, "per_position": [tok] * 16}

    seeds = list(range(len(tail_minus_t5_em)))
    t5 = [{"seed": s, "eval": {"8": ev(0.95, 0.99), "12": ev(0.2, 0.4), "16": ev(0.05, 0.2 + 0.01 * s)}} for s in seeds]
    tail = [{"seed": s, "eval": {"8": ev(0.99, 0.99), "12": ev(0.8, 0.9),
                                 "16": ev(0.05 + e, 0.2 + 0.01 * s + t)}} for s, e, t in
            zip(seeds, tail_minus_t5_em, tail_minus_t5_tok)]
    l16 = [{"seed": s, "eval": {"8": ev(1.0, 1.0), "12": ev(0.0, 0.15), "16": ev(0.0, 0.1 + 0.02 * (s % 2))}}
           for s in seeds]
    no = {"runs": False, "reason": "cannot extrapolate"}
    learned = [{"seed": s, "eval": {"8": ev(1.0, 1.0), "12": no, "16": no}} for s in seeds]
    results = {"seeds": seeds, "n_symbols": 16, "chance": 1 / 16, "train_len": 8, "eval_lens": [8, 12, 16],
               "n_eval": 4, "variants": {"t5": {"per_seed": t5}, "t5_tail": {"per_seed": tail},
                                         "learned": {"per_seed": learned}, "learned16": {"per_seed": l16}}}
    return {"name": "t5_length", "budget": "full", "config": {}, "results": results}


def test_t5_verdict_line_follows_the_paired_interval_not_the_means() -> None:
    # token accuracy higher on every seed; exact match differences of both signs with a positive
    # mean: the interval spans 0, so "indistinguishable" although the mean favours t5_tail
    rec = _t5_synthetic([0.6, -0.3, 0.7, -0.2, 0.5], [0.50, 0.55, 0.60, 0.52, 0.58])
    c = exp_t5_length.comparisons(rec)
    assert c["tail_vs_t5_em"]["mean"] > 0 and c["tail_vs_t5_em"]["verdict"] == "indistinguishable"
    assert c["tail_vs_t5_tok"]["ci95"][0] > 0 and c["tail_vs_t5_tok"]["verdict"] == "higher"
    line = exp_t5_length.verdict_line(rec)
    assert "a higher token accuracy than the defaults" in line
    assert "an exact match that we cannot tell from the defaults at this scale" in line
    assert "a lower exact match than at 8" in line  # 0.05 against 0.95 on every seed
    assert "(5 seeds, paired 95% intervals)" in line and line.count(".") == 1 + line.count("0.")
    # the same means from consistent differences: now an ordering
    rec = _t5_synthetic([0.26, 0.25, 0.27, 0.26, 0.26], [0.50, 0.55, 0.60, 0.52, 0.58])
    assert "a higher exact match than the defaults" in exp_t5_length.verdict_line(rec)
    table = exp_t5_length.comparison_table(rec)
    assert table.count("\n") == len(exp_t5_length.comparisons(rec)) + 1 and "[" in table.splitlines()[2]
    claims = exp_t5_length.claims_table(rec)
    assert "**agrees** once that condition holds" in claims and "cannot run at 16 on any seed" in claims
    one = _t5_synthetic([0.3], [0.5])
    assert "supports no verdict" in exp_t5_length.verdict_line(one)


def test_t5_figure_has_a_band_and_a_line_per_variant_and_the_length_knob_changes_it(t5_record) -> None:
    fig = V.fig_t5_per_position(t5_record, 16)
    assert len(fig.data) == 2 * len(t5_record["results"]["variants"])
    slider = grid_slider(lambda length: V.fig_t5_per_position(t5_record, length), "length", [12, 16])
    assert len(slider.frames[0].data[1].x) != len(slider.frames[1].data[1].x)
    # every length keeps the same legend (a variant that cannot run is named in the subtitle instead)
    assert len({tuple(t.name for t in frame.data) for frame in slider.frames}) == 1
    for frame in slider.frames:
        length = int(frame.name)
        idle = [v for v in t5_record["results"]["variants"] if exp_t5_length.per_position(t5_record, v, length) is None]
        assert all(v in frame.layout.title.text for v in idle) and ("cannot run" in frame.layout.title.text) == bool(idle)
    with pytest.raises(ValueError, match="length must be one of"):
        V.fig_t5_per_position(t5_record, 32)


def test_position_blind_baselines_beat_chance_without_reading_position() -> None:
    """Source mode and a random permutation read the source but no position; both beat 1/16 on the record's
    own test sequences, and the permutation sits near 1/n + (1 - 1/n)/16."""
    import json
    from pathlib import Path
    from mlbook.experiments.exp_t5_length import position_blind_baselines
    rec = json.loads((Path(__file__).resolve().parents[1] / "src/mlbook/results/full/t5_length.json").read_text())
    out = position_blind_baselines(rec)
    for n in rec["config"]["eval_lens"]:
        perm, mode = out["random permutation"][str(n)], out["source mode"][str(n)]
        assert abs(perm["token_accuracy"] - (1 / n + (1 - 1 / n) / 16)) < 0.02
        assert mode["token_accuracy"] > perm["token_accuracy"] > 1 / 16
        assert mode["exact_match"] == 0.0
