"""Masked-LM pretraining: text → packed blocks → dynamic masks → the shared training loop.

Held-out evaluation uses *frozen* masks (drawn once, with a fixed seed), so every evaluation of every run scores
the same positions; :func:`unigram_baseline` scores a frequency-only predictor on exactly those positions.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import BertForMaskedLM, PreTrainedTokenizerBase

from mlm_course import masking
from mlm_course.training import (
    TrainConfig,
    Trainer,
    TrainResult,
    cycle_batches,
    epoch_of,
    iterate_in_batches,
    step_generator,
)

EVAL_MASK_SEED = 1234
STATIC_MASK_STREAM = 100  # random stream of the static copies; per-step masks use streams 0..grad_accum-1

#: Simple sentences written for the course (none occurs in the corpus) and the answers that count as right.
PROBE_SENTENCES: list[tuple[str, set[str]]] = [
    ("She opened the [MASK] and walked out.", {"door"}),
    ("He took off his [MASK] and sat down by the fire.", {"hat", "coat", "gloves", "boots"}),
    ("They drank a cup of [MASK] together.", {"tea", "coffee", "wine"}),
    ("She wrote a long [MASK] to her sister.", {"letter"}),
    ("He was a man of large [MASK] and good family.", {"fortune", "property", "income"}),
    ("The sun rose over the [MASK].", {"hills", "sea", "hill", "trees", "house", "horizon", "mountains", "city"}),
    ("It was a cold [MASK] in the middle of winter.", {"day", "morning", "night", "evening"}),
    ("Paris is the capital of [MASK].", {"france"}),
    ("I shall be very [MASK] to see you again.", {"glad", "happy", "sorry", "pleased"}),
    ("She played the [MASK] after dinner.", {"piano", "pianoforte", "harp", "instrument"}),
    ("He rode his [MASK] into the village.", {"horse"}),
    ("The children were playing in the [MASK].", {"garden", "park", "street", "house", "room", "field"}),
    ("My father and my [MASK] are both well.", {"mother", "brother", "sister", "uncle", "aunt"}),
    ("She smiled and held out her [MASK].", {"hand", "hands", "arms"}),
    ("They were married in the [MASK] last spring.", {"church", "village", "country", "town", "chapel"}),
    ("The ship sailed across the [MASK].", {"sea", "ocean", "river", "channel", "atlantic"}),
    ("He read the [MASK] by candlelight.", {"letter", "book", "note", "paper"}),
    ("She looked out of the [MASK] at the rain.", {"window"}),
    ("It was the happiest [MASK] of her life.", {"day", "moment", "time", "year", "period", "hour"}),
    ("The king and the [MASK] sat on their thrones.", {"queen", "prince"}),
]


@dataclass(frozen=True)
class MaskSpec:
    """How training and evaluation masks are drawn (see :mod:`mlm_course.masking`)."""

    rate: float = 0.15
    mix: tuple[float, float, float] = (0.8, 0.1, 0.1)
    scheme: str = "bernoulli"


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


def _check_share(share: float) -> None:
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"short-sequence share {share} must be between 0 and 1")


def shorten_blocks(
    blocks: torch.Tensor, tokenizer: PreTrainedTokenizerBase, share: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cut a random ``share`` of the blocks short (BERT's ``short_seq_prob``): (input ids, attention mask).

    A cut block keeps its first L - 1 tokens, with L uniform in 3 … seq_len, then ``[SEP]`` and padding, so the
    model also sees ``[SEP]`` early and short inputs like the sentences it will be asked about later.
    """
    _check_share(share)
    if share == 0:  # no random draws: runs without short sequences keep the masks they always had
        return blocks, torch.ones_like(blocks)
    count, length = blocks.shape
    cut = torch.rand(count, generator=generator) < share
    lengths = torch.where(cut, torch.randint(3, length + 1, (count,), generator=generator), length)
    attention = (torch.arange(length) < lengths[:, None]).long()
    ids = torch.where(attention.bool(), blocks, tokenizer.pad_token_id)
    ids[torch.arange(count), lengths - 1] = tokenizer.sep_token_id
    return ids, attention


