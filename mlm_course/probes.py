"""Probes of a trained masked-LM: what it fills in, where it is right, where it is sure and wrong.

:func:`probe_hits` fills the blank of :data:`PROBE_SENTENCES`; :func:`accuracy_by_frequency` splits held-out top-1
accuracy by how common the true token is in the training text; :func:`confident_wrong_fills` lists the mistakes the
model was most sure of.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedTokenizerBase

from mlm_course import masking, models
from mlm_course.pretraining import masked_predictions

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


def probe_hits(
    model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, probes=PROBE_SENTENCES, top_k: int = 5
) -> list[dict]:
    """For each probe sentence: the top-k fill-mask guesses and whether an accepted answer is among them."""
    rows = []
    for text, answers in probes:
        guesses = models.fill_mask(model, tokenizer, text, top_k=top_k)[0]
        tokens = [token for token, _ in guesses]
        rows.append({"text": text, "guesses": tokens, "hit": bool(set(tokens) & answers)})
    return rows


def accuracy_by_frequency(
    model: torch.nn.Module, batches: list[dict[str, torch.Tensor]], train_blocks: torch.Tensor, vocab_size: int,
    edges: tuple[float, ...] = (0.0, 0.0001, 0.001, 0.01, 1.0),
) -> list[dict]:
    """Top-1 accuracy of the model and of the most frequent token, bucketed by the true token's training frequency.

    A bucket ``"0.01–0.1 %"`` holds the masked positions whose true token makes up 0.01 % to 0.1 % of all training
    tokens (its share of the training text); ``"≥ 1 %"`` the most frequent ones (``the``, ``,``, ``.``, …).
    """
    frequency = torch.bincount(train_blocks.flatten(), minlength=vocab_size).double()
    frequency /= frequency.sum()
    most_frequent = int(frequency.argmax())
    found = masked_predictions(model, batches)
    labels = found.labels
    rows = []
    for low, high in zip(edges[:-1], edges[1:], strict=True):
        inside = (frequency[labels] >= low) & (frequency[labels] < high if high < 1 else frequency[labels] <= high)
        n = int(inside.sum())
        rows.append({
            "bucket": f"{100 * low:g}–{100 * high:g} %" if high < 1 else f"≥ {100 * low:g} %",
            "tokens": n,
            "model_top1": found.scores(inside)["top1"] if n else 0.0,
            "unigram_top1": float((labels[inside] == most_frequent).double().mean()) if n else 0.0,
        })
    return rows


@torch.no_grad()
def confident_wrong_fills(model: torch.nn.Module, tokenizer: PreTrainedTokenizerBase, batch: dict[str, torch.Tensor],
                          k: int = 8, context: int = 6) -> list[dict]:
    """The ``k`` masked positions where the model (in eval mode) was most sure of a wrong token, with context."""
    device = next(model.parameters()).device
    with models.evaluation_mode(model):
        logits = model(batch["input_ids"].to(device), batch["attention_mask"].to(device))
    probs, guesses = (t.cpu() for t in logits.float().softmax(-1).max(-1))
    wrong = (batch["labels"] != masking.IGNORE_INDEX) & (guesses != batch["labels"])
    order = probs[wrong].argsort(descending=True)[:k]
    rows = []
    for row, col in wrong.nonzero()[order].tolist():
        ids = batch["input_ids"][row]
        left = tokenizer.decode(ids[max(1, col - context) : col])
        right = tokenizer.decode(ids[col + 1 : col + 1 + context])
        shown, truth, guess = tokenizer.convert_ids_to_tokens([ids[col], batch["labels"][row, col], guesses[row, col]])
        rows.append({"context": f"{left} ___ {right}", "shown": shown, "truth": truth, "guess": guess,
                     "probability": float(probs[row, col])})
    return rows
