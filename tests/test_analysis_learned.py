"""Tests for mlbook.analysis.learned: table cost, tail-row statistics, the planted decoding bug.

Oracles: Hugging Face's GPT-2 (parameter counts, built on the meta device), a Monte Carlo
simulation of batch lengths (expected row updates), and, for the decoding bug, a full
forward pass of a model whose table rows were overwritten with row 0 exactly where the bug
puts them (cached decoding with the bug must reproduce it).
"""

from __future__ import annotations

import copy

import pytest
import torch

from hf_versions import hf4_only
from mlbook.analysis import learned as L
from mlbook.transformer.models import GPT, GPTConfig
from mlbook.transformer.positional import LearnedPositionalEmbedding


def _gpt(positional: str = "learned", seed: int = 0, **kw) -> GPT:
    torch.manual_seed(seed)
    cfg = dict(vocab_size=31, d_model=16, n_heads=2, n_layers=2, max_len=32, positional=positional)
    cfg.update(kw)
    return GPT(GPTConfig(**cfg)).eval()


def _tokens(B: int = 3, T: int = 20, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 31, (B, T), generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------------------
# Parameter cost
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("T_max, d", [(1, 1), (16, 8), (1024, 768)])
def test_learned_table_params_is_the_table_size(T_max, d):
    assert L.learned_table_params(T_max, d) == LearnedPositionalEmbedding(T_max, d).table.weight.numel()


def test_learned_table_params_spec_numbers():
    assert L.learned_table_params(1024, 768) == 786_432
    assert L.learned_table_params(131_072, 8192) == 1_073_741_824  # not "100M"
    assert L.learned_table_params(131_072, 768) == 100_663_296


@pytest.mark.parametrize("cfg", [{}, {"n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 100, "n_positions": 48},
                                 {"n_layer": 3, "n_embd": 32, "n_head": 2, "vocab_size": 7, "n_positions": 5, "n_inner": 40}])
def test_gpt2_param_count_matches_hugging_face(cfg):
    transformers = pytest.importorskip("transformers")
    hf_cfg = transformers.GPT2Config(**cfg)
    with torch.device("meta"):
        model = transformers.GPT2LMHeadModel(hf_cfg)
    want = sum(p.numel() for p in model.parameters())
    got = L.gpt2_param_count(hf_cfg.n_layer, hf_cfg.n_embd, hf_cfg.vocab_size, hf_cfg.n_positions, hf_cfg.n_inner)
    assert got == want
    assert model.transformer.wpe.weight.numel() == L.learned_table_params(hf_cfg.n_positions, hf_cfg.n_embd)


@pytest.mark.parametrize("bad, exc", [({"T_max": 0}, ValueError), ({"T_max": 2.0}, TypeError), ({"d_model": -1}, ValueError)])
def test_learned_table_params_rejects_bad_input(bad, exc):
    kw = {"T_max": 4, "d_model": 4, **bad}
    with pytest.raises(exc, match=next(iter(bad))):
        L.learned_table_params(**kw)


# ---------------------------------------------------------------------------
# Length distribution and expected row statistics
# ---------------------------------------------------------------------------


def test_short_length_distribution_is_a_decreasing_distribution():
    p = L.short_length_distribution(64, 10.0, min_len=2)
    assert p.shape == (65,) and p.dtype == torch.float64
    assert abs(float(p.sum()) - 1.0) < 1e-12
    assert (p[:2] == 0).all() and (p[2:] > 0).all()
    assert (p[3:] < p[2:-1]).all(), "geometric tail: each length less likely than the one before"
    ratio = p[3:] / p[2:-1]
    assert torch.allclose(ratio, torch.full_like(ratio, float(torch.exp(torch.tensor(-0.1, dtype=torch.float64)))))


def _simulate(probs: torch.Tensor, steps: int, B: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    L_ = torch.multinomial(probs.float(), steps * B, replacement=True, generator=gen).reshape(steps, B)
    rows = torch.arange(probs.numel() - 1)
    reached = L_[:, :, None] > rows  # (steps, B, T_max)
    return reached.any(1).sum(0).double(), reached.sum((0, 1)).double()


@pytest.mark.parametrize("B", [1, 4, 16])
def test_expected_row_updates_matches_monte_carlo(B):
    probs = L.short_length_distribution(24, 5.0)
    steps = 20_000
    updates, examples = _simulate(probs, steps, B)
    want_u = L.expected_row_updates(probs, steps, B)
    want_e = L.expected_row_examples(probs, steps, B)
    # binomial standard errors, 5 sigma
    p_u = want_u / steps
    assert ((updates - want_u).abs() <= 5 * torch.sqrt(steps * p_u * (1 - p_u)) + 1).all()
    assert ((examples - want_e).abs() <= 5 * torch.sqrt(want_e) + 1).all()


def test_expected_row_updates_point_mass_has_no_off_by_one():
    probs = torch.zeros(9, dtype=torch.float64)
    probs[5] = 1.0  # every sequence has length 5: positions 0..4
    got = L.expected_row_updates(probs, steps=7, batch_size=3)
    assert got.tolist() == [7, 7, 7, 7, 7, 0, 0, 0]
    assert L.expected_row_examples(probs, 7, 3).tolist() == [21, 21, 21, 21, 21, 0, 0, 0]


@pytest.mark.parametrize("probs, exc", [(torch.ones(5), ValueError), ([0.5, 0.5], TypeError),
                                        (torch.tensor([1.5, -0.5]), ValueError)])
def test_expected_row_updates_rejects_bad_distributions(probs, exc):
    with pytest.raises(exc, match="length_probs"):
        L.expected_row_updates(probs, 10, 2)


# ---------------------------------------------------------------------------
# The training run: which rows received a gradient
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_run() -> L.TailRowReport:
    return L.train_tail_rows(T_max=16, mean_len=4.0, steps=12, batch_size=4, d_model=16, n_layers=1, seed=3,
                             corpus_chars=5_000)


def test_tail_rows_gradient_iff_some_sequence_reaches_the_row(small_run):
    r = small_run
    assert r.row_used.shape == (12, 16) and r.lengths.shape == (12, 4)
    reached = (r.lengths[:, :, None] > torch.arange(16)).any(dim=1)  # (steps, T_max)
    assert torch.equal(r.row_used, reached), "padding is masked: exactly the reached rows get gradients"
    assert torch.equal(r.updates(), reached.sum(0))
    assert torch.equal(r.examples(5), (r.lengths[:5, :, None] > torch.arange(16)).sum((0, 1)))
    assert (r.updates()[1:] <= r.updates()[:-1]).all()


def test_tail_rows_returns_a_trained_learned_gpt(small_run):
    r = small_run
    assert isinstance(r.model, GPT) and r.model.config.positional == "learned" and not r.model.training
    assert len(r.losses) == 12 and r.losses[-1] < r.losses[0]
    assert torch.allclose(r.expected_updates(), L.expected_row_updates(r.length_probs, 12, 4))


def test_tail_rows_is_seeded_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = L.train_tail_rows(T_max=8, mean_len=3.0, steps=3, batch_size=2, d_model=8, n_layers=1, seed=5, corpus_chars=2_000)
    after = torch.rand(1)
    b = L.train_tail_rows(T_max=8, mean_len=3.0, steps=3, batch_size=2, d_model=8, n_layers=1, seed=5, corpus_chars=2_000)
    assert torch.equal(before, after)
    assert torch.equal(a.lengths, b.lengths) and a.losses == b.losses


def test_held_out_sequences_shape_and_determinism():
    x = L.held_out_sequences(5, 12, seed=2)
    assert x.shape == (5, 12) and x.dtype == torch.long
    assert torch.equal(x, L.held_out_sequences(5, 12, seed=2))


# ---------------------------------------------------------------------------
# The decoding bug and its check
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("positional", ["learned", "sinusoidal", "rope", "t5", "alibi", "none"])
def test_correct_cached_decoding_matches_full_forward(positional):
    model = _gpt(positional)
    drift = L.decode_logit_drift(model, _tokens(), reset_positions=False, n_prompt=3)
    assert drift.shape == (18,)
    assert float(drift.max()) < 1e-4
    assert L.cached_matches_full(model, _tokens())


@pytest.mark.parametrize("positional", L.DECODE_BUG_SCHEMES)
def test_bug_is_exact_at_prefill_and_caught_from_the_first_cached_step(positional):
    model = _gpt(positional)
    for n_prompt in (1, 4):
        rounding = float(L.decode_logit_drift(model, _tokens(), reset_positions=False, n_prompt=n_prompt).max())
        drift = L.decode_logit_drift(model, _tokens(), reset_positions=True, n_prompt=n_prompt)
        assert float(drift[0]) <= rounding, "the prefill starts at offset 0 anyway"
        # an untrained model attends almost uniformly, so the error is small, but far above rounding
        assert (drift[1:] > 100 * rounding).all(), "every cached step is wrong"


def test_bug_equals_full_forward_with_row_zero_at_every_decoded_position():
    """Independent oracle: the buggy cache embeds every decoded token with row 0, so it must equal
    a correct full forward pass of a copy whose rows n_prompt.. were overwritten with row 0."""
    model, x, n_prompt = _gpt("learned"), _tokens(), 4
    oracle = copy.deepcopy(model)
    with torch.no_grad():
        oracle.pos_emb.table.weight[n_prompt:] = oracle.pos_emb.table.weight[0]
        want = oracle(x)[:, n_prompt - 1 :].double()  # (B, S, V)
    got = L._cached_and_full(model, x, True, n_prompt)[0]
    assert torch.allclose(got, want, atol=1e-5)


def test_reset_decode_positions_restores_the_model_and_touches_only_that_instance():
    model, other = _gpt("learned"), _gpt("learned")
    rope = _gpt("rope")
    x = _tokens()
    with L.reset_decode_positions(model) as patched, L.reset_decode_positions(rope):
        assert patched is model
        assert L.cached_matches_full(other, x), "another instance is unaffected"
        assert not L.cached_matches_full(model, x)
        assert not L.cached_matches_full(rope, x)
    assert "_absolute" not in vars(model) and "forward" not in vars(rope.rotary)
    assert L.cached_matches_full(model, x) and L.cached_matches_full(rope, x)


def test_reset_decode_positions_restores_after_an_exception():
    model = _gpt("sinusoidal")
    with pytest.raises(RuntimeError):
        with L.reset_decode_positions(model):
            raise RuntimeError("boom")
    assert L.cached_matches_full(model, _tokens())


@pytest.mark.parametrize("positional", ["t5", "alibi", "none"])
def test_reset_decode_positions_refuses_schemes_without_an_index(positional):
    with pytest.raises(ValueError, match="no absolute position index"):
        with L.reset_decode_positions(_gpt(positional)):
            pass


def test_decode_logit_drift_reduce_and_training_mode():
    model = _gpt("learned").train()
    per_seq = L.decode_logit_drift(model, _tokens(), reset_positions=True, reduce="none")
    assert per_seq.shape == (3, 20)
    assert torch.equal(per_seq.amax(0), L.decode_logit_drift(model, _tokens(), reset_positions=True))
    assert model.training, "the caller's mode is restored"


@pytest.mark.parametrize("call, exc, pattern", [
    (lambda m: L.decode_logit_drift(m, _tokens(), reset_positions=1), TypeError, "reset_positions"),
    (lambda m: L.decode_logit_drift(m, _tokens().float(), reset_positions=False), TypeError, "tokens"),
    (lambda m: L.decode_logit_drift(m, _tokens(T=40), reset_positions=False), ValueError, "max_len"),
    (lambda m: L.decode_logit_drift(m, _tokens(), reset_positions=False, n_prompt=21), ValueError, "n_prompt"),
    (lambda m: L.decode_logit_drift(m, _tokens(), reset_positions=False, reduce="mean"), ValueError, "reduce"),
    (lambda m: L.decode_logit_drift(torch.nn.Linear(2, 2), _tokens(), reset_positions=False), TypeError, "GPT"),
    (lambda m: L.cached_matches_full(m, _tokens(), atol=0.0), ValueError, "atol"),
    (lambda m: L.greedy_divergence(m, _tokens(T=30), 5), ValueError, "max_len"),
])
def test_decoding_checks_reject_bad_input(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call(_gpt("learned"))


def test_greedy_divergence_first_token_always_agrees():
    model = _gpt("learned")
    prompt = _tokens(B=6, T=5)
    div = L.greedy_divergence(model, prompt, 12)
    assert div.correct.shape == div.buggy.shape == (6, 12)
    assert torch.equal(div.correct, model.generate(prompt, 12, temperature=0)[:, 5:])
    assert (div.first_difference() >= 1).all(), "the first generated token comes from the correct prefill"
    same = div.still_identical()
    assert float(same[0]) == 1.0 and (same[1:] <= same[:-1]).all()
    first = div.first_difference()
    for s in range(12):
        assert float(same[s]) == pytest.approx(float((first > s).double().mean()))


def test_drift_curves_fields():
    model = _gpt("learned")
    c = L.drift_curves(model, _tokens(B=4, T=16), n_prompt=3)
    assert c.positions.tolist() == list(range(2, 16))
    assert c.correct.shape == (14,) and c.buggy.shape == (4, 14) and c.still_identical.shape == (14,)
    assert float(c.correct.max()) < 1e-4 and float(c.buggy[:, 0].max()) < 1e-5 and (c.buggy[:, 1:] > 1e-4).all()


# ---------------------------------------------------------------------------
# Left padding: the batched form of the bug
# ---------------------------------------------------------------------------


def _prompts(lengths=(20, 12, 5), seed: int = 1) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(1, 31, (n,), generator=g) for n in lengths]


def test_left_pad_puts_every_prompt_flush_right():
    idx, mask = L.left_pad(_prompts(), pad_id=0)
    assert idx.shape == mask.shape == (3, 20)
    for b, p in enumerate(_prompts()):
        assert torch.equal(idx[b, 20 - len(p):], p) and (idx[b, : 20 - len(p)] == 0).all()
        assert mask[b].tolist() == [0] * (20 - len(p)) + [1] * len(p)


def test_position_ids_from_mask_counts_real_tokens_before_each_slot():
    """Oracle: a loop that counts the real tokens before each slot; padded slots get 0 (transformers 5)."""
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 1, 0, 1, 1]])
    want = [[0 if m == 0 else sum(row[:t]) for t, m in enumerate(row)] for row in mask.tolist()]
    assert L.position_ids_from_mask(mask).tolist() == want
    assert L.position_ids_from_mask(mask.bool()).tolist() == want


