"""Masking for BERT's masked-language-model objective: one :class:`MaskSpec`, two vectorised steps.

A :class:`MaskSpec` says how masks are drawn and :class:`TokenIds` what masking needs of a tokenizer; both are
validated once, when they are made.

1. **Select** (:func:`select_positions`) positions to predict, only among *maskable* tokens (never [CLS], [SEP],
   [PAD] or another special token). ``mask_scheme="bernoulli"``: each with probability ``mask_rate``
   (transformers' ``DataCollatorForLanguageModeling``, RoBERTa). ``mask_scheme="fixed"``: exactly
   ``min(max_predictions, max(1, round(mask_rate * n)))`` per sequence (the original BERT
   ``create_pretraining_data.py``), where ``n`` counts every non-padding token, [CLS] and [SEP] included; all
   maskable tokens if a row has fewer. The original ran on Python 2, whose ``round`` sends halves away from zero:
   ``rounding="half_up"`` (default) follows it, ``"half_even"`` is Python 3's; at 15 % they differ for
   n = 30, 70, 110, … With ``whole_word=True`` the unit is a word, all its pieces together; the words come from
   :func:`mlm_course.whole_word.word_starts`.
2. **Replace** (:func:`apply_replacement`) each selected token: by default (``mask_mix``) 80 % [MASK], 10 % a
   random token, 10 % unchanged, decided by one uniform draw per position. Random tokens come from the non-special
   ids (``random_from="non_special"``) or, as in the original and in transformers, from the whole vocabulary
   (``"vocab"``). Labels: the original id at selected positions, :data:`IGNORE_INDEX` everywhere else.

:func:`mask_tokens` does both on a padded (batch, length) tensor of ids. :func:`epoch_masks` contrasts static
masking (the original's ``dupe_factor`` pre-masked copies) with dynamic masking (RoBERTa).
:mod:`mlm_course.collator` pads examples and masks them; :mod:`mlm_course.mask_checks` measures masks. Inputs are
never modified. Every random draw takes a ``torch.Generator`` (``None`` = torch's global RNG).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import torch

from mlm_course.whole_word import select_words

IGNORE_INDEX = -100
"""Label of every position the loss must ignore (PyTorch's ``cross_entropy`` default ``ignore_index``)."""

NOT_SELECTED, MASKED, RANDOM, KEPT = 0, 1, 2, 3
"""Codes of :attr:`MaskedBatch.action`: what happened to each position."""

ACTION_NAMES = ("not selected", "[MASK]", "random token", "unchanged")
SCHEMES = ("bernoulli", "fixed")
ROUNDINGS = ("half_up", "half_even")
RANDOM_FROM = ("non_special", "vocab")
DEFAULT_MIX = (0.8, 0.1, 0.1)


# ---- what to draw, and from which vocabulary ------------------------------------------------------------------


def _check_rate(mask_rate: Any) -> float:
    if (isinstance(mask_rate, bool) or not isinstance(mask_rate, Real) or not math.isfinite(mask_rate)
            or not 0 <= mask_rate <= 1):
        raise ValueError(f"mask_rate={mask_rate!r} is not a probability: pass a number in [0, 1], "
                         "e.g. mask_rate=0.15 for BERT's 15 %.")
    return float(mask_rate)


def _check_mix(mask_mix: Any) -> tuple[float, float, float]:
    """(share of [MASK], share of random tokens, share unchanged): three numbers ≥ 0 summing to 1."""
    try:
        values = tuple(float(x) for x in mask_mix)
    except (TypeError, ValueError):
        raise ValueError(f"mask_mix={mask_mix!r} must be three numbers (share [MASK], share random, share "
                         "unchanged), e.g. (0.8, 0.1, 0.1).") from None
    if len(values) != 3:
        raise ValueError(f"mask_mix={mask_mix!r} has {len(values)} entries: give three shares (mask, random, "
                         "unchanged), e.g. (0.8, 0.1, 0.1).")
    if any(not math.isfinite(v) or v < 0 for v in values):
        raise ValueError(f"mask_mix={mask_mix!r} has a negative or non-finite share: each share must be in [0, 1].")
    total = sum(values)
    if abs(total - 1) > 1e-6:
        raise ValueError(f"mask_mix={mask_mix!r} sums to {total:.6g}, not 1: the shares of [MASK], random and "
                         "unchanged must add up to 1, e.g. (0.8, 0.1, 0.1) or (1.0, 0.0, 0.0).")
    return values


def _check_choice(name: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"{name}={value!r} is not known: use one of {', '.join(map(repr, choices))}.")


def _is_int(x: Any) -> bool:
    return isinstance(x, Integral) and not isinstance(x, bool)


@dataclass(frozen=True)
class MaskSpec:
    """How masks are drawn (fields: see the module docstring); every field is checked here, once.

    ``max_predictions`` caps the fixed count (None = no cap; the original used 20 for 128-token sequences).
    """

    mask_rate: float = 0.15
    mask_mix: tuple[float, float, float] = DEFAULT_MIX
    mask_scheme: str = "bernoulli"
    max_predictions: int | None = None
    rounding: str = "half_up"
    random_from: str = "non_special"
    whole_word: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "mask_rate", _check_rate(self.mask_rate))  # frozen: normalise through object
        object.__setattr__(self, "mask_mix", _check_mix(self.mask_mix))
        _check_choice("mask_scheme", self.mask_scheme, SCHEMES)
        _check_choice("rounding", self.rounding, ROUNDINGS)
        _check_choice("random_from", self.random_from, RANDOM_FROM)
        if self.max_predictions is not None and (not _is_int(self.max_predictions) or self.max_predictions < 1):
            raise ValueError(f"max_predictions={self.max_predictions!r} must be a positive integer or None "
                             "(no cap).")
        if not isinstance(self.whole_word, bool):
            raise ValueError(f"whole_word={self.whole_word!r} must be True or False.")


