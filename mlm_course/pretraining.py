"""Masked-LM pretraining, the lesson of notebook 06: text → packed blocks → masked batches → held-out scores.

* :func:`pack_blocks` cuts the tokenised corpus into ``[CLS] … [SEP]`` blocks; :func:`shorten_blocks` cuts some of
  them short (BERT's ``short_seq_prob``); :func:`mask_blocks` masks them (:mod:`mlm_course.masking`).
* Held-out evaluation uses *frozen* masks (:func:`frozen_eval_batches`, drawn once with a fixed seed), so every
  evaluation of every run scores the same positions. :func:`masked_predictions` is the one place a model is scored
  on masked positions; :func:`evaluate_masked_lm` summarises it (loss, perplexity, top-1, top-5).
* :func:`unigram_baseline` and :func:`copying_baseline` score predictors that need no context on the same positions.

The training step is :func:`mlm_course.steps.training_step` with :func:`mlm_course.objective.masked_lm_loss`; the
runs themselves (seeds, batches per step, checkpoints, ``mlm-course pretrain``) are in :mod:`mlm_course.lab.pretrain_run`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import PreTrainedTokenizerBase

from mlm_course import masking
from mlm_course.masking import IGNORE_INDEX, MaskSpec
from mlm_course.models import evaluation_mode
from mlm_course.objective import masked_lm_outputs, masked_positions

EVAL_MASK_SEED = 1234
EVAL_BATCH_SIZE = 64


def pack_blocks(texts: list[str], tokenizer: PreTrainedTokenizerBase, seq_len: int) -> torch.Tensor:
    """Tokenise ``texts``, concatenate them and cut ``[CLS] … [SEP]`` blocks of exactly ``seq_len`` tokens."""
    if seq_len < 3:
        raise ValueError(f"seq_len must be at least 3 ([CLS] x [SEP]), got {seq_len}")
    pieces = tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
    stream = torch.tensor([token for piece in pieces for token in piece], dtype=torch.long)
    body = seq_len - 2
    n_blocks = len(stream) // body
    if n_blocks == 0:
        raise ValueError(
            f"the text has {len(stream)} tokens, fewer than one sequence of {body} (+2 special): "
            "give more text or a shorter seq_len"
        )
    blocks = stream[: n_blocks * body].view(n_blocks, body)
    cls = torch.full((n_blocks, 1), tokenizer.cls_token_id, dtype=torch.long)
    sep = torch.full((n_blocks, 1), tokenizer.sep_token_id, dtype=torch.long)
    return torch.cat([cls, blocks, sep], dim=1)


def shorten_blocks(
    blocks: torch.Tensor, tokenizer: PreTrainedTokenizerBase, short_seq_prob: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cut each block short with probability ``short_seq_prob`` (BERT's name): (input ids, attention mask).

    A cut block keeps its first L - 1 tokens, with L uniform in 3 … seq_len, then ``[SEP]`` and padding, so the
    model also sees ``[SEP]`` early and short inputs like the sentences it will be asked about later.
    """
    if not 0.0 <= short_seq_prob <= 1.0:
        raise ValueError(f"short_seq_prob={short_seq_prob} is a probability: give a number between 0 and 1")
    if short_seq_prob == 0:  # no random draws: the masks that follow are those of a run without short sequences
        return blocks, torch.ones_like(blocks)
    count, length = blocks.shape
    cut = torch.rand(count, generator=generator) < short_seq_prob
    lengths = torch.where(cut, torch.randint(3, length + 1, (count,), generator=generator), length)
    attention = (torch.arange(length) < lengths[:, None]).long()
    ids = torch.where(attention.bool(), blocks, tokenizer.pad_token_id)
    ids[torch.arange(count), lengths - 1] = tokenizer.sep_token_id
    return ids, attention


