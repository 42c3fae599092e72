"""The masked-LM objective written out, and pseudo-log-likelihood scoring.

* :func:`mlm_loss` — ``−(1/|C|) Σ_{i∈C} log p(x_i | X̃)`` from logits and labels (−100 = not in C): log-softmax,
  gather the true token's log-probability, keep the masked positions, average. Equals
  ``F.cross_entropy(..., ignore_index=-100)`` and ``BertForMaskedLM(..., labels=...).loss``.
* :func:`masked_accuracy` — top-k accuracy over the masked positions.
* :func:`pseudo_log_likelihood` — Salazar et al. (2020): ``PLL(S) = Σ_i log p(x_i | S with only x_i masked)``;
  ``word_level=True`` is Kauf & Ivanova's (2023) PLL-word-l2r, which also masks the later pieces of the same word.
* :func:`factorised_joint` — the independence approximation on a two-token toy distribution.
* :func:`buggy_mask_blocks` / :func:`train_with_batches` / :func:`evaluate_by_action` — a common bug (labels that
  are the corrupted input ids) reproduced, trained and measured.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from mlm_course import masking, pretraining
from mlm_course.models import evaluation_mode
from mlm_course.training import TrainConfig, TrainLoop, TrainResult, cycle_batches, step_generator

IGNORE_INDEX = masking.IGNORE_INDEX
REDUCTIONS = ("mean", "sum", "per_sequence_mean", "none")
DEFAULT_SPEC = pretraining.MaskSpec()

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


def true_token_log_probs(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(log p of the true token at every position, bool of the positions in the loss); 0 where ignored.

    Computed in float32 (or float64 if the logits are) whatever the logits' dtype.
    """
    _check_logits_labels(logits, labels)
    log_probs = logits.float().log_softmax(dim=-1) if logits.dtype != torch.float64 else logits.log_softmax(-1)
    kept = labels != IGNORE_INDEX
    picked = log_probs.gather(-1, torch.where(kept, labels, 0).long().unsqueeze(-1)).squeeze(-1)
    return torch.where(kept, picked, torch.zeros_like(picked)), kept


