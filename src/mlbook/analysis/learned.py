"""Section 2.2, learned absolute positions: what the table costs, which rows train, and the
silent decoding bug.

    learned_table_params      T_max * d_model, the table's parameter count
    gpt2_param_count          GPT-2's whole parameter count, to put the table in proportion
    short_length_distribution P(L = l) for mostly short training sequences
    expected_row_updates      steps in which row p gets a gradient: steps * (1 - (1 - P(L > p))^B)
    expected_row_examples     training sequences that reach row p: steps * B * P(L > p)
    train_tail_rows           trains a tiny GPT on such data and records which rows got gradients
    held_out_sequences        character windows from text that training did not read
    reset_decode_positions    context manager that plants the bug: every cached step at position 0
    decode_logit_drift        per decoding step, max |cached - full-forward logits| (the check)
    cached_matches_full       that check as a yes/no answer
    greedy_divergence         greedy continuations with and without the bug, and where they part
    drift_curves              the drift of a batch with and without the bug, and how long greedy
                              continuations stay identical despite it
    left_pad                  prompts of different lengths stacked into one left-padded batch
    position_ids_from_mask    per-row positions of a padded batch: mask.cumsum(-1) - 1 (Hugging Face's rule)
    padded_forward            logits of a padded batch with per-row position ids and padded keys masked
    left_padding_drift        per prompt, max |padded-batch logits - the prompt run alone|, positions
                              from the mask or from the column index (the batched form of the bug)

Nothing here plots; `mlbook.viz.learned` draws these results.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import torch

from mlbook.transformer.models import GPT, GPTConfig
from mlbook.transformer.positional import sinusoidal_positional_encoding
from mlbook.transformer.validate import check_int, check_positive_float

__all__ = [
    "learned_table_params",
    "gpt2_param_count",
    "short_length_distribution",
    "expected_row_updates",
    "expected_row_examples",
    "TailRowReport",
    "train_tail_rows",
    "held_out_sequences",
    "DECODE_BUG_SCHEMES",
    "reset_decode_positions",
    "decode_logit_drift",
    "DriftCurves",
    "drift_curves",
    "cached_matches_full",
    "GreedyDivergence",
    "greedy_divergence",
    "PADDED_SCHEMES",
    "left_pad",
    "position_ids_from_mask",
    "padded_forward",
    "left_padding_drift",
]


# ---------------------------------------------------------------------------
# Parameter cost
# ---------------------------------------------------------------------------


def learned_table_params(T_max: int, d_model: int) -> int:
    """Parameters of a learned position table P in R^(T_max x d_model): T_max * d_model.

    GPT-2 small (T_max = 1024, d = 768) has 786,432; a 128k-context table at d = 8192 has
    131,072 * 8192 = 1,073,741,824.
    """
    check_int("T_max", T_max, 1)
    check_int("d_model", d_model, 1)
    return T_max * d_model


def gpt2_param_count(
    n_layers: int = 12, d_model: int = 768, vocab_size: int = 50257, n_ctx: int = 1024, d_ff: int | None = None
) -> int:
    """Parameters of a GPT-2 model (Radford et al., 2019), output head tied to the token embedding.

    token table V d + position table n_ctx d
    + per layer: two LayerNorms 4d, attention 4 d^2 + 4d (qkv and output, with biases),
      MLP 2 d d_ff + d_ff + d (d_ff = 4d by default)
    + the final LayerNorm 2d.
    The defaults (GPT-2 small) give 124,439,808.
    """
    for name, value in (("n_layers", n_layers), ("d_model", d_model), ("vocab_size", vocab_size), ("n_ctx", n_ctx)):
        check_int(name, value, 1)
    d = d_model
    f = 4 * d if d_ff is None else check_int("d_ff", d_ff, 1)
    per_layer = 4 * d + (4 * d * d + 4 * d) + (2 * d * f + f + d)
    return vocab_size * d + learned_table_params(n_ctx, d) + n_layers * per_layer + 2 * d


# ---------------------------------------------------------------------------
# Which rows train: the length distribution decides
# ---------------------------------------------------------------------------


def short_length_distribution(T_max: int, mean_len: float, min_len: int = 2) -> torch.Tensor:
    """P(L = l) for l = 0 .. T_max: a geometric tail, P(L = l) proportional to exp(-l / mean_len) on
    min_len <= l <= T_max, zero below. Returns (T_max + 1,) float64 summing to 1; index = length.

    Most mass sits on short lengths, as in a corpus of short documents that is not packed.
    """
    check_int("T_max", T_max, 1)
    mean_len = check_positive_float("mean_len", mean_len)
    check_int("min_len", min_len, 1)
    if min_len > T_max:
        raise ValueError(f"min_len ({min_len}) must be <= T_max ({T_max})")
    lengths = torch.arange(T_max + 1, dtype=torch.float64)  # (T_max + 1,)
    probs = torch.exp(-lengths / mean_len)  # (T_max + 1,)
    probs[:min_len] = 0.0
    return probs / probs.sum()


def _check_length_probs(length_probs: object) -> torch.Tensor:
    if not isinstance(length_probs, torch.Tensor) or length_probs.dim() != 1 or length_probs.numel() < 2:
        raise TypeError("length_probs must be a 1-D tensor of shape (T_max + 1,): entry l is P(L = l)")
    p = length_probs.double()
    if (p < 0).any() or not math.isclose(float(p.sum()), 1.0, abs_tol=1e-6):
        raise ValueError(f"length_probs must be non-negative and sum to 1, got sum {float(p.sum()):.6g}")
    return p


def _reach(length_probs: torch.Tensor) -> torch.Tensor:
    """S(p) = P(L > p) for p = 0 .. T_max - 1: a sequence of length L fills positions 0 .. L - 1."""
    tail = length_probs.flip(0).cumsum(0).flip(0)  # (T_max + 1,) tail[l] = P(L >= l)
    return tail[1:].clamp(0.0, 1.0)  # (T_max,) P(L >= p + 1) = P(L > p)


def expected_row_updates(length_probs: torch.Tensor, steps: int, batch_size: int) -> torch.Tensor:
    """Expected number of steps in which row p of the table receives a gradient.

    Row p is used by a sequence of length L iff L > p. With B independent lengths per batch,
    a step touches row p unless all B are too short:

        E[steps with a gradient at row p] = steps * (1 - (1 - P(L > p))^B)

    length_probs: (T_max + 1,), entry l = P(L = l). Returns (T_max,) float64.
    """
    p = _check_length_probs(length_probs)
    check_int("steps", steps, 0)
    check_int("batch_size", batch_size, 1)
    return steps * (1.0 - (1.0 - _reach(p)) ** batch_size)  # (T_max,)


def expected_row_examples(length_probs: torch.Tensor, steps: int, batch_size: int) -> torch.Tensor:
    """Expected number of training sequences that reach row p: steps * B * P(L > p). (T_max,) float64."""
    p = _check_length_probs(length_probs)
    check_int("steps", steps, 0)
    check_int("batch_size", batch_size, 1)
    return steps * batch_size * _reach(p)  # (T_max,)


@dataclass
class TailRowReport:
    """What a short-sequence training run did to each row of the learned table.

    row_used[s, p]   True if row p received a nonzero gradient at step s       (steps, T_max)
    lengths[s, b]    length of sequence b at step s                            (steps, B)
    length_probs     the distribution the lengths were drawn from              (T_max + 1,)
    losses           training loss per step
    model            the trained GPT (positional="learned"), in eval mode
    """

    row_used: torch.Tensor
    lengths: torch.Tensor
    length_probs: torch.Tensor
    losses: list[float]
    batch_size: int
    model: GPT = field(repr=False)

    @property
    def steps(self) -> int:
        return int(self.row_used.shape[0])

    @property
    def T_max(self) -> int:
        return int(self.row_used.shape[1])

    def updates(self, step: int | None = None) -> torch.Tensor:
        """Steps (among the first `step`, default all) in which each row got a gradient: (T_max,) int64."""
        s = self.steps if step is None else check_int("step", step, 0)
        return self.row_used[:s].sum(0)  # (T_max,)

    def examples(self, step: int | None = None) -> torch.Tensor:
        """Training sequences (among the first `step` steps) that reached each row: (T_max,) int64."""
        s = self.steps if step is None else check_int("step", step, 0)
        positions = torch.arange(self.T_max)  # (T_max,)
        return (self.lengths[:s, :, None] > positions).sum((0, 1))  # (T_max,)

    def expected_updates(self, step: int | None = None) -> torch.Tensor:
        return expected_row_updates(self.length_probs, self.steps if step is None else step, self.batch_size)

    def expected_examples(self, step: int | None = None) -> torch.Tensor:
        return expected_row_examples(self.length_probs, self.steps if step is None else step, self.batch_size)


def train_tail_rows(
    T_max: int = 64,
    mean_len: float = 10.0,
    steps: int = 120,
    batch_size: int = 32,
    *,
    d_model: int = 32,
    n_layers: int = 2,
    n_heads: int = 2,
    lr: float = 3e-3,
    seed: int = 0,
    corpus_chars: int = 60_000,
) -> TailRowReport:
    """Train a tiny character GPT with learned positions on unpacked, mostly short sequences.

    Each sequence in a batch has its own length L ~ `short_length_distribution(T_max, mean_len)`;
    shorter ones are padded, with the loss masked on the padding, so row p of the table gets
    a gradient at a step only if some sequence in the batch has L > p. A gradient hook on the
    table records which rows received one at every step. Uses `mlbook.experiments.train`
    (AdamW, warm-up and cosine decay, weight decay on matrices) on one CPU thread. The
    defaults (the book's run) take a few seconds.
    """
    from mlbook.experiments.data import TOKENIZER, corpus_text
    from mlbook.experiments.train import TrainConfig, cpu_threads, train

    check_int("T_max", T_max, 2)
    check_int("steps", steps, 1)
    check_int("batch_size", batch_size, 1)
    check_int("corpus_chars", corpus_chars, T_max + 2)
    length_probs = short_length_distribution(T_max, mean_len)  # (T_max + 1,)
    tokens = TOKENIZER.encode(corpus_text()[:corpus_chars])  # (N,)
    lengths: list[torch.Tensor] = []

    def batches(step: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        L = torch.multinomial(length_probs.float(), batch_size, replacement=True, generator=gen)  # (B,)
        lengths.append(L)
        T = int(L.max())
        start = torch.randint(0, len(tokens) - T - 1, (batch_size,), generator=gen)  # (B,)
        window = tokens[start[:, None] + torch.arange(T + 1)[None, :]]  # (B, T + 1)
        x, y = window[:, :-1].clone(), window[:, 1:].clone()  # (B, T) each
        pad = torch.arange(T)[None, :] >= L[:, None]  # (B, T) True past each sequence's end
        x[pad], y[pad] = 0, -100  # padding: any token in, no loss out
        return x, y

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT(GPTConfig(vocab_size=TOKENIZER.vocab_size, d_model=d_model, n_heads=n_heads, n_layers=n_layers,
                              max_len=T_max, positional="learned"))
        assert model.pos_emb is not None
        used: list[torch.Tensor] = []
        hook = model.pos_emb.table.weight.register_hook(lambda g: used.append(g.abs().amax(dim=1) > 0))
        try:
            cfg = TrainConfig(steps=steps, batch_size=batch_size, lr=lr, warmup_steps=min(20, steps // 5), seed=seed)
            with cpu_threads(torch.device("cpu")):
                out = train(model, batches, cfg, device="cpu", progress=False)
        finally:
            hook.remove()
    model.eval()
    return TailRowReport(
        row_used=torch.stack(used), lengths=torch.stack(lengths), length_probs=length_probs, losses=out["loss"],
        batch_size=batch_size, model=model,
    )


def held_out_sequences(batch_size: int, length: int, *, seed: int = 0, start_char: int = 60_000,
                       n_chars: int = 60_000) -> torch.Tensor:
    """A (batch_size, length) batch of character windows from a stretch of the corpus that
    `train_tail_rows` (which reads its first 60,000 characters by default) never trains on."""
    from mlbook.experiments.data import TOKENIZER, corpus_text, random_windows

    check_int("start_char", start_char, 0)
    check_int("n_chars", n_chars, length + 2)
    tokens = TOKENIZER.encode(corpus_text()[start_char : start_char + n_chars])  # (n_chars,)
    x, _ = random_windows(tokens, batch_size, length, torch.Generator().manual_seed(seed))  # (B, length)
    return x


# ---------------------------------------------------------------------------
# The silent decoding bug
# ---------------------------------------------------------------------------

DECODE_BUG_SCHEMES: tuple[str, ...] = ("learned", "sinusoidal", "rope")


@contextlib.contextmanager
def reset_decode_positions(model: GPT) -> Iterator[GPT]:
    """Plant the bug for the duration of the block: every forward pass places its tokens at
    positions 0 .. T - 1, whatever the cache already holds, instead of at cache.length onwards.

    Works for positional="learned" and "sinusoidal" (the table is read at offset 0) and "rope"
    (queries and new keys are rotated at offset 0). The model is patched on the instance only,
    and restored on exit. A prefill from an empty cache is unaffected: its offset is 0 anyway.
    """
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a mlbook GPT, got {type(model).__name__}")
    scheme = model.config.positional
    if scheme not in DECODE_BUG_SCHEMES:
        raise ValueError(
            f"positional={scheme!r} has no absolute position index to reset: t5 and alibi derive the bias from "
            f"the cache length (T_q, T_k), and 'none' has no positions; use one of {', '.join(DECODE_BUG_SCHEMES)}"
        )
    if scheme == "rope":
        rotary = model.rotary
        assert rotary is not None
        correct = rotary.forward  # the cos/sin tables every rotation reads, MultiHeadAttention's included
        rotary.forward = lambda T, offset=0: correct(T, 0)  # type: ignore[method-assign]
        try:
            yield model
        finally:
            del rotary.forward  # the instance attribute; the class method shows through again
        return
    correct_abs = model.absolute_positions
    model.absolute_positions = lambda T, offset, device: correct_abs(T, 0, device)  # type: ignore[method-assign]
    try:
        yield model
    finally:
        del model.absolute_positions


def _check_tokens(model: GPT, tokens: object, n_prompt: int) -> torch.Tensor:
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a mlbook GPT, got {type(model).__name__}")
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.is_floating_point():
        raise TypeError("tokens must be an integer tensor of token ids with shape (B, T)")
    T = tokens.shape[1]
    check_int("n_prompt", n_prompt, 1)
    if n_prompt > T:
        raise ValueError(f"n_prompt ({n_prompt}) must be <= the number of tokens ({T})")
    if model.config.positional == "learned" and T > model.config.max_len:
        raise ValueError(f"tokens has {T} positions but the learned table has max_len={model.config.max_len} rows")
    return tokens


@contextlib.contextmanager
def _evaluating(model: GPT) -> Iterator[None]:
    """Eval mode, and on the CPU one intra-op thread (tiny models decode token by token: extra
    OpenMP threads only contend), both restored afterwards."""
    from mlbook.experiments.train import cpu_threads

    was_training = model.training
    model.eval()
    try:
        with cpu_threads(model.tok_emb.weight.device):
            yield
    finally:
        model.train(was_training)


@torch.no_grad()
def _cached_and_full(
    model: GPT, tokens: torch.Tensor, reset_positions: bool, n_prompt: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits at positions n_prompt - 1 .. T - 1 from cached decoding and from one full forward pass,
    each (B, T - n_prompt + 1, V) float64."""
    tokens = _check_tokens(model, tokens, n_prompt)
    if not isinstance(reset_positions, bool):
        raise TypeError(f"reset_positions must be a bool, got {type(reset_positions).__name__}")
    with _evaluating(model):
        T = tokens.shape[1]
        full = model(tokens).double()  # (B, T, V)
        caches = model.new_caches("kv", capacity=T)
        cached = [model(tokens[:, :n_prompt], caches)[:, -1:].double()]  # (B, 1, V) prefill from offset 0
        bug = reset_decode_positions(model) if reset_positions else contextlib.nullcontext()
        with bug:
            for t in range(n_prompt, T):
                cached.append(model(tokens[:, t : t + 1], caches).double())  # (B, 1, V) one new token
    return torch.cat(cached, dim=1), full[:, n_prompt - 1 :]  # (B, S, V) each, S = T - n_prompt + 1


def decode_logit_drift(
    model: GPT, tokens: torch.Tensor, *, reset_positions: bool, n_prompt: int = 1, reduce: str = "max"
) -> torch.Tensor:
    """Per decoding step, max |cached logits - full-forward logits|.

    The full forward pass runs `model(tokens)` once (every position in place). Cached decoding
    prefills `tokens[:, :n_prompt]`, then feeds tokens[:, t] one at a time through a KV cache
    (teacher forcing: the same tokens, so the two must agree). Entry 0 compares the prefill's
    last logits (position n_prompt - 1), entry s the logits at position n_prompt - 1 + s.
    With reset_positions=True every cached step runs under `reset_decode_positions`.

    A correct implementation gives float rounding (about 1e-6) at every step; asserting that is
    the check that catches the bug. reduce="max": (T - n_prompt + 1,) float64, the max over the
    batch and the vocabulary; reduce="none": (B, T - n_prompt + 1), the max over the vocabulary.
    """
    if reduce not in ("max", "none"):
        raise ValueError(f"reduce must be 'max' or 'none', got {reduce!r}")
    cached, full = _cached_and_full(model, tokens, reset_positions, n_prompt)
    per_sequence = (cached - full).abs().amax(dim=-1)  # (B, S)
    return per_sequence.amax(dim=0) if reduce == "max" else per_sequence


def cached_matches_full(model: GPT, tokens: torch.Tensor, *, n_prompt: int = 1, atol: float = 1e-4) -> bool:
    """The check: cached decoding reproduces the full forward pass's logits at every step, within atol."""
    atol = check_positive_float("atol", atol)
    return bool(decode_logit_drift(model, tokens, reset_positions=False, n_prompt=n_prompt).max() <= atol)


@dataclass(frozen=True)
class GreedyDivergence:
    """Greedy continuations of a batch of prompts, decoded correctly and with positions reset to 0.

    prompt (B, T), correct (B, n) and buggy (B, n) token ids.
    """

    prompt: torch.Tensor
    correct: torch.Tensor
    buggy: torch.Tensor

    def first_difference(self) -> torch.Tensor:
        """(B,) index of the first generated token that differs; n where the continuations agree."""
        differ = self.correct != self.buggy  # (B, n)
        n = differ.shape[1]
        idx = torch.where(differ, torch.arange(n), torch.full(differ.shape, n))  # (B, n)
        return idx.amin(dim=1)  # (B,)

    def still_identical(self) -> torch.Tensor:
        """(n,) float64: the fraction of sequences whose buggy continuation matches the correct one
        through generated token s (non-increasing in s)."""
        same_so_far = (self.correct == self.buggy).long().cumprod(dim=1)  # (B, n)
        return same_so_far.double().mean(dim=0)  # (n,)


@torch.no_grad()
def greedy_divergence(model: GPT, prompt: torch.Tensor, max_new_tokens: int) -> GreedyDivergence:
    """Generate greedily from a (B, T) prompt with `model.generate`, without and with the bug."""
    prompt = _check_tokens(model, prompt, 1)
    check_int("max_new_tokens", max_new_tokens, 1)
    if model.config.positional == "learned" and prompt.shape[1] + max_new_tokens > model.config.max_len:
        raise ValueError(
            f"prompt ({prompt.shape[1]}) + max_new_tokens ({max_new_tokens}) exceeds the learned table's "
            f"max_len={model.config.max_len}"
        )
    T = prompt.shape[1]
    with _evaluating(model):
        correct = model.generate(prompt, max_new_tokens, temperature=0)[:, T:]  # (B, max_new_tokens)
        with reset_decode_positions(model):
            buggy = model.generate(prompt, max_new_tokens, temperature=0)[:, T:]  # (B, max_new_tokens)
    return GreedyDivergence(prompt.clone(), correct, buggy)


@dataclass(frozen=True)
class DriftCurves:
    """Cached against full-forward decoding of a batch, correct and with the bug.

    positions[s]       absolute position of the token fed at step s (step 0: the prompt's last)  (S,)
    correct[s]         max |logit difference| over batch and vocabulary, correct offsets          (S,)
    buggy[b, s]        max |logit difference| over the vocabulary, positions reset to 0           (B, S)
    still_identical[s] fraction of free-running greedy continuations of the prompt that, with the
                       bug, still match the correct continuation through the token predicted at
                       step s                                                                     (S,)
    """

    n_prompt: int
    positions: torch.Tensor
    correct: torch.Tensor
    buggy: torch.Tensor
    still_identical: torch.Tensor


def drift_curves(model: GPT, tokens: torch.Tensor, n_prompt: int = 1) -> DriftCurves:
    """Teacher-forced drift of a (B, T) batch (see `decode_logit_drift`), correct and buggy, and the
    free-running greedy continuations of its first n_prompt tokens (see `greedy_divergence`)."""
    correct = decode_logit_drift(model, tokens, reset_positions=False, n_prompt=n_prompt)  # (S,)
    buggy = decode_logit_drift(model, tokens, reset_positions=True, n_prompt=n_prompt, reduce="none")  # (B, S)
    greedy = greedy_divergence(model, tokens[:, :n_prompt], buggy.shape[1])
    positions = torch.arange(n_prompt - 1, tokens.shape[1])  # (S,)
    return DriftCurves(n_prompt, positions, correct, buggy, greedy.still_identical())


# ---------------------------------------------------------------------------
# The same bug in batched generation: left padding
# ---------------------------------------------------------------------------

PADDED_SCHEMES: tuple[str, ...] = ("learned", "sinusoidal", "none")


def left_pad(prompts: Sequence[torch.Tensor], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack prompts of different lengths into one batch, padded on the left.

    Decoder-only models pad on the left so that every row's next token lands in the same, last,
    column. Returns idx (B, T) with pad_id in the padded slots and attention_mask (B, T) long,
    1 on real tokens and 0 on padding; T is the longest prompt's length.
    """
    if isinstance(prompts, torch.Tensor) or not isinstance(prompts, Sequence) or len(prompts) == 0:
        raise TypeError("prompts must be a non-empty list of 1-D integer tensors of token ids")
    for i, p in enumerate(prompts):
        if not isinstance(p, torch.Tensor) or p.dim() != 1 or p.is_floating_point() or p.numel() == 0:
            raise TypeError(f"prompts[{i}] must be a non-empty 1-D integer tensor of token ids")
    check_int("pad_id", pad_id, 0)
    T = max(p.numel() for p in prompts)
    idx = torch.full((len(prompts), T), pad_id, dtype=torch.long)  # (B, T)
    mask = torch.zeros(len(prompts), T, dtype=torch.long)  # (B, T)
    for b, p in enumerate(prompts):
        idx[b, T - p.numel():] = p.long()
        mask[b, T - p.numel():] = 1
    return idx, mask


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Per-row position ids of a padded batch: count real tokens, so each row starts at 0.

        position_ids = attention_mask.cumsum(-1) - 1,  then 0 in every padded slot

    This is the rule of Hugging Face's `GenerationMixin._prepare_position_ids_for_generation`
    (transformers 5.15: `attention_mask.long().cumsum(-1) - 1`, then `masked_fill(attention_mask
    == 0, 0)`). transformers 4.57 computed the same sum in `prepare_inputs_for_generation` and
    filled the pads with 1 instead; the filler is a dummy position that attention never reads
    (the pads are masked), so the real tokens' positions, and the outputs, are the same. Taking
    the column index instead, arange(T), shifts every real token of a row with k pads by k.
    attention_mask: (B, T) of 0/1 (integer or bool). Returns (B, T) long.
    """
    if not isinstance(attention_mask, torch.Tensor) or attention_mask.dim() != 2 or attention_mask.is_floating_point():
        raise TypeError("attention_mask must be a (B, T) integer or bool tensor of 0s and 1s")
    mask = attention_mask.long()
    if not ((mask == 0) | (mask == 1)).all():
        raise ValueError("attention_mask must hold only 0 (padding) and 1 (real token)")
    return (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)  # (B, T)


def _check_padded_model(model: object) -> GPT:
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a mlbook GPT, got {type(model).__name__}")
    if model.config.positional not in PADDED_SCHEMES:
        raise ValueError(
            f"positional={model.config.positional!r} is not supported here: padded_forward adds a position "
            f"table read at per-row position ids, so it needs one of {', '.join(PADDED_SCHEMES)}"
        )
    return model


@torch.no_grad()
def padded_forward(
    model: GPT, idx: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor
) -> torch.Tensor:
    """Logits (B, T, V) of a padded batch, each row placed at its own position ids.

    x = scale * E[idx] + table[position_ids] (the model's embedding scale and its learned or
    sinusoidal table; nothing for positional="none"), then the model's blocks with causal
    attention that also skips padded keys. A padded slot attends to itself only, so no row of
    the attention matrix is empty; real tokens never see padding.
    idx, attention_mask, position_ids: (B, T) each.
    """
    model = _check_padded_model(model)
    for name, t in (("idx", idx), ("attention_mask", attention_mask), ("position_ids", position_ids)):
        if not isinstance(t, torch.Tensor) or t.dim() != 2 or t.is_floating_point():
            raise TypeError(f"{name} must be a (B, T) integer tensor")
    if not (idx.shape == attention_mask.shape == position_ids.shape):
        raise ValueError(
            f"idx, attention_mask and position_ids must have one shape, got {tuple(idx.shape)}, "
            f"{tuple(attention_mask.shape)} and {tuple(position_ids.shape)}"
        )
    if (position_ids < 0).any():
        raise ValueError("position_ids must be >= 0")
    scheme = model.config.positional
    if scheme == "learned" and int(position_ids.max()) >= model.config.max_len:
        raise ValueError(
            f"position_ids reach {int(position_ids.max())} but the learned table has max_len={model.config.max_len} rows"
        )
    B, T = idx.shape
    x = model.tok_emb(idx) * model.emb_scale  # (B, T, d_model)
    if scheme == "learned":
        x = x + model.pos_emb.table(position_ids)  # (B, T, d_model) row position_ids[b, t]
    elif scheme == "sinusoidal":
        pe = sinusoidal_positional_encoding(int(position_ids.max()) + 1, model.config.d_model).to(x)  # (P, d_model)
        x = x + pe[position_ids]  # (B, T, d_model)
    keep = attention_mask.bool()[:, None, None, :] | torch.eye(T, dtype=torch.bool)[None, None]  # (B, 1, T, T)
    bias = torch.zeros(B, 1, T, T, dtype=x.dtype).masked_fill(~keep, float("-inf"))  # (B, 1, T, T) key padding
    for block in model.blocks:
        x, _ = block(x, position_bias=bias)  # (B, T, d_model); the block adds its causal mask
    return model.lm_head(model.norm_f(x))  # (B, T, V)


def left_padding_drift(
    model: GPT, prompts: Sequence[torch.Tensor], *, positions: str = "mask", pad_id: int = 0
) -> torch.Tensor:
    """Per prompt, max |logits in a left-padded batch - logits of that prompt run alone|, over its
    real tokens and the vocabulary: (B,) float64.

    positions="mask" places each row with `position_ids_from_mask` (correct: float rounding,
    about 1e-6); positions="arange" uses the column index 0 .. T - 1 for every row, the batched
    form of the decoding bug: a prompt with k pads is embedded at positions k, k + 1, ...,
    so only the longest prompts (no pads) come out right.
    """
    model = _check_padded_model(model)
    if positions not in ("mask", "arange"):
        raise ValueError(f"positions must be 'mask' or 'arange', got {positions!r}")
    idx, mask = left_pad(prompts, pad_id)  # (B, T) each
    T = idx.shape[1]
    if model.config.positional == "learned" and T > model.config.max_len:
        raise ValueError(f"the longest prompt has {T} tokens but the learned table has max_len={model.config.max_len} rows")
    pos = position_ids_from_mask(mask) if positions == "mask" else torch.arange(T).expand(len(prompts), T)  # (B, T)
    with _evaluating(model):
        batch = padded_forward(model, idx, mask, pos).double()  # (B, T, V)
        drift = []
        with torch.no_grad():
            for b, p in enumerate(prompts):
                alone = model(p.long()[None]).double()[0]  # (L, V)
                drift.append((batch[b, T - p.numel():] - alone).abs().max())
    return torch.stack(drift)  # (B,)
