"""The loop on one screen (mlm_course.train): its settings, what it trains, accumulation and processes that equal
one big batch, the best evaluation kept, and the Accelerate edition training exactly what the plain loop trains."""

import copy
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mlm_course import finetune, train
from mlm_course.masking import MaskSpec
from mlm_course.objective import masked_lm_loss
from mlm_course.pretraining import (
    evaluate_masked_lm,
    frozen_eval_batches,
    mask_blocks,
    pack_blocks,
    training_batches,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def blocks(bert_tok, sample_text):
    return pack_blocks([sample_text * 3], bert_tok, seq_len=32)


def quiet(tiny_model):
    return tiny_model(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def fixed_batches(blocks, bert_tok, count: int, rows: int) -> list[dict]:
    """``count`` masked batches of ``rows`` blocks, full logits (no ``masked_positions``), so that two of them
    concatenated are one batch of both."""
    generator = torch.Generator().manual_seed(0)
    out = []
    for k in range(count):
        batch = mask_blocks(blocks[(k * rows) % len(blocks):][:rows], bert_tok, MaskSpec(mask_rate=0.2), generator)
        out.append({key: batch[key] for key in ("input_ids", "labels")})
    return out


def test_bad_settings_are_refused_with_each_fields_name():
    with pytest.raises(train.InvalidSettings) as error:
        train.TrainConfig(steps=0, lr=-1.0, precision="fp8", betas=(0.9, 1.5))
    assert set(error.value.problems) == {"steps", "lr", "precision", "betas"}
    assert "fp8" in str(error.value) and "fp32, bf16, fp16" in str(error.value)


def test_the_recipes_differ_only_where_the_course_says():
    pretraining, fine_tuning = train.TrainConfig.pretraining(), train.TrainConfig.fine_tuning(steps=40)
    assert (pretraining.lr, fine_tuning.lr) == (3e-3, 5e-4)
    assert fine_tuning.keep_best == "accuracy" and fine_tuning.steps == 40 and pretraining.keep_best is None
    # the shipped checkpoint's first stage (its results.json: 14,000 steps, 700 of warm-up), stopped at 30 minutes
    assert (pretraining.steps, pretraining.warmup(), pretraining.minutes) == (14_000, 700, 30.0)
    assert fine_tuning.minutes is None and train.TrainConfig().minutes is None


def test_a_time_budget_stops_at_the_first_logged_step_after_it_and_scores_that_step(tiny_model, bert_tok, blocks,
                                                                                    monkeypatch):
    """Each step takes 1 s on a fake clock: with 0.1 minutes (6 s) and a row every 4 steps the run stops at
    step 8 (the first logged step at or past 6 s), logs and evaluates it, and its rate is still part-way down the
    100-step schedule."""
    clock = [0.0]

    def a_second_a_step(model, batch):
        clock[0] += 1.0
        return masked_lm_loss(model, batch)

    monkeypatch.setattr(train.time, "perf_counter", lambda: clock[0])
    heldout = frozen_eval_batches(blocks[:4], bert_tok, MaskSpec())
    config = train.TrainConfig(steps=100, batch_size=4, warmup_ratio=0.0, log_every=4, eval_every=50, minutes=0.1)
    done = train.train(quiet(tiny_model), training_batches(blocks, bert_tok, 4), a_second_a_step, config,
                       evaluate=lambda m: evaluate_masked_lm(m, heldout), device="cpu")
    assert done.steps == 8 and [(r["step"], r["split"]) for r in done.history] == [
        (4, "train"), (8, "train"), (8, "eval")]
    assert done.history[1]["lr"] == pytest.approx(3e-3 * (100 - 7) / 100)  # the rate of step 8: not decayed to 0


@pytest.mark.parametrize("minutes", [0, -1.0])
def test_a_time_budget_must_be_positive(minutes):
    with pytest.raises(train.InvalidSettings, match="minutes"):
        train.TrainConfig(minutes=minutes)


def test_the_loop_trains_logs_and_evaluates_when_it_says(tiny_model, bert_tok, blocks):
    heldout = frozen_eval_batches(blocks[:4], bert_tok, MaskSpec())
    config = train.TrainConfig(steps=20, batch_size=4, lr=3e-3, warmup_ratio=0.1, eval_every=10, log_every=5)
    before = evaluate_masked_lm(quiet(tiny_model).eval(), heldout)["loss"]
    done = train.train(quiet(tiny_model), training_batches(blocks, bert_tok, 4), masked_lm_loss, config,
                       evaluate=lambda m: evaluate_masked_lm(m, heldout), device="cpu")
    assert [(r["step"], r["split"]) for r in done.history] == [
        (5, "train"), (10, "train"), (10, "eval"), (15, "train"), (20, "train"), (20, "eval")]
    assert done.history[-1]["loss"] < before - 0.5 and done.steps == 20 and done.tokens == 20 * 4 * 32
    assert done.history[0]["lr"] == pytest.approx(3e-3 * (20 - 4) / (20 - 2))  # step 5 of 20: warm-up (2) over
    assert not done.model.training and all(p.grad is None for p in done.model.parameters())


def test_accumulated_micro_batches_train_what_one_batch_of_both_trains(tiny_model, bert_tok, blocks):
    """grad_accum = 2 on micro-batches of 4 reaches the weights of grad_accum = 1 on their concatenations (their
    masked counts differ, so averaging micro-batch means would not)."""
    small = fixed_batches(blocks, bert_tok, 6, 4)
    counts = [int((b["labels"] != -100).sum()) for b in small]
    assert len(set(counts)) > 1
    joined = [{key: torch.cat([a[key], b[key]]) for key in a} for a, b in zip(small[::2], small[1::2], strict=True)]
    model = quiet(tiny_model)
    config = train.TrainConfig(steps=3, batch_size=8, lr=1e-3, warmup_ratio=0.0, log_every=1)
    one = train.train(copy.deepcopy(model), iter(joined), masked_lm_loss, config, device="cpu")
    two = train.train(copy.deepcopy(model), iter(small), masked_lm_loss,
                      train.TrainConfig(**{**vars(config), "batch_size": 4, "grad_accum": 2}), device="cpu")
    for (name, a), b in zip(one.model.state_dict().items(), two.model.state_dict().values(), strict=True):
        torch.testing.assert_close(b, a, atol=1e-6, rtol=1e-5, msg=name)
    assert [r["loss"] for r in two.history] == pytest.approx([r["loss"] for r in one.history], rel=1e-5)


def test_a_training_row_is_the_mean_loss_of_the_steps_since_the_last(tiny_model, bert_tok, blocks):
    batches = fixed_batches(blocks, bert_tok, 6, 4)
    every_step, pairs = (train.train(quiet(tiny_model), iter(batches), masked_lm_loss,
                                     train.TrainConfig(steps=6, batch_size=4, log_every=k), device="cpu").history
                         for k in (1, 2))
    means = [(a["loss"] + b["loss"]) / 2 for a, b in zip(every_step[::2], every_step[1::2], strict=True)]
    assert [row["step"] for row in pairs] == [2, 4, 6] and [row["loss"] for row in pairs] == pytest.approx(means)


def test_the_best_evaluation_is_kept_not_the_last(tiny_model, bert_tok, blocks):
    """An evaluation that rises then falls: the returned weights are those of its best step."""
    scores = iter([0.6, 0.9, 0.7])
    weights = {}

    def evaluate(model):
        value = next(scores)
        weights[value] = copy.deepcopy(model.state_dict())
        return {"accuracy": value}

    config = train.TrainConfig(steps=6, batch_size=4, eval_every=2, keep_best="accuracy")
    done = train.train(quiet(tiny_model), training_batches(blocks, bert_tok, 4), masked_lm_loss, config,
                       evaluate=evaluate, split="dev", device="cpu")
    assert done.best["step"] == 4 and done.best["accuracy"] == 0.9 and done.best["split"] == "dev"
    for name, value in done.model.state_dict().items():
        assert torch.equal(value, weights[0.9][name]), name
    assert not torch.equal(done.model.state_dict()["embeddings.word.weight"], weights[0.7]["embeddings.word.weight"])


def test_keeping_the_best_needs_an_evaluation_that_returns_that_figure(tiny_model, bert_tok, blocks):
    config = train.TrainConfig(steps=2, batch_size=4, eval_every=1, keep_best="accuracy")
    batches = training_batches(blocks, bert_tok, 4)
    with pytest.raises(ValueError, match="keep_best='accuracy' needs an evaluation"):
        train.train(quiet(tiny_model), batches, masked_lm_loss, config, device="cpu")
    with pytest.raises(ValueError, match=r"not a figure the evaluation returns \(loss\)"):
        train.train(quiet(tiny_model), batches, masked_lm_loss, config, evaluate=lambda m: {"loss": 1.0},
                    device="cpu")


def test_bf16_autocast_on_a_cpu_trains_with_an_fp32_loss(tiny_model, bert_tok, blocks):
    seen = []

    def loss_fn(model, batch):
        loss = masked_lm_loss(model, batch)
        seen.append((torch.is_autocast_enabled("cpu"), loss.dtype))
        return loss

    config = train.TrainConfig(steps=2, batch_size=4, precision="bf16", log_every=1)
    done = train.train(quiet(tiny_model), training_batches(blocks, bert_tok, 4), loss_fn, config, device="cpu")
    assert seen == [(True, torch.float32)] * 2 and all(p.dtype == torch.float32 for p in done.model.parameters())


def test_fp16_on_a_cpu_is_refused_with_what_to_use():
    with pytest.raises(ValueError, match="fp16 autocast needs a GPU"):
        train.train(torch.nn.Linear(2, 2), iter([]), lambda m, b: 0, train.TrainConfig(precision="fp16"),
                    device="cpu")


def test_fine_tuning_batches_cover_each_sentence_once_per_pass(bert_tok):
    data = finetune.encode(bert_tok, [f"sentence number {i} " * (1 + i % 4) for i in range(10)], [i % 2 for i in
                                                                                                range(10)])
    batches = list(itertools.islice(finetune.training_batches(data, 3, pad_token_id=0, seed=0), 8))
    first, second = (sorted(int(i) for b in part for i in b["index"]) for part in (batches[:4], batches[4:]))
    assert first == second == list(range(10))
    assert all(b["input_ids"].shape[1] == int(b["attention_mask"].sum(1).max()) for b in batches)


def test_accelerate_trains_what_the_plain_loop_trains(tiny_model, bert_tok, blocks):
    from accelerate import Accelerator

    small = fixed_batches(blocks, bert_tok, 4, 4)
    config = train.TrainConfig(steps=2, batch_size=4, grad_accum=2, lr=1e-3, warmup_ratio=0.0, log_every=1)
    model = quiet(tiny_model)
    plain = train.train(copy.deepcopy(model), iter(small), masked_lm_loss, config, device="cpu")
    accelerated = train.train_with_accelerate(copy.deepcopy(model), iter(small), masked_lm_loss, config,
                                              accelerator=Accelerator(cpu=True))
    for (name, a), b in zip(plain.model.state_dict().items(), accelerated.model.state_dict().values(), strict=True):
        torch.testing.assert_close(b, a, atol=1e-6, rtol=1e-5, msg=name)
    assert [r["loss"] for r in accelerated.history] == pytest.approx([r["loss"] for r in plain.history], rel=1e-5)


TWO_PROCESSES = """
import json, sys, torch
from accelerate import Accelerator
sys.path.insert(0, sys.argv[2])
from test_train import two_process_run
accelerator = Accelerator(cpu=True)
weights, losses = two_process_run(accelerator)
if accelerator.is_main_process:
    torch.save(weights, sys.argv[1] + "/weights.pt")
    open(sys.argv[1] + "/losses.json", "w").write(json.dumps(losses))
accelerator.wait_for_everyone()
torch.distributed.destroy_process_group()  # both processes leave together (gloo aborts a process left behind)
"""


def two_process_run(accelerator):
    """Micro-batches of unequal masked counts, 2 steps; with ``accelerator`` (2 processes, 1 micro-batch each)
    or, without, the plain loop with 2 micro-batches per step."""
    from transformers import BertConfig

    from mlm_course.bert import BertMLM
    from mlm_course.tokenization import bert_tokenizer

    tok = bert_tokenizer()
    text = "It is a truth universally acknowledged, that a single man in possession of a good fortune. " * 20
    small = fixed_batches(pack_blocks([text], tok, seq_len=32), tok, 4, 4)
    torch.manual_seed(0)
    model = BertMLM(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                               attention_probs_dropout_prob=0.0))
    config = train.TrainConfig(steps=2, batch_size=4, grad_accum=1 if accelerator else 2, lr=1e-3,
                               warmup_ratio=0.0, log_every=1)
    if accelerator is None:
        done = train.train(model, iter(small), masked_lm_loss, config, device="cpu")
    else:
        done = train.train_with_accelerate(model, iter(small), masked_lm_loss, config, accelerator=accelerator)
    return done.model.state_dict(), [row["loss"] for row in done.history]


@pytest.mark.slow
def test_two_processes_train_what_one_process_with_two_micro_batches_trains(tmp_path):
    """``accelerate``'s two CPU processes (gloo), one micro-batch each, reach the weights and losses of one process
    that accumulates both micro-batches: the step's loss is normalised by the targets of every process."""
    (tmp_path / "two.py").write_text(TWO_PROCESSES)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(tmp_path / "two.py"), str(tmp_path), str(ROOT / "tests")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    weights, losses = two_process_run(None)
    two = torch.load(tmp_path / "weights.pt", weights_only=True)
    for name, value in weights.items():
        torch.testing.assert_close(two[name], value, atol=1e-6, rtol=1e-5, msg=name)
    assert json.loads((tmp_path / "losses.json").read_text()) == pytest.approx(losses, rel=1e-5)


class Killed(Exception):
    """What a run killed part-way raises here."""


def _batches_until(batches: list[dict], kill_at: int | None = None):
    """The batches over and over; ``Killed`` when batch ``kill_at`` is asked for."""
    for index, batch in enumerate(itertools.cycle(batches)):
        if index == kill_at:
            raise Killed
        yield batch


def test_a_killed_run_resumes_to_the_weights_and_rows_of_an_uninterrupted_one(tiny_model, bert_tok, blocks, tmp_path):
    """Accelerate's save_state/load_state through a TrainingRun: killed after step 4 of 7 (its checkpoint at step 3, in
    the middle of a 2-step logging window), the resumed run reaches the uninterrupted run's weights bit for bit —
    dropout on, so the random state travels too — and writes the same metrics rows and evaluations."""
    from accelerate import Accelerator

    from mlm_course.lab.training_run import TrainingRun
    from mlm_course.stored import read_metrics

    small = fixed_batches(blocks, bert_tok, 4, 4)
    config = train.TrainConfig(steps=7, batch_size=4, lr=1e-3, warmup_ratio=0.0, log_every=2, eval_every=3)
    settings = {"steps": 7, "batch_size": 4, "grad_accum": 1, "lr": 1e-3, "seed": 0}
    model = tiny_model()  # dropout 0.1

    def run(out, batches, resume=False):
        torch.manual_seed(1 if resume else 0)  # the resumed run's dropout draws come from the checkpoint
        return train.train_with_accelerate(
            copy.deepcopy(model), batches, masked_lm_loss, config, evaluate=lambda m: {"loss": 1.0},
            accelerator=Accelerator(cpu=True), run=TrainingRun(out, save_every=3, settings=settings, resume=resume))

    whole = run(tmp_path / "whole", _batches_until(small))
    with pytest.raises(Killed):
        run(tmp_path / "killed", _batches_until(small, kill_at=4))
    assert (tmp_path / "killed" / "latest_checkpoint.txt").read_text() == "checkpoint-3"
    resumed = run(tmp_path / "killed", _batches_until(small), resume=True)
    for (name, a), b in zip(whole.model.state_dict().items(), resumed.model.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    strip = [[{k: v for k, v in row.items() if k != "seconds"} for row in read_metrics(tmp_path / run_name)]
             for run_name in ("whole", "killed")]
    assert strip[0] == strip[1] and [row["step"] for row in strip[0] if row["split"] == "train"] == [2, 4, 6, 7]
    assert resumed.steps == whole.steps == 7
    with pytest.raises(ValueError, match="trained with lr=0.001, not 0.002: resume with the same settings"):
        TrainingRun(tmp_path / "killed", save_every=3, settings={**settings, "lr": 2e-3}, resume=True).start(
            Accelerator(cpu=True), model, train.Record(None), 7)
