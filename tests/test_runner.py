"""The shared training loop: schedule, weight-decay groups, checkpoints, exact resume, clear errors."""

import json

import pytest
import torch

from mlm_course import finetune as ft
from mlm_course.lab import run_files
from mlm_course.lab import runner as training
from mlm_course.lab.runner import TrainConfig, TrainLoop

TINY_CLASSIFIER = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def blocks(bert_tok, sample_text):
    from mlm_course.pretraining import pack_blocks

    return pack_blocks([sample_text, sample_text.upper()], bert_tok, seq_len=32)


def tiny_classifier(tok):
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    return BertForSequenceClassification(BertConfig(vocab_size=len(tok), max_position_embeddings=32, num_labels=2,
                                                    **TINY_CLASSIFIER))


def toy_sentences(tok, n: int) -> ft.Encoded:
    """Sentences of 1–6 words: batches of them always carry padding."""
    g = torch.Generator().manual_seed(1)
    words = ["good", "great", "bad", "dull", "film", "plot"]
    texts = [" ".join(words[int(i)] for i in torch.randint(6, (int(torch.randint(1, 7, (1,), generator=g)),),
                                                            generator=g)) for _ in range(n)]
    return ft.encode(tok, texts, [len(t) % 2 for t in texts], max_length=16)


