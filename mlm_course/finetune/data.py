"""Classification data and batching: token ids without padding, seeded subsets, length-bucketed batches that pad
only to their own longest sequence."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial

import torch
from transformers import PreTrainedTokenizerBase

from mlm_course import corpus
from mlm_course.collator import pad_rows

MIN_MAX_LENGTH = 8


@dataclass
class Encoded:
    """One split as token ids without padding (truncated to ``max_length``), its labels and texts."""

    input_ids: list[list[int]]
    labels: list[int]
    texts: list[str]

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def lengths(self) -> list[int]:
        return [len(ids) for ids in self.input_ids]


def _check_max_length(max_length: int, tokenizer: PreTrainedTokenizerBase | None = None) -> None:
    if isinstance(max_length, bool) or not isinstance(max_length, int):
        raise TypeError(f"max_length must be an int, not {type(max_length).__name__}")
    if max_length < MIN_MAX_LENGTH:
        raise ValueError(f"max_length={max_length} leaves almost no room for words: use at least {MIN_MAX_LENGTH}")


def encode(
    tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], labels: Sequence[int], *, max_length: int = 128
) -> Encoded:
    """Tokenise ``texts`` ([CLS] … [SEP], truncated to ``max_length``), no padding: batches pad themselves."""
    _check_max_length(max_length)
    texts, labels = list(texts), [int(y) for y in labels]
    if not texts:
        raise ValueError("no examples to encode: the split (or the subset you asked for) is empty")
    if len(texts) != len(labels):
        raise ValueError(f"{len(texts)} texts but {len(labels)} labels: pass one label per text")
    if min(labels) < 0:
        raise ValueError("labels must be class numbers 0, 1, …; found a negative label")
    ids = tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]
    return Encoded(input_ids=[list(x) for x in ids], labels=labels, texts=texts)


def subset(n_total: int, n: int | None, seed: int = 0) -> list[int]:
    """``n`` indices out of ``n_total`` drawn without replacement by ``seed``, in increasing order (None = all)."""
    if n is None or n >= n_total:
        return list(range(n_total))
    if n < 1:
        raise ValueError(f"asked for {n} examples: use at least 1 (or None for all)")
    chosen = torch.randperm(n_total, generator=torch.Generator().manual_seed(seed))[:n]
    return sorted(chosen.tolist())


def sentiment_data(
    tokenizer: PreTrainedTokenizerBase, split: str, *, max_length: int = 128, examples: int | None = None,
    seed: int = 0,
) -> Encoded:
    """The movie-review sentences of ``split`` encoded; ``examples`` keeps a seeded random subset."""
    data = corpus.sentiment(split)
    keep = subset(len(data), examples, seed)
    return encode(tokenizer, [data.texts[i] for i in keep], [data.labels[i] for i in keep], max_length=max_length)


class _Examples(torch.utils.data.Dataset):
    def __init__(self, data: Encoded):
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.data.input_ids[i], "label": self.data.labels[i], "index": i}


def pad_batch(features: list[dict], *, pad_token_id: int, pad_to_multiple_of: int | None = None) -> dict:
    """Stack examples, padding to the longest in *this* batch (rounded up to ``pad_to_multiple_of``)."""
    if not features:
        raise ValueError("an empty batch: every batch needs at least one example")
    ids, real = pad_rows([f["input_ids"] for f in features], pad_token_id, multiple=pad_to_multiple_of)
    return {
        "input_ids": ids,
        "attention_mask": real.long(),
        "labels": torch.tensor([f["label"] for f in features]),
        "index": torch.tensor([f["index"] for f in features]),
    }


class LengthBucketSampler:
    """Batches of indices with similar lengths, every example once per pass.

    Evaluation (no ``generator``): all examples sorted by length, longest first. Training (a ``generator``, a new
    one each epoch): a random permutation is cut into pools of ``bucket_batches`` batches; each pool is sorted by
    length and cut into batches; the batch order is shuffled.
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, *, generator: torch.Generator | None = None,
                 bucket_batches: int = 50):
        if batch_size < 1 or bucket_batches < 1:
            raise ValueError(f"batch_size and bucket_batches must be ≥ 1, got {batch_size} and {bucket_batches}")
        if len(lengths) == 0:
            raise ValueError("no examples to batch: the split is empty")
        self.lengths = torch.as_tensor(list(lengths))
        self.batch_size, self.generator, self.bucket_batches = batch_size, generator, bucket_batches

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)

    def _longest_first(self, indices: torch.Tensor) -> list[list[int]]:
        ordered = indices[torch.sort(self.lengths[indices], descending=True, stable=True).indices]
        return [ordered[i: i + self.batch_size].tolist() for i in range(0, len(ordered), self.batch_size)]

    def __iter__(self):
        n = len(self.lengths)
        if self.generator is None:
            yield from self._longest_first(torch.arange(n))
            return
        order = torch.randperm(n, generator=self.generator)
        pool = self.batch_size * self.bucket_batches
        batches = [batch for begin in range(0, n, pool) for batch in self._longest_first(order[begin: begin + pool])]
        for b in torch.randperm(len(batches), generator=self.generator).tolist():
            yield batches[b]


def training_batches(data: Encoded, batch_size: int, *, pad_token_id: int, seed: int = 0) -> Iterator[dict]:
    """Endless training batches for :func:`mlm_course.train.train`: pass after pass over ``data``, each in a new
    order of length buckets (:class:`LengthBucketSampler`), each batch padded to its own longest sentence."""
    generator, examples = torch.Generator().manual_seed(seed), _Examples(data)
    while True:
        for indices in LengthBucketSampler(data.lengths, batch_size, generator=generator):
            yield pad_batch([examples[i] for i in indices], pad_token_id=pad_token_id)


def make_loader(data: Encoded, pad_token_id: int, batch_size: int, *, pad_to_multiple_of: int | None = None,
                pin_memory: bool = False) -> torch.utils.data.DataLoader:
    """An evaluation DataLoader over ``data``: length-sorted batches (:class:`LengthBucketSampler`), :func:`pad_batch`."""
    collate = partial(pad_batch, pad_token_id=pad_token_id, pad_to_multiple_of=pad_to_multiple_of)
    return torch.utils.data.DataLoader(_Examples(data), batch_sampler=LengthBucketSampler(data.lengths, batch_size),
                                       collate_fn=collate, pin_memory=pin_memory)