def _tiny_llama():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=2)
    return transformers.LlamaForCausalLM(cfg).eval()


@pytest.mark.oracle
def test_position_ids_from_mask_equals_hugging_face_generate():
    """Oracle in the pinned transformers 5: `generate` takes its position ids from
    `_prepare_position_ids_for_generation`, pads included (filled with 0)."""
    hf = _tiny_llama()
    if not hasattr(hf, "_prepare_position_ids_for_generation"):
        pytest.skip("transformers 4.x: see the hf4 test below")
    idx, mask = L.left_pad(_prompts((7, 3, 5)))
    want = hf._prepare_position_ids_for_generation(idx, {"attention_mask": mask})
    assert (mask == 0).any(), "the oracle must see padded slots"
    assert torch.equal(L.position_ids_from_mask(mask), want)


@hf4_only("prepare_inputs_for_generation returns position_ids in 4.x only")
def test_position_ids_from_mask_equals_hugging_face_4_generate_on_every_real_token():
    """4.57 filled the pads with 1 instead of 0: the real tokens' positions agree, the pads' dummy differs."""
    hf = _tiny_llama()
    idx, mask = L.left_pad(_prompts((7, 3, 5)))
    want = hf.prepare_inputs_for_generation(idx, attention_mask=mask)["position_ids"]
    got = L.position_ids_from_mask(mask)
    real = mask.bool()
    assert torch.equal(got[real], want[real])
    assert (want[~real] == 1).all() and (got[~real] == 0).all()