@dataclass(frozen=True)
class TokenIds:
    """What masking needs of a tokenizer: the [MASK] id, the special ids (never selected, never drawn as random
    tokens; [MASK] among them) and the vocabulary size. Checked once, when made; :meth:`of` reads a tokenizer."""

    mask_token_id: int
    special_ids: tuple[int, ...]
    vocab_size: int

    def __post_init__(self) -> None:
        if not _is_int(self.vocab_size) or self.vocab_size < 1:
            raise ValueError(f"vocab_size={self.vocab_size!r} must be a positive integer (len(tokenizer), 30522 "
                             "for bert-base-uncased).")
        try:
            specials = None if isinstance(self.special_ids, str | bytes) else tuple(self.special_ids)
        except TypeError:  # not iterable
            specials = None
        if specials is None or not all(_is_int(i) and 0 <= i < self.vocab_size for i in specials):
            raise ValueError(f"special_ids={self.special_ids!r} must be ids in [0, {self.vocab_size}), e.g. "
                             "tokenizer.all_special_ids ([0, 100, 101, 102, 103] for bert-base-uncased).")
        object.__setattr__(self, "special_ids", tuple(int(i) for i in specials))  # frozen: normalise through object
        if not _is_int(self.mask_token_id) or self.mask_token_id not in self.special_ids:
            raise ValueError(f"mask_token_id={self.mask_token_id!r} must be one of special_ids {self.special_ids} "
                             "(tokenizer.mask_token_id, 103 for bert-base-uncased): [MASK] is never selected.")

    @classmethod
    def of(cls, tokenizer: Any) -> TokenIds:
        """The ids of a transformers tokenizer: ``mask_token_id``, ``all_special_ids`` and ``len(tokenizer)``."""
        if tokenizer.mask_token_id is None:
            raise ValueError("this tokenizer has no mask token: use one made for masked-LM training (a BERT "
                             "tokenizer) or add one with tokenizer.add_special_tokens({'mask_token': '[MASK]'}).")
        return cls(tokenizer.mask_token_id, tuple(tokenizer.all_special_ids), len(tokenizer))


def _replacement_ids(spec: MaskSpec, tokens: TokenIds) -> torch.Tensor:
    """The ids a random replacement is drawn from: the whole vocabulary, minus the special ids by default."""
    ids = torch.arange(tokens.vocab_size)
    if spec.random_from == "non_special":
        ids = ids[~torch.isin(ids, torch.tensor(tokens.special_ids, dtype=torch.long))]
    if len(ids) == 0:
        raise ValueError("every id of the vocabulary is special: there is no token to draw random replacements "
                         "from. Use random_from='vocab' or a mask_mix with no random share, e.g. (0.9, 0.0, 0.1).")
    return ids


def _check_spec(spec: Any) -> None:
    if not isinstance(spec, MaskSpec):
        raise TypeError(f"spec must be a MaskSpec (e.g. MaskSpec(mask_rate=0.15)), got {type(spec).__name__}.")


def _check_spec_and_tokens(spec: Any, tokens: Any) -> None:
    _check_spec(spec)
    if not isinstance(tokens, TokenIds):
        raise TypeError(f"tokens must be a TokenIds (e.g. TokenIds.of(tokenizer)), got {type(tokens).__name__}.")


