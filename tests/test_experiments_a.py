"""Experiments 1-3 (permutation, extrapolation, context extension) at a tiny config: each runs,
reports every model and length it promises, and the properties the notebooks rely on hold."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from mlbook.experiments import registry
from mlbook.experiments.data import TOKENIZER
from mlbook.experiments import exp_context_extension as CE
from mlbook.experiments import exp_extrapolation as EX
from mlbook.experiments import exp_permutation as PE
from mlbook.transformer.models import POSITIONAL_SCHEMES

CPU = torch.device("cpu")
TINY_MODEL = {"d_model": 32, "n_heads": 2, "n_layers": 1}


def _tiny(name: str, **changes: object) -> dict:
    cfg = copy.deepcopy(registry.REGISTRY[name].configs["quick"])
    cfg.update(changes)
    return cfg


def _record(name: str, cfg: dict, results: dict) -> dict:
    return {"name": name, "budget": "quick", "config": cfg, "results": results}


@pytest.fixture(scope="module", autouse=True)
def _registered() -> None:
    registry._get("permutation")  # imports the catalog


def test_the_three_experiments_are_registered_with_both_budgets() -> None:
    for name in ("permutation", "extrapolation", "context_extension"):
        exp = registry.REGISTRY[name]
        assert set(exp.configs) == set(registry.BUDGETS)
        assert exp.configs["quick"]["seed"] == exp.configs["full"]["seed"]


def test_permutation_encoder_is_exactly_equivariant_and_the_gpt_is_not() -> None:
    cfg = _tiny("permutation", model=TINY_MODEL, train_len=16, n_sequences=4, val_batches=1,
                train={"steps": 10, "batch_size": 2, "lr": 3e-3, "warmup_steps": 2})
    out = PE.run(cfg, CPU, False)
    rows = out["rows"]
    assert set(rows) == set(PE.ROWS)
    assert rows["encoder"]["max_abs"] < 1e-12  # float64 round-off only
    assert rows["encoder_random_perm"]["max_abs"] < 1e-12
    assert rows["encoder_sinusoidal"]["max_abs"] > 1e-3  # positions break the symmetry
    for key in ("learned", "zeroed", "nope"):  # the causal mask alone already breaks it
        assert rows[key]["max_abs"] > 1e-3
        assert len(rows[key]["per_position"]) == 16
    table = PE.format_table(_record("permutation", cfg, out))
    assert all(r["label"] in table for r in rows.values())


def test_equivariance_gap_is_zero_for_a_rowwise_function_and_not_for_a_cumulative_one() -> None:
    x = torch.randn(2, 7, 3, dtype=torch.float64)
    perm = torch.randperm(7)
    assert PE.equivariance_gap(lambda t: t * 2 + 1, x, perm)["max_abs"] == 0.0
    assert PE.equivariance_gap(lambda t: t.cumsum(1), x, perm)["max_abs"] > 0.1


def test_extrapolation_reports_every_scheme_and_length_and_learned_as_unable() -> None:
    cfg = _tiny("extrapolation", model=TINY_MODEL, train_len=8, eval_windows=2,
                train={"steps": 4, "batch_size": 2, "lr": 3e-3, "warmup_steps": 1})
    out = EX.run(cfg, CPU, False)
    assert out["eval_lengths"] == [8, 12, 16, 32]
    assert list(out["schemes"]) == list(POSITIONAL_SCHEMES)
    for name, s in out["schemes"].items():
        assert len(s["mean"]) == len(s["tail"]) == len(s["reason"]) == 4
        assert s["tail"][0] is None  # no position beyond L at 1x
        if name == "learned":
            assert math.isfinite(s["mean"][0]) and s["reason"][0] is None
            assert s["mean"][1:] == [None] * 3 and s["tail"][1:] == [None] * 3
            assert all("cannot extrapolate" in r for r in s["reason"][1:])
            assert s["curve_length"] == 8
        else:
            assert all(math.isfinite(v) for v in s["mean"] + s["tail"][1:])
            assert s["reason"] == [None] * 4
            assert s["curve_length"] == 32
    table = EX.format_table(_record("extrapolation", cfg, out))
    assert "n/a" in table and "cannot extrapolate" in table


def test_per_position_loss_averages_to_the_flat_cross_entropy() -> None:
    model = EX.build_model("rope", TINY_MODEL, 16, 0)
    V = TOKENIZER.vocab_size
    x = torch.randint(0, V, (5, 12))
    y = torch.randint(0, V, (5, 12))
    curve = EX.per_position_loss(model, x, y, CPU, batch_size=2)
    flat = torch.nn.functional.cross_entropy(model(x).reshape(-1, V), y.reshape(-1)).item()
    assert curve.shape == (12,)
    assert curve.mean().item() == pytest.approx(flat, rel=1e-5)


def test_unigram_reference_is_between_a_uniform_guess_and_zero() -> None:
    level = EX.unigram_loss()
    assert 0.0 < level < math.log(TOKENIZER.vocab_size)  # letter frequencies beat a uniform guess


def test_variant_model_copies_weights_and_changes_only_rope() -> None:
    base = EX.build_model("rope", TINY_MODEL, 16, 0)
    x = torch.randint(0, TOKENIZER.vocab_size, (2, 16))
    same = CE.variant_model(base, "none")
    assert torch.equal(same(x), base(x))
    yarn = CE.variant_model(base, "yarn")
    assert yarn.config.rope == {"scaling": "yarn", "factor": 4.0, "original_max_len": 16}
    assert torch.equal(yarn.lm_head.weight, base.lm_head.weight)
    assert not torch.allclose(yarn(x), base(x))
    dynamic = CE.variant_model(base, "dynamic")  # plain RoPE up to the trained length
    assert torch.allclose(dynamic(x), base(x))
    with pytest.raises(ValueError, match="unknown variant"):
        CE.variant_model(base, "ntk-by-parts")


def test_context_extension_reports_every_variant_before_and_after() -> None:
    cfg = _tiny("context_extension", model=TINY_MODEL, train_len=16, eval_lengths=[16, 32, 64], finetune_len=64,
                eval_windows=2, train={"steps": 8, "batch_size": 4, "lr": 3e-3, "warmup_steps": 2},
                finetune={"steps": 2, "batch_size": 2, "lr": 1e-3, "warmup_steps": 1})
    out = CE.run(cfg, CPU, False)
    assert list(out["variants"]) == list(CE.VARIANTS)
    for v in out["variants"].values():
        for phase in ("before", "after"):
            assert len(v[phase]["mean"]) == 3 and all(math.isfinite(m) for m in v[phase]["mean"])
            assert v[phase]["tail"][0] is None and all(math.isfinite(t) for t in v[phase]["tail"][1:])
    # the unmodified variant before fine-tuning is the base model itself: identical at the trained length
    # for every variant whose frequencies equal the base's there (none, dynamic)
    assert out["variants"]["none"]["before"]["mean"][0] == pytest.approx(out["variants"]["dynamic"]["before"]["mean"][0])
    for metric in ("mean", "tail"):
        table = CE.format_table(_record("context_extension", cfg, out), metric)
        assert all(label in table for label in CE.LABELS.values())


def test_figures_build_from_the_records() -> None:
    from mlbook.viz import extrapolation as V

    cfg = _tiny("extrapolation", model=TINY_MODEL, train_len=8, eval_windows=2, schemes=["learned", "alibi"],
                train={"steps": 3, "batch_size": 2, "lr": 3e-3, "warmup_steps": 1})
    rec = _record("extrapolation", cfg, EX.run(cfg, CPU, False))
    for metric in ("mean", "tail"):
        fig = V.extrapolation_figure(rec, metric)
        assert [t.name for t in fig.data] == ["learned", "alibi"]
        assert fig.layout.xaxis.title.text == V.LENGTH_AXIS and fig.layout.yaxis.title.text == V.LOSS_AXIS
    assert len(V.extrapolation_curves_figure(rec).data) == 2
    with pytest.raises(ValueError, match="metric"):
        V.extrapolation_figure(rec, "median")