@pytest.mark.parametrize("positional", ["learned", "sinusoidal"])
def test_left_padding_needs_positions_from_the_mask(positional):
    model, prompts = _gpt(positional), _prompts()
    assert (L.left_padding_drift(model, prompts, positions="mask") < 1e-5).all()
    naive = L.left_padding_drift(model, prompts, positions="arange")
    assert float(naive[0]) < 1e-5, "the longest prompt has no pads: the column index is its position"
    assert (naive[1:] > 1e-3).all(), "every padded prompt is shifted by its pad count"


def test_left_padding_rule_does_not_matter_without_a_position_table():
    drift = L.left_padding_drift(_gpt("none"), _prompts(), positions="arange")
    assert (drift < 1e-5).all(), "with no position table the rule cannot matter: only the masks do"


def test_padded_forward_without_padding_equals_the_plain_forward():
    model, x = _gpt("learned", scale_embeddings=True), _tokens()
    mask = torch.ones_like(x)
    got = L.padded_forward(model, x, mask, L.position_ids_from_mask(mask))
    with torch.no_grad():
        assert torch.allclose(got, model(x), atol=1e-5)


@pytest.mark.parametrize("call, exc, pattern", [
    (lambda: L.left_padding_drift(_gpt("rope"), _prompts()), ValueError, "not supported"),
    (lambda: L.left_padding_drift(_gpt("learned"), _prompts(), positions="cumsum"), ValueError, "positions"),
    (lambda: L.left_padding_drift(_gpt("learned"), _prompts((40, 3))), ValueError, "max_len"),
    (lambda: L.left_pad([]), TypeError, "prompts"),
    (lambda: L.left_pad([torch.tensor([1.0, 2.0])]), TypeError, r"prompts\[0\]"),
    (lambda: L.position_ids_from_mask(torch.tensor([[0, 2, 1]])), ValueError, "only 0"),
    (lambda: L.position_ids_from_mask(torch.ones(2, 3)), TypeError, "attention_mask"),
    (lambda: L.padded_forward(_gpt("learned"), _tokens(), torch.ones(3, 5, dtype=torch.long),
                              torch.zeros(3, 5, dtype=torch.long)), ValueError, "one shape"),
])
def test_left_padding_helpers_reject_bad_input(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


@pytest.mark.oracle
def test_opt_adds_its_offset_to_given_position_ids_and_roberta_reads_them_as_rows():
    """Section 2.2's packing note, against transformers: OPT's port adds 2 to the ids it is given (so it takes
    0-based ids), RoBERTa's looks them up as they are (so packing needs position_ids_start = padding_idx + 1)."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.opt.modeling_opt import OPTLearnedPositionalEmbedding
    from transformers.models.roberta.modeling_roberta import RobertaEmbeddings

    opt = OPTLearnedPositionalEmbedding(8, 4)
    ids = torch.arange(5)[None]  # (1, 5) 0-based, as the collator's default gives them
    with torch.no_grad():
        assert torch.equal(opt(torch.ones(1, 5, dtype=torch.long), position_ids=ids)[0], opt.weight[2:7])
        assert torch.equal(opt(torch.ones(1, 5, dtype=torch.long))[0], opt.weight[2:7]), "no ids: from the mask"
    cfg = transformers.RobertaConfig(vocab_size=10, hidden_size=4, num_attention_heads=1, max_position_embeddings=9,
                                     pad_token_id=1)
    emb = RobertaEmbeddings(cfg).eval()
    seen = []
    emb.position_embeddings.register_forward_hook(lambda mod, args, out: seen.append(args[0].clone()))
    tokens = torch.tensor([[3, 4, 5, 6, 7]])  # no pad token (id 1)
    with torch.no_grad():
        emb(tokens, position_ids=ids)
        emb(tokens)
    assert seen[0].tolist() == [[0, 1, 2, 3, 4]], "given ids are read as rows, the second token on the padding row"
    assert seen[1].tolist() == [[2, 3, 4, 5, 6]], "RoBERTa's own ids start at padding_idx + 1 = 2"
    collator = transformers.DataCollatorWithFlattening()
    if hasattr(collator, "position_ids_start"):
        assert collator.position_ids_start == 0
