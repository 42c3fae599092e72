"""benchmarks/bench_time_to_loss.py (and its time_to_loss_runs, time_to_loss_report): the clock, the scoring of transformers' model, the batches without packing,
the targets and ratios of the report, and a quick run end to end that a second invocation does not redo."""

import json
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_time_to_loss as bench  # noqa: E402
import time_to_loss_report as report  # noqa: E402
import time_to_loss_runs as runs  # noqa: E402


def burn(seconds: float) -> None:
    """Spend ``seconds`` of this process's CPU time."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def points(*pairs: tuple[float, float]) -> list[dict]:
    return [{"cpu_seconds": t, "step": round(t), "loss": loss} for t, loss in pairs]


# ---- the clock --------------------------------------------------------------------------------------------------


def test_the_clock_leaves_evaluation_out_and_evaluates_at_the_marks():
    sizes = runs.Sizes(budget_seconds=0.5, early_every=0.1, early_until=0.2, every=0.15)
    recorder = runs.Recorder(lambda model: burn(0.05) or {"loss": 1.0, "top1": 0.0, "top5": 0.0}, sizes,
                              tokens_per_step=10, targets=None)
    recorder.evaluate(None, 0, 0.0)
    recorder.start()
    step = 0
    while not recorder.after_step(None, step + 1):
        step += 1
        burn(0.01)
    seconds = [p["cpu_seconds"] for p in recorder.curve]
    assert recorder.stopped == "budget" and len(seconds) == 5
    # every 0.1 s up to 0.2 s, then every 0.15 s, the last at the budget: training time only (each evaluation
    # spends 0.05 s, which would push the later marks out by 0.05 s each if it were counted)
    for at, mark in zip(seconds, (0.0, 0.1, 0.2, 0.35, 0.5), strict=True):
        assert mark <= at < mark + 0.03
    assert recorder.eval_cpu == pytest.approx(0.05 * 4, rel=0.2)


def test_a_run_with_targets_stops_once_it_has_reached_the_lowest():
    losses = iter([9.0, 8.0, 7.0, 6.0, 5.0])
    recorder = runs.Recorder(lambda model: {"loss": next(losses), "top1": 0.0, "top5": 0.0},
                              runs.Sizes(budget_seconds=60, early_every=1e-6, early_until=0.0, every=1e-6),
                              tokens_per_step=1, targets=[7.5, 6.5])
    recorder.evaluate(None, 0, 0.0)
    recorder.start()
    stops = [recorder.after_step(None, step) for step in (1, 2, 3)]
    assert stops == [False, False, True] and recorder.stopped == "every target reached"


def test_evaluation_intervals_must_be_positive():
    with pytest.raises(ValueError, match="every"):
        runs.Sizes(every=0.0)


# ---- scoring transformers' model like ours ------------------------------------------------------------------------


def test_the_adapter_scores_bert_for_masked_lm_as_its_own_loss_does():
    from mlm_course import tokenization
    from mlm_course.pretraining import evaluate_masked_lm, frozen_eval_batches

    tok = tokenization.course_tokenizer()
    model = runs.transformers_model(tok).eval()
    blocks = torch.randint(5, len(tok), (6, 32), generator=torch.Generator().manual_seed(0))
    batches = frozen_eval_batches(blocks, tok, batch_size=6)
    with torch.no_grad():
        expected = model(input_ids=batches[0]["input_ids"], labels=batches[0]["labels"]).loss
        positions = batches[0]["masked_positions"]
        full = model(input_ids=batches[0]["input_ids"]).logits.flatten(0, 1)[positions]
        assert torch.allclose(runs.MaskedLMAdapter(model)(batches[0]["input_ids"], positions=positions), full,
                              atol=1e-5)
    assert evaluate_masked_lm(runs.MaskedLMAdapter(model), batches)["loss"] == pytest.approx(float(expected),
                                                                                                abs=1e-5)


# ---- no packing ---------------------------------------------------------------------------------------------------


def test_paragraph_rows_keep_every_token_and_padding_is_never_masked():
    from mlm_course import corpus, tokenization
    from mlm_course.masking import MaskSpec

    tok = tokenization.course_tokenizer()
    text = corpus.pretraining_text("train", max_chars=20_000)
    rows = runs.paragraph_rows(tok, 20_000)
    tokens = sum(len(ids) for ids in tok(text.split("\n\n"), add_special_tokens=False)["input_ids"])
    real = rows != tok.pad_token_id
    assert rows.shape[1] == runs.SEQ_LEN and (rows[:, 0] == tok.cls_token_id).all()
    assert int(real.sum()) == tokens + 2 * len(rows)  # every token, and one [CLS] … [SEP] per row
    assert (real[:, :-1] >= real[:, 1:]).all()  # padding only at the end
    batch = runs.mask_padded(rows, tok, MaskSpec(mask_rate=0.5), torch.Generator().manual_seed(0))
    assert ((batch["labels"] != -100) & ~real).sum() == 0 and (batch["attention_mask"].bool() == real).all()


# ---- the report ---------------------------------------------------------------------------------------------------


def test_targets_are_half_nats_above_the_best_of_c_and_b_adds_its_best():
    tuned = {"curve": points((0, 9.0), (10, 8.3), (600, 6.4), (1800, 6.08))}
    defaults = {"curve": points((0, 9.0), (10, 8.9), (1800, 7.31))}
    levels = [(t["loss"], t["source"][:3]) for t in report.targets_from(tuned, defaults)]
    assert levels == [(7.5, "(c)"), (7.35, "(b)"), (7.0, "(c)"), (6.5, "(c)"), (6.1, "(c)")]


def test_time_to_a_target_interpolates_between_the_evaluations_around_it():
    curve = points((0, 9.0), (30, 8.0), (60, 6.0))
    assert report.time_to(curve, 7.0) == {"first_evaluation": 60, "interpolated": 45.0, "step": 60}
    assert report.time_to(curve, 5.0) is None


def test_a_ratio_is_a_lower_bound_when_the_slower_run_never_gets_there():
    records = {"slow": {"name": "slow", "train_cpu_seconds": 1800.0}, "fast": {"name": "fast"}}
    times = {"slow": {"6.0": None, "7.0": {"interpolated": 900.0}},
             "fast": {"6.0": {"interpolated": 300.0}, "7.0": {"interpolated": 100.0}}}
    assert report.ratio(records["slow"], records["fast"], 7.0, times) == {"ratio": 9.0}
    bound = report.ratio(records["slow"], records["fast"], 6.0, times)
    assert bound["ratio"] is None and bound["at_least"] == 6.0


def test_stopping_targets_wait_for_b_and_c_and_a_diverged_c_hands_over_to_lr_1e_3(tmp_path):
    def write(name, pairs):
        (tmp_path / f"{name}.json").write_text(json.dumps({"name": name, "curve": points(*pairs)}))

    write("transformers_tuned", [(0, 9.0), (10, 8.2), (900, 6.3), (1800, 7.9)])  # 1.6 nats back up: diverged
    assert report.stopping_targets(tmp_path) is None
    write("transformers_defaults", [(0, 9.0), (10, 8.95), (1800, 8.6)])
    assert report.stopping_targets(tmp_path) is None  # (c) at 1e-3 not finished yet
    write("transformers_tuned_lr1e-3", [(0, 9.0), (10, 8.4), (1800, 6.62)])
    assert report.stopping_targets(tmp_path) == [8.6, 8.0, 7.5, 7.0, 6.65]


# ---- a quick run end to end ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_quick_run_reports_curves_from_the_untrained_model_and_is_not_redone(tmp_path, capsys):
    out = tmp_path / "report.json"
    arguments = ["--quick", "--work", str(tmp_path), "--out", str(out), "--runs", "course", "transformers_tuned"]
    bench.main(arguments)
    document = json.loads(out.read_text())
    for name in ("course", "transformers_tuned"):
        run = document["runs"][name]
        assert run["curve"][0]["cpu_seconds"] == 0.0 and run["curve"][0]["loss"] == pytest.approx(9.0, abs=0.15)
        assert run["train_cpu_seconds"] >= runs.QUICK.budget_seconds and run["stopped"] == "budget"
        assert run["torch_threads"] == 1 and not (tmp_path / f"{name}.partial.json").exists()
    assert document["precision_choice"]["auto_picks"] in ("bf16", "fp32")
    assert document["runs"]["course"]["settings"]["precision"] == document["precision_choice"]["auto_picks"]
    assert document["unigram_baseline"]["tokens"] == document["heldout_masked_tokens"]
    finished = (tmp_path / "course.json").read_text()
    bench.main(arguments)
    assert "course: finished before, kept" in capsys.readouterr().out
    assert (tmp_path / "course.json").read_text() == finished
