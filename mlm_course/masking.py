"""Masking for BERT's masked-language-model objective: one :class:`MaskSpec`, two vectorised steps.

A :class:`MaskSpec` says how masks are drawn; it is validated once, when it is made.

1. **Select** (:func:`select_positions`) positions to predict, only among *maskable* tokens (never [CLS], [SEP],
   [PAD] or another special token). ``scheme="bernoulli"``: each with probability ``rate`` (transformers'
   ``DataCollatorForLanguageModeling``, RoBERTa). ``scheme="fixed"``: exactly
   ``min(max_predictions, max(1, round(rate * n)))`` per sequence (the original BERT ``create_pretraining_data.py``),
   where ``n`` counts every non-padding token, [CLS] and [SEP] included; all maskable tokens if a row has fewer.
   The original ran on Python 2, whose ``round`` sends halves away from zero: ``rounding="half_up"`` (default)
   follows it, ``"half_even"`` is Python 3's; at 15 % they differ for n = 30, 70, 110, … With ``whole_word=True``
   the unit is a word, all its pieces together (:mod:`mlm_course.whole_word`).
2. **Replace** (:func:`apply_replacement`) each selected token: by default (``mix``) 80 % [MASK], 10 % a random
   token, 10 % unchanged, decided by one uniform draw per position. Random tokens come from the non-special ids
   (``random_from="non_special"``) or, as in the original and in transformers, from the whole vocabulary
   (``"vocab"``). Labels: the original id at selected positions, :data:`IGNORE_INDEX` everywhere else.

:func:`mask_tokens` does both. :func:`static_masks` / :func:`epoch_masks` contrast static masking (the original's
``dupe_factor`` pre-masked copies) with dynamic masking (RoBERTa); :func:`frozen_eval_masks` gives the same masks
at every evaluation. :mod:`mlm_course.collator` pads examples and masks them; :mod:`mlm_course.mask_checks` measures
masks. Inputs are never modified. Every random draw takes a ``torch.Generator`` (``None`` = torch's global RNG).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Real
from statistics import NormalDist
from typing import Any

import torch

from mlm_course.whole_word import select_words, word_starts

IGNORE_INDEX = -100
"""Label of every position the loss must ignore (PyTorch's ``cross_entropy`` default ``ignore_index``)."""

NOT_SELECTED, MASKED, RANDOM, KEPT = 0, 1, 2, 3
"""Codes of :attr:`MaskedBatch.action`: what happened to each position."""

ACTION_NAMES = ("not selected", "[MASK]", "random token", "unchanged")
SCHEMES = ("bernoulli", "fixed")
ROUNDINGS = ("half_up", "half_even")
RANDOM_FROM = ("non_special", "vocab")
DEFAULT_MIX = (0.8, 0.1, 0.1)


# ---- the specification -------------------------------------------------------------------------------------


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


def _check_max_predictions(max_predictions: int | None) -> None:
    if max_predictions is not None and (isinstance(max_predictions, bool) or int(max_predictions) < 1):
        raise ValueError(f"max_predictions={max_predictions!r} must be a positive integer or None (no cap).")


@dataclass(frozen=True)
class MaskSpec:
    """How masks are drawn (fields: see the module docstring); every field is checked here, once.

    ``max_predictions`` caps the fixed count (None = no cap; the original used 20 for 128-token sequences).
    """

    rate: float = 0.15
    mix: tuple[float, float, float] = DEFAULT_MIX
    scheme: str = "bernoulli"
    max_predictions: int | None = None
    rounding: str = "half_up"
    random_from: str = "non_special"
    whole_word: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate", validate_rate(self.rate))  # frozen: normalise through object
        object.__setattr__(self, "mix", validate_mix(self.mix))
        _check_choice("scheme", self.scheme, SCHEMES)
        _check_choice("rounding", self.rounding, ROUNDINGS)
        _check_choice("random_from", self.random_from, RANDOM_FROM)
        _check_max_predictions(self.max_predictions)
        if not isinstance(self.whole_word, bool):
            raise ValueError(f"whole_word={self.whole_word!r} must be True or False.")


def resolve_spec(spec: MaskSpec | None = None, fields: Mapping[str, Any] | None = None) -> MaskSpec:
    """The spec to run with: ``spec`` (default ``MaskSpec()``) with the ``fields`` given as keywords replaced.

    This is what lets ``mask_tokens(ids, rate=0.3, …)`` stand for ``mask_tokens(ids, MaskSpec(rate=0.3), …)``.
    """
    if spec is None:
        spec = MaskSpec()
    elif not isinstance(spec, MaskSpec):
        raise TypeError(f"spec must be a MaskSpec (e.g. MaskSpec(rate=0.15)), got {type(spec).__name__}.")
    return dataclasses.replace(spec, **fields) if fields else spec


def _check_word_units(spec: MaskSpec, has_words: bool) -> None:
    if spec.whole_word and not has_words:
        raise ValueError(
            "whole_word=True needs the words: pass word_ids (tokenizer word ids, -1 for specials) or continuation "
            "(True at ## pieces, e.g. continuation_lookup(tokenizer)[input_ids])."
        )
    if has_words and not spec.whole_word:
        raise ValueError("word ids or continuation flags were given but whole_word is False: pass whole_word=True "
                         "to mask whole words, or leave the word information out.")


# ---- counting ----------------------------------------------------------------------------------------------


def _count(n_tokens: torch.Tensor, rate: float, max_predictions: int | None, rounding: str) -> torch.Tensor:
    x = n_tokens.to(torch.float64) * rate
    if rounding == "half_up":
        k = torch.floor(x) + (x - torch.floor(x) >= 0.5).to(torch.float64)
    else:
        k = torch.round(x)  # torch rounds halves to even, like Python 3
    k = k.to(torch.long).clamp(min=1)
    return k if max_predictions is None else k.clamp(max=int(max_predictions))


def num_to_predict(
    n_tokens: int | torch.Tensor, rate: float = 0.15, *, max_predictions: int | None = None, rounding: str = "half_up"
) -> int | torch.Tensor:
    """The original BERT count ``min(max_predictions, max(1, round(rate * n)))`` (int or per-row tensor).

    ``rounding="half_up"`` reproduces Python 2's ``round`` (the original's), ``"half_even"`` Python 3's.
    ``max_predictions=None`` means no cap (the original's flag defaulted to 20 for 128-token sequences).
    """
    spec = MaskSpec(rate=rate, max_predictions=max_predictions, rounding=rounding)
    if isinstance(n_tokens, torch.Tensor):
        return _count(n_tokens, spec.rate, spec.max_predictions, spec.rounding)
    return int(_count(torch.tensor(int(n_tokens)), spec.rate, spec.max_predictions, spec.rounding))


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
    maskable: torch.Tensor, spec: MaskSpec, generator: torch.Generator | None, n_tokens: Any,
    starts: torch.Tensor | None,
) -> torch.Tensor:
    k = None
    if spec.scheme == "fixed":
        counts = maskable.sum(dim=1) if n_tokens is None else torch.as_tensor(n_tokens)
        k = torch.minimum(_count(counts, spec.rate, spec.max_predictions, spec.rounding), maskable.sum(dim=1))
    if starts is not None:
        return select_words(maskable, starts, spec.rate, k, generator)
    if k is None:
        return (torch.rand(maskable.shape, generator=generator) < spec.rate) & maskable
    return _select_fixed(maskable, k, generator)