def test_linear_schedule_warms_up_then_decays_to_zero():
    factor = training.linear_schedule(warmup_steps=4, total_steps=10)
    assert [factor(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert factor(4) == 1.0 and factor(7) == pytest.approx(0.5) and factor(10) == 0.0


def test_warmup_ratio_or_steps():
    assert TrainConfig(steps=200, warmup_ratio=0.05).warmup_for(200) == 10
    assert TrainConfig(steps=200, warmup_steps=30).warmup_for(200) == 30
    assert TrainConfig(steps=200, warmup_ratio=0.05, warmup_steps=0).warmup_for(200) == 0  # a count wins


def test_both_loops_share_the_optimiser_settings():
    """Fine-tuning's loop settings carry every shared field of its own settings, its defaults being its own."""
    from mlm_course.finetune import FinetuneConfig
    from mlm_course.finetune.loop import _loop_config

    tuned = FinetuneConfig(lr=3e-5, warmup_steps=7, grad_accum=2, precision="fp32", seed=4, log_every=3)
    loop = _loop_config(tuned, batches_per_epoch=10, slots=2)
    for name in ("lr", "warmup_steps", "grad_accum", "precision", "seed", "log_every", "betas", "eps"):
        assert getattr(loop, name) == getattr(tuned, name), name
    assert (FinetuneConfig().betas, TrainConfig().betas) == ((0.9, 0.999), (0.9, 0.98))  # BERT vs RoBERTa betas


@pytest.mark.parametrize("bad", [{"steps": 0}, {"lr": 0.0}, {"batch_size": 0}, {"grad_accum": 0}, {"minutes": 0},
                                 {"steps": 0, "warmup_ratio": -0.1}, {"warmup_ratio": 2.0}, {"warmup_steps": -1},
                                 {"warmup_steps": 2.5}, {"precision": "fp64"}])
def test_invalid_config_is_a_clear_error(bad):
    with pytest.raises(training.InvalidSettings, match="invalid training settings") as error:
        TrainConfig(**bad)
    assert set(error.value.problems) == set(bad)  # each bad field named (the CLI shows it as its option)


def test_no_weight_decay_on_biases_and_layernorm(tiny_model):
    model = tiny_model()
    decay, no_decay = training.parameter_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    assert all(p.ndim >= 2 for p in decay["params"])
    assert any("LayerNorm" in names[id(p)] for p in no_decay["params"])
    assert any(names[id(p)].endswith("bias") for p in no_decay["params"])
    assert no_decay["weight_decay"] == 0.0 and decay["weight_decay"] == 0.01
    total = sum(p.numel() for p in model.parameters())
    assert sum(p.numel() for g in (decay, no_decay) for p in g["params"]) == total


def test_cycle_batches_visits_every_example_once_per_epoch():
    pick = training.cycle_batches(10, 5, seed=3)
    first_epoch = torch.cat([pick(0), pick(1)])
    assert sorted(first_epoch.tolist()) == list(range(10))
    assert not torch.equal(torch.cat([pick(2), pick(3)]), first_epoch)  # a new permutation next epoch
    assert torch.equal(pick(1), training.cycle_batches(10, 5, seed=3)(1))


def test_cycle_batches_needs_enough_examples():
    with pytest.raises(ValueError, match="smaller batch"):
        training.cycle_batches(3, 8, seed=0)


def _save_safetensors(m, path):
    from safetensors.torch import save_file

    path.mkdir(parents=True, exist_ok=True)
    save_file(m.state_dict(), path / "model.safetensors")


def _regression_trainer(out_dir, steps=6, save_every=3, seed=0, log_every=1, save=_save_safetensors,
                        load=training.load_saved_weights, **extra):
    """A small linear regression, enough to exercise every part of the loop."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.LayerNorm(8), torch.nn.Dropout(0.2), torch.nn.Linear(8, 1))
    x = torch.randn(64, 4, generator=torch.Generator().manual_seed(1))
    y = x.sum(-1, keepdim=True)
    config = TrainConfig(steps=steps, batch_size=8, lr=1e-2, warmup_steps=2, save_every=save_every, eval_every=2,
                         log_every=log_every, seed=seed, device="cpu", **extra)
    pick = training.cycle_batches(64, 8, seed)

    def batch_for_step(step, micro):
        rows = pick(step, micro, config.grad_accum)
        return {"x": x[rows], "y": y[rows]}

    def compute_loss(m, batch):
        return torch.nn.functional.mse_loss(m(batch["x"]), batch["y"]), {}

    def evaluate(m):
        return {"mse": float(torch.nn.functional.mse_loss(m(x), y))}

    return TrainLoop(model, config, batch_for_step=batch_for_step, compute_loss=compute_loss, evaluate=evaluate,
                     out_dir=out_dir, save_model=save, load_model=load, progress=False)


def test_training_reduces_the_loss(tmp_path):
    trainer = _regression_trainer(tmp_path, steps=40, save_every=100)
    result = trainer.train()
    evals = [m["mse"] for m in result.metrics if m["split"] == "eval"]
    assert evals[-1] < 0.5 * evals[0]


def test_resumed_run_reaches_the_same_weights(tmp_path):
    whole = _regression_trainer(tmp_path / "whole")
    whole.train()
    killed = _regression_trainer(tmp_path / "killed")
    for _ in range(4):  # "killed" after step 4: the last checkpoint on disk is step 3's
        killed.train_step()
        if killed.step == 3:
            killed.save_checkpoint()
    resumed = _regression_trainer(tmp_path / "killed")
    resumed.train(resume=True)
    assert resumed.step == whole.step == 6
    for a, b in zip(whole.model.state_dict().values(), resumed.model.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_resume_keeps_metrics_consistent(tmp_path):
    first = _regression_trainer(tmp_path)
    first.train()
    rows_before = run_files.read_metrics(tmp_path)
    again = _regression_trainer(tmp_path)
    assert again.resume() and again.step == 6
    assert run_files.read_metrics(tmp_path) == rows_before


def test_resume_with_other_settings_is_refused(tmp_path):
    _regression_trainer(tmp_path).train()
    other = _regression_trainer(tmp_path, seed=1)
    with pytest.raises(ValueError, match="trained with seed=0"):
        other.resume()


def test_resume_without_checkpoint_starts_fresh(tmp_path):
    trainer = _regression_trainer(tmp_path)
    assert trainer.resume() is False and trainer.step == 0


def test_checkpoint_is_complete_and_old_ones_are_removed(tmp_path):
    trainer = _regression_trainer(tmp_path)
    trainer.train()
    checkpoints = sorted(p.name for p in tmp_path.glob("checkpoint-*"))
    assert checkpoints == ["checkpoint-6"]
    assert (tmp_path / training.CHECKPOINT_POINTER).read_text() == "checkpoint-6"
    assert {p.name for p in (tmp_path / "checkpoint-6").iterdir()} == {"model", "trainer_state.pt", "config.json"}
    assert not list(tmp_path.glob(".checkpoint-*")), "temporary checkpoint folders were left behind"
    assert json.loads((tmp_path / "checkpoint-6" / "config.json").read_text())["steps"] == 6


def test_minutes_budget_stops_early_and_saves(tmp_path):
    trainer = _regression_trainer(tmp_path, steps=10_000, save_every=10_000, minutes=1e-9)
    result = trainer.train()
    assert result.stopped_early and result.steps_done == 1
    assert (tmp_path / "checkpoint-1").exists()


def _train_rows(rows):
    return [{k: v for k, v in row.items() if k != "seconds"} for row in rows if row["split"] == "train"]


def test_resumed_run_logs_what_an_uninterrupted_run_logs(tmp_path):
    """log_every=4, checkpoint at step 6 (mid-window): the resumed row at step 8 still averages steps 5-8, and the
    last row (step 10) the two steps after step 8."""
    settings = {"steps": 10, "save_every": 3, "log_every": 4}
    whole = _regression_trainer(tmp_path / "whole", **settings).train()
    killed = _regression_trainer(tmp_path / "killed", **settings)
    while killed.step < 7:  # "killed" after step 7: the last checkpoint on disk is step 6's
        killed.run_step()
    resumed = _regression_trainer(tmp_path / "killed", **settings).train(resume=True)
    assert [row["step"] for row in _train_rows(whole.metrics)] == [4, 8, 10]
    assert _train_rows(resumed.metrics) == _train_rows(whole.metrics)
    assert _train_rows(run_files.read_metrics(tmp_path / "killed")) == _train_rows(whole.metrics)


def test_a_budget_stop_logs_its_last_partial_window(tmp_path):
    """Stopped by --minutes after one step with log_every=4: that step's loss is logged, as log_every=1 logs it."""
    budget = {"steps": 10_000, "save_every": 10_000, "minutes": 1e-9}
    stopped = _regression_trainer(tmp_path / "four", log_every=4, **budget).train()
    every_step = _regression_trainer(tmp_path / "one", log_every=1, **budget).train()
    assert stopped.steps_done == every_step.steps_done == 1
    assert _train_rows(stopped.metrics) == _train_rows(every_step.metrics) != []


def test_an_early_stop_logs_its_last_partial_window(tmp_path):
    """Early stopping at the step-2 evaluation with log_every=4: steps 1-2 are logged, once, before the stop."""
    trainer = _regression_trainer(tmp_path, steps=10, log_every=4)
    trainer.after_evaluation = lambda row: True
    result = trainer.train()
    assert result.stopped_early and [row["step"] for row in _train_rows(result.metrics)] == [2]


def test_resume_loads_through_the_loader_that_matches_the_saver(tmp_path):
    """A loop that saves its model its own way (here torch.save of the state dict) resumes through its own loader,
    and trainer_state.pt loads with weights_only=True (no pickled code)."""

    def save(m, path):
        path.mkdir(parents=True, exist_ok=True)
        torch.save(m.state_dict(), path / "weights.pt")

    def load(m, path):
        m.load_state_dict(torch.load(path / "weights.pt", weights_only=True))

    whole = _regression_trainer(tmp_path / "whole", save=save, load=load)
    whole.train()
    killed = _regression_trainer(tmp_path / "killed", save=save, load=load)
    while killed.step < 4:
        killed.run_step()
    resumed = _regression_trainer(tmp_path / "killed", save=save, load=load)
    resumed.train(resume=True)
    for a, b in zip(whole.model.state_dict().values(), resumed.model.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    state = torch.load(tmp_path / "killed" / "checkpoint-6" / "trainer_state.pt", weights_only=True)
    assert state["step"] == 6 and state["optimizer"]["state"]


def test_a_custom_saver_without_a_loader_cannot_resume(tmp_path):
    def save(m, path):
        path.mkdir(parents=True, exist_ok=True)
        torch.save(m.state_dict(), path / "weights.pt")

    _regression_trainer(tmp_path, save=save, load=None).train()
    with pytest.raises(ValueError, match="load_model"):
        _regression_trainer(tmp_path, save=save, load=None).resume()


def test_gradient_accumulation_matches_a_big_batch(tmp_path):
    """Two micro-batches of 8 give the gradient of one batch of 16 (no dropout, mean losses)."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    x, y = torch.randn(16, 3), torch.randn(16, 1)

    def run(batch_size, accum):
        m = torch.nn.Linear(3, 1)
        m.load_state_dict(model.state_dict())
        cfg = TrainConfig(steps=1, batch_size=batch_size, grad_accum=accum, lr=0.1, warmup_steps=0, weight_decay=0.0,
                          grad_clip=None, device="cpu")
        parts = x.split(batch_size), y.split(batch_size)
        t = TrainLoop(m, cfg, batch_for_step=lambda s, i: {"x": parts[0][i], "y": parts[1][i]},
                    compute_loss=lambda mm, b: (torch.nn.functional.mse_loss(mm(b["x"]), b["y"]), {}), progress=False)
        t.train()
        return m.weight.detach().clone()

    assert torch.allclose(run(16, 1), run(8, 2), atol=1e-6)


# ---- no waiting for the device inside a step -------------------------------------------------------------------

#: Tensor operations that make the host wait for a GPU: reading a value, or a shape that depends on values.
SYNCING = {"item", "__float__", "__int__", "__bool__", "__index__", "tolist", "nonzero", "argwhere", "cpu", "numpy",
           "masked_select", "unique", "equal", "allclose"}


class SyncCounter(torch.overrides.TorchFunctionMode):
    """Counts, on any device, the calls that would wait for a GPU (boolean-mask indexing included)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        bool_index = name in ("__getitem__", "__setitem__") and any(
            torch.is_tensor(a) and a.dtype is torch.bool for a in (args[1] if isinstance(args[1], tuple) else (args[1],)))
        if name in SYNCING or bool_index:
            self.calls.append(name)
        return func(*args, **(kwargs or {}))


@pytest.fixture
def syncs_per_step(monkeypatch):
    """Run every step's host-side batch preparation outside the counter, then count the step itself."""
    counted = []
    original = training.TrainLoop.run_step

    def run_step(self, batches=None):
        batches = self.next_batches() if batches is None else batches  # on the host by design
        with SyncCounter() as counter:
            original(self, batches)
        counted.append((self.step, counter.calls))

    monkeypatch.setattr(training.TrainLoop, "run_step", run_step)
    return counted


def test_counter_sees_the_waits_it_claims_to():
    x = torch.arange(6.0)
    with SyncCounter() as counter:
        float(x.sum()), x[x > 2], bool(x.all()), x.sum() * 2
    assert counter.calls == ["__float__", "__getitem__", "__bool__"]


def test_pretraining_steps_wait_for_the_device_only_when_logging(tiny_model, blocks, bert_tok, syncs_per_step):
    from mlm_course.pretraining import MaskSpec, pretrain

    config = TrainConfig(steps=6, batch_size=4, lr=1e-3, warmup_steps=2, log_every=3, eval_every=100, device="cpu",
                         precision="fp32")
    pretrain(tiny_model(), bert_tok, blocks, blocks, config, spec=MaskSpec(rate=0.3), progress=False)
    quiet = {step: calls for step, calls in syncs_per_step if step % 3}
    assert quiet == {1: [], 2: [], 4: [], 5: []}, "float(), .item() or a boolean selection inside the step"
    assert all(calls for step, calls in syncs_per_step if step % 3 == 0)  # logging reads the values: allowed


def test_fine_tuning_steps_with_padding_wait_only_when_logging(bert_tok, syncs_per_step):
    config = ft.FinetuneConfig(epochs=1, batch_size=16, lr=1e-3, patience=None, log_every=3, device="cpu",
                               precision="fp32")
    ft.fit(tiny_classifier(bert_tok), toy_sentences(bert_tok, 48), None, config, pad_token_id=0, progress=False,
           verbose=False)
    assert {step: calls for step, calls in syncs_per_step if step % 3} == {1: [], 2: []}


def test_lean_batch_drops_a_full_mask_and_turns_padding_into_the_sdpa_mask(bert_tok):
    model = tiny_classifier(bert_tok).eval()
    ids = torch.randint(1000, 2000, (3, 7), generator=torch.Generator().manual_seed(0))
    full = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    assert set(training.lean_batch(full)) == {"input_ids"}
    padded = {"input_ids": ids, "attention_mask": (torch.arange(7) < torch.tensor([[7], [4], [2]])).long()}
    lean = training.lean_batch(padded)
    assert lean["attention_mask"].shape == (3, 1, 1, 7) and lean["attention_mask"].dtype is torch.bool
    with torch.no_grad():
        torch.testing.assert_close(model(**lean).logits, model(**padded).logits)
        torch.testing.assert_close(model(**training.lean_batch(full)).logits, model(**full).logits)


def test_sparse_logits_by_host_side_positions_equal_boolean_selection(tiny_model, blocks, bert_tok):
    from mlm_course.objective import masked_lm_outputs, masked_positions
    from mlm_course.pretraining import MaskSpec, mask_blocks

    model = tiny_model().eval()
    batch = mask_blocks(blocks[:4], bert_tok, MaskSpec(rate=0.3), torch.Generator().manual_seed(0))
    with torch.no_grad():
        for sparse in (True, False):
            by_mask = masked_lm_outputs(model, batch, sparse=sparse)
            by_index = masked_lm_outputs(model, {**batch, "masked_positions": masked_positions(batch["labels"])},
                                         sparse=sparse)
            torch.testing.assert_close(by_index, by_mask)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_steps_never_synchronise_except_when_logging(tiny_model, blocks, bert_tok, monkeypatch):
    """On a GPU, torch's own sync detector: any synchronising call (non-blocking copies included) raises."""
    from mlm_course.pretraining import MaskSpec, pretrain

    original = training.TrainLoop.run_step

    def run_step(self, batches=None):
        batches = self.next_batches() if batches is None else batches
        logging = (self.step + 1) % self.config.log_every == 0 or self.step + 1 == self.config.steps
        torch.cuda.set_sync_debug_mode(0 if logging else "error")
        try:
            original(self, batches)
        finally:
            torch.cuda.set_sync_debug_mode(0)

    monkeypatch.setattr(training.TrainLoop, "run_step", run_step)
    for precision in ("bf16", "fp32"):
        config = TrainConfig(steps=6, batch_size=4, lr=1e-3, warmup_steps=2, log_every=3, eval_every=100, device="cuda",
                             precision=precision)
        pretrain(tiny_model(), bert_tok, blocks, blocks, config, spec=MaskSpec(rate=0.3), progress=False)


# ---- precision, seeds, schedule ------------------------------------------------------------------------------------


def test_bf16_pretraining_stays_within_005_nats_of_fp32(tiny_model, blocks, bert_tok):
    """bf16 autocast on the CPU (what auto picks on AVX512-BF16 / AMX machines) learns what fp32 learns."""
    from mlm_course.pretraining import MaskSpec, pretrain

    losses = {}
    for precision in ("fp32", "bf16"):
        config = TrainConfig(steps=40, batch_size=4, lr=3e-3, warmup_steps=5, eval_every=100, device="cpu", seed=0,
                             precision=precision)
        result = pretrain(tiny_model(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), bert_tok, blocks,
                          blocks, config, spec=MaskSpec(rate=0.3), progress=False)
        losses[precision] = [m for m in result.metrics if m["split"] == "eval"][-1]["loss"]
    assert losses["fp32"] < 9.5, "the fp32 run should have learnt something (a uniform guess is ln 30522 = 10.3)"
    assert abs(losses["bf16"] - losses["fp32"]) < 0.05, losses


def test_weights_stored_in_bf16_are_trained_in_fp32():
    model = torch.nn.Linear(4, 1).to(torch.bfloat16)
    loop = TrainLoop(model, TrainConfig(steps=1, batch_size=8, device="cpu", precision="fp32"),
                   batch_for_step=lambda s, i: {"x": torch.randn(8, 4)},
                   compute_loss=lambda m, b: (m(b["x"]).pow(2).mean(), {}), progress=False)
    loop.train()
    assert all(p.dtype is torch.float32 for p in loop.model.parameters())
    assert all(s["exp_avg"].dtype is torch.float32 for s in loop.optimizer.state.values())


def test_schedule_does_not_advance_on_a_step_the_loss_scaler_skipped():
    """fp16: an overflowing step is skipped by the scaler, and the learning-rate schedule must wait for it too.
    (accelerate refuses fp16 on a CPU, so the test hands the accelerator torch's CPU GradScaler.)"""
    from mlm_course.lab.precision import make_accelerator

    accelerator = make_accelerator("cpu", "fp32")
    accelerator.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    x = torch.randn(32, 4, generator=torch.Generator().manual_seed(0))
    config = TrainConfig(steps=4, batch_size=8, warmup_steps=4, lr=0.1, log_every=1, eval_every=100, grad_clip=None,
                         device="cpu", precision="fp32")

    def batch_for_step(step, slot):
        return {"x": x[8 * step: 8 * step + 8], "factor": torch.tensor(float("inf") if step == 1 else 1.0)}

    def compute_loss(m, batch):
        return m(batch["x"]).pow(2).mean() * batch["factor"], {}  # step 1 overflows

    loop = TrainLoop(torch.nn.Linear(4, 1), config, batch_for_step=batch_for_step, compute_loss=compute_loss,
                   progress=False, accelerator=accelerator)
    loop.train()
    lrs = [m["lr"] for m in loop.metrics if m["split"] == "train"]
    factor = training.linear_schedule(4, 4)
    assert lrs == pytest.approx([0.1 * factor(s) for s in (0, 1, 1, 2)])  # step 2 repeats step 1's rate
    assert loop.scheduler.last_epoch == 3


def test_each_process_draws_its_own_dropout():
    seeds = {training.dropout_seed(0, step=5, slot=slot) for slot in range(8)}
    assert len(seeds) == 8
    assert training.dropout_seed(0, 5, 0) == training.step_seed(0, 5, 1000)  # one process: the seeds it always had
