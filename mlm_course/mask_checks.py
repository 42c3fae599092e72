"""Checking masks against their claims: measured rates with intervals, distinct masks over epochs, and the
original BERT masking code ported line by line (the reference the vectorised code is tested and benchmarked against).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal
from typing import Any

import torch

from mlm_course.masking import KEPT, MASKED, RANDOM, MaskedBatch
from mlm_course.statistics import wilson_interval


def count_distinct_masks(batches: Sequence[MaskedBatch]) -> torch.Tensor:
    """Per row: how many different (input_ids, labels) pairs the row had across ``batches`` (e.g. epochs)."""
    if not batches:
        raise ValueError("batches is empty: pass the list returned by epoch_masks(...).")
    stacked = torch.stack([torch.cat([b.input_ids, b.labels], dim=-1) for b in batches])  # (E, B, 2L)
    if stacked.dim() == 2:
        stacked = stacked[:, None, :]
    return torch.tensor([len(torch.unique(stacked[:, row], dim=0)) for row in range(stacked.shape[1])])


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
        low, high = wilson_interval(count, trials, confidence) if trials else (0.0, 1.0)
        out[name] = {"count": count, "trials": trials, "rate": count / trials if trials else float("nan"),
                     "low": low, "high": high}
    return out


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
    exact = Decimal(len(tokens) * masked_lm_prob)  # the float's exact value, rounded as the chosen round() does
    rounded = int(exact.quantize(Decimal(1), rounding=ROUND_HALF_UP if rounding == "half_up" else ROUND_HALF_EVEN))
    num = min(max_predictions_per_seq, max(1, rounded))
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
