"""The masked-LM objective, written once, and pseudo-log-likelihood scoring.

* :func:`mlm_loss` — ``−(1/|C|) Σ_{i∈C} log p(x_i | X̃)`` from logits and labels (−100 = not in C): notebook 01's
  per-position cross-entropy (:func:`mlm_course.logprob.cross_entropy_manual`) at the masked positions, reduced.
  Equals ``F.cross_entropy(..., ignore_index=-100)`` and ``BertForMaskedLM(..., labels=...).loss``.
* :func:`masked_lm_loss` — the same mean loss on a model's batch, the way the training step computes it (only the
  masked positions projected to the vocabulary, torch's fused cross-entropy, no wait for the device).
* :func:`masked_accuracy` — top-k accuracy over the masked positions.
* :func:`pseudo_log_likelihood` — Salazar et al. (2020): ``PLL(S) = Σ_i log p(x_i | S with only x_i masked)``;
  ``word_level=True`` is Kauf & Ivanova's (2023) PLL-word-l2r, which also masks the later pieces of the same word.
* :func:`factorised_joint` — the independence approximation on a two-token toy distribution.

Notebook 05's experiments with this loss (the ``labels=input_ids`` bug) are in :mod:`mlm_course.objective_bug`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import PreTrainedTokenizerBase

from mlm_course.logprob import cross_entropy_manual
from mlm_course.masking import IGNORE_INDEX
from mlm_course.models import evaluation_mode

REDUCTIONS = ("mean", "sum", "per_sequence_mean", "none")

# ---- the loss --------------------------------------------------------------------------------------------------


def _check_logits_labels(logits: torch.Tensor, labels: torch.Tensor) -> None:
    if not isinstance(logits, torch.Tensor) or not isinstance(labels, torch.Tensor):
        raise TypeError("logits and labels must be torch tensors (e.g. model(...).logits and batch['labels']).")
    if not logits.is_floating_point():
        raise TypeError(f"logits must be floating point, got {logits.dtype}: pass the model's raw output scores.")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise TypeError(
            f"labels must hold integer token ids (−100 = ignored), got dtype {labels.dtype}: use labels.long()."
        )
    if logits.dim() < 2 or logits.shape[:-1] != labels.shape:
        raise ValueError(
            f"logits {tuple(logits.shape)} and labels {tuple(labels.shape)} do not fit: logits must be labels' "
            "shape plus a vocabulary dimension, e.g. (batch, length, vocab) and (batch, length)."
        )
    kept = labels[labels != IGNORE_INDEX]
    if kept.numel() == 0:
        raise ValueError(
            "no position has a label other than -100, so there is nothing to predict: mask at least one token "
            "(check the mask rate and that the batch is not only special tokens / padding)."
        )
    if int(kept.min()) < 0 or int(kept.max()) >= logits.shape[-1]:
        raise ValueError(
            f"labels hold ids outside [0, {logits.shape[-1] - 1}] (the vocabulary): use -100 for ignored positions "
            "and the tokenizer that matches the model."
        )


def mlm_loss(logits: torch.Tensor, labels: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """The masked-LM loss: −log p(true token) at the positions whose label is not −100, reduced.

    ``"mean"``: over all masked positions of the batch (= ``F.cross_entropy``, ``BertForMaskedLM`` and
    :func:`masked_lm_loss`); ``"sum"``; ``"per_sequence_mean"``: mean within each sequence (row), then over the rows
    that have a masked position; ``"none"``: per position, 0 where ignored. ``logits`` (..., vocab), ``labels``
    (...). Computed in float32 (or float64 if the logits are) whatever the logits' dtype.
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction={reduction!r} is not known: use one of {', '.join(map(repr, REDUCTIONS))}.")
    _check_logits_labels(logits, labels)
    if reduction == "per_sequence_mean" and labels.dim() < 2:
        raise ValueError("per_sequence_mean needs a batch of sequences: labels of shape (batch, length).")
    flat = logits.reshape(-1, logits.shape[-1])
    flat = flat if flat.dtype == torch.float64 else flat.float()
    if reduction in ("mean", "sum"):
        return cross_entropy_manual(flat, labels.reshape(-1), reduction)
    losses = cross_entropy_manual(flat, labels.reshape(-1), "none").view(labels.shape)
    if reduction == "none":
        return losses
    per_row = losses.flatten(1).sum(1)
    counts = (labels != IGNORE_INDEX).flatten(1).sum(1)
    has = counts > 0
    return (per_row[has] / counts[has]).mean()


# ---- the same loss on a model's batch: the training path -------------------------------------------------------


def masked_positions(labels: torch.Tensor) -> torch.Tensor:
    """The flat indices (into ``labels.flatten()``) of the positions to predict, for :func:`masked_lm_outputs`."""
    return (labels.flatten() != IGNORE_INDEX).nonzero().squeeze(1)


