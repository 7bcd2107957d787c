"""Each family's class defaults, as transformers 5.15's own config classes build them from a minimal config.json.

A Hub config.json often states only what differs from its config class (google/gemma-3-4b-it's text_config names
no heads, no base, no layer pattern). The readers in `mlbook.transformer.hf` must then give the layer pattern, the
window and the RoPE the class gives, or refuse by name: every family the library reads is built here from the same
minimal dicts by its transformers 5.15 class (the oracle) and compared.
"""

from __future__ import annotations

import copy
import inspect
import warnings

import pytest

from mlbook.analysis.model_config import load_config, summarize_config
from mlbook.transformer import hf

transformers = pytest.importorskip("transformers")
pytestmark = [pytest.mark.oracle, pytest.mark.skipif(
    transformers.__version__ != "5.15.0", reason=f"the tables are transformers 5.15's; installed "
                                                 f"{transformers.__version__}")]

from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # noqa: E402

# minimal config.json bodies: what a Hub file may leave to its class
LAYER_VARIANTS = {"bare": {}, "window": {"sliding_window": 64}, "null window": {"sliding_window": None},
                  "switched on": {"sliding_window": 64, "use_sliding_window": True},
                  "pattern 3": {"sliding_window": 64, "sliding_window_pattern": 3}}
