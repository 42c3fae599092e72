"""The command line: informative help, a tiny end-to-end pretraining run with resume, fill-mask, clear errors."""

import json

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from mlm_course.lab import cli, pretrain_run
from mlm_course.lab.pretrain_run import PretrainConfig


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert all(command in out for command in ("pretrain", "fill-mask", "finetune", "data"))


def test_data_counts_the_shipped_splits(capsys):
    """The sentiment counts the fine-tuning help quotes (8,455 / 1,056 / 1,057) and the BERT vocabulary's size."""
    assert cli.main(["data"]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert {split: c["sentences"] for split, c in counts["sentiment"].items()} == {
        "train": 8455, "dev": 1056, "test": 1057}
    assert all(c["positive"] + c["negative"] == c["sentences"] for c in counts["sentiment"].values())
    assert counts["vocab_size"] == 30522


def test_pretrain_help_explains_the_options(capsys):
    with pytest.raises(SystemExit):
        cli.main(["pretrain", "--help"])
    out = capsys.readouterr().out
    for option in ("--size", "--minutes", "--steps", "--mask-rate", "--mask-mix", "--resume", "--lr"):
        assert option in out


def test_bad_mask_mix_is_refused(capsys):
    with pytest.raises(SystemExit):
        cli.main(["pretrain", "--out", "x", "--mask-mix", "0.8,0.2"])
    assert "--mask-mix wants 3 numbers" in capsys.readouterr().err


@pytest.mark.parametrize(("option", "value"), [
    ("--steps", "0"), ("--mask-rate", "1.5"), ("--mask-rate", "0"), ("--mask-mix", "0.5,0.5,0.5"),
    ("--short-seq-prob", "2"), ("--dropout", "1"), ("--lr", "0"), ("--batch-size", "0"), ("--seq-len", "2"),
    ("--max-chars", "0"), ("--minutes", "0"), ("--warmup-ratio", "1.5"), ("--warmup-steps", "-1"),
    ("--mask-rate", "1"), ("--device", "tpu"), ("--device", "cuda:x"), ("--betas", "2,3"), ("--betas", "0.9,1"),
    ("--betas", "0.9,-0.1"), ("--eps", "-1"), ("--eps", "0"), ("--weight-decay", "-1"),
])
def test_a_bad_option_is_refused_by_name_before_anything_is_written(tmp_path, capsys, option, value):
    """Each bad value is refused by the settings' own checks with the option's name, before plan.json or anything
    else is written (none trains on a default instead)."""
    out = tmp_path / "run"
    budget = [] if option == "--minutes" else ["--steps", "2"]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["pretrain", "--size", "tiny", "--out", str(out), *budget, "--max-chars", "20000", option, value,
                  "--no-progress"])
    assert exit_info.value.code == 2
    assert f"error: {option} " in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(("option", "value"), [("--epochs", "0"), ("--warmup-ratio", "-0.1"), ("--lr", "0"),
                                                ("--patience", "0"), ("--precision", "fp64"), ("--eps", "-1"),
                                                ("--betas", "0.9,1.5"), ("--weight-decay", "-0.01"),
                                                ("--device", "tpu")])
def test_a_bad_finetune_option_is_refused_by_name_before_anything_is_written(tmp_path, capsys, option, value):
    """FinetuneConfig's checks refuse a bad value with the option's name, before the output folder exists."""
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["finetune", "--model", "random:tiny", "--out", str(out), option, value, "--no-progress"])
    assert exit_info.value.code == 2
    assert f"{option} " in capsys.readouterr().err
    assert not out.exists()