def mask_blocks(
    blocks: torch.Tensor, tokenizer: PreTrainedTokenizerBase, spec: MaskSpec, generator: torch.Generator,
    attention_mask: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """A masked-LM batch (input_ids, attention_mask, labels) from packed ``blocks`` (padding never selected)."""
    attention_mask = torch.ones_like(blocks) if attention_mask is None else attention_mask
    masked = masking.mask_tokens(
        blocks,
        special_ids=tokenizer.all_special_ids,
        attention_mask=attention_mask,
        mask_token_id=tokenizer.mask_token_id,
        vocab_size=len(tokenizer),
        rate=spec.rate,
        mix=spec.mix,
        scheme=spec.scheme,
        generator=generator,
    )
    return {"input_ids": masked.input_ids, "attention_mask": attention_mask, "labels": masked.labels}


def masked_lm_outputs(
    model: BertForMaskedLM, batch: dict[str, torch.Tensor], *, sparse: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits, labels) at the masked positions only.

    ``sparse=True`` gathers the hidden states of masked positions *before* the output layer, as the original
    BERT does, so the vocabulary projection runs on ~15 % of the tokens; the result equals ``sparse=False``.
    """
    selected = batch["labels"] != -100
    if sparse:
        hidden = model.bert(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        logits = model.cls(hidden[selected])
    else:
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[selected]
    return logits, batch["labels"][selected]


def masked_lm_loss(model: BertForMaskedLM, batch: dict[str, torch.Tensor], *, sparse: bool = True):
    """Mean cross-entropy over the batch's masked positions, and the masked-token accuracy."""
    logits, labels = masked_lm_outputs(model, batch, sparse=sparse)
    if labels.numel() == 0:
        raise ValueError("the batch has no masked position: raise the mask rate or use longer sequences")
    loss = F.cross_entropy(logits.float(), labels)
    return loss, {"accuracy": float((logits.argmax(-1) == labels).float().mean())}


def frozen_eval_batches(
    blocks: torch.Tensor, tokenizer: PreTrainedTokenizerBase, spec: MaskSpec, batch_size: int = 64
) -> list[dict[str, torch.Tensor]]:
    """Evaluation batches with masks drawn once from a fixed seed: the same positions at every evaluation."""
    generator = torch.Generator().manual_seed(EVAL_MASK_SEED)
    return [mask_blocks(blocks[part], tokenizer, spec, generator) for part in iterate_in_batches(len(blocks), batch_size)]


@torch.no_grad()
def evaluate_masked_lm(model: BertForMaskedLM, batches: list[dict[str, torch.Tensor]]) -> dict[str, float]:
    """Loss (mean over all masked tokens), perplexity, top-1 and top-5 accuracy on frozen-mask batches."""
    device = next(model.parameters()).device
    total_loss, top1, top5, count = 0.0, 0, 0, 0
    for batch in batches:
        logits, labels = masked_lm_outputs(model, {k: v.to(device) for k, v in batch.items()})
        logits = logits.float()
        total_loss += float(F.cross_entropy(logits, labels, reduction="sum"))
        best = logits.topk(5, dim=-1).indices
        top1 += int((best[:, 0] == labels).sum())
        top5 += int((best == labels[:, None]).any(-1).sum())
        count += labels.numel()
    loss = total_loss / count
    return {"loss": loss, "perplexity": math.exp(loss), "top1": top1 / count, "top5": top5 / count, "tokens": count}


def unigram_baseline(
    train_blocks: torch.Tensor, eval_batches: list[dict[str, torch.Tensor]], vocab_size: int, special_ids: list[int]
) -> dict[str, float]:
    """The same metrics for a predictor that ignores context: add-one-smoothed training token frequencies."""
    counts = torch.bincount(train_blocks.flatten(), minlength=vocab_size).double() + 1
    counts[special_ids] = 0
    log_probs = (counts / counts.sum()).log()
    labels = torch.cat([b["labels"][b["labels"] != -100] for b in eval_batches])
    best = log_probs.topk(5).indices
    loss = float(-log_probs[labels].mean())
    return {
        "loss": loss,
        "perplexity": math.exp(loss),
        "top1": float((labels == best[0]).double().mean()),
        "top5": float(torch.isin(labels, best).double().mean()),
        "tokens": labels.numel(),
    }


def pretrain(
    model: BertForMaskedLM,
    tokenizer: PreTrainedTokenizerBase,
    train_blocks: torch.Tensor,
    eval_blocks: torch.Tensor,
    config: TrainConfig,
    *,
    spec: MaskSpec = MaskSpec(),
    eval_spec: MaskSpec = MaskSpec(),
    static_copies: int | None = None,
    short_share: float = 0.0,
    sparse: bool = True,
    out_dir: str | os.PathLike | None = None,
    resume: bool = False,
    progress: bool = True,
) -> TrainResult:
    """Masked-LM pretraining; masks drawn by ``spec``; ``short_share`` of the sequences cut short (:func:`shorten_blocks`).

    Dynamic masking (``static_copies=None``, RoBERTa): a fresh mask every time a sequence is seen. Static masking
    (the original BERT's ``dupe_factor``): ``static_copies`` masked copies of the corpus are made once and epoch
    ``e`` uses copy ``e % static_copies``, so each mask comes back every ``static_copies`` epochs.

    Evaluation uses frozen masks drawn by ``eval_spec`` (BERT's 15 % 80/10/10 by default, whatever ``spec`` is),
    so held-out losses of runs with different training masks are comparable.
    """
    if static_copies is not None and (isinstance(static_copies, bool) or not isinstance(static_copies, int)
                                      or static_copies < 1):
        raise ValueError(f"static_copies={static_copies!r}: use a positive number of copies, or None for dynamic")
    _check_share(short_share)  # before any work, not at the first batch
    pick = cycle_batches(len(train_blocks), config.batch_size, config.seed)
    eval_batches = frozen_eval_batches(eval_blocks, tokenizer, eval_spec)

    def masked(blocks: torch.Tensor, generator: torch.Generator) -> dict[str, torch.Tensor]:
        ids, attention = shorten_blocks(blocks, tokenizer, short_share, generator)
        return mask_blocks(ids, tokenizer, spec, generator, attention_mask=attention)

    copies = [masked(train_blocks, step_generator(config.seed, copy, stream=STATIC_MASK_STREAM))
              for copy in range(static_copies or 0)]

    def batch_for_step(step: int, micro: int) -> dict[str, torch.Tensor]:
        rows = pick(step, micro, config.grad_accum)
        if copies:
            epoch = epoch_of(step, micro, config.grad_accum, len(train_blocks), config.batch_size)
            return {key: value[rows] for key, value in copies[epoch % len(copies)].items()}
        return masked(train_blocks[rows], step_generator(config.seed, step, stream=micro))

    def save(model: BertForMaskedLM, path: Path) -> None:
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)

    trainer = Trainer(
        model,
        config,
        batch_for_step=batch_for_step,
        compute_loss=lambda m, batch: masked_lm_loss(m, batch, sparse=sparse),
        evaluate=lambda m: evaluate_masked_lm(m, eval_batches),
        out_dir=out_dir,
        save_model=save,
        progress=progress,
    )
    return trainer.train(resume=resume)


