"""Masking for BERT's masked-language-model objective: pure tensor functions and a collator.

Two steps, each a vectorised function (no Python loop over tokens):

1. :func:`select_positions` picks the positions to predict among the *maskable* tokens (never [CLS], [SEP],
   [PAD] or any other special token):

   * ``scheme="bernoulli"`` — each maskable token independently with probability ``rate`` (what transformers'
     ``DataCollatorForLanguageModeling`` does; RoBERTa and most modern code).
   * ``scheme="fixed"`` — exactly ``min(max_predictions, max(1, round(rate * n)))`` positions per sequence,
     uniformly among the maskable ones (what the original BERT ``create_pretraining_data.py`` does). As in the
     original, ``n`` counts *every* token of the sequence, [CLS] and [SEP] included, padding excluded
     (``len(tokens)`` there; padding is added later). The original ran on Python 2, whose ``round`` rounds
     halves away from zero (``round(4.5) == 5``); Python 3 rounds halves to even (``round(4.5) == 4``). We
     follow the original: ``rounding="half_up"`` (default); ``rounding="half_even"`` gives Python 3's. With
     ``rate=0.15`` the two differ for n = 30, 70, 110, … (n ≡ 30 mod 40). If the formula asks for more positions
     than a row has maskable tokens, all of them are taken.

   With whole-word masking (``word_starts``), the unit is a word: all its WordPiece pieces are selected together.
   Bernoulli selects each *word* with probability ``rate`` (as transformers does); fixed-count visits the words in
   random order and takes each one that still fits into the budget of ``k`` pieces, skipping those that would
   overflow it (exactly the original's greedy rule), so it may select slightly fewer than ``k`` pieces.

2. :func:`apply_replacement` corrupts the selected positions: by default 80 % become [MASK], 10 % a random token,
   10 % stay unchanged (``mix``). One uniform draw per position decides the branch, so the shares are exactly
   the ones asked for. Random tokens come from the non-special tokens by default (``random_from="non_special"``);
   ``random_from="vocab"`` draws from the whole vocabulary, as both the original BERT and transformers do. The
   labels are the original id at selected positions and ``-100`` (ignored by the loss) everywhere else.

:func:`mask_tokens` does both; :class:`MLMCollator` pads a list of examples and masks them, and can be handed
to ``transformers.Trainer``. :func:`static_masks` / :func:`epoch_masks` contrast static masking (``dupe_factor``
pre-masked copies, original BERT) with dynamic masking (fresh masks every epoch, RoBERTa), and
:func:`frozen_eval_masks` gives the same masks at every evaluation.

Inputs are never modified. Every random draw takes a ``torch.Generator`` (``None`` = torch's global RNG).
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Real
from statistics import NormalDist
from typing import Any

import numpy as np
import torch

IGNORE_INDEX = -100
"""Label of every position the loss must ignore (PyTorch's ``cross_entropy`` default ``ignore_index``)."""

NOT_SELECTED, MASKED, RANDOM, KEPT = 0, 1, 2, 3
"""Codes of :attr:`MaskedBatch.action`: what happened to each position."""

ACTION_NAMES = ("not selected", "[MASK]", "random token", "unchanged")
SCHEMES = ("bernoulli", "fixed")
ROUNDINGS = ("half_up", "half_even")
RANDOM_FROM = ("non_special", "vocab")
DEFAULT_MIX = (0.8, 0.1, 0.1)


# ---- validation --------------------------------------------------------------------------------------------


def validate_rate(rate: float) -> float:
    """``rate`` as a float in [0, 1], or a ValueError that says what to pass."""
    if isinstance(rate, bool) or not isinstance(rate, Real) or not math.isfinite(rate) or not 0 <= rate <= 1:
        raise ValueError(
            f"rate={rate!r} is not a probability: pass a number in [0, 1], e.g. rate=0.15 for BERT's 15 %."
        )
    return float(rate)


def validate_mix(mix: Sequence[float]) -> tuple[float, float, float]:
    """``mix`` = (share of [MASK], share of random tokens, share unchanged): three numbers ≥ 0 summing to 1."""
    try:
        values = tuple(float(x) for x in mix)
    except (TypeError, ValueError):
        raise ValueError(
            f"mix={mix!r} must be three numbers (share [MASK], share random, share unchanged), e.g. (0.8, 0.1, 0.1)."
        ) from None
    if len(values) != 3:
        raise ValueError(
            f"mix={mix!r} has {len(values)} entries: give three shares (mask, random, unchanged), e.g. (0.8, 0.1, 0.1)."
        )
    if any(not math.isfinite(v) or v < 0 for v in values):
        raise ValueError(f"mix={mix!r} has a negative or non-finite share: each share must be in [0, 1].")
    total = sum(values)
    if abs(total - 1) > 1e-6:
        raise ValueError(
            f"mix={mix!r} sums to {total:.6g}, not 1: the shares of [MASK], random and unchanged must add up to 1, "
            "e.g. (0.8, 0.1, 0.1) or (1.0, 0.0, 0.0)."
        )
    return values


def _check_choice(name: str, value: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise ValueError(f"{name}={value!r} is not known: use one of {', '.join(map(repr, choices))}.")
    return value


def _as_int_tensor(x: Any, name: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        try:
            x = torch.as_tensor(x)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise TypeError(
                f"{name} must be a tensor (or nested lists) of integer token ids of equal length; pad them first "
                f"or use MLMCollator ({exc})."
            ) from None
    if x.dtype == torch.bool or x.dtype.is_floating_point or x.dtype.is_complex:
        raise TypeError(
            f"{name} must hold integer token ids, got dtype {x.dtype}: pass the tokenizer's ids "
            "(e.g. tokenizer(text)['input_ids']) or convert with .long()."
        )
    return x


def _as_bool_like(x: Any, like: torch.Tensor, name: str) -> torch.Tensor:
    t = torch.as_tensor(x)
    if t.shape != like.shape:
        raise ValueError(f"{name} has shape {tuple(t.shape)} but input_ids has {tuple(like.shape)}: they must match.")
    return t.bool()


# ---- counting ----------------------------------------------------------------------------------------------


def num_to_predict(
    n_tokens: int | torch.Tensor,
    rate: float = 0.15,
    *,
    max_predictions: int | None = None,
    rounding: str = "half_up",
) -> int | torch.Tensor:
    """The original BERT count ``min(max_predictions, max(1, round(rate * n)))`` (int or per-row tensor).

    ``rounding="half_up"`` reproduces Python 2's ``round`` (the original's), ``"half_even"`` Python 3's.
    ``max_predictions=None`` means no cap (the original's flag defaulted to 20 for 128-token sequences).
    """
    rate = validate_rate(rate)
    _check_choice("rounding", rounding, ROUNDINGS)
    if max_predictions is not None and (isinstance(max_predictions, bool) or int(max_predictions) < 1):
        raise ValueError(f"max_predictions={max_predictions!r} must be a positive integer or None (no cap).")
    if isinstance(n_tokens, torch.Tensor):
        x = n_tokens.to(torch.float64) * rate
        if rounding == "half_up":
            floor = torch.floor(x)
            k = floor + (x - floor >= 0.5).to(torch.float64)
        else:
            k = torch.round(x)  # torch rounds halves to even, like Python 3
        k = k.to(torch.long).clamp(min=1)
        return k if max_predictions is None else k.clamp(max=int(max_predictions))
    x = int(n_tokens) * rate
    k = (math.floor(x) + (x - math.floor(x) >= 0.5)) if rounding == "half_up" else round(x)
    k = max(1, int(k))
    return k if max_predictions is None else min(int(max_predictions), k)


# ---- words -------------------------------------------------------------------------------------------------


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


def word_starts(
    maskable: torch.Tensor, *, word_ids: Any = None, continuation: Any = None
) -> torch.Tensor:
    """True at the first piece of every maskable word (for whole-word masking).

    A word is a run of consecutive maskable tokens with the same ``word_ids`` entry (a tokenizer's
    ``word_ids()``, with -1 or None for special tokens), or a maskable token followed by its ``continuation``
    pieces (``##…``; see :func:`continuation_lookup`). A special token or padding always ends a word. Without
    either argument every maskable token is its own word.
    """
    maskable = maskable.bool()
    prev_maskable = _shift_right(maskable, False)
    if word_ids is not None and continuation is not None:
        raise ValueError("pass either word_ids or continuation, not both.")
    if word_ids is not None:
        if not isinstance(word_ids, torch.Tensor):
            word_ids = torch.tensor([[-1 if w is None else w for w in row] for row in word_ids])
        if word_ids.shape != maskable.shape:
            raise ValueError(
                f"word_ids has shape {tuple(word_ids.shape)} but input_ids has {tuple(maskable.shape)}: give one "
                "word id per token (-1 for special tokens and padding)."
            )
        new_word = word_ids != _shift_right(word_ids, 0)
    elif continuation is not None:
        new_word = ~_as_bool_like(continuation, maskable, "continuation")
    else:
        return maskable.clone()
    return maskable & (new_word | ~prev_maskable)


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


def _select_words(
    maskable: torch.Tensor,
    starts: torch.Tensor,
    *,
    rate: float,
    scheme: str,
    k: torch.Tensor | None,
    generator: torch.Generator | None,
) -> torch.Tensor:
    starts = starts & maskable
    if not starts.any():
        return torch.zeros_like(maskable)
    # global word number of every maskable token (words never cross rows: a row's first maskable token starts one)
    word_of_token = torch.cumsum(starts.flatten(), 0).reshape(maskable.shape) - 1
    if scheme == "bernoulli":
        draw = torch.rand(maskable.shape, generator=generator) < rate
        chosen_words = draw[starts]  # one decision per word, taken at its first piece
        return maskable & chosen_words[word_of_token.clamp(min=0)]
    n_words_row = starts.sum(dim=1)
    n_words = int(n_words_row.sum())
    w_max = int(n_words_row.max())
    lengths = torch.bincount(word_of_token[maskable], minlength=n_words)
    word_row = torch.repeat_interleave(torch.arange(maskable.shape[0]), n_words_row)
    first_word = torch.cumsum(n_words_row, 0) - n_words_row
    within = torch.arange(n_words) - first_word[word_row]
    len2d = torch.zeros(maskable.shape[0], w_max, dtype=torch.long)
    len2d[word_row, within] = lengths
    scores = torch.rand(len2d.shape, generator=generator, dtype=torch.float64).masked_fill(len2d == 0, -1.0)
    order = torch.argsort(scores, dim=1, descending=True)
    accepted_sorted = _greedy_fill(len2d.gather(1, order), k)
    accepted = torch.zeros_like(accepted_sorted).scatter(1, order, accepted_sorted)
    accepted_flat = accepted[word_row, within]
    return maskable & accepted_flat[word_of_token.clamp(min=0)]


def select_positions(
    maskable: torch.Tensor,
    *,
    rate: float = 0.15,
    scheme: str = "bernoulli",
    generator: torch.Generator | None = None,
    n_tokens: torch.Tensor | None = None,
    max_predictions: int | None = None,
    rounding: str = "half_up",
    word_starts: torch.Tensor | None = None,
) -> torch.Tensor:
    """Bool (batch, length): the positions to predict, chosen only among ``maskable``.

    ``scheme="bernoulli"``: each maskable token (or word) with probability ``rate``. ``scheme="fixed"``: exactly
    :func:`num_to_predict` ``(n_tokens, rate, …)`` tokens per row, uniformly among the maskable ones (capped at
    the number of maskable tokens; ``n_tokens`` defaults to the row's maskable count — :func:`mask_tokens`
    passes the count of all non-padding tokens, as the original does). ``word_starts`` (see
    :func:`word_starts`) switches on whole-word masking.
    """
    rate = validate_rate(rate)
    _check_choice("scheme", scheme, SCHEMES)
    maskable = torch.as_tensor(maskable).bool()
    if maskable.dim() != 2:
        raise ValueError(f"maskable must be 2-D (batch, length), got shape {tuple(maskable.shape)}.")
    if maskable.numel() == 0:
        return maskable.clone()
    k = None
    if scheme == "fixed":
        counts = maskable.sum(dim=1) if n_tokens is None else torch.as_tensor(n_tokens)
        k = num_to_predict(counts, rate, max_predictions=max_predictions, rounding=rounding)
        k = torch.minimum(k, maskable.sum(dim=1))
    if word_starts is not None:
        return _select_words(maskable, word_starts.bool(), rate=rate, scheme=scheme, k=k, generator=generator)
    if scheme == "bernoulli":
        return (torch.rand(maskable.shape, generator=generator) < rate) & maskable
    k_max = int(k.max())
    if k_max == 0:
        return torch.zeros_like(maskable)
    # Random 31-bit keys: the k largest of i.i.d. keys are a uniform k-subset. (Two equal keys in a row — chance
    # ≈ L²/2³² ≈ 4e-6 for L = 128 — are ordered by position; int32 keys sort faster than float64 ones.)
    scores = torch.randint(0, 2**31 - 1, maskable.shape, generator=generator, dtype=torch.int32)
    top = scores.masked_fill_(~maskable, -1).topk(k_max, dim=1).indices
    keep = torch.arange(k_max)[None, :] < k[:, None]
    return torch.zeros_like(maskable).scatter(1, top, keep)


# ---- step 2: replacement -----------------------------------------------------------------------------------


def replacement_ids(
    vocab_size: int, special_ids: Iterable[int] = (), random_from: str = "non_special"
) -> torch.Tensor:
    """The ids a random replacement is drawn from: all ``vocab_size`` ids, minus ``special_ids`` by default."""
    _check_choice("random_from", random_from, RANDOM_FROM)
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size={vocab_size!r} must be a positive integer (len(tokenizer), 30522 for BERT).")
    ids = torch.arange(vocab_size)
    if random_from == "non_special":
        ids = ids[~torch.isin(ids, torch.as_tensor(list(special_ids), dtype=torch.long))]
    if len(ids) == 0:
        raise ValueError("every id of the vocabulary is special: there is no token to draw random replacements from.")
    return ids


def apply_replacement(
    input_ids: torch.Tensor,
    selected: torch.Tensor,
    *,
    mask_token_id: int | None,
    mix: Sequence[float] = DEFAULT_MIX,
    random_ids: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Corrupt the ``selected`` positions; return ``(new_input_ids, labels, action)`` (new tensors).

    One uniform draw ``u`` per position: ``u < mix[0]`` → [MASK], ``u < mix[0] + mix[1]`` → a token drawn
    uniformly from ``random_ids``, otherwise unchanged. ``labels`` holds the original id at selected positions and
    -100 elsewhere; ``action`` the codes :data:`MASKED`, :data:`RANDOM`, :data:`KEPT` (0 where not selected).
    """
    p_mask, p_random, p_keep = validate_mix(mix)
    if p_mask > 0 and mask_token_id is None:
        raise ValueError(
            "mask_token_id is None: pass the tokenizer's mask id (tokenizer.mask_token_id, 103 for "
            "bert-base-uncased), or use mix=(0, …) if you never want [MASK]."
        )
    if p_random > 0 and (random_ids is None or len(random_ids) == 0):
        raise ValueError(
            "random replacements need random_ids (see replacement_ids(vocab_size, special_ids)) or vocab_size: "
            "pass it, or use a mix with no random share, e.g. (0.9, 0.0, 0.1)."
        )
    selected = selected.bool()
    total = p_mask + p_random + p_keep
    t_mask = p_mask / total
    t_random = 2.0 if p_keep == 0 else (p_mask + p_random) / total
    u = torch.rand(input_ids.shape, generator=generator)
    to_mask = selected & (u < t_mask)
    to_random = selected & ~to_mask & (u < t_random)
    new_ids = torch.where(to_mask, mask_token_id, input_ids) if p_mask > 0 else input_ids.clone()
    n_random = int(to_random.count_nonzero())
    if n_random:
        draws = torch.randint(len(random_ids), (n_random,), generator=generator)
        new_ids.masked_scatter_(to_random, random_ids.to(input_ids.dtype)[draws])  # row-major order, like x[m] = v
    labels = torch.where(selected, input_ids, IGNORE_INDEX)
    action = torch.where(to_mask, MASKED, torch.where(to_random, RANDOM, selected.to(torch.int8) * KEPT))
    action = action.to(torch.int8)
    return new_ids, labels, action


# ---- both steps --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MaskedBatch:
    """A masked batch: model inputs, labels (-100 = ignored), and what happened at each position."""

    input_ids: torch.Tensor
    labels: torch.Tensor
    attention_mask: torch.Tensor
    action: torch.Tensor  # int8: NOT_SELECTED, MASKED, RANDOM, KEPT
    maskable: torch.Tensor  # bool: positions that were allowed to be selected

    @property
    def selected(self) -> torch.Tensor:
        """Bool: the positions the loss is computed on."""
        return self.action != NOT_SELECTED

    def as_dict(self) -> dict[str, torch.Tensor]:
        """``input_ids``, ``attention_mask``, ``labels`` — ready for ``BertForMaskedLM(**batch)``."""
        return {"input_ids": self.input_ids, "attention_mask": self.attention_mask, "labels": self.labels}


def mask_tokens(
    input_ids: Any,
    *,
    mask_token_id: int | None,
    vocab_size: int | None = None,
    special_ids: Iterable[int] | None = None,
    special_mask: Any = None,
    attention_mask: Any = None,
    rate: float = 0.15,
    scheme: str = "bernoulli",
    mix: Sequence[float] = DEFAULT_MIX,
    generator: torch.Generator | None = None,
    word_ids: Any = None,
    continuation: Any = None,
    max_predictions: int | None = None,
    rounding: str = "half_up",
    random_from: str = "non_special",
    random_ids: torch.Tensor | None = None,
) -> MaskedBatch:
    """Select and corrupt positions of a padded batch of ids (batch, length) or one sequence (length,).

    Maskable = not padding (``attention_mask``, default all ones) and not special (``special_ids`` such as
    ``tokenizer.all_special_ids`` and/or a ``special_mask`` with 1 at special tokens; pass at least one, even
    ``special_ids=()``). ``word_ids`` or ``continuation`` switches on whole-word masking (see
    :func:`word_starts`). ``vocab_size`` (or ``random_ids``) is needed when ``mix`` has a random share; random
    tokens exclude ``special_ids`` unless ``random_from="vocab"``. Rows without a maskable token get no
    selection (all labels -100); a batch where no row has one raises ValueError. Inputs are not modified.
    """
    ids = _as_int_tensor(input_ids, "input_ids")
    squeeze = ids.dim() == 1
    if squeeze:
        ids = ids[None, :]
    if ids.dim() != 2:
        raise ValueError(f"input_ids must be 1-D (one sequence) or 2-D (batch, length), got shape {tuple(ids.shape)}.")
    if ids.numel() == 0:
        raise ValueError("input_ids is empty: pass at least one sequence with at least one token.")

    def _like(x: Any, name: str) -> torch.Tensor:
        t = torch.as_tensor(x)
        return _as_bool_like(t[None, :] if squeeze and t.dim() == 1 else t, ids, name)

    attention = torch.ones_like(ids, dtype=torch.bool) if attention_mask is None else _like(attention_mask, "attention_mask")
    if special_ids is None and special_mask is None:
        raise ValueError(
            "say which tokens are special: pass special_ids=tokenizer.all_special_ids (e.g. [0, 100, 101, 102, 103] "
            "for bert-base-uncased) and/or special_mask; special_ids=() if there are none."
        )
    special_ids = [] if special_ids is None else [int(i) for i in special_ids]
    low, high = (int(v) for v in ids.aminmax())
    in_range = vocab_size is not None and low >= 0 and high < vocab_size
    if vocab_size is not None and not in_range:
        real = ids[attention]
        if len(real) and (int(real.min()) < 0 or int(real.max()) >= vocab_size):
            raise ValueError(
                f"input_ids holds ids in [{int(real.min())}, {int(real.max())}] but vocab_size={vocab_size}: "
                "use the tokenizer that produced these ids (vocab_size=len(tokenizer))."
            )
    if len(special_ids) <= 8:  # a few comparisons beat isin / a table lookup
        maskable = attention.clone()
        for special in special_ids:
            maskable &= ids != special
    elif in_range and all(0 <= i < vocab_size for i in special_ids):
        table = torch.zeros(vocab_size, dtype=torch.bool)
        table[special_ids] = True
        maskable = attention & ~table[ids]
    else:
        maskable = attention & ~torch.isin(ids, torch.tensor(special_ids, dtype=ids.dtype))
    if special_mask is not None:
        maskable &= ~_like(special_mask, "special_mask")
    if not maskable.any():
        raise ValueError(
            "no token of this batch may be masked (every one is special or padding): drop empty examples, or "
            "check special_ids / special_mask / attention_mask."
        )
    starts = None
    if word_ids is not None or continuation is not None:
        w = word_ids
        if w is not None and squeeze:
            w = torch.as_tensor([-1 if x is None else x for x in w])[None, :]
        c = None if continuation is None else _like(continuation, "continuation")
        starts = word_starts(maskable, word_ids=w, continuation=c)
    mix = validate_mix(mix)
    if random_ids is None and mix[1] > 0:
        if vocab_size is None:
            raise ValueError("pass vocab_size (len(tokenizer)) so random replacements can be drawn, or random_ids.")
        random_ids = replacement_ids(vocab_size, special_ids, random_from)
    selected = select_positions(
        maskable,
        rate=rate,
        scheme=scheme,
        generator=generator,
        n_tokens=attention.sum(dim=1),
        max_predictions=max_predictions,
        rounding=rounding,
        word_starts=starts,
    )
    new_ids, labels, action = apply_replacement(
        ids, selected, mask_token_id=mask_token_id, mix=mix, random_ids=random_ids, generator=generator
    )
    out = MaskedBatch(new_ids, labels, attention.to(ids.dtype), action, maskable)
    if squeeze:
        out = MaskedBatch(*(t[0] for t in (out.input_ids, out.labels, out.attention_mask, out.action, out.maskable)))
    return out


def frozen_eval_masks(input_ids: Any, *, seed: int = 0, **kwargs: Any) -> MaskedBatch:
    """:func:`mask_tokens` with a fresh generator seeded by ``seed``: identical masks at every evaluation."""
    return mask_tokens(input_ids, generator=torch.Generator().manual_seed(seed), **kwargs)


def display_codes(batch: MaskedBatch, *, before_replacement: bool = False) -> torch.Tensor:
    """Per-position codes for :func:`mlm_course.plots.mask_grid`: -1 special/padding, else :attr:`MaskedBatch.action`
    (or 4 for every selected position with ``before_replacement=True``)."""
    codes = torch.where(batch.selected, 4, 0) if before_replacement else batch.action.long()
    return torch.where(batch.maskable, codes, -1)


# ---- static vs dynamic masking -----------------------------------------------------------------------------


def static_masks(
    input_ids: Any, *, copies: int = 10, generator: torch.Generator | None = None, **kwargs: Any
) -> list[MaskedBatch]:
    """``copies`` pre-masked versions of the batch, made once (the original BERT's ``dupe_factor``, 10)."""
    if isinstance(copies, bool) or not isinstance(copies, int) or copies < 1:
        raise ValueError(f"copies={copies!r} must be a positive integer (the original BERT used dupe_factor=10).")
    return [mask_tokens(input_ids, generator=generator, **kwargs) for _ in range(copies)]


def epoch_masks(
    input_ids: Any,
    *,
    epochs: int,
    mode: str = "dynamic",
    copies: int = 10,
    generator: torch.Generator | None = None,
    **kwargs: Any,
) -> list[MaskedBatch]:
    """The masked batch seen at each of ``epochs`` epochs.

    ``mode="static"``: epoch e reuses copy ``e % copies`` of :func:`static_masks` (each mask seen
    ``epochs / copies`` times, e.g. 40 epochs / 10 copies = 4 in BERT). ``mode="dynamic"``: a fresh mask every
    epoch (RoBERTa).
    """
    _check_choice("mode", mode, ("static", "dynamic"))
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs={epochs!r} must be a positive integer.")
    if mode == "static":
        made = static_masks(input_ids, copies=copies, generator=generator, **kwargs)
        return [made[e % copies] for e in range(epochs)]
    return [mask_tokens(input_ids, generator=generator, **kwargs) for _ in range(epochs)]


def count_distinct_masks(batches: Sequence[MaskedBatch]) -> torch.Tensor:
    """Per row: how many different (input_ids, labels) pairs the row had across ``batches`` (e.g. epochs)."""
    if not batches:
        raise ValueError("batches is empty: pass the list returned by epoch_masks(...).")
    stacked = torch.stack([torch.cat([b.input_ids, b.labels], dim=-1) for b in batches])  # (E, B, 2L)
    if stacked.dim() == 2:
        stacked = stacked[:, None, :]
    return torch.tensor([len(torch.unique(stacked[:, row], dim=0)) for row in range(stacked.shape[1])])


# ---- measuring ---------------------------------------------------------------------------------------------


def binomial_interval(successes: int, trials: int, confidence: float = 0.999) -> tuple[float, float]:
    """Wilson score interval for a proportion (``confidence`` two-sided)."""
    if trials <= 0:
        raise ValueError("trials must be positive to estimate a rate.")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    # at p = 0 or 1 the bound is exactly 0 or 1; the formula can miss it by a rounding error
    return (0.0 if successes == 0 else centre - half), (1.0 if successes == trials else centre + half)


def measure_rates(batch: MaskedBatch, confidence: float = 0.999) -> dict[str, dict[str, float]]:
    """Observed selection rate (over maskable tokens) and the three replacement shares (over selected ones).

    Each entry: ``{"count", "trials", "rate", "low", "high"}`` with a Wilson ``confidence`` interval.
    """
    n_maskable = int(batch.maskable.sum())
    n_selected = int(batch.selected.sum())
    counts = {
        "selected": (n_selected, n_maskable),
        "[MASK]": (int((batch.action == MASKED).sum()), n_selected),
        "random": (int((batch.action == RANDOM).sum()), n_selected),
        "unchanged": (int((batch.action == KEPT).sum()), n_selected),
    }
    out = {}
    for name, (count, trials) in counts.items():
        low, high = binomial_interval(count, trials, confidence) if trials else (0.0, 1.0)
        out[name] = {"count": count, "trials": trials, "rate": count / trials if trials else float("nan"),
                     "low": low, "high": high}
    return out


# ---- the collator ------------------------------------------------------------------------------------------


def _pad(rows: list[Any], length: int, fill: int, dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad ragged rows into (len(rows), length); also return the bool mask of real positions.

    Lists go through numpy (one array per row, then one concatenation: ~10x faster than ``torch.tensor`` on
    nested lists), which keeps their dtype, so float "ids" are still caught by :func:`mask_tokens`.
    """
    lens = torch.tensor([len(r) for r in rows])
    real = torch.arange(length)[None, :] < lens[:, None]
    if all(isinstance(r, torch.Tensor) for r in rows):
        flat = torch.cat([r.reshape(-1) for r in rows])
    else:
        arrays = [r.numpy() if isinstance(r, torch.Tensor) else np.asarray(r) if len(r) else np.zeros(0, np.int64)
                  for r in rows]
        flat = torch.from_numpy(np.concatenate(arrays))
    if flat.dtype != torch.bool and not flat.dtype.is_floating_point and not flat.dtype.is_complex:
        flat = flat.to(torch.long)  # any integer dtype → int64, what embeddings and transformers expect
    out = torch.full((len(rows), length), fill, dtype=dtype or flat.dtype)
    out[real] = flat.to(out.dtype)
    return out, real


@dataclass
class MLMCollator:
    """Pad a list of examples and mask them: a drop-in for ``DataCollatorForLanguageModeling``.

    Give a ``tokenizer`` (ids, specials and vocabulary size are read from it) or the explicit ids. Examples are
    dicts with ``input_ids`` (list or tensor) and optionally ``attention_mask``, ``token_type_ids``,
    ``special_tokens_mask`` (1 = special), ``word_ids`` (None/-1 for specials), or plain id sequences. Returns
    ``{"input_ids", "attention_mask", "labels"}`` (+ ``token_type_ids`` if given), right-padded to the longest
    example (rounded up to ``pad_to_multiple_of``). ``whole_word=True`` uses ``word_ids`` when examples have
    them, else the tokenizer's ``##`` pieces. With ``transformers.Trainer`` set
    ``remove_unused_columns=False`` if examples carry ``word_ids`` / ``special_tokens_mask`` (Trainer drops
    keys the model does not take). ``seed`` gives a reproducible stream (one generator per process, seeded
    ``seed + worker id`` in DataLoader workers); ``generator`` uses yours; neither = torch's global RNG.
    """

    tokenizer: Any = None
    mask_token_id: int | None = None
    pad_token_id: int | None = None
    special_ids: Sequence[int] | None = None
    vocab_size: int | None = None
    rate: float = 0.15
    scheme: str = "bernoulli"
    mix: Sequence[float] = DEFAULT_MIX
    whole_word: bool = False
    max_predictions: int | None = None
    rounding: str = "half_up"
    random_from: str = "non_special"
    pad_to_multiple_of: int | None = None
    seed: int | None = None
    generator: torch.Generator | None = None

    def __post_init__(self) -> None:
        tok = self.tokenizer
        self._continuation = None
        if tok is not None:
            if self.mask_token_id is None:
                self.mask_token_id = tok.mask_token_id
            if self.pad_token_id is None:
                self.pad_token_id = tok.pad_token_id
            if self.special_ids is None:
                self.special_ids = list(tok.all_special_ids)
            if self.vocab_size is None:
                self.vocab_size = len(tok)
        self.rate = validate_rate(self.rate)
        self.mix = validate_mix(self.mix)
        _check_choice("scheme", self.scheme, SCHEMES)
        _check_choice("rounding", self.rounding, ROUNDINGS)
        _check_choice("random_from", self.random_from, RANDOM_FROM)
        if self.mix[0] > 0 and self.mask_token_id is None:
            raise ValueError(
                "no mask token: pass a tokenizer that has one (tokenizer.mask_token_id) or mask_token_id=103 "
                "for bert-base-uncased."
            )
        if self.pad_token_id is None:
            raise ValueError("no padding id: pass a tokenizer with a pad token or pad_token_id=0 (bert-base-uncased).")
        if self.special_ids is None:
            raise ValueError(
                "pass special_ids (e.g. [0, 100, 101, 102, 103] for bert-base-uncased) or a tokenizer, so special "
                "tokens are never masked."
            )
        self.special_ids = [int(i) for i in self.special_ids]
        if self.pad_to_multiple_of is not None and (
            isinstance(self.pad_to_multiple_of, bool) or not isinstance(self.pad_to_multiple_of, int)
            or self.pad_to_multiple_of < 1
        ):
            raise ValueError(f"pad_to_multiple_of={self.pad_to_multiple_of!r} must be a positive integer or None.")
        self._random_ids = None
        if self.mix[1] > 0:
            if self.vocab_size is None:
                raise ValueError("pass vocab_size (len(tokenizer)) or a tokenizer, so random replacements can be drawn.")
            self._random_ids = replacement_ids(self.vocab_size, self.special_ids, self.random_from)
        if self.whole_word and tok is not None:
            self._continuation = continuation_lookup(tok)
        self._seeded_pid: int | None = None
        self._seeded: torch.Generator | None = None

    def _rng(self) -> torch.Generator | None:
        if self.generator is not None:
            return self.generator
        if self.seed is None:
            return None
        if self._seeded is None or self._seeded_pid != os.getpid():
            info = torch.utils.data.get_worker_info()
            self._seeded = torch.Generator().manual_seed(self.seed + (info.id if info is not None else 0))
            self._seeded_pid = os.getpid()
        return self._seeded

    def __call__(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        if len(examples) == 0:
            raise ValueError("the batch is empty: pass a non-empty list of examples.")
        as_dicts = isinstance(examples[0], Mapping)
        if as_dicts and any("input_ids" not in e for e in examples):
            raise ValueError("every example needs an 'input_ids' entry (a list or tensor of token ids).")
        rows = [e["input_ids"] for e in examples] if as_dicts else list(examples)
        longest = max(len(r) for r in rows)
        m = self.pad_to_multiple_of
        length = longest if m is None else -(-longest // m) * m
        ids, real = _pad(rows, length, self.pad_token_id)  # keeps the ids' dtype: floats are refused below
        batch: dict[str, torch.Tensor] = {}
        attention = real.long()
        special_mask = word_ids = None
        if as_dicts:
            first = examples[0]
            if "attention_mask" in first:
                attention = _pad([e["attention_mask"] for e in examples], length, 0, torch.long)[0]
            if "token_type_ids" in first:
                batch["token_type_ids"] = _pad([e["token_type_ids"] for e in examples], length, 0, torch.long)[0]
            if "special_tokens_mask" in first:
                special_mask = _pad([e["special_tokens_mask"] for e in examples], length, 1, torch.long)[0]
            if self.whole_word and "word_ids" in first:
                rows_w = [[-1 if w is None else w for w in e["word_ids"]] for e in examples]
                word_ids = _pad(rows_w, length, -1, torch.long)[0]
        continuation = None
        if self.whole_word and word_ids is None:
            if self._continuation is None:
                raise ValueError(
                    "whole_word=True needs 'word_ids' in every example or a tokenizer (to find the ## pieces)."
                )
            continuation = self._continuation[ids.clamp(0, len(self._continuation) - 1)]
        masked = mask_tokens(
            ids,
            mask_token_id=self.mask_token_id,
            vocab_size=self.vocab_size,
            special_ids=self.special_ids,
            special_mask=special_mask,
            attention_mask=attention,
            rate=self.rate,
            scheme=self.scheme,
            mix=self.mix,
            generator=self._rng(),
            word_ids=word_ids,
            continuation=continuation,
            max_predictions=self.max_predictions,
            rounding=self.rounding,
            random_ids=self._random_ids,
        )
        batch = {"input_ids": masked.input_ids, "attention_mask": attention, "labels": masked.labels, **batch}
        return batch


# ---- reference: the original algorithm, token by token ------------------------------------------------------


def reference_original_masking(
    tokens: Sequence[Any],
    *,
    vocab_words: Sequence[Any],
    rng: random.Random,
    masked_lm_prob: float = 0.15,
    max_predictions_per_seq: int = 20,
    do_whole_word_mask: bool = False,
    special: Iterable[Any] = ("[CLS]", "[SEP]"),
    is_continuation: Callable[[Any], bool] = lambda t: str(t).startswith("##"),
    mask_token: Any = "[MASK]",
    rounding: str = "half_up",
) -> tuple[list[Any], list[int], list[Any]]:
    """A line-by-line port of ``create_masked_lm_predictions`` from google-research/bert (Apache-2.0).

    Slow (a Python loop over tokens): it is the reference the vectorised code is tested and benchmarked
    against. Returns ``(output_tokens, masked_positions, masked_labels)``. Works on strings or on ids (pass
    ``special``, ``is_continuation``, ``mask_token`` accordingly); Python 2's ``round`` is ``rounding="half_up"``.
    """
    special = set(special)
    cand_indexes: list[list[int]] = []
    for i, token in enumerate(tokens):
        if token in special:
            continue
        if do_whole_word_mask and len(cand_indexes) >= 1 and is_continuation(token):
            cand_indexes[-1].append(i)
        else:
            cand_indexes.append([i])
    rng.shuffle(cand_indexes)
    output_tokens = list(tokens)
    num = num_to_predict(len(tokens), masked_lm_prob, max_predictions=max_predictions_per_seq, rounding=rounding)
    masked: list[tuple[int, Any]] = []
    covered: set[int] = set()
    for index_set in cand_indexes:
        if len(masked) >= num:
            break
        if len(masked) + len(index_set) > num:
            continue
        if any(index in covered for index in index_set):
            continue
        for index in index_set:
            covered.add(index)
            if rng.random() < 0.8:
                masked_token = mask_token
            elif rng.random() < 0.5:
                masked_token = tokens[index]
            else:
                masked_token = vocab_words[rng.randint(0, len(vocab_words) - 1)]
            output_tokens[index] = masked_token
            masked.append((index, tokens[index]))
    masked.sort(key=lambda x: x[0])
    return output_tokens, [i for i, _ in masked], [label for _, label in masked]


__all__ = [
    "IGNORE_INDEX", "NOT_SELECTED", "MASKED", "RANDOM", "KEPT", "ACTION_NAMES", "DEFAULT_MIX",
    "validate_rate", "validate_mix", "num_to_predict", "continuation_lookup", "word_starts", "select_positions",
    "replacement_ids", "apply_replacement", "MaskedBatch", "mask_tokens", "frozen_eval_masks", "static_masks",
    "epoch_masks", "count_distinct_masks", "display_codes", "binomial_interval", "measure_rates", "MLMCollator",
    "reference_original_masking",
]