def test_the_messages_say_what_to_change(tmp_path, capsys):
    """What the refusals of the device, the AdamW settings and the mask rate say, word for word."""
    expected = {
        ("--device", "tpu"): "--device must be cuda, cuda:N, mps or cpu (or unset: the best available), not 'tpu'",
        ("--betas", "2,3"): "--betas must be two numbers in [0, 1), beta1,beta2 (e.g. 0.9,0.98), not (2.0, 3.0)",
        ("--eps", "-1"): "--eps must be > 0 (AdamW divides by √v + eps), not -1.0",
        ("--weight-decay", "-1"): "--weight-decay must be ≥ 0 (0: no weight decay), not -1.0",
        ("--mask-rate", "1"): "--mask-rate must be in (0, 1): a share of the tokens below 1, not 1.0",
    }
    for (option, value), message in expected.items():
        with pytest.raises(SystemExit):
            cli.main(["pretrain", "--size", "tiny", "--out", str(tmp_path / "run"), option, value])
        assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_cuda_device_without_a_gpu_is_refused_before_anything_is_written(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit):
        cli.main(["pretrain", "--size", "tiny", "--out", str(tmp_path / "run"), "--device", "cuda"])
    assert "--device is 'cuda' but no CUDA GPU is visible: use cpu or leave it unset" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_fill_mask_refuses_a_top_k_below_one_by_its_option(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["fill-mask", "course", "The [MASK] sat.", "--top-k", "0"])
    assert stop.value.code == 2
    assert "argument --top-k: must be a whole number ≥ 1, not '0'" in capsys.readouterr().err


