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
        assert where == round(depth * room)
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
