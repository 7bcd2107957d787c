"""Tests for the probe's scaling overrides (mlbook.analysis.probe.rope_override, override_effect), on tiny
random Llamas built here: one as the book ships it (plain RoPE), others shipping a scaling of their own.

Oracles: transformers' own frequency functions (`rope_init_function`) and its rotary modules, in 4.57
and 5.15 alike (the same tests run under both: `make test-hf4`). What is checked: an override replaces a
shipped scaling and is refused on such a model unless asked; it is read as the library reads a config, so
what transformers would not read, or would read differently in 4.x and 5, is refused by name before any
pass; the legacy {"type": ...} works in both versions; each pass leaves the rotary module as found;
LongRoPE's threshold is reported.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from hf_versions import HF_MAJOR, rope_init_function  # noqa: E402
from mlbook.analysis import probe as P  # noqa: E402

pytestmark = pytest.mark.oracle

M = 64  # the tiny Llama's max_position_embeddings
YARN_2 = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": M}
DYNAMIC_2 = {"rope_type": "dynamic", "factor": 2.0}
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 16, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0}
LONG = {"rope_type": "longrope", "factor": 2.0, "short_factor": [1.0] * 8,
        "long_factor": [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5]}


@pytest.fixture(scope="module")
def tiny() -> Any:
    return P.load_probe_model(P.TINY_RANDOM).model


@pytest.fixture(scope="module")
def ids() -> torch.Tensor:
    return P.encode_text(P.library_text(), None, vocab_size=256, max_tokens=2 * M + 1)  # (1, 129)


def tiny_shipping(scaling: dict[str, Any]) -> Any:
    """The tiny random Llama with `scaling` in its config, in the layout of the installed transformers."""
    from transformers import LlamaForCausalLM

    values = P.tiny_random_config().to_dict()
    if isinstance(values.get("rope_parameters"), dict):  # transformers 5
        values["rope_parameters"] = {"rope_theta": 10000.0, **scaling}
    else:
        values["rope_scaling"] = dict(scaling)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return LlamaForCausalLM(P.tiny_random_config().__class__(**values)).eval()


def rotary_calls(model: Any) -> list[int]:
    """A counter of the decoder's rotary module calls (hooked for the rest of the test's life of `model`)."""
    calls: list[int] = []
    model.get_decoder().rotary_emb.register_forward_hook(lambda *a: calls.append(1))
    return calls


# ---------------------------------------------------------------------------
# An override replaces a shipped scaling
# ---------------------------------------------------------------------------


def test_a_shipped_scaling_is_refused_unless_replacing_it_is_asked_for(ids):
    llama31 = tiny_shipping(LLAMA3)
    before = llama31.get_decoder().rotary_emb
    for call in (lambda: P.override_effect(llama31, ids, YARN_2),
                 lambda: P.rope_override(llama31, YARN_2).__enter__()):
        with pytest.raises(ValueError, match=r"ships the scaling .*llama3.*replace_shipped=True"):
            call()
    assert llama31.get_decoder().rotary_emb is before
    with pytest.raises(TypeError, match="replace_shipped"):
        P.override_effect(llama31, ids, YARN_2, replace_shipped="yes")
    # replaced, not composed: the pass rotates with transformers' YaRN frequencies alone, the llama3 bands undone
    effect = P.override_effect(llama31, ids, YARN_2, replace_shipped=True)
    with P.rope_override(llama31, YARN_2, replace_shipped=True) as cfg:
        inv_yarn, attention = rope_init_function("yarn")(cfg, "cpu")
    inv_llama3, _ = rope_init_function("llama3")(llama31.config, "cpu")
    np.testing.assert_allclose(effect.divisor, (inv_llama3 / inv_yarn).double().numpy(), rtol=1e-6)
    assert effect.divisor.min() < 1.0 and effect.attention_scaling == pytest.approx(attention)


def test_default_on_plain_rope_changes_nothing_and_on_a_scaled_model_undoes_it(tiny, ids):
    # transformers 5 has no "default" entry in ROPE_INIT_FUNCTIONS, 4.57 has one: read alike here
    with pytest.raises(ValueError, match="change nothing"):
        with P.rope_override(tiny, {"rope_type": "default"}):
            pass
    llama31 = tiny_shipping(LLAMA3)
    effect = P.override_effect(llama31, ids, {"rope_type": "default"}, replace_shipped=True)
    inv_llama3, _ = rope_init_function("llama3")(llama31.config, "cpu")
    inv_plain, _ = rope_init_function("default")(tiny.config, "cpu")
    np.testing.assert_allclose(effect.divisor, (inv_llama3 / inv_plain).double().numpy(), rtol=1e-6)
    assert effect.divisor.min() == pytest.approx(1 / 8)  # the slow band sped back up by the factor 8


# ---------------------------------------------------------------------------
# An override is read as the library reads a config, before any pass
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("scaling", "error", "match"), [
    ({"rope_type": "yarn", "factor": 2.0, "beta_fats": 16.0}, ValueError, r"\['beta_fats'\] are not read"),
    ({"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 32}, ValueError,
     "original_max_position_embeddings"),
    ({"rope_type": "yarn"}, ValueError, "needs 'factor'"),
    ({"rope_type": "dynamic", "factor": -1.0}, ValueError, "factor must be a finite number > 0"),
    ({"rope_type": "yarn", "factor": 2.0, "rope_theta": 500.0}, ValueError, r"rope_scaling\['rope_theta'\]=500.0"),
    ({"rope_type": "yarn", "factor": 2.0, "partial_rotary_factor": 0.5}, ValueError,
     r"rope_scaling\['partial_rotary_factor'\]=0.5"),
    ({"type": "yarn", "rope_type": "linear", "factor": 2.0}, ValueError, "Keep one"),
    ({"rope_type": "nonsense", "factor": 2.0}, ValueError, "unknown rope_scaling type 'nonsense'"),
    ({**LONG, "original_max_position_embeddings": 32}, ValueError, "4.57's longrope switches factors"),
    ("yarn", TypeError, "rope_scaling must be a dict"),
    ([("rope_type", "linear"), ("factor", 2.0)], TypeError, "rope_scaling must be a dict"),
])
def test_an_override_transformers_would_not_read_as_written_is_refused_before_any_pass(ids, scaling, error, match):
    model = P.load_probe_model(P.TINY_RANDOM).model
    calls = rotary_calls(model)
    before = model.get_decoder().rotary_emb
    with pytest.raises(error, match=match):
        P.override_effect(model, ids, scaling)
    with pytest.raises(error, match=match):
        with P.rope_override(model, scaling):
            pass
    assert not calls and model.get_decoder().rotary_emb is before


def test_the_legacy_type_key_is_read_as_rope_type(tiny, ids):
    legacy = P.override_effect(tiny, ids, {"type": "yarn", "factor": 2.0})
    current = P.override_effect(tiny, ids, {"rope_type": "yarn", "factor": 2.0})
    np.testing.assert_array_equal(legacy.divisor, current.divisor)
    assert legacy.max_logit_change == current.max_logit_change and legacy.label == "yarn"
    with P.rope_override(tiny, {"type": "yarn", "factor": 2.0}) as cfg:
        held = cfg.rope_parameters if HF_MAJOR >= 5 else cfg.rope_scaling
    assert held["rope_type"] == "yarn" and "type" not in held


def test_a_repeated_base_is_accepted(tiny, ids):
    # vLLM's --hf-overrides repeats every key of the shipped dict, the base included: the same base is no change
    same = P.override_effect(tiny, ids, {**YARN_2, "rope_theta": 10000.0, "partial_rotary_factor": 1.0})
    np.testing.assert_array_equal(same.divisor, P.override_effect(tiny, ids, YARN_2).divisor)


@pytest.mark.parametrize(("bad", "error", "match"), [
    (lambda x: x.float(), TypeError, "integer token ids"),
    (lambda x: x.bool(), TypeError, "integer token ids"),
    (lambda x: x[:, :0], ValueError, "0 tokens"),
    (lambda x: x + 300, ValueError, "vocabulary is 0 to 255"),
    (lambda x: x - 300, ValueError, "from -"),
    (lambda x: x[0], ValueError, r"\(1, T\)"),
])
def test_bad_input_ids_are_refused_by_name(tiny, ids, bad, error, match):
    x = bad(ids)
    for call in (lambda: P.override_effect(tiny, x, YARN_2), lambda: P.loss_by_position(tiny, x, 8),
                 lambda: P.capture_rotary(tiny, x)):
        with pytest.raises(error, match=match):
            call()


# ---------------------------------------------------------------------------
# Each pass leaves the rotary module as found
# ---------------------------------------------------------------------------


def test_a_shipped_dynamic_module_is_left_as_found(ids):
    shipped_dynamic = tiny_shipping(DYNAMIC_2)
    rotary = shipped_dynamic.get_decoder().rotary_emb
    plain = rotary.inv_freq.clone()
    first = P.override_effect(shipped_dynamic, ids, YARN_2, replace_shipped=True)
    assert rotary.max_seq_len_cached == M and torch.equal(rotary.inv_freq, plain)  # not the base grown for 129 tokens
    P.loss_by_position(shipped_dynamic, ids, 16)
    assert rotary.max_seq_len_cached == M and torch.equal(rotary.inv_freq, plain)
    second = P.override_effect(shipped_dynamic, ids[:, :100], YARN_2, replace_shipped=True)
    third = P.override_effect(shipped_dynamic, ids, YARN_2, replace_shipped=True)
    np.testing.assert_array_equal(first.divisor, third.divisor)  # the same answer whatever ran before
    # the shipped pass over 129 tokens rotated with transformers' dynamic base for 129 (its own growth)
    inv_dynamic, _ = rope_init_function("dynamic")(shipped_dynamic.config, "cpu", seq_len=2 * M + 1)
    with P.rope_override(shipped_dynamic, YARN_2, replace_shipped=True) as cfg:
        inv_yarn, _ = rope_init_function("yarn")(cfg, "cpu")
    np.testing.assert_allclose(first.divisor, (inv_dynamic / inv_yarn).double().numpy(), rtol=1e-6)
    assert not np.array_equal(first.divisor, second.divisor)


def test_longrope_reports_its_threshold_and_swaps_factors_past_it(tiny, ids):
    short = P.override_effect(tiny, ids[:, :M], LONG)
    long = P.override_effect(tiny, ids[:, : M + 1], LONG)
    # transformers 5 reads rope_parameters["original_max_position_embeddings"] (filled with M); 4.57 the top-level
    # original_max_position_embeddings, else max_position_embeddings
    key = "original_max_position_embeddings" if HF_MAJOR >= 5 else "max_position_embeddings"
    assert (short.rescale_above, short.rescale_key, long.rescale_above) == (M, key, M)
    assert "short factors: 64 tokens, not above" in short.line() and "long factors: 65 tokens >" in long.line()
    np.testing.assert_allclose(short.divisor, 1.0, rtol=1e-6)  # short factors all 1: only the attention factor
    np.testing.assert_allclose(long.divisor, LONG["long_factor"], rtol=1e-6)
    assert short.took_effect and short.attention_scaling == long.attention_scaling > 1.0


def test_the_two_factor_2_overrides_differ_in_strength_past_max_position_embeddings(tiny, ids):
    # YaRN's factor is the slowest pairs' divisor; dynamic NTK's slowest pair at length T is divided by
    # s T / M - (s - 1): 2 * 129 / 64 - 1 = 3.03 at T = 2M + 1 (emozilla, 2023)
    yarn = P.override_effect(tiny, ids, YARN_2)
    dynamic = P.override_effect(tiny, ids, DYNAMIC_2)
    assert yarn.divisor.max() == pytest.approx(2.0, rel=1e-6)
    assert dynamic.divisor[-1] == pytest.approx(2.0 * (2 * M + 1) / M - 1.0, rel=1e-5)


def test_a_non_finite_pass_is_refused_not_read_as_no_change(ids):
    broken = P.load_probe_model(P.TINY_RANDOM).model
    with torch.no_grad():
        broken.lm_head.weight[0, 0] = float("nan")
    with pytest.raises(ValueError, match="non-finite cos and sin or logits"):
        P.override_effect(broken, ids, YARN_2)


# ---------------------------------------------------------------------------
# Phi-3: its config class reads "yarn" as LongRoPE; the loss cell's flow on it
# ---------------------------------------------------------------------------


def tiny_phi3(**extra: Any) -> Any:
    """A tiny random Phi-3 (plain RoPE, fused qkv_proj), as Phi-3, Phi-3.5 and Phi-4-mini build."""
    from transformers import Phi3Config, Phi3ForCausalLM

    config = Phi3Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=M,
                        pad_token_id=0, bos_token_id=1, eos_token_id=2, **extra)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return Phi3ForCausalLM(config).eval()


def test_yarn_on_phi3_is_refused_by_name_and_the_loss_cells_flow_runs_the_rest(ids):
    """Phi3Config turns rope_type "yarn" into "longrope" (4.57 and 5.15 alike), which then asks for short_factor:
    the page's YaRN override must be refused with a sentence naming what was written, before any pass, and the
    cell's other overrides must still run (page 14, cells 13 and 15)."""
    phi3 = tiny_phi3(original_max_position_embeddings=M)
    L = P.trained_length(phi3.config)
    assert L == M and P.override_refusal(phi3.config) is None
    yarn = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": L}
    why = P.override_refusal(phi3.config, yarn)
    assert "reads rope_type 'yarn' as 'longrope'" in why and "'rope_type': 'yarn'" in why and "Phi-4-mini" in why
    assert P.override_refusal(phi3.config, {"type": "yarn", "factor": 2.0}) is not None  # the legacy key too
    assert P.override_refusal(phi3.config, DYNAMIC_2) is None
    assert P.override_refusal(P.tiny_random_config(), yarn) is None  # a Llama takes it
    with pytest.raises(TypeError, match="rope_scaling must be a dict"):
        P.override_refusal(phi3.config, "yarn")
    before = phi3.get_decoder().rotary_emb
    for call in (lambda: P.rope_override(phi3, yarn).__enter__(), lambda: P.override_effect(phi3, ids, yarn)):
        with pytest.raises(ValueError, match=r"asks for YaRN, but Phi3Config .* cannot be expressed"):
            call()
    assert phi3.get_decoder().rotary_emb is before
    # cell 13's loop, each override checked first: as shipped and dynamic NTK run, YaRN is left out
    overrides = {"as shipped": None, "YaRN, factor 2": yarn, "dynamic NTK, factor 2": DYNAMIC_2}
    kept = {name: s for name, s in overrides.items() if s is None or P.override_refusal(phi3.config, s) is None}
    assert list(kept) == ["as shipped", "dynamic NTK, factor 2"]
    losses = []
    for name, scaling in kept.items():
        with P.rope_override(phi3, scaling):
            losses.append(P.loss_by_position(phi3, ids, max(1, L // 8), label=name))
    assert all(np.isfinite(pl.loss).all() for pl in losses)
    effect = P.override_effect(phi3, ids, DYNAMIC_2)
    assert effect.took_effect and effect.divisor[-1] == pytest.approx(2.0 * (2 * M + 1) / M - 1.0, rel=1e-4)


def test_a_removed_shipped_attention_factor_is_printed_shipped_to_override(ids):
    """A dynamic override on a model shipping YaRN x 4 removes YaRN's factor 0.1 ln 4 + 1 = 1.139 on cos and sin:
    the line must say shipped -> override, not an unchanged-looking 'x 1.000'."""
    qwen_like = tiny_shipping({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16})
    effect = P.override_effect(qwen_like, ids, DYNAMIC_2, replace_shipped=True)
    assert effect.shipped_attention_scaling == pytest.approx(0.1 * np.log(4.0) + 1.0, rel=1e-6)
    assert effect.attention_scaling == 1.0
    assert "cos and sin x 1.139 -> x 1.000" in effect.line()
    assert "cos and sin x 1.000 -> x 1.069" in P.override_effect(qwen_like.__class__(P.tiny_random_config()).eval(),
                                                                ids, YARN_2).line()


def tiny_phi3_longrope() -> Any:
    """A tiny random Phi-3 shipping LongRoPE from 16 tokens, as Phi-3-mini-128k ships it from 4,096."""
    factors = {"short_factor": [1.0] * 8, "long_factor": [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5]}
    if HF_MAJOR >= 5:
        return tiny_phi3(original_max_position_embeddings=16,
                         rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0, **factors})
    return tiny_phi3(original_max_position_embeddings=16, rope_scaling={"type": "longrope", **factors})


def test_a_longrope_module_keeps_both_frequency_buffers_after_a_short_pass(ids):
    """After a pass of at most original_max_position_embeddings tokens, transformers 5's LongRoPE update registers
    original_inv_freq itself as inv_freq: one tensor under two buffer names. A later pass that restores the module
    must keep both names, or the next pass dies on a missing original_inv_freq: page 14's rotation cell makes
    that short pass (512 tokens on Phi-3-mini-128k), then its loss and override cells run long ones."""
    phi3 = tiny_phi3_longrope()
    rotary = phi3.get_decoder().rotary_emb

    def names() -> set[str]:
        return {n for n, _ in rotary.named_buffers(remove_duplicate=False)} | set(vars(rotary))

    before = names()
    P.capture_rotary(phi3, ids[:, :16])  # a short pass
    with P.rope_override(phi3, None):
        P.loss_by_position(phi3, ids, 8)  # a long pass: the long factors, then the module as found
    assert "original_inv_freq" in names() and names() >= before
    # the next pass runs, and the override removes LongRoPE's factor sqrt(1 + ln(M / L) / ln L) = sqrt(1.5)
    line = P.override_effect(phi3, ids, DYNAMIC_2, replace_shipped=True).line()
    assert f"cos and sin x {np.sqrt(1.5):.3f} -> x 1.000" in line


def test_a_stale_top_level_anchor_is_warned_about_and_printed():
    """Phi3Config carries original_max_position_embeddings 4,096 at the top level by default; with plain RoPE
    no scaling reads it, yet it is the anchor L. trained_length warns, and the settings print a note."""
    phi3 = tiny_phi3()  # M = 64, the class default 4,096 at the top level
    with pytest.warns(UserWarning, match=r"original_max_position_embeddings=4,096 .* no scaling reads it"):
        assert P.trained_length(phi3.config) == 4096
    with pytest.warns(UserWarning):
        lines = P.positional_settings(phi3.config).lines()
    assert lines[-1] == "note: L 4,096 exceeds max_position_embeddings 64 (no scaling reads it: a stale key?)"
    stated = tiny_phi3(original_max_position_embeddings=M)  # as Phi-3-mini-4k ships: 4,096 and 4,096
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert P.trained_length(stated.config) == M
        assert not P.positional_settings(stated.config).lines()[-1].startswith("note")


def test_the_stale_anchor_warning_comes_once_in_the_pages_flow():
    """Page 14 prints the settings (which warn), then its rotation and loss cells read L again: settings.trained_len,
    capture_rotary, pair_norms and loss_by_position must not repeat the warning, and each warning names the
    caller's line, not the library's."""
    import warnings

    phi3 = tiny_phi3()  # the stale top-level 4,096 beside M = 64
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # count every call, not the first per location
        settings = P.positional_settings(phi3.config)
        L = settings.trained_len
        ids = P.encode_text(P.library_text(), None, vocab_size=256, max_tokens=2 * M + 1)
        capture = P.capture_rotary(phi3, ids[:, : min(16, L)])
        P.pair_norms(capture, phi3.config)
        P.loss_by_position(phi3, ids, 8)
    stale = [w for w in caught if "no scaling reads it" in str(w.message)]
    assert len(stale) == 1 and stale[0].filename == __file__
    with pytest.warns(UserWarning, match="no scaling reads it") as again:  # asked for by name, it still warns
        P.trained_length(phi3.config)
    assert again[0].filename == __file__