def test_finetune_names_the_model_option_and_the_hub_flag(tmp_path, capsys, monkeypatch):
    from mlm_course import models

    monkeypatch.delenv(models.HUB_ENV_VAR, raising=False)
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as stop:
        cli.main(["finetune", "--model", "nosuch", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert "--model 'nosuch' is neither 'course', 'minilm', 'random:SIZE' nor a local folder" in err
    assert "add --allow-hub" in err and "allow_hub=True" not in err
    assert not out.exists()


def test_warmup_is_a_ratio_or_a_count_and_the_count_wins(capsys):
    """One warm-up: --warmup-steps when given (its help says it wins), else --warmup-ratio of the run's steps."""
    parser = cli.build_parser()
    both = cli.config_from(parser.parse_args(["pretrain", "--out", "x", "--warmup-ratio", "0.1", "--warmup-steps", "5"]),
                           PretrainConfig)
    ratio = cli.config_from(parser.parse_args(["pretrain", "--out", "x", "--warmup-ratio", "0.1"]), PretrainConfig)
    assert both.train_config().warmup() == 5 and ratio.train_config().warmup() == 1400  # of the 14,000 steps
    with pytest.raises(SystemExit):
        cli.main(["pretrain", "--help"])
    assert "wins over --warmup-ratio" in " ".join(capsys.readouterr().out.split())


def test_size_and_a_model_to_start_from_are_refused_together(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli.main(["pretrain", "--size", "tiny", "--init-from", "course", "--out", str(tmp_path / "run")])
    assert "--size is the size of the --init-from model" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_too_little_text_for_a_batch_is_refused_before_anything_is_written(tmp_path, capsys):
    assert cli.main(["pretrain", "--size", "tiny", "--out", str(tmp_path / "run"), "--steps", "1", "--seq-len", "32",
                     "--max-chars", "2000", "--batch-size", "512", "--no-progress"]) == 2
    assert "smaller batch" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def _readme_commands():
    import shlex
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    lines = [line for path in (root / "README.md", root / "mlm_course" / "data" / "course-bert" / "README.md")
             for line in path.read_text().replace("\\\n", " ").splitlines()  # continued lines joined
             if line.startswith("mlm-course pretrain ")]
    return [shlex.split(line.split("  #")[0])[1:] for line in lines]


def test_the_readme_command_lines_parse_and_pass_every_check():
    commands = _readme_commands()
    assert len(commands) >= 6  # README's three and the shipped checkpoint's three stages
    for argv in commands:
        args = cli.build_parser().parse_args(argv)
        config = cli.config_from(args, args.config_class)
        assert config.steps >= 1 and config.seq_len == 128


def _pretrain(out, *extra):
    return cli.main(["pretrain", "--size", "tiny", "--out", str(out), "--steps", "4", "--batch-size", "4",
                     "--seq-len", "32", "--max-chars", "20000", "--eval-every", "2", "--save-every", "2",
                     "--no-progress", *extra])


def test_tiny_pretraining_run_then_fill_mask_and_resume(tmp_path, capsys):
    assert _pretrain(tmp_path) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["steps"] == 4 and results["tokens_seen"] == 4 * 4 * 32
    assert results["heldout"]["tokens"] == results["unigram_baseline"]["tokens"] > 0
    assert (tmp_path / "model.safetensors").exists() and (tmp_path / "tokenizer.json").exists()
    capsys.readouterr()
    assert cli.main(["fill-mask", str(tmp_path), "she opened the [MASK] .", "--top-k", "3"]) == 0
    assert capsys.readouterr().out.startswith("[MASK] #1: ")
    assert _pretrain(tmp_path, "--resume") == 0  # already finished: resumes at step 4, trains nothing more
    assert json.loads((tmp_path / "results.json").read_text())["steps"] == 4
    capsys.readouterr()
    assert _pretrain(tmp_path, "--resume", "--size", "small") == 2  # the last --size wins: another architecture
    assert (f"the checkpoint in {tmp_path / 'checkpoint-4'} is tiny (hidden 128, 2 layers, vocabulary 8,192) but "
            "this run builds small (hidden 256, 4 layers, vocabulary 8,192): resume with --size tiny or start a new "
            "--out") in capsys.readouterr().err


def test_unwritable_output_is_a_clear_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert _pretrain(blocker / "run") == 2
    assert "choose another --out" in capsys.readouterr().err


def test_fill_mask_on_an_unknown_model_says_what_to_do(capsys, monkeypatch):
    monkeypatch.delenv("MLM_COURSE_ALLOW_HUB", raising=False)
    with pytest.raises(SystemExit) as stop:
        cli.main(["fill-mask", "no-such-model", "a [MASK]"])
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert "MODEL 'no-such-model' is neither 'course', 'minilm' nor a local folder" in err
    assert "add --allow-hub" in err and "allow_hub=True" not in err


TINY_RUN = ["pretrain", "--size", "tiny", "--batch-size", "4", "--seq-len", "32", "--max-chars", "20000",
            "--eval-every", "1000", "--no-progress"]


def test_calibration_plans_the_steps_that_fit_the_budget(monkeypatch, tiny_model, bert_tok):
    """A fake clock where every probe step takes 0.25 s: 1 minute is 240 steps, less the 5 % margin = 228;
    the probe trains a copy (the caller's weights do not move): 8 warm-up steps, then 20 timed ones."""
    clock, probes = [0.0], []

    def fake_pretrain(model, tokenizer, train_blocks, eval_blocks, config, **options):
        probes.append((model, config.steps))
        clock[0] += 0.25 * config.steps

    monkeypatch.setattr(pretrain_run, "pretrain", fake_pretrain)
    monkeypatch.setattr("time.perf_counter", lambda: clock[0])
    model = tiny_model()
    config = PretrainConfig(steps=1, batch_size=4, minutes=1.0, device="cpu")
    blocks = torch.zeros(8, 32, dtype=torch.long)
    assert pretrain_run.calibrate_steps(model, bert_tok, blocks, config) == 228
    assert [steps for _, steps in probes] == [8, 20] and all(m is not model for m, _ in probes)


def test_fit_schedule_trains_the_planned_steps(tmp_path, monkeypatch):
    """--minutes with --fit-schedule writes the calibrated plan and trains it (the plan, not the clock, ends it)."""
    monkeypatch.setattr(pretrain_run, "calibrate_steps", lambda *args, **kwargs: 5)
    assert cli.main([*TINY_RUN, "--out", str(tmp_path / "roomy"), "--minutes", "30", "--fit-schedule"]) == 0
    assert json.loads((tmp_path / "roomy" / "plan.json").read_text())["steps"] == 5
    assert json.loads((tmp_path / "roomy" / "results.json").read_text())["steps"] == 5


def test_minutes_stop_the_run_part_way_down_the_schedule_of_steps(tmp_path):
    """The default recipe: --steps sets the schedule and --minutes stops the run; a budget too short for one logged
    step stops at the first one (--log-every 2), its rate still near the peak. --minutes inf: no limit."""
    out = tmp_path / "lunch"
    assert cli.main([*TINY_RUN, "--out", str(out), "--minutes", "1e-9", "--log-every", "2", "--warmup-steps", "0"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["steps"] == 2 and results["settings"]["steps"] == 14_000 and results["heldout"]["step"] == 2
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["lr"] for row in rows if row["split"] == "train"] == [pytest.approx(3e-3 * (14_000 - 1) / 14_000)]
    unlimited = cli.config_from(cli.build_parser().parse_args(["pretrain", "--out", "x", "--minutes", "inf"]),
                                PretrainConfig)
    assert unlimited.minutes is None and PretrainConfig().minutes == 30.0


def test_fit_schedule_needs_minutes(capsys):
    with pytest.raises(SystemExit):
        cli.main(["pretrain", "--out", "x", "--minutes", "inf", "--fit-schedule"])
    assert "--fit-schedule needs --minutes" in capsys.readouterr().err


def test_init_from_continues_a_saved_model(tmp_path):
    """--init-from starts from saved weights (continued pretraining): the model it loads is the one saved."""
    first, second = tmp_path / "first", tmp_path / "second"
    assert _pretrain(first) == 0
    saved = BertForMaskedLM.from_pretrained(first)
    assert cli.main(["pretrain", "--init-from", str(first), "--out", str(second), "--steps", "1", "--batch-size", "4",
                     "--seq-len", "32", "--max-chars", "20000", "--lr", "1e-12", "--warmup-steps", "0",
                     "--no-progress"]) == 0
    results = json.loads((second / "results.json").read_text())
    assert results["config"] == "tiny" and results["settings"]["init_from"] == str(first)
    continued = BertForMaskedLM.from_pretrained(second)
    for (name, before), after in zip(saved.state_dict().items(), continued.state_dict().values(), strict=True):
        assert torch.allclose(before, after, atol=1e-6), name  # one step at lr 1e-12 changes nothing visible


def test_init_from_a_model_of_another_vocabulary_is_refused(tmp_path, capsys):
    from mlm_course import tokenization

    other = BertForMaskedLM(BertConfig(vocab_size=len(tokenization.bert_tokenizer()), hidden_size=32,
                                       num_hidden_layers=1, num_attention_heads=2, intermediate_size=64))
    other.save_pretrained(tmp_path / "other")
    assert cli.main(["pretrain", "--init-from", str(tmp_path / "other"), "--out", str(tmp_path / "run"),
                     "--steps", "1", "--seq-len", "32", "--no-progress"]) == 2
    assert "same tokenizer" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # refused before anything is written


def test_init_from_a_model_with_too_few_positions_is_refused(tmp_path, capsys):
    assert _pretrain(tmp_path / "short") == 0  # 32 positions
    capsys.readouterr()
    assert cli.main(["pretrain", "--init-from", str(tmp_path / "short"), "--out", str(tmp_path / "run"),
                     "--steps", "1", "--seq-len", "64", "--no-progress"]) == 2
    assert "--seq-len 32" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # refused before anything is written


def test_stack_to_grows_the_saved_model_before_training(tmp_path, capsys):
    """--init-from with --stack-to continues a 2-layer model as a 4-layer one and says so in results.json."""
    first, second = tmp_path / "first", tmp_path / "second"
    assert _pretrain(first) == 0
    assert cli.main(["pretrain", "--init-from", str(first), "--stack-to", "4", "--out", str(second), "--steps", "1",
                     "--batch-size", "4", "--seq-len", "32", "--max-chars", "20000", "--short-seq-prob", "0.1",
                     "--no-progress"]) == 0
    results = json.loads((second / "results.json").read_text())
    assert results["config"] == "tiny stacked to 4 layers" and results["settings"]["stack_to"] == 4
    assert results["settings"]["short_seq_prob"] == 0.1
    assert BertForMaskedLM.from_pretrained(second).config.num_hidden_layers == 4
    capsys.readouterr()
    with pytest.raises(SystemExit):
        cli.main(["pretrain", "--stack-to", "4", "--out", str(tmp_path / "third"), "--steps", "1", "--no-progress"])
    assert "--stack-to grows a trained model" in capsys.readouterr().err
    assert not (tmp_path / "third").exists()  # refused before anything is written


EACH_PROCESS_REPORTS = """
import json, os, sys
from pathlib import Path

from mlm_course.lab import cli, pretrain_run

pretrain = pretrain_run.pretrain


def pretrain_and_report(*args, **kwargs):
    result = pretrain(*args, **kwargs)
    rows = [{k: v for k, v in row.items() if k != "seconds"} for row in result.history if row["split"] == "eval"]
    Path(sys.argv[1], f"heldout-{os.environ['RANK']}.json").write_text(json.dumps(rows))
    return result


pretrain_run.pretrain = pretrain_and_report
sys.exit(cli.main(sys.argv[2:]))
"""


@pytest.mark.slow
def test_two_processes_train_what_one_process_with_accumulation_trains(tmp_path):
    """`pretrain` under a 2-process launcher (gloo on CPU): process p trains micro-batch slot p of each step with
    its own masks, DDP averages the gradients weighted by target tokens, so 2 processes × 1 micro-batch reach the
    weights of 1 process × 2 accumulated micro-batches (without dropout: its draws follow each process's order);
    every process scores all the held-out batches itself, so both report the held-out figures of one process."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from safetensors.torch import load_file

    common = ["pretrain", "--size", "tiny", "--steps", "3", "--batch-size", "4", "--seq-len", "32",
              "--max-chars", "20000", "--eval-every", "100", "--device", "cpu", "--precision", "fp32", "--no-progress",
              "--dropout", "0"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    (tmp_path / "each_process_reports.py").write_text(EACH_PROCESS_REPORTS)
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(tmp_path / "each_process_reports.py"), str(tmp_path), *common,
                           "--out", str(tmp_path / "two")],
                          cwd=Path(__file__).resolve().parents[1], env=env, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert cli.main([*common, "--out", str(tmp_path / "one"), "--grad-accum", "2"]) == 0
    two, one = (json.loads((tmp_path / run / "results.json").read_text()) for run in ("two", "one"))
    assert two["processes"] == 2 and one["processes"] == 1
    assert two["tokens_seen"] == one["tokens_seen"] == 3 * 2 * 4 * 32
    assert two["heldout"]["tokens"] == one["heldout"]["tokens"]
    assert two["heldout"]["loss"] == pytest.approx(one["heldout"]["loss"], abs=1e-4)
    first, second = (json.loads((tmp_path / f"heldout-{rank}.json").read_text()) for rank in (0, 1))
    assert first == second and len(first) == 1  # both processes: the same held-out figures, all the tokens
    assert first[0]["tokens"] == one["heldout"]["tokens"]
    for metric in ("loss", "top1", "top5"):
        assert first[0][metric] == pytest.approx(one["heldout"][metric], abs=1e-4), metric
    weights_two, weights_one = (load_file(tmp_path / run / "model.safetensors") for run in ("two", "one"))
    for name, value in weights_one.items():
        torch.testing.assert_close(weights_two[name], value, atol=2e-5, rtol=1e-4)
    assert not (tmp_path / "two" / ".checkpoint-3").exists() and (tmp_path / "two" / "checkpoint-3").exists()


def test_reviews_corpus_trains_on_review_sentences_not_the_course_corpus(tmp_path, monkeypatch):
    """--corpus reviews: training text from the sentiment train split; held-out evaluation stays on the course's."""
    from mlm_course import corpus

    asked, original = [], corpus.pretraining_text
    monkeypatch.setattr(corpus, "pretraining_text", lambda split="train", **kw: asked.append(split) or original(
        split, **kw))
    reviews = []
    monkeypatch.setattr(corpus, "review_training_text", lambda **kw: reviews.append(kw) or "a fine film .\n\n" * 40)
    assert _pretrain(tmp_path, "--corpus", "reviews") == 0
    assert asked == ["heldout"] and reviews == [{"max_chars": 20000}]
    assert json.loads((tmp_path / "results.json").read_text())["settings"]["corpus"] == "reviews"
