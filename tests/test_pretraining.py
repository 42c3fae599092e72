"""Masked-LM pretraining pieces: packing, masking blocks, frozen evaluation masks, the baseline (the loss:
test_objective.py), and the runs of :mod:`mlm_course.lab.pretrain_run` that train on them."""

import json
import math

import pytest
import torch
import torch.nn.functional as F

from mlm_course import pretraining
from mlm_course.lab import pretrain_run
from mlm_course.lab.pretrain_run import PretrainConfig
from mlm_course.pretraining import MaskSpec
from mlm_course.train import InvalidSettings


@pytest.fixture
def blocks(bert_tok, sample_text):
    return pretraining.pack_blocks([sample_text, sample_text.upper()], bert_tok, seq_len=32)


def test_pack_blocks_shape_and_specials(blocks, bert_tok, sample_text):
    assert blocks.shape[1] == 32 and blocks.dtype == torch.long
    assert (blocks[:, 0] == bert_tok.cls_token_id).all() and (blocks[:, -1] == bert_tok.sep_token_id).all()
    stream = bert_tok([sample_text, sample_text.upper()], add_special_tokens=False)["input_ids"]
    flat = [t for piece in stream for t in piece]
    assert blocks.shape[0] == len(flat) // 30
    assert blocks[:, 1:-1].flatten().tolist() == flat[: blocks.shape[0] * 30]


def test_pack_blocks_too_little_text(bert_tok):
    with pytest.raises(ValueError, match="fewer than one sequence"):
        pretraining.pack_blocks(["too short"], bert_tok, seq_len=128)
    with pytest.raises(ValueError, match="at least 3"):
        pretraining.pack_blocks(["x"], bert_tok, seq_len=2)


def test_mask_blocks_follows_the_conventions(blocks, bert_tok):
    batch = pretraining.mask_blocks(blocks, bert_tok, MaskSpec(mask_rate=0.3), torch.Generator().manual_seed(0))
    selected = batch["labels"] != -100
    assert torch.equal(batch["labels"][selected], blocks[selected])
    assert not selected[:, 0].any() and not selected[:, -1].any()
    assert torch.equal(batch["input_ids"][~selected], blocks[~selected])


def test_evaluation_masks_are_frozen(blocks, bert_tok):
    first = pretraining.frozen_eval_batches(blocks, bert_tok, MaskSpec(), batch_size=3)
    second = pretraining.frozen_eval_batches(blocks, bert_tok, MaskSpec(), batch_size=3)
    for a, b in zip(first, second, strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)


@torch.no_grad()
def test_evaluate_matches_a_direct_computation(tiny_model, blocks, bert_tok):
    model = tiny_model().eval()
    batches = pretraining.frozen_eval_batches(blocks, bert_tok, MaskSpec(), batch_size=4)
    result = pretraining.evaluate_masked_lm(model, batches)
    logits = torch.cat([model(b["input_ids"], b["attention_mask"])[b["labels"] != -100] for b in batches])
    labels = torch.cat([b["labels"][b["labels"] != -100] for b in batches])
    assert result["tokens"] == labels.numel()
    assert result["loss"] == pytest.approx(float(F.cross_entropy(logits, labels)), rel=1e-5)
    assert result["top1"] == pytest.approx(float((logits.argmax(-1) == labels).float().mean()))
    assert result["top1"] <= result["top5"] and result["perplexity"] == pytest.approx(math.exp(result["loss"]))


def test_unigram_baseline_by_hand():
    train = torch.tensor([[0, 5, 5, 5, 6, 1]])  # 0 and 1 are special
    labels = torch.tensor([[-100, 5, 6, 7, -100]])
    batch = {"input_ids": torch.tensor([[0, 4, 4, 4, 1]]), "labels": labels}  # what the input shows plays no part
    result = pretraining.unigram_baseline(train, [batch], vocab_size=8, special_ids=[0, 1])
    # add-one counts without specials: 2:1 3:1 4:1 5:4 6:2 7:1 -> total 10
    expected = -(math.log(4 / 10) + math.log(2 / 10) + math.log(1 / 10)) / 3
    assert result["loss"] == pytest.approx(expected)
    assert result["top1"] == pytest.approx(1 / 3) and result["top5"] == pytest.approx(1.0)


