"""The section 5.1 checker: the class's answer passes, each planted mistake is named, nothing prints the answer."""

from __future__ import annotations

import pytest

from mlbook.exercises import ANSWER_KEYS, GEMMA3_MINIMAL_FILE, check_gemma3_minimal_file

RIGHT = {"full_layers": [5, 11, 17, 23], "full_base": 1_000_000.0, "full_scaling": ("default", None),
         "sliding_base": 10_000.0}  # worked out by hand from Gemma3TextConfig's defaults (pattern 6, default_theta)


@pytest.mark.oracle
def test_the_right_answer_is_what_transformers_builds() -> None:
    """The hand-worked answer equals transformers' Gemma3TextConfig built from the file (the checker's readers are
    the library's; this pins them to the class)."""
    transformers = pytest.importorskip("transformers")
    from mlbook.transformer.hf import hf_rope_parameters

    body = {k: v for k, v in GEMMA3_MINIMAL_FILE.items() if k not in ("model_type", "architectures")}
    built = transformers.Gemma3TextConfig(**body)
    rope = hf_rope_parameters(built.to_dict())
    assert [i for i, k in enumerate(built.layer_types) if k == "full_attention"] == RIGHT["full_layers"]
    assert rope["full_attention"]["rope_theta"] == RIGHT["full_base"]
    assert (rope["full_attention"]["rope_type"], rope["full_attention"].get("factor")) == RIGHT["full_scaling"]
    assert rope["sliding_attention"]["rope_theta"] == RIGHT["sliding_base"]


def test_the_right_answer_passes(capsys) -> None:
    assert check_gemma3_minimal_file(RIGHT) is True
    assert capsys.readouterr().out.startswith("Correct.")
    assert check_gemma3_minimal_file({**RIGHT, "full_base": 1_000_000, "full_layers": (23, 5, 17, 11)}) is True


@pytest.mark.parametrize("answer", [None, dict.fromkeys(ANSWER_KEYS),
                                    {**dict.fromkeys(ANSWER_KEYS), "full_layers": []}])
def test_an_unanswered_dict_is_not_answered(answer, capsys) -> None:
    assert check_gemma3_minimal_file(answer) is False
    assert capsys.readouterr().out.startswith("Not answered yet")


MISTAKES = {
    "every layer sliding": ({"full_layers": []}, "Mistral's rule"),
    "1-based indices": ({"full_layers": [6, 12, 18, 24]}, "counted from 1"),
    "pattern from layer 0": ({"full_layers": [0, 6, 12, 18, 24]}, "starts the pattern at layer 0"),
    "the 4B file's layers": ({"full_layers": [5, 11, 17, 23, 29]}, "does not have: it has 26 layers"),
    "10,000 on the full layers": ({"full_base": 10_000.0}, "RoPE's generic base"),
    "bases swapped": ({"full_base": 10_000.0, "sliding_base": 1_000_000.0}, "swapped"),
    "the 4B file's factor": ({"full_scaling": ("linear", 8.0)}, "belongs to the 4B file"),
    "a factor without scaling": ({"full_scaling": ("default", 8.0)}, "has no factor"),
    "the factor on the sliding base": ({"sliding_base": 80_000.0}, "local base"),
}


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_each_mistake_is_named_without_the_answer(name, capsys) -> None:
    change, phrase = MISTAKES[name]
    assert check_gemma3_minimal_file({**RIGHT, **change}) is False
    out = capsys.readouterr().out
    assert out.startswith("Not yet.") and phrase in out
    assert "[5, 11, 17, 23]" not in out and "1,000,000" not in out and "1e+06" not in out


@pytest.mark.parametrize("answer", [[1], "5, 11", {**RIGHT, "full_layers": "5,11"}, {**RIGHT, "full_base": "big"},
                                    {**RIGHT, "full_scaling": "default"}])
def test_an_answer_of_the_wrong_kind_is_named_and_never_raises(answer, capsys) -> None:
    assert check_gemma3_minimal_file(answer) is False
    assert capsys.readouterr().out.startswith("Not yet.")


def test_the_checker_does_not_change_the_answer_or_the_file() -> None:
    answer = {**RIGHT, "full_layers": [23, 5, 17, 11]}
    before, file_before = repr(answer), repr(GEMMA3_MINIMAL_FILE)
    check_gemma3_minimal_file(answer)
    assert repr(answer) == before and repr(GEMMA3_MINIMAL_FILE) == file_before


def test_a_partly_filled_answer_is_not_yet_answered_and_numpy_indices_are_read(capsys) -> None:
    import numpy as np

    from mlbook.exercises import check_gemma3_minimal_file
    from mlbook.exercises.configs import ANSWER_KEYS

    assert not check_gemma3_minimal_file({"full_layers": [5], "full_base": None, "sliding_base": None,
                                          "full_scaling": None})
    out = capsys.readouterr().out
    assert "Not answered yet" in out and "full_scaling" in out and "return statement" not in out
    assert not check_gemma3_minimal_file({k: ([np.int64(3)] if k == "full_layers" else 1.0) for k in ANSWER_KEYS})
    assert "should be a list of layer indices" not in capsys.readouterr().out


def test_an_array_of_indices_is_read_and_a_repeated_layer_named(capsys) -> None:
    import numpy as np

    from mlbook.exercises import check_gemma3_minimal_file

    right = {"full_layers": np.array([5, 11, 17, 23]), "full_base": 1e6, "sliding_base": 1e4,
             "full_scaling": ("default", None)}
    assert check_gemma3_minimal_file(right)
    capsys.readouterr()
    assert not check_gemma3_minimal_file({**right, "full_layers": [5, 5, 11, 17, 23]})
    assert "lists a layer twice" in capsys.readouterr().out