def masked_lm_outputs(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits, labels) at the masked positions only: those of ``batch["masked_positions"]`` (computed on the host
    by :func:`mlm_course.pretraining.mask_blocks`) or else found from the labels.

    The model runs its MLM head at those positions only (``positions=``), as the original BERT does: the
    vocabulary projection, the largest product of a small BERT, runs on ~15 % of the tokens, with the same numbers
    as projecting every position and keeping these.
    """
    positions = batch.get("masked_positions")
    positions = masked_positions(batch["labels"]) if positions is None else positions
    logits = model(batch["input_ids"], batch.get("attention_mask"), positions=positions)
    return logits, batch["labels"].flatten().index_select(0, positions)


def masked_lm_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """:func:`mlm_loss` of ``model`` on ``batch``, the way training computes it: the loss of the training step.

    With ``batch["masked_positions"]`` only those positions are projected to the vocabulary (sparse logits; a
    padding position whose label is −100 may be among them, and is ignored); without, every position is, and
    ``F.cross_entropy`` ignores those labelled −100. Both give :func:`mlm_loss` (tested), in float32, without
    reading anything back from the device.
    """
    positions = batch.get("masked_positions")
    if positions is not None and positions.numel() == 0:
        raise ValueError("the batch has no masked position: raise the mask rate or use longer sequences")
    logits = model(batch["input_ids"], batch.get("attention_mask"), positions=positions)
    labels = batch["labels"].flatten()
    labels = labels if positions is None else labels.index_select(0, positions)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels, ignore_index=IGNORE_INDEX)


# ---- accuracy --------------------------------------------------------------------------------------------------


def masked_accuracy(logits: torch.Tensor, labels: torch.Tensor, k: int = 1) -> float:
    """Share of masked positions (label ≠ −100) whose true token is among the ``k`` highest logits."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= logits.shape[-1]:
        raise ValueError(f"k={k!r} must be an integer between 1 and the vocabulary size {logits.shape[-1]}.")
    _check_logits_labels(logits, labels)
    kept = labels != IGNORE_INDEX
    top = logits[kept].topk(k, dim=-1).indices
    return float((top == labels[kept][:, None]).any(-1).float().mean())


# ---- the independence approximation ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Factorised:
    """A joint table p(a, b) of two masked tokens, its marginals and the product a factorised model predicts."""

    joint: torch.Tensor  # (A, B), sums to 1
    first: torch.Tensor  # p(a) = Σ_b p(a, b)
    second: torch.Tensor  # p(b) = Σ_a p(a, b)
    product: torch.Tensor  # p(a) p(b)
    mutual_information: float  # KL(joint ‖ product), nats: 0 exactly when the tokens are independent


def factorised_joint(joint: Sequence[Sequence[float]] | torch.Tensor) -> Factorised:
    """Marginals of ``joint`` (rows: first token, columns: second) and the product of marginals.

    Masked-LM predicts each masked token separately given the visible ones, so the best it can say about two
    masked tokens is the product of their marginals; the mutual information is what that loses.
    """
    p = torch.as_tensor(joint, dtype=torch.float64)
    if p.dim() != 2 or p.numel() == 0:
        raise ValueError("joint must be a 2-D table: rows = first token, columns = second token.")
    if (p < 0).any() or not math.isclose(float(p.sum()), 1.0, abs_tol=1e-6):
        raise ValueError(f"joint must hold probabilities ≥ 0 that sum to 1 (sum is {float(p.sum()):.6g}).")
    first, second = p.sum(1), p.sum(0)
    product = first[:, None] * second[None, :]
    nz = p > 0
    mi = float((p[nz] * (p[nz] / product[nz]).log()).sum())
    return Factorised(p, first, second, product, mi)


# ---- pseudo-log-likelihood ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PLLResult:
    """Pseudo-log-likelihood of one sentence: the total and one log-probability per scored token (nats)."""

    total: float
    log_probs: torch.Tensor  # float64, one per scored token
    tokens: list[str]  # the scored tokens
    positions: torch.Tensor  # their positions in the encoded sentence ([CLS] = 0)

    @property
    def pseudo_perplexity(self) -> float:
        """exp(−PLL / number of scored tokens)."""
        return math.exp(-self.total / len(self.tokens))


def _encode_for_pll(tokenizer: PreTrainedTokenizerBase, sentence: str, word_level: bool):
    if not isinstance(sentence, str) or not sentence.strip():
        raise ValueError(f"sentence must be a non-empty string, got {sentence!r}.")
    encoded = tokenizer(sentence, truncation=True)
    ids = torch.tensor(encoded["input_ids"], dtype=torch.long)
    scored = ~torch.isin(ids, torch.tensor(tokenizer.all_special_ids, dtype=torch.long))
    positions = scored.nonzero().flatten()
    if len(positions) == 0:
        raise ValueError(f"{sentence!r} has no token to score (only special tokens): pass a real sentence.")
    words = None
    if word_level:
        try:
            words = torch.tensor([-1 if w is None else w for w in encoded.word_ids()])
        except (AttributeError, ValueError) as exc:
            raise TypeError("word_level=True needs a fast tokenizer (one with word_ids()).") from exc
    return ids, positions, words


