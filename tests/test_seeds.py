"""Seed streams: every draw of a run gets its own seed, provably (the packing is one-to-one), and refuses what it
cannot pack."""

import pytest
import torch

from mlm_course.lab import seeds


def unpack(seed: int) -> tuple[int, int, int, int]:
    """The inverse of seeds.seed_for, written from the bit widths: (run seed, stream number, step, slot)."""
    slot = seed % 2**seeds.SLOT_BITS
    seed >>= seeds.SLOT_BITS
    step = seed % 2**seeds.STEP_BITS
    seed >>= seeds.STEP_BITS
    stream = seed % 2**seeds.STREAM_BITS
    return seed >> seeds.STREAM_BITS, stream, step, slot


def test_every_draw_of_a_run_has_its_own_seed():
    """All (stream, step, slot) triples a run of 1,000 steps with 16 micro-batches per step uses: no two share a seed
    (before, dropout of micro-batch 9 at step 5 had the seed of the masks of step 14's slot 100)."""
    draws = [(stream, step, slot) for stream in seeds.STREAMS for step in range(1000) for slot in range(16)]
    made = {seeds.seed_for(3, *draw) for draw in draws}
    assert len(made) == len(draws)
    assert seeds.seed_for(0, "dropout", 5, 9) != seeds.seed_for(0, "masks", 14, 100)


def test_a_seed_says_which_draw_it_is():
    for run_seed, stream, step, slot in ((0, "masks", 0, 0), (65535, "length_buckets", 2**32 - 1, 2**11 - 1),
                                         (7, "dropout", 123_456, 37)):
        seed = seeds.seed_for(run_seed, stream, step, slot)
        assert unpack(seed) == (run_seed, seeds.STREAMS[stream], step, slot)
        assert 0 <= seed < 2**63  # fits torch.Generator.manual_seed


def test_runs_with_different_seeds_draw_differently():
    assert seeds.seed_for(0, "masks", 5, 1) != seeds.seed_for(1, "masks", 5, 1)
    a = torch.rand(5, generator=seeds.generator_for(2, "epoch_order", 4))
    assert torch.equal(a, torch.rand(5, generator=seeds.generator_for(2, "epoch_order", 4)))
    assert not torch.equal(a, torch.rand(5, generator=seeds.generator_for(2, "epoch_order", 5)))


@pytest.mark.parametrize(("args", "message"), [
    ((2**16, "masks", 0, 0), "run_seed=65536"),
    ((0, "masks", -1, 0), "step=-1"),
    ((0, "masks", 0, 2**11), "slot=2048"),
    ((0, "masks", 1.5, 0), "step=1.5"),
    ((0, "noise", 0, 0), "unknown random stream 'noise'"),
])
def test_what_cannot_be_packed_is_refused(args, message):
    with pytest.raises(ValueError, match=message):
        seeds.seed_for(*args)
