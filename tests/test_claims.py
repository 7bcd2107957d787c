"""The extended verdict rule: t-test p, two one-sided tests, detectable difference, Holm, seed splits, count
n-gram baselines, registered claims decided as a family, and every committed full record carrying the claims
its experiment registers."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch

from mlbook.experiments.claims import check_claims, claims_table, decide, survivors_line
from mlbook.experiments.common import (
    detectable_difference,
    holm,
    ngram_baselines,
    ngram_curve,
    seed_split,
    t_cdf,
    t_test_p,
    tost,
)
from mlbook.records import PACKAGED_RESULTS


def test_t_test_p_and_tost_match_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(2, 9)
        d = [rng.gauss(rng.uniform(-1, 1), rng.uniform(0.01, 2)) for _ in range(n)]
        assert t_test_p(d) == pytest.approx(float(stats.ttest_1samp(d, 0.0).pvalue), rel=1e-7, abs=1e-12)
        margin = rng.uniform(0.05, 3)
        m, se = sum(d) / n, float(stats.sem(d))
        want = max(float(stats.t.sf((m + margin) / se, n - 1)), float(stats.t.cdf((m - margin) / se, n - 1)))
        got = tost(d, margin)
        assert got["p"] == pytest.approx(want, rel=1e-7, abs=1e-12)
        lo, hi = got["ci90"]
        # equivalent exactly when the 90% interval lies inside the margin
        assert got["equivalent"] == (-margin < lo and hi < margin)
        assert got["certifiable"] == pytest.approx(max(abs(lo), abs(hi)))


def test_t_cdf_is_symmetric_and_matches_known_values() -> None:
    assert t_cdf(0.0, 4) == pytest.approx(0.5)
    assert t_cdf(2.776445, 4) == pytest.approx(0.975, abs=1e-6)
    assert t_cdf(-1.3, 7) == pytest.approx(1 - t_cdf(1.3, 7))


def test_detectable_difference_is_the_power_formula() -> None:
    stats = pytest.importorskip("scipy.stats")
    d = [0.1, 0.3, -0.2, 0.05, 0.12]
    sd = float(torch.tensor(d, dtype=torch.float64).std())
    want = (stats.t.ppf(0.975, 4) + stats.t.ppf(0.8, 4)) * sd / math.sqrt(5)
    assert detectable_difference(d) == pytest.approx(want, rel=1e-9)
    assert detectable_difference([0.1]) is None
    with pytest.raises(ValueError, match="power"):
        detectable_difference(d, power=1.0)


def test_holm_is_the_step_down_correction() -> None:
    got = holm([0.01, 0.04, 0.03, None, 0.2])
    adjusted = [g["p_holm"] for g in got]
    assert adjusted[3] is None
    assert [adjusted[i] for i in (0, 1, 2, 4)] == pytest.approx([0.04, 0.09, 0.09, 0.2], abs=1e-12)
    assert [g["survives"] for g in got] == [True, False, False, False, False]
    # once one test fails, none after it in the order survives, even with a smaller adjusted p elsewhere
    assert [g["survives"] for g in holm([0.001, 0.02, 0.02])] == [True, True, True]
    assert [g["survives"] for g in holm([0.001, 0.03, 0.026])] == [True, False, False]
    with pytest.raises(ValueError, match="alpha"):
        holm([0.1], alpha=0)


def test_seed_split_names_both_sides() -> None:
    assert seed_split([1.0, 0.0, 0.9, 0.2], 0.5) == {"below": [1, 3], "above": [0, 2], "split": True}
    assert seed_split([1.0, 0.9], 0.5)["split"] is False


def test_ngram_curve_counts_exactly() -> None:
    """A stream 'abab...': the bigram after 'a' is always 'b', so with add-k its loss is -log((c + k)/(c + kV))."""
    train = torch.tensor([0, 1] * 50)
    x = torch.tensor([[0, 1, 0, 1]])
    y = torch.tensor([[1, 0, 1, 0]])
    k, V = 0.1, 4
    c = ngram_curve(train, x, y, 2, k=k, vocab_size=V)
    n_a = 50  # 'a' as a history: positions 0, 2, ... 98 each followed by 'b' ...
    n_b = 49  # ... and 'b' followed by 'a' except at the end
    assert c[0].item() == pytest.approx(-math.log((n_a + k) / (n_a + k * V)))
    assert c[1].item() == pytest.approx(-math.log((n_b + k) / (n_b + k * V)))
    uni = ngram_curve(train, x, y, 1, k=k, vocab_size=V)
    assert uni[0].item() == pytest.approx(-math.log((50 + k) / (100 + k * V)))
    # a 4-gram uses the shorter history at the first positions, exactly as the bigram and trigram do there
    four = ngram_curve(train, x, y, 4, k=k, vocab_size=V)
    assert four[0].item() == pytest.approx(c[0].item())
    with pytest.raises(ValueError, match="n"):
        ngram_curve(train, x, y, 0)
    with pytest.raises(ValueError, match="x and y"):
        ngram_curve(train, x, y[:, :2], 2)


def test_ngram_baselines_fall_with_order_on_text() -> None:
    from mlbook.experiments.common import nested_windows
    from mlbook.experiments.data import corpus_tokens, split_tokens

    tr, va = split_tokens(corpus_tokens())
    x, y = nested_windows(va, 4, 128, 1000)
    b = ngram_baselines(tr, x, y, 64)
    losses = [b[str(n)]["in_range"] for n in (1, 2, 3, 4)]
    assert losses == sorted(losses, reverse=True)


def _claims() -> list[dict]:
    return [
        {"id": "up", "text": "a is higher", "source": "s", "expect": "higher", "a": "x", "b": "y"},
        {"id": "same", "text": "a equals b", "source": "s", "expect": "equivalent", "margin": 0.5, "a": "x", "b": "z"},
        {"id": "alone", "text": "a above 0", "source": "s", "expect": "higher", "a": "x", "b": None},
    ]


def test_decide_applies_the_rule_and_holm() -> None:
    data = {"x": [1.0, 1.1, 0.9, 1.05, 0.95], "y": [0.0, 0.1, -0.1, 0.05, 0.0], "z": [1.0, 1.12, 0.88, 1.0, 0.97]}
    rows = decide(_claims(), lambda c, side: data[c[side]])
    assert [r["holds"] for r in rows] == [True, True, True]
    assert all(r["survives"] for r in rows)
    assert rows[1]["tost"]["equivalent"] and rows[1]["outcome"] == "equivalent"
    table = claims_table(rows)
    assert table.count("survives Holm") == 3
    assert "3 after Holm" in survivors_line(rows)
    # one seed: no interval, so nothing holds and the table says why
    short = {k: v[:1] for k, v in data.items()}
    rows = decide(_claims(), lambda c, side: short[c[side]])
    assert not any(r["holds"] or r["survives"] for r in rows)
    assert claims_table(rows).count("no verdict (one seed)") == 3


def test_decide_never_turns_a_wide_interval_into_equality() -> None:
    data = {"x": [0.0, 1.0, -1.0, 0.5, -0.5], "z": [0.0] * 5, "y": [0.0] * 5}
    rows = decide(_claims()[1:2], lambda c, side: data[c[side]])
    assert rows[0]["outcome"] == "cannot tell" and not rows[0]["holds"]
    assert "cannot tell at this scale" in claims_table(rows)


@pytest.mark.parametrize("bad, match", [
    ({"id": "a", "text": "t", "source": "s", "expect": "same", "a": 1, "b": 2}, "expect must be one of"),
    ({"id": "a", "text": "t", "source": "s", "expect": "equivalent", "a": 1, "b": 2}, "margin must be a positive"),
    ({"id": "a", "text": "t", "source": "s", "expect": "lower", "margin": 0.1, "a": 1, "b": 2}, "a margin belongs"),
    ({"id": "a", "text": "t", "expect": "lower", "a": 1, "b": 2}, "lacks 'source'"),
])
def test_check_claims_refuses_bad_claims(bad: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        check_claims([bad])


def test_every_registered_claim_list_is_valid_and_stored_in_its_full_record() -> None:
    """The claims an experiment registers are the ones its committed full record stores: a metric or a margin
    changed after the data makes this fail until the experiment is re-run (or the record says why not)."""
    from mlbook.experiments.registry import REGISTRY, get_experiment

    get_experiment("after_rope")  # loads the catalog
    for name, exp in REGISTRY.items():
        for budget, cfg in exp.configs.items():
            check_claims(cfg.get("claims", []))
        path = PACKAGED_RESULTS / "full" / f"{name}.json"
        if not path.exists():
            continue
        record = json.loads(path.read_text(encoding="utf-8"))
        registered = exp.configs["full"].get("claims", [])
        assert record["config"].get("claims", []) == registered, f"{name}: the record's claims differ from the registry's"
        if registered and "claims_registered" not in record:
            # claims stored at run time: the record was made by the config that registers them
            assert record["config"] == exp.configs["full"], f"{name}: the record was made under another config"


def test_a_verdict_against_the_claim_is_holm_gated_too() -> None:
    """An outcome opposite to the claim is 'contradicted' only when it survives Holm over the family."""
    claims = [{"id": f"c{i}", "text": "t", "source": "s", "expect": "lower", "a": f"x{i}", "b": None} for i in range(6)]
    data = {f"x{i}": [0.10, 0.12, 0.08, 0.11, 0.20] for i in range(4)}  # higher, p about 0.004 each
    data["x4"] = [0.1, -0.1, 0.05, -0.05, 0.02]  # cannot tell (p about 0.8)
    data["x5"] = [0.02, 0.06, 0.00, 0.05, 0.06]  # higher before correction, p = 0.034; Holm: 2 x 0.034 > 0.05
    rows = decide(claims, lambda c, side: data[c[side]])
    assert [r["outcome"] for r in rows] == ["higher"] * 4 + ["cannot tell", "higher"]
    assert [r["significant"] for r in rows] == [True] * 4 + [False, False]
    lines = [line for line in claims_table(rows).splitlines() if line.startswith("| t")]
    assert all("**contradicted**: higher, survives Holm" in line for line in lines[:4])
    assert "cannot tell after Holm" in lines[5] and "contradicted" not in lines[5]