def test_copying_baseline_by_hand():
    train = torch.tensor([[0, 5, 5, 5, 6, 1]])  # add-one frequencies without specials: 5 → 4/9, 6 → 2/9, others 1/9
    shown = torch.tensor([[0, 4, 6, 7, 1]])  # 4 = [MASK]; 6 is shown unchanged, 7 is a random replacement
    labels = torch.tensor([[-100, 5, 6, 5, -100]])
    batch = {"input_ids": shown, "labels": labels}
    result = pretraining.copying_baseline(train, [batch], vocab_size=8, special_ids=[0, 1, 4], mask_token_id=4)
    # 80/10/10 over 5 drawable tokens (8 ids, 3 special): a shown v is the truth with probability
    # q(v) = 0.1·u(v) / (0.1·u(v) + 0.1/5); the predictor says q(v)·[x = v] + (1 − q(v))·u(x); [MASK]: u(x)
    unigram = {5: 4 / 9, 6: 2 / 9, 7: 1 / 9}  # [MASK] (id 4) is special here, so the add-one total is 9
    q6, q7 = (0.1 * unigram[6]) / (0.1 * unigram[6] + 0.02), (0.1 * unigram[7]) / (0.1 * unigram[7] + 0.02)
    expected = -(math.log(unigram[5]) + math.log(q6 + (1 - q6) * unigram[6]) + math.log((1 - q7) * unigram[5])) / 3
    assert result["loss"] == pytest.approx(expected) and result["tokens"] == 3
    # the random position: 7 scores q(7) + (1 − q(7))·u(7) ≈ 0.43 against 5's (1 − q(7))·u(5) ≈ 0.29, and misses
    assert result["top1"] == pytest.approx(2 / 3)
    plain = pretraining.unigram_baseline(train, [batch], vocab_size=8, special_ids=[0, 1, 4])
    only_mask = pretraining.copying_baseline(train, [batch], 8, [0, 1, 4], 4, spec=MaskSpec(mask_mix=(1.0, 0.0, 0.0)))
    assert only_mask == plain  # no kept tokens in the mix: nothing to copy, the unigram predictor
    assert result["loss"] < plain["loss"]


def test_copying_baseline_top5_is_the_mixtures_top5():
    g = torch.Generator().manual_seed(0)
    train = torch.randint(2, 30, (20, 16), generator=g)
    blocks = torch.randint(2, 30, (6, 16), generator=g)
    batch = {"input_ids": blocks.clone(), "labels": torch.full_like(blocks, -100)}
    where = torch.rand(blocks.shape, generator=g) < 0.5
    batch["labels"][where] = torch.randint(2, 30, (int(where.sum()),), generator=g)
    batch["input_ids"][where & (torch.rand(blocks.shape, generator=g) < 0.4)] = 1  # [MASK] = 1
    spec = MaskSpec(mask_mix=(0.6, 0.3, 0.1))
    got = pretraining.copying_baseline(train, [batch], 30, [0, 1], 1, spec)
    counts = torch.bincount(train.flatten(), minlength=30).double() + 1
    counts[[0, 1]] = 0
    unigram = counts / counts.sum()
    labels, shown = batch["labels"][where], batch["input_ids"][where]
    kept = 0.1 * unigram[shown]
    q = torch.where(shown == 1, 0.0, kept / (kept + 0.3 / 28))[:, None]
    dense = (1 - q) * unigram + q * F.one_hot(shown, 30).double()  # the full mixture, one row per position
    best = dense.topk(5, dim=1).indices
    assert got["top1"] == pytest.approx(float((best[:, 0] == labels).double().mean()))
    assert got["top5"] == pytest.approx(float((best == labels[:, None]).any(1).double().mean()))
    assert got["loss"] == pytest.approx(float(-dense.gather(1, labels[:, None]).log().mean()))