# ---- counting ----------------------------------------------------------------------------------------------


def num_to_predict(n_tokens: torch.Tensor, spec: MaskSpec) -> torch.Tensor:
    """The original BERT count per row, ``min(max_predictions, max(1, round(mask_rate * n)))``, for ``n_tokens``.

    ``rounding="half_up"`` reproduces Python 2's ``round`` (the original's), ``"half_even"`` Python 3's.
    """
    if not isinstance(n_tokens, torch.Tensor) or n_tokens.dtype.is_floating_point or n_tokens.dtype == torch.bool:
        raise TypeError("n_tokens must be an integer tensor of token counts, e.g. attention_mask.sum(1) or "
                        "torch.tensor([30, 70]).")
    x = n_tokens.to(torch.float64) * spec.mask_rate
    if spec.rounding == "half_up":
        k = torch.floor(x) + (x - torch.floor(x) >= 0.5).to(torch.float64)
    else:
        k = torch.round(x)  # torch rounds halves to even, like Python 3
    k = k.to(torch.long).clamp(min=1)
    return k if spec.max_predictions is None else k.clamp(max=spec.max_predictions)


# ---- step 1: selection -------------------------------------------------------------------------------------


def _select_fixed(maskable: torch.Tensor, k: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Exactly ``k[i]`` positions of row ``i``, uniformly among its maskable ones."""
    k_max = int(k.max())
    if k_max == 0:
        return torch.zeros_like(maskable)
    # Random 31-bit keys: the k largest of i.i.d. keys are a uniform k-subset. (Two equal keys in a row — chance
    # ≈ L²/2³² ≈ 4e-6 for L = 128 — are ordered by position; int32 keys sort faster than float64 ones.)
    scores = torch.randint(0, 2**31 - 1, maskable.shape, generator=generator, dtype=torch.int32)
    top = scores.masked_fill_(~maskable, -1).topk(k_max, dim=1).indices
    keep = torch.arange(k_max)[None, :] < k[:, None]
    return torch.zeros_like(maskable).scatter(1, top, keep)


def _select(
    maskable: torch.Tensor, spec: MaskSpec, generator: torch.Generator | None, n_tokens: torch.Tensor | None,
    word_starts: torch.Tensor | None,
) -> torch.Tensor:
    k = None
    if spec.mask_scheme == "fixed":
        counts = maskable.sum(dim=1) if n_tokens is None else n_tokens
        k = torch.minimum(num_to_predict(counts, spec), maskable.sum(dim=1))
    if word_starts is not None:
        return select_words(maskable, word_starts, spec.mask_rate, k, generator)
    if k is None:
        return (torch.rand(maskable.shape, generator=generator) < spec.mask_rate) & maskable
    return _select_fixed(maskable, k, generator)


def _check_words(spec: MaskSpec, word_starts: torch.Tensor | None) -> None:
    if spec.whole_word and word_starts is None:
        raise ValueError("whole_word=True needs the words: pass word_starts=whole_word.word_starts(word_ids=...) "
                         "(tokenizer word ids) or word_starts(continuation=...) (True at ## pieces).")
    if word_starts is not None and not spec.whole_word:
        raise ValueError("word_starts was given but whole_word is False: use MaskSpec(whole_word=True) to mask "
                         "whole words, or leave word_starts out.")


def select_positions(
    maskable: torch.Tensor, spec: MaskSpec, *, generator: torch.Generator | None = None,
    n_tokens: torch.Tensor | None = None, word_starts: torch.Tensor | None = None,
) -> torch.Tensor:
    """Bool (batch, length): the positions to predict, chosen only among ``maskable`` (bool), as ``spec`` says.

    Fixed-count takes :func:`num_to_predict` of ``n_tokens`` (default: the row's maskable count; :func:`mask_tokens`
    passes the count of all non-padding tokens, as the original does). ``whole_word=True`` needs ``word_starts``.
    """
    _check_spec(spec)
    _check_words(spec, word_starts)
    if not isinstance(maskable, torch.Tensor) or maskable.dtype != torch.bool:
        raise TypeError(f"maskable must be a bool tensor (True where a token may be selected), got "
                        f"{getattr(maskable, 'dtype', type(maskable).__name__)}.")
    if maskable.dim() != 2:
        raise ValueError(f"maskable must be 2-D (batch, length), got shape {tuple(maskable.shape)}: for one "
                         "sequence pass maskable[None, :].")
    if word_starts is not None and word_starts.shape != maskable.shape:
        raise ValueError(f"word_starts has shape {tuple(word_starts.shape)} but maskable has "
                         f"{tuple(maskable.shape)}: they must match.")
    if maskable.numel() == 0:
        return maskable.clone()
    return _select(maskable, spec, generator, n_tokens, None if word_starts is None else word_starts.bool())


# ---- step 2: replacement -----------------------------------------------------------------------------------


def _replace(
    input_ids: torch.Tensor, selected: torch.Tensor, mix: tuple[float, float, float], mask_token_id: int,
    random_ids: torch.Tensor | None, generator: torch.Generator | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    p_mask, p_random, p_keep = mix
    # One draw u in [0, 1) per position, split at the cumulative shares. Dividing by the total makes the shares
    # exact when they sum to 1 only within 1e-6; with no unchanged share the second split is x / x = 1.0 exactly.
    total = p_mask + p_random + p_keep
    u = torch.rand(input_ids.shape, generator=generator)
    to_mask = selected & (u < p_mask / total)
    to_random = selected & ~to_mask & (u < (p_mask + p_random) / total)
    new_ids = torch.where(to_mask, mask_token_id, input_ids) if p_mask > 0 else input_ids.clone()
    n_random = int(to_random.count_nonzero())
    if n_random:
        draws = torch.randint(len(random_ids), (n_random,), generator=generator)
        new_ids.masked_scatter_(to_random, random_ids.to(input_ids.dtype)[draws])  # row-major order, like x[m] = v
    labels = torch.where(selected, input_ids, IGNORE_INDEX)
    action = torch.where(to_mask, MASKED, torch.where(to_random, RANDOM, selected.to(torch.int8) * KEPT))
    return new_ids, labels, action.to(torch.int8)


def apply_replacement(
    input_ids: torch.Tensor, selected: torch.Tensor, spec: MaskSpec, tokens: TokenIds, *,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Corrupt the ``selected`` positions; return ``(new_input_ids, labels, action)`` (new tensors).

    One uniform draw ``u`` per position: ``u < mask_mix[0]`` → [MASK], ``u < mask_mix[0] + mask_mix[1]`` → a token
    drawn uniformly from the allowed ids (``random_from``), otherwise unchanged. ``labels`` holds the original id at
    selected positions and :data:`IGNORE_INDEX` elsewhere; ``action`` the codes :data:`MASKED`, :data:`RANDOM`,
    :data:`KEPT` (0 elsewhere).
    """
    _check_spec_and_tokens(spec, tokens)
    ids = _as_batch(input_ids)
    chosen = _like_ids(selected, ids, "selected")
    random_ids = _replacement_ids(spec, tokens) if spec.mask_mix[1] > 0 else None
    return _replace(ids, chosen, spec.mask_mix, tokens.mask_token_id, random_ids, generator)


# ---- both steps --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MaskedBatch:
    """A masked batch: model inputs, labels (:data:`IGNORE_INDEX` = ignored), and what happened at each position."""

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


def _as_batch(input_ids: Any) -> torch.Tensor:
    """``input_ids`` checked: a non-empty (batch, length) integer tensor."""
    if not isinstance(input_ids, torch.Tensor):
        raise TypeError(f"input_ids must be a torch.Tensor (batch, length), got {type(input_ids).__name__}: pad "
                        "the sequences into one (tokenizer(texts, padding=True, return_tensors='pt')) or use "
                        "MLMCollator.")
    if input_ids.dtype == torch.bool or input_ids.dtype.is_floating_point or input_ids.dtype.is_complex:
        raise TypeError(f"input_ids must hold integer token ids, got dtype {input_ids.dtype}: pass the tokenizer's "
                        "ids (e.g. tokenizer(texts, return_tensors='pt')['input_ids']) or convert with .long().")
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids must be 2-D (batch, length), got shape {tuple(input_ids.shape)}: for one "
                         "sequence pass ids[None, :].")
    if input_ids.numel() == 0:
        raise ValueError("input_ids is empty: pass at least one sequence with at least one token.")
    return input_ids