def probe_hits(
    model: BertForMaskedLM, tokenizer: PreTrainedTokenizerBase, probes=PROBE_SENTENCES, top_k: int = 5
) -> list[dict]:
    """For each probe sentence: the top-k fill-mask guesses and whether an accepted answer is among them."""
    from mlm_course.models import fill_mask

    rows = []
    for text, answers in probes:
        guesses = fill_mask(model, tokenizer, text, top_k=top_k)[0]
        tokens = [token for token, _ in guesses]
        rows.append({"text": text, "guesses": tokens, "hit": bool(set(tokens) & answers)})
    return rows


@torch.no_grad()
def accuracy_by_frequency(
    model: BertForMaskedLM, batches: list[dict[str, torch.Tensor]], train_blocks: torch.Tensor, vocab_size: int,
    edges: tuple[float, ...] = (0.0, 0.0001, 0.001, 0.01, 1.0),
) -> list[dict]:
    """Top-1 accuracy of the model and of the most frequent token, bucketed by the true token's training frequency."""
    frequency = torch.bincount(train_blocks.flatten(), minlength=vocab_size).double()
    frequency /= frequency.sum()
    most_frequent = int(frequency.argmax())
    device = next(model.parameters()).device
    predicted, labels = [], []
    for batch in batches:
        logits, true = masked_lm_outputs(model, {k: v.to(device) for k, v in batch.items()})
        predicted.append(logits.argmax(-1).cpu())
        labels.append(true.cpu())
    predicted, labels = torch.cat(predicted), torch.cat(labels)
    rows = []
    for low, high in zip(edges[:-1], edges[1:], strict=True):
        inside = (frequency[labels] >= low) & (frequency[labels] < high if high < 1 else frequency[labels] <= high)
        n = int(inside.sum())
        rows.append({
            "bucket": f"{low:.2%}–{high:.2%}" if high < 1 else f"≥ {low:.0%}",
            "tokens": n,
            "model_top1": float((predicted[inside] == labels[inside]).double().mean()) if n else 0.0,
            "unigram_top1": float((labels[inside] == most_frequent).double().mean()) if n else 0.0,
        })
    return rows


@torch.no_grad()
def confident_mistakes(
    model: BertForMaskedLM, tokenizer: PreTrainedTokenizerBase, batch: dict[str, torch.Tensor], k: int = 8,
    context: int = 6,
) -> list[dict]:
    """The ``k`` masked positions where the model was most sure of a wrong token, with their context."""
    device = next(model.parameters()).device
    logits = model(input_ids=batch["input_ids"].to(device), attention_mask=batch["attention_mask"].to(device)).logits
    probs, guesses = logits.float().softmax(-1).max(-1)
    wrong = (batch["labels"] != -100) & (guesses.cpu() != batch["labels"])
    order = probs.cpu()[wrong].argsort(descending=True)[:k]
    rows = []
    for row, col in wrong.nonzero()[order].tolist():
        ids = batch["input_ids"][row]
        left = tokenizer.decode(ids[max(1, col - context) : col])
        right = tokenizer.decode(ids[col + 1 : col + 1 + context])
        rows.append({
            "context": f"{left} ___ {right}",
            "shown": tokenizer.convert_ids_to_tokens(int(ids[col])),
            "truth": tokenizer.convert_ids_to_tokens(int(batch["labels"][row, col])),
            "guess": tokenizer.convert_ids_to_tokens(int(guesses[row, col])),
            "probability": float(probs[row, col]),
        })
    return rows
