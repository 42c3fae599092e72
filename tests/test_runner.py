"""The runner: it calls the lessons' training step, accumulates, logs, evaluates, checkpoints atomically, resumes
exactly, never waits for the device inside a step, and refuses bad settings clearly."""

import json

import pytest
import torch
from accelerate.state import AcceleratorState

from mlm_course import finetune as ft
from mlm_course.bert import BertClassifier
from mlm_course.lab import run_files, runner
from mlm_course.lab.batch_order import cycle_batches
from mlm_course.lab.finetune_run import FinetuneConfig, fit
from mlm_course.lab.pretrain_run import PretrainConfig, pretrain
from mlm_course.lab.runner import LoopConfig, TrainLoop
from mlm_course.masking import MaskSpec
from mlm_course.steps import linear_schedule

TINY_CLASSIFIER = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def blocks(bert_tok, sample_text):
    from mlm_course.pretraining import pack_blocks

    return pack_blocks([sample_text, sample_text.upper()], bert_tok, seq_len=32)


def tiny_classifier(tok):
    from transformers import BertConfig

    torch.manual_seed(0)
    return BertClassifier(BertConfig(vocab_size=len(tok), max_position_embeddings=32, pad_token_id=tok.pad_token_id,
                                     **TINY_CLASSIFIER), num_labels=2)


def toy_sentences(tok, n: int) -> ft.Encoded:
    """Sentences of 1–6 words: batches of them always carry padding."""
    g = torch.Generator().manual_seed(1)
    words = ["good", "great", "bad", "dull", "film", "plot"]
    texts = [" ".join(words[int(i)] for i in torch.randint(6, (int(torch.randint(1, 7, (1,), generator=g)),),
                                                            generator=g)) for _ in range(n)]
    return ft.encode(tok, texts, [len(t) % 2 for t in texts], max_length=16)


def test_warmup_ratio_or_steps():
    assert LoopConfig(steps=200, warmup_ratio=0.05).warmup_for(200) == 10
    assert LoopConfig(steps=200, warmup_steps=30).warmup_for(200) == 30
    assert LoopConfig(steps=200, warmup_ratio=0.05, warmup_steps=0).warmup_for(200) == 0  # a count wins


def test_both_commands_hand_the_runner_their_shared_settings():
    """Each command's configuration gives its loop every shared field, its defaults being its own (fine-tuning:
    the runner's LoopConfig; pretraining: the lessons' TrainConfig)."""
    tuned = FinetuneConfig(lr=3e-5, warmup_steps=7, grad_accum=2, precision="fp32", seed=4, log_every=3)
    loop = tuned.loop_config(batches_per_epoch=10, slots=2)
    for name in ("lr", "warmup_steps", "grad_accum", "precision", "seed", "log_every", "betas", "eps"):
        assert getattr(loop, name) == getattr(tuned, name), name
    pre = PretrainConfig(lr=2e-3, max_grad_norm=0.5, steps=40, eval_every=7, warmup_steps=3).train_config()
    assert (pre.lr, pre.max_grad_norm, pre.steps, pre.eval_every, pre.warmup_steps) == (2e-3, 0.5, 40, 7, 3)
    assert pre.keep_best is None  # pretraining keeps its last weights
    assert (FinetuneConfig().betas, PretrainConfig().betas) == ((0.9, 0.999), (0.9, 0.98))  # BERT vs RoBERTa betas


@pytest.mark.parametrize("bad", [{"steps": 0}, {"lr": 0.0}, {"batch_size": 0}, {"grad_accum": 0}, {"minutes": 0},
                                 {"steps": 0, "warmup_ratio": -0.1}, {"warmup_ratio": 2.0}, {"warmup_steps": -1},
                                 {"warmup_steps": 2.5}, {"precision": "fp64"}, {"max_grad_norm": 0.0},
                                 {"seed": 2**16}])
def test_invalid_config_is_a_clear_error(bad):
    with pytest.raises(runner.InvalidSettings, match="invalid training settings") as error:
        LoopConfig(**bad)
    assert set(error.value.problems) == set(bad)  # each bad field named (the CLI shows it as its option)


def test_cycle_batches_visits_every_example_once_per_epoch():
    pick = cycle_batches(10, 5, seed=3)
    first_epoch = torch.cat([pick(0), pick(1)])
    assert sorted(first_epoch.tolist()) == list(range(10))
    assert not torch.equal(torch.cat([pick(2), pick(3)]), first_epoch)  # a new permutation next epoch
    assert torch.equal(pick(1), cycle_batches(10, 5, seed=3)(1))
    assert sorted(torch.cat([pick(0, 0, 2), pick(0, 1, 2)]).tolist()) == list(range(10))  # two slots, one step