ROPE_VARIANTS = {"bare": {}, "4.x scaling": {"rope_scaling": {"rope_type": "linear", "factor": 8.0}},
                 "4.x base": {"rope_theta": 500000.0},
                 "5 dict": {"rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 20000.0}}}


def _text_families() -> list[str]:
    """The families the library reads whose 5.15 class is a text (not a wrapper) config and builds from no arguments."""
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for family in sorted(hf._known_families()):
            if family not in CONFIG_MAPPING:
                continue
            try:
                config = CONFIG_MAPPING[family](num_hidden_layers=4)
            except Exception:  # needs other arguments (vision towers, timm backbones)
                continue
            if config.get_text_config() is config:
                out.append(family)
    return out


FAMILIES = _text_families()


def _hf(family: str, body: dict):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CONFIG_MAPPING[family](**copy.deepcopy(body))


def _kinds(config) -> tuple[str, ...] | None:
    kinds = getattr(config, "layer_types", None)
    if kinds is None:
        return None
    return tuple(hf.SPARSE_AS_FULL.get(k, hf.LEGACY_LAYER_TYPES.get(k, k)) for k in kinds)


def test_the_families_scanned_cover_the_decoders_the_page_reads() -> None:
    assert {"gemma2", "gemma3_text", "cohere2", "gpt_oss", "olmo3", "llama", "mistral", "qwen2", "qwen3",
            "exaone4", "ministral", "gemma4_text"} <= set(FAMILIES)


@pytest.mark.parametrize("family", FAMILIES)
def test_layer_pattern_is_the_family_class_s_or_refused(family: str) -> None:
    """hf_layer_types of a minimal dict equals the layer_types the family's class builds from it, or raises with a
    sentence; for a class with no layer_types, every layer full, or every layer sliding where the family's model
    masks every layer with the window the class keeps."""
    for name, extra in LAYER_VARIANTS.items():
        for n in (12, 3):
            body = {"num_hidden_layers": n, **extra}
            try:
                theirs = _hf(family, body)
            except Exception:  # the class itself refuses this dict
                continue
            try:
                ours = hf.hf_layer_types({"model_type": family, **copy.deepcopy(body)})
            except ValueError as err:
                assert str(err), (family, name)
                continue
            kinds = _kinds(theirs)
            if kinds is None:
                window = getattr(theirs, "sliding_window", None)
                slides = family in hf.SLIDE_EVERY_LAYER and window is not None
                expect = ("sliding_attention" if slides else "full_attention",) * n
                if family == "qwen3_moe" and window is not None:  # Qwen3MoeConfig: the switch, then every layer
                    expect = ("sliding_attention",) * n
                assert ours == expect, (family, name, n, window)
            else:
                assert ours == kinds, (family, name, n)


def test_slide_every_layer_is_read_from_the_model_code() -> None:
    """The families read as "every layer slides" build no layer_types and mask every layer with the window."""
    import importlib

    for family in hf.SLIDE_EVERY_LAYER:
        if family not in CONFIG_MAPPING or _kinds(_hf(family, {"num_hidden_layers": 2})) is not None:
            continue
        module = inspect.getmodule(CONFIG_MAPPING[family]).__name__.replace("configuration_", "modeling_")
        source = inspect.getsource(importlib.import_module(module))
        assert "create_sliding_window_causal_mask" in source and "config.sliding_window" in source, family


@pytest.mark.parametrize("family", sorted(hf.HF_DEFAULT_SLIDING_WINDOW))
def test_default_window_is_the_class_field_default(family: str) -> None:
    cls = CONFIG_MAPPING[family]
    fields = getattr(cls, "__dataclass_fields__", {})
    default = fields["sliding_window"].default if "sliding_window" in fields else getattr(
        _hf(family, {"num_hidden_layers": 2}), "sliding_window", None)
    assert hf.HF_DEFAULT_SLIDING_WINDOW[family] == default


def _clean(p) -> dict:
    def num(v):
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v

    out = {k: num(v) for k, v in (p or {}).items() if v is not None and k not in ("mrope_section", "mrope_interleaved")}
    if out.get("partial_rotary_factor") == 1.0:  # stated 1.0 and absent rotate the same
        del out["partial_rotary_factor"]
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_rope_of_a_minimal_dict_is_the_family_class_s_or_refused(family: str) -> None:
    """Per rotating layer type, hf_rope_parameters equals the rope_parameters the family's class builds from the same
    dict (its class default dict where the file states none: gpt-oss's YaRN), or raises with a sentence."""
    for name, extra in ROPE_VARIANTS.items():
        body = {"num_hidden_layers": 12, **extra}
        try:
            theirs = _hf(family, body)
        except Exception:
            continue
        try:
            ours = hf.hf_rope_parameters({"model_type": family, **copy.deepcopy(body)})
        except ValueError as err:
            assert str(err), (family, name)
            continue
        kinds = _kinds(theirs) or tuple(ours)
        params = getattr(theirs, "rope_parameters", None)
        if params is None:  # the class keeps no rope dict (ESM, Moshi's depth decoder): nothing to compare
            continue
        nested = bool(params) and all(isinstance(v, dict) for v in params.values())
        for kind in dict.fromkeys(kinds):
            if kind == "linear_attention":
                continue
            assert _clean(ours[kind]) == _clean(params[kind] if nested else params), (family, name, kind)


# ---------------------------------------------------------------------------
# The page's cases: Gemma 3's published file, Cohere 2's and gpt-oss's class defaults
# ---------------------------------------------------------------------------


def test_gemma3_published_file_reads_as_gemma3config_builds_it() -> None:
    """google/gemma-3-4b-it's config.json states no layer pattern and no base: transformers builds 5 sliding : 1
    full, the sliding layers at 10,000 unscaled and the full ones linear 8 at 1,000,000; the library reads the same,
    and refuses the summary by name until the heads are filled in."""
    published = load_config("gemma-3-4b-it")
    body = {k: v for k, v in published.items() if not k.startswith("_") and k != "model_type"}
    theirs = _hf("gemma3", body).text_config
    assert hf.hf_layer_types(published) == tuple(theirs.layer_types)
    assert hf.hf_layer_types(published).count("full_attention") == 5
    ours = hf.hf_rope_parameters(published)
    assert {k: _clean(v) for k, v in ours.items()} == {k: _clean(v) for k, v in theirs.rope_parameters.items()}
    assert hf.rope_options_from_hf(published) == {"base": 1e6, "pairing": "half", "scaling": "linear", "factor": 8.0}
    assert hf.hf_sliding_window(published) == theirs.sliding_window == 1024
    with pytest.raises(ValueError, match=r"states no num_attention_heads.*'gemma3_text' fills its default \(8\)"):
        summarize_config(published)
    filled = transformers.AutoConfig.for_model(**published["text_config"]).to_dict()
    shipped = summarize_config(load_config("gemma-3-4b"))  # the extract, whose _source fills the class defaults
    summary = summarize_config(filled)
    assert (summary.base, summary.rotary_dim, summary.layers.kinds, summary.kv_per_token) == (
        shipped.base, shipped.rotary_dim, shipped.layers.kinds, shipped.kv_per_token)


@pytest.mark.parametrize("family,body", [
    ("cohere2", {"num_hidden_layers": 8, "sliding_window": 4096}),
    ("cohere2", {"num_hidden_layers": 8}),
    ("gpt_oss", {"num_hidden_layers": 6}),
    ("gpt_oss", {"num_hidden_layers": 6, "sliding_window": 128, "rope_theta": 150000.0}),
])
def test_cohere2_and_gpt_oss_class_defaults(family: str, body: dict) -> None:
    """Cohere2Config: 3 sliding : 1 full (sliding_window_pattern 4); GptOssConfig: sliding and full alternating, and
    YaRN factor 32 from 4,096 when the file states no rope_scaling (4.57's default is the same dict)."""
    theirs = _hf(family, body)
    config = {"model_type": family, **body}
    assert hf.hf_layer_types(config) == tuple(theirs.layer_types)
    ours = hf.hf_rope_parameters(config)
    for kind in set(theirs.layer_types):
        assert _clean(ours[kind]) == _clean(theirs.rope_parameters)
    if family == "gpt_oss":
        assert hf.rope_options_from_hf(config)["scaling"] == "yarn"
        with pytest.raises(ValueError, match="versions disagree"):
            hf.rope_options_from_hf({**config, "rope_scaling": None})  # 4.57: unscaled; 5.15: the class's YaRN