def select_positions(
    maskable: torch.Tensor,
    spec: MaskSpec | None = None,
    *,
    generator: torch.Generator | None = None,
    n_tokens: torch.Tensor | None = None,
    starts: torch.Tensor | None = None,
    **spec_fields: Any,
) -> torch.Tensor:
    """Bool (batch, length): the positions to predict, chosen only among ``maskable``, as ``spec`` says.

    ``spec`` fields may be given as keywords (``rate=0.4``). Fixed-count takes :func:`num_to_predict` of
    ``n_tokens`` (default: the row's maskable count; :func:`mask_tokens` passes the count of all non-padding
    tokens, as the original does). ``whole_word=True`` needs ``starts``, from :func:`word_starts`.
    """
    spec = resolve_spec(spec, spec_fields)
    _check_word_units(spec, starts is not None)
    maskable = torch.as_tensor(maskable).bool()
    if maskable.dim() != 2:
        raise ValueError(f"maskable must be 2-D (batch, length), got shape {tuple(maskable.shape)}.")
    if maskable.numel() == 0:
        return maskable.clone()
    return _select(maskable, spec, generator, n_tokens, None if starts is None else starts.bool())


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


def _replace(
    input_ids: torch.Tensor, selected: torch.Tensor, mix: tuple[float, float, float], mask_token_id: int | None,
    random_ids: torch.Tensor | None, generator: torch.Generator | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    p_mask, p_random, p_keep = mix
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
    input_ids: torch.Tensor, selected: torch.Tensor, *, mask_token_id: int | None, mix: Sequence[float] = DEFAULT_MIX,
    random_ids: torch.Tensor | None = None, generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Corrupt the ``selected`` positions; return ``(new_input_ids, labels, action)`` (new tensors).

    One uniform draw ``u`` per position: ``u < mix[0]`` → [MASK], ``u < mix[0] + mix[1]`` → a token drawn
    uniformly from ``random_ids``, otherwise unchanged. ``labels`` holds the original id at selected positions and
    :data:`IGNORE_INDEX` elsewhere; ``action`` the codes :data:`MASKED`, :data:`RANDOM`, :data:`KEPT` (0 elsewhere).
    """
    return _replace(input_ids, selected, validate_mix(mix), mask_token_id, random_ids, generator)


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


def _as_batch(input_ids: Any) -> tuple[torch.Tensor, bool]:
    """``input_ids`` as a non-empty (batch, length) integer tensor, and whether it was one sequence."""
    ids = _as_int_tensor(input_ids, "input_ids")
    one_sequence = ids.dim() == 1
    ids = ids[None, :] if one_sequence else ids
    if ids.dim() != 2:
        raise ValueError(f"input_ids must be 1-D (one sequence) or 2-D (batch, length), got shape {tuple(ids.shape)}.")
    if ids.numel() == 0:
        raise ValueError("input_ids is empty: pass at least one sequence with at least one token.")
    return ids, one_sequence


def _like_ids(x: Any, ids: torch.Tensor, one_sequence: bool, name: str) -> torch.Tensor:
    """``x`` (a mask over the tokens) as a bool tensor of the shape of ``ids``."""
    t = torch.as_tensor(x)
    t = t[None, :] if one_sequence and t.dim() == 1 else t
    if t.shape != ids.shape:
        raise ValueError(f"{name} has shape {tuple(t.shape)} but input_ids has {tuple(ids.shape)}: they must match.")
    return t.bool()


def _maskable(
    ids: torch.Tensor, attention: torch.Tensor, special_ids: list[int] | None, special: torch.Tensor | None,
    vocab_size: int | None,
) -> torch.Tensor:
    """Bool: real (attended) tokens that are not special; checks the ids fit the vocabulary."""
    if special_ids is None and special is None:
        raise ValueError(
            "say which tokens are special: pass special_ids=tokenizer.all_special_ids (e.g. [0, 100, 101, 102, 103] "
            "for bert-base-uncased) and/or special_mask; special_ids=() if there are none."
        )
    if vocab_size is not None and not all(0 <= int(v) < vocab_size for v in ids.aminmax()):
        real = ids[attention]  # padding may hold any id: only real tokens must fit the vocabulary
        if len(real) and (int(real.min()) < 0 or int(real.max()) >= vocab_size):
            raise ValueError(
                f"input_ids holds ids in [{int(real.min())}, {int(real.max())}] but vocab_size={vocab_size}: "
                "use the tokenizer that produced these ids (vocab_size=len(tokenizer))."
            )
    maskable = attention.clone()
    # a comparison per special id: for a tokenizer's ~5, 2x faster than torch.isin (benchmark ids: 35 vs 67 ms)
    for special_id in special_ids or ():
        maskable &= ids != special_id
    if special is not None:
        maskable &= ~special
    if not maskable.any():
        raise ValueError(
            "no token of this batch may be masked (every one is special or padding): drop empty examples, or "
            "check special_ids / special_mask / attention_mask."
        )
    return maskable


def mask_tokens(
    input_ids: Any,
    spec: MaskSpec | None = None,
    *,
    mask_token_id: int | None,
    vocab_size: int | None = None,
    special_ids: Iterable[int] | None = None,
    special_mask: Any = None,
    attention_mask: Any = None,
    generator: torch.Generator | None = None,
    word_ids: Any = None,
    continuation: Any = None,
    random_ids: torch.Tensor | None = None,
    **spec_fields: Any,
) -> MaskedBatch:
    """Select and corrupt positions of a padded batch of ids (batch, length) or one sequence (length,).

    ``spec`` (default ``MaskSpec()``) says how; its fields may also be given as keywords (``rate=0.3``). Maskable
    = not padding (``attention_mask``, default all ones) and not special (``special_ids`` such as
    ``tokenizer.all_special_ids`` and/or a ``special_mask`` with 1 at special tokens; pass at least one, even
    ``special_ids=()``). ``whole_word=True`` needs ``word_ids`` or ``continuation`` (see :func:`word_starts`).
    ``vocab_size`` (or ``random_ids``) is needed when ``mix`` has a random share. Rows without a maskable token
    get no selection; a batch where no row has one raises ValueError. Inputs are not modified.
    """
    spec = resolve_spec(spec, spec_fields)
    _check_word_units(spec, word_ids is not None or continuation is not None)
    ids, one_sequence = _as_batch(input_ids)
    attention = (torch.ones_like(ids, dtype=torch.bool) if attention_mask is None
                 else _like_ids(attention_mask, ids, one_sequence, "attention_mask"))
    special_ids = None if special_ids is None else [int(i) for i in special_ids]
    special = None if special_mask is None else _like_ids(special_mask, ids, one_sequence, "special_mask")
    maskable = _maskable(ids, attention, special_ids, special, vocab_size)
    starts = None
    if spec.whole_word:
        if word_ids is not None and one_sequence:
            word_ids = torch.as_tensor([-1 if w is None else w for w in word_ids])[None, :]
        flags = None if continuation is None else _like_ids(continuation, ids, one_sequence, "continuation")
        starts = word_starts(maskable, word_ids=word_ids, continuation=flags)
    if random_ids is None and spec.mix[1] > 0:
        if vocab_size is None:
            raise ValueError("pass vocab_size (len(tokenizer)) so random replacements can be drawn, or random_ids.")
        random_ids = replacement_ids(vocab_size, special_ids or [], spec.random_from)
    selected = _select(maskable, spec, generator, attention.sum(dim=1), starts)
    new_ids, labels, action = _replace(ids, selected, spec.mix, mask_token_id, random_ids, generator)
    out = MaskedBatch(new_ids, labels, attention.to(ids.dtype), action, maskable)
    return MaskedBatch(*(getattr(out, f.name)[0] for f in dataclasses.fields(out))) if one_sequence else out


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


__all__ = [
    "IGNORE_INDEX", "NOT_SELECTED", "MASKED", "RANDOM", "KEPT", "ACTION_NAMES", "DEFAULT_MIX", "MaskSpec",
    "resolve_spec", "validate_rate", "validate_mix", "num_to_predict", "select_positions", "replacement_ids",
    "apply_replacement", "MaskedBatch", "mask_tokens", "frozen_eval_masks", "static_masks", "epoch_masks",
    "display_codes", "binomial_interval",
]