def test_copying_baseline_is_the_truth_rate_of_what_masking_shows():
    """On text drawn from a skewed unigram and masked by the course's own masking, the share of positions showing
    a real token v whose true token is v matches q(v) (a binomial 99.9 % interval per token), and the predictor
    scores better than the fixed ½ bet it replaced."""
    from mlm_course.pretraining import mask_blocks

    vocab, specials, mask_id = 40, [0, 1, 2, 3], 3
    probs = torch.zeros(vocab, dtype=torch.double)
    probs[4:] = 1.0 / torch.arange(1, vocab - 3, dtype=torch.double)  # Zipf: token 4 common, token 39 rare
    probs /= probs.sum()
    g = torch.Generator().manual_seed(0)
    blocks = torch.multinomial(probs, 400 * 64, replacement=True, generator=g).view(400, 64)
    tok = type("Tokens", (), {"mask_token_id": mask_id, "pad_token_id": 0, "all_special_ids": specials,
                              "__len__": lambda self: vocab})()
    batch = mask_blocks(blocks, tok, MaskSpec(), g)
    chosen = batch["labels"] != -100
    labels, shown = batch["labels"][chosen], batch["input_ids"][chosen]
    unigram = torch.bincount(blocks.flatten(), minlength=vocab).double() + 1
    unigram[specials] = 0
    unigram /= unigram.sum()
    for v in (4, 6, 20):
        at = shown == v
        n, q = int(at.sum()), float(0.1 * unigram[v] / (0.1 * unigram[v] + 0.1 / (vocab - len(specials))))
        half_width = 3.29 * math.sqrt(q * (1 - q) / n)
        assert abs(float((labels[at] == v).double().mean()) - q) < half_width, v
    ours = pretraining.copying_baseline(blocks, [batch], vocab, specials, mask_id)
    real = (shown != mask_id).double()
    fixed = (0.5 * real * (labels == shown) + (1 - 0.5 * real) * unigram[labels]).log().mean()
    assert ours["loss"] < -float(fixed) - 0.01


