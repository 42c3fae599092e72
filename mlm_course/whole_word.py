"""Whole-word masking: find the words (runs of WordPiece pieces) and select each one as a unit.

A word is a run of tokens with the same word id (a tokenizer's ``word_ids()``), or a token followed by its ``##``
continuation pieces: :func:`word_starts` marks the first piece of each, and a caller hands that to
:func:`mlm_course.masking.mask_tokens` with ``MaskSpec(whole_word=True)``. A special token or padding always ends a
word. Bernoulli selection flips one coin per word (as transformers' collator does); fixed-count selection visits
the words in random order and takes each one that still fits a budget of ``k`` pieces, skipping those that would
overflow it (the original BERT's greedy rule), so it may select slightly fewer than ``k`` pieces.
"""

from __future__ import annotations

from typing import Any

import torch


def continuation_lookup(vocab: Any) -> torch.Tensor:
    """Bool table over the vocabulary: True for WordPiece continuation pieces (tokens starting with ``##``).

    ``vocab`` is a tokenizer (anything with ``convert_ids_to_tokens`` and ``len``) or a list of token strings
    in id order. Index it with ``input_ids`` to get the ``continuation`` argument of :func:`word_starts`.
    """
    if hasattr(vocab, "convert_ids_to_tokens"):
        tokens = vocab.convert_ids_to_tokens(list(range(len(vocab))))
    else:
        tokens = list(vocab)
    return torch.tensor([str(t).startswith("##") for t in tokens], dtype=torch.bool)


def _shift_right(x: torch.Tensor, fill: Any) -> torch.Tensor:
    out = torch.empty_like(x)
    out[:, 0] = fill
    out[:, 1:] = x[:, :-1]
    return out


def word_starts(*, word_ids: torch.Tensor | None = None, continuation: torch.Tensor | None = None) -> torch.Tensor:
    """Bool (batch, length): True where a new word begins, from one of two descriptions of the words.

    ``word_ids``: an integer tensor with each token's word number (a tokenizer's ``word_ids()``, -1 for special
    tokens and padding); a word starts where the number changes. ``continuation``: a bool tensor, True at ``##``
    pieces (``continuation_lookup(tokenizer)[input_ids]``); a word starts at every other token.
    """
    if (word_ids is None) == (continuation is None):
        raise ValueError("pass either word_ids or continuation (one description of the words), not both or "
                         "neither.")
    name, words = ("word_ids", word_ids) if word_ids is not None else ("continuation", continuation)
    if not isinstance(words, torch.Tensor):
        raise TypeError(f"{name} must be a tensor (batch, length), one entry per token, got {type(words).__name__}: "
                        "convert it with torch.tensor(...).")
    if words.dim() != 2:
        raise ValueError(f"{name} must be 2-D (batch, length), got shape {tuple(words.shape)}: for one sequence add "
                         "the batch dimension ([None, :]).")
    if continuation is not None:
        return ~continuation.bool()
    starts = torch.ones_like(word_ids, dtype=torch.bool)
    starts[:, 1:] = word_ids[:, 1:] != word_ids[:, :-1]
    return starts


# ---- step 1: selection -------------------------------------------------------------------------------------


def _greedy_fill(lengths: torch.Tensor, budget: torch.Tensor) -> torch.Tensor:
    """Rows of word lengths (in visiting order, 0 = no word): accept each word that still fits the budget.

    Exactly the original's rule (skip a word that would overflow, keep trying the next ones), vectorised over
    rows. Each round finds the first overflowing word per row and skips every later word longer than the
    remaining capacity; capacity strictly falls, so the loop runs at most (longest word) rounds.
    """
    exists = lengths > 0
    skip = torch.zeros_like(exists)
    positions = torch.arange(lengths.shape[1])
    budget = budget[:, None]
    while True:
        candidate = exists & ~skip
        filled = torch.cumsum(lengths * candidate, dim=1)
        over = candidate & (filled > budget)
        has_over = over.any(dim=1)
        if not has_over.any():
            return candidate
        first = over.to(torch.int8).argmax(dim=1, keepdim=True)
        capacity = budget - (filled.gather(1, first) - lengths.gather(1, first))
        skip |= has_over[:, None] & (positions[None, :] >= first) & (lengths > capacity)


def select_words(
    maskable: torch.Tensor, starts: torch.Tensor, mask_rate: float, k: torch.Tensor | None,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """Whole-word selection: Bernoulli per word (``k is None``) or the greedy fill of ``k`` pieces per row.

    A word is a run of maskable tokens that begins at a ``starts`` position or after a token that is not maskable.
    """
    starts = maskable & (starts | ~_shift_right(maskable, False))
    if not starts.any():
        return torch.zeros_like(maskable)
    # global word number of every maskable token (words never cross rows: a row's first maskable token starts one)
    word_of_token = torch.cumsum(starts.flatten(), 0).reshape(maskable.shape) - 1
    if k is None:
        draw = torch.rand(maskable.shape, generator=generator) < mask_rate
        chosen_words = draw[starts]  # one decision per word, taken at its first piece
        return maskable & chosen_words[word_of_token.clamp(min=0)]
    n_words_row = starts.sum(dim=1)
    n_words = int(n_words_row.sum())
    lengths = torch.bincount(word_of_token[maskable], minlength=n_words)
    word_row = torch.repeat_interleave(torch.arange(maskable.shape[0]), n_words_row)
    within = torch.arange(n_words) - (torch.cumsum(n_words_row, 0) - n_words_row)[word_row]
    len2d = torch.zeros(maskable.shape[0], int(n_words_row.max()), dtype=torch.long)
    len2d[word_row, within] = lengths
    scores = torch.rand(len2d.shape, generator=generator, dtype=torch.float64).masked_fill(len2d == 0, -1.0)
    order = torch.argsort(scores, dim=1, descending=True)
    accepted_sorted = _greedy_fill(len2d.gather(1, order), k)
    accepted = torch.zeros_like(accepted_sorted).scatter(1, order, accepted_sorted)
    return maskable & accepted[word_row, within][word_of_token.clamp(min=0)]