def mask_blocks(
    blocks: torch.Tensor, tokenizer: PreTrainedTokenizerBase, spec: MaskSpec, generator: torch.Generator,
    attention_mask: torch.Tensor | None = None, word_starts: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """A masked-LM batch from packed ``blocks`` (padding never selected): ``input_ids``, ``attention_mask``,
    ``labels`` and ``masked_positions`` (:func:`~mlm_course.objective.masked_positions`: the loss projects only these
    positions to the vocabulary). ``word_starts`` (with ``spec.whole_word``): where the blocks' words begin."""
    attention_mask = torch.ones_like(blocks) if attention_mask is None else attention_mask
    masked = masking.mask_tokens(blocks, spec, masking.TokenIds.of(tokenizer), attention_mask=attention_mask,
                                 word_starts=word_starts, generator=generator)
    return {"input_ids": masked.input_ids, "attention_mask": attention_mask, "labels": masked.labels,
            "masked_positions": masked_positions(masked.labels)}


def training_batches(
    blocks: torch.Tensor, tokenizer: PreTrainedTokenizerBase, batch_size: int, *, spec: MaskSpec | None = None,
    seed: int = 0, make_batch: Callable[..., dict[str, torch.Tensor]] | None = None,
) -> Iterator[dict[str, torch.Tensor]]:
    """Endless training batches for :func:`mlm_course.train.train`: each pass over ``blocks`` in a new order,
    each batch masked afresh when it is drawn (dynamic masking, as RoBERTa does); a pass's last, short batch is
    dropped. Every draw comes from one generator seeded with ``seed``. ``make_batch`` (default
    :func:`mask_blocks`, whose signature it has) masks each batch."""
    if not 1 <= batch_size <= len(blocks):
        raise ValueError(f"batch_size={batch_size} must be between 1 and the {len(blocks)} blocks")
    spec, generator, make_batch = spec or MaskSpec(), torch.Generator().manual_seed(seed), make_batch or mask_blocks
    while True:
        for rows in torch.randperm(len(blocks), generator=generator).split(batch_size):
            if len(rows) == batch_size:
                yield make_batch(blocks[rows], tokenizer, spec, generator)


def frozen_eval_batches(
    blocks: torch.Tensor, tokenizer: PreTrainedTokenizerBase, spec: MaskSpec = MaskSpec(),
    batch_size: int = EVAL_BATCH_SIZE,
) -> list[dict[str, torch.Tensor]]:
    """Evaluation batches with masks drawn once from a fixed seed: the same positions at every evaluation."""
    generator = torch.Generator().manual_seed(EVAL_MASK_SEED)
    return [mask_blocks(blocks[begin : begin + batch_size], tokenizer, spec, generator)
            for begin in range(0, len(blocks), batch_size)]


# ---- scoring a model on masked positions -----------------------------------------------------------------------


@dataclass
class MaskedPredictions:
    """A model's predictions at every masked position of some batches, one row per position."""

    labels: torch.Tensor  # the true token
    log_probs: torch.Tensor  # log p(true token), float64
    top5: torch.Tensor  # (positions, 5): the five most likely tokens, best first
    shown: torch.Tensor  # the token the input showed there ([MASK], a random token, or the true one)

    def scores(self, where: torch.Tensor | None = None) -> dict[str, float]:
        """Loss (mean −log p, nats), perplexity, top-1, top-5 and the count, over the positions ``where`` (all)."""
        where = torch.ones_like(self.labels, dtype=torch.bool) if where is None else where
        loss = float(-self.log_probs[where].mean())
        hits = self.top5[where] == self.labels[where, None]
        return {"loss": loss, "perplexity": math.exp(loss), "top1": float(hits[:, 0].double().mean()),
                "top5": float(hits.any(1).double().mean()), "tokens": int(where.sum())}


@torch.no_grad()
def masked_predictions(model: torch.nn.Module, batches: list[dict[str, torch.Tensor]]) -> MaskedPredictions:
    """Score ``model`` (in eval mode) at the masked positions of ``batches`` (e.g. :func:`frozen_eval_batches`)."""
    device = next(model.parameters()).device
    rows: dict[str, list[torch.Tensor]] = {"labels": [], "log_probs": [], "top5": [], "shown": []}
    with evaluation_mode(model):
        for batch in batches:
            logits, labels = masked_lm_outputs(model, {key: value.to(device) for key, value in batch.items()})
            log_probs = F.log_softmax(logits.double(), dim=-1)
            rows["labels"].append(labels.cpu())
            rows["log_probs"].append(log_probs.gather(1, labels[:, None]).squeeze(1).cpu())
            rows["top5"].append(log_probs.topk(5, dim=-1).indices.cpu())
            rows["shown"].append(batch["input_ids"][batch["labels"] != IGNORE_INDEX])
    return MaskedPredictions(**{key: torch.cat(values) for key, values in rows.items()})


def evaluate_masked_lm(model: torch.nn.Module, batches: list[dict[str, torch.Tensor]]) -> dict[str, float]:
    """Loss (mean over all masked tokens), perplexity, top-1 and top-5 accuracy on frozen-mask batches."""
    return masked_predictions(model, batches).scores()


# ---- baselines that need no context ----------------------------------------------------------------------------


def _unigram_log_probs(train_blocks: torch.Tensor, vocab_size: int, special_ids: list[int]) -> torch.Tensor:
    counts = torch.bincount(train_blocks.flatten(), minlength=vocab_size).double() + 1
    counts[special_ids] = 0
    return (counts / counts.sum()).log()


def _masked(eval_batches: list[dict[str, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(true tokens, shown tokens) at the masked positions of ``eval_batches``."""
    kept = [b["labels"] != IGNORE_INDEX for b in eval_batches]
    labels = torch.cat([b["labels"][k] for b, k in zip(eval_batches, kept, strict=True)])
    shown = torch.cat([b["input_ids"][k] for b, k in zip(eval_batches, kept, strict=True)])
    return labels, shown


def unigram_baseline(
    train_blocks: torch.Tensor, eval_batches: list[dict[str, torch.Tensor]], vocab_size: int, special_ids: list[int]
) -> dict[str, float]:
    """The same scores for a predictor that ignores context: add-one-smoothed training token frequencies."""
    log_probs = _unigram_log_probs(train_blocks, vocab_size, special_ids)
    labels, shown = _masked(eval_batches)
    best = log_probs.topk(5).indices.expand(len(labels), 5)
    return MaskedPredictions(labels, log_probs[labels], best, shown).scores()


def copying_baseline(
    train_blocks: torch.Tensor, eval_batches: list[dict[str, torch.Tensor]], vocab_size: int, special_ids: list[int],
    mask_token_id: int, spec: MaskSpec = MaskSpec(),
) -> dict[str, float]:
    """Unigram frequencies, plus a bet on the token shown at the position itself: the best predictor that reads no
    context, only the token at the position.

    A predicted position that shows a real token v (not [MASK]) is either v left unchanged (``keep`` of
    ``spec.mask_mix``, and the true token is v with probability unigram(v)) or a random replacement (``random``,
    drawn uniformly from the n tokens that are not special, whatever the true token). By Bayes' rule the true
    token is v with probability q(v) = keep·unigram(v) / (keep·unigram(v) + random/n), so this predictor says
    p(x) = q(v)·[x = v] + (1 − q(v))·unigram(x) there, and unigram(x) at [MASK]. A frequent word shown is almost
    surely the truth, a rare one almost surely a random draw; a fixed bet (½ for 80/10/10) does worse on both.
    A model's loss below this line is the part that comes from the context.
    """
    _, random_share, keep_share = spec.mask_mix
    unigram = _unigram_log_probs(train_blocks, vocab_size, special_ids).exp()
    labels, shown = _masked(eval_batches)
    kept = keep_share * unigram[shown]  # ∝ P(v shown, unchanged)
    drawn = random_share / (vocab_size - len(set(special_ids)))  # ∝ P(v shown, a random draw)
    bet = torch.where((shown != mask_token_id) & (kept + drawn > 0), kept / (kept + drawn), 0.0).double()
    true_log_probs = ((1 - bet) * unigram[labels] + bet * (labels == shown)).log()
    # the mixture's top 5 lie among the shown token and the unigram top 5 (only the shown token's score changes)
    top = unigram.topk(5).indices.expand(len(labels), 5)
    candidates = torch.cat([shown[:, None], top], dim=1)
    scores = (1 - bet[:, None]) * unigram[candidates]
    scores[:, 0] += bet
    scores[:, 1:][top == shown[:, None]] = -1.0  # the shown token is already candidate 0
    best = candidates.gather(1, scores.topk(5, dim=1).indices)
    return MaskedPredictions(labels, true_log_probs, best, shown).scores()
