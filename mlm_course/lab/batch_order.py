"""Which examples go into micro-batch (step, slot) of a run: a fresh seeded order each epoch.

A function of (step, slot) only, never of what ran before, so a resumed run and the :class:`Prefetcher
<mlm_course.lab.hardware.Prefetcher>` see exactly the batches an uninterrupted run sees.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from mlm_course.lab.seeds import generator_for


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