def test_cycle_batches_needs_enough_examples():
    with pytest.raises(ValueError, match="smaller batch"):
        cycle_batches(3, 8, seed=0)


def _save_safetensors(m, path):
    from safetensors.torch import save_file

    path.mkdir(parents=True, exist_ok=True)
    save_file(m.state_dict(), path / "model.safetensors")


def _load_safetensors(m, path):
    from safetensors.torch import load_file

    m.load_state_dict(load_file(path / "model.safetensors"))


def _regression_trainer(out_dir, steps=6, save_every=3, seed=0, log_every=1, save=_save_safetensors,
                        load=_load_safetensors, **extra):
    """A small linear regression, enough to exercise every part of the loop."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.LayerNorm(8), torch.nn.Dropout(0.2), torch.nn.Linear(8, 1))
    x = torch.randn(64, 4, generator=torch.Generator().manual_seed(1))
    y = x.sum(-1, keepdim=True)
    config = LoopConfig(steps=steps, batch_size=8, lr=1e-2, warmup_steps=2, save_every=save_every, eval_every=2,
                        log_every=log_every, seed=seed, device="cpu", **extra)
    pick = cycle_batches(64, 8, seed)

    def batch_for_step(step, slot):
        rows = pick(step, slot, config.grad_accum)
        return {"input_ids": rows, "x": x[rows], "y": y[rows]}  # input_ids: what the runner counts as tokens

    def loss_fn(m, batch):
        return torch.nn.functional.mse_loss(m(batch["x"]), batch["y"])

    def evaluate(m):
        return {"mse": float(torch.nn.functional.mse_loss(m(x), y))}

    return TrainLoop(model, config, batch_for_step=batch_for_step, loss_fn=loss_fn, evaluate=evaluate,
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
    while killed.step < 4:  # "killed" after step 4: the last checkpoint on disk is step 3's
        killed.run_step()
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
    assert (tmp_path / runner.CHECKPOINT_POINTER).read_text() == "checkpoint-6"
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


def test_the_runner_calls_the_lessons_step_once_per_step(tmp_path, monkeypatch):
    calls = []
    real = runner.training_step
    monkeypatch.setattr(runner, "training_step", lambda *a, **k: calls.append(len(a[1])) or real(*a, **k))
    _regression_trainer(tmp_path, steps=5, grad_accum=3).train()
    assert calls == [3] * 5  # every step, with its three micro-batches


def test_gradient_accumulation_matches_a_big_batch():
    """Two micro-batches of 8 give the update of one batch of 16 (no dropout, mean losses), through the runner."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    x, y = torch.randn(16, 3), torch.randn(16, 1)

    def run(batch_size, accum):
        m = torch.nn.Linear(3, 1)
        m.load_state_dict(model.state_dict())
        cfg = LoopConfig(steps=1, batch_size=batch_size, grad_accum=accum, lr=0.1, warmup_steps=0, weight_decay=0.0,
                         max_grad_norm=None, device="cpu")
        parts = x.split(batch_size), y.split(batch_size)
        TrainLoop(m, cfg, batch_for_step=lambda s, i: {"input_ids": x[:1], "x": parts[0][i], "y": parts[1][i]},
                  loss_fn=lambda mm, b: torch.nn.functional.mse_loss(mm(b["x"]), b["y"]), progress=False).train()
        return m.weight.detach().clone()

    torch.testing.assert_close(run(8, 2), run(16, 1), atol=1e-6, rtol=0)


def test_prefetching_trains_on_exactly_the_same_batches(tmp_path):
    """Building the next step's batches in a background thread changes nothing: they depend on the step only."""
    weights = {}
    for prefetch in (False, True):
        loop = _regression_trainer(tmp_path / str(prefetch), steps=8, prefetch=prefetch)
        loop.train()
        weights[prefetch] = [w.clone() for w in loop.model.state_dict().values()]
        assert loop.tokens == 8 * 8  # 8 steps of 8 rows
    for a, b in zip(weights[False], weights[True], strict=True):
        assert torch.equal(a, b)


# ---- no waiting for the device inside a step -------------------------------------------------------------------

#: Tensor operations that make the host wait for a GPU: reading a value, or a shape that depends on values.
SYNCING = {"item", "__float__", "__int__", "__bool__", "__index__", "tolist", "nonzero", "argwhere", "cpu", "numpy",
           "masked_select", "unique", "equal", "allclose"}


