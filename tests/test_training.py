"""The shared training loop: schedule, weight-decay groups, checkpoints, exact resume, clear errors."""

import json

import pytest
import torch

from mlm_course import training
from mlm_course.training import TrainConfig, Trainer


def test_linear_schedule_warms_up_then_decays_to_zero():
    factor = training.linear_schedule(warmup_steps=4, total_steps=10)
    assert [factor(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert factor(4) == 1.0 and factor(7) == pytest.approx(0.5) and factor(10) == 0.0


def test_warmup_fraction_and_count():
    assert TrainConfig(steps=200, warmup=0.05).warmup_steps == 10
    assert TrainConfig(steps=200, warmup=30).warmup_steps == 30


@pytest.mark.parametrize("bad", [{"steps": 0}, {"lr": 0.0}, {"batch_size": 0}, {"grad_accum": 0}])
def test_invalid_config_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="invalid training settings"):
        TrainConfig(**bad)


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


def _regression_trainer(out_dir, steps=6, save_every=3, seed=0, **extra):
    """A small linear regression, enough to exercise every part of the loop."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.LayerNorm(8), torch.nn.Dropout(0.2), torch.nn.Linear(8, 1))
    x = torch.randn(64, 4, generator=torch.Generator().manual_seed(1))
    y = x.sum(-1, keepdim=True)
    config = TrainConfig(steps=steps, batch_size=8, lr=1e-2, warmup=2, save_every=save_every, eval_every=2,
                         log_every=1, seed=seed, device="cpu", **extra)
    pick = training.cycle_batches(64, 8, seed)

    def batch_for_step(step, micro):
        rows = pick(step, micro, config.grad_accum)
        return {"x": x[rows], "y": y[rows]}

    def compute_loss(m, batch):
        return torch.nn.functional.mse_loss(m(batch["x"]), batch["y"]), {}

    def evaluate(m):
        return {"mse": float(torch.nn.functional.mse_loss(m(x), y))}

    def save(m, path):
        path.mkdir(parents=True, exist_ok=True)
        from safetensors.torch import save_file

        save_file(m.state_dict(), path / "model.safetensors")

    return Trainer(model, config, batch_for_step=batch_for_step, compute_loss=compute_loss, evaluate=evaluate,
                   out_dir=out_dir, save_model=save, progress=False)


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
    rows_before = training.read_metrics(tmp_path)
    again = _regression_trainer(tmp_path)
    assert again.resume() and again.step == 6
    assert training.read_metrics(tmp_path) == rows_before


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


def test_gradient_accumulation_matches_a_big_batch(tmp_path):
    """Two micro-batches of 8 give the gradient of one batch of 16 (no dropout, mean losses)."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    x, y = torch.randn(16, 3), torch.randn(16, 1)

    def run(batch_size, accum):
        m = torch.nn.Linear(3, 1)
        m.load_state_dict(model.state_dict())
        cfg = TrainConfig(steps=1, batch_size=batch_size, grad_accum=accum, lr=0.1, warmup=0, weight_decay=0.0,
                          grad_clip=None, device="cpu")
        parts = x.split(batch_size), y.split(batch_size)
        t = Trainer(m, cfg, batch_for_step=lambda s, i: {"x": parts[0][i], "y": parts[1][i]},
                    compute_loss=lambda mm, b: (torch.nn.functional.mse_loss(mm(b["x"]), b["y"]), {}), progress=False)
        t.train()
        return m.weight.detach().clone()

    assert torch.allclose(run(16, 1), run(8, 2), atol=1e-6)


def test_unwritable_output_folder_is_a_clear_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(PermissionError, match="choose another --out"):
        training.check_output_dir(blocker / "run")


def test_write_json_atomic_leaves_no_temp_file(tmp_path):
    path = tmp_path / "x.json"
    training.write_json_atomic(path, {"a": 1})
    training.write_json_atomic(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_read_metrics_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="metrics.jsonl"):
        training.read_metrics(tmp_path)
