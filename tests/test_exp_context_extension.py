"""Experiment 3 (context extension) at a tiny config: the variants copy the trained weights and change
only RoPE, every variant is reported before and after fine-tuning on the same windows, the verdict
follows the paired intervals, and the figures of mlbook.viz.exp_context_extension build from the record."""

from __future__ import annotations

import math

import pytest
import torch

from experiment_fixtures import CPU, TINY_MODEL, TINY_TRAIN, exp_config, exp_record
from mlbook.experiments import exp_context_extension as CE
from mlbook.experiments.common import build_gpt, copy_with_rope, train_lm
from mlbook.experiments.data import TOKENIZER, corpus_tokens, split_tokens
from mlbook.experiments.train import TrainConfig
from mlbook.viz import exp_context_extension as V
from mlbook.viz import grid_slider


@pytest.fixture(scope="module")
def ce_record() -> dict:
    cfg = exp_config("context_extension", "full", seeds=[0, 1], model={"d_model": 24, "n_heads": 2, "n_layers": 1},
               train_len=16, eval_lengths=[16, 32, 64], finetune_len=64, eval_windows=2, train=TINY_TRAIN,
               finetune={"steps": 2, "batch_size": 2, "lr": 1e-3, "warmup_steps": 1})
    return exp_record("context_extension", cfg, CE.run(cfg, CPU, False))


# -- experiment 3 -----------------------------------------------------------------------------


def test_copy_with_rope_copies_weights_and_changes_only_rope() -> None:
    base = build_gpt("rope", {"d_model": 24, "n_heads": 2, "n_layers": 1}, 16, 0)
    x = torch.randint(0, TOKENIZER.vocab_size, (2, 16))
    torch.testing.assert_close(CE.variant_model(base, "none")(x), base(x))
    yarn = CE.variant_model(base, "yarn_tuned")
    assert yarn.config.rope == {"scaling": "yarn", "factor": 4.0, "beta_fast": 4.0, "beta_slow": 1.0,
                                "original_max_len": 16}
    assert not torch.allclose(yarn(x), base(x))
    torch.testing.assert_close(CE.variant_model(base, "dynamic")(x), base(x))  # plain RoPE up to L
    with pytest.raises(ValueError, match="unknown variant"):
        CE.variant_model(base, "ntk-by-parts")
    with pytest.raises(ValueError, match="needs a RoPE model"):
        copy_with_rope(build_gpt("alibi", TINY_MODEL, 8, 0), {})


def test_dynamic_ntk_fine_tuned_at_4L_is_the_ntk_fine_tune() -> None:
    # the record reuses the NTK fine-tune for dynamic NTK; check that training it separately gives the same weights
    train_part, _ = split_tokens(corpus_tokens())
    base = build_gpt("rope", {"d_model": 24, "n_heads": 2, "n_layers": 1}, 16, 0)
    tuned = {}
    for name in ("ntk", "dynamic"):
        model = CE.variant_model(base, name)
        train_lm(model, train_part, 64, TrainConfig(steps=3, batch_size=2, warmup_steps=1, seed=5), CPU, name, False)
        tuned[name] = model.state_dict()
    for key in tuned["ntk"]:
        torch.testing.assert_close(tuned["dynamic"][key], tuned["ntk"][key], rtol=0, atol=0)


def test_context_extension_reports_every_variant_before_and_after_on_the_same_windows(ce_record) -> None:
    r = ce_record["results"]
    assert list(r["variants"]) == list(CE.VARIANTS)
    for name, v in r["variants"].items():
        for s in v["per_seed"]:
            for phase in ("before", "after"):
                assert len(s[phase]["mean"]) == 3 and all(math.isfinite(m) for m in s[phase]["mean"])
                assert s[phase]["tail"][0] is None and all(math.isfinite(t) for t in s[phase]["tail"][1:])
            assert s["finetune_shared_with"] == ("ntk" if name == "dynamic" else None)
    none0 = r["variants"]["none"]["per_seed"][0]["before"]
    dyn0 = r["variants"]["dynamic"]["per_seed"][0]["before"]
    assert none0["mean"][0] == pytest.approx(dyn0["mean"][0])  # identical below L
    assert none0["head"][0] == pytest.approx(none0["mean"][0])  # at L the head is the whole window
    assert len(r["reference"]["per_seed"]) == 2 and r["reference"]["train_len"] == 64
    assert r["bands"]["yarn_tuned"]["beta_fast"] == 4.0
    for metric in ("mean", "tail", "tail_minus_head"):
        table = CE.format_table(ce_record, metric)
        assert all(label in table for label in (v["label"] for v in r["variants"].values()))
    assert "keep" in CE.band_table(ce_record)
    assert CE.headline(ce_record).count("\n- ") == 3  # verdict, after, paired against the best, before
    p = CE.paired_at(ce_record, "linear", "none", "before", "mean", 0)
    assert p["n"] == 2 and p["verdict"] in ("lower", "higher", "indistinguishable")


def test_context_extension_figures_and_the_yarn_band_knob(ce_record) -> None:
    fig = V.fig_context_extension(ce_record, "mean")
    n_var = len(ce_record["results"]["variants"])
    assert len(fig.data) == 2 * n_var + 1  # before and after per variant, and the model trained at the target
    slider = grid_slider(lambda metric: V.fig_context_extension(ce_record, metric), "metric", ["tail", "tail_minus_head"])
    assert slider.frames[0].data[0].y != slider.frames[1].data[0].y
    with pytest.raises(ValueError, match="metric"):
        V.fig_context_extension(ce_record, "median")
    a, b = V.fig_yarn_bands(32.0, 12, 128), V.fig_yarn_bands(4.0, 12, 128)
    assert list(a.data[1].y) != list(b.data[1].y) and list(a.data[0].y) == list(b.data[0].y)
    assert list(b.data[1].y) == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]  # keep 0-1, interpolate 2-5
    with pytest.raises(ValueError, match="beta_fast"):
        V.fig_yarn_bands(0.5, 12, 128)


def test_context_extension_verdict_follows_the_paired_intervals(ce_record) -> None:
    line = CE.verdict_line(ce_record)
    best, tied, diffs = CE._ranked_after(ce_record)
    # after the count 4-gram sentence (which comes first when no setting beats the 4-gram in range)
    assert line.split("about this budget. ")[-1].startswith(
        f"After 2 fine-tuning steps at 64, the way position interpolation is used, {CE.SHORT[best]}")
    means = {n: CE.summary(ce_record, "after")[n][-1]["mean"] for n in ce_record["results"]["variants"] if n != "dynamic"}
    assert means[best] == min(means.values())
    for name, d in diffs.items():  # a variant is called tied with the best exactly when its interval spans 0
        assert (name in tied) == (d["verdict"] == "indistinguishable")
    assert CE.headline(ce_record).startswith("- " + line[:40])
    table = CE.claims_markdown(ce_record)
    assert table.splitlines()[0].startswith("| claim |") and "[" in table
