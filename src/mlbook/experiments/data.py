"""Data with no download: the standard library's own documentation, at character level, and a
synthetic passkey-retrieval task.

The corpus is `pydoc_data.topics`, the help texts that ship with every CPython (about 0.46 M
characters of English prose and code). Its exact text varies a little between Python versions,
so every result records the version it was computed on.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass

import torch

from mlbook.transformer.validate import check_int

__all__ = ["CharTokenizer", "TOKENIZER", "corpus_text", "corpus_tokens", "split_tokens", "random_windows",
           "PasskeyTask", "digit_accuracy", "passkey_and_text"]


class CharTokenizer:
    """A fixed character vocabulary: newline, printable ASCII 32..126, and one unknown id (96)."""

    def __init__(self) -> None:
        self.chars = ["\n"] + [chr(c) for c in range(32, 127)]
        self.stoi = {ch: i for i, ch in enumerate(self.chars)}
        self.unk = len(self.chars)
        self.vocab_size = len(self.chars) + 1

    def encode(self, text: str) -> torch.Tensor:
        return torch.tensor([self.stoi.get(ch, self.unk) for ch in text], dtype=torch.long)

    def decode(self, ids: torch.Tensor | list[int]) -> str:
        return "".join(self.chars[i] if i < self.unk else "?" for i in (ids.tolist() if torch.is_tensor(ids) else ids))


TOKENIZER = CharTokenizer()


def corpus_text() -> str:
    """The concatenated help topics of this Python's `pydoc_data`, in a fixed (sorted) order."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key].strip() for key in sorted(topics))


_CACHE: dict[str, torch.Tensor] = {}


def corpus_tokens() -> torch.Tensor:
    """The corpus as a 1-D long tensor of character ids (cached)."""
    key = sys.version
    if key not in _CACHE:
        _CACHE[key] = TOKENIZER.encode(corpus_text())
    return _CACHE[key]