def test_pretraining_learns_the_sample(tiny_model, blocks, bert_tok, tmp_path):
    model = tiny_model(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config = PretrainConfig(steps=60, batch_size=4, lr=3e-3, warmup_steps=5, eval_every=60, device="cpu", seed=0,
                            mask_rate=0.3)
    result = pretrain_run.pretrain(model, bert_tok, blocks, blocks, config, out_dir=tmp_path, progress=False)
    evals = [m for m in result.history if m["split"] == "eval"]
    baseline = pretraining.unigram_baseline(
        blocks, pretraining.frozen_eval_batches(blocks, bert_tok, MaskSpec(mask_rate=0.3)), len(bert_tok),
        bert_tok.all_special_ids)
    assert evals[-1]["loss"] < baseline["loss"], "a trained model should beat unigram frequencies on its own data"
    saved = {path.name for path in (tmp_path / "checkpoint-60").iterdir()}  # accelerate's save_state, and ours
    assert {"model.safetensors", "optimizer.bin", "random_states_0.pkl", "config.json", "settings.json"} <= saved


def _batches_seen(model, blocks, tokenizer, monkeypatch, **options):
    """The masked batches pretrain() trains on, one per step; one batch holds every block (an epoch per step)."""
    seen = []
    real_loss = pretrain_run.masked_lm_loss

    def recording_loss(model, batch):
        seen.append(batch["input_ids"].clone())
        return real_loss(model, batch)

    monkeypatch.setattr(pretrain_run, "masked_lm_loss", recording_loss)
    config = PretrainConfig(steps=3, batch_size=len(blocks), lr=1e-3, warmup_steps=0, eval_every=100, device="cpu",
                            seed=0, **options)
    pretrain_run.pretrain(model, tokenizer, blocks, blocks, config, progress=False)
    return [sorted(map(tuple, batch.tolist())) for batch in seen]  # the epoch's rows, in a canonical order


def test_static_masks_come_back_every_copies_epochs_dynamic_ones_do_not(tiny_model, blocks, bert_tok, monkeypatch):
    one = _batches_seen(tiny_model(), blocks, bert_tok, monkeypatch, static_copies=1)
    assert one[0] == one[1] == one[2], "one static copy: the same masked corpus every epoch"
    two = _batches_seen(tiny_model(), blocks, bert_tok, monkeypatch, static_copies=2)
    assert two[0] == two[2] != two[1], "two copies: epoch e uses copy e % 2"
    dynamic = _batches_seen(tiny_model(), blocks, bert_tok, monkeypatch)
    assert dynamic[0] != dynamic[1] and dynamic[1] != dynamic[2], "dynamic: a fresh mask every epoch"
    assert sum(row.count(bert_tok.mask_token_id) for row in one[0]) > 0


@pytest.mark.parametrize("copies", [0, -1, 1.5, True])
def test_bad_static_copies_are_refused(copies):
    with pytest.raises(InvalidSettings, match="static_copies must be") as error:
        PretrainConfig(steps=1, batch_size=4, device="cpu", static_copies=copies)
    assert set(error.value.problems) == {"static_copies"}


def test_shorten_blocks_cuts_the_stated_share_to_uniform_lengths(bert_tok):
    """BERT's short_seq_prob: a share of rows cut to L tokens (L uniform in 3..seq_len), [SEP] last, then padding."""
    torch.manual_seed(0)
    count, length, share = 20_000, 16, 0.1
    blocks = torch.randint(1000, 2000, (count, length))
    blocks[:, 0], blocks[:, -1] = bert_tok.cls_token_id, bert_tok.sep_token_id
    ids, attention = pretraining.shorten_blocks(blocks, bert_tok, share, torch.Generator().manual_seed(1))
    lengths = attention.sum(1)
    for row in range(200):
        n = int(lengths[row])
        assert attention[row, :n].all() and not attention[row, n:].any()
        assert torch.equal(ids[row, : n - 1], blocks[row, : n - 1]) and ids[row, n - 1] == bert_tok.sep_token_id
        assert (ids[row, n:] == bert_tok.pad_token_id).all()
    # A cut row of full length looks uncut: P(shorter) = share · 13/14. 99.9 % bound: 3.3 binomial standard deviations.
    expected = share * (length - 3) / (length - 2)
    observed = float((lengths < length).float().mean())
    assert abs(observed - expected) < 3.3 * math.sqrt(expected * (1 - expected) / count)
    assert set(lengths[lengths < length].tolist()) == set(range(3, length))
    untouched = torch.Generator().manual_seed(1)
    state = untouched.get_state()
    same_ids, same_attention = pretraining.shorten_blocks(blocks, bert_tok, 0.0, untouched)
    assert torch.equal(same_ids, blocks) and same_attention.all()
    assert torch.equal(untouched.get_state(), state), "share 0 draws nothing: the masks after it stay as they were"
    with pytest.raises(ValueError, match="between 0 and 1"):
        pretraining.shorten_blocks(blocks, bert_tok, 1.5, torch.Generator())


def test_mask_blocks_never_selects_padding(blocks, bert_tok):
    ids, attention = pretraining.shorten_blocks(blocks, bert_tok, 1.0, torch.Generator().manual_seed(0))
    batch = pretraining.mask_blocks(ids, bert_tok, MaskSpec(mask_rate=0.5), torch.Generator().manual_seed(0), attention)
    assert batch["attention_mask"] is attention and (attention == 0).any()
    assert (batch["labels"][attention == 0] == -100).all() and (batch["labels"] != -100).any()


def test_short_share_reaches_training_and_zero_changes_nothing(tiny_model, blocks, bert_tok, monkeypatch):
    plain = _batches_seen(tiny_model(), blocks, bert_tok, monkeypatch)
    assert _batches_seen(tiny_model(), blocks, bert_tok, monkeypatch, short_seq_prob=0.0) == plain
    cut = _batches_seen(tiny_model(), blocks, bert_tok, monkeypatch, short_seq_prob=0.5)
    assert not any(bert_tok.pad_token_id in row for batch in plain for row in batch)
    assert all(any(bert_tok.pad_token_id in row for row in batch) for batch in cut)
    with pytest.raises(InvalidSettings, match="short_seq_prob is a probability"):  # refused before any work
        PretrainConfig(steps=1, batch_size=4, device="cpu", short_seq_prob=-0.1)


def test_shipped_checkpoint_figures_are_what_its_weights_compute():
    """results.json of the course checkpoint: held-out loss, probe guesses and hits recomputed from the shipped files."""
    import json

    from mlm_course import corpus
    from mlm_course.models import load_mlm
    from mlm_course.probes import probe_hits

    model, tok = load_mlm("course")
    results = json.loads((corpus.course_checkpoint_dir() / "results.json").read_text())
    seq_len = results["settings"]["seq_len"]
    heldout = pretraining.pack_blocks([corpus.pretraining_text("heldout")], tok, seq_len)
    scores = pretraining.evaluate_masked_lm(model.eval(), pretraining.frozen_eval_batches(heldout, tok, MaskSpec()))
    assert scores["tokens"] == results["heldout"]["tokens"]
    for metric in ("loss", "top1", "top5"):
        assert scores[metric] == pytest.approx(results["heldout"][metric], abs=1e-4), metric
    curve = [json.loads(line) for line in (corpus.course_checkpoint_dir() / "metrics.jsonl").read_text().splitlines()]
    assert [row for row in curve if row["split"] == "eval"][-1]["loss"] == results["heldout"]["loss"]
    assert sum(stage["steps"] for stage in results["stages"]) == results["steps"] == curve[-1]["step"]
    hits = probe_hits(model, tok)
    assert [row["guesses"] for row in hits] == [row["guesses"] for row in results["probes"]["rows"]]
    assert sum(row["hit"] for row in hits) == results["probes"]["hits"] > len(hits) / 2  # issue 4: "most of the time"


def test_pretraining_settings_name_every_bad_field():
    with pytest.raises(InvalidSettings) as error:
        PretrainConfig(size="huge", mask_rate=1.5, mask_mix=(0.5, 0.5, 0.5), mask_scheme="spans", seq_len=2,
                       stack_to=4, dropout=1.0, short_seq_prob=-0.1, corpus="web")
    assert set(error.value.problems) == {"size", "mask_rate", "mask_mix", "mask_scheme", "seq_len", "stack_to",
                                         "dropout", "short_seq_prob", "corpus"}
    config = PretrainConfig(mask_rate=0.3, mask_mix=[1.0, 0.0, 0.0], mask_scheme="fixed")
    assert config.mask == MaskSpec(mask_rate=0.3, mask_mix=(1.0, 0.0, 0.0), mask_scheme="fixed")


def test_recorded_settings_rebuild_the_configuration_without_removed_options():
    """results.json records every option a run had; one a later course removed (prefetch) is left out, a bad value
    is refused as on the command line."""
    from dataclasses import asdict

    recorded = json.loads(json.dumps(asdict(PretrainConfig(steps=7, mask_rate=0.3)))) | {"prefetch": None}
    assert PretrainConfig.from_settings(recorded) == PretrainConfig(steps=7, mask_rate=0.3)
    with pytest.raises(InvalidSettings, match="mask_rate"):
        PretrainConfig.from_settings({**recorded, "mask_rate": 1.5})
