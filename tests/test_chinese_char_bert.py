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

    class Calls(list):
        pass

    calls = Calls()

    def fake_pretrain(model, tokenizer, train_blocks, eval_blocks, config, out_dir, progress, resume, word_starts):
        out_dir.mkdir(parents=True, exist_ok=resume)
        calls.append((model, config))
        words.append(word_starts)
        return _Result(config.steps)

    words = []
    calls.word_starts = words  # what each stage was given for whole-word masks

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


# ---- whole-word masking: the same recipe, its own folders, resumable -------------------------------------------------


def test_each_masking_has_its_own_run_folders():
    assert chinese_char_bert.stage_dir(1).name == "chinese-char-bert-stage1"
    assert chinese_char_bert.stage_dir(2, "whole_word").name == "chinese-char-bert-wwm-stage2"
    with pytest.raises(ValueError, match="use one of character, whole_word"):
        chinese_char_bert.stage_dir(1, "words")


def test_whole_word_stages_get_the_word_starts_and_a_killed_chain_resumes_from_finished_stages(monkeypatch, tmp_path):
    calls = _fake_stages(monkeypatch)
    data = (torch.zeros(10, 32, dtype=torch.long), torch.zeros(3, 32, dtype=torch.long))
    starts = torch.ones(10, 32, dtype=torch.bool)
    stages = ({"steps": 4}, {"steps": 6, "lr": 1e-3, "warmup_ratio": 0.05, "seed": 1})
    dirs = [tmp_path / "one", tmp_path / "two"]
    model, record = chinese_char_bert.train(stages, dirs, data, word_starts=starts, resume=True)
    assert len(calls) == 2 and all(given is starts for given in calls.word_starts)
    assert record["command"] == chinese_char_bert.WHOLE_WORD_COMMAND
    assert all((d / chinese_char_bert.STAGE_FILE).exists() and (d / "final" / "config.json").exists() for d in dirs)
    # the run is started again (killed after its last stage): nothing is trained twice, the record is the same
    (dirs[1] / chinese_char_bert.STAGE_FILE).unlink()
    again, second = chinese_char_bert.train(stages, dirs, data, word_starts=starts, resume=True)
    assert len(calls) == 3 and calls[-1][1].steps == 6  # only stage 2 ran again, from stage 1's saved weights
    assert calls[-1][0] is not model
    assert all(torch.equal(a, b) for a, b in zip(calls[-1][0].state_dict().values(), model.state_dict().values(),
                                                  strict=True))  # the fake trains nothing: stage 1's weights
    assert second["stages"][0] == json.loads(json.dumps(record["stages"][0]))
    assert second["steps"] == record["steps"]


def test_whole_word_results_only_needs_a_finished_run(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(chinese_char_bert, "RUNS", tmp_path)
    monkeypatch.setattr(chinese_char_bert, "write_whole_word_results", _never)
    with pytest.raises(SystemExit) as exit_info:
        chinese_char_bert.main(["--results-only", "--whole-word"])
    assert exit_info.value.code == 2 and "no finished whole-word run" in capsys.readouterr().err


def test_the_stored_whole_word_results_are_the_recipe_with_only_the_masks_changed():
    from scipy.stats import binomtest

    stored = json.loads(chinese_char_bert.WHOLE_WORD_RESULTS.read_text())
    shipped = json.loads((ROOT / "mlm_course" / "data" / "chinese-char-bert" / "results.json").read_text())
    assert stored["command"] == chinese_char_bert.WHOLE_WORD_COMMAND
    assert [(st["steps"], st["lr"], st["warmup_ratio"], st["seed"]) for st in stored["stages"]] == [
        (st["steps"], st["lr"], st["warmup_ratio"], st["seed"]) for st in shipped["stages"]]
    same = ("batch_size", "seq_len", "mask_rate", "mask_mix", "mask_scheme", "short_seq_prob", "betas", "weight_decay",
            "dropout", "precision", "sparse_logits", "max_grad_norm")
    assert {key: stored["settings"][key] for key in same} == {key: shipped["settings"][key] for key in same}
    assert stored["training_blocks"] == shipped["training_blocks"] and stored["machine"]["torch_threads"] == 1
    alone, words = stored["paired"]["character_alone"], stored["paired"]["word_whole"]
    assert alone["character"] == shipped["one_at_a_time"]["bert"] and alone["positions"] == 4076
    assert words["positions"] == 3283  # the characters of multi-character words that notebook 10 §9 scores
    for row in (alone, words):
        test = row["mcnemar"]
        assert test["n"] == row["positions"]
        assert test["only_a"] - test["only_b"] == row["character"]["top1_hits"] - row["whole_word"]["top1_hits"]
        assert test["p"] == pytest.approx(binomtest(test["only_a"], test["only_a"] + test["only_b"]).pvalue)