def _like_ids(x: Any, ids: torch.Tensor, name: str) -> torch.Tensor:
    """``x`` (a mask over the tokens) as a bool tensor of the shape of ``ids``."""
    if not isinstance(x, torch.Tensor) or x.shape != ids.shape:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name} must be a tensor shaped like input_ids {tuple(ids.shape)}, got {shape}.")
    return x.bool()


def _maskable(ids: torch.Tensor, attention: torch.Tensor, tokens: TokenIds) -> torch.Tensor:
    """Bool: real (attended) tokens that are not special; checks the real tokens' ids fit the vocabulary."""
    if not all(0 <= int(v) < tokens.vocab_size for v in ids.aminmax()):
        real = ids[attention]  # padding may hold any id: only real tokens must fit the vocabulary
        if len(real) and (int(real.min()) < 0 or int(real.max()) >= tokens.vocab_size):
            raise ValueError(f"input_ids holds ids in [{int(real.min())}, {int(real.max())}] but vocab_size="
                             f"{tokens.vocab_size}: use the tokenizer that produced these ids "
                             "(TokenIds.of(tokenizer)).")
    maskable = attention.clone()
    # a comparison per special id: for a tokenizer's ~5, 2x faster than torch.isin (benchmark ids: 35 vs 67 ms)
    for special_id in tokens.special_ids:
        maskable &= ids != special_id
    if not maskable.any():
        raise ValueError("no token of this batch may be masked (every one is special or padding): drop empty "
                         "examples, or check attention_mask and the special ids.")
    return maskable


