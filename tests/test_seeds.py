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
    """All (stream, step, slot) triples a run of 1,000 steps with 16 micro-batches per step uses: no two share a seed,
    nor do draws whose numbers a sum would confuse (step 5, slot 9 against step 14, slot 100)."""
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


def test_a_real_run_derives_a_different_seed_for_every_draw(tiny_model, bert_tok, sample_text, monkeypatch):
    """Every seed a pretraining run derives (masks, dropout, epoch order), recorded over a run with 4 micro-batch
    slots a step (what two processes of 2 micro-batches each draw: every process draws every slot) over 6 steps:
    different (stream, step, slot) draws never got the same seed, and every slot of every step drew its own."""
    from mlm_course.lab import batch_order
    from mlm_course.lab.pretrain_run import PretrainConfig, pretrain
    from mlm_course.pretraining import pack_blocks

    derive = seeds.seed_for
    derived: dict[tuple, int] = {}

    def recording(run_seed, stream, step=0, slot=0):
        seed = derive(run_seed, stream, step, slot)
        assert derived.setdefault((run_seed, stream, step, slot), seed) == seed
        return seed

    monkeypatch.setattr(seeds, "seed_for", recording)  # generator_for's derivations
    monkeypatch.setattr(batch_order, "seed_for", recording)  # the dropout of each step's micro-batches
    blocks = pack_blocks([sample_text, sample_text.upper()], bert_tok, seq_len=32)
    config = PretrainConfig(steps=6, batch_size=4, grad_accum=4, seq_len=32, mask_rate=0.3, eval_every=6,
                            save_every=6, log_every=3, seed=5, device="cpu", precision="fp32")
    assert 6 * 4 * config.batch_size > len(blocks), "the run should see a second epoch"
    pretrain(tiny_model(), bert_tok, blocks, blocks[:2], config)
    assert len(set(derived.values())) == len(derived)
    per_step = {(stream, step, slot) for _, stream, step, slot in derived if stream in ("masks", "dropout")}
    assert per_step == {(stream, step, slot) for stream in ("masks", "dropout") for step in range(6) for slot in range(4)}
    assert {step for _, stream, step, _ in derived if stream == "epoch_order"} >= {0, 1}