def mlm_loss(logits: torch.Tensor, labels: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """The masked-LM loss: −log p(true token) at the positions whose label is not −100, reduced.

    ``"mean"``: over all masked positions of the batch (= ``F.cross_entropy`` and ``BertForMaskedLM``);
    ``"sum"``; ``"per_sequence_mean"``: mean within each sequence (row), then over the rows that have a masked
    position; ``"none"``: per position, 0 where ignored. ``logits`` (..., vocab), ``labels`` (...).
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction={reduction!r} is not known: use one of {', '.join(map(repr, REDUCTIONS))}.")
    picked, kept = true_token_log_probs(logits, labels)
    losses = -picked
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    if reduction == "mean":
        return losses.sum() / kept.sum()
    if labels.dim() < 2:
        raise ValueError("per_sequence_mean needs a batch of sequences: labels of shape (batch, length).")
    per_row = losses.flatten(1).sum(1)
    counts = kept.flatten(1).sum(1)
    has = counts > 0
    return (per_row[has] / counts[has]).mean()


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
def _log_prob_at(model: PreTrainedModel, copies: torch.Tensor, positions: torch.Tensor, targets: torch.Tensor):
    device = next(model.parameters()).device
    logits = model(input_ids=copies.to(device), attention_mask=torch.ones_like(copies).to(device)).logits
    rows = torch.arange(len(positions), device=device)
    log_probs = logits[rows, positions.to(device)].double().log_softmax(-1)
    return log_probs.gather(-1, targets.to(device)[:, None]).squeeze(-1).cpu()


def pseudo_log_likelihood(
    model: PreTrainedModel,
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
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, sentence: str, *, word_level: bool = False
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
            logits = model(input_ids=masked[None, :]).logits[0, i]
            total += float(logits.double().log_softmax(-1)[ids[i]])
    return total


def pseudo_perplexity(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, sentence: str, **kwargs) -> float:
    """exp(−PLL / number of scored tokens) of ``sentence``."""
    return pseudo_log_likelihood(model, tokenizer, sentence, **kwargs).pseudo_perplexity


def compare_pairs(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, pairs: Sequence[tuple[str, str]], **kwargs
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


# ---- a common bug: labels = the corrupted input ids ------------------------------------------------------------


def buggy_mask_blocks(
    blocks: torch.Tensor, tokenizer: PreTrainedTokenizerBase, spec: pretraining.MaskSpec, generator: torch.Generator
) -> dict[str, torch.Tensor]:
    """The bug, reproduced: mask ``input_ids`` in place, then pass ``labels=input_ids``.

    The labels are then the *corrupted* ids (the [MASK] id at masked positions) and no position is −100, so
    the loss rewards copying the input at every position and predicting [MASK] where [MASK] is shown.
    Compare :func:`mlm_course.pretraining.mask_blocks` (same masks for the same generator state).
    """
    input_ids = blocks.clone()
    corrupted = masking.mask_tokens(
        input_ids, special_ids=tokenizer.all_special_ids, mask_token_id=tokenizer.mask_token_id,
        vocab_size=len(tokenizer), rate=spec.rate, mix=spec.mix, scheme=spec.scheme, generator=generator,
    ).input_ids
    input_ids[:] = corrupted  # "masking in place"
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(blocks), "labels": input_ids}


def train_with_batches(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    train_blocks: torch.Tensor,
    config: TrainConfig,
    *,
    make_batch: Callable[..., dict[str, torch.Tensor]] = pretraining.mask_blocks,
    spec: pretraining.MaskSpec = DEFAULT_SPEC,
    progress: bool = False,
) -> TrainResult:
    """:func:`mlm_course.pretraining.pretrain`'s loop (same batches, same seeds) with a replaceable batch maker,
    e.g. :func:`buggy_mask_blocks`; no evaluation during training (use :func:`evaluate_by_action` after)."""
    pick = cycle_batches(len(train_blocks), config.batch_size, config.seed)

    def batch_for_step(step: int, micro: int) -> dict[str, torch.Tensor]:
        rows = train_blocks[pick(step, micro, config.grad_accum)]
        return make_batch(rows, tokenizer, spec, step_generator(config.seed, step, stream=micro))

    trainer = TrainLoop(
        model, config, batch_for_step=batch_for_step,
        compute_loss=lambda m, batch: pretraining.masked_lm_loss(m, batch), progress=progress,
    )
    return trainer.train()


def actions_of(batch: Mapping[str, torch.Tensor], mask_token_id: int) -> torch.Tensor:
    """What happened at each position of a masked batch, recovered from it: 0 not selected, 1 [MASK], 2 random,
    3 unchanged (the codes of :mod:`mlm_course.masking`). A random draw equal to the original counts as unchanged."""
    labels, ids = batch["labels"], batch["input_ids"]
    selected = labels != IGNORE_INDEX
    action = torch.where(ids == mask_token_id, masking.MASKED, torch.where(ids == labels, masking.KEPT, masking.RANDOM))
    return torch.where(selected, action, masking.NOT_SELECTED)


@torch.no_grad()
def evaluate_by_action(
    model: PreTrainedModel, batches: Sequence[Mapping[str, torch.Tensor]], mask_token_id: int
) -> dict[str, dict[str, float]]:
    """Loss and top-1 at the masked positions of ``batches`` (frozen, correct labels), overall and per action.

    Also the share of positions where the top prediction is the [MASK] token, and where it is the token shown
    in the input (copying), and ``loss_ci95``: the half-width of a 95 % normal interval for the mean loss over the
    scored tokens (1.96 · standard error; noise from which tokens were scored, not from training). Keys: ``"all"``
    and the action names ``masking.ACTION_NAMES[1:]`` ("[MASK]", "random token", "unchanged").
    """
    device = next(model.parameters()).device
    rows = {"loss": [], "top1": [], "mask": [], "copy": [], "action": []}
    with evaluation_mode(model):
        for batch in batches:
            ids, attention = batch["input_ids"].to(device), batch["attention_mask"].to(device)
            kept = batch["labels"] != IGNORE_INDEX
            logits = model(input_ids=ids, attention_mask=attention).logits[kept.to(device)].float().cpu()
            labels, best = batch["labels"][kept], logits.argmax(-1)
            rows["loss"].append(mlm_loss(logits, labels, reduction="none"))
            rows["top1"].append((best == labels).double())
            rows["mask"].append((best == mask_token_id).double())
            rows["copy"].append((best == batch["input_ids"][kept]).double())
            rows["action"].append(actions_of(batch, mask_token_id)[kept])
    cat = {k: torch.cat(v) for k, v in rows.items()}
    groups = {"all": torch.ones_like(cat["action"], dtype=torch.bool)}
    groups.update({masking.ACTION_NAMES[code]: cat["action"] == code
                   for code in (masking.MASKED, masking.RANDOM, masking.KEPT)})
    out = {}
    for name, where in groups.items():
        n = int(where.sum())
        out[name] = {"tokens": n, **{k: float(cat[k][where].double().mean()) if n else float("nan")
                                     for k in ("loss", "top1", "mask", "copy")}}
        losses = cat["loss"][where].double()
        out[name]["loss_ci95"] = 1.96 * float(losses.std() / math.sqrt(n)) if n > 1 else float("nan")
    return out