def mask_tokens(
    input_ids: torch.Tensor, spec: MaskSpec, tokens: TokenIds, *, attention_mask: torch.Tensor | None = None,
    word_starts: torch.Tensor | None = None, generator: torch.Generator | None = None,
) -> MaskedBatch:
    """Select and corrupt positions of a padded batch of ids (batch, length), as ``spec`` says.

    Maskable = a real token (``attention_mask``, default all ones) whose id is not in ``tokens.special_ids``. With
    ``whole_word=True``, ``word_starts`` (:func:`mlm_course.whole_word.word_starts`) says where words begin. Rows
    without a maskable token get no selection; a batch where no row has one raises ValueError, as do ids outside
    the vocabulary, before anything is drawn. Inputs are not modified.
    """
    _check_spec_and_tokens(spec, tokens)
    ids = _as_batch(input_ids)
    attention = torch.ones_like(ids, dtype=torch.bool) if attention_mask is None else _like_ids(
        attention_mask, ids, "attention_mask")
    starts = None if word_starts is None else _like_ids(word_starts, ids, "word_starts")
    _check_words(spec, starts)
    random_ids = _replacement_ids(spec, tokens) if spec.mask_mix[1] > 0 else None
    maskable = _maskable(ids, attention, tokens)
    selected = _select(maskable, spec, generator, attention.sum(dim=1), starts)
    new_ids, labels, action = _replace(ids, selected, spec.mask_mix, tokens.mask_token_id, random_ids, generator)
    return MaskedBatch(new_ids, labels, attention.to(ids.dtype), action, maskable)


def display_codes(batch: MaskedBatch, *, before_replacement: bool = False) -> torch.Tensor:
    """Per-position codes for :func:`mlm_course.plots.mask_grid`: -1 special/padding, else :attr:`MaskedBatch.action`
    (or 4 for every selected position with ``before_replacement=True``)."""
    codes = torch.where(batch.selected, 4, 0) if before_replacement else batch.action.long()
    return torch.where(batch.maskable, codes, -1)


# ---- static vs dynamic masking -----------------------------------------------------------------------------


def epoch_masks(
    input_ids: torch.Tensor, spec: MaskSpec, tokens: TokenIds, *, epochs: int, static_copies: int | None = None,
    attention_mask: torch.Tensor | None = None, word_starts: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> list[MaskedBatch]:
    """The masked batch seen at each of ``epochs`` epochs (each one :func:`mask_tokens`).

    ``static_copies=None``: a fresh mask every epoch (dynamic masking, RoBERTa). ``static_copies=c``: ``c`` masked
    copies made once, epoch e reusing copy ``e % c`` (the original BERT's ``dupe_factor``, 10: over 40 epochs each
    mask is seen 4 times).
    """
    if not _is_int(epochs) or epochs < 1:
        raise ValueError(f"epochs={epochs!r} must be a positive integer.")
    if static_copies is not None and (not _is_int(static_copies) or static_copies < 1):
        raise ValueError(f"static_copies={static_copies!r} must be a positive integer (the original BERT made 10) "
                         "or None for dynamic masking.")
    draws = epochs if static_copies is None else static_copies
    made = [mask_tokens(input_ids, spec, tokens, attention_mask=attention_mask, word_starts=word_starts,
                        generator=generator) for _ in range(draws)]
    return [made[e % draws] for e in range(epochs)]


__all__ = [
    "IGNORE_INDEX", "NOT_SELECTED", "MASKED", "RANDOM", "KEPT", "ACTION_NAMES", "DEFAULT_MIX", "MaskSpec",
    "TokenIds", "num_to_predict", "select_positions", "apply_replacement", "MaskedBatch", "mask_tokens",
    "display_codes", "epoch_masks",
]