def split_tokens(tokens: torch.Tensor, val_fraction: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """Train on the first 1 - val_fraction of the stream, evaluate on the rest (no overlap)."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    cut = int(len(tokens) * (1 - val_fraction))
    return tokens[:cut], tokens[cut:]


def random_windows(tokens: torch.Tensor, batch_size: int, length: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of (inputs, targets), each (batch_size, length), shifted by one character."""
    check_int("batch_size", batch_size, 1)
    check_int("length", length, 1)
    if len(tokens) <= length + 1:
        raise ValueError(f"length ({length}) must be shorter than the token stream ({len(tokens)})")
    start = torch.randint(0, len(tokens) - length - 1, (batch_size,), generator=generator)  # (B,)
    offsets = torch.arange(length + 1)  # (length + 1,)
    window = tokens[start[:, None] + offsets[None, :]]  # (B, length + 1)
    return window[:, :-1], window[:, 1:]


@dataclass
class PasskeyTask:
    """A key hidden in filler, to be recalled at the end (Mohtashami & Jaggi, 2023, in miniature).

    A sequence of exactly `length` characters: filler sentences, with the sentence
    "the pass key is NNNNN. " inserted at `depth` (0 = start, 1 = just before the question),
    ending in the question "what is the pass key? NNNNN" whose digits are the targets.
    """

    n_digits: int = 5
    filler: str = "the grass is green. the sky is blue. the sun is yellow. here we go again. "

    def sample(self, length: int, depth: float, rng: random.Random) -> tuple[str, str]:
        """Returns (text, key); text has exactly `length` characters and ends with the key."""
        key = "".join(rng.choice("0123456789") for _ in range(self.n_digits))
        needle = f"the pass key is {key}. "
        question = f"what is the pass key? {key}"
        room = length - len(needle) - len(question)
        if room < 0:
            raise ValueError(f"length {length} is too short for the passkey task (needs {len(needle) + len(question)})")
        if not 0.0 <= depth <= 1.0:
            raise ValueError(f"depth must be in [0, 1], got {depth}")
        # The filler is a window of the repeated sentences that ends at a word boundary (so the
        # question never splices into a word); it may start mid-word, as any window of text does.
        # The needle goes in at the word boundary nearest to depth * room.
        text = self.filler * (room // len(self.filler) + 3)
        end = room + rng.randrange(len(self.filler))
        while text[end - 1] != " ":
            end += 1
        filler = text[end - room : end]  # (room,) characters, the last one a space
        target = depth * room
        bounds = [k for k in range(room + 1) if k == 0 or filler[k - 1] == " "]
        at = min(bounds, key=lambda k: (abs(k - target), k))
        return filler[:at] + needle + filler[at:] + question, key

    # the key's first digit sits this many characters after the start of the needle, and the answer's first
    # digit this many after the start of the question
    KEY_OFFSET = len("the pass key is ")
    ANSWER_OFFSET = len("what is the pass key? ")

    def sample_at(self, length: int, distance: int, rng: random.Random) -> tuple[str, str, int]:
        """Like `sample`, but with the key placed `distance` characters before the answer: the answer's
        first digit (the first scored target) sits `distance` characters after the key's first digit, so
        each answer digit is predicted by a query distance - 1 positions after its key digit. The needle
        goes in at the word boundary nearest to that place; returns (text, key, the distance achieved)."""
        check_int("length", length, 1)
        check_int("distance", distance, 1)
        needle_len = self.KEY_OFFSET + self.n_digits + 2
        nearest = needle_len - self.KEY_OFFSET + self.ANSWER_OFFSET  # the needle right before the question
        farthest = length - self.n_digits - self.KEY_OFFSET  # the needle at the very start
        if not nearest <= distance <= farthest:
            raise ValueError(f"distance must be in [{nearest}, {farthest}] for length {length}, got {distance}")
        depth_of = lambda at, room: at / room if room else 0.0  # noqa: E731
        room = length - needle_len - (self.ANSWER_OFFSET + self.n_digits)
        at = length - self.n_digits - self.KEY_OFFSET - distance  # where the needle starts in the filler
        text, key = self.sample(length, depth_of(at, room), rng)
        got = (length - self.n_digits) - (text.index("the pass key is ") + self.KEY_OFFSET)
        return text, key, got

    def batch_at(self, batch_size: int, length: int, distance: int, rng: random.Random
                 ) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
        """(inputs, targets, distances achieved): `batch` with every key `distance` characters before the
        answer (`sample_at`)."""
        rows = [self.sample_at(length, distance, rng) for _ in range(batch_size)]
        ids = torch.stack([TOKENIZER.encode(r[0]) for r in rows])  # (B, length)
        targets = torch.full_like(ids[:, 1:], -100)  # (B, length - 1)
        targets[:, -self.n_digits :] = ids[:, -self.n_digits :]
        return ids[:, :-1], targets, [r[2] for r in rows]

    def batch(self, batch_size: int, length: int, rng: random.Random, depth: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(inputs, targets), each (B, length - 1); targets are -100 except on the key's digits."""
        rows = [self.sample(length, rng.random() if depth is None else depth, rng)[0] for _ in range(batch_size)]
        ids = torch.stack([TOKENIZER.encode(r) for r in rows])  # (B, length)
        targets = torch.full_like(ids[:, 1:], -100)  # (B, length - 1) ignore everything ...
        targets[:, -self.n_digits :] = ids[:, -self.n_digits :]  # ... but the digits of the answer
        return ids[:, :-1], targets


def digit_accuracy(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Accuracy on the scored positions only (targets != -100), each row holding the same number
    of them. Returns (all digits right per row (B,), right per digit (B, n_digits)), both float."""
    scored = targets != -100  # (B, T)
    n = int(scored[0].sum())
    if n == 0 or not bool((scored.sum(1) == n).all()):
        raise ValueError("every row must score the same, non-zero number of positions (the key's digits)")
    pred = logits.argmax(-1)[scored].view(-1, n)  # (B, n)
    right = (pred == targets[scored].view(-1, n)).float()  # (B, n)
    return right.min(1).values, right


def passkey_and_text(task: PasskeyTask, text: torch.Tensor, length: int, batch_size: int, every: int,
                   key_rng: random.Random):  # type: ignore[no-untyped-def]
    """Batches for `train`: every `every`-th step passkey samples at `length` (keys at random
    depths, loss on the key's digits only), the other steps corpus windows (loss on every next
    character). Experiments 6 and 7 train on it; Experiment 6 also fine-tunes on it at 4L, so the
    fine-tune keeps the task."""
    def batches(step: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        if step % every == 0:
            return task.batch(batch_size, length, key_rng)  # (B, length - 1): loss on the digits only
        return random_windows(text, batch_size, length - 1, g)  # (B, length - 1): every next character

    return batches
