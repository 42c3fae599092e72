"""Classification data and batching: token ids without padding, seeded subsets, length-bucketed batches that pad
only to their own longest sequence."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import torch
from transformers import PreTrainedTokenizerBase

from mlm_course import corpus
from mlm_course.collator import pad_rows
from mlm_course.lab.runner import step_generator
from mlm_course.masking import IGNORE_INDEX

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
    """Batches of indices with similar lengths: every example once per epoch, a seeded new order each epoch.

    Training (``shuffle=True``): a seeded permutation is cut into pools of ``bucket_batches`` batches; each pool
    is sorted by length and cut into batches; the batch order is shuffled. Evaluation (``shuffle=False``): all
    examples sorted by length, longest first. Call :meth:`set_epoch` before each epoch.
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, *, seed: int = 0, shuffle: bool = True,
                 bucket_batches: int = 50):
        if batch_size < 1 or bucket_batches < 1:
            raise ValueError(f"batch_size and bucket_batches must be ≥ 1, got {batch_size} and {bucket_batches}")
        if len(lengths) == 0:
            raise ValueError("no examples to batch: the split is empty")
        self.lengths = torch.as_tensor(list(lengths))
        self.batch_size, self.seed, self.shuffle, self.bucket_batches = batch_size, seed, shuffle, bucket_batches
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)

    def __iter__(self):
        n = len(self.lengths)
        if not self.shuffle:
            order = torch.sort(self.lengths, descending=True, stable=True).indices
            yield from (order[i: i + self.batch_size].tolist() for i in range(0, n, self.batch_size))
            return
        g = step_generator(self.seed, self.epoch, stream=11)
        order = torch.randperm(n, generator=g)
        pool = self.batch_size * self.bucket_batches
        batches = []
        for begin in range(0, n, pool):
            chunk = order[begin: begin + pool]
            chunk = chunk[torch.sort(self.lengths[chunk], descending=True, stable=True).indices]
            batches += [chunk[i: i + self.batch_size].tolist() for i in range(0, len(chunk), self.batch_size)]
        for b in torch.randperm(len(batches), generator=g).tolist():
            yield batches[b]


def make_loader(data: Encoded, pad_token_id: int, batch_size: int, *, shuffle: bool, seed: int = 0,
                pad_to_multiple_of: int | None = None, pin_memory: bool = False) -> torch.utils.data.DataLoader:
    """A DataLoader over ``data`` with a :class:`LengthBucketSampler` and :func:`pad_batch`."""
    sampler = LengthBucketSampler(data.lengths, batch_size, seed=seed, shuffle=shuffle)
    collate = partial(pad_batch, pad_token_id=pad_token_id, pad_to_multiple_of=pad_to_multiple_of)
    return torch.utils.data.DataLoader(_Examples(data), batch_sampler=sampler, collate_fn=collate,
                                       pin_memory=pin_memory)


class RunBatches:
    """Training micro-batch ``g`` of a run (counted over steps and slots, epoch after epoch): the length-bucketed
    batches of epoch ``g // per_epoch`` in the sampler's seeded order, padded by :func:`pad_batch`.

    ``min_rows=2`` pads a batch of one with a copy whose label is ignored (-100): ``torch.compile`` specialises
    on a batch dimension of 1 and would compile the step again.
    """

    def __init__(self, data: Encoded, batch_size: int, *, seed: int, pad_token_id: int,
                 pad_to_multiple_of: int | None = None, min_rows: int = 1):
        self.data, self.min_rows = data, min_rows
        self.sampler = LengthBucketSampler(data.lengths, batch_size, seed=seed, shuffle=True)
        self.per_epoch = len(self.sampler)
        self.collate = partial(pad_batch, pad_token_id=pad_token_id, pad_to_multiple_of=pad_to_multiple_of)
        self._epoch, self._batches = None, []

    def __call__(self, g: int) -> dict[str, torch.Tensor]:
        epoch, position = divmod(g, self.per_epoch)
        if epoch != self._epoch:
            self.sampler.set_epoch(epoch)
            self._epoch, self._batches = epoch, list(self.sampler)
        rows = [{"input_ids": self.data.input_ids[i], "label": self.data.labels[i], "index": i}
                for i in self._batches[position]]
        rows += [{**rows[0], "label": IGNORE_INDEX, "index": -1}] * (self.min_rows - len(rows))
        batch = self.collate(rows)
        batch.pop("index")
        return batch
