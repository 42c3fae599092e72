"""Which examples go into micro-batch (step, slot) of a run: a fresh seeded order each epoch.

A function of (step, slot) only, never of what ran before, so a resumed run sees exactly the batches an
uninterrupted run sees.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import torch

from mlm_course.lab.seeds import generator_for, seed_for


def check_enough_examples(n_examples: int, batch_size: int) -> None:
    """At least one full batch, or a ValueError saying what to change."""
    if n_examples < batch_size:
        raise ValueError(f"only {n_examples} examples for a batch of {batch_size}: use a smaller batch or more data")


def epoch_of(step: int, slot: int, slots: int, n_examples: int, batch_size: int) -> int:
    """The epoch (pass over the examples) that micro-batch ``(step, slot)`` belongs to (``slots`` per step)."""
    return (step * slots + slot) // (n_examples // batch_size)


def cycle_batches(n_examples: int, batch_size: int, seed: int) -> Callable[[int, int, int], torch.Tensor]:
    """``indices(step, slot, slots)``: the examples of micro-batch ``(step, slot)``, ``slots`` per step; each
    epoch a fresh permutation (stream ``epoch_order``), the last incomplete batch of an epoch left out."""
    check_enough_examples(n_examples, batch_size)
    per_epoch = n_examples // batch_size

    def indices(step: int, slot: int = 0, slots: int = 1) -> torch.Tensor:
        epoch, position = divmod(step * slots + slot, per_epoch)
        order = torch.randperm(n_examples, generator=generator_for(seed, "epoch_order", epoch))
        return order[position * batch_size : (position + 1) * batch_size]

    return indices


def step_batches(batch_for_step: Callable[[int, int], dict[str, torch.Tensor]], slots: int,
                 seed: int) -> Iterator[dict[str, torch.Tensor]]:
    """The micro-batches :func:`mlm_course.train.train_with_accelerate` draws, in its order: step after step,
    ``slots`` per step (micro-batches × processes), micro-batch ``(step, slot)`` being ``batch_for_step(step,
    slot)``. Each step's dropout is seeded from (step, slot) as it is drawn (stream ``dropout``), so a run draws the
    same dropout whatever came before — a resumed run or a replayed one included. An attention mask without padding
    is left out here, where checking it costs nothing (on a GPU, ``mask.all()`` would wait for the device)."""
    for step in itertools.count():
        for slot in range(slots):
            batch = batch_for_step(step, slot)
            torch.manual_seed(seed_for(seed, "dropout", step, slot))
            yield {key: value for key, value in batch.items()
                   if not (key == "attention_mask" and bool(value.all()))}