class SyncCounter(torch.overrides.TorchFunctionMode):
    """Counts, on any device, the calls that would wait for a GPU (boolean-mask indexing included)."""

    def __init__(self):
        super().__init__()
        self.calls, self.paused = [], False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if self.paused:
            return func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        bool_index = name in ("__getitem__", "__setitem__") and any(
            torch.is_tensor(a) and a.dtype is torch.bool for a in (args[1] if isinstance(args[1], tuple) else (args[1],)))
        if name in SYNCING or bool_index:
            self.calls.append(name)
        return func(*args, **(kwargs or {}))


@pytest.fixture
def syncs_per_step(monkeypatch):
    """Build every step's batches on the host outside the counter (that is the prefetcher's job), then count the
    step itself: what runs between the batches' arrival and the next step."""
    counted, counter = [], SyncCounter()
    original_run_step, original_host = runner.TrainLoop.run_step, runner.TrainLoop._host_batches

    def host_batches(self, step):
        counter.paused = True
        try:
            return original_host(self, step)
        finally:
            counter.paused = False

    def run_step(self):
        counter.calls = []
        with counter:
            original_run_step(self)
        counted.append((self.step, counter.calls))

    monkeypatch.setattr(runner.TrainLoop, "_host_batches", host_batches)
    monkeypatch.setattr(runner.TrainLoop, "run_step", run_step)
    return counted


def test_counter_sees_the_waits_it_claims_to():
    x = torch.arange(6.0)
    with SyncCounter() as counter:
        float(x.sum()), x[x > 2], bool(x.all()), x.sum() * 2
    assert counter.calls == ["__float__", "__getitem__", "__bool__"]


def test_fine_tuning_steps_with_padding_wait_only_when_logging(bert_tok, syncs_per_step):
    config = FinetuneConfig(epochs=1, batch_size=16, lr=1e-3, patience=None, log_every=3, device="cpu",
                            precision="fp32")
    fit(tiny_classifier(bert_tok), toy_sentences(bert_tok, 48), None, config, pad_token_id=0, progress=False,
        verbose=False)
    assert {step: calls for step, calls in syncs_per_step if step % 3} == {1: [], 2: []}


def test_compiled_shapes_padded_positions_give_the_same_loss(tiny_model, blocks, bert_tok):
    """With torch.compile the masked positions are padded to a multiple of 64 with an ignored position: the loss
    is the same, the count of shapes small."""
    from mlm_course.lab.pretrain_run import POSITION_BUCKET, pad_positions
    from mlm_course.objective import masked_lm_loss
    from mlm_course.pretraining import mask_blocks

    model = tiny_model().eval()
    batch = mask_blocks(blocks[:4], bert_tok, MaskSpec(mask_rate=0.3), torch.Generator().manual_seed(0))
    padded = pad_positions(batch, POSITION_BUCKET)
    assert len(padded["masked_positions"]) % POSITION_BUCKET == 0 < len(batch["masked_positions"])
    with torch.no_grad():
        torch.testing.assert_close(masked_lm_loss(model, padded), masked_lm_loss(model, batch))
        full = {k: v for k, v in batch.items() if k != "masked_positions"}
        torch.testing.assert_close(masked_lm_loss(model, full), masked_lm_loss(model, batch))


# ---- precision, seeds, schedule ------------------------------------------------------------------------------------


def test_bf16_pretraining_stays_within_005_nats_of_fp32(tiny_model, blocks, bert_tok):
    """bf16 autocast on the CPU (what auto picks where bf16 measures faster) learns what fp32 learns."""
    losses = {}
    for precision in ("fp32", "bf16"):
        config = PretrainConfig(steps=40, batch_size=4, lr=3e-3, warmup_steps=5, eval_every=100, device="cpu", seed=0,
                                precision=precision, mask_rate=0.3, dropout=0.0)
        result = pretrain(tiny_model(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), bert_tok, blocks,
                          blocks, config, progress=False)
        losses[precision] = [m for m in result.history if m["split"] == "eval"][-1]["loss"]
        AcceleratorState._reset_state(True)  # accelerate holds one precision per process (see conftest.py)
    assert losses["fp32"] < 9.5, "the fp32 run should have learnt something (a uniform guess is ln 30522 = 10.3)"
    assert abs(losses["bf16"] - losses["fp32"]) < 0.05, losses


