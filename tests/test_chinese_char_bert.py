"""scripts/chinese_char_bert.py: a timing run of fewer than one step is refused, never trained; the stages of the
recipe run in order on one model with their settings; the joined curve and the shipped record of both stages."""

import json
import sys
from pathlib import Path

import pytest
import torch

from mlm_course.lab.pretrain_run import PretrainConfig

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import chinese_char_bert  # noqa: E402


def _never(*args, **kwargs):
    raise AssertionError("nothing may be trained or shipped")


@pytest.mark.parametrize("steps", ["0", "-5"])
def test_a_timing_run_of_fewer_than_one_step_is_refused_before_any_training(steps, monkeypatch, capsys):
    monkeypatch.setattr(chinese_char_bert, "train", _never)
    monkeypatch.setattr(chinese_char_bert, "train_and_ship", _never)
    with pytest.raises(SystemExit) as exit_info:
        chinese_char_bert.main(["--steps", steps])
    assert exit_info.value.code == 2
    assert f"--steps {steps}: a timing run needs at least 1 step" in capsys.readouterr().err


# ---- the two-stage recipe (a fake ``pretrain``: no training, the calls and records are what is checked) -------------


class _Result:
    def __init__(self, steps):
        self.steps = steps
        self.history = [{"split": "eval", "loss": 5.0 - steps / 1000, "perplexity": 1.0, "top1": 0.2, "top5": 0.3,
                         "tokens": 7, "step": steps, "seconds": 1.0}]


def _fake_stages(monkeypatch):
    """Patch the training and the bigram comparison; returns the list the fake ``pretrain`` appends (model, config) to."""
    calls = []

    def fake_pretrain(model, tokenizer, train_blocks, eval_blocks, config, out_dir, progress):
        out_dir.mkdir(parents=True)
        calls.append((model, config))
        return _Result(config.steps)

    monkeypatch.setattr(chinese_char_bert, "pretrain", fake_pretrain)
    monkeypatch.setattr(chinese_char_bert.chinese, "compare_with_bigram", lambda *args: {"positions": len(calls)})
    return calls


def test_train_runs_every_stage_in_order_on_the_same_model_with_its_overrides(monkeypatch, tmp_path):
    calls = _fake_stages(monkeypatch)
    data = (torch.zeros(10, 32, dtype=torch.long), torch.zeros(3, 32, dtype=torch.long))
    stages = ({"steps": 4}, {"steps": 6, "lr": 1e-3, "warmup_ratio": 0.05, "seed": 1})
    model, record = chinese_char_bert.train(stages, [tmp_path / "one", tmp_path / "two"], data)
    (first_model, first), (second_model, second) = calls
    assert first_model is second_model is model  # stage 2 continues from stage 1's weights
    assert (first.steps, first.lr, first.warmup_ratio, first.seed) == (4, 3e-3, 0.1, 0)
    assert (second.steps, second.lr, second.warmup_ratio, second.seed) == (6, 1e-3, 0.05, 1)
    assert second.batch_size == first.batch_size and second.short_seq_prob == first.short_seq_prob
    one, two = record["stages"]
    assert (one["steps"], one["lr"], two["steps"], two["lr"], two["seed"]) == (4, 3e-3, 6, 1e-3, 1)
    assert record["steps"] == 10 and record["tokens_seen"] == 10 * 64 * 32 == one["tokens_seen"] + two["tokens_seen"]
    assert record["cpu_seconds"] == pytest.approx(one["cpu_seconds"] + two["cpu_seconds"])
    assert two["heldout"]["loss"] == pytest.approx(5.0 - 0.006) and two["one_at_a_time"] == {"positions": 2}
    assert record["settings"]["lr"] == 3e-3 and record["training_blocks"] == 10 and record["heldout_blocks"] == 3


def test_the_joined_curve_numbers_the_stages_and_continues_the_steps(tmp_path):
    for name, steps in (("one", (50, 100)), ("two", (50, 100, 150))):
        (tmp_path / name).mkdir()
        rows = [{"step": step, "split": "train", "loss": 1.0, "seconds": 9.0} for step in steps]
        (tmp_path / name / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    curve = chinese_char_bert.joined_curve([tmp_path / "one", tmp_path / "two"])
    assert [(row["step"], row["stage"]) for row in curve] == [(50, 1), (100, 1), (150, 2), (200, 2), (250, 2)]
    assert not any("seconds" in row for row in curve)


def test_the_shipped_record_holds_both_stages_and_their_sums():
    record = json.loads((ROOT / "mlm_course" / "data" / "chinese-char-bert" / "results.json").read_text())
    stages = record["stages"]
    assert [(st["steps"], st["lr"], st["warmup_ratio"], st["seed"]) for st in stages] == [
        (config.steps, config.lr, config.warmup_ratio, config.seed)
        for config in (PretrainConfig(**{**chinese_char_bert.SETTINGS, **o}) for o in chinese_char_bert.STAGES)]
    for key in ("steps", "tokens_seen", "cpu_seconds"):
        assert record[key] == pytest.approx(sum(st[key] for st in stages))
    assert stages[-1]["heldout"] == pytest.approx(record["heldout"])
    assert stages[-1]["one_at_a_time"] == record["one_at_a_time"]
    curve = [json.loads(line) for line in (ROOT / "mlm_course" / "data" / "chinese-char-bert" / "metrics.jsonl")
             .read_text().splitlines()]
    steps = [row["step"] for row in curve if row["split"] == "train"]
    assert steps == sorted(steps) and steps[-1] == record["steps"]
    assert {row["stage"] for row in curve} == set(range(1, len(stages) + 1))
