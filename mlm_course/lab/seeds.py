"""Every random draw of a run, from one seed: a separate stream per purpose, a separate seed per (step, slot).

A run's draws are numbered by (stream, step, slot): the *stream* says what the draw is for (the masks of a
micro-batch, its dropout, the order of an epoch, ...), *step* is the optimiser step (or the epoch, or the copy),
*slot* the micro-batch within the step, counted over all processes. :func:`seed_for` packs the run's seed and the
three numbers into one integer, each in its own range of bits, so two different draws can never get the same seed
(the packing is one-to-one), whatever the step count, and a resumed run draws exactly what an uninterrupted one
draws.
"""

from __future__ import annotations

import torch

#: What each stream of a run is for. A new purpose gets a new number here, never a reused one.
STREAMS = {
    "masks": 0,  # pretraining: the masks (and short-sequence cuts) of micro-batch (step, slot)
    "dropout": 1,  # the dropout of micro-batch (step, slot)
    "epoch_order": 2,  # the order of the examples in epoch `step`
    "static_masks": 3,  # static masking: copy `step` of the masked corpus
    "length_buckets": 4,  # fine-tuning: the length-bucketed batches of epoch `step`
}
RUN_SEED_BITS = 16
STREAM_BITS = 4
STEP_BITS = 32
SLOT_BITS = 11  # 63 bits in all: a torch seed holds 64


def _check(name: str, value: int, bits: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**bits:
        raise ValueError(f"{name}={value!r}: a seed derivation takes a whole number in [0, {2**bits - 1}]")
    return value


def seed_for(run_seed: int, stream: str, step: int = 0, slot: int = 0) -> int:
    """The seed of draw (``stream``, ``step``, ``slot``) of the run seeded ``run_seed``: the four numbers side by
    side in the bits of one integer, so different draws never share a seed."""
    if stream not in STREAMS:
        raise ValueError(f"unknown random stream {stream!r}: use one of {', '.join(STREAMS)}")
    seed = _check("run_seed", run_seed, RUN_SEED_BITS)
    for name, value, bits in (("stream", STREAMS[stream], STREAM_BITS), ("step", step, STEP_BITS),
                              ("slot", slot, SLOT_BITS)):
        seed = (seed << bits) | _check(name, value, bits)
    return seed


def generator_for(run_seed: int, stream: str, step: int = 0, slot: int = 0) -> torch.Generator:
    """A CPU generator seeded with :func:`seed_for`."""
    return torch.Generator().manual_seed(seed_for(run_seed, stream, step, slot))
