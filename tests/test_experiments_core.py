"""The experiment framework: data, schedule, registry round trip, config matching and the CLI."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys

import pytest
import torch

from mlbook.experiments import registry
from mlbook.experiments.data import TOKENIZER, PasskeyTask, corpus_tokens, random_windows, split_tokens
from mlbook.experiments.train import TrainConfig, evaluate_loss, lr_at, pick_device, train
from mlbook.transformer.models import GPT, GPTConfig


def test_corpus_is_the_stdlib_help_text_at_character_level() -> None:
    tokens = corpus_tokens()
    assert len(tokens) > 100_000
    assert int(tokens.max()) < TOKENIZER.vocab_size
    text = TOKENIZER.decode(tokens[:2000])
    assert "the" in text  # English prose
    unknown = (tokens == TOKENIZER.unk).float().mean().item()
    assert unknown < 0.01  # almost everything is printable ASCII


def test_windows_are_shifted_by_one_and_splits_do_not_overlap() -> None:
    train_part, val_part = split_tokens(corpus_tokens(), 0.1)
    assert len(train_part) + len(val_part) == len(corpus_tokens())
    x, y = random_windows(train_part, 4, 32, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (4, 32)
    assert torch.equal(x[:, 1:], y[:, :-1])


def test_passkey_sample_hides_the_key_at_the_requested_depth() -> None:
    task = PasskeyTask()
    rng = random.Random(0)
    for depth in (0.0, 0.5, 1.0):
        text, key = task.sample(256, depth, rng)
        assert len(text) == 256 and text.endswith(key)
        where = text.index(f"the pass key is {key}")
        room = 256 - len(f"the pass key is {key}. ") - len(f"what is the pass key? {key}")
        longest_word = max(len(w) for w in task.filler.split())
        assert abs(where - depth * room) <= longest_word + 1  # the nearest word boundary to depth * room
        # never spliced into a word: the needle starts the text or follows a space, and so does the question
        assert where == 0 or text[where - 1] == " "
        assert text[text.index("what is the pass key?") - 1] == " "
    x, y = task.batch(3, 128, rng)
    assert x.shape == y.shape == (3, 127)
    assert ((y != -100).sum(dim=1) == task.n_digits).all()  # only the answer's digits are scored


def test_learning_rate_warms_up_then_decays_by_cosine() -> None:
    cfg = TrainConfig(steps=100, warmup_steps=10, lr=1e-3, min_lr_ratio=0.1)
    lrs = [lr_at(s, cfg) for s in range(100)]
    assert lrs[0] == pytest.approx(1e-4) and lrs[9] == pytest.approx(1e-3)
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:]))  # non-increasing after warm-up
    assert lrs[-1] == pytest.approx(1e-4, rel=0.05)
    assert lr_at(55, cfg) == pytest.approx(1e-4 + 0.9e-3 * 0.5 * (1 + math.cos(math.pi * 0.5)))


def test_training_reduces_loss_and_is_reproducible() -> None:
    train_part, val_part = split_tokens(corpus_tokens(), 0.1)

    def run() -> tuple[list[float], float]:
        torch.manual_seed(0)
        model = GPT(GPTConfig(vocab_size=TOKENIZER.vocab_size, d_model=32, n_heads=2, n_layers=1, max_len=32))
        log = train(model, lambda s, g: random_windows(train_part, 8, 32, g), TrainConfig(steps=40, warmup_steps=4),
                    "cpu", progress=False)
        g = torch.Generator().manual_seed(1)
        return log["loss"], evaluate_loss(model, lambda i: random_windows(val_part, 8, 32, g), 2, "cpu")

    (loss_a, val_a), (loss_b, val_b) = run(), run()
    assert loss_a == loss_b and val_a == val_b  # fixed seeds: identical runs
    assert sum(loss_a[-5:]) / 5 < loss_a[0] - 1.0  # it learns something (from ~4.6 nats at chance)


def test_pick_device_explains_unavailable_devices() -> None:
    assert pick_device("cpu").type == "cpu"
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        pick_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="cuda"):
            pick_device("cuda")


@pytest.fixture
def toy_experiment(tmp_path, monkeypatch):
    monkeypatch.setenv("MLBOOK_RESULTS", str(tmp_path))
    calls = []

    @registry.register("toy", "A toy", "nothing", {"quick": {"n": 2}, "full": {"n": 3}})
    def toy(config, device, progress):
        calls.append(config["n"])
        return {"square": config["n"] ** 2}

    yield calls
    registry.REGISTRY.pop("toy", None)


def test_registry_saves_and_reuses_results_only_when_the_config_matches(toy_experiment, tmp_path) -> None:
    record = registry.load_or_run("toy", "quick", "cpu")
    assert record["results"] == {"square": 4} and toy_experiment == [2]
    saved = json.loads((tmp_path / "quick" / "toy.json").read_text())
    for key in ("config", "results", "mlbook_version", "device", "elapsed_s", "command"):
        assert key in saved
    assert registry.load_or_run("toy", "quick", "cpu")["results"] == {"square": 4}
    assert toy_experiment == [2]  # reused, not rerun
    registry.REGISTRY["toy"].configs["quick"] = {"n": 5}  # the config changed: the old result is stale
    assert registry.load_result("toy", "quick") is None
    assert registry.load_or_run("toy", "quick", "cpu")["results"] == {"square": 25}


def test_record_keeps_the_thread_count_actually_used_not_the_restored_one(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MLBOOK_RESULTS", str(tmp_path))
    monkeypatch.setenv("MLBOOK_CPU_THREADS", "1")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        @registry.register("threads_probe", "threads", "nothing", {"quick": {"n": 1}, "full": {"n": 1}})
        def probe(config, device, progress):
            return {"threads_inside": torch.get_num_threads()}

        record = registry.run_experiment("threads_probe", "quick", "cpu", save=False)
        assert record["results"]["threads_inside"] == 1
        assert record["threads"] == 1  # not the 2 restored afterwards
        assert torch.get_num_threads() == 2
    finally:
        registry.REGISTRY.pop("threads_probe", None)
        torch.set_num_threads(before)


def test_a_gpu_does_not_choose_the_full_budget(monkeypatch) -> None:
    monkeypatch.delenv("MLBOOK_BUDGET", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert registry.default_budget() == "quick"  # a full re-run is a deliberate choice
    monkeypatch.setenv("MLBOOK_BUDGET", "full")
    assert registry.default_budget() == "full"
    monkeypatch.setenv("MLBOOK_BUDGET", "huge")
    with pytest.raises(ValueError, match="MLBOOK_BUDGET must be one of quick, full"):
        registry.default_budget()


def test_headline_prints_the_missing_record_marker_only_when_the_record_is_missing(toy_experiment) -> None:
    text = registry.headline("toy", "full")
    assert text.startswith(registry.NO_RECORD) and "python -m mlbook.experiments run toy --budget full" in text
    assert registry.NO_RECORD in registry.rerun_estimate("toy")
    registry.run_experiment("toy", "full", "cpu")
    text = registry.headline("toy", "full")
    assert registry.NO_RECORD not in text and "A toy" in text
    assert registry.NO_RECORD not in registry.rerun_estimate("toy")
    assert "cpu" in registry.describe_record(registry.load_result("toy", "full"))


def test_every_experiment_module_defines_a_headline_and_full_budgets_have_three_seeds() -> None:
    import importlib

    registry.get_experiment("permutation")
    for name, exp in registry.REGISTRY.items():
        module = importlib.import_module(exp.fn.__module__)
        if not module.__name__.startswith("mlbook.experiments.exp_"):
            continue
        assert callable(getattr(module, "headline", None)), name
        assert len(exp.configs["full"]["seeds"]) >= 5, name


def test_committed_full_records_match_their_configs_and_keep_every_seed() -> None:
    registry.get_experiment("permutation")
    for name in ("permutation", "extrapolation", "context_extension", "t5_length", "sinks", "passkey"):
        path = registry.PACKAGED_RESULTS / "full" / f"{name}.json"
        if not path.exists():
            pytest.skip(f"{path} not committed yet")
        record = json.loads(path.read_text())
        if record["config"] != registry.REGISTRY[name].configs["full"]:
            pytest.fail(f"the committed {name} record was made with another config; re-run it")
        seeds = record["config"]["seeds"]
        assert record["results"]["seeds"] == seeds and len(seeds) >= 5
        assert len(record["results"]["seconds_per_seed"]) == len(seeds)
        assert record["threads"] >= 1 and record["elapsed_s"] > 0


def test_registry_rejects_unknown_names_and_budgets(toy_experiment) -> None:
    with pytest.raises(ValueError, match="unknown budget 'huge'; valid values are quick, full"):
        registry.run_experiment("toy", "huge")
    with pytest.raises(ValueError, match="unknown experiment 'nope'"):
        registry.run_experiment("nope")


def test_cli_lists_the_six_experiments() -> None:
    out = subprocess.run([sys.executable, "-m", "mlbook.experiments", "list"], capture_output=True, text=True, check=True)
    names = {line.split()[0] for line in out.stdout.splitlines() if line.strip()}
    assert names >= {"permutation", "extrapolation", "context_extension", "t5_length", "sinks", "passkey"}


def test_cli_rejects_an_unknown_experiment_with_the_valid_names() -> None:
    out = subprocess.run([sys.executable, "-m", "mlbook.experiments", "run", "nope"], capture_output=True, text=True)
    assert out.returncode == 2 and "valid names are" in out.stderr


# -- the shared statistics and evaluation helpers -----------------------------------------------


def test_mean_sd_is_the_sample_standard_deviation_and_skips_missing_values() -> None:
    import statistics

    from mlbook.experiments.common import mean_sd

    values = [1.25, 1.5, 2.0, None]
    out = mean_sd(values)
    assert out["n"] == 3
    assert out["mean"] == pytest.approx(statistics.mean([1.25, 1.5, 2.0]))
    assert out["sd"] == pytest.approx(statistics.stdev([1.25, 1.5, 2.0]))  # ddof = 1
    assert mean_sd([3.0]) == {"mean": 3.0, "sd": None, "n": 1}
    assert mean_sd([None]) == {"mean": None, "sd": None, "n": 0}


def test_an_ordering_is_claimed_only_when_the_95_percent_t_interval_excludes_zero() -> None:
    from mlbook.experiments.common import paired, pm, t_interval, verdict

    assert verdict([-0.30, -0.28, -0.31]) == "lower"
    assert verdict([0.30, 0.28, 0.31]) == "higher"
    assert verdict([0.30, -0.01, 0.31]) == "indistinguishable"  # one seed disagrees
    # every seed agrees and the mean exceeds the sd (the old rule's "higher"), but with 3 seeds
    # t = mean / (sd / sqrt(3)) = 2.1 < t(0.975, 2) = 4.30: the interval spans 0
    d = [0.2, 0.9, 0.15]
    assert all(x > 0 for x in d) and verdict(d) == "indistinguishable"
    lo, hi = t_interval(d)
    assert lo < 0 < hi
    assert verdict([0.3]) == "indistinguishable"  # one seed: no interval, no claim
    p = paired([1.0, 2.0, None], [0.5, 1.0, 0.0])
    assert p["per_seed"] == [0.5, 1.0] and p["n"] == 2 and p["mean"] == pytest.approx(0.75)
    assert p["ci95"] == pytest.approx(list(t_interval([0.5, 1.0])))
    assert pm(p, 2) == f"0.75 [{p['ci95'][0]:.2f}, {p['ci95'][1]:.2f}]"  # a comparison prints its interval
    assert pm(paired([1.0], [0.5]), 2) == "0.50"
    with pytest.raises(ValueError, match="one value per seed"):
        paired([1.0], [1.0, 2.0])


def test_t_quantile_and_interval_match_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    from mlbook.experiments.common import t_interval, t_quantile

    for df in (1, 2, 3, 4, 5, 9, 30, 200):
        for p in (0.5, 0.9, 0.975, 0.995):
            assert t_quantile(p, df) == pytest.approx(float(stats.t.ppf(p, df)), rel=1e-9, abs=1e-9)
    d = [0.12, -0.05, 0.33, 0.21, 0.08]
    lo, hi = t_interval(d)
    ref = stats.t.interval(0.95, len(d) - 1, loc=stats.tmean(d), scale=stats.sem(d))
    assert (lo, hi) == pytest.approx(ref, rel=1e-9)
    with pytest.raises(ValueError, match="p must be in"):
        t_quantile(0.2, 3)


def test_sign_flip_p_is_the_exact_permutation_p_value() -> None:
    from mlbook.experiments.common import sign_flip_p

    assert sign_flip_p([1.0] * 5) == pytest.approx(2 / 32)  # never below 0.05 with 5 seeds
    assert sign_flip_p([1.0, -1.0]) == pytest.approx(1.0)
    # brute force by hand for 3 values: |sums| of the 8 sign patterns of (1, 2, 4) are 7,5,3,1 twice
    assert sign_flip_p([1.0, 2.0, 4.0]) == pytest.approx(2 / 8)
    assert sign_flip_p([1.0, 2.0, -2.5]) == pytest.approx(8 / 8)  # observed |0.5| is the smallest


def test_nested_windows_give_every_length_the_same_text() -> None:
    from mlbook.experiments.common import nested_windows

    _, val = split_tokens(corpus_tokens())
    x, y = nested_windows(val, 5, 64, seed=3)
    x2, _ = nested_windows(val, 5, 64, seed=3)
    assert torch.equal(x, x2) and x.shape == (5, 64)
    assert torch.equal(x[:, 1:], y[:, :-1])  # targets are the next character
    # a causal model's per-position loss at length 32 equals the first 32 positions at length 64
    from mlbook.experiments.common import build_gpt, per_position_loss

    model = build_gpt("rope", {"d_model": 16, "n_heads": 2, "n_layers": 1}, 64, 0)
    long = per_position_loss(model, x, y, "cpu")
    short = per_position_loss(model, x[:, :32], y[:, :32], "cpu")
    torch.testing.assert_close(short, long[:32], rtol=1e-5, atol=1e-6)


def test_yarn_bands_read_keep_blend_and_interpolate_off_the_library_ramp() -> None:
    from mlbook.transformer.rope_scaling import yarn_bands
    from mlbook.transformer.positional import frequency_ladder
    from mlbook.transformer.rope_scaling import yarn_ramp

    for beta_fast, beta_slow in ((32.0, 1.0), (4.0, 1.0)):
        b = yarn_bands(16, 10000.0, 128, beta_fast, beta_slow).as_record()  # as the experiment stores it
        ramp = yarn_ramp(16, 10000.0, original_max_len=128, beta_fast=beta_fast, beta_slow=beta_slow).tolist()
        assert b["ramp"] == pytest.approx(ramp, abs=1e-4)
        assert sorted(b["keep"] + b["blend"] + b["interpolate"]) == list(range(8))
        assert all(ramp[i] == 0 for i in b["keep"]) and all(ramp[i] == 1 for i in b["interpolate"])
        theta = frequency_ladder(16)
        assert b["turns"][0] == pytest.approx(128 * theta[0].item() / (2 * math.pi), rel=1e-3)
        # the band rule in words: pairs that never complete a turn within L are interpolated
        assert all(b["ramp"][i] == 1.0 for i, t in enumerate(b["turns"]) if t < beta_slow)
    assert yarn_bands(16, 10000.0, 128, 4.0, 1.0).as_record()["keep"] == [0, 1]  # 20 and 6.4 turns: both >= 4


def test_scaled_embeddings_multiply_the_token_table_by_sqrt_d() -> None:
    cfg = GPTConfig(vocab_size=11, d_model=16, n_heads=2, n_layers=1, max_len=8, positional="sinusoidal",
                    scale_embeddings=True)
    torch.manual_seed(0)
    model = GPT(cfg)
    assert model.tok_emb.weight.std().item() == pytest.approx(16 ** -0.5, rel=0.25)  # N(0, 1/d) at init
    plain = GPT(cfg.replace(scale_embeddings=False))
    plain.load_state_dict(model.state_dict())
    with torch.no_grad():
        plain.tok_emb.weight.mul_(4.0)  # sqrt(16): the same input to the first block
    x = torch.randint(0, 11, (2, 8))
    torch.testing.assert_close(model(x), plain(x))


def test_saved_records_round_results_and_keep_number_lists_on_one_line() -> None:
    record = {"name": "x", "config": {"lr": 0.0031234567891}, "results": {
        "curve": [0.123456789012, 1.0, 2], "per_seed": [{"loss": 3.14159265358979}], "label": "a"}}
    text = registry.record_text(record)
    back = json.loads(text)
    assert back["config"] == record["config"]  # configs are compared exactly, never rounded
    assert back["results"] == {"curve": [0.123457, 1.0, 2], "per_seed": [{"loss": 3.14159}], "label": "a"}
    assert '"curve": [0.123457, 1.0, 2]' in text


# -- adding seeds to a saved record ---------------------------------------------------------------


def test_extending_a_record_by_seeds_equals_running_all_seeds_at_once(tmp_path, monkeypatch) -> None:
    import copy
    import json as _json

    from mlbook.experiments import registry as R

    monkeypatch.setenv("MLBOOK_RESULTS", str(tmp_path))
    monkeypatch.setattr(R, "PACKAGED_RESULTS", tmp_path / "packaged")
    exp = R.get_experiment("permutation")
    small = copy.deepcopy(exp.configs["quick"])
    small["train"] = {**small["train"], "steps": 20, "warmup_steps": 2}
    small["n_eval"] = 64
    monkeypatch.setitem(exp.configs, "quick", {**small, "seeds": [0]})
    R.run_experiment("permutation", "quick", "cpu", progress=False)
    monkeypatch.setitem(exp.configs, "quick", {**small, "seeds": [0, 1]})
    extended = R.extend_experiment("permutation", "quick", "cpu", progress=False)
    whole = R.run_experiment("permutation", "quick", "cpu", progress=False, save=False)

    def strip(o):  # timings differ between runs; everything else must be equal
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if "seconds" not in k}
        if isinstance(o, list):
            return [strip(v) for v in o]
        return o

    a = _json.loads(R.record_text(extended))
    b = _json.loads(R.record_text(whole))
    assert a["config"] == b["config"] and a["results"]["seeds"] == [0, 1]
    assert strip(a["results"]) == strip(b["results"])
    assert a["extended_from"]["seeds"] == [0] and a["command"].endswith("--extend")
    assert R.load_result("permutation", "quick")["results"]["seeds"] == [0, 1]  # saved, and found by config


def test_extending_refuses_records_that_are_not_the_same_experiment(tmp_path, monkeypatch) -> None:
    from mlbook.experiments import registry as R

    with pytest.raises(ValueError, match="differs between the runs"):
        R.merge_seed_results({"seeds": [0], "unigram": 3.2}, {"seeds": [1], "unigram": 3.3})
    with pytest.raises(ValueError, match="seeds \\[0\\] in both runs"):
        R.merge_seed_results({"per_seed": [{"seed": 0}]}, {"per_seed": [{"seed": 0}]})
    with pytest.raises(ValueError, match="has keys"):
        R.merge_seed_results({"a": 1}, {"b": 1})
    merged = R.merge_seed_results({"seeds": [0], "x": {"per_seed": [{"seed": 0, "v": 1}]}, "k": 2},
                                  {"seeds": [1], "x": {"per_seed": [{"seed": 1, "v": 3}]}, "k": 2})
    assert merged == {"seeds": [0, 1], "x": {"per_seed": [{"seed": 0, "v": 1}, {"seed": 1, "v": 3}]}, "k": 2}
    monkeypatch.setenv("MLBOOK_RESULTS", str(tmp_path))
    monkeypatch.setattr(R, "PACKAGED_RESULTS", tmp_path / "packaged")
    # the quick budget has no saved record anywhere: refused before any training
    with pytest.raises(ValueError, match="no saved quick-budget record"):
        R.extend_experiment("permutation", "quick", "cpu", progress=False)