def masked_copies(
    ids: torch.Tensor, positions: torch.Tensor, mask_token_id: int, word_ids: torch.Tensor | None = None
) -> torch.Tensor:
    """One copy of ``ids`` per scored position, with that position masked (and, given ``word_ids``, the later
    pieces of the same word too: PLL-word-l2r)."""
    copies = ids.repeat(len(positions), 1)
    rows = torch.arange(len(positions))
    copies[rows, positions] = mask_token_id
    if word_ids is not None:
        later = torch.arange(len(ids))[None, :] > positions[:, None]
        same_word = (word_ids[None, :] == word_ids[positions][:, None]) & (word_ids[None, :] >= 0)
        copies[later & same_word] = mask_token_id
    return copies


@torch.no_grad()
def _log_prob_at(model: torch.nn.Module, copies: torch.Tensor, positions: torch.Tensor, targets: torch.Tensor):
    """log p(target) at position ``positions[i]`` of copy ``i``: only those positions go through the MLM head."""
    device = next(model.parameters()).device
    flat = torch.arange(len(positions)) * copies.shape[1] + positions  # (copy, position) → index into copy·length
    at_positions = model(copies.to(device), positions=flat.to(device)).double()
    return -mlm_loss(at_positions, targets.to(device), reduction="none").cpu()  # log p = −(the loss there)


def pseudo_log_likelihood(
    model: torch.nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    sentence: str,
    *,
    batch_size: int = 64,
    word_level: bool = False,
) -> PLLResult:
    """PLL(S) = Σ_i log p(x_i | S with x_i masked), over the non-special tokens (Salazar et al., 2020).

    The n masked copies of the sentence go through the model ``batch_size`` at a time. ``word_level=True``:
    when scoring a piece, the later pieces of the same word are masked too (Kauf & Ivanova, 2023), so a
    multi-piece word cannot be read off its own continuation.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size={batch_size!r} must be a positive integer.")
    ids, positions, words = _encode_for_pll(tokenizer, sentence, word_level)
    copies = masked_copies(ids, positions, tokenizer.mask_token_id, words)
    parts = []
    with evaluation_mode(model):
        for start in range(0, len(positions), batch_size):
            part = slice(start, start + batch_size)
            parts.append(_log_prob_at(model, copies[part], positions[part], ids[positions[part]]))
    log_probs = torch.cat(parts)
    return PLLResult(float(log_probs.sum()), log_probs, tokenizer.convert_ids_to_tokens(ids[positions]), positions)


def pseudo_log_likelihood_naive(
    model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, sentence: str, *, word_level: bool = False
) -> float:
    """The same sum, one token at a time in a Python loop: mask x_i, run the model, add log p(x_i). For checking."""
    ids, positions, words = _encode_for_pll(tokenizer, sentence, word_level)
    total = 0.0
    with torch.no_grad(), evaluation_mode(model):
        for i in positions.tolist():
            masked = ids.clone()
            masked[i] = tokenizer.mask_token_id
            if words is not None and words[i] >= 0:
                masked[(torch.arange(len(ids)) > i) & (words == words[i])] = tokenizer.mask_token_id
            logits = model(masked[None, :])[0, i]
            total += float(logits.double().log_softmax(-1)[ids[i]])
    return total


def pseudo_perplexity(model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, sentence: str, **kwargs) -> float:
    """exp(−PLL / number of scored tokens) of ``sentence``."""
    return pseudo_log_likelihood(model, tokenizer, sentence, **kwargs).pseudo_perplexity


def compare_pairs(
    model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, pairs: Sequence[tuple[str, str]], **kwargs
) -> dict[str, list[float] | float]:
    """PLL of each (good, bad) sentence pair and the fraction of pairs where the good one scores higher."""
    if not pairs:
        raise ValueError("pairs is empty: pass a list of (grammatical, scrambled) sentence pairs.")
    good = [pseudo_log_likelihood(model, tokenizer, g, **kwargs).total for g, _ in pairs]
    bad = [pseudo_log_likelihood(model, tokenizer, b, **kwargs).total for _, b in pairs]
    wins = sum(g > b for g, b in zip(good, bad, strict=True))
    return {"good": good, "bad": bad, "fraction_good_higher": wins / len(pairs)}


def scramble(sentence: str, seed: int) -> str:
    """The words of ``sentence`` in a random order (seeded), with the final punctuation kept at the end."""
    import random

    words = sentence.rstrip(".!?").split()
    end = sentence[len(sentence.rstrip(".!?")) :]
    rng = random.Random(seed)
    for _ in range(100):
        shuffled = rng.sample(words, len(words))
        if shuffled != words or len(set(words)) < 2:
            return " ".join(shuffled) + end
    return " ".join(shuffled) + end