def test_weights_stored_in_bf16_are_trained_in_fp32():
    model = torch.nn.Linear(4, 1).to(torch.bfloat16)
    loop = TrainLoop(model, LoopConfig(steps=1, batch_size=8, device="cpu", precision="fp32"),
                     batch_for_step=lambda s, i: {"input_ids": torch.zeros(8, 1), "x": torch.randn(8, 4)},
                     loss_fn=lambda m, b: m(b["x"]).pow(2).mean(), progress=False)
    loop.train()
    assert all(p.dtype is torch.float32 for p in loop.model.parameters())
    assert all(s["exp_avg"].dtype is torch.float32 for s in loop.scheduler.optimizer.state.values())


def test_fp16_skipped_steps_are_counted_and_the_schedule_waits_for_them():
    """fp16: a step whose gradients overflow is skipped by the loss scaler; the runner sees it as a non-finite
    gradient norm (no wait for the device), counts it at the next logging step, and the schedule then runs one
    step behind. (fp16 autocast needs a GPU: the test hands the CPU loop torch's CPU GradScaler.)"""
    x = torch.randn(32, 4, generator=torch.Generator().manual_seed(0))
    config = LoopConfig(steps=4, batch_size=8, warmup_steps=4, lr=0.1, log_every=1, eval_every=100,
                        max_grad_norm=None, device="cpu", precision="fp32")

    def batch_for_step(step, slot):
        return {"input_ids": x[:1], "x": x[8 * step: 8 * step + 8],
                "factor": torch.tensor(float("inf") if step == 1 else 1.0)}

    loop = TrainLoop(torch.nn.Linear(4, 1), config, batch_for_step=batch_for_step,
                     loss_fn=lambda m, b: m(b["x"]).pow(2).mean() * b["factor"], progress=False)  # step 1 overflows
    loop.hardware.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    loop.max_grad_norm = float("inf")
    before = loop.model.weight.detach().clone()
    loop.run_step()
    moved = loop.model.weight.detach().clone()
    loop.run_step()  # the overflow: the weights stay
    assert torch.equal(loop.model.weight, moved) and loop.hardware.scaler.get_scale() == 2.0**7
    assert not torch.equal(moved, before)
    loop.train()
    rows = [m for m in loop.metrics if m["split"] == "train"]
    factor = linear_schedule(4, 4)
    assert [row["skipped_steps"] for row in rows] == [0, 1, 0, 0] and loop.skipped == 1
    assert [row["lr"] for row in rows] == pytest.approx([0.1 * factor(s) for s in (0, 1, 1, 2)])


def test_each_process_draws_its_own_dropout():
    from mlm_course.lab.hardware import Hardware

    class Two:
        count, index = 2, 1

    hardware = Hardware(torch.device("cpu"), None, Two(), seed=0, grad_accum=3)
    assert [hardware.slot(i) for i in range(3)] == [3, 4, 5]  # process 1's micro-batches follow process 0's


def test_compiled_pretraining_sees_one_shape_of_masked_positions(tiny_model, blocks, bert_tok, monkeypatch):
    """torch.compile with static shapes (dynamic=False): the masked positions are padded to a multiple of 64, so
    every step has the same shapes and the model is traced once, where the raw counts (one per batch) would retrace
    it again and again. (The eager backend: what is counted is tracing, not code generation.)"""
    import torch._dynamo

    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model, **kw: real(model, **{**kw, "backend": "eager"}))
    graphs = {}
    for padded in (True, False):
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        config = PretrainConfig(steps=6, batch_size=4, lr=1e-3, warmup_steps=2, eval_every=100, device="cpu",
                                precision="fp32", mask_rate=0.3, compile=True)
        if not padded:  # the same compiled run without the padding of the positions
            monkeypatch.setattr("mlm_course.lab.pretrain_run.POSITION_BUCKET", 1)
        pretrain(tiny_model(), bert_tok, blocks, blocks, config, progress=False)
        graphs[padded] = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    torch._dynamo.reset()
    assert graphs[True] == 1 < graphs[False]


def test_compiled_fine_tuning_pads_batches_to_one_shape(bert_tok, monkeypatch):
    """Fine-tuning batches of 1-6 words, the last batch of an epoch short: with compile every batch is padded to a
    multiple of 32 tokens and to the full batch size (extra rows labelled -100), so one trace serves every step."""
    import torch._dynamo

    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model, **kw: real(model, **{**kw, "backend": "eager"}))
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    config = FinetuneConfig(epochs=1, batch_size=16, lr=1e-3, patience=None, device="cpu", precision="fp32",
                            compile=True)
    fit(tiny_classifier(bert_tok), toy_sentences(bert_tok, 40), None, config, pad_token_id=0, progress=False,
        verbose=False)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1
    torch._dynamo.reset()
